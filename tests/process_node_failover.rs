//! Nodes that lose the one server they were given (issue 21, findings 1
//! and 2), with the real binary as processes.
//!
//! Each case starts three `drover server` processes on ephemeral loopback
//! ports (member 0 bootstraps, 1 and 2 join and so start from a snapshot of
//! the leader) and `drover sim` with [`NODES`] nodes told only one member's
//! address: for member 0, before the others are even started (the nodes
//! learn of them only as the cluster forms), for a joiner as soon as it
//! serves. Once every node is Ready and all three members vote, the test
//! waits 0.5 s or 5 s and SIGKILLs that member
//! (member 0 is the leader: then a member that joined by snapshot leads
//! next). Then, through a survivor:
//!
//! - a DaemonSet applied after the kill has a pod Running and Ready on
//!   every node within [`CONVERGE`] of the kill;
//! - no node is ever seen NotReady, up to the node timeout plus
//!   [`AFTER_TIMEOUT`] after the kill (a node that lost its session for good
//!   would be NotReady by then).
//!
//! The time from the kill to every pod Ready is printed. Every wait has a
//! deadline; the processes are SIGKILLed when the test ends, panics
//! included, and their logs are printed on failure.

use drover_testkit::process::{spawn_logged, wait_member_addrs, Procs};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Simulated nodes, all in one `drover sim` process.
const NODES: usize = 3;
/// DaemonSets applied before the kill (each a pod per node).
const DAEMON_SETS: usize = 3;
/// A DaemonSet applied through a survivor must be Ready everywhere this
/// soon after the kill.
const CONVERGE: Duration = Duration::from_secs(10);
/// Nodes are watched for NotReady until the node timeout (5 s) plus this
/// after the kill.
const AFTER_TIMEOUT: Duration = Duration::from_secs(3);
const NODE_TIMEOUT: Duration = Duration::from_secs(5);
/// Starting members and joining nodes.
const START: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(100);

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_drover")
}

struct Cluster {
    dir: tempfile::TempDir,
    procs: Procs,
    /// gRPC addresses by member.
    addrs: Vec<String>,
    logs: Vec<PathBuf>,
}

impl Cluster {
    fn data(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("m{i}"))
    }

    /// The first member, bootstrapped.
    fn start() -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut c = Cluster {
            dir,
            procs: Procs(Vec::new()),
            addrs: Vec::new(),
            logs: Vec::new(),
        };
        c.spawn_member(0, &[]);
        c
    }

    /// Members 1 and 2 join member 0; returns as soon as they listen (not
    /// waiting for them to be voters).
    fn join_others(&mut self) {
        // The joiners need the server token, which the first member writes.
        let token = self.data(0).join("server-token");
        drover_testkit::wait_until_blocking("the server token", START, POLL, || token.exists());
        let first = self.addrs[0].clone();
        for i in 1..3 {
            self.spawn_member(i, &["--join", &first, "--token-file", path(&token)]);
        }
    }

    fn spawn_member(&mut self, i: usize, extra: &[&str]) {
        let d = self.data(i);
        let log = self.dir.path().join(format!("m{i}.log"));
        let mut args = vec![
            "server",
            "--data-dir",
            path(&d),
            "--listen",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            // Compact often: the joiners start from a snapshot.
            "--snapshot-every",
            "20",
            "--keep-entries",
            "5",
        ];
        args.extend_from_slice(extra);
        let mut child = spawn_logged(bin(), &args, &log);
        let m = wait_member_addrs(&d, &mut child, START);
        self.procs.0.push(child);
        self.addrs.push(m.grpc);
        self.logs.push(log);
    }

    /// Whether all three members are voters (a leader and two followers).
    fn formed(&self) -> bool {
        self.cli(&[0, 1, 2], &["cluster", "status"])
            .is_some_and(|out| {
                out.lines()
                    .filter(|l| {
                        let cols: Vec<&str> = l.split_whitespace().collect();
                        cols.get(3)
                            .is_some_and(|r| *r == "leader" || *r == "follower")
                    })
                    .count()
                    == 3
            })
    }

    /// Runs the client against the members in `through`.
    fn cli(&self, through: &[usize], args: &[&str]) -> Option<String> {
        let servers: Vec<&str> = through.iter().map(|i| self.addrs[*i].as_str()).collect();
        let out = Command::new(bin())
            .args(["--config", path(&self.data(0).join("client.yaml"))])
            .args(["--server", &servers.join(",")])
            .args(args)
            .env_remove("DROVER_CONFIG")
            .env_remove("DROVER_SERVER")
            .output()
            .expect("run the client");
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn items(&self, through: &[usize], kind: &str) -> Option<Vec<Value>> {
        let out = self.cli(through, &["get", kind, "-A", "-o", "json"])?;
        let v: Value = serde_json::from_str(&out).ok()?;
        Some(v["items"].as_array().cloned().unwrap_or_default())
    }

    /// Names of the Ready nodes, and of those not Ready.
    fn nodes(&self, through: &[usize]) -> Option<(Vec<String>, Vec<String>)> {
        let (mut ready, mut not) = (Vec::new(), Vec::new());
        for n in self.items(through, "nodes")? {
            let name = n["metadata"]["name"].as_str().unwrap_or("").to_string();
            let is_ready = n["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            if is_ready {
                ready.push(name);
            } else {
                not.push(name);
            }
        }
        Some((ready, not))
    }

    /// Pods of DaemonSet `ds` that are Running and Ready.
    fn ready_pods(&self, through: &[usize], ds: &str) -> Option<usize> {
        let pods = self.items(through, "pods")?;
        Some(
            pods.iter()
                .filter(|p| {
                    p["metadata"]["labels"]["app"] == ds
                        && p["status"]["phase"] == "Running"
                        && p["status"]["conditions"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
                .count(),
        )
    }

    fn apply(&self, through: &[usize], names: &[String]) {
        let file = self.dir.path().join(format!("{}.yaml", names.join("-")));
        let docs: Vec<String> = names.iter().map(|n| daemon_set(n)).collect();
        std::fs::write(&file, docs.join("---\n")).expect("write manifest");
        let deadline = Instant::now() + START;
        while self.cli(through, &["apply", "-f", path(&file)]).is_none() {
            assert!(Instant::now() < deadline, "apply of {names:?} failed");
            std::thread::sleep(POLL);
        }
    }

    fn dump(&self) {
        for l in self.logs.iter().chain([&self.dir.path().join("sim.log")]) {
            let text = std::fs::read_to_string(l).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!("===== {} (last lines)", l.display());
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn daemon_set(name: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: {name}}}\nspec:\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec: {{containers: [{{name: c, image: local/busybox:1}}]}}\n"
    )
}

/// Shows the logs when a case fails.
struct DumpOnPanic<'a>(&'a Cluster);
impl Drop for DumpOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.dump();
        }
    }
}

fn case(given: usize, pause: Duration) {
    let mut c = Cluster::start();
    // Nodes told member 0 join before the others exist (they learn of them
    // only as the cluster forms); nodes told a joiner join once it serves.
    if given > 0 {
        c.join_others();
    }
    let token = c.data(0).join("node-token");
    drover_testkit::wait_until_blocking("the node token", START, POLL, || token.exists());
    let nodes = NODES.to_string();
    let sim: Child = spawn_logged(
        bin(),
        &[
            "sim",
            "--server",
            &c.addrs[given],
            "--token-file",
            path(&token),
            "--ca",
            path(&c.data(0).join("ca.crt")),
            "--nodes",
            &nodes,
        ],
        &c.dir.path().join("sim.log"),
    );
    c.procs.0.push(sim);
    if given == 0 {
        c.join_others();
    }
    let _dump = DumpOnPanic(&c);
    let survivors: Vec<usize> = (0..3).filter(|i| *i != given).collect();
    let all = [0, 1, 2];
    let before: Vec<String> = (0..DAEMON_SETS).map(|i| format!("before{i}")).collect();
    c.apply(&all, &before);
    drover_testkit::wait_until_blocking("every node Ready, three voters", START, POLL, || {
        c.nodes(&all).is_some_and(|(r, _)| r.len() == NODES) && c.formed()
    });
    // The scenario's own timing (not a wait for a condition): the kill
    // comes this long after the nodes joined and the cluster formed.
    std::thread::sleep(pause);
    // SIGKILL the one member the nodes were given.
    // (by pid: the children are reaped when the test ends)
    let pid = c.procs.0[given].id().to_string();
    let killed_ok = Command::new("kill").args(["-KILL", &pid]).status();
    assert!(killed_ok.is_ok_and(|s| s.success()), "kill -KILL {pid}");
    let killed = Instant::now();
    let after = "after".to_string();
    c.apply(&survivors, std::slice::from_ref(&after));
    let mut converged = None;
    let watch_until = killed + NODE_TIMEOUT + AFTER_TIMEOUT;
    while Instant::now() < watch_until || converged.is_none() {
        if let Some((_, not_ready)) = c.nodes(&survivors) {
            assert!(
                not_ready.is_empty(),
                "member {given} killed {pause:?} after the nodes joined: nodes {not_ready:?} are NotReady {:?} after the kill",
                killed.elapsed()
            );
        }
        if converged.is_none() && c.ready_pods(&survivors, &after) == Some(NODES) {
            converged = Some(killed.elapsed());
        }
        assert!(
            converged.is_some() || killed.elapsed() < CONVERGE,
            "member {given} killed {pause:?} after the nodes joined: DaemonSet {after} is not Ready on all {NODES} nodes {CONVERGE:?} after the kill"
        );
        std::thread::sleep(POLL);
    }
    eprintln!(
        "member {given} killed {pause:?} after the nodes joined: the DaemonSet applied after it was Ready on every node {:?} after the kill; no node was NotReady",
        converged.unwrap_or_default()
    );
}

#[test]
fn kill_member_0_half_a_second_after_join() {
    case(0, Duration::from_millis(500));
}

#[test]
fn kill_member_0_five_seconds_after_join() {
    case(0, Duration::from_secs(5));
}

#[test]
fn kill_member_1_half_a_second_after_join() {
    case(1, Duration::from_millis(500));
}

#[test]
fn kill_member_1_five_seconds_after_join() {
    case(1, Duration::from_secs(5));
}

#[test]
fn kill_member_2_half_a_second_after_join() {
    case(2, Duration::from_millis(500));
}

#[test]
fn kill_member_2_five_seconds_after_join() {
    case(2, Duration::from_secs(5));
}
