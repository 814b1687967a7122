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

/// Why a JSON patch was not applied: a bad patch, or a document that its
/// operations would make larger than the limit (checked after each one,
/// so that `copy` cannot double a document until memory runs out).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonPatchError {
    /// The patch is malformed, or an operation cannot apply.
    #[error("{0}")]
    Invalid(#[from] PatchError),
    /// The document would outgrow the limit.
    #[error("{0}")]
    TooLarge(String),
}

/// The length of `v` encoded as JSON, counted without building the text.
fn encoded_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing a Value into a counter cannot fail.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// What a value at `last` (a key or an index) adds to its parent's
/// encoding, at most: the key, its quotes, the colon and a comma.
fn entry_len(last: &str, v: &Value) -> usize {
    last.len() + 4 + encoded_len(v)
}

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

/// Adds `value` at `pointer`; answers the value it replaced (an object's
/// key that was there) and the pointer's last token.
fn add(
    doc: &mut Value,
    pointer: &str,
    value: Value,
) -> Result<(Option<Value>, String), PatchError> {
    if pointer.is_empty() {
        let old = std::mem::replace(doc, value);
        return Ok((Some(old), String::new()));
    }
    let (p, last) = parent(doc, pointer)?;
    match p {
        Value::Object(m) => {
            let old = m.insert(last.clone(), value);
            Ok((old, last))
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
            Ok((None, last))
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
/// all or nothing. The document may not grow past `max_bytes` encoded
/// (the server passes its object size limit, `MAX_OBJECT_BYTES`): its size
/// is followed op by op, and the op that would cross it is refused before
/// the next one runs.
pub fn json_patch(doc: &mut Value, patch: &Value, max_bytes: usize) -> Result<(), JsonPatchError> {
    let Some(ops) = patch.as_array() else {
        return Err(PatchError("a JSON patch is a list of operations".into()).into());
    };
    if ops.len() > MAX_JSON_PATCH_OPS {
        return Err(PatchError(format!(
            "a JSON patch may hold at most {MAX_JSON_PATCH_OPS} operations, this one has {}",
            ops.len()
        ))
        .into());
    }
    let mut work = doc.clone();
    // An upper bound of the encoded size of `work`.
    let mut size = encoded_len(&work);
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
        // Adds `v` at `path`, following the size.
        let put = |work: &mut Value, size: &mut usize, v: Value| -> Result<(), PatchError> {
            let grows = encoded_len(&v);
            let (old, last) = add(work, path, v)?;
            if path.is_empty() {
                *size = grows;
            } else {
                *size += last.len() + 4 + grows;
                if let Some(old) = old {
                    *size = size.saturating_sub(entry_len(&last, &old));
                }
            }
            Ok(())
        };
        let take = |work: &mut Value, size: &mut usize, from: &str| -> Result<Value, PatchError> {
            let v = remove(work, from)?;
            let last = tokens(from)?.pop().unwrap_or_default();
            *size = size.saturating_sub(entry_len(&last, &v));
            Ok(v)
        };
        match field("op")? {
            "add" => put(&mut work, &mut size, value()?)?,
            "remove" => {
                take(&mut work, &mut size, path)?;
            }
            "replace" => {
                take(&mut work, &mut size, path)?;
                put(&mut work, &mut size, value()?)?;
            }
            "move" => {
                let from = field("from")?;
                let v = take(&mut work, &mut size, from)?;
                put(&mut work, &mut size, v)?;
            }
            "copy" => {
                let from = get(&work, field("from")?)?;
                // Refused before the copy is made.
                if size + path.len() + 4 + encoded_len(from) > max_bytes {
                    return Err(too_large(i, max_bytes));
                }
                let v = from.clone();
                put(&mut work, &mut size, v)?;
            }
            "test" => {
                if get(&work, path)? != &value()? {
                    return Err(PatchError(format!(
                        "operation {i}: test failed: {path:?} holds another value"
                    ))
                    .into());
                }
            }
            other => {
                return Err(PatchError(format!(
                    "operation {i}: {other:?} is not one of add, remove, replace, move, copy, test"
                ))
                .into())
            }
        }
        if size > max_bytes {
            return Err(too_large(i, max_bytes));
        }
    }
    *doc = work;
    Ok(())
}

fn too_large(op: usize, max_bytes: usize) -> JsonPatchError {
    JsonPatchError::TooLarge(format!(
        "operation {op} of the JSON patch makes the object larger than the limit of {max_bytes} bytes (the object size limit); nothing was patched"
    ))
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
            1 << 20,
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
            1 << 20,
        );
        assert!(failed.is_err());
        assert_eq!(d, before, "all or nothing");
        let big = 1 << 20;
        assert!(json_patch(&mut d, &json!([{"op": "remove", "path": "/nope"}]), big).is_err());
        assert!(json_patch(&mut d, &json!([{"op": "jump", "path": "/k"}]), big).is_err());
        assert!(json_patch(&mut d, &json!({"op": "add"}), big).is_err());
    }

    #[test]
    fn a_json_patch_may_not_grow_the_document_past_the_limit() {
        // `copy` doubles the document each time: refused at the op that
        // crosses the limit, the document untouched.
        let mut d = json!({"a": "x".repeat(1000)});
        let before = d.clone();
        let ops: Vec<Value> = (0..30)
            .map(|i| json!({"op": "copy", "from": "", "path": format!("/c{i}")}))
            .collect();
        let e = json_patch(&mut d, &Value::Array(ops), 64 << 10).unwrap_err();
        assert!(
            matches!(&e, JsonPatchError::TooLarge(m) if m.contains("65536")),
            "{e}"
        );
        assert_eq!(d, before);
        // Replacing one key over and over does not add up.
        let ops: Vec<Value> = (0..500)
            .map(|_| json!({"op": "add", "path": "/b", "value": "y".repeat(500)}))
            .collect();
        json_patch(&mut d, &Value::Array(ops), 4 << 10).unwrap();
        // Nor does moving a value back and forth.
        let ops: Vec<Value> = (0..500)
            .flat_map(|_| {
                [
                    json!({"op": "move", "from": "/b", "path": "/c"}),
                    json!({"op": "move", "from": "/c", "path": "/b"}),
                ]
            })
            .collect();
        json_patch(&mut d, &Value::Array(ops), 4 << 10).unwrap();
    }
}
