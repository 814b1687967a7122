//! Snapshots of the whole store (`drover cluster snapshot save`, the
//! scheduled snapshots of `--snapshot-interval`): a linearizable list of
//! every key, with the cluster's CA and tokens in the header so that a
//! restore keeps every node's and client's certificate valid
//! (`drover_store::backup` is the file format).
//!
//! Snapshot files hold Secrets, the CA key and the tokens: they are
//! written 0600, through a temporary file renamed into place, so a reader
//! never sees half a file.

use crate::ctx::Ctx;
use crate::error::ApiError;
use drover_pki::TokenKind;
use drover_proto::v1::{BackupHeader, SnapshotInfo};
use drover_store::backup::{write_file_then, Backup, FORMAT};
use drover_store::{Consistency, KeyValue, Op};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where the cluster's identity lives: a random id made by the first
/// leader (and anew by a restore unless told to keep it).
pub const CLUSTER_KEY: &str = "/drover/cluster";

/// The extension of snapshot files in a snapshot directory.
pub const EXTENSION: &str = "snapshot";

/// A new cluster id (32 hex digits).
pub fn new_cluster_id() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes the cluster id if the store has none yet (a cluster made before
/// snapshots existed, or a new one): on the leader, once per term.
pub async fn ensure_cluster_id(ctx: &Ctx) -> Result<String, ApiError> {
    let (kv, _) = ctx
        .read(|| ctx.store.get(CLUSTER_KEY, Consistency::Linearizable))
        .await?;
    if let Some(kv) = kv {
        return Ok(String::from_utf8_lossy(&kv.value).into_owned());
    }
    let id = new_cluster_id();
    let op = Op {
        op: Some(drover_store::op::Op::Create(drover_store::Create {
            key: CLUSTER_KEY.into(),
            value: id.clone().into_bytes(),
        })),
    };
    match ctx.store.write(op, 0).await {
        Ok(_) => Ok(id),
        Err(drover_store::Error::AlreadyExists { .. }) => {
            let (kv, _) = ctx
                .read(|| ctx.store.get(CLUSTER_KEY, Consistency::Linearizable))
                .await?;
            Ok(kv
                .map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
                .unwrap_or(id))
        }
        Err(e) => Err(e.into()),
    }
}

/// A consistent copy of the whole store: every key at exactly one
/// revision (a linearizable list), and the header that goes with it.
pub async fn take(ctx: &Ctx) -> Result<(BackupHeader, Vec<KeyValue>), ApiError> {
    let (kvs, revision) = ctx
        .read(|| ctx.store.list("", Consistency::Linearizable))
        .await?;
    let cluster_id = kvs
        .iter()
        .find(|kv| kv.key == CLUSTER_KEY)
        .map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
        .unwrap_or_default();
    let header = BackupHeader {
        format: FORMAT,
        cluster_id,
        revision,
        taken_at_ms: now_ms(),
        taken_by: ctx.store.id(),
        drover_version: env!("CARGO_PKG_VERSION").to_string(),
        members: ctx.store.members().into_values().collect(),
        objects: kvs.len() as u64,
        ca_cert: ctx.trust.ca.cert_pem().to_string(),
        ca_key: ctx.trust.ca.key_pem().to_string(),
        server_token: ctx.trust.token(TokenKind::Server).to_string(),
        node_token: ctx.trust.token(TokenKind::Node).to_string(),
        admin_token: ctx.admin_token(),
    };
    Ok((header, kvs))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The file name of a scheduled snapshot: its time (UTC, sortable) and
/// revision.
pub fn scheduled_name(taken_at: SystemTime, revision: u64) -> String {
    let t = humantime::format_rfc3339_millis(taken_at)
        .to_string()
        .replace([':', '-'], "");
    format!("drover-{t}-r{revision}.{EXTENSION}")
}

/// Takes a snapshot into `dir` and keeps the newest `retain` there.
/// Answers the file written and the revision it holds.
pub async fn save_scheduled(
    ctx: &Ctx,
    dir: &Path,
    retain: usize,
) -> Result<(PathBuf, u64), ApiError> {
    let started = Instant::now();
    let (header, kvs) = take(ctx).await?;
    let taken_at = UNIX_EPOCH + Duration::from_millis(header.taken_at_ms);
    let path = dir.join(scheduled_name(taken_at, header.revision));
    let (revision, objects) = (header.revision, kvs.len());
    let dir2 = dir.to_path_buf();
    let path2 = path.clone();
    tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        drover_store::private_dir(&dir2)?;
        // The new one counts among the `retain` kept.
        write_file_then(&path2, &Backup::encode(header, &kvs), || {
            prune(&dir2, retain.saturating_sub(1))
        })
    })
    .await
    .map_err(|e| ApiError::Internal(format!("the snapshot writer failed: {e}")))?
    .map_err(|e| {
        ApiError::Internal(format!(
            "cannot write the snapshot {}: {e}; check the directory's permissions and free space",
            path.display()
        ))
    })?;
    tracing::info!(
        "scheduled snapshot {}: {objects} objects at revision {revision} in {} ms",
        path.display(),
        started.elapsed().as_millis()
    );
    Ok((path, revision))
}

/// The scheduled snapshots in `dir`, oldest first (names sort by time).
fn scheduled_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(rd) => {
            for e in rd {
                let p = e?.path();
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if name.starts_with("drover-") && name.ends_with(&format!(".{EXTENSION}")) {
                    out.push(p);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    out.sort();
    Ok(out)
}

/// Removes all but the newest `retain` scheduled snapshots of `dir` (0:
/// all of them).
pub fn prune(dir: &Path, retain: usize) -> std::io::Result<()> {
    let files = scheduled_files(dir)?;
    let extra = files.len().saturating_sub(retain);
    for p in &files[..extra] {
        std::fs::remove_file(p)?;
    }
    Ok(())
}

/// What `dir` holds: each scheduled snapshot's header (a file whose
/// header does not read is listed with its size only).
pub fn list(dir: &Path) -> std::io::Result<Vec<SnapshotInfo>> {
    let mut out = Vec::new();
    for p in scheduled_files(dir)? {
        let size = std::fs::metadata(&p)?.len();
        let mut info = SnapshotInfo {
            name: p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            size,
            ..Default::default()
        };
        // The header is at the start; 1 MiB and a bit always holds it.
        let mut head = vec![0u8; (drover_store::backup::MAX_HEADER_BYTES + 20).min(size as usize)];
        if let Ok(mut f) = std::fs::File::open(&p) {
            use std::io::Read as _;
            if f.read_exact(&mut head).is_ok() {
                if let Ok(h) = Backup::peek_header(&head) {
                    info.revision = h.revision;
                    info.taken_at_ms = h.taken_at_ms;
                    info.objects = h.objects;
                    info.cluster_id = h.cluster_id;
                }
            }
        }
        out.push(info);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduled_names_sort_by_time() {
        let a = scheduled_name(UNIX_EPOCH + Duration::from_secs(1_700_000_000), 9);
        let b = scheduled_name(UNIX_EPOCH + Duration::from_secs(1_700_000_001), 3);
        assert!(a < b, "{a} {b}");
        assert_eq!(a, "drover-20231114T221320.000Z-r9.snapshot");
    }

    #[test]
    fn pruning_keeps_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        for s in 0..5u64 {
            let name = scheduled_name(UNIX_EPOCH + Duration::from_secs(1_700_000_000 + s), s);
            drover_store::backup::write_file(&dir.path().join(name), b"x").unwrap();
        }
        std::fs::write(dir.path().join("mine.txt"), b"not a snapshot").unwrap();
        prune(dir.path(), 2).unwrap();
        let left = list(dir.path()).unwrap();
        let names: Vec<_> = left.iter().map(|i| i.name.clone()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names[0].ends_with("-r3.snapshot") && names[1].ends_with("-r4.snapshot"));
        assert!(dir.path().join("mine.txt").exists(), "other files are kept");
    }

    #[test]
    fn files_are_private_and_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.snapshot");
        drover_store::backup::write_file(&p, b"first").unwrap();
        drover_store::backup::write_file(&p, b"second").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"second");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file is left");
    }
}
