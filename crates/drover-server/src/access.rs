//! Client certificates on record, and their revocation.
//!
//! Every certificate `drover access issue` gets is recorded under
//! [`ACCESS_KEY`]`<serial>` (who, which role, until when, issued by whom)
//! before it is handed out, so that `drover access revoke NAME` can name
//! its serials. Revoking marks the records (one transaction); every member
//! follows the records ([`follow`]) and puts the serials of revoked,
//! unexpired certificates into its [`drover_pki::revoke::Revocations`]:
//! its authorization refuses each request of such a certificate with its
//! reason, and its ports cut the connections such a certificate already
//! holds, so that open watches, logs and exec sessions end too. A record
//! holds no key: only the certificate's serial and who it is for.

use crate::ctx::Ctx;
use crate::error::ApiError;
use drover_pki::Role;
use drover_proto::v1::{self as pb, op};
use drover_store::{Consistency, EventType};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// The prefix of certificate records: `/drover/access/<serial>`.
pub const ACCESS_KEY: &str = "/drover/access/";

/// At most this many certificates on record, revoked or not (a record
/// goes at its certificate's expiry, [`prune`]).
pub const MAX_RECORDS: usize = 10_000;

/// One client certificate on record.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub name: String,
    /// "admin", "viewer" or "metrics".
    pub role: String,
    /// The certificate's serial, hex.
    pub serial: String,
    /// Seconds since the epoch.
    pub not_after: u64,
    pub issued_at: u64,
    /// Who asked for it.
    pub issued_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_by: Option<String>,
}

impl Record {
    pub fn expired(&self, now: u64) -> bool {
        self.not_after <= now
    }

    pub fn to_proto(&self) -> pb::AccessRecord {
        pb::AccessRecord {
            name: self.name.clone(),
            role: self.role.clone(),
            serial: self.serial.clone(),
            not_after: self.not_after,
            issued_at: self.issued_at,
            issued_by: self.issued_by.clone(),
            revoked_at: self.revoked_at.unwrap_or(0),
            revoked_by: self.revoked_by.clone().unwrap_or_default(),
        }
    }
}

pub fn key(serial: &str) -> String {
    format!("{ACCESS_KEY}{serial}")
}

pub fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn now() -> u64 {
    unix(SystemTime::now())
}

/// The role's word in records and on the wire.
pub fn role_word(r: &Role) -> &'static str {
    match r {
        Role::Admin(_) => "admin",
        Role::Viewer(_) => "viewer",
        Role::Metrics(_) => "metrics",
        Role::Node(_) => "node",
        Role::Member(_) => "member",
    }
}

fn new_request_id() -> u64 {
    rand::random::<u64>() | 1
}

async fn list_records(ctx: &Ctx, c: Consistency) -> Result<Vec<(Record, u64)>, ApiError> {
    let store = &ctx.store;
    let (kvs, _) = ctx.read(|| store.list(ACCESS_KEY, c)).await?;
    Ok(kvs
        .into_iter()
        .filter_map(|kv| {
            serde_json::from_slice::<Record>(&kv.value)
                .map_err(|e| tracing::warn!("ignoring the access record {}: {e}", kv.key))
                .ok()
                .map(|r| (r, kv.mod_revision))
        })
        .collect())
}

/// Records a certificate about to be handed out (refused when
/// [`MAX_RECORDS`] are on record: an admin prunes or revokes first).
pub async fn record_issued(ctx: &Ctx, r: &Record) -> Result<(), ApiError> {
    let records = list_records(ctx, Consistency::Local).await?;
    if records.len() >= MAX_RECORDS {
        prune(ctx).await?;
        if list_records(ctx, Consistency::Local).await?.len() >= MAX_RECORDS {
            return Err(ApiError::BadRequest(format!(
                "{MAX_RECORDS} client certificates are on record and none has expired: revoke some (drover access revoke NAME) and wait for their expiry, or issue shorter ones (--ttl)"
            )));
        }
    }
    let value = serde_json::to_vec(r)
        .map_err(|e| ApiError::Internal(format!("access record of {}: {e}", r.name)))?;
    ctx.write(
        pb::WriteRequest {
            op: Some(pb::Op {
                op: Some(op::Op::Create(pb::Create {
                    key: key(&r.serial),
                    value,
                })),
            }),
            request_id: new_request_id(),
        },
        None,
        0,
    )
    .await?;
    Ok(())
}

/// Every record, read linearizably, sorted by name then issue time.
pub async fn list(ctx: &Ctx) -> Result<Vec<Record>, ApiError> {
    let mut out: Vec<Record> = list_records(ctx, Consistency::Linearizable)
        .await?
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    out.sort_by(|a, b| (&a.name, a.issued_at).cmp(&(&b.name, b.issued_at)));
    Ok(out)
}

/// Revokes every unrevoked, unexpired certificate of `name` (or only the
/// one of `serial`) in one transaction; answers the records it revoked.
/// A serial that is not on record (a certificate issued before records
/// were kept) is recorded revoked, so that it is refused all the same.
pub async fn revoke(
    ctx: &Ctx,
    name: &str,
    serial: Option<&str>,
    by: &str,
) -> Result<Vec<Record>, ApiError> {
    let records = list_records(ctx, Consistency::Linearizable).await?;
    let t = now();
    let mut ops = Vec::new();
    let mut revoked = Vec::new();
    let mut known = false;
    if let Some(s) = serial {
        if let Some((other, _)) = records
            .iter()
            .find(|(r, _)| r.serial.eq_ignore_ascii_case(s) && r.name != name)
        {
            return Err(ApiError::BadRequest(format!(
                "serial: the certificate {s} is {}'s, not {name}'s: drover access revoke {} --serial {s}",
                other.name, other.name
            )));
        }
    }
    for (r, rev) in records {
        if r.name != name || serial.is_some_and(|s| !s.eq_ignore_ascii_case(&r.serial)) {
            continue;
        }
        known = true;
        if r.revoked_at.is_some() || r.expired(t) {
            continue;
        }
        let mut r = r;
        r.revoked_at = Some(t);
        r.revoked_by = Some(by.to_string());
        ops.push(update(&r, rev)?);
        revoked.push(r);
    }
    if let (Some(s), false) = (serial, known) {
        if s.is_empty() || s.len() > 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ApiError::BadRequest(format!(
                "serial: Invalid value: {:?}: the certificate's serial in hex (drover access list shows it)",
                s.chars().take(70).collect::<String>()
            )));
        }
        // Not on record: recorded revoked, for as long as a client
        // certificate may live.
        let r = Record {
            name: name.to_string(),
            role: String::new(),
            serial: s.to_ascii_lowercase(),
            not_after: t + 10 * 365 * 86_400,
            issued_at: 0,
            issued_by: String::new(),
            revoked_at: Some(t),
            revoked_by: Some(by.to_string()),
        };
        ops.push(update(&r, 0)?);
        revoked.push(r);
    } else if !known {
        return Err(ApiError::NotFound(format!(
            "no client certificate of {name:?} is on record (drover access list shows them); a certificate issued before records were kept is revoked by its serial: drover access revoke {name} --serial SERIAL"
        )));
    }
    if ops.is_empty() {
        return Ok(revoked);
    }
    let o = if ops.len() == 1 {
        ops.remove(0)
    } else {
        op::Op::Txn(pb::Txn {
            ops: ops.into_iter().map(|o| pb::Op { op: Some(o) }).collect(),
        })
    };
    ctx.write(
        pb::WriteRequest {
            op: Some(pb::Op { op: Some(o) }),
            request_id: new_request_id(),
        },
        None,
        0,
    )
    .await?;
    Ok(revoked)
}

fn update(r: &Record, expected_revision: u64) -> Result<op::Op, ApiError> {
    let value = serde_json::to_vec(r)
        .map_err(|e| ApiError::Internal(format!("access record of {}: {e}", r.name)))?;
    Ok(op::Op::Update(pb::Update {
        key: key(&r.serial),
        value,
        expected_revision,
        upsert: expected_revision == 0,
    }))
}

/// Deletes the records of certificates that have expired (they count for
/// nothing anyway).
pub async fn prune(ctx: &Ctx) -> Result<usize, ApiError> {
    let t = now();
    let mut n = 0;
    for (r, rev) in list_records(ctx, Consistency::Local).await? {
        if !r.expired(t) {
            continue;
        }
        let body = pb::WriteRequest {
            op: Some(pb::Op {
                op: Some(op::Op::Delete(pb::Delete {
                    key: key(&r.serial),
                    expected_revision: rev,
                })),
            }),
            request_id: new_request_id(),
        };
        if ctx.write(body, None, 0).await.is_ok() {
            n += 1;
        }
    }
    Ok(n)
}

/// The serials of revoked certificates that have not expired.
fn revoked_serials(records: &HashMap<String, Record>, now: u64) -> HashSet<String> {
    records
        .values()
        .filter(|r| r.revoked_at.is_some() && !r.expired(now))
        .map(|r| r.serial.clone())
        .collect()
}

/// Follows the records in this member's applied state and keeps its
/// revocations up to date: within a few milliseconds of a revocation's
/// apply here its certificate is refused and its connections are cut.
pub async fn follow(ctx: Arc<Ctx>, mut stop: watch::Receiver<bool>) {
    loop {
        let listed = ctx.store.list(ACCESS_KEY, Consistency::Local).await;
        let (kvs, rev) = match listed {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!("cannot read the access records yet: {e}");
                tokio::select! {
                    _ = stop.wait_for(|s| *s) => return,
                    _ = tokio::time::sleep(Duration::from_millis(200)) => continue,
                }
            }
        };
        let mut records: HashMap<String, Record> = HashMap::new();
        for kv in kvs {
            if let Ok(r) = serde_json::from_slice::<Record>(&kv.value) {
                records.insert(kv.key, r);
            }
        }
        ctx.revocations
            .set_serials(revoked_serials(&records, now()));
        let mut w = match ctx.store.watch(ACCESS_KEY, rev + 1) {
            Ok(w) => w,
            Err(e) => {
                tracing::debug!("cannot watch the access records: {e}");
                tokio::select! {
                    _ = stop.wait_for(|s| *s) => return,
                    _ = tokio::time::sleep(Duration::from_millis(200)) => continue,
                }
            }
        };
        loop {
            let batch = tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                b = w.next() => b,
            };
            let Ok(batch) = batch else {
                // Compacted past, or a snapshot: list again.
                break;
            };
            for ev in batch.events {
                let Some(kv) = ev.kv else { continue };
                if ev.r#type == EventType::Delete as i32 {
                    records.remove(&kv.key);
                } else if let Ok(r) = serde_json::from_slice::<Record>(&kv.value) {
                    records.insert(kv.key, r);
                }
            }
            ctx.revocations
                .set_serials(revoked_serials(&records, now()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(serial: &str, not_after: u64, revoked: bool) -> Record {
        Record {
            name: "alice".into(),
            role: "viewer".into(),
            serial: serial.into(),
            not_after,
            issued_at: 1,
            issued_by: "admin ops".into(),
            revoked_at: revoked.then_some(5),
            revoked_by: revoked.then(|| "admin ops".into()),
        }
    }

    #[test]
    fn only_revoked_unexpired_serials_are_refused() {
        let records: HashMap<String, Record> = [
            record("aa", 100, true),
            record("bb", 100, false),
            record("cc", 10, true),
        ]
        .into_iter()
        .map(|r| (key(&r.serial), r))
        .collect();
        let s = revoked_serials(&records, 50);
        assert_eq!(s, ["aa".to_string()].into());
    }

    #[test]
    fn a_record_round_trips_and_holds_no_key() {
        let r = record("aa", 100, true);
        let text = serde_json::to_string(&r).unwrap();
        assert!(!text.contains("PRIVATE"), "{text}");
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), r);
        let fresh = record("bb", 100, false);
        let text = serde_json::to_string(&fresh).unwrap();
        assert!(!text.contains("revoked"), "{text}");
    }
}
