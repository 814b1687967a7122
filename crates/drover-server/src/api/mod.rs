//! The object API: Kubernetes-shaped objects over the key/value store,
//! shared by the gRPC services and the loops that run in the server.
//!
//! The server does what the Kubernetes API server does on a write: fills in
//! defaults, validates (refusing the whole manifest stream if one object is
//! invalid, before anything is written), sets `uid`, `creationTimestamp` and
//! `generation` on create, keeps them on update, and increments
//! `generation` when `spec` changes. Namespaces are implicit: they exist as
//! soon as an object names one. How objects are stored is [`codec`]; errors
//! are [`ApiError`]s, turned into wire statuses only by the services.

mod apply;
pub mod batch;
pub mod codec;
pub mod mirror;
pub mod node_certs;
pub mod snapshot;

pub use apply::Applied;
pub use codec::{
    decode, encode, encode_for_write, key, new_uid, now_rfc3339, prefix, revision_of, to_json,
};

use crate::ctx::Ctx;
use crate::error::ApiError;
use drover_api::selector::Selector;
use drover_api::validation::{validate_manifest, validate_manifest_update};
use drover_api::{defaults, Kind, Manifest};
use drover_proto::v1::{self as pb, op};
use drover_store::{Consistency, KeyValue};
use rand::Rng;
use serde_json::Value;
use std::sync::Arc;

/// Attempts of a read-modify-write before it answers a conflict.
const ATTEMPTS: usize = 5;

fn random_request_id() -> u64 {
    loop {
        let id: u64 = rand::rng().random();
        if id != 0 {
            return id;
        }
    }
}

/// What the object layer does; cheap to clone.
#[derive(Clone)]
pub struct Objects {
    ctx: Arc<Ctx>,
}

impl Objects {
    pub fn new(ctx: Arc<Ctx>) -> Self {
        Objects { ctx }
    }

    /// The member this object API runs on.
    pub fn ctx(&self) -> &Arc<Ctx> {
        &self.ctx
    }

    async fn read(&self, key: &str) -> Result<Option<KeyValue>, ApiError> {
        let store = &self.ctx.store;
        Ok(self
            .ctx
            .read(|| store.get(key, Consistency::Linearizable))
            .await?
            .0)
    }

    /// This member's applied state: possibly behind, for writes that are
    /// compare-and-swap anyway.
    async fn read_local(&self, key: &str) -> Result<Option<KeyValue>, ApiError> {
        let store = &self.ctx.store;
        Ok(self
            .ctx
            .read(|| store.get(key, Consistency::Local))
            .await?
            .0)
    }

    async fn write(&self, o: op::Op) -> Result<pb::WriteResponse, ApiError> {
        let body = pb::WriteRequest {
            op: Some(pb::Op { op: Some(o) }),
            request_id: random_request_id(),
        };
        self.ctx.write(body, None, 0).await
    }

    /// Writes `m` over the object at `key` if it is still at revision
    /// `expected` (compare-and-swap); answers `m` with its new
    /// resourceVersion.
    async fn swap(&self, key: &str, mut m: Manifest, expected: u64) -> Result<Manifest, ApiError> {
        let w = self
            .write(op::Op::Update(pb::Update {
                key: key.to_string(),
                value: encode_for_write(&mut m)?,
                expected_revision: expected,
                upsert: false,
            }))
            .await?;
        m.metadata_mut().resource_version = w.revision.to_string();
        Ok(m)
    }

    /// Reads one object.
    pub async fn get(&self, kind: Kind, namespace: &str, name: &str) -> Result<Manifest, ApiError> {
        match self.read(&key(kind, namespace, name)).await? {
            Some(kv) => decode(&kv),
            None => Err(ApiError::not_found(kind, name)),
        }
    }

    /// Reads one object from this member's applied state: possibly behind,
    /// for a read-modify-write that is compare-and-swap anyway (a stale
    /// read only costs a retry with [`Objects::get`]).
    pub async fn get_local(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Manifest, ApiError> {
        match self.read_local(&key(kind, namespace, name)).await? {
            Some(kv) => decode(&kv),
            None => Err(ApiError::not_found(kind, name)),
        }
    }

    /// Lists objects of a kind (one namespace or all) matching a selector,
    /// and the list's resourceVersion.
    pub async fn list(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        selector: Option<&Selector>,
    ) -> Result<(Vec<Manifest>, u64), ApiError> {
        let store = &self.ctx.store;
        let p = prefix(kind, namespace);
        let (kvs, rev) = self
            .ctx
            .read(|| store.list(&p, Consistency::Linearizable))
            .await?;
        let mut out = Vec::with_capacity(kvs.len());
        for kv in &kvs {
            let m = decode(kv)?;
            if selector.is_none_or(|s| s.matches(&m.metadata().labels)) {
                out.push(m);
            }
        }
        Ok((out, rev))
    }

    /// The stored objects of a kind (in one namespace or all) as the store
    /// holds them, not decoded, in key order, and the revision they are
    /// at: for a reader that decodes only what it needs (a page of a list).
    pub async fn list_raw(
        &self,
        kind: Kind,
        namespace: Option<&str>,
    ) -> Result<(Vec<pb::KeyValue>, u64), ApiError> {
        let store = &self.ctx.store;
        let p = prefix(kind, namespace);
        let (mut kvs, rev) = self
            .ctx
            .read(|| store.list(&p, Consistency::Linearizable))
            .await?;
        kvs.sort_by(|a, b| a.key.cmp(&b.key));
        Ok((kvs, rev))
    }

    /// Creates one object (defaults, validation, identity); AlreadyExists
    /// when the name is taken.
    pub async fn create(&self, mut m: Manifest) -> Result<Manifest, ApiError> {
        let create = prepare_new(&mut m)?;
        let kind = Kind::of(&m);
        let w = self
            .write(op::Op::Create(create))
            .await
            .map_err(|e| match e {
                ApiError::AlreadyExists(_) => ApiError::already_exists(kind, m.name()),
                e => e,
            })?;
        m.metadata_mut().resource_version = w.revision.to_string();
        Ok(m)
    }

    /// Replaces the status of one object (read, set, compare-and-swap,
    /// retried on conflict). With a non-empty `uid`, a different incarnation
    /// of the object is left alone (NotFound).
    pub async fn update_status(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        uid: &str,
        status: Value,
    ) -> Result<Manifest, ApiError> {
        let k = key(kind, namespace, name);
        for attempt in 0..ATTEMPTS {
            // The first attempt reads this member's applied state: the write
            // is a compare-and-swap, so a stale read only costs a retry
            // (which reads linearizably), and the common case (an agent's
            // report, a controller's status) skips a ReadIndex round.
            let read = if attempt == 0 {
                self.read_local(&k).await?
            } else {
                self.read(&k).await?
            };
            let Some(kv) = read else {
                if attempt == 0 {
                    continue; // not applied here yet, maybe: ask the leader
                }
                return Err(ApiError::not_found(kind, name));
            };
            let old = decode(&kv)?;
            if !uid.is_empty() && old.metadata().uid != uid {
                if attempt == 0 {
                    continue;
                }
                return Err(ApiError::not_found(kind, name));
            }
            let mut v = serde_json::to_value(&old).map_err(|e| {
                ApiError::Internal(format!("cannot encode {}: {e}", old.reference()))
            })?;
            if v.get("status") == Some(&status) {
                if attempt == 0 {
                    continue; // maybe only stale here: confirm with the leader
                }
                return Ok(old);
            }
            v["status"] = status.clone();
            let new = Manifest::from_value(v)
                .map_err(|e| ApiError::BadRequest(format!("status: {e}")))?;
            match self.swap(&k, new, kv.mod_revision).await {
                Ok(new) => return Ok(new),
                Err(ApiError::Conflict(_)) => continue,
                Err(ApiError::NotFound(_)) => return Err(ApiError::not_found(kind, name)),
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::conflict(kind, name))
    }

    /// Writes an object the controllers read at its `metadata.resourceVersion`
    /// and changed only the status of, if it is still at that version (a
    /// controller's status never overwrites a report made meanwhile). Mirror
    /// pods too: their status is the server's to keep.
    pub async fn write_status_as_read(&self, m: Manifest) -> Result<Manifest, ApiError> {
        let kind = Kind::of(&m);
        let rev = m
            .metadata()
            .revision()
            .map_err(|e| ApiError::BadRequest(format!("{}: {e}", m.reference())))?
            .ok_or_else(|| {
                ApiError::Internal(format!(
                    "{}: written without the version it was read at",
                    m.reference()
                ))
            })?;
        let k = key(kind, m.namespace(), m.name());
        let name = m.name().to_string();
        self.swap(&k, m, rev).await.map_err(|e| match e {
            ApiError::Conflict(_) => ApiError::conflict(kind, &name),
            e => e,
        })
    }

    /// Replaces one object; compare-and-swap when it carries a
    /// resourceVersion (a malformed one is refused, never taken as "any").
    pub async fn update(&self, mut m: Manifest) -> Result<Manifest, ApiError> {
        m.default_namespace();
        defaults::default_manifest(&mut m);
        let kind = Kind::of(&m);
        let k = key(kind, m.namespace(), m.name());
        let wanted = m
            .metadata()
            .revision()
            .map_err(|e| ApiError::BadRequest(format!("{}: {e}", m.reference())))?;
        // With a resourceVersion the write is a compare-and-swap on it: when
        // this member's applied state already holds that version, it is the
        // one to build on (a newer one elsewhere makes the write fail as a
        // conflict), and a ReadIndex round is saved — the controllers write
        // thousands of nodes at once this way. Otherwise read linearizably.
        let local = match wanted {
            None => None,
            Some(w) => self.read_local(&k).await?.filter(|kv| kv.mod_revision == w),
        };
        let kv = match local {
            Some(kv) => kv,
            None => match self.read(&k).await? {
                Some(kv) => kv,
                None => return Err(ApiError::not_found(kind, m.name())),
            },
        };
        let old = decode(&kv)?;
        mirror::refuse_write(&old).map_err(|e| ApiError::invalid(vec![e]))?;
        if wanted.is_some_and(|w| w != kv.mod_revision) {
            return Err(ApiError::conflict(kind, m.name()));
        }
        validate_manifest(&m)
            .and_then(|_| validate_manifest_update(&m, &old))
            .map_err(|e| ApiError::invalid(vec![e]))?;
        let mut new = m.clone();
        {
            let (om, nm) = (old.metadata(), new.metadata_mut());
            nm.uid = om.uid.clone();
            nm.creation_timestamp = om.creation_timestamp.clone();
            codec::keep_deletion(om, nm);
            let bump = i64::from(codec::spec_of(&m) != codec::spec_of(&old));
            nm.generation = Some(om.generation.unwrap_or(1) + bump);
        }
        self.swap(&k, new, kv.mod_revision)
            .await
            .map_err(|e| match e {
                ApiError::Conflict(_) => ApiError::conflict(kind, m.name()),
                e => e,
            })
    }

    /// Deletes one object only if it is still at revision `revision` (None:
    /// whatever it is). Answers the revision of the delete.
    pub async fn delete_at(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        revision: Option<u64>,
    ) -> Result<u64, ApiError> {
        let r = self
            .write(op::Op::Delete(pb::Delete {
                key: key(kind, namespace, name),
                expected_revision: revision.unwrap_or(0),
            }))
            .await
            .map_err(|e| match e {
                ApiError::NotFound(_) => ApiError::not_found(kind, name),
                ApiError::Conflict(_) => ApiError::conflict(kind, name),
                e => e,
            })?;
        Ok(r.revision)
    }

    /// Deletes the object `meta` describes (as read from the store) if it
    /// is still at that version.
    pub async fn delete_read(
        &self,
        kind: Kind,
        meta: &drover_api::ObjectMeta,
    ) -> Result<u64, ApiError> {
        let rev = revision_of(meta)?;
        self.delete_at(kind, &meta.namespace, &meta.name, Some(rev))
            .await
    }

    /// Deletes an owner (a DaemonSet, Deployment or ReplicaSet) with
    /// `propagationPolicy: Orphan` or `Foreground`, as Kubernetes does: it
    /// gets a `deletionTimestamp` and the `finalizer` (`orphan` or
    /// `foregroundDeletion`) by a compare-and-swap, retried when it changed
    /// in between unless `revision` pins the version to delete. Its
    /// controller then releases its dependents (removes its owner
    /// reference, so that they keep running and an owner that selects them
    /// later adopts them) or deletes them, and removes it once nothing is
    /// its ([`drover_controller::daemon::plan`],
    /// [`drover_controller::deployment::plan`],
    /// [`drover_controller::replicaset::plan`]). Answers the object as
    /// marked. `uid`, when given, must be its uid.
    pub async fn delete_with_finalizer(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        finalizer: &str,
        uid: Option<&str>,
        revision: Option<u64>,
    ) -> Result<Manifest, ApiError> {
        if !has_dependents(kind) {
            return Err(ApiError::BadRequest(format!(
                "{}: propagationPolicy applies to DaemonSets, Deployments and ReplicaSets only; delete it without one",
                kind.name()
            )));
        }
        for _ in 0..ATTEMPTS {
            let mut current = self.get(kind, namespace, name).await?;
            let m = current.metadata();
            if let Some(uid) = uid.filter(|u| *u != m.uid) {
                return Err(ApiError::uid_precondition(uid, &m.uid));
            }
            if revision.is_some_and(|r| Some(r) != m.revision().ok().flatten()) {
                return Err(ApiError::conflict(kind, name));
            }
            let meta = current.metadata_mut();
            let has = meta.finalizers.iter().any(|f| f == finalizer);
            if meta.deletion_timestamp.is_some() && has {
                return Ok(current);
            }
            meta.deletion_timestamp
                .get_or_insert_with(codec::now_rfc3339);
            if !has {
                meta.finalizers.push(finalizer.to_string());
            }
            match self.update(current).await {
                Err(ApiError::Conflict(_)) if revision.is_none() => continue,
                r => return r,
            }
        }
        Err(ApiError::conflict(kind, name))
    }

    /// Deletes one object and answers it as it was: read it, then delete
    /// that version (retried when it changed in between).
    pub async fn delete(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Manifest, ApiError> {
        for _ in 0..ATTEMPTS {
            let current = self.get(kind, namespace, name).await?;
            let rev = revision_of(current.metadata())?;
            match self.delete_at(kind, namespace, name, Some(rev)).await {
                Ok(_) => return Ok(current),
                Err(ApiError::Conflict(_)) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::conflict(kind, name))
    }
}

/// What a create writes: `m` with its defaults, checked, given its
/// identity (uid, creationTimestamp, generation 1), and encoded under its
/// key.
pub(crate) fn prepare_new(m: &mut Manifest) -> Result<pb::Create, ApiError> {
    m.default_namespace();
    defaults::default_manifest(m);
    validate_new(m).map_err(|e| ApiError::invalid(vec![e]))?;
    let kind = Kind::of(m);
    let meta = m.metadata_mut();
    meta.uid = new_uid();
    meta.creation_timestamp = Some(now_rfc3339());
    meta.generation = Some(1);
    Ok(pb::Create {
        key: key(kind, m.namespace(), m.name()),
        value: encode_for_write(m)?,
    })
}

/// The kinds whose controller finishes their deletion with a finalizer
/// (`propagationPolicy` Orphan or Foreground): the owners of pods and
/// ReplicaSets.
pub fn has_dependents(kind: Kind) -> bool {
    matches!(kind, Kind::DaemonSet | Kind::Deployment | Kind::ReplicaSet)
}

/// Validates an object the API is asked to create. A pod without
/// `spec.nodeName` is accepted Pending: the scheduler binds it
/// (`loops/scheduler.rs`).
pub(crate) fn validate_new(m: &Manifest) -> Result<(), drover_api::Invalid> {
    validate_manifest(m)
}
