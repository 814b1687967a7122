//! ConfigMaps and Secrets (keys, sizes, immutability), Namespaces and
//! ServiceAccounts, and the pod fields that consume ConfigMaps and Secrets
//! (volume sources, `valueFrom`, `envFrom`), as the API server validates
//! them.

use super::errors::{to_result, FieldError, Invalid, Path};
use super::fields::{validate_dns1123_label, validate_dns1123_subdomain};
use super::meta::{validate_object_meta, validate_object_meta_update};
use super::names::is_env_var_name;
use crate::config_v1::{
    ConfigMap, ConfigMapKeySelector, DownwardApiProjection, EnvFromSource, KeyToPath, Namespace,
    Secret, SecretKeySelector, ServiceAccount,
};
use crate::core_v1::Volume;
use base64::Engine;
use std::collections::BTreeMap;

/// The most bytes a ConfigMap's or a Secret's data may hold, all keys
/// together (1 MiB).
pub const MAX_DATA_SIZE: usize = 1024 * 1024;

/// The API server's message for a key that is not `[-._a-zA-Z0-9]+`.
const CONFIG_KEY_MESSAGE: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// Kubernetes' `IsConfigMapKey`: the problems of `key` as a ConfigMap or
/// Secret key (empty when it is valid).
pub fn is_config_key(key: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if key.len() > 253 {
        errors.push("must be no more than 253 characters".to_string());
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        errors.push(CONFIG_KEY_MESSAGE.to_string());
    }
    if key == "." {
        errors.push("must not be '.'".into());
    } else if key == ".." {
        errors.push("must not be '..'".into());
    } else if key.starts_with("..") {
        errors.push("must not start with '..'".into());
    }
    errors
}

fn validate_key(key: &str, path: &Path) -> Vec<FieldError> {
    is_config_key(key)
        .into_iter()
        .map(|m| FieldError::invalid(path, key, m))
        .collect()
}

/// Decodes a base64 value of `data`/`binaryData`.
pub fn decode_base64(value: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD.decode(value).ok()
}

/// Encodes bytes as the base64 of `data`.
pub fn encode_base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Checks base64 values: their keys, that they decode; answers their
/// decoded size.
fn validate_base64_map(
    map: &BTreeMap<String, String>,
    path: &Path,
    errors: &mut Vec<FieldError>,
) -> usize {
    let mut size = 0;
    for (key, value) in map {
        errors.extend(validate_key(key, path));
        match decode_base64(value) {
            Some(bytes) => size += bytes.len(),
            None => errors.push(FieldError::invalid(
                &path.key(key),
                "<value omitted>",
                "illegal base64 data: encode the value with `base64 -w0`, or put it under stringData (Secret) or data (ConfigMap) as plain text",
            )),
        }
    }
    size
}

fn too_large(path: &Path) -> FieldError {
    FieldError::too_long(path, MAX_DATA_SIZE)
}

/// Validates a ConfigMap: keys, no key in both `data` and `binaryData`,
/// at most 1 MiB in all.
pub fn validate_config_map(cm: &ConfigMap) -> Result<(), Invalid> {
    let mut errors = validate_object_meta(&cm.metadata, true, &Path::new("metadata"));
    let data = Path::new("data");
    let mut size = 0;
    for (key, value) in &cm.data {
        errors.extend(validate_key(key, &data));
        size += key.len() + value.len();
    }
    let binary = Path::new("binaryData");
    size += validate_base64_map(&cm.binary_data, &binary, &mut errors);
    for key in cm.binary_data.keys() {
        if cm.data.contains_key(key) {
            errors.push(FieldError::invalid(
                &binary,
                key.as_str(),
                "duplicate of key present in data",
            ));
        }
    }
    if size > MAX_DATA_SIZE {
        errors.push(too_large(&data));
    }
    to_result(cm, errors)
}

/// Validates a Secret (before or after `stringData` was folded into
/// `data`): keys, base64, at most 1 MiB of values, the keys its type
/// requires.
pub fn validate_secret(secret: &Secret) -> Result<(), Invalid> {
    let mut errors = validate_object_meta(&secret.metadata, true, &Path::new("metadata"));
    let data = Path::new("data");
    let mut size = validate_base64_map(&secret.data, &data, &mut errors);
    for (key, value) in &secret.string_data {
        errors.extend(validate_key(key, &Path::new("stringData")));
        size += value.len();
    }
    if size > MAX_DATA_SIZE {
        errors.push(too_large(&data));
    }
    let required: &[&str] = match secret.r#type.as_str() {
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        _ => &[],
    };
    for key in required {
        if !secret.data.contains_key(*key) && !secret.string_data.contains_key(*key) {
            errors.push(FieldError::required(&data.key(key), ""));
        }
    }
    // Kubernetes puts no constraint on the format of a custom type.
    to_result(secret, errors)
}

fn immutable_errors(
    was_immutable: bool,
    now_immutable: Option<bool>,
    data_changed: bool,
    errors: &mut Vec<FieldError>,
) {
    if !was_immutable {
        return;
    }
    if now_immutable != Some(true) {
        errors.push(FieldError::forbidden(
            &Path::new("immutable"),
            "field is immutable when `immutable` is set",
        ));
    }
    if data_changed {
        errors.push(FieldError::forbidden(
            &Path::new("data"),
            "field is immutable when `immutable` is set; delete and recreate the object to change it",
        ));
    }
}

/// Validates an update of a ConfigMap: an immutable one cannot change.
pub fn validate_config_map_update(new: &ConfigMap, old: &ConfigMap) -> Result<(), Invalid> {
    let mut errors =
        validate_object_meta_update(&new.metadata, &old.metadata, &Path::new("metadata"));
    if let Err(invalid) = validate_config_map(new) {
        errors.extend(invalid.errors);
    }
    let changed = new.data != old.data || new.binary_data != old.binary_data;
    immutable_errors(
        old.immutable == Some(true),
        new.immutable,
        changed,
        &mut errors,
    );
    to_result(new, errors)
}

/// Validates an update of a Secret: its type cannot change, an immutable
/// one cannot change at all.
pub fn validate_secret_update(new: &Secret, old: &Secret) -> Result<(), Invalid> {
    let mut errors =
        validate_object_meta_update(&new.metadata, &old.metadata, &Path::new("metadata"));
    if let Err(invalid) = validate_secret(new) {
        errors.extend(invalid.errors);
    }
    if new.r#type != old.r#type {
        errors.push(FieldError::invalid(
            &Path::new("type"),
            new.r#type.as_str(),
            "field is immutable",
        ));
    }
    let changed = new.data != old.data || !new.string_data.is_empty();
    immutable_errors(
        old.immutable == Some(true),
        new.immutable,
        changed,
        &mut errors,
    );
    to_result(new, errors)
}

/// Validates a Namespace: its name is a DNS label.
pub fn validate_namespace(ns: &Namespace) -> Result<(), Invalid> {
    let mut errors = validate_object_meta(&ns.metadata, false, &Path::new("metadata"));
    if !ns.metadata.name.is_empty() {
        errors.extend(validate_dns1123_label(
            &ns.metadata.name,
            &Path::new("metadata").child("name"),
        ));
    }
    to_result(ns, errors)
}

/// Validates a ServiceAccount: its metadata.
pub fn validate_service_account(sa: &ServiceAccount) -> Result<(), Invalid> {
    to_result(
        sa,
        validate_object_meta(&sa.metadata, true, &Path::new("metadata")),
    )
}

// ------------------------------------------------------------ pod fields

fn validate_mode(mode: Option<i32>, path: &Path) -> Vec<FieldError> {
    match mode {
        Some(m) if !(0..=0o777).contains(&m) => vec![FieldError::invalid(
            path,
            i64::from(m),
            "must be a number between 0 and 0777 (octal), both inclusive",
        )],
        _ => Vec::new(),
    }
}

/// Kubernetes' `validateLocalDescendingPath`: relative, no `..` element.
fn validate_relative_path(path_value: &str, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if path_value.starts_with('/') {
        errors.push(FieldError::invalid(
            path,
            path_value,
            "must be a relative path",
        ));
    }
    if path_value.split('/').any(|segment| segment == "..") {
        errors.push(FieldError::invalid(
            path,
            path_value,
            "must not contain '..'",
        ));
    }
    errors
}

fn validate_items(items: &[KeyToPath], path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let p = path.index(i);
        if item.key.is_empty() {
            errors.push(FieldError::required(&p.child("key"), ""));
        } else {
            errors.extend(validate_key(&item.key, &p.child("key")));
        }
        if item.path.is_empty() {
            errors.push(FieldError::required(&p.child("path"), ""));
        } else {
            errors.extend(validate_relative_path(&item.path, &p.child("path")));
            if item.path.starts_with("..") {
                errors.push(FieldError::invalid(
                    &p.child("path"),
                    item.path.as_str(),
                    "must not start with '..'",
                ));
            }
        }
        errors.extend(validate_mode(item.mode, &p.child("mode")));
    }
    errors
}

fn validate_object_name(name: &str, path: &Path) -> Vec<FieldError> {
    if name.is_empty() {
        vec![FieldError::required(path, "")]
    } else {
        validate_dns1123_subdomain(name, path)
    }
}

fn validate_downward_api(d: &DownwardApiProjection, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, item) in d.items.iter().enumerate() {
        let p = path.child("items").index(i);
        if item.path.is_empty() {
            errors.push(FieldError::required(&p.child("path"), ""));
        } else {
            errors.extend(validate_relative_path(&item.path, &p.child("path")));
        }
        errors.extend(validate_mode(item.mode, &p.child("mode")));
        match &item.field_ref {
            None => errors.push(FieldError::required(&p.child("fieldRef"), "")),
            Some(f) if !DOWNWARD_API_VOLUME_FIELDS.contains(&f.field_path.as_str()) => {
                errors.push(FieldError::not_supported(
                    &p.child("fieldRef").child("fieldPath"),
                    f.field_path.as_str(),
                    DOWNWARD_API_VOLUME_FIELDS,
                ))
            }
            Some(_) => {}
        }
    }
    errors
}

/// The pod fields a projected `downwardAPI` file may hold.
pub const DOWNWARD_API_VOLUME_FIELDS: &[&str] = &[
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
];

/// The ConfigMap, Secret and projected sources of a volume: how many it
/// names, and their errors.
pub(super) fn validate_config_volume(volume: &Volume, path: &Path) -> (usize, Vec<FieldError>) {
    let mut errors = Vec::new();
    let mut count = 0;
    if let Some(cm) = &volume.config_map {
        count += 1;
        let p = path.child("configMap");
        errors.extend(validate_object_name(&cm.name, &p.child("name")));
        errors.extend(validate_items(&cm.items, &p.child("items")));
        errors.extend(validate_mode(cm.default_mode, &p.child("defaultMode")));
    }
    if let Some(s) = &volume.secret {
        count += 1;
        let p = path.child("secret");
        errors.extend(validate_object_name(&s.secret_name, &p.child("secretName")));
        errors.extend(validate_items(&s.items, &p.child("items")));
        errors.extend(validate_mode(s.default_mode, &p.child("defaultMode")));
    }
    if let Some(projected) = &volume.projected {
        count += 1;
        let p = path.child("projected");
        errors.extend(validate_mode(
            projected.default_mode,
            &p.child("defaultMode"),
        ));
        for (i, source) in projected.sources.iter().enumerate() {
            let sp = p.child("sources").index(i);
            let mut kinds = source.extra.len();
            if let Some(cm) = &source.config_map {
                kinds += 1;
                errors.extend(validate_object_name(
                    &cm.name,
                    &sp.child("configMap").child("name"),
                ));
                errors.extend(validate_items(
                    &cm.items,
                    &sp.child("configMap").child("items"),
                ));
            }
            if let Some(s) = &source.secret {
                kinds += 1;
                errors.extend(validate_object_name(
                    &s.name,
                    &sp.child("secret").child("name"),
                ));
                errors.extend(validate_items(&s.items, &sp.child("secret").child("items")));
            }
            if let Some(d) = &source.downward_api {
                kinds += 1;
                errors.extend(validate_downward_api(d, &sp.child("downwardAPI")));
            }
            if kinds != 1 {
                errors.push(FieldError::forbidden(
                    &sp,
                    "may not specify more than 1 volume type per source",
                ));
            }
        }
    }
    (count, errors)
}

fn validate_key_selector(name: &str, key: &str, path: &Path) -> Vec<FieldError> {
    let mut errors = validate_object_name(name, &path.child("name"));
    if key.is_empty() {
        errors.push(FieldError::required(&path.child("key"), ""));
    } else {
        errors.extend(validate_key(key, &path.child("key")));
    }
    errors
}

/// The ConfigMap and Secret sources of one `valueFrom`: how many it names,
/// and their errors.
pub(super) fn validate_env_key_refs(
    cm: Option<&ConfigMapKeySelector>,
    secret: Option<&SecretKeySelector>,
    path: &Path,
) -> (usize, Vec<FieldError>) {
    let mut errors = Vec::new();
    let mut count = 0;
    if let Some(r) = cm {
        count += 1;
        errors.extend(validate_key_selector(
            &r.name,
            &r.key,
            &path.child("configMapKeyRef"),
        ));
    }
    if let Some(r) = secret {
        count += 1;
        errors.extend(validate_key_selector(
            &r.name,
            &r.key,
            &path.child("secretKeyRef"),
        ));
    }
    (count, errors)
}

/// Validates a container's `envFrom`: one source each, a valid prefix.
pub(super) fn validate_env_from(env_from: &[EnvFromSource], path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, source) in env_from.iter().enumerate() {
        let p = path.index(i);
        if !source.prefix.is_empty() {
            errors.extend(
                is_env_var_name(&source.prefix)
                    .into_iter()
                    .map(|m| FieldError::invalid(&p.child("prefix"), source.prefix.as_str(), m)),
            );
        }
        let mut count = 0;
        if let Some(r) = &source.config_map_ref {
            count += 1;
            errors.extend(validate_object_name(
                &r.name,
                &p.child("configMapRef").child("name"),
            ));
        }
        if let Some(r) = &source.secret_ref {
            count += 1;
            errors.extend(validate_object_name(
                &r.name,
                &p.child("secretRef").child("name"),
            ));
        }
        if count == 0 {
            errors.push(FieldError::invalid(
                &p,
                "",
                "must specify one of: `configMapRef` or `secretRef`",
            ));
        } else if count > 1 {
            errors.push(FieldError::invalid(
                &p,
                "",
                "may not have more than one field specified at a time",
            ));
        }
    }
    errors
}
