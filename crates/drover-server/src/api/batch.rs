//! Many writes in few raft proposals: the controllers' creates and deletes
//! of one pass, the scheduler's bindings, and the events they and the
//! agents record.
//!
//! [`Objects::execute`] takes typed writes, each with its precondition (a
//! create needs the name free, a delete the revision it was read at),
//! checks and encodes each one, and proposes them as store transactions
//! of at most [`MAX_OPS`] ops and [`MAX_BYTES`] bytes: one raft entry for
//! a whole pass instead of one per pod. A transaction is all or nothing,
//! so when one write's precondition fails (another writer got there
//! first) the transaction is refused whole; then its writes are made one
//! by one, each with its own outcome. Every write answers its own result,
//! in the order given, as if it had been written alone.

use super::codec::{encode_for_write, key, revision_of};
use super::{prepare_new, Objects};
use crate::error::ApiError;
use drover_api::validation::validate_manifest;
use drover_api::{Kind, Manifest, ObjectMeta};
use drover_proto::v1::{self as pb, op};
use futures_util::StreamExt;

/// Ops in one transaction at most.
pub const MAX_OPS: usize = 512;
/// Bytes of values in one transaction at most (well under the proposal
/// limit, so a batch never fails for its size alone).
pub const MAX_BYTES: usize = 4 << 20;
/// Writes made at once when a batch falls back to one by one.
const ONE_BY_ONE: usize = 64;

/// One write of a batch.
#[derive(Debug, Clone)]
pub enum Write {
    /// Create the object (defaults, validation, identity, as
    /// [`Objects::create`]); refused when its name is taken.
    Create(Manifest),
    /// Delete the object `meta` describes if it is still at the version
    /// it was read at (as [`Objects::delete_read`]).
    Delete(Kind, Box<ObjectMeta>),
    /// Replace the object if it is still at the version it was read at
    /// (its `metadata.resourceVersion`, required): a controller's change
    /// of an object it read (the scheduler's binding and its
    /// `PodScheduled` condition). Checked with [`validate_manifest`], not
    /// as a user's update: the caller changes only what it owns.
    Update(Manifest),
}

/// What one write did.
#[derive(Debug, Clone)]
pub enum Written {
    /// Created, with its uid, timestamps and resourceVersion.
    Created(Manifest),
    /// Deleted at this revision.
    Deleted(u64),
    /// Replaced, with its new resourceVersion.
    Updated(Manifest),
}

impl Written {
    /// The revision the write was applied at.
    pub fn revision(&self) -> u64 {
        match self {
            Written::Created(m) | Written::Updated(m) => {
                m.metadata().resource_version.parse().unwrap_or(0)
            }
            Written::Deleted(r) => *r,
        }
    }
}

/// A write checked and encoded, ready for a transaction.
struct Ready {
    at: usize,
    op: op::Op,
    bytes: usize,
    /// The created or replaced object (its resourceVersion set once
    /// written).
    object: Option<(Manifest, bool)>,
}

impl Objects {
    /// Writes `writes` in as few transactions as their preconditions allow;
    /// answers each one's outcome, in order (see the module docs).
    pub async fn execute(&self, writes: Vec<Write>) -> Vec<Result<Written, ApiError>> {
        let mut out: Vec<Option<Result<Written, ApiError>>> = vec![None; writes.len()];
        let mut ready = Vec::with_capacity(writes.len());
        for (at, w) in writes.into_iter().enumerate() {
            match prepare(at, w) {
                Ok(r) => ready.push(r),
                Err(e) => out[at] = Some(Err(e)),
            }
        }
        for chunk in chunks(ready) {
            for (at, r) in self.propose(chunk).await {
                out[at] = Some(r);
            }
        }
        out.into_iter()
            .map(|r| {
                r.unwrap_or_else(|| Err(ApiError::Internal("a write of a batch was lost".into())))
            })
            .collect()
    }

    /// One transaction; one by one when it is refused.
    async fn propose(&self, chunk: Vec<Ready>) -> Vec<(usize, Result<Written, ApiError>)> {
        if chunk.len() == 1 {
            let mut chunk = chunk;
            let r = chunk.remove(0);
            let at = r.at;
            return vec![(at, self.single(r).await)];
        }
        let ops = chunk
            .iter()
            .map(|r| pb::Op {
                op: Some(r.op.clone()),
            })
            .collect();
        match self.write(op::Op::Txn(pb::Txn { ops })).await {
            Ok(w) => chunk
                .into_iter()
                .map(|r| (r.at, Ok(written(r, w.revision))))
                .collect(),
            Err(e) if is_precondition(&e) => {
                let singles = chunk.into_iter().map(|r| async move {
                    let at = r.at;
                    (at, self.single(r).await)
                });
                futures_util::stream::iter(singles)
                    .buffer_unordered(ONE_BY_ONE)
                    .collect()
                    .await
            }
            Err(e) => chunk.into_iter().map(|r| (r.at, Err(e.clone()))).collect(),
        }
    }

    async fn single(&self, r: Ready) -> Result<Written, ApiError> {
        let created = r
            .object
            .as_ref()
            .filter(|(_, create)| *create)
            .map(|(m, _)| (Kind::of(m), m.name().to_string()));
        let updated = r
            .object
            .as_ref()
            .filter(|(_, create)| !*create)
            .map(|(m, _)| (Kind::of(m), m.name().to_string()));
        let w = self
            .write(r.op.clone())
            .await
            .map_err(|e| match (e, &created, &updated) {
                (ApiError::AlreadyExists(_), Some((kind, name)), _) => {
                    ApiError::already_exists(*kind, name)
                }
                (ApiError::Conflict(_), _, Some((kind, name))) => ApiError::conflict(*kind, name),
                (e, _, _) => e,
            })?;
        Ok(written(r, w.revision))
    }
}

/// A refusal of one write's precondition (the others may well pass).
fn is_precondition(e: &ApiError) -> bool {
    matches!(
        e,
        ApiError::AlreadyExists(_) | ApiError::Conflict(_) | ApiError::NotFound(_)
    )
}

fn written(r: Ready, revision: u64) -> Written {
    match r.object {
        Some((mut m, create)) => {
            m.metadata_mut().resource_version = revision.to_string();
            if create {
                Written::Created(m)
            } else {
                Written::Updated(m)
            }
        }
        None => Written::Deleted(revision),
    }
}

fn prepare(at: usize, w: Write) -> Result<Ready, ApiError> {
    match w {
        Write::Create(mut m) => {
            let create = prepare_new(&mut m)?;
            Ok(Ready {
                at,
                bytes: create.value.len(),
                op: op::Op::Create(create),
                object: Some((m, true)),
            })
        }
        Write::Delete(kind, meta) => {
            let meta = *meta;
            let rev = revision_of(&meta)?;
            Ok(Ready {
                at,
                bytes: 0,
                op: op::Op::Delete(pb::Delete {
                    key: key(kind, &meta.namespace, &meta.name),
                    expected_revision: rev,
                }),
                object: None,
            })
        }
        Write::Update(mut m) => {
            validate_manifest(&m).map_err(|e| ApiError::invalid(vec![e]))?;
            let rev = revision_of(m.metadata())?;
            let value = encode_for_write(&mut m)?;
            Ok(Ready {
                at,
                bytes: value.len(),
                op: op::Op::Update(pb::Update {
                    key: key(Kind::of(&m), m.namespace(), m.name()),
                    value,
                    expected_revision: rev,
                    upsert: false,
                }),
                object: Some((m, false)),
            })
        }
    }
}

/// Splits writes into transactions of at most [`MAX_OPS`] ops and
/// [`MAX_BYTES`] bytes, each key at most once per transaction.
fn chunks(ready: Vec<Ready>) -> Vec<Vec<Ready>> {
    let mut out: Vec<Vec<Ready>> = Vec::new();
    let mut cur: Vec<Ready> = Vec::new();
    let mut bytes = 0;
    let mut keys = std::collections::HashSet::new();
    for r in ready {
        let k = match &r.op {
            op::Op::Create(c) => c.key.clone(),
            op::Op::Delete(d) => d.key.clone(),
            op::Op::Update(u) => u.key.clone(),
            _ => String::new(),
        };
        let full = cur.len() >= MAX_OPS || bytes + r.bytes > MAX_BYTES || keys.contains(&k);
        if full && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
            bytes = 0;
            keys.clear();
        }
        bytes += r.bytes;
        keys.insert(k);
        cur.push(r);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(at: usize, key: &str, bytes: usize) -> Ready {
        Ready {
            at,
            bytes,
            op: op::Op::Delete(pb::Delete {
                key: key.into(),
                expected_revision: 1,
            }),
            object: None,
        }
    }

    #[test]
    fn chunks_are_bounded_in_ops_and_bytes_and_never_hold_a_key_twice() {
        let many: Vec<Ready> = (0..MAX_OPS * 2 + 1)
            .map(|i| ready(i, &format!("/k/{i}"), 1))
            .collect();
        let c = chunks(many);
        assert_eq!(
            c.iter().map(Vec::len).collect::<Vec<_>>(),
            [MAX_OPS, MAX_OPS, 1]
        );
        let big = vec![ready(0, "/a", MAX_BYTES), ready(1, "/b", 1)];
        assert_eq!(chunks(big).len(), 2);
        let twice = vec![ready(0, "/a", 1), ready(1, "/b", 1), ready(2, "/a", 1)];
        let c = chunks(twice);
        assert_eq!(c.iter().map(Vec::len).collect::<Vec<_>>(), [2, 1]);
        // The order of the writes is kept.
        let order: Vec<usize> = c.into_iter().flatten().map(|r| r.at).collect();
        assert_eq!(order, [0, 1, 2]);
    }
}
