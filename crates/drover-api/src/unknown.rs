//! Fields drover does not implement: kept, and reported.
//!
//! Every API struct keeps the fields it does not know in its `extra` map, so
//! they survive a round trip through the store. [`unknown_fields`] lists
//! them with their path, and whether Kubernetes has them
//! ([`crate::kubernetes_fields`]): a field of Kubernetes that drover does
//! not act on is a warning; a field Kubernetes does not have either (a
//! typo such as `comand:`) is refused under strict field validation, the
//! default of `kubectl apply` and of `drover apply` ([`FieldValidation`]).

use std::collections::BTreeMap;
use std::fmt;

/// A field of a manifest that drover keeps but does not act on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct UnknownField {
    /// The field's path in Kubernetes notation, e.g.
    /// `spec.template.spec.volumes[2].configMap`.
    pub path: String,
    /// Whether Kubernetes has the field (drover does not act on it), or
    /// not (a field no Kubernetes object has: a typo, most likely).
    pub in_kubernetes: bool,
}

impl fmt::Display for UnknownField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.in_kubernetes {
            write!(
                f,
                "field {:?} is not supported by drover (kept, but drover does not act on it)",
                self.path
            )
        } else {
            write!(f, "unknown field {:?}", self.path)
        }
    }
}

/// What to do with fields Kubernetes does not have, as the API server's
/// `fieldValidation` and `kubectl apply --validate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Refuse the object (the default).
    #[default]
    Strict,
    /// Accept it with a warning per field.
    Warn,
    /// Accept it silently (fields Kubernetes has but drover does not act
    /// on are still named in a warning).
    Ignore,
}

impl FieldValidation {
    /// Parses kubectl's `--validate` values (`strict`, `warn`, `ignore`,
    /// and the older `true`/`false`) and the API server's `fieldValidation`
    /// (`Strict`, `Warn`, `Ignore`). Empty means the default, strict.
    pub fn parse(s: &str) -> Option<FieldValidation> {
        match s.to_ascii_lowercase().as_str() {
            "" | "strict" | "true" => Some(FieldValidation::Strict),
            "warn" => Some(FieldValidation::Warn),
            "ignore" | "false" => Some(FieldValidation::Ignore),
            _ => None,
        }
    }

    /// The API server's name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldValidation::Strict => "Strict",
            FieldValidation::Warn => "Warn",
            FieldValidation::Ignore => "Ignore",
        }
    }
}

/// Lists the unknown fields of an object (any API type), in path order.
///
/// ```
/// let manifests = drover_api::parse_manifests(
///     "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  dnsPolicy: Default\n  containers: [{name: c, image: i, comand: [sh]}]\n",
/// ).unwrap();
/// let fields = manifests[0].unknown_fields();
/// assert_eq!(fields[0].path, "spec.containers[0].comand");
/// assert_eq!(fields[0].to_string(), "unknown field \"spec.containers[0].comand\"");
/// assert_eq!(fields[1].path, "spec.dnsPolicy");
/// assert_eq!(fields[1].to_string(), "field \"spec.dnsPolicy\" is not supported by drover (kept, but drover does not act on it)");
/// ```
pub fn unknown_fields<T: CollectUnknown + ?Sized>(object: &T) -> Vec<UnknownField> {
    let mut path = String::new();
    let mut fields = Vec::new();
    object.collect_unknown(&mut path, &mut fields);
    fields.sort();
    fields
}

/// Walks a value and pushes the path of every unknown field it keeps.
pub trait CollectUnknown {
    /// Pushes onto `out` the unknown fields under `path`.
    fn collect_unknown(&self, path: &mut String, out: &mut Vec<UnknownField>);
}

/// Runs `f` with `path` extended by the field `name`, then restores `path`.
pub(crate) fn child(path: &mut String, name: &str, f: impl FnOnce(&mut String)) {
    let len = path.len();
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(name);
    f(path);
    path.truncate(len);
}

macro_rules! leaf {
    ($($ty:ty),*) => {
        $(impl CollectUnknown for $ty {
            fn collect_unknown(&self, _path: &mut String, _out: &mut Vec<UnknownField>) {}
        })*
    };
}
leaf!(String, bool, i32, i64, u32, u64, serde_json::Value);

impl<T: CollectUnknown> CollectUnknown for Option<T> {
    fn collect_unknown(&self, path: &mut String, out: &mut Vec<UnknownField>) {
        if let Some(value) = self {
            value.collect_unknown(path, out);
        }
    }
}

impl<T: CollectUnknown> CollectUnknown for Vec<T> {
    fn collect_unknown(&self, path: &mut String, out: &mut Vec<UnknownField>) {
        for (index, item) in self.iter().enumerate() {
            let len = path.len();
            path.push_str(&format!("[{index}]"));
            item.collect_unknown(path, out);
            path.truncate(len);
        }
    }
}

impl<T: CollectUnknown> CollectUnknown for BTreeMap<String, T> {
    fn collect_unknown(&self, path: &mut String, out: &mut Vec<UnknownField>) {
        for (key, value) in self {
            let len = path.len();
            path.push_str(&format!("[{key}]"));
            value.collect_unknown(path, out);
            path.truncate(len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_validation_reads_kubectl_validate_values_and_the_api_server_modes() {
        let cases = [
            ("", Some(FieldValidation::Strict)),
            ("strict", Some(FieldValidation::Strict)),
            ("Strict", Some(FieldValidation::Strict)),
            ("true", Some(FieldValidation::Strict)),
            ("warn", Some(FieldValidation::Warn)),
            ("Warn", Some(FieldValidation::Warn)),
            ("ignore", Some(FieldValidation::Ignore)),
            ("Ignore", Some(FieldValidation::Ignore)),
            ("false", Some(FieldValidation::Ignore)),
            ("lenient", None),
            ("yes", None),
        ];
        for (text, want) in cases {
            assert_eq!(FieldValidation::parse(text), want, "{text:?}");
        }
        for mode in [
            FieldValidation::Strict,
            FieldValidation::Warn,
            FieldValidation::Ignore,
        ] {
            assert_eq!(FieldValidation::parse(mode.as_str()), Some(mode));
        }
    }

    #[test]
    fn unknown_fields_inside_map_values_are_named_by_their_key() {
        let container: crate::Container = serde_json::from_value(
            serde_json::json!({"name": "c", "image": "i", "comand": ["sh"]}),
        )
        .unwrap();
        let map: BTreeMap<String, crate::Container> = [("app".to_string(), container)].into();
        assert_eq!(
            unknown_fields(&map),
            [UnknownField {
                path: "[app].comand".into(),
                in_kubernetes: false,
            }]
        );
    }
}
