//! The DaemonSet's status from the per-node buckets
//! (`updateDaemonSetStatus`), computed from the pods as they are, before
//! the plan is applied (the next plan sees the result).

use std::time::Duration;

use drover_api::{DaemonSet, DaemonSetStatus};

use super::diff::NodeDiff;
use super::pods;
use super::rollout::is_updated;
use crate::time::Timestamp;

/// How far past the `minReadySeconds` mark [`StatusCounts::next_available`]
/// lands, since availability needs strictly more than `minReadySeconds`.
const AVAILABILITY_SLACK: Duration = Duration::from_millis(1);

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

/// Counts the nodes: see [`StatusCounts`].
pub(crate) fn count(
    diffs: &[NodeDiff<'_>],
    revision_hash: Option<&str>,
    min_ready: Duration,
    now: Timestamp,
) -> StatusCounts {
    let mut counts = StatusCounts::default();
    for diff in diffs {
        if !diff.eligibility.should_run {
            if diff.misscheduled() {
                counts.misscheduled += 1;
            }
            continue;
        }
        counts.desired += 1;
        let Some(first) = diff.first() else {
            continue;
        };
        counts.current += 1;
        if first.is_ready() {
            counts.ready += 1;
            // Without `minReadySeconds`, `is_available` does not read the
            // readiness time; it is read only for a pod not available yet.
            if pods::is_available(first, min_ready, now) {
                counts.available += 1;
            } else if let Some(Some(since)) = pods::ready_since(first) {
                let at = since + min_ready + AVAILABILITY_SLACK;
                counts.next_available = Some(counts.next_available.map_or(at, |t| t.min(at)));
            }
        }
        if revision_hash.is_none_or(|hash| is_updated(first, hash)) {
            counts.updated += 1;
        }
    }
    counts
}

fn to_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The DaemonSet's status with these counts: `numberUnavailable` is
/// desired minus available, `observedGeneration` the DaemonSet's
/// generation; the other fields are kept.
pub(crate) fn status(ds: &DaemonSet, counts: &StatusCounts) -> DaemonSetStatus {
    let mut status = ds.status.clone();
    status.desired_number_scheduled = to_i32(counts.desired);
    status.current_number_scheduled = to_i32(counts.current);
    status.number_misscheduled = to_i32(counts.misscheduled);
    status.number_ready = to_i32(counts.ready);
    status.updated_number_scheduled = to_i32(counts.updated);
    status.number_available = to_i32(counts.available);
    status.number_unavailable = to_i32(counts.desired.saturating_sub(counts.available));
    status.observed_generation = ds.metadata.generation.or(status.observed_generation);
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::diff::diff_node;
    use crate::daemon::Eligibility;
    use drover_api::{ConditionStatus, Node, Pod, PodCondition, PodPhase};

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_unix_seconds(1_700_000_000 + seconds)
    }

    fn pod(name: &str, hash: &str, ready_since: Option<i64>) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = name.into();
        pod.metadata
            .labels
            .insert(pods::CONTROLLER_REVISION_HASH_LABEL.into(), hash.into());
        pod.spec.node_name = name.into();
        pod.status.phase = Some(PodPhase::Running);
        if let Some(since) = ready_since {
            pod.status.conditions.push(PodCondition {
                r#type: "Ready".into(),
                status: Some(ConditionStatus::True),
                last_transition_time: Some(at(since).to_rfc3339()),
                ..Default::default()
            });
        }
        pod
    }

    #[test]
    fn counts_come_from_the_buckets() {
        let mut ds = DaemonSet::default();
        ds.spec.template.spec.node_selector = [("a".to_string(), "b".to_string())].into();
        ds.metadata.generation = Some(3);
        let eligibility = Eligibility::new(&ds);
        let mut nodes: Vec<Node> = ["p1", "p2", "p3", "p4", "m"]
            .iter()
            .map(|n| {
                let mut node = Node::default();
                node.metadata.name = (*n).into();
                node.metadata.labels.insert("a".into(), "b".into());
                node
            })
            .collect();
        nodes[4].metadata.labels.clear();
        let pods = [
            pod("p1", "new", Some(0)),
            pod("p2", "old", Some(8)),
            pod("p3", "new", None),
            pod("m", "new", Some(0)),
        ];
        let diffs: Vec<_> = nodes
            .iter()
            .map(|n| {
                let on: Vec<&Pod> = pods
                    .iter()
                    .filter(|p| p.spec.node_name == n.metadata.name)
                    .collect();
                diff_node(&ds, n, eligibility.evaluate(n), on, None, at(10))
            })
            .collect();
        let counts = count(&diffs, Some("new"), Duration::from_secs(5), at(10));
        assert_eq!(
            counts,
            StatusCounts {
                desired: 4,
                current: 3,
                misscheduled: 1,
                ready: 2,
                available: 1,
                updated: 2,
                next_available: Some(at(13) + AVAILABILITY_SLACK),
            }
        );
        let status = status(&ds, &counts);
        assert_eq!(status.number_unavailable, 3);
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(count(&diffs, None, Duration::ZERO, at(10)).updated, 3);
    }
}
