//! Deployments and ReplicaSets, as `pkg/apis/apps/validation` checks them:
//! the selector and template (shared with DaemonSets), replicas and the
//! counters non-negative, the strategy (`Recreate` takes no
//! `rollingUpdate`; `maxSurge` and `maxUnavailable` not both 0,
//! `maxUnavailable` at most 100%), `progressDeadlineSeconds` greater than
//! `minReadySeconds`, and on update an immutable selector.

use super::daemon_set::{
    int_or_percent_value, validate_not_more_than_100_percent, validate_positive_int_or_percent,
    validate_selector_and_template,
};
use super::errors::{to_result, FieldError, Invalid, Path};
use super::fields::validate_nonnegative;
use super::meta::{validate_immutable, validate_object_meta, validate_object_meta_update};
use crate::apps_v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, DeploymentStrategyType, ReplicaSet,
    ReplicaSetSpec, RollingUpdateDeployment,
};

fn nonnegative(value: Option<i32>, path: &Path) -> Vec<FieldError> {
    value.map_or_else(Vec::new, |v| validate_nonnegative(i64::from(v), path))
}

/// Kubernetes' `ValidateRollingUpdateDeployment` (an unset bound reads as
/// its default, 25%).
fn validate_rolling_update(rolling: &RollingUpdateDeployment, path: &Path) -> Vec<FieldError> {
    let default = crate::meta::IntOrString::String("25%".into());
    let unavailable = rolling.max_unavailable.as_ref().unwrap_or(&default);
    let surge = rolling.max_surge.as_ref().unwrap_or(&default);
    let unavailable_path = path.child("maxUnavailable");
    let mut errors = validate_positive_int_or_percent(unavailable, &unavailable_path);
    errors.extend(validate_positive_int_or_percent(
        surge,
        &path.child("maxSurge"),
    ));
    if int_or_percent_value(unavailable) == 0 && int_or_percent_value(surge) == 0 {
        errors.push(FieldError::invalid(
            &unavailable_path,
            unavailable,
            "may not be 0 when `maxSurge` is 0",
        ));
    }
    errors.extend(validate_not_more_than_100_percent(
        unavailable,
        &unavailable_path,
    ));
    errors
}

/// Kubernetes' `ValidateDeploymentStrategy`.
fn validate_strategy(strategy: &DeploymentStrategy, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match &strategy.r#type {
        Some(DeploymentStrategyType::Recreate) => {
            if strategy.rolling_update.is_some() {
                errors.push(FieldError::forbidden(
                    &path.child("rollingUpdate"),
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        None | Some(DeploymentStrategyType::RollingUpdate) => {
            if let Some(rolling) = &strategy.rolling_update {
                errors.extend(validate_rolling_update(
                    rolling,
                    &path.child("rollingUpdate"),
                ));
            }
        }
        Some(DeploymentStrategyType::Other(other)) => errors.push(FieldError::not_supported(
            &path.child("type"),
            other.as_str(),
            DeploymentStrategyType::KNOWN,
        )),
    }
    errors
}

/// Errors of a Deployment spec (Kubernetes' `ValidateDeploymentSpec`).
pub fn validate_deployment_spec(spec: &DeploymentSpec, path: &Path) -> Vec<FieldError> {
    let mut errors = nonnegative(spec.replicas, &path.child("replicas"));
    errors.extend(validate_selector_and_template(
        &spec.selector,
        &spec.template,
        path,
        "deployment",
    ));
    errors.extend(validate_strategy(&spec.strategy, &path.child("strategy")));
    errors.extend(nonnegative(
        spec.min_ready_seconds,
        &path.child("minReadySeconds"),
    ));
    errors.extend(nonnegative(
        spec.revision_history_limit,
        &path.child("revisionHistoryLimit"),
    ));
    if let Some(deadline) = spec.progress_deadline_seconds {
        let deadline_path = path.child("progressDeadlineSeconds");
        errors.extend(validate_nonnegative(i64::from(deadline), &deadline_path));
        if deadline <= spec.min_ready_seconds.unwrap_or(0) {
            errors.push(FieldError::invalid(
                &deadline_path,
                i64::from(deadline),
                "must be greater than minReadySeconds",
            ));
        }
    }
    errors
}

/// Errors of a ReplicaSet spec (Kubernetes' `ValidateReplicaSetSpec`).
pub fn validate_replica_set_spec(spec: &ReplicaSetSpec, path: &Path) -> Vec<FieldError> {
    let mut errors = nonnegative(spec.replicas, &path.child("replicas"));
    errors.extend(nonnegative(
        spec.min_ready_seconds,
        &path.child("minReadySeconds"),
    ));
    errors.extend(validate_selector_and_template(
        &spec.selector,
        &spec.template,
        path,
        "deployment",
    ));
    errors
}

/// Validates a Deployment.
///
/// ```
/// use drover_api::{parse_manifests, Manifest, validation::validate_deployment};
///
/// let yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: -1\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: busybox}]}\n";
/// let Manifest::Deployment(d) = parse_manifests(yaml).unwrap().remove(0) else { panic!() };
/// assert_eq!(
///     validate_deployment(&d).unwrap_err().to_string(),
///     "Deployment.apps \"web\" is invalid: [spec.replicas: Invalid value: -1: must be greater \
///      than or equal to 0, spec.selector: Required value]"
/// );
/// ```
pub fn validate_deployment(deployment: &Deployment) -> Result<(), Invalid> {
    let mut errors = validate_object_meta(&deployment.metadata, true, &Path::new("metadata"));
    errors.extend(validate_deployment_spec(
        &deployment.spec,
        &Path::new("spec"),
    ));
    to_result(deployment, errors)
}

/// Validates an update of a Deployment: besides [`validate_deployment`],
/// the selector, name and namespace can't change.
pub fn validate_deployment_update(new: &Deployment, old: &Deployment) -> Result<(), Invalid> {
    let mut errors =
        validate_object_meta_update(&new.metadata, &old.metadata, &Path::new("metadata"));
    errors.extend(validate_immutable(
        &new.spec.selector,
        &old.spec.selector,
        &Path::new("spec").child("selector"),
    ));
    if let Err(invalid) = validate_deployment(new) {
        errors.extend(invalid.errors);
    }
    to_result(new, errors)
}

/// Validates a ReplicaSet.
pub fn validate_replica_set(rs: &ReplicaSet) -> Result<(), Invalid> {
    let mut errors = validate_object_meta(&rs.metadata, true, &Path::new("metadata"));
    errors.extend(validate_replica_set_spec(&rs.spec, &Path::new("spec")));
    to_result(rs, errors)
}

/// Validates an update of a ReplicaSet: besides [`validate_replica_set`],
/// the selector, name and namespace can't change.
pub fn validate_replica_set_update(new: &ReplicaSet, old: &ReplicaSet) -> Result<(), Invalid> {
    let mut errors =
        validate_object_meta_update(&new.metadata, &old.metadata, &Path::new("metadata"));
    errors.extend(validate_immutable(
        &new.spec.selector,
        &old.spec.selector,
        &Path::new("spec").child("selector"),
    ));
    if let Err(invalid) = validate_replica_set(new) {
        errors.extend(invalid.errors);
    }
    to_result(new, errors)
}
