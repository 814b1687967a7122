//! Mirror pods: the API's read-only copies of the static pods a node runs
//! from its `--manifest-dir`, as Kubernetes keeps them for the kubelet's.
//!
//! - An agent reports its static pods, complete, with their statuses
//!   (`StaticPods`); [`reconcile`] makes the node's mirror pods match: one
//!   per static pod, with the same name, labels, annotations, spec and
//!   status, the annotation `kubernetes.io/config.mirror` set to the static
//!   pod's uid, and an owner reference to the Node. A mirror of an older
//!   version of the static pod (its uid changed with its manifest) is
//!   replaced; mirrors of static pods the node no longer runs are deleted.
//! - Read-only through the API: [`refuse_write`] is the answer to an update
//!   or an apply of a mirror pod (edit the file on the node instead). A
//!   deleted mirror pod comes back: the agent sees it missing in its pod
//!   list and reports again.
//! - The DaemonSet controller never adopts them (their controller is the
//!   Node); [`orphaned`] lists those whose node is gone, which the garbage
//!   collector deletes at once.

use crate::agents::PodIndex;
use crate::objects::{Kind, Objects};
use drover_api::{pod_annotation, Manifest, Node, OwnerReference, Pod};
use drover_proto::v1 as pb;
use std::collections::HashSet;
use tonic::Status;

/// Whether `m` is a mirror pod.
pub fn is_mirror(m: &Manifest) -> bool {
    matches!(m, Manifest::Pod(p) if p.is_mirror())
}

/// The refusal of a write through the API to `existing` when it is a
/// mirror pod.
pub fn refuse_write(existing: &Manifest) -> Result<(), Status> {
    let Manifest::Pod(p) = existing else {
        return Ok(());
    };
    if !p.is_mirror() {
        return Ok(());
    }
    Err(Status::invalid_argument(format!(
        "Pod {:?} is invalid: metadata.annotations[{}]: Forbidden: pod {}/{} is the mirror of a static pod of node {:?} and is read-only through the API: edit its manifest in that node's --manifest-dir instead (deleting it only recreates it)",
        p.metadata.name,
        pod_annotation::CONFIG_MIRROR,
        p.metadata.namespace,
        p.metadata.name,
        p.spec.node_name,
    )))
}

/// Mirror pods whose node does not exist (it left or was removed): they go
/// with their node.
pub fn orphaned<'a, 'n>(
    nodes: impl IntoIterator<Item = &'n Node>,
    pods: impl IntoIterator<Item = &'a Pod>,
) -> Vec<&'a Pod> {
    let names: HashSet<&str> = nodes
        .into_iter()
        .map(|n| n.metadata.name.as_str())
        .collect();
    pods.into_iter()
        .filter(|p| {
            p.is_mirror()
                && p.metadata.deletion_timestamp.is_none()
                && !names.contains(p.spec.node_name.as_str())
        })
        .collect()
}

/// The mirror pod of static pod `sp` (with its status) on `node`.
pub fn mirror_of(sp: &Pod, node: &Node) -> Pod {
    let mut m = sp.clone();
    m.metadata.uid.clear();
    m.metadata.resource_version.clear();
    m.metadata.generation = None;
    m.metadata.creation_timestamp = None;
    m.metadata.annotations.insert(
        pod_annotation::CONFIG_MIRROR.into(),
        sp.metadata.uid.clone(),
    );
    m.metadata.owner_references = vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: node.metadata.name.clone(),
        uid: node.metadata.uid.clone(),
        controller: Some(true),
        ..Default::default()
    }];
    m.spec.node_name = node.metadata.name.clone();
    m
}

fn mirror_uid(p: &Pod) -> Option<&str> {
    p.metadata
        .annotations
        .get(pod_annotation::CONFIG_MIRROR)
        .map(String::as_str)
}

/// Makes the mirror pods of `node` match the static pods it reported;
/// problems are logged (the agent reports again when its pod list shows
/// the mirrors out of step).
pub async fn reconcile(objects: &Objects, index: &PodIndex, node: &str, report: pb::StaticPods) {
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
            tracing::warn!(node = %node, pod = %sp.metadata.name, "mirror pod: {}", e.message());
        }
    }
    // Mirrors of static pods the node no longer runs.
    let (pods, _) = index.pods(node);
    for json in pods {
        let Ok(p) = serde_json::from_slice::<Pod>(&json) else {
            continue;
        };
        let key = (p.metadata.namespace.clone(), p.metadata.name.clone());
        if !p.is_mirror() || wanted.contains(&key) {
            continue;
        }
        let rv = p.metadata.resource_version.parse().unwrap_or(0);
        match objects.delete_at(Kind::Pod, &key.0, &key.1, rv).await {
            Ok(_) => {
                tracing::info!(node = %node, pod = %key.1, "mirror pod deleted: the node no longer runs its static pod")
            }
            Err(e) => {
                tracing::debug!(node = %node, pod = %key.1, "mirror pod deletion: {}", e.message())
            }
        }
    }
}

/// Creates, replaces or updates the status of the mirror of `sp`.
async fn ensure(objects: &Objects, node: &Node, sp: &Pod) -> Result<(), Status> {
    let (ns, name) = (&sp.metadata.namespace, &sp.metadata.name);
    for _ in 0..3 {
        match objects.get(Kind::Pod, ns, name).await {
            Ok(Manifest::Pod(existing)) => {
                if mirror_uid(&existing) == Some(sp.metadata.uid.as_str()) {
                    if existing.status == sp.status {
                        return Ok(());
                    }
                    let status = serde_json::to_value(&sp.status)
                        .map_err(|e| Status::internal(format!("status: {e}")))?;
                    objects
                        .update_status(Kind::Pod, ns, name, &existing.metadata.uid, status)
                        .await?;
                    return Ok(());
                }
                if !existing.is_mirror() {
                    return Err(Status::already_exists(format!(
                        "pod {ns}/{name} exists and is not a mirror pod: the static pod runs on node {:?} but has no mirror (delete that pod or rename the static pod)",
                        node.metadata.name
                    )));
                }
                // The mirror of an older version of the static pod.
                let rv = existing.metadata.resource_version.parse().unwrap_or(0);
                match objects.delete_at(Kind::Pod, ns, name, rv).await {
                    Ok(_) => {}
                    Err(s) if matches!(s.code(), tonic::Code::NotFound | tonic::Code::Aborted) => {}
                    Err(s) => return Err(s),
                }
            }
            Ok(_) => return Ok(()),
            Err(s) if s.code() == tonic::Code::NotFound => {
                match objects
                    .create(Manifest::Pod(Box::new(mirror_of(sp, node))))
                    .await
                {
                    Ok(_) => {
                        tracing::info!(node = %node.metadata.name, pod = %name, "mirror pod created");
                        return Ok(());
                    }
                    Err(s) if s.code() == tonic::Code::AlreadyExists => {}
                    Err(s) => return Err(s),
                }
            }
            Err(s) => return Err(s),
        }
    }
    Err(Status::aborted(format!(
        "pod {ns}/{name} kept changing while its mirror was written"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn static_pod() -> Pod {
        let mut p = Pod::default();
        p.metadata.name = "web-n1".into();
        p.metadata.namespace = "default".into();
        p.metadata.uid = "0123456789abcdef0123456789abcdef".into();
        p.spec.node_name = "n1".into();
        p
    }

    fn node(name: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = name.into();
        n.metadata.uid = format!("uid-{name}");
        n
    }

    #[test]
    fn a_mirror_is_owned_by_its_node_and_read_only() {
        let sp = static_pod();
        let m = mirror_of(&sp, &node("n1"));
        assert!(m.is_mirror());
        assert_eq!(mirror_uid(&m), Some(sp.metadata.uid.as_str()));
        assert!(m.metadata.uid.is_empty(), "the API gives it its own uid");
        let owner = m.metadata.controller_ref().expect("a controller");
        assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Node", "n1"));
        assert_eq!(owner.uid, "uid-n1");
        let mm = Manifest::Pod(Box::new(m.clone()));
        assert!(is_mirror(&mm));
        let e = refuse_write(&mm).unwrap_err();
        assert!(e.message().contains("default/web-n1"), "{}", e.message());
        assert!(e.message().contains("--manifest-dir"), "{}", e.message());
        assert!(refuse_write(&Manifest::Pod(Box::new(sp.clone()))).is_ok());
        // Gone with the node only.
        let pods = vec![m, sp];
        assert!(orphaned(&[node("n1")], &pods).is_empty());
        let o = orphaned(&[node("n2")], &pods);
        assert_eq!(o.len(), 1);
        assert!(o[0].is_mirror());
    }
}
