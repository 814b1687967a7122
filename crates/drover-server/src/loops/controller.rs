//! The control loops that run on the leader: the DaemonSet controller and
//! the node lifecycle controller. They read the [`Informer`]'s view, ask the
//! pure planners of `drover-controller` what to do, and apply the answer
//! with compare-and-swap writes through [`Objects`].
//!
//! A pass is followed by a wait until the informer has seen every write of
//! the pass, so the next plan never acts on a view that misses its own
//! writes (what Kubernetes calls expectations). Passes run when the view
//! changes, when a planner asked to be woken (backoff, minReadySeconds, a
//! node deadline), and at least every second.

use super::changed::{scoped, Changed, Every, Planned, Planning, Tracker};
use super::revisions::{self, RevisionSync, Revisions, RolledBack};
use super::written_revision as rev;
use crate::api::batch::{Write, Written};
use crate::api::mirror;
use crate::api::Objects;
use crate::cache::{Informer, Snapshot};
use crate::ctx::Ctx;
use drover_api::{DaemonSet, Kind, Manifest, Pod};
use drover_controller::daemon::{self, FailedPodBackoff, PlanInput};
use drover_controller::node::{NodeLifecycle, NodeLifecycleConfig, NodeWatch};
use drover_controller::pod_gc::PodGc;
use drover_controller::Timestamp;
use futures_util::StreamExt;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;

mod lifecycle;

/// Tuning of the loops.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// A node silent this long is NotReady/Unknown (default 5 s).
    pub node_timeout: Duration,
    /// A node unreachable this long is removed (default 1 h).
    pub node_gc_after: Duration,
    /// A pod bound by hand to a node that does not exist is deleted after
    /// this long (default 40 s, as Kubernetes' pod garbage collector), so a
    /// pod applied just before its node is not lost.
    pub orphan_pod_grace: Duration,
    /// Events older than this (since their last occurrence) are deleted
    /// (default 1 h, as the API server's `--event-ttl`).
    pub event_ttl: Duration,
    /// Whether the leader runs the Deployment and ReplicaSet controllers
    /// (default true; as kube-controller-manager's
    /// `--controllers=-deployment,-replicaset`: the objects are served and
    /// stored, and whatever else writes their status and pods is alone).
    pub workloads: bool,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            node_timeout: Duration::from_secs(5),
            node_gc_after: Duration::from_secs(3600),
            orphan_pod_grace: Duration::from_secs(40),
            event_ttl: Duration::from_secs(3600),
            workloads: true,
        }
    }
}

/// Writes of one pass in flight at once.
const CONCURRENT_WRITES: usize = 512;

pub(super) fn now() -> Timestamp {
    Timestamp::from(SystemTime::now())
}

/// Runs the controllers whenever this member leads, until `stop`.
pub async fn run(
    ctx: Arc<Ctx>,
    objects: Objects,
    informer: Informer,
    cfg: ControllerConfig,
    mut stop: watch::Receiver<bool>,
) {
    let mut leader = ctx.store.subscribe_leader();
    loop {
        // Wait to lead.
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            r = leader.wait_for(|l| l.is_leader) => if r.is_err() { return },
        }
        let term = ctx.store.leader().term;
        tracing::info!("leading (term {term}): running the controllers");
        let mut lead = Leading::new(&ctx, objects.clone(), informer.clone(), cfg.clone());
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = leader.wait_for(|l| !l.is_leader || l.term != term) => {
                tracing::info!("no longer leading: controllers paused");
            }
            _ = lead.run() => {}
        }
    }
}

struct Leading {
    ctx: Arc<Ctx>,
    objects: Objects,
    informer: Informer,
    nodes: NodeLifecycle,
    /// Which nodes the next pass must judge (see [`lifecycle`]), and the
    /// origin of the monotonic times it is given.
    node_watch: NodeWatch,
    origin: Instant,
    backoff: HashMap<String, FailedPodBackoff>,
    /// Pods whose DaemonSet or node is gone (see
    /// [`drover_controller::pod_gc`]): since when pods' nodes are missing.
    pod_gc: PodGc,
    rng: StdRng,
    /// ControllerRevisions of the DaemonSets (see [`revisions`]).
    revisions: Revisions,
    /// (DaemonSet uid, revision hash) whose automatic rollback had nothing
    /// to go back to: reported once.
    rollback_skipped: std::collections::HashSet<(String, String)>,
    event_ttl: Duration,
    /// Events go to a writer of their own: recording them never holds up
    /// the next pass (10,000 daemon pods make 20,000 events).
    events: tokio::sync::mpsc::Sender<Vec<drover_api::Event>>,
    /// When expired events are next looked for.
    next_event_gc: Instant,
    /// Since when marking the pods of unreachable nodes waits for the
    /// nodes' own NotReady writes (see [`MAX_POD_MARK_DELAY`]).
    pods_deferred: Option<Instant>,
    /// What the current pass wrote (see [`PassWrites`]).
    wrote: PassWrites,
    /// The view of the last pass and every node's pods (see
    /// [`super::changed`]).
    tracker: Tracker,
    /// Each DaemonSet's memo (by uid): what its last plan knew of every
    /// node.
    memos: HashMap<String, daemon::Memo>,
    /// The owners (DaemonSet and ReplicaSet uids, sorted) the pod garbage
    /// collector last judged by, when its next check is due, and the store
    /// keys of the pods it deleted or watches.
    gc_owners: Vec<String>,
    gc_due: Option<Timestamp>,
    gc_held: Vec<String>,
}

/// What a pass wrote to the objects the view holds: whether it wrote (or
/// tried to write) anything but DaemonSet statuses, and the revisions of
/// the statuses it wrote. A pass woken only by its own status writes would
/// plan what the last one planned and write nothing (the statuses are
/// computed from the pods, and the pods did not change), so the loop does
/// not run it: in a rolling update that was about one pass in seven.
#[derive(Debug)]
struct PassWrites {
    /// Nothing but statuses was written or tried.
    statuses_only: bool,
    /// The statuses written: revision and store key.
    statuses_at: Vec<(u64, String)>,
}

impl Default for PassWrites {
    fn default() -> Self {
        PassWrites {
            statuses_only: true,
            statuses_at: Vec::new(),
        }
    }
}

/// What [`Leading::skip_own_statuses`] found.
enum Skip {
    /// Something else changed (or the pass wrote more than statuses): the
    /// next pass runs when the view says so, as always.
    No,
    /// Only the pass's own statuses changed the view: marked seen.
    Yes,
    /// Marked seen, but something else had just changed: run now.
    RunNow,
}

impl PassWrites {
    /// The pass writes (or tries to write) something else than a status.
    fn other(&mut self) {
        self.statuses_only = false;
    }
}

/// While nodes keep turning NotReady (a sim of 10,000 nodes killed: their
/// deadlines pass over a second), a pass writes only the nodes and leaves
/// their pods for a pass that has no node to write, for at most this long:
/// the node writes, which say the node is gone, are not queued behind
/// 10,000 pod status writes and their events.
const MAX_POD_MARK_DELAY: Duration = Duration::from_secs(2);

/// While the controllers wait for their view to hold their own writes,
/// they warn this often (they never plan on a view without them).
pub(super) const VIEW_WARN_EVERY: Duration = Duration::from_secs(10);

/// A DaemonSet plans only the changed nodes while they are at most this
/// share of the cluster (1/N), or [`MIN_SCOPE`]; beyond, it plans every
/// node (cheaper than gathering nearly all of them one by one).
const MAX_SCOPE_SHARE: usize = 4;

/// Changed nodes a DaemonSet always plans alone, whatever the cluster's
/// size (a small cluster plans as a large one does).
const MIN_SCOPE: usize = 64;

/// How often the leader looks for expired events.
const EVENT_GC_EVERY: Duration = Duration::from_secs(60);

impl Leading {
    fn new(ctx: &Arc<Ctx>, objects: Objects, informer: Informer, cfg: ControllerConfig) -> Self {
        let objects_for_events = objects.clone();
        let config = NodeLifecycleConfig {
            node_timeout: cfg.node_timeout,
            gc_after: cfg.node_gc_after,
        };
        Leading {
            ctx: ctx.clone(),
            objects,
            informer,
            // A new leader gives every node a fresh grace period.
            nodes: NodeLifecycle::new(config, now()),
            node_watch: NodeWatch::default(),
            origin: Instant::now(),
            backoff: HashMap::new(),
            pod_gc: PodGc::new(cfg.orphan_pod_grace),
            rng: StdRng::from_rng(&mut rand::rng()),
            revisions: Revisions::default(),
            rollback_skipped: std::collections::HashSet::new(),
            event_ttl: cfg.event_ttl,
            events: event_writer(objects_for_events),
            // Not at once: a new leader first converges.
            next_event_gc: Instant::now() + EVENT_GC_EVERY.min(cfg.event_ttl / 2),
            pods_deferred: None,
            wrote: PassWrites::default(),
            tracker: Tracker::default(),
            memos: HashMap::new(),
            gc_owners: Vec::new(),
            gc_due: None,
            gc_held: Vec::new(),
        }
    }

    async fn run(&mut self) {
        // Start from a view at least as new as everything committed before:
        // a ReadIndex round (which a new leader answers once the empty entry
        // of its term commits) gives the last revision that changed a key.
        // Not the applied index: the entries that change nothing (that empty
        // entry, membership changes) never reach a watch, so a view could
        // wait for them until some unrelated write (nodes of a dead member
        // would stay Ready meanwhile).
        let committed = self.committed().await;
        self.informer.hold(committed, VIEW_WARN_EVERY).await;
        let mut changes = self.informer.subscribe_view();
        loop {
            // Mark what this pass sees before reading it: a change that
            // arrives during the pass (our own writes included) wakes the
            // next pass at once instead of after the idle timer.
            changes.borrow_and_update();
            let view = self.informer.snapshot();
            let started = Instant::now();
            self.wrote = PassWrites::default();
            let (mut written, wake) = self.pass(&view).await;
            self.ctx
                .metrics
                .controller_pass_duration
                .observe(started.elapsed().as_secs_f64());
            if Instant::now() >= self.next_event_gc {
                written = written.max(self.expire_events().await);
                self.next_event_gc = Instant::now() + EVENT_GC_EVERY.min(self.event_ttl / 2);
            }
            if written > 0 {
                // Our own writes must be in the view before the next plan.
                self.informer.hold(written, VIEW_WARN_EVERY).await;
            }
            let pause = wake
                .map(|t| t.duration_since(now()))
                .unwrap_or(Duration::from_secs(1))
                .clamp(Duration::from_millis(10), Duration::from_secs(1));
            if started.elapsed() > Duration::from_millis(500) {
                tracing::debug!("controller pass took {:?}", started.elapsed());
            }
            match self.skip_own_statuses(&mut changes, view.revision) {
                Skip::No => {}
                Skip::Yes => {
                    self.ctx.metrics.controller_passes_skipped.inc();
                }
                Skip::RunNow => continue,
            }
            tokio::select! {
                r = changes.changed() => if r.is_err() { return },
                // A node that was silent is back: judge it now.
                _ = self.ctx.heartbeats.node_back() => {}
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    async fn committed(&self) -> u64 {
        committed(&self.ctx).await
    }

    /// Whether the next pass can wait for a change that is not the last
    /// pass's own: that pass planned from revision `since` and wrote only
    /// DaemonSet statuses, and nothing else changed the view since. The
    /// view is then marked seen ([`Skip::Yes`]); when something else
    /// changed it just as it was marked, the next pass must run at once
    /// ([`Skip::RunNow`]).
    fn skip_own_statuses(&self, changes: &mut watch::Receiver<u64>, since: u64) -> Skip {
        let w = &self.wrote;
        if !w.statuses_only || w.statuses_at.is_empty() {
            return Skip::No;
        }
        let ours = |to: u64| {
            self.informer
                .view_changed_only_at(since, to, &w.statuses_at)
        };
        if !ours(*changes.borrow()) {
            return Skip::No;
        }
        // Marks what is there now, which may be newer than what was checked.
        let seen = *changes.borrow_and_update();
        if ours(seen) {
            Skip::Yes
        } else {
            Skip::RunNow
        }
    }

    /// One pass of both controllers. Answers the highest revision written
    /// and when a planner wants to run again.
    async fn pass(&mut self, view: &Arc<Snapshot>) -> (u64, Option<Timestamp>) {
        let now = now();
        let mut written = 0u64;
        let mut wake: Option<Timestamp> = None;
        let mut soonest = |t: Option<Timestamp>| {
            if let Some(t) = t {
                wake = Some(wake.map_or(t, |w: Timestamp| w.min(t)));
            }
        };

        // Node lifecycle first: its writes wake the next pass; the
        // DaemonSets plan from this view meanwhile. (The tracker is taken
        // out for the pass: the plans borrow its pods.)
        let mut tracker = std::mem::take(&mut self.tracker);
        let changed = tracker.advance(view);
        let (w, t) = self.node_lifecycle(view, &tracker, &changed, now).await;
        written = written.max(w);
        soonest(t);
        let every = Every::new(view);

        // DaemonSets. Each plan gets the pods it may touch: those it
        // controls and those without a controller (which it may adopt); a
        // pod controlled by anything else is never its business. A
        // DaemonSet whose memo holds its last plan gets only the nodes that
        // changed since (and those its memo revisits), with their pods.
        let mut by_controller = None;
        let mut planned: Vec<Planned<'_>> = Vec::with_capacity(view.daemon_sets.len());
        for ds in view.daemon_sets.values() {
            let memo = self
                .memos
                .remove(ds.metadata.uid.as_str())
                .unwrap_or_default();
            // When most nodes changed (an apply of a new DaemonSet), a
            // plan of every node is cheaper than gathering them one by one.
            let scope = match &changed {
                Changed::Nodes(set)
                    if set.len() <= (view.nodes.len() / MAX_SCOPE_SHARE).max(MIN_SCOPE)
                        && memo.is_valid_for(ds, self.revisions.settled_hash(ds)) =>
                {
                    let mut scope = set.clone();
                    scope.extend(memo.revisit().map(str::to_owned));
                    Some(scope)
                }
                _ => None,
            };
            let (ds_nodes, mine) = match &scope {
                Some(scope) => scoped(&tracker, view, ds, scope),
                None => {
                    let (by_owner, bare) = by_controller
                        .get_or_insert_with(|| super::pods_by_controller(every.pods()));
                    let ns = ds.metadata.namespace.as_str();
                    let mine: Vec<&Pod> = by_owner
                        .get(ds.metadata.uid.as_str())
                        .into_iter()
                        .flatten()
                        .copied()
                        .chain(bare.iter().copied().filter(|p| p.metadata.namespace == ns))
                        .collect();
                    (every.nodes().to_vec(), mine)
                }
            };
            // The claim, made once: it says which nodes are settled (below)
            // and the plan starts from it.
            let claim = daemon::claim(ds, &mine);
            planned.push(Planned {
                ds,
                nodes: ds_nodes,
                mine,
                claim,
                scope,
                memo,
            });
        }
        // What each node's pods request and the ports they hold: a daemon
        // pod is placed only where it fits. Only the nodes some plan may
        // ask about (those where a DaemonSet has no bound pod: in a rolling
        // update, the node being replaced) are counted, not every pod of
        // the cluster on every pass.
        let mut unsettled: drover_controller::FastSet<&str> = drover_controller::FastSet::default();
        for p in &planned {
            if let Some(claim) = &p.claim {
                unsettled.extend(
                    p.nodes
                        .iter()
                        .map(|n| n.metadata.name.as_str())
                        .filter(|n| !claim.is_settled(n)),
                );
            }
        }
        let priorities = drover_api::Priorities::new(view.priority_classes.values().map(|c| &**c));
        let keep = |node: &str| unsettled.contains(node);
        let mut usage = if planned.iter().any(|p| p.scope.is_none()) {
            daemon::NodeUsage::with_priorities_on(every.pods().iter().copied(), priorities, keep)
        } else {
            // Each pod once: on the node it counts on (bound, or nominated).
            let on_unsettled = unsettled.iter().flat_map(|&n| {
                tracker
                    .pods_on(n)
                    .filter(move |p| daemon::fit::counted_on(p) == n)
            });
            daemon::NodeUsage::with_priorities_on(on_unsettled, priorities, keep)
        };
        // Higher priority first: a DaemonSet that preempts takes the room it
        // made before one of lower priority can take it back.
        planned.sort_by_key(|p| {
            let priority = usage
                .priority_of(&p.ds.spec.template.spec)
                .map_or(0, |(p, _)| p);
            std::cmp::Reverse(priority)
        });
        let mut live = drover_controller::FastSet::default();
        for p in planned {
            live.insert(p.ds.metadata.uid.clone());
            let uid = p.ds.metadata.uid.clone();
            let mut memo = p.memo;
            let scope: Option<drover_controller::FastSet<&str>> = p
                .scope
                .as_ref()
                .map(|s| s.iter().map(String::as_str).collect());
            self.ctx
                .metrics
                .controller_daemon_nodes_planned
                .inc_by(p.nodes.len() as u64);
            let planning = Planning {
                nodes: &p.nodes,
                pods: &p.mine,
                claim: p.claim,
                scope: match &scope {
                    Some(s) => daemon::Scope::Changed(s),
                    None => daemon::Scope::All,
                },
                memo: &mut memo,
                view,
            };
            let (w, t) = self.sync_daemon_set(p.ds, planning, &mut usage, now).await;
            self.memos.insert(uid, memo);
            written = written.max(w);
            soonest(t);
        }
        self.memos.retain(|uid, _| live.contains(uid));
        drop(usage);
        self.tracker = tracker;
        self.backoff.retain(|uid, _| live.contains(uid));
        self.rollback_skipped.retain(|(uid, _)| live.contains(uid));
        let pruned = self.revisions.retain(&self.objects, &live).await;
        if pruned > 0 {
            self.wrote.other();
        }
        written = written.max(pruned);

        // Pods of DaemonSets and ReplicaSets that are gone, and bare pods
        // of nodes that left.
        let replica_sets: drover_controller::FastSet<&str> = view
            .replica_sets
            .values()
            .map(|rs| rs.metadata.uid.as_str())
            .collect();
        // Unless nodes or owners came or went, or a watched pod's grace
        // ends, only the pods that changed since the last pass (and those
        // the last collection deleted or watches) can change its verdict.
        let mut owners: Vec<&str> = live
            .iter()
            .map(String::as_str)
            .chain(replica_sets.iter().copied())
            .collect();
        owners.sort_unstable();
        let whole = self.tracker.nodes_came_or_went
            || self.gc_owners.len() != owners.len()
            || self.gc_owners.iter().zip(&owners).any(|(a, b)| a != b)
            || self.gc_due.is_some_and(|t| now >= t);
        let owner_exists = |uid: &str| live.contains(uid) || replica_sets.contains(uid);
        let node_exists = |name: &str| view.node(name).is_some();
        // Mirror pods go with their node: the same pods can tell.
        let (gc, mirrors) = if whole {
            let gc = self.pod_gc.plan(
                every.nodes().iter().copied(),
                every.pods().iter().copied(),
                owner_exists,
                now,
            );
            (
                gc,
                mirror::orphaned(node_exists, every.pods().iter().copied()),
            )
        } else {
            let some: drover_controller::FastSet<&str> = self
                .tracker
                .pods_changed
                .iter()
                .chain(self.gc_held.iter())
                .map(String::as_str)
                .collect();
            let some: Vec<&Pod> = some
                .into_iter()
                .filter_map(|k| view.pods.get(k))
                .map(|p| &**p)
                .collect();
            let gc = self
                .pod_gc
                .plan_some(node_exists, some.iter().copied(), owner_exists, now);
            (gc, mirror::orphaned(node_exists, some))
        };
        self.gc_owners = owners.into_iter().map(str::to_owned).collect();
        self.gc_due = gc.next_check;
        // A delete that fails is tried again on the next pass.
        self.gc_held = gc
            .delete
            .iter()
            .chain(gc.watched.iter())
            .chain(mirrors.iter())
            .map(|p| crate::api::codec::key(Kind::Pod, &p.metadata.namespace, &p.metadata.name))
            .collect();
        soonest(gc.next_check);
        self.record(gc.events).await;
        let mut doomed = gc.delete;
        doomed.extend(mirrors);
        if !doomed.is_empty() {
            self.wrote.other();
        }
        let deletes = doomed
            .iter()
            .map(|p| Write::Delete(Kind::Pod, Box::new(p.metadata.clone())))
            .collect();
        for (p, r) in doomed.iter().zip(self.objects.execute(deletes).await) {
            match r {
                Ok(w) => written = written.max(w.revision()),
                Err(e) => {
                    tracing::debug!(pod = %p.metadata.name, "garbage collection: {}", e)
                }
            }
        }
        (written, wake)
    }

    async fn sync_daemon_set<'a>(
        &mut self,
        ds: &DaemonSet,
        planning: Planning<'_, 'a>,
        usage: &mut daemon::NodeUsage,
        now: Timestamp,
    ) -> (u64, Option<Timestamp>) {
        let Planning {
            nodes,
            pods,
            claim,
            scope,
            memo,
            view,
        } = planning;
        let uid = ds.metadata.uid.clone();
        let backoff = self.backoff.remove(&uid).unwrap_or_default();
        // Revisions first: the planner labels new pods with the current one.
        let revs = if ds.metadata.deletion_timestamp.is_none() {
            self.revisions.sync(&self.objects, ds, pods).await
        } else {
            RevisionSync::default()
        };
        let with_collisions;
        let ds = match revs.collision_count {
            Some(c) => {
                let mut d = ds.clone();
                d.status.collision_count = Some(c);
                with_collisions = d;
                &with_collisions
            }
            None => ds,
        };
        // A scope is planned only from a memo of this very revision
        // (checked before the pass took the revision; should the two
        // differ, the next pass plans every node).
        if matches!(scope, daemon::Scope::Changed(_))
            && !memo.is_valid_for(ds, revs.hash.as_deref())
        {
            memo.clear();
            self.backoff.insert(uid, backoff);
            self.wrote.other();
            return (revs.written, Some(now));
        }
        let taken = |ns: &str, name: &str| {
            view.pods
                .contains_key(&crate::api::codec::key(Kind::Pod, ns, name))
        };
        let mut input = PlanInput::new(ds, nodes.iter().copied(), pods.iter().copied(), now)
            .with_backoff(&backoff)
            .with_usage(usage)
            .with_name_taken(daemon::NameTaken(&taken));
        if let Some(hash) = revs.hash.as_deref() {
            input = input.with_revision_hash(hash);
        }
        let mut plan = daemon::plan_memo(&input, claim, memo, scope, &mut self.rng);
        drop(input);
        // What this plan places and preempts counts for the DaemonSets
        // planned after it.
        for c in &plan.create {
            usage.add(&c.pod);
        }
        for d in &plan.delete {
            if matches!(d.reason, daemon::DeletionReason::Preempted { .. }) {
                usage.remove(&d.node_name, &d.uid);
            }
        }
        if revs.collision_count.is_some() {
            plan.status_changed = true;
        }
        self.backoff.insert(uid, plan.backoff.clone());
        let mut written = revs.written;
        if written > 0 || plan.changes_pods() || plan.finalize || !plan.unschedulable.is_empty() {
            self.wrote.other();
        }
        let mut events = plan.events.clone();

        for pod in plan.adopt.iter().chain(plan.release.iter()) {
            match self
                .objects
                .update(Manifest::Pod(Box::new(pod.clone())))
                .await
            {
                Ok(m) => written = written.max(rev(&m)),
                Err(e) => {
                    tracing::debug!(pod = %pod.metadata.name, "adopt/release: {}", e)
                }
            }
        }
        // Deleted with its pods orphaned, and every pod released (by an
        // earlier pass, as this pass read them): the DaemonSet goes, at the
        // version planned from (a change since then waits for the next pass).
        if plan.finalize {
            match self
                .objects
                .delete_read(Kind::DaemonSet, &ds.metadata)
                .await
            {
                Ok(w) => written = written.max(w),
                Err(e) => {
                    tracing::debug!(daemonset = %ds.metadata.name, "orphan finalizer: {}", e)
                }
            }
        }
        // Waiting pods that fit now are bound (compare-and-swap on the
        // version planned from); those whose reason changed say so.
        for pod in &plan.bind {
            usage.add(pod);
            match self
                .objects
                .update(Manifest::Pod(Box::new(pod.clone())))
                .await
            {
                Ok(m) => {
                    written = written.max(rev(&m));
                    if let Manifest::Pod(p) = &m {
                        events.push(super::events::scheduled(p, now));
                    }
                }
                Err(e) => tracing::debug!(pod = %pod.metadata.name, "bind: {}", e),
            }
        }
        for pod in &plan.unschedulable {
            usage.add(pod);
            let m = &pod.metadata;
            let status = match serde_json::to_value(&pod.status) {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(pod = %m.name, "cannot encode its status: {e}");
                    continue;
                }
            };
            match self
                .objects
                .update_status(Kind::Pod, &m.namespace, &m.name, &m.uid, status)
                .await
            {
                Ok(written_pod) => {
                    written = written.max(rev(&written_pod));
                    events.push(super::events::failed_scheduling(pod, now));
                }
                Err(e) => tracing::debug!(pod = %m.name, "unschedulable: {}", e),
            }
        }
        // Deletions, creations and the status go in one batch: one raft
        // entry (and one change of the view) for the whole step instead of
        // one for each; if any precondition fails, the executor makes each
        // write alone. A deletion's precondition is the uid (an adopted pod
        // changed its resourceVersion in this very plan, so do not pin
        // that): each pod is deleted at the version this member holds, if
        // it is still that incarnation.
        let mut doomed = Vec::new();
        let mut writes = Vec::new();
        for d in &plan.delete {
            match self
                .objects
                .get_local(Kind::Pod, &d.namespace, &d.name)
                .await
            {
                Ok(m) if m.metadata().uid == d.uid => {
                    writes.push(Write::Delete(Kind::Pod, Box::new(m.metadata().clone())));
                    doomed.push(d);
                }
                _ => {}
            }
        }
        writes.extend(
            plan.create
                .iter()
                .map(|c| Write::Create(Manifest::Pod(Box::new(c.pod.clone())))),
        );
        if plan.status_changed {
            let mut with_status = ds.clone();
            with_status.status = plan.status.clone();
            writes.push(Write::Update(Manifest::DaemonSet(Box::new(with_status))));
        }
        let mut results = self.objects.execute(writes).await.into_iter();
        for d in doomed {
            match results.next() {
                Some(Ok(w)) => {
                    written = written.max(w.revision());
                    events.push(d.event.clone());
                }
                Some(Err(e)) => tracing::debug!(pod = %d.name, "delete: {}", e),
                None => {}
            }
        }
        for c in &plan.create {
            let Some(r) = results.next() else { break };
            let r = r.map(|w| match w {
                Written::Created(m) => m,
                Written::Deleted(_) | Written::Updated(_) => Manifest::Pod(Box::new(c.pod.clone())),
            });
            match r {
                Ok(m) => {
                    written = written.max(rev(&m));
                    events.push(c.event.clone());
                    // Daemon pods are bound by the controller itself: the
                    // scheduler's event says so, as in Kubernetes (or why
                    // the pod waits unbound).
                    if let Manifest::Pod(p) = &m {
                        events.push(if p.spec.node_name.is_empty() {
                            super::events::failed_scheduling(p, now)
                        } else {
                            super::events::scheduled(p, now)
                        });
                    }
                }
                Err(e) => {
                    tracing::warn!(pod = %c.pod.metadata.name, "create: {}", e);
                    events.push(drover_controller::events::failed_create(
                        ds,
                        &e.to_string(),
                        now,
                        &mut self.rng,
                    ));
                }
            }
        }
        match results.next() {
            Some(Ok(w)) => {
                written = written.max(w.revision());
                let key = crate::api::codec::key(
                    Kind::DaemonSet,
                    &ds.metadata.namespace,
                    &ds.metadata.name,
                );
                self.wrote.statuses_at.push((w.revision(), key));
            }
            // Written on the version this pass read: a change since then
            // (a user's apply) refuses it, and the pass that change wakes
            // writes the status again.
            Some(Err(e)) => {
                self.wrote.other();
                tracing::debug!(ds = %ds.metadata.name, "status: {}", e)
            }
            None => {}
        }
        let mut requeue_at = plan.requeue_at;
        if let (Some(due), Some(hash)) = (&plan.rollback, revs.hash.as_deref()) {
            let key = (ds.metadata.uid.clone(), hash.to_owned());
            if !self.rollback_skipped.contains(&key) {
                self.wrote.other();
                match revisions::roll_back(&self.objects, ds, hash, due, now, &mut self.rng).await {
                    RolledBack::Done(w, event) => {
                        written = written.max(w);
                        events.push(event);
                    }
                    RolledBack::Impossible(event) => {
                        self.rollback_skipped.insert(key);
                        events.push(event);
                    }
                    RolledBack::Failed => {
                        let again = now + Duration::from_secs(1);
                        requeue_at = Some(requeue_at.map_or(again, |t| t.min(again)));
                    }
                }
            }
        }
        self.record(events).await;
        (written, requeue_at)
    }

    /// Deletes the events older than the TTL (compare-and-swap on the
    /// version listed: an event recorded again meanwhile stays). Answers
    /// the highest revision written.
    async fn expire_events(&self) -> u64 {
        let Ok((events, _)) = self.objects.list(Kind::Event, None, None).await else {
            return 0;
        };
        let now = now();
        let doomed = events.into_iter().filter_map(|m| match m {
            Manifest::Event(e) if drover_controller::events::expired(&e, self.event_ttl, now) => {
                Some(e)
            }
            _ => None,
        });
        let deletions = doomed.map(|e| {
            let objects = self.objects.clone();
            async move {
                objects
                    .delete_read(Kind::Event, &e.metadata)
                    .await
                    .unwrap_or(0)
            }
        });
        let revs: Vec<u64> = futures_util::stream::iter(deletions)
            .buffer_unordered(CONCURRENT_WRITES)
            .collect()
            .await;
        if !revs.is_empty() {
            tracing::debug!("deleted {} expired events", revs.len());
        }
        revs.into_iter().max().unwrap_or(0)
    }

    /// Writes events; failures only cost the event.
    /// Hands events to the writer (waiting only when it is far behind).
    async fn record(&self, events: Vec<drover_api::Event>) {
        if !events.is_empty() {
            let _ = self.events.send(events).await;
        }
    }
}

/// The store's last change, as of a ReadIndex round; retried until it
/// answers (whoever runs this cancels it when leadership is lost).
pub(super) async fn committed(ctx: &Ctx) -> u64 {
    loop {
        let store = &ctx.store;
        match ctx.read(|| store.consistent_revision()).await {
            Ok(r) => return r,
            Err(e) => {
                tracing::info!("the controllers wait for a ReadIndex round: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Batches of events the controllers' writer holds before `record` waits.
const EVENT_BATCHES: usize = 64;

/// The controllers' event writer: writes what it is handed, up to
/// [`CONCURRENT_WRITES`] at once, until the leader's controllers stop.
pub(super) fn event_writer(objects: Objects) -> tokio::sync::mpsc::Sender<Vec<drover_api::Event>> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<drover_api::Event>>(EVENT_BATCHES);
    tokio::spawn(async move {
        while let Some(mut events) = rx.recv().await {
            // What queued meanwhile goes in the same transactions.
            while let Ok(more) = rx.try_recv() {
                events.extend(more);
            }
            let writes = events
                .into_iter()
                .map(|e| Write::Create(Manifest::Event(Box::new(e))))
                .collect();
            for r in objects.execute(writes).await {
                if let Err(err) = r {
                    tracing::debug!("event not recorded: {}", err);
                }
            }
        }
    });
    tx
}
