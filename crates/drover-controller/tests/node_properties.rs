//! Property tests of the node lifecycle planner: random nodes (readiness,
//! conditions, cordon, managed and user taints), random heartbeats and
//! leader start times.

use std::collections::HashMap;
use std::time::Duration;

use drover_api::{ConditionStatus, Node, NodeCondition, Taint, TaintEffect};
use drover_controller::node::{desired_taints, NodeLifecycle, NodeLifecycleConfig};
use drover_controller::Timestamp;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

const TAINTS: [&str; 7] = [
    "node.kubernetes.io/unreachable:NoSchedule",
    "node.kubernetes.io/unreachable:NoExecute",
    "node.kubernetes.io/not-ready:NoExecute",
    "node.kubernetes.io/unschedulable:NoSchedule",
    "node.kubernetes.io/memory-pressure:NoSchedule",
    "dedicated=gpu:NoSchedule",
    "node.kubernetes.io/unreachable:PreferNoSchedule",
];

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_unix_seconds(1_700_000_000 + seconds)
}

fn node_strategy(index: usize) -> impl Strategy<Value = (Node, Option<i64>)> {
    (
        prop_oneof![
            Just(None),
            Just(Some(ConditionStatus::True)),
            Just(Some(ConditionStatus::False)),
            Just(Some(ConditionStatus::Unknown)),
        ],
        -8000i64..100,
        any::<bool>(),
        prop::bool::weighted(0.2),
        prop::collection::vec(prop::bool::weighted(0.3), TAINTS.len()),
        prop::option::of(0i64..100),
    )
        .prop_map(
            move |(ready, since, cordoned, pressure, taints, heartbeat)| {
                let mut node = Node::default();
                node.metadata.name = format!("n{index}");
                if let Some(status) = ready {
                    node.status.conditions.push(NodeCondition {
                        r#type: "Ready".into(),
                        status: Some(status),
                        last_transition_time: Some(at(since).to_rfc3339()),
                        ..Default::default()
                    });
                }
                if pressure {
                    node.status.conditions.push(NodeCondition {
                        r#type: "MemoryPressure".into(),
                        status: Some(ConditionStatus::True),
                        ..Default::default()
                    });
                }
                node.spec.unschedulable = cordoned;
                node.spec.taints = TAINTS
                    .iter()
                    .zip(taints)
                    .filter(|(_, on)| *on)
                    .map(|(t, _)| t.parse().unwrap())
                    .collect();
                (node, heartbeat)
            },
        )
}

fn cluster_strategy() -> impl Strategy<Value = Vec<(Node, Option<i64>)>> {
    (0usize..8).prop_flat_map(|n| (0..n).map(|i| node_strategy(i).boxed()).collect::<Vec<_>>())
}

fn ready_status(node: &Node) -> Option<ConditionStatus> {
    node.condition("Ready").and_then(|c| c.status.clone())
}

fn managed(taint: &Taint) -> bool {
    taint.key.starts_with("node.kubernetes.io/")
        && matches!(
            taint.effect,
            Some(TaintEffect::NoSchedule | TaintEffect::NoExecute)
        )
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn node_plans_follow_the_rules(
        cluster in cluster_strategy(),
        now in 0i64..120,
        leader in -100i64..120,
    ) {
        let now = at(now);
        let judge = NodeLifecycle::new(NodeLifecycleConfig::default(), at(leader));
        let nodes: Vec<Node> = cluster.iter().map(|(n, _)| n.clone()).collect();
        let beats: HashMap<String, Timestamp> = cluster
            .iter()
            .filter_map(|(n, hb)| hb.map(|s| (n.metadata.name.clone(), at(s))))
            .collect();
        let heartbeat = |name: &str| beats.get(name).copied();
        let plan = judge.plan(&nodes, heartbeat, now);

        let mut after: Vec<Node> = Vec::new();
        for node in &nodes {
            let name = &node.metadata.name;
            let removed = plan.remove.iter().any(|r| &r.name == name);
            let update = plan.updates.iter().find(|u| &u.node.metadata.name == name);
            prop_assert!(!(removed && update.is_some()));
            if let Some(update) = update {
                prop_assert_ne!(&update.node, node, "only changed nodes are written");
                prop_assert!(!update.changes.is_empty());
            }
            let new = update.map_or(node, |u| &u.node);
            let hb = heartbeat(name);
            let fresh = hb.is_some_and(|t| now.duration_since(t) < Duration::from_secs(5));
            let silent = now >= judge.deadline(hb);
            if removed {
                prop_assert!(silent && ready_status(node) == Some(ConditionStatus::Unknown));
                continue;
            }
            if silent {
                prop_assert_eq!(ready_status(new), Some(ConditionStatus::Unknown));
            } else if fresh && ready_status(node) != Some(ConditionStatus::False) {
                prop_assert_eq!(ready_status(new), Some(ConditionStatus::True));
            } else {
                prop_assert_eq!(ready_status(new), ready_status(node), "judged only past the grace period");
            }
            // Managed taints are exactly the desired ones; user taints stay, in order.
            let status = ready_status(new);
            let mut desired: Vec<(String, TaintEffect)> = desired_taints(new, status.as_ref())
                .into_iter()
                .map(|(k, e)| (k.to_owned(), e))
                .collect();
            let mut present: Vec<(String, TaintEffect)> = new
                .spec
                .taints
                .iter()
                .filter(|t| managed(t))
                .map(|t| (t.key.clone(), t.effect.clone().unwrap()))
                .collect();
            desired.sort();
            present.sort();
            prop_assert_eq!(present, desired);
            let user = |n: &Node| n.spec.taints.iter().filter(|t| !managed(t)).cloned().collect::<Vec<_>>();
            prop_assert_eq!(user(new), user(node));
            for taint in &new.spec.taints {
                if managed(taint) && taint.effect == Some(TaintEffect::NoExecute) && !node.spec.taints.contains(taint) {
                    prop_assert_eq!(taint.time_added.clone(), Some(now.to_rfc3339()));
                }
            }
            after.push(new.clone());
        }
        if let Some(next) = plan.next_check {
            prop_assert!(next > now);
        }

        // Once applied, the same instant plans nothing.
        let again = judge.plan(&after, heartbeat, now);
        prop_assert!(again.is_empty(), "{:?}", again);
    }
}
