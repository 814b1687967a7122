//! The score plugins that look at one node and the pod alone, as
//! kube-scheduler's (each 0..100 once normalised): NodeResourcesFit with
//! its default `LeastAllocated` strategy, NodeResourcesBalancedAllocation,
//! TaintToleration (untolerated `PreferNoSchedule` taints) and NodeAffinity
//! (preferred terms). kube-scheduler's default weights are in
//! [`WEIGHTS`](super::WEIGHTS).

use drover_api::{PodSpec, TaintEffect};

use super::cluster::{Demand, NodeInfo};
use super::filters::preferred_term_matches;

/// The highest score of a plugin (`framework.MaxNodeScore`).
pub const MAX_NODE_SCORE: i64 = 100;

fn least_requested(requested: i128, capacity: i128) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    ((capacity - requested) * i128::from(MAX_NODE_SCORE) / capacity) as i64
}

/// NodeResourcesFit, `LeastAllocated` (cpu and memory, weight 1 each): the
/// share of each left free once the pod is placed, averaged; requests as
/// scored (a container without a request counts 100m CPU and 200 MiB). A
/// resource the node does not report is left out.
pub(crate) fn least_allocated(demand: &Demand, node: &NodeInfo<'_>) -> i64 {
    let mut sum = 0;
    let mut weights = 0;
    for (alloc, used, wanted) in [
        (node.alloc_cpu, node.used.nonzero_cpu, demand.nonzero_cpu),
        (
            node.alloc_memory,
            node.used.nonzero_memory,
            demand.nonzero_memory,
        ),
    ] {
        let Some(alloc) = alloc.filter(|a| *a != 0) else {
            continue;
        };
        sum += least_requested(used + wanted, alloc);
        weights += 1;
    }
    if weights == 0 {
        0
    } else {
        sum / weights
    }
}

/// NodeResourcesBalancedAllocation: `(1 - std) * 100` of the cpu and
/// memory fractions requested once the pod is placed (real requests, each
/// fraction capped at 1; with two resources the deviation is half their
/// difference). A pod that requests neither scores 0 everywhere
/// (kube-scheduler skips the plugin for best-effort pods).
pub(crate) fn balanced_allocation(demand: &Demand, node: &NodeInfo<'_>) -> i64 {
    if demand.cpu == 0 && demand.memory == 0 {
        return 0;
    }
    let fraction = |alloc: Option<i128>, used: i128, wanted: i128| {
        alloc
            .filter(|a| *a != 0)
            .map(|a| ((used + wanted) as f64 / a as f64).min(1.0))
    };
    let cpu = fraction(node.alloc_cpu, node.used.cpu, demand.cpu);
    let memory = fraction(node.alloc_memory, node.used.memory, demand.memory);
    // With one resource (or none) the deviation is 0.
    let std = match (cpu, memory) {
        (Some(c), Some(m)) => ((c - m) / 2.0).abs(),
        _ => 0.0,
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// TaintToleration's raw score: how many `PreferNoSchedule` taints of the
/// node the pod does not tolerate (only its tolerations with that effect
/// or none count). Normalised in reverse: fewer is better.
pub(crate) fn taint_toleration(spec: &PodSpec, node: &NodeInfo<'_>) -> i64 {
    let tolerations: Vec<&drover_api::Toleration> = spec
        .tolerations
        .iter()
        .filter(|t| t.effect.is_none() || t.effect == Some(TaintEffect::PreferNoSchedule))
        .collect();
    node.node
        .spec
        .taints
        .iter()
        .filter(|t| t.effect == Some(TaintEffect::PreferNoSchedule))
        .filter(|t| !tolerations.iter().any(|tol| tol.tolerates(t)))
        .count() as i64
}

/// NodeAffinity's raw score: the sum of the weights of the pod's preferred
/// node affinity terms the node matches.
pub(crate) fn node_affinity(spec: &PodSpec, node: &NodeInfo<'_>) -> i64 {
    spec.affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .map_or(0, |n| {
            n.preferred_during_scheduling_ignored_during_execution
                .iter()
                .filter(|t| t.weight != 0 && preferred_term_matches(&t.preference, node.node))
                .map(|t| i64::from(t.weight))
                .sum()
        })
}

/// kube-scheduler's `DefaultNormalizeScore`: scaled so the largest is 100
/// (reversed: `100 - that`); when all are 0, all stay 0 (reversed: 100).
pub(crate) fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0).max(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = MAX_NODE_SCORE);
        }
        return;
    }
    for s in scores.iter_mut() {
        let scaled = MAX_NODE_SCORE * *s / max;
        *s = if reverse {
            MAX_NODE_SCORE - scaled
        } else {
            scaled
        };
    }
}
