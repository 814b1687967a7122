//! A pod's availability, from Kubernetes' `IsPodAvailable`
//! (`pkg/api/v1/pod/util.go`) and the `minReadySeconds` field's API
//! documentation: a pod is available when its `Ready` condition is `True`
//! and, if `minReadySeconds` is above 0, the condition's
//! `lastTransitionTime` plus `minReadySeconds` is strictly before now (a
//! ready pod without a transition time is then not available).

use drover_api::{ConditionStatus, Pod};
use drover_controller::Timestamp;

/// From the simulation's own record: ready since `ready_since` (seconds).
pub fn available_since(ready_since: Option<i64>, min_ready_seconds: i64, now: i64) -> bool {
    match ready_since {
        None => false,
        Some(_) if min_ready_seconds <= 0 => true,
        Some(since) => since + min_ready_seconds < now,
    }
}

/// From the pod's `Ready` condition.
pub fn pod_available(pod: &Pod, min_ready_seconds: i64, now: Timestamp) -> bool {
    let ready = pod.status.conditions.iter().find(|c| c.r#type == "Ready");
    let Some(ready) = ready else { return false };
    if ready.status != Some(ConditionStatus::True) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    match Timestamp::parse_field(ready.last_transition_time.as_deref()) {
        None => false,
        Some(since) => since + std::time::Duration::from_secs(min_ready_seconds as u64) < now,
    }
}
