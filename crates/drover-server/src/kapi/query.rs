//! The query parameters of a request, read and bounded: selectors, paging,
//! watch, dry run, field validation, table options.

use super::status::Refusal;
use crate::limits::{MAX_KAPI_LIST_LIMIT, MAX_KAPI_QUERY_BYTES, MAX_WATCH_SECONDS};
use drover_api::selector::Selector;
use drover_api::{FieldValidation, Manifest};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

/// One `fieldSelector` term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    pub path: String,
    pub equal: bool,
    pub value: String,
}

/// A `fieldSelector`: every term must hold. Any field path of the object
/// may be named (`metadata.name`, `spec.nodeName`, `status.phase`,
/// `involvedObject.uid`); a missing field reads as `""`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<FieldTerm>);

impl FieldSelector {
    pub fn parse(s: &str) -> Result<FieldSelector, String> {
        let mut terms = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (path, equal, value) = if let Some((p, v)) = part.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = part.split_once("==") {
                (p, true, v)
            } else if let Some((p, v)) = part.split_once('=') {
                (p, true, v)
            } else {
                return Err(format!(
                    "invalid selector: {part:?}: expected FIELD=VALUE, FIELD==VALUE or FIELD!=VALUE"
                ));
            };
            let path = path.trim();
            if path.is_empty() || !path.chars().all(|c| c.is_ascii_alphanumeric() || c == '.') {
                return Err(format!("invalid field path {path:?} in {part:?}"));
            }
            terms.push(FieldTerm {
                path: path.to_string(),
                equal,
                value: value.trim().to_string(),
            });
        }
        Ok(FieldSelector(terms))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the object (as JSON) matches.
    pub fn matches(&self, v: &Value) -> bool {
        self.0.iter().all(|t| {
            let mut cur = Some(v);
            for seg in t.path.split('.') {
                cur = cur.and_then(|c| c.get(seg));
            }
            let have = match cur {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            };
            (have == t.value) == t.equal
        })
    }

    /// The name a `metadata.name=X` term asks for, if any.
    pub fn name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|t| t.equal && t.path == "metadata.name")
            .map(|t| t.value.as_str())
    }
}

/// What `includeObject` asks a Table's rows to carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

/// The parameters of a request.
#[derive(Debug, Clone)]
pub struct Query {
    pub labels: Option<Selector>,
    pub fields: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub watch: bool,
    pub resource_version: Option<String>,
    pub bookmarks: bool,
    pub timeout: Duration,
    pub dry_run: bool,
    pub field_validation: FieldValidation,
    pub include_object: IncludeObject,
    pub propagation: Option<String>,
    pub raw: HashMap<String, String>,
}

fn truthy(v: &str) -> bool {
    matches!(v, "1" | "true" | "True" | "yes")
}

impl Query {
    /// Reads the query string of a request.
    pub fn parse(q: Option<&str>) -> Result<Query, Refusal> {
        let q = q.unwrap_or("");
        if q.len() > MAX_KAPI_QUERY_BYTES {
            return Err(Refusal::bad_request(format!(
                "the query string is {} bytes, more than the limit of {MAX_KAPI_QUERY_BYTES}",
                q.len()
            )));
        }
        let raw: HashMap<String, String> = serde_urlencoded::from_str(q)
            .map_err(|e| Refusal::bad_request(format!("the query string: {e}")))?;
        let get = |k: &str| raw.get(k).map(String::as_str).filter(|v| !v.is_empty());
        let labels = match get("labelSelector") {
            None => None,
            Some(s) => Some(Selector::parse(s).map_err(|e| {
                Refusal::bad_request(format!("unable to parse labelSelector {s:?}: {e}"))
            })?),
        };
        let fields = match get("fieldSelector") {
            None => FieldSelector::default(),
            Some(s) => FieldSelector::parse(s)
                .map_err(|e| Refusal::bad_request(format!("fieldSelector {s:?}: {e}")))?,
        };
        let limit = match get("limit") {
            None => None,
            Some(s) => match s.parse::<i64>() {
                Ok(n) if n <= 0 => None,
                Ok(n) => Some((n as u64).min(MAX_KAPI_LIST_LIMIT as u64) as usize),
                Err(_) => return Err(Refusal::bad_request(format!("limit {s:?}: not a number"))),
            },
        };
        let timeout = match get("timeoutSeconds") {
            None => MAX_WATCH_SECONDS,
            Some(s) => match s.parse::<u64>() {
                Ok(n) => Duration::from_secs(n).min(MAX_WATCH_SECONDS),
                Err(_) => {
                    return Err(Refusal::bad_request(format!(
                        "timeoutSeconds {s:?}: not a number"
                    )))
                }
            },
        };
        let field_validation = match get("fieldValidation") {
            None => FieldValidation::Warn,
            Some(s) => FieldValidation::parse(s).ok_or_else(|| {
                Refusal::bad_request(format!(
                    "fieldValidation {s:?}: not one of Strict, Warn, Ignore"
                ))
            })?,
        };
        let dry_run = match get("dryRun") {
            None => false,
            Some("All") => true,
            Some(s) => {
                return Err(Refusal::bad_request(format!(
                    "dryRun {s:?}: the only dry run is All"
                )))
            }
        };
        let include_object = match get("includeObject") {
            None | Some("Metadata") => IncludeObject::Metadata,
            Some("Object") => IncludeObject::Object,
            Some("None") => IncludeObject::None,
            Some(s) => {
                return Err(Refusal::bad_request(format!(
                    "includeObject {s:?}: not one of None, Metadata, Object"
                )))
            }
        };
        Ok(Query {
            labels,
            fields,
            limit,
            continue_token: get("continue").map(str::to_string),
            watch: get("watch").is_some_and(truthy),
            resource_version: get("resourceVersion").map(str::to_string),
            bookmarks: get("allowWatchBookmarks").is_some_and(truthy),
            timeout,
            dry_run,
            field_validation,
            include_object,
            propagation: get("propagationPolicy").map(str::to_string),
            raw,
        })
    }

    /// Whether an object passes the label and field selectors.
    pub fn selects(&self, m: &Manifest) -> bool {
        if let Some(s) = &self.labels {
            if !s.matches(&m.metadata().labels) {
                return false;
            }
        }
        self.fields.is_empty()
            || self
                .fields
                .matches(&serde_json::to_value(m).unwrap_or(Value::Null))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_selectors_read_any_path() {
        let v = serde_json::json!({"metadata": {"name": "a"}, "spec": {"nodeName": "n1", "unschedulable": true}});
        let f = FieldSelector::parse("metadata.name=a,spec.nodeName!=n2").unwrap();
        assert!(f.matches(&v));
        assert_eq!(f.name(), Some("a"));
        assert!(FieldSelector::parse("spec.unschedulable==true")
            .unwrap()
            .matches(&v));
        assert!(!FieldSelector::parse("spec.nodeName=n2")
            .unwrap()
            .matches(&v));
        assert!(FieldSelector::parse("status.phase!=Failed")
            .unwrap()
            .matches(&v));
        assert!(FieldSelector::parse("nonsense").is_err());
        assert!(FieldSelector::parse("a b=c").is_err());
    }

    #[test]
    fn parameters_are_read_and_bounded() {
        let q = Query::parse(Some(
            "labelSelector=app%3Dweb&limit=99999999&watch=1&resourceVersion=7&timeoutSeconds=999999&dryRun=All",
        ))
        .unwrap();
        assert!(q.labels.is_some());
        assert_eq!(q.limit, Some(MAX_KAPI_LIST_LIMIT));
        assert!(q.watch);
        assert_eq!(q.resource_version.as_deref(), Some("7"));
        assert_eq!(q.timeout, MAX_WATCH_SECONDS);
        assert!(q.dry_run);
        assert!(Query::parse(Some("limit=x")).is_err());
        assert!(Query::parse(Some("dryRun=Some")).is_err());
        assert!(Query::parse(Some("labelSelector=a%20in")).is_err());
        assert!(Query::parse(Some(&"a=b&".repeat(10_000))).is_err());
    }
}
