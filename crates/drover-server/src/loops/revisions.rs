//! The DaemonSet controller's ControllerRevisions: before a DaemonSet's pods
//! are planned, its current revision is created (or an old one with the
//! same template renumbered to the newest) and old ones beyond
//! `revisionHistoryLimit` are pruned, as the pure
//! [`drover_controller::daemon::rollout::plan_revisions`] says. The hash of
//! the current revision goes to the pod planner.
//!
//! Revisions are not in the informer's view: they are listed from the
//! store, but only when a DaemonSet's generation changed since the last
//! sync or a prune is still pending (a revision a live pod uses), so an
//! idle cluster does not list them on every pass. Revisions of DaemonSets
//! that are gone are deleted.

use super::written_revision as rev;
use crate::api::Objects;
use drover_api::{DaemonSet, Kind, Manifest, Pod};
use drover_controller::daemon::rollout::{self, RevisionPlan};
use std::collections::HashMap;

/// What the last sync of one DaemonSet found.
#[derive(Debug, Clone)]
struct Synced {
    generation: Option<i64>,
    hash: String,
    namespace: String,
    /// Nothing left to write (no failed write, no prune held back).
    settled: bool,
}

/// The revision state of every DaemonSet the controller syncs.
#[derive(Debug, Default)]
pub struct Revisions {
    synced: HashMap<String, Synced>,
}

/// The outcome of one sync: the current hash, the collision count to put
/// in the DaemonSet's status when it changed, and the highest store
/// revision written.
#[derive(Debug, Clone, Default)]
pub struct RevisionSync {
    /// The current revision's hash, for the pod planner.
    pub hash: Option<String>,
    /// The DaemonSet's new `status.collisionCount`, when a hash collided.
    pub collision_count: Option<i32>,
    /// The highest store revision written (0 when nothing was).
    pub written: u64,
}

impl Revisions {
    /// Makes the DaemonSet's revisions right and answers its current hash.
    /// `pods` may be every pod; only the DaemonSet's count for pruning.
    /// The DaemonSet's current revision hash when its revisions are
    /// settled for its generation ([`Revisions::sync`] then answers it
    /// without reading the pods or the store).
    pub fn settled_hash(&self, ds: &DaemonSet) -> Option<&str> {
        self.synced
            .get(&ds.metadata.uid)
            .filter(|s| s.settled && s.generation == ds.metadata.generation)
            .map(|s| s.hash.as_str())
    }

    pub async fn sync(&mut self, objects: &Objects, ds: &DaemonSet, pods: &[&Pod]) -> RevisionSync {
        let uid = &ds.metadata.uid;
        if let Some(s) = self.synced.get(uid) {
            if s.settled && s.generation == ds.metadata.generation {
                return RevisionSync {
                    hash: Some(s.hash.clone()),
                    ..RevisionSync::default()
                };
            }
        }
        let namespace = if ds.metadata.namespace.is_empty() {
            "default"
        } else {
            ds.metadata.namespace.as_str()
        };
        let listed = match objects
            .list(Kind::ControllerRevision, Some(namespace), None)
            .await
        {
            Ok((list, _)) => list,
            Err(e) => {
                tracing::debug!(ds = %ds.metadata.name, "listing revisions: {}", e);
                return RevisionSync::default();
            }
        };
        let revisions: Vec<_> = listed
            .iter()
            .filter_map(|m| match m {
                Manifest::ControllerRevision(r) => Some(&**r),
                _ => None,
            })
            .collect();
        let owned_pods = pods
            .iter()
            .copied()
            .filter(|p| p.metadata.controller_ref().is_some_and(|o| o.uid == *uid));
        let plan = rollout::plan_revisions(ds, revisions.iter().copied(), owned_pods);
        let limit = ds
            .spec
            .revision_history_limit
            .unwrap_or(rollout::DEFAULT_REVISION_HISTORY_LIMIT)
            .max(0) as usize;
        let owned = revisions
            .iter()
            .filter(|r| r.metadata.controller_ref().is_some_and(|o| o.uid == *uid))
            .count();
        let old_left = owned
            .saturating_sub(usize::from(plan.create.is_none()))
            .saturating_sub(plan.delete.len());
        let (written, ok) = write(objects, ds, &plan).await;
        self.synced.insert(
            uid.clone(),
            Synced {
                generation: ds.metadata.generation,
                hash: plan.hash.clone(),
                namespace: namespace.to_owned(),
                settled: ok && old_left <= limit,
            },
        );
        RevisionSync {
            hash: Some(plan.hash),
            collision_count: plan.collision_count,
            written,
        }
    }

    /// Forgets DaemonSets that are gone (not in `live`, by uid) and deletes
    /// their revisions. Answers the highest store revision written.
    pub async fn retain(
        &mut self,
        objects: &Objects,
        live: &drover_controller::FastSet<String>,
    ) -> u64 {
        let gone: Vec<(String, Synced)> = self
            .synced
            .iter()
            .filter(|(uid, _)| !live.contains(*uid))
            .map(|(u, s)| (u.clone(), s.clone()))
            .collect();
        let mut written = 0;
        for (uid, s) in gone {
            self.synced.remove(&uid);
            let Ok((list, _)) = objects
                .list(Kind::ControllerRevision, Some(&s.namespace), None)
                .await
            else {
                continue;
            };
            for m in list {
                let md = m.metadata();
                if md.controller_ref().is_some_and(|o| o.uid == uid) {
                    match objects.delete_read(Kind::ControllerRevision, md).await {
                        Ok(w) => written = written.max(w),
                        Err(e) => tracing::debug!(revision = %md.name, "delete: {}", e),
                    }
                }
            }
        }
        written
    }
}

/// Applies a revision plan; answers the highest store revision written and
/// whether every write succeeded.
async fn write(objects: &Objects, ds: &DaemonSet, plan: &RevisionPlan) -> (u64, bool) {
    let mut written = 0;
    let mut ok = true;
    if let Some(new) = &plan.create {
        match objects
            .create(Manifest::ControllerRevision(Box::new(new.clone())))
            .await
        {
            Ok(m) => written = written.max(rev(&m)),
            Err(e) => {
                ok = false;
                tracing::debug!(ds = %ds.metadata.name, revision = %new.metadata.name, "create: {}", e);
            }
        }
    }
    for r in &plan.update {
        match objects
            .update(Manifest::ControllerRevision(Box::new(r.clone())))
            .await
        {
            Ok(m) => written = written.max(rev(&m)),
            Err(e) => {
                ok = false;
                tracing::debug!(revision = %r.metadata.name, "renumber: {}", e);
            }
        }
    }
    for r in &plan.delete {
        match objects
            .delete_read(Kind::ControllerRevision, &r.metadata)
            .await
        {
            Ok(w) => written = written.max(w),
            Err(e) => {
                ok = false;
                tracing::debug!(revision = %r.metadata.name, "prune: {}", e);
            }
        }
    }
    (written, ok)
}

/// What an automatic rollback did.
#[derive(Debug)]
pub enum RolledBack {
    /// The previous template is written back; the highest store revision
    /// written and the Warning event to record.
    Done(u64, drover_api::Event),
    /// There is nothing to go back to (no older revision, or only the one
    /// the controller rolled back from before): the event to record once.
    Impossible(drover_api::Event),
    /// The write failed (a conflict, lost leadership): try again later.
    Failed,
}

/// An automatic rollback (see [`drover_api::annotations`]): writes the
/// template of the revision [`rollout::rollback_target`] picks into the
/// DaemonSet with compare-and-swap, and marks it with the hash it rolled
/// back from.
pub async fn roll_back<R: rand::RngCore + ?Sized>(
    objects: &Objects,
    ds: &DaemonSet,
    hash: &str,
    due: &rollout::RollbackDue,
    now: drover_controller::Timestamp,
    rng: &mut R,
) -> RolledBack {
    let namespace = if ds.metadata.namespace.is_empty() {
        "default".to_owned()
    } else {
        ds.metadata.namespace.clone()
    };
    let Ok((listed, _)) = objects
        .list(Kind::ControllerRevision, Some(&namespace), None)
        .await
    else {
        return RolledBack::Failed;
    };
    let revisions: Vec<&drover_api::ControllerRevision> = listed
        .iter()
        .filter_map(|m| match m {
            Manifest::ControllerRevision(r) => Some(&**r),
            _ => None,
        })
        .collect();
    let current = revisions
        .iter()
        .find(|r| {
            r.metadata
                .controller_ref()
                .is_some_and(|o| o.uid == ds.metadata.uid)
                && rollout::revision_hash(ds, r) == hash
        })
        .map_or(0, |r| r.revision);
    let nodes = due.failed_nodes.join(", ");
    let why = format!(
        "the pods of revision {current} were not available after {} on {} node(s) ({nodes})",
        humantime::format_duration(due.policy.after),
        due.failed_nodes.len(),
    );
    let event = |reason: &str, message: String, rng: &mut R| {
        drover_controller::events::daemon_set_event(ds, "Warning", reason, message, now, rng)
    };
    let Some(target) = rollout::rollback_target(ds, revisions.iter().copied(), hash) else {
        return RolledBack::Impossible(event(
            "AutoRollbackSkipped",
            format!("{why}; there is no earlier revision to roll back to (or only the one rolled back from before): fix the template and apply it"),
            rng,
        ));
    };
    let Some(template) = rollout::revision_template(target) else {
        return RolledBack::Impossible(event(
            "AutoRollbackSkipped",
            format!(
                "{why}; controllerrevision {:?} holds no pod template",
                target.metadata.name
            ),
            rng,
        ));
    };
    let mut updated = ds.clone();
    updated.spec.template = template;
    updated.metadata.annotations.insert(
        drover_api::annotations::ROLLED_BACK_FROM.to_owned(),
        hash.to_owned(),
    );
    match objects.update(Manifest::DaemonSet(Box::new(updated))).await {
        Ok(m) => RolledBack::Done(
            rev(&m),
            event(
                "AutoRollback",
                format!("{why}: rolled back to revision {}", target.revision),
                rng,
            ),
        ),
        Err(e) => {
            tracing::debug!(ds = %ds.metadata.name, "automatic rollback: {}", e);
            RolledBack::Failed
        }
    }
}
