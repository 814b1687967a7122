//! A Deployment's ReplicaSets: which are its (claim), which is new, the
//! new one's name and `pod-template-hash`, the revision annotations, and
//! the history kept (`getNewReplicaSet`, `FindNewReplicaSet`,
//! `SetNewReplicaSetAnnotations`, `cleanupDeployment` in Kubernetes).

use std::cmp::Ordering;

use drover_api::selector::Selector;
use drover_api::{
    ConditionStatus, Deployment, LabelSelector, ObjectMeta, PodTemplateSpec, ReplicaSet,
    ReplicaSetSpec,
};
use rand::RngCore;

use super::progress::{self, FOUND_NEW_RS, NEW_RS_CREATED};
use super::{namespace, replicas, sizes, Entry, Pass, ReplicaSetDeletion};
use crate::daemon::pods::{self, controller_ref_to};
use crate::daemon::rollout::{template_hash, DEFAULT_REVISION_HISTORY_LIMIT};
use crate::events::namespace_of;

/// A ReplicaSet's (and its Deployment's) revision number.
pub use drover_api::DEPLOYMENT_REVISION_ANNOTATION as REVISION_ANNOTATION;
/// The label that ties a ReplicaSet and its pods to their template.
pub use drover_api::POD_TEMPLATE_HASH_LABEL;
/// `spec.replicas` of the Deployment when the ReplicaSet was last scaled.
pub const DESIRED_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/desired-replicas";
/// `spec.replicas + maxSurge` of the Deployment at that time.
pub const MAX_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/max-replicas";
/// The revision history Kubernetes keeps on a ReplicaSet (not copied).
const REVISION_HISTORY_ANNOTATION: &str = "deployment.kubernetes.io/revision-history";
/// The deprecated rollback request (not copied).
const ROLLBACK_TO_ANNOTATION: &str = "deprecated.deployment.rollback.to";
/// kubectl's record of the last apply (not copied).
const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The hash of the Deployment's template with its collision count: the
/// new ReplicaSet's name suffix and `pod-template-hash` (Kubernetes'
/// `ComputeHash`, the same function that names ControllerRevisions).
pub fn pod_template_hash(d: &Deployment) -> String {
    template_hash(&d.spec.template, d.status.collision_count)
}

/// Kubernetes' `EqualIgnoreHash`: the templates are equal once the
/// `pod-template-hash` label is taken out of both.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    let strip = |t: &PodTemplateSpec| {
        let mut t = t.clone();
        t.metadata.labels.remove(POD_TEMPLATE_HASH_LABEL);
        t
    };
    strip(a) == strip(b)
}

/// The revision annotation's number (0 when absent or not a number).
pub fn revision_of(meta: &ObjectMeta) -> i64 {
    meta.annotations
        .get(REVISION_ANNOTATION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Oldest first (creation time, then name): Kubernetes'
/// `ReplicaSetsByCreationTimestamp`.
pub fn oldest_first(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    creation_time_of(a)
        .cmp(&creation_time_of(b))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// Kubernetes' `ClaimReplicaSets`: the Deployment's ReplicaSets of its
/// namespace, oldest first (owned and matching its selector on their
/// labels, and matching orphans, adopted), and the owned ones that no
/// longer match, released (to write). Nothing is adopted by a Deployment
/// being deleted, and nothing being deleted is released or adopted.
pub(crate) fn claim(
    d: &Deployment,
    selector: &Selector,
    all: &[&ReplicaSet],
) -> (Vec<Entry>, Vec<ReplicaSet>) {
    let uid = d.metadata.uid.as_str();
    let mut sets = Vec::new();
    let mut released = Vec::new();
    for &rs in all {
        if namespace_of(&rs.metadata) != namespace(d) {
            continue;
        }
        let matches = selector.matches(&rs.metadata.labels);
        let deleting = rs.metadata.deletion_timestamp.is_some();
        match rs.metadata.controller_ref() {
            Some(r) if r.uid == uid && matches => sets.push(Entry {
                rs: rs.clone(),
                dirty: false,
                created: false,
            }),
            Some(r) if r.uid == uid && !deleting => {
                let mut rs = rs.clone();
                rs.metadata.owner_references.retain(|r| r.uid != uid);
                released.push(rs);
            }
            None if matches && !deleting && d.metadata.deletion_timestamp.is_none() => {
                let mut rs = rs.clone();
                rs.metadata.owner_references.push(controller_ref_to(d));
                sets.push(Entry {
                    rs,
                    dirty: true,
                    created: false,
                });
            }
            _ => {}
        }
    }
    sets.sort_by(|a, b| oldest_first(&a.rs, &b.rs));
    (sets, released)
}

/// Kubernetes' `FindNewReplicaSet`: the oldest ReplicaSet whose template
/// equals the Deployment's.
pub(crate) fn find_new(d: &Deployment, sets: &[Entry]) -> Option<usize> {
    sets.iter()
        .position(|e| equal_ignore_hash(&e.rs.spec.template, &d.spec.template))
}

/// Sets `desired-replicas` and `max-replicas`; whether they changed.
pub(crate) fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let mut changed = false;
    for (key, value) in [
        (DESIRED_REPLICAS_ANNOTATION, desired),
        (MAX_REPLICAS_ANNOTATION, max),
    ] {
        let value = value.to_string();
        if rs.metadata.annotations.get(key) != Some(&value) {
            rs.metadata.annotations.insert(key.to_owned(), value);
            changed = true;
        }
    }
    changed
}

/// The Deployment's annotations a ReplicaSet takes (Kubernetes'
/// `skipCopyAnnotation` leaves out its own bookkeeping).
fn copied(key: &str) -> bool {
    ![
        LAST_APPLIED_ANNOTATION,
        REVISION_ANNOTATION,
        REVISION_HISTORY_ANNOTATION,
        DESIRED_REPLICAS_ANNOTATION,
        MAX_REPLICAS_ANNOTATION,
        ROLLBACK_TO_ANNOTATION,
    ]
    .contains(&key)
}

/// Copies the Deployment's annotations onto the ReplicaSet; whether any
/// changed.
fn copy_annotations(d: &Deployment, rs: &mut ReplicaSet) -> bool {
    let mut changed = false;
    for (k, v) in &d.metadata.annotations {
        if copied(k) && rs.metadata.annotations.get(k) != Some(v) {
            rs.metadata.annotations.insert(k.clone(), v.clone());
            changed = true;
        }
    }
    changed
}

/// The highest revision of the old ReplicaSets, plus one.
fn next_revision<R: RngCore + ?Sized>(pass: &Pass<'_, '_, R>) -> i64 {
    pass.old()
        .into_iter()
        .map(|i| revision_of(&pass.sets[i].rs.metadata))
        .max()
        .unwrap_or(0)
        + 1
}

/// Kubernetes' `getNewReplicaSet` for an existing new ReplicaSet: its
/// revision (raised to the next number when an old template came back),
/// the Deployment's annotations and `minReadySeconds`; the Deployment
/// takes its revision, and a `Progressing` condition
/// (`FoundNewReplicaSet`) if it has none.
pub(crate) fn sync_new<R: RngCore + ?Sized>(pass: &mut Pass<'_, '_, R>) {
    let Some(i) = pass.new else {
        return;
    };
    let next = next_revision(pass);
    let d = pass.d;
    let entry = &mut pass.sets[i];
    let mut changed = copy_annotations(d, &mut entry.rs);
    if revision_of(&entry.rs.metadata) < next {
        entry
            .rs
            .metadata
            .annotations
            .insert(REVISION_ANNOTATION.to_owned(), next.to_string());
        changed = true;
    }
    if entry.rs.spec.min_ready_seconds != d.spec.min_ready_seconds {
        entry.rs.spec.min_ready_seconds = d.spec.min_ready_seconds;
        changed = true;
    }
    entry.dirty |= changed;
    let revision = entry
        .rs
        .metadata
        .annotations
        .get(REVISION_ANNOTATION)
        .cloned();
    let name = entry.rs.metadata.name.clone();
    if let Some(revision) = revision {
        pass.annotations
            .insert(REVISION_ANNOTATION.to_owned(), revision);
    }
    if progress::has_deadline(d) && progress::find(&pass.status, progress::PROGRESSING).is_none() {
        progress::set(
            &mut pass.status,
            progress::PROGRESSING,
            ConditionStatus::True,
            FOUND_NEW_RS,
            format!("Found new replica set \"{name}\""),
            pass.now,
        );
    }
}

/// Kubernetes' `getNewReplicaSet(createIfNotExisted)`: the new
/// ReplicaSet, synced or created. Creation sizes it with
/// [`sizes::new_rs_replicas`] and records `Scaled up … from 0 to N`; a
/// name already taken by a ReplicaSet of another template raises
/// `collisionCount` instead (the next pass hashes again). Whether the new
/// ReplicaSet exists afterwards.
pub(crate) fn get_or_create_new<R: RngCore + ?Sized>(pass: &mut Pass<'_, '_, R>) -> bool {
    if pass.new.is_some() {
        sync_new(pass);
        return true;
    }
    let d = pass.d;
    let hash = pod_template_hash(d);
    let name = format!("{}-{hash}", d.metadata.name);
    let taken = pass.taken_names.contains(&name);
    if taken {
        let count = pass.status.collision_count.unwrap_or(0);
        pass.status.collision_count = Some(count.saturating_add(1));
        return false;
    }
    let revision = next_revision(pass);
    let mut rs = new_replica_set(d, name, &hash, revision);
    let size = sizes::new_rs_replicas(pass, 0);
    let desired = replicas(d);
    set_replicas_annotations(&mut rs, desired, desired + sizes::max_surge(d));
    rs.spec.replicas = Some(0);
    pass.sets.push(Entry {
        rs,
        dirty: true,
        created: true,
    });
    let i = pass.sets.len() - 1;
    pass.new = Some(i);
    pass.scale(i, size);
    pass.annotations
        .insert(REVISION_ANNOTATION.to_owned(), revision.to_string());
    if progress::has_deadline(d) {
        let message = format!(
            "Created new replica set \"{}\"",
            pass.sets[i].rs.metadata.name
        );
        progress::set(
            &mut pass.status,
            progress::PROGRESSING,
            ConditionStatus::True,
            NEW_RS_CREATED,
            message,
            pass.now,
        );
    }
    true
}

/// A new ReplicaSet for the Deployment's template: `<deployment>-<hash>`,
/// the template's labels plus `pod-template-hash` on itself, its template
/// and its selector, the Deployment's annotations and revision, the
/// Deployment as controller, no replicas yet.
pub fn new_replica_set(d: &Deployment, name: String, hash: &str, revision: i64) -> ReplicaSet {
    let mut template = d.spec.template.clone();
    template
        .metadata
        .labels
        .insert(POD_TEMPLATE_HASH_LABEL.to_owned(), hash.to_owned());
    let mut selector: LabelSelector = d.spec.selector.clone().unwrap_or_default();
    selector
        .match_labels
        .insert(POD_TEMPLATE_HASH_LABEL.to_owned(), hash.to_owned());
    let mut rs = ReplicaSet {
        metadata: ObjectMeta {
            name,
            namespace: namespace(d).to_owned(),
            labels: template.metadata.labels.clone(),
            owner_references: vec![pods::controller_ref_to(d)],
            ..ObjectMeta::default()
        },
        spec: ReplicaSetSpec {
            replicas: Some(0),
            min_ready_seconds: d.spec.min_ready_seconds,
            selector: Some(selector),
            template,
            ..ReplicaSetSpec::default()
        },
        ..ReplicaSet::default()
    };
    copy_annotations(d, &mut rs);
    rs.metadata
        .annotations
        .insert(REVISION_ANNOTATION.to_owned(), revision.to_string());
    rs
}

/// Kubernetes' `cleanupDeployment`: the oldest old ReplicaSets (by
/// revision) beyond `revisionHistoryLimit` (default 10) are deleted, if
/// they have no replicas, no pods left, and their status is up to date.
pub(crate) fn cleanup<R: RngCore + ?Sized>(pass: &mut Pass<'_, '_, R>) {
    let limit = pass
        .d
        .spec
        .revision_history_limit
        .unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT)
        .max(0);
    let mut old: Vec<usize> = pass
        .old()
        .into_iter()
        .filter(|&i| {
            let rs = &pass.sets[i].rs;
            rs.metadata.deletion_timestamp.is_none() && !pass.sets[i].created
        })
        .collect();
    let excess = old
        .len()
        .saturating_sub(usize::try_from(limit).unwrap_or(0));
    if excess == 0 {
        return;
    }
    old.sort_by(|&a, &b| {
        let (a, b) = (&pass.sets[a].rs, &pass.sets[b].rs);
        revision_of(&a.metadata)
            .cmp(&revision_of(&b.metadata))
            .then_with(|| creation_time_of(a).cmp(&creation_time_of(b)))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    for &i in old.iter().take(excess) {
        let rs = &pass.sets[i].rs;
        let stale = rs.metadata.generation > rs.status.observed_generation;
        if rs.status.replicas != 0 || rs.spec.replicas.unwrap_or(1) != 0 || stale {
            continue;
        }
        pass.plan.delete.push(ReplicaSetDeletion {
            namespace: namespace(pass.d).to_owned(),
            name: rs.metadata.name.clone(),
            uid: rs.metadata.uid.clone(),
        });
    }
}

fn creation_time_of(rs: &ReplicaSet) -> Option<crate::Timestamp> {
    crate::Timestamp::parse_field(rs.metadata.creation_timestamp.as_deref())
}
