//! The raft thread: the one owner of the `RawNode`.
//!
//! Everything that touches raft goes through [`Msg`] on one channel: writes
//! to propose, reads that need a ReadIndex, membership changes, messages from
//! peers, transport feedback. The loop drains the channel, proposes every
//! queued write as one entry, ticks every `tick`, and runs the Ready cycle:
//!
//! 1. send the leader's messages (they may go before the local append);
//! 2. install a snapshot (sled flushed, then the log reset after it); append
//!    new entries to the log and sync it (`wal.rs`); apply committed entries
//!    and write the hard state in one sled batch, flushed only when the term
//!    or the vote changed;
//! 3. send the messages that had to wait for the flush;
//! 4. `advance`, then apply what the light ready committed;
//! 5. answer waiting writers and readers, publish watch events.
//!
//! The log's sync and sled's flush block, which is why this is a thread and
//! not a task.

mod apply;

use crate::error::{Error, Result};
use crate::machine::{self, Applier, Outcome, RevisionEvents, WriteResult};
use crate::storage::SledStorage;
use crate::types::{LeaderState, MemberChange, Role, Status, StoreConfig};
use crate::{Member, Op, RaftMessage};
use drover_proto::v1::{ConfChangeContext, Proposal, Request, SnapshotData};
use prost::Message as _;
use protobuf::Message as _;
use raft::eraftpb::{ConfChange, ConfChangeType, ConfChangeV2, EntryType, Message, Snapshot};
use raft::{RawNode, SnapshotStatus, StateRole, Storage};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, RwLock};
use std::time::Instant;
use tokio::sync::{broadcast, oneshot, watch};

pub(crate) type Reply<T> = oneshot::Sender<Result<T>>;

pub(crate) enum Msg {
    Write {
        op: Op,
        client_request_id: u64,
        tx: Reply<WriteResult>,
    },
    Read {
        tx: Reply<u64>,
    },
    Change {
        change: MemberChange,
        tx: Reply<Vec<Member>>,
    },
    Raft(Box<Message>),
    Unreachable(u64),
    SnapshotDone(u64, bool),
    LearnPeer(u64, String),
    Removed,
    Status(oneshot::Sender<Status>),
    TransferLeader(u64),
    /// A leader about to stop hands leadership to the most up-to-date
    /// other voter; answers it (None: not the leader, or no other voter).
    StepDown(oneshot::Sender<Option<u64>>),
    Shutdown,
    /// Proposes `data` as it is (a test seam: entries no proposer of ours
    /// would make).
    #[cfg(test)]
    ProposeRaw(Vec<u8>),
}

/// Sends raft messages to peers. Implemented over gRPC by the server; must
/// not block (queue and return).
pub trait Transport: Send + Sync + 'static {
    /// Sends `msg` to member `to` at `addr`, reporting failures (and, for a
    /// snapshot, the outcome) through `reporter`.
    fn send(&self, to: u64, addr: &str, msg: RaftMessage, reporter: &Reporter);
}

/// A cheap handle the transport uses to tell raft how sending went.
#[derive(Clone)]
pub struct Reporter(pub(crate) Sender<Msg>);

impl Reporter {
    /// The peer could not be reached; raft slows down its replication.
    pub fn unreachable(&self, id: u64) {
        let _ = self.0.send(Msg::Unreachable(id));
    }
    /// A snapshot message was delivered (`ok`) or failed.
    pub fn snapshot(&self, id: u64, ok: bool) {
        let _ = self.0.send(Msg::SnapshotDone(id, ok));
    }
    /// A peer answered that this member was removed from the cluster.
    pub fn removed(&self) {
        let _ = self.0.send(Msg::Removed);
    }
}

/// State shared by the raft thread and the async handles.
pub(crate) struct Shared {
    pub db: sled::Db,
    /// sled's data file, for `fdatasync`.
    pub file: Option<std::fs::File>,
    pub tree: sled::Tree,
    /// Held for writing while a batch is written (and `compacted` moved with
    /// it), for reading by whoever needs the applied revision, the history
    /// and `compacted` to agree: a reader never sees half a raft round. Never
    /// held across a scan of the objects (see `Store::list`).
    pub apply_lock: RwLock<()>,
    pub applied: watch::Sender<u64>,
    pub leader: watch::Sender<LeaderState>,
    pub events: broadcast::Sender<Arc<RevisionEvents>>,
    /// History at or below this revision is gone (watch answers TooOld).
    /// Changed only under the write lock of `apply_lock`, together with the
    /// batch that drops that history.
    pub compacted: AtomicU64,
    /// The highest revision that changed a key (at least: a snapshot, or
    /// the store's opening, counts as a change at its index). Raised before
    /// `applied` moves past it, so a reader that waited for `applied` reads
    /// a value that covers every change it may see: what a cache that
    /// follows the watch must have reached to be as new as the store
    /// ([`crate::Store::consistent_revision`]).
    pub last_change: AtomicU64,
    pub members: RwLock<BTreeMap<u64, Member>>,
    /// Bumped whenever `members` changed (a membership change applied, a
    /// snapshot installed): who hands the member list out (agent sessions)
    /// sends it again at once instead of polling.
    pub membership: watch::Sender<u64>,
    /// Set once the thread stopped, with the reason.
    pub stopped: watch::Sender<Option<Error>>,
}

impl Shared {
    /// Makes everything written so far durable: sled's flush writes its
    /// buffers with `sync_file_range`, which neither flushes the disk's
    /// write cache nor the file's metadata, so an `fdatasync` of sled's file
    /// follows (what etcd does for its WAL).
    pub fn sync(&self) -> Result<()> {
        self.db.flush()?;
        if let Some(f) = &self.file {
            f.sync_data()
                .map_err(|e| Error::Storage(format!("fdatasync of the store failed: {e}")))?;
        }
        Ok(())
    }

    pub fn members(&self) -> BTreeMap<u64, Member> {
        self.members
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Reads waiting for one ReadIndex round: they share its context.
struct ReadGroup {
    waiters: Vec<(Reply<u64>, Instant)>,
    issued_at: Instant,
}

pub(crate) struct Node {
    id: u64,
    cfg: StoreConfig,
    raw: RawNode<SledStorage>,
    storage: SledStorage,
    shared: Arc<Shared>,
    transport: Arc<dyn Transport>,
    reporter: Reporter,
    next_id: u64,
    queued: Vec<(Request, Reply<WriteResult>)>,
    writes: HashMap<u64, Reply<WriteResult>>,
    changes: HashMap<u64, Reply<Vec<Member>>>,
    /// Reads not yet handed to raft (no leader yet, or a new leader that has
    /// not committed in its term: raft-rs would drop them silently).
    unissued: Vec<(Reply<u64>, Instant)>,
    reads: HashMap<Vec<u8>, ReadGroup>,
    /// Addresses learnt from inbound traffic, for peers not yet in the
    /// replicated membership (a joiner talking to its leader).
    learnt: HashMap<u64, String>,
    was_leader: bool,
    term: u64,
    /// The time of the newest applied proposal (dedup expiry runs on it).
    last_proposal_ms: u64,
    removed: bool,
}

impl Node {
    pub fn new(
        cfg: StoreConfig,
        storage: SledStorage,
        shared: Arc<Shared>,
        transport: Arc<dyn Transport>,
        reporter: Reporter,
    ) -> Result<Node> {
        let applied = storage.cache().applied_index;
        let rc = raft::Config {
            id: cfg.id,
            election_tick: cfg.election_ticks,
            heartbeat_tick: cfg.heartbeat_ticks,
            applied,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            check_quorum: true,
            pre_vote: true,
            ..Default::default()
        };
        rc.validate()?;
        let raw = RawNode::new(&rc, storage.clone(), &crate::logger::logger(cfg.id))?;
        let mut node = Node {
            id: cfg.id,
            cfg,
            raw,
            storage,
            shared,
            transport,
            reporter,
            next_id: 1,
            queued: Vec::new(),
            writes: HashMap::new(),
            changes: HashMap::new(),
            unissued: Vec::new(),
            reads: HashMap::new(),
            learnt: HashMap::new(),
            was_leader: false,
            term: 0,
            last_proposal_ms: 0,
            removed: false,
        };
        // A lone voter need not wait an election timeout to lead.
        let cs = node.storage.cache().cs.clone();
        if cs.voters == [node.id] && cs.learners.is_empty() {
            node.raw.campaign()?;
        } else if cs.voters.contains(&node.id) {
            // A voter that starts (a restart: a joiner is not a voter yet)
            // has heard from no leader. As etcd does, it counts all but one
            // tick of the election timeout as gone, so a cluster restarted
            // whole elects within one timeout instead of two. A live leader
            // is not disturbed: its heartbeat (every `heartbeat_ticks`)
            // resets the count first, and with pre-vote and check-quorum
            // the others refuse a member that campaigns while they follow
            // a leader.
            for _ in 1..node.cfg.election_ticks {
                node.raw.tick();
            }
        }
        node.publish_leader();
        Ok(node)
    }

    /// Runs until shut down, removed, or a storage failure.
    pub fn run(mut self, rx: Receiver<Msg>) {
        let tick = self.cfg.tick;
        let mut next_tick = Instant::now() + tick;
        let reason = loop {
            let wait = next_tick.saturating_duration_since(Instant::now());
            let mut stop = false;
            match rx.recv_timeout(wait) {
                Ok(m) => stop |= self.handle(m),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => stop = true,
            }
            // Everything that queued up while we were busy goes into this round.
            for _ in 0..100_000 {
                match rx.try_recv() {
                    Ok(m) => stop |= self.handle(m),
                    Err(_) => break,
                }
            }
            if stop {
                break Error::Stopped;
            }
            self.propose_queued();
            self.issue_reads();
            let now = Instant::now();
            if now >= next_tick {
                self.raw.tick();
                self.expire_reads(now);
                next_tick += tick;
                if next_tick < now {
                    next_tick = now + tick;
                }
            }
            if let Err(e) = self.on_ready() {
                tracing::error!(member = %format!("{:x}", self.id), "raft storage failed, stopping: {e}");
                break e;
            }
            if self.removed {
                tracing::warn!(member = %format!("{:x}", self.id), "this member was removed from the cluster; stopping");
                break Error::Removed;
            }
        };
        if let Err(e) = self.storage.sync_log() {
            tracing::warn!(member = %format!("{:x}", self.id), "could not sync the raft log while stopping: {e}");
        }
        if matches!(reason, Error::Stopped) {
            // A clean stop leaves the log where the previous release reads
            // it too, so that a downgrade can start from this data dir.
            if let Err(e) = self.storage.keep_for_older_versions() {
                tracing::warn!(member = %format!("{:x}", self.id), "could not keep a copy of the raft log for older versions (a downgrade of this member would not start): {e}");
            }
        }
        let _ = self.shared.sync();
        self.fail_all(&reason);
        self.shared.stopped.send_replace(Some(reason));
    }

    fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// The other voter with the most of the log, where leadership goes
    /// when this member (the leader) removes itself or stops.
    fn most_up_to_date_voter(&self) -> Option<u64> {
        let cs = self.storage.cache().cs.clone();
        self.raw
            .raft
            .prs()
            .iter()
            .filter(|(pid, _)| **pid != self.id && cs.voters.contains(pid))
            .max_by_key(|(_, p)| p.matched)
            .map(|(pid, _)| *pid)
    }

    fn leader(&self) -> Option<u64> {
        match self.raw.raft.leader_id {
            0 => None,
            l => Some(l),
        }
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Handles one message; true means stop.
    fn handle(&mut self, m: Msg) -> bool {
        match m {
            Msg::Write {
                op,
                client_request_id,
                tx,
            } => {
                if !self.is_leader() {
                    let _ = tx.send(Err(Error::NotLeader {
                        leader: self.leader(),
                    }));
                } else {
                    let id = self.next_id();
                    let req = Request {
                        origin: self.id,
                        id,
                        op: Some(op),
                        client_request_id,
                    };
                    self.queued.push((req, tx));
                }
            }
            Msg::Read { tx } => {
                let deadline =
                    Instant::now() + self.cfg.tick * (2 * self.cfg.election_ticks as u32);
                self.unissued.push((tx, deadline));
            }
            Msg::Change { change, tx } => self.propose_change(change, tx),
            Msg::Raft(msg) => {
                let from = msg.from;
                if let Err(e) = self.raw.step(*msg) {
                    tracing::debug!("dropped a raft message from {from:x}: {e}");
                }
            }
            Msg::Unreachable(id) => self.raw.report_unreachable(id),
            Msg::SnapshotDone(id, ok) => self.raw.report_snapshot(
                id,
                if ok {
                    SnapshotStatus::Finish
                } else {
                    SnapshotStatus::Failure
                },
            ),
            Msg::LearnPeer(id, addr) => {
                self.learnt.insert(id, addr);
            }
            Msg::Removed => {
                let mut b = sled::Batch::default();
                self.storage.set_removed(&mut b);
                let _ = self.shared.tree.apply_batch(b);
                self.removed = true;
            }
            Msg::Status(tx) => {
                let _ = tx.send(self.status());
            }
            Msg::TransferLeader(to) => self.raw.transfer_leader(to),
            Msg::StepDown(tx) => {
                let to = if self.is_leader() {
                    self.most_up_to_date_voter()
                } else {
                    None
                };
                if let Some(to) = to {
                    self.raw.transfer_leader(to);
                }
                let _ = tx.send(to);
            }
            Msg::Shutdown => return true,
            #[cfg(test)]
            Msg::ProposeRaw(data) => {
                if let Err(e) = self.raw.propose(vec![], data) {
                    tracing::warn!("raw proposal refused: {e}");
                }
            }
        }
        false
    }

    fn propose_queued(&mut self) {
        if self.queued.is_empty() {
            return;
        }
        let queued = std::mem::take(&mut self.queued);
        if !self.is_leader() {
            for (_, tx) in queued {
                let _ = tx.send(Err(Error::NotLeader {
                    leader: self.leader(),
                }));
            }
            return;
        }
        let mut chunk: Vec<(Request, Reply<WriteResult>)> = Vec::new();
        let mut size = 0usize;
        let max_size = 4 << 20;
        for item in queued {
            size += item.0.encoded_len();
            chunk.push(item);
            if chunk.len() >= self.cfg.max_batch || size >= max_size {
                self.propose_chunk(std::mem::take(&mut chunk));
                size = 0;
            }
        }
        if !chunk.is_empty() {
            self.propose_chunk(chunk);
        }
    }

    fn propose_chunk(&mut self, chunk: Vec<(Request, Reply<WriteResult>)>) {
        let (requests, txs): (Vec<Request>, Vec<Reply<WriteResult>>) = chunk.into_iter().unzip();
        let ids: Vec<u64> = requests.iter().map(|r| r.id).collect();
        let time_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let data = Proposal { requests, time_ms }.encode_to_vec();
        match self.raw.propose(vec![], data) {
            Ok(()) => {
                for (id, tx) in ids.into_iter().zip(txs) {
                    self.writes.insert(id, tx);
                }
            }
            Err(e) => {
                let e = Error::from(e);
                for tx in txs {
                    let _ = tx.send(Err(e.clone()));
                }
            }
        }
    }

    fn propose_change(&mut self, change: MemberChange, tx: Reply<Vec<Member>>) {
        if !self.is_leader() {
            let _ = tx.send(Err(Error::NotLeader {
                leader: self.leader(),
            }));
            return;
        }
        if self.raw.raft.has_pending_conf() {
            let _ = tx.send(Err(Error::Unavailable(
                "another membership change is in progress; retry in a moment".into(),
            )));
            return;
        }
        let cs = self.storage.cache().cs.clone();
        let members = self.shared.members();
        let is_voter = |id: u64| cs.voters.contains(&id);
        let is_learner = |id: u64| cs.learners.contains(&id);
        let current = || members.values().filter(|m| !m.removed).cloned().collect();
        let (ty, member) = match change {
            MemberChange::AddLearner(m) => {
                if members.get(&m.id).is_some_and(|x| x.removed) {
                    let _ = tx.send(Err(Error::Invalid(format!(
                        "member id {:x} was removed from this cluster and cannot rejoin; start the server with an empty data dir",
                        m.id
                    ))));
                    return;
                }
                if is_voter(m.id) || is_learner(m.id) {
                    // A retried join: nothing to do.
                    let _ = tx.send(Ok(current()));
                    return;
                }
                (
                    ConfChangeType::AddLearnerNode,
                    Member { learner: true, ..m },
                )
            }
            MemberChange::Promote(id) => {
                if is_voter(id) {
                    let _ = tx.send(Ok(current()));
                    return;
                }
                let Some(m) = members.get(&id).filter(|_| is_learner(id)) else {
                    let _ = tx.send(Err(Error::UnknownMember(id)));
                    return;
                };
                (
                    ConfChangeType::AddNode,
                    Member {
                        learner: false,
                        ..m.clone()
                    },
                )
            }
            MemberChange::Remove(id) => {
                if !is_voter(id) && !is_learner(id) {
                    let _ = tx.send(Err(Error::UnknownMember(id)));
                    return;
                }
                if is_voter(id) && cs.voters.len() == 1 {
                    let _ = tx.send(Err(Error::Invalid(
                        "cannot remove the only voting member; a cluster needs one".into(),
                    )));
                    return;
                }
                if id == self.id {
                    // Hand leadership to the most up-to-date other voter first;
                    // the caller retries against the new leader.
                    let to = self.most_up_to_date_voter();
                    if let Some(to) = to {
                        self.raw.transfer_leader(to);
                    }
                    let _ = tx.send(Err(Error::NotLeader { leader: to }));
                    return;
                }
                let m = members.get(&id).cloned().unwrap_or(Member {
                    id,
                    ..Default::default()
                });
                (ConfChangeType::RemoveNode, Member { removed: true, ..m })
            }
        };
        let req_id = self.next_id();
        let ctx = ConfChangeContext {
            origin: self.id,
            id: req_id,
            member: Some(member.clone()),
        };
        let mut cc = ConfChange::default();
        cc.set_change_type(ty);
        cc.node_id = member.id;
        match self.raw.propose_conf_change(ctx.encode_to_vec(), cc) {
            Ok(()) => {
                self.changes.insert(req_id, tx);
            }
            Err(e) => {
                let _ = tx.send(Err(e.into()));
            }
        }
    }

    /// Hands the waiting reads to raft as one ReadIndex request, once a
    /// leader can answer it.
    fn issue_reads(&mut self) {
        if self.unissued.is_empty() || self.leader().is_none() {
            return;
        }
        if self.is_leader() && !self.raw.raft.commit_to_current_term() {
            return;
        }
        let ctx = self.next_id().to_be_bytes().to_vec();
        self.raw.read_index(ctx.clone());
        let waiters = std::mem::take(&mut self.unissued);
        self.reads.insert(
            ctx,
            ReadGroup {
                waiters,
                issued_at: Instant::now(),
            },
        );
    }

    /// Fails reads past their deadline; asks again for rounds that got no
    /// answer in a few ticks (the request or its answer may have been lost).
    fn expire_reads(&mut self, now: Instant) {
        let timeout = || {
            Err(Error::Unavailable(
                "no leader confirmed the read in time; retry".into(),
            ))
        };
        let (expired, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.unissued)
            .into_iter()
            .partition(|(_, d)| *d <= now);
        self.unissued = kept;
        for (tx, _) in expired {
            let _ = tx.send(timeout());
        }
        let retry_after = self.cfg.tick * 5;
        let mut reissue = Vec::new();
        self.reads.retain(|ctx, g| {
            let (expired, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut g.waiters)
                .into_iter()
                .partition(|(_, d)| *d <= now);
            g.waiters = kept;
            for (tx, _) in expired {
                let _ = tx.send(timeout());
            }
            if g.waiters.is_empty() {
                return false;
            }
            if now.duration_since(g.issued_at) >= retry_after {
                reissue.push(ctx.clone());
                g.issued_at = now;
            }
            true
        });
        let can_issue = self.leader().is_some()
            && (!self.is_leader() || self.raw.raft.commit_to_current_term());
        for ctx in reissue {
            if can_issue {
                self.raw.read_index(ctx);
            }
        }
    }

    fn send(&mut self, msgs: Vec<Message>) {
        if msgs.is_empty() {
            return;
        }
        let members = self
            .shared
            .members
            .read()
            .unwrap_or_else(|e| e.into_inner());
        for m in msgs {
            let addr = members
                .get(&m.to)
                .filter(|x| !x.removed)
                .map(|x| x.addr.clone())
                .or_else(|| self.learnt.get(&m.to).cloned());
            match addr {
                Some(addr) => self.transport.send(m.to, &addr, m, &self.reporter),
                None => {
                    tracing::debug!("no address for member {:x}; message dropped", m.to);
                    self.raw.report_unreachable(m.to);
                }
            }
        }
    }

    fn publish_leader(&mut self) {
        let state = LeaderState {
            leader: self.leader(),
            term: self.raw.raft.term,
            is_leader: self.is_leader(),
        };
        let leader = self.is_leader();
        if self.was_leader && (!leader || self.raw.raft.term != self.term) {
            // Lost leadership: what we proposed may or may not commit.
            for (_, tx) in self.writes.drain() {
                let _ = tx.send(Err(Error::Ambiguous));
            }
            for (_, tx) in self.changes.drain() {
                let _ = tx.send(Err(Error::Ambiguous));
            }
        }
        self.was_leader = leader;
        self.term = self.raw.raft.term;
        self.shared.leader.send_if_modified(|cur| {
            if *cur != state {
                *cur = state;
                true
            } else {
                false
            }
        });
    }

    fn on_ready(&mut self) -> Result<()> {
        if !self.raw.has_ready() {
            return Ok(());
        }
        let mut ready = self.raw.ready();
        if ready.ss().is_some() || ready.hs().is_some() {
            self.publish_leader();
        }
        self.send(ready.take_messages());

        let tree = self.shared.tree.clone();
        // Only the log, the term and vote, and a snapshot must be durable
        // before we go on; applied state may trail (it is applied again
        // from the log). A hard state whose only change is the commit
        // index need not be synced (raft-rs says so with must_sync, as
        // etcd does).
        let sync_meta = ready
            .hs()
            .is_some_and(|hs| self.storage.changes_term_or_vote(hs));
        if !ready.snapshot().is_empty() {
            // Durable in sled, then the log reset after it.
            self.install_snapshot(ready.snapshot())?;
        }
        // The log first, synced: the batch below may carry a commit index
        // that counts these entries.
        if !ready.entries().is_empty() {
            self.storage.append(ready.entries())?;
            self.storage.sync_log()?;
        }
        let mut app = Applier::new(&tree);
        let mut outcomes = Vec::new();
        let mut member_outcomes = Vec::new();
        let committed = ready.take_committed_entries();
        // sled rolls its write buffer twice for every batch, even an empty
        // one, and hands each roll to its IO threads: a Ready with only
        // messages (a heartbeat, an ack) or only entries writes no batch.
        let dirty = !committed.is_empty() || ready.hs().is_some();
        self.apply_entries(&mut app, committed, &mut outcomes, &mut member_outcomes)?;
        if let Some(hs) = ready.hs() {
            self.storage.set_hard_state(&mut app.batch, hs)?;
        }
        let events = std::mem::take(&mut app.events);
        if dirty {
            self.commit_batch(app.batch, None)?;
        }
        if sync_meta {
            self.shared.sync()?;
        }
        self.finish(events, outcomes, member_outcomes);
        for rs in ready.take_read_states() {
            if let Some(g) = self.reads.remove(&rs.request_ctx) {
                for (tx, _) in g.waiters {
                    let _ = tx.send(Ok(rs.index));
                }
            }
        }
        self.send(ready.take_persisted_messages());

        let mut light = self.raw.advance(ready);
        let mut app = Applier::new(&tree);
        let commit = light.commit_index();
        if let Some(c) = commit {
            self.storage.set_commit(&mut app.batch, c)?;
        }
        self.send(light.take_messages());
        let mut outcomes = Vec::new();
        let mut member_outcomes = Vec::new();
        let committed = light.take_committed_entries();
        let dirty = commit.is_some() || !committed.is_empty();
        self.apply_entries(&mut app, committed, &mut outcomes, &mut member_outcomes)?;
        let events = std::mem::take(&mut app.events);
        if dirty {
            self.commit_batch(app.batch, None)?;
        }
        self.finish(events, outcomes, member_outcomes);
        self.raw.advance_apply();
        self.publish_leader();
        self.maybe_compact()?;
        Ok(())
    }

    /// Writes one batch under the apply lock; `compacted`, when the batch
    /// drops history, moves under the same lock, so a reader holding the lock
    /// never finds history missing that `compacted` says is there.
    fn commit_batch(&self, batch: sled::Batch, compacted: Option<u64>) -> Result<()> {
        let _guard = self
            .shared
            .apply_lock
            .write()
            .unwrap_or_else(|e| e.into_inner());
        self.shared.tree.apply_batch(batch)?;
        if let Some(c) = compacted {
            self.shared.compacted.store(c, Ordering::SeqCst);
        }
        Ok(())
    }

    /// After a batch is written: wake readers, publish events, answer callers.
    fn finish(
        &mut self,
        events: Vec<RevisionEvents>,
        outcomes: Vec<Outcome>,
        member_outcomes: Vec<(u64, u64, Result<()>)>,
    ) {
        let applied = self.storage.cache().applied_index;
        if let Some(last) = events
            .iter()
            .filter(|e| !e.events.is_empty())
            .map(|e| e.revision)
            .max()
        {
            self.shared.last_change.fetch_max(last, Ordering::SeqCst);
        }
        self.shared.applied.send_if_modified(|a| {
            if *a != applied {
                *a = applied;
                true
            } else {
                false
            }
        });
        for ev in events {
            let _ = self.shared.events.send(Arc::new(ev));
        }
        for o in outcomes {
            if o.origin != self.id {
                continue;
            }
            if let Some(tx) = self.writes.remove(&o.id) {
                let _ = tx.send(o.result);
            }
        }
        if !member_outcomes.is_empty() {
            let members: Vec<Member> = self
                .shared
                .members()
                .into_values()
                .filter(|m| !m.removed)
                .collect();
            for (origin, id, r) in member_outcomes {
                if origin != self.id {
                    continue;
                }
                if let Some(tx) = self.changes.remove(&id) {
                    let _ = tx.send(r.map(|_| members.clone()));
                }
            }
        }
    }

    fn fail_all(&mut self, e: &Error) {
        for (_, tx) in self.queued.drain(..) {
            let _ = tx.send(Err(e.clone()));
        }
        for (_, tx) in self.writes.drain() {
            let _ = tx.send(Err(e.clone()));
        }
        for (_, tx) in self.changes.drain() {
            let _ = tx.send(Err(e.clone()));
        }
        for (tx, _) in self.unissued.drain(..) {
            let _ = tx.send(Err(e.clone()));
        }
        for (_, g) in self.reads.drain() {
            for (tx, _) in g.waiters {
                let _ = tx.send(Err(e.clone()));
            }
        }
    }

    fn status(&self) -> Status {
        let c = self.storage.cache().clone();
        let role = if self.removed {
            Role::Removed
        } else if c.cs.learners.contains(&self.id) {
            Role::Learner
        } else {
            match self.raw.raft.state {
                StateRole::Leader => Role::Leader,
                StateRole::Follower => Role::Follower,
                StateRole::Candidate => Role::Candidate,
                StateRole::PreCandidate => Role::PreCandidate,
            }
        };
        let matched = if self.is_leader() {
            self.raw
                .raft
                .prs()
                .iter()
                .map(|(id, p)| (*id, p.matched))
                .collect()
        } else {
            BTreeMap::new()
        };
        Status {
            id: self.id,
            leader: self.leader(),
            term: self.raw.raft.term,
            commit: self.raw.raft.raft_log.committed,
            applied: c.applied_index,
            first_index: self.storage.first_index().unwrap_or(0),
            last_index: c.last_index,
            role,
            members: self
                .shared
                .members()
                .into_values()
                .filter(|m| !m.removed)
                .collect(),
            matched,
        }
    }
}
