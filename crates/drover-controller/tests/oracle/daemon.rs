//! Which nodes a DaemonSet runs on: Kubernetes' `NodeShouldRunDaemonPod`
//! (`pkg/controller/daemon/daemon_controller.go`), as the DaemonSet
//! documentation describes it, from the naive [`super::affinity`] and
//! [`super::tolerations`]:
//!
//! - the pod template's `nodeName` (if set) is the node, and its
//!   `nodeSelector` and required affinity select the node;
//! - should run: no `NoSchedule` or `NoExecute` taint is untolerated by the
//!   template's tolerations plus the daemon defaults;
//! - should continue running (a pod already there stays): no `NoExecute`
//!   taint is untolerated. `PreferNoSchedule` never matters.

use drover_api::{DaemonSet, Node, TaintEffect};

use super::{affinity, tolerations};

/// `(should_run, should_continue_running)`.
pub fn node_should_run(ds: &DaemonSet, node: &Node) -> (bool, bool) {
    let spec = &ds.spec.template.spec;
    let named = spec.node_name.is_empty() || spec.node_name == node.metadata.name;
    let selected = affinity::pod_spec_selects(spec, node);
    if !(named && selected) {
        return (false, false);
    }
    let mut all = spec.tolerations.clone();
    all.extend(tolerations::daemon_defaults(spec.host_network));
    let mut untolerated_no_schedule = false;
    let mut untolerated_no_execute = false;
    for taint in &node.spec.taints {
        if tolerations::tolerated(taint, &all) {
            continue;
        }
        match taint.effect {
            Some(TaintEffect::NoSchedule) => untolerated_no_schedule = true,
            Some(TaintEffect::NoExecute) => untolerated_no_execute = true,
            _ => {}
        }
    }
    (
        !untolerated_no_schedule && !untolerated_no_execute,
        !untolerated_no_execute,
    )
}
