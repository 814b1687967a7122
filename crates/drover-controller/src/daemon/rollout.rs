//! Rolling updates: the template hash, revision bookkeeping
//! (ControllerRevisions) and one step of a rolling update, as pure
//! functions.
//!
//! The reference is Kubernetes' `pkg/controller/daemon/update.go`
//! (`constructHistory`, `cleanupHistory`, `rollingUpdate`) and
//! `pkg/controller/daemon/util` (`SurgeCount`, `UnavailableCount`).
//!
//! One deliberate difference: a node that is not Ready (NotReady or
//! unreachable) is counted apart. Its pods neither count against
//! `maxUnavailable` nor are replaced while it is away, so a dead node never
//! holds a rollout; its pod is replaced once it is Ready again.

use crate::FastSet;
// The unit tests (`rollout_tests.rs`) take it from here with `use super::*`.
#[cfg(test)]
use std::time::Duration;

use drover_api::annotations::{auto_rollback, AutoRollback, ROLLED_BACK_FROM};
use drover_api::{
    ControllerRevision, DaemonSet, DaemonSetUpdateStrategyType, IntOrString, ObjectMeta, Pod,
    PodTemplateSpec,
};

use super::pods::{self, is_terminating, CONTROLLER_REVISION_HASH_LABEL};
use crate::events::namespace_of;
use crate::time::Timestamp;

/// The annotation `kubectl rollout restart` sets on the pod template.
pub const RESTARTED_AT_ANNOTATION: &str = "kubectl.kubernetes.io/restartedAt";
/// The annotation whose value `rollout history` shows as the change cause.
pub const CHANGE_CAUSE_ANNOTATION: &str = "kubernetes.io/change-cause";
/// Kubernetes' default `revisionHistoryLimit`.
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;

/// Kubernetes' `rand.SafeEncodeString` alphabet (no vowels, no look-alikes).
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The hash of a pod template, as Kubernetes' `controller.ComputeHash`:
/// FNV-1a (32 bits) of the template's JSON and the collision count (little
/// endian), printed in decimal and each digit mapped to the safe alphabet:
/// at most 10 characters, stable across runs and machines.
pub fn template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let json = serde_json::to_vec(template).unwrap_or_default();
    let mut hash: u32 = 0x811c_9dc5;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u32::from(*b);
            hash = hash.wrapping_mul(0x0100_0193);
        }
    };
    feed(&json);
    if let Some(count) = collision_count {
        feed(&(count as u32).to_le_bytes());
    }
    hash.to_string()
        .bytes()
        .map(|b| char::from(SAFE_ALPHABET[usize::from(b) % SAFE_ALPHABET.len()]))
        .collect()
}

/// The strategic-merge directive Kubernetes' daemon controller puts in a
/// revision's template (`getPatch` in `pkg/controller/daemon/update.go`).
const PATCH_DIRECTIVE: &str = "$patch";

/// The `data` of a ControllerRevision for a template, as Kubernetes'
/// `getPatch` writes it: `{"spec":{"template":{…,"$patch":"replace"}}}`.
/// The data is a strategic merge patch: `kubectl rollout undo` sends it as
/// is, and the directive makes it replace the template instead of merging
/// into it (without it an env var or annotation added since would stay).
/// As Go's `json.Marshal` writes a template, its `metadata.creationTimestamp`
/// is `null` and every container has `resources` (`{}` when empty): kubectl
/// compares these bytes with the DaemonSet's template marshalled the same
/// way to say "skipped rollback (current template already matches …)".
pub fn revision_data(template: &PodTemplateSpec) -> serde_json::Value {
    let mut t = serde_json::to_value(template).unwrap_or_default();
    if let serde_json::Value::Object(m) = &mut t {
        let meta = m
            .entry("metadata")
            .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
        if let serde_json::Value::Object(meta) = meta {
            meta.entry("creationTimestamp")
                .or_insert(serde_json::Value::Null);
        }
        if let Some(spec) = m.get_mut("spec").and_then(serde_json::Value::as_object_mut) {
            let containers = spec
                .get_mut("containers")
                .and_then(serde_json::Value::as_array_mut);
            for c in containers.into_iter().flatten() {
                if let Some(c) = c.as_object_mut() {
                    c.entry("resources")
                        .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
                }
            }
        }
        m.insert(PATCH_DIRECTIVE.to_owned(), "replace".into());
    }
    serde_json::json!({ "spec": { "template": t } })
}

/// The template a ControllerRevision holds, if its data is well formed.
/// Both forms are read: Kubernetes' (with `"$patch": "replace"`) and the
/// one drover wrote before (the bare template).
pub fn revision_template(revision: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut template = revision.data.get("spec")?.get("template")?.clone();
    if let Some(m) = template.as_object_mut() {
        match m.remove(PATCH_DIRECTIVE) {
            None => {}
            Some(v) if v == "replace" => {}
            // Another directive would not restore the template as it is.
            Some(_) => return None,
        }
    }
    serde_json::from_value(template).ok()
}

/// Whether a revision's data is in the form drover wrote before it wrote
/// Kubernetes' (a template without the `$patch` directive): such a revision
/// is rewritten, so that `kubectl rollout undo` to it replaces the template.
fn in_old_form(revision: &ControllerRevision) -> bool {
    revision
        .data
        .get("spec")
        .and_then(|s| s.get("template"))
        .and_then(serde_json::Value::as_object)
        .is_some_and(|t| !t.contains_key(PATCH_DIRECTIVE))
}

/// Whether a revision holds exactly this template.
fn matches(revision: &ControllerRevision, template: &PodTemplateSpec) -> bool {
    revision_template(revision).is_some_and(|t| &t == template)
}

/// What to write so the DaemonSet's revisions are right, before its pods
/// are planned.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RevisionPlan {
    /// The hash of the current revision: the `controller-revision-hash` of
    /// new pods.
    pub hash: String,
    /// The name of the current revision.
    pub current: String,
    /// Its revision number (after this plan is applied).
    pub revision: i64,
    /// A revision to create (the template is new).
    pub create: Option<ControllerRevision>,
    /// Revisions to write back (compare-and-swap on their
    /// resourceVersion): an old revision reused for the current template,
    /// renumbered to the newest; revisions in drover's old data form
    /// rewritten in Kubernetes' (the same template).
    pub update: Vec<ControllerRevision>,
    /// Old revisions to delete: beyond `revisionHistoryLimit`, or duplicates
    /// of the current one; never one a live pod uses.
    pub delete: Vec<ControllerRevision>,
    /// The DaemonSet's new `status.collisionCount` when a hash collided.
    pub collision_count: Option<i32>,
}

/// Whether the revision is controlled by the DaemonSet.
fn owned_by(revision: &ControllerRevision, ds: &DaemonSet) -> bool {
    namespace_of(&revision.metadata) == namespace_of(&ds.metadata)
        && revision
            .metadata
            .controller_ref()
            .is_some_and(|o| o.uid == ds.metadata.uid)
}

/// Kubernetes' `constructHistory` and `cleanupHistory`: the current
/// revision (reusing, and renumbering to the newest, an old one holding the
/// same template), and the old ones to prune under `revisionHistoryLimit`
/// (default 10) except those a live pod of the DaemonSet still carries.
///
/// `revisions` may hold other objects' revisions; only the DaemonSet's are
/// looked at. `pods` are the DaemonSet's pods.
pub fn plan_revisions<'a>(
    ds: &DaemonSet,
    revisions: impl IntoIterator<Item = &'a ControllerRevision>,
    pods: impl IntoIterator<Item = &'a Pod>,
) -> RevisionPlan {
    let template = &ds.spec.template;
    let mut owned: Vec<&ControllerRevision> =
        revisions.into_iter().filter(|r| owned_by(r, ds)).collect();
    owned.sort_by(|a, b| {
        a.revision
            .cmp(&b.revision)
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    let (mut current, mut old): (Vec<&ControllerRevision>, Vec<&ControllerRevision>) =
        owned.iter().partition(|r| matches(r, template));
    let max_old = old.iter().map(|r| r.revision).max().unwrap_or(0);
    let mut plan = RevisionPlan::default();

    // Duplicates of the current template: keep the newest.
    let kept = current.pop();
    match kept {
        Some(rev) => {
            plan.current = rev.metadata.name.clone();
            plan.hash = revision_hash(ds, rev);
            plan.revision = rev.revision;
            if rev.revision <= max_old {
                let mut renumbered = (*rev).clone();
                renumbered.revision = max_old + 1;
                plan.revision = max_old + 1;
                plan.update.push(renumbered);
            }
            old.extend(current.iter().copied());
        }
        None => {
            let mut collisions = ds.status.collision_count;
            let taken: FastSet<&str> = owned.iter().map(|r| r.metadata.name.as_str()).collect();
            let mut hash = template_hash(template, collisions);
            // A name taken by a revision of another template: a collision.
            for _ in 0..16 {
                if !taken.contains(revision_name(ds, &hash).as_str()) {
                    break;
                }
                collisions = Some(collisions.unwrap_or(0).saturating_add(1));
                hash = template_hash(template, collisions);
            }
            if collisions != ds.status.collision_count {
                plan.collision_count = collisions;
            }
            let revision = new_revision(ds, &hash, max_old + 1);
            plan.current = revision.metadata.name.clone();
            plan.hash = hash;
            plan.revision = max_old + 1;
            plan.create = Some(revision);
        }
    }

    // Prune (cleanupHistory): oldest first, never one in use.
    let limit = ds
        .spec
        .revision_history_limit
        .unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT)
        .max(0) as usize;
    let live: FastSet<&str> = pods
        .into_iter()
        .filter(|p| !is_terminating(p))
        .filter_map(|p| p.metadata.labels.get(CONTROLLER_REVISION_HASH_LABEL))
        .map(String::as_str)
        .collect();
    old.sort_by_key(|r| r.revision);
    let mut to_kill = old.len().saturating_sub(limit);
    for rev in old {
        if to_kill == 0 {
            break;
        }
        let in_use = rev
            .metadata
            .labels
            .get(CONTROLLER_REVISION_HASH_LABEL)
            .is_some_and(|h| live.contains(h.as_str()));
        if !in_use {
            plan.delete.push(rev.clone());
            to_kill -= 1;
        }
    }
    upgrade_old_forms(&mut plan, &owned);
    plan
}

/// Revisions written in drover's old form and kept by the plan get their
/// data in Kubernetes' form (the same template; a renumbered one keeps its
/// new number).
fn upgrade_old_forms(plan: &mut RevisionPlan, owned: &[&ControllerRevision]) {
    for rev in owned.iter().filter(|r| in_old_form(r)) {
        let name = &rev.metadata.name;
        if plan.delete.iter().any(|d| &d.metadata.name == name) {
            continue;
        }
        let Some(template) = revision_template(rev) else {
            continue;
        };
        let data = revision_data(&template);
        match plan.update.iter_mut().find(|u| &u.metadata.name == name) {
            Some(u) => u.data = data,
            None => {
                let mut upgraded = (*rev).clone();
                upgraded.data = data;
                plan.update.push(upgraded);
            }
        }
    }
}

/// `<ds>-<hash>`.
pub fn revision_name(ds: &DaemonSet, hash: &str) -> String {
    format!("{}-{hash}", ds.metadata.name)
}

fn hash_of_name(ds: &DaemonSet, name: &str) -> String {
    name.strip_prefix(&format!("{}-", ds.metadata.name))
        .unwrap_or(name)
        .to_owned()
}

/// A new ControllerRevision of the DaemonSet's template: named
/// `<ds>-<hash>`, the template's labels plus the hash label, the
/// DaemonSet's annotations (the change cause), controlled by it.
pub fn new_revision(ds: &DaemonSet, hash: &str, revision: i64) -> ControllerRevision {
    let mut labels = ds.spec.template.metadata.labels.clone();
    labels.insert(CONTROLLER_REVISION_HASH_LABEL.to_owned(), hash.to_owned());
    let annotations = ds
        .metadata
        .annotations
        .iter()
        .filter(|(k, _)| k.as_str() != "kubectl.kubernetes.io/last-applied-configuration")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    ControllerRevision {
        metadata: ObjectMeta {
            name: revision_name(ds, hash),
            namespace: namespace_of(&ds.metadata).to_owned(),
            labels,
            annotations,
            owner_references: vec![pods::controller_ref(ds)],
            ..ObjectMeta::default()
        },
        data: revision_data(&ds.spec.template),
        revision,
        ..ControllerRevision::default()
    }
}

/// Whether the DaemonSet uses the `RollingUpdate` strategy (the default).
pub fn is_rolling_update(ds: &DaemonSet) -> bool {
    !matches!(
        ds.spec.update_strategy.r#type,
        Some(DaemonSetUpdateStrategyType::OnDelete)
    )
}

/// Kubernetes' `intstr.GetScaledValueFromIntOrPercent(v, total, roundUp)`:
/// an int as is, `"N%"` as `N * total / 100` rounded up (both
/// `SurgeCount` and `UnavailableCount` in
/// `pkg/controller/daemon/util/daemonset_util.go` pass `roundUp = true`).
/// A malformed value counts as 0 (validation refuses it).
pub fn scaled_value(value: &IntOrString, total: i32) -> i32 {
    match value {
        IntOrString::Int(n) => (*n).max(0),
        IntOrString::String(s) => {
            let Some(percent) = s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) else {
                return 0;
            };
            let scaled = (percent.max(0) * i64::from(total.max(0)) + 99) / 100;
            i32::try_from(scaled).unwrap_or(i32::MAX)
        }
    }
}

/// `maxSurge` and `maxUnavailable` for `desired` nodes, as Kubernetes'
/// `updatedDesiredNodeCounts`: both 0 for `OnDelete`; when both come out 0
/// on a non-empty DaemonSet, `maxUnavailable` is 1.
pub fn update_counts(ds: &DaemonSet, desired: i32) -> (i32, i32) {
    if !is_rolling_update(ds) {
        return (0, 0);
    }
    let rolling = ds
        .spec
        .update_strategy
        .rolling_update
        .clone()
        .unwrap_or_default();
    let surge = rolling
        .max_surge
        .as_ref()
        .map_or(0, |v| scaled_value(v, desired));
    let unavailable = scaled_value(
        rolling
            .max_unavailable
            .as_ref()
            .unwrap_or(&IntOrString::Int(1)),
        desired,
    );
    if desired > 0 && surge == 0 && unavailable == 0 {
        return (0, 1);
    }
    (surge, unavailable)
}

/// Kubernetes' `AllowsSurge`: a rolling update with a non-zero `maxSurge`.
pub fn allows_surge(ds: &DaemonSet) -> bool {
    update_counts(ds, 1).0 > 0
}

/// One node as the rolling update sees it.
#[derive(Debug, Clone)]
pub struct NodeSlot<'a> {
    /// The node's name.
    pub node: &'a str,
    /// Whether the node should run the daemon pod.
    pub should_run: bool,
    /// Whether the node is Ready; a node that is not is left alone and
    /// does not count against `maxUnavailable`.
    pub ready: bool,
    /// The DaemonSet's pods bound to it, being deleted included (borrowed
    /// from the node's diff: a pass builds a slot for every node, and
    /// copying each node's pods cost an allocation per node).
    pub pods: &'a [&'a Pod],
}

/// The pod's `controller-revision-hash` is `hash`.
pub fn is_updated(pod: &Pod, hash: &str) -> bool {
    pod.metadata
        .labels
        .get(CONTROLLER_REVISION_HASH_LABEL)
        .is_some_and(|h| h == hash)
}

/// Kubernetes' rule for a node with several running pods when surge is
/// allowed (`podsShouldBeOnNode`): keep the oldest new pod and the oldest
/// old pod; delete the old one when it is not ready or the new one is
/// available; delete every other pod. `running` is in [`pods::oldest_first`]
/// order. Returns the pods to delete.
pub fn surge_extra_pods<'a>(
    ds: &DaemonSet,
    running: &[&'a Pod],
    hash: &str,
    now: Timestamp,
) -> Vec<&'a Pod> {
    let min_ready = pods::min_ready(ds);
    let (mut oldest_new, mut oldest_old) = (None, None);
    let mut delete = Vec::new();
    for &pod in running {
        let slot = if is_updated(pod, hash) {
            &mut oldest_new
        } else {
            &mut oldest_old
        };
        if slot.is_none() {
            *slot = Some(pod);
        } else {
            delete.push(pod);
        }
    }
    if let (Some(new), Some(old)) = (oldest_new, oldest_old) {
        if !old.is_ready() || pods::is_available(new, min_ready, now) {
            delete.push(old);
        }
    }
    delete
}

/// What automatic rollback found: the DaemonSet's policy was met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollbackDue {
    /// The policy (`rollout.drover.io/auto-rollback-*` annotations).
    pub policy: AutoRollback,
    /// The Ready nodes whose new pod has not been available for as long as
    /// the policy allows.
    pub failed_nodes: Vec<String>,
}

/// Automatic rollback (see [`drover_api::annotations`]): `Ok` with the
/// failed nodes when at least `policy.nodes` Ready nodes that should run
/// the pod run a pod of revision `hash` created at least `policy.after`
/// before `now` and still not available; otherwise `Err` with when to look
/// again (the soonest moment a new pod that is not available yet reaches
/// its deadline), or `Err(None)`. Nodes that are not Ready don't count:
/// a dead node is not the new revision's fault.
pub fn auto_rollback_due(
    ds: &DaemonSet,
    slots: &[NodeSlot<'_>],
    hash: &str,
    now: Timestamp,
) -> Result<RollbackDue, Option<Timestamp>> {
    let Ok(Some(policy)) = auto_rollback(&ds.metadata) else {
        return Err(None);
    };
    let min_ready = pods::min_ready(ds);
    let mut failed = Vec::new();
    let mut next: Option<Timestamp> = None;
    for slot in slots.iter().filter(|s| s.ready && s.should_run) {
        let Some(pod) = slot
            .pods
            .iter()
            .find(|p| !is_terminating(p) && is_updated(p, hash))
        else {
            continue;
        };
        if pods::is_available(pod, min_ready, now) {
            continue;
        }
        let deadline = pods::creation_time(pod).map_or(now, |t| t + policy.after);
        if deadline <= now {
            failed.push(slot.node.to_owned());
        } else {
            next = Some(next.map_or(deadline, |t| t.min(deadline)));
        }
    }
    if failed.len() >= policy.nodes as usize {
        failed.sort();
        Ok(RollbackDue {
            policy,
            failed_nodes: failed,
        })
    } else {
        Err(next)
    }
}

/// The revision an automatic rollback returns to: the DaemonSet's newest
/// revision other than the current one (`hash`), unless that is the one the
/// controller rolled back from before (`rollout.drover.io/rolled-back-from`),
/// so it never goes back and forth. `None`: nothing to go back to.
pub fn rollback_target<'a>(
    ds: &DaemonSet,
    revisions: impl IntoIterator<Item = &'a ControllerRevision>,
    hash: &str,
) -> Option<&'a ControllerRevision> {
    let rolled_back_from = ds.metadata.annotations.get(ROLLED_BACK_FROM);
    let newest_old = revisions
        .into_iter()
        .filter(|r| owned_by(r, ds))
        .filter(|r| revision_hash(ds, r) != hash)
        .max_by_key(|r| r.revision)?;
    if rolled_back_from.is_some_and(|h| *h == revision_hash(ds, newest_old)) {
        return None;
    }
    Some(newest_old)
}

/// A revision's hash: its `controller-revision-hash` label, else the end of
/// its name.
pub fn revision_hash(ds: &DaemonSet, revision: &ControllerRevision) -> String {
    revision
        .metadata
        .labels
        .get(CONTROLLER_REVISION_HASH_LABEL)
        .cloned()
        .unwrap_or_else(|| hash_of_name(ds, &revision.metadata.name))
}

#[cfg(test)]
#[path = "rollout_tests.rs"]
mod tests;
