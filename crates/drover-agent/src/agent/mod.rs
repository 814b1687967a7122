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
//!   interval the server asks for, in the welcome and then in each answer
//!   (with a random phase, so that many nodes do not beat together). When
//!   the stream ends or cannot be opened, the agent tries
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
//!   list and the node's certificate (revoked with the Node: a later start
//!   joins anew with the node token). If no server takes the Leave, the pods are left running and the
//!   list kept: the node still exists in the cluster.

//!
//! # Files
//!
//! [`NodeAgent`] (here) is the one owner of a node's state and runs the
//! loop: it waits for the next event, hands it to the part concerned, and
//! syncs. Each part is a struct it owns, in its own file, that knows
//! nothing of the others' insides:
//!
//! - `config.rs`: the ConfigMaps and Secrets the server sent (memory
//!   only), each start's env and volume files resolved from them; the
//!   volumes of running pods are rewritten here when they change (one
//!   update at a time per pod).
//! - `desired.rs`: the server's pod list merged into the node's pods, and
//!   saved in the data dir.
//! - `link.rs` ([`link::Link`]): the session, reconnects, heartbeats,
//!   sending.
//! - `ops.rs` ([`ops::Ops`]): the runtime operations in flight, with their
//!   preStop hooks and grace periods; stopping everything on leave.
//! - `outbox.rs` ([`outbox::Outbox`]): which statuses must go, and when.
//! - `probes.rs` ([`probes::Probes`]): the probe workers and their results.
//! - `events.rs` ([`events::Events`]): the pods' events (the runtime's,
//!   the plan's, the probes'), counted and rate-limited by
//!   [`crate::events::Correlator`], sent in batches.
//! - `static_pods.rs` ([`static_pods::Statics`]): the manifest dir's pods
//!   and the `StaticPods` report.
//! - `shared.rs`: what the agents of one process share ([`Shared`],
//!   [`Stats`]).

/// Logs at info for a lone agent, at debug inside a sim of many.
macro_rules! note {
    ($loud:expr, $($arg:tt)*) => {
        if $loud { tracing::info!($($arg)*) } else { tracing::debug!($($arg)*) }
    };
}

mod config;
mod desired;
mod events;
mod link;
mod ops;
mod outbox;
mod probes;
mod shared;
mod static_pods;

pub(crate) use shared::Shared;
pub use shared::Stats;

use crate::clock::rfc3339;
use crate::events::{Correlator, Note};
use crate::persist;
use crate::plan::{group, plan, PodBook};
use crate::probe::ProbeReport;
use crate::runtime::Runtime;
use crate::status::StatusContext;
use drover_api::Pod;
use drover_proto::v1::{self as pb, server_message};
use futures_util::FutureExt;
use link::{Link, LinkEvent};
use ops::{OpDone, Ops};
use outbox::Outbox;
use probes::Probes;
use shared::Identity;
use static_pods::Statics;
use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, Sleep};
use tonic::Status;

/// At most this many messages are read in one pass of
/// [`NodeAgent::read_arrived`], so that a server pushing without pause
/// cannot starve the rest of the loop.
const ARRIVED_MAX: usize = 64;

enum Event {
    Shutdown,
    Note(Note),
    Timer,
    Op(OpDone),
    Link(LinkEvent),
    Probe(ProbeReport),
    Static(Vec<Pod>),
}

/// One node's agent; see the module documentation.
pub(crate) struct NodeAgent<R: Runtime> {
    shared: Arc<Shared>,
    me: Identity,
    data_dir: Option<PathBuf>,
    runtime: Arc<R>,
    /// The node's pods: the server's and the static ones, by uid.
    pods: HashMap<String, PodBook>,
    link: Link,
    ops: Ops,
    outbox: Outbox,
    probes: Probes,
    statics: Statics,
    /// `drover logs` and `drover exec` requests of the server.
    remote: crate::remote::Remote<R>,
    /// Wakes the loop when the next thing is due.
    timer: Pin<Box<Sleep>>,
    /// The deadline `timer` was last set to: how late the loop woke says
    /// whether the agent itself stalled (`Link::woke`).
    armed: Instant,
    /// The pods must be synced with the runtime now.
    dirty: bool,
    /// When they must be synced at the latest.
    next_sync: Instant,
    /// The pods' events: counted, rate-limited, sent.
    events: events::Events,
    /// The ConfigMaps and Secrets the server sent (memory only).
    config: Arc<config::ConfigSet>,
    /// Pod uid -> the hash of the volume files last given to the runtime.
    volumes_applied: HashMap<String, u64>,
    /// Pod uid -> its volume update in flight (one at a time per pod, so
    /// an older one never lands after a newer one).
    volume_updates: HashMap<String, tokio::task::JoinHandle<()>>,
}

impl<R: Runtime> NodeAgent<R> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        shared: Arc<Shared>,
        name: String,
        host_ip: String,
        data_dir: Option<PathBuf>,
        runtime: Arc<R>,
        seed: u64,
        saved: Vec<Pod>,
    ) -> Self {
        let now = shared.clock.now();
        let mut link = Link::new(&shared, seed, now);
        if let Some(dir) = &data_dir {
            link.load_servers(&shared, dir, &name);
            link.load_certificate(&shared, dir, &name);
        }
        let wall = rfc3339(shared.clock.wall());
        let pods = saved
            .into_iter()
            .filter(|p| !p.metadata.uid.is_empty())
            .map(|p| (p.metadata.uid.clone(), PodBook::new(p, None, &wall)))
            .collect();
        let remote = crate::remote::Remote::new(runtime.clone(), shared.clock.clone());
        NodeAgent {
            remote,
            me: Identity {
                name,
                host_ip,
                data_dir: data_dir.clone(),
            },
            data_dir,
            runtime,
            pods,
            link,
            ops: Ops::default(),
            outbox: Outbox::default(),
            probes: Probes::new(),
            statics: Statics::default(),
            timer: Box::pin(tokio::time::sleep_until(now)),
            armed: now,
            dirty: true,
            next_sync: now,
            events: events::Events::new(Correlator::new(shared.tuning.events)),
            config: Arc::default(),
            volumes_applied: HashMap::new(),
            volume_updates: HashMap::new(),
            shared,
        }
    }

    /// Runs the static pods of `dir` (read as `scan`) and follows the
    /// directory once running.
    pub(crate) fn static_pods(&mut self, dir: PathBuf, scan: crate::static_pods::Scan) {
        self.static_changed(scan.pods.clone());
        self.statics.set_dir(dir, scan);
    }

    /// Runs until `shutdown` resolves, then leaves (see the module docs).
    pub(crate) async fn run(mut self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        let mut shutdown = std::pin::pin!(shutdown);
        self.statics
            .start_watch(&self.me.name, self.shared.tuning.static_poll);
        loop {
            self.read_arrived().await;
            self.tick().await;
            match self.next_event(shutdown.as_mut()).await {
                Event::Shutdown => break,
                ev => self.handle(ev).await,
            }
        }
        // Boxed: the loop's future lives as long as the node, and inline
        // these two made it 8.5 KiB instead of 3.6 (a debug build's
        // size_of_val): 50 MiB of a 10,000-node sim.
        if self.shared.leave_on_stop {
            Box::pin(self.leave()).await
        } else {
            Box::pin(self.stop()).await
        }
    }

    /// Handles what the server already sent (and attempts to open a
    /// session that already ended), up to [`ARRIVED_MAX`] of them, without
    /// waiting: the silence rule ([`link::SILENCE`]) judges the server only
    /// after this. The loop is deaf while it works (a list of an engine
    /// slowed by a busy machine takes seconds) and while finished
    /// operations keep it busy (the event wait serves them before the
    /// link); the server's answers wait unread meanwhile, and giving the
    /// session up for that silence would be the agent's fault, not the
    /// server's: a node on a busy machine lost its session, and its
    /// reconnects, never polled either, piled up.
    async fn read_arrived(&mut self) {
        for _ in 0..ARRIVED_MAX {
            let Some(ev) = self.link.event().now_or_never() else {
                return;
            };
            self.handle(Event::Link(ev)).await;
        }
    }

    async fn handle(&mut self, ev: Event) {
        match ev {
            Event::Shutdown | Event::Timer => {}
            Event::Op(r) => {
                self.dirty = true;
                let wall = self.shared.clock.wall();
                self.ops.done(r, &mut self.pods, &self.me.name, wall);
            }
            Event::Link(LinkEvent::Inbound(r)) => self.inbound(r).await,
            Event::Link(LinkEvent::Opened(r)) => {
                if self.link.opened(r, &self.shared, &self.me) {
                    // The server may lack any status: offer them all
                    // again (those it has are dropped when its pod list
                    // shows them).
                    for b in self.pods.values_mut() {
                        b.pending = true;
                    }
                }
            }
            Event::Probe(r) => {
                let loud = self.shared.loud;
                let mut notes = Vec::new();
                if self
                    .probes
                    .report(r, &mut self.pods, &self.me.name, loud, &mut notes)
                {
                    self.dirty = true;
                }
                self.events.observe_all(notes, &self.shared);
            }
            Event::Note(n) => self.events.observe_all([n], &self.shared),
            Event::Static(pods) => self.static_changed(pods),
        }
    }

    /// Stops the agent and nothing else: the session ends, every container
    /// keeps running, the desired pods stay saved. The node turns NotReady
    /// only if it stays away past the node timeout; on return it adopts
    /// what runs.
    async fn stop(mut self) -> anyhow::Result<()> {
        self.probes.stop();
        self.statics.stop_watch();
        self.ops.finish().await;
        note!(
            self.shared.loud,
            node = %self.me.name,
            "stopped; the node's containers keep running (leaving the cluster is `drover agent --leave`)"
        );
        Ok(())
    }

    /// When the pending statuses go out, if any wait and may go.
    fn flush_at(&self, now: Instant) -> Option<Instant> {
        if !self.link.got_pods()
            || !(self.statics.pending() || self.pods.values().any(|b| b.pending))
        {
            return None;
        }
        let interval = self.shared.tuning.status_interval;
        Some(self.outbox.flush_at(!self.ops.is_empty(), interval, now))
    }

    fn deadline(&self) -> Instant {
        let now = self.shared.clock.now();
        let mut d = self.next_sync;
        if let Some(l) = self.link.due() {
            d = d.min(l);
        }
        if let Some(f) = self.flush_at(now) {
            d = d.min(f);
        }
        if self.link.got_pods() {
            if let Some(e) = self.events.flush_at(&self.shared, now) {
                d = d.min(e);
            }
        }
        d.max(now + Duration::from_millis(1))
    }

    async fn next_event(&mut self, shutdown: Pin<&mut impl Future<Output = ()>>) -> Event {
        let deadline = self.deadline();
        self.armed = deadline;
        self.timer.as_mut().reset(deadline);
        let ops = &mut self.ops;
        let link = &mut self.link;
        let timer = &mut self.timer;
        let probes = &mut self.probes;
        let statics = &mut self.statics;
        let notes = self.events.notes();
        tokio::select! {
            biased;
            _ = shutdown => Event::Shutdown,
            // Before the operations: a start's events come before its end.
            Some(n) = notes.recv() => Event::Note(*n),
            Some(r) = ops.join_next(), if !ops.is_empty() => Event::Op(r),
            Some(r) = probes.recv() => Event::Probe(r),
            Some(p) = statics.recv() => Event::Static(p),
            ev = link.event() => Event::Link(ev),
            _ = timer.as_mut() => Event::Timer,
        }
    }

    /// Does whatever is due.
    async fn tick(&mut self) {
        let now = self.shared.clock.now();
        self.link.woke(self.armed, now);
        self.link.tick(&self.shared, &self.me, now);
        if self.dirty || now >= self.next_sync {
            self.sync().await;
        }
        if self.flush_at(now).is_some_and(|at| now >= at) {
            self.outbox.flush(
                &mut self.link,
                &mut self.statics,
                &mut self.pods,
                &self.shared,
                &self.me.name,
            );
        }
        if self.link.got_pods() {
            self.events
                .flush(&mut self.link, &self.shared, &self.me.name, now);
        }
    }

    async fn inbound(&mut self, r: Result<Option<pb::ServerMessage>, Status>) {
        if let Ok(Some(_)) = &r {
            self.link.heard();
        }
        match r {
            Ok(Some(m)) => match m.msg {
                Some(server_message::Msg::Pods(p)) => self.desired(p).await,
                Some(server_message::Msg::Config(c)) => {
                    self.config = Arc::new(config::decode(&c, &self.me.name));
                    self.dirty = true;
                }
                Some(server_message::Msg::Servers(s)) => {
                    self.link.learn_servers(&self.shared, &self.me, &s.servers)
                }
                Some(server_message::Msg::HeartbeatAck(a)) => {
                    let now = self.shared.clock.now();
                    self.link
                        .asked_interval(&self.shared, a.heartbeat_interval_ms, now)
                }
                Some(server_message::Msg::Welcome(_)) | None => {}
                Some(other) => {
                    if let Some(output) = self.link.output() {
                        self.remote.handle(other, output);
                    }
                }
            },
            Ok(None) => self
                .link
                .down(&self.shared, &self.me.name, "the server closed the stream"),
            Err(s) => self.link.down(&self.shared, &self.me.name, s.message()),
        }
    }

    // ------------------------------------------------------------ desired pods

    /// The server's list of the node's pods.
    async fn desired(&mut self, list: pb::DesiredPods) {
        let wall = rfc3339(self.shared.clock.wall());
        let loud = self.shared.loud;
        let Some(merged) = desired::merge(&mut self.pods, &list, &self.me.name, loud, &wall) else {
            return;
        };
        for (uid, pod) in merged.gone {
            self.ops.leaving(uid, pod);
        }
        let pods = &self.pods;
        self.events.forget_gone(|uid| pods.contains_key(uid));
        self.link.pods_received();
        let confirm = self.shared.confirm_after();
        let wall = self.shared.clock.wall();
        if merged.resend
            || self
                .statics
                .mirrors_seen(merged.mirrors, &self.pods, confirm, wall)
        {
            self.outbox.hold(self.shared.clock.now());
        }
        // A push that only carries statuses (the server sends one after
        // every status it writes) needs no sync.
        if merged.changed {
            self.dirty = true;
            if let Some(dir) = self.data_dir.clone() {
                desired::save(dir, &self.pods, &self.me.name).await;
            }
        }
    }

    /// The manifest dir now holds `pods`.
    fn static_changed(&mut self, pods: Vec<Pod>) {
        let wall = rfc3339(self.shared.clock.wall());
        let gone =
            self.statics
                .changed(pods, &mut self.pods, &wall, &self.me.name, self.shared.loud);
        for (uid, pod) in gone {
            self.ops.leaving(uid, pod);
        }
        self.dirty = true;
    }

    // ------------------------------------------------------------ sync

    async fn sync(&mut self) {
        self.dirty = false;
        let now = self.shared.clock.now();
        let resync = now + self.shared.tuning.resync;
        let observed = match self.runtime.list().await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(node = %self.me.name, "the runtime does not answer: {e}");
                self.next_sync = resync;
                return;
            }
        };
        let wall = self.shared.clock.wall();
        let policy = self.shared.restart_policy();
        let p = plan(&mut self.pods, &observed, self.ops.busy(), &policy, wall);
        tracing::trace!(node = %self.me.name, containers = observed.len(), ops = p.ops.len(), "sync");
        self.events.observe_all(p.notes, &self.shared);
        for op in p.ops {
            self.note_volumes_started(&op);
            self.ops.spawn(
                op,
                &observed,
                &self.pods,
                &self.runtime,
                &self.me,
                self.shared.loud,
                &self.config,
                self.events.sink(),
            );
        }
        self.refresh_volumes(&observed);
        self.probes.sync_workers(
            &observed,
            &self.pods,
            &self.runtime,
            &self.shared.clock,
            &self.me,
        );
        let grouped = group(&observed);
        self.ops.prune_leaving(|uid| grouped.contains_key(uid));
        let cx = StatusContext {
            host_ip: &self.me.host_ip,
            policy: &policy,
            now: wall,
            probes: self.probes.status(),
        };
        let confirm = self.shared.confirm_after();
        let mut changed =
            outbox::refresh(&mut self.pods, &grouped, &cx, self.shared.scheme(), confirm);
        // The server's mirrors still differ from our static pods.
        changed |= self.statics.recheck(&self.pods, confirm, wall);
        if changed {
            self.outbox.hold(now);
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

    // ------------------------------------------------------------ volumes

    /// A start writes the pod's ConfigMap and Secret volumes: note what.
    fn note_volumes_started(&mut self, op: &crate::plan::PodOp) {
        let starts = op.actions.iter().any(|a| {
            matches!(
                a,
                crate::plan::Action::Start { .. } | crate::plan::Action::Replace { .. }
            )
        });
        if !starts {
            return;
        }
        if let Some(v) = self
            .pods
            .get(&op.uid)
            .and_then(|b| self.config.volumes_of(&b.pod))
        {
            self.volumes_applied
                .insert(op.uid.clone(), config::hash(&v));
        }
    }

    /// Rewrites the ConfigMap and Secret volumes of running pods whose
    /// files changed (no restart); pods with an operation running are
    /// looked at on a later sync.
    fn refresh_volumes(&mut self, observed: &[crate::runtime::ContainerInfo]) {
        let pods = &self.pods;
        self.volumes_applied.retain(|uid, _| pods.contains_key(uid));
        self.volume_updates.retain(|_, h| !h.is_finished());
        for (uid, book) in &self.pods {
            if self.ops.busy().contains(uid)
                || self.volume_updates.contains_key(uid)
                || !observed
                    .iter()
                    .any(|c| c.pod_uid == *uid && c.state.is_running())
            {
                continue;
            }
            let Some(v) = self.config.volumes_of(&book.pod) else {
                continue;
            };
            let h = config::hash(&v);
            if self.volumes_applied.get(uid) == Some(&h) {
                continue;
            }
            self.volumes_applied.insert(uid.clone(), h);
            let (rt, pod, name) = (self.runtime.clone(), book.pod.clone(), self.me.name.clone());
            let task = tokio::spawn(async move {
                if let Err(e) = rt.update_volumes(pod.clone(), Arc::new(v)).await {
                    tracing::warn!(node = %name, pod = %pod.metadata.name, "cannot update the pod's ConfigMap/Secret volumes: {e}");
                }
            });
            self.volume_updates.insert(uid.clone(), task);
        }
    }

    // ------------------------------------------------------------ leave

    /// Sends Leave and, once a server took it, stops every pod and forgets
    /// the saved list (see the module docs).
    async fn leave(mut self) -> anyhow::Result<()> {
        self.probes.stop();
        self.statics.stop_watch();
        let left = self.link.leave(&self.shared, &self.me).await;
        // Let running operations end before stopping everything.
        self.ops.finish().await;
        if !left {
            anyhow::bail!(
                "node {}: no server took the leave within {:?}: the node stays in the cluster and its pods keep running; try again once a server answers, or `drover delete node {}` from a client",
                self.me.name,
                self.shared.tuning.leave_timeout,
                self.me.name
            );
        }
        self.shared.stats.left.fetch_add(1, Ordering::Relaxed);
        note!(self.shared.loud, node = %self.me.name, "left the cluster; stopping its pods");
        self.ops.stop_all(&self.pods, &self.runtime, &self.me).await;
        if let Some(dir) = &self.data_dir {
            persist::clear(dir)?;
            crate::link::NodeTls::forget(dir)?;
        }
        Ok(())
    }
}
