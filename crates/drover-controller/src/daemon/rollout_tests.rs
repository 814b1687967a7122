//! Unit and property tests of rolling updates and revision bookkeeping.

use super::*;
use crate::daemon::fixtures::{at, ds, node, pod, set_ready};
use crate::daemon::{explain, plan, DeletionReason, PlanInput};
use drover_api::{Node, PodPhase, RollingUpdateDaemonSet};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::collections::HashSet;

fn with_rolling(mut ds: DaemonSet, unavailable: IntOrString, surge: IntOrString) -> DaemonSet {
    ds.spec.update_strategy.rolling_update = Some(RollingUpdateDaemonSet {
        max_unavailable: Some(unavailable),
        max_surge: Some(surge),
        ..Default::default()
    });
    ds
}

fn revision(ds: &DaemonSet, image: &str, number: i64) -> ControllerRevision {
    let mut other = ds.clone();
    other.spec.template.spec.containers[0].image = image.into();
    let hash = template_hash(&other.spec.template, None);
    new_revision(&other, &hash, number)
}

#[test]
fn hashes_are_stable_and_short() {
    let a = ds("busybox:1");
    let h = template_hash(&a.spec.template, None);
    assert_eq!(h, template_hash(&a.spec.template, None));
    assert!(!h.is_empty() && h.len() <= 10, "{h}");
    assert!(h.bytes().all(|b| SAFE_ALPHABET.contains(&b)));
    assert_ne!(h, template_hash(&ds("busybox:2").spec.template, None));
    assert_ne!(h, template_hash(&a.spec.template, Some(1)));
}

#[test]
fn percentages_round_up() {
    assert_eq!(scaled_value(&"34%".into(), 3), 2);
    assert_eq!(scaled_value(&"10%".into(), 3), 1);
    assert_eq!(scaled_value(&"100%".into(), 7), 7);
    assert_eq!(scaled_value(&"0%".into(), 7), 0);
    assert_eq!(scaled_value(&IntOrString::Int(2), 7), 2);
    let d = with_rolling(ds("a"), IntOrString::Int(0), IntOrString::Int(0));
    assert_eq!(update_counts(&d, 5), (0, 1), "never both zero");
    let mut on_delete = ds("a");
    on_delete.spec.update_strategy.r#type = Some(DaemonSetUpdateStrategyType::OnDelete);
    assert_eq!(update_counts(&on_delete, 5), (0, 0));
}

#[test]
fn a_new_template_gets_a_new_revision_numbered_after_the_others() {
    let d = ds("busybox:3");
    let old = [revision(&d, "busybox:1", 1), revision(&d, "busybox:2", 2)];
    let plan = plan_revisions(&d, &old, []);
    let created = plan.create.expect("a new revision");
    assert_eq!(created.revision, 3);
    assert_eq!(plan.revision, 3);
    assert_eq!(created.metadata.name, format!("agent-{}", plan.hash));
    assert_eq!(revision_template(&created).as_ref(), Some(&d.spec.template));
    assert_eq!(
        created.metadata.labels.get(CONTROLLER_REVISION_HASH_LABEL),
        Some(&plan.hash)
    );
    assert!(plan.update.is_empty() && plan.delete.is_empty());
}

#[test]
fn an_old_template_reuses_its_revision_renumbered() {
    let d = ds("busybox:1");
    let old = [revision(&d, "busybox:1", 1), revision(&d, "busybox:2", 2)];
    let plan = plan_revisions(&d, &old, []);
    assert!(plan.create.is_none());
    assert_eq!(plan.current, old[0].metadata.name);
    assert_eq!(plan.update.len(), 1);
    assert_eq!(plan.update[0].revision, 3);
    // The pods are labelled with the renumbered revision, now.
    assert_eq!(plan.revision, 3);
    // Already the newest: nothing to write.
    let again = plan_revisions(&d, [&plan.update[0], &old[1]], []);
    assert!(again.create.is_none() && again.update.is_empty());
    assert_eq!(again.revision, 3);
}

#[test]
fn history_is_pruned_except_revisions_in_use() {
    let mut d = ds("busybox:9");
    d.spec.revision_history_limit = Some(2);
    let old: Vec<_> = (1..=5)
        .map(|i| revision(&d, &format!("busybox:{i}"), i))
        .collect();
    let in_use = old[0].metadata.labels[CONTROLLER_REVISION_HASH_LABEL].clone();
    let live = pod("p", "n1", &in_use, true, 0);
    let plan = plan_revisions(&d, &old, [&live]);
    let pruned: Vec<i64> = plan.delete.iter().map(|r| r.revision).collect();
    assert_eq!(pruned, [2, 3, 4], "revision 1 is used by a pod");
    let plan = plan_revisions(&d, &old, []);
    let pruned: Vec<i64> = plan.delete.iter().map(|r| r.revision).collect();
    assert_eq!(pruned, [1, 2, 3]);
}

#[test]
fn a_colliding_name_bumps_the_collision_count() {
    let d = ds("busybox:1");
    let hash = template_hash(&d.spec.template, None);
    let mut squatter = revision(&d, "busybox:2", 1);
    squatter.metadata.name = revision_name(&d, &hash);
    let plan = plan_revisions(&d, [&squatter], []);
    assert_eq!(plan.collision_count, Some(1));
    assert_eq!(plan.hash, template_hash(&d.spec.template, Some(1)));
}

#[test]
fn without_surge_at_most_max_unavailable_old_pods_go() {
    let d = with_rolling(ds("new"), "34%".into(), IntOrString::Int(0));
    let nodes = [node("n1", true), node("n2", true), node("n3", true)];
    let pods = [
        pod("a", "n1", "old", true, 0),
        pod("b", "n2", "old", true, 0),
        pod("c", "n3", "old", true, 0),
    ];
    let p = plan(
        &PlanInput::new(&d, &nodes, &pods, at(10)).with_revision_hash("new"),
        &mut StdRng::seed_from_u64(1),
    );
    let gone: Vec<_> = p.delete.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(gone, ["a", "b"], "34% of 3 rounds up to 2");
    assert!(p.delete.iter().all(|x| x.reason == DeletionReason::Rollout));
    assert!(p.create.is_empty());
    assert_eq!(p.status.updated_number_scheduled, 0);
}

#[test]
fn unavailable_old_pods_are_replaced_at_once_and_new_ones_hold_the_rollout() {
    let d = with_rolling(ds("new"), IntOrString::Int(1), IntOrString::Int(0));
    let nodes = [node("n1", true), node("n2", true), node("n3", true)];
    let pods = [
        pod("a", "n1", "new", false, 0),
        pod("b", "n2", "old", false, 0),
        pod("c", "n3", "old", true, 0),
    ];
    let p = plan(
        &PlanInput::new(&d, &nodes, &pods, at(10)).with_revision_hash("new"),
        &mut StdRng::seed_from_u64(1),
    );
    let gone: Vec<_> = p.delete.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(gone, ["b"], "the unready new pod uses the budget");
}

#[test]
fn nodes_that_are_not_ready_neither_count_nor_block() {
    let d = with_rolling(ds("new"), IntOrString::Int(1), IntOrString::Int(0));
    let nodes = [node("n1", false), node("n2", true), node("n3", false)];
    let pods = [
        pod("a", "n1", "old", false, 0),
        pod("b", "n2", "old", true, 0),
        pod("c", "n3", "new", false, 0),
    ];
    let p = plan(
        &PlanInput::new(&d, &nodes, &pods, at(10)).with_revision_hash("new"),
        &mut StdRng::seed_from_u64(1),
    );
    let gone: Vec<_> = p.delete.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(gone, ["b"]);
    let explained = explain(&d, &nodes, &pods, Some("new"), at(10));
    let away: Vec<&str> = explained.rollout.as_ref().unwrap().nodes_away().collect();
    assert_eq!(away, ["n1"]);
}

#[test]
fn auto_rollback_is_due_when_enough_ready_nodes_fail_for_long_enough() {
    use drover_api::annotations::{AUTO_ROLLBACK_AFTER, AUTO_ROLLBACK_NODES};
    let mut d = with_rolling(ds("new"), IntOrString::Int(2), IntOrString::Int(0));
    let nodes = [node("n1", true), node("n2", true), node("n3", false)];
    let pods = [
        pod("a", "n1", "new", false, 0),
        pod("b", "n2", "new", false, 5),
        // A dead node's new pod is not the revision's fault.
        pod("c", "n3", "new", false, 0),
    ];
    let run = |d: &DaemonSet, now: i64| {
        plan(
            &PlanInput::new(d, &nodes, &pods, at(now)).with_revision_hash("new"),
            &mut StdRng::seed_from_u64(1),
        )
    };
    // Off without the annotation.
    assert_eq!(run(&d, 100).rollback, None);

    d.metadata
        .annotations
        .insert(AUTO_ROLLBACK_AFTER.into(), "30s".into());
    d.metadata
        .annotations
        .insert(AUTO_ROLLBACK_NODES.into(), "2".into());
    // At 31 s only n1's pod is past the deadline: not yet, look again when
    // n2's is (35 s).
    let p = run(&d, 31);
    assert_eq!(p.rollback, None);
    assert_eq!(p.requeue_at, Some(at(35)));
    let p = run(&d, 35);
    let due = p.rollback.expect("due");
    assert_eq!(due.failed_nodes, ["n1", "n2"]);
    assert_eq!(due.policy.after, Duration::from_secs(30));

    // A new pod that became available does not count.
    let mut pods2 = pods.clone();
    set_ready(&mut pods2[1], true, 6);
    let p = plan(
        &PlanInput::new(&d, &nodes, &pods2, at(100)).with_revision_hash("new"),
        &mut StdRng::seed_from_u64(1),
    );
    assert_eq!(p.rollback, None);
}

#[test]
fn rollback_goes_to_the_newest_older_revision_and_never_back_and_forth() {
    use drover_api::annotations::ROLLED_BACK_FROM;
    let mut d = ds("v3");
    let r1 = revision(&d, "v1", 1);
    let r2 = revision(&d, "v2", 2);
    let r3 = revision(&d, "v3", 3);
    let h2 = revision_hash(&d, &r2);
    let h3 = revision_hash(&d, &r3);
    let all = [r1.clone(), r2.clone(), r3.clone()];
    let target = rollback_target(&d, &all, &h3).expect("a target");
    assert_eq!(target.metadata.name, r2.metadata.name);
    // Rolled back from v2 before: not to v2 again.
    d.metadata
        .annotations
        .insert(ROLLED_BACK_FROM.into(), h2.clone());
    assert_eq!(rollback_target(&d, &all, &h3), None);
    // Nothing older: nothing to do.
    assert_eq!(rollback_target(&d, [&r3], &h3), None);
    // Other DaemonSets' revisions are not candidates.
    let mut foreign = r2.clone();
    foreign.metadata.owner_references.clear();
    d.metadata.annotations.clear();
    assert_eq!(rollback_target(&d, [&foreign, &r3], &h3), None);
}

#[test]
fn on_delete_replaces_nothing() {
    let mut d = ds("new");
    d.spec.update_strategy.r#type = Some(DaemonSetUpdateStrategyType::OnDelete);
    let nodes = [node("n1", true), node("n2", true)];
    let pods = [pod("a", "n1", "old", true, 0)];
    let p = plan(
        &PlanInput::new(&d, &nodes, &pods, at(10)).with_revision_hash("new"),
        &mut StdRng::seed_from_u64(1),
    );
    assert!(p.delete.is_empty());
    assert_eq!(p.create.len(), 1, "a node without a pod gets the new one");
    assert_eq!(
        p.create[0].pod.metadata.labels[CONTROLLER_REVISION_HASH_LABEL],
        "new"
    );
}

#[test]
fn min_ready_seconds_defines_available() {
    let mut d = with_rolling(ds("new"), IntOrString::Int(1), IntOrString::Int(0));
    d.spec.min_ready_seconds = Some(30);
    let nodes = [node("n1", true), node("n2", true)];
    let pods = [
        pod("a", "n1", "new", true, 0),
        pod("b", "n2", "old", true, -100),
    ];
    let run = |now| {
        plan(
            &PlanInput::new(&d, &nodes, &pods, now).with_revision_hash("new"),
            &mut StdRng::seed_from_u64(1),
        )
    };
    assert!(
        run(at(10)).delete.is_empty(),
        "a is ready, not yet available"
    );
    assert_eq!(run(at(31)).delete.len(), 1);
}

#[test]
fn surge_starts_new_pods_beside_old_ones_then_removes_the_old() {
    let d = with_rolling(ds("new"), IntOrString::Int(0), IntOrString::Int(1));
    let nodes = [node("n1", true), node("n2", true)];
    let mut pods = vec![
        pod("a", "n1", "old", true, 0),
        pod("b", "n2", "old", true, 0),
    ];
    let p = plan(
        &PlanInput::new(&d, &nodes, &pods, at(10)).with_revision_hash("new"),
        &mut StdRng::seed_from_u64(1),
    );
    assert!(p.delete.is_empty());
    assert_eq!(p.create.len(), 1, "maxSurge 1");
    pods.push(pod("a2", "n1", "new", false, 11));
    let p = plan(
        &PlanInput::new(&d, &nodes, &pods, at(12)).with_revision_hash("new"),
        &mut StdRng::seed_from_u64(1),
    );
    assert!(p.delete.is_empty() && p.create.is_empty(), "waiting for a2");
    set_ready(&mut pods[2], true, 12);
    let p = plan(
        &PlanInput::new(&d, &nodes, &pods, at(13)).with_revision_hash("new"),
        &mut StdRng::seed_from_u64(1),
    );
    let gone: Vec<_> = p.delete.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(gone, ["a"]);
}

/// A small cluster driven by the planner: every plan applied at once,
/// new pods becoming ready when the test says.
struct World {
    ds: DaemonSet,
    nodes: Vec<Node>,
    pods: Vec<Pod>,
    clock: i64,
    next: usize,
}

impl World {
    fn step(&mut self, rng: &mut StdRng) {
        self.clock += 1;
        let p = plan(
            &PlanInput::new(&self.ds, &self.nodes, &self.pods, at(self.clock))
                .with_revision_hash("new"),
            rng,
        );
        let gone: HashSet<String> = p.delete.iter().map(|d| d.name.clone()).collect();
        self.pods.retain(|p| !gone.contains(&p.metadata.name));
        for c in p.create {
            self.next += 1;
            let mut new = c.pod;
            new.metadata.name = format!("p{}", self.next);
            new.metadata.creation_timestamp = Some(at(self.clock).to_rfc3339());
            new.status.phase = Some(PodPhase::Running);
            set_ready(&mut new, false, self.clock);
            self.pods.push(new);
        }
    }

    /// Ready nodes without an available pod (no `minReadySeconds` here:
    /// available is the Ready condition `True`, read by hand rather than
    /// with `pods::is_available`, which this checks; the wider property
    /// with its own oracle is `tests/rollout_properties.rs`).
    fn unavailable(&self) -> usize {
        let ready_condition = |p: &Pod| {
            p.status
                .conditions
                .iter()
                .any(|c| c.r#type == "Ready" && c.status == Some(drover_api::ConditionStatus::True))
        };
        self.nodes
            .iter()
            .filter(|n| n.is_ready())
            .filter(|n| {
                !self
                    .pods
                    .iter()
                    .any(|p| p.spec.node_name == n.metadata.name && ready_condition(p))
            })
            .count()
    }

    fn done(&self) -> bool {
        self.nodes.iter().filter(|n| n.is_ready()).all(|n| {
            self.pods.iter().any(|p| {
                p.spec.node_name == n.metadata.name && is_updated(p, "new") && p.is_ready()
            })
        })
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// At no step do more than maxUnavailable Ready nodes lack an available
    /// pod; with surge no node has more than two pods or two new ones; the
    /// rollout finishes on every Ready node.
    #[test]
    fn rollouts_keep_their_budget(
        n in 1usize..12,
        not_ready in proptest::collection::vec(any::<bool>(), 12),
        budget in 1i32..4,
        surge in any::<bool>(),
        seed in any::<u64>(),
        ready_order in proptest::collection::vec(any::<prop::sample::Index>(), 64),
    ) {
        let d = if surge {
            with_rolling(ds("new"), IntOrString::Int(0), IntOrString::Int(budget))
        } else {
            with_rolling(ds("new"), IntOrString::Int(budget), IntOrString::Int(0))
        };
        let max_unavailable = if surge { 0 } else { budget as usize };
        let nodes: Vec<Node> = (0..n).map(|i| node(&format!("n{i}"), !not_ready[i] || i == 0)).collect();
        let pods: Vec<Pod> = (0..n).map(|i| pod(&format!("old{i}"), &format!("n{i}"), "old", nodes[i].is_ready(), -10)).collect();
        let mut w = World { ds: d, nodes, pods, clock: 0, next: 0 };
        let mut rng = StdRng::seed_from_u64(seed);
        for round in 0..200 {
            w.step(&mut rng);
            prop_assert!(w.unavailable() <= max_unavailable, "round {round}: {} > {max_unavailable}", w.unavailable());
            for node in &w.nodes {
                let here: Vec<&Pod> = w.pods.iter().filter(|p| p.spec.node_name == node.metadata.name).collect();
                prop_assert!(here.len() <= 2);
                prop_assert!(here.iter().filter(|p| is_updated(p, "new")).count() <= 1);
            }
            if w.done() {
                break;
            }
            // Some unready new pods become ready.
            let unready: Vec<usize> = (0..w.pods.len()).filter(|&i| !w.pods[i].is_ready()).collect();
            if !unready.is_empty() {
                let i = unready[ready_order[round % ready_order.len()].index(unready.len())];
                let clock = w.clock;
                set_ready(&mut w.pods[i], true, clock - 1);
            }
        }
        prop_assert!(w.done(), "the rollout finishes on every Ready node");
        // Not Ready nodes kept their old pod.
        for node in w.nodes.iter().filter(|n| !n.is_ready()) {
            prop_assert!(w.pods.iter().any(|p| p.spec.node_name == node.metadata.name && !is_updated(p, "new")));
        }
    }
}

#[test]
fn only_a_non_zero_max_surge_allows_surge() {
    // Kubernetes' AllowsSurge: maxSurge scaled against one node is > 0.
    let d = ds("busybox:1");
    assert!(!allows_surge(&d), "no rolling parameters: maxSurge 0");
    let zero = with_rolling(d.clone(), IntOrString::Int(1), IntOrString::Int(0));
    assert!(!allows_surge(&zero));
    let zero_pct = with_rolling(
        d.clone(),
        IntOrString::Int(1),
        IntOrString::String("0%".into()),
    );
    assert!(!allows_surge(&zero_pct));
    let one = with_rolling(d.clone(), IntOrString::Int(0), IntOrString::Int(1));
    assert!(allows_surge(&one));
    // A percentage rounds up: 10 % of one node is one pod.
    let pct = with_rolling(d, IntOrString::Int(0), IntOrString::String("10%".into()));
    assert!(allows_surge(&pct));
}

#[test]
fn a_revision_without_its_hash_label_takes_the_hash_from_its_name() {
    let d = ds("busybox:1");
    let mut r = revision(&d, "busybox:2", 1);
    let hash = r.metadata.labels[CONTROLLER_REVISION_HASH_LABEL].clone();
    assert_eq!(r.metadata.name, format!("{}-{hash}", d.metadata.name));
    assert_eq!(revision_hash(&d, &r), hash);
    r.metadata.labels.remove(CONTROLLER_REVISION_HASH_LABEL);
    assert_eq!(revision_hash(&d, &r), hash);
    // A name that is not DS-HASH is taken whole.
    r.metadata.name = "other".into();
    assert_eq!(revision_hash(&d, &r), "other");
}

#[test]
fn revision_data_is_what_kubernetes_daemon_controller_writes() {
    let d = ds("busybox:1");
    let data = revision_data(&d.spec.template);
    // getPatch: {"spec":{"template":{...,"$patch":"replace"}}} and nothing else.
    let mut template = serde_json::to_value(&d.spec.template).unwrap();
    template["metadata"]["creationTimestamp"] = serde_json::Value::Null;
    assert!(template["spec"]["containers"][0].get("resources").is_none());
    template["spec"]["containers"][0]["resources"] = serde_json::json!({});
    template["$patch"] = "replace".into();
    assert_eq!(data, serde_json::json!({"spec": {"template": template}}));
    let spec = data.as_object().unwrap();
    assert_eq!(spec.len(), 1, "only spec: {data}");
    assert_eq!(
        spec["spec"].as_object().unwrap().len(),
        1,
        "only spec.template: {data}"
    );
    // Read back as the same template, directive and null time dropped.
    let rev = new_revision(&d, &template_hash(&d.spec.template, None), 1);
    assert_eq!(rev.data, data);
    assert_eq!(revision_template(&rev).as_ref(), Some(&d.spec.template));
    assert!(revision_template(&rev).unwrap().extra.is_empty());
}

#[test]
fn revisions_in_the_old_form_still_match_and_are_rewritten() {
    let d = ds("busybox:1");
    let old_form = |image: &str, n: i64| {
        let mut r = revision(&d, image, n);
        let mut t = d.spec.template.clone();
        t.spec.containers[0].image = image.into();
        r.data = serde_json::json!({"spec": {"template": t}});
        r
    };
    let old = [old_form("busybox:2", 1), old_form("busybox:1", 2)];
    // The bare template of before is read as the same template.
    assert_eq!(revision_template(&old[1]).as_ref(), Some(&d.spec.template));
    let plan = plan_revisions(&d, &old, []);
    assert!(
        plan.create.is_none(),
        "the old-form revision of the template matches"
    );
    assert_eq!(plan.current, old[1].metadata.name);
    assert_eq!(plan.hash, revision_hash(&d, &old[1]));
    assert_eq!(plan.revision, 2);
    // Both rewritten in Kubernetes' form, same names, numbers and templates.
    let mut update = plan.update.clone();
    update.sort_by_key(|r| r.revision);
    assert_eq!(update.len(), 2, "{update:?}");
    for (u, o) in update.iter().zip(&old) {
        assert_eq!(u.metadata.name, o.metadata.name);
        assert_eq!(u.revision, o.revision);
        assert_eq!(revision_template(u), revision_template(o));
        assert_eq!(u.data["spec"]["template"]["$patch"], "replace");
    }
    // Once rewritten, nothing more to write.
    let again = plan_revisions(&d, &update, []);
    assert!(again.create.is_none() && again.update.is_empty() && again.delete.is_empty());
    // A renumbered old-form revision is rewritten once, with its new number.
    let d1 = ds("busybox:2");
    let plan = plan_revisions(&d1, &old, []);
    let current: Vec<_> = plan
        .update
        .iter()
        .filter(|u| u.metadata.name == old[0].metadata.name)
        .collect();
    assert_eq!(current.len(), 1);
    assert_eq!(current[0].revision, 3);
    assert_eq!(current[0].data["spec"]["template"]["$patch"], "replace");
}

#[test]
fn a_revision_with_another_directive_holds_no_template() {
    let d = ds("busybox:1");
    let mut r = revision(&d, "busybox:1", 1);
    r.data["spec"]["template"]["$patch"] = "delete".into();
    assert_eq!(revision_template(&r), None);
}

#[test]
fn revision_data_keeps_resources_and_fills_them_in_every_container() {
    let mut d = ds("busybox:1");
    d.spec.template.spec.containers[0]
        .resources
        .limits
        .insert("cpu".into(), "100m".into());
    d.spec.template.spec.containers.push(drover_api::Container {
        name: "second".into(),
        image: "busybox:1".into(),
        ..Default::default()
    });
    let data = revision_data(&d.spec.template);
    let spec = &data["spec"]["template"]["spec"];
    assert_eq!(
        spec["containers"][0]["resources"],
        serde_json::json!({"limits": {"cpu": "100m"}})
    );
    assert_eq!(spec["containers"][1]["resources"], serde_json::json!({}));
    let rev = new_revision(&d, "h", 1);
    assert_eq!(revision_template(&rev).as_ref(), Some(&d.spec.template));
}
