//! `apply`: a manifest stream, validated as a whole, then every object
//! created or updated (kept unchanged when nothing differs) in one store
//! write: all or nothing.

use super::codec::{self, decode, encode, encode_for_write, key, new_uid, now_rfc3339};
use super::{mirror, Objects, ATTEMPTS};
use crate::error::ApiError;
use crate::limits::MAX_APPLY_WRITE_BYTES;
use drover_api::validation::{validate_manifest, validate_manifest_update};
use drover_api::{defaults, parse_manifests, FieldValidation, Kind, Manifest};
use drover_proto::v1::{self as pb, op};
use std::collections::HashSet;

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
    /// Validates every object of a stream, then writes them all in one
    /// store write (one raft entry, a transaction with a compare-and-swap
    /// on each object read), or none. Nothing is written when any object
    /// is invalid, too large, or a mirror pod. When another writer changed
    /// an object meanwhile, the whole stream is read, checked and written
    /// again, up to [`ATTEMPTS`] times.
    pub async fn apply(
        &self,
        text: &str,
        dry_run: bool,
    ) -> Result<Vec<(Applied, Vec<String>)>, ApiError> {
        self.apply_with(text, dry_run, FieldValidation::Strict)
            .await
    }

    /// [`Objects::apply`] with a field validation mode: under
    /// [`FieldValidation::Strict`] (kubectl's default) a field that no
    /// Kubernetes object has refuses the whole stream, every such field
    /// of every object named at once.
    pub async fn apply_with(
        &self,
        text: &str,
        dry_run: bool,
        mode: FieldValidation,
    ) -> Result<Vec<(Applied, Vec<String>)>, ApiError> {
        let mut manifests =
            parse_manifests(text).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        if manifests.is_empty() {
            return Err(ApiError::BadRequest("no objects passed to apply".into()));
        }
        let warnings = field_warnings(&manifests, mode)?;
        let mut seen = HashSet::with_capacity(manifests.len());
        for (i, m) in manifests.iter_mut().enumerate() {
            m.default_namespace();
            defaults::default_manifest(m);
            if !seen.insert(key(Kind::of(m), m.namespace(), m.name())) {
                return Err(ApiError::BadRequest(format!(
                    "{} appears more than once in the stream (again as object {}); apply each object once",
                    m.reference(),
                    i + 1
                )));
            }
        }
        for _ in 0..ATTEMPTS {
            let existing = self.read_and_check(&manifests).await?;
            if dry_run {
                return dry_run_outcomes(manifests, existing, warnings);
            }
            let (ops, mut out) = plan(&manifests, existing, &warnings)?;
            let op = match ops.len() {
                0 => return Ok(out),
                1 => ops.into_iter().next().and_then(|o| o.op),
                _ => Some(op::Op::Txn(pb::Txn { ops })),
            };
            let Some(op) = op else {
                return Err(ApiError::Internal("apply planned an empty write".into()));
            };
            #[cfg(test)]
            tests::before_write().await;
            match self.write(op).await {
                Ok(w) => {
                    for (applied, _) in out.iter_mut() {
                        if let Applied::Created(m) | Applied::Configured(m) = applied {
                            m.metadata_mut().resource_version = w.revision.to_string();
                        }
                    }
                    return Ok(out);
                }
                // Someone else wrote one of the objects meanwhile: read
                // them all again and retry.
                Err(ApiError::Conflict(_) | ApiError::AlreadyExists(_) | ApiError::NotFound(_)) => {
                }
                Err(e) => return Err(e),
            }
        }
        let names: Vec<String> = manifests.iter().map(Manifest::reference).collect();
        Err(ApiError::Conflict(format!(
            "{} kept changing while {} applied; apply again",
            names.join(", "),
            if names.len() == 1 {
                "it was"
            } else {
                "they were"
            }
        )))
    }

    /// Reads each object's current version and checks the manifest against
    /// it: validation (of an update when it exists) and the mirror pods'
    /// rule. Every object's errors at once; nothing when all are fine.
    async fn read_and_check(&self, manifests: &[Manifest]) -> Result<Vec<Existing>, ApiError> {
        let mut invalid = Vec::new();
        let mut existing = Vec::with_capacity(manifests.len());
        for m in manifests {
            let old = match self
                .read(&key(Kind::of(m), m.namespace(), m.name()))
                .await?
            {
                Some(kv) => Some((decode(&kv)?, kv.mod_revision)),
                None => None,
            };
            let check = match &old {
                Some((o, _)) => mirror::refuse_write(o)
                    .and_then(|_| validate_manifest(m))
                    .and_then(|_| validate_manifest_update(m, o)),
                None => super::validate_new(m),
            };
            if let Err(e) = check {
                invalid.push(e);
            }
            existing.push(old);
        }
        if !invalid.is_empty() {
            return Err(ApiError::invalid(invalid));
        }
        Ok(existing)
    }
}

/// An object as read before an apply, and its revision.
type Existing = Option<(Manifest, u64)>;

/// Each object's outcome and warnings.
type Outcomes = Vec<(Applied, Vec<String>)>;

/// What an apply would do, without writing.
fn dry_run_outcomes(
    manifests: Vec<Manifest>,
    existing: Vec<Existing>,
    warnings: Vec<Vec<String>>,
) -> Result<Outcomes, ApiError> {
    let mut out = Vec::with_capacity(manifests.len());
    for ((m, old), warnings) in manifests.into_iter().zip(existing).zip(warnings) {
        let applied = match old {
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
        };
        out.push((applied, warnings));
    }
    Ok(out)
}

/// The write of an apply: one op per object that changes (a create, or an
/// update guarded by the revision read), and each object's outcome.
fn plan(
    manifests: &[Manifest],
    existing: Vec<Existing>,
    warnings: &[Vec<String>],
) -> Result<(Vec<pb::Op>, Outcomes), ApiError> {
    let mut ops = Vec::new();
    let mut out = Vec::with_capacity(manifests.len());
    let mut total = 0usize;
    let mut add = |o: op::Op, size: usize| -> Result<(), ApiError> {
        total += size;
        if total > MAX_APPLY_WRITE_BYTES {
            return Err(ApiError::BadRequest(format!(
                "this apply would write more than {MAX_APPLY_WRITE_BYTES} bytes (32 MiB) of objects in one step; apply the objects in smaller groups"
            )));
        }
        ops.push(o);
        Ok(())
    };
    for ((m, old), warnings) in manifests.iter().zip(existing).zip(warnings) {
        let k = key(Kind::of(m), m.namespace(), m.name());
        let applied = match old {
            None => {
                let mut new = m.clone();
                let meta = new.metadata_mut();
                meta.uid = new_uid();
                meta.creation_timestamp = Some(now_rfc3339());
                meta.generation = Some(1);
                let value = encode_for_write(&mut new)?;
                let size = value.len();
                add(op::Op::Create(pb::Create { key: k, value }), size)?;
                Applied::Created(new)
            }
            Some((o, rev)) => {
                let mut new = merge_for_update(m, &o);
                if encode(&new)? == encode(&o)? {
                    Applied::Unchanged(o)
                } else {
                    let value = encode_for_write(&mut new)?;
                    let size = value.len();
                    let update = pb::Update {
                        key: k,
                        value,
                        expected_revision: rev,
                        upsert: false,
                    };
                    add(op::Op::Update(update), size)?;
                    Applied::Configured(new)
                }
            }
        };
        out.push((applied, warnings.clone()));
    }
    let ops = ops.into_iter().map(|o| pb::Op { op: Some(o) }).collect();
    Ok((ops, out))
}

/// Each object's warnings under `mode`; under strict validation, the
/// fields no Kubernetes object has refuse the stream (the API server's
/// "strict decoding error"), every one named.
fn field_warnings(
    manifests: &[Manifest],
    mode: FieldValidation,
) -> Result<Vec<Vec<String>>, ApiError> {
    let mut refused = Vec::new();
    let mut out = Vec::with_capacity(manifests.len());
    for m in manifests {
        match m.warnings_under(mode) {
            Ok(w) => out.push(w),
            Err(unknown) => {
                let fields: Vec<String> = unknown.iter().map(|u| u.to_string()).collect();
                refused.push(format!(
                    "{} ({} in version {:?}): strict decoding error: {}",
                    m.reference(),
                    m.kind(),
                    m.api_version(),
                    fields.join(", ")
                ));
            }
        }
    }
    if refused.is_empty() {
        return Ok(out);
    }
    Err(ApiError::BadRequest(format!(
        "{}; no Kubernetes object has {}: correct the name, or apply with --validate=warn to keep {} as an unknown field (nothing was applied)",
        refused.join("; "),
        if refused.len() == 1 { "this field" } else { "these fields" },
        if refused.len() == 1 { "it" } else { "them" },
    )))
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
    codec::keep_deletion(om, nm);
    let bump = i64::from(codec::spec_of(m) != codec::spec_of(old));
    nm.generation = Some(om.generation.unwrap_or(1) + bump);
    new
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Server, ServerOptions};
    use std::sync::Mutex;
    use std::time::Duration;
    use tokio::sync::{mpsc, oneshot};

    /// When set, an apply tells it when it is about to write (after it read
    /// and planned) and waits until told to go on.
    static BEFORE_WRITE: Mutex<Option<mpsc::Sender<oneshot::Sender<()>>>> = Mutex::new(None);

    pub(super) async fn before_write() {
        let hook = BEFORE_WRITE.lock().ok().and_then(|h| h.clone());
        if let Some(hook) = hook {
            let (go, wait) = oneshot::channel();
            if hook.send(go).await.is_ok() {
                let _ = wait.await;
            }
        }
    }

    #[test]
    fn an_apply_that_would_write_more_than_32_mib_is_refused() {
        let arg = "x".repeat(1 << 20);
        let text: Vec<String> = (0..40)
            .map(|i| {
                format!(
                    "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}}}\nspec:\n  containers:\n  - {{name: c, image: busybox, args: [\"{arg}\"]}}\n"
                )
            })
            .collect();
        let manifests = drover_api::parse_manifests(&text.join("---\n")).unwrap();
        let fits = plan(&manifests[..30], vec![None; 30], &vec![vec![]; 30]).unwrap();
        assert_eq!(fits.0.len(), 30);
        let e = plan(&manifests, vec![None; 40], &vec![vec![]; 40]).unwrap_err();
        assert!(matches!(e, ApiError::BadRequest(_)), "{e:?}");
        assert!(e.to_string().contains("smaller groups"), "{e}");
    }

    fn node(name: &str, label: &str) -> String {
        format!("apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{l: {label}}}}}\n")
    }

    #[tokio::test]
    async fn an_apply_whose_last_object_keeps_changing_writes_none_of_its_objects() {
        let tmp = tempfile::tempdir().unwrap();
        let mut opts = ServerOptions::new(tmp.path().join("s"));
        opts.listen = Some("127.0.0.1:0".into());
        opts.http = Some("127.0.0.1:0".into());
        let mut server = Server::start(opts).await.unwrap();
        let objects = server.objects();
        objects.apply(&node("b", "old"), false).await.unwrap();

        let (hook, mut planned) = mpsc::channel(1);
        *BEFORE_WRITE.lock().unwrap() = Some(hook);
        let stream = format!("{}---\n{}", node("a", "new"), node("b", "new"));
        let applying = tokio::spawn({
            let objects = objects.clone();
            async move { objects.apply(&stream, false).await }
        });
        // Before each attempt writes, another writer changes b.
        for i in 0..ATTEMPTS {
            let go = tokio::time::timeout(Duration::from_secs(10), planned.recv())
                .await
                .expect("the apply plans its write within 10 s")
                .expect("the hook is held");
            let Manifest::Node(mut b) = objects.get(Kind::Node, "", "b").await.unwrap() else {
                panic!("b is a node");
            };
            b.metadata.labels.insert("l".into(), format!("other-{i}"));
            objects.update(Manifest::Node(b)).await.unwrap();
            go.send(()).unwrap();
        }
        let r = tokio::time::timeout(Duration::from_secs(10), applying)
            .await
            .expect("the apply answers within 10 s")
            .unwrap();
        assert!(matches!(r, Err(ApiError::Conflict(_))), "{r:?}");
        *BEFORE_WRITE.lock().unwrap() = None;
        assert!(
            matches!(
                objects.get(Kind::Node, "", "a").await,
                Err(ApiError::NotFound(_))
            ),
            "a, which did not conflict, was not written either"
        );
        // Left alone, the same apply writes both, at one revision.
        let stream = format!("{}---\n{}", node("a", "new"), node("b", "new"));
        let out = objects.apply(&stream, false).await.unwrap();
        let actions: Vec<_> = out.iter().map(|(a, _)| a.action()).collect();
        assert_eq!(actions, ["created", "configured"]);
        let rv = |a: &Applied| a.object().metadata().resource_version.clone();
        assert_eq!(rv(&out[0].0), rv(&out[1].0));
        server.shutdown().await;
    }
}
