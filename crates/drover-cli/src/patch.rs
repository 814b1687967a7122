//! `drover patch KIND NAME -p PATCH [--type strategic|merge|json]`, as
//! kubectl's: the patch is JSON or YAML; strategic merge (the default)
//! merges lists by their Kubernetes merge keys, merge is RFC 7386, json is
//! RFC 6902. The patch functions are the server's own
//! (`drover_api::patch`, which its Kubernetes API's PATCH uses), applied
//! here to the object as read and written back with compare-and-swap on
//! that read (started over on a conflict, unless the patch names a
//! `resourceVersion` of its own). Prints `KIND/NAME patched`, or
//! `patched (no change)`.

use crate::client::decode_object;
use crate::errors::kube;
use crate::Client;
use anyhow::{anyhow, bail, Context, Result};
use drover_api::patch::{json_patch, merge_patch, strategic, JsonPatchError};
use drover_api::{Kind, DEFAULT_NAMESPACE};
use serde_json::Value;
use std::io::Write;
use tonic::Code;

/// The object size limit the server enforces; a JSON patch that would
/// grow the object past it is refused before it is sent.
const MAX_OBJECT_BYTES: usize = 1_572_864;
/// Attempts after a conflict.
const ATTEMPTS: usize = 5;

/// `--type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum PatchType {
    /// Strategic merge patch: lists merge by their merge keys.
    #[default]
    Strategic,
    /// JSON merge patch (RFC 7386): lists are replaced.
    Merge,
    /// JSON patch (RFC 6902): a list of operations.
    Json,
}

/// Reads `-p`: JSON, or YAML as kubectl also takes.
pub fn parse_patch(text: &str) -> Result<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return Ok(v);
    }
    serde_saphyr::from_str::<Value>(text)
        .map_err(|e| anyhow!("unable to parse {text:?}: the patch is neither JSON nor YAML: {e}"))
}

/// Applies `patch` to `object` (JSON).
pub fn apply_patch(object: &mut Value, patch: &Value, ty: PatchType) -> Result<()> {
    match ty {
        PatchType::Strategic => {
            if !patch.is_object() {
                bail!("a strategic merge patch is a JSON object, e.g. -p '{{\"spec\":{{\"unschedulable\":true}}}}'");
            }
            strategic::apply(object, patch).map_err(|e| anyhow!("{e}"))
        }
        PatchType::Merge => {
            if !patch.is_object() {
                bail!("a merge patch is a JSON object, e.g. -p '{{\"metadata\":{{\"labels\":{{\"a\":\"b\"}}}}}}'");
            }
            merge_patch(object, patch);
            Ok(())
        }
        PatchType::Json => json_patch(object, patch, MAX_OBJECT_BYTES).map_err(|e| match e {
            JsonPatchError::Invalid(e) => anyhow!("{e}"),
            JsonPatchError::TooLarge(m) => anyhow!("{m}"),
        }),
    }
}

/// `drover patch`.
pub async fn patch(
    c: &Client,
    kind: &str,
    name: Option<&str>,
    patch: &str,
    ty: PatchType,
    namespace: Option<&str>,
    out: &mut impl Write,
) -> Result<()> {
    let (kind, name) = match (kind.split_once('/'), name) {
        (Some((k, n)), None) => (k.to_string(), n.to_string()),
        (Some(_), Some(_)) => bail!(
            "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form"
        ),
        (None, Some(n)) => (kind.to_string(), n.to_string()),
        (None, None) => bail!("give the object to patch: drover patch KIND NAME -p PATCH"),
    };
    let kind = Kind::parse(&kind)?;
    let ns = match namespace.filter(|n| !n.is_empty()) {
        _ if !kind.namespaced() => "",
        Some(n) => n,
        None => DEFAULT_NAMESPACE,
    };
    let body = parse_patch(patch)?;
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let old = c.get_object(kind.plural(), ns, &name).await.map_err(kube)?;
        let before = serde_json::to_value(&old)?;
        let mut v = before.clone();
        apply_patch(&mut v, &body, ty)
            .with_context(|| format!("{}: the patch does not apply", old.reference()))?;
        if v == before {
            writeln!(out, "{} patched (no change)", old.reference())?;
            return Ok(());
        }
        let conditional = v["metadata"]["resourceVersion"]
            .as_str()
            .is_some_and(|rv| rv != old.metadata().resource_version);
        if v["metadata"]["resourceVersion"].is_null() {
            // A patch that removed it: still compare-and-swap on the read.
            v["metadata"]["resourceVersion"] =
                Value::String(old.metadata().resource_version.clone());
        }
        let new = decode_object(&serde_json::to_vec(&v)?)
            .map_err(|e| anyhow!("the patched {} is not a valid object: {e}", old.reference()))?;
        if new.name() != old.name() || Kind::of(&new) != kind {
            bail!(
                "the patch changes the object's kind or name ({} to {}): patch cannot rename, use apply",
                old.reference(),
                new.reference()
            );
        }
        match c.update_object(&new).await {
            Ok(m) => {
                writeln!(out, "{} patched", m.reference())?;
                return Ok(());
            }
            Err(e) if e.code() == Some(Code::Aborted) && !conditional => last = Some(e),
            Err(e) => return Err(kube(e)),
        }
    }
    Err(kube(last.expect("a conflict was seen")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ds() -> Value {
        json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}
        ]}}}})
    }

    #[test]
    fn the_three_types_differ_on_lists() {
        let p = parse_patch(
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"b","image":"b:2"}]}}}}"#,
        )
        .unwrap();
        let mut s = ds();
        apply_patch(&mut s, &p, PatchType::Strategic).unwrap();
        assert_eq!(
            s["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}])
        );
        let mut m = ds();
        apply_patch(&mut m, &p, PatchType::Merge).unwrap();
        assert_eq!(
            m["spec"]["template"]["spec"]["containers"],
            json!([{"name": "b", "image": "b:2"}])
        );
        let j = parse_patch(
            r#"[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"a:3"}]"#,
        )
        .unwrap();
        let mut x = ds();
        apply_patch(&mut x, &j, PatchType::Json).unwrap();
        assert_eq!(
            x["spec"]["template"]["spec"]["containers"][0]["image"],
            "a:3"
        );
    }

    #[test]
    fn yaml_patches_and_bad_ones() {
        let p = parse_patch("spec:\n  unschedulable: true\n").unwrap();
        assert_eq!(p, json!({"spec": {"unschedulable": true}}));
        assert!(parse_patch("{not: [valid").is_err());
        let mut v = ds();
        assert!(apply_patch(&mut v, &json!([1]), PatchType::Strategic).is_err());
        assert!(apply_patch(&mut v, &json!({"op": "add"}), PatchType::Json).is_err());
        let bad = json!([{"op": "remove", "path": "/spec/nothing"}]);
        assert!(apply_patch(&mut v, &bad, PatchType::Json).is_err());
    }
}
