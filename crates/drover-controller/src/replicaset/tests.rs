use super::*;
use drover_api::{ContainerStatus, LabelSelector, PodCondition};
use rand::rngs::StdRng;
use rand::SeedableRng;

fn t(s: i64) -> Timestamp {
    Timestamp::from_unix_seconds(1_700_000_000 + s)
}

fn labels(pairs: &[(&str, &str)]) -> drover_api::Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn rs(replicas: i32) -> ReplicaSet {
    let mut rs = ReplicaSet::default();
    rs.metadata.name = "web-5d9c8".into();
    rs.metadata.namespace = "default".into();
    rs.metadata.uid = "rs-uid".into();
    rs.metadata.generation = Some(3);
    rs.spec.replicas = Some(replicas);
    rs.spec.selector = Some(LabelSelector {
        match_labels: labels(&[("app", "web")]),
        ..Default::default()
    });
    rs.spec.template.metadata.labels = labels(&[("app", "web"), ("tier", "front")]);
    rs
}

fn pod(name: &str, owner: Option<&ReplicaSet>) -> Pod {
    let mut p = Pod::default();
    p.metadata.name = name.into();
    p.metadata.namespace = "default".into();
    p.metadata.uid = format!("uid-{name}");
    p.metadata.labels = labels(&[("app", "web"), ("tier", "front")]);
    p.metadata.creation_timestamp = Some(t(0).to_rfc3339());
    if let Some(rs) = owner {
        p.metadata
            .owner_references
            .push(pods::controller_ref_to(rs));
    }
    p.status.phase = Some(PodPhase::Running);
    p
}

fn ready(mut p: Pod, since: i64) -> Pod {
    p.status.conditions.push(PodCondition {
        r#type: "Ready".into(),
        status: Some(ConditionStatus::True),
        last_transition_time: Some(t(since).to_rfc3339()),
        ..Default::default()
    });
    p
}

fn on(mut p: Pod, node: &str) -> Pod {
    p.spec.node_name = node.into();
    p
}

fn run(rs: &ReplicaSet, pods: &[Pod], now: i64) -> ReplicaSetPlan {
    let input = PlanInput {
        replica_set: rs,
        pods: pods.iter().collect(),
        now: t(now),
    };
    plan(&input, &mut StdRng::seed_from_u64(1))
}

#[test]
fn too_few_pods_are_created_unbound_from_the_template() {
    let r = rs(3);
    let existing = [pod("web-5d9c8-aaaaa", Some(&r))];
    let plan = run(&r, &existing, 10);
    assert_eq!(plan.create.len(), 2);
    for c in &plan.create {
        let p = &c.pod;
        assert!(p.metadata.name.starts_with("web-5d9c8-"));
        assert_eq!(p.metadata.name.len(), "web-5d9c8-".len() + 5);
        assert_eq!(p.metadata.generate_name, "web-5d9c8-");
        assert!(p.spec.node_name.is_empty(), "the scheduler binds it");
        assert_eq!(p.metadata.labels, r.spec.template.metadata.labels);
        let owner = p.metadata.controller_ref().unwrap();
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("ReplicaSet", "rs-uid")
        );
        assert_eq!(c.event.message, format!("Created pod: {}", p.metadata.name));
        assert_eq!(c.event.source.component, "replicaset-controller");
    }
    assert_ne!(
        plan.create[0].pod.metadata.name,
        plan.create[1].pod.metadata.name
    );
    assert!(plan.delete.is_empty());
}

#[test]
fn creates_are_capped_by_the_burst_and_batched_in_slow_start() {
    let plan = run(&rs(1200), &[], 0);
    assert_eq!(plan.create.len(), BURST_REPLICAS);
    assert_eq!(slow_start_batches(0), Vec::<usize>::new());
    assert_eq!(slow_start_batches(1), vec![1]);
    assert_eq!(slow_start_batches(10), vec![1, 2, 4, 3]);
    assert_eq!(slow_start_batches(500).iter().sum::<usize>(), 500);
    assert_eq!(slow_start_batches(500).len(), 9);
}

#[test]
fn inactive_pods_do_not_count_and_are_replaced() {
    let r = rs(3);
    let mut failed = pod("a", Some(&r));
    failed.status.phase = Some(PodPhase::Failed);
    let mut done = pod("b", Some(&r));
    done.status.phase = Some(PodPhase::Succeeded);
    let mut leaving = pod("c", Some(&r));
    leaving.metadata.deletion_timestamp = Some(t(0).to_rfc3339());
    let plan = run(&r, &[failed, done, leaving], 1);
    assert_eq!(plan.create.len(), 3);
    assert_eq!(plan.status.replicas, 0);
    assert!(plan.delete.is_empty(), "finished pods are the pod GC's");
}

#[test]
fn surplus_goes_in_kubernetes_order() {
    let r = rs(0);
    let unscheduled = pod("unscheduled", Some(&r));
    let mut pending = on(pod("pending", Some(&r)), "n1");
    pending.status.phase = Some(PodPhase::Pending);
    let mut unknown = on(pod("unknown", Some(&r)), "n1");
    unknown.status.phase = Some(PodPhase::Unknown);
    let not_ready = on(pod("not-ready", Some(&r)), "n2");
    // Two ready pods on n3 (doubled up) go before a ready one alone.
    let doubled = ready(on(pod("doubled", Some(&r)), "n3"), 5);
    let doubled2 = ready(on(pod("doubled2", Some(&r)), "n3"), 5);
    let recent = ready(on(pod("recent", Some(&r)), "n4"), 9);
    let mut restarted = ready(on(pod("restarted", Some(&r)), "n5"), 2);
    restarted.status.container_statuses.push(ContainerStatus {
        restart_count: 4,
        ..Default::default()
    });
    let mut newer = ready(on(pod("newer", Some(&r)), "n6"), 2);
    newer.metadata.creation_timestamp = Some(t(1).to_rfc3339());
    let oldest = ready(on(pod("oldest", Some(&r)), "n7"), 2);
    let all = [
        oldest,
        newer,
        restarted,
        recent,
        doubled2,
        doubled,
        not_ready,
        unknown,
        pending,
        unscheduled,
    ];
    let plan = run(&r, &all, 20);
    let order: Vec<&str> = plan.delete.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        order,
        [
            "unscheduled",
            "pending",
            "unknown",
            "not-ready",
            "doubled",
            "doubled2",
            "recent",
            "restarted",
            "newer",
            "oldest"
        ]
    );
    assert_eq!(plan.delete[0].uid, "uid-unscheduled");
    assert_eq!(plan.delete[0].event.message, "Deleted pod: unscheduled");
}

#[test]
fn surplus_deletes_only_the_difference() {
    let r = rs(2);
    let pods: Vec<Pod> = (0..5)
        .map(|i| ready(on(pod(&format!("p{i}"), Some(&r)), "n"), i))
        .collect();
    let plan = run(&r, &pods, 100);
    assert_eq!(plan.delete.len(), 3);
    assert!(plan.create.is_empty());
}

#[test]
fn orphans_are_adopted_and_strays_released() {
    let r = rs(2);
    let orphan = pod("orphan", None);
    let mut other_owner = pod("theirs", None);
    other_owner
        .metadata
        .owner_references
        .push(pods::controller_ref_to(&{
            let mut o = r.clone();
            o.metadata.uid = "other".into();
            o
        }));
    let mut stray = pod("stray", Some(&r));
    stray.metadata.labels = labels(&[("app", "db")]);
    let mut other_ns = pod("elsewhere", None);
    other_ns.metadata.namespace = "ops".into();
    let mut mirror = pod("mirror", None);
    mirror
        .metadata
        .annotations
        .insert(drover_api::pod_annotation::CONFIG_MIRROR.into(), "x".into());
    let plan = run(&r, &[orphan, other_owner, stray, other_ns, mirror], 0);
    assert_eq!(plan.adopt.len(), 1);
    assert_eq!(plan.adopt[0].metadata.name, "orphan");
    assert_eq!(
        plan.adopt[0].metadata.controller_ref().unwrap().uid,
        "rs-uid"
    );
    assert_eq!(plan.release.len(), 1);
    assert_eq!(plan.release[0].metadata.name, "stray");
    assert!(plan.release[0].metadata.owner_references.is_empty());
    // The adopted orphan counts: one more pod to reach 2.
    assert_eq!(plan.create.len(), 1);
    assert_eq!(plan.status.replicas, 1);
}

#[test]
fn status_counts_labels_readiness_and_availability() {
    let mut r = rs(4);
    r.spec.min_ready_seconds = Some(10);
    let mut partial = ready(on(pod("partial", Some(&r)), "n"), 0);
    partial.metadata.labels.remove("tier");
    let pods = [
        ready(on(pod("old", Some(&r)), "n"), 0),
        ready(on(pod("young", Some(&r)), "n"), 15),
        on(pod("starting", Some(&r)), "n"),
        partial,
    ];
    let plan = run(&r, &pods, 20);
    assert_eq!(plan.status.replicas, 4);
    assert_eq!(plan.status.fully_labeled_replicas, 3);
    assert_eq!(plan.status.ready_replicas, 3);
    assert_eq!(plan.status.available_replicas, 2);
    assert_eq!(plan.status.observed_generation, Some(3));
    assert!(plan.status_changed);
    // "young" turns available just after 15 + 10.
    assert_eq!(plan.requeue_at, Some(t(25) + Duration::from_millis(1)));
}

#[test]
fn replica_failure_is_set_once_and_cleared() {
    let mut s = ReplicaSetStatus::default();
    set_replica_failure(&mut s, Some((ReplicaFailure::Create, "quota".into())), t(0));
    set_replica_failure(&mut s, Some((ReplicaFailure::Create, "again".into())), t(5));
    assert_eq!(s.conditions.len(), 1);
    assert_eq!(s.conditions[0].reason, "FailedCreate");
    assert_eq!(s.conditions[0].message, "quota");
    set_replica_failure(&mut s, None, t(9));
    assert!(s.conditions.is_empty());
    set_replica_failure(&mut s, Some((ReplicaFailure::Delete, "x".into())), t(9));
    assert_eq!(s.conditions[0].reason, "FailedDelete");
}

#[test]
fn a_bad_selector_manages_nothing() {
    let mut r = rs(3);
    r.spec.selector = Some(LabelSelector::default());
    let plan = run(&r, &[pod("orphan", None)], 0);
    assert!(plan.create.is_empty() && plan.adopt.is_empty());
    assert_eq!(plan.events.len(), 1);
    assert_eq!(plan.events[0].r#type, "Warning");
}

#[test]
fn a_replica_set_being_deleted_creates_and_adopts_nothing() {
    let mut r = rs(3);
    r.metadata.deletion_timestamp = Some(t(0).to_rfc3339());
    let plan = run(&r, &[pod("orphan", None)], 0);
    assert!(plan.create.is_empty() && plan.adopt.is_empty() && plan.delete.is_empty());
}

#[test]
fn the_same_seed_gives_the_same_plan() {
    let r = rs(5);
    assert_eq!(run(&r, &[], 0), run(&r, &[], 0));
}

#[test]
fn orphan_and_foreground_deletion_hand_over_the_pods() {
    let mut r = rs(2);
    r.metadata.deletion_timestamp = Some(t(0).to_rfc3339());
    r.metadata.finalizers = vec!["orphan".into()];
    let mut failed = pod("failed", Some(&r));
    failed.status.phase = Some(PodPhase::Failed);
    let pods = [pod("a", Some(&r)), failed, pod("orphan", None)];
    let plan = run(&r, &pods, 1);
    let released: Vec<&str> = plan
        .release
        .iter()
        .map(|p| p.metadata.name.as_str())
        .collect();
    assert_eq!(released, ["a", "failed"]);
    assert!(plan
        .release
        .iter()
        .all(|p| p.metadata.owner_references.is_empty()));
    assert!(!plan.finalize && plan.create.is_empty() && plan.adopt.is_empty());
    assert!(run(&r, &[pod("orphan", None)], 2).finalize);

    r.metadata.finalizers = vec!["foregroundDeletion".into()];
    let mut leaving = pod("leaving", Some(&r));
    leaving.metadata.deletion_timestamp = Some(t(0).to_rfc3339());
    let plan = run(&r, &[pod("a", Some(&r)), leaving.clone()], 3);
    let deleted: Vec<&str> = plan.delete.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(deleted, ["a"]);
    assert!(!plan.finalize, "a terminating pod is still its");
    assert!(run(&r, &[], 4).finalize);
}
