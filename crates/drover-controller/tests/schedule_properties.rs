//! Property tests of the scheduler (`drover_controller::schedule`) against
//! an independent brute-force oracle (`oracle::scheduler`, with its own
//! label selectors, tolerations, node affinity, quantities, topology
//! domains and skew; never drover-api's matchers or the planner's
//! helpers): random clusters of up to seven nodes (zones, disks, taints of
//! every effect, cordons, small allocatable amounts and pod limits) with
//! bound pods (two namespaces, labels, requests or limits, host ports of
//! both protocols and several host IPs, required and preferred pod
//! affinity and anti-affinity by hostname, zone or disk with every selector
//! operator, namespaces and namespace selectors; finished and deleting
//! pods; pods on a node that does not exist), and random pending pods with
//! all of that plus nodeSelector, required and preferred node affinity,
//! tolerations and topology spread constraints of both actions (maxSkew,
//! minDomains, both node inclusion policies, matchLabelKeys).
//!
//! Checked for each pending pod: the planner's feasible nodes are the
//! oracle's; each rejected node's reasons are the oracle's; every plugin's
//! normalised score of every feasible node is the oracle's; the chosen node
//! is feasible and has the oracle's highest weighted total; an
//! Unschedulable message counts every (node, reason) once, so its counts
//! add up to the number of nodes (more only where NodeResourcesFit gives a
//! node several reasons). In a batch, each decision is checked against the
//! oracle's view of the cluster with the pods placed before it.

mod oracle;
mod seed;

use std::collections::BTreeMap;

use drover_api::{
    Affinity, Container, ContainerPort, LabelSelector, LabelSelectorOperator,
    LabelSelectorRequirement, Labels, Node, NodeAffinity, NodeInclusionPolicy, NodeSelector,
    NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodAffinity,
    PodAffinityTerm, PodAntiAffinity, PodPhase, PreferredSchedulingTerm, Protocol, Quantity,
    TaintEffect, Toleration, TolerationOperator, TopologySpreadConstraint,
    UnsatisfiableConstraintAction, WeightedPodAffinityTerm,
};
use drover_controller::schedule::{Cluster, Decision};
use oracle::scheduler::{reasons, scores, total, World};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

const NODE_NAMES: [&str; 8] = ["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"];
const HOSTNAME: &str = "kubernetes.io/hostname";
const TAINTS: [&str; 6] = [
    "dedicated=gpu:NoSchedule",
    "dedicated:NoExecute",
    "soft=x:PreferNoSchedule",
    "soft2:PreferNoSchedule",
    "node.kubernetes.io/unschedulable:NoSchedule",
    "spot=yes:NoSchedule",
];

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn node_strategy(name: &'static str) -> impl Strategy<Value = Node> {
    (
        prop::option::weighted(0.8, prop::sample::select(vec!["z1", "z2", "z3"])),
        prop::option::of(prop::sample::select(vec!["ssd", "hdd"])),
        prop::sample::select(vec!["1", "2", "4"]),
        prop::sample::select(vec!["1Gi", "4Gi"]),
        prop::sample::select(vec!["2", "3", "110"]),
        prop::collection::vec(prop::bool::weighted(0.12), TAINTS.len()),
        prop::bool::weighted(0.12),
    )
        .prop_map(move |(zone, disk, cpu, memory, pods, taints, cordoned)| {
            let mut n = Node::default();
            n.metadata.name = name.into();
            n.metadata.labels.insert(HOSTNAME.into(), name.into());
            if let Some(z) = zone {
                n.metadata.labels.insert("zone".into(), z.into());
            }
            if let Some(d) = disk {
                n.metadata.labels.insert("disk".into(), d.into());
            }
            for (k, v) in [("cpu", cpu), ("memory", memory), ("pods", pods)] {
                n.status.allocatable.insert(k.into(), Quantity::from(v));
            }
            n.spec.taints = TAINTS
                .iter()
                .zip(taints)
                .filter(|(_, on)| *on)
                .map(|(t, _)| t.parse().expect("a taint"))
                .collect();
            n.spec.unschedulable = cordoned;
            n
        })
}

fn nodes_strategy() -> impl Strategy<Value = Vec<Node>> {
    (1usize..=7).prop_flat_map(|n| {
        NODE_NAMES[..n]
            .iter()
            .map(|name| node_strategy(name).boxed())
            .collect::<Vec<_>>()
    })
}

fn expression(key: &str, op: LabelSelectorOperator, values: &[&str]) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.into(),
        operator: Some(op),
        values: values.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

fn selector_strategy() -> impl Strategy<Value = Option<LabelSelector>> {
    use LabelSelectorOperator::*;
    let app = prop::sample::select(vec!["web", "db", "cache"]);
    prop_oneof![
        4 => app.clone().prop_map(|a| Some(LabelSelector {
            match_labels: labels(&[("app", a)]),
            ..Default::default()
        })),
        2 => (app.clone(), app.clone()).prop_map(|(a, b)| Some(LabelSelector {
            match_expressions: vec![expression("app", In, &[a, b])],
            ..Default::default()
        })),
        1 => app.prop_map(|a| Some(LabelSelector {
            match_expressions: vec![expression("app", NotIn, &[a])],
            ..Default::default()
        })),
        1 => Just(Some(LabelSelector {
            match_expressions: vec![expression("tier", Exists, &[])],
            ..Default::default()
        })),
        1 => Just(Some(LabelSelector {
            match_expressions: vec![expression("tier", DoesNotExist, &[])],
            ..Default::default()
        })),
        1 => Just(Some(LabelSelector::default())),
        1 => Just(None),
    ]
}

fn term_strategy() -> impl Strategy<Value = PodAffinityTerm> {
    (
        selector_strategy(),
        prop::sample::select(vec![HOSTNAME, "zone", "disk"]),
        0..6u8,
    )
        .prop_map(|(label_selector, key, ns)| {
            let mut t = PodAffinityTerm {
                label_selector,
                topology_key: key.into(),
                ..Default::default()
            };
            match ns {
                3 => t.namespaces = vec!["other".into()],
                4 => t.namespaces = vec!["default".into(), "other".into()],
                5 => {
                    t.namespace_selector = Some(LabelSelector {
                        match_labels: labels(&[("team", "x")]),
                        ..Default::default()
                    })
                }
                _ => {}
            }
            t
        })
}

fn weighted_strategy() -> impl Strategy<Value = WeightedPodAffinityTerm> {
    (1..=100i32, term_strategy()).prop_map(|(weight, pod_affinity_term)| WeightedPodAffinityTerm {
        weight,
        pod_affinity_term,
        ..Default::default()
    })
}

fn pod_affinity_strategy(
    required_affinity: f64,
) -> impl Strategy<Value = (Option<PodAffinity>, Option<PodAntiAffinity>)> {
    (
        prop::collection::vec(term_strategy(), 0..=1),
        prop::collection::vec(weighted_strategy(), 0..=1),
        prop::collection::vec(term_strategy(), 0..=1),
        prop::collection::vec(weighted_strategy(), 0..=1),
        prop::bool::weighted(required_affinity),
        prop::bool::weighted(0.35),
    )
        .prop_map(|(req, pref, anti, anti_pref, keep_req, keep_anti)| {
            let affinity = PodAffinity {
                required_during_scheduling_ignored_during_execution: if keep_req {
                    req
                } else {
                    Vec::new()
                },
                preferred_during_scheduling_ignored_during_execution: pref,
                ..Default::default()
            };
            let anti = PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: if keep_anti {
                    anti
                } else {
                    Vec::new()
                },
                preferred_during_scheduling_ignored_during_execution: anti_pref,
                ..Default::default()
            };
            (Some(affinity), Some(anti))
        })
}

fn container_strategy() -> impl Strategy<Value = Container> {
    (
        prop::option::of(prop::sample::select(vec!["100m", "500m", "1", "2"])),
        prop::option::of(prop::sample::select(vec!["128Mi", "1Gi", "3Gi"])),
        any::<bool>(),
        prop::option::weighted(
            0.25,
            (
                prop::sample::select(vec![8080, 9090]),
                any::<bool>(),
                prop::sample::select(vec!["", "0.0.0.0", "10.0.0.1", "10.0.0.2"]),
            ),
        ),
    )
        .prop_map(|(cpu, memory, as_limits, port)| {
            let mut c = Container {
                name: "c".into(),
                image: "busybox".into(),
                ..Default::default()
            };
            let r = if as_limits {
                &mut c.resources.limits
            } else {
                &mut c.resources.requests
            };
            if let Some(cpu) = cpu {
                r.insert("cpu".into(), Quantity::from(cpu));
            }
            if let Some(m) = memory {
                r.insert("memory".into(), Quantity::from(m));
            }
            if let Some((host, udp, ip)) = port {
                c.ports = vec![ContainerPort {
                    container_port: 80,
                    host_port: Some(host),
                    protocol: udp.then_some(Protocol::Udp),
                    host_ip: ip.into(),
                    ..Default::default()
                }];
            }
            c
        })
}

/// The parts every pod has: namespace, labels, containers, pod affinity.
fn base_pod_strategy(name: String, required_affinity: f64) -> impl Strategy<Value = Pod> {
    (
        prop::bool::weighted(0.8),
        prop::option::weighted(
            0.85,
            prop::sample::select(vec!["web", "web", "db", "cache"]),
        ),
        prop::option::of(prop::sample::select(vec!["a", "b"])),
        prop::collection::vec(container_strategy(), 1..=2),
        prop::option::weighted(0.5, pod_affinity_strategy(required_affinity)),
    )
        .prop_map(move |(default_ns, app, tier, containers, affinity)| {
            let mut p = Pod::default();
            p.metadata.name = name.clone();
            p.metadata.uid = format!("{name}-uid");
            p.metadata.namespace = if default_ns { "default" } else { "other" }.into();
            if let Some(app) = app {
                p.metadata.labels.insert("app".into(), app.into());
            }
            if let Some(tier) = tier {
                p.metadata.labels.insert("tier".into(), tier.into());
            }
            p.spec.containers = containers;
            for (i, c) in p.spec.containers.iter_mut().enumerate() {
                c.name = format!("c{i}");
            }
            if let Some((pod_affinity, pod_anti_affinity)) = affinity {
                p.spec.affinity = Some(Affinity {
                    pod_affinity,
                    pod_anti_affinity,
                    ..Default::default()
                });
            }
            p
        })
}

fn bound_pods_strategy() -> impl Strategy<Value = Vec<Pod>> {
    prop::collection::vec(
        (
            0..10usize,
            prop::sample::select(NODE_NAMES.to_vec()),
            0..10u8,
        ),
        0..=16,
    )
    .prop_flat_map(|specs| {
        specs
            .into_iter()
            .enumerate()
            .map(|(i, (_, node, state))| {
                base_pod_strategy(format!("b{i}"), 0.2)
                    .prop_map(move |mut p| {
                        p.spec.node_name = node.into();
                        p.status.phase = Some(PodPhase::Running);
                        match state {
                            0 => p.status.phase = Some(PodPhase::Succeeded),
                            1 => {
                                p.metadata.deletion_timestamp = Some("2026-01-01T00:00:00Z".into())
                            }
                            _ => {}
                        }
                        p
                    })
                    .boxed()
            })
            .collect::<Vec<_>>()
    })
}

fn toleration_strategy() -> impl Strategy<Value = Vec<Toleration>> {
    let all = [
        Toleration {
            key: "dedicated".into(),
            operator: Some(TolerationOperator::Exists),
            ..Default::default()
        },
        Toleration {
            key: "dedicated".into(),
            value: "gpu".into(),
            effect: Some(TaintEffect::NoSchedule),
            ..Default::default()
        },
        Toleration {
            key: "soft".into(),
            operator: Some(TolerationOperator::Equal),
            value: "x".into(),
            ..Default::default()
        },
        Toleration {
            key: "node.kubernetes.io/unschedulable".into(),
            operator: Some(TolerationOperator::Exists),
            effect: Some(TaintEffect::NoSchedule),
            ..Default::default()
        },
        Toleration {
            operator: Some(TolerationOperator::Exists),
            effect: Some(TaintEffect::PreferNoSchedule),
            ..Default::default()
        },
        Toleration {
            key: "spot".into(),
            operator: Some(TolerationOperator::Exists),
            effect: Some(TaintEffect::NoExecute),
            ..Default::default()
        },
    ];
    prop::collection::vec(prop::bool::weighted(0.2), all.len()).prop_map(move |on| {
        all.iter()
            .zip(on)
            .filter(|(_, on)| *on)
            .map(|(t, _)| t.clone())
            .collect()
    })
}

fn node_requirement(
    key: &str,
    op: NodeSelectorOperator,
    values: &[&str],
) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: Some(op),
        values: values.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

fn node_term_strategy() -> impl Strategy<Value = NodeSelectorTerm> {
    use NodeSelectorOperator::*;
    prop_oneof![
        Just(node_requirement("zone", In, &["z1", "z2"])),
        Just(node_requirement("disk", In, &["ssd"])),
        Just(node_requirement("disk", DoesNotExist, &[])),
        Just(node_requirement("zone", NotIn, &["z3"])),
    ]
    .prop_map(|r| NodeSelectorTerm {
        match_expressions: vec![r],
        ..Default::default()
    })
}

fn spread_strategy() -> impl Strategy<Value = TopologySpreadConstraint> {
    (
        1..=3i32,
        prop::sample::select(vec!["zone", HOSTNAME]),
        any::<bool>(),
        prop::option::of(prop::sample::select(vec!["web", "db"])),
        prop::option::weighted(0.5, 1..=5i32),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(skew, key, hard, app, min, affinity, taints, keys)| {
            let policy = |b: bool| {
                if b {
                    NodeInclusionPolicy::Honor
                } else {
                    NodeInclusionPolicy::Ignore
                }
            };
            TopologySpreadConstraint {
                max_skew: skew,
                topology_key: key.into(),
                when_unsatisfiable: Some(if hard {
                    UnsatisfiableConstraintAction::DoNotSchedule
                } else {
                    UnsatisfiableConstraintAction::ScheduleAnyway
                }),
                label_selector: app.map(|a| LabelSelector {
                    match_labels: labels(&[("app", a)]),
                    ..Default::default()
                }),
                min_domains: if hard { min } else { None },
                node_affinity_policy: affinity.map(policy),
                node_taints_policy: taints.map(policy),
                match_label_keys: if keys {
                    vec!["tier".into()]
                } else {
                    Vec::new()
                },
                ..Default::default()
            }
        })
}

fn pending_strategy(name: String) -> impl Strategy<Value = Pod> {
    (
        base_pod_strategy(name, 0.35),
        prop::option::weighted(
            0.2,
            prop::sample::select(vec![("zone", "z1"), ("disk", "ssd")]),
        ),
        prop::option::weighted(0.25, node_term_strategy()),
        prop::collection::vec((1..=100i32, node_term_strategy()), 0..=2),
        toleration_strategy(),
        prop::collection::vec(spread_strategy(), 0..=2),
    )
        .prop_map(
            |(mut p, selector, required, preferred, tolerations, spread)| {
                if let Some((k, v)) = selector {
                    p.spec.node_selector = labels(&[(k, v)]);
                }
                let node_affinity = NodeAffinity {
                    required_during_scheduling_ignored_during_execution: required.map(|t| {
                        NodeSelector {
                            node_selector_terms: vec![t],
                            ..Default::default()
                        }
                    }),
                    preferred_during_scheduling_ignored_during_execution: preferred
                        .into_iter()
                        .map(|(weight, preference)| PreferredSchedulingTerm {
                            weight,
                            preference,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                };
                p.spec
                    .affinity
                    .get_or_insert_with(Affinity::default)
                    .node_affinity = Some(node_affinity);
                p.spec.tolerations = tolerations;
                // Kubernetes refuses two constraints with one key and action.
                let mut seen = Vec::new();
                for c in spread {
                    let k = (c.topology_key.clone(), c.when_unsatisfiable.clone());
                    if !seen.contains(&k) {
                        seen.push(k);
                        p.spec.topology_spread_constraints.push(c);
                    }
                }
                p
            },
        )
}

fn namespaces_strategy() -> impl Strategy<Value = BTreeMap<String, Labels>> {
    (any::<bool>(), any::<bool>()).prop_map(|(d, o)| {
        let mut m = BTreeMap::new();
        m.insert(
            "default".into(),
            labels(&[("team", if d { "x" } else { "y" })]),
        );
        m.insert(
            "other".into(),
            labels(&[("team", if o { "x" } else { "y" })]),
        );
        m
    })
}

/// The counts of an Unschedulable message, by reason.
fn message_counts(message: &str, nodes: usize) -> BTreeMap<String, usize> {
    let prefix = format!("0/{nodes} nodes are available: ");
    let body = message
        .strip_prefix(&prefix)
        .and_then(|m| m.strip_suffix('.'))
        .unwrap_or_else(|| panic!("{message:?} is not kube-scheduler's form"));
    let parts: Vec<&str> = body.split(", ").collect();
    let mut sorted = parts.clone();
    sorted.sort();
    assert_eq!(parts, sorted, "sorted as strings: {message}");
    parts
        .iter()
        .map(|p| {
            let (count, reason) = p.split_once(' ').expect("count and reason");
            (reason.to_string(), count.parse().expect("a count"))
        })
        .collect()
}

/// Checks one decision for `pod` against the oracle; returns the node it
/// was bound to.
fn check(
    nodes: &[Node],
    pods: &[Pod],
    ns: &BTreeMap<String, Labels>,
    pod: &Pod,
    decision: &Decision,
    cluster: &Cluster<'_>,
) -> Option<String> {
    let world = World {
        nodes,
        pods,
        namespaces: ns,
    };
    let oracle: BTreeMap<String, Vec<String>> = nodes
        .iter()
        .map(|n| (n.metadata.name.clone(), reasons(&world, pod, n)))
        .collect();
    let feasible: Vec<&Node> = nodes
        .iter()
        .filter(|n| oracle[&n.metadata.name].is_empty())
        .collect();
    let e = cluster.evaluate(pod);
    // Fewer than 100 nodes: every node is looked at.
    assert_eq!(e.processed, nodes.len());
    let mut planner_feasible: Vec<&str> = e.feasible.iter().map(|s| s.node).collect();
    planner_feasible.sort();
    let mut oracle_feasible: Vec<&str> =
        feasible.iter().map(|n| n.metadata.name.as_str()).collect();
    oracle_feasible.sort();
    assert_eq!(
        planner_feasible, oracle_feasible,
        "feasible nodes of {pod:#?}"
    );
    let u = e.unschedulable();
    for (node, rs) in &u.by_node {
        let got: Vec<String> = rs.iter().map(|r| r.to_string()).collect();
        assert_eq!(&got, &oracle[node], "reasons of {node}");
    }
    let oracle_scores = scores(&world, pod, &feasible);
    for s in &e.feasible {
        let p = s.plugins;
        let got = [
            p.taint_toleration,
            p.node_affinity,
            p.topology_spread,
            p.inter_pod_affinity,
            p.resources_fit,
            p.balanced_allocation,
        ];
        assert_eq!(
            got, oracle_scores[s.node],
            "scores of {} for {pod:#?}",
            s.node
        );
    }
    match decision {
        Decision::Bind(b) => {
            let best = oracle_scores
                .values()
                .map(total)
                .max()
                .expect("a feasible node");
            let chosen = oracle_scores
                .get(&b.node)
                .unwrap_or_else(|| panic!("{} is not feasible", b.node));
            assert_eq!(
                total(chosen),
                best,
                "{} is not among the top-scored",
                b.node
            );
            Some(b.node.clone())
        }
        Decision::Unschedulable(u) => {
            assert!(
                feasible.is_empty(),
                "unschedulable, but the oracle finds {feasible:?}"
            );
            let counts = message_counts(&u.message(), nodes.len());
            let reasons_total: usize = oracle.values().map(Vec::len).sum();
            assert_eq!(counts.values().sum::<usize>(), reasons_total);
            if oracle.values().all(|r| r.len() == 1) {
                assert_eq!(reasons_total, nodes.len(), "one reason per node");
            }
            let mut want: BTreeMap<String, usize> = BTreeMap::new();
            for r in oracle.values().flatten() {
                *want.entry(r.clone()).or_default() += 1;
            }
            assert_eq!(counts, want);
            None
        }
    }
}

proptest! {
    #![proptest_config(seed::config(400))]

    /// One pending pod: feasible set, reasons, scores and choice as the
    /// oracle's.
    #[test]
    fn one_pod_is_scheduled_as_kube_scheduler_would(
        nodes in nodes_strategy(),
        pods in bound_pods_strategy(),
        ns in namespaces_strategy(),
        pending in pending_strategy("p".into()),
        seed in any::<u64>(),
    ) {
        let cluster = Cluster::new(&nodes, &pods).with_namespaces(ns.clone());
        let decision = cluster.schedule(&pending, &mut StdRng::seed_from_u64(seed));
        check(&nodes, &pods, &ns, &pending, &decision, &cluster);
    }

    /// A batch: each decision counts the pods placed before it.
    #[test]
    fn a_batch_counts_the_pods_placed_before_each_decision(
        nodes in nodes_strategy(),
        pods in bound_pods_strategy(),
        ns in namespaces_strategy(),
        pending in prop::collection::vec(0..1u8, 1..=6).prop_flat_map(|v| {
            (0..v.len()).map(|i| pending_strategy(format!("q{i}")).boxed()).collect::<Vec<_>>()
        }),
        seed in any::<u64>(),
    ) {
        let mut cluster = Cluster::new(&nodes, &pods).with_namespaces(ns.clone());
        let decisions = cluster.schedule_batch(&pending, &mut StdRng::seed_from_u64(seed));
        let mut world_pods = pods.clone();
        for (pod, decision) in &decisions {
            let before = Cluster::new(&nodes, &world_pods).with_namespaces(ns.clone());
            if let Some(node) = check(&nodes, &world_pods, &ns, pod, decision, &before) {
                let mut placed = (*pod).clone();
                placed.spec.node_name = node;
                world_pods.push(placed);
            }
        }
    }
}
