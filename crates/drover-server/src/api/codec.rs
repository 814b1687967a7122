//! How objects are kept in the store: Kubernetes JSON under
//! `/registry/<plural>/<namespace>/<name>` (`/registry/nodes/<name>` for
//! the cluster-scoped nodes), without `metadata.resourceVersion`, which is
//! the key's `mod_revision` (the raft index of the last write) and filled
//! in on every read. Also the identity the server gives new objects.

use crate::error::ApiError;
use crate::limits::MAX_OBJECT_BYTES;
use drover_api::{Kind, Manifest};
use drover_store::KeyValue;
use rand::Rng;
use serde_json::Value;

/// The store key of one object.
pub fn key(kind: Kind, namespace: &str, name: &str) -> String {
    if kind.namespaced() {
        let ns = if namespace.is_empty() {
            drover_api::DEFAULT_NAMESPACE
        } else {
            namespace
        };
        format!("/registry/{}/{ns}/{name}", kind.plural())
    } else {
        format!("/registry/{}/{name}", kind.plural())
    }
}

/// The key prefix of a kind, in one namespace or all.
pub fn prefix(kind: Kind, namespace: Option<&str>) -> String {
    match namespace.filter(|n| kind.namespaced() && !n.is_empty()) {
        Some(ns) => format!("/registry/{}/{ns}/", kind.plural()),
        None => format!("/registry/{}/", kind.plural()),
    }
}

/// The kind a store key holds.
pub fn kind_of_key(key: &str) -> Option<Kind> {
    let plural = key.strip_prefix("/registry/")?.split('/').next()?;
    Kind::ALL.into_iter().find(|k| k.plural() == plural)
}

/// Reads a stored object, with its resourceVersion filled in.
pub fn decode(kv: &KeyValue) -> Result<Manifest, ApiError> {
    // One pass for the kind its key names (every object the server
    // wrote); the two-step read below only for an unknown key or to say
    // where a corrupt object is wrong.
    if let Some(Ok(mut m)) = kind_of_key(&kv.key).map(|k| Manifest::from_json_of(k, &kv.value)) {
        m.metadata_mut().resource_version = kv.mod_revision.to_string();
        return Ok(m);
    }
    let value: Value = serde_json::from_slice(&kv.value)
        .map_err(|e| ApiError::Internal(format!("stored object {} is corrupt: {e}", kv.key)))?;
    let mut m = Manifest::from_value(value)
        .map_err(|e| ApiError::Internal(format!("stored object {} is corrupt: {e}", kv.key)))?;
    m.metadata_mut().resource_version = kv.mod_revision.to_string();
    Ok(m)
}

/// The revision of an object read from the store (its resourceVersion):
/// what a compare-and-swap on it expects. An object without one, or with
/// one that is not a number, is refused rather than written over
/// unconditionally.
pub fn revision_of(meta: &drover_api::ObjectMeta) -> Result<u64, ApiError> {
    match meta.revision() {
        Ok(Some(r)) => Ok(r),
        Ok(None) => Err(ApiError::BadRequest(format!(
            "{:?}: metadata.resourceVersion: Required value: read the object from the server first",
            meta.name
        ))),
        Err(e) => Err(ApiError::BadRequest(format!("{:?}: {e}", meta.name))),
    }
}

/// The stored form: JSON without resourceVersion.
pub fn encode(m: &Manifest) -> Result<Vec<u8>, ApiError> {
    if m.metadata().resource_version.is_empty() {
        return to_json(m);
    }
    let mut m = m.clone();
    encode_owned(&mut m)
}

/// [`encode`] of an object the caller may change: its resourceVersion is
/// taken out for the encoding and put back, instead of the whole object
/// copied (a pod's every status write came through a copy).
fn encode_owned(m: &mut Manifest) -> Result<Vec<u8>, ApiError> {
    let rv = std::mem::take(&mut m.metadata_mut().resource_version);
    let out = to_json(m);
    m.metadata_mut().resource_version = rv;
    out
}

/// The stored form of an object about to be written, refused (BadRequest)
/// when it is larger than [`MAX_OBJECT_BYTES`].
pub fn encode_for_write(m: &mut Manifest) -> Result<Vec<u8>, ApiError> {
    let v = encode_owned(m)?;
    if v.len() > MAX_OBJECT_BYTES {
        return Err(ApiError::BadRequest(format!(
            "{}: the object is {} bytes encoded, more than the limit of {MAX_OBJECT_BYTES} bytes (1.5 MiB); make it smaller (keep large data in an image or a volume, not in the object's fields or annotations)",
            m.reference(),
            v.len()
        )));
    }
    Ok(v)
}

/// The JSON a client gets.
pub fn to_json(m: &Manifest) -> Result<Vec<u8>, ApiError> {
    serde_json::to_vec(m)
        .map_err(|e| ApiError::Internal(format!("cannot encode {}: {e}", m.reference())))
}

/// Everything of an object but metadata and status: what moves
/// `metadata.generation`.
pub(crate) fn spec_of(m: &Manifest) -> Value {
    let mut v = serde_json::to_value(m).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.remove("metadata");
        o.remove("status");
    }
    v
}

/// An object's status, as JSON.
pub(crate) fn status_of(m: &Manifest) -> Option<Value> {
    serde_json::to_value(m)
        .ok()
        .and_then(|v| v.get("status").cloned())
}

/// A fresh uid in the Kubernetes format (random, RFC 4122 version 4 layout).
pub fn new_uid() -> String {
    let b: [u8; 16] = rand::rng().random();
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-4{}-{}{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        ["8", "9", "a", "b"][(b[8] & 3) as usize],
        &h[17..20],
        &h[20..32]
    )
}

/// Now, as Kubernetes writes timestamps (RFC 3339, seconds, UTC).
/// What an update keeps of the stored object `old`'s deletion, whatever the
/// new version says (Kubernetes keeps `deletionTimestamp` on every update):
/// once an object is being deleted it stays so, and a DaemonSet being
/// deleted with its pods orphaned keeps its `orphan` finalizer, so that a
/// replace or an apply in the meantime cannot turn the orphaning into a
/// deletion of its pods.
pub fn keep_deletion(old: &drover_api::ObjectMeta, new: &mut drover_api::ObjectMeta) {
    if old.deletion_timestamp.is_none() {
        return;
    }
    new.deletion_timestamp = old.deletion_timestamp.clone();
    let orphan = drover_controller::daemon::ORPHAN_FINALIZER;
    if old.finalizers.iter().any(|f| f == orphan) && !new.finalizers.iter().any(|f| f == orphan) {
        new.finalizers.push(orphan.to_string());
    }
}

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_namespaced_except_nodes() {
        assert_eq!(
            key(Kind::DaemonSet, "", "a"),
            "/registry/daemonsets/default/a"
        );
        assert_eq!(
            key(Kind::Pod, "kube-system", "p"),
            "/registry/pods/kube-system/p"
        );
        assert_eq!(key(Kind::Node, "ignored", "n1"), "/registry/nodes/n1");
        assert_eq!(prefix(Kind::Pod, None), "/registry/pods/");
        assert_eq!(prefix(Kind::Node, Some("x")), "/registry/nodes/");
        for k in Kind::ALL {
            assert_eq!(kind_of_key(&key(k, "ns", "n")), Some(k));
        }
        assert_eq!(kind_of_key("/registry/statefulsets/a/b"), None);
        assert_eq!(kind_of_key("/other"), None);
    }

    #[test]
    fn a_compare_and_swap_needs_a_real_revision() {
        let mut m = drover_api::ObjectMeta {
            name: "x".into(),
            ..Default::default()
        };
        assert!(matches!(revision_of(&m), Err(ApiError::BadRequest(_))));
        m.resource_version = "x1".into();
        assert!(matches!(revision_of(&m), Err(ApiError::BadRequest(_))));
        m.resource_version = "17".into();
        assert_eq!(revision_of(&m), Ok(17));
    }

    #[test]
    fn uids_look_like_kubernetes_uids() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(u.as_bytes()[14], b'4');
        assert_ne!(u, new_uid());
    }
}
