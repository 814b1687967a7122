//! A Deployment and its ReplicaSets as kubectl relates them (`kubectl/pkg/
//! util/deployment`): the ReplicaSets it controls, the new one (its
//! template equal to the Deployment's but for the `pod-template-hash`
//! label), the old ones, their revisions, and `rollout status`'s reading
//! of a Deployment (`DeploymentStatusViewer`). Pure: objects in, answers
//! out; the CLI's `describe` and `rollout` and the dashboard's Deployment
//! page use them (one reading, never derived again elsewhere).

use drover_api::{
    Deployment, PodTemplateSpec, ReplicaSet, DEPLOYMENT_REVISION_ANNOTATION,
    POD_TEMPLATE_HASH_LABEL,
};

/// The reason of the `Progressing` condition when a rollout made no
/// progress within `progressDeadlineSeconds` (Kubernetes' `TimedOutReason`).
pub const PROGRESS_DEADLINE_EXCEEDED: &str = super::progress::TIMED_OUT;

/// The annotations `undo` keeps from the Deployment rather than taking
/// from the ReplicaSet (kubectl's `annotationsToSkip`).
pub const ANNOTATIONS_TO_SKIP: [&str; 6] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    DEPLOYMENT_REVISION_ANNOTATION,
    "deployment.kubernetes.io/revision-history",
    "deployment.kubernetes.io/desired-replicas",
    "deployment.kubernetes.io/max-replicas",
    "deprecated.deployment.rollback.to",
];

/// The ReplicaSets `d` controls (by owner reference), oldest first (by
/// creation time, then name, as Kubernetes' `ReplicaSetsByCreationTimestamp`).
pub fn owned<'a>(d: &Deployment, all: &'a [ReplicaSet]) -> Vec<&'a ReplicaSet> {
    let mut out: Vec<&ReplicaSet> = all
        .iter()
        .filter(|rs| {
            rs.metadata.namespace == d.metadata.namespace
                && rs
                    .metadata
                    .controller_ref()
                    .is_some_and(|o| o.uid == d.metadata.uid && o.kind == "Deployment")
        })
        .collect();
    out.sort_by(|a, b| {
        let t = |rs: &ReplicaSet| rs.metadata.creation_timestamp.clone().unwrap_or_default();
        t(a).cmp(&t(b))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    out
}

/// Whether two templates are equal but for the `pod-template-hash` label
/// (Kubernetes' `EqualIgnoreHash`).
pub fn equal_ignoring_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    let strip = |t: &PodTemplateSpec| {
        let mut t = t.clone();
        t.metadata.labels.remove(POD_TEMPLATE_HASH_LABEL);
        t
    };
    strip(a) == strip(b)
}

/// The new ReplicaSet among `owned` (oldest first): the first whose template
/// is the Deployment's (Kubernetes' `FindNewReplicaSet`).
pub fn new_replica_set<'a>(d: &Deployment, owned: &[&'a ReplicaSet]) -> Option<&'a ReplicaSet> {
    owned
        .iter()
        .copied()
        .find(|rs| equal_ignoring_hash(&rs.spec.template, &d.spec.template))
}

/// The old ReplicaSets among `owned` that still want pods (Kubernetes'
/// `FindOldReplicaSets`, the first list: `describe` shows these).
pub fn old_replica_sets<'a>(d: &Deployment, owned: &[&'a ReplicaSet]) -> Vec<&'a ReplicaSet> {
    let new = new_replica_set(d, owned).map(|rs| rs.metadata.uid.as_str());
    owned
        .iter()
        .copied()
        .filter(|rs| Some(rs.metadata.uid.as_str()) != new && rs.spec.replicas.unwrap_or(1) != 0)
        .collect()
}

/// A ReplicaSet's revision (`deployment.kubernetes.io/revision`), when it
/// has a valid one.
pub fn revision(rs: &ReplicaSet) -> Option<i64> {
    rs.metadata
        .annotations
        .get(DEPLOYMENT_REVISION_ANNOTATION)?
        .parse()
        .ok()
}

/// One `rollout status` reading of a Deployment, in kubectl's words: the
/// line and whether the rollout is done; an error when its progress
/// deadline has passed.
pub fn status_line(d: &Deployment) -> Result<(String, bool), String> {
    let name = &d.metadata.name;
    let s = &d.status;
    if d.metadata.generation.unwrap_or(0) > s.observed_generation.unwrap_or(0) {
        return Ok((
            "Waiting for deployment spec update to be observed...".to_owned(),
            false,
        ));
    }
    let timed_out = s
        .conditions
        .iter()
        .any(|c| c.r#type == "Progressing" && c.reason == PROGRESS_DEADLINE_EXCEEDED);
    if timed_out {
        return Err(format!(
            "deployment {name:?} exceeded its progress deadline"
        ));
    }
    let wanted = d.spec.replicas.unwrap_or(1);
    let line = if s.updated_replicas < wanted {
        format!(
            "Waiting for deployment {name:?} rollout to finish: {} out of {wanted} new replicas have been updated...",
            s.updated_replicas
        )
    } else if s.replicas > s.updated_replicas {
        format!(
            "Waiting for deployment {name:?} rollout to finish: {} old replicas are pending termination...",
            s.replicas - s.updated_replicas
        )
    } else if s.available_replicas < s.updated_replicas {
        format!(
            "Waiting for deployment {name:?} rollout to finish: {} of {} updated replicas are available...",
            s.available_replicas, s.updated_replicas
        )
    } else {
        return Ok((format!("deployment {name:?} successfully rolled out"), true));
    };
    Ok((line, false))
}

/// The ReplicaSet `undo` goes back to: revision `to` (0: the one before
/// the newest), as kubectl's `deploymentRevision` picks it.
pub fn undo_target<'a>(
    d: &Deployment,
    sets: &'a [ReplicaSet],
    to: i64,
) -> Result<&'a ReplicaSet, String> {
    let mut numbered: Vec<(i64, &ReplicaSet)> = sets
        .iter()
        .filter_map(|rs| Some((revision(rs)?, rs)))
        .collect();
    if to > 0 {
        return numbered
            .into_iter()
            .find(|(r, _)| *r == to)
            .map(|(_, rs)| rs)
            .ok_or_else(|| format!("unable to find specified revision {to} in history"));
    }
    numbered.sort_by_key(|(r, _)| *r);
    numbered.pop();
    numbered.pop().map(|(_, rs)| rs).ok_or_else(|| {
        format!(
            "no rollout history found for deployment {:?}",
            d.metadata.name
        )
    })
}

/// `rollout undo`'s write: `target`'s template (without its
/// `pod-template-hash`) into `d`, with `target`'s annotations but for
/// [`ANNOTATIONS_TO_SKIP`], which `d` keeps (kubectl's
/// `DeploymentRollbacker`).
pub fn roll_back(d: &mut Deployment, target: &ReplicaSet) {
    let mut template = target.spec.template.clone();
    template.metadata.labels.remove(POD_TEMPLATE_HASH_LABEL);
    let mut annotations: std::collections::BTreeMap<String, String> = d
        .metadata
        .annotations
        .iter()
        .filter(|(k, _)| ANNOTATIONS_TO_SKIP.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in &target.metadata.annotations {
        if !ANNOTATIONS_TO_SKIP.contains(&k.as_str()) {
            annotations.insert(k.clone(), v.clone());
        }
    }
    d.metadata.annotations = annotations.into_iter().collect();
    d.spec.template = template;
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::Manifest;
    use serde_json::json;

    fn deployment(status: serde_json::Value) -> Deployment {
        let m = Manifest::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "x", "namespace": "default", "uid": "d-uid", "generation": 2},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "x"}},
                "template": {"metadata": {"labels": {"app": "x"}},
                    "spec": {"containers": [{"name": "c", "image": "i:2"}]}}},
            "status": status,
        }))
        .unwrap();
        let Manifest::Deployment(d) = m else { panic!() };
        *d
    }

    fn replica_set(name: &str, created: &str, image: &str, replicas: i32, rev: &str) -> ReplicaSet {
        let m = Manifest::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "default", "uid": format!("{name}-uid"),
                "creationTimestamp": created,
                "annotations": {"deployment.kubernetes.io/revision": rev},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                    "name": "x", "uid": "d-uid", "controller": true}]},
            "spec": {"replicas": replicas,
                "selector": {"matchLabels": {"app": "x", "pod-template-hash": name}},
                "template": {"metadata": {"labels": {"app": "x", "pod-template-hash": name}},
                    "spec": {"containers": [{"name": "c", "image": image}]}}},
        }))
        .unwrap();
        let Manifest::ReplicaSet(rs) = m else {
            panic!()
        };
        *rs
    }

    #[test]
    fn the_new_and_old_replica_sets_as_kubectl_finds_them() {
        let d = deployment(json!({}));
        let mut stranger = replica_set("y-1", "2024-05-03T10:00:00Z", "i:2", 1, "1");
        stranger.metadata.owner_references[0].uid = "other".into();
        let all = vec![
            replica_set("x-b", "2024-05-03T12:00:00Z", "i:2", 3, "2"),
            replica_set("x-a", "2024-05-03T11:00:00Z", "i:1", 1, "1"),
            replica_set("x-z", "2024-05-03T09:00:00Z", "i:0", 0, "x"),
            stranger,
        ];
        let owned = owned(&d, &all);
        let names: Vec<&str> = owned.iter().map(|r| r.metadata.name.as_str()).collect();
        assert_eq!(names, ["x-z", "x-a", "x-b"]);
        assert_eq!(new_replica_set(&d, &owned).unwrap().metadata.name, "x-b");
        let old: Vec<&str> = old_replica_sets(&d, &owned)
            .iter()
            .map(|r| r.metadata.name.as_str())
            .collect();
        assert_eq!(old, ["x-a"], "an old ReplicaSet scaled to 0 is not listed");
        assert_eq!(revision(owned[2]), Some(2));
        assert_eq!(revision(owned[0]), None);
    }

    #[test]
    fn rollout_status_in_kubectl_words() {
        let line = |status| status_line(&deployment(status));
        assert_eq!(
            line(json!({"observedGeneration": 1})).unwrap(),
            (
                "Waiting for deployment spec update to be observed...".into(),
                false
            )
        );
        assert_eq!(
            line(json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1})).unwrap().0,
            "Waiting for deployment \"x\" rollout to finish: 1 out of 3 new replicas have been updated..."
        );
        assert_eq!(
            line(json!({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 3})).unwrap().0,
            "Waiting for deployment \"x\" rollout to finish: 1 old replicas are pending termination..."
        );
        assert_eq!(
            line(json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3,
                "availableReplicas": 2}))
            .unwrap()
            .0,
            "Waiting for deployment \"x\" rollout to finish: 2 of 3 updated replicas are available..."
        );
        assert_eq!(
            line(
                json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3,
                "availableReplicas": 3})
            )
            .unwrap(),
            ("deployment \"x\" successfully rolled out".into(), true)
        );
        assert_eq!(
            line(
                json!({"observedGeneration": 2, "conditions": [{"type": "Progressing",
                "status": "False", "reason": "ProgressDeadlineExceeded"}]})
            )
            .unwrap_err(),
            "deployment \"x\" exceeded its progress deadline"
        );
    }

    fn numbered_rs(name: &str, rev: Option<&str>) -> ReplicaSet {
        let mut annotations = serde_json::Map::new();
        if let Some(r) = rev {
            annotations.insert(DEPLOYMENT_REVISION_ANNOTATION.into(), json!(r));
        }
        let m = Manifest::from_value(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"template": {"spec": {"containers": []}}}}))
        .unwrap();
        let Manifest::ReplicaSet(rs) = m else {
            panic!()
        };
        *rs
    }

    #[test]
    fn undo_goes_to_the_revision_before_the_newest_or_the_one_named() {
        let d = Deployment::default();
        let sets = [
            numbered_rs("a", Some("1")),
            numbered_rs("c", Some("3")),
            numbered_rs("b", Some("2")),
            numbered_rs("x", None),
        ];
        let name = |r: Result<&ReplicaSet, String>| r.map(|rs| rs.metadata.name.clone());
        assert_eq!(name(undo_target(&d, &sets, 0)), Ok("b".into()));
        assert_eq!(name(undo_target(&d, &sets, 1)), Ok("a".into()));
        assert_eq!(
            name(undo_target(&d, &sets, 7)),
            Err("unable to find specified revision 7 in history".into())
        );
        assert_eq!(
            name(undo_target(&d, &sets[..1], 0)),
            Err("no rollout history found for deployment \"\"".into())
        );
    }
}
