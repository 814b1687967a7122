//! The three patch types of the Kubernetes API, pure functions over JSON:
//! JSON merge patch (RFC 7386, [`merge_patch`]), JSON patch (RFC 6902,
//! [`json_patch`]) and strategic merge patch ([`strategic`]), which merges
//! lists by the Kubernetes merge keys of drover's kinds.

pub mod strategic;

use serde_json::Value;

/// Why a patch cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PatchError(pub String);

/// RFC 7386: objects merge key by key, `null` removes a key, anything else
/// (lists included) replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Default::default());
            }
            let Value::Object(t) = target else { return };
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// The most operations one JSON patch may hold.
pub const MAX_JSON_PATCH_OPS: usize = 10_000;

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn tokens(pointer: &str) -> Result<Vec<String>, PatchError> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(PatchError(format!(
            "path {pointer:?}: a JSON pointer starts with '/'"
        )));
    };
    Ok(rest.split('/').map(unescape).collect())
}

/// The parent of `pointer` and the last token.
fn parent<'a>(doc: &'a mut Value, pointer: &str) -> Result<(&'a mut Value, String), PatchError> {
    let mut t = tokens(pointer)?;
    let Some(last) = t.pop() else {
        return Err(PatchError(
            "the whole document cannot be the target here".into(),
        ));
    };
    let mut cur = doc;
    for tok in &t {
        cur = match cur {
            Value::Object(m) => m.get_mut(tok),
            Value::Array(a) => tok.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| PatchError(format!("path {pointer:?}: {tok:?} does not exist")))?;
    }
    Ok((cur, last))
}

fn get<'a>(doc: &'a Value, pointer: &str) -> Result<&'a Value, PatchError> {
    doc.pointer(pointer)
        .ok_or_else(|| PatchError(format!("path {pointer:?} does not exist")))
}

fn add(doc: &mut Value, pointer: &str, value: Value) -> Result<(), PatchError> {
    if pointer.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (p, last) = parent(doc, pointer)?;
    match p {
        Value::Object(m) => {
            m.insert(last, value);
            Ok(())
        }
        Value::Array(a) => {
            let i = if last == "-" {
                a.len()
            } else {
                last.parse::<usize>()
                    .ok()
                    .filter(|i| *i <= a.len())
                    .ok_or_else(|| PatchError(format!("path {pointer:?}: index out of range")))?
            };
            a.insert(i, value);
            Ok(())
        }
        _ => Err(PatchError(format!(
            "path {pointer:?}: the parent is neither an object nor a list"
        ))),
    }
}

fn remove(doc: &mut Value, pointer: &str) -> Result<Value, PatchError> {
    let (p, last) = parent(doc, pointer)?;
    let gone = match p {
        Value::Object(m) => m.remove(&last),
        Value::Array(a) => last
            .parse::<usize>()
            .ok()
            .filter(|i| *i < a.len())
            .map(|i| a.remove(i)),
        _ => None,
    };
    gone.ok_or_else(|| PatchError(format!("path {pointer:?} does not exist")))
}

/// RFC 6902: `add`, `remove`, `replace`, `move`, `copy`, `test`, in order;
/// all or nothing.
pub fn json_patch(doc: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let Some(ops) = patch.as_array() else {
        return Err(PatchError("a JSON patch is a list of operations".into()));
    };
    if ops.len() > MAX_JSON_PATCH_OPS {
        return Err(PatchError(format!(
            "a JSON patch may hold at most {MAX_JSON_PATCH_OPS} operations, this one has {}",
            ops.len()
        )));
    }
    let mut work = doc.clone();
    for (i, op) in ops.iter().enumerate() {
        let field = |k: &str| {
            op.get(k)
                .and_then(Value::as_str)
                .ok_or_else(|| PatchError(format!("operation {i}: {k:?} is missing")))
        };
        let path = field("path")?;
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| PatchError(format!("operation {i}: \"value\" is missing")))
        };
        match field("op")? {
            "add" => add(&mut work, path, value()?)?,
            "remove" => {
                remove(&mut work, path)?;
            }
            "replace" => {
                remove(&mut work, path)?;
                add(&mut work, path, value()?)?;
            }
            "move" => {
                let from = field("from")?;
                let v = remove(&mut work, from)?;
                add(&mut work, path, v)?;
            }
            "copy" => {
                let v = get(&work, field("from")?)?.clone();
                add(&mut work, path, v)?;
            }
            "test" => {
                if get(&work, path)? != &value()? {
                    return Err(PatchError(format!(
                        "operation {i}: test failed: {path:?} holds another value"
                    )));
                }
            }
            other => {
                return Err(PatchError(format!(
                    "operation {i}: {other:?} is not one of add, remove, replace, move, copy, test"
                )))
            }
        }
    }
    *doc = work;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_as_rfc_7386() {
        let mut t = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        merge_patch(&mut t, &json!({"a": "z", "c": {"f": null}, "l": [3]}));
        assert_eq!(t, json!({"a": "z", "c": {"d": "e"}, "l": [3]}));
        merge_patch(&mut t, &json!({"n": {"x": 1}}));
        assert_eq!(t["n"], json!({"x": 1}));
    }

    #[test]
    fn json_patch_as_rfc_6902() {
        let mut d = json!({"a": {"b": [1, 2]}, "k": "v"});
        json_patch(
            &mut d,
            &json!([
                {"op": "add", "path": "/a/b/1", "value": 9},
                {"op": "add", "path": "/a/b/-", "value": 3},
                {"op": "replace", "path": "/k", "value": "w"},
                {"op": "copy", "from": "/k", "path": "/k2"},
                {"op": "move", "from": "/k2", "path": "/a/m"},
                {"op": "remove", "path": "/a/b/0"},
                {"op": "test", "path": "/k", "value": "w"},
                {"op": "add", "path": "/meta~1x", "value": 1},
            ]),
        )
        .unwrap();
        assert_eq!(
            d,
            json!({"a": {"b": [9, 2, 3], "m": "w"}, "k": "w", "meta/x": 1})
        );
        let before = d.clone();
        let failed = json_patch(
            &mut d,
            &json!([{"op": "remove", "path": "/k"}, {"op": "test", "path": "/k", "value": 1}]),
        );
        assert!(failed.is_err());
        assert_eq!(d, before, "all or nothing");
        assert!(json_patch(&mut d, &json!([{"op": "remove", "path": "/nope"}])).is_err());
        assert!(json_patch(&mut d, &json!([{"op": "jump", "path": "/k"}])).is_err());
        assert!(json_patch(&mut d, &json!({"op": "add"})).is_err());
    }
}
