//! The object API: Kubernetes-shaped objects over the key/value store.
//!
//! Objects are stored as JSON (Kubernetes field names) under
//! `/registry/<plural>/<namespace>/<name>` (`/registry/nodes/<name>` for the
//! cluster-scoped nodes). `metadata.resourceVersion` is never stored: it is
//! the key's `mod_revision` (the raft index of the last write), filled in on
//! every read and checked on every update (compare-and-swap).
//!
//! The server does what the Kubernetes API server does on a write: fills in
//! defaults, validates (refusing the whole manifest stream if one object is
//! invalid, before anything is written), sets `uid`, `creationTimestamp` and
//! `generation` on create, keeps them on update, and increments
//! `generation` when `spec` changes. Namespaces are implicit: they exist as
//! soon as an object names one.

use crate::service::{hops, status_of, Ctx};
use drover_api::selector::Selector;
use drover_api::validation::{validate_manifest, validate_manifest_update};
use drover_api::{defaults, parse_manifests, Manifest};
use drover_proto::v1::{self as pb, objects_server, op};
use drover_store::{Consistency, EventType, KeyValue};
use rand::Rng;
use serde_json::Value;
use std::sync::Arc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

/// The kinds drover stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Node,
    Pod,
    DaemonSet,
    ControllerRevision,
    Event,
}

impl Kind {
    /// Parses a kind the way kubectl accepts it: plural, singular, short name,
    /// optionally with its group (`daemonsets.apps`).
    pub fn parse(s: &str) -> Result<Kind, Status> {
        let lower = s.to_ascii_lowercase();
        let base = lower.split('.').next().unwrap_or("");
        Ok(match base {
            "no" | "node" | "nodes" => Kind::Node,
            "po" | "pod" | "pods" => Kind::Pod,
            "ds" | "daemonset" | "daemonsets" => Kind::DaemonSet,
            "controllerrevision" | "controllerrevisions" => Kind::ControllerRevision,
            "ev" | "event" | "events" => Kind::Event,
            _ => {
                return Err(Status::invalid_argument(format!(
                    "the server doesn't have a resource type {s:?}; drover has daemonsets (ds), pods (po), nodes (no), events (ev), controllerrevisions"
                )))
            }
        })
    }

    pub fn of(m: &Manifest) -> Kind {
        match m {
            Manifest::Node(_) => Kind::Node,
            Manifest::Pod(_) => Kind::Pod,
            Manifest::DaemonSet(_) => Kind::DaemonSet,
            Manifest::ControllerRevision(_) => Kind::ControllerRevision,
            Manifest::Event(_) => Kind::Event,
        }
    }

    /// The resource name, as in `/registry/<plural>/` and in kubectl's errors.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Node => "nodes",
            Kind::Pod => "pods",
            Kind::DaemonSet => "daemonsets",
            Kind::ControllerRevision => "controllerrevisions",
            Kind::Event => "events",
        }
    }

    /// `daemonsets.apps`, `pods`: how the API server names a resource.
    pub fn resource(self) -> String {
        match self {
            Kind::DaemonSet | Kind::ControllerRevision => format!("{}.apps", self.plural()),
            _ => self.plural().to_string(),
        }
    }

    pub fn namespaced(self) -> bool {
        self != Kind::Node
    }
}

/// The store key of one object.
pub fn key(kind: Kind, namespace: &str, name: &str) -> String {
    if kind.namespaced() {
        let ns = if namespace.is_empty() {
            drover_api::DEFAULT_NAMESPACE
        } else {
            namespace
        };
        format!("/registry/{}/{ns}/{name}", kind.plural())
    } else {
        format!("/registry/{}/{name}", kind.plural())
    }
}

/// The key prefix of a kind, in one namespace or all.
pub fn prefix(kind: Kind, namespace: Option<&str>) -> String {
    match namespace.filter(|n| kind.namespaced() && !n.is_empty()) {
        Some(ns) => format!("/registry/{}/{ns}/", kind.plural()),
        None => format!("/registry/{}/", kind.plural()),
    }
}

/// Reads a stored object, with its resourceVersion filled in.
pub fn decode(kv: &KeyValue) -> Result<Manifest, Status> {
    let value: Value = serde_json::from_slice(&kv.value)
        .map_err(|e| Status::internal(format!("stored object {} is corrupt: {e}", kv.key)))?;
    let mut m = Manifest::from_value(value)
        .map_err(|e| Status::internal(format!("stored object {} is corrupt: {e}", kv.key)))?;
    m.metadata_mut().resource_version = kv.mod_revision.to_string();
    Ok(m)
}

/// The stored form: JSON without resourceVersion.
pub fn encode(m: &Manifest) -> Result<Vec<u8>, Status> {
    let mut m = m.clone();
    m.metadata_mut().resource_version.clear();
    serde_json::to_vec(&m)
        .map_err(|e| Status::internal(format!("cannot encode {}: {e}", m.reference())))
}

/// The JSON a client gets.
pub fn to_json(m: &Manifest) -> Result<Vec<u8>, Status> {
    serde_json::to_vec(m)
        .map_err(|e| Status::internal(format!("cannot encode {}: {e}", m.reference())))
}

fn spec_of(m: &Manifest) -> Value {
    let mut v = serde_json::to_value(m).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.remove("metadata");
        o.remove("status");
    }
    v
}

fn status_of_manifest(m: &Manifest) -> Option<Value> {
    serde_json::to_value(m)
        .ok()
        .and_then(|v| v.get("status").cloned())
}

/// A fresh uid in the Kubernetes format (random, RFC 4122 version 4 layout).
pub fn new_uid() -> String {
    let b: [u8; 16] = rand::rng().random();
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-4{}-{}{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        ["8", "9", "a", "b"][(b[8] & 3) as usize],
        &h[17..20],
        &h[20..32]
    )
}

/// Now, as Kubernetes writes timestamps (RFC 3339, seconds, UTC).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

fn not_found(kind: Kind, name: &str) -> Status {
    Status::not_found(format!("{} {name:?} not found", kind.resource()))
}

fn conflict(kind: Kind, name: &str) -> Status {
    Status::aborted(format!(
        "Operation cannot be fulfilled on {} {name:?}: the object has been modified; please apply your changes to the latest version and try again",
        kind.resource()
    ))
}

fn random_request_id() -> u64 {
    loop {
        let id: u64 = rand::rng().random();
        if id != 0 {
            return id;
        }
    }
}

/// What the object layer does, shared by the gRPC service and the
/// controllers that run in the server.
#[derive(Clone)]
pub struct Objects {
    ctx: Arc<Ctx>,
}

/// The outcome of applying one object.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    Created(Manifest),
    Configured(Manifest),
    Unchanged(Manifest),
}

impl Objects {
    pub fn new(ctx: Arc<Ctx>) -> Self {
        Objects { ctx }
    }

    async fn read(&self, key: &str) -> Result<Option<KeyValue>, Status> {
        let store = &self.ctx.store;
        Ok(self
            .ctx
            .read(|| store.get(key, Consistency::Linearizable))
            .await?
            .0)
    }

    /// This member's applied state: possibly behind, for writes that are
    /// compare-and-swap anyway.
    async fn read_local(&self, key: &str) -> Result<Option<KeyValue>, Status> {
        let store = &self.ctx.store;
        Ok(self
            .ctx
            .read(|| store.get(key, Consistency::Local))
            .await?
            .0)
    }

    async fn write(&self, o: op::Op) -> Result<pb::WriteResponse, Status> {
        let body = pb::WriteRequest {
            op: Some(pb::Op { op: Some(o) }),
            request_id: random_request_id(),
        };
        self.ctx.write(body, None, 0).await
    }

    /// Reads one object.
    pub async fn get(&self, kind: Kind, namespace: &str, name: &str) -> Result<Manifest, Status> {
        match self.read(&key(kind, namespace, name)).await? {
            Some(kv) => decode(&kv),
            None => Err(not_found(kind, name)),
        }
    }

    /// Lists objects of a kind (one namespace or all) matching a selector,
    /// and the list's resourceVersion.
    pub async fn list(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        selector: Option<&Selector>,
    ) -> Result<(Vec<Manifest>, u64), Status> {
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

    /// Validates every object of a stream, then creates or updates each.
    /// Nothing is written when any object is invalid.
    pub async fn apply(
        &self,
        text: &str,
        dry_run: bool,
    ) -> Result<Vec<(Applied, Vec<String>)>, Status> {
        let mut manifests =
            parse_manifests(text).map_err(|e| Status::invalid_argument(e.to_string()))?;
        if manifests.is_empty() {
            return Err(Status::invalid_argument("no objects passed to apply"));
        }
        let mut errors = Vec::new();
        let mut existing = Vec::with_capacity(manifests.len());
        for m in manifests.iter_mut() {
            m.default_namespace();
            defaults::default_manifest(m);
            let kind = Kind::of(m);
            let old = match self.read(&key(kind, m.namespace(), m.name())).await? {
                Some(kv) => Some((decode(&kv)?, kv.mod_revision)),
                None => None,
            };
            if let Some(Err(e)) = old.as_ref().map(|(o, _)| crate::mirror::refuse_write(o)) {
                errors.push(e.message().to_string());
                existing.push(old);
                continue;
            }
            let check = match &old {
                Some((o, _)) => validate_manifest(m).and_then(|_| validate_manifest_update(m, o)),
                None => validate_manifest(m),
            };
            if let Err(e) = check {
                errors.push(e.to_string());
            }
            existing.push(old);
        }
        if !errors.is_empty() {
            return Err(Status::invalid_argument(errors.join("\n")));
        }
        let mut out = Vec::with_capacity(manifests.len());
        for (m, old) in manifests.into_iter().zip(existing) {
            let warnings = m.warnings();
            let applied = if dry_run {
                match old {
                    None => Applied::Created(m),
                    Some((o, _)) => {
                        // The same comparison as a real apply makes.
                        let new = merge_for_update(&m, &o);
                        if encode(&new)? == encode(&o)? {
                            Applied::Unchanged(o)
                        } else {
                            Applied::Configured(new)
                        }
                    }
                }
            } else {
                self.apply_one(m, old).await?
            };
            out.push((applied, warnings));
        }
        Ok(out)
    }

    async fn apply_one(
        &self,
        m: Manifest,
        mut old: Option<(Manifest, u64)>,
    ) -> Result<Applied, Status> {
        let kind = Kind::of(&m);
        let k = key(kind, m.namespace(), m.name());
        for _ in 0..5 {
            match old.take() {
                None => {
                    let mut new = m.clone();
                    let meta = new.metadata_mut();
                    meta.uid = new_uid();
                    meta.creation_timestamp = Some(now_rfc3339());
                    meta.generation = Some(1);
                    let r = self
                        .write(op::Op::Create(pb::Create {
                            key: k.clone(),
                            value: encode(&new)?,
                        }))
                        .await;
                    match r {
                        Ok(w) => {
                            new.metadata_mut().resource_version = w.revision.to_string();
                            return Ok(Applied::Created(new));
                        }
                        Err(s) if s.code() == tonic::Code::AlreadyExists => {}
                        Err(s) => return Err(s),
                    }
                }
                Some((o, rev)) => {
                    let new = merge_for_update(&m, &o);
                    if encode(&new)? == encode(&o)? {
                        return Ok(Applied::Unchanged(o));
                    }
                    let r = self
                        .write(op::Op::Update(pb::Update {
                            key: k.clone(),
                            value: encode(&new)?,
                            expected_revision: rev,
                            upsert: false,
                        }))
                        .await;
                    match r {
                        Ok(w) => {
                            let mut new = new;
                            new.metadata_mut().resource_version = w.revision.to_string();
                            return Ok(Applied::Configured(new));
                        }
                        Err(s)
                            if matches!(s.code(), tonic::Code::Aborted | tonic::Code::NotFound) => {
                        }
                        Err(s) => return Err(s),
                    }
                }
            }
            // Someone else wrote meanwhile: read again and retry.
            old = match self.read(&k).await? {
                Some(kv) => {
                    let o = decode(&kv)?;
                    validate_manifest_update(&m, &o)
                        .map_err(|e| Status::invalid_argument(e.to_string()))?;
                    Some((o, kv.mod_revision))
                }
                None => None,
            };
        }
        Err(Status::aborted(format!(
            "{} kept changing while it was applied; retry",
            m.reference()
        )))
    }

    /// Creates one object (defaults, validation, identity); ALREADY_EXISTS
    /// when the name is taken.
    pub async fn create(&self, mut m: Manifest) -> Result<Manifest, Status> {
        m.default_namespace();
        defaults::default_manifest(&mut m);
        validate_manifest(&m).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let kind = Kind::of(&m);
        let meta = m.metadata_mut();
        meta.uid = new_uid();
        meta.creation_timestamp = Some(now_rfc3339());
        meta.generation = Some(1);
        let w = self
            .write(op::Op::Create(pb::Create {
                key: key(kind, m.namespace(), m.name()),
                value: encode(&m)?,
            }))
            .await
            .map_err(|s| {
                if s.code() == tonic::Code::AlreadyExists {
                    Status::already_exists(format!(
                        "{} {:?} already exists",
                        kind.resource(),
                        m.name()
                    ))
                } else {
                    s
                }
            })?;
        m.metadata_mut().resource_version = w.revision.to_string();
        Ok(m)
    }

    /// Replaces the status of one object (read, set, compare-and-swap,
    /// retried on conflict). With a non-empty `uid`, a different incarnation
    /// of the object is left alone (NOT_FOUND).
    pub async fn update_status(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        uid: &str,
        status: Value,
    ) -> Result<Manifest, Status> {
        let k = key(kind, namespace, name);
        for attempt in 0..5 {
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
                return Err(not_found(kind, name));
            };
            let old = decode(&kv)?;
            if !uid.is_empty() && old.metadata().uid != uid {
                if attempt == 0 {
                    continue;
                }
                return Err(not_found(kind, name));
            }
            let mut v = serde_json::to_value(&old)
                .map_err(|e| Status::internal(format!("cannot encode {}: {e}", old.reference())))?;
            if v.get("status") == Some(&status) {
                if attempt == 0 {
                    continue; // maybe only stale here: confirm with the leader
                }
                return Ok(old);
            }
            v["status"] = status.clone();
            let new = Manifest::from_value(v)
                .map_err(|e| Status::invalid_argument(format!("status: {e}")))?;
            let r = self
                .write(op::Op::Update(pb::Update {
                    key: k.clone(),
                    value: encode(&new)?,
                    expected_revision: kv.mod_revision,
                    upsert: false,
                }))
                .await;
            match r {
                Ok(w) => {
                    let mut new = new;
                    new.metadata_mut().resource_version = w.revision.to_string();
                    return Ok(new);
                }
                Err(s) if s.code() == tonic::Code::Aborted => continue,
                Err(s) if s.code() == tonic::Code::NotFound => return Err(not_found(kind, name)),
                Err(s) => return Err(s),
            }
        }
        Err(conflict(kind, name))
    }

    /// Replaces one object; compare-and-swap when it carries a resourceVersion.
    pub async fn update(&self, mut m: Manifest) -> Result<Manifest, Status> {
        m.default_namespace();
        defaults::default_manifest(&mut m);
        let kind = Kind::of(&m);
        let k = key(kind, m.namespace(), m.name());
        let wanted = &m.metadata().resource_version;
        // With a resourceVersion the write is a compare-and-swap on it: when
        // this member's applied state already holds that version, it is the
        // one to build on (a newer one elsewhere makes the write fail as a
        // conflict), and a ReadIndex round is saved — the controllers write
        // thousands of nodes at once this way. Otherwise read linearizably.
        let local = match wanted.is_empty() {
            true => None,
            false => self
                .read_local(&k)
                .await?
                .filter(|kv| kv.mod_revision.to_string() == *wanted),
        };
        let kv = match local {
            Some(kv) => kv,
            None => match self.read(&k).await? {
                Some(kv) => kv,
                None => return Err(not_found(kind, m.name())),
            },
        };
        let old = decode(&kv)?;
        crate::mirror::refuse_write(&old)?;
        if !wanted.is_empty() && *wanted != kv.mod_revision.to_string() {
            return Err(conflict(kind, m.name()));
        }
        validate_manifest(&m)
            .and_then(|_| validate_manifest_update(&m, &old))
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let mut new = m.clone();
        {
            let (om, nm) = (old.metadata(), new.metadata_mut());
            nm.uid = om.uid.clone();
            nm.creation_timestamp = om.creation_timestamp.clone();
            let bump = i64::from(spec_of(&m) != spec_of(&old));
            nm.generation = Some(om.generation.unwrap_or(1) + bump);
        }
        let r = self
            .write(op::Op::Update(pb::Update {
                key: k,
                value: encode(&new)?,
                expected_revision: kv.mod_revision,
                upsert: false,
            }))
            .await
            .map_err(|s| {
                if s.code() == tonic::Code::Aborted {
                    conflict(kind, m.name())
                } else {
                    s
                }
            })?;
        new.metadata_mut().resource_version = r.revision.to_string();
        Ok(new)
    }

    /// Deletes one object only if it is still at `resource_version` (0:
    /// whatever it is). Answers the revision of the delete.
    pub async fn delete_at(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        resource_version: u64,
    ) -> Result<u64, Status> {
        let r = self
            .write(op::Op::Delete(pb::Delete {
                key: key(kind, namespace, name),
                expected_revision: resource_version,
            }))
            .await
            .map_err(|s| match s.code() {
                tonic::Code::NotFound => not_found(kind, name),
                tonic::Code::Aborted => conflict(kind, name),
                _ => s,
            })?;
        Ok(r.revision)
    }

    /// Deletes one object and answers it as it was: read it, then delete
    /// that version (retried when it changed in between).
    pub async fn delete(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Manifest, Status> {
        for _ in 0..5 {
            let current = self.get(kind, namespace, name).await?;
            let rv = current.metadata().resource_version.parse().unwrap_or(0);
            match self.delete_at(kind, namespace, name, rv).await {
                Ok(_) => return Ok(current),
                Err(s) if s.code() == tonic::Code::Aborted => continue,
                Err(s) => return Err(s),
            }
        }
        Err(conflict(kind, name))
    }
}

/// The object an apply writes over an existing one: the manifest's content,
/// the existing identity (uid, creationTimestamp), status and a generation
/// that moves when spec changes.
fn merge_for_update(m: &Manifest, old: &Manifest) -> Manifest {
    let mut new = m.clone();
    if let (Some(status), Ok(mut v)) = (status_of_manifest(old), serde_json::to_value(&new)) {
        if let Some(o) = v.as_object_mut() {
            o.insert("status".into(), status);
        }
        if let Ok(with_status) = Manifest::from_value(v) {
            new = with_status;
        }
    }
    let om = old.metadata();
    let nm = new.metadata_mut();
    nm.uid = om.uid.clone();
    nm.creation_timestamp = om.creation_timestamp.clone();
    nm.resource_version = om.resource_version.clone();
    let bump = i64::from(spec_of(m) != spec_of(old));
    nm.generation = Some(om.generation.unwrap_or(1) + bump);
    new
}

// ------------------------------------------------------------------ gRPC

pub struct ObjectsSvc(pub Objects);

#[tonic::async_trait]
impl objects_server::Objects for ObjectsSvc {
    async fn apply(
        &self,
        req: Request<pb::ApplyRequest>,
    ) -> Result<Response<pb::ApplyResponse>, Status> {
        self.0.ctx.admin(&req, "apply")?;
        let r = req.into_inner();
        let applied = self.0.apply(&r.manifests, r.dry_run).await?;
        let mut results = Vec::with_capacity(applied.len());
        for (a, warnings) in applied {
            let (action, m) = match a {
                Applied::Created(m) => ("created", m),
                Applied::Configured(m) => ("configured", m),
                Applied::Unchanged(m) => ("unchanged", m),
            };
            results.push(pb::ApplyResult {
                reference: m.reference(),
                namespace: m.namespace().to_string(),
                action: action.into(),
                warnings,
                object: to_json(&m)?,
            });
        }
        Ok(Response::new(pb::ApplyResponse { results }))
    }

    async fn get(
        &self,
        req: Request<pb::ObjectRef>,
    ) -> Result<Response<pb::ObjectResponse>, Status> {
        self.0.ctx.admin(&req, "get")?;
        let r = req.into_inner();
        let m = self
            .0
            .get(Kind::parse(&r.kind)?, &r.namespace, &r.name)
            .await?;
        Ok(Response::new(pb::ObjectResponse {
            object: to_json(&m)?,
        }))
    }

    async fn list(
        &self,
        req: Request<pb::ListObjectsRequest>,
    ) -> Result<Response<pb::ListObjectsResponse>, Status> {
        self.0.ctx.admin(&req, "list")?;
        let r = req.into_inner();
        let kind = Kind::parse(&r.kind)?;
        let selector = if r.label_selector.is_empty() {
            None
        } else {
            Some(Selector::parse(&r.label_selector).map_err(|e| {
                Status::invalid_argument(format!("label selector {:?}: {e}", r.label_selector))
            })?)
        };
        let ns = (!r.namespace.is_empty()).then_some(r.namespace.as_str());
        let (items, rev) = self.0.list(kind, ns, selector.as_ref()).await?;
        Ok(Response::new(pb::ListObjectsResponse {
            items: items.iter().map(to_json).collect::<Result<_, _>>()?,
            resource_version: rev.to_string(),
        }))
    }

    async fn update(
        &self,
        req: Request<pb::UpdateObjectRequest>,
    ) -> Result<Response<pb::ObjectResponse>, Status> {
        self.0.ctx.admin(&req, "update")?;
        let r = req.into_inner();
        let v: Value = serde_json::from_slice(&r.object)
            .map_err(|e| Status::invalid_argument(format!("object: not JSON: {e}")))?;
        let m = Manifest::from_value(v).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let m = self.0.update(m).await?;
        Ok(Response::new(pb::ObjectResponse {
            object: to_json(&m)?,
        }))
    }

    async fn delete(
        &self,
        req: Request<pb::ObjectRef>,
    ) -> Result<Response<pb::ObjectResponse>, Status> {
        self.0.ctx.admin(&req, "delete")?;
        let _ = hops(&req);
        let r = req.into_inner();
        let m = self
            .0
            .delete(Kind::parse(&r.kind)?, &r.namespace, &r.name)
            .await?;
        Ok(Response::new(pb::ObjectResponse {
            object: to_json(&m)?,
        }))
    }

    type WatchStream = ReceiverStream<Result<pb::ObjectEvent, Status>>;

    async fn watch(
        &self,
        req: Request<pb::WatchObjectsRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        self.0.ctx.admin(&req, "watch")?;
        let r = req.into_inner();
        let kind = Kind::parse(&r.kind)?;
        let from = if r.resource_version.is_empty() {
            0
        } else {
            r.resource_version.parse::<u64>().map_err(|_| {
                Status::invalid_argument(format!(
                    "resourceVersion {:?}: not a resourceVersion this server gave out",
                    r.resource_version
                ))
            })?
        };
        let ns = (!r.namespace.is_empty()).then_some(r.namespace.as_str());
        let mut w = self
            .0
            .ctx
            .store
            .watch(&prefix(kind, ns), from)
            .map_err(status_of)?;
        let (tx, rx) = tokio::sync::mpsc::channel(256);
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    n = w.next() => n,
                    _ = tx.closed() => return,
                };
                let batch = match next {
                    Ok(b) => b,
                    Err(e) => {
                        let _ = tx.send(Err(status_of(e))).await;
                        return;
                    }
                };
                for e in batch.events {
                    let Some(kv) = e.kv else { continue };
                    let ty = if e.r#type == EventType::Delete as i32 {
                        "DELETED"
                    } else if kv.create_revision == kv.mod_revision {
                        "ADDED"
                    } else {
                        "MODIFIED"
                    };
                    let item =
                        decode(&kv)
                            .and_then(|m| to_json(&m))
                            .map(|object| pb::ObjectEvent {
                                r#type: ty.into(),
                                object,
                            });
                    if tx.send(item).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_like_kubectl() {
        for (s, k) in [
            ("ds", Kind::DaemonSet),
            ("daemonsets.apps", Kind::DaemonSet),
            ("DaemonSet", Kind::DaemonSet),
            ("po", Kind::Pod),
            ("nodes", Kind::Node),
            ("ev", Kind::Event),
        ] {
            assert_eq!(Kind::parse(s).unwrap(), k, "{s}");
        }
        let e = Kind::parse("deployments").unwrap_err();
        assert!(e.message().contains("doesn't have a resource type"));
    }

    #[test]
    fn keys_are_namespaced_except_nodes() {
        assert_eq!(
            key(Kind::DaemonSet, "", "a"),
            "/registry/daemonsets/default/a"
        );
        assert_eq!(
            key(Kind::Pod, "kube-system", "p"),
            "/registry/pods/kube-system/p"
        );
        assert_eq!(key(Kind::Node, "ignored", "n1"), "/registry/nodes/n1");
        assert_eq!(prefix(Kind::Pod, None), "/registry/pods/");
        assert_eq!(prefix(Kind::Node, Some("x")), "/registry/nodes/");
    }

    #[test]
    fn uids_look_like_kubernetes_uids() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(u.as_bytes()[14], b'4');
        assert_ne!(u, new_uid());
    }
}
