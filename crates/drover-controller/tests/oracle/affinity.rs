//! Node selection, from the Kubernetes documentation "Assigning Pods to
//! Nodes" (kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/),
//! the API reference of `NodeSelectorRequirement`, and
//! `k8s.io/component-helpers/scheduling/corev1/nodeaffinity`:
//!
//! - `nodeSelector`: every key=value pair must be a label of the node;
//! - `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`:
//!   the terms are ORed; within a term, every `matchExpressions` and every
//!   `matchFields` requirement must hold (ANDed); a term with neither
//!   matches no node;
//! - operators on labels: `In` (the label exists and its value is listed),
//!   `NotIn` (the label is absent or its value is not listed), `Exists`,
//!   `DoesNotExist`, `Gt`/`Lt` (the label exists, the single value and the
//!   label's value are both integers, and the label's is greater/less);
//! - `matchFields` knows one field, `metadata.name`, with `In`/`NotIn` and
//!   exactly one value; anything else matches nothing;
//! - when both `nodeSelector` and required affinity are set, both must
//!   hold.

use drover_api::{Node, NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm, PodSpec};

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    for (k, v) in &node.metadata.labels {
        if k == key {
            return Some(v.as_str());
        }
    }
    None
}

fn listed(values: &[String], value: &str) -> bool {
    values.iter().any(|v| v == value)
}

fn integer(text: &str) -> Option<i64> {
    text.parse::<i64>().ok()
}

/// One `matchExpressions` requirement against the node's labels.
pub fn expression_holds(req: &NodeSelectorRequirement, node: &Node) -> bool {
    let value = label(node, &req.key);
    match req.operator {
        Some(NodeSelectorOperator::In) => match value {
            Some(v) => listed(&req.values, v),
            None => false,
        },
        Some(NodeSelectorOperator::NotIn) => match value {
            Some(v) => !listed(&req.values, v),
            None => true,
        },
        Some(NodeSelectorOperator::Exists) => value.is_some(),
        Some(NodeSelectorOperator::DoesNotExist) => value.is_none(),
        Some(NodeSelectorOperator::Gt) | Some(NodeSelectorOperator::Lt) => {
            if req.values.len() != 1 {
                return false;
            }
            let (Some(have), Some(bound)) = (value.and_then(integer), integer(&req.values[0]))
            else {
                return false;
            };
            if req.operator == Some(NodeSelectorOperator::Gt) {
                have > bound
            } else {
                have < bound
            }
        }
        _ => false,
    }
}

/// One `matchFields` requirement: only `metadata.name`, `In`/`NotIn`, one
/// value.
pub fn field_holds(req: &NodeSelectorRequirement, node: &Node) -> bool {
    if req.key != "metadata.name" || req.values.len() != 1 {
        return false;
    }
    let same = req.values[0] == node.metadata.name;
    match req.operator {
        Some(NodeSelectorOperator::In) => same,
        Some(NodeSelectorOperator::NotIn) => !same,
        _ => false,
    }
}

/// One node selector term: its requirements ANDed; an empty term matches
/// nothing.
pub fn term_holds(term: &NodeSelectorTerm, node: &Node) -> bool {
    if term.match_expressions.is_empty() && term.match_fields.is_empty() {
        return false;
    }
    let mut all = true;
    for req in &term.match_expressions {
        all = all && expression_holds(req, node);
    }
    for req in &term.match_fields {
        all = all && field_holds(req, node);
    }
    all
}

/// `nodeSelector` and required node affinity together.
pub fn pod_spec_selects(spec: &PodSpec, node: &Node) -> bool {
    for (key, want) in &spec.node_selector {
        if label(node, key) != Some(want.as_str()) {
            return false;
        }
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    match required {
        None => true,
        Some(selector) => {
            let mut any = false;
            for term in &selector.node_selector_terms {
                any = any || term_holds(term, node);
            }
            any
        }
    }
}
