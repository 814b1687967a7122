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
//!
//! The files: `errors` (the error types and [`Path`]), `names` (the string
//! rules; a leaf, which [`crate::selector`] and [`crate::taints`] use too),
//! `fields` (single values checked into [`FieldError`]s), then one file per
//! part of an object: `meta`, `selectors`, `taints` (with tolerations),
//! `affinity` (pod affinity and anti-affinity, topology spread),
//! `container`, `pod`, `daemon_set`, `deployment` (with ReplicaSets), `other_kinds` (nodes, ControllerRevisions,
//! Events). Every public item is re-exported here (the files themselves are not
//! public). [`validate_manifest`], which dispatches on the kind, is defined
//! beside [`Manifest`](crate::Manifest), so that validation does not depend on
//! manifests.

mod affinity;
pub mod config;
mod container;
pub(crate) mod daemon_set;
pub(crate) mod deployment;
pub(crate) mod errors;
mod fields;
mod meta;
pub(crate) mod names;
pub(crate) mod other_kinds;
pub(crate) mod pod;
mod selectors;
mod taints;

pub use affinity::{validate_pod_affinity, validate_topology_spread_constraints};
pub use container::DOWNWARD_API_FIELD_PATHS;
pub use daemon_set::{
    daemon_set_warnings, validate_daemon_set, validate_daemon_set_spec, validate_daemon_set_update,
};
pub use deployment::{
    validate_deployment, validate_deployment_spec, validate_deployment_update,
    validate_replica_set, validate_replica_set_spec, validate_replica_set_update,
};
pub use errors::{shorten, BadValue, ErrorType, FieldError, Invalid, Path};
pub use fields::validate_labels;
pub use meta::{validate_object_meta, validate_object_meta_update};
pub use names::{
    is_dns1123_label, is_dns1123_subdomain, is_env_var_name, is_qualified_name,
    is_valid_label_value, is_valid_percent, is_valid_port_name, is_valid_port_num,
    DNS1123_LABEL_MAX_LENGTH, DNS1123_SUBDOMAIN_MAX_LENGTH, ECHOED_VALUE_MAX_BYTES,
    LABEL_VALUE_MAX_LENGTH, MAX_CONTAINERS, MAX_LABELS, TOTAL_ANNOTATION_SIZE_LIMIT,
    TOTAL_LABEL_SIZE_LIMIT,
};
pub use other_kinds::{
    validate_controller_revision, validate_event, validate_node, validate_node_update,
    validate_priority_class, validate_priority_class_update,
};
pub use pod::{validate_pod, validate_pod_spec, validate_pod_update};
pub use selectors::{
    validate_label_selector, validate_node_selector, validate_node_selector_term,
    NODE_FIELD_METADATA_NAME,
};
pub use taints::{validate_taints, validate_tolerations};

#[doc(inline)]
pub use crate::manifest::{validate_manifest, validate_manifest_update};
