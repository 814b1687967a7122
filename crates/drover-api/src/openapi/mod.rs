//! The OpenAPI v3 schemas of drover's kinds, as the Kubernetes API server
//! publishes them under `components.schemas` (what `kubectl explain`
//! reads).
//!
//! They are built from drover's own types: [`api_struct!`] gives every
//! type its doc comment and, per field, the field's doc comment and JSON
//! shape ([`OpenApiType`]); the string enumerations give their values. The
//! fields of Kubernetes that drover's types do not have come from a table
//! ([`extra`]) and say that drover keeps them but does not act on them. A
//! test checks that every type's properties are exactly the fields
//! [`crate::kubernetes_fields`] lists for it.
//!
//! Names, references and extensions follow Kubernetes: a schema is named
//! `io.k8s.api.<group>.v1.<Type>`, a property of a named type is an
//! `allOf` of one `$ref`, a kind carries `x-kubernetes-group-version-kind`,
//! and lists carry `x-kubernetes-patch-merge-key` /
//! `x-kubernetes-patch-strategy` as drover's strategic merge patch merges
//! them ([`list_strategy`]).

mod extra;

use crate::kind::Kind;
use crate::{
    ConfigMap, ControllerRevision, DaemonSet, Deployment, Event, IntOrString, Namespace, Node, Pod,
    PriorityClass, Quantity, ReplicaSet, Secret, ServiceAccount,
};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// The JSON shape of a field.
#[derive(Debug, Clone)]
pub enum TypeRef {
    /// A string.
    String,
    /// A 32-bit integer.
    Int32,
    /// A 64-bit integer.
    Int64,
    /// `true` or `false`.
    Bool,
    /// A string with these known values.
    Enum(&'static [&'static str]),
    /// A resource quantity (`500Mi`, `100m`, `2`).
    Quantity,
    /// An integer or a string (`1`, `"10%"`, a port name).
    IntOrString,
    /// An object whose fields this schema does not describe.
    Object,
    /// A list.
    Array(Box<TypeRef>),
    /// A map from strings.
    Map(Box<TypeRef>),
    /// One of drover's API types.
    Struct(StructInfo),
}

/// One of drover's API types, as [`api_struct!`] describes it.
#[derive(Debug, Clone, Copy)]
pub struct StructInfo {
    /// drover's (Rust) name, e.g. `DaemonSetSpec`.
    pub name: &'static str,
    /// The Rust module it is declared in (tells its API group).
    pub module: &'static str,
    /// Its doc comment.
    pub doc: &'static str,
    /// Its fields.
    pub fields: fn() -> Vec<FieldInfo>,
}

/// A field: its JSON name, doc comment and shape.
#[derive(Debug, Clone)]
pub struct FieldInfo {
    /// The JSON (Kubernetes) name.
    pub json: &'static str,
    /// The doc comment (one line per doc line).
    pub doc: &'static str,
    /// The JSON shape.
    pub ty: TypeRef,
}

/// A type with a JSON shape in the schemas.
pub trait OpenApiType {
    /// The shape.
    fn type_ref() -> TypeRef;
}

macro_rules! openapi_scalar {
    ($($ty:ty => $variant:ident),* $(,)?) => {
        $(impl OpenApiType for $ty {
            fn type_ref() -> TypeRef {
                TypeRef::$variant
            }
        })*
    };
}

openapi_scalar! {
    String => String,
    i32 => Int32,
    i64 => Int64,
    bool => Bool,
    Quantity => Quantity,
    IntOrString => IntOrString,
    Value => Object,
}

impl<T: OpenApiType> OpenApiType for Option<T> {
    fn type_ref() -> TypeRef {
        T::type_ref()
    }
}

impl<T: OpenApiType> OpenApiType for Vec<T> {
    fn type_ref() -> TypeRef {
        TypeRef::Array(Box::new(T::type_ref()))
    }
}

impl<T: OpenApiType> OpenApiType for BTreeMap<String, T> {
    fn type_ref() -> TypeRef {
        TypeRef::Map(Box::new(T::type_ref()))
    }
}

/// How a strategic merge patch merges a list field, by the field's name
/// (unambiguous among drover's kinds): Kubernetes' `patchMergeKey` and
/// `patchStrategy` of the fields drover's kinds have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListStrategy {
    /// Elements are objects merged on this key.
    MergeOn(&'static str),
    /// Elements are scalars kept as a set (union).
    Set,
    /// The patch's list replaces the list.
    Replace,
}

/// The [`ListStrategy`] of a list field named `field`.
pub fn list_strategy(field: &str) -> ListStrategy {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims" => ListStrategy::MergeOn("name"),
        "ports" => ListStrategy::MergeOn("containerPort"),
        "volumeMounts" => ListStrategy::MergeOn("mountPath"),
        "volumeDevices" => ListStrategy::MergeOn("devicePath"),
        "hostAliases" => ListStrategy::MergeOn("ip"),
        "conditions" | "addresses" => ListStrategy::MergeOn("type"),
        "ownerReferences" => ListStrategy::MergeOn("uid"),
        "topologySpreadConstraints" => ListStrategy::MergeOn("topologyKey"),
        "finalizers" => ListStrategy::Set,
        _ => ListStrategy::Replace,
    }
}

/// The fields Kubernetes requires in a type (by drover's name), as the
/// schemas mark them.
fn required(type_name: &str) -> &'static [&'static str] {
    match type_name {
        "PodSpec" => &["containers"],
        "Container" | "EnvVar" | "Volume" => &["name"],
        "HttpHeader" => &["name", "value"],
        "ContainerPort" => &["containerPort"],
        "VolumeMount" => &["name", "mountPath"],
        "DaemonSetSpec" => &["selector", "template"],
        "LabelSelectorRequirement" | "NodeSelectorRequirement" => &["key", "operator"],
        "NodeSelector" => &["nodeSelectorTerms"],
        "PreferredSchedulingTerm" => &["weight", "preference"],
        "PodAffinityTerm" => &["topologyKey"],
        "WeightedPodAffinityTerm" => &["weight", "podAffinityTerm"],
        "TopologySpreadConstraint" => &["maxSkew", "topologyKey", "whenUnsatisfiable"],
        "Taint" => &["key", "effect"],
        "OwnerReference" => &["apiVersion", "kind", "name", "uid"],
        "PodCondition" | "NodeCondition" | "DaemonSetCondition" => &["type", "status"],
        "NodeAddress" => &["type", "address"],
        "ContainerStatus" => &["name", "ready", "restartCount", "image", "imageID"],
        "DaemonSetStatus" => &[
            "currentNumberScheduled",
            "numberMisscheduled",
            "desiredNumberScheduled",
            "numberReady",
        ],
        "ControllerRevision" => &["revision"],
        "PriorityClass" => &["value"],
        "Event" => &["metadata", "involvedObject"],
        "HttpGetAction" | "TcpSocketAction" => &["port"],
        "HostPathVolumeSource" => &["path"],
        "KeyToPath" => &["key", "path"],
        "DownwardApiVolumeFile" => &["path"],
        "ConfigMapKeySelector" | "SecretKeySelector" => &["key"],
        "ObjectFieldSelector" => &["fieldPath"],
        "ResourceFieldSelector" => &["resource"],
        "ContainerStateTerminated" => &["exitCode"],
        "SleepAction" => &["seconds"],
        _ => &[],
    }
}

/// drover's root type of a kind.
fn root(kind: Kind) -> StructInfo {
    let t = match kind {
        Kind::Pod => Pod::type_ref(),
        Kind::Node => Node::type_ref(),
        Kind::DaemonSet => DaemonSet::type_ref(),
        Kind::Deployment => Deployment::type_ref(),
        Kind::ReplicaSet => ReplicaSet::type_ref(),
        Kind::ControllerRevision => ControllerRevision::type_ref(),
        Kind::Event => Event::type_ref(),
        Kind::PriorityClass => PriorityClass::type_ref(),
        Kind::ConfigMap => ConfigMap::type_ref(),
        Kind::Secret => Secret::type_ref(),
        Kind::Namespace => Namespace::type_ref(),
        Kind::ServiceAccount => ServiceAccount::type_ref(),
    };
    match t {
        TypeRef::Struct(s) => s,
        other => unreachable!("{kind:?} is an api_struct, not {other:?}"),
    }
}

const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";

/// The schema name Kubernetes gives a type, e.g.
/// `io.k8s.api.apps.v1.DaemonSetSpec`.
pub fn schema_name(s: &StructInfo) -> String {
    let package = match s.module.rsplit("::").next() {
        Some("apps_v1") => "io.k8s.api.apps.v1",
        Some("meta") => "io.k8s.apimachinery.pkg.apis.meta.v1",
        Some("scheduling_v1") => "io.k8s.api.scheduling.v1",
        _ => "io.k8s.api.core.v1",
    };
    // drover spells acronyms as Rust words; Kubernetes does not.
    let name = match s.name {
        "HttpGetAction" => "HTTPGetAction",
        "HttpHeader" => "HTTPHeader",
        "TcpSocketAction" => "TCPSocketAction",
        "DownwardApiProjection" => "DownwardAPIProjection",
        "DownwardApiVolumeFile" => "DownwardAPIVolumeFile",
        other => other,
    };
    format!("{package}.{name}")
}

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// A doc comment as a description: lines joined into paragraphs, Rust
/// link brackets dropped.
fn describe(doc: &str) -> String {
    let mut paragraphs: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in doc.lines().map(str::trim) {
        if line.is_empty() {
            if !current.is_empty() {
                paragraphs.push(std::mem::take(&mut current));
            }
            continue;
        }
        if !current.is_empty() {
            current.push(' ');
        }
        current.push_str(line);
    }
    if !current.is_empty() {
        paragraphs.push(current);
    }
    paragraphs
        .join("\n\n")
        .replace("[`", "`")
        .replace("`]", "`")
}

/// A string field that holds an RFC 3339 time.
fn is_time(field: &str) -> bool {
    field.ends_with("Time")
        || field.ends_with("Timestamp")
        || matches!(field, "startedAt" | "finishedAt" | "timeAdded")
}

/// Builds `components.schemas`.
struct Builder {
    out: Map<String, Value>,
    /// drover's name of each named schema.
    names: BTreeMap<String, &'static str>,
}

impl Builder {
    /// The schema of a value of type `t` (a field's, a list's items, a
    /// map's values), registering the named schemas it refers to.
    fn shape(&mut self, t: &TypeRef, field: &str) -> Value {
        match t {
            TypeRef::String if is_time(field) => json!({"type": "string", "format": "date-time"}),
            TypeRef::String => json!({"type": "string"}),
            TypeRef::Int32 => json!({"type": "integer", "format": "int32"}),
            TypeRef::Int64 => json!({"type": "integer", "format": "int64"}),
            TypeRef::Bool => json!({"type": "boolean"}),
            TypeRef::Enum(values) => json!({"type": "string", "enum": values}),
            TypeRef::Object => json!({"type": "object"}),
            TypeRef::Quantity => {
                self.quantity();
                reference(QUANTITY)
            }
            TypeRef::IntOrString => {
                self.int_or_string();
                reference(INT_OR_STRING)
            }
            TypeRef::Array(of) => {
                let items = self.shape(of, field);
                let mut v = json!({"type": "array", "items": items});
                match list_strategy(field) {
                    ListStrategy::MergeOn(key) => {
                        v["x-kubernetes-patch-merge-key"] = json!(key);
                        v["x-kubernetes-patch-strategy"] = json!("merge");
                    }
                    ListStrategy::Set => v["x-kubernetes-patch-strategy"] = json!("merge"),
                    ListStrategy::Replace => {}
                }
                v
            }
            TypeRef::Map(of) => {
                let values = self.shape(of, field);
                json!({"type": "object", "additionalProperties": values})
            }
            TypeRef::Struct(s) => reference(&self.object(s, None)),
        }
    }

    /// A property: its shape and description (a named schema as an `allOf`
    /// of its reference, as Kubernetes writes it, so that the description
    /// can stand beside it).
    fn property(&mut self, f: &FieldInfo, note: &str) -> Value {
        let shape = self.shape(&f.ty, f.json);
        let mut v = if shape.get("$ref").is_some() {
            json!({ "allOf": [shape] })
        } else {
            shape
        };
        let mut text = describe(f.doc);
        if !note.is_empty() {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(note);
        }
        v["description"] = json!(text);
        v
    }

    /// Registers the schema of a drover type (and of what it refers to);
    /// returns its name.
    fn object(&mut self, s: &StructInfo, kind: Option<Kind>) -> String {
        let name = schema_name(s);
        if self.out.contains_key(&name) {
            return name;
        }
        // A placeholder first: a type that (indirectly) refers to itself
        // stops here.
        self.out.insert(name.clone(), json!({}));
        self.names.insert(name.clone(), s.name);
        let mut properties = Map::new();
        if let Some(k) = kind {
            let api_version = if k.group().is_empty() {
                "v1".to_string()
            } else {
                format!("{}/v1", k.group())
            };
            properties.insert(
                "apiVersion".into(),
                json!({"type": "string", "description": format!("The schema version of the object: {api_version}.")}),
            );
            properties.insert(
                "kind".into(),
                json!({"type": "string", "description": format!("The kind of the object: {}.", k.name())}),
            );
        }
        for f in (s.fields)() {
            let p = self.property(&f, "");
            properties.insert(f.json.into(), p);
        }
        for f in extra::fields(s.name) {
            let p = self.property(&f, "drover keeps this field but does not act on it.");
            properties.insert(f.json.into(), p);
        }
        let mut schema = json!({
            "description": describe(s.doc),
            "type": "object",
            "properties": properties,
        });
        let required: Vec<&str> = required(s.name)
            .iter()
            .copied()
            .filter(|r| schema["properties"].get(*r).is_some())
            .collect();
        if !required.is_empty() {
            schema["required"] = json!(required);
        }
        if let Some(k) = kind {
            schema["x-kubernetes-group-version-kind"] =
                json!([{ "group": k.group(), "version": "v1", "kind": k.name() }]);
        }
        self.out.insert(name.clone(), schema);
        name
    }

    fn quantity(&mut self) {
        self.out.entry(QUANTITY).or_insert_with(|| {
            json!({
                "description": "A quantity of a resource: a number with an optional suffix, binary (Ki, Mi, Gi, Ti, Pi, Ei: powers of 1024) or decimal (m for thousandths, k, M, G, T, P, E: powers of 1000), e.g. 100m (a tenth of a CPU), 500Mi, 2.",
                "oneOf": [{"type": "string"}, {"type": "number"}],
            })
        });
    }

    fn int_or_string(&mut self) {
        self.out.entry(INT_OR_STRING).or_insert_with(|| {
            json!({
                "description": "An integer or a string: a count or a percentage such as \"10%\", or a port by number or by name.",
                "format": "int-or-string",
                "oneOf": [{"type": "integer"}, {"type": "string"}],
            })
        });
    }
}

/// The `components.schemas` of a document serving `kinds`: each kind's
/// schema (with its `x-kubernetes-group-version-kind`) and every schema
/// they refer to.
pub fn schemas(kinds: &[Kind]) -> Map<String, Value> {
    build(kinds).out
}

fn build(kinds: &[Kind]) -> Builder {
    let mut b = Builder {
        out: Map::new(),
        names: BTreeMap::new(),
    };
    for k in kinds {
        b.object(&root(*k), Some(*k));
    }
    b
}

/// The schema name of a kind's root type.
pub fn kind_schema_name(kind: Kind) -> String {
    schema_name(&root(kind))
}

#[cfg(test)]
mod tests;
