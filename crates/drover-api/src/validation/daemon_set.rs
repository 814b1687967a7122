//! DaemonSets: the spec (selector matching the template, the template's pod
//! spec, restart policy `Always`, update strategy and rolling update
//! bounds), the object with its annotations, an update (the selector is
//! immutable), and the warnings `apply` prints for valid but risky settings.

use super::errors::{to_result, BadValue, FieldError, Invalid, Path};
use super::fields::{validate_annotations, validate_labels, validate_nonnegative};
use super::meta::{validate_immutable, validate_object_meta, validate_object_meta_update};
use super::names::is_valid_percent;
use super::pod::validate_pod_spec;
use super::selectors::validate_label_selector;
use crate::apps_v1::{
    DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategyType, RollingUpdateDaemonSet,
};
use crate::core_v1::{PodTemplateSpec, RestartPolicy};
use crate::meta::{IntOrString, LabelSelector};
use crate::selector::Selector;

/// Kubernetes' `ValidatePositiveIntOrPercent`: a non-negative number or a
/// valid percentage.
pub(super) fn validate_positive_int_or_percent(
    value: &IntOrString,
    path: &Path,
) -> Vec<FieldError> {
    match value {
        IntOrString::String(text) => is_valid_percent(text)
            .into_iter()
            .map(|m| FieldError::invalid(path, value, m))
            .collect(),
        IntOrString::Int(number) => validate_nonnegative(i64::from(*number), path),
    }
}

/// Kubernetes' `IsNotMoreThan100Percent`.
pub(super) fn validate_not_more_than_100_percent(
    value: &IntOrString,
    path: &Path,
) -> Vec<FieldError> {
    if value.percent().is_some_and(|p| p > 100) {
        vec![FieldError::invalid(
            path,
            value,
            "must not be greater than 100%",
        )]
    } else {
        Vec::new()
    }
}

fn validate_int_or_percent(value: &IntOrString, path: &Path) -> Vec<FieldError> {
    let mut errors = validate_positive_int_or_percent(value, path);
    errors.extend(validate_not_more_than_100_percent(value, path));
    errors
}

/// Kubernetes' `getIntOrPercentValue`: the number, or the percentage's.
pub(super) fn int_or_percent_value(value: &IntOrString) -> i64 {
    match value {
        IntOrString::Int(number) => i64::from(*number),
        IntOrString::String(_) => value
            .percent()
            .map_or(0, |p| i64::try_from(p).unwrap_or(i64::MAX)),
    }
}

fn validate_rolling_update(rolling: &RollingUpdateDaemonSet, path: &Path) -> Vec<FieldError> {
    let default_unavailable = IntOrString::Int(1);
    let default_surge = IntOrString::Int(0);
    let unavailable = rolling
        .max_unavailable
        .as_ref()
        .unwrap_or(&default_unavailable);
    let surge = rolling.max_surge.as_ref().unwrap_or(&default_surge);
    let mut errors = validate_int_or_percent(unavailable, &path.child("maxUnavailable"));
    errors.extend(validate_int_or_percent(surge, &path.child("maxSurge")));
    let has_unavailable = int_or_percent_value(unavailable) != 0;
    let has_surge = int_or_percent_value(surge) != 0;
    if has_unavailable && has_surge {
        errors.push(FieldError::invalid(
            &path.child("maxSurge"),
            surge,
            "may not be set when maxUnavailable is non-zero",
        ));
    } else if !has_unavailable && !has_surge {
        errors.push(FieldError::required(
            &path.child("maxUnavailable"),
            "cannot be 0 when maxSurge is 0",
        ));
    }
    errors
}

/// The part of a spec every controller of replicas shares (DaemonSet,
/// Deployment, ReplicaSet): the selector (required, valid, non-empty —
/// "empty selector is invalid for `word`", in the API server's words,
/// which are "deployment" for a ReplicaSet too), matching the template's
/// labels, the template's metadata and pod spec, restart policy `Always`.
pub(super) fn validate_selector_and_template(
    selector: &Option<LabelSelector>,
    template: &PodTemplateSpec,
    path: &Path,
    word: &str,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let template_path = path.child("template");
    match selector {
        None => errors.push(FieldError::required(&path.child("selector"), "")),
        Some(selector) => {
            errors.extend(validate_label_selector(selector, &path.child("selector")));
            if selector.match_labels.is_empty() && selector.match_expressions.is_empty() {
                errors.push(FieldError::invalid(
                    &path.child("selector"),
                    BadValue::json(selector),
                    format!("empty selector is invalid for {word}"),
                ));
            } else if let Ok(compiled) = Selector::from_label_selector(selector) {
                if !compiled.matches(&template.metadata.labels) {
                    errors.push(FieldError::invalid(
                        &template_path.child("metadata").child("labels"),
                        BadValue::json(&template.metadata.labels),
                        "`selector` does not match template `labels`",
                    ));
                }
            }
        }
    }
    let metadata = template_path.child("metadata");
    errors.extend(validate_labels(
        &template.metadata.labels,
        &metadata.child("labels"),
    ));
    errors.extend(validate_annotations(
        &template.metadata.annotations,
        &metadata.child("annotations"),
    ));
    errors.extend(validate_pod_spec(
        &template.spec,
        &template_path.child("spec"),
        false,
    ));
    match &template.spec.restart_policy {
        None | Some(RestartPolicy::Always) => {}
        Some(other) => errors.push(FieldError::not_supported(
            &template_path.child("spec").child("restartPolicy"),
            other.as_str(),
            &["Always"],
        )),
    }
    errors
}

/// Errors of a DaemonSet spec: selector required, non-empty, valid and
/// matching the template's labels; the template; restart policy `Always`;
/// update strategy; non-negative counters.
pub fn validate_daemon_set_spec(spec: &DaemonSetSpec, path: &Path) -> Vec<FieldError> {
    let mut errors =
        validate_selector_and_template(&spec.selector, &spec.template, path, "daemonset");
    if let Some(seconds) = spec.min_ready_seconds {
        errors.extend(validate_nonnegative(
            i64::from(seconds),
            &path.child("minReadySeconds"),
        ));
    }
    if let Some(limit) = spec.revision_history_limit {
        errors.extend(validate_nonnegative(
            i64::from(limit),
            &path.child("revisionHistoryLimit"),
        ));
    }
    let strategy = path.child("updateStrategy");
    match &spec.update_strategy.r#type {
        None | Some(DaemonSetUpdateStrategyType::RollingUpdate) => {
            if let Some(rolling) = &spec.update_strategy.rolling_update {
                errors.extend(validate_rolling_update(
                    rolling,
                    &strategy.child("rollingUpdate"),
                ));
            }
        }
        Some(DaemonSetUpdateStrategyType::OnDelete) => {}
        Some(DaemonSetUpdateStrategyType::Other(other)) => errors.push(FieldError::not_supported(
            &strategy.child("type"),
            other.as_str(),
            DaemonSetUpdateStrategyType::KNOWN,
        )),
    }
    errors
}

/// Validates a DaemonSet.
///
/// ```
/// use drover_api::{parse_manifests, Manifest, validation::validate_daemon_set};
///
/// let yaml = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  template:\n    metadata: {labels: {app: x}}\n    spec: {containers: [{name: Foo_1, image: busybox}]}\n";
/// let Manifest::DaemonSet(ds) = parse_manifests(yaml).unwrap().remove(0) else { panic!() };
/// let err = validate_daemon_set(&ds).unwrap_err().to_string();
/// assert!(err.starts_with("DaemonSet.apps \"x\" is invalid: [spec.selector: Required value, \
///     spec.template.spec.containers[0].name: Invalid value: \"Foo_1\": a lowercase RFC 1123 label must consist of"));
/// ```
pub fn validate_daemon_set(ds: &DaemonSet) -> Result<(), Invalid> {
    let mut errors = validate_object_meta(&ds.metadata, true, &Path::new("metadata"));
    if let Err((annotation, reason)) = crate::annotations::auto_rollback(&ds.metadata) {
        let value = ds.metadata.annotations.get(annotation).cloned();
        errors.push(FieldError::invalid(
            &Path::new("metadata").child("annotations").key(annotation),
            value.unwrap_or_default(),
            reason,
        ));
    }
    errors.extend(validate_daemon_set_spec(&ds.spec, &Path::new("spec")));
    to_result(ds, errors)
}

/// Valid but risky settings of a DaemonSet, for `apply` to warn about: a
/// rolling update with `maxSurge` starts the new pod beside the old one on
/// the same node, which cannot work when the pod binds a host port or uses
/// the host network (kubernetes #106417: the surge pod never starts and the
/// rollout stalls).
pub fn daemon_set_warnings(ds: &DaemonSet) -> Vec<String> {
    let mut out = Vec::new();
    let surges = !matches!(
        ds.spec.update_strategy.r#type,
        Some(DaemonSetUpdateStrategyType::OnDelete)
    ) && ds
        .spec
        .update_strategy
        .rolling_update
        .as_ref()
        .and_then(|r| r.max_surge.as_ref())
        .is_some_and(|s| match s {
            IntOrString::Int(n) => *n > 0,
            IntOrString::String(p) => p
                .strip_suffix('%')
                .and_then(|p| p.parse::<i64>().ok())
                .is_some_and(|p| p > 0),
        });
    if !surges {
        return out;
    }
    let spec = &ds.spec.template.spec;
    if spec.host_network {
        out.push(
            "spec.updateStrategy.rollingUpdate.maxSurge with spec.template.spec.hostNetwork: \
             the new pod shares the node's ports with the old one and may not start until it \
             is gone; use maxUnavailable instead of maxSurge"
                .to_owned(),
        );
    }
    for (i, c) in spec.containers.iter().enumerate() {
        for (j, p) in c.ports.iter().enumerate() {
            if let Some(hp) = p.host_port.filter(|hp| *hp > 0) {
                out.push(format!(
                    "spec.updateStrategy.rollingUpdate.maxSurge with \
                     spec.template.spec.containers[{i}].ports[{j}].hostPort {hp}: the new pod \
                     cannot bind the port while the old one holds it, so the rollout stalls; \
                     use maxUnavailable instead of maxSurge"
                ));
            }
        }
    }
    out
}

/// Validates an update of a DaemonSet: besides [`validate_daemon_set`], the
/// selector, name and namespace can't change.
pub fn validate_daemon_set_update(new: &DaemonSet, old: &DaemonSet) -> Result<(), Invalid> {
    let mut errors =
        validate_object_meta_update(&new.metadata, &old.metadata, &Path::new("metadata"));
    errors.extend(validate_immutable(
        &new.spec.selector,
        &old.spec.selector,
        &Path::new("spec").child("selector"),
    ));
    if let Err(invalid) = validate_daemon_set(new) {
        errors.extend(invalid.errors);
    }
    to_result(new, errors)
}
