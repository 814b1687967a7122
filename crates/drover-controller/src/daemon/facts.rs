//! What the status and the rolling update need of each node, as small
//! owned values ([`NodeFacts`]), and the two folds over them: the status
//! counts ([`count`]) and one rolling-update step ([`rolling_update`]).
//!
//! A plan computes the facts of every node it diffs. A plan of the whole
//! cluster folds over those; a plan that keeps a [`super::Memo`] between
//! passes diffs again only the nodes whose Node or pods changed, and folds
//! over the facts it kept of the others. Both go through the same folds,
//! so the two cannot disagree about the status or the step.

use std::time::Duration;

use drover_api::{DaemonSet, Pod};

use super::diff::NodeDiff;
use super::pods::{self, is_terminating, Readiness};
use super::rollout::{is_rolling_update, is_updated, update_counts};
use crate::time::Timestamp;

/// An old pod the rolling update may delete: what its deletion names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PodIdent {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    pub node_name: String,
}

impl PodIdent {
    /// The identity of `pod`.
    pub fn of(pod: &Pod) -> Self {
        PodIdent {
            namespace: crate::events::namespace_of(&pod.metadata).to_owned(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            resource_version: pod.metadata.resource_version.clone(),
            node_name: pod.spec.node_name.clone(),
        }
    }
}

/// The new and the old pod of a node (Kubernetes'
/// `findUpdatedPodsOnNode`), among the pods not being deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Split {
    pub new: Option<Readiness>,
    pub old: Option<Readiness>,
    /// The old pod, kept only by a plan with a memo (a plan of the whole
    /// cluster finds it in the node's diff).
    pub old_pod: Option<PodIdent>,
}

/// What the status and the rolling update need of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeFacts {
    /// The node should run the pod.
    pub should_run: bool,
    /// The node is Ready.
    pub ready: bool,
    /// The DaemonSet has a pod on the node (any, being deleted included).
    pub has_pods: bool,
    /// The first pod (the one that counts for the status): its readiness
    /// and whether it is of the current revision (every pod is, without
    /// a revision).
    pub first: Option<(Readiness, bool)>,
    /// The new and the old pod; `None` when there are two of either, or
    /// without a revision.
    pub split: Option<Split>,
    /// The node's diff wanted no write and does not change with time: a
    /// plan with a memo does not diff it again until it changes.
    pub quiet: bool,
}

impl NodeFacts {
    /// The facts of a node's diff. `keep_old` keeps the old pod's identity
    /// (for a plan that will not have the diff when it deletes it).
    pub fn of(
        diff: &NodeDiff<'_>,
        revision_hash: Option<&str>,
        min_ready: Duration,
        now: Timestamp,
        keep_old: bool,
    ) -> Self {
        let first = diff.first().map(|p| {
            let updated = revision_hash.is_none_or(|h| is_updated(p, h));
            (Readiness::of(p, min_ready), updated)
        });
        let split = revision_hash.and_then(|hash| {
            let (new, old) = updated_and_old(&diff.pods, hash)?;
            Some(Split {
                new: new.map(|p| Readiness::of(p, min_ready)),
                old: old.map(|p| Readiness::of(p, min_ready)),
                old_pod: old.filter(|_| keep_old).map(PodIdent::of),
            })
        });
        let writes = diff.place
            || diff.bind.is_some()
            || diff.waiting.is_some()
            || !diff.stop.is_empty()
            || !diff.eligibility.preempt.is_empty();
        // A pod ready but not available yet becomes available with time
        // (and with surge, that decides which pod stays).
        let timed = !min_ready.is_zero()
            && diff.pods.iter().any(|p| {
                let r = Readiness::of(p, min_ready);
                r.ready && !r.available(min_ready, now)
            });
        NodeFacts {
            should_run: diff.eligibility.should_run,
            ready: diff.ready,
            has_pods: !diff.pods.is_empty(),
            first,
            split,
            quiet: !writes && !timed,
        }
    }

    /// The rolling update sees the node: it should run the pod or has one.
    fn in_rollout(&self) -> bool {
        self.should_run || self.has_pods
    }
}

/// Kubernetes' `findUpdatedPodsOnNode`: the new and the old pod among the
/// pods not being deleted, or `None` when there are two of either.
pub(crate) fn updated_and_old<'a>(
    pods: &[&'a Pod],
    hash: &str,
) -> Option<(Option<&'a Pod>, Option<&'a Pod>)> {
    let (mut new, mut old) = (None, None);
    for &pod in pods.iter().filter(|p| !is_terminating(p)) {
        let slot = if is_updated(pod, hash) {
            &mut new
        } else {
            &mut old
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(pod);
    }
    Some((new, old))
}

/// The counts of a DaemonSet's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct StatusCounts {
    /// Nodes that should run the pod.
    pub desired: usize,
    /// Of those, nodes with a pod (any, even being deleted).
    pub current: usize,
    /// Nodes that should not run the pod and have one.
    pub misscheduled: usize,
    /// Nodes whose first pod is ready.
    pub ready: usize,
    /// Nodes whose first pod is available (ready for longer than
    /// `minReadySeconds`).
    pub available: usize,
    /// Nodes whose first pod is of the current revision (all of them
    /// without a revision).
    pub updated: usize,
    /// When the next ready pod becomes available: plan again then.
    pub next_available: Option<Timestamp>,
}

/// Counts the nodes (`updateDaemonSetStatus`): see [`StatusCounts`].
pub(crate) fn count<'f>(
    facts: impl IntoIterator<Item = &'f NodeFacts>,
    min_ready: Duration,
    now: Timestamp,
) -> StatusCounts {
    let mut counts = StatusCounts::default();
    for f in facts {
        if !f.should_run {
            if f.has_pods {
                counts.misscheduled += 1;
            }
            continue;
        }
        counts.desired += 1;
        let Some((first, updated)) = f.first else {
            continue;
        };
        counts.current += 1;
        if first.ready {
            counts.ready += 1;
            if first.available(min_ready, now) {
                counts.available += 1;
            } else if let Some(at) = first.available_at(min_ready, now) {
                counts.next_available = Some(counts.next_available.map_or(at, |t| t.min(at)));
            }
        }
        if updated {
            counts.updated += 1;
        }
    }
    counts
}

/// One step of a rolling update, by node: the nodes whose old pod goes,
/// and those that get a new pod beside their old one (surge).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Step<'f> {
    /// Nodes whose old pod is deleted, in this order.
    pub delete_on: Vec<&'f str>,
    /// Nodes to start a new pod on beside the old one.
    pub create_on: Vec<&'f str>,
}

/// One step of Kubernetes' `rollingUpdate` for a DaemonSet with the
/// `RollingUpdate` strategy; nothing for `OnDelete`. `facts` are every
/// node's, by name, each once. Call it only when the placement plan
/// changes nothing (Kubernetes runs it once the manage loop's expectations
/// are met).
///
/// Without surge: old pods that are not available are deleted at once;
/// available old pods are deleted while fewer than `maxUnavailable` Ready
/// nodes lack an available pod. With surge: a new pod is started beside an
/// unavailable old pod at once and beside available ones on at most
/// `maxSurge` nodes; the old pod is deleted once the new one is available.
/// Nodes that are not Ready are skipped (`explain` lists those that run
/// an old pod as [`super::WaitReason::NodeNotReady`]).
pub(crate) fn rolling_update<'f>(
    ds: &DaemonSet,
    facts: impl Iterator<Item = (&'f str, &'f NodeFacts)> + Clone,
    now: Timestamp,
) -> Step<'f> {
    let mut step = Step::default();
    if !is_rolling_update(ds) {
        return step;
    }
    let slots = facts.filter(|(_, f)| f.in_rollout());
    let desired = slots.clone().filter(|(_, f)| f.should_run).count();
    let desired = i32::try_from(desired).unwrap_or(i32::MAX);
    let (max_surge, max_unavailable) = update_counts(ds, desired);
    let min_ready = pods::min_ready(ds);
    let available = |r: &Readiness| r.available(min_ready, now);

    if max_surge == 0 {
        let mut unavailable = 0;
        let mut candidates: Vec<&'f str> = Vec::new();
        for (node, f) in slots {
            let Some(split) = &f.split else {
                if f.ready {
                    unavailable += 1;
                }
                continue;
            };
            if !f.ready {
                continue;
            }
            match (&split.new, &split.old) {
                (None, None) | (Some(_), Some(_)) => unavailable += 1,
                (Some(new), None) => {
                    if !available(new) {
                        unavailable += 1;
                    }
                }
                (None, Some(old)) => {
                    if !available(old) {
                        step.delete_on.push(node);
                    } else {
                        candidates.push(node);
                    }
                }
            }
        }
        let room = (max_unavailable - unavailable).max(0) as usize;
        candidates.truncate(room);
        step.delete_on.extend(candidates);
        return step;
    }

    let mut surging = 0;
    let mut available_count = 0;
    let mut allowed_new: Vec<&'f str> = Vec::new();
    let mut candidate_new: Vec<&'f str> = Vec::new();
    let mut should_not_run: Vec<&'f str> = Vec::new();
    for (node, f) in slots {
        let Some(split) = &f.split else {
            if f.ready {
                surging += 1;
            }
            continue;
        };
        if !f.ready {
            continue;
        }
        if let Some(p) = split.old.as_ref().or(split.new.as_ref()) {
            if available(p) {
                available_count += 1;
            }
        }
        match (&split.new, &split.old) {
            (_, None) => {}
            (None, Some(old)) => {
                if !available(old) {
                    if f.should_run {
                        allowed_new.push(node);
                    } else {
                        step.delete_on.push(node);
                    }
                } else if !f.should_run {
                    should_not_run.push(node);
                } else {
                    candidate_new.push(node);
                }
            }
            (Some(new), Some(_)) => {
                if available(new) {
                    step.delete_on.push(node);
                } else {
                    surging += 1;
                }
            }
        }
    }
    let deletable = (available_count as i64 - i64::from(desired)).max(0) as usize;
    step.delete_on
        .extend(should_not_run.into_iter().take(deletable));
    let room = (max_surge - surging).max(0) as usize;
    candidate_new.truncate(room);
    step.create_on = allowed_new;
    step.create_on.extend(candidate_new);
    step
}
