//! Mirror pods kept in step with the static pods a node reports (the rules
//! are [`crate::api::mirror`]): one mirror per static pod, replaced when
//! the static pod's uid changed with its manifest, deleted when the node no
//! longer runs it.
//!
//! What one node may make is bounded: a report of at most
//! [`MAX_STATIC_PODS_PER_REPORT`] pods, at most [`MAX_MIRROR_PODS_PER_NODE`]
//! mirrors, each in a namespace that exists already (a mirror never makes
//! a namespace), and none that references another API object
//! ([`crate::api::mirror::check_static_pod`]). A refusal is logged at warn
//! with the node, the pod and the field.

use crate::api::mirror::{check_static_pod, mirror_of, mirror_uid};
use crate::api::{prefix, Objects};
use crate::cache::Informer;
use crate::error::ApiError;
use crate::limits::{MAX_MIRROR_PODS_PER_NODE, MAX_STATIC_PODS_PER_REPORT};
use drover_api::{Kind, Manifest, Node, Pod};
use drover_proto::v1 as pb;
use std::collections::HashSet;

/// Namespaces that always exist (as the Kubernetes API lists them).
const BUILT_IN_NAMESPACES: [&str; 2] = ["default", "kube-system"];

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
    if report.pods.len() > MAX_STATIC_PODS_PER_REPORT {
        tracing::warn!(
            node = %node,
            field = "StaticPods.pods",
            "refused static pods: {} pods in one report, more than the limit of {MAX_STATIC_PODS_PER_REPORT}; no mirror pod changed",
            report.pods.len()
        );
        return;
    }
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
        if let Err(refused) = check_static_pod(&sp) {
            // Not wanted: a mirror made before this rule goes too.
            tracing::warn!(node = %node, pod = %format_args!("{}/{}", sp.metadata.namespace, sp.metadata.name), field = %refused.field, "refused a mirror pod: {refused}");
            continue;
        }
        wanted.insert((sp.metadata.namespace.clone(), sp.metadata.name.clone()));
        if let Err(e) = ensure(objects, cache, &node_obj, &sp).await {
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

/// Whether namespace `ns` exists without the mirror pod a node asks for:
/// a built-in one, one that a Namespace object or an object other than a
/// mirror pod names.
async fn namespace_exists(objects: &Objects, cache: &Informer, ns: &str) -> Result<bool, ApiError> {
    if BUILT_IN_NAMESPACES.contains(&ns) {
        return Ok(true);
    }
    let snap = cache.snapshot();
    fn named<T>(map: &crate::cache::Map<T>, p: &str, f: impl Fn(&T) -> bool) -> bool {
        map.range::<_, str>((std::ops::Bound::Included(p), std::ops::Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(p))
            .any(|(_, v)| f(v))
    }
    if named(&snap.pods, &prefix(Kind::Pod, Some(ns)), |p| !p.is_mirror())
        || named(
            &snap.daemon_sets,
            &prefix(Kind::DaemonSet, Some(ns)),
            |_| true,
        )
        || named(
            &snap.config_maps,
            &prefix(Kind::ConfigMap, Some(ns)),
            |_| true,
        )
        || named(&snap.secrets, &prefix(Kind::Secret, Some(ns)), |_| true)
    {
        return Ok(true);
    }
    match objects.get(Kind::Namespace, "", ns).await {
        Ok(_) => Ok(true),
        Err(ApiError::NotFound(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Refuses a new mirror pod of `node` in `ns` when the namespace does not
/// exist or the node has its most mirror pods already.
async fn may_create(
    objects: &Objects,
    cache: &Informer,
    node: &str,
    ns: &str,
    name: &str,
) -> Result<(), ApiError> {
    let ns = if ns.is_empty() { "default" } else { ns };
    if !namespace_exists(objects, cache, ns).await? {
        return Err(ApiError::Forbidden(format!(
            "metadata.namespace: node {node:?} may not make the mirror of static pod {ns}/{name}: namespace {ns:?} does not exist, and a mirror pod never creates one (create the namespace, or move the static pod to an existing one)"
        )));
    }
    let (pods, _) = cache.node_pods(node);
    // Not counting an older mirror of this very pod, being replaced.
    let mirrors = pods
        .iter()
        .filter(|p| p.is_mirror() && !(p.metadata.namespace == ns && p.metadata.name == name))
        .count();
    if mirrors >= MAX_MIRROR_PODS_PER_NODE {
        return Err(ApiError::Forbidden(format!(
            "node {node:?} has {mirrors} mirror pods, the limit of {MAX_MIRROR_PODS_PER_NODE}: no mirror for static pod {ns}/{name} (run fewer static pods on the node)"
        )));
    }
    Ok(())
}

/// Creates, replaces or updates the status of the mirror of `sp`.
async fn ensure(
    objects: &Objects,
    cache: &Informer,
    node: &Node,
    sp: &Pod,
) -> Result<(), ApiError> {
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
                may_create(objects, cache, &node.metadata.name, ns, name).await?;
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
