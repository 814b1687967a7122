//! Property tests of the node lifecycle planner: random nodes (readiness,
//! conditions, cordon, managed and user taints), random heartbeats and
//! leader start times, checked against the independent model of
//! `oracle::lifecycle` (the Kubernetes documentation's rules, never the
//! planner's own `desired_taints` or deadline).

mod oracle;
mod seed;

use std::collections::HashMap;
use std::time::Duration;

use drover_api::{ConditionStatus, Node, NodeCondition, TaintEffect};
use drover_controller::node::{NodeLifecycle, NodeLifecycleConfig, NodeWatch, Now};
use drover_controller::Timestamp;
use proptest::prelude::*;

use oracle::lifecycle;

const TIMEOUT: i64 = 5;
const GC_AFTER: i64 = 3600;

const TAINTS: [&str; 11] = [
    "node.kubernetes.io/unreachable:NoSchedule",
    "node.kubernetes.io/unreachable:NoExecute",
    "node.kubernetes.io/not-ready:NoExecute",
    "node.kubernetes.io/unschedulable:NoSchedule",
    "node.kubernetes.io/memory-pressure:NoSchedule",
    "dedicated=gpu:NoSchedule",
    "node.kubernetes.io/unreachable:PreferNoSchedule",
    "node.kubernetes.io/disk-pressure:NoSchedule",
    "node.kubernetes.io/not-ready:NoSchedule",
    "example.com/maint=soon:NoExecute",
    "node.kubernetes.io/network-unavailable:NoExecute",
];
const PRESSURES: [&str; 4] = [
    "MemoryPressure",
    "DiskPressure",
    "PIDPressure",
    "NetworkUnavailable",
];

fn status_strategy() -> impl Strategy<Value = Option<ConditionStatus>> {
    prop_oneof![
        Just(None),
        Just(Some(ConditionStatus::True)),
        Just(Some(ConditionStatus::False)),
        Just(Some(ConditionStatus::Unknown)),
    ]
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_unix_seconds(1_700_000_000 + seconds)
}

/// A node, its last heartbeat (seconds), and its `Ready` transition time
/// (seconds; none: not recorded).
fn node_strategy(index: usize) -> impl Strategy<Value = (Node, Option<i64>, Option<i64>)> {
    (
        status_strategy(),
        prop::option::weighted(0.9, -8000i64..100),
        any::<bool>(),
        prop::collection::vec(
            prop::option::weighted(0.2, status_strategy()),
            PRESSURES.len(),
        ),
        prop::collection::vec(prop::bool::weighted(0.3), TAINTS.len()),
        prop::option::of(0i64..100),
    )
        .prop_map(
            move |(ready, since, cordoned, pressures, taints, heartbeat)| {
                let mut node = Node::default();
                node.metadata.name = format!("n{index}");
                if let Some(status) = ready {
                    node.status.conditions.push(NodeCondition {
                        r#type: "Ready".into(),
                        status: Some(status),
                        last_transition_time: since.map(|s| at(s).to_rfc3339()),
                        ..Default::default()
                    });
                }
                for (kind, status) in PRESSURES.iter().zip(pressures) {
                    if let Some(status) = status {
                        node.status.conditions.push(NodeCondition {
                            r#type: kind.to_string(),
                            status,
                            ..Default::default()
                        });
                    }
                }
                node.spec.unschedulable = cordoned;
                node.spec.taints = TAINTS
                    .iter()
                    .zip(taints)
                    .filter(|(_, on)| *on)
                    .map(|(t, _)| t.parse().unwrap())
                    .collect();
                (node, heartbeat, since)
            },
        )
}

fn cluster_strategy() -> impl Strategy<Value = Vec<(Node, Option<i64>, Option<i64>)>> {
    (0usize..8).prop_flat_map(|n| (0..n).map(|i| node_strategy(i).boxed()).collect::<Vec<_>>())
}

fn ready_status(node: &Node) -> Option<ConditionStatus> {
    lifecycle::condition_status(node, "Ready")
}

proptest! {
    #![proptest_config(seed::config(1024))]

    #[test]
    fn node_plans_follow_the_rules(
        cluster in cluster_strategy(),
        now_s in 0i64..120,
        leader in -100i64..120,
    ) {
        let now = at(now_s);
        let config = NodeLifecycleConfig {
            node_timeout: Duration::from_secs(TIMEOUT as u64),
            gc_after: Duration::from_secs(GC_AFTER as u64),
        };
        let judge = NodeLifecycle::new(config, at(leader));
        let nodes: Vec<Node> = cluster.iter().map(|(n, _, _)| n.clone()).collect();
        let seconds: HashMap<String, i64> = cluster
            .iter()
            .filter_map(|(n, hb, _)| hb.map(|s| (n.metadata.name.clone(), s)))
            .collect();
        let beats: HashMap<String, Timestamp> =
            seconds.iter().map(|(n, s)| (n.clone(), at(*s))).collect();
        let heartbeat = |name: &str| beats.get(name).copied();
        let plan = judge.plan(&nodes, heartbeat, now);

        let mut after: Vec<Node> = Vec::new();
        for (node, hb, since) in &cluster {
            let name = &node.metadata.name;
            let removed = plan.remove.iter().any(|r| &r.name == name);
            let update = plan.updates.iter().find(|u| &u.node.metadata.name == name);
            prop_assert!(!(removed && update.is_some()));
            if let Some(update) = update {
                prop_assert_ne!(&update.node, node, "only changed nodes are written");
                prop_assert!(!update.changes.is_empty());
            }
            let new = update.map_or(node, |u| &u.node);
            let before = ready_status(node);
            let since = since.filter(|_| before.is_some());
            let expect_removed =
                lifecycle::deleted(before.clone(), since, *hb, leader, TIMEOUT, GC_AFTER, now_s);
            prop_assert_eq!(removed, expect_removed, "{} deleted", name);
            if removed {
                continue;
            }
            let expected = lifecycle::ready_after(before.clone(), *hb, leader, TIMEOUT, now_s);
            prop_assert_eq!(ready_status(new), expected.clone(), "Ready of {}", name);
            let ready = new.status.conditions.iter().find(|c| c.r#type == "Ready");
            if expected != before {
                // A transition is stamped now.
                let stamped = ready.and_then(|c| c.last_transition_time.clone());
                prop_assert_eq!(stamped, Some(now.to_rfc3339()));
            }
            // The other conditions are the agent's: never touched.
            let others = |n: &Node| n.status.conditions.iter().filter(|c| c.r#type != "Ready").cloned().collect::<Vec<_>>();
            prop_assert_eq!(others(new), others(node));
            // Managed taints are exactly the documented ones; user taints stay, in order.
            let desired = lifecycle::expected_taints(new, expected.as_ref());
            let present: Vec<String> = new
                .spec
                .taints
                .iter()
                .filter(|t| lifecycle::managed(t))
                .map(lifecycle::key_effect)
                .collect();
            let unique: std::collections::BTreeSet<String> = present.iter().cloned().collect();
            prop_assert_eq!(unique.len(), present.len(), "no managed taint twice on {}", name);
            prop_assert_eq!(unique, desired, "managed taints of {}", name);
            let user = |n: &Node| n.spec.taints.iter().filter(|t| !lifecycle::managed(t)).cloned().collect::<Vec<_>>();
            prop_assert_eq!(user(new), user(node));
            for taint in &new.spec.taints {
                if lifecycle::managed(taint) && !node.spec.taints.contains(taint) {
                    // A new taint: NoExecute ones say since when.
                    let expect = (taint.effect == Some(TaintEffect::NoExecute)).then(|| now.to_rfc3339());
                    prop_assert_eq!(taint.time_added.clone(), expect);
                } else if lifecycle::managed(taint) {
                    // A kept taint keeps its time.
                    prop_assert!(node.spec.taints.contains(taint));
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

/// Timeline: one node's agent heartbeats in bursts and falls silent; the
/// leader checks at random seconds (and is replaced once, at a random
/// time, by a new leader that knows no heartbeat); every plan is applied.
/// The node's `Ready` status, its events, its taints and its deletion
/// follow `oracle::lifecycle` step after step, with `gc_after` short
/// enough to be reached.
#[derive(Debug, Clone)]
struct Timeline {
    /// Per second: whether the agent sends a heartbeat.
    beats: Vec<bool>,
    /// Per second: whether the leader plans.
    checks: Vec<bool>,
    /// The second a new leader takes over (none: never).
    new_leader: Option<i64>,
}

fn timeline_strategy() -> impl Strategy<Value = Timeline> {
    // Bursts of heartbeats and of silence, each 1 to 20 seconds.
    let bursts = prop::collection::vec((any::<bool>(), 1usize..20), 1..12).prop_map(|runs| {
        runs.into_iter()
            .flat_map(|(on, len)| std::iter::repeat_n(on, len))
            .take(120)
            .collect::<Vec<bool>>()
    });
    (
        bursts,
        prop::collection::vec(prop::bool::weighted(0.4), 120),
        prop::option::of(0i64..120),
    )
        .prop_map(|(beats, checks, new_leader)| Timeline {
            beats,
            checks,
            new_leader,
        })
}

proptest! {
    #![proptest_config(seed::config(512))]

    #[test]
    fn ready_follows_heartbeats_over_time(timeline in timeline_strategy()) {
        const GC: i64 = 30;
        let config = NodeLifecycleConfig {
            node_timeout: Duration::from_secs(TIMEOUT as u64),
            gc_after: Duration::from_secs(GC as u64),
        };
        // The node registers (Ready, from its agent) at second 0.
        let mut node = Node::default();
        node.metadata.name = "n0".into();
        node.status.conditions.push(NodeCondition {
            r#type: "Ready".into(),
            status: Some(ConditionStatus::True),
            last_transition_time: Some(at(0).to_rfc3339()),
            ..Default::default()
        });
        let mut leader = -1i64;
        let mut heard: Option<i64> = None;
        let mut expected = Some(ConditionStatus::True);
        let mut since = 0i64;
        for t in 0..timeline.beats.len() as i64 {
            if timeline.new_leader == Some(t) {
                leader = t;
                heard = None; // the new leader has heard nothing yet
            }
            if timeline.beats[t as usize] {
                heard = Some(t);
            }
            if !timeline.checks[t as usize] {
                continue;
            }
            let judge = NodeLifecycle::new(config, at(leader));
            let beat = heard.map(at);
            let plan = judge.plan([&node], |_| beat, at(t));

            let gone = lifecycle::deleted(expected.clone(), Some(since), heard, leader, TIMEOUT, GC, t);
            prop_assert_eq!(plan.remove.len(), usize::from(gone), "t={}: deleted", t);
            if gone {
                prop_assert!(plan.events.iter().any(|e| e.reason == "DeletingNode"));
                return Ok(());
            }
            let next = lifecycle::ready_after(expected.clone(), heard, leader, TIMEOUT, t);
            if next != expected {
                since = t;
                let reason = if next == Some(ConditionStatus::True) { "NodeReady" } else { "NodeNotReady" };
                let reasons: Vec<&str> = plan.events.iter().map(|e| e.reason.as_str()).collect();
                prop_assert_eq!(reasons, vec![reason], "t={}: events", t);
            } else {
                prop_assert!(plan.events.is_empty(), "t={}: no transition, no event", t);
            }
            expected = next;
            if let Some(update) = plan.updates.into_iter().next() {
                node = update.node;
            }
            prop_assert_eq!(ready_status(&node), expected.clone(), "t={}: Ready", t);
            let stamped = node.condition("Ready").and_then(|c| c.last_transition_time.clone());
            prop_assert_eq!(stamped, Some(at(since).to_rfc3339()), "t={}: since", t);
            let present: std::collections::BTreeSet<String> =
                node.spec.taints.iter().map(lifecycle::key_effect).collect();
            prop_assert_eq!(present, lifecycle::expected_taints(&node, expected.as_ref()), "t={}: taints", t);
        }
    }
}

/// What an agent or an operator does to one node between two passes.
#[derive(Debug, Clone)]
enum Edit {
    Cordon(bool),
    Pressure(usize, bool),
    /// The agent reports `Ready` itself.
    AgentReady(ConditionStatus),
    Delete,
    /// The node registers again (a new object, Ready, heartbeating).
    Register,
}

fn edit_strategy() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<bool>().prop_map(Edit::Cordon),
        (0..PRESSURES.len(), any::<bool>()).prop_map(|(i, on)| Edit::Pressure(i, on)),
        prop_oneof![
            Just(ConditionStatus::True),
            Just(ConditionStatus::False),
            Just(ConditionStatus::Unknown)
        ]
        .prop_map(Edit::AgentReady),
        Just(Edit::Delete),
        Just(Edit::Register),
    ]
}

/// One step between passes: time passes, the wall clock is now and then
/// set (forward or back: the times the server gives the heartbeats it
/// holds, as instants, move with it), some nodes heartbeat, some are
/// edited, some of the last plan's writes fail.
#[derive(Debug, Clone)]
struct Step {
    dt: i64,
    jump: i64,
    beats: Vec<bool>,
    edits: Vec<Option<Edit>>,
    fails: Vec<bool>,
}

fn step_strategy() -> impl Strategy<Value = Step> {
    (
        0i64..5,
        prop_oneof![9 => Just(0i64), 1 => -20i64..20],
        prop::collection::vec(prop::bool::weighted(0.5), 8),
        prop::collection::vec(prop::option::weighted(0.1, edit_strategy()), 8),
        prop::collection::vec(prop::bool::weighted(0.2), 8),
    )
        .prop_map(|(dt, jump, beats, edits, fails)| Step {
            dt,
            jump,
            beats,
            edits,
            fails,
        })
}

fn sorted_by_name<T: Clone>(items: &[T], name: impl Fn(&T) -> String) -> Vec<T> {
    let mut items = items.to_vec();
    items.sort_by_key(|i| name(i));
    items
}

proptest! {
    #![proptest_config(seed::config(256))]

    /// A pass that judges only the nodes whose object changed (with its
    /// `NodeWatch`) writes what a pass over every node writes, step after
    /// step, with heartbeats, edits, failed writes, removals, nodes that
    /// register again and a wall clock that is set now and then; and it never
    /// asks to be woken later than the whole plan would.
    #[test]
    fn watched_plans_decide_as_plans_of_every_node(
        cluster in cluster_strategy(),
        leader in -100i64..120,
        steps in prop::collection::vec(step_strategy(), 1..40),
    ) {
        const GC: i64 = 20;
        let config = NodeLifecycleConfig {
            node_timeout: Duration::from_secs(TIMEOUT as u64),
            gc_after: Duration::from_secs(GC as u64),
        };
        let judge = NodeLifecycle::new(config, at(leader));
        let mut nodes: std::collections::BTreeMap<String, Node> = cluster
            .iter()
            .map(|(n, _, _)| (n.metadata.name.clone(), n.clone()))
            .collect();
        let mut beats: HashMap<String, Timestamp> = cluster
            .iter()
            .filter_map(|(n, hb, _)| hb.map(|s| (n.metadata.name.clone(), at(s))))
            .collect();
        let mut watch = NodeWatch::default();
        let mut seen: Option<std::collections::BTreeMap<String, Node>> = None;
        // After every heartbeat of the cluster: a heartbeat's time only
        // moves forward (but for the wall clock being set).
        let mut now_s = 100i64;
        let mut monotonic = Duration::ZERO;
        for (i, step) in steps.iter().enumerate() {
            now_s += step.dt + step.jump;
            monotonic += Duration::from_secs(step.dt as u64);
            for beat in beats.values_mut() {
                *beat = Timestamp::from_unix_nanos(beat.unix_nanos() + step.jump * 1_000_000_000);
            }
            let now = at(now_s);
            for k in 0..8 {
                let name = format!("n{k}");
                if step.beats[k] && nodes.contains_key(&name) {
                    beats.insert(name.clone(), now);
                }
                match &step.edits[k] {
                    None => {}
                    Some(Edit::Register) => {
                        let mut node = Node::default();
                        node.metadata.name = name.clone();
                        node.metadata.uid = format!("{name}-{i}");
                        node.status.conditions.push(NodeCondition {
                            r#type: "Ready".into(),
                            status: Some(ConditionStatus::True),
                            last_transition_time: Some(now.to_rfc3339()),
                            ..Default::default()
                        });
                        nodes.insert(name.clone(), node);
                        beats.insert(name, now);
                    }
                    Some(Edit::Delete) => {
                        nodes.remove(&name);
                        beats.remove(&name);
                    }
                    Some(edit) => {
                        let Some(node) = nodes.get_mut(&name) else { continue };
                        let mut set = |kind: &str, status: ConditionStatus| {
                            match node.status.conditions.iter_mut().find(|c| c.r#type == kind) {
                                Some(c) => c.status = Some(status),
                                None => node.status.conditions.push(NodeCondition {
                                    r#type: kind.into(),
                                    status: Some(status),
                                    last_transition_time: Some(now.to_rfc3339()),
                                    ..Default::default()
                                }),
                            }
                        };
                        match edit {
                            Edit::Pressure(p, on) => set(
                                PRESSURES[*p],
                                if *on { ConditionStatus::True } else { ConditionStatus::False },
                            ),
                            Edit::AgentReady(status) => set("Ready", status.clone()),
                            Edit::Cordon(on) => node.spec.unschedulable = *on,
                            Edit::Register | Edit::Delete => {}
                        }
                    }
                }
            }
            let changed: Option<drover_controller::FastSet<String>> = seen.as_ref().map(|seen| {
                let names: std::collections::BTreeSet<&String> = seen.keys().chain(nodes.keys()).collect();
                names
                    .into_iter()
                    .filter(|n| seen.get(*n) != nodes.get(*n))
                    .cloned()
                    .collect()
            });
            let heartbeat = |name: &str| beats.get(name).copied();
            let whole = judge.plan(nodes.values(), heartbeat, now);
            let watched = judge.plan_watched(
                &mut watch,
                nodes.values(),
                |name| nodes.get(name),
                changed.as_ref(),
                heartbeat,
                Now { wall: now, monotonic },
            );
            let update_name = |u: &drover_controller::node::NodeUpdate| u.node.metadata.name.clone();
            prop_assert_eq!(
                sorted_by_name(&watched.updates, update_name),
                sorted_by_name(&whole.updates, update_name),
                "step {}: updates", i
            );
            prop_assert_eq!(
                sorted_by_name(&watched.remove, |r| r.name.clone()),
                sorted_by_name(&whole.remove, |r| r.name.clone()),
                "step {}: removals", i
            );
            prop_assert_eq!(
                sorted_by_name(&watched.events, |e| e.metadata.name.clone()),
                sorted_by_name(&whole.events, |e| e.metadata.name.clone()),
                "step {}: events", i
            );
            if let Some(w) = watched.next_check {
                prop_assert!(w > now, "step {}: a wake-up in the past", i);
            }
            if let Some(f) = whole.next_check {
                prop_assert!(
                    watched.next_check.is_some_and(|w| w <= f),
                    "step {}: woken at {:?}, the whole plan says {:?}", i, watched.next_check, f
                );
            }
            // Every node whose pods may be marked not ready is among those the watch
            // calls unsettled.
            let unsettled: std::collections::BTreeSet<&str> = watch.unsettled().collect();
            for node in nodes.values() {
                if ready_status(node) != Some(ConditionStatus::True) {
                    prop_assert!(
                        unsettled.contains(node.metadata.name.as_str())
                            || whole.updates.iter().any(|u| u.node.metadata.name == node.metadata.name),
                        "step {}: {} not Ready yet settled", i, node.metadata.name
                    );
                }
            }
            seen = Some(nodes.clone());
            // The writes land, except those that fail.
            for u in whole.updates {
                let k: usize = u.node.metadata.name[1..].parse().unwrap();
                if !step.fails[k] {
                    nodes.insert(u.node.metadata.name.clone(), u.node);
                }
            }
            for r in whole.remove {
                let k: usize = r.name[1..].parse().unwrap();
                if !step.fails[k] {
                    nodes.remove(&r.name);
                    beats.remove(&r.name);
                }
            }
        }
    }
}
