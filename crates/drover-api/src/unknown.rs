//! Fields drover does not implement: kept, and reported as warnings.
//!
//! Every API struct keeps the fields it does not know in its `extra` map, so
//! they survive a round trip through the store. [`unknown_fields`] lists
//! them with their path, for the warnings that `apply` prints, in the words
//! of kubectl's field validation (`unknown field "spec.foo"`).

use std::collections::BTreeMap;
use std::fmt;

/// A field of a manifest that drover keeps but does not act on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct UnknownField {
    /// The field's path in Kubernetes notation, e.g.
    /// `spec.template.spec.volumes[2].configMap`.
    pub path: String,
}

impl fmt::Display for UnknownField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown field {:?} (kept, but drover does not act on it)",
            self.path
        )
    }
}

/// Lists the unknown fields of an object (any API type), in path order.
///
/// ```
/// let manifests = drover_api::parse_manifests(
///     "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  dnsPolicy: Default\n  containers: [{name: c, image: i}]\n",
/// ).unwrap();
/// let warnings = manifests[0].unknown_fields();
/// assert_eq!(warnings[0].path, "spec.dnsPolicy");
/// assert_eq!(warnings[0].to_string(), "unknown field \"spec.dnsPolicy\" (kept, but drover does not act on it)");
/// ```
pub fn unknown_fields<T: CollectUnknown + ?Sized>(object: &T) -> Vec<UnknownField> {
    let mut path = String::new();
    let mut paths = Vec::new();
    object.collect_unknown(&mut path, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|path| UnknownField { path })
        .collect()
}

/// Walks a value and pushes the path of every unknown field it keeps.
pub trait CollectUnknown {
    /// Pushes onto `out` the paths of the unknown fields under `path`.
    fn collect_unknown(&self, path: &mut String, out: &mut Vec<String>);
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
            fn collect_unknown(&self, _path: &mut String, _out: &mut Vec<String>) {}
        })*
    };
}
leaf!(String, bool, i32, i64, u32, u64, serde_json::Value);

impl<T: CollectUnknown> CollectUnknown for Option<T> {
    fn collect_unknown(&self, path: &mut String, out: &mut Vec<String>) {
        if let Some(value) = self {
            value.collect_unknown(path, out);
        }
    }
}

impl<T: CollectUnknown> CollectUnknown for Vec<T> {
    fn collect_unknown(&self, path: &mut String, out: &mut Vec<String>) {
        for (index, item) in self.iter().enumerate() {
            let len = path.len();
            path.push_str(&format!("[{index}]"));
            item.collect_unknown(path, out);
            path.truncate(len);
        }
    }
}

impl<T: CollectUnknown> CollectUnknown for BTreeMap<String, T> {
    fn collect_unknown(&self, path: &mut String, out: &mut Vec<String>) {
        for (key, value) in self {
            let len = path.len();
            path.push_str(&format!("[{key}]"));
            value.collect_unknown(path, out);
            path.truncate(len);
        }
    }
}
