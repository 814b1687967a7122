//! The one in-memory copy of the objects the server's loops and agent
//! sessions read (nodes, DaemonSets, Deployments, ReplicaSets, pods), kept current from this
//! member's applied state: list once, then follow the watch (and relist
//! when it falls behind compaction). Each object is decoded once, when it
//! changes, outside any lock, and kept behind an `Arc`; nothing is kept as
//! JSON (a pod is serialised only when it is sent to its agent).
//!
//! - [`Snapshot`]: the view the controllers read, copy-on-write. A pass
//!   holds the view it started from (one `Arc` clone); the informer copies
//!   the maps (pointers, not objects) only when it must change a view a
//!   pass still holds.
//! - The pods of each node, beside the view (not copied with it), for agent
//!   sessions: [`Informer::node_pods`], and [`Informer::subscribe_node`],
//!   which changes when a pod bound to the node is added, removed or
//!   changed, its status included: the push that follows a pod's status
//!   report is what tells its agent the report was written (an agent
//!   whose report is not shown back sends it again after 2 s; when status
//!   writes did not push, each agent re-sent every pod's status every 2 s
//!   for ever, 5,000 no-op writes a second at 10,000 nodes).

mod changes;
mod config;
pub mod window;

use crate::api::codec::{self, kind_of_key};
use config::ConfigIndex;
use drover_api::{ConfigMap, DaemonSet, Deployment, Kind, Manifest, Node, Pod, ReplicaSet, Secret};
use drover_store::{Consistency, Error as StoreError, EventType, KeyValue, Store};
use futures_util::FutureExt;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::watch;
use window::{Change, Typed, WatchCache, WatchEvent};

/// One kind's objects in a view, by store key: a persistent map (a B-tree
/// whose nodes are shared between versions), so a view is copied in O(1)
/// and a change copies only the nodes on the path to its key; the views
/// the controllers hold share the rest.
pub type Map<T> = imbl::OrdMap<String, Arc<T>>;

/// What the informer holds, by store key. Each kind's map is persistent
/// ([`Map`]): a change while a pass (or the controller's tracker) still
/// holds an older view copies a path of that kind's map, not the map, and a
/// change to nothing the view holds (an Event, a ControllerRevision, a
/// lease) copies no map at all, only the revision.
#[derive(Default, Clone)]
pub struct Snapshot {
    pub nodes: Map<Node>,
    pub daemon_sets: Map<DaemonSet>,
    /// Deployments and ReplicaSets, for their controllers.
    pub deployments: Map<Deployment>,
    pub replica_sets: Map<ReplicaSet>,
    pub pods: Map<Pod>,
    /// PriorityClasses, for daemon pods' priorities and preemption.
    pub priority_classes: Map<drover_api::PriorityClass>,
    /// ConfigMaps and Secrets, for the agent sessions of the nodes whose
    /// pods reference them.
    pub config_maps: Map<ConfigMap>,
    pub secrets: Map<Secret>,
    /// The store revision this view reflects.
    pub revision: u64,
}

/// One change of the store, decoded (outside the informer's locks), and
/// what the watch cache needs of it.
struct Decoded {
    object: Object,
    change: Change,
    revision: u64,
    /// The object's size as stored.
    bytes: usize,
}

/// The object of a [`Decoded`] change.
enum Object {
    Deleted(String),
    Node(String, Arc<Node>),
    DaemonSet(String, Arc<DaemonSet>),
    Deployment(String, Arc<Deployment>),
    ReplicaSet(String, Arc<ReplicaSet>),
    /// A pod, and the hash of what its agent acts on.
    Pod(String, Arc<Pod>),
    PriorityClass(String, Arc<drover_api::PriorityClass>),
    ConfigMap(String, Arc<ConfigMap>),
    Secret(String, Arc<Secret>),
    /// Another kind, or an object that does not decode (logged).
    Other,
}

impl Object {
    /// The store key of an object the view holds (`None` for another kind).
    fn key(&self) -> Option<&str> {
        match self {
            Object::Deleted(k)
            | Object::Node(k, _)
            | Object::DaemonSet(k, _)
            | Object::Deployment(k, _)
            | Object::ReplicaSet(k, _)
            | Object::Pod(k, _)
            | Object::PriorityClass(k, _)
            | Object::ConfigMap(k, _)
            | Object::Secret(k, _) => Some(k),
            Object::Other => None,
        }
    }
}

fn decode(kv: &KeyValue, deleted: bool) -> Decoded {
    let change = if deleted {
        Change::Deleted
    } else if kv.create_revision == kv.mod_revision {
        Change::Added
    } else {
        Change::Modified
    };
    Decoded {
        object: decode_object(kv, deleted),
        change,
        revision: kv.mod_revision,
        bytes: kv.value.len(),
    }
}

fn decode_object(kv: &KeyValue, deleted: bool) -> Object {
    let kind = kind_of_key(&kv.key);
    if !kind.is_some_and(|k| KINDS.contains(&k)) {
        return Object::Other;
    }
    if deleted {
        return Object::Deleted(kv.key.clone());
    }
    match codec::decode(kv) {
        Ok(Manifest::Node(n)) => Object::Node(kv.key.clone(), Arc::new(*n)),
        Ok(Manifest::DaemonSet(d)) => Object::DaemonSet(kv.key.clone(), Arc::new(*d)),
        Ok(Manifest::Deployment(d)) => Object::Deployment(kv.key.clone(), Arc::new(*d)),
        Ok(Manifest::ReplicaSet(r)) => Object::ReplicaSet(kv.key.clone(), Arc::new(*r)),
        Ok(Manifest::Pod(p)) => Object::Pod(kv.key.clone(), Arc::new(*p)),
        Ok(Manifest::PriorityClass(c)) => Object::PriorityClass(kv.key.clone(), Arc::new(*c)),
        Ok(Manifest::ConfigMap(c)) => Object::ConfigMap(kv.key.clone(), Arc::new(*c)),
        Ok(Manifest::Secret(c)) => Object::Secret(kv.key.clone(), Arc::new(*c)),
        Ok(_) => Object::Other,
        Err(e) => {
            tracing::warn!("informer: skipping {}: {e}", kv.key);
            Object::Other
        }
    }
}

impl Snapshot {
    /// The Node named `name`, if the view holds it.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes
            .get(&codec::key(Kind::Node, "", name))
            .map(|n| &**n)
    }

    /// The objects of `kind` (one of those the view holds) in `namespace`
    /// or all, that `keep` keeps, in store key order; `None` for a kind
    /// the view does not hold.
    pub fn objects(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        keep: impl Fn(&drover_api::ObjectMeta) -> bool,
    ) -> Option<Vec<Manifest>> {
        fn of<T>(
            map: &Map<T>,
            prefix: &str,
            keep: impl Fn(&drover_api::ObjectMeta) -> bool,
        ) -> Vec<Manifest>
        where
            T: drover_api::Resource + Clone,
            Manifest: From<T>,
        {
            map.range::<_, str>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(prefix))
            .filter(|(_, o)| keep(o.metadata()))
            .map(|(_, o)| Manifest::from(T::clone(o)))
            .collect()
        }
        let p = codec::prefix(kind, namespace);
        Some(match kind {
            Kind::Pod => of(&self.pods, &p, keep),
            Kind::Node => of(&self.nodes, &p, keep),
            Kind::DaemonSet => of(&self.daemon_sets, &p, keep),
            Kind::Deployment => of(&self.deployments, &p, keep),
            Kind::ReplicaSet => of(&self.replica_sets, &p, keep),
            Kind::PriorityClass => of(&self.priority_classes, &p, keep),
            Kind::ConfigMap => of(&self.config_maps, &p, keep),
            Kind::Secret => of(&self.secrets, &p, keep),
            _ => return None,
        })
    }

    /// The object at `key` as the view holds it, for the watch cache.
    fn typed(&self, key: &str) -> Option<Typed> {
        Some(match kind_of_key(key)? {
            Kind::Node => Typed::Node(self.nodes.get(key)?.clone()),
            Kind::DaemonSet => Typed::DaemonSet(self.daemon_sets.get(key)?.clone()),
            Kind::Deployment => Typed::Deployment(self.deployments.get(key)?.clone()),
            Kind::ReplicaSet => Typed::ReplicaSet(self.replica_sets.get(key)?.clone()),
            Kind::Pod => Typed::Pod(self.pods.get(key)?.clone()),
            Kind::PriorityClass => Typed::PriorityClass(self.priority_classes.get(key)?.clone()),
            Kind::ConfigMap => Typed::ConfigMap(self.config_maps.get(key)?.clone()),
            Kind::Secret => Typed::Secret(self.secrets.get(key)?.clone()),
            _ => return None,
        })
    }

    /// The watch cache's event of a change, before the view applies it
    /// (a deleted object is taken from the view).
    fn event(&self, d: &Decoded) -> Option<Arc<WatchEvent>> {
        let (key, object) = match &d.object {
            Object::Deleted(key) => (key, self.typed(key)?),
            Object::Node(key, o) => (key, Typed::Node(o.clone())),
            Object::DaemonSet(key, o) => (key, Typed::DaemonSet(o.clone())),
            Object::Deployment(key, o) => (key, Typed::Deployment(o.clone())),
            Object::ReplicaSet(key, o) => (key, Typed::ReplicaSet(o.clone())),
            Object::Pod(key, o) => (key, Typed::Pod(o.clone())),
            Object::PriorityClass(key, o) => (key, Typed::PriorityClass(o.clone())),
            Object::ConfigMap(key, o) => (key, Typed::ConfigMap(o.clone())),
            Object::Secret(key, o) => (key, Typed::Secret(o.clone())),
            Object::Other => return None,
        };
        Some(Arc::new(WatchEvent::new(
            d.change,
            key.clone(),
            d.revision,
            object,
            d.bytes,
        )))
    }

    /// Applies one decoded change (copying, if a reader holds it, only the
    /// map of the change's kind).
    fn apply(&mut self, d: &Decoded) {
        fn put<T>(map: &mut Map<T>, key: &str, v: &Arc<T>) {
            map.insert(key.to_owned(), v.clone());
        }
        fn remove<T>(map: &mut Map<T>, key: &str) {
            if map.contains_key(key) {
                map.remove(key);
            }
        }
        match &d.object {
            Object::Deleted(key) => {
                remove(&mut self.nodes, key);
                remove(&mut self.daemon_sets, key);
                remove(&mut self.deployments, key);
                remove(&mut self.replica_sets, key);
                remove(&mut self.pods, key);
                remove(&mut self.priority_classes, key);
                remove(&mut self.config_maps, key);
                remove(&mut self.secrets, key);
            }
            Object::ConfigMap(key, c) => put(&mut self.config_maps, key, c),
            Object::Secret(key, c) => put(&mut self.secrets, key, c),
            Object::Node(key, n) => put(&mut self.nodes, key, n),
            Object::DaemonSet(key, ds) => put(&mut self.daemon_sets, key, ds),
            Object::Deployment(key, d) => put(&mut self.deployments, key, d),
            Object::ReplicaSet(key, r) => put(&mut self.replica_sets, key, r),
            Object::Pod(key, p) => put(&mut self.pods, key, p),
            Object::PriorityClass(key, c) => put(&mut self.priority_classes, key, c),
            Object::Other => {}
        }
    }
}

/// The pods of every node, for agent sessions. Kept apart from the view
/// (and before it): a session learns of its pods as soon as the informer
/// reads them, however long copying a view still held by a controller pass
/// takes.
#[derive(Default)]
struct Nodes {
    /// node -> pod key -> pod.
    pods: HashMap<String, BTreeMap<String, Arc<Pod>>>,
    /// pod key -> its node.
    bound: HashMap<String, String>,
    /// node -> its sessions' notification (the revision of the change).
    versions: HashMap<String, watch::Sender<u64>>,
    /// node -> told (the revision) when that Node object changes or goes:
    /// what its agent sessions watch for their certificate's binding (one
    /// node's write wakes only its own sessions, not all 10,000).
    objects: HashMap<String, watch::Sender<u64>>,
    /// The revision the index reflects.
    revision: u64,
    /// The ConfigMaps and Secrets, and the pods that reference each.
    config: ConfigIndex,
}

impl Nodes {
    fn bump(&mut self, node: &str, revision: u64) {
        if node.is_empty() {
            return;
        }
        self.versions
            .entry(node.to_string())
            .or_insert_with(|| watch::channel(0).0)
            .send_replace(revision);
    }

    /// Tells the sessions of node `name` that its Node object changed.
    fn bump_object(&mut self, name: &str, revision: u64) {
        if let Some(tx) = self.objects.get(name) {
            tx.send_replace(revision);
        }
    }

    /// Bumps the nodes of these pods (a ConfigMap or Secret they use
    /// changed).
    fn bump_pods(&mut self, pods: Vec<String>, revision: u64) {
        let nodes: HashSet<String> = pods
            .iter()
            .filter_map(|p| self.bound.get(p).cloned())
            .collect();
        for n in nodes {
            self.bump(&n, revision);
        }
    }

    fn unbind(&mut self, key: &str, revision: u64) {
        self.config.pod_changed(key, None);
        if let Some(node) = self.bound.remove(key) {
            if let Some(pods) = self.pods.get_mut(&node) {
                pods.remove(key);
                if pods.is_empty() {
                    self.pods.remove(&node);
                }
            }
            self.bump(&node, revision);
        }
    }

    /// Notes a change; bumps the nodes whose desired pods changed.
    fn change(&mut self, d: &Decoded, revision: u64) {
        match &d.object {
            Object::Deleted(key) => {
                if let Some(name) = key.strip_prefix(&codec::prefix(Kind::Node, None)) {
                    self.bump_object(name, revision);
                }
                self.unbind(key, revision);
                let pods = self.config.deleted(key);
                self.bump_pods(pods, revision);
            }
            Object::Node(_, n) => self.bump_object(&n.metadata.name, revision),
            Object::ConfigMap(key, c) => {
                let pods = self.config.config_map(key, c.clone());
                self.bump_pods(pods, revision);
            }
            Object::Secret(key, c) => {
                let pods = self.config.secret(key, c.clone());
                self.bump_pods(pods, revision);
            }
            Object::Pod(key, new) => {
                let node = new.spec.node_name.as_str();
                if self.bound.get(key).is_some_and(|n| n != node) || node.is_empty() {
                    self.unbind(key, revision);
                }
                if node.is_empty() {
                    return;
                }
                self.pods
                    .entry(node.to_string())
                    .or_default()
                    .insert(key.clone(), new.clone());
                self.bound.insert(key.clone(), node.to_string());
                self.config.pod_changed(key, Some(new));
                self.bump(node, revision);
            }
            _ => {}
        }
    }
}

/// What a node's agent is sent: [`Informer::node_view`].
pub struct NodeView {
    pub pods: Vec<Arc<Pod>>,
    pub config_maps: Vec<Arc<ConfigMap>>,
    pub secrets: Vec<Arc<Secret>>,
    pub revision: u64,
}

/// The informer; cheap to clone.
#[derive(Clone)]
pub struct Informer {
    state: Arc<RwLock<Arc<Snapshot>>>,
    nodes: Arc<Mutex<Nodes>>,
    changed: watch::Sender<u64>,
    /// Told (the revision) only when an object the view holds changed: what
    /// the controllers plan from. A write of anything else (the events
    /// they record, ControllerRevisions) does not wake them.
    view_changed: watch::Sender<u64>,
    /// The recent changes of the view as (revision, key) ([`changes`]),
    /// recorded before `view_changed` tells them.
    view_changes: Arc<Mutex<changes::ViewChanges>>,
    loaded: watch::Sender<bool>,
    /// The recent changes, for watches ([`window`]).
    window: Arc<WatchCache>,
}

impl Default for Informer {
    fn default() -> Self {
        Informer::new(
            crate::limits::WATCH_WINDOW,
            crate::metrics::WatchCounters::default(),
        )
    }
}

const KINDS: [Kind; 8] = [
    Kind::Node,
    Kind::DaemonSet,
    Kind::Deployment,
    Kind::ReplicaSet,
    Kind::Pod,
    Kind::PriorityClass,
    Kind::ConfigMap,
    Kind::Secret,
];

/// How long a consistent read waits for the view to reach the store's
/// last change before its reader goes to the store
/// ([`Informer::consistent_view`]).
const CATCH_UP: Duration = Duration::from_secs(1);

/// Changes applied at once at most, when the informer catches up.
const MAX_COALESCED: usize = 4096;

impl Informer {
    /// An informer whose watch cache keeps `window` of each kind and
    /// counts into `counters`.
    pub fn new(
        window: crate::limits::WatchWindow,
        counters: crate::metrics::WatchCounters,
    ) -> Self {
        Informer {
            state: Arc::default(),
            nodes: Arc::default(),
            changed: watch::channel(0).0,
            view_changed: watch::channel(0).0,
            view_changes: Arc::default(),
            loaded: watch::channel(false).0,
            window: Arc::new(WatchCache::new(window, counters)),
        }
    }

    /// The watch cache, for watches of the kinds the view holds; `None`
    /// until the first list is loaded.
    pub fn watch_cache(&self, kind: Kind) -> Option<&Arc<WatchCache>> {
        (KINDS.contains(&kind) && self.is_loaded()).then_some(&self.window)
    }

    /// The current view (shared: it does not change under the caller).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The revision the view reflects.
    pub fn revision(&self) -> u64 {
        self.state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .revision
    }

    /// Changes (to the revision) whenever the view changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Changes (to the revision) whenever an object of the view changes,
    /// not for writes of kinds the view does not hold (events): what a
    /// controller that plans from the view waits on.
    pub fn subscribe_view(&self) -> watch::Receiver<u64> {
        self.view_changed.subscribe()
    }

    /// Whether every change of the view after revision `since`, up to `to`
    /// (a value [`Informer::subscribe_view`] gave), was one of `ours`
    /// (revision and store key): false when anything else changed, or when
    /// the changes since `since` are no longer known.
    pub fn view_changed_only_at(&self, since: u64, to: u64, ours: &[(u64, String)]) -> bool {
        self.view_changes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .only_at(since, to, ours)
    }

    /// Waits until the view reflects `revision` (or `timeout` passes);
    /// false when it did not in time.
    pub async fn wait_for(&self, revision: u64, timeout: Duration) -> bool {
        let mut rx = self.subscribe();
        tokio::time::timeout(timeout, async {
            rx.wait_for(|r| *r >= revision).await.is_ok()
        })
        .await
        .unwrap_or(false)
    }

    /// The view, at least as new as every write acknowledged before the
    /// call, for a reader that would otherwise list `kind` from the store
    /// (a linearizable read served from memory, as the Kubernetes API
    /// server's consistent reads from its watch cache): a raft ReadIndex
    /// round gives the store's last change, and the view must reach it
    /// within [`CATCH_UP`]. `None` when the view does not hold `kind`, has
    /// not loaded, or is later than that: the caller reads the store.
    pub async fn consistent_view(
        &self,
        ctx: &crate::ctx::Ctx,
        kind: Kind,
    ) -> Result<Option<Arc<Snapshot>>, crate::error::ApiError> {
        if !KINDS.contains(&kind) || !self.is_loaded() {
            return Ok(None);
        }
        let store = &ctx.store;
        let revision = ctx.read(|| store.consistent_revision()).await?;
        let view = self.view_at(revision, CATCH_UP).await;
        if view.is_none() {
            tracing::info!(
                "a list of {} reads the store: the informer holds revision {}, the store is at {revision}",
                kind.resource(),
                self.revision()
            );
        }
        Ok(view)
    }

    /// The view once it reflects `revision`; `None` if it does not within
    /// `wait`.
    async fn view_at(&self, revision: u64, wait: Duration) -> Option<Arc<Snapshot>> {
        if !self.wait_for(revision, wait).await {
            return None;
        }
        let view = self.snapshot();
        (view.revision >= revision).then_some(view)
    }

    /// Waits until the view holds `revision`, however long that takes,
    /// warning every `warn_every` while it waits (with the revision it
    /// holds): a controller must never plan on a view without its own
    /// writes, or it would do them again (a second pod on a node). Whoever
    /// runs it cancels it (leadership lost, server stopping).
    pub async fn hold(&self, revision: u64, warn_every: Duration) {
        while !self.wait_for(revision, warn_every).await {
            tracing::warn!(
                "the controllers wait for their view to reach revision {revision} (it holds {}): the informer is behind the store",
                self.snapshot().revision
            );
        }
    }

    /// Waits until the informer holds its first list (false when it stops
    /// first).
    /// Whether the first list has been loaded.
    pub fn is_loaded(&self) -> bool {
        *self.loaded.borrow()
    }

    pub async fn wait_loaded(&self) -> bool {
        let mut rx = self.loaded.subscribe();
        let loaded = rx.wait_for(|l| *l).await.is_ok();
        loaded
    }

    fn lock_nodes(&self) -> std::sync::MutexGuard<'_, Nodes> {
        self.nodes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The pods bound to `node`, and the revision they reflect.
    pub fn node_pods(&self, node: &str) -> (Vec<Arc<Pod>>, u64) {
        let n = self.lock_nodes();
        let pods = n
            .pods
            .get(node)
            .map(|p| p.values().cloned().collect())
            .unwrap_or_default();
        (pods, n.revision)
    }

    /// The pods bound to `node`, the ConfigMaps and Secrets they reference
    /// (only those: what a node may read), and the revision they reflect;
    /// one consistent view.
    pub fn node_view(&self, node: &str) -> NodeView {
        let n = self.lock_nodes();
        let pods: Vec<Arc<Pod>> = n
            .pods
            .get(node)
            .map(|p| p.values().cloned().collect())
            .unwrap_or_default();
        let (config_maps, secrets) = n.config.for_pods(pods.iter());
        NodeView {
            pods,
            config_maps,
            secrets,
            revision: n.revision,
        }
    }

    /// Changes whenever what the agent of `node` must run changes (its
    /// pods, or a ConfigMap or Secret they reference).
    pub fn subscribe_node(&self, node: &str) -> watch::Receiver<u64> {
        let mut n = self.lock_nodes();
        let rev = n.revision;
        n.versions
            .entry(node.to_string())
            .or_insert_with(|| watch::channel(rev).0)
            .subscribe()
    }

    /// Follows the store until `stop`.
    pub async fn run(self, store: Store, mut stop: watch::Receiver<bool>) {
        loop {
            // One list per kind, then one watch over every key from the
            // lowest revision listed (events already seen are idempotent).
            // Every key, not only objects: the view's revision then reaches
            // the store's last change whatever it changed, which is what a
            // consistent read from the view waits for
            // (`Store::consistent_revision`).
            let mut fresh = Snapshot::default();
            let mut from = u64::MAX;
            let mut failed = false;
            for kind in KINDS {
                match store
                    .list(&codec::prefix(kind, None), Consistency::Local)
                    .await
                {
                    Ok((kvs, rev)) => {
                        for kv in &kvs {
                            fresh.apply(&decode(kv, false));
                        }
                        from = from.min(rev);
                    }
                    Err(StoreError::Stopped | StoreError::Removed) => return,
                    Err(e) => {
                        tracing::warn!("informer: cannot list: {e}");
                        failed = true;
                        break;
                    }
                }
            }
            if failed {
                tokio::select! {
                    _ = stop.wait_for(|s| *s) => return,
                    _ = tokio::time::sleep(Duration::from_millis(200)) => continue,
                }
            }
            fresh.revision = from;
            self.replace(fresh);
            let mut w = match store.watch("", from) {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!("informer: cannot watch: {e}");
                    continue;
                }
            };
            loop {
                let batch = tokio::select! {
                    _ = stop.wait_for(|s| *s) => return,
                    b = w.next() => b,
                };
                let mut batch = batch;
                let mut decoded = Vec::new();
                let mut revision = 0;
                // Take every batch that is ready: when the informer is
                // behind, the view is copied once for all of them.
                let failed = loop {
                    let b = match batch {
                        Ok(b) => b,
                        Err(e) => break Some(e),
                    };
                    decoded.extend(b.events.iter().filter_map(|e| {
                        let kv = e.kv.as_ref()?;
                        Some(decode(kv, e.r#type == EventType::Delete as i32))
                    }));
                    revision = b.revision;
                    if decoded.len() >= MAX_COALESCED {
                        break None;
                    }
                    match w.next().now_or_never() {
                        Some(next) => batch = next,
                        None => break None,
                    }
                };
                if revision > 0 {
                    self.apply(&decoded, revision);
                }
                match failed {
                    None => {}
                    Some(StoreError::Stopped | StoreError::Removed) => return,
                    Some(e) => {
                        tracing::info!("informer: relisting ({e})");
                        break;
                    }
                }
            }
        }
    }

    /// Applies decoded changes up to `revision`: first to the view, then
    /// to the node index, which tells the sessions. A session pushes its
    /// node's pods as soon as it is told, and what the agent then says of
    /// a pod (its status) is checked against the view, which must already
    /// hold it: the other order had a fast agent's statuses refused as
    /// "not bound to this node" (and resent only 10 s later).
    fn apply(&self, batch: &[Decoded], revision: u64) {
        let mut events = Vec::new();
        let view_changed = batch.iter().any(|d| !matches!(d.object, Object::Other));
        {
            let mut guard = self.state.write().unwrap_or_else(|e| e.into_inner());
            let s = Arc::make_mut(&mut guard);
            for d in batch {
                events.extend(s.event(d));
                s.apply(d);
            }
            s.revision = revision;
        }
        {
            let mut nodes = self.lock_nodes();
            for d in batch {
                nodes.change(d, revision);
            }
            nodes.revision = revision;
        }
        self.window.push(events, revision);
        if view_changed {
            let mut changes = self.view_changes.lock().unwrap_or_else(|e| e.into_inner());
            for d in batch {
                if let Some(key) = d.object.key() {
                    changes.push(d.revision, key);
                }
            }
            drop(changes);
            self.view_changed.send_replace(revision);
        }
        self.changed.send_replace(revision);
    }

    /// Tells when the Node object `node` changes or goes (the revision);
    /// changes of other Nodes do not wake it.
    pub fn subscribe_node_object(&self, node: &str) -> watch::Receiver<u64> {
        let mut n = self.lock_nodes();
        let rev = n.revision;
        n.objects
            .entry(node.to_string())
            .or_insert_with(|| watch::channel(rev).0)
            .subscribe()
    }

    /// Installs a freshly listed view: every node whose pods may differ is
    /// told.
    fn replace(&self, fresh: Snapshot) {
        let rev = fresh.revision;
        let mut by_node: HashMap<String, BTreeMap<String, Arc<Pod>>> = HashMap::new();
        let mut bound = HashMap::new();
        for (key, p) in fresh.pods.iter() {
            if !p.spec.node_name.is_empty() {
                bound.insert(key.clone(), p.spec.node_name.clone());
                by_node
                    .entry(p.spec.node_name.clone())
                    .or_default()
                    .insert(key.clone(), p.clone());
            }
        }
        {
            let mut guard = self.state.write().unwrap_or_else(|e| e.into_inner());
            let mut nodes = self.lock_nodes();
            let mut touched: HashSet<String> = nodes.pods.keys().cloned().collect();
            touched.extend(by_node.keys().cloned());
            nodes.pods = by_node;
            nodes.bound = bound;
            nodes
                .config
                .reset(&fresh.config_maps, &fresh.secrets, &fresh.pods);
            nodes.revision = rev;
            *guard = Arc::new(fresh);
            self.window.reset(rev);
            for n in touched {
                nodes.bump(&n, rev);
            }
            // Any Node may have changed or gone.
            for tx in nodes.objects.values() {
                tx.send_replace(rev);
            }
        }
        self.view_changes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .reset(rev);
        self.view_changed.send_replace(rev);
        self.changed.send_replace(rev);
        self.loaded.send_replace(true);
    }
}

#[cfg(test)]
mod tests;
