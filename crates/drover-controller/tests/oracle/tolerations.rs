//! Taints and tolerations, from the Kubernetes documentation "Taints and
//! Tolerations" (kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/),
//! the API reference of `Toleration`, and the DaemonSet page's list of the
//! tolerations every daemon pod gets
//! (kubernetes.io/docs/concepts/workloads/controllers/daemonset/#taints-and-tolerations).
//!
//! A toleration tolerates a taint when: its effect is empty or the
//! taint's; its key is empty (which the API allows only with `Exists`:
//! every key) or the taint's; and its operator is `Exists` (any value) or
//! `Equal`/empty with the taint's value.

use drover_api::{Taint, TaintEffect, Toleration, TolerationOperator};

pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = &toleration.effect {
        if Some(effect) != taint.effect.as_ref() {
            return false;
        }
    }
    if !toleration.key.is_empty() && toleration.key != taint.key {
        return false;
    }
    match toleration.operator {
        Some(TolerationOperator::Exists) => true,
        Some(TolerationOperator::Equal) | None => toleration.value == taint.value,
        _ => false,
    }
}

pub fn tolerated(taint: &Taint, tolerations: &[Toleration]) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

/// The DaemonSet documentation's table, "Taints and tolerations": the
/// daemon controller adds these to every daemon pod (operator `Exists`, no
/// value, no `tolerationSeconds`); `network-unavailable` only for pods on
/// the host network.
pub fn daemon_defaults(host_network: bool) -> Vec<Toleration> {
    let table: [(&str, TaintEffect, bool); 7] = [
        (
            "node.kubernetes.io/not-ready",
            TaintEffect::NoExecute,
            false,
        ),
        (
            "node.kubernetes.io/unreachable",
            TaintEffect::NoExecute,
            false,
        ),
        (
            "node.kubernetes.io/disk-pressure",
            TaintEffect::NoSchedule,
            false,
        ),
        (
            "node.kubernetes.io/memory-pressure",
            TaintEffect::NoSchedule,
            false,
        ),
        (
            "node.kubernetes.io/pid-pressure",
            TaintEffect::NoSchedule,
            false,
        ),
        (
            "node.kubernetes.io/unschedulable",
            TaintEffect::NoSchedule,
            false,
        ),
        (
            "node.kubernetes.io/network-unavailable",
            TaintEffect::NoSchedule,
            true,
        ),
    ];
    let mut out = Vec::new();
    for (key, effect, host_only) in table {
        if host_only && !host_network {
            continue;
        }
        out.push(Toleration {
            key: key.to_string(),
            operator: Some(TolerationOperator::Exists),
            effect: Some(effect),
            ..Default::default()
        });
    }
    out
}
