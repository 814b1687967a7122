//! The errors validation reports, in the API server's format: one
//! [`FieldError`] per bad field (its [`ErrorType`] and [`BadValue`]), all of
//! an object's gathered into one [`Invalid`]; and the field [`Path`] they
//! name.

use std::collections::BTreeSet;
use std::fmt;

use serde::Serialize;

use super::names::ECHOED_VALUE_MAX_BYTES;
use crate::meta::IntOrString;
use crate::Resource;

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
    /// A list or map with too many items (`Too many`).
    TooMany,
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
            ErrorType::TooMany => "Too many",
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

/// A value as an error message echoes it: at most
/// [`ECHOED_VALUE_MAX_BYTES`] bytes of it (cut at a character boundary),
/// and how many bytes were left out. Answers the shown part and that count.
pub fn shorten(value: &str) -> (&str, usize) {
    if value.len() <= ECHOED_VALUE_MAX_BYTES {
        return (value, 0);
    }
    let mut end = ECHOED_VALUE_MAX_BYTES;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    (&value[..end], value.len() - end)
}

/// Writes `shown` (already formatted) and, when bytes were left out, `…
/// (N more bytes)`.
fn write_shortened(f: &mut fmt::Formatter<'_>, shown: &str, more: usize) -> fmt::Result {
    f.write_str(shown)?;
    if more > 0 {
        write!(f, "\u{2026} ({more} more bytes)")?;
    }
    Ok(())
}

/// A string quoted as `{:?}` does, shortened by [`shorten`].
pub(crate) struct Quoted<'a>(pub &'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (shown, more) = shorten(self.0);
        write_shortened(f, &format!("{shown:?}"), more)
    }
}

impl fmt::Display for BadValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadValue::None => Ok(()),
            BadValue::String(s) => write!(f, "{}", Quoted(s)),
            BadValue::Int(i) => write!(f, "{i}"),
            BadValue::Bool(b) => write!(f, "{b}"),
            BadValue::Json(v) => {
                let text = v.to_string();
                let (shown, more) = shorten(&text);
                write_shortened(f, shown, more)
            }
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

    /// `Too many: <count>: must have at most <max> items`.
    pub fn too_many(path: &Path, count: usize, max: usize) -> Self {
        Self::new(
            path,
            ErrorType::TooMany,
            BadValue::Int(i64::try_from(count).unwrap_or(i64::MAX)),
            format!("must have at most {max} items"),
        )
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

impl FieldError {
    /// The error without its path (`Required value: …`), as the API
    /// server's `Status` causes carry it beside the field.
    pub fn body(&self) -> String {
        let mut out = self.error_type.to_string();
        let shows_value = !matches!(
            self.error_type,
            ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong
        ) && self.value != BadValue::None;
        if shows_value {
            out.push_str(&format!(": {}", self.value));
        }
        if !self.detail.is_empty() {
            out.push_str(&format!(": {}", self.detail));
        }
        out
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.body())
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
        write!(f, "{} {} is invalid: ", self.kind, Quoted(&self.name))?;
        if messages.len() == 1 {
            f.write_str(&messages[0])
        } else {
            write!(f, "[{}]", messages.join(", "))
        }
    }
}

pub(super) fn to_result<T: Resource>(object: &T, errors: Vec<FieldError>) -> Result<(), Invalid> {
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
