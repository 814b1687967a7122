//! raft-rs's storage: the log in its own files ([`crate::wal`]) and the rest
//! of raft's persistent state in the `m/` (meta) keys of the store's tree.
//!
//! [`SledStorage`] implements raft-rs's read-only [`Storage`] trait, and
//! offers the write side: appends (with truncation of a conflicting suffix)
//! to the log, synced by the raft thread once per Ready; the hard state,
//! the conf state, the applied index, a snapshot's install and the
//! compaction record as operations on the [`sled::Batch`] of the round.
//!
//! The indexes raft asks for all the time (first, last, hard state, conf
//! state, applied) are cached in memory; the cache is updated together with
//! the batch or the append that changes them.
//!
//! # What is durable, in which order
//!
//! - The log is synced before the round's sled batch is written, so the
//!   state machine never holds an entry the log may lose.
//! - sled is flushed only when it must be: a changed term or vote, an
//!   installed snapshot, a compaction (before the log's old segments are
//!   deleted). What a crash loses of the applied state is applied again
//!   from the log.
//! - A snapshot is made durable in sled, then the log is reset after it.
//!   Opening reconciles the two ([`SledStorage::open`]): entries at or
//!   below the compaction point are dropped, and a log whose entry at that
//!   point has another term is dropped whole (a crash between the two).
//! - A data dir of an older version kept the log in sled's `l` keys: they
//!   move to the log files on the first open.

use crate::error::{Error, Result};
use crate::keys::{log_key, APPLIED, COMPACT, CS, DEDUP, HIST, HS, KV, LOG, MEMBER, REMOVED};
use crate::machine;
use crate::wal::Wal;
use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, Storage, StorageError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

/// How many applied entries a clean stop keeps in the log
/// ([`SledStorage::keep_for_older_versions`]).
pub(crate) const STOP_KEEP_ENTRIES: u64 = 1_000;

/// Where the raft log of the store in `dir` is.
pub(crate) fn wal_dir(dir: &Path) -> PathBuf {
    dir.join("wal")
}

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

/// Moves the log kept in sled's `l` keys (by a version up to 0.2.0, or by
/// this one's clean stop, for them) into the log's files: the entries after the compaction point are
/// written after a reset to it and synced, then the keys are removed and
/// sled flushed. A crash between the two does it again from the start (the
/// reset makes it idempotent); nothing is appended to the log before the
/// keys are gone for good.
fn migrate(tree: &sled::Tree, wal: &mut Wal, compact_index: u64, compact_term: u64) -> Result<()> {
    let mut keys = Vec::new();
    let mut entries = Vec::new();
    for item in tree.scan_prefix([LOG]) {
        let (k, v) = item?;
        let e = Entry::parse_from_bytes(&v)?;
        if e.index > compact_index {
            entries.push(e);
        }
        keys.push(k);
    }
    if keys.is_empty() {
        return Ok(());
    }
    wal.reset(compact_index, compact_term)?;
    wal.append(&entries)?;
    wal.sync()?;
    let mut b = sled::Batch::default();
    for k in keys {
        b.remove(k);
    }
    tree.apply_batch(b)?;
    tree.flush()?;
    tracing::info!(
        "took the raft log's {} entries from the store's tree (where a clean stop keeps them for older versions) into its log files",
        entries.len()
    );
    Ok(())
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

/// raft-rs storage over one sled tree and the log's files. Cheap to clone;
/// every clone shares the same cache and log.
#[derive(Clone)]
pub(crate) struct SledStorage {
    pub tree: sled::Tree,
    cache: Arc<RwLock<Cache>>,
    wal: Arc<Mutex<Wal>>,
}

impl SledStorage {
    /// Opens the storage kept in `tree` and the log in `wal_dir`, loading
    /// the cached indexes and reconciling the two (see the module docs).
    pub fn open(tree: sled::Tree, wal_dir: &Path) -> Result<Self> {
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
        let mut wal = Wal::open(wal_dir)?;
        migrate(&tree, &mut wal, c.compact_index, c.compact_term)?;
        if wal
            .term(c.compact_index)
            .is_some_and(|t| t != c.compact_term)
        {
            // A snapshot was installed in sled and the crash came before
            // the log was reset after it: what the log holds is another
            // history.
            tracing::warn!(
                "the raft log in {} holds entry {} of another term than the snapshot installed; dropping it",
                wal_dir.display(),
                c.compact_index
            );
            wal.reset(c.compact_index, c.compact_term)?;
        }
        wal.compact(c.compact_index)?;
        if let Some(first) = wal.first_index() {
            if first != c.compact_index + 1 {
                return Err(Error::Storage(format!(
                    "the raft log in {} starts at entry {first}, but the store holds entries up to {} only; the data dir is damaged: restore this member from a snapshot or remove it and add it back",
                    wal_dir.display(),
                    c.compact_index
                )));
            }
        }
        c.last_index = wal
            .last_index()
            .unwrap_or(c.compact_index)
            .max(c.compact_index);
        if c.applied_index > c.last_index {
            return Err(Error::Storage(format!(
                "the state machine in {} applied entry {} but the raft log ends at {}; the data dir is damaged: restore this member from a snapshot or remove it and add it back",
                wal_dir.display(),
                c.applied_index,
                c.last_index
            )));
        }
        // The commit index is written without a sync: it may trail what
        // was applied, and raft-rs refuses applied > commit.
        c.hs.commit = c.hs.commit.min(c.last_index).max(c.applied_index);
        Ok(SledStorage {
            tree,
            cache: Arc::new(RwLock::new(c)),
            wal: Arc::new(Mutex::new(wal)),
        })
    }

    fn wal(&self) -> std::sync::MutexGuard<'_, Wal> {
        self.wal.lock().unwrap_or_else(|e| e.into_inner())
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

    /// Appends entries to the log, removing any conflicting suffix already
    /// there. Durable after [`SledStorage::sync_log`].
    pub fn append(&self, ents: &[Entry]) -> Result<()> {
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
        self.wal().append(ents)?;
        c.last_index = first.index + ents.len() as u64 - 1;
        Ok(())
    }

    /// Makes every append so far durable.
    pub fn sync_log(&self) -> Result<()> {
        self.wal().sync()
    }

    /// At a clean stop: leaves the data dir as versions up to 0.2.0 read
    /// it, so that a downgrade can start from it. The log is first
    /// compacted up to [`STOP_KEEP_ENTRIES`] before the applied index
    /// (sled's compaction record moves there), then the entries after that
    /// point are written into sled's `l` keys, and sled is flushed. The
    /// next open takes them back ([`migrate`]). A member stopped by a crash
    /// has no such copy until it has been started and stopped cleanly once.
    ///
    /// Compacting first keeps the stop and the next start short (the copy
    /// is at most about a thousand entries, not the log kept for lagging
    /// followers); the margin keeps what a cluster restarted whole needs
    /// from each member (a leader that handed over at its stop missed the
    /// new leader's first entries: without them it would need a snapshot).
    pub fn keep_for_older_versions(&self) -> Result<()> {
        let (applied, compacted, last) = {
            let c = self.cache();
            (c.applied_index, c.compact_index, c.last_index)
        };
        let mut b = sled::Batch::default();
        let to = applied.saturating_sub(STOP_KEEP_ENTRIES).max(compacted);
        let to_term = if to > compacted {
            let t = self.term(to).map_err(Error::from)?;
            b.insert(COMPACT, &pair(to, t));
            Some(t)
        } else {
            None
        };
        if to < last {
            for e in self.wal().entries(to + 1, last + 1, u64::MAX)? {
                b.insert(&log_key(e.index), e.write_to_bytes()?);
            }
        }
        self.tree.apply_batch(b)?;
        self.tree.flush()?;
        if let Some(t) = to_term {
            {
                let mut c = self.cache_mut();
                c.compact_index = to;
                c.compact_term = t;
            }
            self.drop_log_through(to)?;
        }
        Ok(())
    }

    /// Whether `hs` changes the term or the vote (which must be durable
    /// before raft answers anyone), not only the commit index.
    pub fn changes_term_or_vote(&self, hs: &HardState) -> bool {
        let c = self.cache();
        hs.term != c.hs.term || hs.vote != c.hs.vote
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

    /// Installs a snapshot: the state machine and the history are replaced
    /// by the snapshot's content. Once the batch is durable, the caller
    /// resets the log after it ([`SledStorage::reset_log`]).
    pub fn apply_snapshot(&self, batch: &mut sled::Batch, snap: &Snapshot) -> Result<()> {
        let meta = snap.get_metadata();
        let data = machine::decode_snapshot(snap.get_data())?;
        // Drop everything the snapshot replaces.
        for tag in [KV, HIST, MEMBER, DEDUP] {
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

    /// Drops every log entry: the log continues after the snapshot at
    /// `index` (of `term`), which sled holds durably.
    pub fn reset_log(&self, index: u64, term: u64) -> Result<()> {
        self.wal().reset(index, term)
    }

    /// Records the compaction of the log up to and including `to`, which
    /// must be applied. Returns false when there was nothing to do. Once
    /// the batch is durable, the caller drops the entries from the log
    /// ([`SledStorage::drop_log_through`]).
    pub fn compact(&self, batch: &mut sled::Batch, to: u64) -> Result<bool> {
        let (from, applied) = {
            let c = self.cache();
            (c.compact_index + 1, c.applied_index)
        };
        if to < from || to > applied {
            return Ok(false);
        }
        let term = self.term(to).map_err(Error::from)?;
        batch.insert(COMPACT, &pair(to, term));
        let mut c = self.cache_mut();
        c.compact_index = to;
        c.compact_term = term;
        Ok(true)
    }

    /// Forgets the log entries up to and including `to`, deleting the
    /// segments that hold none after it.
    pub fn drop_log_through(&self, to: u64) -> Result<()> {
        self.wal().compact(to)
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
        if low >= high {
            return Ok(Vec::new());
        }
        self.wal()
            .entries(low, high, max_size)
            .map_err(|e| raft::Error::Store(StorageError::Other(Box::new(e))))
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
        self.wal()
            .term(idx)
            .ok_or(raft::Error::Store(StorageError::Unavailable))
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
#[path = "storage_tests.rs"]
mod tests;
