//! get and list: one object, or a kind's objects (one namespace or all)
//! filtered by label and field selectors, in pages (`limit`, `continue`),
//! as JSON or as a Table.
//!
//! A page after the first is read anew (not at the first page's
//! resourceVersion, which the store does not keep): it holds the objects
//! after the last one of the page before, as they are now.

use super::paging::{continue_token, key_sort, read_continue, sort_key};
use super::query::{IncludeObject, Query};
use super::status::{ok, Refusal};
use super::table;
use super::Target;
use crate::api::Objects;
use crate::cache::Informer;
use crate::error::ApiError;
use axum::response::IntoResponse;
use axum::response::Response;
use drover_api::{Kind, Manifest};
use serde_json::{json, Value};
use std::time::SystemTime;

/// The list's items that pass the selectors, and the list's metadata:
/// from the informer's memory for the kinds it holds
/// ([`super::cached`]), else from the store. A page (`limit`, `continue`)
/// of the store decodes only the objects after the continue key and up to
/// the page's end: a list of 10,000 pods in pages of 500 (kubectl's
/// default) decodes each pod once, not once a page.
pub async fn list_page(
    objects: &Objects,
    informer: &Informer,
    kind: Kind,
    namespace: Option<&str>,
    q: &Query,
) -> Result<(Vec<Manifest>, Value), Refusal> {
    let after = match &q.continue_token {
        Some(t) => Some(read_continue(t)?),
        None => None,
    };
    if let Some(view) = informer
        .consistent_view(objects.ctx(), kind)
        .await
        .map_err(Refusal::from)?
    {
        return Ok(super::cached::page(
            &view,
            kind,
            namespace,
            after.as_deref(),
            q,
        ));
    }
    let (kvs, rev) = objects
        .list_raw(kind, namespace)
        .await
        .map_err(Refusal::from)?;
    let start = match &after {
        Some(a) => kvs.partition_point(|kv| key_sort(kind, &kv.key).as_str() <= a.as_str()),
        None => 0,
    };
    let mut items: Vec<Manifest> = Vec::new();
    let mut meta = json!({ "resourceVersion": rev.to_string() });
    for (i, kv) in kvs.iter().enumerate().skip(start) {
        let m = crate::api::codec::decode(kv).map_err(Refusal::from)?;
        if !q.selects(&m) {
            continue;
        }
        if q.limit.is_some_and(|limit| items.len() == limit) {
            // One more passes: the page ends before it.
            if let Some(last) = items.last() {
                meta["continue"] = json!(continue_token(&sort_key(last)));
                // Known exactly only without selectors (as Kubernetes).
                if q.labels.is_none() && q.fields.is_empty() {
                    meta["remainingItemCount"] = json!(kvs.len() - i);
                }
            }
            break;
        }
        items.push(m);
    }
    Ok((items, meta))
}

/// `GET` of a resource path: get or list.
pub async fn read(
    objects: &Objects,
    informer: &Informer,
    t: &Target,
    q: &Query,
    as_table: bool,
) -> Result<Response, Refusal> {
    let now = SystemTime::now();
    let ns = t.namespace.as_deref();
    match (&t.name, t.sub.as_deref()) {
        (Some(name), None | Some("status")) => {
            let m = objects
                .get(t.kind, ns.unwrap_or(""), name)
                .await
                .map_err(|e| Refusal::from(e).about(t.kind, name))?;
            if as_table {
                let meta = json!({ "resourceVersion": m.metadata().resource_version });
                return Ok(ok(&table::table(
                    t.kind,
                    std::slice::from_ref(&m),
                    q.include_object,
                    meta,
                    now,
                )));
            }
            Ok(ok(&serde_json::to_value(&m).unwrap_or(Value::Null)))
        }
        (Some(_), Some(sub)) => Err(Refusal::not_found(format!(
            "{} has no subresource {sub:?} in drover",
            t.kind.resource()
        ))),
        (None, _) => {
            let (items, meta) = list_page(objects, informer, t.kind, ns, q).await?;
            if as_table {
                return Ok(ok(&table::table(
                    t.kind,
                    &items,
                    q.include_object,
                    meta,
                    now,
                )));
            }
            Ok(list_response(t.kind, &items, meta))
        }
    }
}

/// A `<Kind>List`, serialised straight from the objects (no JSON tree in
/// between: a list of 10,000 pods is tens of megabytes).
pub fn list_response(kind: Kind, items: &[Manifest], meta: Value) -> Response {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct List<'a> {
        kind: String,
        api_version: &'a str,
        metadata: Value,
        items: &'a [Manifest],
    }
    let list = List {
        kind: format!("{}List", kind.name()),
        api_version: kind.api_version(),
        metadata: meta,
        items,
    };
    match serde_json::to_vec(&list) {
        Ok(body) => super::status::json_body(axum::http::StatusCode::OK, body),
        Err(e) => Refusal::from(ApiError::Internal(format!(
            "cannot encode the list of {}: {e}",
            kind.resource()
        )))
        .into_response(),
    }
}

/// A `<Kind>List`.
pub fn list_value(kind: Kind, items: &[Manifest], meta: Value) -> Value {
    json!({
        "kind": format!("{}List", kind.name()),
        "apiVersion": kind.api_version(),
        "metadata": meta,
        "items": items,
    })
}

/// The namespaces: the stored Namespace objects, those objects name, and
/// `default` and `kube-system`, which always exist. By name, the stored
/// object when there is one.
async fn namespace_names(
    objects: &Objects,
) -> Result<std::collections::BTreeMap<String, Option<Value>>, ApiError> {
    let mut out: std::collections::BTreeMap<String, Option<Value>> = ["default", "kube-system"]
        .map(|n| (n.to_string(), None))
        .into();
    for kind in Kind::ALL.into_iter().filter(|k| k.namespaced()) {
        let (items, _) = objects.list(kind, None, None).await?;
        for m in &items {
            out.entry(m.namespace().to_string()).or_insert(None);
        }
    }
    let (stored, _) = objects.list(Kind::Namespace, None, None).await?;
    for m in &stored {
        let v = serde_json::to_value(m).map_err(|e| ApiError::Internal(e.to_string()))?;
        out.insert(m.name().to_string(), Some(v));
    }
    Ok(out)
}

fn namespace_value(name: &str) -> Value {
    json!({
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": { "name": name },
        "spec": { "finalizers": ["kubernetes"] },
        "status": { "phase": "Active" },
    })
}

fn namespace_table(names: &[&str], include: IncludeObject) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0},
            {"name": "Status", "type": "string", "format": "", "description": "", "priority": 0},
        ],
        "rows": names.iter().map(|n| {
            let mut r = json!({ "cells": [n, "Active"] });
            if include != IncludeObject::None {
                r["object"] = json!({
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": { "name": n },
                });
            }
            r
        }).collect::<Vec<_>>(),
    })
}

/// `GET /api/v1/namespaces[/NAME]`: the stored Namespace objects, and the
/// namespaces that exist only because an object names one (drover does
/// not require a Namespace object; they are listed as `Active`). A watch
/// follows the stored ones (`kapi::handle`).
pub async fn namespaces(
    objects: &Objects,
    name: Option<String>,
    q: &Query,
    as_table: bool,
) -> Result<Response, Refusal> {
    let all = namespace_names(objects).await.map_err(Refusal::from)?;
    let value = |n: &str| {
        all.get(n)
            .cloned()
            .flatten()
            .unwrap_or_else(|| namespace_value(n))
    };
    match name {
        Some(n) => {
            if !all.contains_key(&n) {
                return Err(Refusal::not_found(format!("namespaces {n:?} not found")));
            }
            if as_table {
                return Ok(ok(&namespace_table(&[&n], q.include_object)));
            }
            Ok(ok(&value(&n)))
        }
        None => {
            let names: Vec<&str> = all
                .keys()
                .map(String::as_str)
                .filter(|n| q.fields.matches(&value(n)))
                .collect();
            if as_table {
                return Ok(ok(&namespace_table(&names, q.include_object)));
            }
            Ok(ok(&json!({
                "kind": "NamespaceList",
                "apiVersion": "v1",
                "metadata": {},
                "items": names.iter().map(|n| value(n)).collect::<Vec<_>>(),
            })))
        }
    }
}
