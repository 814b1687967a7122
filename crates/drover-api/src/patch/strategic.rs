//! Strategic merge patch for drover's kinds, as kubectl sends it (`apply`,
//! `rollout undo|restart`, `cordon`, `taint`, `edit`): maps merge key by
//! key (`null` removes), lists of the Kubernetes types that have a merge
//! key merge element by element on it, `finalizers` merge as a set, every
//! other list is replaced. The directives: `$patch: replace|delete|merge`
//! (on a map or a list element), `$setElementOrder/FIELD`,
//! `$deleteFromPrimitiveList/FIELD` and `$retainKeys`.
//!
//! The merge keys are Kubernetes' (`patchMergeKey` of the Go types) for
//! the fields drover's kinds have; a field is known by its name, which is
//! unambiguous within these kinds. The table is
//! [`drover_api::openapi::list_strategy`], which the OpenAPI schemas
//! publish too (`x-kubernetes-patch-merge-key`).

use super::PatchError;
use crate::openapi::{list_strategy as strategy, ListStrategy};
use serde_json::{Map, Value};

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder/";
const DELETE_PRIMITIVE: &str = "$deleteFromPrimitiveList/";

/// The deepest a patch may nest (a bound on recursion).
const MAX_DEPTH: usize = 64;

/// Applies a strategic merge patch to `target` (an object).
pub fn apply(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let Value::Object(p) = patch else {
        return Err(PatchError(
            "a strategic merge patch is a JSON object".into(),
        ));
    };
    let original = match target.take() {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    *target = match merge_map(original, p, 0)? {
        Some(m) => Value::Object(m),
        None => Value::Object(Map::new()),
    };
    Ok(())
}

/// Merges `patch` into `original`; None when the patch deletes the map.
fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    depth: usize,
) -> Result<Option<Map<String, Value>>, PatchError> {
    if depth > MAX_DEPTH {
        return Err(PatchError(format!(
            "the patch nests deeper than {MAX_DEPTH} levels"
        )));
    }
    match patch.get(PATCH).map(|v| v.as_str()) {
        None | Some(Some("merge")) => {}
        Some(Some("delete")) => return Ok(None),
        Some(Some("replace")) => {
            let mut p = patch.clone();
            p.remove(PATCH);
            return merge_map(Map::new(), &p, depth + 1);
        }
        Some(other) => {
            return Err(PatchError(format!(
                "$patch: {other:?} is not one of replace, delete, merge"
            )))
        }
    }
    let mut orders: Vec<(&str, &Value)> = Vec::new();
    for (k, v) in patch {
        if k == PATCH || k == RETAIN_KEYS {
            continue;
        }
        if let Some(field) = k.strip_prefix(SET_ORDER) {
            orders.push((field, v));
            continue;
        }
        if let Some(field) = k.strip_prefix(DELETE_PRIMITIVE) {
            let gone = v.as_array().cloned().unwrap_or_default();
            if let Some(Value::Array(list)) = original.get_mut(field) {
                list.retain(|x| !gone.contains(x));
            }
            continue;
        }
        if v.is_null() {
            original.remove(k);
            continue;
        }
        let old = original.remove(k).unwrap_or(Value::Null);
        if let Some(new) = merge_value(k, old, v, depth + 1)? {
            original.insert(k.clone(), new);
        }
    }
    for (field, order) in orders {
        if let Some(Value::Array(list)) = original.get_mut(field) {
            reorder(list, order, strategy(field));
        }
    }
    if let Some(Value::Array(keep)) = patch.get(RETAIN_KEYS) {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        original.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(Some(original))
}

/// The merge of one field; None when the patch deletes it.
fn merge_value(
    field: &str,
    old: Value,
    patch: &Value,
    depth: usize,
) -> Result<Option<Value>, PatchError> {
    match patch {
        Value::Object(p) => {
            let o = match old {
                Value::Object(o) => o,
                _ => Map::new(),
            };
            Ok(merge_map(o, p, depth)?.map(Value::Object))
        }
        Value::Array(p) => {
            let o = match old {
                Value::Array(o) => o,
                _ => Vec::new(),
            };
            merge_list(field, o, p, depth).map(|l| Some(Value::Array(l)))
        }
        other => Ok(Some(other.clone())),
    }
}

fn key_of<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object().and_then(|m| m.get(key))
}

fn merge_list(
    field: &str,
    mut original: Vec<Value>,
    patch: &[Value],
    depth: usize,
) -> Result<Vec<Value>, PatchError> {
    // `{"$patch": "replace"}` as an element: the rest is the list.
    let replace = patch
        .iter()
        .any(|e| key_of(e, PATCH).and_then(Value::as_str) == Some("replace"));
    if replace {
        return Ok(patch
            .iter()
            .filter(|e| key_of(e, PATCH).is_none())
            .cloned()
            .collect());
    }
    match strategy(field) {
        ListStrategy::Replace => Ok(patch
            .iter()
            .map(|e| strip(e.clone(), depth))
            .collect::<Result<_, _>>()?),
        ListStrategy::Set => {
            for e in patch {
                if !original.contains(e) {
                    original.push(e.clone());
                }
            }
            Ok(original)
        }
        ListStrategy::MergeOn(key) => {
            for e in patch {
                let Some(k) = key_of(e, key) else {
                    if let Some(Value::String(d)) = key_of(e, PATCH) {
                        return Err(PatchError(format!(
                            "{field}: an element with $patch: {d} names no {key}"
                        )));
                    }
                    return Err(PatchError(format!(
                        "{field}: every element needs its merge key {key:?}"
                    )));
                };
                let pos = original.iter().position(|o| key_of(o, key) == Some(k));
                let delete = key_of(e, PATCH).and_then(Value::as_str) == Some("delete");
                match (pos, delete) {
                    (Some(i), true) => {
                        original.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => {
                        let old = original.remove(i);
                        if let Some(new) = merge_value(field, old, e, depth + 1)? {
                            original.insert(i, new);
                        }
                    }
                    (None, false) => {
                        if let Some(new) = merge_value(field, Value::Null, e, depth + 1)? {
                            original.push(new);
                        }
                    }
                }
            }
            Ok(original)
        }
    }
}

/// A value of the patch taken whole: its directives removed (a map
/// without an original merges into an empty one).
fn strip(v: Value, depth: usize) -> Result<Value, PatchError> {
    match &v {
        Value::Object(m) => Ok(Value::Object(
            merge_map(Map::new(), m, depth + 1)?.unwrap_or_default(),
        )),
        _ => Ok(v),
    }
}

/// Orders `list` as `$setElementOrder` says; elements it does not name
/// keep their order after those it does.
fn reorder(list: &mut Vec<Value>, order: &Value, strategy: ListStrategy) {
    let Some(order) = order.as_array() else {
        return;
    };
    let rank = |e: &Value| -> usize {
        order
            .iter()
            .position(|o| match strategy {
                ListStrategy::MergeOn(key) => {
                    key_of(o, key).is_some() && key_of(o, key) == key_of(e, key)
                }
                _ => o == e,
            })
            .unwrap_or(usize::MAX)
    };
    let mut ranked: Vec<(usize, usize, Value)> = list
        .drain(..)
        .enumerate()
        .map(|(i, e)| (rank(&e), i, e))
        .collect();
    ranked.sort_by_key(|(r, i, _)| (*r, *i));
    list.extend(ranked.into_iter().map(|(_, _, e)| e));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patched(target: Value, patch: Value) -> Value {
        let mut t = target;
        apply(&mut t, &patch).unwrap();
        t
    }

    #[test]
    fn containers_merge_by_name_and_env_by_name() {
        let ds = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
            {"name": "b", "image": "b:1"}
        ]}}}});
        let out = patched(
            ds,
            json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}, {"name": "c"}],
            "containers": [
                {"name": "a", "image": "a:2", "env": [{"name": "Y", "$patch": "delete"}, {"name": "Z", "value": "3"}]},
                {"name": "c", "image": "c:1"}
            ]}}}}),
        );
        let cs = &out["spec"]["template"]["spec"]["containers"];
        assert_eq!(cs[0], json!({"name": "b", "image": "b:1"}));
        assert_eq!(cs[1]["image"], "a:2");
        assert_eq!(
            cs[1]["env"],
            json!([{"name": "X", "value": "1"}, {"name": "Z", "value": "3"}])
        );
        assert_eq!(cs[2], json!({"name": "c", "image": "c:1"}));
    }

    #[test]
    fn ports_volume_mounts_and_plain_lists() {
        let c = json!({"ports": [{"containerPort": 80, "name": "http"}],
            "volumeMounts": [{"mountPath": "/a", "name": "v"}],
            "args": ["x", "y"],
            "tolerations": [{"key": "a"}]});
        let out = patched(
            c,
            json!({"ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 81}],
                "volumeMounts": [{"mountPath": "/a", "readOnly": true}],
                "args": ["z"],
                "tolerations": [{"key": "b"}]}),
        );
        assert_eq!(
            out["ports"],
            json!([{"containerPort": 80, "name": "http", "protocol": "TCP"}, {"containerPort": 81}])
        );
        assert_eq!(
            out["volumeMounts"],
            json!([{"mountPath": "/a", "name": "v", "readOnly": true}])
        );
        assert_eq!(out["args"], json!(["z"]));
        assert_eq!(
            out["tolerations"],
            json!([{"key": "b"}]),
            "replaced, as in k8s"
        );
    }

    #[test]
    fn directives() {
        let m = json!({"metadata": {"finalizers": ["a", "b"], "labels": {"x": "1", "y": "2"}},
            "spec": {"volumes": [{"name": "v", "emptyDir": {}}], "nodeSelector": {"a": "b"}}});
        let out = patched(
            m,
            json!({
                "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "finalizers": ["c"], "labels": {"x": null}},
                "spec": {
                    "volumes": [{"name": "v", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/p"}}],
                    "nodeSelector": {"$patch": "replace", "z": "1"}
                }
            }),
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["b", "c"]));
        assert_eq!(out["metadata"]["labels"], json!({"y": "2"}));
        assert_eq!(
            out["spec"]["volumes"],
            json!([{"name": "v", "hostPath": {"path": "/p"}}])
        );
        assert_eq!(out["spec"]["nodeSelector"], json!({"z": "1"}));
        let out = patched(
            out,
            json!({"spec": {"volumes": [{"$patch": "replace"}, {"name": "w", "emptyDir": {}}], "nodeSelector": {"$patch": "delete"}}}),
        );
        assert_eq!(
            out["spec"]["volumes"],
            json!([{"name": "w", "emptyDir": {}}])
        );
        assert!(out["spec"].get("nodeSelector").is_none());
        let mut t = json!({});
        assert!(apply(&mut t, &json!({"spec": {"$patch": "explode"}})).is_err());
        assert!(apply(&mut t, &json!({"containers": [{"image": "x"}]})).is_err());
        assert!(apply(&mut t, &json!([1])).is_err());
    }

    /// A ControllerRevision's data as `kubectl rollout undo` sends it: the
    /// template is replaced whole, what the revision does not name goes.
    #[test]
    fn a_revision_replaces_the_template() {
        let ds = json!({"metadata": {"name": "hello", "labels": {"app": "hello"}},
            "spec": {"selector": {"matchLabels": {"app": "hello"}}, "template": {
                "metadata": {"labels": {"app": "hello"}, "annotations": {"kubectl.kubernetes.io/restartedAt": "t"}},
                "spec": {"containers": [{"name": "c", "image": "busybox:2", "env": [{"name": "FOO", "value": "bar"}]}],
                    "nodeSelector": {"a": "b"}}}}});
        let revision = json!({"spec": {"template": {
            "$patch": "replace",
            "metadata": {"creationTimestamp": null, "labels": {"app": "hello"}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1", "resources": {}}]}}}});
        let out = patched(ds, revision);
        assert_eq!(
            out["spec"]["template"],
            json!({"metadata": {"labels": {"app": "hello"}},
                "spec": {"containers": [{"name": "c", "image": "busybox:1", "resources": {}}]}})
        );
        assert_eq!(
            out["spec"]["selector"],
            json!({"matchLabels": {"app": "hello"}}),
            "the rest stays"
        );
        assert_eq!(out["metadata"]["name"], "hello");
    }
}
