//! The strategies of a Deployment: `RollingUpdate` (`rolling.go`),
//! `Recreate` (`recreate.go`) and proportional scaling (`sync.go`,
//! `scale`, `GetProportion`), over the sizes of [`super::sizes`].

use drover_api::Pod;
use rand::RngCore;

use super::revisions::{self, DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION};
use super::sizes::{max_surge, max_unavailable, new_rs_replicas, total_size};
use super::{is_rolling, pod_may_run, progress, replicas, Pass};

/// Kubernetes' `rolloutRolling`.
pub(crate) fn rolling<R: RngCore + ?Sized>(pass: &mut Pass<'_, '_, R>) {
    if !revisions::get_or_create_new(pass) {
        progress::sync_status(pass);
        return;
    }
    if reconcile_new(pass) || reconcile_old(pass) {
        progress::sync_rollout(pass);
        return;
    }
    let status = progress::calculate(pass);
    if progress::is_complete(pass.d, &status) {
        revisions::cleanup(pass);
    }
    progress::sync_rollout(pass);
}

/// Kubernetes' `reconcileNewReplicaSet`: scale the new ReplicaSet down to
/// the replicas, or up as far as the surge allows. Whether it scaled.
fn reconcile_new<R: RngCore + ?Sized>(pass: &mut Pass<'_, '_, R>) -> bool {
    let Some(i) = pass.new else {
        return false;
    };
    let desired = replicas(pass.d);
    let size = pass.size(i);
    if size == desired {
        return false;
    }
    if size > desired {
        return pass.scale(i, desired);
    }
    let to = new_rs_replicas(pass, size);
    pass.scale(i, to)
}

/// Kubernetes' `reconcileOldReplicaSets`: scale old ReplicaSets down while
/// `replicas - maxUnavailable` pods stay available, their unhealthy pods
/// first. Whether it scaled.
fn reconcile_old<R: RngCore + ?Sized>(pass: &mut Pass<'_, '_, R>) -> bool {
    let old = pass.old();
    let old_size: i32 = old.iter().map(|&i| pass.size(i)).sum();
    if old_size == 0 {
        return false;
    }
    let all_size = total_size(pass);
    let min_available = replicas(pass.d) - max_unavailable(pass.d);
    let new_unavailable = pass.new.map_or(0, |i| {
        (pass.size(i) - pass.sets[i].rs.status.available_replicas).max(0)
    });
    let max_scaled_down = all_size - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return false;
    }
    // Unhealthy replicas first (`cleanupUnhealthyReplicas`): they cost no
    // availability.
    let mut cleaned = 0;
    for &i in &old {
        if cleaned >= max_scaled_down {
            break;
        }
        let size = pass.size(i);
        let available = pass.sets[i].rs.status.available_replicas;
        if size == 0 || size <= available {
            continue;
        }
        let down = (max_scaled_down - cleaned).min(size - available);
        pass.scale(i, size - down);
        cleaned += down;
    }
    // Then available ones, within `minAvailable`
    // (`scaleDownOldReplicaSetsForRollingUpdate`), oldest first.
    let available: i32 = (0..pass.sets.len())
        .map(|i| pass.sets[i].rs.status.available_replicas)
        .sum();
    let mut scaled = 0;
    if available > min_available {
        let budget = available - min_available;
        for &i in &old {
            if scaled >= budget {
                break;
            }
            let size = pass.size(i);
            if size == 0 {
                continue;
            }
            let down = size.min(budget - scaled);
            pass.scale(i, size - down);
            scaled += down;
        }
    }
    cleaned + scaled > 0
}

/// Kubernetes' `rolloutRecreate`: every old ReplicaSet to 0, then wait
/// until none of their pods runs, then the new ReplicaSet at full size.
pub(crate) fn recreate<R: RngCore + ?Sized>(pass: &mut Pass<'_, '_, R>, pods: &[&Pod]) {
    revisions::sync_new(pass);
    let mut scaled = false;
    for i in pass.old() {
        if pass.size(i) != 0 {
            scaled |= pass.scale(i, 0);
        }
    }
    if scaled || old_pods_running(pass, pods) {
        progress::sync_rollout(pass);
        return;
    }
    if !revisions::get_or_create_new(pass) {
        progress::sync_status(pass);
        return;
    }
    if let Some(i) = pass.new {
        let desired = replicas(pass.d);
        if pass.size(i) != desired {
            pass.scale(i, desired);
        }
    }
    let status = progress::calculate(pass);
    if progress::is_complete(pass.d, &status) {
        revisions::cleanup(pass);
    }
    progress::sync_rollout(pass);
}

/// Kubernetes' `oldPodsRunning`: an old ReplicaSet still reports pods, or
/// one of its pods (terminating included) has not finished.
fn old_pods_running<R: RngCore + ?Sized>(pass: &Pass<'_, '_, R>, pods: &[&Pod]) -> bool {
    pass.old().into_iter().any(|i| {
        let rs = &pass.sets[i].rs;
        rs.status.replicas > 0 || pods.iter().any(|p| pod_may_run(p, &rs.metadata.uid))
    })
}

/// The active ReplicaSets (size above 0).
fn active<R: RngCore + ?Sized>(pass: &Pass<'_, '_, R>) -> Vec<usize> {
    (0..pass.sets.len()).filter(|&i| pass.size(i) > 0).collect()
}

/// Kubernetes' `isScalingEvent`: an active ReplicaSet's
/// `desired-replicas` differs from the Deployment's replicas.
pub(crate) fn is_scaling_event<R: RngCore + ?Sized>(pass: &Pass<'_, '_, R>) -> bool {
    let desired = replicas(pass.d);
    active(pass).into_iter().any(|i| {
        annotation(&pass.sets[i].rs, DESIRED_REPLICAS_ANNOTATION).is_some_and(|v| v != desired)
    })
}

fn annotation(rs: &drover_api::ReplicaSet, key: &str) -> Option<i32> {
    rs.metadata.annotations.get(key)?.parse().ok()
}

/// Kubernetes' `scale`: a change of replicas without a rollout step. One
/// active ReplicaSet (or none: the new, else the newest) takes the
/// replicas; a saturated new ReplicaSet lets the old ones go to 0; during
/// a rolling update the change is shared among the active ReplicaSets in
/// proportion to their size (`max-replicas` annotation), the rest to the
/// largest.
pub(crate) fn scale<R: RngCore + ?Sized>(pass: &mut Pass<'_, '_, R>) {
    let desired = replicas(pass.d);
    let active_sets = active(pass);
    let lone = match active_sets.as_slice() {
        [] => pass.new.or_else(|| newest(pass)),
        [only] => Some(*only),
        _ => None,
    };
    if let Some(i) = lone {
        if pass.size(i) != desired {
            pass.scale(i, desired);
        }
        return;
    }
    if is_saturated(pass) {
        for i in pass.old() {
            if pass.size(i) != 0 {
                pass.scale(i, 0);
            }
        }
        return;
    }
    if !is_rolling(pass.d) {
        return;
    }
    proportional(pass, active_sets, desired);
}

fn newest<R: RngCore + ?Sized>(pass: &Pass<'_, '_, R>) -> Option<usize> {
    pass.sets.len().checked_sub(1)
}

/// Kubernetes' `IsSaturated`: the new ReplicaSet has the replicas, was
/// sized for them, and all of them are available.
fn is_saturated<R: RngCore + ?Sized>(pass: &Pass<'_, '_, R>) -> bool {
    let Some(i) = pass.new else {
        return false;
    };
    let desired = replicas(pass.d);
    let rs = &pass.sets[i].rs;
    pass.size(i) == desired
        && annotation(rs, DESIRED_REPLICAS_ANNOTATION) == Some(desired)
        && rs.status.available_replicas == desired
}

fn proportional<R: RngCore + ?Sized>(
    pass: &mut Pass<'_, '_, R>,
    mut sets: Vec<usize>,
    desired: i32,
) {
    let size: i32 = sets.iter().map(|&i| pass.size(i)).sum();
    let allowed = if desired > 0 {
        desired.saturating_add(max_surge(pass.d))
    } else {
        0
    };
    let to_add = allowed - size;
    // Larger first; among equals the newer first when adding, the older
    // when removing (`ReplicaSetsBySizeNewer` / `…Older`).
    sets.sort_by(|&a, &b| {
        let by_size = pass.size(b).cmp(&pass.size(a));
        if to_add > 0 {
            by_size.then(b.cmp(&a))
        } else {
            by_size.then(a.cmp(&b))
        }
    });
    let mut sizes: Vec<(usize, i32)> = Vec::new();
    let mut added = 0;
    for &i in &sets {
        let share = if to_add != 0 {
            proportion(pass, i, to_add, added)
        } else {
            0
        };
        added += share;
        sizes.push((i, pass.size(i) + share));
    }
    if let Some(first) = sizes.first_mut() {
        first.1 = (first.1 + to_add - added).max(0);
    }
    for (i, to) in sizes {
        pass.scale(i, to);
    }
}

/// Kubernetes' `GetProportion`: ReplicaSet `i`'s share of `to_add`, given
/// `added` so far, never past what is left.
fn proportion<R: RngCore + ?Sized>(
    pass: &Pass<'_, '_, R>,
    i: usize,
    to_add: i32,
    added: i32,
) -> i32 {
    let size = pass.size(i);
    if size == 0 || to_add == added {
        return 0;
    }
    let fraction = fraction(pass, i);
    let left = to_add - added;
    if to_add > 0 {
        fraction.min(left)
    } else {
        fraction.max(left)
    }
}

/// Kubernetes' `getReplicaSetFraction`: how much ReplicaSet `i` grows or
/// shrinks when the Deployment goes from the size it was last scaled for
/// (`max-replicas`, else the status' replicas) to `replicas + maxSurge`,
/// rounded half away from zero.
fn fraction<R: RngCore + ?Sized>(pass: &Pass<'_, '_, R>, i: usize) -> i32 {
    let d = pass.d;
    let size = pass.size(i);
    let desired = replicas(d);
    if desired == 0 {
        return -size;
    }
    let target = i64::from(desired.saturating_add(max_surge(d)));
    let annotated =
        annotation(&pass.sets[i].rs, MAX_REPLICAS_ANNOTATION).unwrap_or(d.status.replicas);
    if annotated <= 0 {
        return 0;
    }
    let annotated = i64::from(annotated);
    let scaled = i64::from(size) * target;
    // round(scaled / annotated), halves away from zero.
    let rounded = (2 * scaled + annotated) / (2 * annotated);
    i32::try_from(rounded - i64::from(size)).unwrap_or(0)
}
