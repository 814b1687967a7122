//! How a member's raft state begins, and how it begins again after a
//! disaster: a new cluster ([`bootstrap`]), a cluster restored from a
//! snapshot file (the same, from the snapshot's objects and revision), and
//! a survivor made a one-member cluster when its quorum is gone for good
//! ([`force_new_cluster`], the name etcd uses).
//!
//! All of them write one raft snapshot whose conf state has this member as
//! the only voter, so the member elects itself at once on start; the log
//! continues after the snapshot's index, so every later write's revision is
//! above every revision the objects already carry.

use crate::error::{Error, Result};
use crate::machine::{self, Applier};
use crate::storage::SledStorage;
use crate::{KeyValue, Member};
use drover_proto::v1::{Proposal, SnapshotData};
use prost::Message as _;
use raft::eraftpb::{EntryType, Snapshot};
use std::path::Path;

/// Sets up the state a brand-new one-member cluster starts from: a snapshot
/// at `index` (1 for a new cluster; a restored snapshot's revision) holding
/// `kvs`, whose conf state has `me` as the only voter. Members that join
/// later start from a snapshot too, so they learn the membership from it.
pub(crate) fn bootstrap(
    storage: &SledStorage,
    db: &sled::Db,
    me: &Member,
    kvs: Vec<KeyValue>,
    index: u64,
) -> Result<()> {
    let data = SnapshotData {
        kvs,
        members: vec![Member {
            learner: false,
            removed: false,
            ..me.clone()
        }],
        dedup: vec![],
    };
    install(storage, db, &data, me.id, index.max(1), 1)
}

fn install(
    storage: &SledStorage,
    db: &sled::Db,
    data: &SnapshotData,
    me: u64,
    index: u64,
    term: u64,
) -> Result<()> {
    let mut snap = Snapshot::default();
    snap.set_data(data.encode_to_vec().into());
    snap.mut_metadata().index = index;
    snap.mut_metadata().term = term;
    snap.mut_metadata().mut_conf_state().voters = vec![me];
    let mut b = sled::Batch::default();
    storage.apply_snapshot(&mut b, &snap)?;
    storage.tree.apply_batch(b)?;
    db.flush()?;
    storage.reset_log(index, term)?;
    Ok(())
}

/// What [`force_new_cluster`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForcedCluster {
    /// The revision the one-member cluster starts from.
    pub revision: u64,
    /// The applied index before: entries after it were in the log and are
    /// now applied too.
    pub applied_before: u64,
    /// How many log entries were applied to reach `revision`.
    pub replayed: u64,
    /// The members that are no longer part of the cluster (kept as
    /// removed, so that one that comes back is told so and stops).
    pub dropped: Vec<Member>,
}

/// Makes the member in `dir` (the store's directory, not running) the only
/// member of its cluster, keeping every write in its log: entries it holds
/// beyond its applied index are applied first (they may have been
/// acknowledged to clients by a leader that is gone: keeping them loses
/// none), then the state machine becomes a snapshot whose only voter is
/// `me`. Every other member stays on record as removed.
pub fn force_new_cluster(dir: &Path, me: u64) -> Result<ForcedCluster> {
    let config = sled::Config::new().path(dir);
    let db = crate::storage::open_sled(&config, dir, std::time::Duration::from_secs(5))
        .map_err(|e| Error::Storage(format!("cannot open the store in {}: {e}", dir.display())))?;
    let tree = db.open_tree("drover")?;
    let storage = SledStorage::open(tree.clone(), &crate::storage::wal_dir(dir))?;
    let (applied, last) = {
        let c = storage.cache();
        if c.removed {
            return Err(Error::Removed);
        }
        (c.applied_index, c.last_index)
    };
    if !storage.is_initialized() {
        return Err(Error::Invalid(format!(
            "{} holds no raft state: there is nothing to keep (start a new cluster instead)",
            dir.display()
        )));
    }
    let mut members = machine::members(&tree)?;
    if !members.iter().any(|m| m.id == me && !m.removed) {
        return Err(Error::Invalid(format!(
            "member {me:016x} is not a member of the cluster recorded in {}",
            dir.display()
        )));
    }
    // Apply what the log holds beyond the applied index, one entry at a
    // time (each entry's own revision), skipping membership changes: the
    // membership is replaced below.
    let mut replayed = 0;
    let mut term = storage.cache().applied_term;
    let mut revision = applied;
    for index in applied + 1..=last {
        let read = raft::Storage::entries(
            &storage,
            index,
            index + 1,
            None,
            raft::GetEntriesContext::empty(false),
        );
        let e = match read.map(|mut v| v.pop()) {
            Ok(Some(e)) => e,
            Ok(None) => {
                return Err(Error::Storage(format!(
                    "log entry {index} is missing (the log should run to {last}); the data dir is damaged"
                )))
            }
            Err(err) => {
                return Err(Error::Storage(format!(
                    "log entry {index} cannot be read ({err}); the data dir is damaged"
                )))
            }
        };
        let mut app = Applier::new(&tree);
        if e.get_entry_type() == EntryType::EntryNormal && !e.data.is_empty() {
            match Proposal::decode(e.data.as_ref()) {
                Ok(p) => {
                    app.apply_proposal(e.index, p)?;
                }
                Err(err) => tracing::error!(
                    "force-new-cluster: skipping log entry {index}: it is not a proposal ({err})"
                ),
            }
        }
        storage.set_applied(&mut app.batch, e.index, e.term)?;
        tree.apply_batch(app.batch)?;
        replayed += 1;
        term = e.term;
        revision = e.index;
    }
    let mut dropped = Vec::new();
    for m in &mut members {
        if m.id == me {
            m.learner = false;
            m.removed = false;
        } else if !m.removed {
            m.removed = true;
            dropped.push(m.clone());
        }
    }
    let mut data = machine::decode_snapshot(&machine::snapshot_data(&tree)?)?;
    data.members = members;
    install(&storage, &db, &data, me, revision, term.max(1))?;
    Ok(ForcedCluster {
        revision,
        applied_before: applied,
        replayed,
        dropped,
    })
}

/// The members recorded in the store in `dir` (not running), removed ones
/// included: whom `--force-new-cluster` must find gone before it acts.
pub fn recorded_members(dir: &Path) -> Result<Vec<Member>> {
    let config = sled::Config::new().path(dir);
    let db = crate::storage::open_sled(&config, dir, std::time::Duration::from_secs(5))
        .map_err(|e| Error::Storage(format!("cannot open the store in {}: {e}", dir.display())))?;
    let tree = db.open_tree("drover")?;
    machine::members(&tree)
}
