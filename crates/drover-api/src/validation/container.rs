//! One container of a pod spec: name, image, lifecycle handlers, probes,
//! ports, environment (with the downward API's fields), volume mounts,
//! resources, security context, pull policy.

use std::collections::{BTreeMap, BTreeSet};

use super::errors::{BadValue, FieldError, Path};
use super::fields::{
    validate_dns1123_label, validate_id, validate_nonnegative, validate_qualified_name,
    validate_quantity,
};
use super::names::{
    is_env_var_name, is_qualified_name, is_valid_port_name, is_valid_port_num, regex_error,
    HTTP_HEADER_NAME_FMT,
};
use crate::core_v1::{
    Container, ContainerPort, EnvVar, HttpGetAction, LifecycleHandler, Probe, Protocol, PullPolicy,
    ResourceRequirements, SecurityContext, UriScheme,
};
use crate::meta::IntOrString;

/// Paths of the pod fields that `valueFrom.fieldRef` can read.
pub const DOWNWARD_API_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.podIP",
    "status.podIPs",
];

const RESOURCE_FIELD_PATHS: &[&str] = &[
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

fn is_container_resource_name(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage")
        || name.starts_with("hugepages-")
        || (name.contains('/') && is_qualified_name(name).is_empty())
}

fn validate_resources(resources: &ResourceRequirements, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut limits = BTreeMap::new();
    for (field, map) in [
        ("limits", &resources.limits),
        ("requests", &resources.requests),
    ] {
        for (name, quantity) in map {
            let p = path.child(field).key(name);
            if !is_container_resource_name(name) {
                errors.push(FieldError::invalid(
                    &p,
                    name.as_str(),
                    "must be a standard resource for containers",
                ));
            }
            let quantity_errors = validate_quantity(quantity, &p);
            if quantity_errors.is_empty() && field == "limits" {
                if let Ok(value) = quantity.to_nanos() {
                    limits.insert(name.clone(), (value, quantity));
                }
            }
            errors.extend(quantity_errors);
        }
    }
    for (name, request) in &resources.requests {
        let (Some((limit, limit_text)), Ok(value)) = (limits.get(name), request.to_nanos()) else {
            continue;
        };
        if value > *limit {
            errors.push(FieldError::invalid(
                &path.child("requests").key(name),
                request.0.as_str(),
                format!("must be less than or equal to {name} limit of {limit_text}"),
            ));
        }
    }
    errors
}

fn validate_port_num_or_name(port: &IntOrString, path: &Path) -> Vec<FieldError> {
    match port {
        IntOrString::Int(number) => is_valid_port_num(i64::from(*number))
            .into_iter()
            .map(|m| FieldError::invalid(path, *number, m))
            .collect(),
        IntOrString::String(name) => is_valid_port_name(name)
            .into_iter()
            .map(|m| FieldError::invalid(path, name, m))
            .collect(),
    }
}

fn validate_http_get(action: &HttpGetAction, path: &Path) -> Vec<FieldError> {
    let mut errors = validate_port_num_or_name(&action.port, &path.child("port"));
    if let Some(UriScheme::Other(other)) = &action.scheme {
        errors.push(FieldError::not_supported(
            &path.child("scheme"),
            other.as_str(),
            UriScheme::KNOWN,
        ));
    }
    for header in &action.http_headers {
        let valid = !header.name.is_empty()
            && header
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !valid {
            errors.push(FieldError::invalid(
                &path.child("httpHeaders"),
                &header.name,
                regex_error(
                    "a valid HTTP header must consist of alphanumeric characters or '-'",
                    HTTP_HEADER_NAME_FMT,
                    &["X-Header-Name"],
                ),
            ));
        }
    }
    errors
}

/// One handler: exec, httpGet, tcpSocket, sleep (lifecycle only).
fn validate_handler(
    exec: Option<&crate::core_v1::ExecAction>,
    http_get: Option<&HttpGetAction>,
    tcp_socket: Option<&crate::core_v1::TcpSocketAction>,
    sleep: Option<i64>,
    path: &Path,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut handlers = 0;
    let mut count = |name: &str, errors: &mut Vec<FieldError>| -> bool {
        handlers += 1;
        if handlers > 1 {
            errors.push(FieldError::forbidden(
                &path.child(name),
                "may not specify more than 1 handler type",
            ));
            false
        } else {
            true
        }
    };
    if let Some(exec) = exec {
        if count("exec", &mut errors) && exec.command.is_empty() {
            errors.push(FieldError::required(
                &path.child("exec").child("command"),
                "",
            ));
        }
    }
    if let Some(http_get) = http_get {
        if count("httpGet", &mut errors) {
            errors.extend(validate_http_get(http_get, &path.child("httpGet")));
        }
    }
    if let Some(tcp) = tcp_socket {
        if count("tcpSocket", &mut errors) {
            errors.extend(validate_port_num_or_name(
                &tcp.port,
                &path.child("tcpSocket").child("port"),
            ));
        }
    }
    if let Some(seconds) = sleep {
        if count("sleep", &mut errors) {
            errors.extend(validate_nonnegative(
                seconds,
                &path.child("sleep").child("seconds"),
            ));
        }
    }
    if handlers == 0 {
        errors.push(FieldError::required(path, "must specify a handler type"));
    }
    errors
}

fn validate_lifecycle_handler(handler: &LifecycleHandler, path: &Path) -> Vec<FieldError> {
    validate_handler(
        handler.exec.as_ref(),
        handler.http_get.as_ref(),
        handler.tcp_socket.as_ref(),
        handler.sleep.as_ref().map(|s| s.seconds),
        path,
    )
}

fn validate_probe(probe: &Probe, path: &Path) -> Vec<FieldError> {
    let mut errors = validate_handler(
        probe.exec.as_ref(),
        probe.http_get.as_ref(),
        probe.tcp_socket.as_ref(),
        None,
        path,
    );
    for (field, value) in [
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ] {
        if let Some(value) = value {
            errors.extend(validate_nonnegative(i64::from(value), &path.child(field)));
        }
    }
    if let Some(grace) = probe.termination_grace_period_seconds {
        if grace <= 0 {
            errors.push(FieldError::invalid(
                &path.child("terminationGracePeriodSeconds"),
                grace,
                "must be greater than 0",
            ));
        }
    }
    errors
}

fn validate_security_context(context: &SecurityContext, path: &Path) -> Vec<FieldError> {
    let mut errors = validate_id(context.run_as_user, &path.child("runAsUser"));
    errors.extend(validate_id(context.run_as_group, &path.child("runAsGroup")));
    if context.privileged == Some(true) && context.allow_privilege_escalation == Some(false) {
        errors.push(FieldError::invalid(
            path,
            BadValue::json(context),
            "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
        ));
    }
    errors
}

fn validate_env(env: &[EnvVar], path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, var) in env.iter().enumerate() {
        let p = path.index(i);
        if var.name.is_empty() {
            errors.push(FieldError::required(&p.child("name"), ""));
        } else {
            errors.extend(
                is_env_var_name(&var.name)
                    .into_iter()
                    .map(|m| FieldError::invalid(&p.child("name"), &var.name, m)),
            );
        }
        let Some(source) = &var.value_from else {
            continue;
        };
        let vf = p.child("valueFrom");
        let mut sources = source.extra.len();
        if let Some(field_ref) = &source.field_ref {
            sources += 1;
            let fr = vf.child("fieldRef");
            if field_ref.field_path.is_empty() {
                errors.push(FieldError::required(&fr.child("fieldPath"), ""));
            } else if !matches!(field_ref.api_version.as_str(), "" | "v1") {
                errors.push(FieldError::not_supported(
                    &fr.child("apiVersion"),
                    &field_ref.api_version,
                    &["v1"],
                ));
            } else if let Some(subscript) = field_ref
                .field_path
                .strip_prefix("metadata.labels['")
                .or_else(|| field_ref.field_path.strip_prefix("metadata.annotations['"))
            {
                let key = subscript.strip_suffix("']").unwrap_or(subscript);
                errors.extend(validate_qualified_name(&key.to_lowercase(), &fr));
            } else if !DOWNWARD_API_FIELD_PATHS.contains(&field_ref.field_path.as_str()) {
                let mut supported = DOWNWARD_API_FIELD_PATHS.to_vec();
                supported.sort_unstable();
                errors.push(FieldError::not_supported(
                    &fr.child("fieldPath"),
                    &field_ref.field_path,
                    &supported,
                ));
            }
        }
        if let Some(resource_ref) = &source.resource_field_ref {
            sources += 1;
            let rr = vf.child("resourceFieldRef");
            if resource_ref.resource.is_empty() {
                errors.push(FieldError::required(&rr.child("resource"), ""));
            } else if !RESOURCE_FIELD_PATHS.contains(&resource_ref.resource.as_str()) {
                errors.push(FieldError::not_supported(
                    &rr.child("resource"),
                    &resource_ref.resource,
                    RESOURCE_FIELD_PATHS,
                ));
            }
            if let Some(divisor) = &resource_ref.divisor {
                errors.extend(validate_quantity(divisor, &rr.child("divisor")));
            }
        }
        let (refs, ref_errors) = super::config::validate_env_key_refs(
            source.config_map_key_ref.as_ref(),
            source.secret_key_ref.as_ref(),
            &vf,
        );
        sources += refs;
        errors.extend(ref_errors);
        if sources == 0 {
            errors.push(FieldError::invalid(
                &vf,
                "",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            ));
        } else if !var.value.is_empty() {
            errors.push(FieldError::invalid(
                &vf,
                "",
                "may not be specified when `value` is not empty",
            ));
        } else if sources > 1 {
            errors.push(FieldError::invalid(
                &vf,
                "",
                "may not have more than one field specified at a time",
            ));
        }
    }
    errors
}

fn validate_ports(
    ports: &[ContainerPort],
    names: &mut BTreeSet<String>,
    path: &Path,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let p = path.index(i);
        if !port.name.is_empty() {
            let messages = is_valid_port_name(&port.name);
            if !messages.is_empty() {
                errors.extend(
                    messages
                        .into_iter()
                        .map(|m| FieldError::invalid(&p.child("name"), &port.name, m)),
                );
            } else if !names.insert(port.name.clone()) {
                errors.push(FieldError::duplicate(&p.child("name"), &port.name));
            }
        }
        if port.container_port == 0 {
            errors.push(FieldError::required(&p.child("containerPort"), ""));
        } else {
            errors.extend(
                is_valid_port_num(i64::from(port.container_port))
                    .into_iter()
                    .map(|m| {
                        FieldError::invalid(&p.child("containerPort"), port.container_port, m)
                    }),
            );
        }
        if let Some(host_port) = port.host_port.filter(|&h| h != 0) {
            errors.extend(
                is_valid_port_num(i64::from(host_port))
                    .into_iter()
                    .map(|m| FieldError::invalid(&p.child("hostPort"), host_port, m)),
            );
        }
        if let Some(Protocol::Other(other)) = &port.protocol {
            errors.push(FieldError::not_supported(
                &p.child("protocol"),
                other.as_str(),
                Protocol::KNOWN,
            ));
        }
    }
    errors
}

pub(super) fn validate_container(
    container: &Container,
    volumes: &BTreeSet<String>,
    port_names: &mut BTreeSet<String>,
    path: &Path,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if container.name.is_empty() {
        errors.push(FieldError::required(&path.child("name"), ""));
    } else {
        errors.extend(validate_dns1123_label(&container.name, &path.child("name")));
    }
    if container.image.is_empty() {
        errors.push(FieldError::required(&path.child("image"), ""));
    }
    if let Some(lifecycle) = &container.lifecycle {
        let lp = path.child("lifecycle");
        if let Some(handler) = &lifecycle.post_start {
            errors.extend(validate_lifecycle_handler(handler, &lp.child("postStart")));
        }
        if let Some(handler) = &lifecycle.pre_stop {
            errors.extend(validate_lifecycle_handler(handler, &lp.child("preStop")));
        }
    }
    if let Some(probe) = &container.liveness_probe {
        errors.extend(validate_probe(probe, &path.child("livenessProbe")));
        if let Some(threshold) = probe.success_threshold.filter(|&t| t != 1) {
            errors.push(FieldError::invalid(
                &path.child("livenessProbe").child("successThreshold"),
                threshold,
                "must be 1",
            ));
        }
    }
    if let Some(probe) = &container.readiness_probe {
        errors.extend(validate_probe(probe, &path.child("readinessProbe")));
        if let Some(grace) = probe.termination_grace_period_seconds {
            errors.push(FieldError::invalid(
                &path
                    .child("readinessProbe")
                    .child("terminationGracePeriodSeconds"),
                grace,
                "must not be set for readinessProbes",
            ));
        }
    }
    if let Some(probe) = &container.startup_probe {
        errors.extend(validate_probe(probe, &path.child("startupProbe")));
        if let Some(threshold) = probe.success_threshold.filter(|&t| t != 1) {
            errors.push(FieldError::invalid(
                &path.child("startupProbe").child("successThreshold"),
                threshold,
                "must be 1",
            ));
        }
    }
    errors.extend(validate_ports(
        &container.ports,
        port_names,
        &path.child("ports"),
    ));
    errors.extend(validate_env(&container.env, &path.child("env")));
    errors.extend(super::config::validate_env_from(
        &container.env_from,
        &path.child("envFrom"),
    ));
    let mut mount_paths = BTreeSet::new();
    for (i, mount) in container.volume_mounts.iter().enumerate() {
        let p = path.child("volumeMounts").index(i);
        if mount.name.is_empty() {
            errors.push(FieldError::required(&p.child("name"), ""));
        } else if !volumes.contains(&mount.name) {
            errors.push(FieldError::not_found(&p.child("name"), &mount.name));
        }
        if mount.mount_path.is_empty() {
            errors.push(FieldError::required(&p.child("mountPath"), ""));
        } else if !mount_paths.insert(mount.mount_path.clone()) {
            errors.push(FieldError::invalid(
                &p.child("mountPath"),
                &mount.mount_path,
                "must be unique",
            ));
        }
        if !mount.sub_path.is_empty() {
            if mount.sub_path.starts_with('/') {
                errors.push(FieldError::invalid(
                    &p.child("subPath"),
                    &mount.sub_path,
                    "must be a relative path",
                ));
            }
            if mount.sub_path.split('/').any(|s| s == "..") {
                errors.push(FieldError::invalid(
                    &p.child("subPath"),
                    &mount.sub_path,
                    "must not contain '..'",
                ));
            }
        }
        if let Some(crate::core_v1::MountPropagation::Other(other)) = &mount.mount_propagation {
            errors.push(FieldError::not_supported(
                &p.child("mountPropagation"),
                other.as_str(),
                crate::core_v1::MountPropagation::KNOWN,
            ));
        }
    }
    errors.extend(validate_resources(
        &container.resources,
        &path.child("resources"),
    ));
    if let Some(context) = &container.security_context {
        errors.extend(validate_security_context(
            context,
            &path.child("securityContext"),
        ));
    }
    if let Some(PullPolicy::Other(other)) = &container.image_pull_policy {
        errors.push(FieldError::not_supported(
            &path.child("imagePullPolicy"),
            other.as_str(),
            PullPolicy::KNOWN,
        ));
    }
    errors
}
