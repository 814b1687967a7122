//! Which pods a scheduling pass looks at: the pods the scheduler owns
//! ([`is_pending`]), and of those, the ones worth another try
//! ([`Backlog`]). A new pending pod is scheduled at once; a pod found
//! unschedulable waits (kube-scheduler's unschedulable queue) until
//! something that could change its answer changes, as kube-scheduler's
//! queueing hints decide it:
//!
//! - a node added, removed or changed (labels, taints, `unschedulable`,
//!   capacity, its Ready condition): every waiting pod is tried again;
//! - a pod that held room on a node gone, moved, or terminated
//!   (`Succeeded`/`Failed`): every waiting pod;
//! - a pod newly holding room on a node: the waiting pods with required
//!   pod affinity (a pod they need may have come);
//! - the waiting pod itself changed (its resourceVersion).
//!
//! Nothing is polled: a pass with no such change tries no waiting pod.

use std::collections::HashMap;

use drover_api::{Node, Pod, PodPhase};

/// The scheduler kube-scheduler answers for (`spec.schedulerName`).
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// The pod's `spec.schedulerName` (empty when it names none: the
/// default scheduler's).
pub fn scheduler_name(pod: &Pod) -> &str {
    pod.spec
        .extra
        .get("schedulerName")
        .and_then(|v| v.as_str())
        .unwrap_or("")
}

/// Whether the pod is the default scheduler's to place: unbound, not being
/// deleted, not terminated, naming no other scheduler, and not a
/// DaemonSet's pod (those wait pinned to their node and the DaemonSet
/// controller binds them).
pub fn is_pending(pod: &Pod) -> bool {
    pod.spec.node_name.is_empty()
        && pod.metadata.deletion_timestamp.is_none()
        && !terminated(pod)
        && matches!(scheduler_name(pod), "" | DEFAULT_SCHEDULER)
        && pod
            .metadata
            .controller_ref()
            .is_none_or(|o| o.kind != "DaemonSet")
}

fn terminated(p: &Pod) -> bool {
    matches!(
        p.status.phase,
        Some(PodPhase::Succeeded) | Some(PodPhase::Failed)
    )
}

/// Whether the pod has required pod affinity terms.
fn needs_pods(pod: &Pod) -> bool {
    pod.spec
        .affinity
        .as_ref()
        .and_then(|a| a.pod_affinity.as_ref())
        .is_some_and(|a| {
            !a.required_during_scheduling_ignored_during_execution
                .is_empty()
        })
}

/// What the answers of waiting pods depend on, as of one view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Baseline {
    /// Each node's resourceVersion.
    nodes: HashMap<String, String>,
    /// Each pod that holds room on a node (bound and not terminated): its
    /// node.
    holders: HashMap<String, String>,
}

impl Baseline {
    fn of<'a>(
        nodes: impl IntoIterator<Item = &'a Node>,
        pods: impl IntoIterator<Item = &'a Pod>,
    ) -> Self {
        Baseline {
            nodes: nodes
                .into_iter()
                .map(|n| (n.metadata.name.clone(), n.metadata.resource_version.clone()))
                .collect(),
            holders: pods
                .into_iter()
                .filter(|p| !p.spec.node_name.is_empty() && !terminated(p))
                .map(|p| (p.metadata.uid.clone(), p.spec.node_name.clone()))
                .collect(),
        }
    }
}

/// What changed since the baseline, for the waiting pods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changes {
    /// Every waiting pod is worth another try.
    pub all: bool,
    /// The waiting pods with required pod affinity are.
    pub affinity: bool,
}

/// One waiting pod.
#[derive(Debug, Clone)]
struct Waiting {
    /// Its resourceVersion when it was found unschedulable (or after the
    /// scheduler's own status write).
    version: String,
    /// It has required pod affinity.
    needs_pods: bool,
}

/// The pods found unschedulable and what they were judged on.
#[derive(Debug, Clone, Default)]
pub struct Backlog {
    waiting: HashMap<String, Waiting>,
    baseline: Option<Baseline>,
}

impl Backlog {
    /// An empty backlog.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many pods wait.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Whether no pod waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Whether the pod with this uid waits.
    pub fn is_waiting(&self, uid: &str) -> bool {
        self.waiting.contains_key(uid)
    }

    /// What changed in `nodes` and `pods` since the view the waiting pods
    /// were judged on ([`Backlog::judged_on`]).
    pub fn changes<'a>(
        &self,
        nodes: impl IntoIterator<Item = &'a Node>,
        pods: impl IntoIterator<Item = &'a Pod>,
    ) -> Changes {
        let Some(old) = &self.baseline else {
            return Changes {
                all: true,
                affinity: true,
            };
        };
        if self.waiting.is_empty() {
            return Changes::default();
        }
        // Compared in place (no copy of the view): every pass of a busy
        // cluster with waiting pods runs this.
        let mut seen_nodes = 0;
        let mut all = false;
        for n in nodes {
            seen_nodes += 1;
            if old.nodes.get(n.metadata.name.as_str()) != Some(&n.metadata.resource_version) {
                all = true;
                break;
            }
        }
        all |= seen_nodes != old.nodes.len();
        let mut affinity = all;
        if !all {
            let mut kept = 0;
            for p in pods {
                if p.spec.node_name.is_empty() || terminated(p) {
                    continue;
                }
                match old.holders.get(p.metadata.uid.as_str()) {
                    Some(node) if *node == p.spec.node_name => kept += 1,
                    // Moved: its old node has room now.
                    Some(_) => {
                        all = true;
                        break;
                    }
                    None => affinity = true,
                }
            }
            // A pod that held room is gone (or finished).
            all |= kept != old.holders.len();
            affinity |= all;
        }
        Changes { all, affinity }
    }

    /// The pending pods of `pods` ([`is_pending`]) a pass should schedule,
    /// given `changes`: the new ones, the changed ones and the waiting
    /// ones the changes concern. Forgets the waiting pods that are no
    /// longer pending (bound, deleted).
    pub fn due<'a>(
        &mut self,
        pods: impl IntoIterator<Item = &'a Pod>,
        changes: Changes,
    ) -> Vec<&'a Pod> {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for p in pods.into_iter().filter(|p| is_pending(p)) {
            let uid = p.metadata.uid.as_str();
            seen.insert(uid);
            let again = match self.waiting.get(uid) {
                None => true,
                Some(w) => {
                    w.version != p.metadata.resource_version
                        || changes.all
                        || (changes.affinity && w.needs_pods)
                }
            };
            if again {
                out.push(p);
            }
        }
        self.waiting.retain(|uid, _| seen.contains(uid.as_str()));
        out
    }

    /// Records that the pass judged the pods on this view.
    pub fn judged_on<'a>(
        &mut self,
        nodes: impl IntoIterator<Item = &'a Node>,
        pods: impl IntoIterator<Item = &'a Pod>,
    ) {
        self.baseline = Some(Baseline::of(nodes, pods));
    }

    /// `pod` fits nowhere; it is at `version` now (after the scheduler's
    /// own write of its condition, if any).
    pub fn wait(&mut self, pod: &Pod, version: &str) {
        self.waiting.insert(
            pod.metadata.uid.clone(),
            Waiting {
                version: version.to_owned(),
                needs_pods: needs_pods(pod),
            },
        );
    }

    /// `pod` is to be tried again next pass (its write failed).
    pub fn forget(&mut self, uid: &str) {
        self.waiting.remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{node, on, pod};
    use super::*;
    use drover_api::{OwnerReference, PodAffinity, PodAffinityTerm};

    fn at(mut p: Pod, version: &str) -> Pod {
        p.metadata.resource_version = version.into();
        p
    }

    fn names(pods: &[&Pod]) -> Vec<String> {
        pods.iter().map(|p| p.metadata.name.clone()).collect()
    }

    #[test]
    fn only_the_default_schedulers_unbound_live_non_daemon_pods_are_pending() {
        assert!(is_pending(&pod("a", &[])));
        assert!(!is_pending(&on(pod("a", &[]), "n1")));
        let mut deleting = pod("a", &[]);
        deleting.metadata.deletion_timestamp = Some("2026-01-01T00:00:00Z".into());
        assert!(!is_pending(&deleting));
        let mut done = pod("a", &[]);
        done.status.phase = Some(PodPhase::Failed);
        assert!(!is_pending(&done));
        let mut other = pod("a", &[]);
        other
            .spec
            .extra
            .insert("schedulerName".into(), "my-scheduler".into());
        assert!(!is_pending(&other));
        assert_eq!(scheduler_name(&other), "my-scheduler");
        other
            .spec
            .extra
            .insert("schedulerName".into(), DEFAULT_SCHEDULER.into());
        assert!(is_pending(&other));
        let mut daemon = pod("a", &[]);
        daemon.metadata.owner_references = vec![OwnerReference {
            kind: "DaemonSet".into(),
            name: "ds".into(),
            uid: "u".into(),
            controller: Some(true),
            ..Default::default()
        }];
        assert!(!is_pending(&daemon));
        daemon.metadata.owner_references[0].kind = "ReplicaSet".into();
        assert!(is_pending(&daemon));
    }

    #[test]
    fn a_waiting_pod_is_tried_again_only_when_something_it_depends_on_changes() {
        let n1 = at_node(node("n1", &[]), "1");
        let nodes = vec![n1.clone()];
        let bound = at(on(pod("b", &[]), "n1"), "2");
        let waiting = at(pod("w", &[]), "3");
        let mut picky = at(pod("p", &[]), "4");
        picky.spec.affinity = Some(drover_api::Affinity {
            pod_affinity: Some(PodAffinity {
                required_during_scheduling_ignored_during_execution: vec![
                    PodAffinityTerm::default(),
                ],
                ..Default::default()
            }),
            ..Default::default()
        });
        let pods = vec![bound.clone(), waiting.clone(), picky.clone()];
        let mut b = Backlog::new();
        // The first pass schedules every pending pod.
        let c = b.changes(&nodes, &pods);
        assert_eq!(names(&b.due(&pods, c)), ["w", "p"]);
        b.judged_on(&nodes, &pods);
        b.wait(&waiting, "3");
        b.wait(&picky, "4");
        assert_eq!(b.len(), 2);
        // Nothing changed: nobody is tried.
        let c = b.changes(&nodes, &pods);
        assert_eq!(c, Changes::default());
        assert!(b.due(&pods, c).is_empty());
        // A new pending pod is, at once, alone.
        let mut more = pods.clone();
        more.push(at(pod("new", &[]), "5"));
        let c = b.changes(&nodes, &more);
        assert_eq!(names(&b.due(&more, c)), ["new"]);
        // A pod bound somewhere: those that need pods are tried.
        more.push(at(on(pod("c", &[]), "n1"), "6"));
        let c = b.changes(&nodes, &more);
        assert_eq!(
            c,
            Changes {
                all: false,
                affinity: true
            }
        );
        assert_eq!(names(&b.due(&more, c)), ["p", "new"]);
        // The bound pod deleted: everyone.
        let c = b.changes(&nodes, [&waiting, &picky]);
        assert!(c.all);
        assert_eq!(names(&b.due([&waiting, &picky], c)), ["w", "p"]);
        // A node labelled: everyone.
        let labelled = vec![at_node(node("n1", &[("disk", "ssd")]), "7")];
        let c = b.changes(&labelled, &pods);
        assert!(c.all);
        // The pod itself changed: it alone.
        let changed = vec![bound, at(pod("w", &[]), "8"), picky];
        let c = b.changes(&nodes, &changed);
        assert_eq!(names(&b.due(&changed, c)), ["w"]);
        // A waiting pod that is gone is forgotten.
        let c = b.changes(&nodes, &[] as &[Pod]);
        b.due(&[] as &[Pod], c);
        assert!(b.is_empty());
    }

    fn at_node(mut n: Node, version: &str) -> Node {
        n.metadata.resource_version = version.into();
        n
    }
}
