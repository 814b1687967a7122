//! TEMPORARY: the planner before the split, to check the new one gives the same plans.
#![allow(clippy::all, missing_docs, dead_code)]
use super::*;
use drover_api::PodPhase;
use pods::{oldest_first, Claim};
use std::collections::HashMap;
use std::time::Duration;
const AVAILABILITY_SLACK: Duration = Duration::from_millis(1);
fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

pub fn plan_old<R: RngCore + ?Sized>(input: &PlanInput<'_>, rng: &mut R) -> DaemonSetPlan {
    let ds = input.daemon_set;
    let now = input.now;
    let mut plan = DaemonSetPlan {
        status: ds.status.clone(),
        backoff: input.backoff.clone(),
        ..DaemonSetPlan::default()
    };

    if ds.metadata.deletion_timestamp.is_some() {
        plan.delete = delete_daemon_set_pods(ds, input.pods.iter().copied(), now, rng);
        return plan;
    }
    let selector = match selector_of(ds) {
        Ok(selector) => selector,
        Err((why, message)) => {
            plan.events.push(events::daemon_set_event(
                ds,
                event_type::WARNING,
                why,
                message,
                now,
                rng,
            ));
            return plan;
        }
    };

    // Claim: the DaemonSet's pods by node name, adopting and releasing.
    let namespace = namespace_of(&ds.metadata);
    let matches = |pod: &Pod| selector.matches(&pod.metadata.labels);
    let mut taken_names: HashSet<&str> = HashSet::new();
    let mut by_node: HashMap<&str, Vec<&Pod>> = HashMap::new();
    for &pod in &input.pods {
        if namespace_of(&pod.metadata) != namespace {
            continue;
        }
        taken_names.insert(pod.metadata.name.as_str());
        match pods::claim(ds, matches, pod) {
            Claim::Owned => {}
            Claim::Adopt => plan.adopt.push(pods::adopted(ds, pod)),
            Claim::Release => {
                plan.release.push(pods::released(ds, pod));
                continue;
            }
            Claim::Ignore => continue,
        }
        by_node
            .entry(pod.spec.node_name.as_str())
            .or_default()
            .push(pod);
    }
    let mut new_names: HashSet<String> = HashSet::new();

    let eligibility = Eligibility::new(ds);
    let generation = ds.metadata.generation;
    let min_ready =
        Duration::from_secs(u64::try_from(ds.spec.min_ready_seconds.unwrap_or(0)).unwrap_or(0));
    let prefix = pods::generate_name_prefix(ds);
    let mut seen_nodes: HashSet<&str> = HashSet::new();
    let (mut desired, mut current, mut misscheduled) = (0, 0, 0);
    let (mut ready, mut available, mut updated) = (0, 0, 0);
    let mut slots: Vec<rollout::NodeSlot<'_>> = Vec::new();
    let surge = input.revision_hash.filter(|_| rollout::allows_surge(ds));

    for &node in &input.nodes {
        let node_name = node.metadata.name.as_str();
        if !seen_nodes.insert(node_name) {
            continue;
        }
        let verdict = eligibility.evaluate(node);
        let mut on_node = by_node.remove(node_name).unwrap_or_default();
        on_node.sort_by(|a, b| oldest_first(a, b));
        if verdict.should_run || !on_node.is_empty() {
            slots.push(rollout::NodeSlot {
                node: node_name,
                should_run: verdict.should_run,
                ready: node.is_ready(),
                pods: on_node.clone(),
            });
        }

        // Status, from the pods as they are.
        if verdict.should_run {
            desired += 1;
            if let Some(first) = on_node.first() {
                current += 1;
                if let Some(since) = pods::ready_since(first) {
                    ready += 1;
                    if pods::is_available(first, min_ready, now) {
                        available += 1;
                    } else if let Some(since) = since {
                        plan.requeue(since + min_ready + AVAILABILITY_SLACK);
                    }
                }
                let is_updated = input.revision_hash.is_none_or(|hash| {
                    first
                        .metadata
                        .labels
                        .get(pods::CONTROLLER_REVISION_HASH_LABEL)
                        .is_some_and(|h| h == hash)
                });
                if is_updated {
                    updated += 1;
                }
            }
        } else if !on_node.is_empty() {
            misscheduled += 1;
        }

        // Placement.
        if verdict.should_run && on_node.is_empty() {
            let name = fresh_name(&prefix, &taken_names, &mut new_names, rng);
            let pod = pods::new_daemon_pod(
                ds,
                eligibility.pod_spec(),
                node_name,
                name,
                input.revision_hash,
            );
            let event = events::created(ds, &pod.metadata.name, now, rng);
            plan.create.push(PodCreation { pod, event });
        } else if verdict.should_continue_running {
            let mut running: Vec<&Pod> = Vec::new();
            for pod in on_node.iter().copied().filter(|p| !is_terminating(p)) {
                if pods::phase_is(pod, &PodPhase::Failed) {
                    if let Some(until) = plan.backoff.in_backoff(node_name, generation, now) {
                        plan.requeue(until);
                        continue;
                    }
                    plan.backoff.next(node_name, generation, now);
                    plan.events.push(events::daemon_set_event(
                        ds,
                        event_type::WARNING,
                        reason::FAILED_DAEMON_POD,
                        format!(
                            "Found failed daemon pod {namespace}/{} on node {node_name}, will try to kill it",
                            pod.metadata.name
                        ),
                        now,
                        rng,
                    ));
                    plan.delete
                        .push(deletion(ds, pod, DeletionReason::Failed, now, rng));
                } else if pods::phase_is(pod, &PodPhase::Succeeded) {
                    plan.events.push(events::daemon_set_event(
                        ds,
                        event_type::NORMAL,
                        reason::SUCCEEDED_DAEMON_POD,
                        format!(
                            "Found succeeded daemon pod {namespace}/{} on node {node_name}, will try to delete it",
                            pod.metadata.name
                        ),
                        now,
                        rng,
                    ));
                    plan.delete
                        .push(deletion(ds, pod, DeletionReason::Succeeded, now, rng));
                } else {
                    running.push(pod);
                }
            }
            if let Some(hash) = surge.filter(|_| running.len() > 1) {
                for pod in rollout::surge_extra_pods(ds, &running, hash, now) {
                    plan.delete
                        .push(deletion(ds, pod, DeletionReason::Rollout, now, rng));
                }
            } else if let Some((kept, extra)) = running.split_first() {
                for pod in extra {
                    let reason = DeletionReason::Duplicate {
                        kept: kept.metadata.name.clone(),
                    };
                    plan.delete.push(deletion(ds, pod, reason, now, rng));
                }
            }
        } else {
            for pod in on_node.iter().filter(|p| !is_terminating(p)) {
                let reason = DeletionReason::NotEligible(verdict.reasons.clone());
                plan.delete.push(deletion(ds, pod, reason, now, rng));
            }
        }

        if !verdict.should_run {
            plan.ineligible_nodes.push(IneligibleNode {
                node: node_name.to_owned(),
                eligibility: verdict,
            });
        }
    }

    // Pods on nodes that do not exist, or on none.
    let mut leftover: Vec<&Pod> = by_node.into_values().flatten().collect();
    leftover.sort_by(|a, b| {
        a.spec
            .node_name
            .cmp(&b.spec.node_name)
            .then_with(|| oldest_first(a, b))
    });
    for pod in leftover.into_iter().filter(|p| !is_terminating(p)) {
        let reason = if pod.spec.node_name.is_empty() {
            DeletionReason::Unbound
        } else {
            DeletionReason::NodeGone
        };
        plan.delete.push(deletion(ds, pod, reason, now, rng));
    }

    // A rolling update step, once placement has nothing to do (Kubernetes
    // runs `rollingUpdate` only when the manage loop's expectations are
    // met).
    if let Some(hash) = input.revision_hash {
        let step = rollout::rolling_update(ds, &slots, hash, now);
        plan.rollout_waiting = step.waiting.iter().map(|n| (*n).to_owned()).collect();
        match rollout::auto_rollback_due(ds, &slots, hash, now) {
            Ok(due) => plan.rollback = Some(due),
            Err(Some(at)) => plan.requeue(at),
            Err(None) => {}
        }
        if plan.create.is_empty() && plan.delete.is_empty() {
            for pod in step.delete {
                plan.delete
                    .push(deletion(ds, pod, DeletionReason::Rollout, now, rng));
            }
            for node_name in step.create_on {
                let name = fresh_name(&prefix, &taken_names, &mut new_names, rng);
                let pod =
                    pods::new_daemon_pod(ds, eligibility.pod_spec(), node_name, name, Some(hash));
                let event = events::created(ds, &pod.metadata.name, now, rng);
                plan.create.push(PodCreation { pod, event });
            }
        }
    }

    plan.backoff
        .gc(generation, now, |node| seen_nodes.contains(node));

    let mut status = ds.status.clone();
    status.desired_number_scheduled = count(desired);
    status.current_number_scheduled = count(current);
    status.number_misscheduled = count(misscheduled);
    status.number_ready = count(ready);
    status.updated_number_scheduled = count(updated);
    status.number_available = count(available);
    status.number_unavailable = count(desired.saturating_sub(available));
    status.observed_generation = generation.or(status.observed_generation);
    plan.status_changed = status != ds.status;
    plan.status = status;
    plan
}

use drover_api::{
    ConditionStatus, DaemonSetUpdateStrategyType, IntOrString, LabelSelector, NodeCondition,
    PodCondition, RollingUpdateDaemonSet,
};
use rand::{rngs::StdRng, Rng, SeedableRng};

fn at(s: i64) -> Timestamp {
    Timestamp::from_unix_seconds(1_700_000_000 + s)
}
const TAINTS: [&str; 6] = [
    "x:NoSchedule",
    "x:NoExecute",
    "node.kubernetes.io/unreachable:NoSchedule",
    "node.kubernetes.io/unreachable:NoExecute",
    "node.kubernetes.io/unschedulable:NoSchedule",
    "y:PreferNoSchedule",
];

fn scenario(
    r: &mut StdRng,
) -> (
    DaemonSet,
    Vec<Node>,
    Vec<Pod>,
    Option<&'static str>,
    Timestamp,
) {
    let mut ds = DaemonSet::default();
    ds.metadata.name = "agent".into();
    ds.metadata.namespace = "default".into();
    ds.metadata.uid = "ds-uid".into();
    ds.metadata.generation = Some(r.random_range(1..3));
    let sel: drover_api::Labels = [("app".to_string(), "agent".to_string())].into();
    if r.random_ratio(1, 30) {
        ds.spec.selector = None
    } else {
        ds.spec.selector = Some(LabelSelector {
            match_labels: sel.clone(),
            ..Default::default()
        });
    }
    ds.spec.template.metadata.labels = sel;
    if r.random_bool(0.3) {
        ds.spec.template.spec.node_selector = [("disk".to_string(), "ssd".to_string())].into();
    }
    if r.random_bool(0.3) {
        ds.spec.min_ready_seconds = Some(r.random_range(0..20));
    }
    if r.random_ratio(1, 40) {
        ds.metadata.deletion_timestamp = Some(at(0).to_rfc3339());
    }
    if r.random_bool(0.2) {
        ds.spec.update_strategy.r#type = Some(DaemonSetUpdateStrategyType::OnDelete);
    } else if r.random_bool(0.7) {
        ds.spec.update_strategy.rolling_update = Some(RollingUpdateDaemonSet {
            max_unavailable: Some(IntOrString::Int(r.random_range(0..3))),
            max_surge: Some(IntOrString::Int(r.random_range(0..3))),
            ..Default::default()
        });
    }
    if r.random_bool(0.2) {
        ds.status.desired_number_scheduled = r.random_range(0..4);
    }
    let n = r.random_range(0..6);
    let mut nodes = Vec::new();
    for i in 0..n {
        let mut node = Node::default();
        node.metadata.name = format!("n{i}");
        if r.random_bool(0.6) {
            node.metadata.labels.insert("disk".into(), "ssd".into());
        }
        for t in TAINTS {
            if r.random_bool(0.1) {
                node.spec.taints.push(t.parse().unwrap());
            }
        }
        if r.random_bool(0.9) {
            node.status.conditions.push(NodeCondition {
                r#type: "Ready".into(),
                status: Some(if r.random_bool(0.8) {
                    ConditionStatus::True
                } else {
                    ConditionStatus::Unknown
                }),
                ..Default::default()
            });
        }
        nodes.push(node);
        if r.random_ratio(1, 20) {
            nodes.push(nodes[nodes.len() - 1].clone());
        }
    }
    let hashes = ["new", "old", "older"];
    let np = r.random_range(0..10);
    let mut pods = Vec::new();
    for i in 0..np {
        let mut pod = Pod::default();
        pod.metadata.name = if r.random_ratio(1, 10) {
            format!("agent-{}", "bbbbb")
        } else {
            format!("agent-p{i}")
        };
        pod.metadata.namespace = if r.random_ratio(1, 15) {
            "other".into()
        } else {
            "default".into()
        };
        pod.metadata.uid = format!("uid-{i}");
        pod.metadata.resource_version = format!("{i}");
        if r.random_bool(0.9) {
            pod.metadata.labels.insert("app".into(), "agent".into());
        }
        if r.random_bool(0.8) {
            pod.metadata.labels.insert(
                pods::CONTROLLER_REVISION_HASH_LABEL.into(),
                hashes[r.random_range(0..3)].into(),
            );
        }
        if r.random_bool(0.9) {
            pod.metadata.creation_timestamp = Some(at(r.random_range(-100..10)).to_rfc3339());
        }
        match r.random_range(0..10) {
            0 => {}
            1 => {
                let mut o = DaemonSet::default();
                o.metadata.uid = "other".into();
                pod.metadata.owner_references = vec![pods::controller_ref(&o)];
            }
            _ => pod.metadata.owner_references = vec![pods::controller_ref(&ds)],
        }
        pod.spec.node_name = match r.random_range(0..12) {
            0 => String::new(),
            1 => "n9".into(),
            _ => format!("n{}", r.random_range(0..6)),
        };
        pod.status.phase = Some(match r.random_range(0..10) {
            0 => PodPhase::Failed,
            1 => PodPhase::Succeeded,
            2 => PodPhase::Pending,
            _ => PodPhase::Running,
        });
        if r.random_bool(0.7) {
            pod.status.conditions.push(PodCondition {
                r#type: "Ready".into(),
                status: Some(if r.random_bool(0.8) {
                    ConditionStatus::True
                } else {
                    ConditionStatus::False
                }),
                last_transition_time: if r.random_bool(0.9) {
                    Some(at(r.random_range(-30..10)).to_rfc3339())
                } else {
                    None
                },
                ..Default::default()
            });
        }
        if r.random_ratio(1, 8) {
            pod.metadata.deletion_timestamp = Some(at(0).to_rfc3339());
        }
        if r.random_ratio(1, 30) {
            pod.metadata
                .annotations
                .insert(drover_api::pod_annotation::CONFIG_MIRROR.into(), "x".into());
        }
        pods.push(pod);
    }
    let hash = if r.random_bool(0.7) {
        Some("new")
    } else {
        None
    };
    (ds, nodes, pods, hash, at(r.random_range(0..20)))
}

#[test]
fn the_split_planner_plans_as_before() {
    let mut r = StdRng::seed_from_u64(1);
    let mut nonempty = 0;
    for case in 0..40_000u64 {
        let (ds, nodes, pods, hash, now) = scenario(&mut r);
        let mut backoff = FailedPodBackoff::new();
        for round in 0..2 {
            let mut input =
                PlanInput::new(&ds, &nodes, &pods, now + Duration::from_millis(700 * round))
                    .with_backoff(&backoff);
            if let Some(h) = hash {
                input = input.with_revision_hash(h);
            }
            let old = plan_old(&input, &mut StdRng::seed_from_u64(case));
            let new = plan(&input, &mut StdRng::seed_from_u64(case));
            assert_eq!(old, new, "case {case} round {round}");
            if new.changes_pods() {
                nonempty += 1;
            }
            backoff = new.backoff;
        }
    }
    assert!(nonempty > 10_000, "{nonempty}");
}
