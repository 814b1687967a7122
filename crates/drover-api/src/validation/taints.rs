//! Taints (of a node) and tolerations (of a pod): keys, values, operators
//! and effects.

use std::collections::BTreeSet;

use super::errors::{BadValue, FieldError, Path};
use super::fields::validate_qualified_name;
use super::names::is_valid_label_value;
use crate::core_v1::{Taint, TaintEffect, Toleration, TolerationOperator};

const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

fn validate_taint_effect(
    effect: &Option<TaintEffect>,
    allow_empty: bool,
    path: &Path,
) -> Vec<FieldError> {
    match effect {
        None if allow_empty => Vec::new(),
        None => vec![FieldError::required(path, "")],
        Some(TaintEffect::Other(other)) => {
            vec![FieldError::not_supported(
                path,
                other.as_str(),
                TAINT_EFFECTS,
            )]
        }
        Some(_) => Vec::new(),
    }
}

/// Errors of a pod's tolerations: a key is a qualified name; an empty key
/// needs `Exists`; `Exists` has no value; `tolerationSeconds` only with
/// `NoExecute`; operators `Equal`/`Exists`; effects `NoSchedule`,
/// `PreferNoSchedule`, `NoExecute` or empty.
pub fn validate_tolerations(tolerations: &[Toleration], path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, toleration) in tolerations.iter().enumerate() {
        let p = path.index(i);
        if !toleration.key.is_empty() {
            errors.extend(validate_qualified_name(&toleration.key, &p.child("key")));
        }
        if toleration.key.is_empty() && toleration.operator != Some(TolerationOperator::Exists) {
            errors.push(FieldError::invalid(
                &p.child("operator"),
                toleration.operator.as_ref().map_or("", |o| o.as_str()),
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if toleration.toleration_seconds.is_some()
            && toleration.effect != Some(TaintEffect::NoExecute)
        {
            errors.push(FieldError::invalid(
                &p.child("effect"),
                toleration.effect.as_ref().map_or("", |e| e.as_str()),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match &toleration.operator {
            None | Some(TolerationOperator::Equal) => {
                let messages = is_valid_label_value(&toleration.value);
                if !messages.is_empty() {
                    errors.push(FieldError::invalid(
                        &p.child("operator"),
                        &toleration.value,
                        messages.join(";"),
                    ));
                }
            }
            Some(TolerationOperator::Exists) => {
                if !toleration.value.is_empty() {
                    errors.push(FieldError::invalid(
                        &p.child("operator"),
                        BadValue::json(toleration),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            Some(TolerationOperator::Other(other)) => errors.push(FieldError::not_supported(
                &p.child("operator"),
                other.as_str(),
                TolerationOperator::KNOWN,
            )),
        }
        errors.extend(validate_taint_effect(
            &toleration.effect,
            true,
            &p.child("effect"),
        ));
    }
    errors
}

/// Errors of a node's taints: key a qualified name, value a label value,
/// effect required and known, unique by key and effect.
pub fn validate_taints(taints: &[Taint], path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, taint) in taints.iter().enumerate() {
        let p = path.index(i);
        errors.extend(validate_qualified_name(&taint.key, &p.child("key")));
        let messages = is_valid_label_value(&taint.value);
        if !messages.is_empty() {
            errors.push(FieldError::invalid(
                &p.child("value"),
                &taint.value,
                messages.join(";"),
            ));
        }
        errors.extend(validate_taint_effect(
            &taint.effect,
            false,
            &p.child("effect"),
        ));
        let effect = taint.effect.as_ref().map_or("", |e| e.as_str());
        if !seen.insert((taint.key.clone(), effect.to_owned())) {
            let mut error = FieldError::duplicate(&p, BadValue::json(taint));
            error.detail = "taints must be unique by key and effect pair".to_owned();
            errors.push(error);
        }
    }
    errors
}
