//! Unit tests of the Deployment planner: ReplicaSets, revisions, the
//! status and conditions. The strategies' arithmetic is in
//! `tests_rolling.rs`.

use super::progress::*;
use super::revisions::*;
use super::*;
use drover_api::{ConditionStatus, Container, LabelSelector, ReplicaSetStatus};
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::time::Duration;

pub(super) fn t(s: i64) -> Timestamp {
    Timestamp::from_unix_seconds(1_700_000_000 + s)
}

pub(super) fn deployment(replicas: i32, image: &str) -> Deployment {
    let mut d = Deployment::default();
    d.metadata.name = "web".into();
    d.metadata.namespace = "default".into();
    d.metadata.uid = "d-uid".into();
    d.metadata.generation = Some(1);
    d.spec.replicas = Some(replicas);
    let labels: Labels = [("app".to_string(), "web".to_string())].into();
    d.spec.selector = Some(LabelSelector {
        match_labels: labels.clone(),
        ..Default::default()
    });
    d.spec.template.metadata.labels = labels;
    d.spec.template.spec.containers = vec![Container {
        name: "web".into(),
        image: image.into(),
        ..Default::default()
    }];
    d
}

/// The plan's new ReplicaSet as the store would hold it: a uid, a creation
/// time, its status as given.
pub(super) fn stored(mut rs: ReplicaSet, created: i64, status: ReplicaSetStatus) -> ReplicaSet {
    rs.metadata.uid = format!("uid-{}", rs.metadata.name);
    rs.metadata.creation_timestamp = Some(t(created).to_rfc3339());
    rs.metadata.generation = Some(1);
    rs.status = ReplicaSetStatus {
        observed_generation: Some(1),
        ..status
    };
    rs
}

/// A ReplicaSet of `d`'s template as it is now, of `size` pods all
/// available, at `revision`.
pub(super) fn rs_of(d: &Deployment, size: i32, revision: i64, created: i64) -> ReplicaSet {
    let hash = pod_template_hash(d);
    let mut rs = new_replica_set(d, format!("web-{hash}"), &hash, revision);
    rs.spec.replicas = Some(size);
    set_replicas_annotations(&mut rs, replicas(d), replicas(d) + sizes::max_surge(d));
    stored(rs, created, full(size))
}

pub(super) fn full(n: i32) -> ReplicaSetStatus {
    ReplicaSetStatus {
        replicas: n,
        fully_labeled_replicas: n,
        ready_replicas: n,
        available_replicas: n,
        ..Default::default()
    }
}

pub(super) fn run(d: &Deployment, sets: &[ReplicaSet], now: i64) -> DeploymentPlan {
    run_with_pods(d, sets, &[], now)
}

pub(super) fn run_with_pods(
    d: &Deployment,
    sets: &[ReplicaSet],
    pods: &[Pod],
    now: i64,
) -> DeploymentPlan {
    let input = PlanInput {
        deployment: d,
        replica_sets: sets.iter().collect(),
        pods: pods.iter().collect(),
        now: t(now),
    };
    plan(&input, &mut StdRng::seed_from_u64(3))
}

pub(super) fn condition<'a>(plan: &'a DeploymentPlan, kind: &str) -> &'a DeploymentCondition {
    find(&plan.status, kind).unwrap_or_else(|| panic!("no {kind} in {:?}", plan.status))
}

pub(super) fn messages(plan: &DeploymentPlan) -> Vec<&str> {
    plan.events.iter().map(|e| e.message.as_str()).collect()
}

use drover_api::DeploymentCondition;

#[test]
fn a_new_deployment_gets_its_replica_set_named_by_the_template_hash() {
    let d = deployment(3, "busybox:1");
    let plan = run(&d, &[], 0);
    let rs = plan.create.as_ref().expect("a new ReplicaSet");
    let hash = pod_template_hash(&d);
    assert_eq!(rs.metadata.name, format!("web-{hash}"));
    assert_eq!(rs.metadata.labels.get(POD_TEMPLATE_HASH_LABEL), Some(&hash));
    assert_eq!(
        rs.spec
            .template
            .metadata
            .labels
            .get(POD_TEMPLATE_HASH_LABEL),
        Some(&hash)
    );
    let selector = rs.spec.selector.as_ref().unwrap();
    assert_eq!(
        selector.match_labels.get(POD_TEMPLATE_HASH_LABEL),
        Some(&hash)
    );
    assert_eq!(
        selector.match_labels.get("app").map(String::as_str),
        Some("web")
    );
    assert_eq!(rs.spec.replicas, Some(3));
    let owner = rs.metadata.controller_ref().unwrap();
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Deployment", "d-uid")
    );
    let note = |k: &str| rs.metadata.annotations.get(k).map(String::as_str);
    assert_eq!(note(REVISION_ANNOTATION), Some("1"));
    assert_eq!(note(DESIRED_REPLICAS_ANNOTATION), Some("3"));
    // maxSurge 25% of 3, rounded up.
    assert_eq!(note(MAX_REPLICAS_ANNOTATION), Some("4"));
    assert_eq!(
        messages(&plan),
        [format!("Scaled up replica set web-{hash} from 0 to 3")]
    );
    assert_eq!(plan.events[0].reason, "ScalingReplicaSet");
    assert_eq!(plan.events[0].source.component, "deployment-controller");
    assert_eq!(
        plan.annotations
            .as_ref()
            .and_then(|a| a.get(REVISION_ANNOTATION))
            .map(String::as_str),
        Some("1")
    );
    let progressing = condition(&plan, PROGRESSING);
    assert_eq!(progressing.reason, NEW_RS_CREATED);
    assert_eq!(
        progressing.message,
        format!("Created new replica set \"web-{hash}\"")
    );
    assert_eq!(condition(&plan, AVAILABLE).reason, MIN_UNAVAILABLE);
    assert_eq!(plan.status.observed_generation, Some(1));
}

#[test]
fn the_hash_is_stable_and_moves_with_the_template_and_collisions() {
    let a = deployment(3, "busybox:1");
    let mut b = a.clone();
    b.spec.replicas = Some(7);
    assert_eq!(pod_template_hash(&a), pod_template_hash(&b));
    assert_ne!(
        pod_template_hash(&a),
        pod_template_hash(&deployment(3, "busybox:2"))
    );
    b.status.collision_count = Some(1);
    assert_ne!(pod_template_hash(&a), pod_template_hash(&b));
}

#[test]
fn a_name_taken_by_another_template_is_a_collision() {
    let d = deployment(3, "busybox:1");
    let mut squatter = rs_of(&deployment(3, "other:1"), 1, 1, 0);
    squatter.metadata.name = format!("web-{}", pod_template_hash(&d));
    squatter.metadata.owner_references.clear();
    squatter.metadata.labels = [("app".to_string(), "db".to_string())].into();
    let plan = run(&d, &[squatter], 5);
    assert!(plan.create.is_none());
    assert_eq!(plan.status.collision_count, Some(1));
    assert!(plan.status_changed);
    let mut next = d.clone();
    next.status = plan.status;
    assert_ne!(pod_template_hash(&next), pod_template_hash(&d));
}

#[test]
fn a_template_change_starts_a_new_revision_within_the_surge() {
    let old = deployment(4, "busybox:1");
    let old_rs = rs_of(&old, 4, 1, 0);
    let mut d = deployment(4, "busybox:2");
    d.metadata.generation = Some(2);
    let plan = run(&d, &[old_rs], 10);
    let new_rs = plan.create.as_ref().expect("a new ReplicaSet");
    // maxSurge 25% of 4 = 1: one new pod beside the four old.
    assert_eq!(new_rs.spec.replicas, Some(1));
    assert_eq!(
        new_rs
            .metadata
            .annotations
            .get(REVISION_ANNOTATION)
            .map(String::as_str),
        Some("2")
    );
    // maxUnavailable 25% of 4 = 1: one old pod may go at once.
    assert_eq!(plan.update.len(), 1);
    assert_eq!(plan.update[0].spec.replicas, Some(3));
    assert_eq!(messages(&plan).len(), 2);
}

#[test]
fn an_old_template_coming_back_takes_the_next_revision() {
    let v1 = deployment(2, "busybox:1");
    let v2 = deployment(2, "busybox:2");
    let mut rs1 = rs_of(&v1, 0, 1, 0);
    rs1.status = ReplicaSetStatus {
        observed_generation: Some(1),
        ..Default::default()
    };
    let rs2 = rs_of(&v2, 2, 2, 10);
    let mut d = v1.clone();
    d.metadata
        .annotations
        .insert(REVISION_ANNOTATION.into(), "2".into());
    let plan = run(&d, &[rs1.clone(), rs2], 20);
    assert!(plan.create.is_none());
    let back = plan
        .update
        .iter()
        .find(|rs| rs.metadata.name == rs1.metadata.name)
        .expect("the old ReplicaSet comes back");
    assert_eq!(
        back.metadata
            .annotations
            .get(REVISION_ANNOTATION)
            .map(String::as_str),
        Some("3")
    );
    assert_eq!(
        plan.annotations
            .as_ref()
            .and_then(|a| a.get(REVISION_ANNOTATION))
            .map(String::as_str),
        Some("3")
    );
}

#[test]
fn a_complete_rollout_says_so_and_keeps_the_history_limit() {
    let mut d = deployment(2, "busybox:9");
    d.spec.revision_history_limit = Some(2);
    let mut sets: Vec<ReplicaSet> = (1..=4)
        .map(|r| {
            let mut rs = rs_of(&deployment(2, &format!("busybox:{r}")), 0, r, r);
            rs.status = ReplicaSetStatus {
                observed_generation: Some(1),
                ..Default::default()
            };
            rs
        })
        .collect();
    sets.push(rs_of(&d, 2, 5, 10));
    let plan = run(&d, &sets, 20);
    let gone: Vec<&str> = plan.delete.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        gone,
        [
            sets[0].metadata.name.as_str(),
            sets[1].metadata.name.as_str()
        ]
    );
    let progressing = condition(&plan, PROGRESSING);
    assert_eq!(progressing.reason, NEW_RS_AVAILABLE);
    assert_eq!(progressing.status, Some(ConditionStatus::True));
    assert_eq!(
        progressing.message,
        format!(
            "ReplicaSet \"{}\" has successfully progressed.",
            sets[4].metadata.name
        )
    );
    let available = condition(&plan, AVAILABLE);
    assert_eq!(available.reason, MIN_AVAILABLE);
    assert_eq!(available.message, "Deployment has minimum availability.");
    assert_eq!(plan.status.replicas, 2);
    assert_eq!(plan.status.updated_replicas, 2);
    assert_eq!(plan.status.available_replicas, 2);
    assert_eq!(plan.status.unavailable_replicas, 0);
}

#[test]
fn history_keeps_replica_sets_that_still_have_pods() {
    let mut d = deployment(1, "busybox:9");
    d.spec.revision_history_limit = Some(0);
    let mut old = rs_of(&deployment(1, "busybox:1"), 0, 1, 0);
    old.status = ReplicaSetStatus {
        replicas: 1,
        observed_generation: Some(1),
        ..Default::default()
    };
    let plan = run(&d, &[old, rs_of(&d, 1, 2, 10)], 20);
    assert!(plan.delete.is_empty());
}

#[test]
fn no_progress_past_the_deadline_is_exceeded() {
    let old = deployment(2, "busybox:1");
    let mut d = deployment(2, "busybox:2");
    d.spec.progress_deadline_seconds = Some(10);
    // The status of the finished rollout of `old`.
    d.status.replicas = 2;
    d.status.updated_replicas = 2;
    d.status.ready_replicas = 2;
    d.status.available_replicas = 2;
    let first = run(&d, &[rs_of(&old, 2, 1, 0)], 0);
    let mut new_rs = stored(first.create.clone().unwrap(), 0, Default::default());
    new_rs.status.observed_generation = Some(1);
    let mut sets: Vec<ReplicaSet> = vec![rs_of(&old, 2, 1, 0)];
    for u in &first.update {
        sets[0].spec.replicas = u.spec.replicas;
    }
    sets.push(new_rs);
    d.status = first.status.clone();
    // The new pod never turns ready: nothing moves.
    let still = run(&d, &sets, 5);
    assert_eq!(condition(&still, PROGRESSING).reason, NEW_RS_CREATED);
    assert_eq!(still.requeue_at, Some(t(10) + Duration::from_millis(1)));
    let late = run(&d, &sets, 11);
    let c = condition(&late, PROGRESSING);
    assert_eq!(c.reason, TIMED_OUT);
    assert_eq!(c.status, Some(ConditionStatus::False));
    assert!(c.message.ends_with("has timed out progressing."));
}

#[test]
fn progress_moves_the_deadline() {
    let mut d = deployment(2, "busybox:2");
    let mut new_rs = rs_of(&d, 2, 2, 0);
    new_rs.status = ReplicaSetStatus {
        replicas: 2,
        ready_replicas: 1,
        available_replicas: 1,
        observed_generation: Some(1),
        ..Default::default()
    };
    set(
        &mut d.status,
        PROGRESSING,
        ConditionStatus::True,
        NEW_RS_CREATED,
        "x".into(),
        t(0),
    );
    let plan = run(&d, &[new_rs], 30);
    let c = condition(&plan, PROGRESSING);
    assert_eq!(c.reason, RS_UPDATED);
    assert_eq!(c.last_update_time, Some(t(30).to_rfc3339()));
    assert_eq!(c.last_transition_time, Some(t(0).to_rfc3339()));
}

#[test]
fn a_paused_deployment_scales_but_does_not_roll_out() {
    let old = deployment(2, "busybox:1");
    let mut d = deployment(5, "busybox:2");
    d.spec.paused = Some(true);
    let plan = run(&d, &[rs_of(&old, 2, 1, 0)], 0);
    assert!(plan.create.is_none(), "no rollout while paused");
    assert_eq!(plan.update.len(), 1);
    assert_eq!(plan.update[0].spec.replicas, Some(5));
    let c = condition(&plan, PROGRESSING);
    assert_eq!(
        (c.reason.as_str(), c.status.clone()),
        (PAUSED, Some(ConditionStatus::Unknown))
    );
    assert_eq!(c.message, "Deployment is paused");
    // Resumed: the condition says so, and the rollout starts.
    let mut resumed = d.clone();
    resumed.spec.paused = Some(false);
    resumed.spec.replicas = Some(2);
    resumed.status = plan.status;
    let plan = run(&resumed, &[rs_of(&old, 2, 1, 0)], 1);
    assert!(plan.create.is_some());
}

#[test]
fn replica_sets_are_adopted_and_released_by_selector() {
    let d = deployment(2, "busybox:1");
    let mut orphan = rs_of(&d, 2, 1, 0);
    orphan.metadata.owner_references.clear();
    let mut stray = rs_of(&deployment(1, "busybox:0"), 1, 0, 0);
    stray.metadata.name = "stray".into();
    stray.metadata.labels = [("app".to_string(), "db".to_string())].into();
    let plan = run(&d, &[orphan, stray], 5);
    assert!(
        plan.create.is_none(),
        "the adopted one is the new ReplicaSet"
    );
    let names: Vec<_> = plan
        .update
        .iter()
        .map(|rs| rs.metadata.name.as_str())
        .collect();
    assert!(names.contains(&"stray"));
    let stray = plan
        .update
        .iter()
        .find(|rs| rs.metadata.name == "stray")
        .unwrap();
    assert!(stray.metadata.owner_references.is_empty());
    let adopted = plan
        .update
        .iter()
        .find(|rs| rs.metadata.name != "stray")
        .unwrap();
    assert_eq!(adopted.metadata.controller_ref().unwrap().uid, "d-uid");
}

#[test]
fn an_empty_selector_is_refused_with_a_warning() {
    let mut d = deployment(1, "busybox:1");
    d.spec.selector = Some(LabelSelector::default());
    let plan = run(&d, &[], 0);
    assert!(plan.create.is_none());
    assert_eq!(plan.events[0].reason, "SelectingAll");
}

#[test]
fn a_deployment_being_deleted_only_reports_status() {
    let mut d = deployment(3, "busybox:2");
    d.metadata.deletion_timestamp = Some(t(0).to_rfc3339());
    let plan = run(&d, &[rs_of(&deployment(3, "busybox:1"), 3, 1, 0)], 1);
    assert!(plan.create.is_none() && plan.update.is_empty() && plan.delete.is_empty());
    assert_eq!(plan.status.replicas, 3);
    assert_eq!(plan.status.updated_replicas, 0);
}

#[test]
fn deployment_annotations_are_copied_but_not_its_bookkeeping() {
    let mut d = deployment(1, "busybox:1");
    d.metadata
        .annotations
        .insert("kubernetes.io/change-cause".into(), "v1".into());
    d.metadata.annotations.insert(
        "kubectl.kubernetes.io/last-applied-configuration".into(),
        "{}".into(),
    );
    let plan = run(&d, &[], 0);
    let rs = plan.create.unwrap();
    assert_eq!(
        rs.metadata
            .annotations
            .get("kubernetes.io/change-cause")
            .map(String::as_str),
        Some("v1")
    );
    assert!(!rs
        .metadata
        .annotations
        .contains_key("kubectl.kubernetes.io/last-applied-configuration"));
}

#[test]
fn no_deadline_means_no_progressing_condition() {
    let mut d = deployment(1, "busybox:1");
    d.spec.progress_deadline_seconds = Some(i32::MAX);
    let plan = run(&d, &[], 0);
    assert!(find(&plan.status, PROGRESSING).is_none());
    assert!(find(&plan.status, AVAILABLE).is_some());
}

#[test]
fn replica_failure_is_carried_from_the_replica_sets() {
    let d = deployment(2, "busybox:1");
    let mut rs = rs_of(&d, 2, 1, 0);
    rs.status.available_replicas = 0;
    rs.status.conditions.push(drover_api::ReplicaSetCondition {
        r#type: "ReplicaFailure".into(),
        status: Some(ConditionStatus::True),
        reason: "FailedCreate".into(),
        message: "quota".into(),
        ..Default::default()
    });
    let plan = run(&d, &[rs], 1);
    let c = condition(&plan, "ReplicaFailure");
    assert_eq!(
        (c.reason.as_str(), c.message.as_str()),
        ("FailedCreate", "quota")
    );
}

#[test]
fn orphan_and_foreground_deletion_hand_over_the_replica_sets() {
    let mut d = deployment(2, "busybox:1");
    let rs = rs_of(&d, 2, 1, 0);
    d.metadata.deletion_timestamp = Some(t(0).to_rfc3339());
    d.metadata.finalizers = vec!["orphan".into()];
    let plan = run(&d, std::slice::from_ref(&rs), 1);
    assert_eq!(plan.update.len(), 1);
    assert!(plan.update[0].metadata.owner_references.is_empty());
    assert!(!plan.finalize);
    assert!(run(&d, &[], 2).finalize);
    d.metadata.finalizers = vec!["foregroundDeletion".into()];
    let plan = run(&d, std::slice::from_ref(&rs), 3);
    assert_eq!(plan.delete.len(), 1);
    assert_eq!(plan.delete[0].uid, rs.metadata.uid);
    assert!(!plan.finalize);
}
