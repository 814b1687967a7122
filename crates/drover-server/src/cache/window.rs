//! The watch cache, as the Kubernetes API server's
//! (`k8s.io/apiserver/pkg/storage/cacher`): the informer's one decode of
//! each change, kept in a bounded window per kind and shared by every
//! watcher of that kind (the Kubernetes API's `?watch=1`, the `Objects`
//! service's `Watch`).
//!
//! - Fed by [`super::Informer`] as it applies each batch of the store's
//!   watch (no second store watch, no second decode): the change's type
//!   (ADDED, MODIFIED, DELETED), its revision and the decoded object behind
//!   the `Arc` the view holds (a DELETED one carries the object as the view
//!   last had it, at the revision of its deletion, as the store's event
//!   does).
//! - Bounded per kind in changes and bytes ([`crate::limits::WatchWindow`]):
//!   the oldest change goes first, and the window then starts after it.
//! - A watcher is a cursor (the revision it has sent up to) and a
//!   notification of its kind's last change: the informer appends and
//!   notifies, never waits for a watcher. A watcher whose cursor falls
//!   before the window's start (it resumed from too old a resourceVersion,
//!   or its client reads slower than the kind changes) gets
//!   [`Expired`]: 410 Gone, and the client relists, as Kubernetes does.
//! - The JSON of an object is encoded once per change
//!   ([`WatchEvent::json`]) and shared by every watcher that sends the
//!   plain object; Tables and protobuf stay per watcher.
//! - A relist of the informer (it fell behind the store's compaction)
//!   empties the window: every watcher expires and relists.

use crate::api::codec;
use crate::limits::{WatchWindow, WATCH_BATCH};
use crate::metrics::WatchCounters;
use bytes::Bytes;
use drover_api::{
    ConfigMap, DaemonSet, Deployment, Kind, Manifest, Node, Pod, PriorityClass, ReplicaSet, Secret,
};
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::watch;

/// What a change did to its object, as a watch event names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Modified,
    Deleted,
}

impl Change {
    pub fn name(self) -> &'static str {
        match self {
            Change::Added => "ADDED",
            Change::Modified => "MODIFIED",
            Change::Deleted => "DELETED",
        }
    }
}

/// A decoded object of a kind the informer holds, shared with its view.
#[derive(Clone)]
pub enum Typed {
    Node(Arc<Node>),
    DaemonSet(Arc<DaemonSet>),
    Deployment(Arc<Deployment>),
    ReplicaSet(Arc<ReplicaSet>),
    Pod(Arc<Pod>),
    PriorityClass(Arc<PriorityClass>),
    ConfigMap(Arc<ConfigMap>),
    Secret(Arc<Secret>),
}

impl Typed {
    pub fn kind(&self) -> Kind {
        match self {
            Typed::Node(_) => Kind::Node,
            Typed::DaemonSet(_) => Kind::DaemonSet,
            Typed::Deployment(_) => Kind::Deployment,
            Typed::ReplicaSet(_) => Kind::ReplicaSet,
            Typed::Pod(_) => Kind::Pod,
            Typed::PriorityClass(_) => Kind::PriorityClass,
            Typed::ConfigMap(_) => Kind::ConfigMap,
            Typed::Secret(_) => Kind::Secret,
        }
    }

    fn manifest(&self) -> Manifest {
        match self {
            Typed::Node(o) => Manifest::from(Node::clone(o)),
            Typed::DaemonSet(o) => Manifest::from(DaemonSet::clone(o)),
            Typed::Deployment(o) => Manifest::from(Deployment::clone(o)),
            Typed::ReplicaSet(o) => Manifest::from(ReplicaSet::clone(o)),
            Typed::Pod(o) => Manifest::from(Pod::clone(o)),
            Typed::PriorityClass(o) => Manifest::from(PriorityClass::clone(o)),
            Typed::ConfigMap(o) => Manifest::from(ConfigMap::clone(o)),
            Typed::Secret(o) => Manifest::from(Secret::clone(o)),
        }
    }
}

/// One change in the window, shared (`Arc`) by every watcher that sends
/// it. What a watcher needs of it beyond the decoded object (the object as
/// a `Manifest`, its JSON, its JSON value for field selectors) is made by
/// the first watcher that needs it, once.
pub struct WatchEvent {
    pub change: Change,
    /// The store key.
    pub key: String,
    /// The revision of the change (the object's resourceVersion).
    pub revision: u64,
    object: Typed,
    /// The object's size as stored: what it counts against the window.
    bytes: usize,
    manifest: OnceLock<Manifest>,
    json: OnceLock<Bytes>,
    value: OnceLock<Value>,
}

impl WatchEvent {
    pub fn new(change: Change, key: String, revision: u64, object: Typed, bytes: usize) -> Self {
        WatchEvent {
            change,
            key,
            revision,
            object,
            bytes,
            manifest: OnceLock::new(),
            json: OnceLock::new(),
            value: OnceLock::new(),
        }
    }

    /// The object, its resourceVersion the change's revision.
    pub fn manifest(&self) -> &Manifest {
        self.manifest.get_or_init(|| {
            let mut m = self.object.manifest();
            m.metadata_mut().resource_version = self.revision.to_string();
            m
        })
    }

    /// The object as JSON, encoded by the first watcher that asks.
    pub fn json(&self, counters: &WatchCounters) -> &Bytes {
        self.json.get_or_init(|| {
            counters.encodes.inc();
            match codec::to_json(self.manifest()) {
                Ok(v) => Bytes::from(v),
                Err(e) => {
                    tracing::warn!("watch cache: {e}");
                    Bytes::from_static(b"null")
                }
            }
        })
    }

    /// The object as a JSON value, for field selectors.
    pub fn value(&self) -> &Value {
        self.value
            .get_or_init(|| serde_json::to_value(self.manifest()).unwrap_or(Value::Null))
    }
}

/// A watcher's cursor is before the window: the changes it has not sent
/// are gone. 410 Gone (`Expired`) to its client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    pub kind: Kind,
    /// The revision the watcher had sent up to.
    pub requested: u64,
    /// The window holds every change of the kind after this revision.
    pub oldest: u64,
}

impl Expired {
    /// What the client is told.
    pub fn message(&self) -> String {
        format!(
            "too old resource version: {} ({}): the watch cache of {} holds the changes after {}; list again and watch from the list's resourceVersion",
            self.requested,
            self.oldest,
            self.kind.resource(),
            self.oldest
        )
    }
}

/// Changes a watcher took from the window, and where its cursor is now.
pub struct Taken {
    pub events: Vec<Arc<WatchEvent>>,
    /// Every change of the kind up to this revision has been taken.
    pub cursor: u64,
    /// More changes were left for the next take (the batch was full).
    pub more: bool,
}

struct Window {
    events: VecDeque<Arc<WatchEvent>>,
    bytes: usize,
    /// Every change after this revision is in `events`.
    since: u64,
    notify: watch::Sender<u64>,
}

impl Window {
    fn new(since: u64) -> Self {
        Window {
            events: VecDeque::new(),
            bytes: 0,
            since,
            notify: watch::channel(since).0,
        }
    }
}

struct State {
    kinds: HashMap<Kind, Window>,
    /// The informer's revision: every change up to it is in the windows
    /// (or before them).
    revision: u64,
    /// The revision of the informer's last list: every change after it
    /// is in the windows, or was dropped from them.
    start: u64,
}

/// The watch cache; see the module docs.
pub struct WatchCache {
    state: Mutex<State>,
    bound: WatchWindow,
    pub counters: WatchCounters,
}

impl WatchCache {
    pub fn new(bound: WatchWindow, counters: WatchCounters) -> Self {
        WatchCache {
            state: Mutex::new(State {
                kinds: HashMap::new(),
                revision: 0,
                start: 0,
            }),
            bound,
            counters,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends a batch of changes applied up to `revision` (in revision
    /// order), drops what exceeds the bound, and wakes the watchers of the
    /// kinds that changed. Never waits for a watcher.
    pub fn push(&self, events: Vec<Arc<WatchEvent>>, revision: u64) {
        let mut s = self.lock();
        let start = s.start;
        let mut touched = Vec::new();
        for e in events {
            self.counters.events.inc();
            let kind = e.object.kind();
            let w = s.kinds.entry(kind).or_insert_with(|| Window::new(start));
            w.bytes += e.bytes;
            w.events.push_back(e);
            while w.events.len() > self.bound.events
                || (w.bytes > self.bound.bytes && w.events.len() > 1)
            {
                let Some(old) = w.events.pop_front() else {
                    break;
                };
                w.bytes -= old.bytes;
                w.since = old.revision;
            }
            if !touched.contains(&kind) {
                touched.push(kind);
            }
        }
        s.revision = s.revision.max(revision);
        for kind in touched {
            if let Some(w) = s.kinds.get(&kind) {
                w.notify.send_replace(revision);
            }
        }
    }

    /// Empties every window: the informer relisted at `revision` (changes
    /// before it are unknown). Every watcher wakes and expires.
    pub fn reset(&self, revision: u64) {
        let mut s = self.lock();
        s.revision = revision;
        s.start = revision;
        for w in s.kinds.values_mut() {
            w.events.clear();
            w.bytes = 0;
            w.since = revision;
            w.notify.send_replace(revision);
        }
    }

    /// Woken (to the revision) when `kind` changes or the window is reset.
    pub fn subscribe(&self, kind: Kind) -> watch::Receiver<u64> {
        let mut s = self.lock();
        let start = s.start;
        s.kinds
            .entry(kind)
            .or_insert_with(|| Window::new(start))
            .notify
            .subscribe()
    }

    /// The informer's revision: every change up to it is known.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    /// The changes of `kind` under the key `prefix` after `cursor`, at most
    /// [`WATCH_BATCH`] (more when the last revision taken has more), and
    /// the new cursor; [`Expired`] when changes after `cursor` have left
    /// the window.
    pub fn take(&self, kind: Kind, prefix: &str, cursor: u64) -> Result<Taken, Expired> {
        let mut s = self.lock();
        let (start, revision) = (s.start, s.revision);
        let w = s.kinds.entry(kind).or_insert_with(|| Window::new(start));
        if cursor < w.since {
            let oldest = w.since;
            drop(s);
            self.counters.expired.inc();
            return Err(Expired {
                kind,
                requested: cursor,
                oldest,
            });
        }
        let start = w.events.partition_point(|e| e.revision <= cursor);
        let mut events = Vec::new();
        let mut last = None;
        for e in w.events.range(start..) {
            if events.len() >= WATCH_BATCH && last != Some(e.revision) {
                // Stop at a revision's end: the cursor names whole
                // revisions.
                return Ok(Taken {
                    events,
                    cursor: last.unwrap_or(cursor),
                    more: true,
                });
            }
            last = Some(e.revision);
            if e.key.starts_with(prefix) {
                events.push(e.clone());
            }
        }
        Ok(Taken {
            events,
            cursor: cursor.max(revision),
            more: false,
        })
    }

    /// A watcher of `kind` under `prefix` from `cursor` (counted in
    /// `drover_watch_cache_watchers` while it lives).
    pub fn follow(self: &Arc<Self>, kind: Kind, prefix: String, cursor: u64) -> Follower {
        self.counters.watchers.inc();
        Follower {
            rx: self.subscribe(kind),
            cache: self.clone(),
            kind,
            prefix,
            cursor,
            more: true,
        }
    }
}

/// One watcher's cursor in the window; see [`WatchCache::follow`].
pub struct Follower {
    cache: Arc<WatchCache>,
    rx: watch::Receiver<u64>,
    kind: Kind,
    prefix: String,
    cursor: u64,
    more: bool,
}

impl Follower {
    /// Every change of the kind up to this revision has been taken.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The changes after the cursor now (none, when there are none yet).
    pub fn take(&mut self) -> Result<Vec<Arc<WatchEvent>>, Expired> {
        let t = self.cache.take(self.kind, &self.prefix, self.cursor)?;
        self.cursor = t.cursor;
        self.more = t.more;
        Ok(t.events)
    }

    /// The next changes after the cursor, once there are some; `None`
    /// when the cache is gone. Cancel-safe: nothing is taken until it
    /// returns.
    pub async fn next(&mut self) -> Option<Result<Vec<Arc<WatchEvent>>, Expired>> {
        loop {
            if !self.more && self.rx.changed().await.is_err() {
                return None;
            }
            match self.take() {
                Ok(events) if events.is_empty() => continue,
                other => return Some(other),
            }
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.cache.counters.watchers.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, rev: u64) -> Arc<WatchEvent> {
        let mut p = Pod::default();
        p.metadata.name = name.into();
        p.metadata.namespace = "default".into();
        p.metadata.resource_version = rev.to_string();
        Arc::new(WatchEvent::new(
            Change::Added,
            codec::key(Kind::Pod, "default", name),
            rev,
            Typed::Pod(Arc::new(p)),
            100,
        ))
    }

    fn names(t: &Taken) -> Vec<String> {
        t.events
            .iter()
            .map(|e| e.manifest().name().to_string())
            .collect()
    }

    const PODS: &str = "/registry/pods/";

    /// A watch from a revision inside the window gets the changes after
    /// it; one from before the window is Expired (410).
    #[test]
    fn a_watch_resumes_inside_the_window_and_expires_before_it() {
        let c = WatchCache::new(
            WatchWindow {
                events: 3,
                bytes: 1 << 20,
            },
            WatchCounters::default(),
        );
        c.reset(1);
        for rev in 2..=6 {
            c.push(vec![pod(&format!("p{rev}"), rev)], rev);
        }
        // The window holds revisions 4, 5 and 6 (every change after 3).
        let t = c.take(Kind::Pod, PODS, 4).unwrap();
        assert_eq!(names(&t), ["p5", "p6"]);
        assert_eq!(t.cursor, 6);
        assert_eq!(
            names(&c.take(Kind::Pod, PODS, 3).unwrap()),
            ["p4", "p5", "p6"]
        );
        let e = c.take(Kind::Pod, PODS, 2).err().expect("expired");
        assert_eq!((e.requested, e.oldest), (2, 3));
        assert!(e.message().contains("too old resource version: 2 (3)"));
        assert_eq!(c.counters.expired.get(), 1);
        // Another kind is not in the way; its cursor moves with the
        // informer.
        let t = c
            .take(Kind::Node, &codec::prefix(Kind::Node, None), 1)
            .unwrap();
        assert!(t.events.is_empty());
        assert_eq!(t.cursor, 6);
        // A namespace's watcher skips the others' changes.
        c.push(vec![pod("p7", 7)], 7);
        let t = c.take(Kind::Pod, "/registry/pods/other/", 6).unwrap();
        assert!(t.events.is_empty());
        assert_eq!(t.cursor, 7);
    }

    /// The bound in bytes holds as the bound in changes does.
    #[test]
    fn the_window_is_bounded_in_bytes() {
        let c = WatchCache::new(
            WatchWindow {
                events: 1000,
                bytes: 250,
            },
            WatchCounters::default(),
        );
        c.reset(1);
        for rev in 2..=10 {
            c.push(vec![pod(&format!("p{rev}"), rev)], rev);
        }
        assert_eq!(names(&c.take(Kind::Pod, PODS, 8).unwrap()), ["p9", "p10"]);
        assert!(c.take(Kind::Pod, PODS, 7).is_err());
    }

    /// A slow watcher does not hold the informer: pushes never wait, and
    /// the watcher that fell behind the window is Expired while one that
    /// kept up is not.
    #[test]
    fn a_slow_watcher_is_cut_and_the_others_go_on() {
        let c = WatchCache::new(
            WatchWindow {
                events: 4,
                bytes: 1 << 20,
            },
            WatchCounters::default(),
        );
        c.reset(1);
        let mut fast = 1;
        let slow = 1;
        for rev in 2..=20 {
            c.push(vec![pod(&format!("p{rev}"), rev)], rev);
            let t = c.take(Kind::Pod, PODS, fast).unwrap();
            assert_eq!(names(&t), [format!("p{rev}")]);
            fast = t.cursor;
        }
        assert_eq!(fast, 20);
        assert!(c.take(Kind::Pod, PODS, slow).is_err());
    }

    /// Taking stops at a revision's end, past WATCH_BATCH if need be.
    #[test]
    fn a_batch_ends_with_a_whole_revision() {
        let c = WatchCache::new(
            WatchWindow {
                events: 10_000,
                bytes: 1 << 30,
            },
            WatchCounters::default(),
        );
        c.reset(1);
        let mut rev2: Vec<_> = (0..WATCH_BATCH - 1)
            .map(|i| pod(&format!("a{i}"), 2))
            .collect();
        rev2.extend((0..3).map(|i| pod(&format!("b{i}"), 3)));
        c.push(rev2, 3);
        c.push(vec![pod("c", 4)], 4);
        let t = c.take(Kind::Pod, PODS, 1).unwrap();
        assert_eq!(t.events.len(), WATCH_BATCH + 2);
        assert_eq!(t.cursor, 3);
        let t = c.take(Kind::Pod, PODS, t.cursor).unwrap();
        assert_eq!(names(&t), ["c"]);
    }

    /// Every watcher shares one JSON encoding of a change.
    #[test]
    fn one_encoding_per_change_whatever_the_watchers() {
        let c = WatchCache::new(crate::limits::WATCH_WINDOW, WatchCounters::default());
        c.reset(1);
        for rev in 2..=11 {
            c.push(vec![pod(&format!("p{rev}"), rev)], rev);
        }
        for _ in 0..50 {
            let t = c.take(Kind::Pod, PODS, 1).unwrap();
            for e in &t.events {
                let v: Value = serde_json::from_slice(e.json(&c.counters)).unwrap();
                assert_eq!(v["metadata"]["resourceVersion"], e.revision.to_string());
            }
        }
        assert_eq!(c.counters.events.get(), 10);
        assert_eq!(c.counters.encodes.get(), 10);
    }
}
