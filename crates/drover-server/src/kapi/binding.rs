//! `POST /api/v1/namespaces/NS/pods/NAME/binding`: a `v1 Binding` binds
//! an unbound pod to a node, as the API server's `pods/binding`
//! subresource does for a scheduler (another scheduler than drover's, or a
//! person): `spec.nodeName` and `PodScheduled=True` written in one
//! compare-and-swap on the version read, so a pod is never bound twice; a
//! pod already bound (or being deleted) is refused with 409, in the API
//! server's words. The admin only: a viewer, metrics, node or member
//! credential is refused (403).

use super::status::{json_response, Refusal};
use super::Target;
use crate::api::batch::Write;
use crate::api::Objects;
use crate::auth::Caller;
use crate::error::ApiError;
use axum::http::StatusCode;
use axum::response::Response;
use drover_api::{Kind, Manifest, Pod};
use drover_controller::daemon::pods::bound;
use drover_controller::Timestamp;
use serde_json::{json, Value};
use std::time::SystemTime;

/// Whether `caller` may bind pods.
pub fn may_bind(caller: &Caller) -> Result<(), Refusal> {
    match caller {
        Caller::Admin(_) => Ok(()),
        other => Err(Refusal::forbidden(format!(
            "{other} may not create pods/binding: binding a pod to a node is the admin's (or drover's scheduler's)"
        ))),
    }
}

/// The node a Binding body names, checked as the API server checks it.
fn target_node(pod: &str, body: &[u8]) -> Result<String, Refusal> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| Refusal::bad_request(format!("the body is not a v1 Binding in JSON: {e}")))?;
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != "Binding" {
        return Err(Refusal::bad_request(format!(
            "kind: the body of pods/binding is a Binding, not {kind:?}"
        )));
    }
    let name = v
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !name.is_empty() && name != pod {
        return Err(Refusal::bad_request(format!(
            "metadata.name: the Binding's name {name:?} does not match the pod {pod:?} of the path"
        )));
    }
    let target_kind = v
        .pointer("/target/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !matches!(target_kind, "" | "Node") {
        return Err(Refusal::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            format!("Binding {name:?} is invalid: target.kind: Invalid value: {target_kind:?}: must be empty or 'Node'"),
        ));
    }
    let node = v
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if node.is_empty() {
        return Err(Refusal::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            format!("Binding {pod:?} is invalid: target.name: Required value: name the node to bind the pod to"),
        ));
    }
    Ok(node.to_string())
}

fn assigned(pod: &Pod) -> Option<Refusal> {
    let name = &pod.metadata.name;
    let conflict = |message: String| {
        Some(Refusal::new(StatusCode::CONFLICT, "Conflict", message).about(Kind::Pod, name))
    };
    if pod.metadata.deletion_timestamp.is_some() {
        return conflict(format!(
            "Operation cannot be fulfilled on pods/binding {name:?}: pod {name} is being deleted, cannot be assigned to a host"
        ));
    }
    if !pod.spec.node_name.is_empty() {
        return conflict(format!(
            "Operation cannot be fulfilled on pods/binding {name:?}: pod {name} is already assigned to node {:?}",
            pod.spec.node_name
        ));
    }
    None
}

/// Binds the pod of `t` to the node `body` names.
pub async fn bind(objects: &Objects, t: &Target, body: &[u8]) -> Result<Response, Refusal> {
    let (Some(namespace), Some(name)) = (t.namespace.as_deref(), t.name.as_deref()) else {
        return Err(Refusal::method_not_allowed(
            "pods/binding is created on one pod: POST /api/v1/namespaces/NS/pods/NAME/binding",
        ));
    };
    let node = target_node(name, body)?;
    let pod = match objects.get(Kind::Pod, namespace, name).await? {
        Manifest::Pod(p) => *p,
        other => {
            return Err(ApiError::Internal(format!("{} read as a pod", other.reference())).into())
        }
    };
    if let Some(refusal) = assigned(&pod) {
        return Err(refusal);
    }
    let now = Timestamp::from(SystemTime::now());
    let write = Write::Update(Manifest::Pod(Box::new(bound(&pod, &node, now))));
    let result = objects.execute(vec![write]).await.into_iter().next();
    match result {
        Some(Ok(_)) => Ok(json_response(
            StatusCode::CREATED,
            &json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "code": 201,
            }),
        )),
        // Changed since it was read: bound by someone else, or changed.
        Some(Err(ApiError::Conflict(_))) => {
            let now = objects.get(Kind::Pod, namespace, name).await?;
            let why = match &now {
                Manifest::Pod(p) => assigned(p),
                _ => None,
            };
            Err(why.unwrap_or_else(|| {
                Refusal::from(ApiError::conflict(Kind::Pod, name)).about(Kind::Pod, name)
            }))
        }
        Some(Err(e)) => Err(Refusal::from(e).about(Kind::Pod, name)),
        None => Err(ApiError::Internal("the binding's write has no outcome".into()).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_names_a_node_and_only_the_admin_may_post_it() {
        let ok = br#"{"apiVersion":"v1","kind":"Binding","metadata":{"name":"web"},"target":{"apiVersion":"v1","kind":"Node","name":"n1"}}"#;
        assert_eq!(target_node("web", ok).expect("ok"), "n1");
        for (body, code) in [
            (&br#"{"kind":"Pod"}"#[..], StatusCode::BAD_REQUEST),
            (
                br#"{"kind":"Binding","metadata":{"name":"other"},"target":{"name":"n1"}}"#,
                StatusCode::BAD_REQUEST,
            ),
            (
                br#"{"kind":"Binding","target":{"kind":"Pod","name":"n1"}}"#,
                StatusCode::UNPROCESSABLE_ENTITY,
            ),
            (
                br#"{"kind":"Binding","target":{}}"#,
                StatusCode::UNPROCESSABLE_ENTITY,
            ),
            (b"not json", StatusCode::BAD_REQUEST),
        ] {
            let r = target_node("web", body).expect_err("refused");
            assert_eq!(r.code, code, "{}", String::from_utf8_lossy(body));
        }
        assert!(may_bind(&Caller::Admin("admin-token".into())).is_ok());
        for c in [
            Caller::Viewer("v".into()),
            Caller::Metrics("m".into()),
            Caller::Node {
                name: "n1".into(),
                serial: "s".into(),
            },
            Caller::Member(1),
        ] {
            assert_eq!(
                may_bind(&c).expect_err("refused").code,
                StatusCode::FORBIDDEN
            );
        }
        let mut p = Pod::default();
        p.metadata.name = "web".into();
        assert!(assigned(&p).is_none());
        p.spec.node_name = "n2".into();
        let r = assigned(&p).expect("bound");
        assert_eq!(r.code, StatusCode::CONFLICT);
        assert_eq!(
            r.message,
            "Operation cannot be fulfilled on pods/binding \"web\": pod web is already assigned to node \"n2\""
        );
    }
}
