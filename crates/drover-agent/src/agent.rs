//! The agent's sync loop: one task per node, the same for every runtime.
//!
//! The task owns everything of its node and waits on one thing at a time:
//! the shutdown future, the server's stream (or the connection attempt),
//! the runtime operations it started, and one timer for whatever is due
//! next (heartbeat, reconnect, resync, restart backoff, status flush). It
//! never waits for the runtime while holding the stream: operations on pods
//! run as tasks, one at a time per pod.
//!
//! - **Link.** One outbound session to one of the servers at a time. Hello
//!   carries the Node; after the welcome the agent heartbeats every
//!   interval (with a random phase, so that many nodes do not beat
//!   together). When the stream ends or cannot be opened, the agent tries
//!   the next server after a jittered exponential backoff.
//! - **Desired pods.** Each `DesiredPods` is the node's complete list: pods
//!   not in it are stopped, new ones started. A list with resourceVersion
//!   "0" comes from a server whose pod index has not loaded yet and is
//!   ignored. With a data dir the list is saved ([`crate::persist`]) and
//!   loaded at start, so an agent restarted without a server runs its pods.
//!   Silence of the control plane never stops a pod.
//! - **Sync.** List what the runtime holds, [`plan`], start the
//!   operations, rebuild every pod's status; plan again when an operation
//!   ends, the pods change, a backoff or a runtime transition is due, or
//!   every resync period.
//! - **Status.** Only changed statuses are sent, coalesced: at most one
//!   batch per `status_interval`, held back while an operation is running
//!   (so that a start reports Running, not first Pending) but never longer
//!   than `status_interval`. The server's pod list shows back what it
//!   wrote: a status it does not show within 10 status intervals is sent
//!   again, and after a reconnect every status it does not already have.
//! - **Probes.** Every running container instance with probes has a
//!   worker task ([`crate::probe`]) that sends what changed over a channel:
//!   readiness and startup results feed the status at once (a flip is sent
//!   within one status interval), a failed liveness or startup probe marks
//!   the instance unhealthy and the next plan kills it. Workers end with
//!   their instance.
//! - **preStop.** Before the agent stops a running container (spec change,
//!   failed probe, pod no longer desired, leave) it runs the container's
//!   `lifecycle.preStop` hook, bounded by the grace period; the stop gets
//!   what is left. The specs of pods no longer desired are kept until their
//!   containers are gone, for their hooks.
//! - **Static pods.** With `--manifest-dir` the pods of the directory
//!   ([`crate::static_pods`]) run beside the server's, whatever the server
//!   says; they are reported in `StaticPods` (complete, with statuses)
//!   when they or their statuses change, and when the node's pod list
//!   shows the server's mirror pods out of step with them (a mirror deleted
//!   through the API comes back).
//! - **Leave.** On shutdown: send Leave, wait for the server to close the
//!   stream (it deleted the Node), then stop every pod and forget the saved
//!   list. If no server takes the Leave, the pods are left running and the
//!   list kept: the node still exists in the cluster.

use crate::backoff::{Reconnect, RestartPolicy};
use crate::clock::{rfc3339, Clock};
use crate::link::{self, Channels, Session};
use crate::node::{self, NodeFacts};
use crate::persist;
use crate::plan::{group, plan, Action, PodBook, PodOp, StartFailure, Unhealthy};
use crate::probe::{self, ContainerProbes, ProbeReport, ProbeStatus, Target, Verdict};
use crate::runtime::{ContainerInfo, Runtime, RuntimeError, StartContainer};
use crate::static_pods;
use crate::status::{build_status, StatusContext};
use crate::Tuning;
use drover_api::{pod_annotation, LifecycleHandler, Pod, PodStatus, Taint};
use drover_proto::v1::{self as pb, agent_message, server_message};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::{Id, JoinError, JoinSet};
use tokio::time::{Instant, Sleep};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::Status;

/// Logs at info for a lone agent, at debug inside a sim of many.
macro_rules! note {
    ($loud:expr, $($arg:tt)*) => {
        if $loud { tracing::info!($($arg)*) } else { tracing::debug!($($arg)*) }
    };
}

/// Counters shared by the agents of one process.
#[derive(Debug, Default)]
pub struct Stats {
    /// Sessions open now.
    pub connected: AtomicUsize,
    /// Nodes whose Leave the server took.
    pub left: AtomicUsize,
}

/// What the agents of one process share.
pub(crate) struct Shared {
    pub(crate) servers: Vec<String>,
    pub(crate) token: MetadataValue<Ascii>,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) taints: Vec<Taint>,
    pub(crate) tuning: Tuning,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) channels: Channels,
    pub(crate) gate: Option<Arc<Semaphore>>,
    /// Lone agent (info logs, the machine's facts) or sim node (debug logs,
    /// fixed facts).
    pub(crate) loud: bool,
    pub(crate) sim_facts: bool,
    pub(crate) runtime_version: String,
    pub(crate) stats: Arc<Stats>,
}

impl Shared {
    fn restart_policy(&self) -> RestartPolicy {
        RestartPolicy {
            base: self.tuning.restart_backoff,
            max: self.tuning.restart_backoff_max,
        }
    }

    /// `sim` of `sim://0.1.0`: the prefix of container ids in statuses.
    fn scheme(&self) -> &str {
        self.runtime_version
            .split_once("://")
            .map_or("runtime", |(s, _)| s)
    }
}

/// The Node of this agent's hello.
pub(crate) fn facts(shared: &Shared, name: &str, host_ip: &str) -> NodeFacts {
    if shared.sim_facts {
        node::sim_facts(name, host_ip, &shared.runtime_version)
    } else {
        node::machine_facts(name, host_ip, &shared.runtime_version)
    }
}

/// A status the server has not shown back after this many status
/// intervals is sent again.
const CONFIRM_AFTER: u32 = 10;

type Opening = Pin<Box<dyn Future<Output = Result<Session, Status>> + Send>>;

enum Link {
    /// No session; the next attempt is at `retry_at`.
    Down,
    Opening(Opening),
    Up(Box<Up>),
}

struct Up {
    session: Session,
    heartbeat_every: Duration,
    next_heartbeat: Instant,
    /// The server sent the pod list of this session.
    got_pods: bool,
}

/// What one pod's operation task reports.
struct OpOutcome {
    uid: String,
    /// The starts it tried: container index and outcome.
    starts: Vec<(usize, Result<(), RuntimeError>)>,
}

enum Event {
    Shutdown,
    Timer,
    Op(Result<(Id, OpOutcome), JoinError>),
    Inbound(Result<Option<pb::ServerMessage>, Status>),
    Opened(Result<Box<Session>, Status>),
    Probe(ProbeReport),
    Static(Vec<Pod>),
}

/// A task that is aborted when dropped (probe workers, the static pod
/// watcher).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A container's preStop hook and where it goes.
struct PreStop {
    hook: LifecycleHandler,
    target: Target,
}

/// Runs the preStop hook (if any) of a container about to be stopped;
/// answers the grace left for the stop.
async fn run_pre_stop<R: Runtime>(rt: &R, hook: Option<PreStop>, grace: Duration) -> Duration {
    match hook {
        Some(h) => {
            probe::remaining_grace(grace, probe::pre_stop(rt, &h.target, &h.hook, grace).await)
        }
        None => grace,
    }
}

/// Runs the preStop hooks of a pod's containers together; answers the
/// grace left for the stop.
async fn run_pre_stops<R: Runtime>(rt: &Arc<R>, hooks: Vec<PreStop>, grace: Duration) -> Duration {
    if hooks.is_empty() {
        return grace;
    }
    let start = Instant::now();
    let mut set = JoinSet::new();
    for h in hooks {
        let rt = rt.clone();
        set.spawn(async move { probe::pre_stop(rt.as_ref(), &h.target, &h.hook, grace).await });
    }
    while set.join_next().await.is_some() {}
    probe::remaining_grace(grace, start.elapsed())
}

/// The static pods' report to the server, and whether the server's mirror
/// pods are in step with it.
#[derive(Default)]
struct StaticReport {
    /// The report must be sent.
    pending: bool,
    /// When it was last sent, until the node's pod list shows every mirror.
    sent_at: Option<std::time::SystemTime>,
    /// The static pod uids the server's last pod list had mirrors for.
    mirrors: Option<HashSet<String>>,
}

/// One node's agent; see the module documentation.
pub(crate) struct NodeAgent<R: Runtime> {
    shared: Arc<Shared>,
    name: String,
    host_ip: String,
    /// Which of the shared connections to each server this node uses.
    slot: usize,
    data_dir: Option<PathBuf>,
    runtime: Arc<R>,
    rng: SmallRng,
    reconnect: Reconnect,
    server: usize,
    retry_at: Instant,
    link: Link,
    pods: HashMap<String, PodBook>,
    busy: HashSet<String>,
    tasks: Vec<(Id, String)>,
    ops: JoinSet<OpOutcome>,
    timer: Pin<Box<Sleep>>,
    dirty: bool,
    next_sync: Instant,
    last_flush: Option<Instant>,
    /// When the oldest unsent status change was made.
    pending_since: Option<Instant>,
    /// Probe workers by container instance id.
    workers: HashMap<String, AbortOnDrop>,
    /// What the probes say, by container instance id.
    probe_status: HashMap<String, ProbeStatus>,
    probe_tx: mpsc::Sender<ProbeReport>,
    probe_rx: mpsc::Receiver<ProbeReport>,
    /// Pods no longer desired whose containers may still run (their
    /// preStop hooks).
    leaving: HashMap<String, Arc<Pod>>,
    /// `--manifest-dir` and what it held at start, until `run` starts the
    /// watcher.
    static_dir: Option<(PathBuf, static_pods::Scan)>,
    static_rx: Option<mpsc::Receiver<Vec<Pod>>>,
    static_watch: Option<AbortOnDrop>,
    static_report: StaticReport,
    /// `drover logs` and `drover exec` requests of the server.
    remote: crate::remote::Remote<R>,
}

impl<R: Runtime> NodeAgent<R> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        shared: Arc<Shared>,
        name: String,
        host_ip: String,
        slot: usize,
        data_dir: Option<PathBuf>,
        runtime: Arc<R>,
        seed: u64,
        saved: Vec<Pod>,
    ) -> Self {
        let now = shared.clock.now();
        let mut rng = SmallRng::seed_from_u64(seed);
        let server = rng.random_range(0..shared.servers.len().max(1));
        let reconnect = Reconnect::new(shared.tuning.reconnect_min, shared.tuning.reconnect_max);
        let wall = rfc3339(shared.clock.wall());
        let pods = saved
            .into_iter()
            .filter(|p| !p.metadata.uid.is_empty())
            .map(|p| (p.metadata.uid.clone(), PodBook::new(p, None, &wall)))
            .collect();
        let (probe_tx, probe_rx) = mpsc::channel(256);
        let remote = crate::remote::Remote::new(runtime.clone(), shared.clock.clone());
        NodeAgent {
            remote,
            shared,
            name,
            host_ip,
            slot,
            data_dir,
            runtime,
            rng,
            reconnect,
            server,
            retry_at: now,
            link: Link::Down,
            pods,
            busy: HashSet::new(),
            tasks: Vec::new(),
            ops: JoinSet::new(),
            timer: Box::pin(tokio::time::sleep_until(now)),
            dirty: true,
            next_sync: now,
            last_flush: None,
            pending_since: None,
            workers: HashMap::new(),
            probe_status: HashMap::new(),
            probe_tx,
            probe_rx,
            leaving: HashMap::new(),
            static_dir: None,
            static_rx: None,
            static_watch: None,
            static_report: StaticReport::default(),
        }
    }

    /// Runs the static pods of `dir` (read as `scan`) and follows the
    /// directory once running.
    pub(crate) fn static_pods(&mut self, dir: PathBuf, scan: static_pods::Scan) {
        self.static_changed(scan.pods.clone());
        self.static_dir = Some((dir, scan));
    }

    fn loud(&self) -> bool {
        self.shared.loud
    }

    /// Runs until `shutdown` resolves, then leaves (see the module docs).
    pub(crate) async fn run(mut self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        let mut shutdown = std::pin::pin!(shutdown);
        if let Some((dir, scan)) = self.static_dir.take() {
            let (tx, rx) = mpsc::channel(4);
            let every = self.shared.tuning.static_poll;
            let task = tokio::spawn(static_pods::watch(dir, self.name.clone(), every, scan, tx));
            self.static_rx = Some(rx);
            self.static_watch = Some(AbortOnDrop(task));
        }
        loop {
            self.tick().await;
            match self.next_event(shutdown.as_mut()).await {
                Event::Shutdown => break,
                Event::Timer => {}
                Event::Op(r) => self.op_done(r),
                Event::Inbound(r) => self.inbound(r).await,
                Event::Opened(r) => self.opened(r),
                Event::Probe(r) => self.probe_report(r),
                Event::Static(pods) => self.static_changed(pods),
            }
        }
        self.leave().await
    }

    fn deadline(&self) -> Instant {
        let now = self.shared.clock.now();
        let mut d = self.next_sync;
        match &self.link {
            Link::Down => d = d.min(self.retry_at),
            Link::Opening(_) => {}
            Link::Up(up) => {
                d = d.min(up.next_heartbeat);
                if let Some(f) = self.flush_at(up, now) {
                    d = d.min(f);
                }
            }
        }
        d.max(now + Duration::from_millis(1))
    }

    async fn next_event(&mut self, shutdown: Pin<&mut impl Future<Output = ()>>) -> Event {
        let deadline = self.deadline();
        self.timer.as_mut().reset(deadline);
        let ops = &mut self.ops;
        let link = &mut self.link;
        let timer = &mut self.timer;
        let probes = &mut self.probe_rx;
        let statics = &mut self.static_rx;
        tokio::select! {
            biased;
            _ = shutdown => Event::Shutdown,
            Some(r) = ops.join_next_with_id(), if !ops.is_empty() => Event::Op(r),
            Some(r) = probes.recv() => Event::Probe(r),
            Some(p) = recv_static(statics) => Event::Static(p),
            ev = link_event(link) => ev,
            _ = timer.as_mut() => Event::Timer,
        }
    }

    /// Does whatever is due.
    async fn tick(&mut self) {
        let now = self.shared.clock.now();
        if matches!(self.link, Link::Down) && now >= self.retry_at {
            self.open();
        }
        if let Link::Up(up) = &mut self.link {
            if now >= up.next_heartbeat {
                // Keep the phase; after a stall, start again from now.
                up.next_heartbeat += up.heartbeat_every;
                if up.next_heartbeat <= now {
                    up.next_heartbeat = now + up.heartbeat_every;
                }
                let hb = pb::AgentMessage {
                    msg: Some(agent_message::Msg::Heartbeat(pb::Heartbeat {})),
                };
                if let Err(TrySendError::Closed(_)) = up.session.tx.try_send(hb) {
                    self.down("the session's queue closed");
                }
            }
        }
        if self.dirty || now >= self.next_sync {
            self.sync().await;
        }
        let flush = match &self.link {
            Link::Up(up) => self.flush_at(up, now).is_some_and(|at| now >= at),
            _ => false,
        };
        if flush {
            self.flush();
        }
    }

    // ------------------------------------------------------------ the link

    fn hello(&self) -> pb::Hello {
        let facts = facts(&self.shared, &self.name, &self.host_ip);
        let node = node::node_object(&self.name, &self.shared.labels, &self.shared.taints, &facts);
        pb::Hello {
            node: serde_json::to_vec(&node).unwrap_or_default(),
            agent_version: crate::VERSION.to_string(),
        }
    }

    fn open(&mut self) {
        let channel = self.shared.channels.get(self.server, self.slot);
        let fut = link::open(
            channel,
            self.shared.token.clone(),
            self.hello(),
            self.shared.tuning.connect_timeout,
            self.shared.gate.clone(),
        );
        self.link = Link::Opening(Box::pin(fut));
    }

    fn server_addr(&self) -> &str {
        self.shared
            .servers
            .get(self.server)
            .map(String::as_str)
            .unwrap_or("?")
    }

    fn opened(&mut self, r: Result<Box<Session>, Status>) {
        match r {
            Ok(session) => {
                let now = self.shared.clock.now();
                let every = self.shared.tuning.heartbeat.unwrap_or_else(|| {
                    match session.welcome.heartbeat_interval_ms {
                        0 => Duration::from_secs(1),
                        ms => Duration::from_millis(u64::from(ms)),
                    }
                });
                // A random phase spreads the heartbeats of many nodes.
                let phase = every.mul_f64(self.rng.random_range(0.5..1.0));
                note!(
                    self.loud(),
                    node = %self.name,
                    server = %self.server_addr(),
                    member = format_args!("{:016x}", session.welcome.member),
                    "joined the cluster"
                );
                self.reconnect.reset();
                self.shared.stats.connected.fetch_add(1, Ordering::Relaxed);
                // The server may lack any status: offer them all again (those
                // it has are dropped when its pod list shows them).
                for b in self.pods.values_mut() {
                    b.pending = true;
                }
                self.link = Link::Up(Box::new(Up {
                    session: *session,
                    heartbeat_every: every,
                    next_heartbeat: now + phase,
                    got_pods: false,
                }));
            }
            Err(s) => {
                if link::is_refusal(&s) {
                    tracing::error!(node = %self.name, server = %self.server_addr(), "the server refused this agent: {}", s.message());
                } else {
                    note!(self.loud(), node = %self.name, server = %self.server_addr(), "the server is not reachable: {}", s.message());
                }
                self.link = Link::Down;
                self.retry_later();
            }
        }
    }

    fn retry_later(&mut self) {
        let wait = self.reconnect.next_delay(&mut self.rng);
        self.retry_at = self.shared.clock.now() + wait;
        if !self.shared.servers.is_empty() {
            self.server = (self.server + 1) % self.shared.servers.len();
        }
    }

    fn down(&mut self, why: &str) {
        if matches!(self.link, Link::Up(_)) {
            self.shared.stats.connected.fetch_sub(1, Ordering::Relaxed);
            note!(self.loud(), node = %self.name, server = %self.server_addr(), "lost the session: {why}");
        }
        self.link = Link::Down;
        self.retry_later();
    }

    async fn inbound(&mut self, r: Result<Option<pb::ServerMessage>, Status>) {
        match r {
            Ok(Some(m)) => match m.msg {
                Some(server_message::Msg::Pods(p)) => self.desired(p).await,
                Some(server_message::Msg::Welcome(_)) | None => {}
                Some(other) => {
                    if let Link::Up(up) = &self.link {
                        self.remote.handle(other, &up.session.output);
                    }
                }
            },
            Ok(None) => self.down("the server closed the stream"),
            Err(s) => self.down(s.message()),
        }
    }

    // ------------------------------------------------------------ desired pods

    async fn desired(&mut self, list: pb::DesiredPods) {
        if list.resource_version == "0" {
            // The server's pod index has not loaded: this list means nothing.
            return;
        }
        let wall = rfc3339(self.shared.clock.wall());
        let mut seen = HashSet::with_capacity(list.pods.len());
        let mut mirrors = HashSet::new();
        let mut changed = false;
        for bytes in &list.pods {
            let mut pod: Pod = match serde_json::from_slice(bytes) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(node = %self.name, "the server sent a pod that does not parse: {e}");
                    continue;
                }
            };
            if pod.is_mirror() {
                // The API's copy of one of our static pods: never run it.
                if let Some(uid) = pod.metadata.annotations.get(pod_annotation::CONFIG_MIRROR) {
                    mirrors.insert(uid.clone());
                }
                continue;
            }
            let uid = pod.metadata.uid.clone();
            if uid.is_empty()
                || pod.spec.node_name != self.name
                || pod.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            let server_status = std::mem::take(&mut pod.status);
            let server_status = (server_status != PodStatus::default()).then_some(server_status);
            pod.metadata.resource_version.clear();
            seen.insert(uid.clone());
            match self.pods.get_mut(&uid) {
                Some(book) => {
                    if *book.pod != pod {
                        book.update(pod);
                        changed = true;
                    }
                    if book.status.is_some() && book.status == server_status {
                        // The server has it.
                        book.pending = false;
                        book.sent_at = None;
                    }
                }
                None => {
                    note!(self.loud(), node = %self.name, pod = %format_args!("{}/{}", pod.metadata.namespace, pod.metadata.name), "pod assigned");
                    self.pods
                        .insert(uid, PodBook::new(pod, server_status, &wall));
                    changed = true;
                }
            }
        }
        let gone: Vec<String> = self
            .pods
            .iter()
            .filter(|(uid, b)| !b.is_static && !seen.contains(*uid))
            .map(|(uid, _)| uid.clone())
            .collect();
        changed |= !gone.is_empty();
        for uid in gone {
            if let Some(b) = self.pods.remove(&uid) {
                self.leaving.insert(uid, b.pod);
            }
        }
        if let Link::Up(up) = &mut self.link {
            up.got_pods = true;
        }
        self.mirrors_seen(mirrors);
        // A push that only carries statuses (the server sends one after
        // every status it writes) needs no sync.
        if changed {
            self.dirty = true;
            self.save().await;
        }
    }

    async fn save(&mut self) {
        let Some(dir) = self.data_dir.clone() else {
            return;
        };
        let mut pods: Vec<Arc<Pod>> = self
            .pods
            .values()
            .filter(|b| !b.is_static)
            .map(|b| b.pod.clone())
            .collect();
        pods.sort_by(|a, b| a.metadata.uid.cmp(&b.metadata.uid));
        let name = self.name.clone();
        let r = tokio::task::spawn_blocking(move || {
            let refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
            persist::save(&dir, &name, &refs)
        })
        .await;
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(node = %self.name, "cannot save the desired pods: {e:#}"),
            Err(e) => tracing::warn!(node = %self.name, "cannot save the desired pods: {e}"),
        }
    }

    // ------------------------------------------------------------ sync

    async fn sync(&mut self) {
        self.dirty = false;
        let now = self.shared.clock.now();
        let resync = now + self.shared.tuning.resync;
        let observed = match self.runtime.list().await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(node = %self.name, "the runtime does not answer: {e}");
                self.next_sync = resync;
                return;
            }
        };
        let wall = self.shared.clock.wall();
        let policy = self.shared.restart_policy();
        let p = plan(&mut self.pods, &observed, &self.busy, &policy, wall);
        tracing::trace!(node = %self.name, containers = observed.len(), ops = p.ops.len(), "sync");
        for op in p.ops {
            self.spawn(op, &observed);
        }
        self.probe_workers(&observed);
        let grouped = group(&observed);
        let busy = &self.busy;
        self.leaving
            .retain(|uid, _| grouped.contains_key(uid.as_str()) || busy.contains(uid));
        let cx = StatusContext {
            host_ip: &self.host_ip,
            policy: &policy,
            now: wall,
            probes: &self.probe_status,
        };
        let empty = BTreeMap::new();
        let scheme = self.shared.scheme().to_string();
        let confirm = self.shared.tuning.status_interval * CONFIRM_AFTER;
        let mut changed = false;
        for (uid, book) in self.pods.iter_mut() {
            let mine = grouped.get(uid.as_str()).unwrap_or(&empty);
            let s = build_status(book, mine, &cx, &scheme);
            if book.status.as_ref() != Some(&s) {
                book.status = Some(s);
                book.pending = true;
                changed = true;
            } else if book
                .sent_at
                .is_some_and(|t| wall.duration_since(t).is_ok_and(|d| d > confirm))
            {
                // Sent, but the server never showed it back: send it again.
                book.sent_at = None;
                book.pending = true;
                changed = true;
            }
        }
        let unconfirmed = self
            .static_report
            .sent_at
            .is_none_or(|t| wall.duration_since(t).is_ok_and(|d| d > confirm));
        if !self.static_report.pending && unconfirmed && self.static_out_of_step() {
            // The server's mirrors still differ from our static pods.
            self.static_report.pending = true;
            changed = true;
        }
        if changed && self.pending_since.is_none() {
            self.pending_since = Some(now);
        }
        let mut next = resync;
        let wake = match (p.wake_at, self.runtime.next_change()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(w) = wake {
            next = next.min(self.shared.clock.instant_at(w));
        }
        self.next_sync = next;
    }

    fn grace(&self, uid: &str) -> Duration {
        let secs = self
            .pods
            .get(uid)
            .map(|b| &b.pod)
            .or_else(|| self.leaving.get(uid))
            .and_then(|p| p.spec.termination_grace_period_seconds)
            .unwrap_or(30);
        Duration::from_secs(u64::try_from(secs).unwrap_or(0))
    }

    /// The preStop hook of running instance `id` of pod `uid`, if it has one.
    fn pre_stop_of(&self, uid: &str, info: &ContainerInfo) -> Option<PreStop> {
        if !info.state.is_running() {
            return None;
        }
        let (pod, spec) = match self.pods.get(uid) {
            Some(b) => (&b.pod, b.spec_of(info)?),
            None => {
                let pod = self.leaving.get(uid)?;
                let spec = pod
                    .spec
                    .containers
                    .iter()
                    .find(|c| c.name == info.container)?;
                (pod, spec)
            }
        };
        let hook = spec.lifecycle.as_ref()?.pre_stop.clone()?;
        Some(PreStop {
            hook,
            target: Target::of(pod, spec, info, &self.host_ip),
        })
    }

    /// The grace period of a kill for a failed probe: the probe's own
    /// `terminationGracePeriodSeconds`, else the pod's.
    fn kill_grace(&self, uid: &str, index: usize) -> Duration {
        let own = self.pods.get(uid).and_then(|b| {
            let u = b.unhealthy.get(index)?.as_ref()?;
            let c = b.pod.spec.containers.get(index)?;
            u.probe.of(c)?.termination_grace_period_seconds
        });
        match own {
            Some(s) => Duration::from_secs(u64::try_from(s).unwrap_or(0)),
            None => self.grace(uid),
        }
    }

    fn spawn(&mut self, op: PodOp, observed: &[ContainerInfo]) {
        let rt = self.runtime.clone();
        let book = self
            .pods
            .get(&op.uid)
            .map(|b| (b.pod.clone(), b.hashes.clone()));
        let grace = self.grace(&op.uid);
        // Hooks of the containers this op stops, by instance id.
        let mut hooks: HashMap<String, PreStop> = HashMap::new();
        let mut pod_hooks: Vec<PreStop> = Vec::new();
        let mut kill_graces: HashMap<String, Duration> = HashMap::new();
        for a in &op.actions {
            match a {
                Action::Replace { id, .. } | Action::Kill { id, .. } => {
                    if let Some(info) = observed.iter().find(|c| c.id == *id) {
                        if let Some(h) = self.pre_stop_of(&op.uid, info) {
                            hooks.insert(id.clone(), h);
                        }
                    }
                    if let Action::Kill { id, index } = a {
                        kill_graces.insert(id.clone(), self.kill_grace(&op.uid, *index));
                    }
                }
                Action::RemovePod => {
                    pod_hooks.extend(
                        observed
                            .iter()
                            .filter(|c| c.pod_uid == op.uid)
                            .filter_map(|c| self.pre_stop_of(&op.uid, c)),
                    );
                }
                Action::Start { .. } | Action::Remove { .. } => {}
            }
        }
        let node_name = self.name.clone();
        let host_ip = self.host_ip.clone();
        let uid = op.uid.clone();
        let loud = self.loud();
        let handle = self.ops.spawn(async move {
            let mut starts = Vec::new();
            let start = |index: usize, attempt: u32| {
                book.as_ref().map(|(pod, hashes)| StartContainer {
                    pod: pod.clone(),
                    index,
                    attempt,
                    spec_hash: hashes.get(index).cloned().unwrap_or_default(),
                    node_name: node_name.clone(),
                    host_ip: host_ip.clone(),
                })
            };
            for a in op.actions {
                let r = match a {
                    Action::Start { index, attempt } => {
                        if let Some(req) = start(index, attempt) {
                            starts.push((index, rt.start(req).await));
                        }
                        Ok(())
                    }
                    Action::Replace { id, index, attempt } => {
                        let left = run_pre_stop(rt.as_ref(), hooks.remove(&id), grace).await;
                        let r = rt.remove(&id, left).await;
                        if r.is_ok() {
                            if let Some(req) = start(index, attempt) {
                                starts.push((index, rt.start(req).await));
                            }
                        }
                        r
                    }
                    Action::Kill { id, .. } => {
                        let grace = kill_graces.get(&id).copied().unwrap_or(grace);
                        let left = run_pre_stop(rt.as_ref(), hooks.remove(&id), grace).await;
                        rt.stop(&id, left).await
                    }
                    Action::Remove { id } => rt.remove(&id, grace).await,
                    Action::RemovePod => {
                        note!(loud, node = %node_name, pod_uid = %op.uid, "stopping a pod that is no longer desired");
                        let left = run_pre_stops(&rt, std::mem::take(&mut pod_hooks), grace).await;
                        rt.remove_pod(&op.uid, left).await
                    }
                };
                if let Err(e) = r {
                    tracing::warn!(node = %node_name, pod_uid = %op.uid, "runtime: {e}");
                }
            }
            OpOutcome {
                uid: op.uid,
                starts,
            }
        });
        self.tasks.push((handle.id(), uid.clone()));
        self.busy.insert(uid);
    }

    fn op_done(&mut self, r: Result<(Id, OpOutcome), JoinError>) {
        let id = match &r {
            Ok((id, _)) => *id,
            Err(e) => e.id(),
        };
        if let Some(i) = self.tasks.iter().position(|(t, _)| *t == id) {
            let (_, uid) = self.tasks.swap_remove(i);
            self.busy.remove(&uid);
        }
        self.dirty = true;
        let out = match r {
            Ok((_, out)) => out,
            Err(e) => {
                tracing::error!(node = %self.name, "a runtime operation failed: {e}");
                return;
            }
        };
        let wall = self.shared.clock.wall();
        if let Some(book) = self.pods.get_mut(&out.uid) {
            for (index, r) in out.starts {
                let Some(slot) = book.failures.get_mut(index) else {
                    continue;
                };
                *slot = match r {
                    Ok(()) => None,
                    Err(error) => {
                        tracing::warn!(node = %self.name, pod = %book.pod.metadata.name, "cannot start a container: {error}");
                        Some(StartFailure { at: wall, error })
                    }
                };
            }
        }
    }

    // ------------------------------------------------------------ statuses

    /// When the pending statuses go out (`now` when nothing holds them).
    fn flush_at(&self, up: &Up, now: Instant) -> Option<Instant> {
        if !up.got_pods || !(self.static_report.pending || self.pods.values().any(|b| b.pending)) {
            return None;
        }
        let interval = self.shared.tuning.status_interval;
        let mut at = self.last_flush.map_or(now, |t| t + interval);
        if !self.ops.is_empty() {
            // Let running operations finish, but not for long.
            let since = self.pending_since.unwrap_or(now);
            at = at.max(since + interval);
        }
        Some(at)
    }

    /// Queues a message on the session; `false` when it cannot go now.
    fn send_now(&mut self, msg: pb::AgentMessage) -> bool {
        let now = self.shared.clock.now();
        let Link::Up(up) = &mut self.link else {
            return false;
        };
        match up.session.tx.try_send(msg) {
            Ok(()) => {
                // The server counts a report as a heartbeat.
                up.next_heartbeat = now + up.heartbeat_every;
                true
            }
            Err(TrySendError::Full(_)) => false,
            Err(TrySendError::Closed(_)) => {
                self.down("the session's queue closed");
                false
            }
        }
    }

    fn flush(&mut self) {
        if !matches!(self.link, Link::Up(_)) {
            return;
        }
        let now = self.shared.clock.now();
        self.last_flush = Some(now);
        let wall = self.shared.clock.wall();
        let mut sent_all = true;
        let statics =
            self.static_report.pending || self.pods.values().any(|b| b.is_static && b.pending);
        if statics {
            let msg = self.static_message();
            if self.send_now(msg) {
                self.static_report.pending = false;
                self.static_report.sent_at = Some(wall);
                for b in self.pods.values_mut().filter(|b| b.is_static) {
                    b.pending = false;
                }
            } else {
                sent_all = false;
            }
        }
        let mut uids = Vec::new();
        let mut updates = Vec::new();
        for (uid, b) in &self.pods {
            if !b.pending || b.is_static {
                continue;
            }
            let Some(s) = &b.status else { continue };
            let Ok(status) = serde_json::to_vec(s) else {
                continue;
            };
            uids.push(uid.clone());
            updates.push(pb::PodStatusUpdate {
                namespace: b.pod.metadata.namespace.clone(),
                name: b.pod.metadata.name.clone(),
                uid: uid.clone(),
                status,
            });
        }
        if !updates.is_empty() {
            tracing::trace!(node = %self.name, pods = updates.len(), "sending statuses");
            let msg = pb::AgentMessage {
                msg: Some(agent_message::Msg::Statuses(pb::PodStatuses {
                    pods: updates,
                })),
            };
            if self.send_now(msg) {
                for uid in uids {
                    if let Some(b) = self.pods.get_mut(&uid) {
                        b.pending = false;
                        b.sent_at = Some(wall);
                    }
                }
            } else {
                sent_all = false;
            }
        }
        if sent_all {
            self.pending_since = None;
        }
    }

    // ------------------------------------------------------------ static pods

    /// The static pods report: every static pod, with its status.
    fn static_message(&self) -> pb::AgentMessage {
        let mut books: Vec<&PodBook> = self.pods.values().filter(|b| b.is_static).collect();
        books.sort_by(|a, b| a.uid().cmp(b.uid()));
        let pods = books
            .into_iter()
            .filter_map(|b| {
                let mut p = (*b.pod).clone();
                p.status = b.status.clone().unwrap_or_default();
                serde_json::to_vec(&p).ok()
            })
            .collect();
        pb::AgentMessage {
            msg: Some(agent_message::Msg::StaticPods(pb::StaticPods { pods })),
        }
    }

    /// Whether the server's last pod list showed mirrors other than our
    /// static pods (unknown before a list came).
    fn static_out_of_step(&self) -> bool {
        let Some(mirrors) = &self.static_report.mirrors else {
            return false;
        };
        let statics = self.pods.values().filter(|b| b.is_static).count();
        statics != mirrors.len()
            || self
                .pods
                .values()
                .any(|b| b.is_static && !mirrors.contains(b.uid()))
    }

    /// The mirrors a pod list of the server showed (by static uid).
    fn mirrors_seen(&mut self, mirrors: HashSet<String>) {
        self.static_report.mirrors = Some(mirrors);
        if !self.static_out_of_step() {
            self.static_report.sent_at = None;
            return;
        }
        let confirm = self.shared.tuning.status_interval * CONFIRM_AFTER;
        let wall = self.shared.clock.wall();
        let waiting = self
            .static_report
            .sent_at
            .is_some_and(|t| wall.duration_since(t).map_or(true, |d| d <= confirm));
        if !waiting && !self.static_report.pending {
            // A mirror was deleted through the API, or one is left over:
            // tell the server again.
            self.static_report.pending = true;
            if self.pending_since.is_none() {
                self.pending_since = Some(self.shared.clock.now());
            }
        }
    }

    /// The manifest dir now holds `pods`: start the new ones, stop the ones
    /// that are gone (a changed pod is both: its uid changed).
    fn static_changed(&mut self, pods: Vec<Pod>) {
        let wall = rfc3339(self.shared.clock.wall());
        let wanted: HashSet<String> = pods.iter().map(|p| p.metadata.uid.clone()).collect();
        let gone: Vec<String> = self
            .pods
            .iter()
            .filter(|(uid, b)| b.is_static && !wanted.contains(*uid))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in gone {
            if let Some(b) = self.pods.remove(&uid) {
                note!(self.loud(), node = %self.name, pod = %format_args!("{}/{}", b.pod.metadata.namespace, b.pod.metadata.name), "static pod removed from the manifest dir");
                self.leaving.insert(uid, b.pod);
            }
        }
        for pod in pods {
            let uid = pod.metadata.uid.clone();
            if uid.is_empty() || self.pods.contains_key(&uid) {
                continue;
            }
            note!(self.loud(), node = %self.name, pod = %format_args!("{}/{}", pod.metadata.namespace, pod.metadata.name), "static pod from the manifest dir");
            let mut b = PodBook::new(pod, None, &wall);
            b.is_static = true;
            self.pods.insert(uid, b);
        }
        self.dirty = true;
        self.static_report.pending = true;
    }

    // ------------------------------------------------------------ probes

    /// Starts a probe worker for every running instance with probes that
    /// has none, and drops the workers of instances that stopped.
    fn probe_workers(&mut self, observed: &[ContainerInfo]) {
        let now = self.shared.clock.now();
        let wall = self.shared.clock.wall();
        let mut want = HashSet::new();
        for c in observed {
            let crate::runtime::RunState::Running { started_at } = c.state else {
                continue;
            };
            let Some(book) = self.pods.get(&c.pod_uid) else {
                continue;
            };
            let Some(index) = book
                .pod
                .spec
                .containers
                .iter()
                .position(|s| s.name == c.container)
            else {
                continue;
            };
            if book.hashes.get(index) != Some(&c.spec_hash) {
                continue; // being replaced
            }
            let spec = &book.pod.spec.containers[index];
            if self.workers.contains_key(&c.id) {
                want.insert(c.id.clone());
                continue;
            }
            // The probes' clock starts when the container did.
            let ago = wall.duration_since(started_at).unwrap_or_default();
            let started = now.checked_sub(ago).unwrap_or(now);
            let Some(probes) = ContainerProbes::new(spec, started) else {
                continue;
            };
            want.insert(c.id.clone());
            self.probe_status.insert(c.id.clone(), probes.status());
            let probed = probe::Probed {
                container: spec.clone(),
                pod_uid: c.pod_uid.clone(),
                index,
                target: Target::of(&book.pod, spec, c, &self.host_ip),
            };
            let task = tokio::spawn(probe::run_worker(
                self.runtime.clone(),
                self.shared.clock.clone(),
                probed,
                probes,
                self.probe_tx.clone(),
            ));
            self.workers.insert(c.id.clone(), AbortOnDrop(task));
        }
        self.workers.retain(|id, _| want.contains(id));
        self.probe_status.retain(|id, _| want.contains(id));
    }

    /// A probe worker's news.
    fn probe_report(&mut self, r: ProbeReport) {
        if !self.workers.contains_key(&r.container_id) {
            return; // the instance is gone
        }
        match r.verdict {
            Verdict::Unchanged => {}
            Verdict::Status(s) => {
                tracing::debug!(node = %self.name, pod_uid = %r.pod_uid, container_id = %r.container_id, started = s.started, ready = s.ready, "probes");
                self.probe_status.insert(r.container_id, s);
                self.dirty = true;
            }
            Verdict::Unhealthy(kind) => {
                let Some(book) = self.pods.get_mut(&r.pod_uid) else {
                    return;
                };
                let name = book
                    .pod
                    .spec
                    .containers
                    .get(r.index)
                    .map(|c| c.name.clone())
                    .unwrap_or_default();
                note!(
                    self.shared.loud,
                    node = %self.name,
                    pod = %format_args!("{}/{}", book.pod.metadata.namespace, book.pod.metadata.name),
                    "container {name} failed its {} probe, it will be restarted: {}",
                    kind.name(),
                    r.message
                );
                if let Some(slot) = book.unhealthy.get_mut(r.index) {
                    *slot = Some(Unhealthy {
                        id: r.container_id,
                        probe: kind,
                    });
                }
                self.dirty = true;
            }
        }
    }

    // ------------------------------------------------------------ leave

    /// Sends Leave on a session and waits for the server to close it.
    async fn say_leave(&mut self, mut session: Session) -> bool {
        let leave = pb::AgentMessage {
            msg: Some(agent_message::Msg::Leave(pb::Leave {})),
        };
        let timeout = self.shared.tuning.leave_timeout;
        let work = async {
            if session.tx.send(leave).await.is_err() {
                return false;
            }
            loop {
                match session.inbound.message().await {
                    Ok(Some(_)) => continue,
                    Ok(None) => return true,
                    Err(_) => return false,
                }
            }
        };
        tokio::time::timeout(timeout, work).await.unwrap_or(false)
    }

    async fn leave(mut self) -> anyhow::Result<()> {
        self.workers.clear();
        self.static_watch = None;
        let link = std::mem::replace(&mut self.link, Link::Down);
        let session = match link {
            Link::Up(up) => {
                self.shared.stats.connected.fetch_sub(1, Ordering::Relaxed);
                Some(up.session)
            }
            _ => {
                // Not connected: one round over the servers.
                let deadline = self.shared.clock.now() + self.shared.tuning.leave_timeout;
                let mut found = None;
                for _ in 0..self.shared.servers.len() {
                    let left = deadline.saturating_duration_since(self.shared.clock.now());
                    if left.is_zero() {
                        break;
                    }
                    let channel = self.shared.channels.get(self.server, self.slot);
                    let r = link::open(
                        channel,
                        self.shared.token.clone(),
                        self.hello(),
                        left.min(self.shared.tuning.connect_timeout),
                        None,
                    )
                    .await;
                    match r {
                        Ok(s) => {
                            found = Some(s);
                            break;
                        }
                        Err(_) => self.server = (self.server + 1) % self.shared.servers.len(),
                    }
                }
                found
            }
        };
        let left = match session {
            Some(s) => self.say_leave(s).await,
            None => false,
        };
        // Let running operations end before stopping everything.
        while self.ops.join_next().await.is_some() {}
        if !left {
            tracing::warn!(
                node = %self.name,
                "no server took the leave: the node stays in the cluster and its pods keep running"
            );
            return Ok(());
        }
        self.shared.stats.left.fetch_add(1, Ordering::Relaxed);
        note!(self.loud(), node = %self.name, "left the cluster; stopping its pods");
        let mut uids: HashSet<String> = self.pods.keys().cloned().collect();
        let all = match self.runtime.list().await {
            Ok(all) => all,
            Err(e) => {
                tracing::warn!(node = %self.name, "the runtime does not answer: {e}");
                Vec::new()
            }
        };
        uids.extend(all.iter().map(|c| c.pod_uid.clone()));
        let mut stops = JoinSet::new();
        for uid in uids {
            let rt = self.runtime.clone();
            let grace = self.grace(&uid);
            let hooks: Vec<PreStop> = all
                .iter()
                .filter(|c| c.pod_uid == uid)
                .filter_map(|c| self.pre_stop_of(&uid, c))
                .collect();
            stops.spawn(async move {
                let left = run_pre_stops(&rt, hooks, grace).await;
                rt.remove_pod(&uid, left).await
            });
        }
        while let Some(r) = stops.join_next().await {
            if let Ok(Err(e)) = r {
                tracing::warn!(node = %self.name, "cannot stop a pod: {e}");
            }
        }
        if let Some(dir) = &self.data_dir {
            persist::clear(dir)?;
        }
        Ok(())
    }
}

async fn recv_static(rx: &mut Option<mpsc::Receiver<Vec<Pod>>>) -> Option<Vec<Pod>> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn link_event(link: &mut Link) -> Event {
    match link {
        Link::Up(up) => Event::Inbound(up.session.inbound.message().await),
        Link::Opening(f) => Event::Opened(f.as_mut().await.map(Box::new)),
        Link::Down => std::future::pending().await,
    }
}
