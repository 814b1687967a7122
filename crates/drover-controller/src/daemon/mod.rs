//! The DaemonSet planner: one pod on every eligible node, as a pure diff of
//! the desired placement against the pods that exist.
//!
//! It follows Kubernetes' daemon controller
//! (`pkg/controller/daemon/daemon_controller.go`) rule for rule, and
//! Nomad's system scheduler in shape: [`plan`] takes everything it needs as
//! values (the nodes, one DaemonSet, the pods, the failed-pod backoff, `now`
//! and an RNG) and returns a [`DaemonSetPlan`] for the loop on the leader
//! to apply with compare-and-swap writes. Nothing is read from a clock, the
//! network or the disk, so the same inputs and seed always give the same
//! plan.
//!
//! # Which pods are the DaemonSet's (`getDaemonPods`, `ClaimPods`)
//!
//! Pods of the DaemonSet's namespace whose controller reference has the
//! DaemonSet's UID and whose labels match its selector. A pod it controls
//! that no longer matches is *released* (owner reference removed; it keeps
//! running as a bare pod). A matching pod without controller, bound to a
//! node and not being deleted, is *adopted*, and counts as the DaemonSet's
//! in the same plan. Pods controlled by anything else are never touched.
//!
//! # Per node (`podsShouldBeOnNode`)
//!
//! With the node's verdict from [`Eligibility`] (see [`eligibility`]) and
//! the DaemonSet's pods bound to it — *including pods being deleted*:
//!
//! - should run and no pod at all: create one, bound to the node; where it
//!   does not fit ([`fit`]), unbound and pinned to the node by node
//!   affinity, `Pending` with `PodScheduled=False`, and bound by a later
//!   plan once it fits ([`DaemonSetPlan::bind`]). A pod being deleted still
//!   counts, so its replacement is created once it is gone, never beside it;
//! - should continue running:
//!   - pods being deleted are left alone;
//!   - a `Failed` pod is deleted (event `FailedDaemonPod`) unless the node
//!     is in failed-pod backoff (see [`backoff`]), which the deletion then
//!     extends; the replacement comes with the next plan, once it is gone;
//!   - a `Succeeded` pod is deleted (event `SucceededDaemonPod`);
//!   - of the other pods, all but the first in Kubernetes' order (bound,
//!     oldest, then by name: [`pods::oldest_first`]) are deleted: never two
//!     pods of one DaemonSet on one node;
//! - should not continue running (labels, affinity or an untolerated
//!   `NoExecute` taint): every pod not already being deleted is deleted.
//!
//! Pods of the DaemonSet bound (or pinned) to a node that does not exist,
//! or to no node, are deleted at once. (Kubernetes leaves bound ones to its pod
//! garbage collector; drover's, [`crate::pod_gc`], waits a grace period
//! before it deletes the *other* pods of a missing node.)
//!
//! # Status (`updateDaemonSetStatus`)
//!
//! Computed from the pods as they are (before the plan is applied, as
//! Kubernetes does; the next plan sees the result): for every node that
//! should run the pod, `desiredNumberScheduled`; if it has a pod (any, even
//! being deleted) `currentNumberScheduled`, and its first pod counts for
//! `numberReady`, `numberAvailable` (ready for longer than
//! `minReadySeconds`) and `updatedNumberScheduled`; a node that should not
//! run the pod but has one counts in `numberMisscheduled`;
//! `numberUnavailable` is desired minus available, and
//! `observedGeneration` the DaemonSet's generation.
//!
//! `updatedNumberScheduled` is the hook for rolling updates: without a
//! revision ([`PlanInput::revision_hash`] `None`) every scheduled pod counts
//! as updated; with one, new pods get the `controller-revision-hash` label
//! and only pods carrying that hash count.
//!
//! # How `plan` goes about it
//!
//! As Nomad's system scheduler (`diffSystemAllocsForNode`, then the
//! placements and the rolling update over its buckets), in small steps:
//!
//! 1. the claim: the DaemonSet's pods by node, the orphans to adopt and the
//!    pods to release (`diff::claim_pods`);
//! 2. the per-node diff: each node's pods sorted into buckets — place,
//!    keep, stop (with a [`DeletionReason`]), being deleted — from the
//!    node's [`NodeEligibility`] (`diff::diff_node`), and the pods of
//!    missing nodes or none (`diff::stray_pods`);
//! 3. the status, counted from the buckets (`status::count`);
//! 4. the writes of each node's buckets, where the failed-pod backoff
//!    decides whether a failed pod goes now, then those of the strays;
//! 5. one rolling-update step over the buckets ([`rollout`]), when steps
//!    2–4 write no pod.
//!
//! Steps 1–3 draw nothing from the RNG; steps 4 and 5 draw in node order.
//! Steps 3 and 5 read only each node's facts (`facts::NodeFacts`: a few
//! booleans: should run, Ready, its first pod ready and updated, its new
//! and old pod), not its pods.
//!
//! # Planning only what changed
//!
//! [`plan_memo`] keeps every node's facts in a [`Memo`] between passes;
//! with [`Scope::Changed`] it diffs only the nodes whose Node or pods
//! changed, and counts the status and takes the rolling-update step over
//! the kept facts of the others (see [`memo`] for what the caller owes
//! it). A rolling update of N nodes takes about 3N passes, so a plan of
//! every node made it cost N²; the property tests check at every step that
//! the plan with a memo is the plan of the whole cluster.
//!
//! # Describe and `rollout status`
//!
//! [`explain()`] runs the same claim and diff for people: the pods the
//! DaemonSet owns, every node without a pod and why
//! ([`NoPod`]: the [`Ineligibility`] reasons, or not created yet), and the
//! nodes a rollout waits on, each with a [`WaitReason`]. The plan itself
//! carries only what to write.

pub mod backoff;
mod diff;
pub mod eligibility;
pub mod explain;
mod facts;
pub mod fit;
pub mod memo;
pub mod pods;
pub mod rollout;
mod status;
mod writes;

use crate::FastSet;
use std::fmt;

use drover_api::selector::Selector;
use drover_api::{event_type, DaemonSet, DaemonSetStatus, Event, Node, Pod};
use rand::RngCore;

pub use backoff::FailedPodBackoff;
pub use eligibility::{node_should_run_daemon_pod, Eligibility, Ineligibility, NodeEligibility};
pub use explain::{
    explain, Explanation, Idle, NoPod, NodeWait, NodeWithoutPod, PodPhases, RolloutProgress,
    WaitReason,
};
pub use fit::{Misfit, NodeUsage};
pub use memo::{Memo, Scope};

use crate::events::{self, namespace_of, reason};
use crate::time::Timestamp;
use diff::NodeDiff;
use writes::{deletion, preemption, NewPods, Rollout};
// The unit tests (`tests.rs`) take these from here with `use super::*`.
use pods::is_terminating;
#[cfg(test)]
use {drover_api::PodPhase, std::time::Duration};

static NO_BACKOFF: FailedPodBackoff = FailedPodBackoff::new();

/// What the planner needs to know, as values.
///
/// Nodes and pods are held by reference, so that a caller that keeps them
/// elsewhere (the server's informer) plans without copying them.
#[derive(Debug, Clone)]
pub struct PlanInput<'a> {
    /// The DaemonSet.
    pub daemon_set: &'a DaemonSet,
    /// Every node of the cluster.
    pub nodes: Vec<&'a Node>,
    /// The pods: all of them, or at least those of the DaemonSet's namespace
    /// that it controls or that match its selector. Pods of other
    /// namespaces are ignored.
    pub pods: Vec<&'a Pod>,
    /// The failed-pod backoff the previous plan returned
    /// ([`DaemonSetPlan::backoff`]), or an empty one.
    pub backoff: &'a FailedPodBackoff,
    /// The current time.
    pub now: Timestamp,
    /// The hash of the current template revision (its ControllerRevision),
    /// once rolling updates exist; `None` until then.
    pub revision_hash: Option<&'a str>,
    /// What every node's pods request and the host ports they hold (built
    /// from all the cluster's pods): a pod is placed only where it fits.
    /// `None`: fits are not checked.
    pub usage: Option<&'a NodeUsage>,
    /// Whether a pod of this namespace and name exists: the names a new
    /// pod must avoid. `None`: the names of `pods` (which must then hold
    /// every pod of the namespace).
    pub name_taken: Option<NameTaken<'a>>,
}

/// Whether a pod of this namespace and name exists (see
/// [`PlanInput::name_taken`]).
#[derive(Clone, Copy)]
pub struct NameTaken<'a>(pub &'a (dyn Fn(&str, &str) -> bool + Sync));

impl fmt::Debug for NameTaken<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NameTaken(..)")
    }
}

impl<'a> PlanInput<'a> {
    /// Input with an empty backoff and no revision.
    pub fn new(
        daemon_set: &'a DaemonSet,
        nodes: impl IntoIterator<Item = &'a Node>,
        pods: impl IntoIterator<Item = &'a Pod>,
        now: Timestamp,
    ) -> Self {
        PlanInput {
            daemon_set,
            nodes: nodes.into_iter().collect(),
            pods: pods.into_iter().collect(),
            backoff: &NO_BACKOFF,
            now,
            revision_hash: None,
            usage: None,
            name_taken: None,
        }
    }

    /// The same input with a check of the names taken (for an input that
    /// holds only some of the namespace's pods).
    pub fn with_name_taken(self, taken: NameTaken<'a>) -> Self {
        PlanInput {
            name_taken: Some(taken),
            ..self
        }
    }

    /// The same input with the nodes' usage: a pod is placed only where it
    /// fits ([`fit`]).
    pub fn with_usage(self, usage: &'a NodeUsage) -> Self {
        PlanInput {
            usage: Some(usage),
            ..self
        }
    }

    /// The same input with the backoff state of the previous plan.
    pub fn with_backoff(self, backoff: &'a FailedPodBackoff) -> Self {
        PlanInput { backoff, ..self }
    }

    /// The same input with a current revision hash.
    pub fn with_revision_hash(self, revision_hash: &'a str) -> Self {
        PlanInput {
            revision_hash: Some(revision_hash),
            ..self
        }
    }
}

/// A pod to create, with the event to record once it is.
#[derive(Debug, Clone, PartialEq)]
pub struct PodCreation {
    /// The whole pod (name, labels, owner reference, `spec.nodeName`, daemon
    /// tolerations); the store fills in uid and creation time.
    pub pod: Pod,
    /// `SuccessfulCreate`, to record when the create succeeds
    /// ([`events::failed_create`] otherwise).
    pub event: Event,
}

/// A pod to delete, why, and the event to record once it is.
#[derive(Debug, Clone, PartialEq)]
pub struct PodDeletion {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The pod's UID: the precondition of the delete (never a namesake).
    pub uid: String,
    /// The pod's resource version when planned. An orphan can be adopted
    /// and deleted in the same plan (as in Kubernetes), which changes it:
    /// apply adoptions first and delete on `uid`, not on this.
    pub resource_version: String,
    /// The node it is bound to (empty when none).
    pub node_name: String,
    /// Why it goes.
    pub reason: DeletionReason,
    /// `SuccessfulDelete`, to record when the delete succeeds
    /// ([`events::failed_delete`] otherwise).
    pub event: Event,
}

/// Why a daemon pod is deleted.
#[derive(Debug, Clone, PartialEq)]
pub enum DeletionReason {
    /// The node should no longer run it: labels or affinity no longer match,
    /// or a `NoExecute` taint is not tolerated.
    NotEligible(Vec<Ineligibility>),
    /// The pod failed; a new one replaces it (with backoff).
    Failed,
    /// The pod exited successfully; a new one replaces it.
    Succeeded,
    /// Another pod of the DaemonSet runs on the node (the oldest is kept).
    Duplicate {
        /// The pod that is kept.
        kept: String,
    },
    /// The pod's node does not exist.
    NodeGone,
    /// The pod is bound to no node.
    Unbound,
    /// The DaemonSet is deleted.
    DaemonSetDeleted,
    /// A rolling update replaces it with a pod of the current revision.
    Rollout,
    /// A daemon pod of higher priority needs its place on the node (it
    /// may belong to another DaemonSet, or to none).
    Preempted {
        /// The DaemonSet whose pod takes the place, `namespace/name`.
        by: String,
    },
}

impl fmt::Display for DeletionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeletionReason::NotEligible(reasons) => {
                f.write_str("the node should no longer run it: ")?;
                for (i, reason) in reasons.iter().filter(|r| r.evicts()).enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{reason}")?;
                }
                Ok(())
            }
            DeletionReason::Failed => f.write_str("the pod failed and is replaced"),
            DeletionReason::Succeeded => f.write_str("the pod exited and is replaced"),
            DeletionReason::Duplicate { kept } => {
                write!(f, "another pod of the DaemonSet, {kept}, runs on the node")
            }
            DeletionReason::NodeGone => f.write_str("its node no longer exists"),
            DeletionReason::Unbound => f.write_str("it is bound to no node"),
            DeletionReason::DaemonSetDeleted => f.write_str("its DaemonSet is deleted"),
            DeletionReason::Rollout => f.write_str("a rolling update replaces it"),
            DeletionReason::Preempted { by } => {
                write!(f, "preempted for a pod of DaemonSet {by} (higher priority)")
            }
        }
    }
}

/// What to do for one DaemonSet.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DaemonSetPlan {
    /// Pods to create, at most one per node.
    pub create: Vec<PodCreation>,
    /// Pods to delete.
    pub delete: Vec<PodDeletion>,
    /// Orphans to adopt: the pods with the DaemonSet added as controller, to
    /// write with compare-and-swap on their resource version.
    pub adopt: Vec<Pod>,
    /// Waiting pods that fit their node now: the pods bound to it
    /// (`spec.nodeName` set, `PodScheduled=True`), to write with
    /// compare-and-swap on their resource version (the scheduler's bind).
    pub bind: Vec<Pod>,
    /// Waiting pods whose reason changed: the pods with their new
    /// `PodScheduled=False` message, to write as their status.
    pub unschedulable: Vec<Pod>,
    /// Pods to release: the pods without the DaemonSet's owner reference.
    pub release: Vec<Pod>,
    /// The new status (the old one when nothing is known).
    pub status: DaemonSetStatus,
    /// Whether `status` differs from the DaemonSet's.
    pub status_changed: bool,
    /// Events about decisions (`FailedDaemonPod`, `SucceededDaemonPod`,
    /// `SelectingAll`), to record now. Creations and deletions carry their
    /// own.
    pub events: Vec<Event>,
    /// The failed-pod backoff to pass to the next plan.
    pub backoff: FailedPodBackoff,
    /// When to plan again even if nothing changes: a node's backoff ends, or
    /// a ready pod becomes available (`minReadySeconds`).
    pub requeue_at: Option<Timestamp>,
    /// The DaemonSet's automatic rollback policy was met: the server writes
    /// the previous revision's template back (see
    /// [`rollout::rollback_target`]).
    pub rollback: Option<rollout::RollbackDue>,
    /// The DaemonSet is being deleted (its pods orphaned or deleted) and no
    /// pod has it as owner any more: the server removes the DaemonSet
    /// itself now (its finalizer is done; see [`ORPHAN_FINALIZER`] and
    /// [`FOREGROUND_FINALIZER`]).
    pub finalize: bool,
}

/// The finalizer of a DaemonSet deleted with `propagationPolicy: Orphan`
/// (Kubernetes' `orphan`): while the DaemonSet carries it and a
/// `deletionTimestamp`, the planner releases its pods (removes its owner
/// reference from them) instead of deleting them, adopts and creates
/// nothing, and asks for the DaemonSet's removal once no pod is its.
pub const ORPHAN_FINALIZER: &str = "orphan";

/// The finalizer of a DaemonSet deleted with `propagationPolicy:
/// Foreground` (Kubernetes' `foregroundDeletion`): with a
/// `deletionTimestamp` (and without [`ORPHAN_FINALIZER`]) the planner
/// deletes its pods, and asks for the DaemonSet's removal once no pod is
/// its, so that it is seen until its last pod is gone.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// Whether the DaemonSet is being deleted with its pods orphaned.
pub fn is_orphaning(ds: &DaemonSet) -> bool {
    ds.metadata.deletion_timestamp.is_some()
        && ds.metadata.finalizers.iter().any(|f| f == ORPHAN_FINALIZER)
}

impl DaemonSetPlan {
    /// Whether the plan writes nothing (no pod changes, no status change,
    /// no events).
    pub fn is_empty(&self) -> bool {
        self.create.is_empty()
            && self.delete.is_empty()
            && self.adopt.is_empty()
            && self.release.is_empty()
            && self.bind.is_empty()
            && self.unschedulable.is_empty()
            && self.events.is_empty()
            && !self.status_changed
            && !self.finalize
    }

    /// Whether the plan changes pods (creates, deletes, adopts or releases).
    pub fn changes_pods(&self) -> bool {
        !(self.create.is_empty()
            && self.delete.is_empty()
            && self.adopt.is_empty()
            && self.release.is_empty()
            && self.bind.is_empty())
    }

    /// Every event, assuming every write succeeds: the decision events,
    /// then those of the creations and deletions.
    pub fn all_events(&self) -> impl Iterator<Item = &Event> {
        self.events
            .iter()
            .chain(self.create.iter().map(|c| &c.event))
            .chain(self.delete.iter().map(|d| &d.event))
    }

    fn requeue(&mut self, at: Timestamp) {
        self.requeue_at = Some(self.requeue_at.map_or(at, |t| t.min(at)));
    }
}

/// The selector of a DaemonSet the controller may act on, or the warning
/// to record instead (an empty selector selects every pod; a missing or
/// invalid one, which the API server refuses, selects none).
fn selector_of(ds: &DaemonSet) -> Result<Selector, (&'static str, String)> {
    match &ds.spec.selector {
        None => Err((
            reason::INVALID_SELECTOR,
            "This daemon set has no selector. A non-empty selector is required.".to_owned(),
        )),
        Some(s) if s.match_labels.is_empty() && s.match_expressions.is_empty() => Err((
            reason::SELECTING_ALL,
            "This daemon set is selecting all pods. A non-empty selector is required.".to_owned(),
        )),
        Some(s) => Selector::from_label_selector(s).map_err(|e| {
            (
                reason::INVALID_SELECTOR,
                format!("This daemon set's selector is not valid: {}", e.0),
            )
        }),
    }
}

/// Plans one DaemonSet: see the module documentation for the rules.
///
/// The RNG names new pods (`<ds>-<5 characters>`) and events; with the same
/// input and the same RNG state the plan is the same.
///
/// The steps: the claim and the per-node diff into buckets
/// ([`diff`]), the status from the buckets ([`status`]), the writes of each
/// node's buckets (with the failed-pod backoff), the pods of missing nodes,
/// then one rolling-update step over the buckets.
pub fn plan<R: RngCore + ?Sized>(input: &PlanInput<'_>, rng: &mut R) -> DaemonSetPlan {
    plan_claimed(input, None, rng)
}

/// [`plan`] with the DaemonSet's claim over `input.pods` already made
/// ([`claim`] of the same DaemonSet and pods; `None`: made here).
pub fn plan_claimed<'a, R: RngCore + ?Sized>(
    input: &PlanInput<'a>,
    claim: Option<Claim<'a>>,
    rng: &mut R,
) -> DaemonSetPlan {
    plan_inner(input, claim, None, rng)
}

/// [`plan_claimed`] with a [`Memo`] kept between passes: with
/// [`Scope::Changed`] (and a memo valid for the DaemonSet) the input holds
/// only the changed nodes and their pods, and the plan is the one a plan
/// of every node would make (but for the random names and the order of
/// the draws). See [`memo`] for what the caller owes it.
pub fn plan_memo<'a, R: RngCore + ?Sized>(
    input: &PlanInput<'a>,
    claim: Option<Claim<'a>>,
    memo: &mut Memo,
    scope: Scope<'_>,
    rng: &mut R,
) -> DaemonSetPlan {
    plan_inner(input, claim, Some((memo, scope)), rng)
}

fn plan_inner<'a, R: RngCore + ?Sized>(
    input: &PlanInput<'a>,
    claim: Option<Claim<'a>>,
    memo: Option<(&mut Memo, Scope<'_>)>,
    rng: &mut R,
) -> DaemonSetPlan {
    let ds = input.daemon_set;
    let now = input.now;
    let mut plan = DaemonSetPlan {
        status: ds.status.clone(),
        backoff: input.backoff.clone(),
        ..DaemonSetPlan::default()
    };
    let early = is_orphaning(ds) || ds.metadata.deletion_timestamp.is_some();
    let selector = if early { None } else { Some(selector_of(ds)) };
    let mut memo = match (memo, &selector) {
        (Some((memo, scope)), Some(Ok(_))) => {
            memo.begin(ds, input.revision_hash, scope);
            Some(memo)
        }
        (Some((memo, _)), _) => {
            memo.clear();
            None
        }
        (None, _) => None,
    };
    if is_orphaning(ds) {
        plan.release = release_daemon_set_pods(ds, input.pods.iter().copied());
        plan.finalize = plan.release.is_empty();
        return plan;
    }
    if ds.metadata.deletion_timestamp.is_some() {
        plan.delete = delete_daemon_set_pods(ds, input.pods.iter().copied(), now, rng);
        // Foreground deletion: the DaemonSet goes once its last pod is gone
        // (terminating pods are still its).
        plan.finalize = !input.pods.iter().any(|p| owns(ds, p));
        return plan;
    }
    let selector = match selector {
        Some(Ok(selector)) => selector,
        Some(Err((why, message))) => {
            let event = events::daemon_set_event(ds, event_type::WARNING, why, message, now, rng);
            plan.events.push(event);
            return plan;
        }
        None => return plan,
    };

    let mut claimed = match claim {
        Some(claim) => claim.claimed,
        None => diff::claim_pods(ds, &selector, &input.pods),
    };
    plan.adopt = claimed.adopt.iter().map(|p| pods::adopted(ds, p)).collect();
    plan.release = claimed
        .release
        .iter()
        .map(|p| pods::released(ds, p))
        .collect();
    if let Some(memo) = memo.as_deref_mut() {
        for p in claimed.adopt.iter().chain(claimed.release.iter()) {
            memo.keep(pods::target_node(p));
        }
    }
    let eligibility = Eligibility::new(ds);
    let surge = input.revision_hash.filter(|_| rollout::allows_surge(ds));
    let diffs = diff::diff_nodes(
        ds,
        &eligibility,
        &input.nodes,
        &mut claimed.by_node,
        input.usage,
        surge,
        now,
    );
    let strays = diff::stray_pods(std::mem::take(&mut claimed.by_node));

    // What the status and the rolling update need of each node: of the
    // nodes diffed now, and with a memo, of the others as last planned.
    let min_ready = pods::min_ready(ds);
    let keep_old = memo.is_some();
    let mut facts: Vec<facts::NodeFacts> = diffs
        .iter()
        .map(|d| facts::NodeFacts::of(d, input.revision_hash, min_ready, now, keep_old))
        .collect();
    if let Some(memo) = memo.as_deref_mut() {
        for (d, f) in diffs.iter().zip(facts.drain(..)) {
            memo.put(d.node, f);
        }
    }
    let counts = match memo.as_deref() {
        Some(memo) => facts::count(memo.facts.values(), min_ready, now),
        None => facts::count(&facts, min_ready, now),
    };
    if let Some(at) = counts.next_available {
        plan.requeue(at);
    }

    let mut new_pods = NewPods::new(ds, &eligibility, input);
    for diff in &diffs {
        write_node(
            &mut plan,
            ds,
            diff,
            &mut new_pods,
            input.revision_hash,
            now,
            rng,
        );
    }
    for stop in strays {
        if let Some(memo) = memo.as_deref_mut() {
            memo.keep(pods::target_node(stop.pod));
        }
        plan.delete
            .push(deletion(ds, stop.pod, stop.reason, now, rng));
    }
    if let Some(hash) = input.revision_hash {
        let step = Rollout {
            ds,
            diffs: &diffs,
            facts: &facts,
            hash,
            now,
        };
        let touched = step.roll_out(&mut plan, memo.as_deref(), &mut new_pods, rng);
        if let Some(memo) = memo.as_deref_mut() {
            for node in touched {
                memo.keep(&node);
            }
        }
    }

    if !plan.backoff.is_empty() {
        match memo.as_deref() {
            Some(memo) => plan
                .backoff
                .gc(ds.metadata.generation, now, |node| memo.knows(node)),
            None => {
                let seen: FastSet<&str> = diffs.iter().map(|d| d.node).collect();
                plan.backoff
                    .gc(ds.metadata.generation, now, |node| seen.contains(node));
            }
        }
    }
    plan.status = status::status(ds, &counts);
    plan.status_changed = plan.status != ds.status;
    plan
}

/// The writes of one node's buckets: its new pod, or its deletions with
/// their events. A failed pod is deleted only outside the node's failed-pod
/// backoff, which the deletion then extends; inside, the plan asks to be
/// run again when the backoff ends.
fn write_node<R: RngCore + ?Sized>(
    plan: &mut DaemonSetPlan,
    ds: &DaemonSet,
    diff: &NodeDiff<'_>,
    new_pods: &mut NewPods<'_>,
    revision_hash: Option<&str>,
    now: Timestamp,
    rng: &mut R,
) {
    let generation = ds.metadata.generation;
    let misfits = &diff.eligibility.misfits;
    let preempting = !diff.eligibility.preempt.is_empty();
    if diff.place {
        let mut c = new_pods.create(diff.node, revision_hash, now, rng);
        if !misfits.is_empty() {
            let message = unschedulable_message(misfits, preempting);
            c.pod = pods::pending_daemon_pod(c.pod, diff.node, message, preempting, now);
        }
        plan.create.push(c);
    }
    if let Some(pod) = diff.bind {
        plan.bind.push(pods::bound(pod, diff.node, now));
    }
    if let Some(pod) = diff.waiting.filter(|_| !misfits.is_empty()) {
        let message = unschedulable_message(misfits, preempting);
        let nominated = if preempting { diff.node } else { "" };
        if pods::unschedulable_message(pod) != Some(message.as_str())
            || pod.status.nominated_node_name != nominated
        {
            let mut p = pod.clone();
            pods::set_unschedulable(&mut p.status, message, now);
            p.status.nominated_node_name = nominated.to_owned();
            plan.unschedulable.push(p);
        }
    }
    for v in &diff.eligibility.preempt {
        plan.delete.push(preemption(ds, v, diff.node, now));
    }
    for stop in &diff.stop {
        match stop.reason {
            DeletionReason::Failed => {
                if let Some(until) = plan.backoff.in_backoff(diff.node, generation, now) {
                    plan.requeue(until);
                    continue;
                }
                plan.backoff.next(diff.node, generation, now);
                plan.events
                    .push(finished_pod_event(ds, stop.pod, true, now, rng));
            }
            DeletionReason::Succeeded => {
                plan.events
                    .push(finished_pod_event(ds, stop.pod, false, now, rng));
            }
            _ => {}
        }
        plan.delete
            .push(deletion(ds, stop.pod, stop.reason.clone(), now, rng));
    }
}

/// Why a daemon pod waits unbound, as the scheduler says it in the pod's
/// `PodScheduled` condition and its `FailedScheduling` event (the pod is
/// pinned to one node, hence `0/1`).
pub fn unschedulable_message(misfits: &[Misfit], preempting: bool) -> String {
    let reasons: Vec<String> = misfits.iter().map(|m| format!("1 {m}")).collect();
    let mut message = format!("0/1 nodes are available: {}.", reasons.join(", "));
    if preempting {
        message.push_str(" Preempting lower-priority pods on the node to make room.");
    }
    message
}

/// `FailedDaemonPod` (a warning) or `SucceededDaemonPod`, about a pod that
/// is deleted to be replaced.
fn finished_pod_event<R: RngCore + ?Sized>(
    ds: &DaemonSet,
    pod: &Pod,
    failed: bool,
    now: Timestamp,
    rng: &mut R,
) -> Event {
    let namespace = namespace_of(&ds.metadata);
    let (name, node) = (&pod.metadata.name, &pod.spec.node_name);
    let (kind, why, message) = if failed {
        (
            event_type::WARNING,
            reason::FAILED_DAEMON_POD,
            format!(
                "Found failed daemon pod {namespace}/{name} on node {node}, will try to kill it"
            ),
        )
    } else {
        (
            event_type::NORMAL,
            reason::SUCCEEDED_DAEMON_POD,
            format!(
                "Found succeeded daemon pod {namespace}/{name} on node {node}, will try to delete it"
            ),
        )
    };
    events::daemon_set_event(ds, kind, why, message, now, rng)
}

/// A DaemonSet's claim over the pods ([`claim`]): which pods are its, by
/// node. A caller that plans a large cluster computes it once per pass,
/// asks it which nodes are settled, and hands it to [`plan_claimed`],
/// instead of claiming every pod twice (the second claim was a tenth of a
/// pass at 2,000 nodes).
#[derive(Debug)]
pub struct Claim<'a> {
    claimed: diff::Claimed<'a>,
}

impl Claim<'_> {
    /// Whether one of the DaemonSet's pods (controlled and selected, or an
    /// orphan it would adopt) is bound to `node`: a plan never asks there
    /// whether a new pod fits. A plan asks [`NodeUsage`] only about the
    /// other nodes (where it may place or bind a pod), so a caller that
    /// plans a large cluster builds the usage of those alone
    /// ([`NodeUsage::with_priorities_on`]): in a rolling update that is the
    /// node or two being replaced, not every node.
    pub fn is_settled(&self, node: &str) -> bool {
        self.claimed
            .by_node
            .get(node)
            .is_some_and(|on_node| on_node.iter().any(|p| !pods::is_unbound(p)))
    }
}

/// The DaemonSet's claim over `pods` (see [`Claim`]); `None` when a plan
/// claims nothing and asks about no node (the DaemonSet is being deleted,
/// or its selector is missing or invalid).
pub fn claim<'a>(ds: &DaemonSet, pods: &[&'a Pod]) -> Option<Claim<'a>> {
    if ds.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let selector = selector_of(ds).ok()?;
    Some(Claim {
        claimed: diff::claim_pods(ds, &selector, pods),
    })
}

/// The deletions that follow a DaemonSet's deletion: every pod it controls
/// (in its namespace) that is not already being deleted — what Kubernetes'
/// garbage collector does with background propagation. [`plan`] returns
/// these for a DaemonSet whose `deletionTimestamp` is set; call this
/// directly when the DaemonSet is already gone from the store.
pub fn delete_daemon_set_pods<'a, R: RngCore + ?Sized>(
    ds: &DaemonSet,
    pods: impl IntoIterator<Item = &'a Pod>,
    now: Timestamp,
    rng: &mut R,
) -> Vec<PodDeletion> {
    let mut owned: Vec<&Pod> = pods
        .into_iter()
        .filter(|pod| diff::controlled_by(ds, pod) && !is_terminating(pod))
        .collect();
    owned.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    owned
        .into_iter()
        .map(|pod| deletion(ds, pod, DeletionReason::DaemonSetDeleted, now, rng))
        .collect()
}

/// Whether the pod has the DaemonSet among its owners.
fn owns(ds: &DaemonSet, pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .any(|r| r.uid == ds.metadata.uid)
}

/// The pods of a DaemonSet deleted with `propagationPolicy: Orphan`,
/// without its owner reference (terminating ones included: they keep
/// running until their node stops them, and must not be garbage collected
/// as the pods of a DaemonSet that is gone), by name.
pub fn release_daemon_set_pods<'a>(
    ds: &DaemonSet,
    pods: impl IntoIterator<Item = &'a Pod>,
) -> Vec<Pod> {
    let mut owned: Vec<&Pod> = pods.into_iter().filter(|pod| owns(ds, pod)).collect();
    owned.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    owned
        .into_iter()
        .map(|pod| pods::released(ds, pod))
        .collect()
}

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;
