//! Unit tests of the strategies: rolling steps, Recreate, scaling.

use super::revisions::*;
use super::sizes::*;
use super::tests::*;
use super::*;
use drover_api::{IntOrString, ReplicaSetStatus, RollingUpdateDeployment};

fn with_fenceposts(mut d: Deployment, surge: IntOrString, unavailable: IntOrString) -> Deployment {
    d.spec.strategy.rolling_update = Some(RollingUpdateDeployment {
        max_surge: Some(surge),
        max_unavailable: Some(unavailable),
        ..Default::default()
    });
    d
}

#[test]
fn fenceposts_round_surge_up_and_unavailable_down() {
    let d = deployment(10, "a");
    assert_eq!(fenceposts(&d, 10), (3, 2), "25% each by default");
    let d = with_fenceposts(d, "10%".into(), "10%".into());
    assert_eq!(fenceposts(&d, 5), (1, 0));
    let d = with_fenceposts(d, IntOrString::Int(0), IntOrString::Int(0));
    assert_eq!(fenceposts(&d, 5), (0, 1), "never both 0");
    let d = with_fenceposts(d, "0%".into(), "0%".into());
    assert_eq!(fenceposts(&d, 5), (0, 1));
    let mut recreate = deployment(4, "a");
    recreate.spec.strategy.r#type = Some(drover_api::DeploymentStrategyType::Recreate);
    assert_eq!(max_surge(&recreate), 0);
    assert_eq!(max_unavailable(&recreate), 0);
    let big = with_fenceposts(deployment(2, "a"), IntOrString::Int(1), IntOrString::Int(9));
    assert_eq!(max_unavailable(&big), 2, "at most the replicas");
}

#[test]
fn old_pods_go_only_while_enough_stay_available() {
    // 4 replicas, maxSurge 1, maxUnavailable 0: the old ReplicaSet shrinks
    // only as new pods become available.
    let old = deployment(4, "a");
    let mut d = with_fenceposts(deployment(4, "b"), IntOrString::Int(1), IntOrString::Int(0));
    d.metadata.generation = Some(2);
    let old_rs = rs_of(&old, 4, 1, 0);
    let first = run(&d, std::slice::from_ref(&old_rs), 1);
    let new_rs = first.create.clone().unwrap();
    assert_eq!(new_rs.spec.replicas, Some(1));
    assert!(first.update.is_empty(), "nothing old goes yet");
    // The new pod is not available: nothing moves.
    let new_rs = stored(
        new_rs,
        1,
        ReplicaSetStatus {
            replicas: 1,
            ..Default::default()
        },
    );
    let sets = [old_rs.clone(), new_rs.clone()];
    let waiting = run(&d, &sets, 2);
    assert!(waiting.update.iter().all(|rs| rs.spec.replicas
        == Some(if rs.metadata.name == old_rs.metadata.name {
            4
        } else {
            1
        })));
    assert!(waiting.events.is_empty());
    // Available: one old pod goes.
    let mut ready = new_rs.clone();
    ready.status = full(1);
    let step = run(&d, &[old_rs.clone(), ready], 3);
    let scaled: Vec<_> = step.update.iter().map(|rs| rs.spec.replicas).collect();
    assert_eq!(scaled, [Some(3)]);
    assert_eq!(
        messages(&step),
        [format!(
            "Scaled down replica set {} from 4 to 3",
            old_rs.metadata.name
        )]
    );
}

#[test]
fn unhealthy_old_pods_go_first_without_costing_availability() {
    // 4 replicas, maxSurge 0, maxUnavailable 1; the old ReplicaSet has 2
    // unavailable pods: they go at once, beyond maxUnavailable.
    let old = deployment(4, "a");
    let d = with_fenceposts(deployment(4, "b"), IntOrString::Int(0), IntOrString::Int(1));
    let mut old_rs = rs_of(&old, 4, 1, 0);
    old_rs.status.available_replicas = 2;
    let plan = run(&d, &[old_rs], 1);
    assert_eq!(plan.create.as_ref().unwrap().spec.replicas, Some(0));
    // allowed down: 4 - 3 - 0 = 1 (the new has no pods yet): one
    // unhealthy pod.
    assert_eq!(plan.update[0].spec.replicas, Some(3));
}

#[test]
fn a_new_replica_set_above_the_replicas_is_scaled_down() {
    let mut d = deployment(2, "a");
    let mut rs = rs_of(&d, 5, 1, 0);
    // Scaled by the desired-replicas annotation: a scaling event.
    d.spec.replicas = Some(2);
    rs.metadata
        .annotations
        .insert(DESIRED_REPLICAS_ANNOTATION.into(), "2".into());
    let plan = run(&d, &[rs], 1);
    assert_eq!(plan.update[0].spec.replicas, Some(2));
    assert_eq!(
        messages(&plan),
        ["Scaled down replica set web-".to_owned() + &pod_template_hash(&d) + " from 5 to 2"]
    );
}

#[test]
fn a_replicas_change_scales_the_only_active_replica_set() {
    let mut d = deployment(3, "a");
    let rs = rs_of(&d, 3, 1, 0);
    d.spec.replicas = Some(5);
    let plan = run(&d, std::slice::from_ref(&rs), 1);
    assert_eq!(plan.update.len(), 1);
    assert_eq!(plan.update[0].spec.replicas, Some(5));
    let note = |k: &str| plan.update[0].metadata.annotations.get(k).cloned();
    assert_eq!(note(DESIRED_REPLICAS_ANNOTATION).as_deref(), Some("5"));
    assert_eq!(note(MAX_REPLICAS_ANNOTATION).as_deref(), Some("7"));
    assert_eq!(
        messages(&plan),
        [format!(
            "Scaled up replica set {} from 3 to 5",
            rs.metadata.name
        )]
    );
}

#[test]
fn a_replicas_change_mid_rollout_is_shared_in_proportion() {
    // Kubernetes' documented example: 10 replicas, maxSurge 3,
    // maxUnavailable 2, mid-rollout with 8 old and 5 new pods; scaled to
    // 15, the 5 extra go 3 to the old and 2 to the new ReplicaSet.
    let old = with_fenceposts(
        deployment(10, "a"),
        IntOrString::Int(3),
        IntOrString::Int(2),
    );
    let mut d = with_fenceposts(
        deployment(10, "b"),
        IntOrString::Int(3),
        IntOrString::Int(2),
    );
    let mut old_rs = rs_of(&old, 8, 1, 0);
    let mut new_rs = rs_of(&d, 5, 2, 10);
    for rs in [&mut old_rs, &mut new_rs] {
        set_replicas_annotations(rs, 10, 13);
    }
    d.spec.replicas = Some(15);
    let plan = run(&d, &[old_rs.clone(), new_rs.clone()], 20);
    let size = |name: &str| {
        plan.update
            .iter()
            .find(|rs| rs.metadata.name == name)
            .and_then(|rs| rs.spec.replicas)
    };
    assert_eq!(size(&old_rs.metadata.name), Some(11));
    assert_eq!(size(&new_rs.metadata.name), Some(7));
    assert!(plan.create.is_none());
    // Scaled down to 0 replicas: every ReplicaSet goes to 0.
    d.spec.replicas = Some(0);
    let plan = run(&d, &[old_rs, new_rs], 20);
    assert!(plan.update.iter().all(|rs| rs.spec.replicas == Some(0)));
    assert_eq!(plan.update.len(), 2);
}

#[test]
fn a_saturated_new_replica_set_sends_the_old_ones_to_zero() {
    let old = deployment(3, "a");
    let mut d = deployment(3, "b");
    let old_rs = rs_of(&old, 2, 1, 0);
    let mut new_rs = rs_of(&d, 3, 2, 10);
    new_rs
        .metadata
        .annotations
        .insert(DESIRED_REPLICAS_ANNOTATION.into(), "3".into());
    d.spec.paused = Some(true);
    let plan = run(&d, &[old_rs, new_rs], 20);
    let old_after = plan.update.iter().find(|rs| rs.spec.replicas == Some(0));
    assert!(old_after.is_some(), "{:?}", plan.update);
}

#[test]
fn recreate_stops_every_old_pod_before_the_new_replica_set() {
    let mut old = deployment(3, "a");
    old.spec.strategy.r#type = Some(drover_api::DeploymentStrategyType::Recreate);
    let mut d = old.clone();
    d.spec.template.spec.containers[0].image = "b".into();
    let old_rs = rs_of(&old, 3, 1, 0);
    let plan = run(&d, std::slice::from_ref(&old_rs), 1);
    assert!(plan.create.is_none());
    assert_eq!(plan.update[0].spec.replicas, Some(0));
    // Scaled to 0, but a pod still terminates: wait.
    let mut down = old_rs.clone();
    down.spec.replicas = Some(0);
    down.status = ReplicaSetStatus {
        observed_generation: Some(1),
        ..Default::default()
    };
    let mut pod = Pod::default();
    pod.metadata.name = "web-old-1".into();
    pod.metadata.namespace = "default".into();
    pod.metadata
        .owner_references
        .push(crate::daemon::pods::controller_ref_to(&down));
    pod.metadata.deletion_timestamp = Some(t(1).to_rfc3339());
    let waiting = run_with_pods(&d, &[down.clone()], &[pod.clone()], 2);
    assert!(waiting.create.is_none());
    // A failed pod does not hold it.
    pod.metadata.deletion_timestamp = None;
    pod.status.phase = Some(drover_api::PodPhase::Failed);
    let go = run_with_pods(&d, &[down], &[pod], 3);
    let new_rs = go
        .create
        .expect("the new ReplicaSet once the old pods are gone");
    assert_eq!(new_rs.spec.replicas, Some(3));
    assert_eq!(
        new_rs
            .metadata
            .annotations
            .get(MAX_REPLICAS_ANNOTATION)
            .map(String::as_str),
        Some("3"),
        "no surge with Recreate"
    );
}
