//! The filter plugins that look at one node and the pod alone, as
//! kube-scheduler's: NodeUnschedulable, NodeName, TaintToleration,
//! NodeAffinity (with its PreFilter on `metadata.name` fields), NodePorts
//! and NodeResourcesFit. Each answers the reasons the node is not feasible
//! (none: it is). The filters that need the other pods (PodTopologySpread,
//! InterPodAffinity) are in `spread.rs` and `interpod.rs`.

use std::collections::BTreeSet;

use drover_api::node_affinity::{requirement_matches, term_matches, RequiredNodeAffinity};
use drover_api::taints::{find_untolerated, is_tolerated, with_effects, TAINT_NODE_UNSCHEDULABLE};
use drover_api::{Node, NodeSelectorOperator, NodeSelectorTerm, PodSpec, Taint, TaintEffect};

use super::cluster::{Demand, NodeInfo};
use super::reasons::Reason;
use crate::daemon::fit::overlaps;

/// NodeUnschedulable: a cordoned node (`spec.unschedulable`) takes only
/// pods that tolerate `node.kubernetes.io/unschedulable:NoSchedule`.
pub fn node_unschedulable(spec: &PodSpec, node: &Node) -> Option<Reason> {
    if !node.spec.unschedulable {
        return None;
    }
    let taint = Taint {
        key: TAINT_NODE_UNSCHEDULABLE.to_string(),
        effect: Some(TaintEffect::NoSchedule),
        ..Default::default()
    };
    (!is_tolerated(&taint, &spec.tolerations)).then_some(Reason::Unschedulable)
}

/// NodeName: a pod that names a node fits only that node.
pub fn node_name(spec: &PodSpec, node: &Node) -> Option<Reason> {
    (!spec.node_name.is_empty() && spec.node_name != node.metadata.name).then_some(Reason::NodeName)
}

/// TaintToleration: the first `NoSchedule` or `NoExecute` taint of the
/// node that the pod does not tolerate.
pub fn taint_toleration(spec: &PodSpec, node: &Node) -> Option<Reason> {
    if node.spec.taints.is_empty() {
        return None;
    }
    let effects = [TaintEffect::NoSchedule, TaintEffect::NoExecute];
    find_untolerated(&node.spec.taints, &spec.tolerations, with_effects(&effects))
        .map(|t| Reason::UntoleratedTaint(t.key.clone(), t.value.clone()))
}

/// NodeAffinity: the node must match the pod's `nodeSelector` and required
/// node affinity.
pub fn node_affinity(affinity: &RequiredNodeAffinity<'_>, node: &Node) -> Option<Reason> {
    (!affinity.matches(node)).then_some(Reason::NodeAffinity)
}

/// NodeAffinity's PreFilter: when every term of the required node
/// affinity names nodes by `matchFields` `metadata.name In`, only those
/// nodes are looked at (`Ok(Some(names))`; the others are reported as not
/// satisfying NodeAffinity); when the names of every term cancel out, the
/// pod fits nowhere (`Err`, kube-scheduler's "pod affinity terms
/// conflict"). `Ok(None)`: every node is looked at.
pub fn node_affinity_prefilter(spec: &PodSpec) -> Result<Option<BTreeSet<&str>>, String> {
    let Some(required) = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
    else {
        return Ok(None);
    };
    let mut names: Option<BTreeSet<&str>> = None;
    for term in &required.node_selector_terms {
        let mut term_names: Option<BTreeSet<&str>> = None;
        for r in &term.match_fields {
            if r.key == drover_api::node_affinity::NODE_FIELD_METADATA_NAME
                && r.operator == Some(NodeSelectorOperator::In)
            {
                let s: BTreeSet<&str> = r.values.iter().map(String::as_str).collect();
                term_names = Some(match term_names {
                    None => s,
                    Some(t) => t.intersection(&s).copied().collect(),
                });
            }
        }
        let Some(t) = term_names else {
            // A term without node names: every node may match it.
            return Ok(None);
        };
        names.get_or_insert_with(BTreeSet::new).extend(t);
    }
    match names {
        Some(n) if n.is_empty() => Err("pod affinity terms conflict".to_string()),
        other => Ok(other),
    }
}

/// NodePorts: a host port the pod asks for is held on the node (same port
/// and protocol, overlapping host IPs).
pub(crate) fn node_ports(demand: &Demand, node: &NodeInfo<'_>) -> Option<Reason> {
    let taken = demand.ports.iter().any(|(port, protocol, ip)| {
        node.used
            .ports
            .iter()
            .any(|(p, pr, pip)| p == port && pr == protocol && overlaps(ip, pip))
    });
    taken.then_some(Reason::Ports)
}

/// NodeResourcesFit: the pod count, and each resource the pod requests
/// against what the node has left (every shortage is a reason).
pub(crate) fn node_resources_fit(demand: &Demand, node: &NodeInfo<'_>) -> Vec<Reason> {
    let mut out = Vec::new();
    if node.alloc_pods.is_some_and(|max| node.pod_count + 1 > max) {
        out.push(Reason::TooManyPods);
    }
    let short = |requested: i128, used: i128, alloc: Option<i128>| {
        requested > 0 && alloc.is_some_and(|a| requested > a - used)
    };
    if short(demand.cpu, node.used.cpu, node.alloc_cpu) {
        out.push(Reason::Insufficient("cpu".into()));
    }
    if short(demand.memory, node.used.memory, node.alloc_memory) {
        out.push(Reason::Insufficient("memory".into()));
    }
    for (name, requested) in &demand.other {
        let used = node.used_other.get(name).copied().unwrap_or(0);
        if short(*requested, used, node.alloc_other.get(name).copied()) {
            out.push(Reason::Insufficient(name.clone()));
        }
    }
    out
}

/// Whether a preferred node affinity term holds on the node (an empty term
/// holds nowhere).
pub(crate) fn preferred_term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    if term.match_fields.is_empty() {
        !term.match_expressions.is_empty()
            && term
                .match_expressions
                .iter()
                .all(|r| requirement_matches(r, &node.metadata.labels))
    } else {
        term_matches(term, node)
    }
}
