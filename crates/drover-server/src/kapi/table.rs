//! `Table` answers (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`):
//! the columns kubectl shows for each kind, from
//! [`drover_api::columns`] (the ones `drover get` prints), so that
//! `kubectl get` looks as against Kubernetes. The `-o wide` columns have
//! priority 1; kubectl adds the NAMESPACE column of `-A` itself.

use super::query::IncludeObject;
use drover_api::columns::{headers, row, TableOptions};
use drover_api::{Kind, Manifest};
use serde_json::{json, Value};
use std::time::SystemTime;

/// Whether an `Accept` header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    // The first media type that drover can answer decides.
    for part in accept.split(',') {
        let p: Vec<&str> = part.split(';').map(str::trim).collect();
        let is_table = p.contains(&"as=Table") && p.contains(&"g=meta.k8s.io");
        if is_table && (p.contains(&"v=v1") || p.contains(&"v=v1beta1")) {
            return true;
        }
        if p[0] == "application/json" || p[0] == "*/*" {
            return false;
        }
    }
    false
}

/// The column definitions of a kind's table.
pub fn columns(kind: Kind) -> Vec<Value> {
    let narrow = headers(kind, &opts(false, SystemTime::now()));
    headers(kind, &opts(true, SystemTime::now()))
        .into_iter()
        .map(|h| {
            let mut c = json!({
                "name": title(h),
                "type": "string",
                "format": "",
                "description": "",
                "priority": if narrow.contains(&h) { 0 } else { 1 },
            });
            if h == "NAME" {
                c["format"] = json!("name");
            }
            c
        })
        .collect()
}

fn opts(wide: bool, now: SystemTime) -> TableOptions {
    TableOptions {
        wide,
        all_namespaces: false,
        now,
    }
}

/// `NODE SELECTOR` as `Node Selector` (kubectl upper-cases it back).
fn title(h: &str) -> String {
    let mut out = String::with_capacity(h.len());
    let mut start = true;
    for c in h.chars() {
        if start {
            out.push(c);
        } else {
            out.push(c.to_ascii_lowercase());
        }
        start = c == ' ' || c == '-';
    }
    out
}

/// One object's row.
pub fn table_row(m: &Manifest, include: IncludeObject, now: SystemTime) -> Value {
    let cells = row(m, &opts(true, now));
    let mut r = json!({ "cells": cells });
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            let meta = serde_json::to_value(m.metadata()).unwrap_or(Value::Null);
            r["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": meta,
            });
        }
        IncludeObject::Object => {
            r["object"] = serde_json::to_value(m).unwrap_or(Value::Null);
        }
    }
    r
}

/// A Table of `items`.
pub fn table(
    kind: Kind,
    items: &[Manifest],
    include: IncludeObject,
    list_meta: Value,
    now: SystemTime,
) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns(kind),
        "rows": items.iter().map(|m| table_row(m, include, now)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_as_kubectl_sends_them() {
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
        assert!(!wants_table(""));
        assert!(!wants_table(
            "application/json, application/json;as=Table;v=v1;g=meta.k8s.io"
        ));
    }

    #[test]
    fn wide_columns_have_priority_one() {
        let cols = columns(Kind::Pod);
        let names: Vec<&str> = cols.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "Ip",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        assert_eq!(cols[0]["format"], "name");
        assert_eq!(cols[4]["priority"], 0);
        assert!(cols[5..].iter().all(|c| c["priority"] == 1), "{cols:?}");
        let ev = columns(Kind::Event);
        let msg = ev.iter().find(|c| c["name"] == "Message").unwrap();
        assert_eq!(msg["priority"], 0);
        let sub = ev.iter().find(|c| c["name"] == "Subobject").unwrap();
        assert_eq!(sub["priority"], 1);
        assert_eq!(title("NODE SELECTOR"), "Node Selector");
        assert_eq!(title("UP-TO-DATE"), "Up-To-Date");
    }
}
