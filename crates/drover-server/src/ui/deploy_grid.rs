//! A Deployment's pods as a grid, each in one state, with why: which
//! ReplicaSet is new and which are old comes from
//! [`drover_controller::deployment::view`], the reading `describe deploy`
//! and `rollout status` use (never derived again here); a pending pod's
//! why is the scheduler's `PodScheduled=False` message. Pure: objects in,
//! cells out.

use drover_api::{ConditionStatus, Deployment, Pod, PodPhase, ReplicaSet};
use drover_controller::deployment::view::{new_replica_set, owned, revision};
use std::collections::HashMap;

/// The state of one pod of a Deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PodState {
    /// A pod of the new ReplicaSet, Running and Ready.
    Updated,
    /// A pod of the new ReplicaSet, scheduled but not Ready yet.
    NotReady,
    /// Not scheduled (or not started) yet: why, from the scheduler.
    Pending,
    /// A pod of an old ReplicaSet.
    Old,
    /// Being deleted.
    Terminating,
}

impl PodState {
    /// Every state, in the legend's order.
    pub const ALL: [PodState; 5] = [
        PodState::Updated,
        PodState::NotReady,
        PodState::Pending,
        PodState::Old,
        PodState::Terminating,
    ];

    /// The CSS class (and the name the live stream sends).
    pub fn class(self) -> &'static str {
        match self {
            PodState::Updated => "updated",
            PodState::NotReady => "updating",
            PodState::Pending => "pending",
            PodState::Old => "old",
            PodState::Terminating => "terminating",
        }
    }

    /// What the legend says.
    pub fn label(self) -> &'static str {
        match self {
            PodState::Updated => "updated",
            PodState::NotReady => "not ready",
            PodState::Pending => "pending",
            PodState::Old => "old ReplicaSet",
            PodState::Terminating => "terminating",
        }
    }
}

/// One pod of the grid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCell {
    pub pod: String,
    pub state: PodState,
    /// Its ReplicaSet.
    pub replica_set: String,
    /// Why, in a sentence.
    pub why: String,
}

/// Why `p` is not scheduled, in the scheduler's words (its
/// `PodScheduled=False` condition), if it says.
pub fn unscheduled_because(p: &Pod) -> Option<String> {
    p.status
        .conditions
        .iter()
        .find(|c| c.r#type == "PodScheduled" && c.status == Some(ConditionStatus::False))
        .map(|c| {
            if c.message.is_empty() {
                c.reason.clone()
            } else {
                c.message.clone()
            }
        })
}

/// The pods of `d` (the pods its ReplicaSets control, among `pods`), sorted
/// by state then name; `replica_sets` are those of its namespace.
pub fn cells(d: &Deployment, replica_sets: &[ReplicaSet], pods: &[&Pod]) -> Vec<PodCell> {
    let owned = owned(d, replica_sets);
    let new_uid = new_replica_set(d, &owned).map(|rs| rs.metadata.uid.clone());
    let by_uid: HashMap<&str, &ReplicaSet> = owned
        .iter()
        .map(|rs| (rs.metadata.uid.as_str(), *rs))
        .collect();
    let mut out: Vec<PodCell> = pods
        .iter()
        .filter(|p| p.metadata.namespace == d.metadata.namespace)
        .filter_map(|p| {
            let o = p.metadata.controller_ref()?;
            let rs = by_uid.get(o.uid.as_str())?;
            let is_new = Some(&rs.metadata.uid) == new_uid.as_ref();
            let rev = revision(rs).map_or(String::new(), |r| format!(" (revision {r})"));
            let (state, why) = if p.metadata.deletion_timestamp.is_some() {
                (PodState::Terminating, "being deleted".to_string())
            } else if p.spec.node_name.is_empty() {
                let why = unscheduled_because(p).map_or("not scheduled yet".to_string(), |m| {
                    format!("not scheduled: {m}")
                });
                (PodState::Pending, why)
            } else if p.status.phase == Some(PodPhase::Pending) && !is_new {
                (PodState::Old, format!("pending on {}", p.spec.node_name))
            } else if p.status.phase == Some(PodPhase::Pending) {
                (
                    PodState::Pending,
                    format!("starting on {}", p.spec.node_name),
                )
            } else if !is_new {
                let ready = if p.is_ready() { "ready" } else { "not ready" };
                (
                    PodState::Old,
                    format!("old ReplicaSet{rev}, {ready} on {}", p.spec.node_name),
                )
            } else if p.is_ready() {
                (
                    PodState::Updated,
                    format!("ready on {}{rev}", p.spec.node_name),
                )
            } else {
                (
                    PodState::NotReady,
                    format!("not ready on {}", p.spec.node_name),
                )
            };
            Some(PodCell {
                pod: p.metadata.name.clone(),
                state,
                replica_set: rs.metadata.name.clone(),
                why,
            })
        })
        .collect();
    out.sort_by(|a, b| a.state.cmp(&b.state).then_with(|| a.pod.cmp(&b.pod)));
    out
}

/// How many cells are in each state, in [`PodState::ALL`]'s order.
pub fn counts(cells: &[PodCell]) -> Vec<(PodState, usize)> {
    PodState::ALL
        .iter()
        .map(|s| (*s, cells.iter().filter(|c| c.state == *s).count()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::Manifest;
    use serde_json::json;

    fn deployment(image: &str) -> Deployment {
        let m = Manifest::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "d-uid"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": image}]}}},
        }))
        .unwrap();
        let Manifest::Deployment(d) = m else { panic!() };
        *d
    }

    fn replica_set(hash: &str, image: &str, created: &str, rev: &str) -> ReplicaSet {
        let m = Manifest::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": format!("web-{hash}"), "namespace": "default",
                "uid": format!("rs-{hash}"), "creationTimestamp": created,
                "annotations": {"deployment.kubernetes.io/revision": rev},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                    "name": "web", "uid": "d-uid", "controller": true}]},
            "spec": {"replicas": 1,
                "selector": {"matchLabels": {"app": "web", "pod-template-hash": hash}},
                "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": hash}},
                    "spec": {"containers": [{"name": "c", "image": image}]}}},
        }))
        .unwrap();
        let Manifest::ReplicaSet(rs) = m else {
            panic!()
        };
        *rs
    }

    fn pod(name: &str, hash: &str, status: serde_json::Value, extra: serde_json::Value) -> Pod {
        let mut v = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": format!("{name}-uid"),
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": format!("web-{hash}"), "uid": format!("rs-{hash}"), "controller": true}]},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": status,
        });
        if let Some(node) = extra.get("node") {
            v["spec"]["nodeName"] = node.clone();
        }
        if let Some(t) = extra.get("deleting") {
            v["metadata"]["deletionTimestamp"] = t.clone();
        }
        let Manifest::Pod(p) = Manifest::from_value(v).unwrap() else {
            panic!()
        };
        *p
    }

    #[test]
    fn each_pod_gets_its_state_and_why() {
        let d = deployment("i:2");
        let sets = vec![
            replica_set("old", "i:1", "2026-01-01T00:00:00Z", "1"),
            replica_set("new", "i:2", "2026-01-01T01:00:00Z", "2"),
        ];
        let ready =
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
        let running =
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]});
        let unschedulable = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled",
            "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient cpu."}]});
        let mut stranger = pod("other", "new", ready.clone(), json!({"node": "n1"}));
        stranger.metadata.owner_references[0].uid = "someone-else".into();
        let pods = [
            pod("a", "new", ready.clone(), json!({"node": "n1"})),
            pod("b", "new", running, json!({"node": "n2"})),
            pod("c", "new", unschedulable, json!({})),
            pod("d", "old", ready.clone(), json!({"node": "n3"})),
            pod(
                "e",
                "old",
                ready,
                json!({"node": "n3", "deleting": "2026-01-01T02:00:00Z"}),
            ),
            stranger,
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let cells = cells(&d, &sets, &refs);
        let got: Vec<(&str, PodState)> = cells.iter().map(|c| (c.pod.as_str(), c.state)).collect();
        assert_eq!(
            got,
            [
                ("a", PodState::Updated),
                ("b", PodState::NotReady),
                ("c", PodState::Pending),
                ("d", PodState::Old),
                ("e", PodState::Terminating),
            ]
        );
        assert_eq!(
            cells[2].why,
            "not scheduled: 0/3 nodes are available: 3 Insufficient cpu."
        );
        assert!(cells[3].why.contains("revision 1"), "{}", cells[3].why);
        assert_eq!(cells[0].replica_set, "web-new");
        assert_eq!(counts(&cells)[0], (PodState::Updated, 1));
    }
}
