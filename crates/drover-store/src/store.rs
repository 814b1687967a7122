//! The async handle to the store: what the server and tests call.

use crate::error::{Error, Result};
pub use crate::machine::WriteResult;
use crate::machine::{self, check_op};
use crate::node::{Msg, Node, Reporter, Shared, Transport};
use crate::storage::SledStorage;
use crate::types::{LeaderState, MemberChange, Status, StoreConfig};
use crate::watch::WatchStream;
use crate::{KeyValue, Member, Op, RaftMessage};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, oneshot, watch};

/// How a member starts when its data dir holds no raft state yet. A data dir
/// that has state always resumes from it and ignores this.
#[derive(Debug, Clone)]
pub enum Init {
    /// Start a new one-member cluster with this member as its only voter.
    Bootstrap(Member),
    /// Wait to be added by an existing cluster (it sends a snapshot).
    Join,
    /// Start a new one-member cluster from a snapshot file's objects
    /// (`drover server --restore`): they keep their revisions, and the log
    /// continues after `revision`, the snapshot's.
    Restore {
        me: Member,
        kvs: Vec<KeyValue>,
        revision: u64,
    },
}

/// How fresh a read must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Consistency {
    /// Reflects every write acknowledged before the read started (ReadIndex).
    #[default]
    Linearizable,
    /// This member's applied state, possibly behind the leader.
    Local,
}

/// A handle to one member's store. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    id: u64,
    cfg: StoreConfig,
    tx: Mutex<Sender<Msg>>,
    shared: Arc<Shared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Ok(tx) = self.tx.lock() {
            let _ = tx.send(Msg::Shutdown);
        }
        if let Ok(mut t) = self.thread.lock() {
            if let Some(t) = t.take() {
                let _ = t.join();
            }
        }
    }
}

impl Store {
    /// Opens (or creates) the store in `cfg.dir` and starts its raft thread.
    pub fn open(cfg: StoreConfig, init: Init, transport: Arc<dyn Transport>) -> Result<Store> {
        if cfg.id == 0 {
            return Err(Error::Invalid("member id 0 is reserved".into()));
        }
        private_dir(&cfg.dir).map_err(|e| {
            Error::Storage(format!(
                "cannot create {} readable by its owner only: {e}; check the permissions of its parent",
                cfg.dir.display()
            ))
        })?;
        // The raft log (`wal.rs`) is the durable record and sled is written
        // without a sync; what sled had not flushed when the process died
        // is applied again from the log at the next start, before the
        // member answers. sled's own flusher every second bounds that to
        // a second of writes.
        let config = sled::Config::new()
            .path(&cfg.dir)
            .cache_capacity(64 << 20)
            .flush_every_ms(Some(1000));
        let db =
            crate::storage::open_sled(&config, &cfg.dir, Duration::from_secs(5)).map_err(|e| {
                Error::Storage(format!(
                    "cannot open the store in {}: {e}",
                    cfg.dir.display()
                ))
            })?;
        // sled creates its files with the process umask; whatever it made,
        // and whatever an older version left, is the owner's only.
        private_files(&cfg.dir).map_err(|e| {
            Error::Storage(format!(
                "cannot make the files in {} readable by their owner only: {e}",
                cfg.dir.display()
            ))
        })?;
        let tree = db.open_tree("drover")?;
        let storage = SledStorage::open(tree.clone(), &crate::storage::wal_dir(&cfg.dir))?;
        if storage.cache().removed {
            return Err(Error::Removed);
        }
        if !storage.is_initialized() {
            let (me, kvs, revision) = match init {
                Init::Bootstrap(me) => (Some(me), Vec::new(), 1),
                Init::Restore { me, kvs, revision } => (Some(me), kvs, revision),
                Init::Join => (None, Vec::new(), 0),
            };
            if let Some(me) = me {
                if me.id != cfg.id {
                    return Err(Error::Invalid(
                        "the bootstrap member must be this member".into(),
                    ));
                }
                crate::recovery::bootstrap(&storage, &db, &me, kvs, revision)?;
            }
        }
        let (applied, compacted) = {
            let c = storage.cache();
            (c.applied_index, c.compact_index)
        };
        let members = machine::members(&tree)?
            .into_iter()
            .map(|m| (m.id, m))
            .collect();
        let file = std::fs::File::open(cfg.dir.join("db")).ok();
        let shared = Arc::new(Shared {
            db,
            file,
            tree,
            apply_lock: Default::default(),
            applied: watch::channel(applied).0,
            leader: watch::channel(LeaderState::default()).0,
            // Few slots: one revision can carry thousands of changes (a batched
            // entry), and a watcher that falls behind rereads the history.
            events: broadcast::channel(64).0,
            compacted: compacted.into(),
            last_change: applied.into(),
            members: std::sync::RwLock::new(members),
            membership: watch::channel(0).0,
            stopped: watch::channel(None).0,
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let reporter = Reporter(tx.clone());
        let node = Node::new(cfg.clone(), storage, shared.clone(), transport, reporter)?;
        let thread = std::thread::Builder::new()
            .name(format!("raft-{:x}", cfg.id))
            .spawn(move || node.run(rx))
            .map_err(|e| Error::Storage(format!("cannot start the raft thread: {e}")))?;
        Ok(Store {
            inner: Arc::new(Inner {
                id: cfg.id,
                cfg,
                tx: Mutex::new(tx),
                shared,
                thread: Mutex::new(Some(thread)),
            }),
        })
    }

    /// This member's id.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    pub fn config(&self) -> &StoreConfig {
        &self.inner.cfg
    }

    fn send(&self, m: Msg) -> Result<()> {
        let tx = self.inner.tx.lock().map_err(|_| Error::Stopped)?;
        tx.send(m).map_err(|_| self.stop_reason())
    }

    fn stop_reason(&self) -> Error {
        self.inner
            .shared
            .stopped
            .borrow()
            .clone()
            .unwrap_or(Error::Stopped)
    }

    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T>>) -> Msg,
        what: &'static str,
    ) -> Result<T> {
        let (tx, rx) = oneshot::channel();
        self.send(make(tx))?;
        match tokio::time::timeout(self.inner.cfg.request_timeout, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(self.stop_reason()),
            Err(_) => Err(Error::Timeout(self.inner.cfg.request_timeout, what)),
        }
    }

    /// Applies one write through raft. Only the leader accepts writes; others
    /// answer [`Error::NotLeader`]. A non-zero `client_request_id` makes a
    /// retry of the same write safe: it is applied at most once.
    pub async fn write(&self, op: Op, client_request_id: u64) -> Result<WriteResult> {
        check_op(&op)?;
        self.ask(
            |tx| Msg::Write {
                op,
                client_request_id,
                tx,
            },
            "the write was not committed",
        )
        .await
    }

    /// Waits until this member has applied at least `index`.
    pub async fn wait_applied(&self, index: u64) -> Result<()> {
        let mut rx = self.inner.shared.applied.subscribe();
        let r = tokio::time::timeout(self.inner.cfg.request_timeout, async {
            rx.wait_for(|a| *a >= index).await.map(|_| ())
        })
        .await;
        match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(self.stop_reason()),
            Err(_) => Err(Error::Timeout(
                self.inner.cfg.request_timeout,
                "this member did not catch up with the leader",
            )),
        }
    }

    /// Makes this member's state machine at least as new as every write
    /// acknowledged before the call (raft ReadIndex).
    async fn barrier(&self, c: Consistency) -> Result<()> {
        if c == Consistency::Local {
            return Ok(());
        }
        let index = self
            .ask(|tx| Msg::Read { tx }, "no ReadIndex answer")
            .await?;
        self.wait_applied(index).await
    }

    /// Reads one object and the revision of the read.
    pub async fn get(&self, key: &str, c: Consistency) -> Result<(Option<KeyValue>, u64)> {
        self.barrier(c).await?;
        let s = &self.inner.shared;
        let _g = s.apply_lock.read().unwrap_or_else(|e| e.into_inner());
        let rev = crate::keys::applied_index(&s.tree)?;
        Ok((machine::get(&s.tree, key)?, rev))
    }

    /// Lists every object under `prefix` in key order, and the revision the
    /// list is consistent at (watch from it to follow changes). The list is
    /// the state at exactly that revision, never half a raft round, and the
    /// scan does not hold up the raft thread (see `list_at_one_revision`).
    pub async fn list(&self, prefix: &str, c: Consistency) -> Result<(Vec<KeyValue>, u64)> {
        self.barrier(c).await?;
        list_at_one_revision(&self.inner.shared, prefix, |_| {})
    }

    /// A revision at or above every change acknowledged before the call
    /// (raft ReadIndex, then this member's last change): a cache that
    /// follows [`Store::watch`] over every key holds at least this state
    /// once its watch has delivered this revision. Unlike the applied index
    /// it does not move with entries that change nothing (an election's
    /// empty entry, a membership change), which a watch never delivers.
    pub async fn consistent_revision(&self) -> Result<u64> {
        self.barrier(Consistency::Linearizable).await?;
        Ok(self
            .inner
            .shared
            .last_change
            .load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Follows every change under `prefix` after `start_revision` (0: from
    /// now). Fails with [`Error::TooOld`] when that history is compacted.
    pub fn watch(&self, prefix: &str, start_revision: u64) -> Result<WatchStream> {
        WatchStream::new(
            self.inner.shared.clone(),
            prefix.to_string(),
            start_revision,
        )
    }

    /// This member's status (leader, term, indexes, members, progress).
    pub async fn status(&self) -> Result<Status> {
        let (tx, rx) = oneshot::channel();
        self.send(Msg::Status(tx))?;
        rx.await.map_err(|_| self.stop_reason())
    }

    /// Proposes a membership change; answers the members once it is applied.
    pub async fn change_members(&self, change: MemberChange) -> Result<Vec<Member>> {
        self.ask(
            |tx| Msg::Change { change, tx },
            "the membership change was not committed",
        )
        .await
    }

    /// Asks raft to hand leadership to `to`.
    pub fn transfer_leader(&self, to: u64) -> Result<()> {
        self.send(Msg::TransferLeader(to))
    }

    /// When this member leads, hands leadership to the most up-to-date
    /// other voter and waits (at most `timeout`) until another member leads
    /// and this one has heard from it: a member about to stop, so that the
    /// others need not wait out an election timeout without a leader (a
    /// rolling upgrade stops every member in turn), and so that the writes
    /// still in flight here go on to the new leader before the member stops
    /// listening to its peers. Returns the member it handed leadership to,
    /// None when it did not lead, had no other voter, or no other leader was
    /// heard of by the deadline (raft gives up a transfer after an election
    /// timeout).
    pub async fn step_down(&self, timeout: Duration) -> Option<u64> {
        if !self.leader().is_leader {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        self.send(Msg::StepDown(tx)).ok()?;
        let to = rx.await.ok()??;
        let me = self.id();
        let mut leader = self.subscribe_leader();
        tokio::time::timeout(
            timeout,
            leader.wait_for(|l| !l.is_leader && l.leader.is_some_and(|id| id != me)),
        )
        .await
        .ok()?
        .ok()?;
        Some(to)
    }

    /// Hands a message from a peer to raft.
    pub fn step(&self, msg: RaftMessage) -> Result<()> {
        self.send(Msg::Raft(Box::new(msg)))
    }

    /// Remembers the address of a peer that talked to us.
    pub fn learn_peer(&self, id: u64, addr: String) {
        let _ = self.send(Msg::LearnPeer(id, addr));
    }

    /// The members as this member last applied them (removed ones included,
    /// with `removed` set).
    pub fn members(&self) -> BTreeMap<u64, Member> {
        self.inner.shared.members()
    }

    /// Changes whenever the member list changes (see [`Store::members`]).
    pub fn subscribe_members(&self) -> watch::Receiver<u64> {
        self.inner.shared.membership.subscribe()
    }

    /// The highest revision that changed a key on this member, without a
    /// ReadIndex round (see [`Store::consistent_revision`]).
    pub fn last_change(&self) -> u64 {
        self.inner.shared.last_change.load(Ordering::SeqCst)
    }

    /// True when `id` was a member and was removed.
    pub fn is_removed_member(&self, id: u64) -> bool {
        self.members().get(&id).is_some_and(|m| m.removed)
    }

    /// The leader as this member last saw it.
    pub fn leader(&self) -> LeaderState {
        *self.inner.shared.leader.borrow()
    }

    /// Follows leader changes.
    pub fn subscribe_leader(&self) -> watch::Receiver<LeaderState> {
        self.inner.shared.leader.subscribe()
    }

    /// Waits until some leader is known, up to `timeout`.
    pub async fn wait_leader(&self, timeout: Duration) -> Option<u64> {
        let mut rx = self.subscribe_leader();
        tokio::time::timeout(timeout, async {
            rx.wait_for(|s| s.leader.is_some())
                .await
                .ok()
                .and_then(|s| s.leader)
        })
        .await
        .ok()
        .flatten()
    }

    /// The highest index this member has applied.
    pub fn applied(&self) -> u64 {
        *self.inner.shared.applied.borrow()
    }

    /// The history at or below this revision is compacted away.
    pub fn compacted(&self) -> u64 {
        self.inner.shared.compacted.load(Ordering::SeqCst)
    }

    /// Resolves when the raft thread stopped, with the reason.
    pub async fn stopped(&self) -> Error {
        let mut rx = self.inner.shared.stopped.subscribe();
        let r = match rx.wait_for(|s| s.is_some()).await {
            Ok(s) => s.clone().unwrap_or(Error::Stopped),
            Err(_) => Error::Stopped,
        };
        r
    }

    /// The reason the store stopped, if it did.
    pub fn stop_state(&self) -> Option<Error> {
        self.inner.shared.stopped.borrow().clone()
    }

    /// Stops the raft thread and flushes sled. Other clones become unusable.
    pub async fn shutdown(&self) {
        let _ = self.send(Msg::Shutdown);
        let t = self.inner.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(t) = t {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
    }
}

/// Creates `dir` (and missing parents) readable by its owner only (0700),
/// or makes an existing `dir` so. Data dirs hold credentials and every
/// object of the cluster.
pub fn private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

/// Makes everything under `dir` its owner's only: directories 0700, files
/// 0600 (symlinks are left alone).
fn private_files(dir: &std::path::Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let ty = entry.file_type()?;
            if ty.is_dir() {
                std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o700))?;
                private_files(&entry.path())?;
            } else if ty.is_file() {
                std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o600))?;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// How many times a list scans without the apply lock before it scans under
/// it. A scan is retried only when the history it needs was compacted while
/// it ran, which takes `keep_entries` (default 5,000) rounds during one scan.
const LIST_ATTEMPTS: usize = 3;

/// The applied revision and the compacted one, as one consistent pair.
fn applied_and_compacted(s: &Shared) -> Result<(u64, u64)> {
    let _g = s.apply_lock.read().unwrap_or_else(|e| e.into_inner());
    Ok((
        crate::keys::applied_index(&s.tree)?,
        s.compacted.load(Ordering::SeqCst),
    ))
}

/// Lists `prefix` as of one applied revision, holding the apply lock only to
/// read revisions, never during the scan. `scanned` is a seam for tests.
///
/// sled 0.34 has no snapshots, and a scan that overlaps a round's batch can
/// see some of its writes and not others. So:
///
/// 1. read the applied revision `from` under the lock;
/// 2. scan without the lock: the raft thread applies rounds meanwhile;
/// 3. read the applied revision `to` under the lock. Every round whose batch
///    overlapped the scan finished before the lock was granted (the raft
///    thread writes each batch under the write lock), so every change the
///    scan may have seen belongs to a round in `(from, to]`; objects change
///    only in rounds that apply entries, and those move the applied revision
///    in the same batch;
/// 4. read the history `(from, to]` (written in the same batches as the
///    objects) and replay it over the scan ([`machine::roll_forward`]): keys
///    no round touched were read right, touched ones take their last event.
///    The result is the state at `to`.
/// 5. check under the lock that the history read in 4 was whole: history goes
///    only with a batch that moves `compacted` under the same write lock, so
///    `compacted <= from` now means nothing in `(from, to]` was dropped
///    before or during the read. Otherwise (a compaction or a snapshot
///    overtook the scan) start again; after [`LIST_ATTEMPTS`], scan under the
///    lock as a last resort.
pub(crate) fn list_at_one_revision(
    s: &Shared,
    prefix: &str,
    mut scanned: impl FnMut(usize),
) -> Result<(Vec<KeyValue>, u64)> {
    for _ in 0..LIST_ATTEMPTS {
        let (from, _) = applied_and_compacted(s)?;
        let kvs = machine::scan(&s.tree, prefix, &mut scanned)?;
        let (to, _) = applied_and_compacted(s)?;
        if to == from {
            return Ok((kvs, from));
        }
        let history = machine::read_history(&s.tree, from, to, prefix)?;
        let (_, compacted) = applied_and_compacted(s)?;
        if compacted <= from {
            return Ok((machine::roll_forward(kvs, history), to));
        }
    }
    let _g = s.apply_lock.read().unwrap_or_else(|e| e.into_inner());
    let rev = crate::keys::applied_index(&s.tree)?;
    Ok((machine::scan(&s.tree, prefix, scanned)?, rev))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{op, Create, Delete, Update};
    use tokio::time::timeout;

    struct NoPeers;
    impl Transport for NoPeers {
        fn send(&self, _to: u64, _addr: &str, _msg: RaftMessage, _r: &Reporter) {}
    }

    async fn open(dir: &std::path::Path, snapshot_every: u64, keep: u64) -> Store {
        let mut cfg = StoreConfig::new(1, dir);
        cfg.tick = Duration::from_millis(10);
        cfg.snapshot_every = snapshot_every;
        cfg.keep_entries = keep;
        let me = Member {
            id: 1,
            addr: "127.0.0.1:1".into(),
            ..Default::default()
        };
        let s = Store::open(cfg, Init::Bootstrap(me), Arc::new(NoPeers)).expect("open");
        assert!(s.wait_leader(Duration::from_secs(5)).await.is_some());
        s
    }

    fn create(k: &str, v: &str) -> Op {
        Op {
            op: Some(op::Op::Create(Create {
                key: k.into(),
                value: v.into(),
            })),
        }
    }

    fn put(k: &str, v: &str) -> Op {
        Op {
            op: Some(op::Op::Update(Update {
                key: k.into(),
                value: v.into(),
                expected_revision: 0,
                upsert: true,
            })),
        }
    }

    fn delete(k: &str) -> Op {
        Op {
            op: Some(op::Op::Delete(Delete {
                key: k.into(),
                expected_revision: 0,
            })),
        }
    }

    /// The state under `prefix` now, read under the lock the old way.
    fn state_now(s: &Store, prefix: &str) -> (Vec<KeyValue>, u64) {
        let sh = &s.inner.shared;
        let _g = sh.apply_lock.read().unwrap();
        let rev = crate::keys::applied_index(&sh.tree).unwrap();
        (machine::list(&sh.tree, prefix).unwrap(), rev)
    }

    /// A list's answer and how many scans it began.
    type Listed = (Result<(Vec<KeyValue>, u64)>, usize);

    /// Starts a list on its own thread that stops after its `at`-th object
    /// (once), says so, and waits until told to go on.
    fn paused_list(
        s: &Store,
        at: usize,
    ) -> (
        oneshot::Receiver<()>,
        std::sync::mpsc::Sender<()>,
        std::thread::JoinHandle<Listed>,
    ) {
        let shared = s.inner.shared.clone();
        let (paused_tx, paused_rx) = oneshot::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let mut paused = Some(paused_tx);
            let mut scans = 0;
            let r = list_at_one_revision(&shared, "/p/", |n| {
                if n == 0 {
                    scans += 1;
                }
                if n == at {
                    if let Some(tx) = paused.take() {
                        tx.send(()).unwrap();
                        go_rx.recv().unwrap();
                    }
                }
            });
            (r, scans)
        });
        (paused_rx, go_tx, t)
    }

    #[tokio::test]
    async fn apply_goes_on_during_a_list_which_answers_one_revision() {
        let d = tempfile::tempdir().unwrap();
        let s = open(d.path(), 10_000, 5_000).await;
        for i in 0..10 {
            s.write(create(&format!("/p/{i}"), "0"), 0).await.unwrap();
        }
        let (paused, go, lister) = paused_list(&s, 3);
        paused.await.unwrap();
        // The scan has read /p/0 to /p/3 and holds no lock: rounds apply now
        // (under the old list, which scanned under the lock, they waited).
        let t = Duration::from_secs(5);
        let mut last = 0;
        for op in [
            put("/p/1", "1"),       // read already: the scan has the old value
            put("/p/8", "1"),       // not read yet
            delete("/p/2"),         // read already
            delete("/p/7"),         // not read yet
            create("/p/05", "new"), // between keys already read
            create("/p/9a", "new"), // after the last key
        ] {
            let w = timeout(t, s.write(op, 0))
                .await
                .expect("a round waited for the list")
                .unwrap();
            last = w.revision;
        }
        go.send(()).unwrap();
        let (r, scans) = lister.join().unwrap();
        let (kvs, rev) = r.unwrap();
        assert_eq!(scans, 1);
        assert_eq!(rev, last);
        assert_eq!((kvs, rev), state_now(&s, "/p/"));
    }

    #[tokio::test]
    async fn a_list_overtaken_by_compaction_scans_again() {
        let d = tempfile::tempdir().unwrap();
        let s = open(d.path(), 5, 1).await;
        for i in 0..10 {
            s.write(create(&format!("/p/{i}"), "0"), 0).await.unwrap();
        }
        let (paused, go, lister) = paused_list(&s, 3);
        paused.await.unwrap();
        let from = s.applied();
        let mut last = 0;
        for i in 0..12 {
            last = s
                .write(put("/p/1", &i.to_string()), 0)
                .await
                .unwrap()
                .revision;
        }
        assert!(s.compacted() > from, "the history the list needs is gone");
        go.send(()).unwrap();
        let (r, scans) = lister.join().unwrap();
        let (kvs, rev) = r.unwrap();
        assert_eq!(scans, 2, "the first scan could not be brought forward");
        assert_eq!(rev, last);
        assert_eq!((kvs, rev), state_now(&s, "/p/"));
    }

    #[tokio::test]
    async fn a_committed_entry_that_is_no_proposal_is_skipped_and_the_store_goes_on() {
        let d = tempfile::tempdir().unwrap();
        let before = {
            let s = open(d.path(), 10_000, 5_000).await;
            s.write(create("/a", "1"), 0).await.unwrap();
            let before = s.applied();
            // Not a protobuf message: a length-delimited field cut short.
            s.send(Msg::ProposeRaw(vec![0x0a, 0xff, 0xff])).unwrap();
            let mut applied = s.inner.shared.applied.subscribe();
            timeout(Duration::from_secs(10), applied.wait_for(|a| *a > before))
                .await
                .expect("the bad entry is applied (skipped) within 10 s")
                .unwrap();
            assert_eq!(s.stop_state(), None, "the store still runs");
            let w = s.write(create("/b", "2"), 0).await.unwrap();
            assert!(w.revision > before + 1, "written after the bad entry");
            s.shutdown().await;
            before
        };
        // It reopens, with everything written, and takes writes.
        let s = open(d.path(), 10_000, 5_000).await;
        assert!(s.applied() > before + 1);
        let (kvs, _) = s.list("/", Consistency::Linearizable).await.unwrap();
        assert_eq!(
            kvs.iter().map(|kv| kv.key.as_str()).collect::<Vec<_>>(),
            ["/a", "/b"]
        );
        s.write(create("/c", "3"), 0).await.unwrap();
        assert_eq!(s.stop_state(), None);
        s.shutdown().await;
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_data_dir_and_every_file_in_it_are_the_owners_only() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("store");
        // An existing dir with open permissions is closed too.
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let s = open(&dir, 10_000, 5_000).await;
        s.write(create("/a", "1"), 0).await.unwrap();
        s.shutdown().await;
        drop(s);
        // Opened again: what sled wrote at shutdown is closed as well.
        let s = open(&dir, 10_000, 5_000).await;
        let mut seen = 0;
        let mut todo = vec![dir.clone()];
        while let Some(p) = todo.pop() {
            let m = std::fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode() & 0o777;
            if m.is_dir() {
                assert_eq!(mode, 0o700, "{}", p.display());
                todo.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            } else if m.is_file() {
                assert_eq!(mode, 0o600, "{}", p.display());
                seen += 1;
            }
        }
        assert!(seen >= 2, "sled's files were checked ({seen})");
        s.shutdown().await;
    }

    fn txn(ops: Vec<Op>) -> Op {
        Op {
            op: Some(op::Op::Txn(crate::Txn { ops })),
        }
    }

    #[tokio::test]
    async fn a_transaction_is_one_revision_all_or_nothing() {
        let d = tempfile::tempdir().unwrap();
        let s = open(d.path(), 10_000, 5_000).await;
        let a = s.write(create("/a", "1"), 0).await.unwrap().revision;
        let stale = Op {
            op: Some(op::Op::Update(Update {
                key: "/a".into(),
                value: "x".into(),
                expected_revision: a + 100,
                upsert: false,
            })),
        };
        let r = s
            .write(txn(vec![create("/b", "1"), create("/c", "1"), stale]), 0)
            .await;
        assert!(
            matches!(r, Err(Error::Conflict { ref key, .. }) if key == "/a"),
            "{r:?}"
        );
        let (kvs, _) = s.list("/", Consistency::Linearizable).await.unwrap();
        assert_eq!(
            kvs.len(),
            1,
            "nothing of the failed transaction was written"
        );
        let fresh = Op {
            op: Some(op::Op::Update(Update {
                key: "/a".into(),
                value: "2".into(),
                expected_revision: a,
                upsert: false,
            })),
        };
        let w = s
            .write(txn(vec![create("/b", "1"), create("/c", "1"), fresh]), 0)
            .await
            .unwrap();
        let (kvs, _) = s.list("/", Consistency::Linearizable).await.unwrap();
        assert_eq!(kvs.len(), 3);
        assert!(kvs.iter().all(|kv| kv.mod_revision == w.revision));
        // The same key twice, or no op at all, is refused before proposing.
        for bad in [txn(vec![create("/d", "1"), delete("/d")]), txn(vec![])] {
            assert!(matches!(s.write(bad, 0).await, Err(Error::Invalid(_))));
        }
        s.shutdown().await;
    }
}
