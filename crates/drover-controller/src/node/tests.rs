//! Unit tests of the node lifecycle planner.

use super::*;
use std::collections::HashMap;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_unix_seconds(1_700_000_000 + seconds)
}

fn ready_node(name: &str) -> Node {
    let mut node = Node::default();
    node.metadata.name = name.into();
    node.metadata.uid = format!("uid-{name}");
    node.status.conditions.push(NodeCondition {
        r#type: "Ready".into(),
        status: Some(ConditionStatus::True),
        last_transition_time: Some(at(-100).to_rfc3339()),
        last_heartbeat_time: Some(at(-100).to_rfc3339()),
        ..Default::default()
    });
    node
}

fn with_ready(mut node: Node, status: ConditionStatus, since: i64) -> Node {
    let ready = ready_mut(&mut node).unwrap();
    ready.status = Some(status);
    ready.last_transition_time = Some(at(since).to_rfc3339());
    node
}

/// A judge that became leader long ago.
fn judge() -> NodeLifecycle {
    NodeLifecycle::new(NodeLifecycleConfig::default(), at(-10_000))
}

fn heartbeats(pairs: &[(&str, i64)]) -> HashMap<String, Timestamp> {
    pairs.iter().map(|(n, s)| (n.to_string(), at(*s))).collect()
}

fn run(
    judge: &NodeLifecycle,
    nodes: &[Node],
    beats: &HashMap<String, Timestamp>,
    now: i64,
) -> NodePlan {
    judge.plan(nodes, |name| beats.get(name).copied(), at(now))
}

fn taint_strings(node: &Node) -> Vec<String> {
    node.spec.taints.iter().map(ToString::to_string).collect()
}

fn status_of(node: &Node) -> Option<ConditionStatus> {
    node.condition("Ready").and_then(|c| c.status.clone())
}

#[test]
fn a_heartbeating_node_is_not_written() {
    let nodes = [ready_node("n1")];
    let plan = run(&judge(), &nodes, &heartbeats(&[("n1", 8)]), 10);
    assert!(plan.is_empty(), "{plan:?}");
    assert_eq!(plan.next_check, Some(at(13)));
}

#[test]
fn a_silent_node_becomes_unknown_and_unreachable() {
    let nodes = [ready_node("n1")];
    let beats = heartbeats(&[("n1", 5)]);
    assert!(run(&judge(), &nodes, &beats, 9).updates.is_empty());
    let plan = run(&judge(), &nodes, &beats, 10);
    assert_eq!(plan.updates.len(), 1);
    let update = &plan.updates[0];
    let ready = update.node.condition("Ready").unwrap();
    assert_eq!(ready.status, Some(ConditionStatus::Unknown));
    assert_eq!(ready.reason, "NodeStatusUnknown");
    assert_eq!(ready.message, "drover agent stopped sending heartbeats");
    assert_eq!(ready.last_transition_time, Some(at(10).to_rfc3339()));
    assert_eq!(ready.last_heartbeat_time, Some(at(5).to_rfc3339()));
    assert_eq!(
        taint_strings(&update.node),
        [
            "node.kubernetes.io/unreachable:NoSchedule",
            "node.kubernetes.io/unreachable:NoExecute"
        ]
    );
    assert_eq!(update.node.spec.taints[0].time_added, None);
    assert_eq!(
        update.node.spec.taints[1].time_added,
        Some(at(10).to_rfc3339())
    );
    assert_eq!(
        update.changes[0],
        NodeChange::Ready {
            from: Some(ConditionStatus::True),
            to: ConditionStatus::Unknown
        }
    );
    assert_eq!(plan.events.len(), 1);
    assert_eq!(plan.events[0].reason, "NodeNotReady");
    assert_eq!(
        plan.events[0].message,
        "Node n1 status is now: NodeNotReady"
    );
    assert_eq!(plan.next_check, Some(at(10 + 3600)));
}

#[test]
fn a_new_leader_grants_a_grace_period() {
    let nodes = [ready_node("n1")];
    let leader = NodeLifecycle::new(NodeLifecycleConfig::default(), at(100));
    let none = HashMap::new();
    assert!(run(&leader, &nodes, &none, 104).is_empty());
    assert_eq!(run(&leader, &nodes, &none, 104).next_check, Some(at(105)));
    let plan = run(&leader, &nodes, &none, 105);
    assert_eq!(
        status_of(&plan.updates[0].node),
        Some(ConditionStatus::Unknown)
    );
    // It was Ready (under the old leader): it stopped, rather than never
    // sent, heartbeats, although this leader has seen none.
    assert_eq!(
        plan.updates[0].node.condition("Ready").unwrap().message,
        "drover agent stopped sending heartbeats"
    );
    // An old heartbeat from before the election changes nothing.
    let old = heartbeats(&[("n1", 0)]);
    assert!(run(&leader, &nodes, &old, 104).is_empty());
}

#[test]
fn a_heartbeat_brings_a_node_back() {
    let mut node = with_ready(ready_node("n1"), ConditionStatus::Unknown, 0);
    node.spec.taints = vec![
        "dedicated=edge:NoSchedule".parse().unwrap(),
        "node.kubernetes.io/unreachable:NoSchedule".parse().unwrap(),
        "node.kubernetes.io/unreachable:NoExecute".parse().unwrap(),
    ];
    let nodes = [node];
    let plan = run(&judge(), &nodes, &heartbeats(&[("n1", 20)]), 21);
    let update = &plan.updates[0];
    let ready = update.node.condition("Ready").unwrap();
    assert_eq!(ready.status, Some(ConditionStatus::True));
    assert_eq!(ready.reason, "AgentReady");
    assert_eq!(ready.last_heartbeat_time, Some(at(20).to_rfc3339()));
    assert_eq!(taint_strings(&update.node), ["dedicated=edge:NoSchedule"]);
    assert_eq!(plan.events[0].reason, "NodeReady");
    assert_eq!(update.changes.len(), 3);
    // A stale heartbeat does not.
    assert!(run(&judge(), &nodes, &heartbeats(&[("n1", 10)]), 21)
        .updates
        .is_empty());
}

#[test]
fn unreachable_nodes_are_collected_after_the_horizon() {
    let mut node = with_ready(ready_node("n1"), ConditionStatus::Unknown, 0);
    sync_taints(&mut node, at(0));
    let nodes = [node];
    let none = HashMap::new();
    let before = run(&judge(), &nodes, &none, 3599);
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(before.next_check, Some(at(3600)));
    let plan = run(&judge(), &nodes, &none, 3600);
    assert!(plan.updates.is_empty());
    assert_eq!(
        plan.remove,
        [NodeRemoval {
            name: "n1".into(),
            uid: "uid-n1".into(),
            resource_version: String::new(),
            unreachable_since: at(0),
        }]
    );
    assert_eq!(plan.events[0].reason, "DeletingNode");
    // A new leader first waits for the grace period.
    let leader = NodeLifecycle::new(NodeLifecycleConfig::default(), at(5000));
    assert!(run(&leader, &nodes, &none, 5004).remove.is_empty());
    assert_eq!(run(&leader, &nodes, &none, 5005).remove.len(), 1);
    // A heartbeat saves it.
    let plan = run(&judge(), &nodes, &heartbeats(&[("n1", 3599)]), 3600);
    assert!(plan.remove.is_empty());
    assert_eq!(
        status_of(&plan.updates[0].node),
        Some(ConditionStatus::True)
    );
}

#[test]
fn cordon_is_a_taint() {
    let mut node = ready_node("n1");
    node.spec.unschedulable = true;
    let nodes = [node];
    let beats = heartbeats(&[("n1", 10)]);
    let plan = run(&judge(), &nodes, &beats, 10);
    assert_eq!(
        taint_strings(&plan.updates[0].node),
        ["node.kubernetes.io/unschedulable:NoSchedule"]
    );
    assert_eq!(plan.updates[0].node.spec.taints[0].time_added, None);
    assert!(plan.events.is_empty());
    // An update alone (no event, no removal) is something to write.
    assert!(plan.remove.is_empty());
    assert!(!plan.is_empty(), "{plan:?}");

    let mut node = ready_node("n1");
    let added = set_unschedulable(&mut node, true, at(0));
    assert_eq!(added.len(), 1);
    assert!(set_unschedulable(&mut node, true, at(0)).is_empty());
    let removed = set_unschedulable(&mut node, false, at(0));
    assert!(matches!(removed[..], [NodeChange::TaintRemoved(_)]));
    assert!(node.spec.taints.is_empty() && !node.spec.unschedulable);
}

#[test]
fn agent_reported_problems_become_taints() {
    let mut node = with_ready(ready_node("n1"), ConditionStatus::False, 0);
    for (kind, status) in [("MemoryPressure", "True"), ("DiskPressure", "False")] {
        node.status.conditions.push(NodeCondition {
            r#type: kind.into(),
            status: Some(status.into()),
            ..Default::default()
        });
    }
    let nodes = [node];
    let plan = run(&judge(), &nodes, &heartbeats(&[("n1", 10)]), 10);
    let update = &plan.updates[0];
    assert_eq!(
        status_of(&update.node),
        Some(ConditionStatus::False),
        "left alone"
    );
    assert_eq!(
        taint_strings(&update.node),
        [
            "node.kubernetes.io/not-ready:NoSchedule",
            "node.kubernetes.io/not-ready:NoExecute",
            "node.kubernetes.io/memory-pressure:NoSchedule"
        ]
    );
    assert!(plan.events.is_empty());
}

#[test]
fn existing_taints_keep_their_time() {
    let mut node = with_ready(ready_node("n1"), ConditionStatus::Unknown, 0);
    sync_taints(&mut node, at(0));
    let before = node.spec.taints.clone();
    assert!(sync_taints(&mut node, at(50)).is_empty());
    assert_eq!(node.spec.taints, before);
}

#[test]
fn nodes_without_a_ready_condition() {
    let mut fresh = Node::default();
    fresh.metadata.name = "fresh".into();
    let mut quiet = fresh.clone();
    quiet.metadata.name = "quiet".into();
    let nodes = [fresh, quiet];
    let plan = run(&judge(), &nodes, &heartbeats(&[("fresh", 10)]), 10);
    assert_eq!(plan.updates.len(), 2);
    assert_eq!(
        status_of(&plan.updates[0].node),
        Some(ConditionStatus::True)
    );
    let quiet = plan.updates[1].node.condition("Ready").unwrap();
    assert_eq!(quiet.status, Some(ConditionStatus::Unknown));
    assert_eq!(quiet.message, "drover agent never sent a heartbeat");
}

#[test]
fn unknown_without_a_transition_time_is_stamped() {
    let mut node = with_ready(ready_node("n1"), ConditionStatus::Unknown, 0);
    ready_mut(&mut node).unwrap().last_transition_time = None;
    sync_taints(&mut node, at(0));
    let plan = run(&judge(), &[node], &HashMap::new(), 10);
    let ready = plan.updates[0].node.condition("Ready").unwrap();
    assert_eq!(ready.last_transition_time, Some(at(10).to_rfc3339()));
    assert!(plan.events.is_empty());
}

#[test]
fn plans_are_idempotent_once_applied() {
    let mut cordoned = ready_node("c");
    cordoned.spec.unschedulable = true;
    let nodes = vec![
        ready_node("a"),
        with_ready(ready_node("b"), ConditionStatus::Unknown, 0),
        cordoned,
    ];
    let beats = heartbeats(&[("b", 29), ("c", 29)]);
    let plan = run(&judge(), &nodes, &beats, 30);
    assert_eq!(plan.updates.len(), 3);
    let applied: Vec<Node> = plan.updates.into_iter().map(|u| u.node).collect();
    let again = run(&judge(), &applied, &beats, 30);
    assert!(again.is_empty(), "{again:?}");
}

#[test]
fn bare_pods_of_missing_nodes() {
    let nodes = [ready_node("n1")];
    let mut pods = vec![
        Pod::default(),
        Pod::default(),
        Pod::default(),
        Pod::default(),
    ];
    pods[0].spec.node_name = "n1".into();
    pods[1].spec.node_name = "gone".into();
    pods[2].spec.node_name = "gone".into();
    pods[2].metadata.deletion_timestamp = Some(at(0).to_rfc3339());
    let found = pods_on_missing_nodes(&nodes, &pods);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].spec.node_name, "gone");
}

fn running_pod(name: &str, node: &str) -> Pod {
    use drover_api::{ContainerStatus, PodCondition};
    let mut p = Pod::default();
    p.metadata.name = name.into();
    p.metadata.namespace = "default".into();
    p.metadata.uid = format!("uid-{name}");
    p.metadata.resource_version = "7".into();
    p.spec.node_name = node.into();
    for kind in ["Ready", "ContainersReady", "PodScheduled"] {
        p.status.conditions.push(PodCondition {
            r#type: kind.into(),
            status: Some(ConditionStatus::True),
            last_transition_time: Some(at(-50).to_rfc3339()),
            ..Default::default()
        });
    }
    p.status.container_statuses.push(ContainerStatus {
        name: "c".into(),
        ready: true,
        ..Default::default()
    });
    p
}

fn condition(p: &Pod, kind: &str) -> (Option<ConditionStatus>, String, Option<String>) {
    let c = p
        .status
        .conditions
        .iter()
        .find(|c| c.r#type == kind)
        .unwrap();
    (
        c.status.clone(),
        c.reason.clone(),
        c.last_transition_time.clone(),
    )
}

#[test]
fn pods_of_an_unreachable_node_are_marked_not_ready_once() {
    let down = with_ready(ready_node("down"), ConditionStatus::Unknown, 3);
    let up = ready_node("up");
    let nodes = [down.clone(), up];
    let pods = [
        running_pod("a", "down"),
        running_pod("b", "up"),
        running_pod("c", "down"),
    ];
    let beats = heartbeats(&[("down", 0), ("up", 9)]);
    let marked = judge().pods_not_ready(&nodes, &pods, |n| beats.get(n).copied(), at(10));
    let names: Vec<&str> = marked
        .iter()
        .map(|m| m.pod.metadata.name.as_str())
        .collect();
    assert_eq!(names, ["a", "c"]);
    let a = &marked[0].pod;
    let false_now = (
        Some(ConditionStatus::False),
        "NodeNotReady".to_string(),
        Some(at(10).to_rfc3339()),
    );
    assert_eq!(condition(a, "Ready"), false_now);
    assert_eq!(condition(a, "ContainersReady"), false_now);
    // Scheduling is a fact, not a readiness: untouched.
    assert_eq!(condition(a, "PodScheduled").0, Some(ConditionStatus::True));
    assert!(!a.status.container_statuses[0].ready);
    // The version it was read with, for the compare-and-swap.
    assert_eq!(a.metadata.resource_version, "7");
    let e = &marked[0].event;
    assert_eq!(
        (e.r#type.as_str(), e.reason.as_str(), e.message.as_str()),
        ("Warning", "NodeNotReady", "Node is not ready")
    );
    assert_eq!(
        (
            e.involved_object.kind.as_str(),
            e.involved_object.name.as_str()
        ),
        ("Pod", "a")
    );
    // Marked pods are not marked again.
    let again: Vec<Pod> = marked.into_iter().map(|m| m.pod).collect();
    assert!(judge()
        .pods_not_ready(&nodes, &again, |n| beats.get(n).copied(), at(20))
        .is_empty());
}

#[test]
fn pods_are_left_alone_while_their_node_is_ready_or_heartbeats_again() {
    let pods = [running_pod("a", "n1")];
    // Ready: nothing, however old the heartbeat.
    let nodes = [ready_node("n1")];
    let none = |_: &str| None;
    assert!(judge()
        .pods_not_ready(&nodes, &pods, none, at(10))
        .is_empty());
    // Unknown in the store, but a heartbeat came since (the node is back
    // and its agent's report may already be in): not marked.
    let nodes = [with_ready(ready_node("n1"), ConditionStatus::Unknown, 3)];
    let beats = heartbeats(&[("n1", 9)]);
    assert!(judge()
        .pods_not_ready(&nodes, &pods, |n| beats.get(n).copied(), at(10))
        .is_empty());
    // A pod being deleted is left to its deletion.
    let mut going = running_pod("a", "n1");
    going.metadata.deletion_timestamp = Some(at(1).to_rfc3339());
    assert!(judge()
        .pods_not_ready(&nodes, &[going], none, at(10))
        .is_empty());
}

#[test]
fn marking_keeps_to_the_conditions_a_pod_has() {
    let nodes = [with_ready(ready_node("down"), ConditionStatus::Unknown, 3)];
    let beats = heartbeats(&[("down", 0)]);
    // Ready and PodScheduled only, no container status: it counts as
    // ready by its Ready condition alone.
    let mut partial = running_pod("partial", "down");
    partial
        .status
        .conditions
        .retain(|c| c.r#type != "ContainersReady");
    partial.status.container_statuses.clear();
    // No condition at all, but a container that says it is ready.
    let mut bare = running_pod("bare", "down");
    bare.status.conditions.clear();
    // Its agent already said it is not ready (PodScheduled listed first):
    // left alone.
    let mut not_ready = running_pod("not-ready", "down");
    not_ready
        .status
        .conditions
        .retain(|c| c.r#type != "ContainersReady");
    not_ready.status.conditions[0].status = Some(ConditionStatus::False);
    not_ready.status.conditions.rotate_left(1);
    not_ready.status.container_statuses[0].ready = false;
    let pods = [partial, bare, not_ready];
    let marked = judge().pods_not_ready(&nodes, &pods, |n| beats.get(n).copied(), at(10));
    let names: Vec<&str> = marked
        .iter()
        .map(|m| m.pod.metadata.name.as_str())
        .collect();
    assert_eq!(names, ["partial", "bare"]);
    let false_now = (
        Some(ConditionStatus::False),
        "NodeNotReady".to_string(),
        Some(at(10).to_rfc3339()),
    );
    let kinds = |p: &Pod| -> Vec<String> {
        p.status
            .conditions
            .iter()
            .map(|c| c.r#type.clone())
            .collect()
    };
    let partial = &marked[0].pod;
    assert_eq!(condition(partial, "Ready"), false_now);
    assert_eq!(
        condition(partial, "PodScheduled").0,
        Some(ConditionStatus::True)
    );
    // A missing ContainersReady is not made up.
    assert_eq!(kinds(partial), ["Ready", "PodScheduled"]);
    // A missing Ready is added, False.
    let bare = &marked[1].pod;
    assert_eq!(kinds(bare), ["Ready"]);
    assert_eq!(condition(bare, "Ready"), false_now);
    assert!(!bare.status.container_statuses[0].ready);
}
