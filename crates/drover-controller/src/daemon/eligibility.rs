//! Which nodes should run a DaemonSet's pod, and why the others should not:
//! Kubernetes' `NodeShouldRunDaemonPod`.
//!
//! The pod the DaemonSet would create on a node (its template, with the
//! tolerations every daemon pod gets, see
//! [`drover_api::taints::daemon_pod_tolerations`]) is checked against the
//! node:
//!
//! 1. the template's `spec.nodeName`, when set, must be the node;
//! 2. the required node affinity (`nodeSelector` and
//!    `requiredDuringSchedulingIgnoredDuringExecution`) must match the
//!    node's labels and name;
//! 3. every `NoSchedule` and `NoExecute` taint must be tolerated.
//!
//! The verdict is two booleans, as in Kubernetes:
//!
//! | | should run | should continue running |
//! |---|---|---|
//! | everything holds | yes | yes |
//! | 1 or 2 fails (e.g. labels no longer match) | no | no: existing pods are deleted |
//! | only `NoSchedule` taints are not tolerated | no | yes: no new pod, an existing one stays |
//! | a `NoExecute` taint is not tolerated | no | no: existing pods are deleted |
//!
//! Node readiness enters through taints, as in Kubernetes: a node that
//! stops heartbeating gets `node.kubernetes.io/unreachable:NoSchedule`
//! (not tolerated: no new daemon pods) and `…:NoExecute` (tolerated: its
//! daemon pods stay). A cordoned node's `node.kubernetes.io/unschedulable`
//! taint is tolerated, so cordoned nodes still run daemon pods.
//!
//! [`NodeEligibility::reasons`] says why, for `describe ds`: every failed
//! check, not only the first.

use std::fmt;

use drover_api::node_affinity::{NodeMismatch, RequiredNodeAffinity};
use drover_api::taints::{
    add_daemon_pod_tolerations, untolerated, with_effects, TAINT_NODE_DISK_PRESSURE,
    TAINT_NODE_MEMORY_PRESSURE, TAINT_NODE_NETWORK_UNAVAILABLE, TAINT_NODE_NOT_READY,
    TAINT_NODE_PID_PRESSURE, TAINT_NODE_UNREACHABLE, TAINT_NODE_UNSCHEDULABLE,
};
use drover_api::{DaemonSet, Node, PodSpec, Taint, TaintEffect};

/// A reason why a node should not get a (new) daemon pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Ineligibility {
    /// The template names another node in `spec.nodeName`.
    NodeName {
        /// The node the template names.
        required: String,
    },
    /// The node does not satisfy the required node affinity
    /// (`nodeSelector` or `nodeAffinity`).
    NodeAffinity(NodeMismatch),
    /// The node has a `NoSchedule` or `NoExecute` taint the daemon pod does
    /// not tolerate.
    Taint(Taint),
}

impl Ineligibility {
    /// Whether this reason also removes an existing pod (everything but an
    /// untolerated `NoSchedule` taint).
    pub fn evicts(&self) -> bool {
        match self {
            Ineligibility::Taint(taint) => taint.effect == Some(TaintEffect::NoExecute),
            Ineligibility::NodeName { .. } | Ineligibility::NodeAffinity(_) => true,
        }
    }
}

impl fmt::Display for Ineligibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ineligibility::NodeName { required } => {
                write!(f, "the pod template requires spec.nodeName={required}")
            }
            Ineligibility::NodeAffinity(mismatch) => write!(f, "{mismatch}"),
            Ineligibility::Taint(taint) => {
                let what = match taint.key.as_str() {
                    TAINT_NODE_UNREACHABLE => Some("the node is unreachable"),
                    TAINT_NODE_NOT_READY => Some("the node is not ready"),
                    TAINT_NODE_UNSCHEDULABLE => Some("the node is cordoned"),
                    TAINT_NODE_MEMORY_PRESSURE => Some("the node is short of memory"),
                    TAINT_NODE_DISK_PRESSURE => Some("the node is short of disk"),
                    TAINT_NODE_PID_PRESSURE => Some("the node is short of process IDs"),
                    TAINT_NODE_NETWORK_UNAVAILABLE => Some("the node's network is unavailable"),
                    _ => None,
                };
                if let Some(what) = what {
                    write!(f, "{what}: ")?;
                }
                write!(f, "taint {taint} is not tolerated")
            }
        }
    }
}

/// The verdict for one node (Kubernetes' `shouldRun`,
/// `shouldContinueRunning`) with its reasons.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeEligibility {
    /// The node should run a daemon pod: one is created when it has none.
    pub should_run: bool,
    /// A daemon pod already on the node may stay.
    pub should_continue_running: bool,
    /// Why not, when `should_run` is false; empty otherwise.
    pub reasons: Vec<Ineligibility>,
    /// The node should run the pod but it does not fit there (resources,
    /// host ports): its pod waits unbound until it does ([`super::fit`]).
    /// Checked only where no pod of the DaemonSet is bound.
    pub misfits: Vec<super::fit::Misfit>,
    /// Pods of lower priority to preempt so that the pod fits (it is
    /// bound once they are gone).
    pub preempt: Vec<super::fit::Victim>,
}

impl fmt::Display for NodeEligibility {
    /// The reasons joined by `; `, or `eligible`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reasons.is_empty() {
            return f.write_str("eligible");
        }
        for (i, reason) in self.reasons.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{reason}")?;
        }
        if self.should_continue_running {
            f.write_str(" (an existing pod may stay)")?;
        }
        Ok(())
    }
}

/// A DaemonSet's placement rule, prepared once and checked against many
/// nodes. Holds the spec of the pod the DaemonSet creates: the template's,
/// with the daemon tolerations added.
#[derive(Debug, Clone)]
pub struct Eligibility {
    spec: PodSpec,
}

const SCHEDULING_EFFECTS: [TaintEffect; 2] = [TaintEffect::NoSchedule, TaintEffect::NoExecute];

impl Eligibility {
    /// The placement rule of a DaemonSet.
    pub fn new(ds: &DaemonSet) -> Self {
        let mut spec = ds.spec.template.spec.clone();
        add_daemon_pod_tolerations(&mut spec);
        Eligibility { spec }
    }

    /// The daemon pod's spec: the template's with the daemon tolerations
    /// (`spec.nodeName` is the template's, usually empty).
    pub fn pod_spec(&self) -> &PodSpec {
        &self.spec
    }

    /// Whether the node should run the daemon pod, and why not.
    pub fn evaluate(&self, node: &Node) -> NodeEligibility {
        let mut reasons = Vec::new();
        let required = &self.spec.node_name;
        if !required.is_empty() && *required != node.metadata.name {
            reasons.push(Ineligibility::NodeName {
                required: required.clone(),
            });
        }
        let affinity = RequiredNodeAffinity::from_pod_spec(&self.spec);
        if !affinity.matches(node) {
            reasons.extend(
                affinity
                    .explain(node)
                    .into_iter()
                    .map(Ineligibility::NodeAffinity),
            );
        }
        reasons.extend(
            untolerated(
                &node.spec.taints,
                &self.spec.tolerations,
                with_effects(&SCHEDULING_EFFECTS),
            )
            .cloned()
            .map(Ineligibility::Taint),
        );
        NodeEligibility {
            should_run: reasons.is_empty(),
            should_continue_running: !reasons.iter().any(Ineligibility::evicts),
            reasons,
            misfits: Vec::new(),
            preempt: Vec::new(),
        }
    }
}

/// Kubernetes' `NodeShouldRunDaemonPod` for one node; build an
/// [`Eligibility`] once to check many.
pub fn node_should_run_daemon_pod(ds: &DaemonSet, node: &Node) -> NodeEligibility {
    Eligibility::new(ds).evaluate(node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::{
        Affinity, NodeAffinity, NodeSelector, NodeSelectorOperator, NodeSelectorRequirement,
        NodeSelectorTerm, Toleration, TolerationOperator,
    };

    fn node(name: &str, labels: &[(&str, &str)], taints: &[&str]) -> Node {
        let mut node = Node::default();
        node.metadata.name = name.into();
        node.metadata.labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        node.spec.taints = taints.iter().map(|t| t.parse().unwrap()).collect();
        node
    }

    fn ds() -> DaemonSet {
        let mut ds = DaemonSet::default();
        ds.metadata.name = "agent".into();
        ds
    }

    #[test]
    fn plain_node_is_eligible() {
        let verdict = node_should_run_daemon_pod(&ds(), &node("n1", &[], &[]));
        assert_eq!(
            verdict,
            NodeEligibility {
                should_run: true,
                should_continue_running: true,
                reasons: vec![],
                misfits: vec![],
                preempt: vec![]
            }
        );
        assert_eq!(verdict.to_string(), "eligible");
    }

    #[test]
    fn node_selector_mismatch_evicts() {
        let mut ds = ds();
        ds.spec.template.spec.node_selector = [("disk".to_string(), "ssd".to_string())].into();
        let verdict = node_should_run_daemon_pod(&ds, &node("n1", &[("disk", "hdd")], &[]));
        assert!(!verdict.should_run && !verdict.should_continue_running);
        assert_eq!(
            verdict.to_string(),
            "nodeSelector requires disk=ssd, but the node has disk=hdd"
        );
        assert!(node_should_run_daemon_pod(&ds, &node("n1", &[("disk", "ssd")], &[])).should_run);
    }

    #[test]
    fn node_affinity_mismatch_evicts() {
        let mut ds = ds();
        ds.spec.template.spec.affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: vec![NodeSelectorRequirement {
                            key: "zone".into(),
                            operator: Some(NodeSelectorOperator::In),
                            values: vec!["a".into()],
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        let verdict = node_should_run_daemon_pod(&ds, &node("n1", &[("zone", "b")], &[]));
        assert!(!verdict.should_run && !verdict.should_continue_running);
        assert!(matches!(
            verdict.reasons[..],
            [Ineligibility::NodeAffinity(_)]
        ));
        assert!(verdict.to_string().contains("zone In [a]"), "{verdict}");
    }

    #[test]
    fn template_node_name_pins_the_pod() {
        let mut ds = ds();
        ds.spec.template.spec.node_name = "n2".into();
        let verdict = node_should_run_daemon_pod(&ds, &node("n1", &[], &[]));
        assert!(!verdict.should_continue_running);
        assert_eq!(
            verdict.to_string(),
            "the pod template requires spec.nodeName=n2"
        );
        assert!(node_should_run_daemon_pod(&ds, &node("n2", &[], &[])).should_run);
    }

    #[test]
    fn no_schedule_keeps_no_execute_evicts() {
        let ds = ds();
        let verdict = node_should_run_daemon_pod(&ds, &node("n1", &[], &["gpu=yes:NoSchedule"]));
        assert!(!verdict.should_run && verdict.should_continue_running);
        assert_eq!(
            verdict.to_string(),
            "taint gpu=yes:NoSchedule is not tolerated (an existing pod may stay)"
        );
        let verdict = node_should_run_daemon_pod(&ds, &node("n1", &[], &["gpu=yes:NoExecute"]));
        assert!(!verdict.should_run && !verdict.should_continue_running);
        let verdict =
            node_should_run_daemon_pod(&ds, &node("n1", &[], &["gpu=yes:PreferNoSchedule"]));
        assert!(verdict.should_run);
    }

    #[test]
    fn template_tolerations_count() {
        let mut ds = ds();
        ds.spec.template.spec.tolerations = vec![Toleration {
            key: "gpu".into(),
            operator: Some(TolerationOperator::Exists),
            ..Default::default()
        }];
        let n = node("n1", &[], &["gpu=yes:NoSchedule", "gpu=no:NoExecute"]);
        assert!(node_should_run_daemon_pod(&ds, &n).should_run);
    }

    #[test]
    fn node_problems_follow_kubernetes() {
        let ds = ds();
        // Unreachable: no new pod, the existing one stays.
        let n = node(
            "n1",
            &[],
            &[
                "node.kubernetes.io/unreachable:NoSchedule",
                "node.kubernetes.io/unreachable:NoExecute",
            ],
        );
        let verdict = node_should_run_daemon_pod(&ds, &n);
        assert!(!verdict.should_run && verdict.should_continue_running);
        assert_eq!(
            verdict.reasons[0].to_string(),
            "the node is unreachable: taint node.kubernetes.io/unreachable:NoSchedule is not tolerated"
        );
        // Cordoned and under pressure: daemon pods tolerate it.
        let n = node(
            "n1",
            &[],
            &[
                "node.kubernetes.io/unschedulable:NoSchedule",
                "node.kubernetes.io/memory-pressure:NoSchedule",
                "node.kubernetes.io/not-ready:NoExecute",
            ],
        );
        assert!(node_should_run_daemon_pod(&ds, &n).should_run);
        // Network unavailable: only host-network daemons tolerate it.
        let n = node(
            "n1",
            &[],
            &["node.kubernetes.io/network-unavailable:NoSchedule"],
        );
        let verdict = node_should_run_daemon_pod(&ds, &n);
        assert!(!verdict.should_run && verdict.should_continue_running);
        assert!(verdict
            .to_string()
            .starts_with("the node's network is unavailable"));
        let mut host = ds.clone();
        host.spec.template.spec.host_network = true;
        assert!(node_should_run_daemon_pod(&host, &n).should_run);
    }

    #[test]
    fn node_problem_taints_say_what_they_mean() {
        for (key, what) in [
            (TAINT_NODE_UNREACHABLE, "the node is unreachable: "),
            (TAINT_NODE_NOT_READY, "the node is not ready: "),
            (TAINT_NODE_UNSCHEDULABLE, "the node is cordoned: "),
            (TAINT_NODE_MEMORY_PRESSURE, "the node is short of memory: "),
            (TAINT_NODE_DISK_PRESSURE, "the node is short of disk: "),
            (
                TAINT_NODE_PID_PRESSURE,
                "the node is short of process IDs: ",
            ),
            (
                TAINT_NODE_NETWORK_UNAVAILABLE,
                "the node's network is unavailable: ",
            ),
            ("gpu", ""),
        ] {
            let taint: Taint = format!("{key}:NoSchedule").parse().unwrap();
            assert_eq!(
                Ineligibility::Taint(taint).to_string(),
                format!("{what}taint {key}:NoSchedule is not tolerated")
            );
        }
        // A daemon pod tolerates not-ready:NoExecute, not NoSchedule.
        let n = node("n1", &[], &["node.kubernetes.io/not-ready:NoSchedule"]);
        let verdict = node_should_run_daemon_pod(&ds(), &n);
        assert!(!verdict.should_run && verdict.should_continue_running);
        assert!(
            verdict.to_string().starts_with("the node is not ready: "),
            "{verdict}"
        );
    }

    #[test]
    fn every_reason_is_listed() {
        let mut ds = ds();
        ds.spec.template.spec.node_selector = [("a".to_string(), "1".to_string())].into();
        let n = node("n1", &[], &["x:NoSchedule", "y:NoExecute"]);
        let verdict = node_should_run_daemon_pod(&ds, &n);
        assert_eq!(verdict.reasons.len(), 3);
        assert!(!verdict.should_continue_running);
    }
}
