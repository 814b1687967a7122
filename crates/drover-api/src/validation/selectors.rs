//! Selectors: label selectors (a DaemonSet's `spec.selector`) and node
//! selectors (required and preferred node affinity), with their operators'
//! value rules.

use super::errors::{FieldError, Path};
use super::fields::{validate_dns1123_subdomain, validate_labels, validate_qualified_name};
use super::names::is_valid_label_value;
use crate::core_v1::{
    NodeSelector, NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm,
};
use crate::meta::{LabelSelector, LabelSelectorOperator};

/// Errors of a label selector: valid label keys and values, operators with
/// their value rules.
pub fn validate_label_selector(selector: &LabelSelector, path: &Path) -> Vec<FieldError> {
    let mut errors = validate_labels(&selector.match_labels, &path.child("matchLabels"));
    for (i, requirement) in selector.match_expressions.iter().enumerate() {
        let p = path.child("matchExpressions").index(i);
        match &requirement.operator {
            Some(LabelSelectorOperator::In | LabelSelectorOperator::NotIn) => {
                if requirement.values.is_empty() {
                    errors.push(FieldError::required(
                        &p.child("values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            Some(LabelSelectorOperator::Exists | LabelSelectorOperator::DoesNotExist) => {
                if !requirement.values.is_empty() {
                    errors.push(FieldError::forbidden(
                        &p.child("values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            Some(LabelSelectorOperator::Other(other)) => {
                errors.push(FieldError::invalid(
                    &p.child("operator"),
                    other.as_str(),
                    "not a valid selector operator",
                ));
            }
            None => errors.push(FieldError::required(&p.child("operator"), "")),
        }
        errors.extend(validate_qualified_name(&requirement.key, &p.child("key")));
        for (j, value) in requirement.values.iter().enumerate() {
            errors.extend(
                is_valid_label_value(value)
                    .into_iter()
                    .map(|m| FieldError::invalid(&p.child("values").index(j), value, m)),
            );
        }
    }
    errors
}

/// Errors of a node selector (required node affinity): at least one term;
/// expressions with valid keys and operators (`In`/`NotIn` need values,
/// `Exists`/`DoesNotExist` none, `Gt`/`Lt` exactly one integer); fields
/// only `metadata.name` with `In`/`NotIn` and one value.
pub fn validate_node_selector(selector: &NodeSelector, path: &Path) -> Vec<FieldError> {
    let terms = path.child("nodeSelectorTerms");
    if selector.node_selector_terms.is_empty() {
        return vec![FieldError::required(
            &terms,
            "must have at least one node selector term",
        )];
    }
    selector
        .node_selector_terms
        .iter()
        .enumerate()
        .flat_map(|(i, term)| validate_node_selector_term(term, &terms.index(i)))
        .collect()
}

/// Errors of one node selector term (see [`validate_node_selector`]).
pub fn validate_node_selector_term(term: &NodeSelectorTerm, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, requirement) in term.match_expressions.iter().enumerate() {
        errors.extend(validate_node_selector_requirement(
            requirement,
            &path.child("matchExpressions").index(i),
        ));
    }
    for (i, requirement) in term.match_fields.iter().enumerate() {
        errors.extend(validate_node_field_selector_requirement(
            requirement,
            &path.child("matchFields").index(i),
        ));
    }
    errors
}

fn validate_node_selector_requirement(
    rq: &NodeSelectorRequirement,
    path: &Path,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match &rq.operator {
        Some(NodeSelectorOperator::In | NodeSelectorOperator::NotIn) => {
            if rq.values.is_empty() {
                errors.push(FieldError::required(
                    &path.child("values"),
                    "must be specified when `operator` is 'In' or 'NotIn'",
                ));
            }
        }
        Some(NodeSelectorOperator::Exists | NodeSelectorOperator::DoesNotExist) => {
            if !rq.values.is_empty() {
                errors.push(FieldError::forbidden(
                    &path.child("values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                ));
            }
        }
        Some(NodeSelectorOperator::Gt | NodeSelectorOperator::Lt) => {
            if rq.values.len() != 1 {
                errors.push(FieldError::required(
                    &path.child("values"),
                    "must be specified single value when `operator` is 'Lt' or 'Gt'",
                ));
            } else if rq.values[0].parse::<i64>().is_err() {
                errors.push(FieldError::invalid(
                    &path.child("values").index(0),
                    &rq.values[0],
                    "must be an integer when `operator` is 'Lt' or 'Gt'",
                ));
            }
        }
        Some(NodeSelectorOperator::Other(other)) => errors.push(FieldError::invalid(
            &path.child("operator"),
            other.as_str(),
            "not a valid selector operator",
        )),
        None => errors.push(FieldError::required(&path.child("operator"), "")),
    }
    errors.extend(validate_qualified_name(&rq.key, &path.child("key")));
    errors
}

/// The only node field a node selector can match.
pub use crate::node_affinity::NODE_FIELD_METADATA_NAME;

fn validate_node_field_selector_requirement(
    rq: &NodeSelectorRequirement,
    path: &Path,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match &rq.operator {
        Some(NodeSelectorOperator::In | NodeSelectorOperator::NotIn) => {
            if rq.values.len() != 1 {
                errors.push(FieldError::required(
                    &path.child("values"),
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                ));
            }
        }
        Some(other) => errors.push(FieldError::invalid(
            &path.child("operator"),
            other.as_str(),
            "not a valid selector operator",
        )),
        None => errors.push(FieldError::required(&path.child("operator"), "")),
    }
    if rq.key != NODE_FIELD_METADATA_NAME {
        errors.push(FieldError::invalid(
            &path.child("key"),
            &rq.key,
            "not a valid field selector key",
        ));
    } else {
        for (i, value) in rq.values.iter().enumerate() {
            errors.extend(validate_dns1123_subdomain(
                value,
                &path.child("values").index(i),
            ));
        }
    }
    errors
}
