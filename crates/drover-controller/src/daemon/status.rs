//! The DaemonSet's status from the per-node buckets
//! (`updateDaemonSetStatus`), computed from the pods as they are, before
//! the plan is applied (the next plan sees the result).

use drover_api::{DaemonSet, DaemonSetStatus};

use super::facts::StatusCounts;

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
    use crate::daemon::facts::{count, NodeFacts};
    use crate::daemon::pods;
    use crate::daemon::Eligibility;
    use crate::time::Timestamp;
    use drover_api::{ConditionStatus, Node, Pod, PodCondition, PodPhase};
    use std::time::Duration;

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
        let min_ready = Duration::from_secs(5);
        let facts = |hash: Option<&str>, min_ready: Duration| -> Vec<NodeFacts> {
            diffs
                .iter()
                .map(|d| NodeFacts::of(d, hash, min_ready, at(10), false))
                .collect()
        };
        let counts = count(&facts(Some("new"), min_ready), min_ready, at(10));
        assert_eq!(
            counts,
            StatusCounts {
                desired: 4,
                current: 3,
                misscheduled: 1,
                ready: 2,
                available: 1,
                updated: 2,
                next_available: Some(at(13) + Duration::from_millis(1)),
            }
        );
        let status = status(&ds, &counts);
        assert_eq!(status.number_unavailable, 3);
        assert_eq!(status.observed_generation, Some(3));
        let without_revision = count(&facts(None, Duration::ZERO), Duration::ZERO, at(10));
        assert_eq!(without_revision.updated, 3);
    }
}
