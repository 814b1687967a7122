//! Times one DaemonSet plan over 10,000 nodes, each with its pod.
use drover_api::{parse_manifests, Manifest, Node, Pod};
use drover_controller::daemon::{plan, PlanInput};
use drover_controller::Timestamp;
use rand::SeedableRng;

fn main() {
    let ds_yaml = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: scale, namespace: default, uid: ds-uid, generation: 1}\nspec:\n  selector: {matchLabels: {app: scale}}\n  template:\n    metadata: {labels: {app: scale}}\n    spec:\n      containers: [{name: c, image: local/busybox:1}]\n";
    let Manifest::DaemonSet(ds) = parse_manifests(ds_yaml).unwrap().remove(0) else {
        panic!()
    };
    let n = 10_000;
    let mut nodes = Vec::new();
    let mut pods = Vec::new();
    for i in 0..n {
        let node_yaml = format!("apiVersion: v1\nkind: Node\nmetadata: {{name: n{i}, uid: u{i}}}\nstatus:\n  conditions: [{{type: Ready, status: \"True\"}}]\n");
        let Manifest::Node(node) = parse_manifests(&node_yaml).unwrap().remove(0) else {
            panic!()
        };
        nodes.push(*node);
        let pod_yaml = format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: scale-{i}\n  namespace: default\n  uid: p{i}\n  creationTimestamp: \"2026-01-01T00:00:00Z\"\n  labels: {{app: scale}}\n  ownerReferences: [{{apiVersion: apps/v1, kind: DaemonSet, name: scale, uid: ds-uid, controller: true}}]\nspec:\n  nodeName: n{i}\n  containers: [{{name: c, image: local/busybox:1}}]\nstatus:\n  phase: Running\n  conditions: [{{type: Ready, status: \"True\", lastTransitionTime: \"2026-01-01T00:00:00Z\"}}]\n");
        let Manifest::Pod(p) = parse_manifests(&pod_yaml).unwrap().remove(0) else {
            panic!()
        };
        pods.push(*p);
    }
    let now = Timestamp::from(std::time::SystemTime::now());
    let nr: Vec<&Node> = nodes.iter().collect();
    let pr: Vec<&Pod> = pods.iter().collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let mut best = f64::MAX;
    for _ in 0..10 {
        let t = std::time::Instant::now();
        let input = PlanInput::new(&ds, nr.iter().copied(), pr.iter().copied(), now);
        let p = plan(&input, &mut rng);
        std::hint::black_box(&p);
        best = best.min(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!("plan over {n} nodes: best of 10 = {best:.1} ms");
}
