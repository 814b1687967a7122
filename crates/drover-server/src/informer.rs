//! An in-memory copy of the objects the controllers read (nodes,
//! DaemonSets, pods), kept current from this member's applied state: list
//! once, then follow the watch (and relist when it falls behind
//! compaction). Each object is decoded once, when it changes, so a
//! controller pass over thousands of nodes reads memory, not sled.
//!
//! Objects are kept behind `Arc`s and the view itself is copy-on-write: a
//! controller pass holds the view it started from (one `Arc` clone), and the
//! informer copies the maps (pointers, not objects) only when it must change
//! a view that a pass still holds.

use crate::objects::{self, Kind};
use drover_api::{DaemonSet, Manifest, Node, Pod};
use drover_store::{Consistency, Error as StoreError, EventType, KeyValue, Store};
use std::collections::BTreeMap;
use std::sync::Arc as Shared;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::watch;

/// What the informer holds, by store key.
#[derive(Default, Clone)]
pub struct Snapshot {
    pub nodes: BTreeMap<String, Shared<Node>>,
    pub daemon_sets: BTreeMap<String, Shared<DaemonSet>>,
    pub pods: BTreeMap<String, Shared<Pod>>,
    /// The store revision this view reflects.
    pub revision: u64,
}

impl Snapshot {
    fn apply(&mut self, kv: &KeyValue, deleted: bool) {
        let kind = kind_of_key(&kv.key);
        if deleted {
            match kind {
                Some(Kind::Node) => {
                    self.nodes.remove(&kv.key);
                }
                Some(Kind::DaemonSet) => {
                    self.daemon_sets.remove(&kv.key);
                }
                Some(Kind::Pod) => {
                    self.pods.remove(&kv.key);
                }
                _ => {}
            }
            return;
        }
        let m = match objects::decode(kv) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("informer: skipping {}: {}", kv.key, e.message());
                return;
            }
        };
        match m {
            Manifest::Node(n) => {
                self.nodes.insert(kv.key.clone(), Shared::new(*n));
            }
            Manifest::DaemonSet(d) => {
                self.daemon_sets.insert(kv.key.clone(), Shared::new(*d));
            }
            Manifest::Pod(p) => {
                self.pods.insert(kv.key.clone(), Shared::new(*p));
            }
            Manifest::ControllerRevision(_) | Manifest::Event(_) => {}
        }
    }
}

fn kind_of_key(key: &str) -> Option<Kind> {
    let plural = key.strip_prefix("/registry/")?.split('/').next()?;
    match plural {
        "nodes" => Some(Kind::Node),
        "daemonsets" => Some(Kind::DaemonSet),
        "pods" => Some(Kind::Pod),
        _ => None,
    }
}

/// The informer; cheap to clone.
#[derive(Clone)]
pub struct Informer {
    state: Arc<RwLock<Arc<Snapshot>>>,
    changed: watch::Sender<u64>,
}

impl Default for Informer {
    fn default() -> Self {
        Informer {
            state: Arc::default(),
            changed: watch::channel(0).0,
        }
    }
}

const PREFIXES: [Kind; 3] = [Kind::Node, Kind::DaemonSet, Kind::Pod];

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

    /// Waits until the view reflects `revision` (or `timeout` passes).
    pub async fn wait_for(&self, revision: u64, timeout: Duration) -> bool {
        let mut rx = self.subscribe();
        tokio::time::timeout(timeout, async {
            rx.wait_for(|r| *r >= revision).await.is_ok()
        })
        .await
        .unwrap_or(false)
    }

    /// Follows the store until `stop`.
    pub async fn run(self, store: Store, mut stop: watch::Receiver<bool>) {
        loop {
            // One list per kind, then one watch over /registry/ from the
            // lowest revision listed (events already seen are idempotent).
            let mut fresh = Snapshot::default();
            let mut from = u64::MAX;
            let mut failed = false;
            for kind in PREFIXES {
                match store
                    .list(&objects::prefix(kind, None), Consistency::Local)
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
            *self.state.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(fresh);
            self.changed.send_replace(from);
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
                    let s = Arc::make_mut(&mut guard);
                    for e in &batch.events {
                        if let Some(kv) = &e.kv {
                            s.apply(kv, e.r#type == EventType::Delete as i32);
                        }
                    }
                    s.revision = batch.revision;
                }
                self.changed.send_replace(batch.revision);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_kinds() {
        assert_eq!(kind_of_key("/registry/nodes/n1"), Some(Kind::Node));
        assert_eq!(kind_of_key("/registry/pods/default/p"), Some(Kind::Pod));
        assert_eq!(
            kind_of_key("/registry/daemonsets/default/d"),
            Some(Kind::DaemonSet)
        );
        assert_eq!(kind_of_key("/registry/events/default/e"), None);
        assert_eq!(kind_of_key("/other"), None);
    }
}
