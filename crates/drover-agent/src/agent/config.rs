//! The ConfigMaps and Secrets the server sent (`PodConfig`: exactly those
//! the node's pods reference), kept in memory only: Secrets never reach the
//! agent's disk except inside a pod's volume, so an agent restarted with no
//! server has none and leaves the volumes of the containers it adopts as
//! they are. From them the pods' environment and volume files are resolved
//! ([`drover_api::pod_config`]); when they change, the volumes of running
//! pods are rewritten in place (no restart; the environment changes only
//! when a container starts again, as in Kubernetes).

use crate::runtime::ConfigVolumes;
use drover_api::pod_config::{references, resolve_env, resolve_volumes, ConfigError, ConfigSource};
use drover_api::{ConfigMap, Pod, Secret};
use drover_proto::v1 as pb;
use std::collections::HashMap;
use std::sync::Arc;

/// One `PodConfig`, decoded.
#[derive(Debug, Default)]
pub(crate) struct ConfigSet {
    config_maps: HashMap<(String, String), ConfigMap>,
    secrets: HashMap<(String, String), Secret>,
    /// Whether a server sent it (false: the agent started and has not
    /// heard from a server yet).
    synced: bool,
}

impl ConfigSource for ConfigSet {
    fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap> {
        self.config_maps
            .get(&(namespace.to_string(), name.to_string()))
    }
    fn secret(&self, namespace: &str, name: &str) -> Option<&Secret> {
        self.secrets.get(&(namespace.to_string(), name.to_string()))
    }
}

/// Decodes a server's `PodConfig` (an object that does not parse is
/// logged and left out).
pub(super) fn decode(msg: &pb::PodConfig, node: &str) -> ConfigSet {
    let mut set = ConfigSet {
        synced: true,
        ..Default::default()
    };
    for bytes in &msg.config_maps {
        match serde_json::from_slice::<ConfigMap>(bytes) {
            Ok(cm) => {
                let key = (cm.metadata.namespace.clone(), cm.metadata.name.clone());
                set.config_maps.insert(key, cm);
            }
            Err(e) => {
                tracing::warn!(node = %node, "the server sent a ConfigMap that does not parse: {e}")
            }
        }
    }
    for bytes in &msg.secrets {
        match serde_json::from_slice::<Secret>(bytes) {
            Ok(s) => {
                let key = (s.metadata.namespace.clone(), s.metadata.name.clone());
                set.secrets.insert(key, s);
            }
            // Never the value: the error names the position only.
            Err(e) => {
                tracing::warn!(node = %node, "the server sent a Secret that does not parse (line {}, column {})", e.line(), e.column())
            }
        }
    }
    set
}

/// What a start needs from the ConfigMaps and Secrets: the pod with the
/// container's environment resolved, and the volumes' files.
pub(crate) struct Resolved {
    pub(crate) pod: Arc<Pod>,
    pub(crate) volumes: Arc<ConfigVolumes>,
}

impl ConfigSet {
    /// Resolves what container `index` of `pod` needs; the kubelet's
    /// `CreateContainerConfigError` message when an object or key is
    /// missing (or none was received yet).
    pub(crate) fn resolve(&self, pod: &Arc<Pod>, index: usize) -> Result<Resolved, ConfigError> {
        let refs = references(&pod.spec);
        if refs.is_empty() {
            return Ok(Resolved {
                pod: pod.clone(),
                volumes: Arc::default(),
            });
        }
        if !self.synced {
            return Err(ConfigError {
                message: "failed to sync configmap cache: the agent has not received its ConfigMaps and Secrets from a server yet".into(),
                volume: None,
            });
        }
        let volumes = resolve_volumes(pod, self)?;
        let mut resolved = (**pod).clone();
        if let Some(c) = resolved.spec.containers.get_mut(index) {
            c.env = resolve_env(pod, &pod.spec.containers[index], self)?;
            c.env_from.clear();
        }
        Ok(Resolved {
            pod: Arc::new(resolved),
            volumes: Arc::new(volumes),
        })
    }

    /// The volume files of a running pod, for an update: `None` when
    /// nothing can be said (no server yet, or an object is missing: what is
    /// mounted stays).
    pub(crate) fn volumes_of(&self, pod: &Pod) -> Option<ConfigVolumes> {
        if !self.synced {
            return None;
        }
        let v = resolve_volumes(pod, self).ok()?;
        (!v.is_empty()).then_some(v)
    }
}

/// A hash of volume files, to tell whether they changed.
pub(crate) fn hash(v: &ConfigVolumes) -> u64 {
    let mut bytes = Vec::new();
    for (name, files) in v {
        bytes.extend_from_slice(name.as_bytes());
        bytes.push(0);
        for (path, f) in &files.files {
            bytes.extend_from_slice(path.as_bytes());
            bytes.push(0);
            bytes.extend_from_slice(&f.mode.to_le_bytes());
            bytes.extend_from_slice(&(f.data.len() as u64).to_le_bytes());
            bytes.extend_from_slice(&f.data);
        }
    }
    crate::runtime::fnv1a(&bytes)
}
