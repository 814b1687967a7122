//! Why a node is not feasible for a pod, in kube-scheduler's words, and
//! the message of a pod that fits nowhere (its `FitError`): `0/6 nodes are
//! available: 2 node(s) didn't match Pod's node affinity/selector, 4
//! node(s) didn't match pod anti-affinity rules.` — one count per distinct
//! reason, the `"<count> <reason>"` strings sorted as strings (Go's
//! `sort.Strings`, so `Pod's` sorts before `pod` and `10 …` before `2 …`),
//! joined by `, `, with a final period.

use std::collections::BTreeMap;
use std::fmt;

/// One reason a filter plugin gives for a node (the plugin's `ErrReason…`
/// constants of kube-scheduler).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    /// NodeUnschedulable: the node is cordoned and the pod does not
    /// tolerate `node.kubernetes.io/unschedulable:NoSchedule`.
    Unschedulable,
    /// NodeName: the pod names another node.
    NodeName,
    /// TaintToleration: the first `NoSchedule`/`NoExecute` taint the pod
    /// does not tolerate (key, value).
    UntoleratedTaint(String, String),
    /// NodeAffinity: the node does not match the pod's `nodeSelector` or
    /// required node affinity.
    NodeAffinity,
    /// NodeAffinity's PreFilter narrowed the nodes to those its
    /// `matchFields` name, and this node is not one of them.
    NotInPreFilterResult,
    /// NodePorts: a host port the pod asks for is taken.
    Ports,
    /// NodeResourcesFit: the node runs as many pods as it allows.
    TooManyPods,
    /// NodeResourcesFit: not enough of this resource is left.
    Insufficient(String),
    /// PodTopologySpread: the node lacks a constraint's topology label.
    SpreadLabelMissing,
    /// PodTopologySpread: placing the pod there would exceed `maxSkew`.
    Spread,
    /// InterPodAffinity: a required affinity term does not hold.
    PodAffinity,
    /// InterPodAffinity: a required anti-affinity term of the pod is broken.
    PodAntiAffinity,
    /// InterPodAffinity: the pod would break a running pod's required
    /// anti-affinity.
    ExistingAntiAffinity,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Unschedulable => f.write_str("node(s) were unschedulable"),
            Reason::NodeName => f.write_str("node(s) didn't match the requested node name"),
            Reason::UntoleratedTaint(key, value) => {
                write!(f, "node(s) had untolerated taint {{{key}: {value}}}")
            }
            Reason::NodeAffinity => {
                f.write_str("node(s) didn't match Pod's node affinity/selector")
            }
            Reason::NotInPreFilterResult => {
                f.write_str("node(s) didn't satisfy plugin(s) [NodeAffinity]")
            }
            Reason::Ports => {
                f.write_str("node(s) didn't have free ports for the requested pod ports")
            }
            Reason::TooManyPods => f.write_str("Too many pods"),
            Reason::Insufficient(resource) => write!(f, "Insufficient {resource}"),
            Reason::SpreadLabelMissing => f.write_str(
                "node(s) didn't match pod topology spread constraints (missing required label)",
            ),
            Reason::Spread => f.write_str("node(s) didn't match pod topology spread constraints"),
            Reason::PodAffinity => f.write_str("node(s) didn't match pod affinity rules"),
            Reason::PodAntiAffinity => f.write_str("node(s) didn't match pod anti-affinity rules"),
            Reason::ExistingAntiAffinity => {
                f.write_str("node(s) didn't satisfy existing pods anti-affinity rules")
            }
        }
    }
}

/// A pod that fits no node: why, node by node, and kube-scheduler's
/// message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unschedulable {
    /// How many nodes there were.
    pub nodes: usize,
    /// The reasons of each node, by node name (one filter's reasons: the
    /// first filter that failed; NodeResourcesFit may give several).
    /// Empty when the pod failed before any node was looked at
    /// (`prefilter`).
    pub by_node: BTreeMap<String, Vec<Reason>>,
    /// A reason that holds for every node, found before filtering (the
    /// node-name terms of the required node affinity conflict).
    pub prefilter: Option<String>,
}

impl Unschedulable {
    /// How many nodes gave each reason.
    pub fn histogram(&self) -> BTreeMap<String, usize> {
        let mut out: BTreeMap<String, usize> = BTreeMap::new();
        for reasons in self.by_node.values() {
            for r in reasons {
                *out.entry(r.to_string()).or_default() += 1;
            }
        }
        out
    }

    /// kube-scheduler's message (`PodScheduled=False`, `Unschedulable`,
    /// and the `FailedScheduling` event), without the preemption part.
    pub fn message(&self) -> String {
        if self.nodes == 0 {
            return "no nodes available to schedule pods".to_string();
        }
        let mut out = format!("0/{} nodes are available:", self.nodes);
        if let Some(p) = &self.prefilter {
            out.push_str(&format!(" {p}."));
            return out;
        }
        let mut parts: Vec<String> = self
            .histogram()
            .into_iter()
            .map(|(reason, count)| format!("{count} {reason}"))
            .collect();
        // Go's sort.Strings: byte order of the whole "<count> <reason>".
        parts.sort();
        if !parts.is_empty() {
            out.push_str(&format!(" {}.", parts.join(", ")));
        }
        out
    }
}

impl fmt::Display for Unschedulable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_as_kube_schedulers() {
        let cases = [
            (Reason::Unschedulable, "node(s) were unschedulable"),
            (
                Reason::NodeName,
                "node(s) didn't match the requested node name",
            ),
            (
                Reason::UntoleratedTaint("dedicated".into(), "gpu".into()),
                "node(s) had untolerated taint {dedicated: gpu}",
            ),
            (
                Reason::NodeAffinity,
                "node(s) didn't match Pod's node affinity/selector",
            ),
            (
                Reason::Ports,
                "node(s) didn't have free ports for the requested pod ports",
            ),
            (Reason::TooManyPods, "Too many pods"),
            (Reason::Insufficient("cpu".into()), "Insufficient cpu"),
            (
                Reason::Spread,
                "node(s) didn't match pod topology spread constraints",
            ),
            (
                Reason::PodAffinity,
                "node(s) didn't match pod affinity rules",
            ),
            (
                Reason::PodAntiAffinity,
                "node(s) didn't match pod anti-affinity rules",
            ),
            (
                Reason::ExistingAntiAffinity,
                "node(s) didn't satisfy existing pods anti-affinity rules",
            ),
        ];
        for (reason, text) in cases {
            assert_eq!(reason.to_string(), text);
        }
    }

    #[test]
    fn the_message_sorts_count_and_reason_as_strings() {
        let mut by_node = BTreeMap::new();
        for i in 0..10 {
            by_node.insert(format!("a{i}"), vec![Reason::PodAntiAffinity]);
        }
        for i in 0..2 {
            by_node.insert(format!("b{i}"), vec![Reason::NodeAffinity]);
        }
        by_node.insert(
            "c".into(),
            vec![Reason::TooManyPods, Reason::Insufficient("cpu".into())],
        );
        let u = Unschedulable {
            nodes: 13,
            by_node,
            prefilter: None,
        };
        // "10 …" sorts before "2 …", as Go's sort.Strings puts them.
        assert_eq!(
            u.message(),
            "0/13 nodes are available: 1 Insufficient cpu, 1 Too many pods, 10 node(s) didn't match pod anti-affinity rules, 2 node(s) didn't match Pod's node affinity/selector."
        );
        let none = Unschedulable {
            nodes: 0,
            by_node: BTreeMap::new(),
            prefilter: None,
        };
        assert_eq!(none.message(), "no nodes available to schedule pods");
        let conflict = Unschedulable {
            nodes: 3,
            by_node: BTreeMap::new(),
            prefilter: Some("pod affinity terms conflict".into()),
        };
        assert_eq!(
            conflict.message(),
            "0/3 nodes are available: pod affinity terms conflict."
        );
    }
}
