//! drover's API: the resources, with Kubernetes' shapes and field names, and
//! the pure functions around them. No I/O, no clock, no network.
//!
//! - Resources ([`core_v1`], [`apps_v1`], [`meta`]): [`Pod`], [`Node`],
//!   [`Event`], [`DaemonSet`], [`ControllerRevision`], read and written as
//!   JSON or YAML. Fields drover does not implement are kept in each
//!   struct's `extra` map and listed by [`unknown_fields`].
//! - Manifests ([`manifest`]): [`parse_manifests`] reads a YAML stream or
//!   JSON (an object, several, or a `List`) into [`Manifest`]s.
//! - Validation ([`validation`]): the API server's rules and its error
//!   format, e.g. `DaemonSet.apps "x" is invalid: spec.selector: Required value`.
//! - Defaulting ([`defaults`]): the values the API server fills in.
//! - Matching: label selectors and the `-l` syntax ([`selector`]), required
//!   node affinity with explanations for `describe` ([`node_affinity`]),
//!   taints and tolerations, and the tolerations of daemon pods
//!   ([`taints`]).
//!
//! ```
//! use drover_api::{parse_manifests, Manifest};
//!
//! let yaml = r#"
//! apiVersion: apps/v1
//! kind: DaemonSet
//! metadata: {name: agent}
//! spec:
//!   selector: {matchLabels: {app: agent}}
//!   template:
//!     metadata: {labels: {app: agent}}
//!     spec:
//!       containers: [{name: agent, image: "busybox:1.36"}]
//! "#;
//! let manifests = parse_manifests(yaml).unwrap();
//! let Manifest::DaemonSet(ds) = &manifests[0] else { panic!() };
//! assert_eq!(ds.metadata.namespace, "default");
//! assert!(manifests[0].validate().is_ok());
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[macro_use]
mod macros;

pub mod annotations;
pub mod apps_v1;
pub mod columns;
pub mod config_v1;
pub mod core_v1;
pub mod core_v1_affinity;
pub mod defaults;
pub mod kind;
pub mod kubernetes_fields;
pub mod manifest;
pub mod meta;
pub mod node_affinity;
pub mod openapi;
pub mod patch;
pub mod pod_config;
pub mod quantity;
pub mod scheduling_v1;
pub mod selector;
pub mod serde_util;
pub mod taints;
pub mod timefmt;
pub mod unknown;
pub mod validation;

pub use apps_v1::*;
pub use config_v1::*;
pub use core_v1::*;
pub use core_v1_affinity::*;
pub use kind::{Kind, UnknownKind};
pub use manifest::{parse_manifests, parse_manifests_in, DocumentError, Manifest, ParseError};
pub use meta::{
    BadResourceVersion, IntOrString, LabelSelector, LabelSelectorOperator,
    LabelSelectorRequirement, Labels, ObjectMeta, OwnerReference,
};
pub use quantity::Quantity;
pub use scheduling_v1::{Priorities, PriorityClass};
pub use unknown::{unknown_fields, FieldValidation, UnknownField};
pub use validation::{FieldError, Invalid};
/// The namespace of objects whose manifest names none.
pub const DEFAULT_NAMESPACE: &str = "default";

/// A top-level object type: its API group, version and kind, and its
/// metadata.
pub trait Resource {
    /// The API group: `""` for core, `"apps"`.
    const GROUP: &'static str;
    /// `apiVersion` as written in manifests, e.g. `apps/v1`.
    const API_VERSION: &'static str;
    /// `kind`, e.g. `DaemonSet`.
    const KIND: &'static str;
    /// Whether objects live in a namespace (everything but nodes).
    const NAMESPACED: bool;

    /// The object's metadata.
    fn metadata(&self) -> &ObjectMeta;
    /// The object's metadata, to change.
    fn metadata_mut(&mut self) -> &mut ObjectMeta;

    /// The kind qualified by its group, as the API server names it in
    /// errors: `DaemonSet.apps`, `Pod`.
    fn qualified_kind() -> String {
        if Self::GROUP.is_empty() {
            Self::KIND.to_owned()
        } else {
            format!("{}.{}", Self::KIND, Self::GROUP)
        }
    }
}
