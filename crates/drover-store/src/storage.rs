//! The sled-backed raft log and the persistent parts of raft's state.
//!
//! [`SledStorage`] implements raft-rs's read-only [`Storage`] trait over the
//! `l` (log) and `m/` (meta) keys of the store's tree, and offers the write
//! side (append with truncation of a conflicting suffix, hard state, snapshot
//! install, compaction) as operations on a [`sled::Batch`] that the raft
//! thread applies atomically, then flushes, once per round.
//!
//! The indexes raft asks for all the time (first, last, hard state, conf
//! state, applied) are cached in memory; the cache is updated together with
//! the batch that changes them.

use crate::error::{Error, Result};
use crate::keys::{log_key, APPLIED, COMPACT, CS, DEDUP, HIST, HS, KV, LOG, MEMBER, REMOVED};
use crate::machine;
use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, Storage, StorageError};
use std::sync::{Arc, RwLock};

fn pair(a: u64, b: u64) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..8].copy_from_slice(&a.to_be_bytes());
    v[8..].copy_from_slice(&b.to_be_bytes());
    v
}

fn unpair(v: &[u8]) -> Result<(u64, u64)> {
    if v.len() != 16 {
        return Err(Error::Storage(format!(
            "corrupt index record of {} bytes",
            v.len()
        )));
    }
    let a = u64::from_be_bytes(v[..8].try_into().expect("8 bytes"));
    let b = u64::from_be_bytes(v[8..].try_into().expect("8 bytes"));
    Ok((a, b))
}

/// What raft and the state machine ask for on every round, kept in memory.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cache {
    pub hs: HardState,
    pub cs: ConfState,
    /// Index and term of the last entry removed from the log (or of the
    /// snapshot the log starts after).
    pub compact_index: u64,
    pub compact_term: u64,
    /// Index of the last entry in the log (`compact_index` when it is empty).
    pub last_index: u64,
    pub applied_index: u64,
    pub applied_term: u64,
    pub removed: bool,
}

/// raft-rs storage over one sled tree. Cheap to clone; every clone shares the
/// same cache.
#[derive(Clone)]
pub(crate) struct SledStorage {
    pub tree: sled::Tree,
    cache: Arc<RwLock<Cache>>,
}

impl SledStorage {
    /// Opens the storage kept in `tree`, loading the cached indexes.
    pub fn open(tree: sled::Tree) -> Result<Self> {
        let mut c = Cache::default();
        if let Some(v) = tree.get(HS)? {
            c.hs = HardState::parse_from_bytes(&v)?;
        }
        if let Some(v) = tree.get(CS)? {
            c.cs = ConfState::parse_from_bytes(&v)?;
        }
        if let Some(v) = tree.get(COMPACT)? {
            (c.compact_index, c.compact_term) = unpair(&v)?;
        }
        if let Some(v) = tree.get(APPLIED)? {
            (c.applied_index, c.applied_term) = unpair(&v)?;
        }
        c.removed = tree.get(REMOVED)?.is_some();
        c.last_index = c.compact_index;
        if let Some((k, _)) = tree.scan_prefix([LOG]).next_back().transpose()? {
            let idx = u64::from_be_bytes(
                k[1..]
                    .try_into()
                    .map_err(|_| Error::Storage("corrupt log key".into()))?,
            );
            c.last_index = c.last_index.max(idx);
        }
        Ok(SledStorage {
            tree,
            cache: Arc::new(RwLock::new(c)),
        })
    }

    pub fn cache(&self) -> std::sync::RwLockReadGuard<'_, Cache> {
        self.cache.read().unwrap_or_else(|e| e.into_inner())
    }

    fn cache_mut(&self) -> std::sync::RwLockWriteGuard<'_, Cache> {
        self.cache.write().unwrap_or_else(|e| e.into_inner())
    }

    /// True once this member holds any raft state (bootstrapped, joined, or
    /// restarted from its data dir).
    pub fn is_initialized(&self) -> bool {
        let c = self.cache();
        c.last_index > 0 || !c.cs.voters.is_empty() || !c.cs.learners.is_empty()
    }

    /// Appends entries, removing any conflicting suffix already in the log.
    pub fn append(&self, batch: &mut sled::Batch, ents: &[Entry]) -> Result<()> {
        let Some(first) = ents.first() else {
            return Ok(());
        };
        let mut c = self.cache_mut();
        if first.index <= c.compact_index {
            return Err(Error::Storage(format!(
                "raft asked to overwrite compacted entry {} (log starts after {})",
                first.index, c.compact_index
            )));
        }
        if first.index > c.last_index + 1 {
            return Err(Error::Storage(format!(
                "raft asked to append entry {} after {}: the log would have a gap",
                first.index, c.last_index
            )));
        }
        let new_last = first.index + ents.len() as u64 - 1;
        for idx in new_last + 1..=c.last_index {
            batch.remove(&log_key(idx));
        }
        for e in ents {
            batch.insert(&log_key(e.index), e.write_to_bytes()?);
        }
        c.last_index = new_last;
        Ok(())
    }

    pub fn set_hard_state(&self, batch: &mut sled::Batch, hs: &HardState) -> Result<()> {
        batch.insert(HS, hs.write_to_bytes()?);
        self.cache_mut().hs = hs.clone();
        Ok(())
    }

    pub fn set_commit(&self, batch: &mut sled::Batch, commit: u64) -> Result<()> {
        let mut hs = self.cache().hs.clone();
        if commit > hs.commit {
            hs.commit = commit;
            self.set_hard_state(batch, &hs)?;
        }
        Ok(())
    }

    pub fn set_conf_state(&self, batch: &mut sled::Batch, cs: &ConfState) -> Result<()> {
        batch.insert(CS, cs.write_to_bytes()?);
        self.cache_mut().cs = cs.clone();
        Ok(())
    }

    /// Records that the state machine has applied `index` (same batch as the
    /// state it changed, so the two never disagree after a crash).
    pub fn set_applied(&self, batch: &mut sled::Batch, index: u64, term: u64) -> Result<()> {
        batch.insert(APPLIED, &pair(index, term));
        {
            let mut c = self.cache_mut();
            c.applied_index = index;
            c.applied_term = term;
        }
        // raft-rs refuses to restart with applied > commit.
        self.set_commit(batch, index)
    }

    pub fn set_removed(&self, batch: &mut sled::Batch) {
        batch.insert(REMOVED, &[1u8]);
        self.cache_mut().removed = true;
    }

    /// Installs a snapshot: the log, the state machine and the history are
    /// replaced by the snapshot's content.
    pub fn apply_snapshot(&self, batch: &mut sled::Batch, snap: &Snapshot) -> Result<()> {
        let meta = snap.get_metadata();
        let data = machine::decode_snapshot(snap.get_data())?;
        // Drop everything the snapshot replaces.
        for tag in [LOG, KV, HIST, MEMBER, DEDUP] {
            for k in self.tree.scan_prefix([tag]).keys() {
                batch.remove(k?);
            }
        }
        machine::write_snapshot_data(batch, &data);
        batch.insert(COMPACT, &pair(meta.index, meta.term));
        {
            let mut c = self.cache_mut();
            c.compact_index = meta.index;
            c.compact_term = meta.term;
            c.last_index = meta.index;
        }
        self.set_conf_state(batch, meta.get_conf_state())?;
        let mut hs = self.cache().hs.clone();
        hs.term = hs.term.max(meta.term);
        hs.commit = hs.commit.max(meta.index);
        self.set_hard_state(batch, &hs)?;
        self.set_applied(batch, meta.index, meta.term)?;
        Ok(())
    }

    /// Removes log entries up to and including `to`, which must be applied.
    /// Returns false when there was nothing to do.
    pub fn compact(&self, batch: &mut sled::Batch, to: u64) -> Result<bool> {
        let (from, applied) = {
            let c = self.cache();
            (c.compact_index + 1, c.applied_index)
        };
        if to < from || to > applied {
            return Ok(false);
        }
        let term = self.term(to).map_err(Error::from)?;
        for idx in from..=to {
            batch.remove(&log_key(idx));
        }
        batch.insert(COMPACT, &pair(to, term));
        let mut c = self.cache_mut();
        c.compact_index = to;
        c.compact_term = term;
        Ok(true)
    }

    fn read_entry(&self, idx: u64) -> raft::Result<Entry> {
        match self.tree.get(log_key(idx)) {
            Ok(Some(v)) => Entry::parse_from_bytes(&v).map_err(raft::Error::CodecError),
            Ok(None) => Err(raft::Error::Store(StorageError::Unavailable)),
            Err(e) => Err(raft::Error::Store(StorageError::Other(Box::new(e)))),
        }
    }

    /// The snapshot of the state machine at its applied index.
    pub fn build_snapshot(&self) -> Result<Snapshot> {
        let (index, term, cs) = {
            let c = self.cache();
            (c.applied_index, c.applied_term, c.cs.clone())
        };
        let data = machine::snapshot_data(&self.tree)?;
        let mut snap = Snapshot::default();
        snap.set_data(data.into());
        let mut meta = SnapshotMetadata {
            index,
            term,
            ..Default::default()
        };
        meta.set_conf_state(cs);
        snap.set_metadata(meta);
        Ok(snap)
    }
}

impl Storage for SledStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let c = self.cache();
        Ok(RaftState::new(c.hs.clone(), c.cs.clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let max_size = max_size.into().unwrap_or(u64::MAX);
        {
            let c = self.cache();
            if low <= c.compact_index {
                return Err(raft::Error::Store(StorageError::Compacted));
            }
            if high > c.last_index + 1 {
                return Err(raft::Error::Store(StorageError::Unavailable));
            }
        }
        let mut out = Vec::with_capacity((high - low).min(1024) as usize);
        let mut size = 0u64;
        for item in self.tree.range(log_key(low)..log_key(high)) {
            let (_, v) = item.map_err(|e| raft::Error::Store(StorageError::Other(Box::new(e))))?;
            let e = Entry::parse_from_bytes(&v).map_err(raft::Error::CodecError)?;
            if e.index != low + out.len() as u64 {
                return Err(raft::Error::Store(StorageError::Unavailable));
            }
            size += e.compute_size() as u64;
            if !out.is_empty() && size > max_size {
                break;
            }
            out.push(e);
        }
        if out.is_empty() && low < high {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        {
            let c = self.cache();
            if idx == c.compact_index {
                return Ok(c.compact_term);
            }
            if idx < c.compact_index {
                return Err(raft::Error::Store(StorageError::Compacted));
            }
            if idx > c.last_index {
                return Err(raft::Error::Store(StorageError::Unavailable));
            }
        }
        Ok(self.read_entry(idx)?.term)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.cache().compact_index + 1)
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.cache().last_index)
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let snap = self
            .build_snapshot()
            .map_err(|e| raft::Error::Store(StorageError::Other(Box::new(e))))?;
        if snap.get_metadata().index < request_index {
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        Ok(snap)
    }
}

/// Opens the sled database in `dir`, waiting up to `patience` while
/// another handle on the same directory is still letting go of its lock
/// (sled's flusher thread releases it shortly after the last handle is
/// dropped: a store reopened at once, in the same process or just after the
/// old process exited, would fail otherwise).
///
/// sled reports a held lock only in an error's text, so whether the lock is
/// held is asked of the file itself ([`held_by_another`]), never read from
/// the message.
pub fn open_sled(
    config: &sled::Config,
    dir: &std::path::Path,
    patience: std::time::Duration,
) -> sled::Result<sled::Db> {
    let deadline = std::time::Instant::now() + patience;
    loop {
        match config.open() {
            Err(sled::Error::Io(e))
                if e.kind() == std::io::ErrorKind::WouldBlock || held_by_another(dir) =>
            {
                if std::time::Instant::now() >= deadline {
                    return Err(sled::Error::Io(e));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return r,
        }
    }
}

/// Whether another handle (this process's or another's) holds the
/// exclusive lock sled takes on `dir/db` (`flock`, as std's file locks).
fn held_by_another(dir: &std::path::Path) -> bool {
    match std::fs::File::options()
        .read(true)
        .write(true)
        .open(dir.join("db"))
    {
        // Dropping the file releases the probe's own lock at once.
        Ok(f) => matches!(f.try_lock(), Err(std::fs::TryLockError::WouldBlock)),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_seen_on_the_file_not_in_a_message() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!held_by_another(dir.path()), "no database yet");
        let db = open_sled(
            &sled::Config::new().path(dir.path()),
            dir.path(),
            std::time::Duration::from_secs(5),
        )
        .unwrap();
        assert!(held_by_another(dir.path()));
        drop(db);
        // sled's flusher lets go of the lock shortly after the last handle.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while held_by_another(dir.path()) {
            assert!(
                std::time::Instant::now() < deadline,
                "the lock was never released"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    use crate::keys::prefixed;

    fn entry(index: u64, term: u64) -> Entry {
        Entry {
            index,
            term,
            data: format!("e{index}").into_bytes().into(),
            ..Default::default()
        }
    }

    fn open() -> (tempfile::TempDir, SledStorage) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::open(dir.path()).expect("sled");
        let s = SledStorage::open(db.open_tree("t").expect("tree")).expect("open");
        (dir, s)
    }

    fn write(s: &SledStorage, f: impl FnOnce(&mut sled::Batch)) {
        let mut b = sled::Batch::default();
        f(&mut b);
        s.tree.apply_batch(b).expect("apply");
    }

    fn ctx() -> GetEntriesContext {
        GetEntriesContext::empty(false)
    }

    #[test]
    fn append_then_read_back() {
        let (_d, s) = open();
        write(&s, |b| {
            s.append(b, &(1..=5).map(|i| entry(i, 1)).collect::<Vec<_>>())
                .expect("append")
        });
        assert_eq!(s.first_index().unwrap(), 1);
        assert_eq!(s.last_index().unwrap(), 5);
        let got = s.entries(2, 5, None, ctx()).unwrap();
        assert_eq!(
            got.iter().map(|e| e.index).collect::<Vec<_>>(),
            vec![2, 3, 4]
        );
        assert_eq!(s.term(5).unwrap(), 1);
        assert!(matches!(
            s.term(6),
            Err(raft::Error::Store(StorageError::Unavailable))
        ));
    }

    #[test]
    fn append_truncates_conflicting_suffix() {
        let (_d, s) = open();
        write(&s, |b| {
            s.append(b, &(1..=5).map(|i| entry(i, 1)).collect::<Vec<_>>())
                .unwrap()
        });
        // A new leader overwrites from index 3 with a shorter log of term 2.
        write(&s, |b| s.append(b, &[entry(3, 2)]).unwrap());
        assert_eq!(s.last_index().unwrap(), 3);
        assert_eq!(s.term(3).unwrap(), 2);
        assert_eq!(s.term(2).unwrap(), 1);
        assert!(s.tree.get(log_key(4)).unwrap().is_none());
        assert!(s.tree.get(log_key(5)).unwrap().is_none());
        assert_eq!(s.entries(1, 4, None, ctx()).unwrap().len(), 3);
    }

    #[test]
    fn append_refuses_gaps_and_compacted_overwrites() {
        let (_d, s) = open();
        let mut b = sled::Batch::default();
        assert!(s.append(&mut b, &[entry(3, 1)]).is_err());
        write(&s, |b| {
            s.append(b, &(1..=4).map(|i| entry(i, 1)).collect::<Vec<_>>())
                .unwrap();
            s.set_applied(b, 4, 1).unwrap();
        });
        write(&s, |b| assert!(s.compact(b, 2).unwrap()));
        let mut b = sled::Batch::default();
        assert!(s.append(&mut b, &[entry(2, 2)]).is_err());
    }

    #[test]
    fn max_size_limits_but_returns_at_least_one() {
        let (_d, s) = open();
        write(&s, |b| {
            s.append(b, &(1..=10).map(|i| entry(i, 1)).collect::<Vec<_>>())
                .unwrap()
        });
        assert_eq!(s.entries(1, 11, 0, ctx()).unwrap().len(), 1);
        let one = entry(1, 1).compute_size() as u64;
        assert_eq!(s.entries(1, 11, one * 3, ctx()).unwrap().len(), 3);
    }

    #[test]
    fn compaction_keeps_the_term_of_the_compacted_index() {
        let (_d, s) = open();
        write(&s, |b| {
            s.append(
                b,
                &(1..=10)
                    .map(|i| entry(i, if i < 6 { 1 } else { 2 }))
                    .collect::<Vec<_>>(),
            )
            .unwrap();
            s.set_applied(b, 8, 2).unwrap();
        });
        // Not beyond applied.
        write(&s, |b| assert!(!s.compact(b, 9).unwrap()));
        write(&s, |b| assert!(s.compact(b, 6).unwrap()));
        assert_eq!(s.first_index().unwrap(), 7);
        assert_eq!(s.last_index().unwrap(), 10);
        assert_eq!(s.term(6).unwrap(), 2);
        assert!(matches!(
            s.term(5),
            Err(raft::Error::Store(StorageError::Compacted))
        ));
        assert!(matches!(
            s.entries(5, 8, None, ctx()),
            Err(raft::Error::Store(StorageError::Compacted))
        ));
        assert_eq!(s.entries(7, 11, None, ctx()).unwrap().len(), 4);
        assert!(s.tree.get(log_key(6)).unwrap().is_none());
    }

    #[test]
    fn state_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = sled::open(dir.path()).unwrap();
            let s = SledStorage::open(db.open_tree("t").unwrap()).unwrap();
            write(&s, |b| {
                s.append(b, &(1..=6).map(|i| entry(i, 3)).collect::<Vec<_>>())
                    .unwrap();
                let hs = HardState {
                    term: 3,
                    vote: 7,
                    commit: 4,
                    ..Default::default()
                };
                s.set_hard_state(b, &hs).unwrap();
                let cs = ConfState {
                    voters: vec![7, 8, 9],
                    ..Default::default()
                };
                s.set_conf_state(b, &cs).unwrap();
                s.set_applied(b, 4, 3).unwrap();
            });
            write(&s, |b| assert!(s.compact(b, 2).unwrap()));
            db.flush().unwrap();
        }
        let db = open_sled(
            &sled::Config::new().path(dir.path()),
            dir.path(),
            std::time::Duration::from_secs(10),
        )
        .unwrap();
        let s = SledStorage::open(db.open_tree("t").unwrap()).unwrap();
        let st = s.initial_state().unwrap();
        assert_eq!(st.hard_state.term, 3);
        assert_eq!(st.hard_state.vote, 7);
        assert_eq!(st.hard_state.commit, 4);
        assert_eq!(st.conf_state.voters, vec![7, 8, 9]);
        assert_eq!(s.first_index().unwrap(), 3);
        assert_eq!(s.last_index().unwrap(), 6);
        assert_eq!(s.cache().applied_index, 4);
        assert!(s.is_initialized());
    }

    #[test]
    fn snapshot_install_replaces_log_and_state() {
        let (_d, s) = open();
        write(&s, |b| {
            s.append(b, &(1..=3).map(|i| entry(i, 1)).collect::<Vec<_>>())
                .unwrap();
            s.set_applied(b, 3, 1).unwrap();
            b.insert(prefixed(KV, b"old"), b"x".to_vec());
        });
        let data = drover_proto::v1::SnapshotData {
            kvs: vec![crate::KeyValue {
                key: "new".into(),
                value: b"v".to_vec(),
                create_revision: 9,
                mod_revision: 12,
            }],
            members: vec![],
            dedup: vec![],
        };
        let mut snap = Snapshot::default();
        snap.set_data(prost::Message::encode_to_vec(&data).into());
        snap.mut_metadata().index = 20;
        snap.mut_metadata().term = 4;
        snap.mut_metadata().mut_conf_state().voters = vec![1, 2, 3];
        write(&s, |b| s.apply_snapshot(b, &snap).unwrap());
        assert_eq!(s.first_index().unwrap(), 21);
        assert_eq!(s.last_index().unwrap(), 20);
        assert_eq!(s.term(20).unwrap(), 4);
        assert!(s.tree.get(log_key(2)).unwrap().is_none());
        assert!(s.tree.get(prefixed(KV, b"old")).unwrap().is_none());
        assert!(s.tree.get(prefixed(KV, b"new")).unwrap().is_some());
        let c = s.cache();
        assert_eq!((c.applied_index, c.hs.commit), (20, 20));
        assert_eq!(c.cs.voters, vec![1, 2, 3]);
    }
}
