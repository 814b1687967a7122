//! Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`)
//! as kubectl's typed clients send them (`kubectl create priorityclass`,
//! `create configmap`, `create secret`, `create deployment`), read into
//! JSON for the usual create path. Only the kinds in [`schema_of`] are
//! read, and of each message the fields such a command sets; any other
//! field with a value is refused (415) rather than dropped. Messages nest
//! at most [`MAX_DEPTH`] deep.
//!
//! The envelope: the magic `k8s\0`, then a `runtime.Unknown` message
//! (1: TypeMeta {1: apiVersion, 2: kind}, 2: raw, the object's message).

use super::status::Refusal;
use axum::http::StatusCode;
use base64::Engine;
use serde_json::{json, Map, Value};

const MAGIC: &[u8] = b"k8s\0";

/// The media type of a Kubernetes protobuf body.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// How one field of a message is read.
#[derive(Clone, Copy)]
enum Field {
    /// A string; an empty one is left out (Go writes every plain string).
    Str(&'static str),
    /// An integer (a pointer's, or a required one: 0 is kept).
    Int(&'static str),
    /// A plain integer whose 0 means unset (`minReadySeconds`): left out.
    IntOmitZero(&'static str),
    Bool(&'static str),
    StrList(&'static str),
    StrMap(&'static str),
    /// A map of bytes, written base64 in JSON (a Secret's `data`).
    BytesMap(&'static str),
    Meta,
    /// A nested message.
    Msg(&'static str, Schema),
    /// A repeated nested message.
    MsgList(&'static str, Schema),
    /// A field that carries nothing for a new object (`creationTimestamp`).
    Skip,
}

type Schema = &'static [(u64, Field)];

const OBJECT_META: Schema = &[
    (1, Field::Str("name")),
    (2, Field::Str("generateName")),
    (3, Field::Str("namespace")),
    (8, Field::Skip),
    (11, Field::StrMap("labels")),
    (12, Field::StrMap("annotations")),
    (14, Field::StrList("finalizers")),
];

/// How deep messages may nest (a Deployment's container port is 6 deep).
const MAX_DEPTH: usize = 8;

/// `LabelSelector`: `kubectl create deployment` sets `matchLabels`.
const LABEL_SELECTOR: Schema = &[(1, Field::StrMap("matchLabels"))];

const CONTAINER_PORT: Schema = &[
    (1, Field::Str("name")),
    (2, Field::IntOmitZero("hostPort")),
    (3, Field::Int("containerPort")),
    (4, Field::Str("protocol")),
    (5, Field::Str("hostIP")),
];

/// `Container`: what `kubectl create deployment --image --port -- CMD`
/// sets (`resources` is always sent, empty).
const CONTAINER: Schema = &[
    (1, Field::Str("name")),
    (2, Field::Str("image")),
    (3, Field::StrList("command")),
    (4, Field::StrList("args")),
    (5, Field::Str("workingDir")),
    (6, Field::MsgList("ports", CONTAINER_PORT)),
    (13, Field::Str("terminationMessagePath")),
    (14, Field::Str("imagePullPolicy")),
];

const POD_SPEC: Schema = &[
    (2, Field::MsgList("containers", CONTAINER)),
    (3, Field::Str("restartPolicy")),
    (7, Field::StrMap("nodeSelector")),
];

const POD_TEMPLATE_SPEC: Schema = &[
    (1, Field::Msg("metadata", OBJECT_META)),
    (2, Field::Msg("spec", POD_SPEC)),
];

const DEPLOYMENT_STRATEGY: Schema = &[(1, Field::Str("type"))];

const DEPLOYMENT_SPEC: Schema = &[
    (1, Field::Int("replicas")),
    (2, Field::Msg("selector", LABEL_SELECTOR)),
    (3, Field::Msg("template", POD_TEMPLATE_SPEC)),
    (4, Field::Msg("strategy", DEPLOYMENT_STRATEGY)),
    (5, Field::IntOmitZero("minReadySeconds")),
];

/// `Deployment`: its status (3) is the server's, read as nothing.
const DEPLOYMENT: Schema = &[
    (1, Field::Meta),
    (2, Field::Msg("spec", DEPLOYMENT_SPEC)),
    (3, Field::Skip),
];

const PRIORITY_CLASS: Schema = &[
    (1, Field::Meta),
    (2, Field::Int("value")),
    (3, Field::Bool("globalDefault")),
    (4, Field::Str("description")),
    (5, Field::Str("preemptionPolicy")),
];

const CONFIG_MAP: Schema = &[
    (1, Field::Meta),
    (2, Field::StrMap("data")),
    (3, Field::BytesMap("binaryData")),
    (4, Field::Bool("immutable")),
];

const SECRET: Schema = &[
    (1, Field::Meta),
    (2, Field::BytesMap("data")),
    (3, Field::Str("type")),
    (4, Field::StrMap("stringData")),
    (5, Field::Bool("immutable")),
];

/// The schema of a kind drover reads from protobuf.
fn schema_of(api_version: &str, kind: &str) -> Option<Schema> {
    match (api_version, kind) {
        ("scheduling.k8s.io/v1", "PriorityClass") => Some(PRIORITY_CLASS),
        ("v1", "ConfigMap") => Some(CONFIG_MAP),
        ("v1", "Secret") => Some(SECRET),
        ("apps/v1", "Deployment") => Some(DEPLOYMENT),
        _ => None,
    }
}

fn unsupported(message: impl Into<String>) -> Refusal {
    Refusal::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "UnsupportedMediaType",
        message,
    )
}

/// One field of the wire: its number and its value (a varint or bytes).
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, Refusal> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let (&b, rest) = self
                .0
                .split_first()
                .ok_or_else(|| unsupported("a protobuf body ends inside a number"))?;
            self.0 = rest;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(unsupported("a protobuf number is longer than 10 bytes"))
    }

    fn next(&mut self) -> Result<Option<(u64, Wire<'a>)>, Refusal> {
        if self.0.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let value = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            2 => {
                let len = usize::try_from(self.varint()?).unwrap_or(usize::MAX);
                if len > self.0.len() {
                    return Err(unsupported("a protobuf field is longer than the body"));
                }
                let (b, rest) = self.0.split_at(len);
                self.0 = rest;
                Wire::Bytes(b)
            }
            t => {
                return Err(unsupported(format!(
                    "protobuf wire type {t} is not one drover reads"
                )))
            }
        };
        Ok(Some((key >> 3, value)))
    }
}

fn text(b: &[u8]) -> Result<String, Refusal> {
    String::from_utf8(b.to_vec()).map_err(|_| unsupported("a protobuf string is not UTF-8"))
}

/// A map entry: (1: key, 2: value).
fn entry(b: &[u8]) -> Result<(String, Vec<u8>), Refusal> {
    let mut r = Reader(b);
    let (mut k, mut v) = (String::new(), Vec::new());
    while let Some((n, w)) = r.next()? {
        match (n, w) {
            (1, Wire::Bytes(b)) => k = text(b)?,
            (2, Wire::Bytes(b)) => v = b.to_vec(),
            _ => return Err(unsupported("a protobuf map entry is malformed")),
        }
    }
    Ok((k, v))
}

fn message(b: &[u8], schema: Schema, depth: usize) -> Result<Map<String, Value>, Refusal> {
    if depth > MAX_DEPTH {
        return Err(unsupported(format!(
            "a protobuf body nests messages more than {MAX_DEPTH} deep"
        )));
    }
    let mut out = Map::new();
    let mut r = Reader(b);
    while let Some((n, w)) = r.next()? {
        let Some((_, field)) = schema.iter().find(|(num, _)| *num == n) else {
            // Go's generated code writes every plain field, empty or not
            // (`selfLink: ""`, `generation: 0`): those carry nothing.
            if matches!(w, Wire::Varint(0)) || matches!(w, Wire::Bytes(b) if b.is_empty()) {
                continue;
            }
            return Err(unsupported(format!(
                "field {n} of this protobuf body is not one drover reads; send JSON (kubectl create -f, apply)"
            )));
        };
        match (*field, w) {
            (Field::Str(name), Wire::Bytes(b)) => {
                if !b.is_empty() {
                    out.insert(name.into(), json!(text(b)?));
                }
            }
            (Field::IntOmitZero(name), Wire::Varint(v)) => {
                if v != 0 {
                    out.insert(name.into(), json!(v as i64));
                }
            }
            (Field::Int(name), Wire::Varint(v)) => {
                // int32 and int64 are two's complement in 64 bits.
                out.insert(name.into(), json!(v as i64));
            }
            (Field::Bool(name), Wire::Varint(v)) => {
                out.insert(name.into(), json!(v != 0));
            }
            (Field::StrList(name), Wire::Bytes(b)) => {
                let list = out.entry(name).or_insert_with(|| json!([]));
                if let Some(a) = list.as_array_mut() {
                    a.push(json!(text(b)?));
                }
            }
            (Field::StrMap(name), Wire::Bytes(b)) => {
                let (k, v) = entry(b)?;
                let map = out.entry(name).or_insert_with(|| json!({}));
                map[k] = json!(text(&v)?);
            }
            (Field::BytesMap(name), Wire::Bytes(b)) => {
                let (k, v) = entry(b)?;
                let map = out.entry(name).or_insert_with(|| json!({}));
                map[k] = json!(base64::engine::general_purpose::STANDARD.encode(v));
            }
            (Field::Meta, Wire::Bytes(b)) if depth == 0 => {
                out.insert(
                    "metadata".into(),
                    Value::Object(message(b, OBJECT_META, 1)?),
                );
            }
            (Field::Msg(name, inner), Wire::Bytes(b)) => {
                out.insert(name.into(), Value::Object(message(b, inner, depth + 1)?));
            }
            (Field::MsgList(name, inner), Wire::Bytes(b)) => {
                let item = Value::Object(message(b, inner, depth + 1)?);
                let list = out.entry(name).or_insert_with(|| json!([]));
                if let Some(a) = list.as_array_mut() {
                    a.push(item);
                }
            }
            (Field::Skip, _) => {}
            _ => {
                return Err(unsupported(format!(
                    "field {n} of this protobuf body has an unexpected wire type"
                )))
            }
        }
    }
    Ok(out)
}

/// The object a protobuf body holds, as JSON.
pub fn decode(body: &[u8]) -> Result<Value, Refusal> {
    let Some(envelope) = body.strip_prefix(MAGIC) else {
        return Err(unsupported(
            "a Kubernetes protobuf body starts with k8s\\0; this one does not",
        ));
    };
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), None);
    let mut r = Reader(envelope);
    while let Some((n, w)) = r.next()? {
        match (n, w) {
            (1, Wire::Bytes(b)) => {
                let mut t = Reader(b);
                while let Some((n, w)) = t.next()? {
                    match (n, w) {
                        (1, Wire::Bytes(b)) => api_version = text(b)?,
                        (2, Wire::Bytes(b)) => kind = text(b)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = Some(b),
            _ => {}
        }
    }
    let Some(schema) = schema_of(&api_version, &kind) else {
        return Err(unsupported(format!(
            "drover reads protobuf bodies of PriorityClass, ConfigMap, Secret and Deployment only, not {api_version} {kind}; send JSON (kubectl create -f, apply)"
        )));
    };
    let mut obj = message(raw.unwrap_or_default(), schema, 0)?;
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn bytes(n: u64, b: &[u8], out: &mut Vec<u8>) {
        varint(n << 3 | 2, out);
        varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }

    fn entry_of(k: &str, v: &str) -> Vec<u8> {
        let mut e = Vec::new();
        bytes(1, k.as_bytes(), &mut e);
        bytes(2, v.as_bytes(), &mut e);
        e
    }

    #[test]
    fn a_priority_class_as_kubectl_create_sends_it() {
        let mut meta = Vec::new();
        bytes(1, b"high", &mut meta);
        bytes(8, b"", &mut meta);
        bytes(4, b"", &mut meta);
        varint(7 << 3, &mut meta);
        varint(0, &mut meta);
        bytes(11, &entry_of("a", "b"), &mut meta);
        let mut pc = Vec::new();
        bytes(1, &meta, &mut pc);
        varint(2 << 3, &mut pc);
        varint(1000, &mut pc);
        varint(3 << 3, &mut pc);
        varint(1, &mut pc);
        bytes(4, b"important", &mut pc);
        let mut tm = Vec::new();
        bytes(1, b"scheduling.k8s.io/v1", &mut tm);
        bytes(2, b"PriorityClass", &mut tm);
        let mut body = MAGIC.to_vec();
        bytes(1, &tm, &mut body);
        bytes(2, &pc, &mut body);
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": "high", "labels": {"a": "b"}},
                "value": 1000, "globalDefault": true, "description": "important"})
        );
        // A negative int32 is ten bytes of two's complement.
        let mut neg = MAGIC.to_vec();
        let mut pc = Vec::new();
        varint(2 << 3, &mut pc);
        varint(-5i64 as u64, &mut pc);
        bytes(1, &tm, &mut neg);
        bytes(2, &pc, &mut neg);
        assert_eq!(decode(&neg).unwrap()["value"], -5);
    }

    fn varint_field(n: u64, v: u64, out: &mut Vec<u8>) {
        varint(n << 3, out);
        varint(v, out);
    }

    /// The body of `kubectl create deployment web --image=local/busybox:1
    /// --port=80 --replicas=2`, as Go's generated code writes it: every
    /// plain field, empty or not, and the empty messages.
    #[test]
    fn a_deployment_as_kubectl_create_sends_it() {
        let labels = entry_of("app", "web");
        let mut meta = Vec::new();
        bytes(1, b"web", &mut meta);
        bytes(2, b"", &mut meta);
        bytes(3, b"default", &mut meta);
        bytes(8, b"", &mut meta);
        bytes(11, &labels, &mut meta);
        let mut tmeta = Vec::new();
        bytes(8, b"", &mut tmeta);
        bytes(11, &labels, &mut tmeta);
        let mut port = Vec::new();
        bytes(1, b"", &mut port);
        varint_field(2, 0, &mut port);
        varint_field(3, 80, &mut port);
        bytes(4, b"", &mut port);
        let mut container = Vec::new();
        bytes(1, b"busybox", &mut container);
        bytes(2, b"local/busybox:1", &mut container);
        bytes(5, b"", &mut container);
        bytes(6, &port, &mut container);
        bytes(8, b"", &mut container);
        bytes(13, b"", &mut container);
        varint_field(16, 0, &mut container);
        let mut pod = Vec::new();
        bytes(2, &container, &mut pod);
        bytes(3, b"", &mut pod);
        bytes(6, b"", &mut pod);
        varint_field(11, 0, &mut pod);
        let mut template = Vec::new();
        bytes(1, &tmeta, &mut template);
        bytes(2, &pod, &mut template);
        let mut selector = Vec::new();
        bytes(1, &labels, &mut selector);
        let mut strategy = Vec::new();
        bytes(1, b"", &mut strategy);
        let mut spec = Vec::new();
        varint_field(1, 2, &mut spec);
        bytes(2, &selector, &mut spec);
        bytes(3, &template, &mut spec);
        bytes(4, &strategy, &mut spec);
        varint_field(5, 0, &mut spec);
        varint_field(7, 0, &mut spec);
        let mut status = Vec::new();
        varint_field(1, 0, &mut status);
        varint_field(2, 0, &mut status);
        let mut d = Vec::new();
        bytes(1, &meta, &mut d);
        bytes(2, &spec, &mut d);
        bytes(3, &status, &mut d);
        let mut tm = Vec::new();
        bytes(1, b"apps/v1", &mut tm);
        bytes(2, b"Deployment", &mut tm);
        let mut body = MAGIC.to_vec();
        bytes(1, &tm, &mut body);
        bytes(2, &d, &mut body);
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "default",
                    "labels": {"app": "web"}},
                "spec": {"replicas": 2,
                    "selector": {"matchLabels": {"app": "web"}},
                    "strategy": {},
                    "template": {"metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "busybox", "image": "local/busybox:1",
                                "ports": [{"containerPort": 80}]}]}}}})
        );
        // A field of a nested message that drover does not read is refused.
        let mut odd = Vec::new();
        bytes(2, b"x", &mut odd);
        let mut pod2 = Vec::new();
        bytes(20, &odd, &mut pod2);
        let mut t2 = Vec::new();
        bytes(2, &pod2, &mut t2);
        let mut spec2 = Vec::new();
        bytes(3, &t2, &mut spec2);
        let mut d2 = Vec::new();
        bytes(2, &spec2, &mut d2);
        let mut body2 = MAGIC.to_vec();
        bytes(1, &tm, &mut body2);
        bytes(2, &d2, &mut body2);
        assert_eq!(
            decode(&body2).unwrap_err().code,
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
    }

    #[test]
    fn unknown_fields_kinds_and_garbage_are_refused() {
        let mut tm = Vec::new();
        bytes(1, b"v1", &mut tm);
        bytes(2, b"Pod", &mut tm);
        let mut body = MAGIC.to_vec();
        bytes(1, &tm, &mut body);
        assert_eq!(
            decode(&body).unwrap_err().code,
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
        let mut tm = Vec::new();
        bytes(1, b"v1", &mut tm);
        bytes(2, b"ConfigMap", &mut tm);
        let mut cm = Vec::new();
        bytes(9, b"x", &mut cm);
        let mut body = MAGIC.to_vec();
        bytes(1, &tm, &mut body);
        bytes(2, &cm, &mut body);
        assert!(decode(&body).is_err());
        assert!(decode(b"{}").is_err());
        assert!(decode(b"k8s\0\x0a\xff").is_err());
        assert!(decode(b"k8s\0\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff").is_err());
    }
}
