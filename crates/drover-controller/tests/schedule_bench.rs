//! Figures of the scheduler's batch pass (a benchmark, not a test: it
//! prints, never asserts on time). Run with
//!
//! ```sh
//! cargo test --release -p drover-controller --test schedule_bench -- --ignored --nocapture
//! ```
//!
//! - 10,000 pods of one Deployment (10m CPU each) onto 1,000 nodes;
//! - 1,000 replicas with required anti-affinity on `kubernetes.io/hostname`
//!   onto 1,000 and onto 10,000 nodes, and 10,000 onto 10,000 nodes;
//! - 10,000 pods spread over 3 zones (`maxSkew: 1`, `DoNotSchedule`) onto
//!   1,000 nodes;
//!
//! each with kube-scheduler's adaptive share of nodes to look at, then
//! with every node.

use std::time::Instant;

use drover_api::{
    Affinity, Container, LabelSelector, Node, Pod, PodAffinityTerm, PodAntiAffinity, Quantity,
    TopologySpreadConstraint, UnsatisfiableConstraintAction,
};
use drover_controller::schedule::{Cluster, Decision};
use rand::rngs::StdRng;
use rand::SeedableRng;

fn node(i: usize) -> Node {
    let mut n = Node::default();
    n.metadata.name = format!("node-{i:05}");
    for (k, v) in [
        ("kubernetes.io/hostname", n.metadata.name.clone()),
        ("topology.kubernetes.io/zone", format!("zone-{}", i % 3)),
        ("node-type", "worker".to_string()),
    ] {
        n.metadata.labels.insert(k.into(), v);
    }
    for (k, v) in [("cpu", "4"), ("memory", "8Gi"), ("pods", "110")] {
        n.status.allocatable.insert(k.into(), Quantity::from(v));
    }
    n
}

fn replica(app: &str, i: usize, anti: bool, spread: bool) -> Pod {
    let mut p = Pod::default();
    p.metadata.name = format!("{app}-{i:05}");
    p.metadata.namespace = "default".into();
    p.metadata.uid = format!("{app}-uid-{i}");
    p.metadata.labels.insert("app".into(), app.into());
    let mut c = Container {
        name: "c".into(),
        image: "busybox".into(),
        ..Default::default()
    };
    c.resources
        .requests
        .insert("cpu".into(), Quantity::from("10m"));
    p.spec.containers = vec![c];
    if spread {
        p.spec.topology_spread_constraints = vec![TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "topology.kubernetes.io/zone".into(),
            when_unsatisfiable: Some(UnsatisfiableConstraintAction::DoNotSchedule),
            label_selector: Some(LabelSelector {
                match_labels: [("app".to_string(), app.to_string())].into(),
                ..Default::default()
            }),
            ..Default::default()
        }];
    }
    if anti {
        p.spec.affinity = Some(Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: vec![PodAffinityTerm {
                    label_selector: Some(LabelSelector {
                        match_labels: [("app".to_string(), app.to_string())].into(),
                        ..Default::default()
                    }),
                    topology_key: "kubernetes.io/hostname".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    p
}

fn pass(label: &str, nodes: usize, pods: usize, (anti, spread): (bool, bool), percent: u32) {
    let nodes: Vec<Node> = (0..nodes).map(node).collect();
    let pending: Vec<Pod> = (0..pods).map(|i| replica("web", i, anti, spread)).collect();
    let start = Instant::now();
    let mut cluster = Cluster::new(&nodes, []).with_percentage_of_nodes_to_score(percent);
    let decisions = cluster.schedule_batch(&pending, &mut StdRng::seed_from_u64(24));
    let took = start.elapsed();
    let bound = decisions
        .iter()
        .filter(|(_, d)| matches!(d, Decision::Bind(_)))
        .count();
    let secs = took.as_secs_f64();
    println!(
        "{label}: {pods} pods onto {} nodes ({}): {bound} bound in {:.3} s ({:.0} pods/s, {:.1} µs per pod)",
        nodes.len(),
        if percent == 0 { "adaptive share of nodes".to_string() } else { format!("{percent} % of nodes") },
        secs,
        pods as f64 / secs,
        secs * 1e6 / pods as f64,
    );
}

#[test]
#[ignore = "a benchmark: run with --release -- --ignored --nocapture"]
fn batch_pass_figures() {
    for percent in [0, 100] {
        pass("deployment", 1_000, 10_000, (false, false), percent);
        pass("anti-affinity", 1_000, 1_000, (true, false), percent);
        pass("anti-affinity", 10_000, 1_000, (true, false), percent);
        pass("anti-affinity", 10_000, 10_000, (true, false), percent);
        pass("zone spread", 1_000, 10_000, (false, true), percent);
    }
}
