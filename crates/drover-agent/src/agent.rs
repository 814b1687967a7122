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
//! - **Leave.** On shutdown: send Leave, wait for the server to close the
//!   stream (it deleted the Node), then stop every pod and forget the saved
//!   list. If no server takes the Leave, the pods are left running and the
//!   list kept: the node still exists in the cluster.

use crate::backoff::{Reconnect, RestartPolicy};
use crate::clock::{rfc3339, Clock};
use crate::link::{self, Channels, Session};
use crate::node::{self, NodeFacts};
use crate::persist;
use crate::plan::{group, plan, Action, PodBook, PodOp, StartFailure};
use crate::runtime::{Runtime, RuntimeError, StartContainer};
use crate::status::{build_status, StatusContext};
use crate::Tuning;
use drover_api::{Pod, PodStatus, Taint};
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
use tokio::sync::Semaphore;
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
        NodeAgent {
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
        }
    }

    fn loud(&self) -> bool {
        self.shared.loud
    }

    /// Runs until `shutdown` resolves, then leaves (see the module docs).
    pub(crate) async fn run(mut self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            self.tick().await;
            match self.next_event(shutdown.as_mut()).await {
                Event::Shutdown => break,
                Event::Timer => {}
                Event::Op(r) => self.op_done(r),
                Event::Inbound(r) => self.inbound(r).await,
                Event::Opened(r) => self.opened(r),
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
        tokio::select! {
            biased;
            _ = shutdown => Event::Shutdown,
            Some(r) = ops.join_next_with_id(), if !ops.is_empty() => Event::Op(r),
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
        let mut changed = false;
        for bytes in &list.pods {
            let mut pod: Pod = match serde_json::from_slice(bytes) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(node = %self.name, "the server sent a pod that does not parse: {e}");
                    continue;
                }
            };
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
        let before = self.pods.len();
        self.pods.retain(|uid, _| seen.contains(uid));
        changed |= self.pods.len() != before;
        if let Link::Up(up) = &mut self.link {
            up.got_pods = true;
        }
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
        let mut pods: Vec<Arc<Pod>> = self.pods.values().map(|b| b.pod.clone()).collect();
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
            self.spawn(op);
        }
        let grouped = group(&observed);
        let cx = StatusContext {
            host_ip: &self.host_ip,
            policy: &policy,
            now: wall,
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
            .and_then(|b| b.pod.spec.termination_grace_period_seconds)
            .unwrap_or(30);
        Duration::from_secs(u64::try_from(secs).unwrap_or(0))
    }

    fn spawn(&mut self, op: PodOp) {
        let rt = self.runtime.clone();
        let book = self
            .pods
            .get(&op.uid)
            .map(|b| (b.pod.clone(), b.hashes.clone()));
        let grace = self.grace(&op.uid);
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
                        let r = rt.remove(&id, grace).await;
                        if r.is_ok() {
                            if let Some(req) = start(index, attempt) {
                                starts.push((index, rt.start(req).await));
                            }
                        }
                        r
                    }
                    Action::Remove { id } => rt.remove(&id, grace).await,
                    Action::RemovePod => {
                        note!(loud, node = %node_name, pod_uid = %op.uid, "stopping a pod that is no longer desired");
                        rt.remove_pod(&op.uid, grace).await
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
        if !up.got_pods || !self.pods.values().any(|b| b.pending) {
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

    fn flush(&mut self) {
        let Link::Up(up) = &mut self.link else {
            return;
        };
        let now = self.shared.clock.now();
        self.last_flush = Some(now);
        let mut uids = Vec::new();
        let mut updates = Vec::new();
        for (uid, b) in &self.pods {
            if !b.pending {
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
        if updates.is_empty() {
            return;
        }
        tracing::trace!(node = %self.name, pods = updates.len(), "sending statuses");
        let msg = pb::AgentMessage {
            msg: Some(agent_message::Msg::Statuses(pb::PodStatuses {
                pods: updates,
            })),
        };
        match up.session.tx.try_send(msg) {
            Ok(()) => {
                // The server counts a status report as a heartbeat.
                up.next_heartbeat = now + up.heartbeat_every;
                let wall = self.shared.clock.wall();
                for uid in uids {
                    if let Some(b) = self.pods.get_mut(&uid) {
                        b.pending = false;
                        b.sent_at = Some(wall);
                    }
                }
                self.pending_since = None;
            }
            Err(TrySendError::Full(_)) => {}
            Err(TrySendError::Closed(_)) => self.down("the session's queue closed"),
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
        match self.runtime.list().await {
            Ok(all) => uids.extend(all.into_iter().map(|c| c.pod_uid)),
            Err(e) => tracing::warn!(node = %self.name, "the runtime does not answer: {e}"),
        }
        let mut stops = JoinSet::new();
        for uid in uids {
            let rt = self.runtime.clone();
            let grace = self.grace(&uid);
            stops.spawn(async move { rt.remove_pod(&uid, grace).await });
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

async fn link_event(link: &mut Link) -> Event {
    match link {
        Link::Up(up) => Event::Inbound(up.session.inbound.message().await),
        Link::Opening(f) => Event::Opened(f.as_mut().await.map(Box::new)),
        Link::Down => std::future::pending().await,
    }
}
