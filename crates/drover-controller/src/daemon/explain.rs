//! What the controller makes of a DaemonSet, for people: the pods it owns
//! by its own claim rules, the nodes without a pod and why, and the nodes a
//! rollout waits on and why. `describe ds` and `rollout status` show this
//! instead of deriving it again.
//!
//! [`explain()`] runs the same claim and per-node diff as [`super::plan`]
//! (see [`super::diff`]), so what it says is what the controller does.
//!
//! ```
//! use drover_api::{DaemonSet, LabelSelector, Node};
//! use drover_controller::daemon::explain::{explain, NoPod};
//! use drover_controller::Timestamp;
//!
//! let mut ds = DaemonSet::default();
//! ds.metadata.name = "agent".into();
//! ds.metadata.uid = "1234".into();
//! ds.spec.selector = Some(LabelSelector {
//!     match_labels: [("app".to_string(), "agent".to_string())].into(),
//!     ..Default::default()
//! });
//! ds.spec.template.metadata.labels = [("app".to_string(), "agent".to_string())].into();
//! ds.spec.template.spec.node_selector = [("disk".to_string(), "ssd".to_string())].into();
//! let mut node = Node::default();
//! node.metadata.name = "n1".into();
//!
//! let now = Timestamp::from_unix_seconds(1_700_000_000);
//! let explained = explain(&ds, &[node], &[], None, now);
//! assert!(explained.pods.is_empty());
//! let without = &explained.nodes_without_pod[0];
//! assert_eq!(without.node, "n1");
//! assert!(matches!(without.why, NoPod::Ineligible(_)));
//! assert_eq!(without.why.lines(), ["nodeSelector requires disk=ssd, but the node has no label disk"]);
//! ```

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use drover_api::{DaemonSet, Node, Pod, PodPhase};

use super::diff::{self, Claimed};
use super::eligibility::{Eligibility, NodeEligibility};
use super::pods::{self, is_terminating, oldest_first};
use super::rollout::{self, is_updated};
use super::selector_of;
use crate::time::Timestamp;

/// What the controller makes of a DaemonSet.
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation<'a> {
    /// The DaemonSet's pods by the controller's claim: those it controls
    /// that match its selector (being deleted included) and the orphans it
    /// adopts (matching, bound to a node, not being deleted, not mirror
    /// pods). By node name, then oldest first. When the controller is
    /// [`Explanation::idle`], the pods it controls.
    pub pods: Vec<&'a Pod>,
    /// Orphans the controller adopts on its next pass (also in `pods`).
    pub adopting: Vec<&'a Pod>,
    /// Pods it controls but no longer selects: the next pass releases them
    /// (they keep running as bare pods; not in `pods`).
    pub releasing: Vec<&'a Pod>,
    /// Every node without a pod of the DaemonSet (pods being deleted don't
    /// count), and why, by node name.
    pub nodes_without_pod: Vec<NodeWithoutPod>,
    /// With a revision hash: how far the rollout to it is.
    pub rollout: Option<RolloutProgress>,
    /// Why the controller does not act on the DaemonSet's nodes at all.
    pub idle: Option<Idle>,
}

/// Why the controller does not act on a DaemonSet's nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Idle {
    /// The DaemonSet is being deleted: its pods are deleted.
    Deleting,
    /// Its selector is missing, empty or invalid: the warning event's
    /// message.
    Selector(String),
}

impl fmt::Display for Idle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Idle::Deleting => f.write_str("the DaemonSet is being deleted, and its pods with it"),
            Idle::Selector(message) => f.write_str(message),
        }
    }
}

/// A node without a pod of the DaemonSet.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeWithoutPod {
    /// The node's name.
    pub node: String,
    /// Why it has none.
    pub why: NoPod,
}

/// Why a node has no pod of the DaemonSet.
#[derive(Debug, Clone, PartialEq)]
pub enum NoPod {
    /// The node should not run it: the verdict, with every reason
    /// ([`super::Ineligibility`]).
    Ineligible(NodeEligibility),
    /// The node should run it; the controller has not created it yet (or
    /// the one it had is being deleted, and is replaced once gone).
    NotCreatedYet,
    /// The node should run it, but it does not fit there (see
    /// [`super::fit`]): it is created once it does.
    DoesNotFit(Vec<super::fit::Misfit>),
}

impl NoPod {
    /// One line per reason, as `describe ds` lists them.
    pub fn lines(&self) -> Vec<String> {
        match self {
            NoPod::Ineligible(verdict) => verdict.reasons.iter().map(ToString::to_string).collect(),
            NoPod::NotCreatedYet => vec![self.to_string()],
            NoPod::DoesNotFit(misfits) => misfits.iter().map(ToString::to_string).collect(),
        }
    }
}

impl fmt::Display for NoPod {
    /// The reasons joined by `; ` (see [`NodeEligibility`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoPod::Ineligible(verdict) => write!(f, "{verdict}"),
            NoPod::NotCreatedYet => {
                f.write_str("eligible: the DaemonSet controller has not created its pod yet")
            }
            NoPod::DoesNotFit(misfits) => {
                for (i, m) in misfits.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{m}")?;
                }
                Ok(())
            }
        }
    }
}

/// A rollout to one revision.
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutProgress {
    /// The revision's `controller-revision-hash`.
    pub hash: String,
    /// The nodes it waits on, by node then reason (a node can wait on a new
    /// pod and on an old one). Empty: every node is updated.
    pub waiting: Vec<NodeWait>,
}

impl RolloutProgress {
    /// The waits that hold the rollout ([`WaitReason::holds_rollout`]).
    pub fn holding(&self) -> impl Iterator<Item = &NodeWait> {
        self.waiting.iter().filter(|w| w.reason.holds_rollout())
    }

    /// The nodes that are not Ready and still run an older revision:
    /// updated when they are back (they hold nothing).
    pub fn nodes_away(&self) -> impl Iterator<Item = &str> {
        self.waiting
            .iter()
            .filter(|w| w.reason == WaitReason::NodeNotReady)
            .map(|w| w.node.as_str())
    }
}

/// A node a rollout waits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeWait {
    /// The node's name (empty for a pod bound to none).
    pub node: String,
    /// Why.
    pub reason: WaitReason,
}

/// Why a rollout waits on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitReason {
    /// The node is not Ready (or no longer exists) and runs an old pod: it
    /// does not count against `maxUnavailable` and is updated when it is
    /// back.
    NodeNotReady,
    /// A new pod is not ready, with the first reason a container gives for
    /// waiting (`ImagePullBackOff`, `CrashLoopBackOff`…).
    NewPodNotReady {
        /// The pod's name.
        pod: String,
        /// The container's waiting reason.
        container_reason: Option<String>,
    },
    /// A new pod is ready but not for `minReadySeconds` yet.
    NewPodNotAvailableYet {
        /// The pod's name.
        pod: String,
        /// When it became ready (`None` when its Ready condition has no
        /// transition time: it does not become available).
        ready_since: Option<Timestamp>,
        /// `minReadySeconds`.
        min_ready: Duration,
    },
    /// `OnDelete` strategy: the old pod is replaced once someone deletes it.
    OnDelete {
        /// The old pod's name.
        pod: String,
    },
    /// An old pod waits for its turn under `maxUnavailable`/`maxSurge`:
    /// the consequence of the other waits, not a cause.
    OldPodWaitingItsTurn {
        /// The old pod's name.
        pod: String,
    },
}

impl WaitReason {
    /// Whether this wait holds the rollout (a cause): all but an old pod
    /// waiting for its turn, which only waits for the others. What
    /// `rollout status` names when it times out.
    pub fn holds_rollout(&self) -> bool {
        !matches!(self, WaitReason::OldPodWaitingItsTurn { .. })
    }
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitReason::NodeNotReady => f.write_str("node not Ready, updated when it is back"),
            WaitReason::NewPodNotReady {
                pod,
                container_reason: Some(why),
            } => write!(f, "new pod {pod} not ready ({why})"),
            WaitReason::NewPodNotReady { pod, .. } => write!(f, "new pod {pod} not ready"),
            WaitReason::NewPodNotAvailableYet {
                pod,
                ready_since,
                min_ready,
            } => {
                let seconds = min_ready.as_secs();
                match ready_since {
                    Some(since) => write!(
                        f,
                        "new pod {pod} ready since {since}, available after minReadySeconds ({seconds}s)"
                    ),
                    None => write!(
                        f,
                        "new pod {pod} ready, without a time it became so: not available with minReadySeconds ({seconds}s)"
                    ),
                }
            }
            WaitReason::OnDelete { pod } => {
                write!(f, "OnDelete: updated when its pod {pod} is deleted")
            }
            WaitReason::OldPodWaitingItsTurn { pod } => {
                write!(
                    f,
                    "old pod {pod} replaced in turn (maxUnavailable/maxSurge)"
                )
            }
        }
    }
}

/// How many of the DaemonSet's pods are in each phase (`Pods Status` of
/// `describe ds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PodPhases {
    /// `Running`.
    pub running: usize,
    /// `Pending`, or no phase yet.
    pub waiting: usize,
    /// `Succeeded`.
    pub succeeded: usize,
    /// `Failed`.
    pub failed: usize,
}

impl Explanation<'_> {
    /// How many of [`Explanation::pods`] are in each phase.
    pub fn phases(&self) -> PodPhases {
        let mut phases = PodPhases::default();
        for pod in &self.pods {
            match pod.status.phase {
                Some(PodPhase::Running) => phases.running += 1,
                None | Some(PodPhase::Pending) => phases.waiting += 1,
                Some(PodPhase::Succeeded) => phases.succeeded += 1,
                Some(PodPhase::Failed) => phases.failed += 1,
                Some(_) => {}
            }
        }
        phases
    }
}

/// Explains a DaemonSet: see [`Explanation`]. `nodes` are every node of
/// the cluster, `pods` at least those of the DaemonSet's namespace;
/// `revision_hash` is the current revision's `controller-revision-hash`
/// (the newest ControllerRevision the DaemonSet controls), `None` when it
/// has none yet; `now` decides availability (`minReadySeconds`).
pub fn explain<'a, 'n>(
    ds: &DaemonSet,
    nodes: impl IntoIterator<Item = &'n Node>,
    pods: impl IntoIterator<Item = &'a Pod>,
    revision_hash: Option<&str>,
    now: Timestamp,
) -> Explanation<'a> {
    let nodes: Vec<&'n Node> = nodes.into_iter().collect();
    let pods: Vec<&'a Pod> = pods.into_iter().collect();
    let (claimed, idle) = if ds.metadata.deletion_timestamp.is_some() {
        (controlled(ds, &pods), Some(Idle::Deleting))
    } else {
        match selector_of(ds) {
            Ok(selector) => (diff::claim_pods(ds, &selector, &pods), None),
            Err((_, message)) => (controlled(ds, &pods), Some(Idle::Selector(message))),
        }
    };

    let mut by_node = claimed.by_node.clone();
    let eligibility = Eligibility::new(ds);
    let surge = revision_hash.filter(|_| rollout::allows_surge(ds));
    // The fits are judged from the pods given: pass every pod of the
    // cluster for them to be exact.
    let usage = super::fit::NodeUsage::new(pods.iter().copied());
    let diffs = diff::diff_nodes(
        ds,
        &eligibility,
        &nodes,
        &mut by_node,
        Some(&usage),
        surge,
        now,
    );

    let mut nodes_without_pod: Vec<NodeWithoutPod> = diffs
        .iter()
        // A pod waiting unbound is not on its node yet: the node is listed
        // with why it waits.
        .filter(|d| {
            d.pods
                .iter()
                .all(|p| is_terminating(p) || super::pods::is_unbound(p))
        })
        .map(|d| NodeWithoutPod {
            node: d.node.to_owned(),
            why: if d.eligibility.should_run && !d.eligibility.misfits.is_empty() {
                NoPod::DoesNotFit(d.eligibility.misfits.clone())
            } else if d.eligibility.should_run {
                NoPod::NotCreatedYet
            } else {
                NoPod::Ineligible(d.eligibility.clone())
            },
        })
        .collect();
    nodes_without_pod.sort_by(|a, b| a.node.cmp(&b.node));

    let mut owned: Vec<&'a Pod> = claimed.pods().collect();
    owned.sort_by(|a, b| {
        a.spec
            .node_name
            .cmp(&b.spec.node_name)
            .then_with(|| oldest_first(a, b))
    });
    let rollout = revision_hash.map(|hash| {
        let ready: HashMap<&str, bool> = diffs.iter().map(|d| (d.node, d.ready)).collect();
        let node_ready = |name: &str| ready.get(name).copied().unwrap_or(false);
        RolloutProgress {
            hash: hash.to_owned(),
            waiting: rollout_waits(ds, &owned, hash, node_ready, now),
        }
    });

    Explanation {
        pods: owned,
        adopting: claimed.adopt,
        releasing: claimed.release,
        nodes_without_pod,
        rollout,
        idle,
    }
}

/// The pods the DaemonSet controls, whatever their labels, by node.
fn controlled<'a>(ds: &DaemonSet, pods: &[&'a Pod]) -> Claimed<'a> {
    let mut claimed = Claimed::default();
    for &pod in pods.iter().filter(|p| diff::controlled_by(ds, p)) {
        claimed.add(pod);
    }
    claimed
}

/// Why the rollout to `hash` waits, pod by pod (those not being deleted),
/// by node then reason, each (node, reason) once.
fn rollout_waits(
    ds: &DaemonSet,
    owned: &[&Pod],
    hash: &str,
    node_ready: impl Fn(&str) -> bool,
    now: Timestamp,
) -> Vec<NodeWait> {
    let on_delete = !rollout::is_rolling_update(ds);
    let min_ready = pods::min_ready(ds);
    // Sorted and deduplicated on the text, as `describe ds` lists them.
    let mut keyed: Vec<(String, NodeWait)> = owned
        .iter()
        .filter(|p| !is_terminating(p))
        .filter_map(|&pod| {
            let node = pod.spec.node_name.as_str();
            let updated = is_updated(pod, hash);
            let reason = wait_reason(pod, updated, node_ready(node), on_delete, min_ready, now)?;
            let wait = NodeWait {
                node: node.to_owned(),
                reason,
            };
            Some((wait.reason.to_string(), wait))
        })
        .collect();
    keyed.sort_by(|a, b| a.1.node.cmp(&b.1.node).then_with(|| a.0.cmp(&b.0)));
    keyed.dedup_by(|a, b| a.1.node == b.1.node && a.0 == b.0);
    keyed.into_iter().map(|(_, w)| w).collect()
}

/// Why the rollout waits on one pod, if it does: an old pod on a node
/// that is not Ready, a new pod not ready or not available yet, an old pod
/// under `OnDelete` or waiting for its turn.
fn wait_reason(
    pod: &Pod,
    updated: bool,
    node_ready: bool,
    on_delete: bool,
    min_ready: Duration,
    now: Timestamp,
) -> Option<WaitReason> {
    let name = pod.metadata.name.clone();
    if !updated {
        return Some(if !node_ready {
            WaitReason::NodeNotReady
        } else if on_delete {
            WaitReason::OnDelete { pod: name }
        } else {
            WaitReason::OldPodWaitingItsTurn { pod: name }
        });
    }
    match pods::ready_since(pod) {
        None => Some(WaitReason::NewPodNotReady {
            pod: name,
            container_reason: pod
                .status
                .container_statuses
                .iter()
                .find_map(|c| c.state.waiting.as_ref().map(|w| w.reason.clone()))
                .filter(|r| !r.is_empty()),
        }),
        Some(_) if pods::is_available(pod, min_ready, now) => None,
        Some(ready_since) => Some(WaitReason::NewPodNotAvailableYet {
            pod: name,
            ready_since,
            min_ready,
        }),
    }
}

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;
