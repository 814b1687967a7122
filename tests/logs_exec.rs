//! `drover logs` and `drover exec` with the real binary: a server, an agent
//! with the simulated runtime (its log is synthetic: a line at start, one a
//! second), and the commands as a user types them. exec exits with the
//! command's code; `logs -f` ends cleanly on SIGINT (Ctrl-C).
//!
//! Every child is SIGKILLed and reaped when the test ends, panics included;
//! every wait polls with a deadline.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use drover_testkit::{spawn_logged, wait_member_addrs, wait_until_blocking, Procs};

const BIN: &str = env!("CARGO_BIN_EXE_drover");

fn spawn(args: &[&str], log: &Path) -> Child {
    spawn_logged(BIN, args, log)
}

/// How often the waits poll.
const POLL: Duration = Duration::from_millis(50);

struct Cli {
    config: PathBuf,
}

impl Cli {
    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .env_remove("DROVER_SERVER")
            .stdin(Stdio::null())
            .output()
            .expect("run drover")
    }

    /// `drover ARGS` with `input` on its stdin (written by a thread while
    /// the output is read, then closed).
    fn run_stdin(&self, args: &[&str], input: &[u8]) -> Output {
        use std::io::Write;
        let mut child = Command::new(BIN)
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .env_remove("DROVER_SERVER")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run drover");
        let mut stdin = child.stdin.take().expect("stdin");
        let input = input.to_vec();
        let feed = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let out = child.wait_with_output().expect("drover runs");
        let _ = feed.join();
        out
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn logs_and_exec_with_the_real_binary() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let data = dir.join("server");
    let mut procs = Procs(Vec::new());
    procs.0.push(spawn(
        &[
            "server",
            "--data-dir",
            data.to_str().expect("utf-8"),
            "--listen",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
        ],
        &dir.join("server.log"),
    ));
    // It bound port 0: the address it got is in its data dir.
    let grpc = wait_member_addrs(&data, &mut procs.0[0], Duration::from_secs(20)).grpc;
    let show = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    wait_until_blocking(
        "the server's client files",
        Duration::from_secs(20),
        POLL,
        || data.join("client.yaml").exists() && data.join("node-token").exists(),
    );
    // The token from a file, as on a real node (never on the command line).
    let token_file = data.join("node-token").display().to_string();
    procs.0.push(spawn(
        &[
            "agent",
            "--server",
            &grpc,
            "--token-file",
            &token_file,
            "--name",
            "n1",
            "--runtime",
            "sim",
        ],
        &dir.join("agent.log"),
    ));
    let cli = Cli {
        config: data.join("client.yaml"),
    };
    let pod = dir.join("web.yaml");
    std::fs::write(
        &pod,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  nodeName: n1\n  containers: [{name: c, image: busybox}]\n",
    )
    .expect("write the manifest");
    wait_until_blocking("node n1", Duration::from_secs(20), POLL, || {
        text(&cli.run(&["get", "nodes"]).stdout).contains("n1")
    });
    let o = cli.run(&["apply", "-f", pod.to_str().expect("utf-8")]);
    assert!(o.status.success(), "apply: {}", text(&o.stderr));

    wait_until_blocking("web's log", Duration::from_secs(20), POLL, || {
        let o = cli.run(&["logs", "web"]);
        o.status.success() && text(&o.stdout).starts_with("sim: c started (attempt 0)\n")
    });

    let o = cli.run(&["exec", "web", "--", "echo", "hello", "world"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "hello world\n");
    let o = cli.run(&["exec", "web", "-c", "c", "--", "sh", "-c", "exit 3"]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "exec exits with the command's code"
    );
    // -i: stdin streams to the command; its end is the command's.
    let input: Vec<u8> = (0..200_000).map(|i| b'a' + (i % 26) as u8).collect();
    let o = cli.run_stdin(&["exec", "-i", "web", "--", "cat"], &input);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        o.stdout == input,
        "cat echoes stdin ({} bytes back)",
        o.stdout.len()
    );
    // -it with a stdin that is no terminal: kubectl's warning, and the
    // command runs without one (the terminal case: tests/cli_verbs.rs).
    let o = cli.run(&["exec", "-it", "web", "--", "tty"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stderr),
        "Unable to use a TTY - input is not a terminal or the right kind of file\n"
    );
    assert_eq!(text(&o.stdout), "not a tty\n");
    let o = cli.run(&["logs", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr).trim(),
        "Error from server (NotFound): pods \"nope\" not found"
    );

    // logs -f prints lines as they come and ends cleanly on Ctrl-C.
    let follow_log = dir.join("follow.out");
    let mut follow = Command::new(BIN)
        .arg("--config")
        .arg(&cli.config)
        .args(["logs", "-f", "--tail", "1", "web"])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&follow_log).expect("out"))
        .stderr(Stdio::piped())
        .spawn()
        .expect("logs -f");
    let lines = || show("follow.out").lines().count();
    let r = std::panic::catch_unwind(|| {
        wait_until_blocking("two followed lines", Duration::from_secs(15), POLL, || {
            lines() >= 2
        })
    });
    if r.is_err() {
        let _ = follow.kill();
        let _ = follow.wait();
        panic!(
            "logs -f printed {:?}\nagent:\n{}",
            show("follow.out"),
            show("agent.log")
        );
    }
    let sent = Command::new("kill")
        .args(["-INT", &follow.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(sent.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = follow.try_wait().expect("try_wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = follow.kill();
            let _ = follow.wait();
            panic!("logs -f did not stop on SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "logs -f exited with {status}");
}
