//! README's first command, as a test: `drover up` with simulated nodes,
//! `drover apply -f deploy/examples/hello-daemonset.yaml`, every node gets
//! one Running pod, and Ctrl-C (SIGINT) makes the nodes leave and stops the
//! process cleanly.
//!
//! Three ways: with no Docker engine (the local node falls back to the
//! simulated runtime and says so); `--runtime docker` with no engine (a
//! clear error, nothing started); and on the real engine, where the local
//! node runs the example as a real container (the image built by
//! `deploy/examples/busybox-image.sh`, as README says), removed when
//! `drover up` stops. The Docker test fails when no engine answers,
//! unless the run opts out with `DROVER_TEST_SKIP=docker`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output};
use std::time::{Duration, Instant};

use drover_testkit::docker::docker_ps;
use drover_testkit::wait_until_blocking;

const BIN: &str = env!("CARGO_BIN_EXE_drover");
const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// A running `drover up`: killed when dropped, and, for a Docker node, every
/// container of that node removed, whatever happened.
struct Up {
    child: Child,
    log: PathBuf,
    docker_node: Option<String>,
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(node) = &self.docker_node {
            let ids = docker_ps(node, &[]);
            if !ids.is_empty() {
                let _ = Command::new("docker")
                    .args(["rm", "-f", "-v"])
                    .args(&ids)
                    .output();
            }
        }
    }
}

impl Up {
    /// `drover up ARGS` with HOME at `home` (so its data dir and client
    /// config land there), on loopback port 0 (gRPC and HTTP): it binds
    /// ports of its own and writes them into the client config
    /// ([`server_addr`]).
    fn start(home: &Path, args: &[&str], docker_node: Option<String>) -> Up {
        let log = home.join("up.log");
        let file = std::fs::File::create(&log).expect("log");
        let out = std::fs::File::create(home.join("up.out")).expect("out");
        let child = Command::new(BIN)
            .arg("up")
            .args(args)
            .args(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"])
            .env("HOME", home)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_DATA_HOME")
            .stdout(out)
            .stderr(file)
            .spawn()
            .expect("start drover up");
        Up {
            child,
            log,
            docker_node,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Ctrl-C (SIGINT), then the exit status (within 20 s).
    fn interrupt(&mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        let killed = Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .expect("kill");
        assert!(killed.success());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "drover up did not stop:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
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

/// The server address in the client config `drover up` wrote at the
/// default path under `home`, once written.
fn server_addr(home: &Path) -> Option<String> {
    drover_cli::ClientConfig::load(&home.join(".config/drover/client.yaml"))
        .ok()?
        .servers
        .first()
        .cloned()
}

/// How often the waits poll.
const POLL: Duration = Duration::from_millis(50);

fn ready_nodes(home: &Path) -> usize {
    let o = drover(home, &["get", "nodes"]);
    let text = String::from_utf8_lossy(&o.stdout);
    if !o.status.success() {
        return 0;
    }
    text.lines().filter(|l| l.contains(" Ready ")).count()
}

fn pods(home: &Path) -> Vec<serde_json::Value> {
    let o = drover(home, &["get", "pods", "-o", "json"]);
    serde_json::from_slice::<serde_json::Value>(&o.stdout)
        .ok()
        .and_then(|v| v["items"].as_array().cloned())
        .unwrap_or_default()
}

fn apply_hello(home: &Path) {
    let manifest = Path::new(REPO).join("deploy/examples/hello-daemonset.yaml");
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
}

#[test]
fn up_runs_a_daemon_set_on_every_node_and_stops_cleanly() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path();
    // An engine that is not there: the local node falls back to simulated
    // containers (and no real engine is touched, whatever this machine has).
    let no_engine = format!("unix://{}", home.join("no-docker.sock").display());
    let mut up = Up::start(
        home,
        &["--sim-nodes", "3", "--docker-host", &no_engine],
        None,
    );

    // The client config lands at the default path; 4 nodes turn Ready.
    wait_until_blocking("4 Ready nodes", Duration::from_secs(30), POLL, || {
        ready_nodes(home) == 4
    });
    let log = up.log();
    assert!(
        log.contains("no-docker.sock") && log.contains("SIMULATED runtime"),
        "the fallback is said: {log}"
    );
    apply_hello(home);

    wait_until_blocking(
        "4 Running pods, one per node",
        Duration::from_secs(30),
        POLL,
        || {
            let items = pods(home);
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

    // kubectl, through the kubeconfig `drover up` names.
    let log = up.log();
    let kubeconfig = log
        .lines()
        .find_map(|l| l.trim().strip_prefix("export KUBECONFIG="))
        .unwrap_or_else(|| panic!("drover up prints `export KUBECONFIG=…`: {log}"))
        .to_string();
    let out = Command::new("kubectl")
        .args(["get", "pods", "-A", "-o", "name"])
        .env("KUBECONFIG", &kubeconfig)
        .env("HOME", home)
        .output()
        .expect("this test needs kubectl v1.32 on PATH (/usr/bin/kubectl)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 4);
    assert!(
        !home.join(".kube/config").exists(),
        "~/.kube/config is never written"
    );

    // Port 0: the port it got is in the client config and in what it said.
    let addr = server_addr(home).expect("the client config names the server");
    assert!(
        addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"),
        "{addr}"
    );
    assert!(
        log.contains(&format!(" on {addr} (HTTP 127.0.0.1:")),
        "{log}"
    );

    // Ctrl-C: the nodes leave, the process exits 0.
    let status = up.interrupt();
    assert!(
        status.success(),
        "drover up exited with {status}:\n{}",
        up.log()
    );
    assert!(up.log().contains("nodes leave"), "{}", up.log());

    // The same command again: the server resumes from its data dir on the
    // port it had (the client config is unchanged), the nodes join again
    // and the DaemonSet it kept runs on each of them.
    drop(up);
    let mut up = Up::start(
        home,
        &["--sim-nodes", "3", "--docker-host", &no_engine],
        None,
    );
    wait_until_blocking("4 Ready nodes again", Duration::from_secs(30), POLL, || {
        ready_nodes(home) == 4
    });
    assert_eq!(server_addr(home).as_deref(), Some(addr.as_str()));
    assert!(up.log().contains(&format!(" on {addr} ")), "{}", up.log());
    wait_until_blocking(
        "4 Running pods again",
        Duration::from_secs(30),
        POLL,
        || {
            pods(home)
                .iter()
                .filter(|p| p["status"]["phase"] == "Running")
                .count()
                == 4
        },
    );
    let status = up.interrupt();
    assert!(status.success(), "{status}:\n{}", up.log());
}

#[test]
fn up_with_f_applies_the_example_and_prints_the_pods_as_they_come_up() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path();
    let no_engine = format!("unix://{}", home.join("no-docker.sock").display());
    let manifest = Path::new(REPO).join("deploy/examples/hello-daemonset.yaml");
    let mut up = Up::start(
        home,
        &[
            "--sim-nodes",
            "2",
            "--docker-host",
            &no_engine,
            "-f",
            manifest.to_str().expect("utf-8 path"),
        ],
        None,
    );
    let out = || std::fs::read_to_string(home.join("up.out")).unwrap_or_default();
    // The apply's result, then tables of the pods; the last one shows a
    // Running pod on each of the 3 nodes.
    wait_until_blocking(
        "a table with 3 Running pods on stdout",
        Duration::from_secs(30),
        POLL,
        || {
            let text = out();
            let last = text.rsplit("NAMESPACE").next().unwrap_or_default();
            text.starts_with("daemonset.apps/hello created\n")
                && last.lines().filter(|l| l.contains(" Running ")).count() == 3
        },
    );
    let tables = out().matches("NAMESPACE").count();
    assert!(
        tables < 10,
        "a table only when something changed, not every second:\n{}",
        out()
    );
    let status = up.interrupt();
    assert!(status.success(), "{status}:\n{}", up.log());
}

#[test]
fn up_with_runtime_docker_and_no_engine_refuses_to_start() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path();
    let no_engine = format!("unix://{}", home.join("no-docker.sock").display());
    let o = drover(
        home,
        &[
            "up",
            "--runtime",
            "docker",
            "--docker-host",
            &no_engine,
            "--listen",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("--runtime docker")
            && err.contains("no-docker.sock")
            && err.contains("--docker-host")
            && err.contains("--runtime sim"),
        "{err}"
    );
    assert!(
        !home.join(".config/drover/client.yaml").exists(),
        "nothing was started"
    );
}

// ------------------------------------------------------------ Docker

/// Builds `local/busybox:1` with the repository's script (as README's first
/// command does); with no engine a failure, unless the run opted out with
/// `DROVER_TEST_SKIP=docker` (then `false`, with a notice).
fn engine_ready() -> bool {
    let script = Path::new(REPO).join("deploy/examples/busybox-image.sh");
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
    match out.status.code() {
        Some(0) => true,
        Some(2) if drover_testkit::skipping_docker() => {
            eprintln!("SKIPPED (DROVER_TEST_SKIP=docker): no Docker engine here ({why})");
            false
        }
        Some(2) => panic!(
            "no Docker engine answers ({why}): start one, or opt out with DROVER_TEST_SKIP=docker"
        ),
        _ => panic!("{} failed: {why}", script.display()),
    }
}

#[test]
fn up_on_docker_runs_the_example_in_a_real_container_and_removes_it() {
    if !engine_ready() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path();
    // A node name of its own, so that parallel tests never see its containers.
    let node = format!("up-docker-{}", std::process::id());
    let mut up = Up::start(
        home,
        &["--runtime", "docker", "--name", &node, "--sim-nodes", "1"],
        Some(node.clone()),
    );
    wait_until_blocking("2 Ready nodes", Duration::from_secs(30), POLL, || {
        ready_nodes(home) == 2
    });
    let log = up.log();
    assert!(
        log.contains(&format!("{node:?} runs pods as Docker containers")),
        "{log}"
    );
    apply_hello(home);

    // The local node's pod runs in a real container; the simulated one's too.
    let mut container_id = String::new();
    wait_until_blocking(
        "the hello pods Running and ready, a real container on the Docker node",
        Duration::from_secs(30),
        POLL,
        || {
            let items = pods(home);
            let running = |p: &serde_json::Value| {
                p["status"]["phase"] == "Running"
                    && p["status"]["containerStatuses"][0]["ready"] == true
            };
            let Some(mine) = items
                .iter()
                .find(|p| p["spec"]["nodeName"] == node.as_str())
            else {
                return false;
            };
            container_id = mine["status"]["containerStatuses"][0]["containerID"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            items.len() == 2 && items.iter().all(running)
        },
    );
    let id = container_id
        .strip_prefix("docker://")
        .unwrap_or_else(|| panic!("a Docker container id: {container_id:?}"));
    let inspect = Command::new("docker")
        .args([
            "inspect",
            "-f",
            "{{.State.Running}} {{.Config.Image}} {{index .Config.Labels \"io.drover.pod.name\"}}",
            id,
        ])
        .output()
        .expect("docker inspect");
    let inspect = String::from_utf8_lossy(&inspect.stdout);
    assert!(
        inspect.starts_with("true local/busybox:1 hello-"),
        "{inspect}"
    );

    // Ctrl-C: the node leaves and its containers (the sandbox too) go.
    let status = up.interrupt();
    assert!(
        status.success(),
        "drover up exited with {status}:\n{}",
        up.log()
    );
    let left = docker_ps(&node, &[]);
    assert!(left.is_empty(), "containers left behind: {left:?}");
}
