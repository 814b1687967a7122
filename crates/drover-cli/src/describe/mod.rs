//! `describe` in kubectl's layout (the same keys, order and alignment as
//! `kubectl describe`), plus what kubectl does not say: for a DaemonSet,
//! every node that has no pod of it and why ("Nodes without a pod:"), and
//! for a pod that waits unbound, its scheduler and every node that does
//! not fit it (`pending.rs`).
//!
//! Pure: the objects and "now" in, text out. Text is written with tabs and
//! aligned at the end by [`crate::tabwriter`], as kubectl does.
//!
//! One file per kind: `daemon_set.rs`, `deployment.rs` (with ReplicaSets),
//! `pod.rs`, `node.rs`, and
//! `config.rs` (ConfigMaps, Secrets, Namespaces, ServiceAccounts).
//! `pod_template.rs` holds the containers and volumes a pod and a
//! DaemonSet's template both show, `layout.rs` the writer and the sections
//! every kind shares (labels, annotations, tolerations, events). What
//! `describe ds` says about a DaemonSet's pods, nodes and rollout is the
//! controller's (`drover_controller::daemon::explain`), only laid out here.

mod config;
mod daemon_set;
mod deployment;
mod layout;
mod node;
mod pending;
mod pod;
mod pod_template;

#[cfg(test)]
mod fixtures;

pub use config::{
    describe_config_map, describe_namespace, describe_secret, describe_service_account,
};
pub use daemon_set::describe_daemon_set;
pub use deployment::{describe_deployment, describe_replica_set};
pub use layout::{events_for, format_toleration};
pub use node::describe_node;
pub use pending::{waiting, Waiting};
pub use pod::{describe_pod, qos_class};
pub use pod_template::{describe_pod_template, format_probe};
