//! Pods: the pod spec (volumes, containers and their shared port
//! namespace, restart policy, node selection, security context, affinity,
//! tolerations), a pod, and what a pod update may change.

use std::collections::BTreeSet;

use super::affinity::{validate_pod_affinity, validate_topology_spread_constraints};
use super::container::validate_container;
use super::errors::{to_result, FieldError, Invalid, Path};
use super::fields::{
    validate_dns1123_label, validate_dns1123_subdomain, validate_id, validate_labels,
    validate_nonnegative, validate_quantity,
};
use super::meta::{validate_object_meta, validate_object_meta_update};
use super::names::MAX_CONTAINERS;
use super::selectors::{validate_node_selector, validate_node_selector_term};
use super::taints::validate_tolerations;
use crate::core_v1::{Pod, PodSecurityContext, PodSpec, RestartPolicy, Volume};

fn validate_volumes(volumes: &[Volume], path: &Path) -> (BTreeSet<String>, Vec<FieldError>) {
    let mut errors = Vec::new();
    let mut names = BTreeSet::new();
    for (i, volume) in volumes.iter().enumerate() {
        let p = path.index(i);
        if volume.name.is_empty() {
            errors.push(FieldError::required(&p.child("name"), ""));
        } else {
            errors.extend(validate_dns1123_label(&volume.name, &p.child("name")));
        }
        if !volume.name.is_empty() && !names.insert(volume.name.clone()) {
            errors.push(FieldError::duplicate(&p.child("name"), &volume.name));
        }
        let mut typed = 0;
        if let Some(host_path) = &volume.host_path {
            typed += 1;
            let hp = p.child("hostPath");
            if host_path.path.is_empty() {
                errors.push(FieldError::required(&hp.child("path"), ""));
            } else {
                if !host_path.path.starts_with('/') {
                    errors.push(FieldError::invalid(
                        &hp.child("path"),
                        &host_path.path,
                        "must be an absolute path",
                    ));
                }
                if host_path.path.split('/').any(|segment| segment == "..") {
                    errors.push(FieldError::invalid(
                        &hp.child("path"),
                        &host_path.path,
                        "must not contain '..'",
                    ));
                }
            }
            if let Some(crate::core_v1::HostPathType::Other(other)) = &host_path.r#type {
                let mut supported = vec![""];
                supported.extend_from_slice(crate::core_v1::HostPathType::KNOWN);
                errors.push(FieldError::not_supported(
                    &hp.child("type"),
                    other.as_str(),
                    &supported,
                ));
            }
        }
        if let Some(empty_dir) = &volume.empty_dir {
            let ed = p.child("emptyDir");
            if typed > 0 {
                errors.push(FieldError::forbidden(
                    &ed,
                    "may not specify more than 1 volume type",
                ));
            }
            typed += 1;
            if !matches!(empty_dir.medium.as_str(), "" | "Memory") {
                errors.push(FieldError::not_supported(
                    &ed.child("medium"),
                    &empty_dir.medium,
                    &["", "Memory"],
                ));
            }
            if let Some(limit) = &empty_dir.size_limit {
                errors.extend(validate_quantity(limit, &ed.child("sizeLimit")));
            }
        }
        let (config, config_errors) = super::config::validate_config_volume(volume, &p);
        errors.extend(config_errors);
        if typed + config > 1 {
            errors.push(FieldError::forbidden(
                &p,
                "may not specify more than 1 volume type",
            ));
        }
        typed += config;
        if typed == 0 && volume.extra.is_empty() {
            errors.push(FieldError::required(&p, "must specify a volume type"));
        }
    }
    (names, errors)
}

fn validate_pod_security_context(context: &PodSecurityContext, path: &Path) -> Vec<FieldError> {
    let mut errors = validate_id(context.run_as_user, &path.child("runAsUser"));
    errors.extend(validate_id(context.run_as_group, &path.child("runAsGroup")));
    errors.extend(validate_id(context.fs_group, &path.child("fsGroup")));
    for (i, group) in context.supplemental_groups.iter().enumerate() {
        errors.extend(validate_id(
            Some(*group),
            &path.child("supplementalGroups").index(i),
        ));
    }
    errors
}

/// Errors of a pod spec (of a pod, or of a DaemonSet's template).
///
/// `check_restart_policy` is false for a template whose owner checks the
/// restart policy itself (a DaemonSet allows only `Always`).
pub fn validate_pod_spec(
    spec: &PodSpec,
    path: &Path,
    check_restart_policy: bool,
) -> Vec<FieldError> {
    let (volumes, mut errors) = validate_volumes(&spec.volumes, &path.child("volumes"));
    let containers = path.child("containers");
    if spec.containers.is_empty() {
        errors.push(FieldError::required(&containers, ""));
    }
    if spec.containers.len() > MAX_CONTAINERS {
        errors.push(FieldError::too_many(
            &containers,
            spec.containers.len(),
            MAX_CONTAINERS,
        ));
    }
    let mut names = BTreeSet::new();
    let mut port_names = BTreeSet::new();
    let mut host_ports = BTreeSet::new();
    for (i, container) in spec.containers.iter().enumerate() {
        let p = containers.index(i);
        errors.extend(validate_container(container, &volumes, &mut port_names, &p));
        if !container.name.is_empty() && !names.insert(container.name.clone()) {
            errors.push(FieldError::duplicate(&p.child("name"), &container.name));
        }
        for (j, port) in container.ports.iter().enumerate() {
            let pp = p.child("ports").index(j);
            if spec.host_network && port.host_port.is_some_and(|h| h != port.container_port) {
                errors.push(FieldError::invalid(
                    &pp.child("containerPort"),
                    port.container_port,
                    "must match `hostPort` when `hostNetwork` is true",
                ));
            }
            let host_port = if spec.host_network {
                port.host_port.unwrap_or(port.container_port)
            } else {
                port.host_port.unwrap_or(0)
            };
            if host_port == 0 {
                continue;
            }
            let protocol = port.protocol.as_ref().map_or("TCP", |p| p.as_str());
            let key = format!("{protocol}/{}/{host_port}", port.host_ip);
            if !host_ports.insert(key.clone()) {
                errors.push(FieldError::duplicate(&pp.child("hostPort"), key));
            }
        }
    }
    if check_restart_policy {
        if let Some(RestartPolicy::Other(other)) = &spec.restart_policy {
            errors.push(FieldError::not_supported(
                &path.child("restartPolicy"),
                other.as_str(),
                RestartPolicy::KNOWN,
            ));
        }
    }
    errors.extend(validate_labels(
        &spec.node_selector,
        &path.child("nodeSelector"),
    ));
    for (field, value) in [
        ("nodeName", &spec.node_name),
        ("serviceAccountName", &spec.service_account_name),
        ("priorityClassName", &spec.priority_class_name),
    ] {
        if !value.is_empty() {
            errors.extend(validate_dns1123_subdomain(value, &path.child(field)));
        }
    }
    if let Some(grace) = spec.termination_grace_period_seconds {
        errors.extend(validate_nonnegative(
            grace,
            &path.child("terminationGracePeriodSeconds"),
        ));
    }
    if let Some(context) = &spec.security_context {
        errors.extend(validate_pod_security_context(
            context,
            &path.child("securityContext"),
        ));
    }
    if let Some(node_affinity) = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
    {
        let na = path.child("affinity").child("nodeAffinity");
        if let Some(required) = &node_affinity.required_during_scheduling_ignored_during_execution {
            errors.extend(validate_node_selector(
                required,
                &na.child("requiredDuringSchedulingIgnoredDuringExecution"),
            ));
        }
        let preferred = na.child("preferredDuringSchedulingIgnoredDuringExecution");
        for (i, term) in node_affinity
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .enumerate()
        {
            let p = preferred.index(i);
            if !(1..=100).contains(&term.weight) {
                errors.push(FieldError::invalid(
                    &p.child("weight"),
                    term.weight,
                    "must be in the range 1-100",
                ));
            }
            errors.extend(validate_node_selector_term(
                &term.preference,
                &p.child("preference"),
            ));
        }
    }
    if let Some(affinity) = &spec.affinity {
        errors.extend(validate_pod_affinity(affinity, &path.child("affinity")));
    }
    errors.extend(validate_topology_spread_constraints(
        &spec.topology_spread_constraints,
        &path.child("topologySpreadConstraints"),
    ));
    errors.extend(validate_tolerations(
        &spec.tolerations,
        &path.child("tolerations"),
    ));
    errors
}

/// Validates a pod.
pub fn validate_pod(pod: &Pod) -> Result<(), Invalid> {
    let mut errors = validate_object_meta(&pod.metadata, true, &Path::new("metadata"));
    errors.extend(validate_pod_spec(&pod.spec, &Path::new("spec"), true));
    to_result(pod, errors)
}

/// Validates an update of a pod: besides [`validate_pod`], only container
/// images may change, tolerations may only be added, and `nodeName` may
/// only be set when it was empty.
pub fn validate_pod_update(new: &Pod, old: &Pod) -> Result<(), Invalid> {
    let mut errors =
        validate_object_meta_update(&new.metadata, &old.metadata, &Path::new("metadata"));
    let mut comparable = new.spec.clone();
    if comparable.containers.len() == old.spec.containers.len() {
        for (container, old_container) in comparable.containers.iter_mut().zip(&old.spec.containers)
        {
            container.image.clone_from(&old_container.image);
        }
    }
    if old
        .spec
        .tolerations
        .iter()
        .all(|t| comparable.tolerations.contains(t))
    {
        comparable.tolerations.clone_from(&old.spec.tolerations);
    }
    if old.spec.node_name.is_empty() {
        comparable.node_name.clear();
    }
    if comparable != old.spec {
        errors.push(FieldError::forbidden(
            &Path::new("spec"),
            "pod updates may not change fields other than `spec.containers[*].image`, `spec.tolerations` (only additions to existing tolerations) and `spec.nodeName` (only when unset)",
        ));
    }
    if let Err(invalid) = validate_pod(new) {
        errors.extend(invalid.errors);
    }
    to_result(new, errors)
}
