//! The pod statuses one agent session reports, written by a task of their
//! own so that the session's reader never waits on the store.
//!
//! The reader answers every heartbeat at once; if it also waited for each
//! status report to be committed, a busy store (a DaemonSet's 10,000 pods
//! turning Running together) held every session's acknowledgements for
//! as long as a commit took, the agents heard nothing for their 3 s and
//! left (found at 3,000 sim nodes on a slowed server: 2,686 sessions lost
//! in 6 s, then a reconnect storm of TLS handshakes). The reader now only
//! puts the report into this queue: it keeps the latest status of each pod
//! (a newer report of a pod supersedes the one not yet written), so it
//! never holds more entries than the node has pods in flight, and a
//! writer task drains it in batches.

use crate::api::Objects;
use crate::cache::Informer;
use crate::error::ApiError;
use drover_api::{Kind, Manifest, Pod, PodStatus};
use drover_proto::v1 as pb;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Pods whose statuses one session holds unwritten; a report that would
/// add more waits for the writer (a node runs far fewer pods: 110 by
/// default in Kubernetes).
pub const MAX_PENDING: usize = 1024;

#[derive(Default)]
struct Pending {
    /// (namespace, name) → the latest report of that pod.
    pods: HashMap<(String, String), pb::PodStatusUpdate>,
    closed: bool,
}

/// One session's queue of statuses: [`StatusQueue::offer`] from the
/// reader, [`StatusQueue::run`] in the writer task.
#[derive(Default)]
pub struct StatusQueue {
    pending: Mutex<Pending>,
    /// Something was offered (to the writer).
    offered: Notify,
    /// The writer took a batch (to a reader waiting for room).
    drained: Notify,
}

impl StatusQueue {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Queues a report: each pod's entry replaces the one not yet written.
    /// Waits only when the queue would grow past [`MAX_PENDING`] pods.
    pub async fn offer(&self, report: pb::PodStatuses) {
        let mut rest = report.pods.into_iter().peekable();
        while rest.peek().is_some() {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            {
                let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
                if p.closed {
                    return;
                }
                while let Some(u) = rest.peek() {
                    let key = (u.namespace.clone(), u.name.clone());
                    if p.pods.len() >= MAX_PENDING && !p.pods.contains_key(&key) {
                        break;
                    }
                    if let Some(u) = rest.next() {
                        p.pods.insert(key, u);
                    }
                }
            }
            self.offered.notify_one();
            if rest.peek().is_some() {
                drained.await;
            }
        }
    }

    /// Takes everything queued (empty when nothing is).
    fn take(&self) -> Vec<pb::PodStatusUpdate> {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let batch: Vec<_> = p.pods.drain().map(|(_, u)| u).collect();
        drop(p);
        self.drained.notify_waiters();
        batch
    }

    /// Ends the queue: the writer stops after what it holds is written,
    /// and later offers are dropped (the session is over; the agent sends
    /// its statuses again on its next session).
    pub fn close(&self) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .closed = true;
        self.offered.notify_one();
        self.drained.notify_waiters();
    }

    /// The writer: writes each batch taken from the queue until it is
    /// closed and empty.
    pub async fn run(&self, objects: &Objects, cache: &Informer, node: &str) {
        loop {
            let batch = self.take();
            if batch.is_empty() {
                if self
                    .pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .closed
                {
                    return;
                }
                self.offered.notified().await;
                continue;
            }
            write(objects, cache, node, batch).await;
        }
    }
}

/// Writes reported pod statuses (compare-and-swap; a report for another
/// incarnation of the pod, or a deleted pod, is dropped). A node writes
/// only the status of pods bound to it, named by uid (NodeRestriction).
///
/// Each status is written typed onto the pod this member's cache holds, at
/// that pod's version: no read of the store and no JSON but the report's
/// and the write's. A pod that changed meanwhile (a conflict) takes the
/// general path, [`Objects::update_status`], which reads the store and
/// retries. A report equal to the cached status writes nothing.
async fn write(objects: &Objects, cache: &Informer, node: &str, pods: Vec<pb::PodStatusUpdate>) {
    let snap = cache.snapshot();
    let writes = pods.into_iter().map(|p| {
        let key = crate::api::key(Kind::Pod, &p.namespace, &p.name);
        let cached = snap
            .pods
            .get(&key)
            .filter(|pod| !p.uid.is_empty() && pod.spec.node_name == node && pod.metadata.uid == p.uid)
            .cloned();
        async move {
            let Some(cached) = cached else {
                tracing::warn!(node = %node, pod = %p.name, namespace = %p.namespace, "refused a status for a pod that is not bound to this node");
                return;
            };
            let status: PodStatus = match serde_json::from_slice(&p.status) {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(node = %node, pod = %p.name, "bad pod status: {e}");
                    return;
                }
            };
            if cached.status == status {
                // Already so here: the agent re-sent a report the store
                // holds (its confirmation, the push of the pod, is on its
                // way). Should this member's cache be behind a newer
                // status, the push of that one is what the agent sees next,
                // and it reports again if what runs differs.
                return;
            }
            let mut pod = Pod::clone(&cached);
            pod.status = status.clone();
            match objects.write_status_as_read(Manifest::Pod(Box::new(pod))).await {
                Ok(_) | Err(ApiError::NotFound(_)) => return,
                Err(ApiError::Conflict(_)) => {}
                Err(e) => {
                    tracing::debug!(node = %node, pod = %p.name, "status not written: {e}");
                    return;
                }
            }
            let status = match serde_json::to_value(&status) {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(node = %node, pod = %p.name, "pod status: {e}");
                    return;
                }
            };
            match objects
                .update_status(Kind::Pod, &p.namespace, &p.name, &p.uid, status)
                .await
            {
                Ok(_) | Err(ApiError::NotFound(_)) => {}
                Err(e) => tracing::debug!(node = %node, pod = %p.name, "status not written: {e}"),
            }
        }
    });
    futures_util::future::join_all(writes).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(name: &str, status: &str) -> pb::PodStatusUpdate {
        pb::PodStatusUpdate {
            namespace: "default".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            status: status.as_bytes().to_vec(),
        }
    }

    #[tokio::test]
    async fn a_newer_report_of_a_pod_replaces_the_unwritten_one() {
        let q = StatusQueue::new();
        q.offer(pb::PodStatuses {
            pods: vec![update("a", "1"), update("b", "1")],
        })
        .await;
        q.offer(pb::PodStatuses {
            pods: vec![update("a", "2")],
        })
        .await;
        let mut batch = q.take();
        batch.sort_by(|x, y| x.name.cmp(&y.name));
        let got: Vec<_> = batch
            .iter()
            .map(|u| {
                (
                    u.name.as_str(),
                    String::from_utf8_lossy(&u.status).into_owned(),
                )
            })
            .collect();
        assert_eq!(got, vec![("a", "2".to_string()), ("b", "1".to_string())]);
        assert!(q.take().is_empty());
    }

    #[tokio::test]
    async fn a_full_queue_holds_the_reader_until_the_writer_takes_a_batch() {
        let q = StatusQueue::new();
        let many = (0..MAX_PENDING + 10)
            .map(|i| update(&format!("p{i}"), "x"))
            .collect();
        let reader = {
            let q = q.clone();
            tokio::spawn(async move { q.offer(pb::PodStatuses { pods: many }).await })
        };
        // The reader fills the queue and waits for room.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while q.pending.lock().unwrap().pods.len() < MAX_PENDING {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the queue never filled"
            );
            tokio::task::yield_now().await;
        }
        assert!(!reader.is_finished());
        assert_eq!(q.take().len(), MAX_PENDING);
        tokio::time::timeout(std::time::Duration::from_secs(10), reader)
            .await
            .expect("the reader went on once the writer took a batch")
            .unwrap();
        assert_eq!(q.take().len(), 10);
    }

    #[tokio::test]
    async fn a_closed_queue_ends_its_writer_and_drops_later_reports() {
        let q = StatusQueue::new();
        q.close();
        q.offer(pb::PodStatuses {
            pods: vec![update("a", "1")],
        })
        .await;
        assert!(q.take().is_empty());
    }
}
