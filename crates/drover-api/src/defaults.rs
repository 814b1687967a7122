//! The defaults the API server fills in, so that stored objects read the
//! same as in Kubernetes (`kubectl get -o yaml` shows them) and the
//! controller and agents never have to guess.
//!
//! | field | default |
//! |---|---|
//! | `restartPolicy` | `Always` |
//! | `terminationGracePeriodSeconds` | 30 |
//! | `imagePullPolicy` | `Always` for `:latest` or no tag, else `IfNotPresent` |
//! | `ports[].protocol` | `TCP` |
//! | `ports[].hostPort` with `hostNetwork` | the container port |
//! | `resources.requests` | the limits, for each resource without a request |
//! | probes | `timeoutSeconds` 1, `periodSeconds` 10, `successThreshold` 1, `failureThreshold` 3 |
//! | `httpGet` | `path` `/`, `scheme` `HTTP` |
//! | `fieldRef.apiVersion` | `v1` |
//! | DaemonSet `updateStrategy` | `RollingUpdate`, `maxUnavailable` 1, `maxSurge` 0 |
//! | DaemonSet `revisionHistoryLimit` | 10 |
//! | Deployment `replicas` | 1 |
//! | Deployment `strategy` | `RollingUpdate`, `maxUnavailable` 25%, `maxSurge` 25% |
//! | Deployment `revisionHistoryLimit` | 10 |
//! | Deployment `progressDeadlineSeconds` | 600 |
//! | ReplicaSet `replicas` | 1 |

use crate::apps_v1::{
    DaemonSet, DaemonSetUpdateStrategyType, Deployment, DeploymentStrategyType, ReplicaSet,
    RollingUpdateDaemonSet, RollingUpdateDeployment,
};
use crate::core_v1::{
    Container, HttpGetAction, LifecycleHandler, Pod, PodSpec, Probe, Protocol, PullPolicy,
    RestartPolicy, UriScheme,
};
use crate::manifest::Manifest;
use crate::meta::IntOrString;

/// Default grace period between the stop signal and the kill.
pub const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;
/// Default number of old ControllerRevisions a DaemonSet keeps (and of old
/// ReplicaSets a Deployment keeps).
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;
/// Default seconds a Deployment's rollout may make no progress.
pub const DEFAULT_PROGRESS_DEADLINE_SECONDS: i32 = 600;
/// Default `maxSurge` and `maxUnavailable` of a Deployment.
pub const DEFAULT_DEPLOYMENT_MAX_SURGE_UNAVAILABLE: &str = "25%";

/// The pull policy Kubernetes gives an image: `Always` when its tag is
/// `latest` or it has no tag nor digest, `IfNotPresent` otherwise.
pub fn default_image_pull_policy(image: &str) -> PullPolicy {
    if image.contains('@') {
        return PullPolicy::IfNotPresent;
    }
    let last_segment = image.rsplit('/').next().unwrap_or(image);
    match last_segment.rsplit_once(':') {
        Some((_, tag)) if tag != "latest" => PullPolicy::IfNotPresent,
        _ => PullPolicy::Always,
    }
}

fn default_http_get(action: &mut HttpGetAction) {
    if action.path.is_empty() {
        action.path = "/".to_owned();
    }
    action.scheme.get_or_insert(UriScheme::Http);
}

fn default_probe(probe: &mut Probe) {
    probe.timeout_seconds.get_or_insert(1);
    probe.period_seconds.get_or_insert(10);
    probe.success_threshold.get_or_insert(1);
    probe.failure_threshold.get_or_insert(3);
    if let Some(action) = &mut probe.http_get {
        default_http_get(action);
    }
}

fn default_handler(handler: &mut LifecycleHandler) {
    if let Some(action) = &mut handler.http_get {
        default_http_get(action);
    }
}

fn default_container(container: &mut Container, host_network: bool) {
    if container.image_pull_policy.is_none() {
        container.image_pull_policy = Some(default_image_pull_policy(&container.image));
    }
    for port in &mut container.ports {
        port.protocol.get_or_insert(Protocol::Tcp);
        if host_network && port.host_port.unwrap_or(0) == 0 {
            port.host_port = Some(port.container_port);
        }
    }
    for var in &mut container.env {
        if let Some(field_ref) = var.value_from.as_mut().and_then(|v| v.field_ref.as_mut()) {
            if field_ref.api_version.is_empty() {
                field_ref.api_version = "v1".to_owned();
            }
        }
    }
    let resources = &mut container.resources;
    for (name, limit) in &resources.limits {
        resources
            .requests
            .entry(name.clone())
            .or_insert_with(|| limit.clone());
    }
    for probe in [
        &mut container.liveness_probe,
        &mut container.readiness_probe,
        &mut container.startup_probe,
    ]
    .into_iter()
    .flatten()
    {
        default_probe(probe);
    }
    if let Some(lifecycle) = &mut container.lifecycle {
        for handler in [&mut lifecycle.post_start, &mut lifecycle.pre_stop]
            .into_iter()
            .flatten()
        {
            default_handler(handler);
        }
    }
}

/// Fills in the defaults of a pod spec.
pub fn default_pod_spec(spec: &mut PodSpec) {
    spec.restart_policy.get_or_insert(RestartPolicy::Always);
    spec.termination_grace_period_seconds
        .get_or_insert(DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS);
    let host_network = spec.host_network;
    for container in &mut spec.containers {
        default_container(container, host_network);
    }
}

/// Fills in the defaults of a pod, and the tolerations Kubernetes'
/// `DefaultTolerationSeconds` admission adds to every pod
/// ([`crate::taints::add_default_toleration_seconds`]: `not-ready` and
/// `unreachable` `NoExecute` for 300 s, unless it tolerates them already).
/// Added on every write, not only at creation, so that applying the same
/// manifest again leaves the pod unchanged (they may only be added).
pub fn default_pod(pod: &mut Pod) {
    default_pod_spec(&mut pod.spec);
    crate::taints::add_default_toleration_seconds(&mut pod.spec);
}

/// Fills in the defaults of a DaemonSet (and of its pod template).
pub fn default_daemon_set(ds: &mut DaemonSet) {
    let strategy = &mut ds.spec.update_strategy;
    let kind = strategy
        .r#type
        .get_or_insert(DaemonSetUpdateStrategyType::RollingUpdate);
    if *kind == DaemonSetUpdateStrategyType::RollingUpdate {
        let rolling = strategy
            .rolling_update
            .get_or_insert_with(RollingUpdateDaemonSet::default);
        rolling.max_unavailable.get_or_insert(IntOrString::Int(1));
        rolling.max_surge.get_or_insert(IntOrString::Int(0));
    }
    ds.spec
        .revision_history_limit
        .get_or_insert(DEFAULT_REVISION_HISTORY_LIMIT);
    default_pod_spec(&mut ds.spec.template.spec);
}

/// Fills in the defaults of a Deployment (and of its pod template), as the
/// API server's `SetDefaults_Deployment` does for apps/v1.
pub fn default_deployment(deployment: &mut Deployment) {
    let spec = &mut deployment.spec;
    spec.replicas.get_or_insert(1);
    let strategy = &mut spec.strategy;
    let kind = strategy
        .r#type
        .get_or_insert(DeploymentStrategyType::RollingUpdate);
    if *kind == DeploymentStrategyType::RollingUpdate {
        let rolling = strategy
            .rolling_update
            .get_or_insert_with(RollingUpdateDeployment::default);
        let quarter = || IntOrString::String(DEFAULT_DEPLOYMENT_MAX_SURGE_UNAVAILABLE.into());
        rolling.max_unavailable.get_or_insert_with(quarter);
        rolling.max_surge.get_or_insert_with(quarter);
    }
    spec.revision_history_limit
        .get_or_insert(DEFAULT_REVISION_HISTORY_LIMIT);
    spec.progress_deadline_seconds
        .get_or_insert(DEFAULT_PROGRESS_DEADLINE_SECONDS);
    default_pod_spec(&mut spec.template.spec);
}

/// Fills in the defaults of a ReplicaSet (and of its pod template).
pub fn default_replica_set(rs: &mut ReplicaSet) {
    rs.spec.replicas.get_or_insert(1);
    default_pod_spec(&mut rs.spec.template.spec);
}

/// Fills in the defaults of any manifest.
pub fn default_manifest(manifest: &mut Manifest) {
    match manifest {
        Manifest::DaemonSet(ds) => default_daemon_set(ds),
        Manifest::Deployment(d) => default_deployment(d),
        Manifest::ReplicaSet(rs) => default_replica_set(rs),
        Manifest::Pod(pod) => default_pod(pod),
        Manifest::PriorityClass(pc) => {
            if pc.preemption_policy.is_none() {
                pc.preemption_policy = Some("PreemptLowerPriority".into());
            }
        }
        Manifest::Secret(secret) => default_secret(secret),
        Manifest::Namespace(ns) => {
            if ns.status.phase.is_empty() {
                ns.status.phase = "Active".into();
            }
        }
        Manifest::Node(_)
        | Manifest::ControllerRevision(_)
        | Manifest::Event(_)
        | Manifest::ConfigMap(_)
        | Manifest::ServiceAccount(_) => {}
    }
}

/// A Secret as the API server stores it: type `Opaque` when it names none,
/// `stringData` folded into `data` (base64; a key in both takes the
/// `stringData` value) and dropped.
pub fn default_secret(secret: &mut crate::Secret) {
    if secret.r#type.is_empty() {
        secret.r#type = crate::config_v1::SECRET_TYPE_OPAQUE.into();
    }
    for (key, value) in std::mem::take(&mut secret.string_data) {
        secret.data.insert(
            key,
            crate::validation::config::encode_base64(value.as_bytes()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core_v1::ContainerPort;
    use crate::validation::validate_daemon_set;

    #[test]
    fn pull_policy_follows_the_tag() {
        assert_eq!(default_image_pull_policy("nginx"), PullPolicy::Always);
        assert_eq!(
            default_image_pull_policy("nginx:latest"),
            PullPolicy::Always
        );
        assert_eq!(
            default_image_pull_policy("nginx:1.25"),
            PullPolicy::IfNotPresent
        );
        assert_eq!(
            default_image_pull_policy("localhost:5000/nginx"),
            PullPolicy::Always
        );
        assert_eq!(
            default_image_pull_policy("localhost:5000/nginx:1"),
            PullPolicy::IfNotPresent
        );
        assert_eq!(
            default_image_pull_policy("nginx@sha256:abc"),
            PullPolicy::IfNotPresent
        );
    }

    #[test]
    fn daemon_set_defaults_are_valid_and_idempotent() {
        let mut ds = DaemonSet::default();
        ds.metadata.name = "x".into();
        ds.metadata.namespace = "default".into();
        ds.spec.selector = Some(crate::meta::LabelSelector {
            match_labels: [("app".to_string(), "x".to_string())].into(),
            ..Default::default()
        });
        ds.spec.template.metadata.labels = [("app".to_string(), "x".to_string())].into();
        ds.spec.template.spec.host_network = true;
        ds.spec.template.spec.containers = vec![Container {
            name: "c".into(),
            image: "busybox:1.36".into(),
            ports: vec![ContainerPort {
                container_port: 9100,
                ..Default::default()
            }],
            liveness_probe: Some(Probe {
                http_get: Some(HttpGetAction {
                    port: IntOrString::Int(9100),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            resources: crate::core_v1::ResourceRequirements {
                limits: [("memory".to_string(), "64Mi".into())].into(),
                ..Default::default()
            },
            ..Default::default()
        }];
        default_daemon_set(&mut ds);
        let rolling = ds.spec.update_strategy.rolling_update.clone().unwrap();
        assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(1)));
        assert_eq!(rolling.max_surge, Some(IntOrString::Int(0)));
        assert_eq!(ds.spec.revision_history_limit, Some(10));
        let spec = &ds.spec.template.spec;
        assert_eq!(spec.restart_policy, Some(RestartPolicy::Always));
        assert_eq!(spec.termination_grace_period_seconds, Some(30));
        let c = &spec.containers[0];
        assert_eq!(c.image_pull_policy, Some(PullPolicy::IfNotPresent));
        assert_eq!(c.ports[0].protocol, Some(Protocol::Tcp));
        assert_eq!(c.ports[0].host_port, Some(9100));
        assert_eq!(c.resources.requests.get("memory"), Some(&"64Mi".into()));
        let probe = c.liveness_probe.as_ref().unwrap();
        assert_eq!(probe.period_seconds, Some(10));
        assert_eq!(probe.http_get.as_ref().unwrap().path, "/");
        assert_eq!(validate_daemon_set(&ds), Ok(()));
        let once = ds.clone();
        default_daemon_set(&mut ds);
        assert_eq!(ds, once);
    }

    #[test]
    fn on_delete_gets_no_rolling_update() {
        let mut ds = DaemonSet::default();
        ds.spec.update_strategy.r#type = Some(DaemonSetUpdateStrategyType::OnDelete);
        default_daemon_set(&mut ds);
        assert_eq!(ds.spec.update_strategy.rolling_update, None);
    }
}
