//! drover's controllers as pure planners: given the cluster as values and
//! the current time, they return what to write. No I/O, no clock, no
//! network; randomness only from an RNG the caller passes in. The loops on
//! the leader (in `drover-server`) feed them the store's view and apply
//! their plans with compare-and-swap writes; the same code runs unchanged
//! under a seeded simulation.
//!
//! - [`daemon`]: one pod of a DaemonSet on every eligible node, as
//!   Kubernetes' daemon controller decides it — eligibility and its
//!   reasons ([`daemon::eligibility`]), creations, deletions, adoption,
//!   failed-pod backoff ([`daemon::backoff`]), status and events; and
//!   [`daemon::explain()`], what the controller makes of a DaemonSet, for
//!   `describe ds` and `rollout status`.
//! - [`node`]: node readiness from in-memory heartbeats, the taints that
//!   follow from it and from cordon, and garbage collection of nodes gone
//!   for good.
//! - [`pod_gc`]: which pods go because their DaemonSet or their node is
//!   gone (a missing node's pods after a grace period).
//! - [`replicaset`]: `replicas` pods of one template, as Kubernetes'
//!   ReplicaSet controller keeps them (claim, slow-start creates, ranked
//!   deletes, status).
//! - [`deployment`]: ReplicaSets per template revision, rolled out
//!   (RollingUpdate, Recreate), scaled proportionally, with Kubernetes'
//!   conditions and history.
//! - [`schedule`]: where a pod without a node goes, as kube-scheduler
//!   decides it (filters, scores, its Unschedulable message), one pod or a
//!   batch at a time.
//! - [`eviction`]: taint-based eviction (`NoExecute` taints against the
//!   pods' tolerations and `tolerationSeconds`).
//! - [`events`]: the events both record, with Kubernetes' reasons.
//! - [`time`]: the [`Timestamp`] planners take as `now`, and RFC 3339.
//!
//! ```
//! use drover_api::{DaemonSet, LabelSelector, Node};
//! use drover_controller::daemon::{self, PlanInput};
//! use drover_controller::Timestamp;
//! use rand::{rngs::StdRng, SeedableRng};
//!
//! let mut ds = DaemonSet::default();
//! ds.metadata.name = "agent".into();
//! ds.metadata.uid = "1234".into();
//! ds.spec.selector = Some(LabelSelector {
//!     match_labels: [("app".to_string(), "agent".to_string())].into(),
//!     ..Default::default()
//! });
//! ds.spec.template.metadata.labels = [("app".to_string(), "agent".to_string())].into();
//! let mut node = Node::default();
//! node.metadata.name = "n1".into();
//!
//! let now = Timestamp::from_unix_seconds(1_700_000_000);
//! let nodes = [node];
//! let plan = daemon::plan(&PlanInput::new(&ds, &nodes, &[], now), &mut StdRng::seed_from_u64(7));
//! assert_eq!(plan.create.len(), 1);
//! assert_eq!(plan.create[0].pod.spec.node_name, "n1");
//! assert!(plan.create[0].pod.metadata.name.starts_with("agent-"));
//! assert_eq!(plan.status.desired_number_scheduled, 1);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod daemon;
pub mod deployment;
pub mod events;
pub mod eviction;
pub mod node;
pub mod pod_gc;
pub mod replicaset;
pub mod schedule;
pub mod time;

pub use time::Timestamp;

/// A map for what a pass builds from the view and drops at its end (pods
/// by node, by owner): foldhash, seeded per process, instead of SipHash.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// The set that goes with [`FastMap`].
pub type FastSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;
