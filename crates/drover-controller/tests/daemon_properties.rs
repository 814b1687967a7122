//! Property tests of the DaemonSet planner against an independent oracle
//! (`oracle::daemon`: Kubernetes' `NodeShouldRunDaemonPod` from naive
//! matchers of its own, `oracle::affinity` and `oracle::tolerations`, never
//! drover-api's): random nodes (labels incl. integers for Gt/Lt, taints
//! with and without values incl. node problems and cordon), random
//! DaemonSets (nodeSelector, required affinity with random terms of In,
//! NotIn, Exists, DoesNotExist, Gt, Lt and matchFields metadata.name,
//! random tolerations of both operators, nodeName, hostNetwork) and random
//! pods (owned, orphan, foreign, other namespace, unmatched labels, failed,
//! succeeded, being deleted, duplicates, on missing nodes or none).

mod oracle;
mod seed;
mod shadow;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use drover_api::Quantity;
use drover_api::{
    Affinity, ConditionStatus, Container, DaemonSet, LabelSelector, Labels, Node, NodeAffinity,
    NodeSelector, NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm, OwnerReference,
    Pod, PodCondition, PodPhase, TaintEffect, Toleration, TolerationOperator,
};
use drover_controller::daemon::{
    self, DaemonSetPlan, DeletionReason, FailedPodBackoff, NodeUsage, PlanInput,
};
use drover_controller::Timestamp;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;
use shadow::Shadow;

const NODE_NAMES: [&str; 8] = ["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"];
const TAINTS: [&str; 14] = [
    "dedicated=gpu:NoSchedule",
    "dedicated=cpu:NoSchedule",
    "dedicated:NoSchedule",
    "node.kubernetes.io/disk-pressure:NoSchedule",
    "dedicated=gpu:NoExecute",
    "maint:NoExecute",
    "maint:PreferNoSchedule",
    "node.kubernetes.io/unreachable:NoSchedule",
    "node.kubernetes.io/unreachable:NoExecute",
    "node.kubernetes.io/unschedulable:NoSchedule",
    "node.kubernetes.io/not-ready:NoExecute",
    "node.kubernetes.io/network-unavailable:NoSchedule",
    "node.kubernetes.io/memory-pressure:NoSchedule",
    "node.kubernetes.io/pid-pressure:NoExecute",
];
const DS_UID: &str = "ds-uid";

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_unix_seconds(1_700_000_000 + seconds)
}

fn node_strategy(name: &'static str) -> impl Strategy<Value = Node> {
    (
        prop::option::of(prop::sample::select(vec!["a", "b"])),
        prop::option::of(prop::sample::select(vec!["ssd", "hdd"])),
        prop::option::of(prop::sample::select(vec!["2", "8", "16", "-1", "x", "08"])),
        prop::collection::vec(prop::bool::weighted(0.12), TAINTS.len()),
    )
        .prop_map(move |(zone, disk, cpus, taints)| {
            let mut node = Node::default();
            node.metadata.name = name.into();
            if let Some(zone) = zone {
                node.metadata.labels.insert("zone".into(), zone.into());
            }
            if let Some(disk) = disk {
                node.metadata.labels.insert("disk".into(), disk.into());
            }
            if let Some(cpus) = cpus {
                node.metadata.labels.insert("cpus".into(), cpus.into());
            }
            node.spec.taints = TAINTS
                .iter()
                .zip(taints)
                .filter(|(_, on)| *on)
                .map(|(t, _)| t.parse().unwrap())
                .collect();
            node
        })
}

/// Up to six existing nodes (n6 and n7 never exist).
fn nodes_strategy() -> impl Strategy<Value = Vec<Node>> {
    (1usize..=6).prop_flat_map(|n| {
        NODE_NAMES[..n]
            .iter()
            .map(|name| node_strategy(name).boxed())
            .collect::<Vec<_>>()
    })
}

fn requirement(
    key: &str,
    operator: NodeSelectorOperator,
    values: &[&str],
) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: Some(operator),
        values: values.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

fn expression_strategy() -> impl Strategy<Value = NodeSelectorRequirement> {
    use NodeSelectorOperator::*;
    let keys = prop::sample::select(vec!["zone", "disk", "cpus", "rack"]);
    let values = prop::collection::vec(
        prop::sample::select(vec!["a", "b", "ssd", "hdd", "2", "8"]),
        1..3,
    );
    let number = prop::sample::select(vec!["1", "4", "8", "15", "-3", "x"]);
    prop_oneof![
        (keys.clone(), values.clone()).prop_map(|(k, v)| requirement(k, In, &v)),
        (keys.clone(), values).prop_map(|(k, v)| requirement(k, NotIn, &v)),
        keys.clone().prop_map(|k| requirement(k, Exists, &[])),
        keys.clone().prop_map(|k| requirement(k, DoesNotExist, &[])),
        (keys.clone(), number.clone()).prop_map(|(k, v)| requirement(k, Gt, &[v])),
        (keys, number).prop_map(|(k, v)| requirement(k, Lt, &[v])),
    ]
}

fn field_strategy() -> impl Strategy<Value = NodeSelectorRequirement> {
    (
        prop::sample::select(vec![NodeSelectorOperator::In, NodeSelectorOperator::NotIn]),
        prop::sample::select(NODE_NAMES.to_vec()),
    )
        .prop_map(|(op, name)| requirement("metadata.name", op, &[name]))
}

/// Required node affinity: 1 to 3 terms (ORed) of up to 3 expressions and
/// up to 1 field requirement (ANDed); now and then an empty term.
fn affinity_strategy() -> impl Strategy<Value = Option<Affinity>> {
    let term = (
        prop::collection::vec(expression_strategy(), 0..=3),
        prop::collection::vec(field_strategy(), 0..=1),
    )
        .prop_map(|(match_expressions, match_fields)| NodeSelectorTerm {
            match_expressions,
            match_fields,
            ..Default::default()
        });
    prop::option::weighted(0.6, prop::collection::vec(term, 1..=3)).prop_map(|terms| {
        terms.map(|node_selector_terms| Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
    })
}

fn toleration(key: &str, effect: Option<TaintEffect>) -> Toleration {
    Toleration {
        key: key.into(),
        operator: Some(TolerationOperator::Exists),
        effect,
        ..Default::default()
    }
}

fn equal(key: &str, value: &str, operator: bool, effect: Option<TaintEffect>) -> Toleration {
    Toleration {
        key: key.into(),
        operator: operator.then_some(TolerationOperator::Equal),
        value: value.into(),
        effect,
        ..Default::default()
    }
}

fn daemon_set_strategy() -> impl Strategy<Value = DaemonSet> {
    (
        prop::bool::weighted(0.3),
        affinity_strategy(),
        prop::collection::vec(prop::bool::weighted(0.2), 11),
        prop::bool::weighted(0.1),
        any::<bool>(),
    )
        .prop_map(|(zone_a, affinity, tolerate, pinned, host_network)| {
            let mut ds = DaemonSet::default();
            ds.metadata.name = "agent".into();
            ds.metadata.namespace = "default".into();
            ds.metadata.uid = DS_UID.into();
            ds.metadata.generation = Some(3);
            ds.spec.selector = Some(LabelSelector {
                match_labels: labels(&[("app", "agent")]),
                ..Default::default()
            });
            let template = &mut ds.spec.template;
            template.metadata.labels = labels(&[("app", "agent"), ("tier", "node")]);
            template.spec.containers = vec![Container {
                name: "agent".into(),
                image: "busybox:1.36".into(),
                ..Default::default()
            }];
            if zone_a {
                template.spec.node_selector = labels(&[("zone", "a")]);
            }
            template.spec.affinity = affinity;
            let candidates = [
                toleration("dedicated", None),
                toleration("maint", Some(TaintEffect::NoExecute)),
                toleration(
                    "node.kubernetes.io/unreachable",
                    Some(TaintEffect::NoSchedule),
                ),
                toleration("", None),
                toleration("", Some(TaintEffect::NoSchedule)),
                equal("dedicated", "gpu", true, None),
                equal("dedicated", "cpu", false, Some(TaintEffect::NoSchedule)),
                equal("dedicated", "", true, Some(TaintEffect::NoSchedule)),
                equal("maint", "", false, Some(TaintEffect::PreferNoSchedule)),
                equal(
                    "node.kubernetes.io/pid-pressure",
                    "",
                    true,
                    Some(TaintEffect::NoExecute),
                ),
                toleration(
                    "node.kubernetes.io/not-ready",
                    Some(TaintEffect::NoSchedule),
                ),
            ];
            template.spec.tolerations = candidates
                .into_iter()
                .zip(tolerate)
                .filter(|(_, on)| *on)
                .map(|(t, _)| t)
                .collect();
            if pinned {
                template.spec.node_name = "n1".into();
            }
            template.spec.host_network = host_network;
            ds
        })
}

#[derive(Debug, Clone, Copy)]
enum Owner {
    DaemonSet,
    Orphan,
    Foreign,
}

fn pod_strategy() -> impl Strategy<Value = (usize, Owner, bool, Option<PodPhase>, bool, i64, bool)>
{
    (
        0usize..9, // n0..n7, or 8 = unbound
        prop_oneof![
            5 => Just(Owner::DaemonSet),
            3 => Just(Owner::Orphan),
            1 => Just(Owner::Foreign)
        ],
        prop::bool::weighted(0.85),
        prop_oneof![
            4 => Just(Some(PodPhase::Running)),
            1 => Just(Some(PodPhase::Pending)),
            2 => Just(Some(PodPhase::Failed)),
            1 => Just(Some(PodPhase::Succeeded)),
            1 => Just(None),
        ],
        prop::bool::weighted(0.15),
        0i64..4,
        prop::bool::weighted(0.08),
    )
}

fn pods_strategy() -> impl Strategy<Value = Vec<Pod>> {
    prop::collection::vec(pod_strategy(), 0..12).prop_map(|specs| {
        specs
            .into_iter()
            .enumerate()
            .map(
                |(i, (node, owner, matching, phase, deleting, created, elsewhere))| {
                    let mut pod = Pod::default();
                    pod.metadata.name = format!("agent-p{i}");
                    pod.metadata.uid = format!("uid-p{i}");
                    pod.metadata.namespace = if elsewhere { "ops" } else { "default" }.into();
                    pod.metadata.labels = if matching {
                        labels(&[("app", "agent")])
                    } else {
                        labels(&[("app", "other")])
                    };
                    pod.metadata.creation_timestamp = Some(at(created).to_rfc3339());
                    if deleting {
                        pod.metadata.deletion_timestamp = Some(at(created).to_rfc3339());
                    }
                    let uid = match owner {
                        Owner::DaemonSet => Some(DS_UID),
                        Owner::Orphan => None,
                        Owner::Foreign => Some("other-uid"),
                    };
                    if let Some(uid) = uid {
                        pod.metadata.owner_references.push(OwnerReference {
                            api_version: "apps/v1".into(),
                            kind: "DaemonSet".into(),
                            name: "agent".into(),
                            uid: uid.into(),
                            controller: Some(true),
                            ..Default::default()
                        });
                    }
                    pod.spec.node_name = NODE_NAMES.get(node).copied().unwrap_or("").into();
                    if phase == Some(PodPhase::Running) {
                        pod.status.conditions.push(PodCondition {
                            r#type: "Ready".into(),
                            status: Some(ConditionStatus::True),
                            last_transition_time: Some(at(created).to_rfc3339()),
                            ..Default::default()
                        });
                    }
                    pod.status.phase = phase;
                    pod
                },
            )
            .collect()
    })
}

// ------------------------------------------------------------- the oracle

/// Kubernetes' `NodeShouldRunDaemonPod`, from the independent oracle.
fn oracle(ds: &DaemonSet, node: &Node) -> (bool, bool) {
    oracle::daemon::node_should_run(ds, node)
}

fn selected(pod: &Pod) -> bool {
    pod.metadata.labels.get("app").map(String::as_str) == Some("agent")
}

fn controlled(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .any(|r| r.controller == Some(true) && r.uid == DS_UID)
}

fn has_controller(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .any(|r| r.controller == Some(true))
}

fn terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Kubernetes' `ClaimPods` (orphans only when bound to a node).
fn claimed(pod: &Pod) -> bool {
    pod.metadata.namespace == "default"
        && selected(pod)
        && if has_controller(pod) {
            controlled(pod)
        } else {
            !terminating(pod) && !pod.spec.node_name.is_empty()
        }
}

/// Pods the DaemonSet may change: those it claims or controls.
fn the_daemon_sets(pod: &Pod) -> bool {
    claimed(pod) || (controlled(pod) && pod.metadata.namespace == "default")
}

fn phase_done(pod: &Pod) -> bool {
    matches!(
        pod.status.phase,
        Some(PodPhase::Failed | PodPhase::Succeeded)
    )
}

fn active(pod: &Pod) -> bool {
    !terminating(pod) && !phase_done(pod)
}

fn creation(pod: &Pod) -> Option<Timestamp> {
    Timestamp::parse_field(pod.metadata.creation_timestamp.as_deref())
}

// ------------------------------------------------------------- applying a plan

fn plan_with(
    ds: &DaemonSet,
    nodes: &[Node],
    pods: &[Pod],
    backoff: &FailedPodBackoff,
    now: Timestamp,
    seed: u64,
) -> DaemonSetPlan {
    daemon::plan(
        &PlanInput::new(ds, nodes, pods, now).with_backoff(backoff),
        &mut StdRng::seed_from_u64(seed),
    )
}

/// The store and the agents: adoptions and releases replace the pod,
/// deletions start (deletionTimestamp), new pods run and are ready.
fn apply(pods: &mut Vec<Pod>, plan: &DaemonSetPlan, now: Timestamp) {
    for changed in plan.adopt.iter().chain(&plan.release) {
        let pod = pods
            .iter_mut()
            .find(|p| {
                p.metadata.name == changed.metadata.name
                    && p.metadata.namespace == changed.metadata.namespace
            })
            .expect("adopted and released pods exist");
        *pod = changed.clone();
    }
    for deletion in &plan.delete {
        let pod = pods
            .iter_mut()
            .find(|p| {
                p.metadata.name == deletion.name && p.metadata.namespace == deletion.namespace
            })
            .expect("deleted pods exist");
        assert_eq!(pod.metadata.uid, deletion.uid);
        pod.metadata.deletion_timestamp = Some(now.to_rfc3339());
    }
    for creation in &plan.create {
        let mut pod = creation.pod.clone();
        assert!(
            !pods.iter().any(|p| p.metadata.name == pod.metadata.name),
            "new names are unique"
        );
        pod.metadata.uid = format!("uid-{}", pod.metadata.name);
        pod.metadata.creation_timestamp = Some(now.to_rfc3339());
        pod.status.phase = Some(PodPhase::Running);
        pod.status.conditions.push(PodCondition {
            r#type: "Ready".into(),
            status: Some(ConditionStatus::True),
            last_transition_time: Some(now.to_rfc3339()),
            ..Default::default()
        });
        pods.push(pod);
    }
}

fn by_node(pods: &[Pod]) -> BTreeMap<String, Vec<&Pod>> {
    let mut map: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    for pod in pods.iter().filter(|p| claimed(p)) {
        map.entry(pod.spec.node_name.clone()).or_default().push(pod);
    }
    map
}

proptest! {
    #![proptest_config(seed::config(512))]

    /// One plan, checked rule by rule against the oracle.
    #[test]
    fn one_plan_follows_kubernetes(
        ds in daemon_set_strategy(),
        nodes in nodes_strategy(),
        pods in pods_strategy(),
        seed in any::<u64>(),
    ) {
        let now = at(100);
        let plan = plan_with(&ds, &nodes, &pods, &FailedPodBackoff::new(), now, seed);
        let verdicts: HashMap<&str, (bool, bool)> =
            nodes.iter().map(|n| (n.metadata.name.as_str(), oracle(&ds, n))).collect();
        let claims = by_node(&pods);

        // Creations: exactly the nodes that should run and have no pod at all.
        let created: Vec<&str> = plan.create.iter().map(|c| c.pod.spec.node_name.as_str()).collect();
        let expected: Vec<&str> = nodes
            .iter()
            .map(|n| n.metadata.name.as_str())
            .filter(|n| verdicts[n].0 && !claims.contains_key(*n))
            .collect();
        prop_assert_eq!(&created, &expected);
        for creation in &plan.create {
            let pod = &creation.pod;
            prop_assert!(pod.metadata.name.starts_with("agent-"));
            prop_assert!(controlled(pod) && selected(pod));
            prop_assert_eq!(&pod.metadata.labels, &ds.spec.template.metadata.labels);
            for toleration in oracle::tolerations::daemon_defaults(ds.spec.template.spec.host_network) {
                prop_assert!(pod.spec.tolerations.contains(&toleration));
            }
        }

        // Deletions: only what Kubernetes would delete, and why.
        let deleted: HashSet<&str> = plan.delete.iter().map(|d| d.name.as_str()).collect();
        prop_assert_eq!(deleted.len(), plan.delete.len(), "no pod deleted twice");
        for deletion in &plan.delete {
            let pod = pods.iter().find(|p| p.metadata.name == deletion.name).unwrap();
            prop_assert!(claimed(pod), "only the DaemonSet's pods: {:?}", pod);
            prop_assert!(!terminating(pod), "never a pod already being deleted");
            let node = pod.spec.node_name.as_str();
            match verdicts.get(node) {
                None if node.is_empty() => prop_assert_eq!(&deletion.reason, &DeletionReason::Unbound),
                None => prop_assert_eq!(&deletion.reason, &DeletionReason::NodeGone),
                Some((_, false)) => {
                    let not_eligible = matches!(deletion.reason, DeletionReason::NotEligible(_));
                    prop_assert!(not_eligible, "not eligible");
                }
                Some((_, true)) => match pod.status.phase {
                    Some(PodPhase::Failed) => prop_assert_eq!(&deletion.reason, &DeletionReason::Failed),
                    Some(PodPhase::Succeeded) => prop_assert_eq!(&deletion.reason, &DeletionReason::Succeeded),
                    _ => {
                        let oldest = claims[node]
                            .iter()
                            .filter(|p| active(p))
                            .min_by(|a, b| creation(a).cmp(&creation(b)).then(a.metadata.name.cmp(&b.metadata.name)))
                            .unwrap();
                        prop_assert_ne!(&oldest.metadata.name, &pod.metadata.name, "the oldest stays");
                        let duplicate = matches!(deletion.reason, DeletionReason::Duplicate { .. });
                        prop_assert!(duplicate, "a duplicate");
                    }
                },
            }
        }
        // And everything Kubernetes would delete now is deleted.
        for (node, on_node) in &claims {
            for pod in on_node.iter().filter(|p| !terminating(p)) {
                let must_go = match verdicts.get(node.as_str()) {
                    None => true,
                    Some((_, false)) => true,
                    Some((_, true)) => pod.status.phase == Some(PodPhase::Succeeded),
                };
                if must_go {
                    prop_assert!(deleted.contains(pod.metadata.name.as_str()), "{:?} stays", pod);
                }
            }
        }

        // Adoption and release.
        let adopted: Vec<&str> = plan.adopt.iter().map(|p| p.metadata.name.as_str()).collect();
        let expected: Vec<&str> = pods
            .iter()
            .filter(|p| claimed(p) && !has_controller(p))
            .map(|p| p.metadata.name.as_str())
            .collect();
        prop_assert_eq!(adopted, expected);
        let released: Vec<&str> = plan.release.iter().map(|p| p.metadata.name.as_str()).collect();
        let expected: Vec<&str> = pods
            .iter()
            .filter(|p| p.metadata.namespace == "default" && controlled(p) && !selected(p) && !terminating(p))
            .map(|p| p.metadata.name.as_str())
            .collect();
        prop_assert_eq!(released, expected);

        // Never two active pods of the DaemonSet on one node once applied.
        let mut after = pods.clone();
        apply(&mut after, &plan, now);
        for (node, on_node) in by_node(&after) {
            let running = on_node.iter().filter(|p| active(p)).count();
            prop_assert!(running <= 1, "{} active pods on {:?}", running, node);
        }

        // Status.
        let desired = verdicts.values().filter(|v| v.0).count();
        prop_assert_eq!(plan.status.desired_number_scheduled as usize, desired);
        let current = verdicts.iter().filter(|&(n, v)| v.0 && claims.contains_key(*n)).count();
        prop_assert_eq!(plan.status.current_number_scheduled as usize, current);
        let misscheduled = verdicts.iter().filter(|&(n, v)| !v.0 && claims.contains_key(*n)).count();
        prop_assert_eq!(plan.status.number_misscheduled as usize, misscheduled);
        prop_assert!(plan.status.number_ready <= plan.status.current_number_scheduled);
        prop_assert!(plan.status.number_available <= plan.status.number_ready);
        prop_assert_eq!(
            plan.status.number_unavailable,
            plan.status.desired_number_scheduled - plan.status.number_available
        );
        prop_assert_eq!(plan.status.updated_number_scheduled, plan.status.current_number_scheduled);
        prop_assert_eq!(plan.status.observed_generation, Some(3));

        // Describe: a reason for every node that should get no pod (explain
        // without pods: every node is without one, and says why).
        let explained = daemon::explain(&ds, &nodes, std::iter::empty(), None, now);
        let ineligible: Vec<(&str, &daemon::NodeEligibility)> = explained
            .nodes_without_pod
            .iter()
            .filter_map(|n| match &n.why {
                daemon::NoPod::Ineligible(verdict) => Some((n.node.as_str(), verdict)),
                daemon::NoPod::NotCreatedYet | daemon::NoPod::DoesNotFit(_) => None,
            })
            .collect();
        let expected: Vec<&str> = nodes
            .iter()
            .map(|n| n.metadata.name.as_str())
            .filter(|n| !verdicts[n].0)
            .collect();
        prop_assert_eq!(ineligible.iter().map(|(n, _)| *n).collect::<Vec<_>>(), expected);
        for (node, verdict) in &ineligible {
            prop_assert!(!verdict.reasons.is_empty());
            prop_assert_eq!(verdict.should_continue_running, verdicts[node].1);
        }

        // Deterministic.
        let again = plan_with(&ds, &nodes, &pods, &FailedPodBackoff::new(), now, seed);
        prop_assert_eq!(&plan, &again);
    }

    /// `explain` tells what `plan` does: the nodes it creates on are those
    /// explained as "not created yet" (no failed-pod backoff here), the
    /// nodes without a pod that should not get one are among the plan's
    /// ineligible nodes with the same verdict, and the adoptions and
    /// releases are the plan's.
    #[test]
    fn explain_agrees_with_plan(
        ds in daemon_set_strategy(),
        nodes in nodes_strategy(),
        pods in pods_strategy(),
        seed in any::<u64>(),
    ) {
        let now = at(100);
        let plan = plan_with(&ds, &nodes, &pods, &FailedPodBackoff::new(), now, seed);
        let explained = daemon::explain(&ds, &nodes, &pods, None, now);
        let mut created: Vec<&str> = plan.create.iter().map(|c| c.pod.spec.node_name.as_str()).collect();
        created.sort();
        let not_created: Vec<&str> = explained
            .nodes_without_pod
            .iter()
            .filter(|n| n.why == daemon::NoPod::NotCreatedYet)
            .map(|n| n.node.as_str())
            .collect();
        // A node whose only pod is being deleted waits for it to go.
        prop_assert!(created.iter().all(|n| not_created.contains(n)));
        let verdicts: HashMap<&str, (bool, bool)> =
            nodes.iter().map(|n| (n.metadata.name.as_str(), oracle(&ds, n))).collect();
        for n in &explained.nodes_without_pod {
            if let daemon::NoPod::Ineligible(verdict) = &n.why {
                // The planner's verdict, and the oracle's.
                let node = nodes.iter().find(|x| x.metadata.name == n.node).unwrap();
                prop_assert_eq!(&daemon::node_should_run_daemon_pod(&ds, node), verdict);
                prop_assert_eq!(verdicts[n.node.as_str()], (false, verdict.should_continue_running));
            } else {
                prop_assert!(verdicts[n.node.as_str()].0, "{} is eligible", n.node);
            }
        }
        let uids = |pods: &[&Pod]| pods.iter().map(|p| p.metadata.uid.clone()).collect::<Vec<_>>();
        prop_assert_eq!(uids(&explained.adopting), plan.adopt.iter().map(|p| p.metadata.uid.clone()).collect::<Vec<_>>());
        prop_assert_eq!(uids(&explained.releasing), plan.release.iter().map(|p| p.metadata.uid.clone()).collect::<Vec<_>>());
        prop_assert!(explained.adopting.iter().all(|a| explained.pods.iter().any(|p| std::ptr::eq(*p, *a))));
    }

    /// The usage of only the nodes where the DaemonSet has no bound pod
    /// (`Claim::is_settled`), as the server builds it each pass, plans exactly
    /// as the usage of every pod of the cluster: CPU room and requests
    /// drawn so that fits and preemptions decide.
    #[test]
    fn the_usage_of_unsettled_nodes_plans_as_the_whole(
        ds in daemon_set_strategy(),
        nodes in nodes_strategy(),
        pods in pods_strategy(),
        cpus in prop::collection::vec(0u32..4, 24),
        seed in any::<u64>(),
    ) {
        let (mut ds, mut nodes, mut pods) = (ds, nodes, pods);
        let mut cpu = cpus.into_iter().cycle();
        let mut cpu = move || Quantity(cpu.next().unwrap_or(1).to_string());
        for n in &mut nodes {
            n.status.allocatable.insert("cpu".into(), cpu());
        }
        for p in &mut pods {
            let mut c = Container { name: "c".into(), image: "x".into(), ..Default::default() };
            c.resources.requests.insert("cpu".into(), cpu());
            p.spec.containers = vec![c];
        }
        if let Some(c) = ds.spec.template.spec.containers.first_mut() {
            c.resources.requests.insert("cpu".into(), cpu());
        }
        let pods: Vec<&Pod> = pods.iter().collect();
        let now = at(100);
        let plan = |usage: &NodeUsage| {
            daemon::plan(
                &PlanInput::new(&ds, &nodes, pods.iter().copied(), now).with_usage(usage),
                &mut StdRng::seed_from_u64(seed),
            )
        };
        let whole = plan(&NodeUsage::new(pods.iter().copied()));
        let claim = daemon::claim(&ds, &pods);
        let part = NodeUsage::with_priorities_on(pods.iter().copied(), drover_api::Priorities::new([]), |n| {
            claim.as_ref().is_some_and(|c| !c.is_settled(n))
        });
        prop_assert_eq!(plan(&part), whole.clone());
        // The claim made once, as the server makes it, plans the same.
        let claimed = daemon::plan_claimed(
            &PlanInput::new(&ds, &nodes, pods.iter().copied(), now).with_usage(&part),
            claim,
            &mut StdRng::seed_from_u64(seed),
        );
        prop_assert_eq!(claimed, whole);
    }

    /// plan → apply → plan … converges to exactly one pod on every eligible
    /// node, none where pods may not continue, never two anywhere.
    #[test]
    fn plans_converge(
        ds in daemon_set_strategy(),
        nodes in nodes_strategy(),
        pods in pods_strategy(),
        seed in any::<u64>(),
    ) {
        let initial = pods.clone();
        let mut pods = pods;
        let mut backoff = FailedPodBackoff::new();
        let mut now = at(100);
        let mut converged = None;
        let mut shadow = Shadow::default();
        for round in 0..60u64 {
            let plan = plan_with(&ds, &nodes, &pods, &backoff, now, seed.wrapping_add(round));
            let input = PlanInput::new(&ds, &nodes, &pods, now).with_backoff(&backoff);
            shadow.check(&input, &nodes, &pods, seed.wrapping_add(round), &plan)?;
            if !plan.changes_pods() && plan.requeue_at.is_none() && !pods.iter().any(terminating) {
                converged = Some(plan);
                break;
            }
            // Pods being deleted were seen by one plan; now they are gone.
            pods.retain(|p| !terminating(p));
            apply(&mut pods, &plan, now);
            for (node, on_node) in by_node(&pods) {
                let running = on_node.iter().filter(|p| active(p)).count();
                prop_assert!(running <= 1, "round {}: {} active pods on {:?}", round, running, node);
            }
            backoff = plan.backoff.clone();
            now = match plan.requeue_at {
                Some(t) if !plan.changes_pods() => t.max(now + Duration::from_secs(1)),
                _ => now + Duration::from_secs(1),
            };
        }
        let plan = converged.expect("converges within 60 rounds");

        let claims = by_node(&pods);
        let existing: HashSet<&str> = nodes.iter().map(|n| n.metadata.name.as_str()).collect();
        for node in claims.keys() {
            prop_assert!(existing.contains(node.as_str()), "pods left on {:?}", node);
        }
        let initial_names: HashSet<&str> = initial.iter().map(|p| p.metadata.name.as_str()).collect();
        for node in &nodes {
            let (should_run, should_continue) = oracle(&ds, node);
            let on_node = claims.get(&node.metadata.name).cloned().unwrap_or_default();
            prop_assert!(on_node.iter().all(|p| active(p)), "only running pods remain");
            if should_run {
                prop_assert_eq!(on_node.len(), 1, "exactly one pod on {}", node.metadata.name);
            } else if should_continue {
                prop_assert!(on_node.len() <= 1);
                for pod in on_node {
                    prop_assert!(initial_names.contains(pod.metadata.name.as_str()), "kept, never created");
                }
            } else {
                prop_assert!(on_node.is_empty());
            }
        }
        // Pods that are not the DaemonSet's are untouched (released ones only
        // lose the owner reference).
        for pod in &initial {
            let now = pods.iter().find(|p| p.metadata.name == pod.metadata.name && p.metadata.namespace == pod.metadata.namespace);
            let released = pod.metadata.namespace == "default" && controlled(pod) && !selected(pod);
            if released && !terminating(pod) {
                let now = now.expect("released pods stay");
                prop_assert!(!controlled(now));
            } else if !terminating(pod) && !the_daemon_sets(pod) {
                prop_assert_eq!(now, Some(pod));
            }
        }
        let desired = nodes.iter().filter(|n| oracle(&ds, n).0).count() as i32;
        prop_assert_eq!(plan.status.desired_number_scheduled, desired);
        prop_assert_eq!(plan.status.current_number_scheduled, desired);
        // Ready and available (minReadySeconds 0) by the oracle's reading
        // of the Ready condition.
        let available = nodes
            .iter()
            .filter(|n| oracle(&ds, n).0)
            .filter(|n| oracle::availability::pod_available(claims[&n.metadata.name][0], 0, now))
            .count() as i32;
        prop_assert_eq!(plan.status.number_ready, available);
        prop_assert_eq!(plan.status.number_available, available);
    }
}
