//! The store's plain data types, shared by the async handle (`store.rs`)
//! and the raft thread (`node.rs`): configuration, membership changes, roles,
//! status and the leader as last seen. A leaf: it uses no other module.

use crate::Member;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// How a store member is tuned.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// This member's raft id (never 0, unique in the cluster, never reused).
    pub id: u64,
    /// Where sled keeps the log and the state machine.
    pub dir: PathBuf,
    /// The raft tick (default 100 ms).
    pub tick: Duration,
    /// Ticks without a leader before an election (default 10: ~1 s; raft
    /// randomises it between 1x and 2x).
    pub election_ticks: usize,
    /// Ticks between leader heartbeats (default 1).
    pub heartbeat_ticks: usize,
    /// Compact the log once this many entries were applied since the last
    /// compaction (default 10,000).
    pub snapshot_every: u64,
    /// Entries kept behind the applied index on compaction, so a follower a
    /// little behind catches up from the log rather than a snapshot
    /// (default 5,000).
    pub keep_entries: u64,
    /// At most this many writes go into one raft entry (default 4,096).
    pub max_batch: usize,
    /// How long a write or a linearizable read may wait (default 10 s).
    pub request_timeout: Duration,
}

impl StoreConfig {
    pub fn new(id: u64, dir: impl Into<PathBuf>) -> Self {
        StoreConfig {
            id,
            dir: dir.into(),
            tick: Duration::from_millis(100),
            election_ticks: 10,
            heartbeat_ticks: 1,
            snapshot_every: 10_000,
            keep_entries: 5_000,
            max_batch: 4096,
            request_timeout: Duration::from_secs(10),
        }
    }

    /// The election timeout this configuration gives (its lower bound).
    pub fn election_timeout(&self) -> Duration {
        self.tick * self.election_ticks as u32
    }
}

/// A membership change, proposed through raft.
#[derive(Debug, Clone)]
pub enum MemberChange {
    /// Add a non-voting member that receives the log.
    AddLearner(Member),
    /// Make a learner a voter.
    Promote(u64),
    /// Remove a member (voter or learner).
    Remove(u64),
}

/// A member's raft role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower,
    Candidate,
    PreCandidate,
    Learner,
    Removed,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Leader => "leader",
            Role::Follower => "follower",
            Role::Candidate => "candidate",
            Role::PreCandidate => "pre-candidate",
            Role::Learner => "learner",
            Role::Removed => "removed",
        })
    }
}

/// A member's view of the cluster.
#[derive(Debug, Clone)]
pub struct Status {
    pub id: u64,
    pub leader: Option<u64>,
    pub term: u64,
    pub commit: u64,
    pub applied: u64,
    pub first_index: u64,
    pub last_index: u64,
    pub role: Role,
    pub members: Vec<Member>,
    /// On the leader: the highest index known to be on each member.
    pub matched: BTreeMap<u64, u64>,
}

/// Who leads, as this member last saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeaderState {
    pub leader: Option<u64>,
    pub term: u64,
    pub is_leader: bool,
}
