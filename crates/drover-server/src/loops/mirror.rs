//! Mirror pods kept in step with the static pods a node reports (the rules
//! are [`crate::api::mirror`]): one mirror per static pod, replaced when
//! the static pod's uid changed with its manifest, deleted when the node no
//! longer runs it.

use crate::api::mirror::{mirror_of, mirror_uid};
use crate::api::Objects;
use crate::cache::Informer;
use crate::error::ApiError;
use drover_api::{Kind, Manifest, Node, Pod};
use drover_proto::v1 as pb;
use std::collections::HashSet;

/// Makes the mirror pods of `node` match the static pods it reported;
/// problems are logged (the agent reports again when its pod list shows
/// the mirrors out of step).
pub async fn reconcile(objects: &Objects, cache: &Informer, node: &str, report: pb::StaticPods) {
    let node_obj = match objects.get(Kind::Node, "", node).await {
        Ok(Manifest::Node(n)) => *n,
        _ => {
            tracing::debug!(node = %node, "static pods reported by a node that is not registered");
            return;
        }
    };
    let mut wanted = HashSet::new();
    for bytes in &report.pods {
        let sp: Pod = match serde_json::from_slice(bytes) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(node = %node, "a static pod that does not parse: {e}");
                continue;
            }
        };
        if sp.spec.node_name != node || sp.metadata.uid.is_empty() {
            tracing::warn!(node = %node, pod = %sp.metadata.name, "a static pod of another node, or without a uid: ignored");
            continue;
        }
        wanted.insert((sp.metadata.namespace.clone(), sp.metadata.name.clone()));
        if let Err(e) = ensure(objects, &node_obj, &sp).await {
            tracing::warn!(node = %node, pod = %sp.metadata.name, "mirror pod: {}", e);
        }
    }
    // Mirrors of static pods the node no longer runs.
    let (pods, _) = cache.node_pods(node);
    for p in pods {
        let key = (p.metadata.namespace.clone(), p.metadata.name.clone());
        if !p.is_mirror() || wanted.contains(&key) {
            continue;
        }
        match objects.delete_read(Kind::Pod, &p.metadata).await {
            Ok(_) => {
                tracing::info!(node = %node, pod = %key.1, "mirror pod deleted: the node no longer runs its static pod")
            }
            Err(e) => {
                tracing::debug!(node = %node, pod = %key.1, "mirror pod deletion: {}", e)
            }
        }
    }
}

/// Creates, replaces or updates the status of the mirror of `sp`.
async fn ensure(objects: &Objects, node: &Node, sp: &Pod) -> Result<(), ApiError> {
    let (ns, name) = (&sp.metadata.namespace, &sp.metadata.name);
    for _ in 0..3 {
        match objects.get(Kind::Pod, ns, name).await {
            Ok(Manifest::Pod(existing)) => {
                if mirror_uid(&existing) == Some(sp.metadata.uid.as_str()) {
                    if existing.status == sp.status {
                        return Ok(());
                    }
                    let status = serde_json::to_value(&sp.status)
                        .map_err(|e| ApiError::Internal(format!("status: {e}")))?;
                    objects
                        .update_status(Kind::Pod, ns, name, &existing.metadata.uid, status)
                        .await?;
                    return Ok(());
                }
                if !existing.is_mirror() {
                    return Err(ApiError::AlreadyExists(format!(
                        "pod {ns}/{name} exists and is not a mirror pod: the static pod runs on node {:?} but has no mirror (delete that pod or rename the static pod)",
                        node.metadata.name
                    )));
                }
                // The mirror of an older version of the static pod.
                match objects.delete_read(Kind::Pod, &existing.metadata).await {
                    Ok(_) | Err(ApiError::NotFound(_) | ApiError::Conflict(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(_) => return Ok(()),
            Err(ApiError::NotFound(_)) => {
                match objects
                    .create(Manifest::Pod(Box::new(mirror_of(sp, node))))
                    .await
                {
                    Ok(_) => {
                        tracing::info!(node = %node.metadata.name, pod = %name, "mirror pod created");
                        return Ok(());
                    }
                    Err(ApiError::AlreadyExists(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            Err(s) => return Err(s),
        }
    }
    Err(ApiError::Conflict(format!(
        "pod {ns}/{name} kept changing while its mirror was written"
    )))
}
