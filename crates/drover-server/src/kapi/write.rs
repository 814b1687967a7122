//! create (POST), update (PUT), patch (PATCH) and delete (DELETE, one
//! object or a collection), with the `status` subresource, `dryRun=All`
//! and `fieldValidation`. drover's object layer ([`Objects`]) defaults,
//! validates (a refusal is `Invalid` with the field causes) and writes with
//! compare-and-swap on `resourceVersion` (a stale one is `409 Conflict`).
//!
//! On the main resource of a kind with a `status` subresource the status
//! is kept as stored (as the API server does); `…/status` changes the
//! status only. A patch carries no resourceVersion unless it sets one: it
//! is applied to the object as read and written with compare-and-swap on
//! that read, retried on a conflict.

use super::discovery::has_status;
use super::patch::{json_patch, merge_patch, strategic, JsonPatchError};
use super::query::Query;
use super::status::{json_response, Refusal};
use super::Target;
use crate::api::{validate_new, Objects};
use crate::error::ApiError;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use drover_api::validation::{validate_manifest, validate_manifest_update};
use drover_api::{defaults, Manifest};
use serde_json::{json, Value};

/// Attempts of a patch that lost a compare-and-swap it did not ask for.
const PATCH_ATTEMPTS: usize = 5;

/// A write request, its body read (and bounded).
pub struct WriteRequest {
    pub target: Target,
    pub query: Query,
    pub content_type: String,
    pub body: Bytes,
    pub as_table: bool,
    /// For a deletecollection's list.
    pub informer: crate::cache::Informer,
}

pub(super) fn body_json(body: &[u8]) -> Result<Value, Refusal> {
    serde_json::from_slice(body)
        .map_err(|e| Refusal::bad_request(format!("the request body is not JSON: {e}")))
}

pub(super) fn respond(code: StatusCode, m: &Manifest, warnings: &[String]) -> Response {
    let mut r = json_response(code, &serde_json::to_value(m).unwrap_or(Value::Null));
    for w in warnings.iter().take(32) {
        let text = format!("299 - {:?}", w.replace(['\n', '\r'], " "));
        if let Ok(v) = HeaderValue::from_str(&text) {
            r.headers_mut()
                .append(HeaderName::from_static("warning"), v);
        }
    }
    r
}

/// Reads an object of the target's kind from `v`, in the target's
/// namespace, under the query's field validation: the warnings to send.
fn manifest_of(t: &Target, q: &Query, mut v: Value) -> Result<(Manifest, Vec<String>), Refusal> {
    let Some(obj) = v.as_object_mut() else {
        return Err(Refusal::bad_request(
            "the request body is not a JSON object",
        ));
    };
    let kind = t.kind;
    obj.entry("apiVersion").or_insert(json!(kind.api_version()));
    obj.entry("kind").or_insert(json!(kind.name()));
    if obj.get("kind") != Some(&json!(kind.name()))
        || obj.get("apiVersion") != Some(&json!(kind.api_version()))
    {
        return Err(Refusal::bad_request(format!(
            "the object is a {} {}, but the request is for {} ({})",
            obj.get("apiVersion").and_then(Value::as_str).unwrap_or("?"),
            obj.get("kind").and_then(Value::as_str).unwrap_or("?"),
            kind.resource(),
            kind.api_version()
        )));
    }
    let meta = obj
        .entry("metadata")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| Refusal::bad_request("metadata is not an object"))?;
    if let Some(ns) = &t.namespace {
        match meta.get("namespace").and_then(Value::as_str) {
            None | Some("") => {
                meta.insert("namespace".into(), json!(ns));
            }
            Some(given) if given == ns => {}
            Some(given) => {
                return Err(Refusal::bad_request(format!(
                    "the namespace of the provided object ({given}) does not match the namespace sent on the request ({ns})"
                )))
            }
        }
    }
    if let Some(name) = &t.name {
        match meta.get("name").and_then(Value::as_str) {
            None | Some("") => {
                meta.insert("name".into(), json!(name));
            }
            Some(given) if given == name => {}
            Some(given) => {
                return Err(Refusal::bad_request(format!(
                    "the name of the object ({given}) does not match the name on the URL ({name})"
                )))
            }
        }
    }
    let m = Manifest::from_value(v).map_err(|e| Refusal::bad_request(e.to_string()))?;
    let warnings = m.warnings_under(q.field_validation).map_err(|unknown| {
        Refusal::bad_request(format!(
            "strict decoding error: {}",
            unknown
                .iter()
                .map(|u| format!("unknown field {:?}", u.path))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    Ok((m, warnings))
}

/// `POST` on a collection.
pub async fn create(objects: &Objects, req: WriteRequest) -> Result<Response, Refusal> {
    let t = &req.target;
    if t.name.is_some() {
        return Err(Refusal::method_not_allowed(format!(
            "POST is for a collection of {}; drover has no subresource to create",
            t.kind.resource()
        )));
    }
    let (mut m, warnings) = manifest_of(t, &req.query, body_json(&req.body)?)?;
    let name = m.name().to_string();
    if name.is_empty() {
        return Err(Refusal::from(ApiError::BadRequest(format!(
            "{}: metadata.name: Required value: drover does not generate names",
            t.kind.name()
        ))));
    }
    if req.query.dry_run {
        m.default_namespace();
        defaults::default_manifest(&mut m);
        validate_new(&m).map_err(|e| Refusal::from(ApiError::invalid(vec![e])))?;
        match objects.get(t.kind, m.namespace(), &name).await {
            Ok(_) => {
                return Err(
                    Refusal::from(ApiError::already_exists(t.kind, &name)).about(t.kind, &name)
                )
            }
            Err(ApiError::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
        let meta = m.metadata_mut();
        meta.uid = crate::api::new_uid();
        meta.creation_timestamp = Some(crate::api::now_rfc3339());
        meta.generation = Some(1);
        return Ok(respond(StatusCode::CREATED, &m, &warnings));
    }
    let m = objects
        .create(m)
        .await
        .map_err(|e| Refusal::from(e).about(t.kind, &name))?;
    Ok(respond(StatusCode::CREATED, &m, &warnings))
}

/// `new` as it is written over `old` on the target: the status kept (main
/// resource) or the only change (status subresource).
fn combine(t: &Target, old: &Manifest, new: Manifest) -> Result<Manifest, Refusal> {
    let status_only = t.sub.as_deref() == Some("status");
    if !status_only && !has_status(t.kind) {
        return Ok(new);
    }
    let (from, mut onto) = if status_only {
        (new, old.clone())
    } else {
        (old.clone(), new)
    };
    let status = serde_json::to_value(&from)
        .ok()
        .and_then(|v| v.get("status").cloned());
    let rv = if status_only {
        from.metadata().resource_version.clone()
    } else {
        onto.metadata().resource_version.clone()
    };
    let mut v = serde_json::to_value(&onto).unwrap_or(Value::Null);
    match status {
        Some(s) => v["status"] = s,
        None => {
            if let Some(o) = v.as_object_mut() {
                o.remove("status");
            }
        }
    }
    onto = Manifest::from_value(v).map_err(|e| Refusal::bad_request(e.to_string()))?;
    onto.metadata_mut().resource_version = rv;
    Ok(onto)
}

fn check_sub(t: &Target) -> Result<(), Refusal> {
    match t.sub.as_deref() {
        None => Ok(()),
        Some("status") if has_status(t.kind) => Ok(()),
        Some(s) => Err(Refusal::not_found(format!(
            "{} has no subresource {s:?} in drover",
            t.kind.resource()
        ))),
    }
}

/// Writes `new` (built on `old`): compare-and-swap on its resourceVersion.
async fn write_over(
    objects: &Objects,
    t: &Target,
    old: &Manifest,
    new: Manifest,
    dry_run: bool,
) -> Result<Manifest, ApiError> {
    if t.sub.as_deref() == Some("status") {
        let rev = new.metadata().resource_version.clone();
        if !rev.is_empty() && rev != old.metadata().resource_version {
            return Err(ApiError::conflict(t.kind, old.name()));
        }
        let mut new = new;
        new.metadata_mut().resource_version = old.metadata().resource_version.clone();
        if dry_run {
            return Ok(new);
        }
        return objects.write_status_as_read(new).await;
    }
    if dry_run {
        let mut m = new;
        m.default_namespace();
        defaults::default_manifest(&mut m);
        validate_manifest(&m)
            .and_then(|_| validate_manifest_update(&m, old))
            .map_err(|e| ApiError::invalid(vec![e]))?;
        return Ok(m);
    }
    objects.update(new).await
}

/// `PUT` of one object or its status.
pub async fn update(objects: &Objects, req: WriteRequest) -> Result<Response, Refusal> {
    let t = &req.target;
    check_sub(t)?;
    let Some(name) = t.name.clone() else {
        return Err(Refusal::method_not_allowed(
            "PUT needs an object's name: a collection cannot be replaced",
        ));
    };
    let (m, warnings) = manifest_of(t, &req.query, body_json(&req.body)?)?;
    let ns = t.namespace.as_deref().unwrap_or("");
    let about = |e: ApiError| Refusal::from(e).about(t.kind, &name);
    let old = objects.get(t.kind, ns, &name).await.map_err(about)?;
    let given = m.metadata().resource_version.clone();
    let mut new = combine(t, &old, m)?;
    if given.is_empty() {
        // An unconditional update: built on what was just read.
        new.metadata_mut().resource_version = old.metadata().resource_version.clone();
    }
    let out = write_over(objects, t, &old, new, req.query.dry_run)
        .await
        .map_err(about)?;
    Ok(respond(StatusCode::OK, &out, &warnings))
}

/// The patch types the API accepts, by `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

pub(super) fn patch_type(content_type: &str) -> Result<PatchType, Refusal> {
    let media = content_type.split(';').next().unwrap_or("").trim();
    match media {
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
        "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
        other => Err(Refusal::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!("the body of a PATCH is {other:?}, not one of application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"),
        )),
    }
}

/// Applies a patch of type `ty` to `v`.
pub(super) fn apply_patch(ty: PatchType, v: &mut Value, body: &Value) -> Result<(), Refusal> {
    match ty {
        PatchType::Json => {
            json_patch(v, body, crate::limits::MAX_OBJECT_BYTES).map_err(|e| match e {
                JsonPatchError::Invalid(e) => Refusal::bad_request(e.to_string()),
                JsonPatchError::TooLarge(m) => Refusal::new(
                    axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                    "RequestEntityTooLarge",
                    m,
                ),
            })?
        }
        PatchType::Merge => merge_patch(v, body),
        PatchType::Strategic | PatchType::Apply => {
            strategic::apply(v, body).map_err(|e| Refusal::bad_request(e.to_string()))?
        }
    }
    Ok(())
}

/// `PATCH` of one object or its status. Server-side apply
/// (`application/apply-patch+yaml`) creates the object when it does not
/// exist and otherwise merges the applied configuration as a strategic
/// merge patch (no field ownership: see docs/kubernetes-api.md).
pub async fn patch(objects: &Objects, req: WriteRequest) -> Result<Response, Refusal> {
    let t = &req.target;
    check_sub(t)?;
    let Some(name) = t.name.clone() else {
        return Err(Refusal::method_not_allowed(
            "PATCH needs an object's name: a collection cannot be patched",
        ));
    };
    let ty = patch_type(&req.content_type)?;
    let body: Value = if ty == PatchType::Apply {
        let text = std::str::from_utf8(&req.body)
            .map_err(|_| Refusal::bad_request("the applied configuration is not UTF-8"))?;
        serde_saphyr::from_str(text).map_err(|e| {
            Refusal::bad_request(format!("the applied configuration is not YAML: {e}"))
        })?
    } else {
        body_json(&req.body)?
    };
    let ns = t.namespace.as_deref().unwrap_or("");
    let about = |e: ApiError| Refusal::from(e).about(t.kind, &name);
    for _ in 0..PATCH_ATTEMPTS {
        let old = match objects.get(t.kind, ns, &name).await {
            Ok(o) => o,
            Err(ApiError::NotFound(_)) if ty == PatchType::Apply && t.sub.is_none() => {
                let create_req = WriteRequest {
                    target: Target {
                        name: None,
                        ..t.clone()
                    },
                    query: req.query.clone(),
                    content_type: "application/json".into(),
                    body: Bytes::from(serde_json::to_vec(&body).unwrap_or_default()),
                    as_table: req.as_table,
                    informer: req.informer.clone(),
                };
                return create(objects, create_req).await;
            }
            Err(e) => return Err(about(e)),
        };
        let mut v = serde_json::to_value(&old).unwrap_or(Value::Null);
        apply_patch(ty, &mut v, &body)?;
        let asked_rv = v["metadata"]["resourceVersion"]
            .as_str()
            .map(str::to_string);
        let conditional = asked_rv
            .as_deref()
            .is_some_and(|rv| rv != old.metadata().resource_version);
        let (m, warnings) = manifest_of(t, &req.query, v)?;
        let new = combine(t, &old, m)?;
        match write_over(objects, t, &old, new, req.query.dry_run).await {
            Ok(out) => return Ok(respond(StatusCode::OK, &out, &warnings)),
            Err(ApiError::Conflict(_)) if !conditional => continue,
            Err(e) => return Err(about(e)),
        }
    }
    Err(about(ApiError::conflict(t.kind, &name)))
}

/// `DELETE` of one object (with `DeleteOptions`: preconditions,
/// `propagationPolicy`, `dryRun`) or of a collection (its selectors).
pub async fn delete(objects: &Objects, req: WriteRequest) -> Result<Response, Refusal> {
    let t = &req.target;
    if t.sub.is_some() {
        return Err(Refusal::method_not_allowed(
            "a subresource cannot be deleted",
        ));
    }
    // kubectl's typed clients (drain) send DeleteOptions as protobuf,
    // which drover does not read: the query's options apply then.
    let protobuf = req.content_type.starts_with(super::protobuf::CONTENT_TYPE);
    let opts: Value = if req.body.is_empty() || protobuf {
        json!({})
    } else {
        body_json(&req.body)?
    };
    let policy = opts
        .get("propagationPolicy")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or(req.query.propagation.clone());
    // DaemonSets, Deployments and ReplicaSets have dependents (pods,
    // ReplicaSets): for them, Orphan and Foreground mark them with their
    // finalizer and the controller finishes the deletion; Background (the
    // default) deletes them now and the garbage collector their
    // dependents. Any other kind is deleted now.
    let finalizer = match policy.as_deref() {
        None | Some("Background") => None,
        Some("Foreground") => Some(drover_controller::daemon::FOREGROUND_FINALIZER),
        Some("Orphan") => Some(drover_controller::daemon::ORPHAN_FINALIZER),
        Some(other) => {
            return Err(Refusal::bad_request(format!(
                "propagationPolicy {other:?}: not one of Orphan, Background, Foreground"
            )))
        }
    };
    let finalizer = finalizer.filter(|_| crate::api::has_dependents(t.kind));
    let dry_run = req.query.dry_run
        || opts
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| d.iter().any(|x| x == "All"));
    let ns = t.namespace.as_deref();
    let Some(name) = &t.name else {
        let (items, _) =
            super::read::list_page(objects, &req.informer, t.kind, ns, &req.query).await?;
        let mut deleted = Vec::new();
        for m in &items {
            if !dry_run {
                let r = match finalizer {
                    Some(f) => objects
                        .delete_with_finalizer(t.kind, m.namespace(), m.name(), f, None, None)
                        .await
                        .map(|_| ()),
                    None => objects
                        .delete(t.kind, m.namespace(), m.name())
                        .await
                        .map(|_| ()),
                };
                match r {
                    Ok(()) | Err(ApiError::NotFound(_)) => {}
                    Err(e) => return Err(Refusal::from(e).about(t.kind, m.name())),
                }
            }
            deleted.push(m.clone());
        }
        return Ok(super::status::ok(&super::read::list_value(
            t.kind,
            &deleted,
            json!({}),
        )));
    };
    let about = |e: ApiError| Refusal::from(e).about(t.kind, name);
    let current = objects
        .get(t.kind, ns.unwrap_or(""), name)
        .await
        .map_err(about)?;
    let pre = &opts["preconditions"];
    if let Some(uid) = pre.get("uid").and_then(Value::as_str) {
        if uid != current.metadata().uid {
            return Err(about(ApiError::uid_precondition(
                uid,
                &current.metadata().uid,
            )));
        }
    }
    if dry_run {
        return Ok(respond(StatusCode::OK, &current, &[]));
    }
    let pre_rev = match pre.get("resourceVersion").and_then(Value::as_str) {
        Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
            Refusal::bad_request(format!(
                "preconditions.resourceVersion {rv:?}: not a number"
            ))
        })?),
        None => None,
    };
    if let Some(f) = finalizer {
        let uid = current.metadata().uid.clone();
        let out = objects
            .delete_with_finalizer(t.kind, ns.unwrap_or(""), name, f, Some(&uid), pre_rev)
            .await
            .map_err(about)?;
        return Ok(respond(StatusCode::OK, &out, &[]));
    }
    let out = match pre_rev {
        Some(rev) => {
            objects
                .delete_at(t.kind, ns.unwrap_or(""), name, Some(rev))
                .await
                .map_err(about)?;
            current
        }
        None => objects
            .delete(t.kind, ns.unwrap_or(""), name)
            .await
            .map_err(about)?,
    };
    Ok(respond(StatusCode::OK, &out, &[]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::Kind;

    #[test]
    fn patch_types_by_content_type() {
        assert_eq!(
            patch_type("application/strategic-merge-patch+json").unwrap(),
            PatchType::Strategic
        );
        assert_eq!(
            patch_type("application/merge-patch+json; charset=utf-8").unwrap(),
            PatchType::Merge
        );
        assert_eq!(
            patch_type("application/json-patch+json").unwrap(),
            PatchType::Json
        );
        assert_eq!(
            patch_type("application/apply-patch+yaml").unwrap(),
            PatchType::Apply
        );
        assert_eq!(
            patch_type("text/plain").unwrap_err().code,
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
    }

    fn target(kind: Kind, ns: Option<&str>, name: Option<&str>) -> Target {
        Target {
            kind,
            namespace: ns.map(str::to_string),
            name: name.map(str::to_string),
            sub: None,
        }
    }

    #[test]
    fn objects_must_match_their_url() {
        let q = Query::parse(None).unwrap();
        let t = target(Kind::Pod, Some("a"), None);
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "i"}]}});
        let (m, _) = manifest_of(&t, &q, pod.clone()).unwrap();
        assert_eq!(m.namespace(), "a");
        let mut other_ns = pod.clone();
        other_ns["metadata"]["namespace"] = json!("b");
        assert!(manifest_of(&t, &q, other_ns).is_err());
        let ds = target(Kind::DaemonSet, Some("a"), None);
        assert!(manifest_of(&ds, &q, pod.clone()).is_err());
        let named = target(Kind::Pod, Some("a"), Some("q"));
        assert!(manifest_of(&named, &q, pod.clone()).is_err());
        let mut typo = pod;
        typo["spec"]["nodeNmae"] = json!("x");
        let strict = Query::parse(Some("fieldValidation=Strict")).unwrap();
        let e = manifest_of(&t, &strict, typo.clone()).unwrap_err();
        assert!(e.message.contains("unknown field"), "{}", e.message);
        let warn = Query::parse(Some("fieldValidation=Warn")).unwrap();
        let (_, w) = manifest_of(&t, &warn, typo).unwrap();
        assert!(!w.is_empty());
    }
}
