//! `apply`: a manifest stream, validated as a whole, then each object
//! created or updated (kept unchanged when nothing differs).

use super::codec::{self, decode, encode, key, new_uid, now_rfc3339};
use super::{mirror, Objects, ATTEMPTS};
use crate::error::ApiError;
use drover_api::validation::{validate_manifest, validate_manifest_update};
use drover_api::{defaults, parse_manifests, Kind, Manifest};
use drover_proto::v1::{self as pb, op};

/// The outcome of applying one object.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    Created(Manifest),
    Configured(Manifest),
    Unchanged(Manifest),
}

impl Applied {
    /// What kubectl prints: `created`, `configured`, `unchanged`.
    pub fn action(&self) -> &'static str {
        match self {
            Applied::Created(_) => "created",
            Applied::Configured(_) => "configured",
            Applied::Unchanged(_) => "unchanged",
        }
    }

    /// The object as it is now.
    pub fn object(&self) -> &Manifest {
        match self {
            Applied::Created(m) | Applied::Configured(m) | Applied::Unchanged(m) => m,
        }
    }
}

impl Objects {
    /// Validates every object of a stream, then creates or updates each.
    /// Nothing is written when any object is invalid.
    pub async fn apply(
        &self,
        text: &str,
        dry_run: bool,
    ) -> Result<Vec<(Applied, Vec<String>)>, ApiError> {
        let mut manifests =
            parse_manifests(text).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        if manifests.is_empty() {
            return Err(ApiError::BadRequest("no objects passed to apply".into()));
        }
        let mut invalid = Vec::new();
        let mut existing = Vec::with_capacity(manifests.len());
        for m in manifests.iter_mut() {
            m.default_namespace();
            defaults::default_manifest(m);
            let kind = Kind::of(m);
            let old = match self.read(&key(kind, m.namespace(), m.name())).await? {
                Some(kv) => Some((decode(&kv)?, kv.mod_revision)),
                None => None,
            };
            if let Some(Err(e)) = old.as_ref().map(|(o, _)| mirror::refuse_write(o)) {
                invalid.push(e);
                existing.push(old);
                continue;
            }
            let check = match &old {
                Some((o, _)) => validate_manifest(m).and_then(|_| validate_manifest_update(m, o)),
                None => validate_manifest(m),
            };
            if let Err(e) = check {
                invalid.push(e);
            }
            existing.push(old);
        }
        if !invalid.is_empty() {
            return Err(ApiError::invalid(invalid));
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
    ) -> Result<Applied, ApiError> {
        let kind = Kind::of(&m);
        let k = key(kind, m.namespace(), m.name());
        for _ in 0..ATTEMPTS {
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
                        Err(ApiError::AlreadyExists(_)) => {}
                        Err(e) => return Err(e),
                    }
                }
                Some((o, rev)) => {
                    let new = merge_for_update(&m, &o);
                    if encode(&new)? == encode(&o)? {
                        return Ok(Applied::Unchanged(o));
                    }
                    match self.swap(&k, new, rev).await {
                        Ok(new) => return Ok(Applied::Configured(new)),
                        Err(ApiError::Conflict(_) | ApiError::NotFound(_)) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            // Someone else wrote meanwhile: read again and retry.
            old = match self.read(&k).await? {
                Some(kv) => {
                    let o = decode(&kv)?;
                    validate_manifest_update(&m, &o).map_err(|e| ApiError::invalid(vec![e]))?;
                    Some((o, kv.mod_revision))
                }
                None => None,
            };
        }
        Err(ApiError::Conflict(format!(
            "{} kept changing while it was applied; retry",
            m.reference()
        )))
    }
}

/// The object an apply writes over an existing one: the manifest's content,
/// the existing identity (uid, creationTimestamp), status and a generation
/// that moves when spec changes.
fn merge_for_update(m: &Manifest, old: &Manifest) -> Manifest {
    let mut new = m.clone();
    if let (Some(status), Ok(mut v)) = (codec::status_of(old), serde_json::to_value(&new)) {
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
    let bump = i64::from(codec::spec_of(m) != codec::spec_of(old));
    nm.generation = Some(om.generation.unwrap_or(1) + bump);
    new
}
