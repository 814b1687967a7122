//! The fenceposts of a rolling update and the new ReplicaSet's size
//! (`ResolveFenceposts`, `MaxSurge`, `MaxUnavailable`, `NewRSNewReplicas`
//! in Kubernetes' `deployment_util.go`): the leaf the strategies, the
//! revisions and the progress all use.

use drover_api::{Deployment, IntOrString};
use rand::RngCore;

use super::{is_rolling, replicas, Pass};

/// Kubernetes' default `maxSurge` and `maxUnavailable`.
const DEFAULT_FENCEPOST: &str = "25%";

/// Kubernetes' `ResolveFenceposts`: `(maxSurge, maxUnavailable)` for
/// `desired` replicas, `maxSurge` rounded up and `maxUnavailable` down
/// (defaults 25 % each); when both come out 0, `maxUnavailable` is 1 so
/// that the rollout can move. A malformed value counts as 0 (validation
/// refuses it).
pub fn fenceposts(d: &Deployment, desired: i32) -> (i32, i32) {
    let rolling = d.spec.strategy.rolling_update.clone().unwrap_or_default();
    let default = IntOrString::String(DEFAULT_FENCEPOST.to_owned());
    let total = u64::try_from(desired.max(0)).unwrap_or(0);
    let resolve = |v: Option<&IntOrString>, up: bool| {
        v.unwrap_or(&default)
            .scaled_value(total, up)
            .map_or(0, |n| i32::try_from(n).unwrap_or(i32::MAX))
    };
    let surge = resolve(rolling.max_surge.as_ref(), true);
    let unavailable = resolve(rolling.max_unavailable.as_ref(), false);
    if surge == 0 && unavailable == 0 {
        return (0, 1);
    }
    (surge, unavailable)
}

/// Kubernetes' `MaxSurge`: 0 unless rolling.
pub fn max_surge(d: &Deployment) -> i32 {
    if !is_rolling(d) {
        return 0;
    }
    fenceposts(d, replicas(d)).0
}

/// Kubernetes' `MaxUnavailable`: 0 unless rolling with replicas, at most
/// the replicas.
pub fn max_unavailable(d: &Deployment) -> i32 {
    let desired = replicas(d);
    if !is_rolling(d) || desired == 0 {
        return 0;
    }
    fenceposts(d, desired).1.min(desired)
}

/// Sum of the ReplicaSets' sizes (`spec.replicas`).
pub(crate) fn total_size<R: RngCore + ?Sized>(pass: &Pass<'_, '_, R>) -> i32 {
    (0..pass.sets.len()).map(|i| pass.size(i)).sum()
}

/// Kubernetes' `NewRSNewReplicas`: the new ReplicaSet's size for this step,
/// from `current`, its size now. `Recreate`: the replicas. Rolling: up
/// towards the replicas while every ReplicaSet's size together stays
/// within `replicas + maxSurge`.
pub(crate) fn new_rs_replicas<R: RngCore + ?Sized>(pass: &Pass<'_, '_, R>, current: i32) -> i32 {
    let desired = replicas(pass.d);
    if !is_rolling(pass.d) {
        return desired;
    }
    let (surge, _) = fenceposts(pass.d, desired);
    let total = total_size(pass);
    let max_total = desired.saturating_add(surge);
    if total >= max_total {
        return current;
    }
    let up = (max_total - total).min(desired - current);
    current + up.max(0)
}
