//! The Deployment planner: a ReplicaSet per template revision, rolled out
//! as Kubernetes' deployment controller does it
//! (`pkg/controller/deployment`: `sync.go`, `rolling.go`, `recreate.go`,
//! `progress.go`, `util/deployment_util.go`), in our own code.
//!
//! [`plan`] takes one Deployment, the ReplicaSets (and, for `Recreate`, the
//! pods) of its namespace and `now`; it returns the ReplicaSet writes, the
//! Deployment's new annotations and status, and events. One plan is one
//! pass of Kubernetes' `syncDeployment`: each step works on the ReplicaSets
//! as the previous step left them, and the pass ends where Kubernetes
//! returns (after a scale up, after a scale down).
//!
//! # The ReplicaSets (`getReplicaSetsForDeployment`, `revisions`)
//!
//! - Claimed by owner reference and selector (on the ReplicaSet's labels):
//!   an orphan that matches is adopted, an owned one that no longer
//!   matches is released.
//! - The *new* ReplicaSet is the oldest one whose template equals the
//!   Deployment's, ignoring the `pod-template-hash` label; the others are
//!   *old*. A missing new one is created as `<deployment>-<hash>`, the hash
//!   ([`revisions::pod_template_hash`]) of the template and
//!   `status.collisionCount`, also the `pod-template-hash` label of its
//!   labels, selector and template (so of its pods). A name taken by a
//!   ReplicaSet with another template is a collision: `collisionCount` goes
//!   up and the next pass tries the next hash.
//! - `deployment.kubernetes.io/revision`: the new ReplicaSet gets the
//!   highest old revision plus one (an old template coming back takes the
//!   new number), and the Deployment carries the new ReplicaSet's.
//!   `desired-replicas` and `max-replicas` are written with every scale;
//!   the Deployment's own annotations are copied (the change cause that
//!   `rollout history` shows).
//!
//! # The pass (`syncDeployment`)
//!
//! 1. Being deleted: the status only (the garbage collector takes the
//!    ReplicaSets).
//! 2. `Progressing` says `DeploymentPaused` while paused, and
//!    `DeploymentResumed` once resumed.
//! 3. Paused, or the replicas changed (a ReplicaSet's `desired-replicas`
//!    differs from `spec.replicas`): scale only (`rolling::scale`,
//!    proportionally over the active ReplicaSets during a rollout), then
//!    the status (no progress is judged).
//! 4. Otherwise the strategy: `RollingUpdate` (`rolling::rolling`) or
//!    `Recreate` (`rolling::recreate`), then the progress
//!    ([`progress`]): `Progressing` (`NewReplicaSetCreated`,
//!    `FoundNewReplicaSet`, `ReplicaSetUpdated`, `NewReplicaSetAvailable`,
//!    `ProgressDeadlineExceeded`), `Available`
//!    (`MinimumReplicasAvailable`/`MinimumReplicasUnavailable`), and
//!    `ReplicaFailure` from the ReplicaSets.
//! 5. A complete rollout (or a paused Deployment) deletes the oldest old
//!    ReplicaSets with no replicas beyond `revisionHistoryLimit`.
//!
//! Deleted in the background, a Deployment goes at once and the garbage
//! collector takes its ReplicaSets (and theirs, their pods:
//! [`crate::pod_gc::owner_gone`]); with `Orphan` or `Foreground` the plan
//! releases or deletes them first ([`DeploymentPlan::finalize`]).
//!
//! The deprecated `spec.rollbackTo` does not exist in `apps/v1` and is
//! ignored: `rollout undo` writes the old template, which takes a new
//! revision number as above.

pub mod progress;
pub mod revisions;
pub mod rolling;
pub mod sizes;
pub mod view;

use drover_api::selector::Selector;
use drover_api::{
    event_type, Deployment, DeploymentStatus, DeploymentStrategyType, Event, Labels, Pod,
    ReplicaSet,
};
use rand::RngCore;

use crate::daemon::pods;
use crate::events::{self, namespace_of};
use crate::time::Timestamp;

/// The component that reports Deployment events (Kubernetes' own name).
pub const DEPLOYMENT_CONTROLLER: &str = "deployment-controller";
/// The event of every scale of a ReplicaSet.
pub const SCALING_REPLICA_SET: &str = "ScalingReplicaSet";

/// What the planner needs, as values.
#[derive(Debug, Clone)]
pub struct PlanInput<'a> {
    /// The Deployment.
    pub deployment: &'a Deployment,
    /// The ReplicaSets of its namespace (others are ignored).
    pub replica_sets: Vec<&'a ReplicaSet>,
    /// The pods of its namespace (only `Recreate` looks at them: it waits
    /// until the old ReplicaSets' pods are gone).
    pub pods: Vec<&'a Pod>,
    /// The current time.
    pub now: Timestamp,
}

/// A ReplicaSet to delete (history beyond `revisionHistoryLimit`).
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaSetDeletion {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID: the delete's precondition.
    pub uid: String,
}

/// What to write for one Deployment.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DeploymentPlan {
    /// The new ReplicaSet to create (the store fills in uid and time).
    pub create: Option<ReplicaSet>,
    /// ReplicaSets to write whole at the version read: scaled, annotated,
    /// adopted or released.
    pub update: Vec<ReplicaSet>,
    /// Old ReplicaSets to delete.
    pub delete: Vec<ReplicaSetDeletion>,
    /// The Deployment's annotations when they change (its revision).
    pub annotations: Option<Labels>,
    /// The Deployment's status after the pass.
    pub status: DeploymentStatus,
    /// Whether `status` differs from the Deployment's.
    pub status_changed: bool,
    /// Events (`ScalingReplicaSet`…), to record once the writes succeed.
    pub events: Vec<Event>,
    /// When to plan again though nothing changes (the progress deadline).
    pub requeue_at: Option<Timestamp>,
    /// Deleted with `propagationPolicy: Orphan` or `Foreground` and no
    /// ReplicaSet is its any more: the loop removes the Deployment now.
    pub finalize: bool,
}

impl DeploymentPlan {
    /// Whether the plan writes nothing.
    pub fn is_empty(&self) -> bool {
        self.create.is_none()
            && self.update.is_empty()
            && self.delete.is_empty()
            && self.annotations.is_none()
            && !self.status_changed
            && self.events.is_empty()
            && !self.finalize
    }
}

/// `spec.replicas`, 1 when unset, never negative.
pub fn replicas(d: &Deployment) -> i32 {
    d.spec.replicas.unwrap_or(1).max(0)
}

/// Whether the Deployment uses `RollingUpdate` (the default).
pub fn is_rolling(d: &Deployment) -> bool {
    !matches!(
        d.spec.strategy.r#type,
        Some(DeploymentStrategyType::Recreate)
    )
}

/// One ReplicaSet of the pass, as the steps so far left it.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub rs: ReplicaSet,
    /// Changed by the pass: to write (create or update).
    pub dirty: bool,
    /// Created by the pass.
    pub created: bool,
}

/// The pass: the Deployment, its ReplicaSets (oldest first), and the plan
/// being built.
pub(crate) struct Pass<'a, 'r, R: RngCore + ?Sized> {
    pub d: &'a Deployment,
    pub sets: Vec<Entry>,
    /// The index of the new ReplicaSet in `sets`.
    pub new: Option<usize>,
    pub status: DeploymentStatus,
    pub annotations: Labels,
    /// Names of every ReplicaSet of the namespace (a new one's name must
    /// be free).
    pub taken_names: std::collections::HashSet<String>,
    pub plan: DeploymentPlan,
    pub now: Timestamp,
    pub rng: &'r mut R,
}

impl<R: RngCore + ?Sized> Pass<'_, '_, R> {
    /// The old ReplicaSets' indices, oldest first.
    pub fn old(&self) -> Vec<usize> {
        (0..self.sets.len())
            .filter(|i| Some(*i) != self.new)
            .collect()
    }

    /// Kubernetes' `scaleReplicaSet`: sets the size and the replicas
    /// annotations (`desired-replicas`, `max-replicas`) when either
    /// differs, with a `ScalingReplicaSet` event when the size does.
    /// Whether the size changed.
    pub fn scale(&mut self, i: usize, to: i32) -> bool {
        let desired = replicas(self.d);
        let max = desired + sizes::max_surge(self.d);
        let entry = &mut self.sets[i];
        let from = entry.rs.spec.replicas.unwrap_or(1);
        let annotated = revisions::set_replicas_annotations(&mut entry.rs, desired, max);
        if from == to && !annotated {
            return false;
        }
        entry.rs.spec.replicas = Some(to);
        entry.dirty = true;
        if from == to {
            return false;
        }
        let direction = if to > from { "up" } else { "down" };
        let message = format!(
            "Scaled {direction} replica set {} from {from} to {to}",
            entry.rs.metadata.name
        );
        let event = events::object_event(
            self.d,
            DEPLOYMENT_CONTROLLER,
            (event_type::NORMAL, SCALING_REPLICA_SET),
            message,
            self.now,
            self.rng,
        );
        self.plan.events.push(event);
        true
    }

    /// The size of ReplicaSet `i` (its `spec.replicas`).
    pub fn size(&self, i: usize) -> i32 {
        self.sets[i].rs.spec.replicas.unwrap_or(1)
    }
}

/// The selector of a Deployment the controller acts on: `None` when it is
/// missing, empty (selects every pod) or not valid.
pub fn selector_of(d: &Deployment) -> Option<Selector> {
    let s = d.spec.selector.as_ref()?;
    if s.match_labels.is_empty() && s.match_expressions.is_empty() {
        return None;
    }
    Selector::from_label_selector(s).ok()
}

/// Plans one Deployment: see the module documentation. The RNG names
/// events only; the same input gives the same writes.
pub fn plan<R: RngCore + ?Sized>(input: &PlanInput<'_>, rng: &mut R) -> DeploymentPlan {
    let d = input.deployment;
    let now = input.now;
    let Some(selector) = selector_of(d) else {
        let mut plan = DeploymentPlan {
            status: d.status.clone(),
            ..DeploymentPlan::default()
        };
        plan.status.observed_generation = d.metadata.generation;
        plan.status_changed = plan.status != d.status;
        plan.events.push(events::object_event(
            d,
            DEPLOYMENT_CONTROLLER,
            (event_type::WARNING, events::reason::SELECTING_ALL),
            "This deployment is selecting all pods. A non-empty selector is required.".to_owned(),
            now,
            rng,
        ));
        return plan;
    };
    if let Some(policy) = crate::replicaset::finalizing(&d.metadata) {
        return finish_deletion(d, policy, &input.replica_sets);
    }
    let (sets, released) = revisions::claim(d, &selector, &input.replica_sets);
    let mut pass = Pass {
        d,
        sets,
        new: None,
        status: d.status.clone(),
        annotations: d.metadata.annotations.clone(),
        taken_names: input
            .replica_sets
            .iter()
            .filter(|rs| namespace_of(&rs.metadata) == namespace(d))
            .map(|rs| rs.metadata.name.clone())
            .collect(),
        plan: DeploymentPlan::default(),
        now,
        rng,
    };
    pass.plan.update = released;
    if d.metadata.deletion_timestamp.is_none() {
        run_pass(&mut pass, input);
    } else {
        pass.new = revisions::find_new(d, &pass.sets);
        progress::sync_status(&mut pass);
    }
    finish(pass)
}

/// A Deployment deleted with `Orphan` releases its ReplicaSets (they keep
/// their pods); with `Foreground` it deletes them (their pods go with
/// them); it asks to be removed once none has it as owner.
fn finish_deletion(
    d: &Deployment,
    policy: crate::replicaset::Propagation,
    all: &[&ReplicaSet],
) -> DeploymentPlan {
    let uid = d.metadata.uid.as_str();
    let owned: Vec<&ReplicaSet> = all
        .iter()
        .copied()
        .filter(|rs| rs.metadata.owner_references.iter().any(|r| r.uid == uid))
        .collect();
    let mut plan = DeploymentPlan {
        status: d.status.clone(),
        finalize: owned.is_empty(),
        ..DeploymentPlan::default()
    };
    for rs in owned {
        match policy {
            crate::replicaset::Propagation::Orphan => {
                let mut rs = rs.clone();
                rs.metadata.owner_references.retain(|r| r.uid != uid);
                plan.update.push(rs);
            }
            crate::replicaset::Propagation::Foreground => {
                if rs.metadata.deletion_timestamp.is_none() {
                    plan.delete.push(ReplicaSetDeletion {
                        namespace: namespace_of(&rs.metadata).to_owned(),
                        name: rs.metadata.name.clone(),
                        uid: rs.metadata.uid.clone(),
                    });
                }
            }
        }
    }
    plan
}

fn run_pass<R: RngCore + ?Sized>(pass: &mut Pass<'_, '_, R>, input: &PlanInput<'_>) {
    let d = pass.d;
    progress::paused_condition(pass);
    let paused = d.spec.paused.unwrap_or(false);
    pass.new = revisions::find_new(d, &pass.sets);
    if paused || rolling::is_scaling_event(pass) {
        revisions::sync_new(pass);
        rolling::scale(pass);
        if paused {
            revisions::cleanup(pass);
        }
        progress::sync_status(pass);
        return;
    }
    if is_rolling(d) {
        rolling::rolling(pass);
    } else {
        rolling::recreate(pass, &input.pods);
    }
}

fn finish<R: RngCore + ?Sized>(pass: Pass<'_, '_, R>) -> DeploymentPlan {
    let d = pass.d;
    let mut plan = pass.plan;
    for entry in pass.sets {
        if entry.created {
            plan.create = Some(entry.rs);
        } else if entry.dirty {
            plan.update.push(entry.rs);
        }
    }
    plan.status_changed = pass.status != d.status;
    plan.status = pass.status;
    if pass.annotations != d.metadata.annotations {
        plan.annotations = Some(pass.annotations);
    }
    plan
}

/// The namespace a Deployment's objects live in.
pub(crate) fn namespace(d: &Deployment) -> &str {
    namespace_of(&d.metadata)
}

/// Whether the pod is owned by the ReplicaSet with `uid` and will still
/// run (not `Failed`, not `Succeeded`; terminating pods still run).
pub(crate) fn pod_may_run(pod: &Pod, uid: &str) -> bool {
    pod.metadata.controller_ref().is_some_and(|r| r.uid == uid)
        && !pods::phase_is(pod, &drover_api::PodPhase::Failed)
        && !pods::phase_is(pod, &drover_api::PodPhase::Succeeded)
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_rolling;
