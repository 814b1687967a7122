//! The node lifecycle planner: which nodes stopped heartbeating, which came
//! back, which are gone for good, and the taints that say so.
//!
//! Modelled on Kubernetes' node lifecycle controller
//! (`pkg/controller/nodelifecycle`), with one difference of substance:
//! heartbeats are not writes. The leader keeps each node's last heartbeat
//! in memory and passes it in; only changes of state are written.
//!
//! # Readiness
//!
//! A node's deadline is its last heartbeat, or the time the leader became
//! leader if that is later (a new leader gives every node a fresh grace
//! period, since it does not know when heartbeats last arrived), plus
//! `node_timeout` (default 5 s). Then:
//!
//! - a node past its deadline whose `Ready` condition is not `Unknown`
//!   becomes `Unknown`, reason `NodeStatusUnknown` (event `NodeNotReady`);
//! - a node whose last heartbeat is within `node_timeout` and whose
//!   `Ready` is `Unknown` or missing becomes `True` (event `NodeReady`). A
//!   `False` that the agent reported itself is left alone while it
//!   heartbeats;
//! - a node that is `Unknown`, past its deadline, and has been `Unknown`
//!   for `gc_after` (default 1 h, counted from the condition's
//!   `lastTransitionTime`, which survives leader changes) is deleted
//!   (event `DeletingNode`). Its daemon pods then go too
//!   ([`crate::daemon`] deletes pods of nodes that do not exist at once),
//!   and its other pods after a grace period ([`crate::pod_gc`]).
//!
//! # Pods of unreachable nodes
//!
//! While a node is `Unknown` and silent, its pods that still count as ready
//! are marked as Kubernetes' `MarkPodsNotReady` does
//! ([`NodeLifecycle::pods_not_ready`]): `Ready` (and `ContainersReady`)
//! `False` with reason `NodeNotReady`, every container not ready, a Warning
//! `NodeNotReady` event on the pod. They keep running; the agent's report
//! on its return replaces the status.
//!
//! # Taints (Kubernetes' `TaintNodesByCondition` and taint-based eviction)
//!
//! Kept in sync with the node's conditions and `spec.unschedulable` on
//! every plan; other taints are never touched:
//!
//! | state | taints |
//! |---|---|
//! | `Ready` `False` | `node.kubernetes.io/not-ready`, `NoSchedule` and `NoExecute` |
//! | `Ready` `Unknown` | `node.kubernetes.io/unreachable`, `NoSchedule` and `NoExecute` |
//! | `MemoryPressure`/`DiskPressure`/`PIDPressure` `True` | `node.kubernetes.io/{memory,disk,pid}-pressure:NoSchedule` |
//! | `NetworkUnavailable` `True` | `node.kubernetes.io/network-unavailable:NoSchedule` |
//! | `spec.unschedulable` (cordon) | `node.kubernetes.io/unschedulable:NoSchedule` |
//!
//! `NoExecute` taints get `timeAdded`. Daemon pods tolerate the `NoExecute`
//! ones and `unschedulable`, so an unreachable or cordoned node keeps its
//! daemon pods; they do not tolerate `unreachable:NoSchedule`/
//! `not-ready:NoSchedule`, so no new daemon pod is placed on such a node.

use std::time::Duration;

use drover_api::taints::{
    TAINT_NODE_DISK_PRESSURE, TAINT_NODE_MEMORY_PRESSURE, TAINT_NODE_NETWORK_UNAVAILABLE,
    TAINT_NODE_NOT_READY, TAINT_NODE_PID_PRESSURE, TAINT_NODE_UNREACHABLE,
    TAINT_NODE_UNSCHEDULABLE,
};
use drover_api::{
    event_type, node_condition, ConditionStatus, Event, Node, NodeCondition, Pod, Taint,
    TaintEffect,
};

use crate::events::{self, reason};
use crate::time::Timestamp;

/// How long a node may stay silent before it is `Unknown`.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a node may stay `Unknown` before it is deleted.
pub const DEFAULT_GC_AFTER: Duration = Duration::from_secs(60 * 60);

/// Reason of a `Ready` condition set to `Unknown` (Kubernetes' own).
pub const REASON_NODE_STATUS_UNKNOWN: &str = "NodeStatusUnknown";
/// Reason of a `Ready` condition set to `True` on a heartbeat.
pub const REASON_AGENT_READY: &str = "AgentReady";

/// The planner's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLifecycleConfig {
    /// Silence after which a node is `Unknown` (`--node-timeout`).
    pub node_timeout: Duration,
    /// Time `Unknown` after which a node is deleted (`--node-gc-after`).
    pub gc_after: Duration,
}

impl Default for NodeLifecycleConfig {
    fn default() -> Self {
        NodeLifecycleConfig {
            node_timeout: DEFAULT_NODE_TIMEOUT,
            gc_after: DEFAULT_GC_AFTER,
        }
    }
}

/// One change to a node, for logs and tests.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeChange {
    /// The `Ready` condition's status changed (or, `Unknown` to `Unknown`,
    /// got the transition time it lacked).
    Ready {
        /// The status before (`None`: no condition).
        from: Option<ConditionStatus>,
        /// The status after.
        to: ConditionStatus,
    },
    /// A taint was added.
    TaintAdded(Taint),
    /// A taint was removed.
    TaintRemoved(Taint),
}

/// A node to write back, with what changed.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeUpdate {
    /// The whole new node (write it with compare-and-swap on its resource
    /// version, which is the one it was read with).
    pub node: Node,
    /// What changed.
    pub changes: Vec<NodeChange>,
}

/// A node to delete: unreachable past the garbage-collection horizon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRemoval {
    /// The node's name.
    pub name: String,
    /// The node's UID (a precondition).
    pub uid: String,
    /// The node's resource version when planned.
    pub resource_version: String,
    /// Since when it has been `Unknown`.
    pub unreachable_since: Timestamp,
}

/// What to write for the nodes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodePlan {
    /// Nodes whose status or taints changed.
    pub updates: Vec<NodeUpdate>,
    /// Nodes to delete.
    pub remove: Vec<NodeRemoval>,
    /// Events to record (`NodeNotReady`, `NodeReady`, `DeletingNode`).
    pub events: Vec<Event>,
    /// The earliest time at which a node could time out or be collected if
    /// no heartbeat arrives: plan again then (and whenever a heartbeat
    /// arrives from a node that is not `Ready`).
    pub next_check: Option<Timestamp>,
    /// How many nodes were judged.
    pub judged: usize,
}

impl NodePlan {
    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.updates.is_empty() && self.remove.is_empty() && self.events.is_empty()
    }
}

/// The leader's node lifecycle judge: its settings and when it became
/// leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLifecycle {
    /// Timeouts.
    pub config: NodeLifecycleConfig,
    /// When this server became leader: no node is judged silent before
    /// `leader_since + node_timeout`.
    pub leader_since: Timestamp,
}

impl NodeLifecycle {
    /// A judge for a leader elected at `leader_since`.
    pub fn new(config: NodeLifecycleConfig, leader_since: Timestamp) -> Self {
        NodeLifecycle {
            config,
            leader_since,
        }
    }

    /// When a node whose last heartbeat is `last_heartbeat` becomes silent.
    pub fn deadline(&self, last_heartbeat: Option<Timestamp>) -> Timestamp {
        last_heartbeat
            .map_or(self.leader_since, |hb| hb.max(self.leader_since))
            .saturating_add(self.config.node_timeout)
    }

    /// Plans every node. `last_heartbeat` gives the leader's in-memory time
    /// of each node's last heartbeat (`None` when it has seen none).
    pub fn plan<'a>(
        &self,
        nodes: impl IntoIterator<Item = &'a Node>,
        last_heartbeat: impl Fn(&str) -> Option<Timestamp>,
        now: Timestamp,
    ) -> NodePlan {
        let mut plan = NodePlan::default();
        for node in nodes {
            plan.judged += 1;
            let judged = self.plan_node(node, last_heartbeat(&node.metadata.name), now, &mut plan);
            if let Some(at) = judged.next_check {
                plan.next(at);
            }
        }
        plan
    }

    /// Plans one node into `plan` (not its `next_check`: see [`Judged`]).
    fn plan_node(
        &self,
        node: &Node,
        heartbeat: Option<Timestamp>,
        now: Timestamp,
        plan: &mut NodePlan,
    ) -> Judged {
        let name = node.metadata.name.as_str();
        let ready = node.condition(node_condition::READY);
        let status = ready.and_then(|c| c.status.clone());
        let fresh = heartbeat.is_some_and(|hb| now.duration_since(hb) < self.config.node_timeout);
        let deadline = self.deadline(heartbeat);
        let silent = now >= deadline;
        let is_unknown = |s: &Option<ConditionStatus>| {
            matches!(
                s,
                Some(ConditionStatus::Unknown | ConditionStatus::Other(_))
            )
        };

        // The Ready condition after this plan.
        let transition = if silent && status != Some(ConditionStatus::Unknown) {
            Some(ConditionStatus::Unknown)
        } else if fresh && (status.is_none() || is_unknown(&status)) {
            Some(ConditionStatus::True)
        } else {
            None
        };
        let new_status = transition.clone().or(status.clone());
        // The recorded transition time matters only to a node that is (or
        // stays) Unknown: not parsed for the others on every pass.
        let recorded_since = if is_unknown(&new_status) {
            ready.and_then(|c| Timestamp::parse_field(c.last_transition_time.as_deref()))
        } else {
            None
        };
        let restamp = transition.is_none() && is_unknown(&new_status) && recorded_since.is_none();
        let unreachable_since = match (&transition, recorded_since) {
            (None, Some(since)) => since,
            _ => now,
        };

        let gc_at = unreachable_since.saturating_add(self.config.gc_after);
        if is_unknown(&new_status) && silent && now >= gc_at {
            plan.remove.push(NodeRemoval {
                name: name.to_owned(),
                uid: node.metadata.uid.clone(),
                resource_version: node.metadata.resource_version.clone(),
                unreachable_since,
            });
            plan.events.push(events::node_event(
                node,
                event_type::NORMAL,
                reason::DELETING_NODE,
                format!(
                    "Deleting node {name} because it has been unreachable since {unreachable_since}"
                ),
                now,
            ));
            return Judged {
                next_check: None,
                ready: false,
            };
        }
        let judged = Judged {
            next_check: Some(if is_unknown(&new_status) {
                gc_at.max(deadline)
            } else {
                deadline
            }),
            ready: new_status == Some(ConditionStatus::True),
        };

        let taint_changes = taint_diff(node, new_status.as_ref(), now);
        if transition.is_none() && !restamp && taint_changes.is_empty() {
            return judged;
        }
        let mut updated = node.clone();
        let mut changes = Vec::new();
        if let Some(to) = transition {
            let (reason, message, event_reason) = if to == ConditionStatus::True {
                (
                    REASON_AGENT_READY,
                    "drover agent is sending heartbeats",
                    reason::NODE_READY,
                )
            } else if heartbeat.is_none() && status.is_none() {
                (
                    REASON_NODE_STATUS_UNKNOWN,
                    "drover agent never sent a heartbeat",
                    reason::NODE_NOT_READY,
                )
            } else {
                (
                    REASON_NODE_STATUS_UNKNOWN,
                    "drover agent stopped sending heartbeats",
                    reason::NODE_NOT_READY,
                )
            };
            set_ready(&mut updated, to.clone(), reason, message, heartbeat, now);
            plan.events.push(events::node_event(
                node,
                event_type::NORMAL,
                event_reason,
                format!("Node {name} status is now: {event_reason}"),
                now,
            ));
            changes.push(NodeChange::Ready { from: status, to });
        } else if restamp {
            if let Some(ready) = ready_mut(&mut updated) {
                ready.last_transition_time = Some(now.to_rfc3339());
            }
            changes.push(NodeChange::Ready {
                from: status,
                to: ConditionStatus::Unknown,
            });
        }
        apply_taint_diff(&mut updated, &taint_changes);
        changes.extend(taint_changes);
        plan.updates.push(NodeUpdate {
            node: updated,
            changes,
        });
        judged
    }
}

/// What one node's plan says beyond its writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Judged {
    /// The earliest time its verdict can change if neither it nor its
    /// heartbeat does (its deadline; for an `Unknown` node, the later of
    /// that and its collection time). `None`: it is being removed.
    next_check: Option<Timestamp>,
    /// Its `Ready` is `True` after the plan: a heartbeat can only move its
    /// deadline later.
    ready: bool,
}

impl NodePlan {
    fn next(&mut self, at: Timestamp) {
        self.next_check = Some(self.next_check.map_or(at, |t| t.min(at)));
    }
}

fn ready_mut(node: &mut Node) -> Option<&mut NodeCondition> {
    node.status
        .conditions
        .iter_mut()
        .find(|c| c.r#type == node_condition::READY)
}

fn set_ready(
    node: &mut Node,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    heartbeat: Option<Timestamp>,
    now: Timestamp,
) {
    if ready_mut(node).is_none() {
        node.status.conditions.push(NodeCondition {
            r#type: node_condition::READY.to_owned(),
            ..NodeCondition::default()
        });
    }
    let Some(ready) = ready_mut(node) else {
        return;
    };
    ready.status = Some(status);
    ready.reason = reason.to_owned();
    ready.message = message.to_owned();
    ready.last_transition_time = Some(now.to_rfc3339());
    if let Some(heartbeat) = heartbeat {
        let recorded = Timestamp::parse_field(ready.last_heartbeat_time.as_deref());
        if recorded.is_none_or(|r| r < heartbeat) {
            ready.last_heartbeat_time = Some(heartbeat.to_rfc3339());
        }
    }
}

/// The taints this planner manages: key and effect.
const MANAGED_TAINTS: [(&str, TaintEffect); 9] = [
    (TAINT_NODE_NOT_READY, TaintEffect::NoSchedule),
    (TAINT_NODE_NOT_READY, TaintEffect::NoExecute),
    (TAINT_NODE_UNREACHABLE, TaintEffect::NoSchedule),
    (TAINT_NODE_UNREACHABLE, TaintEffect::NoExecute),
    (TAINT_NODE_UNSCHEDULABLE, TaintEffect::NoSchedule),
    (TAINT_NODE_MEMORY_PRESSURE, TaintEffect::NoSchedule),
    (TAINT_NODE_DISK_PRESSURE, TaintEffect::NoSchedule),
    (TAINT_NODE_PID_PRESSURE, TaintEffect::NoSchedule),
    (TAINT_NODE_NETWORK_UNAVAILABLE, TaintEffect::NoSchedule),
];

fn is_managed(taint: &Taint) -> bool {
    MANAGED_TAINTS
        .iter()
        .any(|(key, effect)| taint.key == *key && taint.effect.as_ref() == Some(effect))
}

/// The managed taints a node should have, given the status of its `Ready`
/// condition, its other conditions and `spec.unschedulable` (see the module
/// documentation).
pub fn desired_taints(
    node: &Node,
    ready: Option<&ConditionStatus>,
) -> Vec<(&'static str, TaintEffect)> {
    let mut desired = Vec::new();
    let both = |key| {
        [
            (key, TaintEffect::NoSchedule),
            (key, TaintEffect::NoExecute),
        ]
    };
    match ready {
        Some(ConditionStatus::False) => desired.extend(both(TAINT_NODE_NOT_READY)),
        Some(ConditionStatus::Unknown | ConditionStatus::Other(_)) => {
            desired.extend(both(TAINT_NODE_UNREACHABLE));
        }
        Some(ConditionStatus::True) | None => {}
    }
    for (condition, key) in [
        (node_condition::MEMORY_PRESSURE, TAINT_NODE_MEMORY_PRESSURE),
        (node_condition::DISK_PRESSURE, TAINT_NODE_DISK_PRESSURE),
        (node_condition::PID_PRESSURE, TAINT_NODE_PID_PRESSURE),
        (
            node_condition::NETWORK_UNAVAILABLE,
            TAINT_NODE_NETWORK_UNAVAILABLE,
        ),
    ] {
        if node
            .condition(condition)
            .is_some_and(|c| c.status == Some(ConditionStatus::True))
        {
            desired.push((key, TaintEffect::NoSchedule));
        }
    }
    if node.spec.unschedulable {
        desired.push((TAINT_NODE_UNSCHEDULABLE, TaintEffect::NoSchedule));
    }
    desired
}

/// The taint changes that bring the node's managed taints in line with
/// [`desired_taints`], for a `Ready` status of `ready`.
fn taint_diff(node: &Node, ready: Option<&ConditionStatus>, now: Timestamp) -> Vec<NodeChange> {
    let desired = desired_taints(node, ready);
    let mut changes: Vec<NodeChange> = node
        .spec
        .taints
        .iter()
        .filter(|t| {
            is_managed(t)
                && !desired
                    .iter()
                    .any(|(key, effect)| t.key == *key && t.effect.as_ref() == Some(effect))
        })
        .cloned()
        .map(NodeChange::TaintRemoved)
        .collect();
    for (key, effect) in desired {
        let present = node
            .spec
            .taints
            .iter()
            .any(|t| t.key == key && t.effect.as_ref() == Some(&effect));
        if !present {
            changes.push(NodeChange::TaintAdded(Taint {
                key: key.to_owned(),
                time_added: (effect == TaintEffect::NoExecute).then(|| now.to_rfc3339()),
                effect: Some(effect),
                ..Taint::default()
            }));
        }
    }
    changes
}

fn apply_taint_diff(node: &mut Node, changes: &[NodeChange]) {
    for change in changes {
        match change {
            NodeChange::TaintRemoved(taint) => node.spec.taints.retain(|t| t != taint),
            NodeChange::TaintAdded(taint) => node.spec.taints.push(taint.clone()),
            NodeChange::Ready { .. } => {}
        }
    }
}

/// Brings the node's managed taints in line with its conditions and
/// `spec.unschedulable`; returns what changed.
pub fn sync_taints(node: &mut Node, now: Timestamp) -> Vec<NodeChange> {
    let ready = node
        .condition(node_condition::READY)
        .and_then(|c| c.status.clone());
    let changes = taint_diff(node, ready.as_ref(), now);
    apply_taint_diff(node, &changes);
    changes
}

/// `cordon`/`uncordon`: sets `spec.unschedulable` and the
/// `node.kubernetes.io/unschedulable:NoSchedule` taint in the same write.
/// Returns what changed in the taints (empty when already so).
pub fn set_unschedulable(node: &mut Node, unschedulable: bool, now: Timestamp) -> Vec<NodeChange> {
    node.spec.unschedulable = unschedulable;
    sync_taints(node, now)
}

/// Reason of the `Ready` condition of a pod whose node is unreachable, and
/// of the Warning event about it (Kubernetes' `MarkPodsNotReady`).
pub const REASON_POD_NODE_NOT_READY: &str = drover_api::pod_condition::REASON_NODE_NOT_READY;
/// Message of that condition and event.
pub const MESSAGE_POD_NODE_NOT_READY: &str = "Node is not ready";

/// A pod marked not ready because its node is unreachable.
#[derive(Debug, Clone, PartialEq)]
pub struct PodNotReady {
    /// The whole pod with its new status: write it with compare-and-swap on
    /// its resource version (the one it was read with), so that a report
    /// its agent made meanwhile wins.
    pub pod: Pod,
    /// The Warning `NodeNotReady` event about it.
    pub event: Event,
}

impl NodeLifecycle {
    /// The pods that still count as ready on unreachable nodes (the node's
    /// `Ready` is `Unknown` and no heartbeat came since its deadline), as
    /// Kubernetes' node lifecycle controller marks them: the pod's `Ready`
    /// condition `False` (reason `NodeNotReady`) and every container not
    /// ready, so that they are neither shown nor counted as ready or
    /// available. Nothing else changes; when the node is back its agent's
    /// report replaces the status. Pods already marked, or being deleted,
    /// are left alone.
    pub fn pods_not_ready<'a, 'n>(
        &self,
        nodes: impl IntoIterator<Item = &'n Node>,
        pods: impl IntoIterator<Item = &'a Pod>,
        last_heartbeat: impl Fn(&str) -> Option<Timestamp>,
        now: Timestamp,
    ) -> Vec<PodNotReady> {
        let unreachable: std::collections::HashSet<&str> = nodes
            .into_iter()
            .filter(|n| {
                n.condition(node_condition::READY)
                    .is_some_and(|c| c.status == Some(ConditionStatus::Unknown))
                    && now >= self.deadline(last_heartbeat(&n.metadata.name))
            })
            .map(|n| n.metadata.name.as_str())
            .collect();
        if unreachable.is_empty() {
            return Vec::new();
        }
        pods.into_iter()
            .filter(|p| {
                unreachable.contains(p.spec.node_name.as_str())
                    && p.metadata.deletion_timestamp.is_none()
                    && counts_as_ready(p)
            })
            .map(|p| {
                let mut pod = p.clone();
                mark_not_ready(&mut pod, now);
                let event = pod_not_ready_event(&pod, now);
                PodNotReady { pod, event }
            })
            .collect()
    }
}

/// Whether a pod's `Ready` condition is not `False`, or a container says
/// it is ready.
fn counts_as_ready(p: &Pod) -> bool {
    let ready = p
        .status
        .conditions
        .iter()
        .find(|c| c.r#type == drover_api::pod_condition::READY);
    ready.is_some_and(|c| c.status != Some(ConditionStatus::False))
        || p.status.container_statuses.iter().any(|c| c.ready)
}

fn mark_not_ready(pod: &mut Pod, now: Timestamp) {
    use drover_api::{pod_condition, PodCondition};
    let time = now.to_rfc3339();
    for kind in [pod_condition::READY, pod_condition::CONTAINERS_READY] {
        let conditions = &mut pod.status.conditions;
        let i = match conditions.iter().position(|c| c.r#type == kind) {
            Some(i) => i,
            None if kind == pod_condition::READY => {
                conditions.push(PodCondition {
                    r#type: kind.to_owned(),
                    ..PodCondition::default()
                });
                conditions.len() - 1
            }
            None => continue,
        };
        let c = &mut conditions[i];
        if c.status != Some(ConditionStatus::False) {
            c.status = Some(ConditionStatus::False);
            c.last_transition_time = Some(time.clone());
        }
        c.reason = REASON_POD_NODE_NOT_READY.to_owned();
        c.message = MESSAGE_POD_NODE_NOT_READY.to_owned();
    }
    for c in &mut pod.status.container_statuses {
        c.ready = false;
    }
}

/// The Warning `NodeNotReady` event about a pod.
fn pod_not_ready_event(pod: &Pod, now: Timestamp) -> Event {
    let meta = &pod.metadata;
    events::pod_event(
        (&meta.namespace, &meta.name, &meta.uid),
        events::NODE_CONTROLLER,
        event_type::WARNING,
        REASON_POD_NODE_NOT_READY,
        MESSAGE_POD_NODE_NOT_READY.to_owned(),
        now,
    )
}

/// Pods bound to nodes that do not exist and not yet being deleted (what
/// Kubernetes' pod garbage collector removes, after a grace period: see
/// [`crate::pod_gc::PodGc`]), daemon pods included (the DaemonSet planner
/// deletes those itself, at once).
pub fn pods_on_missing_nodes<'a, 'n>(
    nodes: impl IntoIterator<Item = &'n Node>,
    pods: impl IntoIterator<Item = &'a Pod>,
) -> Vec<&'a Pod> {
    let names: crate::FastSet<&str> = nodes
        .into_iter()
        .map(|n| n.metadata.name.as_str())
        .collect();
    pods.into_iter()
        .filter(|p| {
            !p.spec.node_name.is_empty()
                && p.metadata.deletion_timestamp.is_none()
                && !names.contains(p.spec.node_name.as_str())
        })
        .collect()
}

#[cfg(test)]
mod tests;
mod watch;

pub use watch::{NodeWatch, Now, CLOCK_STEP};
