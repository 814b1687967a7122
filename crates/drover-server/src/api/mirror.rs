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
//! - A node may mirror only a pod that references no other API object
//!   ([`check_static_pod`], Kubernetes' NodeRestriction `admitPodCreate`):
//!   a mirror bound to the node would otherwise make the server send it
//!   those Secrets and ConfigMaps.

use drover_api::validation::{FieldError, Path};
use drover_api::{pod_annotation, Container, Manifest, Node, OwnerReference, Pod};

/// Why a node's static pod may have no mirror pod: the field and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {why}")]
pub struct Refused {
    /// The field path, e.g. `spec.volumes[0].secret`.
    pub field: String,
    /// What the rule is and what to do.
    pub why: &'static str,
}

const NO_REFERENCES: &str = "a static pod may not reference Secrets, ConfigMaps or other API objects (a node gets only what the pods the API bound to it reference); run it as a DaemonSet instead";

/// Pod spec fields (drover keeps them without acting on them) that name
/// other API objects or credentials.
const REFUSED_SPEC_FIELDS: [&str; 4] = [
    "imagePullSecrets",
    "serviceAccount",
    "resourceClaims",
    "automountServiceAccountToken",
];

/// Whether `sp`, a static pod a node reports, may have a mirror pod. As
/// Kubernetes' NodeRestriction refuses a node's mirror pod that references
/// a service account, Secrets, ConfigMaps, persistentVolumeClaims or
/// resource claims, or carries owner references of its own; drover is
/// stricter on volumes: only `hostPath` and `emptyDir` (a projected volume
/// with only `downwardAPI` is refused too, and every source drover does not
/// implement).
pub fn check_static_pod(sp: &Pod) -> Result<(), Refused> {
    let refuse = |field: String, why: &'static str| Err(Refused { field, why });
    if !sp.metadata.owner_references.is_empty() {
        return refuse(
            "metadata.ownerReferences".into(),
            "a static pod may not name owners: its mirror is owned by its Node",
        );
    }
    let spec = &sp.spec;
    if !spec.service_account_name.is_empty() {
        return refuse("spec.serviceAccountName".into(), NO_REFERENCES);
    }
    for field in REFUSED_SPEC_FIELDS {
        match spec.extra.get(field) {
            None | Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::Bool(false)) if field == "automountServiceAccountToken" => {}
            Some(serde_json::Value::Array(a)) if a.is_empty() => {}
            Some(_) => return refuse(format!("spec.{field}"), NO_REFERENCES),
        }
    }
    for (i, v) in spec.volumes.iter().enumerate() {
        let at = |what: &str| format!("spec.volumes[{i}].{what}");
        if v.secret.is_some() {
            return refuse(at("secret"), NO_REFERENCES);
        }
        if v.config_map.is_some() {
            return refuse(at("configMap"), NO_REFERENCES);
        }
        if v.projected.is_some() {
            return refuse(at("projected"), NO_REFERENCES);
        }
        if let Some(source) = v.extra.keys().next() {
            return refuse(
                at(source),
                "a static pod's volumes may be hostPath or emptyDir only (persistentVolumeClaim, csi and the other sources name API objects or credentials)",
            );
        }
    }
    check_containers("spec.containers", &spec.containers)?;
    for field in ["initContainers", "ephemeralContainers"] {
        let Some(value) = spec.extra.get(field) else {
            continue;
        };
        let containers: Vec<Container> =
            serde_json::from_value(value.clone()).map_err(|_| Refused {
                field: format!("spec.{field}"),
                why: "not a list of containers",
            })?;
        check_containers(&format!("spec.{field}"), &containers)?;
    }
    Ok(())
}

/// `env[].valueFrom` and `envFrom` of `containers` (at `path`).
fn check_containers(path: &str, containers: &[Container]) -> Result<(), Refused> {
    for (i, c) in containers.iter().enumerate() {
        for (j, e) in c.env.iter().enumerate() {
            let Some(from) = &e.value_from else { continue };
            let which = if from.secret_key_ref.is_some() {
                "secretKeyRef"
            } else if from.config_map_key_ref.is_some() {
                "configMapKeyRef"
            } else {
                continue;
            };
            return Err(Refused {
                field: format!("{path}[{i}].env[{j}].valueFrom.{which}"),
                why: NO_REFERENCES,
            });
        }
        if !c.env_from.is_empty() {
            return Err(Refused {
                field: format!("{path}[{i}].envFrom"),
                why: NO_REFERENCES,
            });
        }
    }
    Ok(())
}

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
/// with their node. `node_exists` tells by name.
pub fn orphaned<'a>(
    node_exists: impl Fn(&str) -> bool,
    pods: impl IntoIterator<Item = &'a Pod>,
) -> Vec<&'a Pod> {
    pods.into_iter()
        .filter(|p| {
            p.is_mirror()
                && p.metadata.deletion_timestamp.is_none()
                && !node_exists(&p.spec.node_name)
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
        assert!(orphaned(|n| n == "n1", &pods).is_empty());
        let o = orphaned(|n| n == "n2", &pods);
        assert_eq!(o.len(), 1);
        assert!(o[0].is_mirror());
    }

    fn spec_with(json: serde_json::Value) -> Pod {
        let mut v = serde_json::to_value(static_pod()).unwrap();
        for (k, x) in json.as_object().unwrap() {
            v["spec"][k] = x.clone();
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_static_pod_that_references_an_api_object_has_no_mirror() {
        use serde_json::json;
        assert_eq!(check_static_pod(&static_pod()), Ok(()));
        let ok = spec_with(json!({
            "volumes": [{"name": "h", "hostPath": {"path": "/var/log"}}, {"name": "e", "emptyDir": {}}],
            "containers": [{"name": "c", "image": "i", "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}],
            "automountServiceAccountToken": false,
        }));
        assert_eq!(check_static_pod(&ok), Ok(()));
        let c = |env: serde_json::Value| json!([{"name": "c", "image": "i", "env": env}]);
        for (spec, field) in [
            (
                json!({"volumes": [{"name": "v", "secret": {"secretName": "s"}}]}),
                "spec.volumes[0].secret",
            ),
            (
                json!({"volumes": [{"name": "h", "emptyDir": {}}, {"name": "v", "configMap": {"name": "c"}}]}),
                "spec.volumes[1].configMap",
            ),
            (
                json!({"volumes": [{"name": "v", "projected": {"sources": [{"downwardAPI": {"items": []}}]}}]}),
                "spec.volumes[0].projected",
            ),
            (
                json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "d"}}]}),
                "spec.volumes[0].persistentVolumeClaim",
            ),
            (
                json!({"volumes": [{"name": "v", "csi": {"driver": "x"}}]}),
                "spec.volumes[0].csi",
            ),
            (
                json!({"containers": c(json!([{"name": "P", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]))}),
                "spec.containers[0].env[0].valueFrom.secretKeyRef",
            ),
            (
                json!({"containers": c(json!([{"name": "P", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]))}),
                "spec.containers[0].env[0].valueFrom.configMapKeyRef",
            ),
            (
                json!({"containers": [{"name": "c", "image": "i", "envFrom": [{"secretRef": {"name": "s"}}]}]}),
                "spec.containers[0].envFrom",
            ),
            (
                json!({"initContainers": [{"name": "c", "image": "i", "envFrom": [{"configMapRef": {"name": "c"}}]}]}),
                "spec.initContainers[0].envFrom",
            ),
            (
                json!({"ephemeralContainers": "nonsense"}),
                "spec.ephemeralContainers",
            ),
            (
                json!({"imagePullSecrets": [{"name": "s"}]}),
                "spec.imagePullSecrets",
            ),
            (
                json!({"serviceAccountName": "default"}),
                "spec.serviceAccountName",
            ),
            (json!({"serviceAccount": "default"}), "spec.serviceAccount"),
            (
                json!({"automountServiceAccountToken": true}),
                "spec.automountServiceAccountToken",
            ),
            (
                json!({"resourceClaims": [{"name": "r"}]}),
                "spec.resourceClaims",
            ),
        ] {
            let e = check_static_pod(&spec_with(spec.clone())).expect_err(&spec.to_string());
            assert_eq!(e.field, field, "{spec}");
        }
        let mut owned = static_pod();
        owned.metadata.owner_references = vec![OwnerReference::default()];
        assert_eq!(
            check_static_pod(&owned).unwrap_err().field,
            "metadata.ownerReferences"
        );
    }
}
