//! What a pod takes from ConfigMaps and Secrets, as the kubelet resolves
//! it (pure): which objects a pod references ([`references`]: what its node
//! is sent), its containers' environment ([`resolve_env`]) and the files of
//! its `configMap`, `secret` and `projected` volumes ([`resolve_volume`]).
//! A missing object or key that is not `optional` is a [`ConfigError`]
//! with the kubelet's message (`configmap "x" not found`).

use crate::config_v1::{ConfigMap, KeyToPath, Secret};
use crate::core_v1::{Container, EnvVar, Pod, PodSpec, Volume};
use crate::validation::config::{decode_base64, is_config_key};
use std::collections::{BTreeMap, BTreeSet};

/// The ConfigMaps and Secrets a node holds for its pods, by namespace and
/// name.
pub trait ConfigSource {
    /// The ConfigMap `namespace/name`, if the node has it.
    fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap>;
    /// The Secret `namespace/name`, if the node has it.
    fn secret(&self, namespace: &str, name: &str) -> Option<&Secret>;
}

/// The names of the ConfigMaps and Secrets a pod spec references (in the
/// pod's namespace).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    /// ConfigMap names.
    pub config_maps: BTreeSet<String>,
    /// Secret names.
    pub secrets: BTreeSet<String>,
}

impl References {
    /// Whether the pod references none.
    pub fn is_empty(&self) -> bool {
        self.config_maps.is_empty() && self.secrets.is_empty()
    }
}

/// Every ConfigMap and Secret `spec` references: volumes (projected ones
/// too), `env[].valueFrom` and `envFrom`.
pub fn references(spec: &PodSpec) -> References {
    let mut r = References::default();
    for v in &spec.volumes {
        if let Some(cm) = &v.config_map {
            r.config_maps.insert(cm.name.clone());
        }
        if let Some(s) = &v.secret {
            r.secrets.insert(s.secret_name.clone());
        }
        if let Some(p) = &v.projected {
            for source in &p.sources {
                if let Some(cm) = &source.config_map {
                    r.config_maps.insert(cm.name.clone());
                }
                if let Some(s) = &source.secret {
                    r.secrets.insert(s.name.clone());
                }
            }
        }
    }
    for c in &spec.containers {
        for e in &c.env {
            if let Some(from) = &e.value_from {
                if let Some(k) = &from.config_map_key_ref {
                    r.config_maps.insert(k.name.clone());
                }
                if let Some(k) = &from.secret_key_ref {
                    r.secrets.insert(k.name.clone());
                }
            }
        }
        for f in &c.env_from {
            if let Some(k) = &f.config_map_ref {
                r.config_maps.insert(k.name.clone());
            }
            if let Some(k) = &f.secret_ref {
                r.secrets.insert(k.name.clone());
            }
        }
    }
    r
}

/// A missing ConfigMap, Secret or key that is not optional, with the
/// kubelet's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    /// `configmap "x" not found`, `couldn't find key k in ConfigMap ns/x`…
    pub message: String,
    /// The volume it is about (a `FailedMount`), if any.
    pub volume: Option<String>,
}

impl ConfigError {
    fn env(message: String) -> Self {
        ConfigError {
            message,
            volume: None,
        }
    }
}

/// The values of a ConfigMap or Secret, decoded.
fn values_of(
    src: &dyn ConfigSource,
    secret: bool,
    namespace: &str,
    name: &str,
) -> Option<BTreeMap<String, Vec<u8>>> {
    if secret {
        let s = src.secret(namespace, name)?;
        Some(
            s.data
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), decode_base64(v)?)))
                .collect(),
        )
    } else {
        let cm = src.config_map(namespace, name)?;
        let mut out: BTreeMap<String, Vec<u8>> = cm
            .data
            .iter()
            .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
            .collect();
        for (k, v) in &cm.binary_data {
            if let Some(bytes) = decode_base64(v) {
                out.insert(k.clone(), bytes);
            }
        }
        Some(out)
    }
}

fn kind_word(secret: bool) -> (&'static str, &'static str) {
    if secret {
        ("secret", "Secret")
    } else {
        ("configmap", "ConfigMap")
    }
}

fn not_found(secret: bool, name: &str) -> String {
    format!("{} {name:?} not found", kind_word(secret).0)
}

/// A literal for the environment: `$` doubled, so that the runtime's
/// `$(VAR)` expansion (which applies to `value` only) leaves it as is.
fn literal(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).replace('$', "$$")
}

/// The environment of `container` with every ConfigMap and Secret value in
/// place: `envFrom` first (each key with its prefix; keys that are not
/// valid variable names are skipped, as the kubelet does), then `env`, in
/// order, with `configMapKeyRef`/`secretKeyRef` turned into literal values
/// (`$` escaped as `$$`) and optional missing ones left out. Other
/// `valueFrom` sources are kept for the runtime.
pub fn resolve_env(
    pod: &Pod,
    container: &Container,
    src: &dyn ConfigSource,
) -> Result<Vec<EnvVar>, ConfigError> {
    let ns = pod.metadata.namespace.as_str();
    let mut out: Vec<EnvVar> = Vec::new();
    let push = |out: &mut Vec<EnvVar>, var: EnvVar| {
        out.retain(|e| e.name != var.name);
        out.push(var);
    };
    for from in &container.env_from {
        let (name, optional, secret) = match (&from.config_map_ref, &from.secret_ref) {
            (Some(r), _) => (&r.name, r.optional == Some(true), false),
            (None, Some(r)) => (&r.name, r.optional == Some(true), true),
            (None, None) => continue,
        };
        let Some(values) = values_of(src, secret, ns, name) else {
            if optional {
                continue;
            }
            return Err(ConfigError::env(not_found(secret, name)));
        };
        for (key, value) in values {
            let var = format!("{}{key}", from.prefix);
            if !crate::validation::is_env_var_name(&var).is_empty() {
                continue;
            }
            push(
                &mut out,
                EnvVar {
                    name: var,
                    value: literal(&value),
                    ..Default::default()
                },
            );
        }
    }
    for e in &container.env {
        let from = e.value_from.as_ref();
        let key_ref = from.and_then(|f| {
            f.config_map_key_ref
                .as_ref()
                .map(|r| (&r.name, &r.key, r.optional == Some(true), false))
                .or_else(|| {
                    f.secret_key_ref
                        .as_ref()
                        .map(|r| (&r.name, &r.key, r.optional == Some(true), true))
                })
        });
        let Some((name, key, optional, secret)) = key_ref else {
            push(&mut out, e.clone());
            continue;
        };
        let value = match values_of(src, secret, ns, name) {
            None if optional => continue,
            None => return Err(ConfigError::env(not_found(secret, name))),
            Some(values) => match values.get(key.as_str()) {
                Some(v) => literal(v),
                None if optional => continue,
                None => {
                    return Err(ConfigError::env(format!(
                        "couldn't find key {key} in {} {ns}/{name}",
                        kind_word(secret).1
                    )))
                }
            },
        };
        push(
            &mut out,
            EnvVar {
                name: e.name.clone(),
                value,
                ..Default::default()
            },
        );
    }
    Ok(out)
}

/// One file of a volume: its bytes and mode bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeFile {
    /// The contents.
    pub data: Vec<u8>,
    /// Mode bits (0644 unless `defaultMode` or `mode` say otherwise).
    pub mode: u32,
}

/// The files of a `configMap`, `secret` or `projected` volume, by relative
/// path, and whether any came from a Secret (they go on a tmpfs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeFiles {
    /// Relative path -> file.
    pub files: BTreeMap<String, VolumeFile>,
    /// Holds Secret data.
    pub secret: bool,
}

/// The default mode of volume files (the API's 420).
pub const DEFAULT_MODE: i32 = 0o644;

fn mode_bits(mode: Option<i32>, default: Option<i32>) -> u32 {
    u32::try_from(mode.or(default).unwrap_or(DEFAULT_MODE) & 0o777).unwrap_or(0o644)
}

/// Adds the files of one ConfigMap or Secret source to `out`.
#[allow(clippy::too_many_arguments)]
fn add_source(
    out: &mut VolumeFiles,
    src: &dyn ConfigSource,
    pod: &Pod,
    volume: &str,
    (name, secret): (&str, bool),
    items: &[KeyToPath],
    optional: bool,
    default_mode: Option<i32>,
) -> Result<(), ConfigError> {
    let fail = |message: String| ConfigError {
        message,
        volume: Some(volume.to_string()),
    };
    out.secret |= secret;
    let Some(values) = values_of(src, secret, &pod.metadata.namespace, name) else {
        if optional {
            return Ok(());
        }
        return Err(fail(not_found(secret, name)));
    };
    if items.is_empty() {
        for (key, data) in values {
            if is_config_key(&key).is_empty() {
                let mode = mode_bits(None, default_mode);
                out.files.insert(key, VolumeFile { data, mode });
            }
        }
        return Ok(());
    }
    for item in items {
        match values.get(&item.key) {
            Some(data) => {
                out.files.insert(
                    item.path.clone(),
                    VolumeFile {
                        data: data.clone(),
                        mode: mode_bits(item.mode, default_mode),
                    },
                );
            }
            None if optional => {}
            None => {
                return Err(fail(format!(
                    "{} references non-existent {} key: {}",
                    kind_word(secret).0,
                    if secret { "secret" } else { "config" },
                    item.key
                )))
            }
        }
    }
    Ok(())
}

/// A pod field for a projected `downwardAPI` file.
fn downward_value(pod: &Pod, path: &str) -> Vec<u8> {
    let pairs = |m: &BTreeMap<String, String>| -> String {
        m.iter()
            .map(|(k, v)| format!("{k}={v:?}\n"))
            .collect::<String>()
    };
    match path {
        "metadata.name" => pod.metadata.name.clone(),
        "metadata.namespace" => pod.metadata.namespace.clone(),
        "metadata.uid" => pod.metadata.uid.clone(),
        "metadata.labels" => pairs(&pod.metadata.labels),
        "metadata.annotations" => pairs(&pod.metadata.annotations),
        _ => String::new(),
    }
    .into_bytes()
}

/// The files of `volume` when it is a `configMap`, `secret` or `projected`
/// volume (`None` for any other kind).
pub fn resolve_volume(
    pod: &Pod,
    volume: &Volume,
    src: &dyn ConfigSource,
) -> Option<Result<VolumeFiles, ConfigError>> {
    let mut out = VolumeFiles::default();
    let name = volume.name.as_str();
    let r = if let Some(cm) = &volume.config_map {
        let optional = cm.optional == Some(true);
        let source = (cm.name.as_str(), false);
        add_source(
            &mut out,
            src,
            pod,
            name,
            source,
            &cm.items,
            optional,
            cm.default_mode,
        )
    } else if let Some(s) = &volume.secret {
        let optional = s.optional == Some(true);
        let source = (s.secret_name.as_str(), true);
        add_source(
            &mut out,
            src,
            pod,
            name,
            source,
            &s.items,
            optional,
            s.default_mode,
        )
    } else if let Some(p) = &volume.projected {
        let mut r = Ok(());
        for source in &p.sources {
            let step = if let Some(cm) = &source.config_map {
                let optional = cm.optional == Some(true);
                let s = (cm.name.as_str(), false);
                add_source(
                    &mut out,
                    src,
                    pod,
                    name,
                    s,
                    &cm.items,
                    optional,
                    p.default_mode,
                )
            } else if let Some(sec) = &source.secret {
                let optional = sec.optional == Some(true);
                let s = (sec.name.as_str(), true);
                add_source(
                    &mut out,
                    src,
                    pod,
                    name,
                    s,
                    &sec.items,
                    optional,
                    p.default_mode,
                )
            } else if let Some(d) = &source.downward_api {
                for item in &d.items {
                    let path = item
                        .field_ref
                        .as_ref()
                        .map_or("", |f| f.field_path.as_str());
                    out.files.insert(
                        item.path.clone(),
                        VolumeFile {
                            data: downward_value(pod, path),
                            mode: mode_bits(item.mode, p.default_mode),
                        },
                    );
                }
                Ok(())
            } else {
                Ok(())
            };
            if step.is_err() {
                r = step;
                break;
            }
        }
        r
    } else {
        return None;
    };
    Some(r.map(|()| out))
}

/// The files of every `configMap`, `secret` and `projected` volume of a
/// pod, by volume name; the first missing object or key is the error.
pub fn resolve_volumes(
    pod: &Pod,
    src: &dyn ConfigSource,
) -> Result<BTreeMap<String, VolumeFiles>, ConfigError> {
    let mut out = BTreeMap::new();
    for v in &pod.spec.volumes {
        if let Some(r) = resolve_volume(pod, v, src) {
            out.insert(v.name.clone(), r?);
        }
    }
    Ok(out)
}
