//! Unit tests of the scheduler: each node-local filter and score plugin,
//! the message, selection, and seed 10 (`10-deployment-antiaffinity.yaml`).
//! The pod-affinity and spread plugins are in `tests_affinity.rs`.

use std::collections::BTreeMap;

use drover_api::{
    Container, ContainerPort, Node, NodeAffinity, Pod, PodPhase, PreferredSchedulingTerm, Quantity,
    Taint, TaintEffect, Toleration, TolerationOperator,
};
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::*;

pub(crate) fn labels(pairs: &[(&str, &str)]) -> drover_api::Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A node with 4 CPUs, 8 GiB, 110 pods, its hostname label and `extra`.
pub(crate) fn node(name: &str, extra: &[(&str, &str)]) -> Node {
    let mut n = Node::default();
    n.metadata.name = name.into();
    n.metadata.labels = labels(extra);
    n.metadata.labels.insert(HOSTNAME_LABEL.into(), name.into());
    for (k, v) in [("cpu", "4"), ("memory", "8Gi"), ("pods", "110")] {
        n.status.allocatable.insert(k.into(), Quantity::from(v));
    }
    n
}

/// An unbound pod in `default` with one container and `pairs` as labels.
pub(crate) fn pod(name: &str, pairs: &[(&str, &str)]) -> Pod {
    let mut p = Pod::default();
    p.metadata.name = name.into();
    p.metadata.namespace = "default".into();
    p.metadata.uid = format!("{name}-uid");
    p.metadata.labels = labels(pairs);
    p.spec.containers = vec![Container {
        name: "c".into(),
        image: "busybox".into(),
        ..Default::default()
    }];
    p
}

pub(crate) fn on(mut p: Pod, node: &str) -> Pod {
    p.spec.node_name = node.into();
    p
}

pub(crate) fn requesting(mut p: Pod, cpu: &str, memory: &str) -> Pod {
    let r = &mut p.spec.containers[0].resources.requests;
    r.insert("cpu".into(), Quantity::from(cpu));
    r.insert("memory".into(), Quantity::from(memory));
    p
}

pub(crate) fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

pub(crate) fn bound_to(d: &Decision) -> Option<&str> {
    match d {
        Decision::Bind(p) => Some(p.node.as_str()),
        Decision::Unschedulable(_) => None,
    }
}

pub(crate) fn message(d: &Decision) -> String {
    match d {
        Decision::Bind(p) => panic!("bound to {}", p.node),
        Decision::Unschedulable(u) => u.message(),
    }
}

fn feasible(c: &Cluster<'_>, p: &Pod) -> Vec<String> {
    c.evaluate(p)
        .feasible
        .iter()
        .map(|s| s.node.to_string())
        .collect()
}

fn taint(text: &str) -> Taint {
    text.parse().expect("a taint")
}

const SEED_10: &str =
    include_str!("../../../drover-api/tests/data/10-deployment-antiaffinity.yaml");

#[test]
fn seed_10_places_one_replica_per_worker_and_leaves_two_pending_with_kube_schedulers_message() {
    // The pod template of the seed (a copy of
    // ../shared/manifests/10-deployment-antiaffinity.yaml), as a Pod.
    let (_, template) = SEED_10
        .split_once("  template:\n")
        .expect("the Deployment has a template");
    let body: Vec<&str> = template
        .lines()
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect();
    let yaml = format!("apiVersion: v1\nkind: Pod\n{}\n", body.join("\n"));
    let manifests = drover_api::parse_manifests(&yaml).expect("the seed parses");
    let drover_api::Manifest::Pod(template) = &manifests[0] else {
        panic!("not a pod: {manifests:?}");
    };
    assert!(
        drover_api::unknown_fields(template.as_ref()).is_empty(),
        "pod anti-affinity is a typed field now"
    );
    let replicas: Vec<Pod> = (0..6)
        .map(|i| {
            let mut p = (**template).clone();
            p.metadata.name = format!("on-every-node-deployment-{i}");
            p.metadata.uid = format!("uid-{i}");
            p
        })
        .collect();
    let mut nodes: Vec<Node> = (1..=4)
        .map(|i| node(&format!("worker-{i}"), &[("node-type", "worker")]))
        .collect();
    nodes.push(node("control-1", &[]));
    nodes.push(node("edge-1", &[("node-type", "edge")]));

    let mut cluster = Cluster::new(&nodes, []);
    let decisions = cluster.schedule_batch(&replicas, &mut rng(10));
    let mut placed: Vec<&str> = decisions.iter().filter_map(|(_, d)| bound_to(d)).collect();
    placed.sort();
    assert_eq!(placed, ["worker-1", "worker-2", "worker-3", "worker-4"]);
    let pending: Vec<String> = decisions
        .iter()
        .filter(|(_, d)| bound_to(d).is_none())
        .map(|(_, d)| message(d))
        .collect();
    let want = "0/6 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 4 node(s) didn't match pod anti-affinity rules.";
    assert_eq!(pending, [want, want]);

    // A fifth node labelled worker: one of the two lands there, the other
    // still waits (now 5 nodes with a replica).
    let mut nodes = nodes.clone();
    nodes.push(node("worker-5", &[("node-type", "worker")]));
    let bound: Vec<Pod> = decisions
        .iter()
        .filter_map(|(p, d)| bound_to(d).map(|n| on((*p).clone(), n)))
        .collect();
    let waiting: Vec<&Pod> = decisions
        .iter()
        .filter(|(_, d)| bound_to(d).is_none())
        .map(|(p, _)| *p)
        .collect();
    let mut cluster = Cluster::new(&nodes, &bound);
    let again = cluster.schedule_batch(waiting, &mut rng(11));
    assert_eq!(bound_to(&again[0].1), Some("worker-5"));
    assert_eq!(
        message(&again[1].1),
        "0/7 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 5 node(s) didn't match pod anti-affinity rules."
    );
}

#[test]
fn a_cordoned_node_takes_only_pods_that_tolerate_unschedulable() {
    let mut n = node("n1", &[]);
    n.spec.unschedulable = true;
    let mut p = pod("p", &[]);
    assert_eq!(node_unschedulable(&p.spec, &n), Some(Reason::Unschedulable));
    p.spec.tolerations = vec![Toleration {
        key: "node.kubernetes.io/unschedulable".into(),
        operator: Some(TolerationOperator::Exists),
        effect: Some(TaintEffect::NoSchedule),
        ..Default::default()
    }];
    assert_eq!(node_unschedulable(&p.spec, &n), None);
    // A NoExecute toleration does not tolerate the NoSchedule taint.
    p.spec.tolerations[0].effect = Some(TaintEffect::NoExecute);
    assert_eq!(node_unschedulable(&p.spec, &n), Some(Reason::Unschedulable));
    n.spec.unschedulable = false;
    assert_eq!(node_unschedulable(&p.spec, &n), None);
    let nodes = [node("a", &[]), {
        let mut b = node("b", &[]);
        b.spec.unschedulable = true;
        b
    }];
    let c = Cluster::new(&nodes, []);
    assert_eq!(feasible(&c, &pod("q", &[])), ["a"]);
}

#[test]
fn node_name_and_untolerated_taints_are_filters() {
    let n = node("n1", &[]);
    let mut p = pod("p", &[]);
    assert_eq!(node_name(&p.spec, &n), None);
    p.spec.node_name = "n2".into();
    assert_eq!(node_name(&p.spec, &n), Some(Reason::NodeName));
    p.spec.node_name = "n1".into();
    assert_eq!(node_name(&p.spec, &n), None);

    let mut t = node("t", &[]);
    t.spec.taints = vec![
        taint("soft=x:PreferNoSchedule"),
        taint("dedicated=gpu:NoSchedule"),
        taint("gone:NoExecute"),
    ];
    let mut p = pod("p", &[]);
    assert_eq!(
        taint_toleration(&p.spec, &t).map(|r| r.to_string()),
        Some("node(s) had untolerated taint {dedicated: gpu}".into())
    );
    p.spec.tolerations = vec![Toleration {
        key: "dedicated".into(),
        value: "gpu".into(),
        ..Default::default()
    }];
    assert_eq!(
        taint_toleration(&p.spec, &t).map(|r| r.to_string()),
        Some("node(s) had untolerated taint {gone: }".into())
    );
    p.spec.tolerations.push(Toleration {
        operator: Some(TolerationOperator::Exists),
        effect: Some(TaintEffect::NoExecute),
        ..Default::default()
    });
    assert_eq!(
        taint_toleration(&p.spec, &t),
        None,
        "PreferNoSchedule only scores"
    );
}

#[test]
fn node_affinity_prefilter_narrows_to_named_nodes_or_reports_a_conflict() {
    use drover_api::{
        Affinity, NodeSelector, NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm,
    };
    let field = |names: &[&str]| NodeSelectorRequirement {
        key: "metadata.name".into(),
        operator: Some(NodeSelectorOperator::In),
        values: names.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    let with_terms = |terms: Vec<NodeSelectorTerm>| {
        let mut p = pod("p", &[]);
        p.spec.affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: terms,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        p
    };
    let term = |fields: Vec<NodeSelectorRequirement>| NodeSelectorTerm {
        match_fields: fields,
        ..Default::default()
    };
    let nodes = [node("a", &[]), node("b", &[]), node("c", &[])];
    let c = Cluster::new(&nodes, []);
    let p = with_terms(vec![term(vec![field(&["a", "b"]), field(&["b", "c"])])]);
    assert_eq!(feasible(&c, &p), ["b"]);
    let u = c.evaluate(&p).unschedulable();
    assert_eq!(u.by_node["a"], [Reason::NotInPreFilterResult]);
    let p = with_terms(vec![term(vec![field(&["a"]), field(&["c"])])]);
    assert_eq!(
        message(&c.schedule(&p, &mut rng(1))),
        "0/3 nodes are available: pod affinity terms conflict."
    );
    // A term without names: every node is looked at.
    let p = with_terms(vec![
        term(vec![field(&["a"])]),
        NodeSelectorTerm {
            match_expressions: vec![NodeSelectorRequirement {
                key: HOSTNAME_LABEL.into(),
                operator: Some(NodeSelectorOperator::In),
                values: vec!["c".into()],
                ..Default::default()
            }],
            ..Default::default()
        },
    ]);
    assert_eq!(node_affinity_prefilter(&p.spec), Ok(None));
    assert_eq!(feasible(&c, &p), ["a", "c"]);
    let mut selected = pod("s", &[]);
    selected.spec.node_selector = labels(&[("disk", "ssd")]);
    let nodes = [node("a", &[("disk", "ssd")]), node("b", &[("disk", "hdd")])];
    let c = Cluster::new(&nodes, []);
    assert_eq!(feasible(&c, &selected), ["a"]);
    assert_eq!(
        message(&Cluster::new(&nodes[1..], []).schedule(&selected, &mut rng(1))),
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
    );
}

fn with_port(mut p: Pod, port: i32) -> Pod {
    p.spec.containers[0].ports = vec![ContainerPort {
        container_port: 80,
        host_port: Some(port),
        ..Default::default()
    }];
    p
}

#[test]
fn host_ports_and_resources_count_the_bound_pods() {
    let nodes = [node("a", &[]), node("b", &[])];
    let holder = on(with_port(pod("h", &[]), 8080), "a");
    let hog = on(requesting(pod("hog", &[]), "3", "7Gi"), "b");
    let c = Cluster::new(&nodes, [&holder, &hog]);
    let p = with_port(requesting(pod("p", &[]), "2", "2Gi"), 8080);
    let u = c.evaluate(&p).unschedulable();
    // NodePorts runs before NodeResourcesFit; every shortage is a reason.
    assert_eq!(u.by_node["a"], [Reason::Ports]);
    assert_eq!(
        u.by_node["b"],
        [
            Reason::Insufficient("cpu".into()),
            Reason::Insufficient("memory".into())
        ]
    );
    assert_eq!(
        u.message(),
        "0/2 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 node(s) didn't have free ports for the requested pod ports."
    );
    // A finished pod holds nothing; a nominated one holds its room.
    let mut done = hog.clone();
    done.status.phase = Some(PodPhase::Succeeded);
    let mut nominated = requesting(pod("nom", &[]), "3", "1Gi");
    nominated.status.nominated_node_name = "a".into();
    let c = Cluster::new(&nodes, [&done, &nominated]);
    assert_eq!(feasible(&c, &requesting(pod("p", &[]), "2", "1Gi")), ["b"]);
    // The pod count.
    let mut small = node("s", &[]);
    small
        .status
        .allocatable
        .insert("pods".into(), Quantity::from("1"));
    let one = on(pod("one", &[]), "s");
    let smalls = [small];
    let c = Cluster::new(&smalls, [&one]);
    assert_eq!(
        message(&c.schedule(&pod("p", &[]), &mut rng(1))),
        "0/1 nodes are available: 1 Too many pods."
    );
}

#[test]
fn least_allocated_and_balanced_allocation_follow_kube_schedulers_formulas() {
    // 4 CPUs, 8 GiB; 1 CPU and 2 GiB used; the pod asks 1 CPU and 2 GiB.
    let nodes = [node("a", &[])];
    let used = on(requesting(pod("u", &[]), "1", "2Gi"), "a");
    let c = Cluster::new(&nodes, [&used]);
    let p = requesting(pod("p", &[]), "1", "2Gi");
    let e = c.evaluate(&p);
    let s = e.feasible[0].plugins;
    // cpu (4000-2000)*100/4000 = 50, memory likewise 50.
    assert_eq!(s.resources_fit, 50);
    // Both half used: no deviation.
    assert_eq!(s.balanced_allocation, 100);
    // 1 CPU and 6 GiB: fractions 0.5 and 1.0 (capped), std 0.25.
    let q = requesting(pod("q", &[]), "1", "6Gi");
    assert_eq!(c.evaluate(&q).feasible[0].plugins.balanced_allocation, 75);
    // A pod without requests counts 100m and 200Mi for LeastAllocated and
    // is not scored by BalancedAllocation.
    let e = c.evaluate(&pod("b", &[]));
    let cpu = (4000 - 1100) * 100 / 4000;
    let mem = (8i128 * 1024 * 1024 * 1024 - 2 * 1024 * 1024 * 1024 - DEFAULT_MEMORY_REQUEST) * 100
        / (8i128 * 1024 * 1024 * 1024);
    assert_eq!(
        e.feasible[0].plugins.resources_fit,
        ((cpu + mem as i64) / 2)
    );
    assert_eq!(e.feasible[0].plugins.balanced_allocation, 0);
}

#[test]
fn the_emptier_node_wins_and_ties_are_broken_by_the_rng() {
    let nodes = [node("a", &[]), node("b", &[]), node("c", &[])];
    let busy = on(requesting(pod("u", &[]), "2", "4Gi"), "a");
    let c = Cluster::new(&nodes, [&busy]);
    let p = requesting(pod("p", &[]), "500m", "1Gi");
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..32 {
        let node = bound_to(&c.schedule(&p, &mut rng(seed))).map(str::to_string);
        seen.insert(node.expect("bound"));
    }
    // b and c tie; a is fuller. Both tied nodes are picked by some seed.
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["b", "c"]);
    // The same seed gives the same node.
    assert_eq!(c.schedule(&p, &mut rng(5)), c.schedule(&p, &mut rng(5)));
}

#[test]
fn prefer_no_schedule_taints_and_preferred_node_affinity_score() {
    use drover_api::{Affinity, NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm};
    let mut tainted = node("t", &[]);
    tainted.spec.taints = vec![taint("soft:PreferNoSchedule")];
    let nodes = [tainted, node("u", &[("disk", "ssd")])];
    let c = Cluster::new(&nodes, []);
    let e = c.evaluate(&pod("p", &[]));
    let by: BTreeMap<&str, PluginScores> = e.feasible.iter().map(|s| (s.node, s.plugins)).collect();
    assert_eq!(by["t"].taint_toleration, 0);
    assert_eq!(by["u"].taint_toleration, 100);
    assert_eq!(
        bound_to(&c.schedule(&pod("p", &[]), &mut rng(1))),
        Some("u")
    );

    let mut p = pod("p", &[]);
    p.spec.affinity = Some(Affinity {
        node_affinity: Some(NodeAffinity {
            preferred_during_scheduling_ignored_during_execution: vec![PreferredSchedulingTerm {
                weight: 30,
                preference: NodeSelectorTerm {
                    match_expressions: vec![NodeSelectorRequirement {
                        key: "disk".into(),
                        operator: Some(NodeSelectorOperator::In),
                        values: vec!["ssd".into()],
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    });
    p.spec.tolerations = vec![Toleration {
        operator: Some(TolerationOperator::Exists),
        ..Default::default()
    }];
    let e = c.evaluate(&p);
    let by: BTreeMap<&str, PluginScores> = e.feasible.iter().map(|s| (s.node, s.plugins)).collect();
    assert_eq!((by["t"].node_affinity, by["u"].node_affinity), (0, 100));
    assert_eq!(
        (by["t"].taint_toleration, by["u"].taint_toleration),
        (100, 100)
    );
}

#[test]
fn no_nodes_and_the_queue_order() {
    let c = Cluster::new(&[], []);
    assert_eq!(
        message(&c.schedule(&pod("p", &[]), &mut rng(1))),
        "no nodes available to schedule pods"
    );
    let mut low = pod("a-low", &[]);
    low.metadata.creation_timestamp = Some("2026-01-01T00:00:00Z".into());
    let mut old = pod("z-old", &[]);
    old.metadata.creation_timestamp = Some("2025-01-01T00:00:00Z".into());
    let mut critical = pod("m-critical", &[]);
    critical.spec.priority_class_name = "system-node-critical".into();
    critical.metadata.creation_timestamp = Some("2027-01-01T00:00:00Z".into());
    let order = queue_order(&[&low, &old, &critical], &Priorities::new([]));
    let names: Vec<&str> = order.iter().map(|p| p.metadata.name.as_str()).collect();
    assert_eq!(names, ["m-critical", "z-old", "a-low"]);
}

#[test]
fn a_cycle_looks_for_kube_schedulers_share_of_feasible_nodes_and_the_next_starts_after_it() {
    let many = |n: usize| -> Vec<Node> { (0..n).map(|i| node(&format!("n{i:05}"), &[])).collect() };
    let (n99, n150, n1000, n10000) = (many(99), many(150), many(1000), many(10_000));
    assert_eq!(Cluster::new(&n99, []).nodes_to_find(), 99);
    assert_eq!(Cluster::new(&n150, []).nodes_to_find(), 100);
    assert_eq!(Cluster::new(&n1000, []).nodes_to_find(), 420);
    assert_eq!(Cluster::new(&n10000, []).nodes_to_find(), 500);
    let all = Cluster::new(&n1000, []).with_percentage_of_nodes_to_score(100);
    assert_eq!(all.nodes_to_find(), 1000);
    let ten = Cluster::new(&n1000, []).with_percentage_of_nodes_to_score(10);
    assert_eq!(ten.nodes_to_find(), 100);

    let mut c = Cluster::new(&n1000, []);
    let e = c.evaluate(&pod("p", &[]));
    assert_eq!((e.feasible.len(), e.processed), (420, 420));
    assert_eq!(e.feasible[0].node, "n00000");
    let pods = [pod("a", &[]), pod("b", &[])];
    let d = c.schedule_batch(&pods, &mut rng(1));
    // The first cycle looked at n0..n419, the second starts at n420.
    let first: usize = bound_to(&d[0].1).expect("bound")[1..].parse().expect("n");
    let second: usize = bound_to(&d[1].1).expect("bound")[1..].parse().expect("n");
    assert!(first < 420, "{first}");
    assert!((420..840).contains(&second), "{second}");
}
