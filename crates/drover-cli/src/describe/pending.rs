//! What `describe pod` says of a pod that waits for a node, beyond
//! kubectl's layout (which leaves it to the `FailedScheduling` event): the
//! scheduler it waits for, and, when that is drover's own
//! (`default-scheduler`), every node that does not fit it with the
//! scheduler's reasons, from the same planner the scheduler runs
//! (`drover_controller::schedule`), as `describe ds` lists the nodes
//! without a daemon pod.

use super::layout::W;
use drover_api::{Node, Pod};
use drover_controller::schedule::{is_pending, scheduler_name, Cluster, DEFAULT_SCHEDULER};

/// Why a pod waits unbound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// The scheduler it names (`default-scheduler` when none).
    pub scheduler: String,
    /// For drover's scheduler: each node that does not fit, with its
    /// reasons (by node name).
    pub nodes: Vec<(String, Vec<String>)>,
    /// How many nodes the pod fits now (it is bound at the scheduler's
    /// next pass).
    pub fits: usize,
}

/// Why `pod` waits, judged on `nodes` and `pods` (every namespace's);
/// `None` for a pod that is bound, being deleted, or a DaemonSet's (whose
/// controller binds it: `describe ds` says why).
pub fn waiting(pod: &Pod, nodes: &[Node], pods: &[Pod]) -> Option<Waiting> {
    if !pod.spec.node_name.is_empty() || pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let named = scheduler_name(pod);
    if !matches!(named, "" | DEFAULT_SCHEDULER) {
        return Some(Waiting {
            scheduler: named.to_string(),
            nodes: Vec::new(),
            fits: 0,
        });
    }
    if !is_pending(pod) {
        return None;
    }
    let others = pods.iter().filter(|p| p.metadata.uid != pod.metadata.uid);
    let e = Cluster::new(nodes, others)
        .with_percentage_of_nodes_to_score(100)
        .evaluate(pod);
    let why = e.unschedulable();
    Some(Waiting {
        scheduler: DEFAULT_SCHEDULER.to_string(),
        nodes: why
            .by_node
            .into_iter()
            .map(|(n, reasons)| (n, reasons.iter().map(ToString::to_string).collect()))
            .collect(),
        fits: e.feasible.len(),
    })
}

/// The section, after the tolerations.
pub(super) fn section(w: &mut W, waiting: &Waiting) {
    if waiting.scheduler != DEFAULT_SCHEDULER {
        w.w(
            0,
            format!(
                "Scheduler:\t{} (not drover's: the pod waits for that scheduler to bind it)\n",
                waiting.scheduler
            ),
        );
        return;
    }
    w.w(0, format!("Scheduler:\t{DEFAULT_SCHEDULER}\n"));
    if waiting.nodes.is_empty() {
        w.w(0, "Nodes that do not fit:\t<none>\n");
        return;
    }
    w.flush();
    w.w(0, "Nodes that do not fit:\n  Node\tReason\n");
    w.w(1, "----\t------\n");
    for (node, reasons) in &waiting.nodes {
        for (i, r) in reasons.iter().enumerate() {
            let name = if i == 0 { node.as_str() } else { "" };
            w.w(1, format!("{name}\t{r}\n"));
        }
    }
    w.flush();
}

#[cfg(test)]
mod tests {
    use super::super::describe_pod;
    use super::super::fixtures::{node, now, pod};
    use super::*;

    fn seed_10_pod(name: &str, node_name: &str) -> Pod {
        pod(&format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, uid: {name}-uid, labels: {{app: distributed-agent}}}}
spec:
  nodeName: "{node_name}"
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {{matchLabels: {{app: distributed-agent}}}}
        topologyKey: kubernetes.io/hostname
  nodeSelector: {{node-type: worker}}
  containers: [{{name: agent, image: busybox}}]
status: {{phase: Pending}}
"#
        ))
    }

    #[test]
    fn a_pending_pod_lists_each_node_that_does_not_fit_and_why() {
        let nodes = vec![
            node("apiVersion: v1\nkind: Node\nmetadata: {name: w1, labels: {node-type: worker, kubernetes.io/hostname: w1}}\n"),
            node("apiVersion: v1\nkind: Node\nmetadata: {name: c1, labels: {kubernetes.io/hostname: c1}}\n"),
        ];
        let running = seed_10_pod("a", "w1");
        let waiting_pod = seed_10_pod("b", "");
        let pods = vec![running, waiting_pod.clone()];
        let w = waiting(&waiting_pod, &nodes, &pods).expect("waits");
        assert_eq!(w.fits, 0);
        let text = describe_pod(&waiting_pod, &[], Some(&w), now());
        let tail = &text[text.find("Node-Selectors").expect("selectors")..];
        assert_eq!(
            tail,
            "\
Node-Selectors:   node-type=worker
Tolerations:      <none>
Scheduler:        default-scheduler
Nodes that do not fit:
  Node  Reason
  ----  ------
  c1    node(s) didn't match Pod's node affinity/selector
  w1    node(s) didn't match pod anti-affinity rules
Events:  <none>
",
            "\n{text}"
        );
        // Bound, it waits for nothing.
        assert_eq!(waiting(&pods[0], &nodes, &pods), None);
    }

    #[test]
    fn a_pod_for_another_scheduler_says_which() {
        let mut p = seed_10_pod("b", "");
        p.spec
            .extra
            .insert("schedulerName".into(), "my-scheduler".into());
        let w = waiting(&p, &[], &[]).expect("waits");
        let text = describe_pod(&p, &[], Some(&w), now());
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("Scheduler:"))
            .expect("a Scheduler line");
        assert_eq!(
            line.trim(),
            "my-scheduler (not drover's: the pod waits for that scheduler to bind it)",
            "{text}"
        );
    }
}
