//! The node lifecycle, from the Kubernetes documentation "Nodes" (node
//! status, heartbeats, `node-monitor-grace-period`), "Taints and
//! Tolerations" (taint-based evictions, taint nodes by condition) and
//! `pkg/controller/nodelifecycle`, with drover's two documented changes:
//! heartbeats are held in memory by the leader, and a new leader grants
//! every node a fresh grace period (it cannot know when heartbeats last
//! arrived). Times are whole seconds.
//!
//! Ready transitions at a check at `now`, for a node last heard at
//! `heartbeat` (none: never, since this leader took over at `leader`):
//!
//! - silent (no heartbeat and no leadership within the timeout:
//!   `now - max(heartbeat, leader) >= timeout`): `Ready` is `Unknown`;
//! - heard within the timeout (`now - heartbeat < timeout`): `Ready` is
//!   `True`, unless the agent reported `False` itself (then it stays);
//! - otherwise (neither): unchanged.
//!
//! A node `Unknown` since `lastTransitionTime` for at least `gc_after`,
//! and silent, is deleted.
//!
//! Taints (the "taint nodes by condition" and "taint based evictions"
//! tables): `Ready` `False` gives `node.kubernetes.io/not-ready`,
//! `Unknown` gives `node.kubernetes.io/unreachable` (each `NoSchedule`
//! and `NoExecute`); `MemoryPressure`, `DiskPressure`, `PIDPressure` and
//! `NetworkUnavailable` `True` give `memory-pressure`, `disk-pressure`,
//! `pid-pressure` and `network-unavailable` `NoSchedule`;
//! `spec.unschedulable` gives `unschedulable:NoSchedule`. Every other taint
//! is the user's.

use std::collections::BTreeSet;

use drover_api::{ConditionStatus, Node, Taint, TaintEffect};

pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

/// The condition table: condition type, and the taint its `True` gives.
const BY_CONDITION: [(&str, &str); 4] = [
    ("MemoryPressure", "node.kubernetes.io/memory-pressure"),
    ("DiskPressure", "node.kubernetes.io/disk-pressure"),
    ("PIDPressure", "node.kubernetes.io/pid-pressure"),
    (
        "NetworkUnavailable",
        "node.kubernetes.io/network-unavailable",
    ),
];
const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

pub fn condition_status(node: &Node, kind: &str) -> Option<ConditionStatus> {
    node.status
        .conditions
        .iter()
        .find(|c| c.r#type == kind)
        .and_then(|c| c.status.clone())
}

/// Whether the node is silent at `now` (seconds).
pub fn silent(heartbeat: Option<i64>, leader: i64, timeout: i64, now: i64) -> bool {
    let last = match heartbeat {
        Some(hb) if hb > leader => hb,
        _ => leader,
    };
    now - last >= timeout
}

/// The `Ready` status after a check at `now`.
pub fn ready_after(
    before: Option<ConditionStatus>,
    heartbeat: Option<i64>,
    leader: i64,
    timeout: i64,
    now: i64,
) -> Option<ConditionStatus> {
    if silent(heartbeat, leader, timeout, now) {
        return Some(ConditionStatus::Unknown);
    }
    let heard = matches!(heartbeat, Some(hb) if now - hb < timeout);
    if heard && before != Some(ConditionStatus::False) {
        return Some(ConditionStatus::True);
    }
    before
}

/// Whether a check at `now` deletes the node: `Unknown` since
/// `unknown_since` (its recorded transition time) for `gc_after`, silent.
pub fn deleted(
    before: Option<ConditionStatus>,
    unknown_since: Option<i64>,
    heartbeat: Option<i64>,
    leader: i64,
    timeout: i64,
    gc_after: i64,
    now: i64,
) -> bool {
    before == Some(ConditionStatus::Unknown)
        && silent(heartbeat, leader, timeout, now)
        && unknown_since.is_some_and(|since| now - since >= gc_after)
}

/// Whether the lifecycle owns this taint (key and effect in the tables).
pub fn managed(taint: &Taint) -> bool {
    let effect = taint.effect.clone();
    let key = taint.key.as_str();
    let both = key == NOT_READY || key == UNREACHABLE;
    let schedule_only = key == UNSCHEDULABLE || BY_CONDITION.iter().any(|(_, t)| *t == key);
    (both
        && matches!(
            effect,
            Some(TaintEffect::NoSchedule | TaintEffect::NoExecute)
        ))
        || (schedule_only && effect == Some(TaintEffect::NoSchedule))
}

/// The managed taints a node with `Ready` `ready` should carry, as
/// `key:Effect` strings.
pub fn expected_taints(node: &Node, ready: Option<&ConditionStatus>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut both = |key: &str| {
        out.insert(format!("{key}:NoSchedule"));
        out.insert(format!("{key}:NoExecute"));
    };
    match ready {
        Some(ConditionStatus::False) => both(NOT_READY),
        Some(ConditionStatus::Unknown) => both(UNREACHABLE),
        _ => {}
    }
    for (condition, key) in BY_CONDITION {
        if condition_status(node, condition) == Some(ConditionStatus::True) {
            out.insert(format!("{key}:NoSchedule"));
        }
    }
    if node.spec.unschedulable {
        out.insert(format!("{UNSCHEDULABLE}:NoSchedule"));
    }
    out
}

/// A taint as `key:Effect` (value left out: the managed taints have none).
pub fn key_effect(taint: &Taint) -> String {
    let effect = match taint.effect {
        Some(TaintEffect::NoSchedule) => "NoSchedule",
        Some(TaintEffect::NoExecute) => "NoExecute",
        Some(TaintEffect::PreferNoSchedule) => "PreferNoSchedule",
        _ => "",
    };
    format!("{}:{effect}", taint.key)
}
