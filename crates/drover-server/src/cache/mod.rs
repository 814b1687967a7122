//! The one in-memory copy of the objects the server's loops and agent
//! sessions read (nodes, DaemonSets, pods), kept current from this
//! member's applied state: list once, then follow the watch (and relist
//! when it falls behind compaction). Each object is decoded once, when it
//! changes, and kept behind an `Arc`; nothing is kept as JSON (a pod is
//! serialised only when it is sent to its agent).
//!
//! - [`Snapshot`]: the view, copy-on-write. A controller pass holds the
//!   view it started from (one `Arc` clone); the informer copies the maps
//!   (pointers, not objects) only when it must change a view a pass still
//!   holds. Pods are indexed by node ([`Snapshot::pods_on`]) and by
//!   controller ([`Snapshot::pods_of`]).
//! - Agent sessions subscribe to their node ([`Informer::subscribe_node`]):
//!   it changes when a pod bound to the node is added, removed or changes
//!   in what the agent must act on (anything but status and
//!   resourceVersion; a pod's own status report does not push the node's
//!   pods again).

use crate::api::codec::{self, kind_of_key};
use drover_api::{DaemonSet, Kind, Manifest, Node, Pod};
use drover_store::{Consistency, Error as StoreError, EventType, KeyValue, Store};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::watch;

/// What the informer holds, by store key.
#[derive(Default, Clone)]
pub struct Snapshot {
    pub nodes: BTreeMap<String, Arc<Node>>,
    pub daemon_sets: BTreeMap<String, Arc<DaemonSet>>,
    pub pods: BTreeMap<String, Arc<Pod>>,
    /// node name -> keys of the pods bound to it.
    by_node: HashMap<String, BTreeSet<String>>,
    /// controller uid -> keys of the pods it controls.
    by_owner: HashMap<String, BTreeSet<String>>,
    /// The store revision this view reflects.
    pub revision: u64,
}

fn owner_of(p: &Pod) -> Option<&str> {
    p.metadata.controller_ref().map(|o| o.uid.as_str())
}

fn index_add(index: &mut HashMap<String, BTreeSet<String>>, at: &str, key: &str) {
    if !at.is_empty() {
        index
            .entry(at.to_string())
            .or_default()
            .insert(key.to_string());
    }
}

fn index_remove(index: &mut HashMap<String, BTreeSet<String>>, at: &str, key: &str) {
    if let Some(keys) = index.get_mut(at) {
        keys.remove(key);
        if keys.is_empty() {
            index.remove(at);
        }
    }
}

impl Snapshot {
    /// The pods bound to `node`.
    pub fn pods_on<'a>(&'a self, node: &str) -> impl Iterator<Item = &'a Arc<Pod>> + 'a {
        self.by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|k| self.pods.get(k))
    }

    /// The pods whose controller has uid `owner`.
    pub fn pods_of<'a>(&'a self, owner: &str) -> impl Iterator<Item = &'a Arc<Pod>> + 'a {
        self.by_owner
            .get(owner)
            .into_iter()
            .flatten()
            .filter_map(|k| self.pods.get(k))
    }

    /// The controller uids that control at least one pod.
    pub fn pod_owners(&self) -> impl Iterator<Item = &str> {
        self.by_owner.keys().map(String::as_str)
    }

    fn remove_pod(&mut self, key: &str) -> Option<Arc<Pod>> {
        let old = self.pods.remove(key)?;
        index_remove(&mut self.by_node, &old.spec.node_name, key);
        if let Some(o) = owner_of(&old) {
            index_remove(&mut self.by_owner, o, key);
        }
        Some(old)
    }

    fn put_pod(&mut self, key: &str, pod: Arc<Pod>) -> Option<Arc<Pod>> {
        let old = self.remove_pod(key);
        index_add(&mut self.by_node, &pod.spec.node_name, key);
        if let Some(o) = owner_of(&pod) {
            index_add(&mut self.by_owner, o, key);
        }
        self.pods.insert(key.to_string(), pod);
        old
    }

    /// Applies one change; answers the pod it replaced or removed and the
    /// pod now there, for the node notifications.
    fn apply(&mut self, kv: &KeyValue, deleted: bool) -> PodChange {
        let kind = kind_of_key(&kv.key);
        if deleted {
            match kind {
                Some(Kind::Node) => {
                    self.nodes.remove(&kv.key);
                }
                Some(Kind::DaemonSet) => {
                    self.daemon_sets.remove(&kv.key);
                }
                Some(Kind::Pod) => return PodChange::Removed(self.remove_pod(&kv.key)),
                _ => {}
            }
            return PodChange::None;
        }
        if !matches!(kind, Some(Kind::Node | Kind::DaemonSet | Kind::Pod)) {
            return PodChange::None;
        }
        let m = match codec::decode(kv) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("informer: skipping {}: {e}", kv.key);
                return PodChange::None;
            }
        };
        match m {
            Manifest::Node(n) => {
                self.nodes.insert(kv.key.clone(), Arc::new(*n));
            }
            Manifest::DaemonSet(d) => {
                self.daemon_sets.insert(kv.key.clone(), Arc::new(*d));
            }
            Manifest::Pod(p) => {
                let new = Arc::new(*p);
                let old = self.put_pod(&kv.key, new.clone());
                return PodChange::Put(old, new);
            }
            Manifest::ControllerRevision(_) | Manifest::Event(_) => {}
        }
        PodChange::None
    }
}

enum PodChange {
    None,
    Removed(Option<Arc<Pod>>),
    Put(Option<Arc<Pod>>, Arc<Pod>),
}

/// A hash of a pod as far as its agent must act on it: without status and
/// resourceVersion.
fn desired_hash(p: &Pod) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut v = serde_json::to_value(p).unwrap_or(serde_json::Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
        if let Some(m) = o.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            m.remove("resourceVersion");
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    h.finish()
}

/// What agent sessions follow, beside the view.
#[derive(Default)]
struct Nodes {
    /// pod key -> the hash of what its agent acts on.
    desired: HashMap<String, u64>,
    /// node -> its sessions' notification (the revision of the change).
    versions: HashMap<String, watch::Sender<u64>>,
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

    /// Notes a pod change; bumps the nodes whose desired pods changed.
    fn change(&mut self, key: &str, change: PodChange, revision: u64) {
        match change {
            PodChange::None => {}
            PodChange::Removed(old) => {
                self.desired.remove(key);
                if let Some(old) = old {
                    self.bump(&old.spec.node_name, revision);
                }
            }
            PodChange::Put(old, new) => {
                let moved = old
                    .as_ref()
                    .filter(|o| o.spec.node_name != new.spec.node_name);
                if let Some(o) = moved {
                    self.bump(&o.spec.node_name, revision);
                }
                if new.spec.node_name.is_empty() {
                    self.desired.remove(key);
                    return;
                }
                let h = desired_hash(&new);
                if moved.is_some() || self.desired.insert(key.to_string(), h) != Some(h) {
                    self.desired.insert(key.to_string(), h);
                    self.bump(&new.spec.node_name, revision);
                }
            }
        }
    }
}

/// The informer; cheap to clone.
#[derive(Clone)]
pub struct Informer {
    state: Arc<RwLock<Arc<Snapshot>>>,
    nodes: Arc<Mutex<Nodes>>,
    changed: watch::Sender<u64>,
    loaded: watch::Sender<bool>,
}

impl Default for Informer {
    fn default() -> Self {
        Informer {
            state: Arc::default(),
            nodes: Arc::default(),
            changed: watch::channel(0).0,
            loaded: watch::channel(false).0,
        }
    }
}

const KINDS: [Kind; 3] = [Kind::Node, Kind::DaemonSet, Kind::Pod];

impl Informer {
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

    /// Waits until the informer holds its first list (false when it stops
    /// first).
    pub async fn wait_loaded(&self) -> bool {
        let mut rx = self.loaded.subscribe();
        let loaded = rx.wait_for(|l| *l).await.is_ok();
        loaded
    }

    /// The pods bound to `node`, and the revision of the view.
    pub fn node_pods(&self, node: &str) -> (Vec<Arc<Pod>>, u64) {
        let view = self.snapshot();
        (view.pods_on(node).cloned().collect(), view.revision)
    }

    /// Changes whenever what the agent of `node` must run changes.
    pub fn subscribe_node(&self, node: &str) -> watch::Receiver<u64> {
        let rev = self.revision();
        self.nodes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .versions
            .entry(node.to_string())
            .or_insert_with(|| watch::channel(rev).0)
            .subscribe()
    }

    /// Follows the store until `stop`.
    pub async fn run(self, store: Store, mut stop: watch::Receiver<bool>) {
        loop {
            // One list per kind, then one watch over /registry/ from the
            // lowest revision listed (events already seen are idempotent).
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
                            fresh.apply(kv, false);
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
            let mut w = match store.watch("/registry/", from) {
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
                let batch = match batch {
                    Ok(b) => b,
                    Err(StoreError::Stopped | StoreError::Removed) => return,
                    Err(e) => {
                        tracing::info!("informer: relisting ({e})");
                        break;
                    }
                };
                {
                    let mut guard = self.state.write().unwrap_or_else(|e| e.into_inner());
                    let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
                    let s = Arc::make_mut(&mut guard);
                    for e in &batch.events {
                        if let Some(kv) = &e.kv {
                            let change = s.apply(kv, e.r#type == EventType::Delete as i32);
                            nodes.change(&kv.key, change, batch.revision);
                        }
                    }
                    s.revision = batch.revision;
                }
                self.changed.send_replace(batch.revision);
            }
        }
    }

    /// Installs a freshly listed view: every node whose pods may differ is
    /// told.
    fn replace(&self, fresh: Snapshot) {
        let rev = fresh.revision;
        {
            let mut guard = self.state.write().unwrap_or_else(|e| e.into_inner());
            let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
            let mut touched: HashSet<String> = guard.by_node.keys().cloned().collect();
            nodes.desired.clear();
            for (key, p) in &fresh.pods {
                if !p.spec.node_name.is_empty() {
                    nodes.desired.insert(key.clone(), desired_hash(p));
                    touched.insert(p.spec.node_name.clone());
                }
            }
            *guard = Arc::new(fresh);
            for n in touched {
                nodes.bump(&n, rev);
            }
        }
        self.changed.send_replace(rev);
        self.loaded.send_replace(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::OwnerReference;

    fn pod_kv(name: &str, node: &str, owner: Option<&str>, rev: u64, image: &str) -> KeyValue {
        let mut p = Pod::default();
        p.metadata.name = name.into();
        p.metadata.namespace = "default".into();
        p.metadata.uid = format!("uid-{name}");
        p.spec.node_name = node.into();
        p.spec.containers = vec![drover_api::Container {
            name: "c".into(),
            image: image.into(),
            ..Default::default()
        }];
        if let Some(o) = owner {
            p.metadata.owner_references = vec![OwnerReference {
                kind: "DaemonSet".into(),
                uid: o.into(),
                controller: Some(true),
                ..Default::default()
            }];
        }
        KeyValue {
            key: codec::key(Kind::Pod, "default", name),
            value: codec::encode(&Manifest::Pod(Box::new(p))).unwrap(),
            create_revision: rev,
            mod_revision: rev,
        }
    }

    #[test]
    fn pods_are_indexed_by_node_and_owner() {
        let mut s = Snapshot::default();
        s.apply(&pod_kv("a", "n1", Some("ds1"), 2, "x"), false);
        s.apply(&pod_kv("b", "n1", None, 3, "x"), false);
        s.apply(&pod_kv("c", "n2", Some("ds1"), 4, "x"), false);
        let on = |s: &Snapshot, n: &str| {
            s.pods_on(n)
                .map(|p| p.metadata.name.clone())
                .collect::<Vec<_>>()
        };
        let of = |s: &Snapshot, o: &str| {
            s.pods_of(o)
                .map(|p| p.metadata.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(on(&s, "n1"), ["a", "b"]);
        assert_eq!(of(&s, "ds1"), ["a", "c"]);
        // A pod that moves and loses its owner leaves both indexes.
        s.apply(&pod_kv("a", "n2", None, 5, "x"), false);
        assert_eq!(on(&s, "n1"), ["b"]);
        assert_eq!(on(&s, "n2"), ["a", "c"]);
        assert_eq!(of(&s, "ds1"), ["c"]);
        let c = pod_kv("c", "n2", None, 6, "x");
        s.apply(&c, true);
        assert_eq!(on(&s, "n2"), ["a"]);
        assert!(of(&s, "ds1").is_empty());
        assert_eq!(s.pod_owners().count(), 0);
        assert_eq!(
            s.pods["/registry/pods/default/a"].metadata.resource_version,
            "5"
        );
    }

    #[test]
    fn nodes_are_told_only_when_their_desired_pods_change() {
        let mut s = Snapshot::default();
        let mut n = Nodes::default();
        let rx1 = {
            n.versions.insert("n1".into(), watch::channel(0).0);
            n.versions["n1"].subscribe()
        };
        let kv = pod_kv("a", "n1", None, 2, "x");
        let ch = s.apply(&kv, false);
        n.change(&kv.key, ch, 2);
        assert_eq!(*rx1.borrow(), 2);
        // Same pod, new resourceVersion and status only: no push.
        let mut kv3 = pod_kv("a", "n1", None, 3, "x");
        let Manifest::Pod(mut p) = codec::decode(&kv3).unwrap() else {
            unreachable!()
        };
        p.status.phase = Some(drover_api::PodPhase::Running);
        kv3.value = codec::encode(&Manifest::Pod(p)).unwrap();
        let ch = s.apply(&kv3, false);
        n.change(&kv3.key, ch, 3);
        assert_eq!(*rx1.borrow(), 2);
        // A new image: push.
        let kv4 = pod_kv("a", "n1", None, 4, "y");
        let ch = s.apply(&kv4, false);
        n.change(&kv4.key, ch, 4);
        assert_eq!(*rx1.borrow(), 4);
        // Moved to n2: n1 is told (and n2 gets a channel).
        let kv5 = pod_kv("a", "n2", None, 5, "y");
        let ch = s.apply(&kv5, false);
        n.change(&kv5.key, ch, 5);
        assert_eq!(*rx1.borrow(), 5);
        assert_eq!(*n.versions["n2"].borrow(), 5);
        // Deleted: n2 is told.
        let ch = s.apply(&kv5, true);
        n.change(&kv5.key, ch, 6);
        assert_eq!(*n.versions["n2"].borrow(), 6);
        assert!(n.desired.is_empty());
    }
}
