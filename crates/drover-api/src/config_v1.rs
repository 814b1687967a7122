//! The core (`v1`) objects that configure pods: [`ConfigMap`] and
//! [`Secret`] (consumed as volumes and environment variables), and
//! [`Namespace`] and [`ServiceAccount`] (stored so that a manifest bundling
//! them applies; drover enforces neither: see `docs/configuration.md`); and
//! the pod fields that consume them (volume sources, `valueFrom`,
//! `envFrom`).
//!
//! A Secret's `data` holds base64 text, as on the wire; `stringData` is
//! folded into it when the Secret is written ([`crate::defaults`]).

use crate::meta::ObjectMeta;
use std::collections::BTreeMap;

api_struct! {
    @resource "", "v1", "ConfigMap", namespaced = true;
    /// Configuration for pods: keys and values, mounted as files or set as
    /// environment variables.
    pub struct ConfigMap {
        /// Name and namespace.
        metadata: ObjectMeta = "metadata",
        /// UTF-8 values by key.
        data: BTreeMap<String, String> = "data",
        /// Binary values by key, base64.
        binary_data: BTreeMap<String, String> = "binaryData",
        /// When true, the data can no longer change (delete and recreate).
        immutable: Option<bool> = "immutable",
    }
}

api_struct! {
    @resource "", "v1", "Secret", namespaced = true;
    /// Like a ConfigMap, for values that must not be shown: `describe`
    /// shows sizes only, and a node receives only the Secrets its pods
    /// reference.
    pub struct Secret {
        /// Name and namespace.
        metadata: ObjectMeta = "metadata",
        /// `Opaque` (the default) or another type name.
        r#type: String = "type",
        /// Values by key, base64.
        data: BTreeMap<String, String> = "data",
        /// Values by key as plain text; merged into `data` on write.
        string_data: BTreeMap<String, String> = "stringData",
        /// When true, the data can no longer change.
        immutable: Option<bool> = "immutable",
    }
}

api_struct! {
    @resource "", "v1", "Namespace", namespaced = false;
    /// A namespace. Stored and listed; drover does not require one to
    /// exist before objects use it, and deleting it deletes nothing else.
    pub struct Namespace {
        /// Its name.
        metadata: ObjectMeta = "metadata",
        /// `phase` (always `Active`).
        status: NamespaceStatus = "status",
    }
}

api_struct! {
    /// A namespace's status.
    pub struct NamespaceStatus {
        /// `Active`.
        phase: String = "phase",
    }
}

api_struct! {
    @resource "", "v1", "ServiceAccount", namespaced = true;
    /// A service account. Stored and listed so that manifests naming one
    /// apply; drover issues no API token for it (pods get no credentials).
    pub struct ServiceAccount {
        /// Name and namespace.
        metadata: ObjectMeta = "metadata",
        /// Kept; has no effect in drover (no token is ever mounted).
        automount_service_account_token: Option<bool> = "automountServiceAccountToken",
    }
}

/// The type of a Secret that names none.
pub const SECRET_TYPE_OPAQUE: &str = "Opaque";

// ------------------------------------------------------------ pod fields

api_struct! {
    /// A field of the pod, by path.
    pub struct ObjectFieldSelector {
        /// Version of the schema the path is written in (`v1`).
        api_version: String = "apiVersion",
        /// The path, e.g. `metadata.name`, `spec.nodeName`, `status.hostIP`.
        field_path: String = "fieldPath",
    }
}

api_struct! {
    /// A ConfigMap as a volume.
    pub struct ConfigMapVolumeSource {
        /// The ConfigMap, in the pod's namespace.
        name: String = "name",
        /// Which keys, at which paths (all keys, each at its own name, when empty).
        items: Vec<KeyToPath> = "items",
        /// Mode bits of the files (default 0644).
        default_mode: Option<i32> = "defaultMode",
        /// A missing ConfigMap (or key) is not an error.
        optional: Option<bool> = "optional",
    }
}

api_struct! {
    /// A Secret as a volume.
    pub struct SecretVolumeSource {
        /// The Secret, in the pod's namespace.
        secret_name: String = "secretName",
        /// Which keys, at which paths.
        items: Vec<KeyToPath> = "items",
        /// Mode bits of the files (default 0644).
        default_mode: Option<i32> = "defaultMode",
        /// A missing Secret (or key) is not an error.
        optional: Option<bool> = "optional",
    }
}

api_struct! {
    /// A key of a ConfigMap or Secret, at a path of the volume.
    pub struct KeyToPath {
        /// The key.
        key: String = "key",
        /// The relative path of its file.
        path: String = "path",
        /// Mode bits of this file.
        mode: Option<i32> = "mode",
    }
}

api_struct! {
    /// Several sources in one volume.
    pub struct ProjectedVolumeSource {
        /// The sources.
        sources: Vec<VolumeProjection> = "sources",
        /// Mode bits of the files (default 0644).
        default_mode: Option<i32> = "defaultMode",
    }
}

api_struct! {
    /// One source of a projected volume (exactly one of these).
    pub struct VolumeProjection {
        /// A ConfigMap.
        config_map: Option<ConfigMapProjection> = "configMap",
        /// A Secret.
        secret: Option<SecretProjection> = "secret",
        /// Fields of the pod.
        downward_api: Option<DownwardApiProjection> = "downwardAPI",
    }
}

api_struct! {
    /// A ConfigMap in a projected volume.
    pub struct ConfigMapProjection {
        /// The ConfigMap.
        name: String = "name",
        /// Which keys, at which paths.
        items: Vec<KeyToPath> = "items",
        /// A missing ConfigMap (or key) is not an error.
        optional: Option<bool> = "optional",
    }
}

api_struct! {
    /// A Secret in a projected volume.
    pub struct SecretProjection {
        /// The Secret.
        name: String = "name",
        /// Which keys, at which paths.
        items: Vec<KeyToPath> = "items",
        /// A missing Secret (or key) is not an error.
        optional: Option<bool> = "optional",
    }
}

api_struct! {
    /// Fields of the pod in a projected volume.
    pub struct DownwardApiProjection {
        /// The files.
        items: Vec<DownwardApiVolumeFile> = "items",
    }
}

api_struct! {
    /// One file of the downward API: `metadata.name`, `metadata.namespace`,
    /// `metadata.uid`, `metadata.labels`, `metadata.annotations`.
    pub struct DownwardApiVolumeFile {
        /// The relative path of the file.
        path: String = "path",
        /// The field.
        field_ref: Option<ObjectFieldSelector> = "fieldRef",
        /// Mode bits of this file.
        mode: Option<i32> = "mode",
    }
}

api_struct! {
    /// A key of a ConfigMap, for an environment variable.
    pub struct ConfigMapKeySelector {
        /// The ConfigMap.
        name: String = "name",
        /// The key.
        key: String = "key",
        /// A missing ConfigMap or key leaves the variable unset.
        optional: Option<bool> = "optional",
    }
}

api_struct! {
    /// A key of a Secret, for an environment variable.
    pub struct SecretKeySelector {
        /// The Secret.
        name: String = "name",
        /// The key.
        key: String = "key",
        /// A missing Secret or key leaves the variable unset.
        optional: Option<bool> = "optional",
    }
}

api_struct! {
    /// Every key of a ConfigMap or Secret as environment variables.
    pub struct EnvFromSource {
        /// Put before every key.
        prefix: String = "prefix",
        /// A ConfigMap.
        config_map_ref: Option<ConfigMapEnvSource> = "configMapRef",
        /// A Secret.
        secret_ref: Option<SecretEnvSource> = "secretRef",
    }
}

api_struct! {
    /// A ConfigMap for `envFrom`.
    pub struct ConfigMapEnvSource {
        /// The ConfigMap.
        name: String = "name",
        /// A missing ConfigMap is not an error.
        optional: Option<bool> = "optional",
    }
}

api_struct! {
    /// A Secret for `envFrom`.
    pub struct SecretEnvSource {
        /// The Secret.
        name: String = "name",
        /// A missing Secret is not an error.
        optional: Option<bool> = "optional",
    }
}
