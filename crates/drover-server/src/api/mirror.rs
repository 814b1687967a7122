//! Mirror pods: the API's read-only copies of the static pods a node runs
//! from its `--manifest-dir`, as Kubernetes keeps them for the kubelet's.
//! The rules, pure; [`crate::loops::mirror`] keeps them in step with what
//! agents report.
//!
//! - A mirror pod has the static pod's name, labels, annotations, spec and
//!   status, the annotation `kubernetes.io/config.mirror` set to the static
//!   pod's uid ([`mirror_uid`]), and an owner reference to the Node
//!   ([`mirror_of`]).
//! - Read-only through the API: [`refuse_write`] is the answer to an update
//!   or an apply of a mirror pod (edit the file on the node instead). A
//!   deleted mirror pod comes back: the agent sees it missing in its pod
//!   list and reports again.
//! - The DaemonSet controller never adopts them (their controller is the
//!   Node); [`orphaned`] lists those whose node is gone, which the garbage
//!   collector deletes at once.

use drover_api::validation::{FieldError, Path};
use drover_api::{pod_annotation, Manifest, Node, OwnerReference, Pod};
use std::collections::HashSet;

/// Whether `m` is a mirror pod.
pub fn is_mirror(m: &Manifest) -> bool {
    matches!(m, Manifest::Pod(p) if p.is_mirror())
}

/// The refusal of a write through the API to `existing` when it is a
/// mirror pod.
pub fn refuse_write(existing: &Manifest) -> Result<(), drover_api::Invalid> {
    let Manifest::Pod(p) = existing else {
        return Ok(());
    };
    if !p.is_mirror() {
        return Ok(());
    }
    let path = Path::new("metadata")
        .child("annotations")
        .key(pod_annotation::CONFIG_MIRROR);
    Err(drover_api::Invalid {
        kind: "Pod".into(),
        name: p.metadata.name.clone(),
        errors: vec![FieldError::forbidden(
            &path,
            format!(
                "pod {}/{} is the mirror of a static pod of node {:?} and is read-only through the API: edit its manifest in that node's --manifest-dir instead (deleting it only recreates it)",
                p.metadata.namespace, p.metadata.name, p.spec.node_name,
            ),
        )],
    })
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

pub fn mirror_uid(p: &Pod) -> Option<&str> {
    p.metadata
        .annotations
        .get(pod_annotation::CONFIG_MIRROR)
        .map(String::as_str)
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
        let e = refuse_write(&mm).unwrap_err().to_string();
        assert!(e.contains("default/web-n1"), "{e}");
        assert!(e.contains("--manifest-dir"), "{e}");
        assert!(
            e.starts_with("Pod \"web-n1\" is invalid: metadata.annotations[kubernetes.io/config.mirror]: Forbidden: pod default/web-n1 is the mirror"),
            "{e}"
        );
        assert!(refuse_write(&Manifest::Pod(Box::new(sp.clone()))).is_ok());
        // Gone with the node only.
        let pods = vec![m, sp];
        assert!(orphaned(&[node("n1")], &pods).is_empty());
        let o = orphaned(&[node("n2")], &pods);
        assert_eq!(o.len(), 1);
        assert!(o[0].is_mirror());
    }
}
