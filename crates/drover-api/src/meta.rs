//! Object metadata and the small shared value types (`meta/v1` in
//! Kubernetes): [`ObjectMeta`], [`OwnerReference`], [`LabelSelector`],
//! [`IntOrString`].

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::serde_util::{EnumField, Omit};
use crate::unknown::CollectUnknown;

/// Labels (or annotations, or a node selector): an ordered string map.
pub type Labels = BTreeMap<String, String>;

api_struct! {
    /// Metadata that every object has: identity, version and labels.
    pub struct ObjectMeta {
        /// Unique within a namespace (or the cluster, for nodes); a DNS subdomain.
        name: String = "name",
        /// A prefix for a name the server generates when `name` is empty.
        generate_name: String = "generateName",
        /// The namespace; `default` when a manifest gives none. Empty for nodes.
        namespace: String = "namespace",
        /// Set by the server on creation, never reused.
        uid: String = "uid",
        /// The raft index of the object's last write (opaque to clients).
        resource_version: String = "resourceVersion",
        /// Incremented by the server on every change of `spec`.
        generation: Option<i64> = "generation",
        /// RFC 3339 time of creation, set by the server.
        creation_timestamp: Option<String> = "creationTimestamp",
        /// RFC 3339 time after which the object is being deleted.
        deletion_timestamp: Option<String> = "deletionTimestamp",
        /// Seconds the object has to stop gracefully once deletion started.
        deletion_grace_period_seconds: Option<i64> = "deletionGracePeriodSeconds",
        /// Identifying key/value pairs that selectors match.
        labels: Labels = "labels",
        /// Non-identifying key/value pairs.
        annotations: Labels = "annotations",
        /// The objects this one belongs to (a daemon pod's DaemonSet).
        owner_references: Vec<OwnerReference> = "ownerReferences",
        /// Finalizers that must be removed before the object is deleted.
        finalizers: Vec<String> = "finalizers",
    }
}

api_struct! {
    /// A reference to the object that owns this one.
    pub struct OwnerReference {
        /// API version of the owner, e.g. `apps/v1`.
        api_version: String = "apiVersion",
        /// Kind of the owner, e.g. `DaemonSet`.
        kind: String = "kind",
        /// Name of the owner.
        name: String = "name",
        /// UID of the owner.
        uid: String = "uid",
        /// Whether the owner is the managing controller (at most one is).
        controller: Option<bool> = "controller",
        /// Whether the owner can't be deleted before this object.
        block_owner_deletion: Option<bool> = "blockOwnerDeletion",
    }
}

impl ObjectMeta {
    /// The owner reference that has `controller: true`, if any.
    pub fn controller_ref(&self) -> Option<&OwnerReference> {
        self.owner_references
            .iter()
            .find(|r| r.controller == Some(true))
    }

    /// `metadata.resourceVersion` as the revision it names: `None` when the
    /// object carries none (a write that is not a compare-and-swap), an
    /// error when it is not a number. Never read it with
    /// `parse().unwrap_or(0)`: 0 means "no compare-and-swap", so a
    /// malformed version would turn into an unconditional write.
    pub fn revision(&self) -> Result<Option<u64>, BadResourceVersion> {
        if self.resource_version.is_empty() {
            return Ok(None);
        }
        match self.resource_version.parse::<u64>() {
            Ok(0) | Err(_) => Err(BadResourceVersion(self.resource_version.clone())),
            Ok(v) => Ok(Some(v)),
        }
    }
}

/// A `metadata.resourceVersion` that is not one a server gave out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metadata.resourceVersion: Invalid value: {0:?}: not a resourceVersion this server gave out (a positive integer); read the object again")]
pub struct BadResourceVersion(pub String);

api_struct! {
    /// A label query: `matchLabels` and `matchExpressions`, all ANDed.
    /// An empty selector matches everything.
    pub struct LabelSelector {
        /// `key: value` pairs, each an `In` requirement with a single value.
        match_labels: Labels = "matchLabels",
        /// Set-based requirements.
        match_expressions: Vec<LabelSelectorRequirement> = "matchExpressions",
    }
}

api_struct! {
    /// One set-based requirement of a [`LabelSelector`].
    pub struct LabelSelectorRequirement {
        /// The label key.
        key: String = "key",
        /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
        operator: Option<LabelSelectorOperator> = "operator" as EnumField<LabelSelectorOperator>,
        /// The values for `In` and `NotIn`; empty for the others.
        values: Vec<String> = "values",
    }
}

string_enum! {
    /// Operator of a [`LabelSelectorRequirement`].
    pub enum LabelSelectorOperator {
        /// The label exists and its value is one of the values.
        In = "In",
        /// The label is absent, or its value is none of the values.
        NotIn = "NotIn",
        /// The label exists.
        Exists = "Exists",
        /// The label is absent.
        DoesNotExist = "DoesNotExist",
    }
}

/// An integer or a string, such as `maxUnavailable: 1` or `"10%"`, or a
/// probe port given by number or by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IntOrString {
    /// A number.
    Int(i32),
    /// A string (a percentage like `"25%"`, or a port name).
    String(String),
}

impl Default for IntOrString {
    fn default() -> Self {
        IntOrString::Int(0)
    }
}

impl From<i32> for IntOrString {
    fn from(value: i32) -> Self {
        IntOrString::Int(value)
    }
}

impl From<&str> for IntOrString {
    fn from(value: &str) -> Self {
        IntOrString::String(value.to_owned())
    }
}

impl fmt::Display for IntOrString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntOrString::Int(value) => write!(f, "{value}"),
            IntOrString::String(value) => f.write_str(value),
        }
    }
}

impl IntOrString {
    /// The percentage of a valid `"N%"` string (N made of digits only), or
    /// `None` for an integer or any other string.
    pub fn percent(&self) -> Option<u64> {
        match self {
            IntOrString::String(text) => {
                let digits = text.strip_suffix('%')?;
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                digits.parse().ok()
            }
            IntOrString::Int(_) => None,
        }
    }

    /// Resolves the value against a total, as Kubernetes'
    /// `GetScaledValueFromIntOrPercent` does: an integer as is, a percentage
    /// of `total` rounded up (`round_up`) or down. `None` for a string that
    /// is not a valid percentage, or a negative integer.
    pub fn scaled_value(&self, total: u64, round_up: bool) -> Option<u64> {
        match self {
            IntOrString::Int(value) => u64::try_from(*value).ok(),
            IntOrString::String(_) => {
                let percent = self.percent()?;
                let product = percent.checked_mul(total)?;
                Some(if round_up {
                    product.div_ceil(100)
                } else {
                    product / 100
                })
            }
        }
    }
}

impl Serialize for IntOrString {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            IntOrString::Int(value) => serializer.serialize_i32(*value),
            IntOrString::String(value) => serializer.serialize_str(value),
        }
    }
}

impl<'de> Deserialize<'de> for IntOrString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IntOrStringVisitor;
        impl Visitor<'_> for IntOrStringVisitor {
            type Value = IntOrString;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or a string")
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<IntOrString, E> {
                i32::try_from(value)
                    .map(IntOrString::Int)
                    .map_err(|_| E::custom(format!("integer {value} is out of range")))
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<IntOrString, E> {
                i32::try_from(value)
                    .map(IntOrString::Int)
                    .map_err(|_| E::custom(format!("integer {value} is out of range")))
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<IntOrString, E> {
                Ok(IntOrString::String(value.to_owned()))
            }
        }
        deserializer.deserialize_any(IntOrStringVisitor)
    }
}

impl Omit for IntOrString {
    fn omit(&self) -> bool {
        false
    }
}

impl CollectUnknown for IntOrString {
    fn collect_unknown(&self, _path: &mut String, _out: &mut Vec<crate::UnknownField>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_or_string_round_trips_both_forms() {
        let int: IntOrString = serde_json::from_str("3").unwrap();
        assert_eq!(int, IntOrString::Int(3));
        let text: IntOrString = serde_json::from_str("\"25%\"").unwrap();
        assert_eq!(text, IntOrString::String("25%".into()));
        assert_eq!(serde_json::to_string(&text).unwrap(), "\"25%\"");
        assert!(serde_json::from_str::<IntOrString>("1.5").is_err());
        assert!(serde_json::from_str::<IntOrString>("3000000000").is_err());
    }

    #[test]
    fn int_or_string_displays_as_written() {
        assert_eq!(IntOrString::Int(3).to_string(), "3");
        assert_eq!(IntOrString::Int(-1).to_string(), "-1");
        assert_eq!(IntOrString::from("25%").to_string(), "25%");
        assert_eq!(
            format!("maxUnavailable={}", IntOrString::from(1)),
            "maxUnavailable=1"
        );
    }

    #[test]
    fn percentages_scale_like_kubernetes() {
        let p = IntOrString::from("25%");
        assert_eq!(p.percent(), Some(25));
        assert_eq!(p.scaled_value(10, true), Some(3));
        assert_eq!(p.scaled_value(10, false), Some(2));
        assert_eq!(IntOrString::Int(4).scaled_value(10, true), Some(4));
        assert_eq!(IntOrString::from("x%").scaled_value(10, true), None);
        assert_eq!(IntOrString::from("%").percent(), None);
        assert_eq!(IntOrString::Int(-1).scaled_value(10, true), None);
    }

    #[test]
    fn object_meta_keeps_unknown_fields_and_omits_empty_ones() {
        let meta: ObjectMeta = serde_json::from_str(
            r#"{"name":"a","labels":{"x":"y"},"managedFields":[{"manager":"kubectl"}],"creationTimestamp":null}"#,
        )
        .unwrap();
        assert_eq!(meta.name, "a");
        assert_eq!(meta.creation_timestamp, None);
        assert!(meta.extra.contains_key("managedFields"));
        let json = serde_json::to_value(&meta).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name":"a","labels":{"x":"y"},"managedFields":[{"manager":"kubectl"}]})
        );
    }

    #[test]
    fn empty_operator_reads_as_unset() {
        let req: LabelSelectorRequirement =
            serde_json::from_str(r#"{"key":"a","operator":""}"#).unwrap();
        assert_eq!(req.operator, None);
        let req: LabelSelectorRequirement =
            serde_json::from_str(r#"{"key":"a","operator":"Bogus"}"#).unwrap();
        assert_eq!(
            req.operator,
            Some(LabelSelectorOperator::Other("Bogus".into()))
        );
    }
}

#[cfg(test)]
mod revision_tests {
    use super::*;

    #[test]
    fn resource_versions_are_positive_integers_or_absent() {
        let mut m = ObjectMeta::default();
        assert_eq!(m.revision(), Ok(None));
        m.resource_version = "42".into();
        assert_eq!(m.revision(), Ok(Some(42)));
        for bad in ["0", "-1", "x", "4 2", "18446744073709551616"] {
            m.resource_version = bad.into();
            assert_eq!(m.revision(), Err(BadResourceVersion(bad.into())), "{bad}");
        }
    }
}
