//! OpenAPI v3 documents: `/openapi/v3` lists a document per group
//! version, and each document has the paths of its kinds with their
//! operations, the `x-kubernetes-group-version-kind` of each, the
//! `fieldValidation` and `dryRun` parameters, and the schemas of its kinds
//! and of every type they use (`components.schemas`, built by
//! [`drover_api::openapi`] from drover's types).
//!
//! kubectl 1.32 reads them for three things:
//! - `explain`: it finds the kind's schema by its
//!   `x-kubernetes-group-version-kind` and follows `$ref`/`allOf`, `items`
//!   and `additionalProperties` down the field path;
//! - `apply --validate=strict` (the default): the `fieldValidation`
//!   parameter tells kubectl that the server validates fields, so kubectl
//!   sends `fieldValidation=Strict` and validates nothing itself;
//! - apply's patches: kubectl computes them from a document's schemas only
//!   when the kind's `patch` operation lists
//!   `application/strategic-merge-patch+json`. It does not here, on
//!   purpose: kubectl then uses its built-in Go types, which carry
//!   Kubernetes' exact patch metadata for every field (the schemas carry
//!   the merge keys drover's server uses, for other clients).
//!
//! `/openapi/v2` is not served (see docs/kubernetes-api.md): client-go
//! reads it only as protobuf.

use super::discovery::{groups, has_status, kinds_of};
use drover_api::Kind;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::OnceLock;

fn gv_path(group: &str) -> String {
    if group.is_empty() {
        "api/v1".into()
    } else {
        format!("apis/{group}/v1")
    }
}

/// A short hash of a document (FNV-1a), for its URL's `hash` parameter.
fn hash(v: &Value) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in v.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016X}")
}

/// The documents, by group, and their hashes: they depend on nothing but
/// the build, so they are made once.
fn documents() -> &'static BTreeMap<&'static str, (Value, String)> {
    static DOCS: OnceLock<BTreeMap<&'static str, (Value, String)>> = OnceLock::new();
    DOCS.get_or_init(|| {
        let mut all = vec![""];
        all.extend(groups());
        all.into_iter()
            .filter_map(|g| {
                let doc = build(g, "v1")?;
                let h = hash(&doc);
                Some((g, (doc, h)))
            })
            .collect()
    })
}

/// `/openapi/v3`.
pub fn root() -> Value {
    let mut paths = Map::new();
    for (g, (_, h)) in documents() {
        let p = gv_path(g);
        paths.insert(
            p.clone(),
            json!({ "serverRelativeURL": format!("/openapi/v3/{p}?hash={h}") }),
        );
    }
    json!({ "paths": paths })
}

fn param(name: &str) -> Value {
    json!({
        "name": name,
        "in": "query",
        "description": "",
        "schema": { "type": "string", "uniqueItems": true },
    })
}

fn op(kind: Kind, action: &str, verb: &str, with_write_params: bool) -> Value {
    let mut o = json!({
        "operationId": format!("{verb}{}", kind.name()),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": kind.group(),
            "version": "v1",
            "kind": kind.name(),
        },
        "responses": { "200": { "description": "OK" } },
    });
    if with_write_params {
        o["parameters"] = json!([
            param("dryRun"),
            param("fieldManager"),
            param("fieldValidation")
        ]);
    }
    if action == "patch" {
        o["requestBody"] = json!({
            "content": {
                "application/json-patch+json": {},
                "application/merge-patch+json": {},
                "application/apply-patch+yaml": {},
            },
            "required": true,
        });
    }
    o
}

/// The document of one group version, or None when drover has no kind
/// there.
pub fn group_version(group: &str, version: &str) -> Option<&'static Value> {
    if version != "v1" {
        return None;
    }
    documents().get(group).map(|(doc, _)| doc)
}

fn build(group: &str, version: &str) -> Option<Value> {
    let kinds = kinds_of(group, version);
    if kinds.is_empty() {
        return None;
    }
    let base = format!("/{}", gv_path(group));
    let mut paths = Map::new();
    for &k in &kinds {
        let coll = if k.namespaced() {
            format!("{base}/namespaces/{{namespace}}/{}", k.plural())
        } else {
            format!("{base}/{}", k.plural())
        };
        paths.insert(
            coll.clone(),
            json!({
                "get": op(k, "list", "list", false),
                "post": op(k, "post", "create", true),
                "delete": op(k, "deletecollection", "deleteCollection", false),
            }),
        );
        let one = format!("{coll}/{{name}}");
        paths.insert(
            one.clone(),
            json!({
                "get": op(k, "get", "read", false),
                "put": op(k, "put", "replace", true),
                "patch": op(k, "patch", "patch", true),
                "delete": op(k, "delete", "delete", false),
            }),
        );
        if has_status(k) {
            paths.insert(
                format!("{one}/status"),
                json!({
                    "get": op(k, "get", "readStatus", false),
                    "put": op(k, "put", "replaceStatus", true),
                    "patch": op(k, "patch", "patchStatus", true),
                }),
            );
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "drover", "version": format!("v1.{}", super::discovery::KUBE_MINOR) },
        "paths": paths,
        "components": { "schemas": drover_api::openapi::schemas(&kinds) },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_patch_with_field_validation() {
        let root = root();
        for k in Kind::ALL {
            let p = gv_path(k.group());
            let url = root["paths"][&p]["serverRelativeURL"].as_str().unwrap();
            assert!(url.starts_with(&format!("/openapi/v3/{p}?hash=")), "{url}");
            let doc = group_version(k.group(), "v1").unwrap();
            let found = doc["paths"].as_object().unwrap().values().any(|path| {
                path.get("patch").is_some_and(|op| {
                    op["x-kubernetes-group-version-kind"]["kind"] == k.name()
                        && op["parameters"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|p| p["name"] == "fieldValidation")
                })
            });
            assert!(found, "{k:?}");
        }
        assert!(group_version("batch", "v1").is_none());
        assert!(group_version("apps", "v2").is_none());
    }

    /// What `kubectl explain` does: the GVK of a kind's list operation
    /// names a schema of the same document.
    #[test]
    fn every_kind_explains_from_its_own_document() {
        for k in Kind::ALL {
            let doc = group_version(k.group(), "v1").unwrap();
            let base = format!("/{}", gv_path(k.group()));
            let list = if k.namespaced() {
                format!("{base}/namespaces/{{namespace}}/{}", k.plural())
            } else {
                format!("{base}/{}", k.plural())
            };
            let gvk = &doc["paths"][&list]["get"]["x-kubernetes-group-version-kind"];
            let schemas = doc["components"]["schemas"].as_object().unwrap();
            let found = schemas.values().filter(|s| {
                s["x-kubernetes-group-version-kind"]
                    .as_array()
                    .is_some_and(|a| a.contains(gvk))
            });
            assert_eq!(found.count(), 1, "{k:?}: {gvk}");
            // kubectl keeps computing its patches from its built-in types.
            let patch = &doc["paths"][&format!("{list}/{{name}}")]["patch"];
            assert!(patch["requestBody"]["content"]
                .get("application/strategic-merge-patch+json")
                .is_none());
        }
    }
}
