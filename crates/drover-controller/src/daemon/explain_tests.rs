//! Unit tests of `explain`.

use super::*;
use crate::daemon::fixtures::{self, at, node};
use crate::daemon::{node_should_run_daemon_pod, plan, Ineligibility, PlanInput};
use drover_api::{
    ContainerState, ContainerStateWaiting, ContainerStatus, DaemonSetUpdateStrategyType,
    LabelSelector, OwnerReference,
};
use rand::rngs::StdRng;
use rand::SeedableRng;

fn ds() -> DaemonSet {
    fixtures::ds("busybox")
}

/// A running pod of `ds()` of revision `hash`, ready since `at(0)` or not.
fn pod(name: &str, node: &str, hash: &str, ready: bool) -> Pod {
    fixtures::pod(name, node, hash, ready, 0)
}

fn names<'a>(pods: &[&'a Pod]) -> Vec<&'a str> {
    pods.iter().map(|p| p.metadata.name.as_str()).collect()
}

fn waits(e: &Explanation<'_>) -> Vec<(String, String)> {
    e.rollout
        .as_ref()
        .unwrap()
        .waiting
        .iter()
        .map(|w| (w.node.clone(), w.reason.to_string()))
        .collect()
}

#[test]
fn ownership_follows_the_controllers_claim() {
    let ds = ds();
    let nodes = [node("n1", true), node("n2", true)];
    let mine = pod("agent-a", "n1", "h", true);
    // Controlled by a namesake of another uid (the CLI's `owned_by`
    // accepted it when either uid was empty; the claim never does).
    let mut namesake = pod("agent-b", "n1", "h", true);
    namesake.metadata.owner_references[0].uid = "old-uid".into();
    let mut orphan = pod("agent-c", "n2", "h", true);
    orphan.metadata.owner_references.clear();
    let mut unbound_orphan = orphan.clone();
    unbound_orphan.metadata.name = "agent-d".into();
    unbound_orphan.spec.node_name.clear();
    let mut unmatched = pod("agent-e", "n2", "h", true);
    unmatched.metadata.labels.remove("app");
    let mut elsewhere = pod("agent-f", "n2", "h", true);
    elsewhere.metadata.namespace = "other".into();
    let mut mirror = orphan.clone();
    mirror.metadata.name = "agent-g".into();
    mirror
        .metadata
        .annotations
        .insert(drover_api::pod_annotation::CONFIG_MIRROR.into(), "x".into());
    let mut leaving = pod("agent-h", "n2", "h", false);
    leaving.metadata.deletion_timestamp = Some(at(1).to_rfc3339());
    let pods = [
        mine,
        namesake,
        orphan,
        unbound_orphan,
        unmatched,
        elsewhere,
        mirror,
        leaving,
    ];
    let e = explain(&ds, &nodes, &pods, None, at(10));
    assert_eq!(names(&e.pods), ["agent-a", "agent-c", "agent-h"]);
    assert_eq!(names(&e.adopting), ["agent-c"]);
    assert_eq!(names(&e.releasing), ["agent-e"]);
    assert!(e.idle.is_none() && e.rollout.is_none());
    assert_eq!(
        e.phases(),
        PodPhases {
            running: 3,
            ..PodPhases::default()
        }
    );
}

#[test]
fn nodes_without_a_pod_say_why() {
    let mut ds = ds();
    ds.spec.template.spec.node_selector = [("disk".to_string(), "ssd".to_string())].into();
    let mut ssd = node("n1", true);
    ssd.metadata.labels.insert("disk".into(), "ssd".into());
    let mut ssd2 = ssd.clone();
    ssd2.metadata.name = "n0".into();
    let mut ssd3 = ssd.clone();
    ssd3.metadata.name = "n3".into();
    let mut tainted = node("n2", true);
    tainted.spec.taints.push("gpu:NoSchedule".parse().unwrap());
    let nodes = [ssd, tainted, ssd2, ssd3];
    let mut leaving = pod("agent-a", "n3", "h", true);
    leaving.metadata.deletion_timestamp = Some(at(1).to_rfc3339());
    let pods = [pod("agent-b", "n1", "h", true), leaving];
    let e = explain(&ds, &nodes, &pods, None, at(10));
    let without: Vec<(&str, Vec<String>)> = e
        .nodes_without_pod
        .iter()
        .map(|n| (n.node.as_str(), n.why.lines()))
        .collect();
    let not_yet = "eligible: the DaemonSet controller has not created its pod yet".to_string();
    assert_eq!(
        without,
        [
            ("n0", vec![not_yet.clone()]),
            (
                "n2",
                vec![
                    "nodeSelector requires disk=ssd, but the node has no label disk".to_string(),
                    "taint gpu:NoSchedule is not tolerated".to_string(),
                ]
            ),
            ("n3", vec![not_yet]),
        ]
    );
    let NoPod::Ineligible(verdict) = &e.nodes_without_pod[1].why else {
        panic!("n2 is not eligible");
    };
    assert_eq!(verdict.reasons.len(), 2);
    assert!(matches!(verdict.reasons[1], Ineligibility::Taint(_)));
}

#[test]
fn what_explain_calls_not_created_yet_is_what_plan_creates() {
    let mut ds = ds();
    ds.spec.template.spec.node_selector = [("disk".to_string(), "ssd".to_string())].into();
    let mut nodes: Vec<Node> = (0..6).map(|i| node(&format!("n{i}"), i != 3)).collect();
    for n in nodes.iter_mut().step_by(2) {
        n.metadata.labels.insert("disk".into(), "ssd".into());
    }
    let pods = [
        pod("agent-a", "n2", "h", true),
        pod("agent-b", "n1", "h", true),
    ];
    let e = explain(&ds, &nodes, &pods, None, at(10));
    let p = plan(
        &PlanInput::new(&ds, &nodes, &pods, at(10)),
        &mut StdRng::seed_from_u64(1),
    );
    let not_created: Vec<&str> = e
        .nodes_without_pod
        .iter()
        .filter(|n| n.why == NoPod::NotCreatedYet)
        .map(|n| n.node.as_str())
        .collect();
    let created: Vec<&str> = p
        .create
        .iter()
        .map(|c| c.pod.spec.node_name.as_str())
        .collect();
    assert_eq!(not_created, created);
    let ineligible: Vec<&str> = e
        .nodes_without_pod
        .iter()
        .filter(|n| matches!(n.why, NoPod::Ineligible(_)))
        .map(|n| n.node.as_str())
        .collect();
    assert_eq!(ineligible, ["n3", "n5"]);
    // The planner's verdict on those nodes: they should not run the pod.
    assert!(ineligible.iter().all(|n| {
        let node = nodes.iter().find(|x| x.metadata.name == *n).unwrap();
        !node_should_run_daemon_pod(&ds, node).should_run
    }));
}

#[test]
fn a_rollout_waits_with_a_reason_per_node() {
    let mut ds = ds();
    ds.spec.min_ready_seconds = Some(30);
    let nodes = [
        node("n1", true),
        node("n2", false),
        node("n3", true),
        node("n4", true),
        node("n5", true),
        node("n6", true),
    ];
    let mut pulling = pod("agent-c", "n3", "new", false);
    pulling.status.container_statuses = vec![ContainerStatus {
        name: "agent".into(),
        state: ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: "ImagePullBackOff".into(),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }];
    let mut leaving = pod("agent-z", "n6", "old", true);
    leaving.metadata.deletion_timestamp = Some(at(1).to_rfc3339());
    let pods = [
        pod("agent-a", "n1", "old", true),
        pod("agent-b", "n2", "old", true),
        pod("agent-b2", "n2", "old", true),
        pulling,
        pod("agent-d", "n4", "new", false),
        pod("agent-e", "n5", "new", true),
        // Updated and available: waits for nothing.
        pod("agent-f", "n6", "new", true),
        leaving,
    ];
    let e = explain(&ds, &nodes, &pods, Some("new"), at(31));
    let expected = [
        ("n1", "old pod agent-a replaced in turn (maxUnavailable/maxSurge)"),
        ("n2", "node not Ready, updated when it is back"),
        ("n3", "new pod agent-c not ready (ImagePullBackOff)"),
        ("n4", "new pod agent-d not ready"),
        (
            "n5",
            "new pod agent-e ready since 2023-11-14T22:13:20Z, available after minReadySeconds (30s)",
        ),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(n, w)| (n.to_string(), w.to_string()))
        .collect();
    // At 31 s, agent-e (ready since 0) is available: not waited on.
    assert_eq!(
        waits(&e),
        expected
            .iter()
            .filter(|(n, _)| n != "n5")
            .cloned()
            .collect::<Vec<_>>()
    );
    let mut later = pods.clone();
    later[5].status.conditions[0].last_transition_time = Some(at(20).to_rfc3339());
    let e = explain(&ds, &nodes, &later, Some("new"), at(31));
    let mut with_n5 = expected.clone();
    with_n5[4].1 =
        "new pod agent-e ready since 2023-11-14T22:13:40Z, available after minReadySeconds (30s)"
            .into();
    assert_eq!(waits(&e), with_n5);
    let rollout = e.rollout.as_ref().unwrap();
    assert_eq!(rollout.hash, "new");
    assert_eq!(
        rollout.waiting[4].reason,
        WaitReason::NewPodNotAvailableYet {
            pod: "agent-e".into(),
            ready_since: Some(at(20)),
            min_ready: Duration::from_secs(30),
        }
    );
    let holding: Vec<&str> = rollout.holding().map(|w| w.node.as_str()).collect();
    assert_eq!(holding, ["n2", "n3", "n4", "n5"]);
    assert_eq!(rollout.nodes_away().collect::<Vec<_>>(), ["n2"]);
}

#[test]
fn on_delete_waits_for_the_user_and_a_done_rollout_waits_for_nothing() {
    let mut ds = ds();
    ds.spec.update_strategy.r#type = Some(DaemonSetUpdateStrategyType::OnDelete);
    let nodes = [node("n1", true), node("n2", false)];
    let pods = [
        pod("agent-a", "n1", "old", true),
        pod("agent-b", "n2", "old", true),
    ];
    let e = explain(&ds, &nodes, &pods, Some("new"), at(10));
    assert_eq!(
        waits(&e),
        [
            (
                "n1".to_string(),
                "OnDelete: updated when its pod agent-a is deleted".to_string()
            ),
            (
                "n2".to_string(),
                "node not Ready, updated when it is back".to_string()
            ),
        ]
    );
    let e = explain(&ds, &nodes, &pods, Some("old"), at(10));
    assert!(e.rollout.unwrap().waiting.is_empty());
}

#[test]
fn an_old_pod_on_a_missing_node_waits_like_one_on_a_node_that_is_away() {
    let ds = ds();
    let pods = [pod("agent-a", "gone", "old", true)];
    let e = explain(&ds, &[], &pods, Some("new"), at(10));
    assert_eq!(
        e.rollout.unwrap().waiting[0].reason,
        WaitReason::NodeNotReady
    );
}

#[test]
fn an_idle_controller_is_said_so() {
    let mut ds = ds();
    ds.spec.selector = Some(LabelSelector::default());
    let mut orphan = pod("agent-b", "n1", "h", true);
    orphan.metadata.owner_references.clear();
    let pods = [pod("agent-a", "n1", "h", true), orphan];
    let e = explain(&ds, &[node("n1", true)], &pods, None, at(10));
    assert_eq!(names(&e.pods), ["agent-a"]);
    assert!(e.adopting.is_empty());
    assert_eq!(
        e.idle.as_ref().map(ToString::to_string).as_deref(),
        Some("This daemon set is selecting all pods. A non-empty selector is required.")
    );
    let mut deleting = self::ds();
    deleting.metadata.deletion_timestamp = Some(at(0).to_rfc3339());
    let mut unmatched = pod("agent-c", "n1", "h", true);
    unmatched.metadata.labels.clear();
    let e = explain(&deleting, &[node("n1", true)], [&unmatched], None, at(10));
    assert_eq!(names(&e.pods), ["agent-c"]);
    assert_eq!(e.idle, Some(Idle::Deleting));
}

#[test]
fn phases_are_counted_like_describe() {
    let ds = ds();
    let mut pending = pod("agent-b", "n2", "h", false);
    pending.status.phase = Some(PodPhase::Pending);
    let mut unknown = pod("agent-c", "n3", "h", false);
    unknown.status.phase = None;
    let mut failed = pod("agent-d", "n4", "h", false);
    failed.status.phase = Some(PodPhase::Failed);
    let mut succeeded = pod("agent-e", "n5", "h", false);
    succeeded.status.phase = Some(PodPhase::Succeeded);
    let pods = [
        pod("agent-a", "n1", "h", true),
        pending,
        unknown,
        failed,
        succeeded,
    ];
    let e = explain(&ds, &[], &pods, None, at(10));
    assert_eq!(
        e.phases(),
        PodPhases {
            running: 1,
            waiting: 2,
            succeeded: 1,
            failed: 1
        }
    );
}

#[test]
fn other_owner_kinds_do_not_count() {
    let ds = ds();
    let mut p = pod("agent-a", "n1", "h", true);
    p.metadata.owner_references = vec![OwnerReference {
        kind: "ReplicaSet".into(),
        uid: "rs".into(),
        controller: Some(true),
        ..Default::default()
    }];
    let e = explain(&ds, &[node("n1", true)], [&p], None, at(0));
    assert!(e.pods.is_empty());
    assert_eq!(e.nodes_without_pod.len(), 1);
}
