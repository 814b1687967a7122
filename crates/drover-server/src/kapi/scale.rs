//! The `scale` subresource of Deployments and ReplicaSets
//! (`…/deployments/NAME/scale`), an `autoscaling/v1` `Scale` as the API
//! server answers it: `spec.replicas` from the object's spec,
//! `status.replicas` and `status.selector` (the label selector as a
//! string) from its status and spec. `GET` reads it; `PUT` (a whole Scale,
//! compare-and-swap on its resourceVersion when it has one) and `PATCH`
//! (merge, JSON or strategic merge patch of the Scale, as `kubectl scale`
//! sends) change only `spec.replicas`, written over the object as read
//! with compare-and-swap (a patch is retried when the object changed in
//! between). Who may call: as every path of the Kubernetes API (reads:
//! admin, viewer, member; writes: admin, member).

use super::status::{ok, Refusal};
use super::write::{apply_patch, body_json, patch_type, PatchType};
use super::Target;
use crate::api::Objects;
use crate::error::ApiError;
use axum::http::Method;
use axum::response::Response;
use drover_api::selector::Selector;
use drover_api::validation::{FieldError, Path};
use drover_api::{Invalid, LabelSelector, Manifest, ObjectMeta};
use serde_json::{json, Value};

/// Attempts of a patch that lost a compare-and-swap it did not ask for.
const ATTEMPTS: usize = 5;

/// The parts of an object a Scale shows: its metadata, `spec.replicas`
/// (default 1), `status.replicas` and its selector.
fn parts(m: &Manifest) -> Option<(&ObjectMeta, i32, i32, Option<&LabelSelector>)> {
    match m {
        Manifest::Deployment(d) => Some((
            &d.metadata,
            d.spec.replicas.unwrap_or(1),
            d.status.replicas,
            d.spec.selector.as_ref(),
        )),
        Manifest::ReplicaSet(rs) => Some((
            &rs.metadata,
            rs.spec.replicas.unwrap_or(1),
            rs.status.replicas,
            rs.spec.selector.as_ref(),
        )),
        _ => None,
    }
}

/// The `autoscaling/v1` Scale of a Deployment or ReplicaSet.
pub fn scale_of(m: &Manifest) -> Option<Value> {
    let (meta, spec, status, selector) = parts(m)?;
    let selector = selector
        .and_then(|s| Selector::from_label_selector(s).ok())
        .map(|s| s.to_string())
        .unwrap_or_default();
    let mut metadata = json!({
        "name": meta.name,
        "namespace": meta.namespace,
        "uid": meta.uid,
        "resourceVersion": meta.resource_version,
    });
    if let Some(t) = &meta.creation_timestamp {
        metadata["creationTimestamp"] = json!(t);
    }
    Some(json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": { "replicas": spec },
        "status": { "replicas": status, "selector": selector },
    }))
}

/// `m` with `spec.replicas` set.
fn with_replicas(m: &Manifest, replicas: i32) -> Manifest {
    let mut m = m.clone();
    match &mut m {
        Manifest::Deployment(d) => d.spec.replicas = Some(replicas),
        Manifest::ReplicaSet(rs) => rs.spec.replicas = Some(replicas),
        _ => {}
    }
    m
}

/// `spec.replicas` of a Scale sent by a client, checked as the API server
/// checks a Scale.
fn replicas_of(scale: &Value, name: &str) -> Result<i32, ApiError> {
    let invalid = |value: Value, detail: &str| {
        let path = Path::new("spec").child("replicas");
        ApiError::invalid(vec![Invalid {
            kind: "Scale.autoscaling".into(),
            name: name.to_string(),
            errors: vec![FieldError::invalid(
                &path,
                drover_api::validation::BadValue::json(&value),
                detail,
            )],
        }])
    };
    let v = scale
        .get("spec")
        .and_then(|s| s.get("replicas"))
        .cloned()
        .unwrap_or(json!(0));
    let n = v
        .as_i64()
        .ok_or_else(|| invalid(v.clone(), "must be an integer"))?;
    if n < 0 {
        return Err(invalid(v, "must be greater than or equal to 0"));
    }
    i32::try_from(n).map_err(|_| invalid(v, "must be at most 2147483647"))
}

fn refuse(t: &Target, name: &str) -> impl Fn(ApiError) -> Refusal {
    let kind = t.kind;
    let name = name.to_string();
    move |e| Refusal::from(e).about(kind, &name)
}

/// Serves `GET`, `PUT` and `PATCH` of `…/NAME/scale` (`t.sub` is `scale`,
/// `t.kind` has one: [`super::discovery::has_scale`]).
pub async fn serve(
    objects: &Objects,
    method: &Method,
    t: &Target,
    content_type: &str,
    body: &[u8],
    dry_run: bool,
) -> Result<Response, Refusal> {
    let Some(name) = t.name.as_deref() else {
        return Err(Refusal::not_found("scale is a subresource of one object"));
    };
    let about = refuse(t, name);
    let ns = t.namespace.as_deref().unwrap_or("");
    let not_scalable = || {
        Refusal::not_found(format!(
            "{} has no subresource \"scale\" in drover",
            t.kind.resource()
        ))
    };
    if *method == Method::GET || *method == Method::HEAD {
        let m = objects.get(t.kind, ns, name).await.map_err(&about)?;
        return scale_of(&m).map(|s| ok(&s)).ok_or_else(not_scalable);
    }
    let ty = match *method {
        Method::PUT => None,
        Method::PATCH => Some(patch_type(content_type)?),
        ref m => {
            return Err(Refusal::method_not_allowed(format!(
                "{m} is not allowed on a scale subresource: GET, PUT or PATCH"
            )))
        }
    };
    if ty == Some(PatchType::Apply) {
        return Err(Refusal::new(
            axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            "drover does not take server-side apply on a scale subresource; send a merge patch",
        ));
    }
    let sent = body_json(body)?;
    for _ in 0..ATTEMPTS {
        let old = objects.get(t.kind, ns, name).await.map_err(&about)?;
        let mut scale = scale_of(&old).ok_or_else(not_scalable)?;
        let conditional = match ty {
            None => {
                let rv = sent["metadata"]["resourceVersion"].as_str().unwrap_or("");
                if !rv.is_empty() && rv != old.metadata().resource_version {
                    return Err(about(ApiError::conflict(t.kind, name)));
                }
                scale = sent.clone();
                !rv.is_empty()
            }
            Some(ty) => {
                apply_patch(ty, &mut scale, &sent)?;
                let rv = scale["metadata"]["resourceVersion"].as_str().unwrap_or("");
                if rv != old.metadata().resource_version {
                    return Err(about(ApiError::conflict(t.kind, name)));
                }
                false
            }
        };
        let replicas = replicas_of(&scale, name).map_err(&about)?;
        let new = with_replicas(&old, replicas);
        if dry_run {
            return scale_of(&new).map(|s| ok(&s)).ok_or_else(not_scalable);
        }
        match objects.update(new).await {
            Ok(written) => return scale_of(&written).map(|s| ok(&s)).ok_or_else(not_scalable),
            Err(ApiError::Conflict(_)) if !conditional => continue,
            Err(e) => return Err(about(e)),
        }
    }
    Err(about(ApiError::conflict(t.kind, name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Manifest {
        Manifest::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "u1",
                "resourceVersion": "7", "creationTimestamp": "2024-05-03T16:00:00Z"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]}}},
            "status": {"replicas": 1}
        }))
        .unwrap()
    }

    #[test]
    fn a_scale_as_the_api_server_answers_it() {
        let s = scale_of(&deployment()).unwrap();
        assert_eq!(
            s,
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {"name": "web", "namespace": "default", "uid": "u1",
                    "resourceVersion": "7", "creationTimestamp": "2024-05-03T16:00:00Z"},
                "spec": {"replicas": 2},
                "status": {"replicas": 1, "selector": "app=web"}})
        );
        let three = with_replicas(&deployment(), 3);
        assert_eq!(scale_of(&three).unwrap()["spec"]["replicas"], 3);
        let ds = Manifest::from_value(json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "d"}, "spec": {"template": {"spec": {"containers": []}}}}))
        .unwrap();
        assert!(scale_of(&ds).is_none());
    }

    #[test]
    fn replicas_must_be_a_non_negative_integer() {
        assert_eq!(
            replicas_of(&json!({"spec": {"replicas": 4}}), "web").unwrap(),
            4
        );
        assert_eq!(replicas_of(&json!({"spec": {}}), "web").unwrap(), 0);
        let e = replicas_of(&json!({"spec": {"replicas": -1}}), "web").unwrap_err();
        assert_eq!(
            e.to_string(),
            "Scale.autoscaling \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        );
        assert!(replicas_of(&json!({"spec": {"replicas": "x"}}), "web").is_err());
        assert!(replicas_of(&json!({"spec": {"replicas": 1u64 << 40}}), "web").is_err());
    }
}
