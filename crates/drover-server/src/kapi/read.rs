//! get and list: one object, or a kind's objects (one namespace or all)
//! filtered by label and field selectors, in pages (`limit`, `continue`),
//! as JSON or as a Table.
//!
//! A page after the first is read anew (not at the first page's
//! resourceVersion, which the store does not keep): it holds the objects
//! after the last one of the page before, as they are now.

use super::query::{IncludeObject, Query};
use super::status::{ok, Refusal};
use super::table;
use super::Target;
use crate::api::Objects;
use crate::error::ApiError;
use axum::response::Response;
use base64::Engine;
use drover_api::{Kind, Manifest};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::SystemTime;

/// The longest continue token drover reads.
const MAX_CONTINUE_BYTES: usize = 2048;

/// A continue token: base64 of the key (`namespace/name`) of the last
/// object of the page before.
fn continue_token(after: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(after)
}

fn read_continue(token: &str) -> Result<String, Refusal> {
    let bad = || {
        Refusal::bad_request(format!(
            "continue {token:?}: not a continue token this server gave out; list again from the start"
        ))
    };
    if token.len() > MAX_CONTINUE_BYTES {
        return Err(bad());
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    String::from_utf8(bytes).map_err(|_| bad())
}

fn sort_key(m: &Manifest) -> String {
    format!("{}/{}", m.namespace(), m.name())
}

/// The list's items that pass the selectors, and the list's metadata.
pub async fn list_page(
    objects: &Objects,
    kind: Kind,
    namespace: Option<&str>,
    q: &Query,
) -> Result<(Vec<Manifest>, Value), Refusal> {
    let (items, rev) = objects
        .list(kind, namespace, q.labels.as_ref())
        .await
        .map_err(Refusal::from)?;
    let after = match &q.continue_token {
        Some(t) => Some(read_continue(t)?),
        None => None,
    };
    let mut items: Vec<Manifest> = items
        .into_iter()
        .filter(|m| q.selects(m))
        .filter(|m| {
            after
                .as_ref()
                .is_none_or(|a| sort_key(m).as_str() > a.as_str())
        })
        .collect();
    items.sort_by_key(sort_key);
    let mut meta = json!({ "resourceVersion": rev.to_string() });
    if let Some(limit) = q.limit {
        if items.len() > limit {
            let rest = items.split_off(limit);
            if let Some(last) = items.last() {
                meta["continue"] = json!(continue_token(&sort_key(last)));
                meta["remainingItemCount"] = json!(rest.len());
            }
        }
    }
    Ok((items, meta))
}

/// `GET` of a resource path: get or list.
pub async fn read(
    objects: &Objects,
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
            let (items, meta) = list_page(objects, t.kind, ns, q).await?;
            if as_table {
                return Ok(ok(&table::table(
                    t.kind,
                    &items,
                    q.include_object,
                    meta,
                    now,
                )));
            }
            Ok(ok(&list_value(t.kind, &items, meta)))
        }
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

/// The namespaces objects name (plus `default` and `kube-system`, which
/// always exist).
async fn namespace_names(objects: &Objects) -> Result<BTreeSet<String>, ApiError> {
    let mut out: BTreeSet<String> = ["default", "kube-system"].map(String::from).into();
    for kind in Kind::ALL.into_iter().filter(|k| k.namespaced()) {
        let (items, _) = objects.list(kind, None, None).await?;
        out.extend(items.iter().map(|m| m.namespace().to_string()));
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

/// `GET /api/v1/namespaces[/NAME]`: drover's namespaces are implicit (they
/// exist as soon as an object names one), listed read-only.
pub async fn namespaces(
    objects: &Objects,
    name: Option<String>,
    q: &Query,
    as_table: bool,
) -> Result<Response, Refusal> {
    if q.watch {
        return Err(Refusal::method_not_allowed(
            "drover's namespaces are implicit: they cannot be watched",
        ));
    }
    let all = namespace_names(objects).await.map_err(Refusal::from)?;
    match name {
        Some(n) => {
            if !all.contains(&n) {
                return Err(Refusal::not_found(format!("namespaces {n:?} not found")));
            }
            if as_table {
                return Ok(ok(&namespace_table(&[&n], q.include_object)));
            }
            Ok(ok(&namespace_value(&n)))
        }
        None => {
            let names: Vec<&str> = all
                .iter()
                .map(String::as_str)
                .filter(|n| q.fields.matches(&namespace_value(n)))
                .collect();
            if as_table {
                return Ok(ok(&namespace_table(&names, q.include_object)));
            }
            Ok(ok(&json!({
                "kind": "NamespaceList",
                "apiVersion": "v1",
                "metadata": {},
                "items": names.iter().map(|n| namespace_value(n)).collect::<Vec<_>>(),
            })))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_are_checked() {
        let t = continue_token("default/web-1");
        assert_eq!(read_continue(&t).unwrap(), "default/web-1");
        assert!(read_continue("!!!").is_err());
        assert!(read_continue(&"A".repeat(5000)).is_err());
    }
}
