//! Objects the daemon planner's unit tests share: a DaemonSet `agent`
//! (`app=agent`), nodes Ready or not, and its running pods.

use super::pods::{self, CONTROLLER_REVISION_HASH_LABEL};
use crate::Timestamp;
use drover_api::{
    ConditionStatus, Container, DaemonSet, LabelSelector, Node, NodeCondition, Pod, PodCondition,
    PodPhase,
};

/// `seconds` after a fixed instant.
pub(crate) fn at(seconds: i64) -> Timestamp {
    Timestamp::from_unix_seconds(1_700_000_000 + seconds)
}

/// The DaemonSet `default/agent` (uid `ds-uid`, generation 1) running
/// `image`.
pub(crate) fn ds(image: &str) -> DaemonSet {
    let mut ds = DaemonSet::default();
    ds.metadata.name = "agent".into();
    ds.metadata.namespace = "default".into();
    ds.metadata.uid = "ds-uid".into();
    ds.metadata.generation = Some(1);
    let labels: drover_api::Labels = [("app".to_string(), "agent".to_string())].into();
    ds.spec.selector = Some(LabelSelector {
        match_labels: labels.clone(),
        ..Default::default()
    });
    ds.spec.template.metadata.labels = labels;
    ds.spec.template.spec.containers = vec![Container {
        name: "agent".into(),
        image: image.into(),
        ..Default::default()
    }];
    ds
}

/// A node, Ready or Unknown.
pub(crate) fn node(name: &str, ready: bool) -> Node {
    let mut node = Node::default();
    node.metadata.name = name.into();
    node.status.conditions.push(NodeCondition {
        r#type: "Ready".into(),
        status: Some(if ready {
            ConditionStatus::True
        } else {
            ConditionStatus::Unknown
        }),
        ..Default::default()
    });
    node
}

/// A running pod of `ds(..)` on `node` of revision `hash`, created at
/// `at(created)`, Ready (or not) since then.
pub(crate) fn pod(name: &str, node: &str, hash: &str, ready: bool, created: i64) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = name.into();
    pod.metadata.namespace = "default".into();
    pod.metadata.uid = format!("uid-{name}");
    pod.metadata.labels = [
        ("app".to_string(), "agent".to_string()),
        (CONTROLLER_REVISION_HASH_LABEL.to_string(), hash.to_string()),
    ]
    .into();
    pod.metadata.creation_timestamp = Some(at(created).to_rfc3339());
    pod.metadata.owner_references = vec![pods::controller_ref(&ds("x"))];
    pod.spec.node_name = node.into();
    pod.status.phase = Some(PodPhase::Running);
    set_ready(&mut pod, ready, created);
    pod
}

/// Sets the pod's Ready condition, changed at `at(since)`.
pub(crate) fn set_ready(pod: &mut Pod, ready: bool, since: i64) {
    pod.status.conditions = vec![PodCondition {
        r#type: "Ready".into(),
        status: Some(if ready {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }),
        last_transition_time: Some(at(since).to_rfc3339()),
        ..Default::default()
    }];
}
