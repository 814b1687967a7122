//! `drover logs` and `drover exec` end to end, in-process: real servers on
//! loopback, a real agent (its sync loop over the simulated runtime, whose
//! log is synthetic: a line at start, one every `log_every`, one at exit),
//! and the commands as `drover` runs them.
//!
//! - logs with tail, since and timestamps, `-p` after a restart, `ds/NAME`;
//!   errors: unknown pod, unknown container, several containers and no
//!   `-c`, a node with no session;
//! - `-f` receives new lines, and ending it (Ctrl-C) cancels the stream on
//!   the server and on the agent (the runtime's open-stream count drops);
//! - exec's output and exit code, and stdin (`-i`);
//! - a three-member cluster: the agent's session on the leader, the client
//!   on a follower (the call is relayed, stdin too);
//! - flow control: a runtime that writes its log as fast as it can, read by
//!   nobody, produces a bounded amount and the node keeps heartbeating.
//!
//! Every wait polls with a deadline.

use drover_agent::{
    AgentOptions, Clock, ContainerInfo, LogOptions, LogStream, Runtime, RuntimeError, SimConfig,
    SimRuntime, StartContainer, TokioClock,
};
use drover_api::{Manifest, Pod, PodPhase};
use drover_cli::logs::{self, ExecOptions, LogsOptions};
use drover_cli::Client;
use drover_proto::v1 as pb;
use drover_server::Server;
use drover_testkit::{
    client_of, quick_tuning, start_servers, wait_until_every, Ran, SharedBuf, TestAgent,
};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::oneshot;

const WAIT: Duration = Duration::from_secs(15);

/// How often the waits poll.
const POLL: Duration = Duration::from_millis(20);
/// How long an agent may take to stop.
const STOP: Duration = Duration::from_secs(10);

async fn wait_until<F, Fut>(what: &str, timeout: Duration, f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    wait_until_every(what, timeout, POLL, f).await;
}

fn sim_runtime(clock: &Arc<dyn Clock>) -> SimRuntime {
    SimRuntime::new(
        clock.clone(),
        Arc::new(SimConfig {
            log_every: Duration::from_millis(100),
            ..SimConfig::default()
        }),
    )
}

fn start_agent<R: Runtime>(
    server: &Server,
    name: &str,
    rt: Arc<R>,
    clock: Arc<dyn Clock>,
) -> TestAgent<R> {
    let mut o = AgentOptions::new(
        vec![server.grpc_addr.to_string()],
        server.identity.node_token.clone(),
        name,
    );
    o.tuning = quick_tuning(7);
    TestAgent::spawn(o, rt, clock)
}

/// An agent `name` over the simulated runtime, joined to `s`; returns once
/// `c` sees its node Ready.
async fn sim_agent(s: &Server, c: &Client, name: &str) -> TestAgent<SimRuntime> {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let agent = start_agent(s, name, Arc::new(sim_runtime(&clock)), clock);
    node_ready(c, name).await;
    agent
}

async fn node_ready(c: &Client, name: &str) {
    wait_until(&format!("node {name} Ready"), WAIT, || async {
        matches!(c.get_object("nodes", "", name).await, Ok(Manifest::Node(n)) if n.is_ready())
    })
    .await;
}

async fn pod(c: &Client, name: &str) -> Option<Pod> {
    match c.get_object("pods", "default", name).await {
        Ok(Manifest::Pod(p)) => Some(*p),
        _ => None,
    }
}

async fn running(c: &Client, name: &str) -> Pod {
    wait_until(&format!("pod {name} Running"), WAIT, || async {
        pod(c, name)
            .await
            .is_some_and(|p| p.status.phase == Some(PodPhase::Running))
    })
    .await;
    pod(c, name).await.expect("the pod")
}

fn pod_yaml(name: &str, node: &str, containers: &[&str]) -> String {
    let list: Vec<String> = containers
        .iter()
        .map(|c| format!("{{name: {c}, image: busybox}}"))
        .collect();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {node}\n  containers: [{}]\n",
        list.join(", ")
    )
}

async fn run_logs(c: &Client, o: LogsOptions) -> Ran {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let r = logs::logs(c, &o, &mut out, &mut err, std::future::pending()).await;
    Ran::new(out, err, r)
}

fn lo(target: &str) -> LogsOptions {
    LogsOptions {
        target: target.into(),
        ..Default::default()
    }
}

/// `drover logs -f --tail 1 TARGET`, its output into `buf` (stderr is
/// dropped), until `stop` (Ctrl-C) or the end of the log.
async fn follow(
    c: &Client,
    target: &str,
    buf: &SharedBuf,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let o = LogsOptions {
        follow: true,
        tail: Some(1),
        ..lo(target)
    };
    let mut out = buf.clone();
    let mut err = Vec::new();
    logs::logs(c, &o, &mut out, &mut err, stop).await
}

/// `drover exec -i TARGET -- CMD` with `input` on stdin.
async fn run_exec_stdin(
    c: &Client,
    target: &str,
    cmd: &[&str],
    input: &[u8],
) -> (Ran, Option<i32>) {
    let o = ExecOptions {
        target: target.into(),
        command: cmd.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let stdin = std::io::Cursor::new(input.to_vec());
    let r = logs::exec_with_stdin(c, &o, stdin, &mut out, &mut err).await;
    let code = r.as_ref().ok().copied();
    (Ran::new(out, err, r), code)
}

async fn run_exec(
    c: &Client,
    target: &str,
    container: Option<&str>,
    cmd: &[&str],
) -> (Ran, Option<i32>) {
    let o = ExecOptions {
        target: target.into(),
        container: container.map(str::to_string),
        command: cmd.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let r = logs::exec(c, &o, &mut out, &mut err).await;
    let code = r.as_ref().ok().copied();
    (Ran::new(out, err, r), code)
}

/// The highest `tick N` in a log.
fn last_tick(text: &str) -> u32 {
    text.lines()
        .filter_map(|l| l.rsplit_once(" tick ").and_then(|(_, n)| n.parse().ok()))
        .max()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_and_exec_on_one_server() {
    let tmp = tempfile::tempdir().unwrap();
    let mut servers = start_servers(tmp.path(), 1).await;
    let s = &servers[0];
    let c = client_of(s);
    let agent = sim_agent(s, &c, "n1").await;
    let yaml = [
        pod_yaml("web", "n1", &["c"]),
        pod_yaml("two", "n1", &["a", "b"]),
        pod_yaml("orphan", "ghost", &["c"]),
    ]
    .join("---\n");
    c.apply(&yaml, false).await.expect("apply");
    let web = running(&c, "web").await;
    running(&c, "two").await;

    // The whole log starts with the start line; tail, timestamps, since.
    // Five lines: the start line is more than `--since 250ms` old.
    wait_until("five log lines", WAIT, || async {
        run_logs(&c, lo("web")).await.lines().len() >= 5
    })
    .await;
    let all = run_logs(&c, lo("pod/web")).await.ok();
    assert_eq!(all.lines()[0], "sim: c started (attempt 0)");
    assert_eq!(all.lines()[1], "sim: c tick 1");
    let tail = run_logs(
        &c,
        LogsOptions {
            tail: Some(2),
            container: Some("c".into()),
            ..lo("web")
        },
    )
    .await
    .ok();
    assert_eq!(tail.lines().len(), 2, "{tail:?}");
    assert!(
        tail.lines().iter().all(|l| l.starts_with("sim: c tick ")),
        "{tail:?}"
    );
    let stamped = run_logs(
        &c,
        LogsOptions {
            tail: Some(1),
            timestamps: true,
            ..lo("web")
        },
    )
    .await
    .ok();
    let (stamp, line) = stamped.out.trim_end().split_once(' ').expect("a timestamp");
    assert!(humantime::parse_rfc3339(stamp).is_ok(), "{stamped:?}");
    assert!(line.starts_with("sim: c "), "{stamped:?}");
    let recent = run_logs(
        &c,
        LogsOptions {
            since: Some(Duration::from_millis(250)),
            ..lo("web")
        },
    )
    .await
    .ok();
    assert!(
        (1..=4).contains(&recent.lines().len()) && !recent.out.contains("started"),
        "{recent:?}"
    );

    // Errors, worded like kubectl's.
    run_logs(&c, lo("nope"))
        .await
        .failed_with("Error from server (NotFound): pods \"nope\" not found");
    run_logs(&c, lo("two")).await.failed_with(
        "Error from server (BadRequest): a container name must be specified for pod two, choose one of: [a b]",
    );
    run_logs(
        &c,
        LogsOptions {
            container: Some("x".into()),
            ..lo("two")
        },
    )
    .await
    .failed_with("container x is not valid for pod two; its containers are: [a b]");
    run_logs(&c, lo("orphan"))
        .await
        .failed_with("node ghost has no session to any server; its agent may be down");
    run_logs(
        &c,
        LogsOptions {
            previous: true,
            ..lo("web")
        },
    )
    .await
    .failed_with("previous terminated container \"c\" in pod \"web\" not found");
    run_logs(&c, lo("node/n1")).await.failed_with("take a pod");

    // exec: output and exit code.
    let (ran, code) = run_exec(&c, "web", None, &["echo", "hi", "there"]).await;
    assert_eq!((ran.ok().out.as_str(), code), ("hi there\n", Some(0)));
    let (_, code) = run_exec(&c, "web", None, &["sh", "-c", "exit 3"]).await;
    assert_eq!(code, Some(3));
    let (ran, code) = run_exec(&c, "web", None, &["nonsense"]).await;
    assert_eq!(code, Some(127));
    assert!(ran.err.contains("command not found"), "stderr: {ran:?}");
    // -i: stdin streams to the command; its end closes the command's.
    let input: Vec<u8> = (0..100_000).map(|i| b'0' + (i % 10) as u8).collect();
    let (ran, code) = run_exec_stdin(&c, "web", &["cat"], &input).await;
    assert_eq!(code, Some(0), "{ran:?}");
    assert!(ran.out.as_bytes() == input.as_slice(), "cat echoes stdin");
    let (ran, code) = run_exec(&c, "two", None, &["true"]).await;
    assert_eq!(code, Some(0));
    assert_eq!(ran.err, "Defaulted container \"a\" out of: a, b\n");
    let (ran, _) = run_exec(&c, "two", Some("zz"), &["true"]).await;
    ran.failed_with("container zz is not valid for pod two");
    let (ran, _) = run_exec(&c, "orphan", None, &["true"]).await;
    ran.failed_with("node ghost has no session to any server");

    // A restart: -p shows the previous instance, to its exit.
    assert!(agent.runtime.kill(&web.metadata.uid, "c", 1));
    wait_until("web restarted", WAIT, || async {
        pod(&c, "web").await.is_some_and(|p| {
            p.status.phase == Some(PodPhase::Running)
                && p.status
                    .container_statuses
                    .first()
                    .is_some_and(|s| s.restart_count == 1 && s.state.running.is_some())
        })
    })
    .await;
    let prev = run_logs(
        &c,
        LogsOptions {
            previous: true,
            ..lo("web")
        },
    )
    .await
    .ok();
    assert_eq!(prev.lines()[0], "sim: c started (attempt 0)");
    assert_eq!(prev.lines().last(), Some(&"sim: c exited with code 1"));
    let now = run_logs(&c, lo("web")).await.ok();
    assert_eq!(now.lines()[0], "sim: c started (attempt 1)");

    // ds/NAME: the DaemonSet's first pod, said on stderr.
    c.apply(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: hello}\nspec:\n  selector: {matchLabels: {app: hello}}\n  template:\n    metadata: {labels: {app: hello}}\n    spec: {containers: [{name: main, image: busybox}]}\n",
        false,
    )
    .await
    .expect("apply the DaemonSet");
    wait_until("the DaemonSet's pod logs", WAIT, || async {
        run_logs(&c, lo("ds/hello"))
            .await
            .out
            .contains("sim: main started")
    })
    .await;
    let ds = run_logs(&c, lo("ds/hello")).await.ok();
    assert!(
        ds.err.starts_with("Found 1 pods, using pod/hello-"),
        "{ds:?}"
    );
    run_logs(&c, lo("ds/nope"))
        .await
        .failed_with("daemonsets.apps \"nope\" not found");

    agent.stop_unchecked(STOP).await;
    servers.remove(0).shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_gets_new_lines_and_ctrl_c_stops_the_agent_reading() {
    let tmp = tempfile::tempdir().unwrap();
    let mut servers = start_servers(tmp.path(), 1).await;
    let s = &servers[0];
    let c = client_of(s);
    let agent = sim_agent(s, &c, "n1").await;
    c.apply(&pod_yaml("web", "n1", &["c"]), false)
        .await
        .expect("apply");
    let web = running(&c, "web").await;

    let buf = SharedBuf::default();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let command = follow(&c, "web", &buf, async move {
        let _ = stop_rx.await;
    });
    let watcher = async {
        wait_until("the first line", WAIT, || async { !buf.text().is_empty() }).await;
        let first = last_tick(&buf.text());
        wait_until("two new lines", WAIT, || async {
            last_tick(&buf.text()) >= first + 2
        })
        .await;
        assert_eq!(
            agent.runtime.open_log_streams(),
            1,
            "the agent reads the log"
        );
        assert_eq!(s.ctx.sessions.open_streams(), 1);
        // Ctrl-C.
        let _ = stop_tx.send(());
    };
    let (r, ()) = tokio::join!(command, watcher);
    r.expect("logs -f ends cleanly on Ctrl-C");
    wait_until("the agent stopped reading", WAIT, || async {
        agent.runtime.open_log_streams() == 0 && s.ctx.sessions.open_streams() == 0
    })
    .await;
    let lines: Vec<String> = buf.text().lines().map(str::to_string).collect();
    for pair in lines.windows(2) {
        assert_eq!(
            last_tick(&pair[1]),
            last_tick(&pair[0]) + 1,
            "in order, none lost: {lines:?}"
        );
    }

    // A followed log ends by itself when the container exits.
    let buf = SharedBuf::default();
    let command = follow(&c, "web", &buf, std::future::pending());
    let killer = async {
        wait_until("the stream open", WAIT, || async {
            agent.runtime.open_log_streams() == 1
        })
        .await;
        assert!(agent.runtime.kill(&web.metadata.uid, "c", 2));
    };
    let (r, ()) = tokio::join!(command, killer);
    r.expect("the log ends");
    assert!(
        buf.text().ends_with("sim: c exited with code 2\n"),
        "{}",
        buf.text()
    );

    agent.stop_unchecked(STOP).await;
    servers.remove(0).shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_relays_to_the_member_that_holds_the_session() {
    let tmp = tempfile::tempdir().unwrap();
    let servers = start_servers(tmp.path(), 3).await;
    let leader = loop {
        if let Some(i) = servers.iter().position(|s| s.store.leader().is_leader) {
            break i;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let follower = (leader + 1) % 3;
    // The agent knows the leader only; the client the follower only.
    let c = client_of(&servers[follower]);
    let agent = sim_agent(&servers[leader], &c, "n1").await;
    c.apply(&pod_yaml("web", "n1", &["c"]), false)
        .await
        .expect("apply");
    running(&c, "web").await;
    assert!(servers[leader].ctx.sessions.holds("n1"));
    assert!(!servers[follower].ctx.sessions.holds("n1"));

    wait_until("two log lines through the follower", WAIT, || async {
        run_logs(&c, lo("web")).await.lines().len() >= 2
    })
    .await;
    let all = run_logs(&c, lo("web")).await.ok();
    assert_eq!(all.lines()[0], "sim: c started (attempt 0)");
    let (ran, code) = run_exec(&c, "web", None, &["echo", "relayed"]).await;
    assert_eq!((ran.ok().out.as_str(), code), ("relayed\n", Some(0)));
    let (_, code) = run_exec(&c, "web", None, &["exit", "5"]).await;
    assert_eq!(code, Some(5));
    // stdin through the follower to the leader's session.
    let (ran, code) = run_exec_stdin(&c, "web", &["cat"], b"relayed stdin\n").await;
    assert_eq!((ran.ok().out.as_str(), code), ("relayed stdin\n", Some(0)));
    wait_until("no exec left", WAIT, || async {
        agent.runtime.open_exec_sessions() == 0
            && servers[leader].ctx.sessions.open_streams() == 0
            && servers[follower].ctx.sessions.open_streams() == 0
    })
    .await;

    // Ctrl-C on a relayed -f reaches the agent through both members.
    let buf = SharedBuf::default();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let command = follow(&c, "web", &buf, async move {
        let _ = stop_rx.await;
    });
    let watcher = async {
        wait_until("a new line", WAIT, || async {
            buf.text().lines().count() >= 2
        })
        .await;
        assert_eq!(agent.runtime.open_log_streams(), 1);
        let _ = stop_tx.send(());
    };
    let (r, ()) = tokio::join!(command, watcher);
    r.expect("ends cleanly");
    wait_until("the agent stopped reading", WAIT, || async {
        agent.runtime.open_log_streams() == 0 && servers[leader].ctx.sessions.open_streams() == 0
    })
    .await;

    // The agent dies: no member holds its session any more.
    agent.kill().await;
    wait_until("no session anywhere", WAIT, || async {
        run_logs(&c, lo("web")).await.error.is_some_and(|e| {
            e.contains("node n1 has no session to any server; its agent may be down")
        })
    })
    .await;
    for mut s in servers {
        s.shutdown().await;
    }
}

/// The simulated runtime, except that every log is an endless stream of
/// 64 KiB chunks produced as fast as they are asked for.
struct Flood {
    sim: SimRuntime,
    produced: Arc<AtomicU64>,
    open: Arc<AtomicUsize>,
}

struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Runtime for Flood {
    fn version(&self) -> String {
        self.sim.version()
    }
    async fn list(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        self.sim.list().await
    }
    async fn start(&self, req: StartContainer) -> Result<(), RuntimeError> {
        self.sim.start(req).await
    }
    async fn remove(&self, id: &str, grace: Duration) -> Result<(), RuntimeError> {
        self.sim.remove(id, grace).await
    }
    async fn remove_pod(&self, uid: &str, grace: Duration) -> Result<(), RuntimeError> {
        self.sim.remove_pod(uid, grace).await
    }
    fn next_change(&self) -> Option<SystemTime> {
        self.sim.next_change()
    }
    async fn logs(&self, _id: &str, _opts: LogOptions) -> Result<LogStream, RuntimeError> {
        let produced = self.produced.clone();
        self.open.fetch_add(1, Ordering::SeqCst);
        let guard = Counted(self.open.clone());
        let chunks = std::iter::repeat_with(move || {
            let _ = &guard;
            produced.fetch_add(64 * 1024, Ordering::SeqCst);
            Ok(vec![b'x'; 64 * 1024])
        });
        Ok(Box::pin(tokio_stream::iter(chunks)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_log_read_by_nobody_is_bounded_and_heartbeats_go_on() {
    let tmp = tempfile::tempdir().unwrap();
    let mut servers = start_servers(tmp.path(), 1).await;
    let s = &servers[0];
    let c = client_of(s);
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let rt = Arc::new(Flood {
        sim: sim_runtime(&clock),
        produced: Arc::default(),
        open: Arc::default(),
    });
    let agent = start_agent(s, "n1", rt.clone(), clock);
    node_ready(&c, "n1").await;
    c.apply(&pod_yaml("web", "n1", &["c"]), false)
        .await
        .expect("apply");
    running(&c, "web").await;

    let mut stream = c
        .pod_logs(pb::PodLogsRequest {
            namespace: "default".into(),
            pod: "web".into(),
            follow: true,
            ..Default::default()
        })
        .await
        .expect("logs");
    // Nobody reads for 5 s: the node keeps heartbeating meanwhile. Its
    // heartbeat comes every second (the server's interval, which the
    // agent takes: its tuning sets none); the bound gives it 2 s more on
    // a loaded 2-core machine. Heartbeats held up behind the unread log
    // would age past the bound with the stall.
    const HEARTBEAT: Duration = Duration::from_secs(1);
    const STALL: Duration = Duration::from_secs(5);
    let bound = HEARTBEAT + Duration::from_secs(2);
    let stall = Instant::now();
    let mut oldest = Duration::ZERO;
    while stall.elapsed() < STALL {
        let age = s.ctx.heartbeats.snapshot()["n1"].elapsed();
        oldest = oldest.max(age);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("the oldest heartbeat during a {STALL:?} stall: {oldest:?}");
    assert!(
        oldest < bound,
        "a heartbeat waited {oldest:?} (every {HEARTBEAT:?}, bound {bound:?})"
    );
    let produced = rt.produced.load(Ordering::SeqCst);
    assert!(
        produced > 0 && produced < 8 << 20,
        "the runtime produced {produced} bytes for nobody"
    );
    // Reading lets it flow again, in chunks of at most 32 KiB.
    let mut got = 0usize;
    while got < 8 << 20 {
        let m = stream.message().await.expect("a chunk").expect("more");
        assert!(m.data.len() <= 32 * 1024 && m.data.iter().all(|b| *b == b'x'));
        got += m.data.len();
    }
    assert!(rt.produced.load(Ordering::SeqCst) > produced);
    assert!(matches!(c.get_object("nodes", "", "n1").await, Ok(Manifest::Node(n)) if n.is_ready()));
    drop(stream);
    wait_until("the agent stopped reading", WAIT, || async {
        rt.open.load(Ordering::SeqCst) == 0
    })
    .await;
    agent.stop_unchecked(STOP).await;
    servers.remove(0).shutdown().await;
}
