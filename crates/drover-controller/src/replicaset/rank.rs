//! Which pods a ReplicaSet deletes first when it has too many: Kubernetes'
//! `ActivePodsWithRanks` order (`pkg/controller/controller_utils.go`), the
//! pod least worth keeping first.

use std::cmp::Ordering;
use std::collections::HashMap;

use drover_api::{Pod, PodPhase};

use crate::daemon::pods::{creation_time, ready_since};

/// Unscheduled pods first, then `Pending` before `Unknown` before
/// `Running`, not ready before ready, then pods sharing their node with
/// more of the ReplicaSet's pods (`rank`), then the more recently ready,
/// the more restarted, the newer; the name last, so that the order is
/// total.
pub fn deletion_order(a: &Pod, b: &Pod, rank: &HashMap<&str, usize>) -> Ordering {
    let scheduled = |p: &Pod| !p.spec.node_name.is_empty();
    let ready = |p: &Pod| p.is_ready();
    let rank_of = |p: &Pod| {
        if p.spec.node_name.is_empty() {
            0
        } else {
            rank.get(p.spec.node_name.as_str()).copied().unwrap_or(0)
        }
    };
    scheduled(a)
        .cmp(&scheduled(b))
        .then_with(|| phase_rank(a).cmp(&phase_rank(b)))
        .then_with(|| ready(a).cmp(&ready(b)))
        // More pods on the node: deleted first.
        .then_with(|| rank_of(b).cmp(&rank_of(a)))
        .then_with(|| match (ready_since(a), ready_since(b)) {
            // Both ready: the one ready more recently goes first (a
            // missing time counts as the earliest, as Go's zero time).
            (Some(x), Some(y)) => y.cmp(&x),
            _ => Ordering::Equal,
        })
        .then_with(|| restarts(b).cmp(&restarts(a)))
        // Newer first (no creation time: the oldest, as Go's zero time).
        .then_with(|| creation_time(b).cmp(&creation_time(a)))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// `Pending` (or no phase) 0, `Unknown` 1, `Running` 2: the lower is
/// deleted first.
fn phase_rank(pod: &Pod) -> u8 {
    match pod.status.phase {
        Some(PodPhase::Running) => 2,
        Some(PodPhase::Unknown) => 1,
        _ => 0,
    }
}

/// The highest restart count of the pod's containers (Kubernetes compares
/// the maximum).
pub fn restarts(pod: &Pod) -> i32 {
    pod.status
        .container_statuses
        .iter()
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0)
}

/// How many of `pods` run on each node (the rank of the pods there).
pub fn pods_per_node<'a>(pods: &[&'a Pod]) -> HashMap<&'a str, usize> {
    let mut per_node = HashMap::new();
    for p in pods {
        if !p.spec.node_name.is_empty() {
            *per_node.entry(p.spec.node_name.as_str()).or_insert(0) += 1;
        }
    }
    per_node
}
