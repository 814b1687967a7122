//! Validation, as the Kubernetes API server does it, with its error format.
//!
//! Each `validate_*` function collects every error of an object (not just
//! the first) and returns them as one [`Invalid`], whose message reads like
//! the API server's:
//!
//! ```text
//! DaemonSet.apps "x" is invalid: spec.template.spec.containers[0].name: Invalid value: "Foo_1": a lowercase RFC 1123 label must consist of …
//! ```
//!
//! The rules are Kubernetes' (`pkg/apis/core/validation`,
//! `pkg/apis/apps/validation`) for the fields drover implements. Objects may
//! be validated before or after [`crate::defaults`]: an unset field that the
//! API server would default (restart policy, toleration operator, update
//! strategy, `maxUnavailable`, port protocol, pull policy) is read as its
//! default. Two rules are stricter than Kubernetes': a node affinity `Gt` or
//! `Lt` value must be an integer (Kubernetes only finds out when matching,
//! and then matches nothing), and `hostPath` paths must be absolute.
//!
//! The building blocks (`is_dns1123_label`, `is_qualified_name`, …) return
//! the API server's messages, for the CLI to check labels and taints before
//! sending them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use crate::apps_v1::{
    ControllerRevision, DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategyType,
    RollingUpdateDaemonSet,
};
use crate::core_v1::{
    Container, ContainerPort, EnvVar, Event, HttpGetAction, LifecycleHandler, Node, NodeSelector,
    NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodSecurityContext,
    PodSpec, Probe, Protocol, PullPolicy, ResourceRequirements, RestartPolicy, SecurityContext,
    Taint, TaintEffect, Toleration, TolerationOperator, UriScheme, Volume,
};
use crate::manifest::Manifest;
use crate::meta::{IntOrString, LabelSelector, LabelSelectorOperator, Labels, ObjectMeta};
use crate::quantity::Quantity;
use crate::selector::Selector;
use crate::Resource;

// ------------------------------------------------------------ errors

/// The kind of a [`FieldError`], with the API server's wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorType {
    /// A reference to something that does not exist (`Not found`).
    NotFound,
    /// A required value is missing (`Required value`).
    Required,
    /// A value that must be unique is not (`Duplicate value`).
    Duplicate,
    /// A malformed value (`Invalid value`).
    Invalid,
    /// A value outside an enumeration (`Unsupported value`).
    NotSupported,
    /// A value not allowed here (`Forbidden`).
    Forbidden,
    /// A value that is too long (`Too long`).
    TooLong,
}

impl fmt::Display for ErrorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
        })
    }
}

/// The offending value of a [`FieldError`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadValue {
    /// No value is shown (required, forbidden, too long).
    None,
    /// A string, shown quoted.
    String(String),
    /// A number.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A structured value, shown as compact JSON.
    Json(serde_json::Value),
}

impl BadValue {
    /// A structured value (a map, a list, an object), shown as JSON.
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Self {
        BadValue::Json(serde_json::to_value(value).unwrap_or(serde_json::Value::Null))
    }
}

impl From<&str> for BadValue {
    fn from(value: &str) -> Self {
        BadValue::String(value.to_owned())
    }
}

impl From<String> for BadValue {
    fn from(value: String) -> Self {
        BadValue::String(value)
    }
}

impl From<&String> for BadValue {
    fn from(value: &String) -> Self {
        BadValue::String(value.clone())
    }
}

impl From<i64> for BadValue {
    fn from(value: i64) -> Self {
        BadValue::Int(value)
    }
}

impl From<i32> for BadValue {
    fn from(value: i32) -> Self {
        BadValue::Int(i64::from(value))
    }
}

impl From<bool> for BadValue {
    fn from(value: bool) -> Self {
        BadValue::Bool(value)
    }
}

impl From<&IntOrString> for BadValue {
    fn from(value: &IntOrString) -> Self {
        match value {
            IntOrString::Int(i) => BadValue::Int(i64::from(*i)),
            IntOrString::String(s) => BadValue::String(s.clone()),
        }
    }
}

impl fmt::Display for BadValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadValue::None => Ok(()),
            BadValue::String(s) => write!(f, "{s:?}"),
            BadValue::Int(i) => write!(f, "{i}"),
            BadValue::Bool(b) => write!(f, "{b}"),
            BadValue::Json(v) => write!(f, "{v}"),
        }
    }
}

/// One validation error: the field path, the bad value, the reason.
///
/// Displayed as the API server does: `spec.selector: Required value`,
/// `spec.template.spec.containers[0].ports[0].containerPort: Invalid value:
/// 70000: must be between 1 and 65535, inclusive`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field's path, e.g. `spec.template.spec.containers[0].name`.
    pub path: String,
    /// What is wrong.
    pub error_type: ErrorType,
    /// The offending value.
    pub value: BadValue,
    /// The reason, e.g. `must be no more than 63 characters`.
    pub detail: String,
}

impl FieldError {
    fn new(path: &Path, error_type: ErrorType, value: BadValue, detail: impl Into<String>) -> Self {
        FieldError {
            path: path.0.clone(),
            error_type,
            value,
            detail: detail.into(),
        }
    }

    /// `Required value`.
    pub fn required(path: &Path, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorType::Required, BadValue::None, detail)
    }

    /// `Invalid value: <value>: <detail>`.
    pub fn invalid(path: &Path, value: impl Into<BadValue>, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorType::Invalid, value.into(), detail)
    }

    /// `Unsupported value: <value>: supported values: "a", "b"`.
    pub fn not_supported(path: &Path, value: impl Into<BadValue>, supported: &[&str]) -> Self {
        let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        let detail = if quoted.is_empty() {
            String::new()
        } else {
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(path, ErrorType::NotSupported, value.into(), detail)
    }

    /// `Duplicate value: <value>`.
    pub fn duplicate(path: &Path, value: impl Into<BadValue>) -> Self {
        Self::new(path, ErrorType::Duplicate, value.into(), "")
    }

    /// `Forbidden: <detail>`.
    pub fn forbidden(path: &Path, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorType::Forbidden, BadValue::None, detail)
    }

    /// `Not found: <value>`.
    pub fn not_found(path: &Path, value: impl Into<BadValue>) -> Self {
        Self::new(path, ErrorType::NotFound, value.into(), "")
    }

    /// `Too long: must have at most <max> bytes`.
    pub fn too_long(path: &Path, max: usize) -> Self {
        Self::new(
            path,
            ErrorType::TooLong,
            BadValue::None,
            format!("must have at most {max} bytes"),
        )
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.error_type)?;
        let shows_value = !matches!(
            self.error_type,
            ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong
        ) && self.value != BadValue::None;
        if shows_value {
            write!(f, ": {}", self.value)?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// An object refused by validation, with all its errors.
///
/// Displayed as the API server does: `DaemonSet.apps "x" is invalid:
/// <error>`, or `… is invalid: [<error>, <error>]` for several.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Invalid {
    /// The qualified kind, e.g. `DaemonSet.apps` or `Pod`.
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// Every error found (never empty).
    pub errors: Vec<FieldError>,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut seen = BTreeSet::new();
        let messages: Vec<String> = self
            .errors
            .iter()
            .map(ToString::to_string)
            .filter(|m| seen.insert(m.clone()))
            .collect();
        write!(f, "{} {:?} is invalid: ", self.kind, self.name)?;
        if messages.len() == 1 {
            f.write_str(&messages[0])
        } else {
            write!(f, "[{}]", messages.join(", "))
        }
    }
}

fn to_result<T: Resource>(object: &T, errors: Vec<FieldError>) -> Result<(), Invalid> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Invalid {
            kind: T::qualified_kind(),
            name: object.metadata().name.clone(),
            errors,
        })
    }
}

/// A field path being built, e.g. `spec.containers[0].name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path(String);

impl Path {
    /// A path starting at a top-level field.
    pub fn new(root: &str) -> Self {
        Path(root.to_owned())
    }

    /// The path of a child field.
    pub fn child(&self, name: &str) -> Self {
        Path(format!("{}.{name}", self.0))
    }

    /// The path of a list element.
    pub fn index(&self, index: usize) -> Self {
        Path(format!("{}[{index}]", self.0))
    }

    /// The path of a map entry.
    pub fn key(&self, key: &str) -> Self {
        Path(format!("{}[{key}]", self.0))
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

// ------------------------------------------------------------ names and values

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const ENV_VAR_NAME_FMT: &str = "[-._a-zA-Z][-._a-zA-Z0-9]*";
const PERCENT_FMT: &str = "[0-9]+%";
const HTTP_HEADER_NAME_FMT: &str = "[-A-Za-z0-9]+";

/// Longest DNS label.
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// Longest DNS subdomain (object names).
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// Longest label value, and longest name part of a label key.
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;
/// Most bytes all annotations of an object may take.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

fn regex_error(message: &str, format: &str, examples: &[&str]) -> String {
    let mut out = message.to_owned();
    out.push_str(" (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{example}', "));
    }
    out.push_str(&format!("regex used for validation is '{format}')"));
    out
}

fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

fn is_alnum_lower(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

fn matches_dns1123_label(value: &str) -> bool {
    let bytes = value.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            is_alnum_lower(first)
                && is_alnum_lower(last)
                && bytes.iter().all(|&b| is_alnum_lower(b) || b == b'-')
        }
        _ => false,
    }
}

fn matches_dns1123_subdomain(value: &str) -> bool {
    value.split('.').all(matches_dns1123_label)
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

fn matches_qualified_name_part(value: &str) -> bool {
    let bytes = value.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            is_alnum(first)
                && is_alnum(last)
                && bytes
                    .iter()
                    .all(|&b| is_alnum(b) || b == b'-' || b == b'_' || b == b'.')
        }
        _ => false,
    }
}

/// Errors of a DNS (RFC 1123) label: container, port-less names, namespaces.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errors.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            errors.push("must not contain dots".to_owned());
        } else {
            errors.push(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errors
}

/// Errors of a DNS (RFC 1123) subdomain: object names.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errors.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !matches_dns1123_subdomain(value) {
        errors.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errors
}

/// Errors of a qualified name (a label key, a taint key): an optional DNS
/// subdomain prefix and `/`, then a name of at most 63 characters.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else {
                errors.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errors.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"],
                )
            ));
            return errors;
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > LABEL_VALUE_MAX_LENGTH {
        errors.push(format!(
            "name part {}",
            max_len_error(LABEL_VALUE_MAX_LENGTH)
        ));
    }
    if !matches_qualified_name_part(name) {
        errors.push(format!(
            "name part {}",
            regex_error(
                "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"],
            )
        ));
    }
    errors
}

/// Errors of a label value (may be empty).
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errors.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !value.is_empty() && !matches_qualified_name_part(value) {
        errors.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errors
}

/// Errors of a port name (an IANA service name, as Kubernetes requires).
pub fn is_valid_port_name(port: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if port.len() > 15 {
        errors.push(max_len_error(15));
    }
    if port.is_empty() || !port.bytes().all(|b| is_alnum_lower(b) || b == b'-') {
        errors.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_owned(),
        );
    }
    if !port.bytes().any(|b| b.is_ascii_lowercase()) {
        errors.push("must contain at least one letter (a-z)".to_owned());
    }
    if port.contains("--") {
        errors.push("must not contain consecutive hyphens".to_owned());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errors.push("must not begin or end with a hyphen".to_owned());
    }
    errors
}

/// Errors of a port number (1-65535).
pub fn is_valid_port_num(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec![inclusive_range_error(1, 65535)]
    }
}

fn inclusive_range_error(low: i64, high: i64) -> String {
    format!("must be between {low} and {high}, inclusive")
}

/// Errors of an environment variable name.
pub fn is_env_var_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let bytes = value.as_bytes();
    let valid = bytes
        .first()
        .is_some_and(|&b| b.is_ascii_alphabetic() || b == b'-' || b == b'.' || b == b'_')
        && bytes
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
    if !valid {
        errors.push(regex_error(
            "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit",
            ENV_VAR_NAME_FMT,
            &["my.env-name", "MY_ENV.NAME", "MyEnvName1"],
        ));
    }
    if value == "." {
        errors.push("must not be '.'".to_owned());
    } else if value == ".." {
        errors.push("must not be '..'".to_owned());
    } else if value.starts_with("..") {
        errors.push("must not start with '..'".to_owned());
    }
    errors
}

/// Errors of a percentage string (`"25%"`).
pub fn is_valid_percent(value: &str) -> Vec<String> {
    let valid = value
        .strip_suffix('%')
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
    if valid {
        Vec::new()
    } else {
        vec![regex_error(
            "a valid percent string must be a numeric string followed by an ending '%'",
            PERCENT_FMT,
            &["1%", "93%"],
        )]
    }
}

fn name_is_dns_subdomain(name: &str, prefix: bool) -> Vec<String> {
    let name = if prefix {
        name.strip_suffix('-').unwrap_or(name)
    } else {
        name
    };
    is_dns1123_subdomain(name)
}

fn validate_dns1123_label(value: &str, path: &Path) -> Vec<FieldError> {
    is_dns1123_label(value)
        .into_iter()
        .map(|m| FieldError::invalid(path, value, m))
        .collect()
}

fn validate_dns1123_subdomain(value: &str, path: &Path) -> Vec<FieldError> {
    is_dns1123_subdomain(value)
        .into_iter()
        .map(|m| FieldError::invalid(path, value, m))
        .collect()
}

fn validate_qualified_name(value: &str, path: &Path) -> Vec<FieldError> {
    is_qualified_name(value)
        .into_iter()
        .map(|m| FieldError::invalid(path, value, m))
        .collect()
}

fn validate_nonnegative(value: i64, path: &Path) -> Vec<FieldError> {
    if value < 0 {
        vec![FieldError::invalid(
            path,
            value,
            "must be greater than or equal to 0",
        )]
    } else {
        Vec::new()
    }
}

/// Errors of a label map (`metadata.labels`, a node selector): every key a
/// qualified name, every value a label value. The path is the map's.
pub fn validate_labels(labels: &Labels, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (key, value) in labels {
        errors.extend(validate_qualified_name(key, path));
        errors.extend(
            is_valid_label_value(value)
                .into_iter()
                .map(|m| FieldError::invalid(path, value, m)),
        );
    }
    errors
}

fn validate_annotations(annotations: &Labels, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut total = 0usize;
    for (key, value) in annotations {
        errors.extend(
            is_qualified_name(&key.to_lowercase())
                .into_iter()
                .map(|m| FieldError::invalid(path, key, m)),
        );
        total += key.len() + value.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errors.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errors
}

// ------------------------------------------------------------ metadata

/// Errors of an object's metadata: name (a DNS subdomain), namespace
/// (required and a DNS label for namespaced kinds, forbidden otherwise),
/// generation, labels, annotations, owner references.
pub fn validate_object_meta(meta: &ObjectMeta, namespaced: bool, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if meta.name.is_empty() && meta.generate_name.is_empty() {
        errors.push(FieldError::required(
            &path.child("name"),
            "name or generateName is required",
        ));
    }
    if !meta.name.is_empty() {
        errors.extend(
            name_is_dns_subdomain(&meta.name, false)
                .into_iter()
                .map(|m| FieldError::invalid(&path.child("name"), &meta.name, m)),
        );
    }
    if !meta.generate_name.is_empty() {
        errors.extend(
            name_is_dns_subdomain(&meta.generate_name, true)
                .into_iter()
                .map(|m| FieldError::invalid(&path.child("generateName"), &meta.generate_name, m)),
        );
    }
    if namespaced {
        if meta.namespace.is_empty() {
            errors.push(FieldError::required(&path.child("namespace"), ""));
        } else {
            errors.extend(validate_dns1123_label(
                &meta.namespace,
                &path.child("namespace"),
            ));
        }
    } else if !meta.namespace.is_empty() {
        errors.push(FieldError::forbidden(
            &path.child("namespace"),
            "not allowed on this type",
        ));
    }
    if let Some(generation) = meta.generation {
        errors.extend(validate_nonnegative(generation, &path.child("generation")));
    }
    errors.extend(validate_labels(&meta.labels, &path.child("labels")));
    errors.extend(validate_annotations(
        &meta.annotations,
        &path.child("annotations"),
    ));
    let owners = path.child("ownerReferences");
    let mut controllers = Vec::new();
    for (i, owner) in meta.owner_references.iter().enumerate() {
        let p = owners.index(i);
        let version = owner.api_version.rsplit('/').next().unwrap_or_default();
        if version.is_empty() {
            errors.push(FieldError::invalid(
                &p.child("apiVersion"),
                &owner.api_version,
                "version must not be empty",
            ));
        }
        for (field, value) in [
            ("kind", &owner.kind),
            ("name", &owner.name),
            ("uid", &owner.uid),
        ] {
            if value.is_empty() {
                errors.push(FieldError::invalid(
                    &p.child(field),
                    value,
                    "must not be empty",
                ));
            }
        }
        if owner.controller == Some(true) {
            controllers.push(format!("{}/{}", owner.kind, owner.name));
        }
    }
    if controllers.len() > 1 {
        errors.push(FieldError::invalid(
            &owners,
            BadValue::json(&meta.owner_references),
            format!(
                "Only one reference can have Controller set to true. Found \"true\" in references for {}",
                controllers.join(" and ")
            ),
        ));
    }
    errors
}

fn validate_immutable<T: PartialEq + Serialize + ?Sized>(
    new: &T,
    old: &T,
    path: &Path,
) -> Vec<FieldError> {
    if new == old {
        Vec::new()
    } else {
        vec![FieldError::invalid(
            path,
            BadValue::json(new),
            "field is immutable",
        )]
    }
}

/// Errors of a metadata update: name and namespace can't change, nor a set
/// uid. (The server copies its own fields, uid and creationTimestamp, onto
/// an applied manifest before validating it.)
pub fn validate_object_meta_update(
    new: &ObjectMeta,
    old: &ObjectMeta,
    path: &Path,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    errors.extend(validate_immutable(
        &new.name,
        &old.name,
        &path.child("name"),
    ));
    errors.extend(validate_immutable(
        &new.namespace,
        &old.namespace,
        &path.child("namespace"),
    ));
    if !new.uid.is_empty() && !old.uid.is_empty() {
        errors.extend(validate_immutable(&new.uid, &old.uid, &path.child("uid")));
    }
    errors
}

// ------------------------------------------------------------ selectors

/// Errors of a label selector: valid label keys and values, operators with
/// their value rules.
pub fn validate_label_selector(selector: &LabelSelector, path: &Path) -> Vec<FieldError> {
    let mut errors = validate_labels(&selector.match_labels, &path.child("matchLabels"));
    for (i, requirement) in selector.match_expressions.iter().enumerate() {
        let p = path.child("matchExpressions").index(i);
        match &requirement.operator {
            Some(LabelSelectorOperator::In | LabelSelectorOperator::NotIn) => {
                if requirement.values.is_empty() {
                    errors.push(FieldError::required(
                        &p.child("values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            Some(LabelSelectorOperator::Exists | LabelSelectorOperator::DoesNotExist) => {
                if !requirement.values.is_empty() {
                    errors.push(FieldError::forbidden(
                        &p.child("values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            Some(LabelSelectorOperator::Other(other)) => {
                errors.push(FieldError::invalid(
                    &p.child("operator"),
                    other.as_str(),
                    "not a valid selector operator",
                ));
            }
            None => errors.push(FieldError::required(&p.child("operator"), "")),
        }
        errors.extend(validate_qualified_name(&requirement.key, &p.child("key")));
        for (j, value) in requirement.values.iter().enumerate() {
            errors.extend(
                is_valid_label_value(value)
                    .into_iter()
                    .map(|m| FieldError::invalid(&p.child("values").index(j), value, m)),
            );
        }
    }
    errors
}

/// Errors of a node selector (required node affinity): at least one term;
/// expressions with valid keys and operators (`In`/`NotIn` need values,
/// `Exists`/`DoesNotExist` none, `Gt`/`Lt` exactly one integer); fields
/// only `metadata.name` with `In`/`NotIn` and one value.
pub fn validate_node_selector(selector: &NodeSelector, path: &Path) -> Vec<FieldError> {
    let terms = path.child("nodeSelectorTerms");
    if selector.node_selector_terms.is_empty() {
        return vec![FieldError::required(
            &terms,
            "must have at least one node selector term",
        )];
    }
    selector
        .node_selector_terms
        .iter()
        .enumerate()
        .flat_map(|(i, term)| validate_node_selector_term(term, &terms.index(i)))
        .collect()
}

/// Errors of one node selector term (see [`validate_node_selector`]).
pub fn validate_node_selector_term(term: &NodeSelectorTerm, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, requirement) in term.match_expressions.iter().enumerate() {
        errors.extend(validate_node_selector_requirement(
            requirement,
            &path.child("matchExpressions").index(i),
        ));
    }
    for (i, requirement) in term.match_fields.iter().enumerate() {
        errors.extend(validate_node_field_selector_requirement(
            requirement,
            &path.child("matchFields").index(i),
        ));
    }
    errors
}

fn validate_node_selector_requirement(
    rq: &NodeSelectorRequirement,
    path: &Path,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match &rq.operator {
        Some(NodeSelectorOperator::In | NodeSelectorOperator::NotIn) => {
            if rq.values.is_empty() {
                errors.push(FieldError::required(
                    &path.child("values"),
                    "must be specified when `operator` is 'In' or 'NotIn'",
                ));
            }
        }
        Some(NodeSelectorOperator::Exists | NodeSelectorOperator::DoesNotExist) => {
            if !rq.values.is_empty() {
                errors.push(FieldError::forbidden(
                    &path.child("values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                ));
            }
        }
        Some(NodeSelectorOperator::Gt | NodeSelectorOperator::Lt) => {
            if rq.values.len() != 1 {
                errors.push(FieldError::required(
                    &path.child("values"),
                    "must be specified single value when `operator` is 'Lt' or 'Gt'",
                ));
            } else if rq.values[0].parse::<i64>().is_err() {
                errors.push(FieldError::invalid(
                    &path.child("values").index(0),
                    &rq.values[0],
                    "must be an integer when `operator` is 'Lt' or 'Gt'",
                ));
            }
        }
        Some(NodeSelectorOperator::Other(other)) => errors.push(FieldError::invalid(
            &path.child("operator"),
            other.as_str(),
            "not a valid selector operator",
        )),
        None => errors.push(FieldError::required(&path.child("operator"), "")),
    }
    errors.extend(validate_qualified_name(&rq.key, &path.child("key")));
    errors
}

/// The only node field a node selector can match.
pub const NODE_FIELD_METADATA_NAME: &str = "metadata.name";

fn validate_node_field_selector_requirement(
    rq: &NodeSelectorRequirement,
    path: &Path,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match &rq.operator {
        Some(NodeSelectorOperator::In | NodeSelectorOperator::NotIn) => {
            if rq.values.len() != 1 {
                errors.push(FieldError::required(
                    &path.child("values"),
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                ));
            }
        }
        Some(other) => errors.push(FieldError::invalid(
            &path.child("operator"),
            other.as_str(),
            "not a valid selector operator",
        )),
        None => errors.push(FieldError::required(&path.child("operator"), "")),
    }
    if rq.key != NODE_FIELD_METADATA_NAME {
        errors.push(FieldError::invalid(
            &path.child("key"),
            &rq.key,
            "not a valid field selector key",
        ));
    } else {
        for (i, value) in rq.values.iter().enumerate() {
            errors.extend(validate_dns1123_subdomain(
                value,
                &path.child("values").index(i),
            ));
        }
    }
    errors
}

// ------------------------------------------------------------ taints and tolerations

const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

fn validate_taint_effect(
    effect: &Option<TaintEffect>,
    allow_empty: bool,
    path: &Path,
) -> Vec<FieldError> {
    match effect {
        None if allow_empty => Vec::new(),
        None => vec![FieldError::required(path, "")],
        Some(TaintEffect::Other(other)) => {
            vec![FieldError::not_supported(
                path,
                other.as_str(),
                TAINT_EFFECTS,
            )]
        }
        Some(_) => Vec::new(),
    }
}

/// Errors of a pod's tolerations: a key is a qualified name; an empty key
/// needs `Exists`; `Exists` has no value; `tolerationSeconds` only with
/// `NoExecute`; operators `Equal`/`Exists`; effects `NoSchedule`,
/// `PreferNoSchedule`, `NoExecute` or empty.
pub fn validate_tolerations(tolerations: &[Toleration], path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, toleration) in tolerations.iter().enumerate() {
        let p = path.index(i);
        if !toleration.key.is_empty() {
            errors.extend(validate_qualified_name(&toleration.key, &p.child("key")));
        }
        if toleration.key.is_empty() && toleration.operator != Some(TolerationOperator::Exists) {
            errors.push(FieldError::invalid(
                &p.child("operator"),
                toleration.operator.as_ref().map_or("", |o| o.as_str()),
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if toleration.toleration_seconds.is_some()
            && toleration.effect != Some(TaintEffect::NoExecute)
        {
            errors.push(FieldError::invalid(
                &p.child("effect"),
                toleration.effect.as_ref().map_or("", |e| e.as_str()),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match &toleration.operator {
            None | Some(TolerationOperator::Equal) => {
                let messages = is_valid_label_value(&toleration.value);
                if !messages.is_empty() {
                    errors.push(FieldError::invalid(
                        &p.child("operator"),
                        &toleration.value,
                        messages.join(";"),
                    ));
                }
            }
            Some(TolerationOperator::Exists) => {
                if !toleration.value.is_empty() {
                    errors.push(FieldError::invalid(
                        &p.child("operator"),
                        BadValue::json(toleration),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            Some(TolerationOperator::Other(other)) => errors.push(FieldError::not_supported(
                &p.child("operator"),
                other.as_str(),
                TolerationOperator::KNOWN,
            )),
        }
        errors.extend(validate_taint_effect(
            &toleration.effect,
            true,
            &p.child("effect"),
        ));
    }
    errors
}

/// Errors of a node's taints: key a qualified name, value a label value,
/// effect required and known, unique by key and effect.
pub fn validate_taints(taints: &[Taint], path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, taint) in taints.iter().enumerate() {
        let p = path.index(i);
        errors.extend(validate_qualified_name(&taint.key, &p.child("key")));
        let messages = is_valid_label_value(&taint.value);
        if !messages.is_empty() {
            errors.push(FieldError::invalid(
                &p.child("value"),
                &taint.value,
                messages.join(";"),
            ));
        }
        errors.extend(validate_taint_effect(
            &taint.effect,
            false,
            &p.child("effect"),
        ));
        let effect = taint.effect.as_ref().map_or("", |e| e.as_str());
        if !seen.insert((taint.key.clone(), effect.to_owned())) {
            let mut error = FieldError::duplicate(&p, BadValue::json(taint));
            error.detail = "taints must be unique by key and effect pair".to_owned();
            errors.push(error);
        }
    }
    errors
}

// ------------------------------------------------------------ pods

/// Paths of the pod fields that `valueFrom.fieldRef` can read.
pub const DOWNWARD_API_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.podIP",
    "status.podIPs",
];

const RESOURCE_FIELD_PATHS: &[&str] = &[
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

fn validate_volumes(volumes: &[Volume], path: &Path) -> (BTreeSet<String>, Vec<FieldError>) {
    let mut errors = Vec::new();
    let mut names = BTreeSet::new();
    for (i, volume) in volumes.iter().enumerate() {
        let p = path.index(i);
        if volume.name.is_empty() {
            errors.push(FieldError::required(&p.child("name"), ""));
        } else {
            errors.extend(validate_dns1123_label(&volume.name, &p.child("name")));
        }
        if !volume.name.is_empty() && !names.insert(volume.name.clone()) {
            errors.push(FieldError::duplicate(&p.child("name"), &volume.name));
        }
        let mut typed = 0;
        if let Some(host_path) = &volume.host_path {
            typed += 1;
            let hp = p.child("hostPath");
            if host_path.path.is_empty() {
                errors.push(FieldError::required(&hp.child("path"), ""));
            } else {
                if !host_path.path.starts_with('/') {
                    errors.push(FieldError::invalid(
                        &hp.child("path"),
                        &host_path.path,
                        "must be an absolute path",
                    ));
                }
                if host_path.path.split('/').any(|segment| segment == "..") {
                    errors.push(FieldError::invalid(
                        &hp.child("path"),
                        &host_path.path,
                        "must not contain '..'",
                    ));
                }
            }
            if let Some(crate::core_v1::HostPathType::Other(other)) = &host_path.r#type {
                let mut supported = vec![""];
                supported.extend_from_slice(crate::core_v1::HostPathType::KNOWN);
                errors.push(FieldError::not_supported(
                    &hp.child("type"),
                    other.as_str(),
                    &supported,
                ));
            }
        }
        if let Some(empty_dir) = &volume.empty_dir {
            let ed = p.child("emptyDir");
            if typed > 0 {
                errors.push(FieldError::forbidden(
                    &ed,
                    "may not specify more than 1 volume type",
                ));
            }
            typed += 1;
            if !matches!(empty_dir.medium.as_str(), "" | "Memory") {
                errors.push(FieldError::not_supported(
                    &ed.child("medium"),
                    &empty_dir.medium,
                    &["", "Memory"],
                ));
            }
            if let Some(limit) = &empty_dir.size_limit {
                errors.extend(validate_quantity(limit, &ed.child("sizeLimit")));
            }
        }
        if typed == 0 && volume.extra.is_empty() {
            errors.push(FieldError::required(&p, "must specify a volume type"));
        }
    }
    (names, errors)
}

fn validate_quantity(quantity: &Quantity, path: &Path) -> Vec<FieldError> {
    match quantity.to_nanos() {
        Err(e) => vec![FieldError::invalid(
            path,
            quantity.0.as_str(),
            e.to_string(),
        )],
        Ok(n) if n < 0 => vec![FieldError::invalid(
            path,
            quantity.0.as_str(),
            "must be greater than or equal to 0",
        )],
        Ok(_) => Vec::new(),
    }
}

fn is_container_resource_name(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage")
        || name.starts_with("hugepages-")
        || (name.contains('/') && is_qualified_name(name).is_empty())
}

fn validate_resources(resources: &ResourceRequirements, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut limits = BTreeMap::new();
    for (field, map) in [
        ("limits", &resources.limits),
        ("requests", &resources.requests),
    ] {
        for (name, quantity) in map {
            let p = path.child(field).key(name);
            if !is_container_resource_name(name) {
                errors.push(FieldError::invalid(
                    &p,
                    name.as_str(),
                    "must be a standard resource for containers",
                ));
            }
            let quantity_errors = validate_quantity(quantity, &p);
            if quantity_errors.is_empty() && field == "limits" {
                if let Ok(value) = quantity.to_nanos() {
                    limits.insert(name.clone(), (value, quantity));
                }
            }
            errors.extend(quantity_errors);
        }
    }
    for (name, request) in &resources.requests {
        let (Some((limit, limit_text)), Ok(value)) = (limits.get(name), request.to_nanos()) else {
            continue;
        };
        if value > *limit {
            errors.push(FieldError::invalid(
                &path.child("requests").key(name),
                request.0.as_str(),
                format!("must be less than or equal to {name} limit of {limit_text}"),
            ));
        }
    }
    errors
}

fn validate_port_num_or_name(port: &IntOrString, path: &Path) -> Vec<FieldError> {
    match port {
        IntOrString::Int(number) => is_valid_port_num(i64::from(*number))
            .into_iter()
            .map(|m| FieldError::invalid(path, *number, m))
            .collect(),
        IntOrString::String(name) => is_valid_port_name(name)
            .into_iter()
            .map(|m| FieldError::invalid(path, name, m))
            .collect(),
    }
}

fn validate_http_get(action: &HttpGetAction, path: &Path) -> Vec<FieldError> {
    let mut errors = validate_port_num_or_name(&action.port, &path.child("port"));
    if let Some(UriScheme::Other(other)) = &action.scheme {
        errors.push(FieldError::not_supported(
            &path.child("scheme"),
            other.as_str(),
            UriScheme::KNOWN,
        ));
    }
    for header in &action.http_headers {
        let valid = !header.name.is_empty()
            && header
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !valid {
            errors.push(FieldError::invalid(
                &path.child("httpHeaders"),
                &header.name,
                regex_error(
                    "a valid HTTP header must consist of alphanumeric characters or '-'",
                    HTTP_HEADER_NAME_FMT,
                    &["X-Header-Name"],
                ),
            ));
        }
    }
    errors
}

/// One handler: exec, httpGet, tcpSocket, sleep (lifecycle only).
fn validate_handler(
    exec: Option<&crate::core_v1::ExecAction>,
    http_get: Option<&HttpGetAction>,
    tcp_socket: Option<&crate::core_v1::TcpSocketAction>,
    sleep: Option<i64>,
    path: &Path,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut handlers = 0;
    let mut count = |name: &str, errors: &mut Vec<FieldError>| -> bool {
        handlers += 1;
        if handlers > 1 {
            errors.push(FieldError::forbidden(
                &path.child(name),
                "may not specify more than 1 handler type",
            ));
            false
        } else {
            true
        }
    };
    if let Some(exec) = exec {
        if count("exec", &mut errors) && exec.command.is_empty() {
            errors.push(FieldError::required(
                &path.child("exec").child("command"),
                "",
            ));
        }
    }
    if let Some(http_get) = http_get {
        if count("httpGet", &mut errors) {
            errors.extend(validate_http_get(http_get, &path.child("httpGet")));
        }
    }
    if let Some(tcp) = tcp_socket {
        if count("tcpSocket", &mut errors) {
            errors.extend(validate_port_num_or_name(
                &tcp.port,
                &path.child("tcpSocket").child("port"),
            ));
        }
    }
    if let Some(seconds) = sleep {
        if count("sleep", &mut errors) {
            errors.extend(validate_nonnegative(
                seconds,
                &path.child("sleep").child("seconds"),
            ));
        }
    }
    if handlers == 0 {
        errors.push(FieldError::required(path, "must specify a handler type"));
    }
    errors
}

fn validate_lifecycle_handler(handler: &LifecycleHandler, path: &Path) -> Vec<FieldError> {
    validate_handler(
        handler.exec.as_ref(),
        handler.http_get.as_ref(),
        handler.tcp_socket.as_ref(),
        handler.sleep.as_ref().map(|s| s.seconds),
        path,
    )
}

fn validate_probe(probe: &Probe, path: &Path) -> Vec<FieldError> {
    let mut errors = validate_handler(
        probe.exec.as_ref(),
        probe.http_get.as_ref(),
        probe.tcp_socket.as_ref(),
        None,
        path,
    );
    for (field, value) in [
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ] {
        if let Some(value) = value {
            errors.extend(validate_nonnegative(i64::from(value), &path.child(field)));
        }
    }
    if let Some(grace) = probe.termination_grace_period_seconds {
        if grace <= 0 {
            errors.push(FieldError::invalid(
                &path.child("terminationGracePeriodSeconds"),
                grace,
                "must be greater than 0",
            ));
        }
    }
    errors
}

fn validate_id(value: Option<i64>, path: &Path) -> Vec<FieldError> {
    match value {
        Some(id) if !(0..=0xffff_ffff).contains(&id) => vec![FieldError::invalid(
            path,
            id,
            inclusive_range_error(0, 0xffff_ffff),
        )],
        _ => Vec::new(),
    }
}

fn validate_security_context(context: &SecurityContext, path: &Path) -> Vec<FieldError> {
    let mut errors = validate_id(context.run_as_user, &path.child("runAsUser"));
    errors.extend(validate_id(context.run_as_group, &path.child("runAsGroup")));
    if context.privileged == Some(true) && context.allow_privilege_escalation == Some(false) {
        errors.push(FieldError::invalid(
            path,
            BadValue::json(context),
            "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
        ));
    }
    errors
}

fn validate_pod_security_context(context: &PodSecurityContext, path: &Path) -> Vec<FieldError> {
    let mut errors = validate_id(context.run_as_user, &path.child("runAsUser"));
    errors.extend(validate_id(context.run_as_group, &path.child("runAsGroup")));
    errors.extend(validate_id(context.fs_group, &path.child("fsGroup")));
    for (i, group) in context.supplemental_groups.iter().enumerate() {
        errors.extend(validate_id(
            Some(*group),
            &path.child("supplementalGroups").index(i),
        ));
    }
    errors
}

fn validate_env(env: &[EnvVar], path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, var) in env.iter().enumerate() {
        let p = path.index(i);
        if var.name.is_empty() {
            errors.push(FieldError::required(&p.child("name"), ""));
        } else {
            errors.extend(
                is_env_var_name(&var.name)
                    .into_iter()
                    .map(|m| FieldError::invalid(&p.child("name"), &var.name, m)),
            );
        }
        let Some(source) = &var.value_from else {
            continue;
        };
        let vf = p.child("valueFrom");
        let mut sources = source.extra.len();
        if let Some(field_ref) = &source.field_ref {
            sources += 1;
            let fr = vf.child("fieldRef");
            if field_ref.field_path.is_empty() {
                errors.push(FieldError::required(&fr.child("fieldPath"), ""));
            } else if !matches!(field_ref.api_version.as_str(), "" | "v1") {
                errors.push(FieldError::not_supported(
                    &fr.child("apiVersion"),
                    &field_ref.api_version,
                    &["v1"],
                ));
            } else if let Some(subscript) = field_ref
                .field_path
                .strip_prefix("metadata.labels['")
                .or_else(|| field_ref.field_path.strip_prefix("metadata.annotations['"))
            {
                let key = subscript.strip_suffix("']").unwrap_or(subscript);
                errors.extend(validate_qualified_name(&key.to_lowercase(), &fr));
            } else if !DOWNWARD_API_FIELD_PATHS.contains(&field_ref.field_path.as_str()) {
                let mut supported = DOWNWARD_API_FIELD_PATHS.to_vec();
                supported.sort_unstable();
                errors.push(FieldError::not_supported(
                    &fr.child("fieldPath"),
                    &field_ref.field_path,
                    &supported,
                ));
            }
        }
        if let Some(resource_ref) = &source.resource_field_ref {
            sources += 1;
            let rr = vf.child("resourceFieldRef");
            if resource_ref.resource.is_empty() {
                errors.push(FieldError::required(&rr.child("resource"), ""));
            } else if !RESOURCE_FIELD_PATHS.contains(&resource_ref.resource.as_str()) {
                errors.push(FieldError::not_supported(
                    &rr.child("resource"),
                    &resource_ref.resource,
                    RESOURCE_FIELD_PATHS,
                ));
            }
            if let Some(divisor) = &resource_ref.divisor {
                errors.extend(validate_quantity(divisor, &rr.child("divisor")));
            }
        }
        if sources == 0 {
            errors.push(FieldError::invalid(
                &vf,
                "",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            ));
        } else if !var.value.is_empty() {
            errors.push(FieldError::invalid(
                &vf,
                "",
                "may not be specified when `value` is not empty",
            ));
        } else if sources > 1 {
            errors.push(FieldError::invalid(
                &vf,
                "",
                "may not have more than one field specified at a time",
            ));
        }
    }
    errors
}

fn validate_ports(
    ports: &[ContainerPort],
    names: &mut BTreeSet<String>,
    path: &Path,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let p = path.index(i);
        if !port.name.is_empty() {
            let messages = is_valid_port_name(&port.name);
            if !messages.is_empty() {
                errors.extend(
                    messages
                        .into_iter()
                        .map(|m| FieldError::invalid(&p.child("name"), &port.name, m)),
                );
            } else if !names.insert(port.name.clone()) {
                errors.push(FieldError::duplicate(&p.child("name"), &port.name));
            }
        }
        if port.container_port == 0 {
            errors.push(FieldError::required(&p.child("containerPort"), ""));
        } else {
            errors.extend(
                is_valid_port_num(i64::from(port.container_port))
                    .into_iter()
                    .map(|m| {
                        FieldError::invalid(&p.child("containerPort"), port.container_port, m)
                    }),
            );
        }
        if let Some(host_port) = port.host_port.filter(|&h| h != 0) {
            errors.extend(
                is_valid_port_num(i64::from(host_port))
                    .into_iter()
                    .map(|m| FieldError::invalid(&p.child("hostPort"), host_port, m)),
            );
        }
        if let Some(Protocol::Other(other)) = &port.protocol {
            errors.push(FieldError::not_supported(
                &p.child("protocol"),
                other.as_str(),
                Protocol::KNOWN,
            ));
        }
    }
    errors
}

fn validate_container(
    container: &Container,
    volumes: &BTreeSet<String>,
    port_names: &mut BTreeSet<String>,
    path: &Path,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if container.name.is_empty() {
        errors.push(FieldError::required(&path.child("name"), ""));
    } else {
        errors.extend(validate_dns1123_label(&container.name, &path.child("name")));
    }
    if container.image.is_empty() {
        errors.push(FieldError::required(&path.child("image"), ""));
    }
    if let Some(lifecycle) = &container.lifecycle {
        let lp = path.child("lifecycle");
        if let Some(handler) = &lifecycle.post_start {
            errors.extend(validate_lifecycle_handler(handler, &lp.child("postStart")));
        }
        if let Some(handler) = &lifecycle.pre_stop {
            errors.extend(validate_lifecycle_handler(handler, &lp.child("preStop")));
        }
    }
    if let Some(probe) = &container.liveness_probe {
        errors.extend(validate_probe(probe, &path.child("livenessProbe")));
        if let Some(threshold) = probe.success_threshold.filter(|&t| t != 1) {
            errors.push(FieldError::invalid(
                &path.child("livenessProbe").child("successThreshold"),
                threshold,
                "must be 1",
            ));
        }
    }
    if let Some(probe) = &container.readiness_probe {
        errors.extend(validate_probe(probe, &path.child("readinessProbe")));
        if let Some(grace) = probe.termination_grace_period_seconds {
            errors.push(FieldError::invalid(
                &path
                    .child("readinessProbe")
                    .child("terminationGracePeriodSeconds"),
                grace,
                "must not be set for readinessProbes",
            ));
        }
    }
    if let Some(probe) = &container.startup_probe {
        errors.extend(validate_probe(probe, &path.child("startupProbe")));
        if let Some(threshold) = probe.success_threshold.filter(|&t| t != 1) {
            errors.push(FieldError::invalid(
                &path.child("startupProbe").child("successThreshold"),
                threshold,
                "must be 1",
            ));
        }
    }
    errors.extend(validate_ports(
        &container.ports,
        port_names,
        &path.child("ports"),
    ));
    errors.extend(validate_env(&container.env, &path.child("env")));
    let mut mount_paths = BTreeSet::new();
    for (i, mount) in container.volume_mounts.iter().enumerate() {
        let p = path.child("volumeMounts").index(i);
        if mount.name.is_empty() {
            errors.push(FieldError::required(&p.child("name"), ""));
        } else if !volumes.contains(&mount.name) {
            errors.push(FieldError::not_found(&p.child("name"), &mount.name));
        }
        if mount.mount_path.is_empty() {
            errors.push(FieldError::required(&p.child("mountPath"), ""));
        } else if !mount_paths.insert(mount.mount_path.clone()) {
            errors.push(FieldError::invalid(
                &p.child("mountPath"),
                &mount.mount_path,
                "must be unique",
            ));
        }
        if !mount.sub_path.is_empty() {
            if mount.sub_path.starts_with('/') {
                errors.push(FieldError::invalid(
                    &p.child("subPath"),
                    &mount.sub_path,
                    "must be a relative path",
                ));
            }
            if mount.sub_path.split('/').any(|s| s == "..") {
                errors.push(FieldError::invalid(
                    &p.child("subPath"),
                    &mount.sub_path,
                    "must not contain '..'",
                ));
            }
        }
        if let Some(crate::core_v1::MountPropagation::Other(other)) = &mount.mount_propagation {
            errors.push(FieldError::not_supported(
                &p.child("mountPropagation"),
                other.as_str(),
                crate::core_v1::MountPropagation::KNOWN,
            ));
        }
    }
    errors.extend(validate_resources(
        &container.resources,
        &path.child("resources"),
    ));
    if let Some(context) = &container.security_context {
        errors.extend(validate_security_context(
            context,
            &path.child("securityContext"),
        ));
    }
    if let Some(PullPolicy::Other(other)) = &container.image_pull_policy {
        errors.push(FieldError::not_supported(
            &path.child("imagePullPolicy"),
            other.as_str(),
            PullPolicy::KNOWN,
        ));
    }
    errors
}

/// Errors of a pod spec (of a pod, or of a DaemonSet's template).
///
/// `check_restart_policy` is false for a template whose owner checks the
/// restart policy itself (a DaemonSet allows only `Always`).
pub fn validate_pod_spec(
    spec: &PodSpec,
    path: &Path,
    check_restart_policy: bool,
) -> Vec<FieldError> {
    let (volumes, mut errors) = validate_volumes(&spec.volumes, &path.child("volumes"));
    let containers = path.child("containers");
    if spec.containers.is_empty() {
        errors.push(FieldError::required(&containers, ""));
    }
    let mut names = BTreeSet::new();
    let mut port_names = BTreeSet::new();
    let mut host_ports = BTreeSet::new();
    for (i, container) in spec.containers.iter().enumerate() {
        let p = containers.index(i);
        errors.extend(validate_container(container, &volumes, &mut port_names, &p));
        if !container.name.is_empty() && !names.insert(container.name.clone()) {
            errors.push(FieldError::duplicate(&p.child("name"), &container.name));
        }
        for (j, port) in container.ports.iter().enumerate() {
            let pp = p.child("ports").index(j);
            if spec.host_network && port.host_port.is_some_and(|h| h != port.container_port) {
                errors.push(FieldError::invalid(
                    &pp.child("containerPort"),
                    port.container_port,
                    "must match `hostPort` when `hostNetwork` is true",
                ));
            }
            let host_port = if spec.host_network {
                port.host_port.unwrap_or(port.container_port)
            } else {
                port.host_port.unwrap_or(0)
            };
            if host_port == 0 {
                continue;
            }
            let protocol = port.protocol.as_ref().map_or("TCP", |p| p.as_str());
            let key = format!("{protocol}/{}/{host_port}", port.host_ip);
            if !host_ports.insert(key.clone()) {
                errors.push(FieldError::duplicate(&pp.child("hostPort"), key));
            }
        }
    }
    if check_restart_policy {
        if let Some(RestartPolicy::Other(other)) = &spec.restart_policy {
            errors.push(FieldError::not_supported(
                &path.child("restartPolicy"),
                other.as_str(),
                RestartPolicy::KNOWN,
            ));
        }
    }
    errors.extend(validate_labels(
        &spec.node_selector,
        &path.child("nodeSelector"),
    ));
    for (field, value) in [
        ("nodeName", &spec.node_name),
        ("serviceAccountName", &spec.service_account_name),
        ("priorityClassName", &spec.priority_class_name),
    ] {
        if !value.is_empty() {
            errors.extend(validate_dns1123_subdomain(value, &path.child(field)));
        }
    }
    if let Some(grace) = spec.termination_grace_period_seconds {
        errors.extend(validate_nonnegative(
            grace,
            &path.child("terminationGracePeriodSeconds"),
        ));
    }
    if let Some(context) = &spec.security_context {
        errors.extend(validate_pod_security_context(
            context,
            &path.child("securityContext"),
        ));
    }
    if let Some(node_affinity) = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
    {
        let na = path.child("affinity").child("nodeAffinity");
        if let Some(required) = &node_affinity.required_during_scheduling_ignored_during_execution {
            errors.extend(validate_node_selector(
                required,
                &na.child("requiredDuringSchedulingIgnoredDuringExecution"),
            ));
        }
        let preferred = na.child("preferredDuringSchedulingIgnoredDuringExecution");
        for (i, term) in node_affinity
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .enumerate()
        {
            let p = preferred.index(i);
            if !(1..=100).contains(&term.weight) {
                errors.push(FieldError::invalid(
                    &p.child("weight"),
                    term.weight,
                    "must be in the range 1-100",
                ));
            }
            errors.extend(validate_node_selector_term(
                &term.preference,
                &p.child("preference"),
            ));
        }
    }
    errors.extend(validate_tolerations(
        &spec.tolerations,
        &path.child("tolerations"),
    ));
    errors
}

/// Validates a pod.
pub fn validate_pod(pod: &Pod) -> Result<(), Invalid> {
    let mut errors = validate_object_meta(&pod.metadata, true, &Path::new("metadata"));
    errors.extend(validate_pod_spec(&pod.spec, &Path::new("spec"), true));
    to_result(pod, errors)
}

/// Validates an update of a pod: besides [`validate_pod`], only container
/// images may change, tolerations may only be added, and `nodeName` may
/// only be set when it was empty.
pub fn validate_pod_update(new: &Pod, old: &Pod) -> Result<(), Invalid> {
    let mut errors =
        validate_object_meta_update(&new.metadata, &old.metadata, &Path::new("metadata"));
    let mut comparable = new.spec.clone();
    if comparable.containers.len() == old.spec.containers.len() {
        for (container, old_container) in comparable.containers.iter_mut().zip(&old.spec.containers)
        {
            container.image.clone_from(&old_container.image);
        }
    }
    if old
        .spec
        .tolerations
        .iter()
        .all(|t| comparable.tolerations.contains(t))
    {
        comparable.tolerations.clone_from(&old.spec.tolerations);
    }
    if old.spec.node_name.is_empty() {
        comparable.node_name.clear();
    }
    if comparable != old.spec {
        errors.push(FieldError::forbidden(
            &Path::new("spec"),
            "pod updates may not change fields other than `spec.containers[*].image`, `spec.tolerations` (only additions to existing tolerations) and `spec.nodeName` (only when unset)",
        ));
    }
    if let Err(invalid) = validate_pod(new) {
        errors.extend(invalid.errors);
    }
    to_result(new, errors)
}

// ------------------------------------------------------------ DaemonSets

fn validate_int_or_percent(value: &IntOrString, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match value {
        IntOrString::String(text) => {
            errors.extend(
                is_valid_percent(text)
                    .into_iter()
                    .map(|m| FieldError::invalid(path, value, m)),
            );
            if value.percent().is_some_and(|p| p > 100) {
                errors.push(FieldError::invalid(
                    path,
                    value,
                    "must not be greater than 100%",
                ));
            }
        }
        IntOrString::Int(number) => errors.extend(validate_nonnegative(i64::from(*number), path)),
    }
    errors
}

fn int_or_percent_value(value: &IntOrString) -> i64 {
    match value {
        IntOrString::Int(number) => i64::from(*number),
        IntOrString::String(_) => value
            .percent()
            .map_or(0, |p| i64::try_from(p).unwrap_or(i64::MAX)),
    }
}

fn validate_rolling_update(rolling: &RollingUpdateDaemonSet, path: &Path) -> Vec<FieldError> {
    let default_unavailable = IntOrString::Int(1);
    let default_surge = IntOrString::Int(0);
    let unavailable = rolling
        .max_unavailable
        .as_ref()
        .unwrap_or(&default_unavailable);
    let surge = rolling.max_surge.as_ref().unwrap_or(&default_surge);
    let mut errors = validate_int_or_percent(unavailable, &path.child("maxUnavailable"));
    errors.extend(validate_int_or_percent(surge, &path.child("maxSurge")));
    let has_unavailable = int_or_percent_value(unavailable) != 0;
    let has_surge = int_or_percent_value(surge) != 0;
    if has_unavailable && has_surge {
        errors.push(FieldError::invalid(
            &path.child("maxSurge"),
            surge,
            "may not be set when maxUnavailable is non-zero",
        ));
    } else if !has_unavailable && !has_surge {
        errors.push(FieldError::required(
            &path.child("maxUnavailable"),
            "cannot be 0 when maxSurge is 0",
        ));
    }
    errors
}

/// Errors of a DaemonSet spec: selector required, non-empty, valid and
/// matching the template's labels; the template; restart policy `Always`;
/// update strategy; non-negative counters.
pub fn validate_daemon_set_spec(spec: &DaemonSetSpec, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let template = path.child("template");
    match &spec.selector {
        None => errors.push(FieldError::required(&path.child("selector"), "")),
        Some(selector) => {
            errors.extend(validate_label_selector(selector, &path.child("selector")));
            if selector.match_labels.is_empty() && selector.match_expressions.is_empty() {
                errors.push(FieldError::invalid(
                    &path.child("selector"),
                    BadValue::json(selector),
                    "empty selector is invalid for daemonset",
                ));
            } else if let Ok(compiled) = Selector::from_label_selector(selector) {
                if !compiled.matches(&spec.template.metadata.labels) {
                    errors.push(FieldError::invalid(
                        &template.child("metadata").child("labels"),
                        BadValue::json(&spec.template.metadata.labels),
                        "`selector` does not match template `labels`",
                    ));
                }
            }
        }
    }
    let metadata = template.child("metadata");
    errors.extend(validate_labels(
        &spec.template.metadata.labels,
        &metadata.child("labels"),
    ));
    errors.extend(validate_annotations(
        &spec.template.metadata.annotations,
        &metadata.child("annotations"),
    ));
    errors.extend(validate_pod_spec(
        &spec.template.spec,
        &template.child("spec"),
        false,
    ));
    match &spec.template.spec.restart_policy {
        None | Some(RestartPolicy::Always) => {}
        Some(other) => errors.push(FieldError::not_supported(
            &template.child("spec").child("restartPolicy"),
            other.as_str(),
            &["Always"],
        )),
    }
    if let Some(seconds) = spec.min_ready_seconds {
        errors.extend(validate_nonnegative(
            i64::from(seconds),
            &path.child("minReadySeconds"),
        ));
    }
    if let Some(limit) = spec.revision_history_limit {
        errors.extend(validate_nonnegative(
            i64::from(limit),
            &path.child("revisionHistoryLimit"),
        ));
    }
    let strategy = path.child("updateStrategy");
    match &spec.update_strategy.r#type {
        None | Some(DaemonSetUpdateStrategyType::RollingUpdate) => {
            if let Some(rolling) = &spec.update_strategy.rolling_update {
                errors.extend(validate_rolling_update(
                    rolling,
                    &strategy.child("rollingUpdate"),
                ));
            }
        }
        Some(DaemonSetUpdateStrategyType::OnDelete) => {}
        Some(DaemonSetUpdateStrategyType::Other(other)) => errors.push(FieldError::not_supported(
            &strategy.child("type"),
            other.as_str(),
            DaemonSetUpdateStrategyType::KNOWN,
        )),
    }
    errors
}

/// Validates a DaemonSet.
///
/// ```
/// use drover_api::{parse_manifests, Manifest, validation::validate_daemon_set};
///
/// let yaml = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  template:\n    metadata: {labels: {app: x}}\n    spec: {containers: [{name: Foo_1, image: busybox}]}\n";
/// let Manifest::DaemonSet(ds) = parse_manifests(yaml).unwrap().remove(0) else { panic!() };
/// let err = validate_daemon_set(&ds).unwrap_err().to_string();
/// assert!(err.starts_with("DaemonSet.apps \"x\" is invalid: [spec.selector: Required value, \
///     spec.template.spec.containers[0].name: Invalid value: \"Foo_1\": a lowercase RFC 1123 label must consist of"));
/// ```
pub fn validate_daemon_set(ds: &DaemonSet) -> Result<(), Invalid> {
    let mut errors = validate_object_meta(&ds.metadata, true, &Path::new("metadata"));
    if let Err((annotation, reason)) = crate::annotations::auto_rollback(&ds.metadata) {
        let value = ds.metadata.annotations.get(annotation).cloned();
        errors.push(FieldError::invalid(
            &Path::new("metadata").child("annotations").key(annotation),
            value.unwrap_or_default(),
            reason,
        ));
    }
    errors.extend(validate_daemon_set_spec(&ds.spec, &Path::new("spec")));
    to_result(ds, errors)
}

/// Valid but risky settings of a DaemonSet, for `apply` to warn about: a
/// rolling update with `maxSurge` starts the new pod beside the old one on
/// the same node, which cannot work when the pod binds a host port or uses
/// the host network (kubernetes #106417: the surge pod never starts and the
/// rollout stalls).
pub fn daemon_set_warnings(ds: &DaemonSet) -> Vec<String> {
    let mut out = Vec::new();
    let surges = !matches!(
        ds.spec.update_strategy.r#type,
        Some(DaemonSetUpdateStrategyType::OnDelete)
    ) && ds
        .spec
        .update_strategy
        .rolling_update
        .as_ref()
        .and_then(|r| r.max_surge.as_ref())
        .is_some_and(|s| match s {
            IntOrString::Int(n) => *n > 0,
            IntOrString::String(p) => p
                .strip_suffix('%')
                .and_then(|p| p.parse::<i64>().ok())
                .is_some_and(|p| p > 0),
        });
    if !surges {
        return out;
    }
    let spec = &ds.spec.template.spec;
    if spec.host_network {
        out.push(
            "spec.updateStrategy.rollingUpdate.maxSurge with spec.template.spec.hostNetwork: \
             the new pod shares the node's ports with the old one and may not start until it \
             is gone; use maxUnavailable instead of maxSurge"
                .to_owned(),
        );
    }
    for (i, c) in spec.containers.iter().enumerate() {
        for (j, p) in c.ports.iter().enumerate() {
            if let Some(hp) = p.host_port.filter(|hp| *hp > 0) {
                out.push(format!(
                    "spec.updateStrategy.rollingUpdate.maxSurge with \
                     spec.template.spec.containers[{i}].ports[{j}].hostPort {hp}: the new pod \
                     cannot bind the port while the old one holds it, so the rollout stalls; \
                     use maxUnavailable instead of maxSurge"
                ));
            }
        }
    }
    out
}

/// Validates an update of a DaemonSet: besides [`validate_daemon_set`], the
/// selector, name and namespace can't change.
pub fn validate_daemon_set_update(new: &DaemonSet, old: &DaemonSet) -> Result<(), Invalid> {
    let mut errors =
        validate_object_meta_update(&new.metadata, &old.metadata, &Path::new("metadata"));
    errors.extend(validate_immutable(
        &new.spec.selector,
        &old.spec.selector,
        &Path::new("spec").child("selector"),
    ));
    if let Err(invalid) = validate_daemon_set(new) {
        errors.extend(invalid.errors);
    }
    to_result(new, errors)
}

// ------------------------------------------------------------ other kinds

/// Validates a node: name, labels, taints.
pub fn validate_node(node: &Node) -> Result<(), Invalid> {
    let mut errors = validate_object_meta(&node.metadata, false, &Path::new("metadata"));
    errors.extend(validate_taints(
        &node.spec.taints,
        &Path::new("spec").child("taints"),
    ));
    to_result(node, errors)
}

/// Validates an update of a node: besides [`validate_node`], its name can't change.
pub fn validate_node_update(new: &Node, old: &Node) -> Result<(), Invalid> {
    let mut errors =
        validate_object_meta_update(&new.metadata, &old.metadata, &Path::new("metadata"));
    if let Err(invalid) = validate_node(new) {
        errors.extend(invalid.errors);
    }
    to_result(new, errors)
}

/// Validates a ControllerRevision: metadata, `data` present, `revision` non-negative.
pub fn validate_controller_revision(revision: &ControllerRevision) -> Result<(), Invalid> {
    let mut errors = validate_object_meta(&revision.metadata, true, &Path::new("metadata"));
    if revision.data.is_null() {
        errors.push(FieldError::required(
            &Path::new("data"),
            "data is mandatory",
        ));
    }
    errors.extend(validate_nonnegative(
        revision.revision,
        &Path::new("revision"),
    ));
    to_result(revision, errors)
}

/// Validates an event: metadata, and the object it is about.
pub fn validate_event(event: &Event) -> Result<(), Invalid> {
    let mut errors = validate_object_meta(&event.metadata, true, &Path::new("metadata"));
    let involved = Path::new("involvedObject");
    if event.involved_object.kind.is_empty() {
        errors.push(FieldError::required(&involved.child("kind"), ""));
    }
    if event.involved_object.name.is_empty() {
        errors.push(FieldError::required(&involved.child("name"), ""));
    }
    to_result(event, errors)
}

/// Validates any manifest.
pub fn validate_manifest(manifest: &Manifest) -> Result<(), Invalid> {
    match manifest {
        Manifest::DaemonSet(ds) => validate_daemon_set(ds),
        Manifest::Pod(pod) => validate_pod(pod),
        Manifest::Node(node) => validate_node(node),
        Manifest::ControllerRevision(revision) => validate_controller_revision(revision),
        Manifest::Event(event) => validate_event(event),
    }
}

/// Validates the update of an object to a new manifest of the same kind
/// (two different kinds are validated as a creation of `new`).
pub fn validate_manifest_update(new: &Manifest, old: &Manifest) -> Result<(), Invalid> {
    match (new, old) {
        (Manifest::DaemonSet(new), Manifest::DaemonSet(old)) => {
            validate_daemon_set_update(new, old)
        }
        (Manifest::Pod(new), Manifest::Pod(old)) => validate_pod_update(new, old),
        (Manifest::Node(new), Manifest::Node(old)) => validate_node_update(new, old),
        (new, _) => validate_manifest(new),
    }
}
