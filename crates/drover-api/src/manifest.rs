//! Manifests: the objects of a YAML or JSON file, as `apply` reads them.
//!
//! [`parse_manifests`] reads
//! - a YAML stream of one or more documents separated by `---` (empty
//!   documents are skipped),
//! - JSON: one object, or several one after the other,
//!
//! where any object may be a `List` (`kind: List`, or `DaemonSetList`, …)
//! whose `items` are read in its place. Each object is dispatched on its
//! `apiVersion` and `kind` into a [`Manifest`]; a namespaced object without
//! a namespace gets `default`, a node's namespace is dropped (nodes belong
//! to no namespace, as the API server does).
//!
//! Every problem of every document is reported, with the document's
//! position, so that a multi-document apply can be refused whole before
//! anything is written.
//!
//! [`validate_manifest`] validates a manifest by its kind's rules (those of
//! [`crate::validation`], which re-exports it).

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::apps_v1::{ControllerRevision, DaemonSet, Deployment, ReplicaSet};
use crate::config_v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use crate::core_v1::{Event, Node, Pod};
use crate::meta::ObjectMeta;
use crate::scheduling_v1::PriorityClass;
use crate::unknown::{unknown_fields, FieldValidation, UnknownField};
use crate::validation::config;
use crate::validation::daemon_set::{
    daemon_set_warnings, validate_daemon_set, validate_daemon_set_update,
};
use crate::validation::deployment::{
    validate_deployment, validate_deployment_update, validate_replica_set,
    validate_replica_set_update,
};
use crate::validation::errors::Invalid;
use crate::validation::other_kinds::{
    validate_controller_revision, validate_event, validate_node, validate_node_update,
    validate_priority_class, validate_priority_class_update,
};
use crate::validation::pod::{validate_pod, validate_pod_update};
use crate::{Resource, DEFAULT_NAMESPACE};

/// One object of a manifest file.
#[derive(Debug, Clone, PartialEq)]
pub enum Manifest {
    /// An `apps/v1` DaemonSet.
    DaemonSet(Box<DaemonSet>),
    /// An `apps/v1` Deployment.
    Deployment(Box<Deployment>),
    /// An `apps/v1` ReplicaSet.
    ReplicaSet(Box<ReplicaSet>),
    /// A `v1` Pod.
    Pod(Box<Pod>),
    /// A `v1` Node.
    Node(Box<Node>),
    /// An `apps/v1` ControllerRevision.
    ControllerRevision(Box<ControllerRevision>),
    /// A `v1` Event.
    Event(Box<Event>),
    /// A `scheduling.k8s.io/v1` PriorityClass.
    PriorityClass(Box<PriorityClass>),
    /// A `v1` ConfigMap.
    ConfigMap(Box<ConfigMap>),
    /// A `v1` Secret.
    Secret(Box<Secret>),
    /// A `v1` Namespace.
    Namespace(Box<Namespace>),
    /// A `v1` ServiceAccount.
    ServiceAccount(Box<ServiceAccount>),
}

/// Where a document sits in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The document's number in the stream, from 1 (empty YAML documents
    /// are not counted).
    pub document: usize,
    /// The item's index in a `List` document, from 0.
    pub item: Option<usize>,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "document {}", self.document)?;
        if let Some(item) = self.item {
            write!(f, ", items[{item}]")?;
        }
        Ok(())
    }
}

/// A document that can't be read, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{position}{}: {reason}", describe_object(.api_version, .kind, .name))]
pub struct DocumentError {
    /// Where the document is.
    pub position: Position,
    /// Its `apiVersion`, if it has one.
    pub api_version: Option<String>,
    /// Its `kind`, if it has one.
    pub kind: Option<String>,
    /// Its `metadata.name`, if it has one.
    pub name: Option<String>,
    /// What is wrong.
    pub reason: String,
}

fn describe_object(
    api_version: &Option<String>,
    kind: &Option<String>,
    name: &Option<String>,
) -> String {
    let mut out = String::new();
    if let Some(kind) = kind {
        out.push_str(" (");
        if let Some(version) = api_version {
            out.push_str(version);
            out.push(' ');
        }
        out.push_str(kind);
        if let Some(name) = name {
            out.push_str(&format!(" {name:?}"));
        }
        out.push(')');
    }
    out
}

/// Why a manifest file can't be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The text is not YAML.
    #[error("invalid YAML: {0}")]
    Yaml(String),
    /// The text looks like JSON (it starts with `{`) but is not.
    #[error("invalid JSON: {0}")]
    Json(String),
    /// Some documents can't be read (all of them are listed).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Documents(Vec<DocumentError>),
}

/// Kinds that run pods by replicas, which drover refuses with a pointer to
/// what it does instead.
const REPLICA_KINDS: &[&str] = &["StatefulSet", "ReplicationController", "Job", "CronJob"];

/// Reads the objects of a YAML stream or of JSON (see the module
/// documentation). Returns every object, in order, or every problem.
///
/// ```
/// let text = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\n";
/// let err = drover_api::parse_manifests(text).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "document 1 (apps/v1 StatefulSet \"db\"): kind StatefulSet is not supported by drover; \
///      it runs DaemonSets, Deployments, ReplicaSets and Pods (a DaemonSet puts one pod on every \
///      eligible node, which a StatefulSet with pod anti-affinity only approximates)"
/// );
/// ```
pub fn parse_manifests(text: &str) -> Result<Vec<Manifest>, ParseError> {
    parse(text, None)
}

/// [`parse_manifests`] for `apply -n NAMESPACE`: objects that name no
/// namespace go to `namespace`; one that names another is an error (as
/// kubectl refuses it), which fails the whole parse. Nodes have no
/// namespace and are left alone.
pub fn parse_manifests_in(text: &str, namespace: &str) -> Result<Vec<Manifest>, ParseError> {
    parse(text, Some(namespace).filter(|n| !n.is_empty()))
}

fn parse(text: &str, namespace: Option<&str>) -> Result<Vec<Manifest>, ParseError> {
    let documents = read_documents(text)?;
    let mut manifests = Vec::new();
    let mut errors = Vec::new();
    for (index, mut document) in documents.into_iter().enumerate() {
        let position = Position {
            document: index + 1,
            item: None,
        };
        if let Some(ns) = namespace {
            let before = errors.len();
            place_document(&mut document, ns, position, &mut errors);
            if errors.len() > before {
                continue;
            }
        }
        collect(document, position, true, &mut manifests, &mut errors);
    }
    if errors.is_empty() {
        Ok(manifests)
    } else {
        Err(ParseError::Documents(errors))
    }
}

/// Puts a document (or every item of a List) in `namespace`, or records
/// why it can't be.
fn place_document(
    document: &mut Value,
    namespace: &str,
    position: Position,
    errors: &mut Vec<DocumentError>,
) {
    let is_list = document
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"))
        && document.get("items").is_some_and(Value::is_array);
    if !is_list {
        place(document, namespace, position, errors);
        return;
    }
    if let Some(Value::Array(items)) = document.get_mut("items") {
        for (i, item) in items.iter_mut().enumerate() {
            let position = Position {
                document: position.document,
                item: Some(i),
            };
            place(item, namespace, position, errors);
        }
    }
}

fn place(object: &mut Value, namespace: &str, position: Position, errors: &mut Vec<DocumentError>) {
    let Value::Object(o) = object else { return };
    let kind = o.get("kind").and_then(Value::as_str).map(str::to_owned);
    if kind.as_deref() == Some("Node") {
        return;
    }
    let Some(Value::Object(meta)) = o.get_mut("metadata") else {
        return;
    };
    match meta.get("namespace").and_then(Value::as_str) {
        None | Some("") => {
            meta.insert("namespace".into(), Value::String(namespace.to_owned()));
        }
        Some(own) if own == namespace => {}
        Some(own) => {
            let reason = format!(
                "metadata.namespace {own:?} does not match the namespace {namespace:?} given with --namespace; \
                 pass --namespace {own}, or remove metadata.namespace from the manifest"
            );
            let name = meta.get("name").and_then(Value::as_str).map(str::to_owned);
            let api_version = o
                .get("apiVersion")
                .and_then(Value::as_str)
                .map(str::to_owned);
            errors.push(DocumentError {
                position,
                api_version,
                kind,
                name,
                reason,
            });
        }
    }
}

/// The most YAML documents one manifest stream may hold (a stream is also
/// bounded by the request size, 16 MiB).
pub const MAX_DOCUMENTS: usize = 10_000;

fn read_documents(text: &str) -> Result<Vec<Value>, ParseError> {
    if text.trim_start().starts_with('{') {
        serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ParseError::Json(e.to_string()))
    } else {
        // As Kubernetes' YAML 1.1 reader: `defaultMode: 0644` is octal.
        let mut options = serde_saphyr::Options::default();
        options.legacy_octal_numbers = true;
        // The reader's budget bounds the work a stream can cost (nodes,
        // events, aliases); its document count is raised from 1,024 so
        // that a generated file of a few thousand objects applies in one
        // go, as with kubectl.
        let mut budget = serde_saphyr::Budget::default();
        budget.max_documents = MAX_DOCUMENTS;
        options.budget = Some(budget);
        let documents: Vec<Value> = serde_saphyr::from_multiple_with_options(text, options)
            .map_err(|e| match e.without_snippet() {
                serde_saphyr::Error::Budget {
                    breach: serde_saphyr::budget::BudgetBreach::Documents { .. },
                    ..
                } => ParseError::Yaml(format!(
                    "more than {MAX_DOCUMENTS} YAML documents in one stream: split the file and apply the parts one after the other"
                )),
                e => ParseError::Yaml(e.to_string()),
            })?;
        Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
    }
}

fn string_field(object: &serde_json::Map<String, Value>, key: &str) -> Option<String> {
    object.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn collect(
    document: Value,
    position: Position,
    top_level: bool,
    manifests: &mut Vec<Manifest>,
    errors: &mut Vec<DocumentError>,
) {
    let error = |api_version: Option<String>,
                 kind: Option<String>,
                 name: Option<String>,
                 reason: String| {
        DocumentError {
            position,
            api_version,
            kind,
            name,
            reason,
        }
    };
    let Value::Object(object) = document else {
        errors.push(error(
            None,
            None,
            None,
            format!(
                "expected an object with apiVersion and kind, found {}",
                json_type(&document)
            ),
        ));
        return;
    };
    let api_version = string_field(&object, "apiVersion");
    let kind = string_field(&object, "kind");
    let name = object
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let (Some(version), Some(kind_name)) = (api_version.clone(), kind.clone()) else {
        let missing = match (&api_version, &kind) {
            (None, None) => "apiVersion and kind are missing",
            (None, _) => "apiVersion is missing",
            _ => "kind is missing",
        };
        errors.push(error(
            api_version,
            kind,
            name,
            format!("{missing} (every object needs both)"),
        ));
        return;
    };
    if kind_name == "List" || (kind_name.ends_with("List") && object.contains_key("items")) {
        if !top_level {
            errors.push(error(
                api_version,
                kind,
                name,
                "a List inside a List is not supported".into(),
            ));
            return;
        }
        match object.get("items") {
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    let position = Position {
                        document: position.document,
                        item: Some(i),
                    };
                    collect(item.clone(), position, false, manifests, errors);
                }
            }
            None | Some(Value::Null) => {}
            Some(other) => errors.push(error(
                api_version,
                kind,
                name,
                format!("items: expected an array, found {}", json_type(other)),
            )),
        }
        return;
    }
    let value = Value::Object(object);
    let result = match (version.as_str(), kind_name.as_str()) {
        ("apps/v1", "DaemonSet") => typed::<DaemonSet>(&value).map(|o| Manifest::DaemonSet(Box::new(o))),
        ("apps/v1", "Deployment") => typed::<Deployment>(&value).map(|o| Manifest::Deployment(Box::new(o))),
        ("apps/v1", "ReplicaSet") => typed::<ReplicaSet>(&value).map(|o| Manifest::ReplicaSet(Box::new(o))),
        ("v1", "Pod") => typed::<Pod>(&value).map(|o| Manifest::Pod(Box::new(o))),
        ("v1", "Node") => typed::<Node>(&value).map(|o| Manifest::Node(Box::new(o))),
        ("apps/v1", "ControllerRevision") => {
            typed::<ControllerRevision>(&value).map(|o| Manifest::ControllerRevision(Box::new(o)))
        }
        ("v1", "Event") => typed::<Event>(&value).map(|o| Manifest::Event(Box::new(o))),
        ("scheduling.k8s.io/v1", "PriorityClass") => {
            typed::<PriorityClass>(&value).map(|o| Manifest::PriorityClass(Box::new(o)))
        }
        ("v1", "ConfigMap") => typed::<ConfigMap>(&value).map(|o| Manifest::ConfigMap(Box::new(o))),
        ("v1", "Secret") => typed::<Secret>(&value).map(|o| Manifest::Secret(Box::new(o))),
        ("v1", "Namespace") => typed::<Namespace>(&value).map(|o| Manifest::Namespace(Box::new(o))),
        ("v1", "ServiceAccount") => {
            typed::<ServiceAccount>(&value).map(|o| Manifest::ServiceAccount(Box::new(o)))
        }
        (_, "PriorityClass") => Err(format!(
            "no matches for kind {kind_name:?} in version {version:?}: drover serves it as scheduling.k8s.io/v1"
        )),
        (_, "DaemonSet" | "Deployment" | "ReplicaSet" | "ControllerRevision") => Err(format!(
            "no matches for kind {kind_name:?} in version {version:?}: drover serves it as apps/v1"
        )),
        (_, "Pod" | "Node" | "Event" | "ConfigMap" | "Secret" | "Namespace" | "ServiceAccount") => Err(format!(
            "no matches for kind {kind_name:?} in version {version:?}: drover serves it as v1"
        )),
        (_, other) if REPLICA_KINDS.contains(&other) => Err(format!(
            "kind {other} is not supported by drover; it runs DaemonSets, Deployments, ReplicaSets and Pods \
             (a DaemonSet puts one pod on every eligible node, which a {other} with pod anti-affinity only approximates)"
        )),
        (_, other) => Err(format!(
            "kind {other} is not supported by drover; it runs DaemonSets, Deployments, ReplicaSets and Pods"
        )),
    };
    match result {
        Ok(mut manifest) => {
            manifest.default_namespace();
            manifests.push(manifest);
        }
        Err(reason) => errors.push(error(api_version, kind, name, reason)),
    }
}

fn typed<T: DeserializeOwned>(value: &Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            e.inner().to_string()
        } else {
            format!("{path}: {}", e.inner())
        }
    })
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Manifest {
    /// `kind`, e.g. `DaemonSet`.
    pub fn kind(&self) -> &'static str {
        match self {
            Manifest::DaemonSet(_) => DaemonSet::KIND,
            Manifest::Deployment(_) => Deployment::KIND,
            Manifest::ReplicaSet(_) => ReplicaSet::KIND,
            Manifest::Pod(_) => Pod::KIND,
            Manifest::Node(_) => Node::KIND,
            Manifest::ControllerRevision(_) => ControllerRevision::KIND,
            Manifest::Event(_) => Event::KIND,
            Manifest::PriorityClass(_) => PriorityClass::KIND,
            Manifest::ConfigMap(_) => ConfigMap::KIND,
            Manifest::Secret(_) => Secret::KIND,
            Manifest::Namespace(_) => Namespace::KIND,
            Manifest::ServiceAccount(_) => ServiceAccount::KIND,
        }
    }

    /// `apiVersion`, e.g. `apps/v1`.
    pub fn api_version(&self) -> &'static str {
        match self {
            Manifest::DaemonSet(_) => DaemonSet::API_VERSION,
            Manifest::Deployment(_) => Deployment::API_VERSION,
            Manifest::ReplicaSet(_) => ReplicaSet::API_VERSION,
            Manifest::Pod(_) => Pod::API_VERSION,
            Manifest::Node(_) => Node::API_VERSION,
            Manifest::ControllerRevision(_) => ControllerRevision::API_VERSION,
            Manifest::Event(_) => Event::API_VERSION,
            Manifest::PriorityClass(_) => PriorityClass::API_VERSION,
            Manifest::ConfigMap(_) => ConfigMap::API_VERSION,
            Manifest::Secret(_) => Secret::API_VERSION,
            Manifest::Namespace(_) => Namespace::API_VERSION,
            Manifest::ServiceAccount(_) => ServiceAccount::API_VERSION,
        }
    }

    /// Whether the kind lives in a namespace (all but nodes).
    pub fn namespaced(&self) -> bool {
        !matches!(
            self,
            Manifest::Node(_) | Manifest::PriorityClass(_) | Manifest::Namespace(_)
        )
    }

    /// The object's metadata.
    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            Manifest::DaemonSet(o) => &o.metadata,
            Manifest::Deployment(o) => &o.metadata,
            Manifest::ReplicaSet(o) => &o.metadata,
            Manifest::Pod(o) => &o.metadata,
            Manifest::Node(o) => &o.metadata,
            Manifest::ControllerRevision(o) => &o.metadata,
            Manifest::Event(o) => &o.metadata,
            Manifest::PriorityClass(o) => &o.metadata,
            Manifest::ConfigMap(o) => &o.metadata,
            Manifest::Secret(o) => &o.metadata,
            Manifest::Namespace(o) => &o.metadata,
            Manifest::ServiceAccount(o) => &o.metadata,
        }
    }

    /// The object's metadata, to change.
    pub fn metadata_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Manifest::DaemonSet(o) => &mut o.metadata,
            Manifest::Deployment(o) => &mut o.metadata,
            Manifest::ReplicaSet(o) => &mut o.metadata,
            Manifest::Pod(o) => &mut o.metadata,
            Manifest::Node(o) => &mut o.metadata,
            Manifest::ControllerRevision(o) => &mut o.metadata,
            Manifest::Event(o) => &mut o.metadata,
            Manifest::PriorityClass(o) => &mut o.metadata,
            Manifest::ConfigMap(o) => &mut o.metadata,
            Manifest::Secret(o) => &mut o.metadata,
            Manifest::Namespace(o) => &mut o.metadata,
            Manifest::ServiceAccount(o) => &mut o.metadata,
        }
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.metadata().name
    }

    /// `metadata.namespace` (empty for nodes).
    pub fn namespace(&self) -> &str {
        &self.metadata().namespace
    }

    /// How kubectl names the object: `daemonset.apps/NAME`, `pod/NAME`,
    /// `node/NAME`.
    pub fn reference(&self) -> String {
        let (kind, group) = match self {
            Manifest::DaemonSet(_) => ("daemonset", DaemonSet::GROUP),
            Manifest::Deployment(_) => ("deployment", Deployment::GROUP),
            Manifest::ReplicaSet(_) => ("replicaset", ReplicaSet::GROUP),
            Manifest::Pod(_) => ("pod", Pod::GROUP),
            Manifest::Node(_) => ("node", Node::GROUP),
            Manifest::ControllerRevision(_) => ("controllerrevision", ControllerRevision::GROUP),
            Manifest::Event(_) => ("event", Event::GROUP),
            Manifest::PriorityClass(_) => ("priorityclass", PriorityClass::GROUP),
            Manifest::ConfigMap(_) => ("configmap", ConfigMap::GROUP),
            Manifest::Secret(_) => ("secret", Secret::GROUP),
            Manifest::Namespace(_) => ("namespace", Namespace::GROUP),
            Manifest::ServiceAccount(_) => ("serviceaccount", ServiceAccount::GROUP),
        };
        if group.is_empty() {
            format!("{kind}/{}", self.name())
        } else {
            format!("{kind}.{group}/{}", self.name())
        }
    }

    /// Gives a namespaced object without a namespace `default`, and drops
    /// the namespace of a node.
    pub fn default_namespace(&mut self) {
        let namespaced = self.namespaced();
        let meta = self.metadata_mut();
        if !namespaced {
            meta.namespace.clear();
        } else if meta.namespace.is_empty() {
            meta.namespace = DEFAULT_NAMESPACE.to_owned();
        }
    }

    /// The fields drover keeps but does not act on, for `apply` to warn about.
    pub fn unknown_fields(&self) -> Vec<UnknownField> {
        match self {
            Manifest::DaemonSet(o) => unknown_fields(o.as_ref()),
            Manifest::Deployment(o) => unknown_fields(o.as_ref()),
            Manifest::ReplicaSet(o) => unknown_fields(o.as_ref()),
            Manifest::Pod(o) => unknown_fields(o.as_ref()),
            Manifest::Node(o) => unknown_fields(o.as_ref()),
            Manifest::ControllerRevision(o) => unknown_fields(o.as_ref()),
            Manifest::Event(o) => unknown_fields(o.as_ref()),
            Manifest::PriorityClass(o) => unknown_fields(o.as_ref()),
            Manifest::ConfigMap(o) => unknown_fields(o.as_ref()),
            Manifest::Secret(o) => unknown_fields(o.as_ref()),
            Manifest::Namespace(o) => unknown_fields(o.as_ref()),
            Manifest::ServiceAccount(o) => unknown_fields(o.as_ref()),
        }
    }

    /// What `apply` warns about: the fields drover keeps but does not act
    /// on, then settings that are valid but risky (a DaemonSet that surges
    /// with a host port or the host network: the new pod cannot start beside
    /// the old one, kubernetes #106417).
    pub fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .unknown_fields()
            .iter()
            .map(|u| u.to_string())
            .collect();
        if let Manifest::DaemonSet(ds) = self {
            out.extend(daemon_set_warnings(ds));
        }
        out
    }

    /// [`Manifest::warnings`] under a field validation mode: with
    /// [`FieldValidation::Strict`] the fields Kubernetes does not have
    /// either (typos) are refused, and returned as the error; with `Ignore`
    /// they are not mentioned. Fields of Kubernetes that drover does not
    /// act on are always named in a warning.
    pub fn warnings_under(&self, mode: FieldValidation) -> Result<Vec<String>, Vec<UnknownField>> {
        let (unknown, supported): (Vec<UnknownField>, Vec<UnknownField>) = self
            .unknown_fields()
            .into_iter()
            .partition(|u| !u.in_kubernetes);
        if mode == FieldValidation::Strict && !unknown.is_empty() {
            return Err(unknown);
        }
        let mut out: Vec<String> = Vec::new();
        if mode == FieldValidation::Warn {
            out.extend(unknown.iter().map(|u| u.to_string()));
        }
        out.extend(supported.iter().map(|u| u.to_string()));
        if let Manifest::DaemonSet(ds) = self {
            out.extend(daemon_set_warnings(ds));
        }
        Ok(out)
    }

    /// Validates the object (see [`crate::validation`]).
    pub fn validate(&self) -> Result<(), Invalid> {
        validate_manifest(self)
    }

    /// Reads one object of a known kind straight from its JSON (one pass,
    /// no [`Value`] in between): what the server does with the objects it
    /// stored itself, whose kind the store key names. The kind's own
    /// deserializer still checks `apiVersion` and `kind`; what it refuses
    /// has no path in its error, so a caller that shows the error to a
    /// user reads the object again with [`Manifest::from_value`].
    pub fn from_json_of(kind: crate::Kind, json: &[u8]) -> Result<Self, serde_json::Error> {
        use crate::Kind as K;
        fn of<T: DeserializeOwned>(json: &[u8]) -> Result<Box<T>, serde_json::Error> {
            serde_json::from_slice(json).map(Box::new)
        }
        let mut manifest = match kind {
            K::Node => Manifest::Node(of(json)?),
            K::Pod => Manifest::Pod(of(json)?),
            K::DaemonSet => Manifest::DaemonSet(of(json)?),
            K::Deployment => Manifest::Deployment(of(json)?),
            K::ReplicaSet => Manifest::ReplicaSet(of(json)?),
            K::ControllerRevision => Manifest::ControllerRevision(of(json)?),
            K::Event => Manifest::Event(of(json)?),
            K::PriorityClass => Manifest::PriorityClass(of(json)?),
            K::ConfigMap => Manifest::ConfigMap(of(json)?),
            K::Secret => Manifest::Secret(of(json)?),
            K::Namespace => Manifest::Namespace(of(json)?),
            K::ServiceAccount => Manifest::ServiceAccount(of(json)?),
        };
        manifest.default_namespace();
        Ok(manifest)
    }

    /// Reads one object from a JSON value, dispatching on `apiVersion` and
    /// `kind` (no namespace defaulting; a `List` is refused).
    pub fn from_value(value: Value) -> Result<Self, DocumentError> {
        let mut manifests = Vec::new();
        let mut errors = Vec::new();
        let position = Position {
            document: 1,
            item: None,
        };
        let is_list = value
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k == "List" || (k.ends_with("List") && value.get("items").is_some()));
        if is_list {
            return Err(DocumentError {
                position,
                api_version: value
                    .get("apiVersion")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                kind: value.get("kind").and_then(Value::as_str).map(str::to_owned),
                name: None,
                reason: "expected one object, found a List".into(),
            });
        }
        collect(value, position, true, &mut manifests, &mut errors);
        if let Some(error) = errors.into_iter().next() {
            return Err(error);
        }
        match manifests.pop() {
            Some(manifest) if manifests.is_empty() => Ok(manifest),
            _ => Err(DocumentError {
                position,
                api_version: None,
                kind: None,
                name: None,
                reason: "expected exactly one object".into(),
            }),
        }
    }
}

/// Validates any manifest, by its kind's rules (see [`crate::validation`],
/// which re-exports this function).
pub fn validate_manifest(manifest: &Manifest) -> Result<(), Invalid> {
    match manifest {
        Manifest::DaemonSet(ds) => validate_daemon_set(ds),
        Manifest::Deployment(d) => validate_deployment(d),
        Manifest::ReplicaSet(rs) => validate_replica_set(rs),
        Manifest::Pod(pod) => validate_pod(pod),
        Manifest::Node(node) => validate_node(node),
        Manifest::ControllerRevision(revision) => validate_controller_revision(revision),
        Manifest::Event(event) => validate_event(event),
        Manifest::PriorityClass(class) => validate_priority_class(class),
        Manifest::ConfigMap(cm) => config::validate_config_map(cm),
        Manifest::Secret(secret) => config::validate_secret(secret),
        Manifest::Namespace(ns) => config::validate_namespace(ns),
        Manifest::ServiceAccount(sa) => config::validate_service_account(sa),
    }
}

/// Validates the update of an object to a new manifest of the same kind
/// (two different kinds are validated as a creation of `new`).
pub fn validate_manifest_update(new: &Manifest, old: &Manifest) -> Result<(), Invalid> {
    match (new, old) {
        (Manifest::DaemonSet(new), Manifest::DaemonSet(old)) => {
            validate_daemon_set_update(new, old)
        }
        (Manifest::Deployment(new), Manifest::Deployment(old)) => {
            validate_deployment_update(new, old)
        }
        (Manifest::ReplicaSet(new), Manifest::ReplicaSet(old)) => {
            validate_replica_set_update(new, old)
        }
        (Manifest::Pod(new), Manifest::Pod(old)) => validate_pod_update(new, old),
        (Manifest::Node(new), Manifest::Node(old)) => validate_node_update(new, old),
        (Manifest::PriorityClass(new), Manifest::PriorityClass(old)) => {
            validate_priority_class_update(new, old)
        }
        (Manifest::ConfigMap(new), Manifest::ConfigMap(old)) => {
            config::validate_config_map_update(new, old)
        }
        (Manifest::Secret(new), Manifest::Secret(old)) => config::validate_secret_update(new, old),
        (new, _) => validate_manifest(new),
    }
}

impl Serialize for Manifest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Manifest::DaemonSet(o) => o.serialize(serializer),
            Manifest::Deployment(o) => o.serialize(serializer),
            Manifest::ReplicaSet(o) => o.serialize(serializer),
            Manifest::Pod(o) => o.serialize(serializer),
            Manifest::Node(o) => o.serialize(serializer),
            Manifest::ControllerRevision(o) => o.serialize(serializer),
            Manifest::Event(o) => o.serialize(serializer),
            Manifest::PriorityClass(o) => o.serialize(serializer),
            Manifest::ConfigMap(o) => o.serialize(serializer),
            Manifest::Secret(o) => o.serialize(serializer),
            Manifest::Namespace(o) => o.serialize(serializer),
            Manifest::ServiceAccount(o) => o.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Manifest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Manifest::from_value(value).map_err(serde::de::Error::custom)
    }
}

macro_rules! manifest_from {
    ($($variant:ident),*) => {
        $(impl From<$variant> for Manifest {
            fn from(object: $variant) -> Self {
                Manifest::$variant(Box::new(object))
            }
        })*
    };
}
manifest_from!(
    DaemonSet,
    Deployment,
    ReplicaSet,
    Pod,
    Node,
    ControllerRevision,
    Event,
    PriorityClass,
    ConfigMap,
    Secret,
    Namespace,
    ServiceAccount
);
