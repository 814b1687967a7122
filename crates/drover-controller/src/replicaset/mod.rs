//! The ReplicaSet planner: `spec.replicas` interchangeable pods of one
//! template, as Kubernetes' ReplicaSet controller keeps them
//! (`pkg/controller/replicaset/replica_set.go`, `manageReplicas`,
//! `replica_set_utils.go`, `calculateStatus`).
//!
//! [`plan`] takes one ReplicaSet, the pods of its namespace and `now`, and
//! returns what to write; the loop on the leader applies it.
//!
//! # Which pods count (`FilterActivePods`, `ClaimPods`)
//!
//! Only *active* pods: not `Succeeded`, not `Failed`, not being deleted. A
//! failed or finished pod therefore no longer counts, and a new one
//! replaces it (the pod garbage collector deletes the old one later, as
//! Kubernetes'); a terminating pod's replacement is created at once.
//! Of the active pods of the namespace: those the ReplicaSet controls
//! (controller reference with its UID) and that match its selector are
//! its; an orphan that matches is *adopted* (bound or not: pods of a
//! ReplicaSet are placed by the scheduler); an owned pod that no longer
//! matches is *released*. Mirror pods are never touched.
//!
//! # Replicas (`manageReplicas`)
//!
//! - too few: create the difference, at most [`BURST_REPLICAS`] per pass,
//!   unbound (`spec.nodeName` from the template, empty as a rule: the
//!   scheduler binds them), named `<rs>-<5 characters>`, with the
//!   template's labels, annotations and finalizers and the ReplicaSet as
//!   controller. The loop creates them in slow-start batches
//!   ([`slow_start_batches`]: 1, 2, 4, …) and stops at the first batch with
//!   a failure, so a template the API refuses costs one create, not 500;
//! - too many: delete the surplus (at most [`BURST_REPLICAS`]) in
//!   [`rank::deletion_order`].
//!
//! # Deletion
//!
//! Deleted in the background, a ReplicaSet goes at once and the pod
//! garbage collector takes its pods ([`crate::pod_gc`]). Deleted with
//! `propagationPolicy: Orphan` or `Foreground` it carries the finalizer
//! (`orphan`, `foregroundDeletion`) until the planner has released or
//! deleted every pod it owns ([`ReplicaSetPlan::finalize`]).
//!
//! # Status (`calculateStatus`)
//!
//! `replicas` (its active pods), `fullyLabeledReplicas` (those carrying
//! every label of the template), `readyReplicas`, `availableReplicas`
//! (ready for longer than `minReadySeconds`), `observedGeneration`, counted
//! over the pods as the plan leaves them (Kubernetes counts the pods it
//! just deleted until its next pass; drover does not, so that a
//! Deployment never reads more available pods than there are). The
//! `ReplicaFailure` condition says a create or delete failed: the loop sets
//! or clears it after applying the plan ([`set_replica_failure`]).

pub mod rank;

use std::collections::HashSet;
use std::time::Duration;

use drover_api::selector::Selector;
use drover_api::{
    ConditionStatus, Event, ObjectMeta, Pod, PodPhase, PodStatus, ReplicaSet, ReplicaSetCondition,
    ReplicaSetStatus,
};
use rand::RngCore;

use crate::daemon::pods::{self, is_terminating};
use crate::daemon::PodCreation;
use crate::events::{self, namespace_of, reason};
use crate::time::Timestamp;

/// The component that reports ReplicaSet events (Kubernetes' own name).
pub const REPLICASET_CONTROLLER: &str = "replicaset-controller";

/// Pods created or deleted at most per pass (Kubernetes' `BurstReplicas`).
pub const BURST_REPLICAS: usize = 500;

/// The condition a ReplicaSet carries while creates or deletes fail.
pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// Attempts at a pod name not already taken.
const NAME_ATTEMPTS: usize = 16;

/// What the planner needs, as values.
#[derive(Debug, Clone)]
pub struct PlanInput<'a> {
    /// The ReplicaSet.
    pub replica_set: &'a ReplicaSet,
    /// The pods of its namespace (others are ignored).
    pub pods: Vec<&'a Pod>,
    /// The current time.
    pub now: Timestamp,
}

/// A pod to delete and the event to record once it is.
#[derive(Debug, Clone, PartialEq)]
pub struct PodDeletion {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The pod's UID: the delete's precondition (never a namesake).
    pub uid: String,
    /// `SuccessfulDelete`, once the delete succeeds.
    pub event: Event,
}

/// What to do for one ReplicaSet.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReplicaSetPlan {
    /// Pods to create, in order; apply in [`slow_start_batches`].
    pub create: Vec<PodCreation>,
    /// Surplus pods to delete, the least worth keeping first.
    pub delete: Vec<PodDeletion>,
    /// Orphans to adopt: the pods with the ReplicaSet as controller, to
    /// write at the version read.
    pub adopt: Vec<Pod>,
    /// Pods it controls that no longer match: without its reference.
    pub release: Vec<Pod>,
    /// The status from the pods as they are (before the plan applies).
    pub status: ReplicaSetStatus,
    /// Whether `status` differs from the ReplicaSet's.
    pub status_changed: bool,
    /// Events that do not wait on a write.
    pub events: Vec<Event>,
    /// When to plan again though nothing changes (a ready pod becomes
    /// available after `minReadySeconds`).
    pub requeue_at: Option<Timestamp>,
    /// Deleted with `propagationPolicy: Orphan` or `Foreground` and no pod
    /// is its any more: the loop removes the ReplicaSet now.
    pub finalize: bool,
}

impl ReplicaSetPlan {
    /// Whether the plan writes nothing.
    pub fn is_empty(&self) -> bool {
        self.create.is_empty()
            && self.delete.is_empty()
            && self.adopt.is_empty()
            && self.release.is_empty()
            && self.events.is_empty()
            && !self.status_changed
            && !self.finalize
    }
}

/// Kubernetes' `slowStartBatch` sizes for `total` creates: 1, 2, 4, … (the
/// last one what is left). The loop stops at the first batch with a
/// failure; what it did not try counts as failed too.
pub fn slow_start_batches(total: usize) -> Vec<usize> {
    let mut batches = Vec::new();
    let (mut left, mut size) = (total, 1usize);
    while left > 0 {
        let batch = size.min(left);
        batches.push(batch);
        left -= batch;
        size = size.saturating_mul(2);
    }
    batches
}

/// `spec.replicas`, 1 when unset, never negative.
pub fn replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(1).max(0)
}

/// The ReplicaSet's `minReadySeconds` (0 when unset or negative).
pub fn min_ready(rs: &ReplicaSet) -> Duration {
    Duration::from_secs(u64::try_from(rs.spec.min_ready_seconds.unwrap_or(0)).unwrap_or(0))
}

/// Kubernetes' `IsPodActive`: not finished and not being deleted.
pub fn is_active(pod: &Pod) -> bool {
    !pods::phase_is(pod, &PodPhase::Succeeded)
        && !pods::phase_is(pod, &PodPhase::Failed)
        && !is_terminating(pod)
}

/// Whether `pod` is controlled by the owner with `uid`.
pub fn controlled_by(pod: &Pod, uid: &str) -> bool {
    pod.metadata.controller_ref().is_some_and(|r| r.uid == uid)
}

/// The ReplicaSet's active pods after the claim (owned and matching, and
/// the orphans it adopts), the orphans to adopt, and the pods to release.
pub struct Claimed<'a> {
    /// The active pods that are the ReplicaSet's.
    pub pods: Vec<&'a Pod>,
    /// Orphans to adopt (among `pods`).
    pub adopt: Vec<&'a Pod>,
    /// Owned pods that no longer match.
    pub release: Vec<&'a Pod>,
}

/// Kubernetes' `ClaimPods` over the active pods of the ReplicaSet's
/// namespace.
pub fn claim<'a>(rs: &ReplicaSet, selector: &Selector, all: &[&'a Pod]) -> Claimed<'a> {
    let namespace = namespace_of(&rs.metadata);
    let uid = rs.metadata.uid.as_str();
    let mut claimed = Claimed {
        pods: Vec::new(),
        adopt: Vec::new(),
        release: Vec::new(),
    };
    for &pod in all {
        if namespace_of(&pod.metadata) != namespace || pod.is_mirror() || !is_active(pod) {
            continue;
        }
        let matches = selector.matches(&pod.metadata.labels);
        match pod.metadata.controller_ref() {
            Some(r) if r.uid == uid && matches => claimed.pods.push(pod),
            Some(r) if r.uid == uid => claimed.release.push(pod),
            Some(_) => {}
            None if matches && rs.metadata.deletion_timestamp.is_none() => {
                claimed.adopt.push(pod);
                claimed.pods.push(pod);
            }
            None => {}
        }
    }
    claimed
}

/// The selector the controller acts on, or the reason it does not: a
/// missing or invalid selector selects nothing, an empty one is refused as
/// Kubernetes' validation refuses it.
pub fn selector_of(rs: &ReplicaSet) -> Option<Selector> {
    let s = rs.spec.selector.as_ref()?;
    if s.match_labels.is_empty() && s.match_expressions.is_empty() {
        return None;
    }
    Selector::from_label_selector(s).ok()
}

/// Plans one ReplicaSet (see the module documentation). The RNG names new
/// pods and events: the same input and RNG state give the same plan.
pub fn plan<R: RngCore + ?Sized>(input: &PlanInput<'_>, rng: &mut R) -> ReplicaSetPlan {
    let rs = input.replica_set;
    let now = input.now;
    let mut plan = ReplicaSetPlan {
        status: rs.status.clone(),
        ..ReplicaSetPlan::default()
    };
    let Some(selector) = selector_of(rs) else {
        plan.events.push(events::object_event(
            rs,
            REPLICASET_CONTROLLER,
            (drover_api::event_type::WARNING, reason::INVALID_SELECTOR),
            "This replica set's selector is missing, empty or not valid: it manages no pods."
                .to_owned(),
            now,
            rng,
        ));
        return plan;
    };
    if let Some(policy) = finalizing(&rs.metadata) {
        finish_deletion(&mut plan, rs, policy, &input.pods, now, rng);
        return plan;
    }
    let claimed = claim(rs, &selector, &input.pods);
    plan.adopt = claimed
        .adopt
        .iter()
        .map(|p| {
            let mut p = (*p).clone();
            p.metadata
                .owner_references
                .push(pods::controller_ref_to(rs));
            p
        })
        .collect();
    plan.release = claimed
        .release
        .iter()
        .map(|p| {
            let mut p = (*p).clone();
            p.metadata
                .owner_references
                .retain(|r| r.uid != rs.metadata.uid);
            p
        })
        .collect();

    let min_ready = min_ready(rs);
    if rs.metadata.deletion_timestamp.is_none() {
        manage(&mut plan, rs, &claimed.pods, input, rng);
    }
    // The status counts the pods as the plan leaves them: those it deletes
    // are terminating at once and no longer count, so that a Deployment
    // reading it never sees more available pods than there are.
    let deleted: HashSet<&str> = plan.delete.iter().map(|d| d.uid.as_str()).collect();
    let remaining: Vec<&Pod> = claimed
        .pods
        .iter()
        .copied()
        .filter(|p| !deleted.contains(p.metadata.uid.as_str()))
        .collect();
    plan.status = status(rs, &remaining, min_ready, now);
    plan.status_changed = plan.status != rs.status;
    for pod in &remaining {
        if let Some(at) = pods::available_at(pod, min_ready, now) {
            plan.requeue_at = Some(plan.requeue_at.map_or(at, |t| t.min(at)));
        }
    }
    plan
}

/// Kubernetes' `manageReplicas`: the creates or deletes that bring the
/// ReplicaSet's pods to its replicas.
fn manage<R: RngCore + ?Sized>(
    plan: &mut ReplicaSetPlan,
    rs: &ReplicaSet,
    pods_of_rs: &[&Pod],
    input: &PlanInput<'_>,
    rng: &mut R,
) {
    let now = input.now;
    let want = usize::try_from(replicas(rs)).unwrap_or(0);
    let have = pods_of_rs.len();
    if have < want {
        let taken: HashSet<&str> = input
            .pods
            .iter()
            .filter(|p| namespace_of(&p.metadata) == namespace_of(&rs.metadata))
            .map(|p| p.metadata.name.as_str())
            .collect();
        let prefix = pods::name_prefix(&rs.metadata.name);
        let mut fresh = HashSet::new();
        for _ in 0..(want - have).min(BURST_REPLICAS) {
            let name = fresh_name(&prefix, &taken, &mut fresh, rng);
            let pod = new_pod(rs, name);
            let event = events::object_event(
                rs,
                REPLICASET_CONTROLLER,
                (drover_api::event_type::NORMAL, reason::SUCCESSFUL_CREATE),
                format!("Created pod: {}", pod.metadata.name),
                now,
                rng,
            );
            plan.create.push(PodCreation { pod, event });
        }
    } else if have > want {
        let mut victims = pods_of_rs.to_vec();
        let per_node = rank::pods_per_node(&victims);
        victims.sort_by(|a, b| rank::deletion_order(a, b, &per_node));
        for pod in victims.into_iter().take((have - want).min(BURST_REPLICAS)) {
            plan.delete.push(deletion(rs, pod, now, rng));
        }
    }
}

/// How an owner being deleted hands over its dependents: by its finalizer
/// (Kubernetes' `orphan` and `foregroundDeletion`, the DaemonSet's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents keep running without the owner's reference.
    Orphan,
    /// Dependents are deleted before the owner.
    Foreground,
}

/// The propagation of an object being deleted with a finalizer; `None`
/// when it is not being deleted, or in the background (the garbage
/// collector then takes the dependents of an owner that is gone).
pub fn finalizing(meta: &ObjectMeta) -> Option<Propagation> {
    meta.deletion_timestamp.as_ref()?;
    let has = |f: &str| meta.finalizers.iter().any(|x| x == f);
    if has(crate::daemon::ORPHAN_FINALIZER) {
        Some(Propagation::Orphan)
    } else if has(crate::daemon::FOREGROUND_FINALIZER) {
        Some(Propagation::Foreground)
    } else {
        None
    }
}

/// A ReplicaSet deleted with `Orphan` releases every pod it owns;
/// with `Foreground` it deletes them; either way it asks to be removed
/// once no pod has it as owner.
fn finish_deletion<R: RngCore + ?Sized>(
    plan: &mut ReplicaSetPlan,
    rs: &ReplicaSet,
    policy: Propagation,
    all: &[&Pod],
    now: Timestamp,
    rng: &mut R,
) {
    let uid = rs.metadata.uid.as_str();
    let owned: Vec<&Pod> = all
        .iter()
        .copied()
        .filter(|p| p.metadata.owner_references.iter().any(|r| r.uid == uid))
        .collect();
    plan.finalize = owned.is_empty();
    for pod in owned {
        match policy {
            Propagation::Orphan => {
                let mut p = pod.clone();
                p.metadata.owner_references.retain(|r| r.uid != uid);
                plan.release.push(p);
            }
            Propagation::Foreground if !is_terminating(pod) => {
                plan.delete.push(deletion(rs, pod, now, rng));
            }
            Propagation::Foreground => {}
        }
    }
}

/// The deletion of one of the ReplicaSet's pods, with its
/// `SuccessfulDelete` event (`Deleted pod: NAME`).
fn deletion<R: RngCore + ?Sized>(
    rs: &ReplicaSet,
    pod: &Pod,
    now: Timestamp,
    rng: &mut R,
) -> PodDeletion {
    PodDeletion {
        namespace: namespace_of(&pod.metadata).to_owned(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        event: events::object_event(
            rs,
            REPLICASET_CONTROLLER,
            (drover_api::event_type::NORMAL, reason::SUCCESSFUL_DELETE),
            format!("Deleted pod: {}", pod.metadata.name),
            now,
            rng,
        ),
    }
}

fn fresh_name<R: RngCore + ?Sized>(
    prefix: &str,
    taken: &HashSet<&str>,
    fresh: &mut HashSet<String>,
    rng: &mut R,
) -> String {
    let mut name = format!("{prefix}{}", pods::name_suffix(rng));
    for _ in 1..NAME_ATTEMPTS {
        if !taken.contains(name.as_str()) && !fresh.contains(&name) {
            break;
        }
        name = format!("{prefix}{}", pods::name_suffix(rng));
    }
    fresh.insert(name.clone());
    name
}

/// A new pod of the ReplicaSet (Kubernetes' `GetPodFromTemplate`): the
/// template's labels, annotations, finalizers and spec, `generateName`
/// `<rs>-`, the ReplicaSet as controller; `Pending`, unbound unless the
/// template names a node.
pub fn new_pod(rs: &ReplicaSet, name: String) -> Pod {
    let template = &rs.spec.template;
    Pod {
        metadata: ObjectMeta {
            name,
            generate_name: pods::name_prefix(&rs.metadata.name),
            namespace: namespace_of(&rs.metadata).to_owned(),
            labels: template.metadata.labels.clone(),
            annotations: template.metadata.annotations.clone(),
            finalizers: template.metadata.finalizers.clone(),
            owner_references: vec![pods::controller_ref_to(rs)],
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: PodStatus {
            phase: Some(PodPhase::Pending),
            ..PodStatus::default()
        },
        ..Pod::default()
    }
}

/// Kubernetes' `calculateStatus` over the ReplicaSet's active pods; the
/// conditions are kept as they are.
pub fn status(
    rs: &ReplicaSet,
    pods: &[&Pod],
    min_ready: Duration,
    now: Timestamp,
) -> ReplicaSetStatus {
    let template = &rs.spec.template.metadata.labels;
    let count = |f: &dyn Fn(&Pod) -> bool| {
        i32::try_from(pods.iter().filter(|p| f(p)).count()).unwrap_or(i32::MAX)
    };
    ReplicaSetStatus {
        replicas: count(&|_| true),
        fully_labeled_replicas: count(&|p| {
            template
                .iter()
                .all(|(k, v)| p.metadata.labels.get(k) == Some(v))
        }),
        ready_replicas: count(&|p| p.is_ready()),
        available_replicas: count(&|p| pods::is_available(p, min_ready, now)),
        observed_generation: rs.metadata.generation,
        conditions: rs.status.conditions.clone(),
        ..ReplicaSetStatus::default()
    }
}

/// Why the last pass's writes failed, for [`set_replica_failure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaFailure {
    /// A pod create was refused (reason `FailedCreate`).
    Create,
    /// A pod delete was refused (reason `FailedDelete`).
    Delete,
}

/// Sets the `ReplicaFailure` condition after a pass whose writes failed
/// (`Some`, with the error's message), or clears it after one that did not,
/// as `calculateStatus` does with `manageReplicas`' error. A condition
/// already there is kept (with its first message).
pub fn set_replica_failure(
    status: &mut ReplicaSetStatus,
    failure: Option<(ReplicaFailure, String)>,
    now: Timestamp,
) {
    let present = status
        .conditions
        .iter()
        .any(|c| c.r#type == REPLICA_FAILURE);
    match failure {
        Some((kind, message)) if !present => {
            let reason = match kind {
                ReplicaFailure::Create => reason::FAILED_CREATE,
                ReplicaFailure::Delete => reason::FAILED_DELETE,
            };
            status.conditions.push(ReplicaSetCondition {
                r#type: REPLICA_FAILURE.to_owned(),
                status: Some(ConditionStatus::True),
                last_transition_time: Some(now.to_rfc3339()),
                reason: reason.to_owned(),
                message,
                ..ReplicaSetCondition::default()
            });
        }
        Some(_) => {}
        None => status.conditions.retain(|c| c.r#type != REPLICA_FAILURE),
    }
}

/// `FailedCreate` (`Error creating: ERROR`) about a ReplicaSet, for the
/// loop to record when a create is refused.
pub fn failed_create_event<R: RngCore + ?Sized>(
    rs: &ReplicaSet,
    error: &str,
    now: Timestamp,
    rng: &mut R,
) -> Event {
    events::object_event(
        rs,
        REPLICASET_CONTROLLER,
        (drover_api::event_type::WARNING, reason::FAILED_CREATE),
        format!("Error creating: {error}"),
        now,
        rng,
    )
}

#[cfg(test)]
mod tests;
