//! Pods: a manifest bound to a node, and the state tests wait for.

use drover_api::{Pod, PodPhase};

/// A Pod bound to `node` with one container `c` running `image`.
pub fn pod_yaml(name: &str, node: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {node}\n  containers: [{{name: c, image: \"{image}\"}}]\n"
    )
}

/// Running, Ready, and every container ready.
pub fn is_running_and_ready(p: &Pod) -> bool {
    p.status.phase == Some(PodPhase::Running)
        && p.is_ready()
        && p.status.container_statuses.iter().all(|c| c.ready)
}
