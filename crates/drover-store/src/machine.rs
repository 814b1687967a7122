//! The state machine: how a committed [`Proposal`] changes the objects.
//!
//! Applying is deterministic: every member applies the same entries in the
//! same order and reaches the same objects, history and dedup records. All
//! changes of one raft round go into one [`sled::Batch`] together with the
//! applied index; an overlay lets later requests of the round see the writes
//! of earlier ones before the batch is written.

use crate::error::{Error, Result};
use crate::keys::{dedup_key, hist_key, member_key, prefixed, DEDUP, HIST, KV, MEMBER};
use crate::{op, DedupRecord, Event, EventType, KeyValue, Member, Op, StoredValue, Txn};
use drover_proto::v1::{Proposal, SnapshotData};
use prost::Message as _;
use std::collections::{BTreeMap, HashMap, HashSet};

/// The answer to one write.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteResult {
    /// The raft index the write was applied at (the new resourceVersion).
    pub revision: u64,
    /// The object after the write; for a delete, as it was before. The answer
    /// to a retried write (same client request id) has no value, only the key
    /// and revisions.
    pub kv: KeyValue,
    /// True when this answers a retry from the first attempt's record.
    pub replayed: bool,
}

/// One applied request of a proposal, to be answered on its origin member.
pub(crate) struct Outcome {
    pub origin: u64,
    pub id: u64,
    pub result: Result<WriteResult>,
}

/// The changes of one revision, as watchers see them.
#[derive(Debug, Clone)]
pub(crate) struct RevisionEvents {
    pub revision: u64,
    pub events: Vec<Event>,
}

/// Validates a key before it is proposed.
pub(crate) fn check_key(key: &str) -> Result<()> {
    if key.is_empty() {
        return Err(Error::Invalid("key: must not be empty".into()));
    }
    if key.len() > 4096 {
        return Err(Error::Invalid(format!(
            "key: {} bytes is longer than the limit of 4096",
            key.len()
        )));
    }
    Ok(())
}

/// The key an op writes; a transaction has none of its own (empty).
pub(crate) fn op_key(op: &Op) -> Result<&str> {
    match &op.op {
        Some(op::Op::Create(c)) => Ok(&c.key),
        Some(op::Op::Update(u)) => Ok(&u.key),
        Some(op::Op::Delete(d)) => Ok(&d.key),
        Some(op::Op::Txn(_)) => Ok(""),
        None => Err(Error::Invalid(
            "op: one of create, update, delete or txn is required".into(),
        )),
    }
}

/// Validates an op before it is proposed: its key, or for a transaction
/// every op's (at least one op, no nested transaction, no key twice).
pub(crate) fn check_op(op: &Op) -> Result<()> {
    match &op.op {
        Some(op::Op::Txn(t)) => check_txn(t),
        _ => check_key(op_key(op)?),
    }
}

fn check_txn(t: &Txn) -> Result<()> {
    if t.ops.is_empty() {
        return Err(Error::Invalid(
            "txn.ops: a transaction needs at least one op".into(),
        ));
    }
    let mut seen = HashSet::with_capacity(t.ops.len());
    for (i, o) in t.ops.iter().enumerate() {
        if matches!(o.op, Some(op::Op::Txn(_))) {
            return Err(Error::Invalid(format!(
                "txn.ops[{i}]: a transaction cannot hold another; list its ops instead"
            )));
        }
        let key = op_key(o).map_err(|e| Error::Invalid(format!("txn.ops[{i}]: {e}")))?;
        check_key(key).map_err(|e| Error::Invalid(format!("txn.ops[{i}].{e}")))?;
        if !seen.insert(key) {
            return Err(Error::Invalid(format!(
                "txn.ops[{i}].key: {key:?} is written twice in one transaction; write it once"
            )));
        }
    }
    Ok(())
}

/// Collects the writes of one raft round.
pub(crate) struct Applier<'a> {
    tree: &'a sled::Tree,
    pub batch: sled::Batch,
    overlay: HashMap<Vec<u8>, Option<Vec<u8>>>,
    pub events: Vec<RevisionEvents>,
}

impl<'a> Applier<'a> {
    pub fn new(tree: &'a sled::Tree) -> Self {
        Applier {
            tree,
            batch: sled::Batch::default(),
            overlay: HashMap::new(),
            events: Vec::new(),
        }
    }

    fn get(&self, k: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.overlay.get(k) {
            return Ok(v.clone());
        }
        Ok(self.tree.get(k)?.map(|v| v.to_vec()))
    }

    fn put(&mut self, k: Vec<u8>, v: Vec<u8>) {
        self.batch.insert(k.as_slice(), v.as_slice());
        self.overlay.insert(k, Some(v));
    }

    fn del(&mut self, k: Vec<u8>) {
        self.batch.remove(k.as_slice());
        self.overlay.insert(k, None);
    }

    fn get_object(&self, key: &str) -> Result<Option<StoredValue>> {
        match self.get(&prefixed(KV, key.as_bytes()))? {
            Some(v) => Ok(Some(StoredValue::decode(v.as_slice())?)),
            None => Ok(None),
        }
    }

    pub fn put_member(&mut self, m: &Member) {
        self.put(member_key(m.id), m.encode_to_vec());
    }

    /// Applies the requests of one committed entry at revision `rev`.
    pub fn apply_proposal(&mut self, rev: u64, p: Proposal) -> Result<Vec<Outcome>> {
        let mut out = Vec::with_capacity(p.requests.len());
        let time_ms = p.time_ms;
        let mut events = Vec::new();
        for req in p.requests {
            let result = if req.client_request_id != 0 {
                match self.get(&dedup_key(req.client_request_id))? {
                    Some(v) => replay(DedupRecord::decode(v.as_slice())?),
                    None => {
                        let r = self.apply_op(rev, req.op.as_ref(), &mut events)?;
                        let key = req.op.as_ref().and_then(|o| op_key(o).ok()).unwrap_or("");
                        self.put(
                            dedup_key(req.client_request_id),
                            record(req.client_request_id, rev, time_ms, key, &r).encode_to_vec(),
                        );
                        r
                    }
                }
            } else {
                self.apply_op(rev, req.op.as_ref(), &mut events)?
            };
            out.push(Outcome {
                origin: req.origin,
                id: req.id,
                result,
            });
        }
        for (seq, e) in events.iter().enumerate() {
            self.put(hist_key(rev, seq as u32), e.encode_to_vec());
        }
        if !events.is_empty() {
            self.events.push(RevisionEvents {
                revision: rev,
                events,
            });
        }
        Ok(out)
    }

    /// Applies one op. The outer `Result` is a storage failure (fatal); the
    /// inner one the answer to the caller.
    fn apply_op(
        &mut self,
        rev: u64,
        op: Option<&Op>,
        events: &mut Vec<Event>,
    ) -> Result<Result<WriteResult>> {
        let Some(op) = op.and_then(|o| o.op.as_ref()) else {
            return Ok(Err(Error::Invalid(
                "op: one of create, update, delete or txn is required".into(),
            )));
        };
        let key = match op {
            op::Op::Create(c) => &c.key,
            op::Op::Update(u) => &u.key,
            op::Op::Delete(d) => &d.key,
            op::Op::Txn(t) => return self.apply_txn(rev, t, events),
        };
        if let Err(e) = check_key(key) {
            return Ok(Err(e));
        }
        let cur = self.get_object(key)?;
        let kv = |s: &StoredValue| KeyValue {
            key: key.clone(),
            value: s.value.clone(),
            create_revision: s.create_revision,
            mod_revision: s.mod_revision,
        };
        let (new, ev) = match (op, cur) {
            (op::Op::Create(_), Some(_)) => {
                return Ok(Err(Error::AlreadyExists { key: key.clone() }))
            }
            (op::Op::Create(c), None) => (
                Some(StoredValue {
                    value: c.value.clone(),
                    create_revision: rev,
                    mod_revision: rev,
                }),
                EventType::Put,
            ),
            (op::Op::Update(u), None) => {
                if u.upsert && u.expected_revision == 0 {
                    (
                        Some(StoredValue {
                            value: u.value.clone(),
                            create_revision: rev,
                            mod_revision: rev,
                        }),
                        EventType::Put,
                    )
                } else {
                    return Ok(Err(Error::NotFound { key: key.clone() }));
                }
            }
            (op::Op::Update(u), Some(cur)) => {
                if u.expected_revision != 0 && u.expected_revision != cur.mod_revision {
                    return Ok(Err(Error::Conflict {
                        key: key.clone(),
                        expected: u.expected_revision,
                        actual: cur.mod_revision,
                    }));
                }
                (
                    Some(StoredValue {
                        value: u.value.clone(),
                        create_revision: cur.create_revision,
                        mod_revision: rev,
                    }),
                    EventType::Put,
                )
            }
            (op::Op::Txn(_), _) => {
                return Ok(Err(Error::Invalid(
                    "txn: a transaction cannot hold another".into(),
                )))
            }
            (op::Op::Delete(_), None) => return Ok(Err(Error::NotFound { key: key.clone() })),
            (op::Op::Delete(d), Some(cur)) => {
                if d.expected_revision != 0 && d.expected_revision != cur.mod_revision {
                    return Ok(Err(Error::Conflict {
                        key: key.clone(),
                        expected: d.expected_revision,
                        actual: cur.mod_revision,
                    }));
                }
                let mut prev = kv(&cur);
                self.del(prefixed(KV, key.as_bytes()));
                prev.mod_revision = rev;
                events.push(Event {
                    r#type: EventType::Delete as i32,
                    kv: Some(prev.clone()),
                });
                let mut answer = kv(&cur);
                answer.mod_revision = cur.mod_revision;
                return Ok(Ok(WriteResult {
                    revision: rev,
                    kv: answer,
                    replayed: false,
                }));
            }
        };
        let new = new.expect("every remaining arm writes");
        self.put(prefixed(KV, key.as_bytes()), new.encode_to_vec());
        let kv = kv(&new);
        events.push(Event {
            r#type: ev as i32,
            kv: Some(kv.clone()),
        });
        Ok(Ok(WriteResult {
            revision: rev,
            kv,
            replayed: false,
        }))
    }

    /// Applies a transaction: every op's guard is checked against the state
    /// before it (the ops touch distinct keys, so none sees another's
    /// write); the first that fails is the answer and nothing is written.
    /// Otherwise every op is applied at `rev`. The answer's kv has no key
    /// (the transaction's objects are its ops' keys, all at `rev`).
    fn apply_txn(
        &mut self,
        rev: u64,
        t: &Txn,
        events: &mut Vec<Event>,
    ) -> Result<Result<WriteResult>> {
        if let Err(e) = check_txn(t) {
            return Ok(Err(e));
        }
        for o in &t.ops {
            if let Err(e) = self.guard(o)? {
                return Ok(Err(e));
            }
        }
        for o in &t.ops {
            if let Err(e) = self.apply_op(rev, Some(o), events)? {
                // The guards held, so this cannot happen; refuse to leave
                // half a transaction either way.
                return Err(Error::Storage(format!(
                    "a transaction's op failed after its guard passed: {e}"
                )));
            }
        }
        Ok(Ok(WriteResult {
            revision: rev,
            kv: KeyValue::default(),
            replayed: false,
        }))
    }

    /// Whether `o` (a create, update or delete) would succeed now: the same
    /// checks as [`Applier::apply_op`], without writing.
    fn guard(&self, o: &Op) -> Result<Result<()>> {
        let (key, expected, create, upsert) = match &o.op {
            Some(op::Op::Create(c)) => (&c.key, 0, true, false),
            Some(op::Op::Update(u)) => (&u.key, u.expected_revision, false, u.upsert),
            Some(op::Op::Delete(d)) => (&d.key, d.expected_revision, false, false),
            _ => {
                return Ok(Err(Error::Invalid(
                    "txn.ops: each op is a create, an update or a delete".into(),
                )))
            }
        };
        let cur = self.get_object(key)?;
        Ok(match cur {
            Some(_) if create => Err(Error::AlreadyExists { key: key.clone() }),
            Some(cur) if expected != 0 && expected != cur.mod_revision => Err(Error::Conflict {
                key: key.clone(),
                expected,
                actual: cur.mod_revision,
            }),
            Some(_) => Ok(()),
            None if create || (upsert && expected == 0) => Ok(()),
            None => Err(Error::NotFound { key: key.clone() }),
        })
    }
}

fn record(id: u64, rev: u64, time_ms: u64, key: &str, r: &Result<WriteResult>) -> DedupRecord {
    let mut d = DedupRecord {
        client_request_id: id,
        revision: rev,
        time_ms,
        ..Default::default()
    };
    match r {
        Ok(w) => {
            d.revision = w.revision;
            d.kv = Some(KeyValue {
                value: Vec::new(),
                ..w.kv.clone()
            });
        }
        Err(e) => {
            d.error = e.to_string();
            d.code = e.code();
            d.kv = Some(KeyValue {
                key: key.to_string(),
                ..Default::default()
            });
            if let Error::Conflict {
                expected, actual, ..
            } = e
            {
                d.expected = *expected;
                d.actual = *actual;
            }
        }
    }
    d
}

/// The first outcome of a retried write (the object's value is not kept).
fn replay(r: DedupRecord) -> Result<WriteResult> {
    let kv = r.kv.unwrap_or_default();
    match r.code {
        0 => Ok(WriteResult {
            revision: r.revision,
            kv,
            replayed: true,
        }),
        1 => Err(Error::AlreadyExists { key: kv.key }),
        2 => Err(Error::NotFound { key: kv.key }),
        3 => Err(Error::Conflict {
            key: kv.key,
            expected: r.expected,
            actual: r.actual,
        }),
        _ => Err(Error::Invalid(r.error)),
    }
}

fn decode_all<T: prost::Message + Default>(
    tree: &sled::Tree,
    tag: u8,
) -> Result<Vec<(Vec<u8>, T)>> {
    let mut out = Vec::new();
    for item in tree.scan_prefix([tag]) {
        let (k, v) = item?;
        out.push((k[1..].to_vec(), T::decode(v.as_ref())?));
    }
    Ok(out)
}

/// Every member known to the state machine.
pub(crate) fn members(tree: &sled::Tree) -> Result<Vec<Member>> {
    Ok(decode_all::<Member>(tree, MEMBER)?
        .into_iter()
        .map(|(_, m)| m)
        .collect())
}

/// Encodes the whole state machine.
pub(crate) fn snapshot_data(tree: &sled::Tree) -> Result<Vec<u8>> {
    let kvs = decode_all::<StoredValue>(tree, KV)?
        .into_iter()
        .map(|(k, s)| KeyValue {
            key: String::from_utf8_lossy(&k).into_owned(),
            value: s.value,
            create_revision: s.create_revision,
            mod_revision: s.mod_revision,
        })
        .collect();
    let data = SnapshotData {
        kvs,
        members: members(tree)?,
        dedup: decode_all::<DedupRecord>(tree, DEDUP)?
            .into_iter()
            .map(|(_, d)| d)
            .collect(),
    };
    Ok(data.encode_to_vec())
}

pub(crate) fn decode_snapshot(data: &[u8]) -> Result<SnapshotData> {
    Ok(SnapshotData::decode(data)?)
}

pub(crate) fn write_snapshot_data(batch: &mut sled::Batch, data: &SnapshotData) {
    for kv in &data.kvs {
        let v = StoredValue {
            value: kv.value.clone(),
            create_revision: kv.create_revision,
            mod_revision: kv.mod_revision,
        };
        batch.insert(prefixed(KV, kv.key.as_bytes()), v.encode_to_vec());
    }
    for m in &data.members {
        batch.insert(member_key(m.id), m.encode_to_vec());
    }
    for d in &data.dedup {
        batch.insert(dedup_key(d.client_request_id), d.encode_to_vec());
    }
}

/// How long a write's outcome is remembered for retries, by proposal time.
pub(crate) const DEDUP_TTL_MS: u64 = 120_000;

/// Drops history at or below `upto` and dedup records older than
/// [`DEDUP_TTL_MS`] before `now_ms` (the last applied proposal's time).
pub(crate) fn prune(
    tree: &sled::Tree,
    batch: &mut sled::Batch,
    upto: u64,
    now_ms: u64,
) -> Result<()> {
    for k in tree.range(hist_key(0, 0)..hist_key(upto + 1, 0)).keys() {
        batch.remove(k?);
    }
    for item in tree.scan_prefix([DEDUP]) {
        let (k, v) = item?;
        if DedupRecord::decode(v.as_ref())?.time_ms + DEDUP_TTL_MS < now_ms {
            batch.remove(k);
        }
    }
    Ok(())
}

/// The history after `after` up to and including `until`, grouped by
/// revision, filtered by key prefix.
pub(crate) fn read_history(
    tree: &sled::Tree,
    after: u64,
    until: u64,
    prefix: &str,
) -> Result<Vec<RevisionEvents>> {
    let mut out: Vec<RevisionEvents> = Vec::new();
    if until <= after {
        return Ok(out);
    }
    let end = match until.checked_add(1) {
        Some(next) => hist_key(next, 0),
        None => prefixed(HIST + 1, &[]),
    };
    for item in tree.range(hist_key(after + 1, 0)..end) {
        let (k, v) = item?;
        let rev = u64::from_be_bytes(
            k.get(1..9)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| Error::Storage("corrupt history key".into()))?,
        );
        let ev = Event::decode(v.as_ref())?;
        if !ev.kv.as_ref().is_some_and(|kv| kv.key.starts_with(prefix)) {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.revision == rev => last.events.push(ev),
            _ => out.push(RevisionEvents {
                revision: rev,
                events: vec![ev],
            }),
        }
    }
    Ok(out)
}

/// Reads one object.
pub(crate) fn get(tree: &sled::Tree, key: &str) -> Result<Option<KeyValue>> {
    Ok(match tree.get(prefixed(KV, key.as_bytes()))? {
        Some(v) => {
            let s = StoredValue::decode(v.as_ref())?;
            Some(KeyValue {
                key: key.to_string(),
                value: s.value,
                create_revision: s.create_revision,
                mod_revision: s.mod_revision,
            })
        }
        None => None,
    })
}

/// Reads every object whose key starts with `prefix`, in key order.
#[cfg(test)]
pub(crate) fn list(tree: &sled::Tree, prefix: &str) -> Result<Vec<KeyValue>> {
    scan(tree, prefix, |_| {})
}

/// Reads every object whose key starts with `prefix`, in key order, calling
/// `scanned(n)` after the n-th one (a seam for tests). Each object is read
/// whole, but a scan that runs while rounds are applied is no picture of one
/// revision: see [`roll_forward`].
pub(crate) fn scan(
    tree: &sled::Tree,
    prefix: &str,
    mut scanned: impl FnMut(usize),
) -> Result<Vec<KeyValue>> {
    let mut out = Vec::new();
    for item in tree.scan_prefix(prefixed(KV, prefix.as_bytes())) {
        let (k, v) = item?;
        let s = StoredValue::decode(v.as_ref())?;
        out.push(KeyValue {
            key: String::from_utf8_lossy(&k[1..]).into_owned(),
            value: s.value,
            create_revision: s.create_revision,
            mod_revision: s.mod_revision,
        });
        scanned(out.len() - 1);
    }
    Ok(out)
}

/// Brings a scan that started after revision `from` was applied and ended
/// before revision `to` was, up to exactly revision `to`, given the history
/// `(from, to]` of the same prefix.
///
/// A key that no round in `(from, to]` touched had one value (or absence)
/// during the whole scan, so the scan read it right. Every key that a round
/// touched has an event in that history, and its last event is its state at
/// `to`: a put carries the whole object, a delete means absent. So the
/// result is the state at `to`, whatever rounds the scan overlapped.
pub(crate) fn roll_forward(scanned: Vec<KeyValue>, history: Vec<RevisionEvents>) -> Vec<KeyValue> {
    let mut last: BTreeMap<String, Option<KeyValue>> = BTreeMap::new();
    for ev in history.into_iter().flat_map(|r| r.events) {
        let deleted = ev.r#type == EventType::Delete as i32;
        if let Some(kv) = ev.kv {
            last.insert(kv.key.clone(), (!deleted).then_some(kv));
        }
    }
    if last.is_empty() {
        return scanned;
    }
    // Both are in key order (sled orders the bytes, `String` too): merge.
    let mut out = Vec::with_capacity(scanned.len() + last.len());
    let mut changed = last.into_iter().peekable();
    for kv in scanned {
        while let Some((_, now)) = changed.next_if(|(k, _)| *k < kv.key) {
            out.extend(now);
        }
        match changed.next_if(|(k, _)| *k == kv.key) {
            Some((_, now)) => out.extend(now),
            None => out.push(kv),
        }
    }
    out.extend(changed.filter_map(|(_, now)| now));
    out
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
