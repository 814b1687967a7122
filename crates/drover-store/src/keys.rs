//! The key layout of the store's one sled tree (the table in `lib.rs`): the
//! tag byte of each kind of record, the meta keys, and how keys are built.
//!
//! A leaf: the raft log (`storage.rs`), the state machine (`machine.rs`) and
//! the readers of the applied index all build their keys here.

use crate::error::Result;

/// Raft log entries as versions up to 0.2.0 keep them: `l` + index (u64
/// BE). Written only at a clean stop (see `SledStorage::keep_for_older_versions`).
pub(crate) const LOG: u8 = b'l';
/// Objects: `k` + key.
pub(crate) const KV: u8 = b'k';
/// Watch history: `h` + revision (u64 BE) + sequence (u32 BE).
pub(crate) const HIST: u8 = b'h';
/// Members: `M` + member id (u64 BE).
pub(crate) const MEMBER: u8 = b'M';
/// Dedup records of idempotent writes: `r` + client request id (u64 BE).
pub(crate) const DEDUP: u8 = b'r';

/// Raft hard state.
pub(crate) const HS: &[u8] = b"m/hs";
/// Raft conf state.
pub(crate) const CS: &[u8] = b"m/cs";
/// Index and term of the last compacted entry.
pub(crate) const COMPACT: &[u8] = b"m/compact";
/// Index and term of the last applied entry.
pub(crate) const APPLIED: &[u8] = b"m/applied";
/// Present once this member was removed.
pub(crate) const REMOVED: &[u8] = b"m/removed";

/// The key of a raft log entry as versions up to 0.2.0 keep it in sled (the
/// log is in `wal.rs` now; a clean stop writes it here too, for them).
pub(crate) fn log_key(index: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = LOG;
    k[1..].copy_from_slice(&index.to_be_bytes());
    k
}

pub(crate) fn prefixed(tag: u8, rest: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(rest.len() + 1);
    k.push(tag);
    k.extend_from_slice(rest);
    k
}

pub(crate) fn hist_key(rev: u64, seq: u32) -> Vec<u8> {
    let mut k = Vec::with_capacity(13);
    k.push(HIST);
    k.extend_from_slice(&rev.to_be_bytes());
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

pub(crate) fn dedup_key(id: u64) -> Vec<u8> {
    prefixed(DEDUP, &id.to_be_bytes())
}

pub(crate) fn member_key(id: u64) -> Vec<u8> {
    prefixed(MEMBER, &id.to_be_bytes())
}

/// The applied index as persisted with the state machine.
pub(crate) fn applied_index(tree: &sled::Tree) -> Result<u64> {
    Ok(match tree.get(APPLIED)? {
        Some(v) if v.len() == 16 => u64::from_be_bytes(v[..8].try_into().expect("8 bytes")),
        _ => 0,
    })
}
