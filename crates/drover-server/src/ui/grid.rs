//! A DaemonSet's rollout as a grid of nodes, each in one state, with why:
//! read from [`drover_controller::daemon::explain()`], the same answer
//! `describe ds` and `rollout status` give (never derived again here).
//! Pure: objects and `now` in, cells out.

use drover_api::{DaemonSet, Node, Pod};
use drover_controller::daemon::explain::{explain, NoPod, WaitReason};
use drover_controller::daemon::rollout::{is_updated, template_hash};
use drover_controller::Timestamp;
use std::collections::HashMap;

/// The state of a node in a DaemonSet's rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CellState {
    /// Runs a ready pod of the current revision.
    Updated,
    /// A pod of the current revision is starting (not ready, or not
    /// available for `minReadySeconds` yet).
    Updating,
    /// Runs an older revision and waits its turn (or `OnDelete`), or
    /// should run a pod that is not created yet or does not fit.
    Waiting,
    /// The node is not Ready.
    NotReady,
    /// The node should not run the DaemonSet's pod.
    Ineligible,
}

impl CellState {
    /// Every state, in the legend's order.
    pub const ALL: [CellState; 5] = [
        CellState::Updated,
        CellState::Updating,
        CellState::Waiting,
        CellState::NotReady,
        CellState::Ineligible,
    ];

    /// The CSS class (and the name the live stream sends).
    pub fn class(self) -> &'static str {
        match self {
            CellState::Updated => "updated",
            CellState::Updating => "updating",
            CellState::Waiting => "waiting",
            CellState::NotReady => "notready",
            CellState::Ineligible => "ineligible",
        }
    }

    /// What the legend says.
    pub fn label(self) -> &'static str {
        match self {
            CellState::Updated => "updated",
            CellState::Updating => "updating",
            CellState::Waiting => "waiting",
            CellState::NotReady => "node NotReady",
            CellState::Ineligible => "ineligible",
        }
    }
}

/// One node of the grid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub node: String,
    pub state: CellState,
    /// Why, in `describe ds`'s words.
    pub why: String,
}

/// The DaemonSet's current revision hash, as the controller computes it
/// for its template (the `controller-revision-hash` of its pods).
pub fn current_hash(ds: &DaemonSet) -> String {
    template_hash(&ds.spec.template, ds.status.collision_count)
}

/// The grid of `ds` over `nodes` (every node of the cluster), from
/// `pods` (every pod, so that fits are exact), sorted by node name; and
/// why the controller does not act on it at all, if it does not.
pub fn cells(
    ds: &DaemonSet,
    nodes: &[&Node],
    pods: &[&Pod],
    now: Timestamp,
) -> (Vec<Cell>, Option<String>) {
    let hash = current_hash(ds);
    let e = explain(
        ds,
        nodes.iter().copied(),
        pods.iter().copied(),
        Some(&hash),
        now,
    );
    let without: HashMap<&str, &NoPod> = e
        .nodes_without_pod
        .iter()
        .map(|w| (w.node.as_str(), &w.why))
        .collect();
    // A node's first wait that holds the rollout, else its first.
    let mut waits: HashMap<&str, &WaitReason> = HashMap::new();
    if let Some(r) = &e.rollout {
        for w in &r.waiting {
            let slot = waits.entry(w.node.as_str()).or_insert(&w.reason);
            if !slot.holds_rollout() && w.reason.holds_rollout() {
                *slot = &w.reason;
            }
        }
    }
    let mut pods_of: HashMap<&str, Vec<&Pod>> = HashMap::new();
    for p in &e.pods {
        if !p.spec.node_name.is_empty() {
            pods_of
                .entry(p.spec.node_name.as_str())
                .or_default()
                .push(p);
        }
    }
    let mut out: Vec<Cell> = nodes
        .iter()
        .map(|n| {
            let name = n.metadata.name.as_str();
            let (state, why) = if let Some(no) = without.get(name) {
                match no {
                    NoPod::Ineligible(_) => (CellState::Ineligible, no.lines().join("; ")),
                    _ => (CellState::Waiting, no.to_string()),
                }
            } else if let Some(w) = waits.get(name) {
                let state = match w {
                    WaitReason::NodeNotReady => CellState::NotReady,
                    WaitReason::NewPodNotReady { .. }
                    | WaitReason::NewPodNotAvailableYet { .. } => CellState::Updating,
                    WaitReason::OnDelete { .. } | WaitReason::OldPodWaitingItsTurn { .. } => {
                        CellState::Waiting
                    }
                };
                (state, w.to_string())
            } else {
                let pods = pods_of.get(name).map(Vec::as_slice).unwrap_or(&[]);
                match pods.iter().find(|p| is_updated(p, &hash)) {
                    Some(p) if p.is_ready() => (
                        CellState::Updated,
                        format!("pod {} ready at revision {hash}", p.metadata.name),
                    ),
                    Some(p) => (
                        CellState::Updating,
                        format!("new pod {} not ready", p.metadata.name),
                    ),
                    None => (CellState::Waiting, "runs an older revision".to_string()),
                }
            };
            // A node that is not Ready is red whatever its pod: the
            // operator must see it first.
            let (state, why) = if !n.is_ready() && state != CellState::NotReady {
                (CellState::NotReady, format!("node not Ready; {why}"))
            } else {
                (state, why)
            };
            Cell {
                node: name.to_string(),
                state,
                why,
            }
        })
        .collect();
    out.sort_by(|a, b| a.node.cmp(&b.node));
    (out, e.idle.map(|i| i.to_string()))
}

/// How many cells are in each state, in [`CellState::ALL`]'s order.
pub fn counts(cells: &[Cell]) -> Vec<(CellState, usize)> {
    CellState::ALL
        .iter()
        .map(|s| (*s, cells.iter().filter(|c| c.state == *s).count()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::{ConditionStatus, LabelSelector, NodeCondition, OwnerReference, PodCondition};

    fn node(name: &str, ready: bool) -> Node {
        let mut n = Node::default();
        n.metadata.name = name.into();
        n.status.conditions.push(NodeCondition {
            r#type: "Ready".into(),
            status: Some(if ready {
                ConditionStatus::True
            } else {
                ConditionStatus::False
            }),
            ..Default::default()
        });
        n
    }

    fn daemon_set() -> DaemonSet {
        let mut ds = DaemonSet::default();
        ds.metadata.name = "agent".into();
        ds.metadata.namespace = "default".into();
        ds.metadata.uid = "ds-uid".into();
        ds.spec.selector = Some(LabelSelector {
            match_labels: [("app".to_string(), "agent".to_string())].into(),
            ..Default::default()
        });
        ds.spec.template.metadata.labels = [("app".to_string(), "agent".to_string())].into();
        ds
    }

    fn pod(ds: &DaemonSet, node: &str, hash: &str, ready: bool) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = format!("agent-{node}");
        p.metadata.namespace = "default".into();
        p.metadata.uid = format!("uid-{node}");
        p.metadata.labels = [
            ("app".to_string(), "agent".to_string()),
            ("controller-revision-hash".to_string(), hash.to_string()),
        ]
        .into();
        p.metadata.owner_references.push(OwnerReference {
            api_version: "apps/v1".into(),
            kind: "DaemonSet".into(),
            name: ds.metadata.name.clone(),
            uid: ds.metadata.uid.clone(),
            controller: Some(true),
            ..Default::default()
        });
        p.metadata.creation_timestamp = Some("2026-01-01T00:00:00Z".into());
        p.spec.node_name = node.into();
        p.status.phase = Some(drover_api::PodPhase::Running);
        p.status.conditions.push(PodCondition {
            r#type: "Ready".into(),
            status: Some(if ready {
                ConditionStatus::True
            } else {
                ConditionStatus::False
            }),
            last_transition_time: Some("2026-01-01T00:00:00Z".into()),
            ..Default::default()
        });
        p
    }

    #[test]
    fn each_node_gets_the_state_explain_gives_it() {
        let mut ds = daemon_set();
        ds.spec.template.spec.node_selector = [("role".to_string(), "edge".to_string())].into();
        let hash = current_hash(&ds);
        let mut nodes: Vec<Node> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|n| node(n, *n != "d"))
            .collect();
        for n in nodes.iter_mut().filter(|n| n.metadata.name != "e") {
            n.metadata.labels.insert("role".into(), "edge".into());
        }
        let pods = [
            pod(&ds, "a", &hash, true),
            pod(&ds, "b", &hash, false),
            pod(&ds, "d", "old", true),
        ];
        let node_refs: Vec<&Node> = nodes.iter().collect();
        let pod_refs: Vec<&Pod> = pods.iter().collect();
        let now = Timestamp::from_unix_seconds(1_800_000_000);
        let (cells, idle) = cells(&ds, &node_refs, &pod_refs, now);
        assert_eq!(idle, None);
        let state: HashMap<&str, CellState> =
            cells.iter().map(|c| (c.node.as_str(), c.state)).collect();
        assert_eq!(state["a"], CellState::Updated);
        assert_eq!(state["b"], CellState::Updating);
        // c should run a pod: not created yet.
        assert_eq!(state["c"], CellState::Waiting);
        assert_eq!(state["d"], CellState::NotReady);
        assert_eq!(state["e"], CellState::Ineligible);
        let e = cells.iter().find(|c| c.node == "e").unwrap();
        assert!(
            e.why.contains("nodeSelector requires role=edge"),
            "{}",
            e.why
        );
        let b = cells.iter().find(|c| c.node == "b").unwrap();
        assert!(b.why.contains("agent-b"), "{}", b.why);
        assert_eq!(
            counts(&cells),
            vec![
                (CellState::Updated, 1),
                (CellState::Updating, 1),
                (CellState::Waiting, 1),
                (CellState::NotReady, 1),
                (CellState::Ineligible, 1),
            ]
        );
    }
}
