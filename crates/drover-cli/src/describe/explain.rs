//! What `describe ds` (and `rollout status`) explain about a DaemonSet,
//! recomputed here from the objects: which pods it owns, why a node has
//! none of its pods, and what a rollout still waits for.
//!
//! The controller decides these in `drover-controller`; this file
//! re-derives ownership (by controller reference, looser than the
//! controller's claim) and the rollout's waiting nodes. It is meant to be
//! replaced, as a whole, by the controller's own explanation.

use drover_api::{DaemonSet, Node, Pod};
use drover_controller::daemon::node_should_run_daemon_pod;
use drover_controller::daemon::pods::CONTROLLER_REVISION_HASH_LABEL;

/// Whether a pod belongs to a DaemonSet: its controller reference names
/// it (by uid when both have one).
pub fn owned_by(p: &Pod, ds: &DaemonSet) -> bool {
    p.metadata.namespace == ds.metadata.namespace
        && p.metadata.controller_ref().is_some_and(|r| {
            r.kind == "DaemonSet"
                && r.name == ds.metadata.name
                && (r.uid.is_empty() || ds.metadata.uid.is_empty() || r.uid == ds.metadata.uid)
        })
}

/// Why a DaemonSet's pod should not be on a node: exactly what the
/// DaemonSet controller decides (`drover_controller`'s
/// `node_should_run_daemon_pod`, Kubernetes' `NodeShouldRunDaemonPod`):
/// every `nodeSelector` label and required-affinity term that fails, and
/// every `NoSchedule`/`NoExecute` taint the pod does not tolerate (with the
/// tolerations every daemon pod gets). A node that is not ready or
/// unreachable shows through the taints the node lifecycle controller puts
/// on it. Empty when the node should run the pod.
pub fn why_not(ds: &DaemonSet, node: &Node) -> Vec<String> {
    let verdict = node_should_run_daemon_pod(ds, node);
    if verdict.should_run {
        return Vec::new();
    }
    verdict.reasons.iter().map(ToString::to_string).collect()
}

/// Every node that runs no pod of the DaemonSet, with why (from
/// [`why_not`]); a node that should run one but has none yet says so.
pub fn nodes_without_pod(
    ds: &DaemonSet,
    pods: &[Pod],
    nodes: &[Node],
) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for n in nodes {
        let has = pods.iter().any(|p| {
            owned_by(p, ds)
                && p.spec.node_name == n.metadata.name
                && p.metadata.deletion_timestamp.is_none()
        });
        if has {
            continue;
        }
        let mut reasons = why_not(ds, n);
        if reasons.is_empty() {
            reasons.push("eligible: the DaemonSet controller has not created its pod yet".into());
        }
        out.push((n.metadata.name.clone(), reasons));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// How [`rollout_waiting`] marks an old pod that only waits for its turn
/// (the consequence of a stall, not its cause).
pub const IN_TURN: &str = "replaced in turn (maxUnavailable/maxSurge)";

/// Why a node still waits in a rolling update, when its node is not Ready.
pub const NODE_NOT_READY: &str = "node not Ready, updated when it is back";

/// The nodes a rollout to revision `hash` is still waiting for, and why:
/// a node that is not Ready (updated when it is back), a new pod that is
/// not ready yet (with its container's waiting reason), an old pod waiting
/// for its turn (`RollingUpdate`) or for the user to delete it
/// (`OnDelete`). Sorted by node.
pub fn rollout_waiting(
    ds: &DaemonSet,
    hash: &str,
    pods: &[Pod],
    nodes: &[Node],
) -> Vec<(String, String)> {
    let on_delete = matches!(
        ds.spec.update_strategy.r#type,
        Some(drover_api::DaemonSetUpdateStrategyType::OnDelete)
    );
    let mut out = Vec::new();
    for p in pods
        .iter()
        .filter(|p| owned_by(p, ds) && p.metadata.deletion_timestamp.is_none())
    {
        let node = &p.spec.node_name;
        let updated = p
            .metadata
            .labels
            .get(CONTROLLER_REVISION_HASH_LABEL)
            .map(String::as_str)
            == Some(hash);
        let node_ready = nodes
            .iter()
            .find(|n| &n.metadata.name == node)
            .is_some_and(|n| n.is_ready());
        let why = if !updated && !node_ready {
            NODE_NOT_READY.to_owned()
        } else if updated && !p.is_ready() {
            let waiting = p
                .status
                .container_statuses
                .iter()
                .find_map(|c| c.state.waiting.as_ref().map(|w| w.reason.clone()))
                .filter(|r| !r.is_empty());
            match waiting {
                Some(r) => format!("new pod {} not ready ({r})", p.metadata.name),
                None => format!("new pod {} not ready", p.metadata.name),
            }
        } else if !updated && on_delete {
            format!(
                "OnDelete: updated when its pod {} is deleted",
                p.metadata.name
            )
        } else if !updated {
            format!("old pod {} {IN_TURN}", p.metadata.name)
        } else {
            continue;
        };
        out.push((node.clone(), why));
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::describe::fixtures::*;

    #[test]
    fn why_not_explains_selector_affinity_and_taints() {
        let d = ds(GPU_DS);
        assert!(why_not(&d, &n("ok", FITS, "{}", READY)).is_empty());
        // Tolerated taint, and cordon (the daemon pod tolerates unschedulable).
        let ok = n("ok2", FITS, "{unschedulable: true, taints: [{key: dedicated, value: monitoring, effect: NoSchedule}, {key: node.kubernetes.io/unschedulable, effect: NoSchedule}]}", READY);
        assert!(why_not(&d, &ok).is_empty(), "{:?}", why_not(&d, &ok));
        let bare = n("bare", "{}", "{}", READY);
        assert_eq!(
            why_not(&d, &bare),
            [
                "nodeSelector requires node-type=monitoring, but the node has no label node-type",
                "no term of the required node affinity matches: term 0: matchExpressions[0] (node-role.kubernetes.io/master Exists): the node has no label node-role.kubernetes.io/master",
            ]
        );
        let wrong = n(
            "wrong",
            "{node-role.kubernetes.io/master: '', node-type: gpu}",
            "{}",
            READY,
        );
        assert_eq!(
            why_not(&d, &wrong),
            ["nodeSelector requires node-type=monitoring, but the node has node-type=gpu"]
        );
        let tainted = n(
            "tainted",
            FITS,
            "{taints: [{key: dedicated, value: gpu, effect: NoSchedule}, {key: x, effect: NoExecute}, {key: soft, effect: PreferNoSchedule}, {key: node.kubernetes.io/unreachable, effect: NoExecute}, {key: node.kubernetes.io/unreachable, effect: NoSchedule}]}",
            r#"{conditions: [{type: Ready, status: Unknown, reason: NodeStatusUnknown}]}"#,
        );
        assert_eq!(
            why_not(&d, &tainted),
            [
                "taint dedicated=gpu:NoSchedule is not tolerated",
                "taint x:NoExecute is not tolerated",
                "the node is unreachable: taint node.kubernetes.io/unreachable:NoSchedule is not tolerated",
            ]
        );
        // Readiness counts through the lifecycle controller's taints only.
        let sick = n(
            "sick",
            FITS,
            "{}",
            r#"{conditions: [{type: Ready, status: "False", message: disk full}]}"#,
        );
        assert!(why_not(&d, &sick).is_empty());
    }

    #[test]
    fn hostnetwork_daemons_tolerate_network_unavailable() {
        let mut d = ds(GPU_DS);
        let nn = n(
            "nn",
            FITS,
            "{taints: [{key: node.kubernetes.io/network-unavailable, effect: NoSchedule}]}",
            READY,
        );
        assert_eq!(
            why_not(&d, &nn),
            ["the node's network is unavailable: taint node.kubernetes.io/network-unavailable:NoSchedule is not tolerated"]
        );
        d.spec.template.spec.host_network = true;
        assert!(why_not(&d, &nn).is_empty());
    }

    #[test]
    fn nodes_without_a_pod() {
        let d = ds(GPU_DS);
        let nodes = vec![
            n("b-bare", "{}", "{}", READY),
            n("a-has", FITS, "{}", READY),
            n("c-eligible", FITS, "{}", READY),
        ];
        let mut other = daemon_pod("x", "c-eligible", "Running");
        other.metadata.owner_references[0].uid = "someone-else".into();
        let pods = vec![daemon_pod("master-agent-1", "a-has", "Running"), other];
        let w = nodes_without_pod(&d, &pods, &nodes);
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].0, "b-bare");
        assert_eq!(w[0].1.len(), 2);
        assert_eq!(
            w[1],
            (
                "c-eligible".to_string(),
                vec!["eligible: the DaemonSet controller has not created its pod yet".to_string()]
            )
        );
    }
}
