//! Label selectors, from the Kubernetes documentation "Labels and
//! Selectors" (kubernetes.io/docs/concepts/overview/working-with-objects/labels/)
//! and the API reference of `LabelSelector`:
//!
//! - `matchLabels`: every pair must be a label of the object;
//! - `matchExpressions`, ANDed with them: `In` (the key exists and its value
//!   is listed), `NotIn` (the key is absent or its value is not listed),
//!   `Exists`, `DoesNotExist`;
//! - an empty selector (`{}`) matches every object; an absent one (`null`)
//!   matches none where the scheduler reads it (pod affinity terms,
//!   topology spread constraints: `LabelSelectorAsSelector(nil)` is
//!   `labels.Nothing()`).

use drover_api::{LabelSelector, LabelSelectorOperator, Labels};

fn value<'a>(labels: &'a Labels, key: &str) -> Option<&'a str> {
    for (k, v) in labels {
        if k == key {
            return Some(v.as_str());
        }
    }
    None
}

/// Whether `selector` matches `labels`.
pub fn matches(selector: &LabelSelector, labels: &Labels) -> bool {
    for (k, v) in &selector.match_labels {
        if value(labels, k) != Some(v.as_str()) {
            return false;
        }
    }
    for e in &selector.match_expressions {
        let have = value(labels, &e.key);
        let listed = |v: &str| e.values.iter().any(|x| x == v);
        let ok = match e.operator {
            Some(LabelSelectorOperator::In) => have.is_some_and(listed),
            Some(LabelSelectorOperator::NotIn) => !have.is_some_and(listed),
            Some(LabelSelectorOperator::Exists) => have.is_some(),
            Some(LabelSelectorOperator::DoesNotExist) => have.is_none(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// An optional selector: absent matches nothing.
pub fn matches_opt(selector: Option<&LabelSelector>, labels: &Labels) -> bool {
    match selector {
        None => false,
        Some(s) => matches(s, labels),
    }
}
