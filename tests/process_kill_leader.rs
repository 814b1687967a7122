//! Process-level failover: three real `drover server` processes, clients
//! writing continuously, and the leader SIGKILLed several times.
//!
//! 1. Bootstrap member 0, join members 1 and 2 (`--join`, join token), each
//!    a separate process of the real binary on ephemeral loopback ports.
//! 2. [`WRITERS`] tasks create keys `/w/{writer}/{i:06}` with the value
//!    `v{writer}/{i}`, one after the other, through a failover client that
//!    knows all three servers, for the whole test. Each records which creates
//!    were acknowledged and at which revision.
//! 3. [`KILLS`] times: find the leader, SIGKILL it, wait until the two others
//!    elect a new leader and a write sent after the kill is acknowledged
//!    (the failover time), restart the killed member with only its data dir
//!    (plus raft tuning flags, which are not part of a member's identity),
//!    and wait until it is healthy and has applied the leader's commit index.
//! 4. Stop the writers, wait until all members applied the same index, and
//!    read `/w/` locally on every member: every acknowledged key is there
//!    with its value and its acknowledged revision, nothing but attempted
//!    keys is there, no key is listed twice, and all members agree exactly.
//!
//! The raft log is compacted every [`SNAPSHOT_EVERY`] entries so that the
//! restarted members may have to catch up from a snapshot. Every wait has a
//! deadline and the test stays well under 90 s; sleeps only pace polling.
//! Children are SIGKILLed when the test ends, panics included. On failure the
//! tail of each server's log is printed and the temp dir (data dirs, logs) is
//! kept; `DROVER_TEST_KEEP=1` keeps it on success too.

use drover_cli::{Client, ClientConfig, ClientError};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::future::Future;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Members of the cluster.
const MEMBERS: usize = 3;
/// How many times the leader is SIGKILLed.
const KILLS: usize = 3;
/// Concurrent writers (so that several writes share raft entries).
const WRITERS: usize = 4;
/// Raft tuning passed to every start: compact so often that a restarted
/// member usually catches up from a snapshot.
const SNAPSHOT_EVERY: u64 = 50;
const KEEP_ENTRIES: u64 = 10;
/// The whole test must finish within this.
const TEST_BUDGET: Duration = Duration::from_secs(90);
/// How long a member may take to start, join, or catch up.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the survivors may take to elect a leader and acknowledge a write
/// (election timeout 1 s, randomised up to 2 s, plus the client's retries).
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(15);
/// Pace of every polling loop.
const POLL: Duration = Duration::from_millis(25);
/// Where every member is started: loopback, port 0 (gRPC and HTTP).
const LOOPBACK_0: &str = "127.0.0.1:0";
/// `tonic::Code::AlreadyExists` (the root package does not depend on tonic).
const GRPC_ALREADY_EXISTS: i32 = 6;

/// Polls `f` until it yields a value; panics with `what` after `timeout`.
async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    drover_testkit::wait_for(what, timeout, POLL, f).await
}

/// One server process; SIGKILLed and reaped when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One member: its data dir, addresses and (while it runs) its process.
struct Member {
    name: String,
    dir: PathBuf,
    addr: String,
    http: String,
    log: PathBuf,
    /// The raft id, learned from its status once it serves.
    id: u64,
    proc: Option<Proc>,
    starts: usize,
}

impl Member {
    /// Spawns `drover server --data-dir DIR` with `extra` arguments, its
    /// stdout and stderr appended to the member's log file.
    fn spawn(&mut self, extra: &[&str]) {
        assert!(self.proc.is_none(), "{} is already running", self.name);
        self.starts += 1;
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open the log");
        writeln!(
            log,
            "===== start {} of {}: {extra:?}",
            self.starts, self.name
        )
        .expect("log");
        let err = log.try_clone().expect("clone the log file");
        let child = Command::new(env!("CARGO_BIN_EXE_drover"))
            .arg("server")
            .arg("--data-dir")
            .arg(&self.dir)
            .args(["--snapshot-every", &SNAPSHOT_EVERY.to_string()])
            .args(["--keep-entries", &KEEP_ENTRIES.to_string()])
            .args(extra)
            .env("DROVER_LOG", "info,raft=info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err))
            .spawn()
            .expect("spawn drover server");
        self.proc = Some(Proc(child));
    }

    /// Starts it again from its data dir alone, where it binds the ports
    /// it recorded, and waits until its HTTP port answers. An outgoing
    /// connection of this machine may hold one of those (ephemeral) ports
    /// for a moment: a start that exits because a port is in use is tried
    /// again until `START_TIMEOUT` has passed; any other exit fails.
    async fn restart(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let before = std::fs::metadata(&self.log).map_or(0, |m| m.len() as usize);
            self.spawn(&[]);
            let proc = &mut self.proc;
            let exited = || {
                let st = proc
                    .as_mut()
                    .expect("just spawned")
                    .0
                    .try_wait()
                    .expect("try_wait")?;
                *proc = None;
                Some(st)
            };
            let at = (self.http.as_str(), self.dir.as_path());
            if drover_testkit::await_restart(
                &self.name, &self.log, before, exited, at, deadline, POLL,
            )
            .await
            {
                return;
            }
        }
    }

    /// SIGKILLs the process and reaps it.
    fn kill(&mut self) {
        let mut p = self.proc.take().expect("the member runs");
        p.0.kill().expect("SIGKILL");
        p.0.wait().expect("reap");
    }

    fn running(&self) -> bool {
        self.proc.is_some()
    }

    /// Panics if the process exited by itself.
    fn assert_alive(&mut self) {
        if let Some(p) = &mut self.proc {
            if let Some(st) = p.0.try_wait().expect("try_wait") {
                panic!("{} exited on its own: {st}", self.name);
            }
        }
    }

    /// How many lines of the member's log (all its starts) contain `what`.
    fn log_count(&self, what: &str) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(what))
            .count()
    }

    fn single(&self, token: &str) -> Client {
        let ca = std::fs::read_to_string(self.dir.join("ca.crt")).expect("ca.crt");
        Client::single(&self.addr, token, &ca).expect("client")
    }
}

/// The cluster: its members' processes are killed when it drops, and the
/// tail of every log is printed when that happens during a panic.
struct Cluster {
    members: Vec<Member>,
    token: String,
    // Declared last so that the processes die before their dirs are removed.
    tmp: tempfile::TempDir,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            m.proc = None;
        }
        if std::thread::panicking() {
            for m in &self.members {
                let text = std::fs::read_to_string(&m.log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = &lines[lines.len().saturating_sub(80)..];
                eprintln!(
                    "----- last {} lines of {} ({}, id {:016x}, gRPC {}, HTTP {}):\n{}",
                    tail.len(),
                    m.name,
                    m.log.display(),
                    m.id,
                    m.addr,
                    m.http,
                    tail.join("\n")
                );
            }
        }
        if std::thread::panicking() || std::env::var_os("DROVER_TEST_KEEP").is_some() {
            self.tmp.disable_cleanup(true);
            eprintln!("data dirs and logs kept in {}", self.tmp.path().display());
        }
    }
}

/// One member's view: its status as it reports it.
struct View {
    idx: usize,
    id: u64,
    role: String,
    leader: u64,
    term: u64,
    commit: u64,
    applied: u64,
}

impl Cluster {
    /// Starts member 0 (bootstrap), then joins the others one by one.
    async fn start() -> Cluster {
        let tmp = tempfile::tempdir().expect("tempdir");
        let members = (0..MEMBERS)
            .map(|i| Member {
                name: format!("m{i}"),
                dir: tmp.path().join(format!("m{i}")),
                addr: String::new(),
                http: String::new(),
                log: tmp.path().join(format!("m{i}.log")),
                id: 0,
                proc: None,
                starts: 0,
            })
            .collect();
        let mut c = Cluster {
            members,
            token: String::new(),
            tmp,
        };

        // Each member binds port 0 and records the ports it got in its
        // data dir (server.json), where the test reads them; a restart
        // from that dir binds them again.
        c.members[0].spawn(&["--listen", LOOPBACK_0, "--http", LOOPBACK_0]);
        let cfg = c.wait_client_file(0).await;
        c.token = cfg.token;
        let server_token = std::fs::read_to_string(c.members[0].dir.join("server-token"))
            .expect("server-token is written with client.yaml")
            .trim()
            .to_string();
        c.wait_ready(0).await;

        for i in 1..MEMBERS {
            let join = c.members[0].addr.clone();
            c.members[i].spawn(&[
                "--listen",
                LOOPBACK_0,
                "--http",
                LOOPBACK_0,
                "--join",
                &join,
                "--token",
                &server_token,
            ]);
            let cfg = c.wait_client_file(i).await;
            assert_eq!(cfg.token, c.token, "a joined member has the admin token");
            c.wait_ready(i).await;
        }
        // Every member is a voter in the leader's membership.
        let leader = c.leader(START_TIMEOUT).await;
        let token = c.token.clone();
        let l = &c.members[leader];
        wait_for("all members to be voters", START_TIMEOUT, || async {
            let st = l.single(&token).status().await.ok()?;
            (st.members
                .iter()
                .filter(|m| !m.learner && !m.removed)
                .count()
                == MEMBERS)
                .then_some(())
        })
        .await;
        c
    }

    /// Waits until member `i` wrote its `client.yaml` and returns it.
    async fn wait_client_file(&mut self, i: usize) -> ClientConfig {
        let path = self.members[i].dir.join("client.yaml");
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            self.members[i].assert_alive();
            if path.exists() {
                // Written atomically (rename), so a present file is complete;
                // server.json, with the addresses the member bound, came
                // before it.
                let a = drover_testkit::member_addrs(&self.members[i].dir)
                    .expect("server.json is written before client.yaml");
                self.members[i].addr = a.grpc;
                self.members[i].http = a.http;
                return ClientConfig::load(&path).expect("client.yaml parses");
            }
            assert!(
                Instant::now() < deadline,
                "{} wrote no client.yaml within {START_TIMEOUT:?}",
                self.members[i].name
            );
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until member `i` is healthy (knows a leader), learns its id,
    /// and waits until it applied the leader's commit index.
    async fn wait_ready(&mut self, i: usize) {
        let deadline = Instant::now() + START_TIMEOUT;
        let http = self.members[i].http.clone();
        let dir = self.members[i].dir.clone();
        loop {
            self.members[i].assert_alive();
            if drover_testkit::member_http_status(&http, "/health", &dir).await == Some(200) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{} was not healthy within {START_TIMEOUT:?}",
                self.members[i].name
            );
            tokio::time::sleep(POLL).await;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let me = self.members[i].single(&self.token);
        let id = wait_for("the member's own status", left, || async {
            me.status().await.ok().map(|s| s.id)
        })
        .await;
        assert_ne!(id, 0, "a member has an id");
        self.members[i].id = id;
        let leader = self.leader(START_TIMEOUT).await;
        let target = self.status(leader).await.expect("leader status").commit;
        self.wait_applied(&[i], target, START_TIMEOUT).await;
    }

    /// The status of member `i`, as it sees itself.
    async fn status(&self, i: usize) -> Option<View> {
        let m = &self.members[i];
        let mut c = m.single(&self.token);
        c.deadline = Duration::from_millis(500);
        let st = tokio::time::timeout(Duration::from_secs(2), c.status())
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
        })
    }

    /// The statuses of every running member (None for one that did not answer).
    async fn views(&self) -> Vec<Option<View>> {
        let mut out = Vec::new();
        for i in 0..self.members.len() {
            out.push(if self.members[i].running() {
                self.status(i).await
            } else {
                None
            });
        }
        out
    }

    /// Waits for a leader that a majority of the cluster (itself included)
    /// follows in its current term, and returns its index. The cluster is
    /// every member started so far (joined or joining).
    async fn leader(&self, timeout: Duration) -> usize {
        let size = self.members.iter().filter(|m| m.starts > 0).count();
        wait_for("a leader followed by a majority", timeout, || async {
            let views: Vec<View> = self.views().await.into_iter().flatten().collect();
            // A deposed leader may still say "leader" in an older term.
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

    /// Waits until every member in `which` has applied at least `target`.
    async fn wait_applied(&self, which: &[usize], target: u64, timeout: Duration) {
        let what = format!("members {which:?} to apply index {target}");
        wait_for(&what, timeout, || async {
            for &i in which {
                if self.status(i).await?.applied < target {
                    return None;
                }
            }
            Some(())
        })
        .await
    }

    /// A client with failover over every member.
    fn client(&self) -> Client {
        let ca = std::fs::read_to_string(self.members[0].dir.join("ca.crt")).expect("ca.crt");
        Client::new(&ClientConfig {
            servers: self.members.iter().map(|m| m.addr.clone()).collect(),
            token: self.token.clone(),
            ca,
            ..Default::default()
        })
        .expect("client")
    }
}

/// When writes were sent and acknowledged, shared with the test body.
#[derive(Default)]
struct Progress {
    /// (sent, acknowledged) of every acknowledged write.
    acks: Mutex<Vec<(Instant, Instant)>>,
}

impl Progress {
    /// When the first write sent at or after `t` was acknowledged.
    fn first_ack_sent_since(&self, t: Instant) -> Option<Instant> {
        let acks = self.acks.lock().unwrap();
        acks.iter()
            .filter(|(sent, _)| *sent >= t)
            .map(|(_, acked)| *acked)
            .min()
    }
}

/// What one writer did.
#[derive(Default)]
struct WriterLog {
    /// Every key it tried to create, with the value it sent.
    attempted: BTreeMap<String, String>,
    /// Acknowledged creates: key and the revision of the acknowledgement.
    acked: BTreeMap<String, u64>,
    /// Creates that failed (outcome unknown): key and error.
    failed: Vec<(String, String)>,
    /// Creates answered ALREADY_EXISTS: a fresh key can only be taken by an
    /// earlier attempt of the same write, which the request id must absorb.
    already_exists: Vec<(String, String)>,
    /// Acknowledgements that do not describe the object just created.
    bad_answers: Vec<String>,
    /// Acknowledgements of a retry, answered from the request-id record.
    replayed: usize,
}

/// Creates `/w/{w}/{i:06}` = `v{w}/{i}` for i = 0, 1, ... until `stop`.
async fn writer(
    w: usize,
    client: Client,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
) -> WriterLog {
    let mut log = WriterLog::default();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("/w/{w}/{i:06}");
        let value = format!("v{w}/{i}");
        i += 1;
        log.attempted.insert(key.clone(), value.clone());
        let sent = Instant::now();
        match client.create(&key, value.clone().into_bytes()).await {
            Ok(r) => {
                progress.acks.lock().unwrap().push((sent, Instant::now()));
                // A retry answered from the request-id record says so and
                // carries the object without its value (the store does not
                // keep it there).
                if r.replayed {
                    log.replayed += 1;
                }
                match r.kv {
                    Some(kv)
                        if kv.key == key
                            && (if r.replayed {
                                kv.value.is_empty()
                            } else {
                                kv.value == value.as_bytes()
                            })
                            && kv.create_revision == r.revision
                            && kv.mod_revision == r.revision => {}
                    other => log.bad_answers.push(format!(
                        "create {key} at revision {} answered {other:?}",
                        r.revision
                    )),
                }
                log.acked.insert(key, r.revision);
            }
            Err(e) if e.code().map(i32::from) == Some(GRPC_ALREADY_EXISTS) => {
                log.already_exists.push((key, e.to_string()));
            }
            Err(e) => log.failed.push((key, describe(&e))),
        }
    }
    log
}

fn describe(e: &ClientError) -> String {
    match e.code() {
        Some(c) => format!("{c:?}: {e}"),
        None => e.to_string(),
    }
}

/// One key as a member stores it: (value, create_revision, mod_revision).
type Stored = BTreeMap<String, (Vec<u8>, u64, u64)>;

/// Lists `/w/` locally on member `i`: the revision of the list and its keys,
/// asserting that no key is listed twice.
async fn local_list(c: &Cluster, i: usize) -> Option<(u64, Stored)> {
    let (kvs, rev) = c.members[i].single(&c.token).list("/w/", true).await.ok()?;
    let n = kvs.len();
    let map: Stored = kvs
        .into_iter()
        .map(|kv| (kv.key, (kv.value, kv.create_revision, kv.mod_revision)))
        .collect();
    assert_eq!(map.len(), n, "{} lists a key twice", c.members[i].name);
    Some((rev, map))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_leader_sigkills() {
    let started = Instant::now();
    let mut cluster = Cluster::start().await;
    eprintln!(
        "cluster of {MEMBERS} up in {:?}: {}",
        started.elapsed(),
        cluster
            .members
            .iter()
            .map(|m| format!("{}={:016x}@{}", m.name, m.id, m.addr))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(Progress::default());
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let mut client = cluster.client();
            // Bounded so that stopping the writers is bounded too.
            client.deadline = Duration::from_secs(10);
            tokio::spawn(writer(w, client, stop.clone(), progress.clone()))
        })
        .collect();
    let t = Instant::now();
    wait_for("the first write", START_TIMEOUT, || async {
        progress.first_ack_sent_since(t)
    })
    .await;

    let mut failovers = Vec::new();
    for k in 1..=KILLS {
        let leader = cluster.leader(FAILOVER_TIMEOUT).await;
        let victim_id = cluster.members[leader].id;
        // Writes go through before the kill...
        let t = Instant::now();
        wait_for("a write before the kill", FAILOVER_TIMEOUT, || async {
            progress.first_ack_sent_since(t)
        })
        .await;
        let killed_at = Instant::now();
        cluster.members[leader].kill();
        // ...and again after it, once the survivors elected another leader.
        let new_leader = cluster.leader(FAILOVER_TIMEOUT).await;
        let elected = killed_at.elapsed();
        assert_ne!(new_leader, leader, "the killed member cannot lead");
        let acked = wait_for(
            "a write acknowledged after the kill",
            FAILOVER_TIMEOUT,
            || async { progress.first_ack_sent_since(killed_at) },
        )
        .await;
        let failover = acked - killed_at;
        eprintln!(
            "kill {k}: SIGKILLed leader {} ({victim_id:016x}); {} leads after ~{elected:?}; \
             first write acknowledged {failover:?} after the kill",
            cluster.members[leader].name, cluster.members[new_leader].name
        );
        failovers.push(failover);

        // Restart the killed member from its data dir alone and let it catch up.
        let restarted = Instant::now();
        cluster.members[leader].restart().await;
        cluster.wait_ready(leader).await;
        assert_eq!(
            cluster.members[leader].id, victim_id,
            "a restarted member resumes its identity"
        );
        eprintln!(
            "kill {k}: {} restarted, healthy and caught up in {:?}",
            cluster.members[leader].name,
            restarted.elapsed()
        );
    }

    // Stop writing; every in-flight write ends within the client deadline.
    stop.store(true, Ordering::Relaxed);
    let mut logs = Vec::new();
    for h in writers {
        let log = tokio::time::timeout(Duration::from_secs(30), h)
            .await
            .expect("the writers stop")
            .expect("a writer panicked");
        logs.push(log);
    }
    let mut attempted = BTreeMap::new();
    let mut acked = BTreeMap::new();
    let mut failed = Vec::new();
    let mut already_exists = Vec::new();
    let mut bad_answers = Vec::new();
    let mut replayed = 0;
    for log in logs {
        attempted.extend(log.attempted);
        acked.extend(log.acked);
        failed.extend(log.failed);
        already_exists.extend(log.already_exists);
        bad_answers.extend(log.bad_answers);
        replayed += log.replayed;
    }
    eprintln!(
        "{} writes attempted, {} acknowledged ({replayed} of them as retries answered from \
         the request-id record), {} failed (outcome unknown){}",
        attempted.len(),
        acked.len(),
        failed.len(),
        failed
            .iter()
            .take(5)
            .map(|(k, e)| format!("\n  {k}: {e}"))
            .collect::<String>()
    );
    assert!(
        bad_answers.is_empty(),
        "wrong acknowledgements: {bad_answers:#?}"
    );
    assert!(
        already_exists.is_empty(),
        "creates of fresh keys answered ALREADY_EXISTS (a retried write applied twice?): {already_exists:?}"
    );

    // Every member applies everything acknowledged and the leader's commit.
    let last_ack = acked.values().copied().max().unwrap_or(0);
    let leader = cluster.leader(FAILOVER_TIMEOUT).await;
    let commit = cluster.status(leader).await.expect("leader status").commit;
    let all: Vec<usize> = (0..MEMBERS).collect();
    cluster
        .wait_applied(&all, last_ack.max(commit), START_TIMEOUT)
        .await;
    // Then the members' local lists, once they are all at the same revision.
    let lists: Vec<Stored> = wait_for("all members at one revision", START_TIMEOUT, || async {
        let mut revs = BTreeSet::new();
        let mut lists = Vec::new();
        for i in 0..MEMBERS {
            let (rev, map) = local_list(&cluster, i).await?;
            revs.insert(rev);
            lists.push(map);
        }
        (revs.len() == 1).then_some(lists)
    })
    .await;

    for (i, stored) in lists.iter().enumerate() {
        let name = &cluster.members[i].name;
        for (key, rev) in &acked {
            let Some((value, create_rev, mod_rev)) = stored.get(key) else {
                panic!("{name} lost the acknowledged write {key} (revision {rev})");
            };
            assert_eq!(
                value,
                attempted[key].as_bytes(),
                "{name}: value of the acknowledged {key}"
            );
            assert_eq!(
                (*create_rev, *mod_rev),
                (*rev, *rev),
                "{name}: {key} was acknowledged at revision {rev}"
            );
        }
        for (key, (value, create_rev, mod_rev)) in stored {
            let Some(sent) = attempted.get(key) else {
                panic!("{name} holds {key}, which no writer attempted");
            };
            assert_eq!(value, sent.as_bytes(), "{name}: value of {key}");
            assert_eq!(create_rev, mod_rev, "{name}: {key} was written once");
        }
    }
    for i in 1..MEMBERS {
        if lists[i] != lists[0] {
            let a: BTreeSet<_> = lists[0].iter().collect();
            let b: BTreeSet<_> = lists[i].iter().collect();
            panic!(
                "{} and {} differ: only on the first {:?}, only on the second {:?}",
                cluster.members[0].name,
                cluster.members[i].name,
                a.difference(&b).take(10).collect::<Vec<_>>(),
                b.difference(&a).take(10).collect::<Vec<_>>()
            );
        }
    }
    let unacked_present = failed
        .iter()
        .filter(|(k, _)| lists[0].contains_key(k))
        .count();
    eprintln!(
        "all {MEMBERS} members hold the same {} keys: every one of the {} acknowledged writes \
         once, plus {unacked_present} of the {} failed ones; failover times {failovers:?}; \
         total {:?}",
        lists[0].len(),
        acked.len(),
        failed.len(),
        started.elapsed()
    );
    for m in &mut cluster.members {
        m.assert_alive();
        eprintln!(
            "{}: became leader {} times, installed {} snapshots",
            m.name,
            m.log_count("became leader"),
            m.log_count("installed snapshot")
        );
    }
    assert!(
        started.elapsed() < TEST_BUDGET,
        "the test took {:?}, more than {TEST_BUDGET:?}",
        started.elapsed()
    );
}
