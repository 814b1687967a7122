//! drover's replicated object store.
//!
//! Every object of the cluster (nodes, DaemonSets, pods, revisions, events)
//! lives here: an ordered map from string keys to opaque values, replicated
//! with [raft-rs](https://docs.rs/raft) and persisted in [sled].
//!
//! # How a write flows
//!
//! 1. A caller awaits [`Store::write`] with one [`Op`] (create, update with
//!    compare-and-swap on the object's revision, delete, or a [`Txn`] of
//!    those, applied all or none at one revision).
//! 2. The request goes over a channel to the *raft thread*, the one owner of
//!    the `RawNode` (see `node.rs`). Every request that arrived while the
//!    previous round was being flushed is packed into one raft entry, so many
//!    concurrent writes cost one log append and one fsync.
//! 3. raft-rs replicates the entry. An entry is committed once it is synced
//!    to the log's files (`wal.rs`, one `fdatasync` per round) on a quorum
//!    of members.
//! 4. Every member applies committed entries to its state machine (the `k`
//!    keys of the same sled tree) in one atomic batch together with the
//!    applied index, records one watch event per change, and the member that
//!    proposed the entry answers its waiting callers. The revision of a write
//!    (its `resourceVersion`) is the raft index of its entry.
//!
//! Reads are linearizable by default (raft ReadIndex, then wait until the
//! local state machine has applied that index) or local when the caller asks.
//!
//! A committed entry that does not decode is logged and skipped, as a no-op,
//! by every member alike: it never stops the store. The data dir is its
//! owner's only ([`private_dir`]; sled's files are made 0600 at open).
//!
//! # Layout of the sled tree
//!
//! One tree holds everything but the raft log so that one `Batch` per raft
//! round is atomic (the keys are built in `keys.rs`); the log is in its own
//! files, `DIR/wal` (`wal.rs`):
//!
//! | key                         | value                                  |
//! |-----------------------------|----------------------------------------|
//! | `l` + index (u64 BE)        | none: where an older version kept the raft log (moved to `DIR/wal` on open) |
//! | `m/hs`, `m/cs`              | raft hard state, conf state            |
//! | `m/compact`                 | index and term of the last compacted entry |
//! | `m/applied`                 | index and term of the last applied entry |
//! | `m/removed`                 | present once this member was removed   |
//! | `k` + key                   | [`StoredValue`] of an object           |
//! | `h` + revision + seq        | watch history [`Event`]                |
//! | `M` + member id             | [`Member`] (addresses)                 |
//! | `r` + client request id     | [`DedupRecord`] of an idempotent write |

pub mod backup;
mod error;
mod keys;
mod logger;
mod machine;
mod node;
mod recovery;
mod storage;
mod store;
mod types;
mod wal;
mod watch;

pub use drover_proto::v1::event::Type as EventType;
pub use drover_proto::v1::{
    op, Create, Delete, Event, KeyValue, Member, Op, StoredValue, Txn, Update,
};
pub use error::{Error, Result};
pub use node::{Reporter, Transport};
pub use raft::eraftpb::Message as RaftMessage;
pub use recovery::{force_new_cluster, recorded_members, ForcedCluster};
pub use store::{private_dir, Consistency, Init, Store, WriteResult};
pub use types::{MemberChange, Role, Status, StoreConfig};
pub use watch::{WatchBatch, WatchStream};

pub(crate) use drover_proto::v1::DedupRecord;
