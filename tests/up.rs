//! README's first command, as a test: `drover up` with simulated nodes,
//! `drover apply -f deploy/examples/hello-daemonset.yaml`, every node gets
//! one Running pod, and Ctrl-C (SIGINT) makes the nodes leave and stops the
//! process cleanly.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_drover");

struct Guard(Child);
impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn drover(home: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("DROVER_CONFIG")
        .output()
        .expect("run drover")
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn up_runs_a_daemon_set_on_every_node_and_stops_cleanly() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path();
    let log = std::fs::File::create(home.join("up.log")).expect("log");
    let child = Command::new(BIN)
        .args([
            "up",
            "--sim-nodes",
            "3",
            "--listen",
            &format!("127.0.0.1:{}", free_port()),
            "--http",
            &format!("127.0.0.1:{}", free_port()),
        ])
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start drover up");
    let mut up = Guard(child);
    let show_log = || std::fs::read_to_string(home.join("up.log")).unwrap_or_default();

    // The client config lands at the default path; 4 nodes turn Ready.
    wait_for("4 Ready nodes", Duration::from_secs(30), || {
        let o = drover(home, &["get", "nodes"]);
        let text = String::from_utf8_lossy(&o.stdout);
        o.status.success() && text.lines().filter(|l| l.contains(" Ready ")).count() == 4
    });
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/examples/hello-daemonset.yaml");
    let o = drover(
        home,
        &["apply", "-f", manifest.to_str().expect("utf-8 path")],
    );
    assert!(
        o.status.success(),
        "apply failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "daemonset.apps/hello created"
    );

    wait_for(
        "4 Running pods, one per node",
        Duration::from_secs(30),
        || {
            let o = drover(home, &["get", "pods", "-o", "json"]);
            let Ok(v) = serde_json::from_slice::<serde_json::Value>(&o.stdout) else {
                return false;
            };
            let items = v["items"].as_array().cloned().unwrap_or_default();
            let mut nodes: Vec<String> = items
                .iter()
                .filter(|p| p["status"]["phase"] == "Running")
                .filter_map(|p| p["spec"]["nodeName"].as_str().map(str::to_string))
                .collect();
            nodes.sort();
            nodes.dedup();
            items.len() == 4 && nodes.len() == 4
        },
    );

    // Ctrl-C: the nodes leave, the process exits 0.
    let pid = up.0.id().to_string();
    let killed = Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = up.0.try_wait().expect("wait") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "drover up did not stop:\n{}",
            show_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success(),
        "drover up exited with {status}:\n{}",
        show_log()
    );
    assert!(show_log().contains("nodes leave"), "{}", show_log());
}
