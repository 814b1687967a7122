//! The ConfigMaps and Secrets agent sessions send, and which pods reference
//! each (by store key), so that a change reaches only the nodes whose pods
//! use the object. A node is sent exactly the objects its pods reference
//! ([`ConfigIndex::for_pods`]), never another (NodeRestriction).

use crate::api::key;
use drover_api::pod_config::references;
use drover_api::{ConfigMap, Kind, Pod, Secret};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The objects, and who references them.
#[derive(Default)]
pub(super) struct ConfigIndex {
    config_maps: HashMap<String, Arc<ConfigMap>>,
    secrets: HashMap<String, Arc<Secret>>,
    /// Object key -> the keys of the pods that reference it.
    refs: HashMap<String, HashSet<String>>,
    /// Pod key -> the object keys it references.
    pod_refs: HashMap<String, Vec<String>>,
}

/// The store keys of the objects `pod` references.
fn ref_keys(pod: &Pod) -> Vec<String> {
    let r = references(&pod.spec);
    let ns = pod.metadata.namespace.as_str();
    r.config_maps
        .iter()
        .map(|n| key(Kind::ConfigMap, ns, n))
        .chain(r.secrets.iter().map(|n| key(Kind::Secret, ns, n)))
        .collect()
}

impl ConfigIndex {
    /// Notes what the pod `pod_key` now references (`None`: it is gone or
    /// bound to no node).
    pub(super) fn pod_changed(&mut self, pod_key: &str, pod: Option<&Pod>) {
        if let Some(old) = self.pod_refs.remove(pod_key) {
            for k in old {
                if let Some(set) = self.refs.get_mut(&k) {
                    set.remove(pod_key);
                    if set.is_empty() {
                        self.refs.remove(&k);
                    }
                }
            }
        }
        let Some(pod) = pod else { return };
        let keys = ref_keys(pod);
        if keys.is_empty() {
            return;
        }
        for k in &keys {
            self.refs
                .entry(k.clone())
                .or_default()
                .insert(pod_key.to_string());
        }
        self.pod_refs.insert(pod_key.to_string(), keys);
    }

    /// A ConfigMap was written; answers the pods that reference it.
    pub(super) fn config_map(&mut self, key: &str, cm: Arc<ConfigMap>) -> Vec<String> {
        self.config_maps.insert(key.to_string(), cm);
        self.referencing(key)
    }

    /// A Secret was written; answers the pods that reference it.
    pub(super) fn secret(&mut self, key: &str, s: Arc<Secret>) -> Vec<String> {
        self.secrets.insert(key.to_string(), s);
        self.referencing(key)
    }

    /// An object was deleted (any kind); answers the pods that referenced
    /// it if it was a ConfigMap or a Secret.
    pub(super) fn deleted(&mut self, key: &str) -> Vec<String> {
        let was = self.config_maps.remove(key).is_some() | self.secrets.remove(key).is_some();
        if was {
            self.referencing(key)
        } else {
            Vec::new()
        }
    }

    fn referencing(&self, key: &str) -> Vec<String> {
        self.refs
            .get(key)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Replaces everything (a relist).
    pub(super) fn reset(
        &mut self,
        config_maps: &super::Map<ConfigMap>,
        secrets: &super::Map<Secret>,
        pods: &super::Map<Pod>,
    ) {
        *self = ConfigIndex::default();
        self.config_maps = config_maps
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.secrets = secrets
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (k, p) in pods {
            if !p.spec.node_name.is_empty() {
                self.pod_changed(k, Some(p));
            }
        }
    }

    /// The ConfigMaps and Secrets that exist among those `pods` reference
    /// (each once).
    pub(super) fn for_pods<'a>(
        &self,
        pods: impl Iterator<Item = &'a Arc<Pod>>,
    ) -> (Vec<Arc<ConfigMap>>, Vec<Arc<Secret>>) {
        let mut keys = std::collections::BTreeSet::new();
        for p in pods {
            keys.extend(ref_keys(p));
        }
        let cms = keys
            .iter()
            .filter_map(|k| self.config_maps.get(k).cloned())
            .collect();
        let secrets = keys
            .iter()
            .filter_map(|k| self.secrets.get(k).cloned())
            .collect();
        (cms, secrets)
    }
}
