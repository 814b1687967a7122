//! A Deployment's status and conditions: the counters from its
//! ReplicaSets (`calculateStatus`), `Available`, `Progressing` with the
//! progress deadline (`progress.go`, `syncRolloutStatus`), `paused`, and
//! `ReplicaFailure` carried over from the ReplicaSets.

use std::time::Duration;

use drover_api::{ConditionStatus, Deployment, DeploymentCondition, DeploymentStatus};
use rand::RngCore;

use super::sizes::max_unavailable;
use super::{replicas, Pass};
use crate::replicaset::REPLICA_FAILURE;
use crate::time::Timestamp;

/// The condition of the rollout's progress.
pub const PROGRESSING: &str = "Progressing";
/// The condition of minimum availability.
pub const AVAILABLE: &str = "Available";

/// `Progressing`: a new ReplicaSet was created.
pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
/// `Progressing`: the new ReplicaSet was found (no condition before).
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
/// `Progressing`: the rollout moved.
pub const RS_UPDATED: &str = "ReplicaSetUpdated";
/// `Progressing`: the rollout is complete.
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
/// `Progressing=False`: no progress for `progressDeadlineSeconds`.
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
/// `Progressing=Unknown`: paused.
pub const PAUSED: &str = "DeploymentPaused";
/// `Progressing=Unknown`: resumed.
pub const RESUMED: &str = "DeploymentResumed";
/// `Available=True`.
pub const MIN_AVAILABLE: &str = "MinimumReplicasAvailable";
/// `Available=False`.
pub const MIN_UNAVAILABLE: &str = "MinimumReplicasUnavailable";

/// Kubernetes' default `progressDeadlineSeconds`.
pub const DEFAULT_PROGRESS_DEADLINE_SECONDS: i32 = 600;

/// The progress deadline; `None` when there is none
/// (`progressDeadlineSeconds` is `2147483647`, Kubernetes' "no deadline").
pub fn deadline(d: &Deployment) -> Option<Duration> {
    let seconds = d
        .spec
        .progress_deadline_seconds
        .unwrap_or(DEFAULT_PROGRESS_DEADLINE_SECONDS);
    if seconds == i32::MAX {
        return None;
    }
    Some(Duration::from_secs(u64::try_from(seconds).unwrap_or(0)))
}

/// Kubernetes' `HasProgressDeadline`.
pub fn has_deadline(d: &Deployment) -> bool {
    deadline(d).is_some()
}

/// The condition of `type`, if any.
pub fn find<'s>(status: &'s DeploymentStatus, kind: &str) -> Option<&'s DeploymentCondition> {
    status.conditions.iter().find(|c| c.r#type == kind)
}

/// Kubernetes' `SetDeploymentCondition`: nothing changes when the
/// condition already has this status and reason; the transition time is
/// kept when only the reason or message changes.
pub fn set(
    status: &mut DeploymentStatus,
    kind: &str,
    value: ConditionStatus,
    reason: &str,
    message: String,
    now: Timestamp,
) {
    let time = now.to_rfc3339();
    let mut condition = DeploymentCondition {
        r#type: kind.to_owned(),
        status: Some(value.clone()),
        last_update_time: Some(time.clone()),
        last_transition_time: Some(time),
        reason: reason.to_owned(),
        message,
        ..DeploymentCondition::default()
    };
    if let Some(current) = find(status, kind) {
        if current.status.as_ref() == Some(&value) && current.reason == reason {
            return;
        }
        if current.status.as_ref() == Some(&value) {
            condition
                .last_transition_time
                .clone_from(&current.last_transition_time);
        }
    }
    status.conditions.retain(|c| c.r#type != kind);
    status.conditions.push(condition);
}

fn remove(status: &mut DeploymentStatus, kind: &str) {
    status.conditions.retain(|c| c.r#type != kind);
}

/// Kubernetes' `calculateStatus`: the counters from the ReplicaSets (sizes
/// as the pass left them, their statuses as read), `Available`, and the
/// conditions so far.
pub(crate) fn calculate<R: RngCore + ?Sized>(pass: &Pass<'_, '_, R>) -> DeploymentStatus {
    let d = pass.d;
    let sets = || pass.sets.iter().map(|e| &e.rs);
    let available: i32 = sets().map(|rs| rs.status.available_replicas).sum();
    let total: i32 = (0..pass.sets.len()).map(|i| pass.size(i)).sum();
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: sets().map(|rs| rs.status.replicas).sum(),
        updated_replicas: pass.new.map_or(0, |i| pass.sets[i].rs.status.replicas),
        ready_replicas: sets().map(|rs| rs.status.ready_replicas).sum(),
        available_replicas: available,
        unavailable_replicas: (total - available).max(0),
        conditions: pass.status.conditions.clone(),
        collision_count: pass.status.collision_count,
        ..DeploymentStatus::default()
    };
    if available >= replicas(d) - max_unavailable(d) {
        set(
            &mut status,
            AVAILABLE,
            ConditionStatus::True,
            MIN_AVAILABLE,
            "Deployment has minimum availability.".to_owned(),
            pass.now,
        );
    } else {
        set(
            &mut status,
            AVAILABLE,
            ConditionStatus::False,
            MIN_UNAVAILABLE,
            "Deployment does not have minimum availability.".to_owned(),
            pass.now,
        );
    }
    status
}

/// Kubernetes' `DeploymentComplete`: every replica updated and available,
/// no old one left, and this generation observed.
pub fn is_complete(d: &Deployment, status: &DeploymentStatus) -> bool {
    let want = replicas(d);
    status.updated_replicas == want
        && status.replicas == want
        && status.available_replicas == want
        && status.observed_generation >= d.metadata.generation
}

/// Kubernetes' `DeploymentProgressing`: more updated, ready or available
/// replicas than before, or fewer old ones.
pub fn is_progressing(old: &DeploymentStatus, new: &DeploymentStatus) -> bool {
    let old_old = old.replicas - old.updated_replicas;
    let new_old = new.replicas - new.updated_replicas;
    new.updated_replicas > old.updated_replicas
        || new_old < old_old
        || new.ready_replicas > old.ready_replicas
        || new.available_replicas > old.available_replicas
}

/// Kubernetes' `DeploymentTimedOut`: the `Progressing` condition was last
/// updated more than the deadline ago (and the rollout is not complete).
pub fn timed_out(d: &Deployment, status: &DeploymentStatus, now: Timestamp) -> bool {
    let Some(limit) = deadline(d) else {
        return false;
    };
    let Some(c) = find(status, PROGRESSING) else {
        return false;
    };
    match c.reason.as_str() {
        NEW_RS_AVAILABLE => false,
        TIMED_OUT => true,
        _ => Timestamp::parse_field(c.last_update_time.as_deref())
            .is_some_and(|from| from.saturating_add(limit) < now),
    }
}

/// `syncDeploymentStatus`: the counters, no judgement of progress.
pub(crate) fn sync_status<R: RngCore + ?Sized>(pass: &mut Pass<'_, '_, R>) {
    pass.status = calculate(pass);
}

/// Kubernetes' `syncRolloutStatus`: the counters, then `Progressing`
/// (complete, moving, or past its deadline) and `ReplicaFailure`; asks to
/// plan again when the deadline would pass.
pub(crate) fn sync_rollout<R: RngCore + ?Sized>(pass: &mut Pass<'_, '_, R>) {
    let d = pass.d;
    let mut status = calculate(pass);
    if !has_deadline(d) {
        remove(&mut status, PROGRESSING);
    }
    let current = find(&status, PROGRESSING).cloned();
    let complete_before = status.replicas == status.updated_replicas
        && current
            .as_ref()
            .is_some_and(|c| c.reason == NEW_RS_AVAILABLE);
    let name = pass.new.map(|i| pass.sets[i].rs.metadata.name.clone());
    let subject = match &name {
        Some(n) => format!("ReplicaSet \"{n}\""),
        None => format!("Deployment \"{}\"", d.metadata.name),
    };
    if has_deadline(d) && !complete_before {
        if is_complete(d, &status) {
            set(
                &mut status,
                PROGRESSING,
                ConditionStatus::True,
                NEW_RS_AVAILABLE,
                format!("{subject} has successfully progressed."),
                pass.now,
            );
        } else if is_progressing(&d.status, &status) {
            // A new update time, even with the same reason: the deadline
            // counts from the last progress.
            let since = current
                .as_ref()
                .filter(|c| c.status == Some(ConditionStatus::True))
                .and_then(|c| c.last_transition_time.clone());
            remove(&mut status, PROGRESSING);
            set(
                &mut status,
                PROGRESSING,
                ConditionStatus::True,
                RS_UPDATED,
                format!("{subject} is progressing."),
                pass.now,
            );
            if let (Some(since), Some(c)) = (since, status.conditions.last_mut()) {
                c.last_transition_time = Some(since);
            }
        } else if timed_out(d, &status, pass.now) {
            set(
                &mut status,
                PROGRESSING,
                ConditionStatus::False,
                TIMED_OUT,
                format!("{subject} has timed out progressing."),
                pass.now,
            );
        }
    }
    // ReplicaFailure from the ReplicaSets' own.
    let failure = pass
        .sets
        .iter()
        .flat_map(|e| e.rs.status.conditions.iter())
        .find(|c| c.r#type == REPLICA_FAILURE)
        .cloned();
    match failure {
        Some(c) => set(
            &mut status,
            REPLICA_FAILURE,
            c.status.unwrap_or(ConditionStatus::True),
            &c.reason,
            c.message,
            pass.now,
        ),
        None => remove(&mut status, REPLICA_FAILURE),
    }
    // Plan again when the deadline passes without progress.
    if let (Some(limit), Some(c)) = (deadline(d), find(&status, PROGRESSING)) {
        let moving = c.status == Some(ConditionStatus::True) && c.reason != NEW_RS_AVAILABLE;
        if moving {
            if let Some(from) = Timestamp::parse_field(c.last_update_time.as_deref()) {
                let at = from.saturating_add(limit) + Duration::from_millis(1);
                pass.plan.requeue_at = Some(pass.plan.requeue_at.map_or(at, |t| t.min(at)));
            }
        }
    }
    pass.status = status;
}

/// Kubernetes' `checkPausedConditions`: `Progressing=Unknown` with
/// `DeploymentPaused` while paused, `DeploymentResumed` once resumed.
pub(crate) fn paused_condition<R: RngCore + ?Sized>(pass: &mut Pass<'_, '_, R>) {
    let d = pass.d;
    if !has_deadline(d) {
        return;
    }
    let paused = d.spec.paused.unwrap_or(false);
    let was = find(&pass.status, PROGRESSING).is_some_and(|c| c.reason == PAUSED);
    if paused && !was {
        set(
            &mut pass.status,
            PROGRESSING,
            ConditionStatus::Unknown,
            PAUSED,
            "Deployment is paused".to_owned(),
            pass.now,
        );
    } else if !paused && was {
        set(
            &mut pass.status,
            PROGRESSING,
            ConditionStatus::Unknown,
            RESUMED,
            "Deployment is resumed".to_owned(),
            pass.now,
        );
    }
}
