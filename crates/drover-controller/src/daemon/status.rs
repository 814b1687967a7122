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
        if let Some(since) = pods::ready_since(first) {
            counts.ready += 1;
            if pods::is_available(first, min_ready, now) {
                counts.available += 1;
            } else if let Some(since) = since {
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
