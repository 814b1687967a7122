//! Starting a member from a disaster: `drover server --restore FILE` (a new
//! one-member cluster from a snapshot file) and `--force-new-cluster` (a
//! survivor of a lost quorum made a one-member cluster from its own data).
//! Both say loudly what they did; `docs/operations.md` has the runbooks.

use crate::api::snapshot::{new_cluster_id, CLUSTER_KEY};
use crate::identity::Identity;
use crate::trust::Trust;
use anyhow::{anyhow, bail, Context, Result};
use drover_proto::v1::cluster_client::ClusterClient;
use drover_store::backup::Backup;
use drover_store::KeyValue;
use std::path::Path;
use std::time::Duration;

/// Reads and verifies a snapshot file, before anything is written.
pub fn read_snapshot(path: &Path) -> Result<Backup> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("--restore {}: cannot read the snapshot", path.display()))?;
    Backup::decode(&bytes)
        .map_err(|e| anyhow!("--restore {}: {e}. Nothing was written", path.display()))
}

/// Refuses a data dir that already holds anything: a restore makes a new
/// cluster and never overwrites a member.
pub fn check_empty(dir: &Path) -> Result<()> {
    if let Some(id) = Identity::load(dir)? {
        bail!(
            "--restore: {} already holds member {:016x}; a restore makes a new cluster in an empty data dir (move this one aside, or give another --data-dir)",
            dir.display(),
            id.id
        );
    }
    match std::fs::read_dir(dir) {
        Ok(mut rd) => {
            if rd.next().is_some() {
                bail!(
                    "--restore: {} is not empty; a restore makes a new cluster in an empty data dir (move its files aside, or give another --data-dir)",
                    dir.display()
                );
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("--restore: cannot read {}", dir.display())),
    }
}

/// The objects a restored cluster starts with: the snapshot's, with a new
/// cluster id unless `keep_id` (answers the id in force).
pub fn restored_objects(b: &Backup, keep_id: bool) -> (Vec<KeyValue>, String) {
    let mut kvs = b.kvs.clone();
    let id = if keep_id && !b.header.cluster_id.is_empty() {
        b.header.cluster_id.clone()
    } else {
        new_cluster_id()
    };
    kvs.retain(|kv| kv.key != CLUSTER_KEY);
    let rev = b.header.revision.max(1);
    kvs.push(KeyValue {
        key: CLUSTER_KEY.into(),
        value: id.clone().into_bytes(),
        create_revision: rev,
        mod_revision: rev,
    });
    (kvs, id)
}

/// Makes the member of `dir` the only member of its cluster, after
/// checking that no other member answers (a member that answers means the
/// quorum is not lost for good: forcing would split the cluster in two).
pub async fn force_new_cluster(dir: &Path, me: &Identity, trust: &Trust) -> Result<()> {
    let store_dir = dir.join("store");
    let members = drover_store::recorded_members(&store_dir).with_context(|| {
        format!(
            "--force-new-cluster: cannot read the store in {}",
            store_dir.display()
        )
    })?;
    if !members.iter().any(|m| m.id == me.id && !m.removed) {
        bail!(
            "--force-new-cluster: member {:016x} of {} is not a member of its cluster (was it removed?)",
            me.id,
            dir.display()
        );
    }
    let others: Vec<_> = members
        .iter()
        .filter(|m| m.id != me.id && !m.removed && !m.addr.is_empty())
        .collect();
    for m in &others {
        if let Some(what) = answers(&m.addr, trust).await {
            bail!(
                "--force-new-cluster refused: member {:016x} at {} still answers ({what}). The cluster is not lost: while a majority of members runs, remove dead members with `drover cluster remove`; to force anyway, stop every other member first",
                m.id,
                m.addr
            );
        }
    }
    let store_dir2 = store_dir.clone();
    let id = me.id;
    let r = tokio::task::spawn_blocking(move || drover_store::force_new_cluster(&store_dir2, id))
        .await
        .context("--force-new-cluster: the recovery task failed")?
        .with_context(|| format!("--force-new-cluster on {}", store_dir.display()))?;
    let gone: Vec<String> = r
        .dropped
        .iter()
        .map(|m| format!("{:016x} ({})", m.id, m.addr))
        .collect();
    let msg = format!(
        "FORCED A NEW CLUSTER: member {:016x} is now the only member, at revision {} ({} log entries past the applied index {} were applied and kept); removed members: {}. Join new members with `drover server --join {} --token $(cat {}/server-token)`",
        me.id,
        r.revision,
        r.replayed,
        r.applied_before,
        if gone.is_empty() { "none".to_string() } else { gone.join(", ") },
        me.addr,
        dir.display()
    );
    loudly(&msg);
    Ok(())
}

/// Says what a restore is about to make of `b` (read from `file`): the new
/// cluster `cluster` with member `id`.
pub fn announce_restore(file: &Path, b: &Backup, cluster: &str, id: u64) {
    let taken = std::time::UNIX_EPOCH + Duration::from_millis(b.header.taken_at_ms);
    let old = match b.header.cluster_id.as_str() {
        "" => "(no id)",
        c => c,
    };
    loudly(&format!(
        "RESTORED from {}: {} objects at revision {} of cluster {old}, taken {} by member {:016x}; this is now cluster {cluster} with one member, {id:016x}",
        file.display(),
        b.kvs.len(),
        b.header.revision,
        humantime::format_rfc3339_seconds(taken),
        b.header.taken_by,
    ));
}

/// What an operator must not miss: in the log and on stderr.
fn loudly(msg: &str) {
    tracing::warn!("{msg}");
    eprintln!("drover server: {msg}");
}

/// What a member at `addr` answers to a status call within 2 s, or `None`
/// when it does not answer.
async fn answers(addr: &str, trust: &Trust) -> Option<String> {
    let ep = drover_pki::net::endpoint(addr)
        .ok()?
        .connect_timeout(Duration::from_secs(2));
    let call = async {
        let ch = drover_pki::net::connect(ep, trust.client_tls())
            .await
            .ok()?;
        let mut req = tonic::Request::new(drover_proto::v1::StatusRequest {});
        req.set_timeout(Duration::from_secs(2));
        Some(match ClusterClient::new(ch).status(req).await {
            Ok(r) => {
                let r = r.into_inner();
                format!("it is {} in term {}", r.role, r.term)
            }
            Err(s) => format!("it refused a status call: {}", s.message()),
        })
    };
    tokio::time::timeout(Duration::from_secs(3), call)
        .await
        .ok()
        .flatten()
}
