//! Pod affinity terms, compiled once per pod: the label selector, the
//! namespaces (the pod's own when the term names none and has no
//! namespace selector), the namespace selector, the topology key and, for
//! preferences, the weight. As Kubernetes' `AffinityTerm`: an absent
//! selector matches no pod and an empty one every pod; an absent
//! namespace selector matches no namespace and an empty one every
//! namespace. A selector that does not parse matches nothing (validation
//! refuses it before it is stored).

use std::collections::BTreeMap;

use drover_api::selector::Selector;

use super::hash::FastMap;
use drover_api::{LabelSelector, Labels, Pod, PodAffinityTerm, WeightedPodAffinityTerm};

/// The labels of each namespace, by name (a namespace that is not listed
/// has none).
pub type NamespaceLabels = BTreeMap<String, Labels>;

static NO_LABELS: Labels = Labels::new();

/// The labels of `namespace`.
pub(crate) fn namespace_labels<'n>(namespaces: &'n NamespaceLabels, namespace: &str) -> &'n Labels {
    namespaces.get(namespace).unwrap_or(&NO_LABELS)
}

fn compile(selector: &Option<LabelSelector>) -> Option<Selector> {
    selector
        .as_ref()
        .and_then(|s| Selector::from_label_selector(s).ok())
}

/// One compiled term.
#[derive(Debug, Clone)]
pub(crate) struct Term<'a> {
    selector: Option<Selector>,
    namespaces: Vec<&'a str>,
    namespace_selector: Option<Selector>,
    /// The node label that names the topology domain.
    pub(crate) topology_key: &'a str,
    /// The weight of a preferred term (1 for a required one).
    pub(crate) weight: i64,
}

impl<'a> Term<'a> {
    /// The term `term` of a pod in `namespace`.
    pub(crate) fn new(term: &'a PodAffinityTerm, namespace: &'a str, weight: i64) -> Self {
        let mut namespaces: Vec<&'a str> = term.namespaces.iter().map(String::as_str).collect();
        if namespaces.is_empty() && term.namespace_selector.is_none() {
            namespaces.push(namespace);
        }
        Term {
            selector: compile(&term.label_selector),
            namespaces,
            namespace_selector: compile(&term.namespace_selector),
            topology_key: term.topology_key.as_str(),
            weight,
        }
    }

    /// Whether `pod` (whose namespace has `namespace_labels`) is one of
    /// the pods the term is about.
    pub(crate) fn matches(&self, pod: &Pod, namespace_labels: &Labels) -> bool {
        self.matches_parts(
            &pod.metadata.namespace,
            &pod.metadata.labels,
            namespace_labels,
        )
    }

    /// Whether a pod of namespace `ns` with `labels` is one the term is
    /// about.
    pub(crate) fn matches_parts(
        &self,
        ns: &str,
        labels: &Labels,
        namespace_labels: &Labels,
    ) -> bool {
        let in_namespace = self.namespaces.contains(&ns)
            || self
                .namespace_selector
                .as_ref()
                .is_some_and(|s| s.matches(namespace_labels));
        in_namespace && self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }
}

/// A pod's pod affinity and anti-affinity, compiled.
#[derive(Debug, Clone, Default)]
pub(crate) struct PodTerms<'a> {
    /// Required affinity terms (all must hold).
    pub(crate) affinity: Vec<Term<'a>>,
    /// Required anti-affinity terms (none may be broken).
    pub(crate) anti_affinity: Vec<Term<'a>>,
    /// Preferred affinity terms.
    pub(crate) preferred_affinity: Vec<Term<'a>>,
    /// Preferred anti-affinity terms.
    pub(crate) preferred_anti_affinity: Vec<Term<'a>>,
}

fn weighted<'a>(terms: &'a [WeightedPodAffinityTerm], namespace: &'a str) -> Vec<Term<'a>> {
    terms
        .iter()
        .filter(|t| t.weight != 0)
        .map(|t| Term::new(&t.pod_affinity_term, namespace, i64::from(t.weight)))
        .collect()
}

impl<'a> PodTerms<'a> {
    /// The terms of `pod`.
    pub(crate) fn of(pod: &'a Pod) -> Self {
        let ns = pod.metadata.namespace.as_str();
        let mut out = PodTerms::default();
        let Some(affinity) = &pod.spec.affinity else {
            return out;
        };
        if let Some(a) = &affinity.pod_affinity {
            out.affinity = a
                .required_during_scheduling_ignored_during_execution
                .iter()
                .map(|t| Term::new(t, ns, 1))
                .collect();
            out.preferred_affinity =
                weighted(&a.preferred_during_scheduling_ignored_during_execution, ns);
        }
        if let Some(a) = &affinity.pod_anti_affinity {
            out.anti_affinity = a
                .required_during_scheduling_ignored_during_execution
                .iter()
                .map(|t| Term::new(t, ns, 1))
                .collect();
            out.preferred_anti_affinity =
                weighted(&a.preferred_during_scheduling_ignored_during_execution, ns);
        }
        out
    }
}

/// Counts by topology key, then value: a node is judged by looking up its
/// own value of each key (few keys), never by scanning every pair.
#[derive(Debug, Default, Clone)]
pub(crate) struct PairCounts<'x> {
    pub(crate) by_key: FastMap<&'x str, FastMap<&'x str, i64>>,
}

impl<'x> PairCounts<'x> {
    /// Adds `by` to the pair (`key`, `value`).
    pub(crate) fn add(&mut self, key: &'x str, value: &'x str, by: i64) {
        *self
            .by_key
            .entry(key)
            .or_default()
            .entry(value)
            .or_default() += by;
    }

    /// The count of the pair (`key`, `value`).
    pub(crate) fn get(&self, key: &str, value: &str) -> i64 {
        self.by_key
            .get(key)
            .and_then(|m| m.get(value))
            .copied()
            .unwrap_or(0)
    }

    /// Whether any pair of `key` is counted.
    pub(crate) fn has_key(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
    }
}
