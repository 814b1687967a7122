//! Rolling upgrades with version skew (issue 26), with the real binaries:
//! the previous release's `drover` (the commit in `tests/upgrade-base`) and
//! this build's (`CARGO_BIN_EXE_drover`). The skew policy and the runbook
//! this test follows are `docs/upgrades.md`.
//!
//! 1. Three members on the **old** binary (member 0 bootstraps, 1 and 2
//!    join), compacting their logs often so that a restarted member catches
//!    up from a snapshot made by a member of the other version. Two
//!    `drover agent --runtime sim --data-dir` processes, one `drover sim`
//!    of two nodes (`--data-dir`) and a `drover agent` on the Docker engine
//!    (unless the run opts out, `DROVER_TEST_SKIP=docker`), old too, and
//!    one agent of the **new** binary, welcomed by an old member without
//!    capabilities: six nodes. The DaemonSets' pods run `sleep` (Docker)
//!    with a 1 s grace period.
//! 2. Two DaemonSets: `steady` (never changed) and `roll` (RollingUpdate,
//!    maxUnavailable 1, minReadySeconds 2, a template that each round of
//!    the rollout changes).
//! 3. Throughout: a writer creating keys through a failover client and
//!    recording every acknowledged write; a watch on the Nodes (resumed
//!    from its last revision when the member serving it goes away) that
//!    records every node that is ever not Ready or deleted.
//! 4. The members, one at a time (followers first, the leader last): a new
//!    round of the rollout, then SIGTERM, wait for the exit, start the
//!    **new** binary on the same data dir, wait until it serves as a voter
//!    and has applied the leader's commit index.
//! 5. Every session is on a new member, and the new members logged the
//!    hellos of the old agents as carrying no capabilities. Every pod of
//!    `steady` keeps its uid, container id, restart count and start time:
//!    no member's upgrade restarted a container.
//! 6. A last round of the rollout, then the agents one at a time (SIGTERM,
//!    the new binary on the same data dir), then the sim (SIGKILL: SIGTERM
//!    would make its disposable nodes leave; restarted from its data dir it
//!    takes its nodes back), then the Docker node's agent (SIGTERM: its
//!    containers keep running, and the new agent adopts them: its pod keeps
//!    its container, start time and restart count). The simulated runtime
//!    keeps its containers in memory, so a restarted sim agent starts its
//!    pods again: their uids and restart counts stay (no pod is replaced),
//!    their containers are new, and the test counts them rather than
//!    asserting what only a runtime that outlives the agent can keep. The
//!    new agents list their capabilities, and learn the new servers'.
//! 7. The rollout completes on every node; then the leader is downgraded
//!    back to the old binary (the new binary hands leadership over before
//!    it stops) and the cluster still takes writes, through it too;
//!    `drover cluster status` (the new client) shows every member healthy
//!    with its version.
//! 8. Every acknowledged write is on every member; no node was ever not
//!    Ready (the watch, and no `NodeNotReady` event was recorded).
//!
//! The old binary: `DROVER_UPGRADE_FROM_BIN` (what `.ci/run` exports), or
//! built by `.ci/build-upgrade-base` (a git worktree of the base commit,
//! `cargo build --bin drover` into `target/upgrade-base`, cached there).
//! When a release is cut, `tests/upgrade-base` moves to it; once that
//! release negotiates capabilities itself, its members and agents no longer
//! send none, and the checks of "no capabilities sent" here become checks
//! of the capabilities it lists.
//! Every wait has a deadline; every process is SIGKILLed when the test
//! ends, panics included, and the tail of every log is printed on failure
//! (`DROVER_TEST_KEEP=1` keeps the temp dir).

use drover_cli::{Client, ClientConfig};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MEMBERS: usize = 3;
/// `drover agent --runtime sim` processes of the old binary, one node each,
/// upgraded in turn.
const AGENTS: usize = 2;
/// Nodes of the one `drover sim` process.
const SIM_NODES: usize = 2;
/// Every node: the old agents, one agent of the new binary that joins the
/// old cluster (`up-agent2`, never restarted), the sim's.
const NODES: usize = AGENTS + 1 + SIM_NODES;
/// The node of the new agent that joins the old cluster.
const NEW_NODE: &str = "up-agent2";
/// Raft tuning of every start: compact so often that a member that was
/// away catches up from a snapshot (made by a member of the other version).
const SNAPSHOT_EVERY: &str = "50";
const KEEP_ENTRIES: &str = "10";
/// A process started (or restarted) must serve within this.
const START: Duration = Duration::from_secs(30);
/// A SIGTERMed process must have exited within this.
const STOP: Duration = Duration::from_secs(15);
/// Pods Running and Ready everywhere, a rollout complete.
const CONVERGE: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(50);
/// `minReadySeconds` of the `roll` DaemonSet: with maxUnavailable 1, a
/// round of its rollout lasts at least this times the nodes (8 s).
const ROLL_MIN_READY: u64 = 2;
const LOOPBACK_0: &str = "127.0.0.1:0";
/// gRPC codes (the root package does not depend on tonic).
const GRPC_ALREADY_EXISTS: i32 = 6;
const GRPC_OUT_OF_RANGE: i32 = 11;

// ------------------------------------------------------------ the old binary

/// The previous release's binary: `DROVER_UPGRADE_FROM_BIN`, else built by
/// `.ci/build-upgrade-base` (which prints its path last).
fn old_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("DROVER_UPGRADE_FROM_BIN").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "DROVER_UPGRADE_FROM_BIN={}: no such file; point it at the previous release's drover \
             (.ci/build-upgrade-base builds it) or unset it to let this test build it",
            p.display()
        );
        return p;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/build-upgrade-base");
    eprintln!(
        "DROVER_UPGRADE_FROM_BIN is not set: building the previous release with {}",
        script.display()
    );
    let out = Command::new(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{}: cannot run it: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed ({}): the upgrade test needs the previous release's binary",
        script.display(),
        out.status
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = PathBuf::from(stdout.lines().last().unwrap_or("").trim());
    assert!(
        path.is_file(),
        "{} printed {:?}, which is not a file",
        script.display(),
        path
    );
    path
}

fn new_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_drover"))
}

// ------------------------------------------------------------ processes

/// One long-running process of the test (a member, an agent, the sim),
/// restarted with either binary; SIGKILLed and reaped when dropped.
struct Proc {
    name: String,
    log: PathBuf,
    child: Option<Child>,
    starts: usize,
    /// The binary it runs now.
    bin: PathBuf,
}

impl Proc {
    fn new(name: &str, dir: &Path) -> Proc {
        Proc {
            name: name.to_string(),
            log: dir.join(format!("{name}.log")),
            child: None,
            starts: 0,
            bin: PathBuf::new(),
        }
    }

    /// Starts `bin ARGS`, output appended to its log.
    fn start(&mut self, bin: &Path, args: &[String]) {
        assert!(self.child.is_none(), "{} already runs", self.name);
        self.starts += 1;
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open the log");
        writeln!(
            log,
            "===== start {} of {}: {} {args:?}",
            self.starts,
            self.name,
            bin.display()
        )
        .expect("write the log");
        let err = log.try_clone().expect("clone the log file");
        let child = Command::new(bin)
            .args(args)
            .env("DROVER_LOG", "info,raft=info")
            .env("NO_COLOR", "1")
            .env_remove("DROVER_CONFIG")
            .env_remove("DROVER_SERVER")
            .env_remove("DROVER_TOKEN")
            .env_remove("DROVER_TOKEN_FILE")
            .env_remove("DROVER_CA")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {} for {}: {e}", bin.display(), self.name));
        self.bin = bin.to_path_buf();
        self.child = Some(child);
    }

    fn signal(&self, sig: i32) {
        let c = self.child.as_ref().expect("the process runs");
        let pid = i32::try_from(c.id()).expect("pid");
        // SAFETY: kill(2) on our own child, which is not reaped yet (we
        // hold its `Child`), so the pid is still its.
        let r = unsafe { libc::kill(pid, sig) };
        assert_eq!(r, 0, "kill({pid}, {sig}) for {}", self.name);
    }

    /// SIGTERM, then waits for the exit (at most [`STOP`]); returns how long
    /// it took and the exit status.
    async fn stop(&mut self) -> (Duration, std::process::ExitStatus) {
        let t = Instant::now();
        self.signal(libc::SIGTERM);
        loop {
            if let Some(st) = self.exited() {
                return (t.elapsed(), st);
            }
            assert!(
                t.elapsed() < STOP,
                "{} did not exit within {STOP:?} of SIGTERM",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// SIGKILL and reap.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The exit status, if it exited (on its own).
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        let c = self.child.as_mut()?;
        let st = c.try_wait().expect("try_wait")?;
        self.child = None;
        Some(st)
    }

    fn assert_alive(&mut self) {
        if let Some(st) = self.exited() {
            panic!(
                "{} ({}) exited on its own: {st}\n{}",
                self.name,
                self.bin.display(),
                self.tail(40)
            );
        }
    }

    fn log_len(&self) -> usize {
        std::fs::metadata(&self.log).map_or(0, |m| m.len() as usize)
    }

    fn tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One member: its data dir, its addresses (from `server.json`) and its
/// process.
struct Member {
    proc: Proc,
    dir: PathBuf,
    addr: String,
    http: String,
    id: u64,
}

impl Member {
    /// The arguments of every start after the first: the data dir holds
    /// the identity, the ports and the cluster.
    fn restart_args(&self) -> Vec<String> {
        vec![
            "server".into(),
            "--data-dir".into(),
            self.dir.display().to_string(),
            "--snapshot-every".into(),
            SNAPSHOT_EVERY.into(),
            "--keep-entries".into(),
            KEEP_ENTRIES.into(),
        ]
    }

    /// Starts it with `bin` from its data dir, where it binds the ports it
    /// recorded, and waits until its HTTP port answers. A start that exits
    /// because one of those (ephemeral) ports is held for a moment by an
    /// outgoing connection is tried again until [`START`] has passed; any
    /// other exit fails the test.
    async fn restart(&mut self, bin: &Path) {
        let deadline = Instant::now() + START;
        loop {
            let before = self.proc.log_len();
            self.proc.start(bin, &self.restart_args());
            loop {
                if let Some(st) = self.proc.exited() {
                    let log = std::fs::read_to_string(&self.proc.log).unwrap_or_default();
                    let out = log.get(before..).unwrap_or_default();
                    drover_testkit::expect_busy_port_exit(&self.proc.name, st, out, deadline);
                    tokio::time::sleep(POLL).await;
                    break;
                }
                if http_status(&self.http, "/health", &self.dir)
                    .await
                    .is_some()
                {
                    return;
                }
                assert!(
                    Instant::now() < deadline,
                    "{} restarted with {} but its HTTP port did not answer within {START:?}",
                    self.proc.name,
                    bin.display()
                );
                tokio::time::sleep(POLL).await;
            }
        }
    }

    fn single(&self, token: &str) -> Client {
        let ca = std::fs::read_to_string(self.dir.join("ca.crt")).expect("ca.crt");
        let mut c = Client::single(&self.addr, token, &ca).expect("client");
        c.deadline = Duration::from_secs(2);
        c
    }
}

/// The HTTP status of `GET path` on `addr` (HTTPS under the CA in `dir`),
/// or None when it does not answer.
async fn http_status(addr: &str, path: &str, dir: &Path) -> Option<u16> {
    let ca = std::fs::read_to_string(dir.join("ca.crt")).ok()?;
    drover_testkit::https_get(addr, path, &ca, None)
        .await
        .map(|(code, _)| code)
}

async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    drover_testkit::wait_for(what, timeout, POLL, f).await
}

/// Everything the test started. Members, agents and the sim are killed
/// when it drops (before the temp dir goes); on a panic the tail of every
/// log is printed and the temp dir kept.
struct Cluster {
    members: Vec<Member>,
    agents: Vec<Proc>,
    sim: Proc,
    /// The agent of the Docker node (old, upgraded with the others), and
    /// its node's name; None when the run opted out of Docker
    /// (`DROVER_TEST_SKIP=docker`).
    docker: Option<(Proc, String)>,
    token: String,
    old: PathBuf,
    new: PathBuf,
    tmp: tempfile::TempDir,
    /// Removes the Docker node's containers, after its agent was killed.
    _containers: Option<drover_testkit::docker::Cleanup>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            m.proc.kill();
        }
        for a in &mut self.agents {
            a.kill();
        }
        self.sim.kill();
        if let Some((a, _)) = &mut self.docker {
            a.kill();
        }
        if std::thread::panicking() {
            let procs = self
                .members
                .iter()
                .map(|m| &m.proc)
                .chain(&self.agents)
                .chain([&self.sim])
                .chain(self.docker.iter().map(|(a, _)| a));
            for p in procs {
                eprintln!(
                    "----- last lines of {} ({}, last run {}):\n{}",
                    p.name,
                    p.log.display(),
                    p.bin.display(),
                    p.tail(60)
                );
            }
        }
        if std::thread::panicking() || std::env::var_os("DROVER_TEST_KEEP").is_some() {
            self.tmp.disable_cleanup(true);
            eprintln!("data dirs and logs kept in {}", self.tmp.path().display());
        }
    }
}

/// One member's status, as it reports it.
struct View {
    idx: usize,
    id: u64,
    role: String,
    leader: u64,
    term: u64,
    commit: u64,
    applied: u64,
    voters: usize,
    sessions: u32,
    version: String,
}

impl Cluster {
    fn path(&self, p: &Path) -> String {
        p.display().to_string()
    }

    /// Member 0 bootstraps, 1 and 2 join; all on `bin`.
    async fn start(old: PathBuf, new: PathBuf) -> Cluster {
        let tmp = tempfile::tempdir().expect("temp dir");
        let members = (0..MEMBERS)
            .map(|i| Member {
                proc: Proc::new(&format!("m{i}"), tmp.path()),
                dir: tmp.path().join(format!("m{i}")),
                addr: String::new(),
                http: String::new(),
                id: 0,
            })
            .collect();
        // One more than AGENTS: the last is new from the start.
        let agents = (0..=AGENTS)
            .map(|i| Proc::new(&format!("agent{i}"), tmp.path()))
            .collect();
        let sim = Proc::new("sim", tmp.path());
        // A Docker node when an engine answers (or the run opted out of
        // Docker out loud: then none).
        let docker = drover_testkit::docker::engine_ready().then(|| {
            let node = drover_testkit::docker::node_name("up", "upgrade");
            (Proc::new("docker-agent", tmp.path()), node)
        });
        let _containers = docker
            .as_ref()
            .map(|(_, node)| drover_testkit::docker::Cleanup::new(node));
        let mut c = Cluster {
            members,
            agents,
            sim,
            docker,
            _containers,
            token: String::new(),
            old,
            new,
            tmp,
        };
        let bin = c.old.clone();
        for i in 0..MEMBERS {
            let mut args = c.members[i].restart_args();
            args.extend(["--listen", LOOPBACK_0, "--http", LOOPBACK_0].map(String::from));
            if i > 0 {
                // The joiners need the server token the first member wrote.
                let token = c.members[0].dir.join("server-token");
                args.extend([
                    "--join".to_string(),
                    c.members[0].addr.clone(),
                    "--token-file".to_string(),
                    c.path(&token),
                ]);
            }
            c.members[i].proc.start(&bin, &args);
            let a = {
                let m = &mut c.members[i];
                let child = m.proc.child.as_mut().expect("just started");
                drover_testkit::wait_member_addrs(&m.dir, child, START)
            };
            c.members[i].addr = a.grpc;
            c.members[i].http = a.http;
            let client_yaml = c.members[i].dir.join("client.yaml");
            wait_for("client.yaml", START, || async {
                ClientConfig::load(&client_yaml).ok()
            })
            .await;
            if i == 0 {
                c.token = ClientConfig::load(&client_yaml).expect("client.yaml").token;
            }
            c.wait_in_cluster(i).await;
        }
        c
    }

    /// The status of member `i` as it sees itself, None when it does not
    /// answer within a second or two.
    async fn status(&self, i: usize) -> Option<View> {
        let m = &self.members[i];
        m.proc.child.as_ref()?;
        let st = tokio::time::timeout(Duration::from_secs(3), m.single(&self.token).status())
            .await
            .ok()?
            .ok()?;
        Some(View {
            idx: i,
            id: st.id,
            role: st.role,
            leader: st.leader,
            term: st.term,
            commit: st.commit,
            applied: st.applied,
            voters: st
                .members
                .iter()
                .filter(|m| !m.learner && !m.removed)
                .count(),
            sessions: st.sessions,
            version: st.version,
        })
    }

    async fn views(&self) -> Vec<View> {
        let mut out = Vec::new();
        for i in 0..self.members.len() {
            if let Some(v) = self.status(i).await {
                out.push(v);
            }
        }
        out
    }

    /// The member a majority of the cluster (the members started so far)
    /// follows in its current term.
    async fn leader(&self) -> usize {
        let size = self.members.iter().filter(|m| m.proc.starts > 0).count();
        wait_for("a leader followed by a majority", START, || async {
            let views = self.views().await;
            views.iter().filter(|l| l.role == "leader").find_map(|l| {
                let agree = views
                    .iter()
                    .filter(|v| v.leader == l.id && v.term == l.term)
                    .count();
                (agree > size / 2).then_some(l.idx)
            })
        })
        .await
    }

    /// Waits until member `i` is healthy, follows the leader of a majority,
    /// the leader counts it among the voters (all of them, once all three
    /// joined), and it applied the leader's commit index as of when it came
    /// back. Returns its view.
    async fn wait_in_cluster(&mut self, i: usize) -> View {
        let name = self.members[i].proc.name.clone();
        let http = self.members[i].http.clone();
        let dir = self.members[i].dir.clone();
        let healthy = format!("{name} healthy");
        wait_for(&healthy, START, || async {
            (http_status(&http, "/health", &dir).await == Some(200)).then_some(())
        })
        .await;
        self.members[i].proc.assert_alive();
        let leader = self.leader().await;
        let target = self.status(leader).await.map_or(0, |v| v.commit);
        let expected_voters = self.members.iter().filter(|m| m.proc.starts > 0).count();
        let what = format!("{name} a voter that applied index {target}");
        let view = wait_for(&what, START, || async {
            let me = self.status(i).await?;
            let l = self.status(leader).await?;
            (me.leader == l.id
                && me.leader != 0
                && l.voters == expected_voters
                && me.applied >= target)
                .then_some(me)
        })
        .await;
        if self.members[i].id == 0 {
            self.members[i].id = view.id;
        }
        assert_eq!(view.id, self.members[i].id, "{name} keeps its identity");
        view
    }

    fn servers(&self) -> String {
        self.members
            .iter()
            .map(|m| m.addr.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A client with failover over every member.
    fn client(&self) -> Client {
        let ca = std::fs::read_to_string(self.members[0].dir.join("ca.crt")).expect("ca.crt");
        let mut c = Client::new(&ClientConfig {
            servers: self.members.iter().map(|m| m.addr.clone()).collect(),
            token: self.token.clone(),
            ca,
            ..Default::default()
        })
        .expect("client");
        c.deadline = Duration::from_secs(15);
        c
    }

    /// What every node process is given: all servers, the node token, the
    /// CA.
    fn node_conn(&self) -> Vec<String> {
        self.node_conn_to(self.servers())
    }

    /// [`Cluster::node_conn`] with only the servers `servers` (comma
    /// separated).
    fn node_conn_to(&self, servers: String) -> Vec<String> {
        let d = &self.members[0].dir;
        vec![
            "--server".into(),
            servers,
            "--token-file".into(),
            self.path(&d.join("node-token")),
            "--ca".into(),
            self.path(&d.join("ca.crt")),
        ]
    }

    /// `drover agent` for node `up-agent{i}`, given every server.
    fn agent_args(&self, i: usize) -> Vec<String> {
        let mut a: Vec<String> = [
            "agent",
            "--runtime",
            "sim",
            "--name",
            &format!("up-agent{i}"),
            "--data-dir",
            &self.path(&self.tmp.path().join(format!("agent{i}"))),
        ]
        .map(String::from)
        .to_vec();
        a.extend(self.node_conn());
        a
    }

    /// Lines of the members' logs (all their starts) that contain `text`.
    fn member_log_lines(&self, text: &str) -> usize {
        self.members
            .iter()
            .map(|m| {
                std::fs::read_to_string(&m.proc.log)
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| l.contains(text))
                    .count()
            })
            .sum()
    }

    fn sim_args(&self) -> Vec<String> {
        let mut a: Vec<String> = [
            "sim",
            "--nodes",
            &SIM_NODES.to_string(),
            "--prefix",
            "up-sim",
            "--data-dir",
            &self.path(&self.tmp.path().join("sim")),
        ]
        .map(String::from)
        .to_vec();
        a.extend(self.node_conn());
        a
    }

    /// Agent sessions held by the members, all together.
    async fn sessions(&self) -> u32 {
        self.views().await.iter().map(|v| v.sessions).sum()
    }

    fn assert_all_alive(&mut self) {
        for m in &mut self.members {
            m.proc.assert_alive();
        }
        for a in &mut self.agents {
            a.assert_alive();
        }
        self.sim.assert_alive();
        if let Some((a, _)) = &mut self.docker {
            a.assert_alive();
        }
    }

    /// The Docker node's agent (there must be one).
    fn docker_agent(&mut self) -> &mut Proc {
        &mut self.docker.as_mut().expect("a Docker node").0
    }

    /// `drover agent` of the Docker node (the default runtime).
    fn docker_args(&self) -> Vec<String> {
        let node = &self.docker.as_ref().expect("a Docker node").1;
        let mut a: Vec<String> = [
            "agent",
            "--name",
            node,
            "--data-dir",
            &self.path(&self.tmp.path().join("docker-agent")),
        ]
        .map(String::from)
        .to_vec();
        a.extend(self.node_conn());
        a
    }
}

// ------------------------------------------------------------ the workload

/// What the writer did.
#[derive(Default)]
struct Writes {
    /// Every key tried, with its value.
    attempted: BTreeMap<String, String>,
    /// Acknowledged creates: key, revision, when acknowledged.
    acked: BTreeMap<String, (u64, Instant)>,
    /// Every acknowledged write: when it was sent, how long it took.
    latencies: Vec<(Instant, Duration)>,
    /// Failed creates (outcome unknown): key and error.
    failed: Vec<(String, String)>,
    /// Fresh keys answered ALREADY_EXISTS: a retry applied twice.
    already_exists: Vec<String>,
}

/// Creates `/upgrade/w/{i:06}` = `v{i}` one after the other until stopped.
async fn writer(client: Client, stop: Arc<AtomicBool>, log: Arc<Mutex<Writes>>) {
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("/upgrade/w/{i:06}");
        let value = format!("v{i}");
        i += 1;
        log.lock()
            .unwrap()
            .attempted
            .insert(key.clone(), value.clone());
        let sent = Instant::now();
        match client.create(&key, value.into_bytes()).await {
            Ok(r) => {
                let mut l = log.lock().unwrap();
                l.acked.insert(key, (r.revision, Instant::now()));
                l.latencies.push((sent, sent.elapsed()));
            }
            Err(e) if e.code().map(i32::from) == Some(GRPC_ALREADY_EXISTS) => {
                log.lock().unwrap().already_exists.push(key);
            }
            Err(e) => log.lock().unwrap().failed.push((key, e.to_string())),
        }
    }
}

/// What the node watch saw.
#[derive(Default)]
struct NodeLog {
    /// Every node seen not Ready or deleted: what, when (since the watch
    /// started).
    violations: Vec<String>,
    /// Node events seen.
    events: usize,
    /// Times the watch was resumed (its member went away).
    resumed: usize,
    /// Times it had to list again (its revision was compacted away).
    relisted: usize,
    /// The nodes seen Ready: from then on they must stay so (a node that
    /// joins is not Ready before its agent's first report).
    names: BTreeSet<String>,
}

fn node_ready(n: &Value) -> Option<String> {
    let cond = n["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready");
    match cond {
        Some(c) if c["status"] == "True" => None,
        Some(c) => Some(format!(
            "Ready={} ({}: {})",
            c["status"].as_str().unwrap_or("?"),
            c["reason"].as_str().unwrap_or(""),
            c["message"].as_str().unwrap_or("")
        )),
        None => Some("no Ready condition".into()),
    }
}

/// Lists the Nodes, then follows their changes, resuming from the last
/// revision seen when the stream ends; runs until aborted.
async fn watch_nodes(client: Client, log: Arc<Mutex<NodeLog>>) {
    let started = Instant::now();
    let mut rv = String::new();
    let note = |n: &Value, what: &str, log: &Mutex<NodeLog>| {
        let name = n["metadata"]["name"].as_str().unwrap_or("?").to_string();
        let mut l = log.lock().unwrap();
        let bad = if what == "DELETED" {
            Some("deleted".to_string())
        } else {
            node_ready(n)
        };
        if bad.is_none() {
            l.names.insert(name.clone());
        }
        if let Some(b) = bad.filter(|_| l.names.contains(&name)) {
            l.violations
                .push(format!("{:?}: node {name} {what}: {b}", started.elapsed()));
        }
    };
    loop {
        if rv.is_empty() {
            match client.list_objects("nodes", "", "").await {
                Ok(list) => {
                    for n in &list.items {
                        let v = serde_json::to_value(n).expect("a node as JSON");
                        note(&v, "listed", &log);
                    }
                    rv = list.resource_version;
                }
                Err(_) => {
                    tokio::time::sleep(POLL).await;
                    continue;
                }
            }
        }
        let mut w = match client.watch_objects("nodes", "", &rv).await {
            Ok(w) => w,
            Err(e) => {
                if e.code().map(i32::from) == Some(GRPC_OUT_OF_RANGE) {
                    log.lock().unwrap().relisted += 1;
                    rv.clear();
                }
                tokio::time::sleep(POLL).await;
                continue;
            }
        };
        // Until the stream ends or fails (its member went away): resume.
        while let Ok(Some(ev)) = w.next().await {
            let v = serde_json::to_value(&ev.object).expect("a node as JSON");
            if let Some(r) = v["metadata"]["resourceVersion"].as_str() {
                rv = r.to_string();
            }
            log.lock().unwrap().events += 1;
            note(&v, &ev.r#type, &log);
        }
        log.lock().unwrap().resumed += 1;
    }
}

/// DaemonSet `name` whose template is round `round` of its rollout.
/// `roll` waits [`ROLL_MIN_READY`] seconds on each new pod, so that a round
/// lasts longer than a member is away.
fn daemon_set(name: &str, round: usize) -> String {
    let min_ready = if name == "roll" { ROLL_MIN_READY } else { 0 };
    format!(
        "apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: {name}, namespace: default}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  minReadySeconds: {min_ready}
  updateStrategy: {{type: RollingUpdate, rollingUpdate: {{maxUnavailable: 1}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: local/busybox:1
        command: [sleep, \"1000000\"]
        env: [{{name: ROUND, value: \"{round}\"}}]
"
    )
}

/// A pod as the test follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PodFacts {
    uid: String,
    node: String,
    container_id: String,
    restarts: i64,
    started_at: String,
    round: String,
    running_ready: bool,
}

/// The pods of DaemonSet `app` by name.
async fn pods(client: &Client, app: &str) -> Option<BTreeMap<String, PodFacts>> {
    let list = client
        .list_objects("pods", "default", &format!("app={app}"))
        .await
        .ok()?;
    let mut out = BTreeMap::new();
    for p in &list.items {
        let v = serde_json::to_value(p).ok()?;
        if !v["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let cs = &v["status"]["containerStatuses"][0];
        let ready = v["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        let env = &v["spec"]["containers"][0]["env"];
        let round = env
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["name"] == "ROUND")
            .and_then(|e| e["value"].as_str())
            .unwrap_or("")
            .to_string();
        out.insert(
            v["metadata"]["name"].as_str().unwrap_or("").to_string(),
            PodFacts {
                uid: v["metadata"]["uid"].as_str().unwrap_or("").to_string(),
                node: v["spec"]["nodeName"].as_str().unwrap_or("").to_string(),
                container_id: cs["containerID"].as_str().unwrap_or("").to_string(),
                restarts: cs["restartCount"].as_i64().unwrap_or(-1),
                started_at: cs["state"]["running"]["startedAt"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                round,
                running_ready: v["status"]["phase"] == "Running" && ready,
            },
        );
    }
    Some(out)
}

/// Every node has one pod of `app`, Running and Ready, of template round
/// `round`, and the DaemonSet's status says its rollout is complete.
async fn rolled_out(
    client: &Client,
    app: &str,
    round: usize,
    nodes: usize,
) -> Option<BTreeMap<String, PodFacts>> {
    let ds = client.get_object("ds", "default", app).await.ok()?;
    let ds = serde_json::to_value(&ds).ok()?;
    let st = &ds["status"];
    let n = nodes as u64;
    let done = st["observedGeneration"] == ds["metadata"]["generation"]
        && st["desiredNumberScheduled"].as_u64() == Some(n)
        && st["updatedNumberScheduled"].as_u64() == Some(n)
        && st["numberAvailable"].as_u64() == Some(n)
        && st["numberReady"].as_u64() == Some(n);
    if !done {
        return None;
    }
    let pods = pods(client, app).await?;
    let on: BTreeSet<&str> = pods.values().map(|p| p.node.as_str()).collect();
    (pods.len() == nodes
        && on.len() == nodes
        && pods
            .values()
            .all(|p| p.running_ready && p.round == round.to_string()))
    .then_some(pods)
}

async fn apply(client: &Client, text: &str) {
    let r = client.apply(text, false).await;
    assert!(r.is_ok(), "apply failed: {:?}\n{text}", r.err());
}

// ------------------------------------------------------------ the test

/// One member's upgrade (or downgrade), as measured.
struct Away {
    who: String,
    /// SIGTERM to exit.
    exit: Duration,
    /// SIGTERM to serving again as a voter that caught up.
    away: Duration,
    /// Writes acknowledged meanwhile.
    acked: usize,
    /// The longest time between two acknowledgements meanwhile.
    max_gap: Duration,
    /// The slowest write sent meanwhile: sent this long after SIGTERM, it
    /// took this long.
    slowest: Option<(Duration, Duration)>,
}

/// The writes acknowledged between `from` and `to`, the longest time
/// without one, and the slowest write sent meanwhile (when, how long).
fn acks_between(
    w: &Writes,
    from: Instant,
    to: Instant,
) -> (usize, Duration, Option<(Duration, Duration)>) {
    let mut times: Vec<Instant> = w
        .acked
        .values()
        .map(|(_, t)| *t)
        .filter(|t| *t >= from && *t <= to)
        .collect();
    times.sort();
    let mut gap = Duration::ZERO;
    let mut last = from;
    for t in &times {
        gap = gap.max(*t - last);
        last = *t;
    }
    gap = gap.max(to - last);
    let slowest = w
        .latencies
        .iter()
        .filter(|(sent, _)| *sent >= from && *sent <= to)
        .max_by_key(|(_, took)| *took)
        .map(|(sent, took)| (*sent - from, *took));
    (times.len(), gap, slowest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_upgrade_and_downgrade_with_skew() {
    let started = Instant::now();
    let old = old_binary();
    let new = new_binary();
    eprintln!(
        "old binary: {}\nnew binary: {}",
        old.display(),
        new.display()
    );
    let mut c = Cluster::start(old.clone(), new.clone()).await;
    eprintln!("3 members on the old binary in {:?}", started.elapsed());

    // The nodes, old too.
    for i in 0..AGENTS {
        let args = c.agent_args(i);
        c.agents[i].start(&old, &args);
    }
    let args = c.sim_args();
    c.sim.start(&old, &args);
    // The Docker node: its containers outlive its agent, so its upgrade
    // must keep them (the agent adopts them by their labels).
    if let Some(args) = c.docker.is_some().then(|| c.docker_args()) {
        c.docker_agent().start(&old, &args);
    } else {
        eprintln!("SKIPPED (DROVER_TEST_SKIP=docker): no Docker node, so no node whose containers outlive its agent");
    }
    let nodes = NODES + usize::from(c.docker.is_some());
    // Nodes whose containers must outlive the whole test: the new agent's
    // (never restarted) and the Docker node's (its agent is upgraded).
    let mut kept: Vec<String> = vec![NEW_NODE.to_string()];
    kept.extend(c.docker.as_ref().map(|(_, n)| n.clone()));
    // An agent of the new release in the cluster of the old one: its
    // session is welcomed by an old member, which sends no capabilities.
    let args = c.agent_args(AGENTS);
    c.agents[AGENTS].start(&new, &args);
    let log = c.agents[AGENTS].log.clone();
    wait_for(
        "the new agent's welcome by an old member",
        START,
        || async {
            std::fs::read_to_string(&log)
                .ok()?
                .contains("server_version=unknown version (no capabilities sent: the baseline)")
                .then_some(())
        },
    )
    .await;
    let client = c.client();
    apply(&client, &daemon_set("steady", 0)).await;
    let mut round = 0;
    apply(&client, &daemon_set("roll", round)).await;
    let steady_before = wait_for(
        "steady Running and Ready on every node",
        CONVERGE,
        || async { rolled_out(&client, "steady", 0, nodes).await },
    )
    .await;
    wait_for("roll Running and Ready on every node", CONVERGE, || async {
        rolled_out(&client, "roll", round, nodes).await
    })
    .await;
    eprintln!(
        "{nodes} nodes and both DaemonSets up at {:?}",
        started.elapsed()
    );

    // The writer and the node watch, for the rest of the test.
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(Mutex::new(Writes::default()));
    let writer_task = tokio::spawn(writer(c.client(), stop.clone(), writes.clone()));
    let node_log = Arc::new(Mutex::new(NodeLog::default()));
    let watch_task = tokio::spawn(watch_nodes(c.client(), node_log.clone()));
    let t = Instant::now();
    wait_for("the first acknowledged write", START, || async {
        (!writes.lock().unwrap().acked.is_empty()).then_some(())
    })
    .await;
    eprintln!("writing and watching the nodes after {:?}", t.elapsed());

    // The members, one at a time: followers first, the leader last.
    let leader = c.leader().await;
    let mut order: Vec<usize> = (0..MEMBERS).filter(|i| *i != leader).collect();
    order.push(leader);
    let mut away = Vec::new();
    for &i in &order {
        round += 1;
        apply(&client, &daemon_set("roll", round)).await;
        assert!(
            rolled_out(&client, "roll", round, nodes).await.is_none(),
            "round {round} of the rollout is under way when the member stops"
        );
        let name = c.members[i].proc.name.clone();
        let t = Instant::now();
        let (exit, status) = c.members[i].proc.stop().await;
        assert!(
            status.success(),
            "{name} (old) exited with {status} on SIGTERM"
        );
        let newb = c.new.clone();
        c.members[i].restart(&newb).await;
        let view = c.wait_in_cluster(i).await;
        let back = Instant::now();
        let (acked, max_gap, slowest) = acks_between(&writes.lock().unwrap(), t, back);
        let updated = pods(&client, "roll").await.map_or(0, |p| {
            p.values()
                .filter(|p| p.round == round.to_string() && p.running_ready)
                .count()
        });
        eprintln!(
            "{name} upgraded (was {}): exited {exit:?} after SIGTERM, back as a voter that \
             caught up {:?} after it; {acked} writes acknowledged meanwhile, longest gap \
             {max_gap:?}; reports version {}; rollout round {round}: {updated} of {nodes} \
             pods updated and ready",
            if i == leader {
                "the leader"
            } else {
                "a follower"
            },
            back - t,
            view.version
        );
        away.push(Away {
            who: format!("{name} old->new"),
            exit,
            away: back - t,
            acked,
            max_gap,
            slowest,
        });
        c.assert_all_alive();
    }

    // Every session is now on a new member, and each but the new agent's
    // began with the hello of an old agent, which lists no capabilities:
    // welcomed all the same.
    wait_for("a session for every node", START, || async {
        (c.sessions().await == nodes as u32).then_some(())
    })
    .await;
    let old_hellos = c.member_log_lines("(no capabilities sent: the baseline)");
    assert!(
        old_hellos >= nodes - 1,
        "the new members logged {old_hellos} hellos of old agents, fewer than the {} sessions of old agents they hold",
        nodes - 1
    );

    // No member's upgrade restarted a container: every steady pod is the
    // same pod with the same container, started at the same time.
    let steady_after_servers = wait_for("steady Running and Ready", CONVERGE, || async {
        rolled_out(&client, "steady", 0, nodes).await
    })
    .await;
    assert_eq!(
        steady_after_servers, steady_before,
        "upgrading the members changed a pod of the steady DaemonSet (uid, container, restarts or start time)"
    );

    // The agents, one at a time, then the sim, during a last round of
    // the rollout.
    round += 1;
    apply(&client, &daemon_set("roll", round)).await;
    for i in 0..AGENTS {
        let name = c.agents[i].name.clone();
        let node = format!("up-agent{i}");
        let t = Instant::now();
        let (exit, status) = c.agents[i].stop().await;
        assert!(
            status.success(),
            "{name} (old) exited with {status} on SIGTERM"
        );
        let args = c.agent_args(i);
        let newb = c.new.clone();
        c.agents[i].start(&newb, &args);
        let what = format!("{node} back: its steady pod running again");
        let before = steady_before
            .values()
            .find(|p| p.node == node)
            .expect("a steady pod on every node")
            .clone();
        wait_for(&what, CONVERGE, || async {
            let now = pods(&client, "steady").await?;
            let p = now.values().find(|p| p.node == node)?;
            (p.running_ready && p.started_at != before.started_at).then_some(())
        })
        .await;
        eprintln!(
            "{name} upgraded: exited {exit:?} after SIGTERM, its node's pods running again {:?} after it",
            t.elapsed()
        );
    }
    {
        let t = Instant::now();
        c.sim.kill();
        let args = c.sim_args();
        let newb = c.new.clone();
        c.sim.start(&newb, &args);
        let sims: Vec<PodFacts> = steady_before
            .values()
            .filter(|p| p.node.starts_with("up-sim"))
            .cloned()
            .collect();
        wait_for(
            "the sim's nodes back: their steady pods running again",
            CONVERGE,
            || async {
                let now = pods(&client, "steady").await?;
                sims.iter()
                    .all(|b| {
                        now.values().any(|p| {
                            p.node == b.node && p.running_ready && p.started_at != b.started_at
                        })
                    })
                    .then_some(())
            },
        )
        .await;
        eprintln!(
            "sim upgraded (SIGKILL, restarted from its data dir): its nodes' pods running again {:?} after it",
            t.elapsed()
        );
    }
    if let Some(node) = c.docker.as_ref().map(|(_, node)| node.clone()) {
        // SIGTERM leaves the containers running; the new agent adopts them.
        let before = steady_before
            .values()
            .find(|p| p.node == node)
            .expect("a steady pod on the Docker node")
            .clone();
        let t = Instant::now();
        let agent = c.docker_agent();
        let (exit, status) = agent.stop().await;
        assert!(
            status.success(),
            "the Docker node's agent (old) exited with {status} on SIGTERM"
        );
        let from = agent.log_len();
        let args = c.docker_args();
        let newb = c.new.clone();
        let agent = c.docker_agent();
        agent.start(&newb, &args);
        let log = agent.log.clone();
        wait_for("the Docker node's new agent joined", START, || async {
            let text = std::fs::read_to_string(&log).ok()?;
            text.get(from..)?
                .contains("joined the cluster")
                .then_some(())
        })
        .await;
        let joined = t.elapsed();
        // Its pods report again, from the containers it adopted: the same
        // container, started at the same time, no restart.
        let what = format!("the steady pod of {node} reported by the new agent");
        let after = wait_for(&what, CONVERGE, || async {
            let now = pods(&client, "steady").await?;
            now.values()
                .find(|p| p.node == node && p.running_ready)
                .cloned()
        })
        .await;
        assert_eq!(
            after, before,
            "the Docker node's steady pod changed across its agent's upgrade"
        );
        eprintln!(
            "the Docker node's agent upgraded: exited {exit:?} after SIGTERM, joined again {joined:?} \
             after it, its steady container {} kept",
            before.container_id
        );
    }
    wait_for("a session for every node", START, || async {
        (c.sessions().await == nodes as u32).then_some(())
    })
    .await;
    // New agents list their capabilities, and learn the server's.
    let new_hellos = c.member_log_lines("(capabilities ");
    assert!(
        new_hellos >= nodes,
        "the members logged {new_hellos} hellos that list capabilities, fewer than the {nodes} new nodes"
    );
    for a in &c.agents[..AGENTS] {
        let log = std::fs::read_to_string(&a.log).unwrap_or_default();
        assert!(
            log.contains("server_version=") && log.contains("(capabilities "),
            "{} (new) did not log the new server's version and capabilities",
            a.name
        );
    }

    // The rollout completes everywhere; the steady pods are the same pods.
    let t = Instant::now();
    wait_for(
        "the last round of the rollout complete",
        CONVERGE,
        || async { rolled_out(&client, "roll", round, nodes).await },
    )
    .await;
    eprintln!(
        "rollout round {round} complete {:?} after the agents' upgrade",
        t.elapsed()
    );
    let steady_after = wait_for("steady Running and Ready", CONVERGE, || async {
        rolled_out(&client, "steady", 0, nodes).await
    })
    .await;
    let mut restarted = 0;
    for (name, b) in &steady_before {
        let a = steady_after.get(name).unwrap_or_else(|| {
            panic!("steady pod {name} was replaced (the user asked for no change)")
        });
        assert_eq!(
            (&a.uid, &a.node, a.restarts),
            (&b.uid, &b.node, b.restarts),
            "steady pod {name}: the same pod on the same node, no restart counted"
        );
        if a.started_at != b.started_at || a.container_id != b.container_id {
            assert!(
                !kept.contains(&a.node),
                "steady pod {name} on {}: its container must outlive the test (an agent never \
                 restarted, or a Docker node's), yet it was started again: {b:?} -> {a:?}",
                a.node
            );
            restarted += 1;
        }
    }
    eprintln!(
        "steady: all {} pods kept their uid and restart count, those of {kept:?} their \
         containers too; {restarted} containers were started again by their agent's restart \
         (the simulated runtime keeps containers in the agent's memory)",
        steady_before.len()
    );

    // Downgrade the leader back to the old binary: the new binary hands
    // leadership over before it stops (its log says so), then the old
    // binary resumes from the data dir the new one wrote.
    let i = c.leader().await;
    let name = c.members[i].proc.name.clone();
    let t = Instant::now();
    let (exit, status) = c.members[i].proc.stop().await;
    assert!(
        status.success(),
        "{name} (new) exited with {status} on SIGTERM"
    );
    let oldb = c.old.clone();
    c.members[i].restart(&oldb).await;
    let view = c.wait_in_cluster(i).await;
    let back = Instant::now();
    let (acked, max_gap, slowest) = acks_between(&writes.lock().unwrap(), t, back);
    assert_eq!(
        c.members[i]
            .proc
            .tail(usize::MAX)
            .matches("stopping: handed leadership to member")
            .count(),
        1,
        "{name}, the leader, handed leadership over before it stopped (new binary)"
    );
    away.push(Away {
        who: format!("{name} new->old (was the leader)"),
        exit,
        away: back - t,
        acked,
        max_gap,
        slowest,
    });
    eprintln!(
        "{name} downgraded: back as a voter {:?} after SIGTERM, {acked} writes acknowledged \
         meanwhile; reports version {}",
        back - t,
        view.version
    );
    // Writes through the downgraded member (a follower forwards them).
    let mut through = c.members[i].single(&c.token);
    through.deadline = Duration::from_secs(10);
    for k in 0..10 {
        let key = format!("/upgrade/through-old/{k}");
        let r = through.create(&key, b"x".to_vec()).await;
        assert!(
            r.is_ok(),
            "a write through the downgraded {name}: {:?}",
            r.err()
        );
    }
    let t = Instant::now();
    wait_for("writes acknowledged after the downgrade", START, || async {
        writes
            .lock()
            .unwrap()
            .acked
            .values()
            .any(|(_, at)| *at > t)
            .then_some(())
    })
    .await;

    // The runbook's check, with the new client: every member healthy, and
    // the version each one runs.
    let cfg = c.members[0].dir.join("client.yaml");
    let newb = c.new.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(newb)
            .arg("--config")
            .arg(cfg)
            .args(["cluster", "status"])
            .env_remove("DROVER_CONFIG")
            .env_remove("DROVER_SERVER")
            .output()
            .expect("run drover cluster status")
    })
    .await
    .expect("the client");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "drover cluster status: {text}");
    let header: Vec<&str> = text
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(header.last(), Some(&"VERSION"), "{text}");
    let healthy = text
        .lines()
        .skip(1)
        .filter(|l| l.contains(" true ") && l.trim_end().ends_with(env!("CARGO_PKG_VERSION")))
        .count();
    assert_eq!(
        healthy, MEMBERS,
        "every member healthy, with its version:\n{text}"
    );
    eprintln!("drover cluster status (new client, one member downgraded):\n{text}");

    // Stop writing; check every acknowledged write on every member.
    stop.store(true, Ordering::Relaxed);
    tokio::time::timeout(Duration::from_secs(30), writer_task)
        .await
        .expect("the writer stops")
        .expect("the writer panicked");
    watch_task.abort();
    c.assert_all_alive();
    let w = std::mem::take(&mut *writes.lock().unwrap());
    assert!(
        w.already_exists.is_empty(),
        "fresh keys answered ALREADY_EXISTS (a retried write applied twice?): {:?}",
        w.already_exists
    );
    let last = w.acked.values().map(|(r, _)| *r).max().unwrap_or(0);
    let mut lists = Vec::new();
    for i in 0..MEMBERS {
        let name = c.members[i].proc.name.clone();
        let m = c.members[i].single(&c.token);
        let what = format!("{name} to apply revision {last}");
        let (kvs, _) = wait_for(&what, START, || async {
            let (kvs, rev) = m.list("/upgrade/w/", true).await.ok()?;
            (rev >= last).then_some((kvs, rev))
        })
        .await;
        let stored: BTreeMap<String, (Vec<u8>, u64)> = kvs
            .into_iter()
            .map(|kv| (kv.key, (kv.value, kv.create_revision)))
            .collect();
        let lost: Vec<&String> = w
            .acked
            .keys()
            .filter(|k| !stored.contains_key(*k))
            .collect();
        assert!(
            lost.is_empty(),
            "{name} lost {} acknowledged writes: {:?}",
            lost.len(),
            lost.iter().take(10).collect::<Vec<_>>()
        );
        for (k, (rev, _)) in &w.acked {
            let (value, created) = &stored[k];
            assert_eq!(value, w.attempted[k].as_bytes(), "{name}: the value of {k}");
            assert_eq!(
                created, rev,
                "{name}: {k} was acknowledged at revision {rev}"
            );
        }
        for k in stored.keys() {
            assert!(
                w.attempted.contains_key(k),
                "{name} holds {k}, never written"
            );
        }
        lists.push(stored);
    }
    for i in 1..MEMBERS {
        // Compared up to the last acknowledged revision (a failed write may
        // still have landed later on some).
        let upto = |l: &BTreeMap<String, (Vec<u8>, u64)>| -> BTreeMap<String, (Vec<u8>, u64)> {
            l.iter()
                .filter(|(_, (_, r))| *r <= last)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        assert!(
            upto(&lists[i]) == upto(&lists[0]),
            "m{i} and m0 differ up to revision {last}"
        );
    }

    // A backstop for the watch's relists (a compacted revision): the node
    // lifecycle controller records a NodeNotReady event for every node it
    // turns NotReady.
    let events = client.list_objects("events", "", "").await.expect("events");
    let not_ready: Vec<String> = events
        .items
        .iter()
        .filter_map(|e| serde_json::to_value(e).ok())
        .filter(|e| e["reason"] == "NodeNotReady")
        .map(|e| e.to_string())
        .collect();
    assert!(
        not_ready.is_empty(),
        "NodeNotReady events were recorded: {not_ready:#?}"
    );

    let nl = node_log.lock().unwrap();
    assert_eq!(nl.names.len(), nodes, "the node watch saw {:?}", nl.names);
    assert!(
        nl.violations.is_empty(),
        "nodes were not Ready during the upgrade: {:#?}",
        nl.violations
    );
    eprintln!(
        "\nsummary ({:?} in all):\n  writes: {} attempted, {} acknowledged, {} failed (outcome \
         unknown), lost 0\n  node watch: {} events, resumed {} times, relisted {} times, no \
         node ever not Ready\n  rollout: {round} rounds, the last complete on every node",
        started.elapsed(),
        w.attempted.len(),
        w.acked.len(),
        w.failed.len(),
        nl.events,
        nl.resumed,
        nl.relisted
    );
    for a in &away {
        eprintln!(
            "  {}: exit {:?} after SIGTERM, away {:?}, {} writes acknowledged meanwhile, \
             longest gap between acknowledgements {:?}, slowest write {}",
            a.who,
            a.exit,
            a.away,
            a.acked,
            a.max_gap,
            a.slowest.map_or("none".into(), |(at, took)| format!(
                "{took:?} (sent {at:?} after SIGTERM)"
            ))
        );
    }
    for (k, e) in w.failed.iter().take(5) {
        eprintln!("  failed write {k}: {e}");
    }
}
