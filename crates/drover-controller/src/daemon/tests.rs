//! Unit tests of the DaemonSet planner, one rule at a time.

use super::*;
use drover_api::taints::TAINT_NODE_UNSCHEDULABLE;
use drover_api::{
    ConditionStatus, Container, LabelSelector, OwnerReference, PodCondition, Taint, TaintEffect,
};
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::collections::HashSet;

fn labels(pairs: &[(&str, &str)]) -> drover_api::Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn ds() -> DaemonSet {
    let mut ds = DaemonSet::default();
    ds.metadata.name = "agent".into();
    ds.metadata.namespace = "default".into();
    ds.metadata.uid = "ds-uid".into();
    ds.metadata.generation = Some(1);
    ds.spec.selector = Some(LabelSelector {
        match_labels: labels(&[("app", "agent")]),
        ..Default::default()
    });
    ds.spec.template.metadata.labels = labels(&[("app", "agent")]);
    ds.spec.template.spec.containers = vec![Container {
        name: "agent".into(),
        image: "busybox:1.36".into(),
        ..Default::default()
    }];
    ds
}

fn node(name: &str) -> Node {
    let mut node = Node::default();
    node.metadata.name = name.into();
    node
}

fn tainted(name: &str, taint: &str) -> Node {
    let mut node = node(name);
    node.spec.taints.push(taint.parse().unwrap());
    node
}

/// Every node that should get no pod, with the verdict, as `explain` tells
/// it (by node name). Without pods every node is without one, so each shows.
fn ineligible(ds: &DaemonSet, nodes: &[Node]) -> Vec<(String, NodeEligibility)> {
    explain(ds, nodes, std::iter::empty(), None, at(0))
        .nodes_without_pod
        .into_iter()
        .filter_map(|n| match n.why {
            NoPod::Ineligible(verdict) => Some((n.node, verdict)),
            NoPod::NotCreatedYet | NoPod::DoesNotFit(_) => None,
        })
        .collect()
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_unix_seconds(1_700_000_000 + seconds)
}

/// A running, ready pod of `ds()` on a node, created at `at(created)`.
fn pod(name: &str, node: &str, created: i64) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = name.into();
    pod.metadata.namespace = "default".into();
    pod.metadata.uid = format!("uid-{name}");
    pod.metadata.labels = labels(&[("app", "agent")]);
    pod.metadata.creation_timestamp = Some(at(created).to_rfc3339());
    pod.metadata.owner_references = vec![pods::controller_ref(&ds())];
    pod.spec.node_name = node.into();
    pod.status.phase = Some(PodPhase::Running);
    pod.status.conditions.push(PodCondition {
        r#type: "Ready".into(),
        status: Some(ConditionStatus::True),
        last_transition_time: Some(at(created).to_rfc3339()),
        ..Default::default()
    });
    pod
}

fn orphan(name: &str, node: &str, created: i64) -> Pod {
    let mut pod = pod(name, node, created);
    pod.metadata.owner_references.clear();
    pod
}

fn with_phase(mut pod: Pod, phase: PodPhase) -> Pod {
    pod.status.phase = Some(phase);
    pod.status.conditions.clear();
    pod
}

fn deleting(mut pod: Pod) -> Pod {
    pod.metadata.deletion_timestamp = Some(at(0).to_rfc3339());
    pod
}

fn run(ds: &DaemonSet, nodes: &[Node], pods: &[Pod], now: Timestamp) -> DaemonSetPlan {
    plan(
        &PlanInput::new(ds, nodes, pods, now),
        &mut StdRng::seed_from_u64(42),
    )
}

fn created_on(plan: &DaemonSetPlan) -> Vec<&str> {
    plan.create
        .iter()
        .map(|c| c.pod.spec.node_name.as_str())
        .collect()
}

fn deleted(plan: &DaemonSetPlan) -> Vec<(&str, &DeletionReason)> {
    plan.delete
        .iter()
        .map(|d| (d.name.as_str(), &d.reason))
        .collect()
}

fn reasons(plan: &DaemonSetPlan) -> Vec<&str> {
    plan.events.iter().map(|e| e.reason.as_str()).collect()
}

#[test]
fn creates_one_pod_per_eligible_node() {
    let ds = ds();
    let nodes = [node("n1"), node("n2"), node("n3")];
    let plan = run(&ds, &nodes, &[], at(0));
    assert_eq!(created_on(&plan), ["n1", "n2", "n3"]);
    let pod = &plan.create[0].pod;
    assert!(pod.metadata.name.starts_with("agent-"));
    assert_eq!(pod.metadata.name.len(), "agent-".len() + 5);
    assert_eq!(pod.metadata.labels, labels(&[("app", "agent")]));
    let owner = pod.metadata.controller_ref().unwrap();
    assert_eq!(
        (owner.uid.as_str(), owner.controller),
        ("ds-uid", Some(true))
    );
    assert_eq!(pod.spec.tolerations.len(), 6, "the daemon tolerations");
    assert_eq!(pod.spec.containers[0].name, "agent");
    let event = &plan.create[0].event;
    assert_eq!(event.reason, "SuccessfulCreate");
    assert_eq!(event.message, format!("Created pod: {}", pod.metadata.name));
    assert!(plan.delete.is_empty() && plan.events.is_empty());
    assert_eq!(plan.status.desired_number_scheduled, 3);
    assert_eq!(plan.status.current_number_scheduled, 0);
    assert_eq!(plan.status.number_unavailable, 3);
    assert_eq!(plan.status.observed_generation, Some(1));
    assert!(plan.status_changed);
    let names: HashSet<_> = plan.create.iter().map(|c| &c.pod.metadata.name).collect();
    assert_eq!(names.len(), 3);
}

#[test]
fn a_running_pod_needs_nothing() {
    let mut ds = ds();
    let nodes = [node("n1")];
    let pods = [pod("agent-a", "n1", 0)];
    let plan = run(&ds, &nodes, &pods, at(10));
    assert!(!plan.changes_pods());
    let s = &plan.status;
    assert_eq!(
        (
            s.desired_number_scheduled,
            s.current_number_scheduled,
            s.number_ready,
            s.number_available,
            s.updated_number_scheduled,
            s.number_unavailable,
            s.number_misscheduled
        ),
        (1, 1, 1, 1, 1, 0, 0)
    );
    ds.status = plan.status.clone();
    let again = run(&ds, &nodes, &pods, at(10));
    assert!(again.is_empty(), "{again:?}");
}

#[test]
fn labels_no_longer_matching_delete() {
    let mut ds = ds();
    ds.spec.template.spec.node_selector = labels(&[("disk", "ssd")]);
    let mut ssd = node("n1");
    ssd.metadata.labels = labels(&[("disk", "ssd")]);
    let nodes = [ssd, node("n2")];
    let pods = [pod("agent-a", "n1", 0), pod("agent-b", "n2", 0)];
    let plan = run(&ds, &nodes, &pods, at(10));
    assert!(plan.create.is_empty());
    assert_eq!(plan.delete.len(), 1);
    assert_eq!(plan.delete[0].name, "agent-b");
    assert_eq!(plan.delete[0].uid, "uid-agent-b");
    assert!(matches!(
        plan.delete[0].reason,
        DeletionReason::NotEligible(_)
    ));
    assert_eq!(
        plan.delete[0].reason.to_string(),
        "the node should no longer run it: nodeSelector requires disk=ssd, but the node has no label disk"
    );
    assert_eq!(plan.delete[0].event.reason, "SuccessfulDelete");
    assert_eq!(plan.status.number_misscheduled, 1);
    assert_eq!(plan.status.desired_number_scheduled, 1);
    let ineligible = ineligible(&ds, &nodes);
    assert_eq!(ineligible.len(), 1);
    assert_eq!(ineligible[0].0, "n2");
}

#[test]
fn untolerated_no_schedule_keeps_but_does_not_create() {
    let ds = ds();
    let nodes = [
        tainted("kept", "dedicated=gpu:NoSchedule"),
        tainted("empty", "dedicated=gpu:NoSchedule"),
    ];
    let pods = [pod("agent-a", "kept", 0)];
    let plan = run(&ds, &nodes, &pods, at(10));
    assert!(!plan.changes_pods(), "{plan:?}");
    assert_eq!(plan.status.desired_number_scheduled, 0);
    assert_eq!(plan.status.number_misscheduled, 1);
    let why: Vec<_> = ineligible(&ds, &nodes)
        .into_iter()
        .map(|(node, verdict)| (node, verdict.to_string()))
        .collect();
    assert_eq!(
        why,
        [
            (
                "empty".to_string(),
                "taint dedicated=gpu:NoSchedule is not tolerated (an existing pod may stay)"
                    .to_string()
            ),
            (
                "kept".to_string(),
                "taint dedicated=gpu:NoSchedule is not tolerated (an existing pod may stay)"
                    .to_string()
            )
        ]
    );
    // With its pod, "kept" is not a node without one.
    let without: Vec<String> = explain(&ds, &nodes, &pods, None, at(10))
        .nodes_without_pod
        .into_iter()
        .map(|n| n.node)
        .collect();
    assert_eq!(without, ["empty"]);
}

#[test]
fn untolerated_no_execute_deletes() {
    let ds = ds();
    let nodes = [tainted("n1", "dedicated=gpu:NoExecute")];
    let pods = [pod("agent-a", "n1", 0)];
    let plan = run(&ds, &nodes, &pods, at(10));
    assert!(plan.create.is_empty());
    assert_eq!(plan.delete.len(), 1);
    assert_eq!(
        plan.delete[0].reason.to_string(),
        "the node should no longer run it: taint dedicated=gpu:NoExecute is not tolerated"
    );
}

#[test]
fn cordoned_and_unreachable_nodes_keep_their_pods() {
    let ds = ds();
    let mut cordoned = tainted(
        "cordoned",
        &format!("{TAINT_NODE_UNSCHEDULABLE}:NoSchedule"),
    );
    cordoned.spec.unschedulable = true;
    let mut unreachable = tainted("unreachable", "node.kubernetes.io/unreachable:NoSchedule");
    unreachable
        .spec
        .taints
        .push("node.kubernetes.io/unreachable:NoExecute".parse().unwrap());
    let mut fresh_unreachable = unreachable.clone();
    fresh_unreachable.metadata.name = "unreachable-empty".into();
    let nodes = [cordoned, unreachable, fresh_unreachable];
    let pods = [pod("agent-a", "unreachable", 0)];
    let plan = run(&ds, &nodes, &pods, at(10));
    assert_eq!(created_on(&plan), ["cordoned"]);
    assert!(plan.delete.is_empty());
    let ineligible = ineligible(&ds, &nodes);
    assert_eq!(ineligible.len(), 2);
    assert_eq!(ineligible[1].0, "unreachable-empty");
    assert!(ineligible[1]
        .1
        .to_string()
        .starts_with("the node is unreachable"));
}

#[test]
fn duplicates_keep_the_oldest() {
    let ds = ds();
    let nodes = [node("n1")];
    let pods = [
        pod("agent-new", "n1", 20),
        pod("agent-old", "n1", 10),
        pod("agent-mid", "n1", 15),
    ];
    let plan = run(&ds, &nodes, &pods, at(30));
    assert!(plan.create.is_empty());
    let kept = DeletionReason::Duplicate {
        kept: "agent-old".into(),
    };
    assert_eq!(deleted(&plan), [("agent-mid", &kept), ("agent-new", &kept)]);
    assert_eq!(plan.status.current_number_scheduled, 1);
}

#[test]
fn failed_pods_are_replaced_with_backoff() {
    let ds = ds();
    let nodes = [node("n1")];
    let failed = with_phase(pod("agent-a", "n1", 0), PodPhase::Failed);
    let mut rng = StdRng::seed_from_u64(1);

    // First failure: deleted at once, backoff starts at 1 s.
    let first = plan(&PlanInput::new(&ds, &nodes, &[failed], at(10)), &mut rng);
    assert_eq!(deleted(&first), [("agent-a", &DeletionReason::Failed)]);
    assert_eq!(reasons(&first), ["FailedDaemonPod"]);
    assert_eq!(
        first.events[0].message,
        "Found failed daemon pod default/agent-a on node n1, will try to kill it"
    );
    assert_eq!(first.events[0].r#type, "Warning");
    assert!(first.create.is_empty(), "replaced once it is gone");
    let entry = *first.backoff.get("n1").unwrap();
    assert_eq!(entry.delay, Duration::from_secs(1));

    // Gone: the replacement is created.
    let second = plan(
        &PlanInput::new(&ds, &nodes, &[], at(10)).with_backoff(&first.backoff),
        &mut rng,
    );
    assert_eq!(created_on(&second), ["n1"]);

    // The replacement fails within the second: it waits.
    let failed_again = with_phase(pod("agent-b", "n1", 10), PodPhase::Failed);
    let early = at(10) + Duration::from_millis(500);
    let waiting = plan(
        &PlanInput::new(&ds, &nodes, std::slice::from_ref(&failed_again), early)
            .with_backoff(&second.backoff),
        &mut rng,
    );
    assert!(!waiting.changes_pods() && waiting.events.is_empty());
    assert_eq!(waiting.requeue_at, Some(at(11)));

    // After the delay: deleted, and the delay doubles.
    let later = plan(
        &PlanInput::new(&ds, &nodes, &[failed_again], at(11)).with_backoff(&waiting.backoff),
        &mut rng,
    );
    assert_eq!(deleted(&later), [("agent-b", &DeletionReason::Failed)]);
    assert_eq!(
        later.backoff.get("n1").unwrap().delay,
        Duration::from_secs(2)
    );
}

#[test]
fn failed_pods_on_ineligible_nodes_go_without_backoff() {
    let ds = ds();
    let nodes = [tainted("n1", "x:NoExecute")];
    let failed = with_phase(pod("agent-a", "n1", 0), PodPhase::Failed);
    let mut backoff = FailedPodBackoff::new();
    backoff.next("n1", Some(1), at(10));
    let plan = plan(
        &PlanInput::new(&ds, &nodes, &[failed], at(10)).with_backoff(&backoff),
        &mut StdRng::seed_from_u64(1),
    );
    assert_eq!(plan.delete.len(), 1);
    assert!(matches!(
        plan.delete[0].reason,
        DeletionReason::NotEligible(_)
    ));
}

#[test]
fn succeeded_pods_are_replaced() {
    let ds = ds();
    let nodes = [node("n1")];
    let done = with_phase(pod("agent-a", "n1", 0), PodPhase::Succeeded);
    let plan = run(&ds, &nodes, &[done], at(10));
    assert_eq!(deleted(&plan), [("agent-a", &DeletionReason::Succeeded)]);
    assert_eq!(reasons(&plan), ["SucceededDaemonPod"]);
    assert_eq!(plan.events[0].r#type, "Normal");
}

#[test]
fn pods_being_deleted_block_their_replacement() {
    let ds = ds();
    let nodes = [node("n1"), node("n2")];
    let pods = [
        deleting(pod("agent-a", "n1", 0)),
        deleting(with_phase(pod("agent-b", "n2", 0), PodPhase::Failed)),
    ];
    let plan = run(&ds, &nodes, &pods, at(10));
    assert!(!plan.changes_pods(), "{plan:?}");
    assert_eq!(plan.status.current_number_scheduled, 2);
    // Beside a live pod, a pod being deleted is not a duplicate.
    let pods = [deleting(pod("agent-a", "n1", 0)), pod("agent-c", "n1", 5)];
    let plan = run(&ds, &nodes[..1], &pods, at(10));
    assert!(!plan.changes_pods(), "{plan:?}");
}

#[test]
fn pods_of_missing_nodes_or_none_are_deleted() {
    let ds = ds();
    let nodes = [node("n1")];
    let pods = [
        pod("agent-a", "n1", 0),
        pod("agent-gone", "gone", 0),
        pod("agent-nowhere", "", 0),
        deleting(pod("agent-going", "gone", 0)),
    ];
    let plan = run(&ds, &nodes, &pods, at(10));
    assert_eq!(
        deleted(&plan),
        [
            ("agent-nowhere", &DeletionReason::Unbound),
            ("agent-gone", &DeletionReason::NodeGone)
        ]
    );
    assert_eq!(plan.status.desired_number_scheduled, 1);
    assert_eq!(plan.status.number_misscheduled, 0);
}

#[test]
fn matching_orphans_are_adopted() {
    let ds = ds();
    let nodes = [node("n1"), node("n2"), node("n3")];
    let mut stranger = orphan("other", "n3", 0);
    stranger.metadata.labels = labels(&[("app", "other")]);
    let pods = [
        orphan("agent-orphan", "n1", 0),
        orphan("agent-young", "n2", 20),
        pod("agent-owned", "n2", 10),
        deleting(orphan("agent-leaving", "n3", 0)),
        orphan("agent-unbound", "", 0),
        stranger,
    ];
    let plan = run(&ds, &nodes, &pods, at(30));
    let adopted: Vec<_> = plan
        .adopt
        .iter()
        .map(|p| p.metadata.name.as_str())
        .collect();
    assert_eq!(adopted, ["agent-orphan", "agent-young"]);
    let owner = plan.adopt[0].metadata.controller_ref().unwrap();
    assert_eq!(owner.uid, "ds-uid");
    assert_eq!(owner.block_owner_deletion, Some(true));
    // An adopted pod counts at once: the younger of two pods goes.
    assert_eq!(
        deleted(&plan),
        [(
            "agent-young",
            &DeletionReason::Duplicate {
                kept: "agent-owned".into()
            }
        )]
    );
    assert_eq!(created_on(&plan), ["n3"]);
}

#[test]
fn pods_no_longer_matching_are_released() {
    let ds = ds();
    let nodes = [node("n1")];
    let mut relabelled = pod("agent-a", "n1", 0);
    relabelled.metadata.labels = labels(&[("app", "debug")]);
    let plan = run(&ds, &nodes, &[relabelled], at(10));
    assert_eq!(plan.release.len(), 1);
    assert!(plan.release[0].metadata.owner_references.is_empty());
    assert!(plan.delete.is_empty());
    assert_eq!(created_on(&plan), ["n1"]);
}

#[test]
fn other_controllers_and_namespaces_are_left_alone() {
    let ds = ds();
    let nodes = [node("n1")];
    let mut foreign = pod("agent-a", "n1", 0);
    foreign.metadata.owner_references = vec![OwnerReference {
        kind: "DaemonSet".into(),
        name: "agent".into(),
        uid: "another-uid".into(),
        controller: Some(true),
        ..Default::default()
    }];
    let mut elsewhere = pod("agent-b", "n1", 0);
    elsewhere.metadata.namespace = "ops".into();
    let plan = run(&ds, &nodes, &[foreign, elsewhere], at(10));
    assert_eq!(created_on(&plan), ["n1"]);
    assert!(plan.delete.is_empty() && plan.adopt.is_empty() && plan.release.is_empty());
}

#[test]
fn an_empty_selector_is_refused() {
    let mut ds = ds();
    ds.spec.selector = Some(LabelSelector::default());
    let plan = run(&ds, &[node("n1")], &[orphan("x", "n1", 0)], at(0));
    assert!(!plan.changes_pods() && !plan.status_changed);
    assert_eq!(reasons(&plan), ["SelectingAll"]);
    assert_eq!(
        plan.events[0].message,
        "This daemon set is selecting all pods. A non-empty selector is required."
    );
    ds.spec.selector = None;
    let plan = run(&ds, &[node("n1")], &[], at(0));
    assert_eq!(reasons(&plan), ["InvalidSelector"]);
}

#[test]
fn a_deleted_daemon_set_takes_its_pods() {
    let mut ds = ds();
    ds.metadata.deletion_timestamp = Some(at(0).to_rfc3339());
    let pods = [
        pod("agent-b", "n1", 0),
        pod("agent-a", "gone", 0),
        deleting(pod("agent-c", "n1", 0)),
        orphan("agent-d", "n1", 0),
    ];
    let plan = run(&ds, &[node("n1"), node("n2")], &pods, at(10));
    assert!(plan.create.is_empty() && plan.adopt.is_empty() && !plan.status_changed);
    let expected = DeletionReason::DaemonSetDeleted;
    assert_eq!(
        deleted(&plan),
        [("agent-a", &expected), ("agent-b", &expected)]
    );
    let direct = delete_daemon_set_pods(&ds, &pods, at(10), &mut StdRng::seed_from_u64(0));
    assert_eq!(direct.len(), 2);
    assert_eq!(direct[0].reason.to_string(), "its DaemonSet is deleted");
}

#[test]
fn a_daemon_set_deleted_with_orphans_releases_its_pods_then_goes() {
    let mut ds = ds();
    ds.metadata.deletion_timestamp = Some(at(0).to_rfc3339());
    ds.metadata.finalizers = vec![ORPHAN_FINALIZER.to_string()];
    assert!(is_orphaning(&ds));
    let pods = [
        pod("agent-b", "n1", 0),
        pod("agent-a", "gone", 0),
        deleting(pod("agent-c", "n1", 0)),
        orphan("agent-d", "n2", 0),
    ];
    let plan = run(&ds, &[node("n1"), node("n2"), node("n3")], &pods, at(10));
    // Nothing deleted, created or adopted (the orphan on n2 stays one, and
    // n3 gets no pod); every pod that is its is released, terminating or
    // on a node that is gone included.
    assert!(plan.delete.is_empty() && plan.create.is_empty() && plan.adopt.is_empty());
    let released: Vec<&str> = plan
        .release
        .iter()
        .map(|p| p.metadata.name.as_str())
        .collect();
    assert_eq!(released, ["agent-a", "agent-b", "agent-c"]);
    assert!(plan
        .release
        .iter()
        .all(|p| p.metadata.owner_references.is_empty()));
    assert!(!plan.finalize && !plan.is_empty());
    // Once none is its, the DaemonSet itself goes.
    let plan = run(&ds, &[node("n1")], &plan.release, at(11));
    assert!(plan.release.is_empty() && plan.delete.is_empty());
    assert!(plan.finalize && !plan.is_empty());
    // Without the finalizer a deleted DaemonSet deletes its pods, as before.
    ds.metadata.finalizers.clear();
    assert!(!is_orphaning(&ds));
    let plan = run(&ds, &[node("n1")], &pods, at(10));
    assert!(plan.release.is_empty() && !plan.finalize);
    assert_eq!(plan.delete.len(), 2);
    // …and goes once none is left, a terminating one included.
    let plan = run(&ds, &[node("n1")], &pods[2..], at(10));
    assert!(
        plan.delete.is_empty() && !plan.finalize,
        "agent-c terminates"
    );
    let plan = run(&ds, &[node("n1")], &pods[3..], at(10));
    assert!(
        plan.delete.is_empty() && plan.finalize,
        "only an orphan left"
    );
    // The finalizer alone, without a deletionTimestamp, changes nothing.
    let mut live = ds.clone();
    live.metadata.deletion_timestamp = None;
    live.metadata.finalizers = vec![ORPHAN_FINALIZER.to_string()];
    assert!(!is_orphaning(&live));
}

#[test]
fn availability_waits_for_min_ready_seconds() {
    let mut ds = ds();
    ds.spec.min_ready_seconds = Some(30);
    let nodes = [node("n1"), node("n2")];
    let pods = [pod("agent-a", "n1", 0), pod("agent-b", "n2", 20)];
    let plan = run(&ds, &nodes, &pods, at(40));
    assert_eq!(plan.status.number_ready, 2);
    assert_eq!(plan.status.number_available, 1);
    assert_eq!(plan.status.number_unavailable, 1);
    assert_eq!(
        plan.requeue_at,
        Some(at(50) + Duration::from_millis(1)),
        "when agent-b becomes available"
    );
}

#[test]
fn the_oldest_pod_decides_readiness() {
    let ds = ds();
    let nodes = [node("n1")];
    let not_ready = with_phase(pod("agent-a", "n1", 0), PodPhase::Pending);
    let pods = [not_ready, pod("agent-b", "n1", 5)];
    let plan = run(&ds, &nodes, &pods, at(10));
    assert_eq!(plan.status.number_ready, 0);
    assert_eq!(plan.status.current_number_scheduled, 1);
}

#[test]
fn revision_hash_is_the_rolling_update_hook() {
    let ds = ds();
    let nodes = [node("n1"), node("n2")];
    let mut current = pod("agent-a", "n1", 0);
    current
        .metadata
        .labels
        .insert(pods::CONTROLLER_REVISION_HASH_LABEL.into(), "v2".into());
    let pods = [current, pod("agent-b", "n2", 0)];
    let without = run(&ds, &nodes, &pods, at(10));
    assert_eq!(without.status.updated_number_scheduled, 2);
    let with = plan(
        &PlanInput::new(&ds, &nodes, &pods, at(10)).with_revision_hash("v2"),
        &mut StdRng::seed_from_u64(0),
    );
    assert_eq!(with.status.updated_number_scheduled, 1);
    let fresh = plan(
        &PlanInput::new(&ds, &[node("n3")], &[], at(10)).with_revision_hash("v2"),
        &mut StdRng::seed_from_u64(0),
    );
    assert_eq!(
        fresh.create[0]
            .pod
            .metadata
            .labels
            .get(pods::CONTROLLER_REVISION_HASH_LABEL)
            .map(String::as_str),
        Some("v2")
    );
}

#[test]
fn backoff_of_removed_nodes_is_dropped() {
    let ds = ds();
    let mut backoff = FailedPodBackoff::new();
    backoff.next("gone", Some(1), at(0));
    backoff.next("n1", Some(1), at(0));
    let plan = plan(
        &PlanInput::new(&ds, &[node("n1")], &[pod("agent-a", "n1", 0)], at(1))
            .with_backoff(&backoff),
        &mut StdRng::seed_from_u64(0),
    );
    let nodes: Vec<_> = plan.backoff.entries().map(|(n, _)| n).collect();
    assert_eq!(nodes, ["n1"]);
}

/// An RNG whose suffixes repeat a character: `bbbbb`, `ccccc`, …
struct Repeating(u32);

impl RngCore for Repeating {
    fn next_u32(&mut self) -> u32 {
        self.0 += 1;
        (self.0 - 1) / 5
    }
    fn next_u64(&mut self) -> u64 {
        u64::from(self.next_u32())
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        dest.fill(0);
    }
}

#[test]
fn generated_names_avoid_existing_ones() {
    let ds = ds();
    let mut taken = orphan("agent-bbbbb", "elsewhere", 0);
    taken.metadata.labels = labels(&[("app", "other")]);
    let plan = plan(
        &PlanInput::new(&ds, &[node("n1")], &[taken], at(0)),
        &mut Repeating(0),
    );
    assert_eq!(plan.create[0].pod.metadata.name, "agent-ccccc");
}

#[test]
fn same_input_same_seed_same_plan() {
    let ds = ds();
    let nodes: Vec<Node> = (0..20).map(|i| node(&format!("n{i}"))).collect();
    let pods = [
        pod("agent-a", "n1", 0),
        with_phase(pod("agent-b", "n2", 0), PodPhase::Failed),
    ];
    let a = run(&ds, &nodes, &pods, at(5));
    let b = run(&ds, &nodes, &pods, at(5));
    assert_eq!(a, b);
    let c = plan(
        &PlanInput::new(&ds, &nodes, &pods, at(5)),
        &mut StdRng::seed_from_u64(43),
    );
    assert_ne!(a.create[0].pod.metadata.name, c.create[0].pod.metadata.name);
}

#[test]
fn ineligible_nodes_explain_every_reason() {
    let mut ds = ds();
    ds.spec.template.spec.node_selector = labels(&[("role", "edge")]);
    let mut n = tainted("n1", "gpu:NoExecute");
    n.metadata.labels = labels(&[("role", "core")]);
    let plan = run(&ds, std::slice::from_ref(&n), &[], at(0));
    assert!(plan.create.is_empty());
    let ineligible = ineligible(&ds, &[n]);
    let (_, verdict) = &ineligible[0];
    assert!(!verdict.should_continue_running);
    assert_eq!(
        verdict.to_string(),
        "nodeSelector requires role=edge, but the node has role=core; taint gpu:NoExecute is not tolerated"
    );
    assert!(matches!(
        verdict.reasons[1],
        Ineligibility::Taint(Taint {
            effect: Some(TaintEffect::NoExecute),
            ..
        })
    ));
}
