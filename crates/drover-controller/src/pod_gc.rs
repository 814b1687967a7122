//! Garbage collection of pods, decided from values with `now` passed in:
//! what Kubernetes' garbage collector (dependents of a deleted owner) and
//! pod garbage collector (`pkg/controller/podgc`, `gcOrphaned`) delete.
//!
//! - A pod whose controller is a DaemonSet or a ReplicaSet that no longer
//!   exists is deleted at once (the garbage collector's background
//!   propagation; a DaemonSet that is still being deleted has its pods
//!   deleted by [`crate::daemon::plan`]). The same rule, [`owner_gone`],
//!   takes the ReplicaSets of a Deployment that is gone.
//! - A pod bound to a node that does not exist (a bare pod of a node that
//!   left, or one bound by hand to a node that has not joined yet) is
//!   deleted once it has been so for the grace period (default 40 s,
//!   Kubernetes' quarantine), so that a pod applied just before its node is
//!   not lost. The time is counted from the first decision that saw the pod
//!   so: [`PodGc`] keeps it, the leader keeps the [`PodGc`], and a new
//!   leader starts counting again.
//!
//! Daemon pods of a missing node go sooner: the DaemonSet planner deletes
//! them at once ([`crate::daemon`], `DeletionReason::NodeGone`).
//!
//! ```
//! use std::time::Duration;
//! use drover_api::Pod;
//! use drover_controller::pod_gc::PodGc;
//! use drover_controller::Timestamp;
//!
//! let mut pod = Pod::default();
//! pod.metadata.uid = "u1".into();
//! pod.spec.node_name = "gone".into();
//! let mut gc = PodGc::new(Duration::from_secs(40));
//! let t0 = Timestamp::from_unix_seconds(1_700_000_000);
//! let first = gc.plan([], [&pod], |_| true, t0);
//! assert!(first.delete.is_empty());
//! assert_eq!(first.next_check, Some(t0 + Duration::from_secs(40)));
//! let later = gc.plan([], [&pod], |_| true, t0 + Duration::from_secs(40));
//! assert_eq!(later.delete.len(), 1);
//! ```

use crate::FastSet;
use std::collections::HashMap;
use std::time::Duration;

use drover_api::{event_type, DaemonSet, Event, Node, ObjectMeta, Pod, ReplicaSet, Resource};

use crate::events::{pod_event, reason, POD_GC};
use crate::time::Timestamp;

/// How long a pod may stay bound to a node that does not exist
/// (Kubernetes' pod garbage collector's quarantine).
pub const DEFAULT_ORPHAN_GRACE: Duration = Duration::from_secs(40);

/// The pod garbage collector's state: the grace period, and since when
/// each pod bound to a missing node has been seen so (by pod UID).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGc {
    /// How long a pod may stay bound to a node that does not exist.
    pub grace: Duration,
    missing_since: HashMap<String, Timestamp>,
}

impl Default for PodGc {
    fn default() -> Self {
        PodGc::new(DEFAULT_ORPHAN_GRACE)
    }
}

/// What to delete now.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodGcPlan<'a> {
    /// Pods to delete (each once): those whose DaemonSet is gone, then
    /// those whose node has been missing for the grace period, in the
    /// order given.
    pub delete: Vec<&'a Pod>,
    /// When a pod bound to a missing node reaches the end of its grace
    /// period: decide again then.
    pub next_check: Option<Timestamp>,
    /// What the user sees on such a pod: a Warning `NodeNotFound` when it
    /// is first seen bound to a missing node (saying when it goes), a
    /// `DeletionByPodGC` when it is deleted.
    pub events: Vec<Event>,
    /// Pods bound to a missing node whose grace period runs.
    pub watched: Vec<&'a Pod>,
}

impl PodGc {
    /// A collector with nothing seen yet.
    pub fn new(grace: Duration) -> Self {
        PodGc {
            grace,
            missing_since: HashMap::new(),
        }
    }

    /// Since when the pod (by UID) has been seen bound to a missing node.
    pub fn missing_since(&self, uid: &str) -> Option<Timestamp> {
        self.missing_since.get(uid).copied()
    }

    /// Decides which pods to delete now, and remembers since when pods'
    /// nodes are missing (pods no longer so are forgotten).
    /// `owner_exists` answers whether a DaemonSet or ReplicaSet of this
    /// UID exists.
    pub fn plan<'a, 'n>(
        &mut self,
        nodes: impl IntoIterator<Item = &'n Node>,
        pods: impl IntoIterator<Item = &'a Pod>,
        owner_exists: impl Fn(&str) -> bool,
        now: Timestamp,
    ) -> PodGcPlan<'a> {
        let names: FastSet<&str> = nodes
            .into_iter()
            .map(|n| n.metadata.name.as_str())
            .collect();
        self.plan_some(|n| names.contains(n), pods, owner_exists, now)
    }

    /// [`PodGc::plan`] of some of the pods, with `node_exists` answering
    /// by node name. A caller that knows what changed since the last plan
    /// (and that the nodes and owners that exist did not) passes the pods
    /// that changed and those the last plan deleted or watched
    /// ([`PodGcPlan::watched`]): the others' verdict cannot have changed.
    /// Every pod it watches must be among `pods`, or it is forgotten.
    pub fn plan_some<'a>(
        &mut self,
        node_exists: impl Fn(&str) -> bool,
        pods: impl IntoIterator<Item = &'a Pod>,
        owner_exists: impl Fn(&str) -> bool,
        now: Timestamp,
    ) -> PodGcPlan<'a> {
        let pods: Vec<&'a Pod> = pods.into_iter().collect();
        let mut plan = PodGcPlan {
            delete: pods
                .iter()
                .copied()
                .filter(|p| owner_gone(&p.metadata, POD_OWNERS, &owner_exists))
                .collect(),
            next_check: None,
            events: Vec::new(),
            watched: Vec::new(),
        };
        let mut doomed: FastSet<*const Pod> =
            plan.delete.iter().map(|p| *p as *const Pod).collect();

        let missing: Vec<&'a Pod> = pods
            .iter()
            .copied()
            .filter(|p| {
                !p.spec.node_name.is_empty()
                    && p.metadata.deletion_timestamp.is_none()
                    && !node_exists(&p.spec.node_name)
            })
            .collect();
        let seen: FastSet<&str> = missing.iter().map(|p| p.metadata.uid.as_str()).collect();
        self.missing_since
            .retain(|uid, _| seen.contains(uid.as_str()));
        for pod in missing {
            let m = &pod.metadata;
            let of = (m.namespace.as_str(), m.name.as_str(), m.uid.as_str());
            let node = pod.spec.node_name.as_str();
            // Daemon pods and mirror pods of a missing node go at once, by
            // their own planners: nothing to announce.
            let quiet = pod.is_mirror()
                || pod
                    .metadata
                    .controller_ref()
                    .is_some_and(|o| o.kind == DaemonSet::KIND);
            let since = match self.missing_since.get(&m.uid) {
                Some(t) => *t,
                None => {
                    self.missing_since.insert(m.uid.clone(), now);
                    if !quiet {
                        plan.events.push(pod_event(
                        of,
                        POD_GC,
                        event_type::WARNING,
                        reason::NODE_NOT_FOUND,
                        format!(
                            "the pod is bound to node {node}, which does not exist: it is deleted in {}s unless that node joins",
                            self.grace.as_secs()
                        ),
                        now,
                    ));
                    }
                    now
                }
            };
            let deadline = since.saturating_add(self.grace);
            if now >= deadline {
                if doomed.insert(pod as *const Pod) {
                    plan.delete.push(pod);
                    plan.events.extend((!quiet).then(|| {
                        pod_event(
                            of,
                            POD_GC,
                            event_type::NORMAL,
                            reason::DELETION_BY_POD_GC,
                            format!(
                            "PodGC: node {node} no longer exists (the pod was bound to it for {}s)",
                            now.duration_since(since).as_secs()
                        ),
                            now,
                        )
                    }));
                }
            } else {
                plan.next_check = Some(plan.next_check.map_or(deadline, |t| t.min(deadline)));
                plan.watched.push(pod);
            }
        }
        plan
    }
}

/// The kinds whose pods go with them.
const POD_OWNERS: &[&str] = &[DaemonSet::KIND, ReplicaSet::KIND];

/// Whether the object's controller is of one of `kinds` and does not
/// exist (`exists` answers by UID): it goes too, as Kubernetes' garbage
/// collector deletes the dependents of a deleted owner (background
/// propagation). Owners of other kinds are never judged.
pub fn owner_gone(meta: &ObjectMeta, kinds: &[&str], exists: impl Fn(&str) -> bool) -> bool {
    meta.owner_references
        .iter()
        .any(|o| o.controller == Some(true) && kinds.contains(&o.kind.as_str()) && !exists(&o.uid))
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::OwnerReference;

    fn at(seconds: u64) -> Timestamp {
        Timestamp::from_unix_seconds(1_700_000_000) + Duration::from_secs(seconds)
    }

    fn node(name: &str) -> Node {
        let mut node = Node::default();
        node.metadata.name = name.into();
        node
    }

    fn pod(uid: &str, node: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = format!("pod-{uid}");
        pod.metadata.uid = uid.into();
        pod.spec.node_name = node.into();
        pod
    }

    fn owned(mut pod: Pod, kind: &str, uid: &str, controller: bool) -> Pod {
        pod.metadata.owner_references.push(OwnerReference {
            kind: kind.into(),
            uid: uid.into(),
            controller: Some(controller),
            ..OwnerReference::default()
        });
        pod
    }

    fn uids<'a>(plan: &PodGcPlan<'a>) -> Vec<&'a str> {
        plan.delete
            .iter()
            .map(|p| p.metadata.uid.as_str())
            .collect()
    }

    #[test]
    fn a_plan_of_the_changed_and_watched_pods_decides_as_a_plan_of_all() {
        let nodes = [node("n1")];
        let (a, b) = (pod("a", "gone"), pod("b", "n1"));
        let mut whole = PodGc::new(Duration::from_secs(40));
        let mut some = PodGc::new(Duration::from_secs(40));
        let first = whole.plan(&nodes, [&a, &b], |_| true, at(0));
        let first_some = some.plan(&nodes, [&a, &b], |_| true, at(0));
        assert_eq!(first, first_some);
        assert_eq!(uids_of(&first.watched), ["a"]);
        // Nothing changed: only the watched pod is asked about.
        let exists = |n: &str| n == "n1";
        let later = whole.plan(&nodes, [&a, &b], |_| true, at(40));
        let later_some = some.plan_some(exists, first_some.watched.clone(), |_| true, at(40));
        assert_eq!(uids(&later), ["a"]);
        assert_eq!(later, later_some);
        assert_eq!(whole, some);
    }

    fn uids_of<'a>(pods: &[&'a Pod]) -> Vec<&'a str> {
        pods.iter().map(|p| p.metadata.uid.as_str()).collect()
    }

    #[test]
    fn pods_of_missing_nodes_go_after_the_grace_period() {
        let nodes = [node("n1")];
        let pods = [pod("a", "n1"), pod("b", "gone"), pod("c", "")];
        let mut gc = PodGc::new(Duration::from_secs(40));
        let plan = gc.plan(&nodes, &pods, |_| true, at(0));
        assert!(plan.delete.is_empty());
        assert_eq!(plan.next_check, Some(at(40)));
        assert_eq!(gc.missing_since("b"), Some(at(0)));
        // Counted from when it was first seen, not from each decision.
        let plan = gc.plan(&nodes, &pods, |_| true, at(39));
        assert!(plan.delete.is_empty());
        assert_eq!(plan.next_check, Some(at(40)));
        let plan = gc.plan(&nodes, &pods, |_| true, at(40));
        assert_eq!(uids(&plan), ["b"]);
        assert_eq!(plan.next_check, None);
    }

    #[test]
    fn a_pod_of_a_missing_node_says_so_then_why_it_went() {
        let pods = [
            pod("b", "gone"),
            owned(pod("d", "gone"), "DaemonSet", "ds", true),
        ];
        let mut gc = PodGc::new(Duration::from_secs(40));
        let reasons = |p: &PodGcPlan| -> Vec<(String, String, String)> {
            p.events
                .iter()
                .map(|e| {
                    (
                        e.involved_object.name.clone(),
                        e.reason.clone(),
                        e.r#type.clone(),
                    )
                })
                .collect()
        };
        let first = gc.plan(&[], &pods, |_| true, at(0));
        assert_eq!(
            reasons(&first),
            [("pod-b".into(), "NodeNotFound".into(), "Warning".into())],
            "announced once, not for the daemon pod (its planner deletes it at once)"
        );
        assert!(first.events[0]
            .message
            .contains("node gone, which does not exist"));
        assert!(first.events[0].message.contains("deleted in 40s"));
        assert!(reasons(&gc.plan(&[], &pods, |_| true, at(20))).is_empty());
        let last = gc.plan(&[], &pods, |_| true, at(40));
        assert_eq!(
            reasons(&last),
            [("pod-b".into(), "DeletionByPodGC".into(), "Normal".into())]
        );
        assert!(last.events[0]
            .message
            .contains("node gone no longer exists"));
    }

    #[test]
    fn a_node_that_joins_in_time_saves_its_pods() {
        let pods = [pod("b", "late")];
        let mut gc = PodGc::new(Duration::from_secs(40));
        assert!(gc.plan(&[], &pods, |_| true, at(0)).delete.is_empty());
        let plan = gc.plan(&[node("late")], &pods, |_| true, at(30));
        assert!(plan.delete.is_empty() && plan.next_check.is_none());
        assert_eq!(gc.missing_since("b"), None, "forgotten");
        // Gone again: a fresh grace period.
        let plan = gc.plan(&[], &pods, |_| true, at(60));
        assert!(plan.delete.is_empty());
        assert_eq!(plan.next_check, Some(at(100)));
    }

    #[test]
    fn pods_being_deleted_are_left_alone() {
        let mut leaving = pod("b", "gone");
        leaving.metadata.deletion_timestamp = Some(at(0).to_rfc3339());
        let mut gc = PodGc::new(Duration::ZERO);
        let plan = gc.plan(&[], [&leaving], |_| true, at(0));
        assert!(plan.delete.is_empty() && plan.next_check.is_none());
    }

    #[test]
    fn pods_of_deleted_daemon_sets_go_at_once() {
        let nodes = [node("n1")];
        let pods = [
            owned(pod("a", "n1"), "DaemonSet", "ds-live", true),
            owned(pod("b", "n1"), "DaemonSet", "ds-gone", true),
            owned(pod("c", "n1"), "DaemonSet", "ds-gone", false),
            owned(pod("d", "n1"), "Job", "job-gone", true),
            // Both reasons: deleted once.
            owned(pod("e", "away"), "DaemonSet", "ds-gone", true),
        ];
        let mut gc = PodGc::new(Duration::ZERO);
        let plan = gc.plan(&nodes, &pods, |uid| uid == "ds-live", at(0));
        assert_eq!(uids(&plan), ["b", "e"]);
    }

    #[test]
    fn the_soonest_deadline_is_reported() {
        let mut gc = PodGc::new(Duration::from_secs(40));
        gc.plan(&[], [&pod("a", "gone")], |_| true, at(0));
        let pods = [pod("a", "gone"), pod("b", "gone")];
        let plan = gc.plan(&[], &pods, |_| true, at(10));
        assert_eq!(plan.next_check, Some(at(40)));
        let plan = gc.plan(&[], &pods, |_| true, at(40));
        assert_eq!(uids(&plan), ["a"]);
        assert_eq!(plan.next_check, Some(at(50)));
    }

    #[test]
    fn dependents_of_a_gone_replica_set_or_daemon_set_go() {
        let owned = |kind: &str, uid: &str| {
            let mut p = Pod::default();
            p.metadata.uid = format!("p-{uid}");
            p.metadata.owner_references.push(OwnerReference {
                kind: kind.into(),
                uid: uid.into(),
                controller: Some(true),
                ..OwnerReference::default()
            });
            p
        };
        let pods = [
            owned("ReplicaSet", "rs-gone"),
            owned("ReplicaSet", "rs-here"),
            owned("DaemonSet", "ds-gone"),
            owned("Job", "job-gone"),
        ];
        let mut gc = PodGc::default();
        let plan = gc.plan([], &pods, |uid| uid.ends_with("here"), at(0));
        let gone: Vec<&str> = plan
            .delete
            .iter()
            .map(|p| p.metadata.uid.as_str())
            .collect();
        assert_eq!(gone, ["p-rs-gone", "p-ds-gone"]);
        // A ReplicaSet of a Deployment that is gone.
        let rs = owned("Deployment", "d-gone");
        assert!(owner_gone(&rs.metadata, &["Deployment"], |_| false));
        assert!(!owner_gone(&rs.metadata, &["Deployment"], |_| true));
        assert!(!owner_gone(&rs.metadata, &["DaemonSet"], |_| false));
    }
}
