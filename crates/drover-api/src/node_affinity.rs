//! Required node affinity: which nodes a pod may run on, and why a node is
//! not one of them.
//!
//! A pod's [`RequiredNodeAffinity`] is its `nodeSelector` (every label must
//! be present with that value) AND its
//! `affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`:
//! its `nodeSelectorTerms` are ORed, and within a term every
//! `matchExpressions` (on labels) and `matchFields` (on `metadata.name`)
//! requirement must hold. An empty term matches no node. Operators: `In`,
//! `NotIn` (also true when the label is absent), `Exists`, `DoesNotExist`,
//! `Gt` and `Lt` (the label's value and the single value compared as
//! integers; a label that is not an integer does not match).
//!
//! [`RequiredNodeAffinity::explain`] tells why a node does not match, for
//! `describe` to show for every node without a daemon pod.
//!
//! ```
//! use drover_api::{Node, PodSpec, node_affinity::RequiredNodeAffinity};
//!
//! let spec = PodSpec {
//!     node_selector: [("disk".to_string(), "ssd".to_string())].into(),
//!     ..PodSpec::default()
//! };
//! let mut node = Node::default();
//! node.metadata.name = "n1".into();
//! let affinity = RequiredNodeAffinity::from_pod_spec(&spec);
//! assert!(!affinity.matches(&node));
//! assert_eq!(
//!     affinity.explain(&node)[0].to_string(),
//!     "nodeSelector requires disk=ssd, but the node has no label disk"
//! );
//! ```

use std::fmt;

use crate::core_v1::{
    Node, NodeSelector, NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm, PodSpec,
};
use crate::meta::Labels;

/// The one node field a `matchFields` requirement may name.
pub const NODE_FIELD_METADATA_NAME: &str = "metadata.name";

/// The node a pod is pinned to by its required node affinity, as the
/// daemon controller pins a pod it cannot bind yet (Kubernetes'
/// `GetTargetNodeName`): a term whose `matchFields` hold
/// `metadata.name In [node]` with one value. `None` when there is none.
pub fn pinned_node(spec: &PodSpec) -> Option<&str> {
    let required = spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?;
    required.node_selector_terms.iter().find_map(|term| {
        term.match_fields.iter().find_map(|r| {
            (r.key == NODE_FIELD_METADATA_NAME
                && r.operator == Some(NodeSelectorOperator::In)
                && r.values.len() == 1)
                .then(|| r.values[0].as_str())
        })
    })
}

/// Pins a pod to `node` (Kubernetes'
/// `ReplaceDaemonSetPodNodeNameNodeAffinity`): its required node affinity
/// becomes the one term `metadata.name In [node]`; the preferred terms are
/// kept. The daemon controller has already matched the node's labels.
pub fn pin_to_node(spec: &mut PodSpec, node: &str) {
    let affinity = spec.affinity.get_or_insert_with(Default::default);
    let node_affinity = affinity.node_affinity.get_or_insert_with(Default::default);
    node_affinity.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: vec![NodeSelectorRequirement {
                key: NODE_FIELD_METADATA_NAME.to_owned(),
                operator: Some(NodeSelectorOperator::In),
                values: vec![node.to_owned()],
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    });
}

/// Why one requirement does not hold for a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequirementFailure {
    /// The label (or field) is absent.
    Missing,
    /// The label (or field) has this value, which does not satisfy the requirement.
    Value(String),
    /// `Gt`/`Lt`: the label's value is not an integer.
    NotAnInteger(String),
    /// The requirement itself is not valid (validation refuses it).
    InvalidRequirement,
}

/// A requirement of a term that a node does not satisfy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpressionMismatch {
    /// `matchExpressions` or `matchFields`.
    pub list: &'static str,
    /// The index of the requirement in its list.
    pub index: usize,
    /// The requirement, e.g. `disk In [ssd, nvme]`.
    pub requirement: String,
    /// The label key (or field).
    pub key: String,
    /// Why it does not hold.
    pub failure: RequirementFailure,
}

impl fmt::Display for ExpressionMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}] ({}): ", self.list, self.index, self.requirement)?;
        let what = if self.list == "matchFields" {
            "field"
        } else {
            "label"
        };
        match &self.failure {
            RequirementFailure::Missing => write!(f, "the node has no {what} {}", self.key),
            RequirementFailure::Value(value) => write!(f, "the node has {}={value}", self.key),
            RequirementFailure::NotAnInteger(value) => {
                write!(
                    f,
                    "the node's {what} {}={value} is not an integer",
                    self.key
                )
            }
            RequirementFailure::InvalidRequirement => f.write_str("the requirement is not valid"),
        }
    }
}

/// Why one node selector term does not match a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TermMismatch {
    /// The index of the term in `nodeSelectorTerms`.
    pub term: usize,
    /// The first requirement that fails, or `None` for an empty term.
    pub expression: Option<ExpressionMismatch>,
}

impl fmt::Display for TermMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "term {}: ", self.term)?;
        match &self.expression {
            Some(expression) => write!(f, "{expression}"),
            None => f.write_str("the term is empty and matches no node"),
        }
    }
}

/// A reason why a node does not satisfy a pod's required node affinity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeMismatch {
    /// A `nodeSelector` label is absent or different.
    NodeSelector {
        /// The label key.
        key: String,
        /// The value the pod requires.
        expected: String,
        /// The node's value, if it has the label.
        actual: Option<String>,
    },
    /// No term of the required node affinity matches; why each one fails.
    NodeAffinity(Vec<TermMismatch>),
}

impl fmt::Display for NodeMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeMismatch::NodeSelector {
                key,
                expected,
                actual: None,
            } => write!(
                f,
                "nodeSelector requires {key}={expected}, but the node has no label {key}"
            ),
            NodeMismatch::NodeSelector {
                key,
                expected,
                actual: Some(actual),
            } => write!(
                f,
                "nodeSelector requires {key}={expected}, but the node has {key}={actual}"
            ),
            NodeMismatch::NodeAffinity(terms) => {
                f.write_str("no term of the required node affinity matches: ")?;
                for (i, term) in terms.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{term}")?;
                }
                Ok(())
            }
        }
    }
}

/// The requirement as `key Op [values]`, for explanations.
pub fn describe_requirement(requirement: &NodeSelectorRequirement) -> String {
    let operator = requirement
        .operator
        .as_ref()
        .map_or("<no operator>", |o| o.as_str());
    if requirement.values.is_empty() {
        format!("{} {operator}", requirement.key)
    } else {
        format!(
            "{} {operator} [{}]",
            requirement.key,
            requirement.values.join(", ")
        )
    }
}

/// Checks one requirement against a value (a label's, or a field's), `None`
/// when absent. `Ok(())` when it holds.
fn check(
    requirement: &NodeSelectorRequirement,
    value: Option<&str>,
) -> Result<(), RequirementFailure> {
    let failure = || {
        value.map_or(RequirementFailure::Missing, |v| {
            RequirementFailure::Value(v.to_owned())
        })
    };
    let contains = |v: &str| requirement.values.iter().any(|x| x == v);
    let holds = match &requirement.operator {
        Some(NodeSelectorOperator::In) => value.is_some_and(contains),
        Some(NodeSelectorOperator::NotIn) => !value.is_some_and(contains),
        Some(NodeSelectorOperator::Exists) => value.is_some(),
        Some(NodeSelectorOperator::DoesNotExist) => value.is_none(),
        Some(operator @ (NodeSelectorOperator::Gt | NodeSelectorOperator::Lt)) => {
            let bound = match requirement.values.as_slice() {
                [single] => single
                    .parse::<i64>()
                    .map_err(|_| RequirementFailure::InvalidRequirement)?,
                _ => return Err(RequirementFailure::InvalidRequirement),
            };
            let Some(value) = value else {
                return Err(RequirementFailure::Missing);
            };
            let number = value
                .parse::<i64>()
                .map_err(|_| RequirementFailure::NotAnInteger(value.to_owned()))?;
            if *operator == NodeSelectorOperator::Gt {
                number > bound
            } else {
                number < bound
            }
        }
        Some(NodeSelectorOperator::Other(_)) | None => {
            return Err(RequirementFailure::InvalidRequirement)
        }
    };
    if holds {
        Ok(())
    } else {
        Err(failure())
    }
}

/// Whether a requirement on labels holds for these labels.
pub fn requirement_matches(requirement: &NodeSelectorRequirement, labels: &Labels) -> bool {
    check(
        requirement,
        labels.get(&requirement.key).map(String::as_str),
    )
    .is_ok()
}

/// Why a term does not match the node (`None` when it matches).
pub fn explain_term(term: &NodeSelectorTerm, node: &Node) -> Option<Option<ExpressionMismatch>> {
    if term.match_expressions.is_empty() && term.match_fields.is_empty() {
        return Some(None);
    }
    for (index, requirement) in term.match_expressions.iter().enumerate() {
        let value = node
            .metadata
            .labels
            .get(&requirement.key)
            .map(String::as_str);
        if let Err(failure) = check(requirement, value) {
            return Some(Some(ExpressionMismatch {
                list: "matchExpressions",
                index,
                requirement: describe_requirement(requirement),
                key: requirement.key.clone(),
                failure,
            }));
        }
    }
    for (index, requirement) in term.match_fields.iter().enumerate() {
        let result = if requirement.key == NODE_FIELD_METADATA_NAME {
            check(requirement, Some(node.metadata.name.as_str()))
        } else {
            Err(RequirementFailure::InvalidRequirement)
        };
        if let Err(failure) = result {
            return Some(Some(ExpressionMismatch {
                list: "matchFields",
                index,
                requirement: describe_requirement(requirement),
                key: requirement.key.clone(),
                failure,
            }));
        }
    }
    None
}

/// Whether a term matches the node (an empty term matches nothing).
pub fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    explain_term(term, node).is_none()
}

/// Whether any term of the node selector matches the node.
pub fn node_selector_matches(selector: &NodeSelector, node: &Node) -> bool {
    selector
        .node_selector_terms
        .iter()
        .any(|term| term_matches(term, node))
}

/// A pod's required node affinity: its `nodeSelector` and its required
/// node affinity, both of which must match.
#[derive(Debug, Clone, Copy)]
pub struct RequiredNodeAffinity<'a> {
    node_selector: &'a Labels,
    required: Option<&'a NodeSelector>,
}

impl<'a> RequiredNodeAffinity<'a> {
    /// The required node affinity of a pod spec.
    pub fn from_pod_spec(spec: &'a PodSpec) -> Self {
        RequiredNodeAffinity {
            node_selector: &spec.node_selector,
            required: spec
                .affinity
                .as_ref()
                .and_then(|a| a.node_affinity.as_ref())
                .and_then(|n| {
                    n.required_during_scheduling_ignored_during_execution
                        .as_ref()
                }),
        }
    }

    /// Whether the node satisfies the pod's required node affinity.
    pub fn matches(&self, node: &Node) -> bool {
        let labels = &node.metadata.labels;
        self.node_selector
            .iter()
            .all(|(key, value)| labels.get(key) == Some(value))
            && self.required.is_none_or(|s| node_selector_matches(s, node))
    }

    /// Every reason why the node does not satisfy the pod's required node
    /// affinity: each `nodeSelector` label that differs, and, when no term
    /// matches, why each term fails. Empty exactly when [`Self::matches`].
    pub fn explain(&self, node: &Node) -> Vec<NodeMismatch> {
        let labels = &node.metadata.labels;
        let mut mismatches: Vec<NodeMismatch> = self
            .node_selector
            .iter()
            .filter(|(key, value)| labels.get(*key) != Some(*value))
            .map(|(key, value)| NodeMismatch::NodeSelector {
                key: key.clone(),
                expected: value.clone(),
                actual: labels.get(key).cloned(),
            })
            .collect();
        if let Some(selector) = self.required {
            let mut terms = Vec::new();
            for (term, node_term) in selector.node_selector_terms.iter().enumerate() {
                match explain_term(node_term, node) {
                    None => return mismatches,
                    Some(expression) => terms.push(TermMismatch { term, expression }),
                }
            }
            mismatches.push(NodeMismatch::NodeAffinity(terms));
        }
        mismatches
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core_v1::{Affinity, NodeAffinity};
    use proptest::prelude::*;

    fn req(key: &str, operator: NodeSelectorOperator, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: Some(operator),
            values: values.iter().map(|v| v.to_string()).collect(),
            ..Default::default()
        }
    }

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        let mut node = Node::default();
        node.metadata.name = name.into();
        node.metadata.labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        node
    }

    fn spec_with(terms: Vec<NodeSelectorTerm>) -> PodSpec {
        PodSpec {
            affinity: Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: terms,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..PodSpec::default()
        }
    }

    fn term(
        expressions: Vec<NodeSelectorRequirement>,
        fields: Vec<NodeSelectorRequirement>,
    ) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: expressions,
            match_fields: fields,
            ..Default::default()
        }
    }

    #[test]
    fn operators() {
        use NodeSelectorOperator::*;
        let labels: Labels = [("zone", "a"), ("cores", "8"), ("name", "x")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let cases = [
            (req("zone", In, &["a", "b"]), true),
            (req("zone", In, &["b"]), false),
            (req("missing", In, &["a"]), false),
            (req("zone", NotIn, &["b"]), true),
            (req("zone", NotIn, &["a"]), false),
            (req("missing", NotIn, &["a"]), true),
            (req("zone", Exists, &[]), true),
            (req("missing", Exists, &[]), false),
            (req("missing", DoesNotExist, &[]), true),
            (req("zone", DoesNotExist, &[]), false),
            (req("cores", Gt, &["4"]), true),
            (req("cores", Gt, &["8"]), false),
            (req("cores", Lt, &["16"]), true),
            (req("cores", Lt, &["-1"]), false),
            // Strictly less: the bound itself does not match.
            (req("cores", Lt, &["8"]), false),
            (req("cores", Lt, &["9"]), true),
            (req("name", Gt, &["1"]), false),
            (req("missing", Lt, &["1"]), false),
            (req("cores", Gt, &["x"]), false),
            (req("cores", Gt, &["1", "2"]), false),
            (req("zone", Other("Near".into()), &["a"]), false),
        ];
        for (requirement, expected) in cases {
            assert_eq!(
                requirement_matches(&requirement, &labels),
                expected,
                "{requirement:?}"
            );
        }
    }

    #[test]
    fn terms_are_ored_and_expressions_anded() {
        use NodeSelectorOperator::*;
        let spec = spec_with(vec![
            term(
                vec![req("zone", In, &["a"]), req("disk", In, &["ssd"])],
                vec![],
            ),
            term(vec![req("gpu", Exists, &[])], vec![]),
        ]);
        let affinity = RequiredNodeAffinity::from_pod_spec(&spec);
        assert!(affinity.matches(&node("n", &[("zone", "a"), ("disk", "ssd")])));
        assert!(affinity.matches(&node("n", &[("gpu", "")])));
        let bad = node("n", &[("zone", "a"), ("disk", "hdd")]);
        assert!(!affinity.matches(&bad));
        let explanation = affinity.explain(&bad);
        assert_eq!(explanation.len(), 1);
        assert_eq!(
            explanation[0].to_string(),
            "no term of the required node affinity matches: \
             term 0: matchExpressions[1] (disk In [ssd]): the node has disk=hdd; \
             term 1: matchExpressions[0] (gpu Exists): the node has no label gpu"
        );
    }

    #[test]
    fn match_fields_on_the_node_name() {
        use NodeSelectorOperator::*;
        let spec = spec_with(vec![term(vec![], vec![req("metadata.name", In, &["n1"])])]);
        let affinity = RequiredNodeAffinity::from_pod_spec(&spec);
        assert!(affinity.matches(&node("n1", &[])));
        assert!(!affinity.matches(&node("n2", &[])));
        assert_eq!(
            affinity.explain(&node("n2", &[]))[0].to_string(),
            "no term of the required node affinity matches: term 0: matchFields[0] (metadata.name In [n1]): the node has metadata.name=n2"
        );
        let spec = spec_with(vec![term(
            vec![],
            vec![req("metadata.name", NotIn, &["n1"])],
        )]);
        assert!(RequiredNodeAffinity::from_pod_spec(&spec).matches(&node("n2", &[])));
        let spec = spec_with(vec![term(vec![], vec![req("metadata.uid", In, &["n1"])])]);
        assert!(!RequiredNodeAffinity::from_pod_spec(&spec).matches(&node("n1", &[])));
    }

    #[test]
    fn empty_terms_match_nothing_and_no_affinity_matches_everything() {
        let spec = spec_with(vec![term(vec![], vec![])]);
        let affinity = RequiredNodeAffinity::from_pod_spec(&spec);
        assert!(!affinity.matches(&node("n", &[])));
        assert_eq!(
            affinity.explain(&node("n", &[]))[0].to_string(),
            "no term of the required node affinity matches: term 0: the term is empty and matches no node"
        );
        let spec = spec_with(vec![]);
        assert!(!RequiredNodeAffinity::from_pod_spec(&spec).matches(&node("n", &[])));
        let spec = PodSpec::default();
        assert!(RequiredNodeAffinity::from_pod_spec(&spec).matches(&node("n", &[])));
        assert!(RequiredNodeAffinity::from_pod_spec(&spec)
            .explain(&node("n", &[]))
            .is_empty());
    }

    #[test]
    fn node_selector_and_affinity_are_anded() {
        use NodeSelectorOperator::*;
        let mut spec = spec_with(vec![term(vec![req("zone", In, &["a"])], vec![])]);
        spec.node_selector = [("os".to_string(), "linux".to_string())].into();
        let affinity = RequiredNodeAffinity::from_pod_spec(&spec);
        assert!(affinity.matches(&node("n", &[("os", "linux"), ("zone", "a")])));
        let n = node("n", &[("os", "windows"), ("zone", "b")]);
        let reasons: Vec<String> = affinity
            .explain(&n)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            reasons,
            [
                "nodeSelector requires os=linux, but the node has os=windows",
                "no term of the required node affinity matches: term 0: matchExpressions[0] (zone In [a]): the node has zone=b",
            ]
        );
        let reasons: Vec<String> = affinity
            .explain(&node("n", &[("os", "linux"), ("zone", "a"), ("x", "1")]))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(reasons.is_empty());
    }

    #[test]
    fn gt_on_a_label_that_is_not_a_number_is_explained() {
        let spec = spec_with(vec![term(
            vec![req("cores", NodeSelectorOperator::Gt, &["4"])],
            vec![],
        )]);
        let affinity = RequiredNodeAffinity::from_pod_spec(&spec);
        assert_eq!(
            affinity.explain(&node("n", &[("cores", "many")]))[0].to_string(),
            "no term of the required node affinity matches: term 0: matchExpressions[0] (cores Gt [4]): the node's label cores=many is not an integer"
        );
    }

    fn operator_strategy() -> impl Strategy<Value = NodeSelectorOperator> {
        prop_oneof![
            Just(NodeSelectorOperator::In),
            Just(NodeSelectorOperator::NotIn),
            Just(NodeSelectorOperator::Exists),
            Just(NodeSelectorOperator::DoesNotExist),
            Just(NodeSelectorOperator::Gt),
            Just(NodeSelectorOperator::Lt),
        ]
    }

    fn requirement_strategy() -> impl Strategy<Value = NodeSelectorRequirement> {
        (
            "[a-c]",
            operator_strategy(),
            prop::collection::vec("[0-9]|[x-z]", 0..3),
        )
            .prop_map(|(key, operator, values)| NodeSelectorRequirement {
                key,
                operator: Some(operator),
                values,
                ..Default::default()
            })
    }

    fn labels_strategy() -> impl Strategy<Value = Labels> {
        prop::collection::btree_map("[a-c]", "[0-9]|[x-z]", 0..4)
    }

    proptest! {
        #[test]
        fn explain_is_empty_exactly_when_matching(
            terms in prop::collection::vec(prop::collection::vec(requirement_strategy(), 0..3), 0..3),
            selector in prop::collection::btree_map("[a-c]", "[x-z]", 0..2),
            labels in labels_strategy(),
            use_affinity in any::<bool>(),
        ) {
            let mut spec = if use_affinity {
                spec_with(terms.into_iter().map(|t| term(t, vec![])).collect())
            } else {
                PodSpec::default()
            };
            spec.node_selector = selector;
            let mut n = Node::default();
            n.metadata.labels = labels;
            let affinity = RequiredNodeAffinity::from_pod_spec(&spec);
            prop_assert_eq!(affinity.explain(&n).is_empty(), affinity.matches(&n));
        }

        #[test]
        fn exists_and_does_not_exist_are_complements(key in "[a-c]", labels in labels_strategy()) {
            let exists = req(&key, NodeSelectorOperator::Exists, &[]);
            let absent = req(&key, NodeSelectorOperator::DoesNotExist, &[]);
            prop_assert_ne!(requirement_matches(&exists, &labels), requirement_matches(&absent, &labels));
        }

        #[test]
        fn in_and_not_in_are_complements_when_the_key_exists(
            key in "[a-c]",
            values in prop::collection::vec("[x-z]", 1..3),
            mut labels in labels_strategy(),
            value in "[x-z]",
        ) {
            labels.insert(key.clone(), value);
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            let is_in = req(&key, NodeSelectorOperator::In, &values);
            let not_in = req(&key, NodeSelectorOperator::NotIn, &values);
            prop_assert_ne!(requirement_matches(&is_in, &labels), requirement_matches(&not_in, &labels));
        }

        #[test]
        fn gt_and_lt_compare_integers(label in any::<i64>(), bound in any::<i64>()) {
            let labels: Labels = [("n".to_string(), label.to_string())].into();
            let bound_text = bound.to_string();
            prop_assert_eq!(requirement_matches(&req("n", NodeSelectorOperator::Gt, &[&bound_text]), &labels), label > bound);
            prop_assert_eq!(requirement_matches(&req("n", NodeSelectorOperator::Lt, &[&bound_text]), &labels), label < bound);
        }

        #[test]
        fn a_term_matches_iff_all_its_requirements_do(
            requirements in prop::collection::vec(requirement_strategy(), 1..4),
            labels in labels_strategy(),
        ) {
            let mut n = Node::default();
            n.metadata.labels = labels.clone();
            let all = requirements.iter().all(|r| requirement_matches(r, &labels));
            prop_assert_eq!(term_matches(&term(requirements, vec![]), &n), all);
        }
    }

    #[test]
    fn a_pinned_pod_names_its_node_and_pinning_replaces_the_required_terms() {
        let mut spec = spec_with(vec![term(
            vec![],
            vec![req("metadata.name", NodeSelectorOperator::NotIn, &["n1"])],
        )]);
        assert_eq!(pinned_node(&spec), None, "NotIn pins nothing");
        pin_to_node(&mut spec, "n2");
        assert_eq!(pinned_node(&spec), Some("n2"));
        let required = spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .expect("required terms");
        assert_eq!(required.node_selector_terms.len(), 1);
        let mut empty = PodSpec::default();
        assert_eq!(pinned_node(&empty), None);
        pin_to_node(&mut empty, "n3");
        assert_eq!(pinned_node(&empty), Some("n3"));
        let two = spec_with(vec![term(
            vec![],
            vec![req("metadata.name", NodeSelectorOperator::In, &["a", "b"])],
        )]);
        assert_eq!(pinned_node(&two), None, "two nodes pin nothing");
    }
}
