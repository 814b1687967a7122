//! An apply is all or nothing, even when the server is SIGKILLed in the
//! middle of it (issue 21): one real `drover server` process, `drover apply
//! -f` of 3,000 ConfigMaps (one file, about 3 MB) as a child process, the
//! server SIGKILLed at several points of the apply, then restarted from its
//! data dir. After each restart the store holds all 3,000 ConfigMaps of
//! that apply or none of them, and all of them whenever the apply said it
//! succeeded.
//!
//! The kill points are fractions of the time an apply of the same size
//! took on this machine (measured first, without a kill), so that they
//! fall while the request is sent, while the server decodes, validates and
//! proposes it, and while raft writes it. Every wait has a deadline; the
//! children are SIGKILLed when the test ends, panics included.

use drover_cli::{Client, ClientConfig};
use drover_testkit::process::{expect_busy_port_exit, spawn_logged, wait_member_addrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const OBJECTS: usize = 3_000;
const START: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(20);
/// When the server is killed, as a share of an undisturbed apply's time.
const KILL_AT: [f64; 6] = [0.05, 0.25, 0.5, 0.75, 0.95, 1.1];

struct Server {
    dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    starts: usize,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Server {
    fn start(dir: &Path) -> Server {
        let mut s = Server {
            dir: dir.to_path_buf(),
            log: dir.with_extension("log"),
            child: None,
            starts: 0,
        };
        let data = s.dir.to_string_lossy().to_string();
        let log = s.next_log();
        let mut child = spawn_logged(
            env!("CARGO_BIN_EXE_drover"),
            &[
                "server",
                "--data-dir",
                &data,
                "--listen",
                "127.0.0.1:0",
                "--http",
                "127.0.0.1:0",
            ],
            &log,
        );
        wait_member_addrs(&s.dir, &mut child, START);
        s.child = Some(child);
        s
    }

    fn next_log(&mut self) -> PathBuf {
        self.starts += 1;
        self.log.with_extension(format!("{}.log", self.starts))
    }

    fn kill(&mut self) {
        let mut c = self.child.take().expect("the server runs");
        c.kill().expect("SIGKILL");
        c.wait().expect("reap");
    }

    /// Starts it again from its data dir alone (it binds the ports it
    /// recorded) and returns a client once it answers a list. A start that
    /// exits because a recorded port is still in use is tried again; any
    /// other exit fails the test.
    async fn restart(&mut self) -> Client {
        let deadline = Instant::now() + START;
        let data = self.dir.to_string_lossy().to_string();
        loop {
            let log = self.next_log();
            self.child = Some(spawn_logged(
                env!("CARGO_BIN_EXE_drover"),
                &["server", "--data-dir", &data],
                &log,
            ));
            if let Some(c) = self.client(deadline).await {
                return c;
            }
            let out = std::fs::read_to_string(&log).unwrap_or_default();
            let st = self
                .child
                .take()
                .and_then(|mut c| c.try_wait().ok().flatten())
                .expect("client() returns None only when the server exited");
            expect_busy_port_exit("the server", st, &out, deadline);
        }
    }

    fn config(&self) -> PathBuf {
        self.dir.join("client.yaml")
    }

    /// A client, once the server answers a list; `None` when the server
    /// exited first (its status is left to the caller).
    async fn client(&mut self, deadline: Instant) -> Option<Client> {
        loop {
            if let Some(c) = &mut self.child {
                if c.try_wait().expect("try_wait").is_some() {
                    return None;
                }
            }
            if let Ok(cfg) = ClientConfig::load(&self.config()) {
                if let Ok(c) = Client::new(&cfg) {
                    if c.list_objects("ConfigMap", "default", "").await.is_ok() {
                        return Some(c);
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "the server did not answer within {START:?}"
            );
            tokio::time::sleep(POLL).await;
        }
    }
}

/// 3,000 ConfigMaps labelled `round=ROUND`, about 1 KB each.
fn manifests(round: usize) -> String {
    let value = "x".repeat(1000);
    let mut text = String::with_capacity(OBJECTS * 1100);
    for i in 0..OBJECTS {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: r{round}-cm-{i:04}\n  labels: {{round: \"{round}\"}}\ndata:\n  v: {value}\n"
        ));
    }
    text
}

/// `drover apply -f FILE` against the server of `config`, as a child.
fn apply(config: &Path, file: &Path, out: &Path) -> Child {
    let log = std::fs::File::create(out).expect("apply log");
    Command::new(env!("CARGO_BIN_EXE_drover"))
        .arg("--config")
        .arg(config)
        .arg("apply")
        .arg("-f")
        .arg(file)
        .env_remove("DROVER_SERVER")
        .env_remove("DROVER_TOKEN")
        .env_remove("DROVER_TOKEN_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone().expect("clone")))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("spawn drover apply")
}

/// How many ConfigMaps of `round` the store holds.
async fn count(c: &Client, round: usize) -> usize {
    c.list_objects("ConfigMap", "default", &format!("round={round}"))
        .await
        .expect("list")
        .items
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_of_3000_objects_is_all_or_nothing_under_sigkill_of_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = Server::start(&tmp.path().join("server"));
    let c = s
        .client(Instant::now() + START)
        .await
        .expect("the server exited on its own");

    // An undisturbed apply: how long one takes here.
    let file = tmp.path().join("r0.yaml");
    std::fs::write(&file, manifests(0)).unwrap();
    let t = Instant::now();
    let mut a = apply(&s.config(), &file, &tmp.path().join("r0.out"));
    let st = tokio::task::spawn_blocking(move || a.wait())
        .await
        .unwrap()
        .unwrap();
    let took = t.elapsed();
    let out = std::fs::read_to_string(tmp.path().join("r0.out")).unwrap_or_default();
    assert!(st.success(), "the undisturbed apply failed: {out}");
    assert_eq!(count(&c, 0).await, OBJECTS);
    eprintln!("an apply of {OBJECTS} ConfigMaps took {took:?}");
    drop(c);

    let mut seen = Vec::new();
    for (i, share) in KILL_AT.iter().enumerate() {
        let round = i + 1;
        let file = tmp.path().join(format!("r{round}.yaml"));
        std::fs::write(&file, manifests(round)).unwrap();
        let out = tmp.path().join(format!("r{round}.out"));
        let mut a = apply(&s.config(), &file, &out);
        tokio::time::sleep(took.mul_f64(*share)).await;
        s.kill();
        let st = tokio::task::spawn_blocking(move || {
            // The apply ends on its own once its server is gone (its
            // client gives up); it is killed if it outlives the deadline.
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if let Some(st) = a.try_wait().expect("try_wait") {
                    return Some(st);
                }
                if Instant::now() > deadline {
                    let _ = a.kill();
                    let _ = a.wait();
                    return None;
                }
                std::thread::sleep(POLL);
            }
        })
        .await
        .unwrap();
        let ok = st.is_some_and(|st| st.success());
        let c = s.restart().await;
        let n = count(&c, round).await;
        let said = std::fs::read_to_string(&out).unwrap_or_default();
        eprintln!(
            "killed at {:.0}% ({:?}): the apply {} and {n} of {OBJECTS} are stored",
            share * 100.0,
            took.mul_f64(*share),
            if ok { "succeeded" } else { "failed" }
        );
        assert!(
            n == 0 || n == OBJECTS,
            "killed at {:.0}%: {n} of {OBJECTS} ConfigMaps of the apply are stored; it said: {said}",
            share * 100.0
        );
        if ok {
            assert_eq!(n, OBJECTS, "the apply said it succeeded: {said}");
        }
        // What an earlier round stored is still there, whole.
        assert_eq!(count(&c, 0).await, OBJECTS);
        seen.push(n);
    }
    eprintln!("stored per kill: {seen:?}");
}
