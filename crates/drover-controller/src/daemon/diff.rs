//! The planner's first two steps, as pure functions over borrowed pods:
//! the claim (which pods are the DaemonSet's) and the per-node diff, which
//! sorts each node's pods into buckets the way Nomad's system scheduler
//! does (`nomad/scheduler/util.go`, `diffSystemAllocsForNode`: place,
//! update, stop, ignore…). [`super::plan`] then computes the status from
//! the buckets ([`super::status`]), turns them into writes, and runs the
//! rolling update over them; [`super::explain()`] reads the same buckets.
//!
//! Nothing here draws from the RNG or reads the backoff: a failed pod is
//! put in [`NodeDiff::stop`] with [`DeletionReason::Failed`], and the
//! planner leaves it there while the node is in backoff.

use crate::{FastMap, FastSet};

use drover_api::selector::Selector;
use drover_api::{DaemonSet, Node, Pod, PodPhase};

use super::eligibility::{Eligibility, NodeEligibility};
use super::fit::NodeUsage;
use super::pods::{self, is_terminating, oldest_first, Claim};
use super::rollout::{self, NodeSlot};
use super::DeletionReason;
use crate::events::namespace_of;
use crate::time::Timestamp;

/// The claim over the pods of the DaemonSet's namespace
/// (`getDaemonPods`, `ClaimPods`).
#[derive(Debug, Default)]
pub(crate) struct Claimed<'a> {
    /// The DaemonSet's pods, those it controls and the orphans it adopts,
    /// by the node they are bound or pinned to ([`pods::target_node`];
    /// empty for none), in input order.
    pub by_node: FastMap<&'a str, Vec<&'a Pod>>,
    /// Orphans to adopt (also in `by_node`).
    pub adopt: Vec<&'a Pod>,
    /// Pods it controls and no longer selects: to release (not in
    /// `by_node`).
    pub release: Vec<&'a Pod>,
}

impl<'a> Claimed<'a> {
    /// Counts `pod` as the DaemonSet's, on its node.
    pub fn add(&mut self, pod: &'a Pod) {
        self.by_node
            .entry(pods::target_node(pod))
            .or_default()
            .push(pod);
    }

    /// Every pod in `by_node`.
    pub fn pods(&self) -> impl Iterator<Item = &'a Pod> + '_ {
        self.by_node.values().flatten().copied()
    }
}

/// Applies [`pods::claim`] to every pod of the DaemonSet's namespace.
pub(crate) fn claim_pods<'a>(ds: &DaemonSet, selector: &Selector, all: &[&'a Pod]) -> Claimed<'a> {
    let namespace = namespace_of(&ds.metadata);
    let matches = |pod: &Pod| selector.matches(&pod.metadata.labels);
    // Sized once: a DaemonSet's pods are about one per node (no rehashing
    // as they are added).
    let mut claimed = Claimed {
        by_node: FastMap::with_capacity_and_hasher(all.len(), Default::default()),
        ..Claimed::default()
    };
    for &pod in all {
        if namespace_of(&pod.metadata) != namespace {
            continue;
        }
        match pods::claim(ds, matches, pod) {
            Claim::Owned => {}
            Claim::Adopt => claimed.adopt.push(pod),
            Claim::Release => {
                claimed.release.push(pod);
                continue;
            }
            Claim::Ignore => continue,
        }
        claimed.add(pod);
    }
    claimed
}

/// The name of every pod of `namespace` among `all`: the names a new pod
/// must avoid. Built only by a plan that creates a pod (most passes of a
/// large cluster create none, and hashing every pod's name was a tenth of
/// such a pass).
pub(crate) fn taken_names<'a>(namespace: &str, all: &[&'a Pod]) -> FastSet<&'a str> {
    let mut taken = FastSet::with_capacity_and_hasher(all.len(), Default::default());
    taken.extend(
        all.iter()
            .filter(|p| namespace_of(&p.metadata) == namespace)
            .map(|p| p.metadata.name.as_str()),
    );
    taken
}

/// Whether the DaemonSet is the pod's controller (by UID), whatever the
/// labels: the pods a DaemonSet being deleted, or one with an unusable
/// selector, still has.
pub(crate) fn controlled_by(ds: &DaemonSet, pod: &Pod) -> bool {
    namespace_of(&pod.metadata) == namespace_of(&ds.metadata)
        && pod
            .metadata
            .controller_ref()
            .is_some_and(|owner| owner.uid == ds.metadata.uid)
}

/// A pod to delete and why.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stop<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// Why.
    pub reason: DeletionReason,
}

/// One node's pods in buckets (`podsShouldBeOnNode`).
#[derive(Debug, Clone)]
pub(crate) struct NodeDiff<'a> {
    /// The node's name.
    pub node: &'a str,
    /// Whether the node is Ready (the rolling update leaves the others
    /// alone).
    pub ready: bool,
    /// The node's verdict.
    pub eligibility: NodeEligibility,
    /// Every pod of the DaemonSet on the node, being deleted included, in
    /// [`oldest_first`] order: the first one counts for the status.
    pub pods: Vec<&'a Pod>,
    /// Place: the node should run the pod and has none at all (a pod
    /// being deleted counts: its replacement comes once it is gone). Where
    /// it does not fit ([`NodeEligibility::misfits`]) the new pod waits
    /// unbound, pinned to the node.
    pub place: bool,
    /// A pod waiting unbound on the node that fits now: to bind.
    pub bind: Option<&'a Pod>,
    /// A pod waiting unbound on the node that still does not fit.
    pub waiting: Option<&'a Pod>,
    /// Keep: the running pods that stay (one, or with surge a new one
    /// beside the old one).
    pub keep: Vec<&'a Pod>,
    /// Stop: the pods to delete, in the order decided: failed (subject to
    /// backoff) and succeeded pods in pod order, then duplicates or the
    /// surge's extra pods; or every pod when the node should not continue
    /// running it.
    pub stop: Vec<Stop<'a>>,
    /// Pods being deleted: left alone.
    pub terminating: Vec<&'a Pod>,
}

impl<'a> NodeDiff<'a> {
    /// The pod whose state counts for the status: the first one.
    pub fn first(&self) -> Option<&'a Pod> {
        self.pods.first().copied()
    }

    /// The node should not run the pod but has one (`numberMisscheduled`,
    /// which [`super::facts::count`] counts from the node's facts).
    #[cfg(test)]
    pub fn misscheduled(&self) -> bool {
        !self.eligibility.should_run && !self.pods.is_empty()
    }

    /// The node as the rolling update sees it, when it should run the pod
    /// or has one.
    pub fn slot(&self) -> Option<NodeSlot<'_>> {
        (self.eligibility.should_run || !self.pods.is_empty()).then(|| NodeSlot {
            node: self.node,
            should_run: self.eligibility.should_run,
            ready: self.ready,
            pods: &self.pods,
        })
    }
}

/// The diff of one node: `pods` are the DaemonSet's pods bound to it (any
/// order). `surge_hash` is the current revision when the DaemonSet allows
/// surge: two running pods are then an old and a new one
/// ([`rollout::surge_extra_pods`]) rather than duplicates.
pub(crate) fn diff_node<'a>(
    ds: &DaemonSet,
    node: &'a Node,
    eligibility: NodeEligibility,
    mut pods: Vec<&'a Pod>,
    surge_hash: Option<&str>,
    now: Timestamp,
) -> NodeDiff<'a> {
    pods.sort_by(|a, b| oldest_first(a, b));
    let mut diff = NodeDiff {
        node: node.metadata.name.as_str(),
        ready: node.is_ready(),
        eligibility,
        pods,
        place: false,
        bind: None,
        waiting: None,
        keep: Vec::new(),
        stop: Vec::new(),
        terminating: Vec::new(),
    };
    // Without a vector of the live pods: a pass diffs every node, and the
    // allocations were a tenth of it.
    let pods = &diff.pods;
    let live = || pods.iter().copied().filter(|p| !is_terminating(p));
    diff.terminating = pods.iter().copied().filter(|p| is_terminating(p)).collect();
    if diff.eligibility.should_run && diff.pods.is_empty() {
        // Without its PriorityClass the pod cannot be created at all (the
        // API server's admission refuses it): nothing waits.
        diff.place = !diff
            .eligibility
            .misfits
            .iter()
            .any(|m| matches!(m, super::fit::Misfit::NoPriorityClass(_)));
    } else if diff.eligibility.should_continue_running {
        let mut running: Vec<&'a Pod> = Vec::new();
        for pod in live() {
            let reason = if pods::phase_is(pod, &PodPhase::Failed) {
                DeletionReason::Failed
            } else if pods::phase_is(pod, &PodPhase::Succeeded) {
                DeletionReason::Succeeded
            } else {
                running.push(pod);
                continue;
            };
            diff.stop.push(Stop { pod, reason });
        }
        let (keep, stop) = dedupe_running(ds, running, surge_hash, now);
        diff.keep = keep;
        diff.stop.extend(stop);
        if let Some(&waiting) = diff.keep.iter().find(|p| pods::is_unbound(p)) {
            let fits = diff.eligibility.should_run && diff.eligibility.misfits.is_empty();
            if fits {
                diff.bind = Some(waiting);
            } else {
                diff.waiting = Some(waiting);
            }
        }
    } else {
        let reason = DeletionReason::NotEligible(diff.eligibility.reasons.clone());
        diff.stop = live()
            .map(|pod| Stop {
                pod,
                reason: reason.clone(),
            })
            .collect();
    }
    diff
}

/// Never two pods of one DaemonSet on one node: of the running pods (in
/// [`oldest_first`] order), the first is kept and the others are
/// duplicates; with surge, the old and the new pod may stay side by side
/// until the new one is available. Returns the pods kept and those to
/// stop.
fn dedupe_running<'a>(
    ds: &DaemonSet,
    running: Vec<&'a Pod>,
    surge_hash: Option<&str>,
    now: Timestamp,
) -> (Vec<&'a Pod>, Vec<Stop<'a>>) {
    if let Some(hash) = surge_hash.filter(|_| running.len() > 1) {
        let extra = rollout::surge_extra_pods(ds, &running, hash, now);
        let keep = running
            .iter()
            .copied()
            .filter(|p| !extra.iter().any(|e| std::ptr::eq(*e, *p)))
            .collect();
        let stop = extra
            .into_iter()
            .map(|pod| Stop {
                pod,
                reason: DeletionReason::Rollout,
            })
            .collect();
        return (keep, stop);
    }
    // None or one running: kept as it is (no new vector).
    let (kept, extra) = match running.split_first() {
        Some((kept, extra)) if !extra.is_empty() => (*kept, extra),
        _ => return (running, Vec::new()),
    };
    let stop = extra
        .iter()
        .map(|&pod| Stop {
            pod,
            reason: DeletionReason::Duplicate {
                kept: kept.metadata.name.clone(),
            },
        })
        .collect();
    (vec![kept], stop)
}

/// The diff of every node (each name once, in input order), taking each
/// node's pods out of `by_node`: what is left there are the pods of nodes
/// that do not exist, or of none (see [`stray_pods`]).
pub(crate) fn diff_nodes<'a>(
    ds: &DaemonSet,
    eligibility: &Eligibility,
    nodes: &[&'a Node],
    by_node: &mut FastMap<&'a str, Vec<&'a Pod>>,
    usage: Option<&NodeUsage>,
    surge_hash: Option<&str>,
    now: Timestamp,
) -> Vec<NodeDiff<'a>> {
    // Names strictly in order (the server's nodes come from a map by name)
    // cannot repeat: the set that drops a repeated name is built only for
    // input in another order.
    let sorted = nodes
        .windows(2)
        .all(|w| w[0].metadata.name < w[1].metadata.name);
    let mut seen: FastSet<&str> = FastSet::default();
    let mut diffs = Vec::with_capacity(nodes.len());
    for &node in nodes {
        let name = node.metadata.name.as_str();
        if !sorted && !seen.insert(name) {
            continue;
        }
        let on_node = by_node.remove(name).unwrap_or_default();
        let mut verdict = eligibility.evaluate(node);
        // The fit is judged where no pod of the DaemonSet is bound yet
        // (none at all, or one waiting unbound).
        let unbound = on_node.iter().all(|p| pods::is_unbound(p));
        if let Some(usage) = usage.filter(|_| verdict.should_run && unbound) {
            let spec = eligibility.pod_spec();
            let uid = ds.metadata.uid.as_str();
            if usage.priority_of(spec).is_none() {
                verdict.misfits = vec![super::fit::Misfit::NoPriorityClass(
                    spec.priority_class_name.clone(),
                )];
            } else {
                verdict.misfits = usage.misfits(node, spec, uid);
                if !verdict.misfits.is_empty() {
                    verdict.preempt = usage.preemption(node, spec, uid).unwrap_or_default();
                }
            }
        }
        diffs.push(diff_node(ds, node, verdict, on_node, surge_hash, now));
    }
    diffs
}

/// The pods left once every node took its own: bound or pinned to a node
/// that does not exist ([`DeletionReason::NodeGone`]) or to none
/// ([`DeletionReason::Unbound`]). All are stopped but those being
/// deleted; by node name, then [`oldest_first`].
pub(crate) fn stray_pods<'a>(by_node: FastMap<&'a str, Vec<&'a Pod>>) -> Vec<Stop<'a>> {
    let mut leftover: Vec<&Pod> = by_node.into_values().flatten().collect();
    leftover.sort_by(|a, b| {
        pods::target_node(a)
            .cmp(pods::target_node(b))
            .then_with(|| oldest_first(a, b))
    });
    leftover
        .into_iter()
        .filter(|p| !is_terminating(p))
        .map(|pod| Stop {
            pod,
            reason: if pods::target_node(pod).is_empty() {
                DeletionReason::Unbound
            } else {
                DeletionReason::NodeGone
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::LabelSelector;

    fn ds() -> DaemonSet {
        let mut ds = DaemonSet::default();
        ds.metadata.name = "agent".into();
        ds.metadata.uid = "ds-uid".into();
        let labels: drover_api::Labels = [("app".to_string(), "agent".to_string())].into();
        ds.spec.selector = Some(LabelSelector {
            match_labels: labels.clone(),
            ..Default::default()
        });
        ds.spec.template.metadata.labels = labels;
        ds
    }

    fn node(name: &str, taint: Option<&str>) -> Node {
        let mut node = Node::default();
        node.metadata.name = name.into();
        node.spec.taints = taint.into_iter().map(|t| t.parse().unwrap()).collect();
        node
    }

    fn pod(name: &str, node: &str, phase: PodPhase) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = name.into();
        pod.metadata.labels = [("app".to_string(), "agent".to_string())].into();
        pod.metadata.owner_references = vec![pods::controller_ref(&ds())];
        pod.spec.node_name = node.into();
        pod.status.phase = Some(phase);
        pod
    }

    fn at() -> Timestamp {
        Timestamp::from_unix_seconds(1_700_000_000)
    }

    fn diff<'a>(node: &'a Node, pods: &'a [Pod]) -> NodeDiff<'a> {
        let ds = ds();
        let verdict = Eligibility::new(&ds).evaluate(node);
        diff_node(&ds, node, verdict, pods.iter().collect(), None, at())
    }

    fn names<'a>(pods: &[&'a Pod]) -> Vec<&'a str> {
        pods.iter().map(|p| p.metadata.name.as_str()).collect()
    }

    fn stops<'a, 'd>(diff: &'d NodeDiff<'a>) -> Vec<(&'a str, &'d DeletionReason)> {
        diff.stop
            .iter()
            .map(|s| (s.pod.metadata.name.as_str(), &s.reason))
            .collect()
    }

    #[test]
    fn an_empty_eligible_node_is_placed() {
        let n = node("n1", None);
        let d = diff(&n, &[]);
        assert!(d.place && d.keep.is_empty() && d.stop.is_empty());
        assert!(!d.misscheduled());
        assert!(d.slot().is_some_and(|s| s.should_run && s.pods.is_empty()));
    }

    #[test]
    fn finished_pods_and_duplicates_are_stopped_in_order() {
        let n = node("n1", None);
        let mut leaving = pod("e", "n1", PodPhase::Running);
        leaving.metadata.deletion_timestamp = Some(at().to_rfc3339());
        let pods = [
            pod("d", "n1", PodPhase::Running),
            pod("a", "n1", PodPhase::Failed),
            pod("c", "n1", PodPhase::Running),
            pod("b", "n1", PodPhase::Succeeded),
            leaving,
        ];
        let d = diff(&n, &pods);
        assert!(!d.place);
        assert_eq!(names(&d.pods), ["a", "b", "c", "d", "e"]);
        assert_eq!(d.first().map(|p| p.metadata.name.as_str()), Some("a"));
        assert_eq!(names(&d.keep), ["c"]);
        assert_eq!(names(&d.terminating), ["e"]);
        let kept = DeletionReason::Duplicate { kept: "c".into() };
        assert_eq!(
            stops(&d),
            [
                ("a", &DeletionReason::Failed),
                ("b", &DeletionReason::Succeeded),
                ("d", &kept)
            ]
        );
    }

    #[test]
    fn a_pod_being_deleted_blocks_placement() {
        let n = node("n1", None);
        let mut leaving = pod("a", "n1", PodPhase::Running);
        leaving.metadata.deletion_timestamp = Some(at().to_rfc3339());
        let d = diff(&n, std::slice::from_ref(&leaving));
        assert!(!d.place && d.stop.is_empty() && d.keep.is_empty());
    }

    #[test]
    fn ineligible_nodes_keep_or_stop_their_pods() {
        let pods = [pod("a", "n1", PodPhase::Running)];
        // NoSchedule: no new pod, the existing one stays (misscheduled).
        let n = node("n1", Some("x:NoSchedule"));
        let d = diff(&n, &pods);
        assert!(d.stop.is_empty() && d.misscheduled());
        assert_eq!(names(&d.keep), ["a"]);
        // NoExecute: it goes.
        let n = node("n1", Some("x:NoExecute"));
        let d = diff(&n, &pods);
        assert!(d.keep.is_empty() && d.misscheduled());
        assert!(matches!(d.stop[0].reason, DeletionReason::NotEligible(_)));
        // Nothing there: not even a rollout slot.
        assert!(diff(&n, &[]).slot().is_none());
    }

    #[test]
    fn claims_and_strays() {
        let ds = ds();
        let selector = Selector::from_label_selector(ds.spec.selector.as_ref().unwrap()).unwrap();
        let mut orphan = pod("o", "n1", PodPhase::Running);
        orphan.metadata.owner_references.clear();
        let mut unmatched = pod("u", "n1", PodPhase::Running);
        unmatched.metadata.labels.clear();
        let mut other_ns = pod("x", "n1", PodPhase::Running);
        other_ns.metadata.namespace = "other".into();
        let all = [
            pod("a", "n1", PodPhase::Running),
            pod("g", "gone", PodPhase::Running),
            pod("z", "", PodPhase::Running),
            orphan,
            unmatched,
            other_ns,
        ];
        let refs: Vec<&Pod> = all.iter().collect();
        let mut claimed = claim_pods(&ds, &selector, &refs);
        assert_eq!(names(&claimed.adopt), ["o"]);
        assert_eq!(names(&claimed.release), ["u"]);
        assert_eq!(taken_names(namespace_of(&ds.metadata), &refs).len(), 5);
        assert_eq!(claimed.pods().count(), 4);
        let n1 = node("n1", None);
        let diffs = diff_nodes(
            &ds,
            &Eligibility::new(&ds),
            &[&n1, &n1],
            &mut claimed.by_node,
            None,
            None,
            at(),
        );
        assert_eq!(diffs.len(), 1, "each node once");
        let strays: Vec<(&str, DeletionReason)> = stray_pods(claimed.by_node)
            .into_iter()
            .map(|s| (s.pod.metadata.name.as_str(), s.reason))
            .collect();
        assert_eq!(
            strays,
            [
                ("z", DeletionReason::Unbound),
                ("g", DeletionReason::NodeGone)
            ]
        );
    }
}
