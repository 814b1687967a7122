//! The sync loop's side of static pods: the manifest dir's pods
//! ([`crate::static_pods`] reads and watches it) join the node's pods, and
//! the `StaticPods` report to the server is kept in step with the mirror
//! pods its pod list shows.

use super::shared::AbortOnDrop;
use crate::plan::PodBook;
use crate::static_pods::{self, Scan};
use drover_api::Pod;
use drover_proto::v1::{self as pb, agent_message};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;

/// `--manifest-dir`, its watcher, and the static pods' report to the
/// server with whether the server's mirror pods are in step with it.
#[derive(Default)]
pub(super) struct Statics {
    /// `--manifest-dir` and what it held at start, until the loop starts
    /// the watcher.
    dir: Option<(PathBuf, Scan)>,
    rx: Option<mpsc::Receiver<Vec<Pod>>>,
    watch: Option<AbortOnDrop>,
    /// The report must be sent.
    pending: bool,
    /// When it was last sent, until the node's pod list shows every mirror.
    sent_at: Option<SystemTime>,
    /// The static pod uids the server's last pod list had mirrors for.
    mirrors: Option<HashSet<String>>,
}

impl Statics {
    /// Follows `dir` (read as `scan`) once the loop runs.
    pub(super) fn set_dir(&mut self, dir: PathBuf, scan: Scan) {
        self.dir = Some((dir, scan));
    }

    /// Starts the watcher of the manifest dir, if there is one.
    pub(super) fn start_watch(&mut self, name: &str, every: Duration) {
        if let Some((dir, scan)) = self.dir.take() {
            let (tx, rx) = mpsc::channel(4);
            let task = tokio::spawn(static_pods::watch(dir, name.to_string(), every, scan, tx));
            self.rx = Some(rx);
            self.watch = Some(AbortOnDrop(task));
        }
    }

    /// Stops the watcher.
    pub(super) fn stop_watch(&mut self) {
        self.watch = None;
    }

    /// The manifest dir's pods when they change (pending without a dir).
    pub(super) async fn recv(&mut self) -> Option<Vec<Pod>> {
        match &mut self.rx {
            Some(rx) => rx.recv().await,
            None => std::future::pending().await,
        }
    }

    /// The report waits to be sent.
    pub(super) fn pending(&self) -> bool {
        self.pending
    }

    /// The report must go: on its own, or because a static pod's status
    /// changed.
    pub(super) fn due(&self, books: &HashMap<String, PodBook>) -> bool {
        self.pending || books.values().any(|b| b.is_static && b.pending)
    }

    /// The report went out at `wall`.
    pub(super) fn sent(&mut self, books: &mut HashMap<String, PodBook>, wall: SystemTime) {
        self.pending = false;
        self.sent_at = Some(wall);
        for b in books.values_mut().filter(|b| b.is_static) {
            b.pending = false;
        }
    }

    /// The static pods report: every static pod, with its status.
    pub(super) fn message(books: &HashMap<String, PodBook>) -> pb::AgentMessage {
        let mut books: Vec<&PodBook> = books.values().filter(|b| b.is_static).collect();
        books.sort_by(|a, b| a.uid().cmp(b.uid()));
        let pods = books
            .into_iter()
            .filter_map(|b| {
                let mut p = (*b.pod).clone();
                p.status = b.status.clone().unwrap_or_default();
                serde_json::to_vec(&p).ok()
            })
            .collect();
        pb::AgentMessage {
            msg: Some(agent_message::Msg::StaticPods(pb::StaticPods { pods })),
        }
    }

    /// Whether the server's last pod list showed mirrors other than our
    /// static pods (unknown before a list came).
    fn out_of_step(&self, books: &HashMap<String, PodBook>) -> bool {
        let Some(mirrors) = &self.mirrors else {
            return false;
        };
        let statics = books.values().filter(|b| b.is_static).count();
        statics != mirrors.len()
            || books
                .values()
                .any(|b| b.is_static && !mirrors.contains(b.uid()))
    }

    /// The mirrors a pod list of the server showed (by static uid);
    /// `true` when the report must now be sent again.
    pub(super) fn mirrors_seen(
        &mut self,
        mirrors: HashSet<String>,
        books: &HashMap<String, PodBook>,
        confirm: Duration,
        wall: SystemTime,
    ) -> bool {
        self.mirrors = Some(mirrors);
        if !self.out_of_step(books) {
            self.sent_at = None;
            return false;
        }
        let waiting = self
            .sent_at
            .is_some_and(|t| wall.duration_since(t).map_or(true, |d| d <= confirm));
        if !waiting && !self.pending {
            // A mirror was deleted through the API, or one is left over:
            // tell the server again.
            self.pending = true;
            return true;
        }
        false
    }

    /// At a sync: `true` when the server's mirrors still differ from our
    /// static pods longer than `confirm` after the last report, which then
    /// must be sent again.
    pub(super) fn recheck(
        &mut self,
        books: &HashMap<String, PodBook>,
        confirm: Duration,
        wall: SystemTime,
    ) -> bool {
        let unconfirmed = self
            .sent_at
            .is_none_or(|t| wall.duration_since(t).is_ok_and(|d| d > confirm));
        if !self.pending && unconfirmed && self.out_of_step(books) {
            self.pending = true;
            return true;
        }
        false
    }

    /// The manifest dir now holds `pods`: the new ones join `books`, the
    /// ones that are gone leave it (a changed pod is both: its uid
    /// changed) and are answered, to be stopped. `wall` is now (RFC 3339).
    pub(super) fn changed(
        &mut self,
        pods: Vec<Pod>,
        books: &mut HashMap<String, PodBook>,
        wall: &str,
        name: &str,
        loud: bool,
    ) -> Vec<(String, Arc<Pod>)> {
        let wanted: HashSet<String> = pods.iter().map(|p| p.metadata.uid.clone()).collect();
        let gone: Vec<String> = books
            .iter()
            .filter(|(uid, b)| b.is_static && !wanted.contains(*uid))
            .map(|(uid, _)| uid.clone())
            .collect();
        let mut removed = Vec::with_capacity(gone.len());
        for uid in gone {
            if let Some(b) = books.remove(&uid) {
                note!(loud, node = %name, pod = %format_args!("{}/{}", b.pod.metadata.namespace, b.pod.metadata.name), "static pod removed from the manifest dir");
                removed.push((uid, b.pod));
            }
        }
        for pod in pods {
            let uid = pod.metadata.uid.clone();
            if uid.is_empty() || books.contains_key(&uid) {
                continue;
            }
            note!(loud, node = %name, pod = %format_args!("{}/{}", pod.metadata.namespace, pod.metadata.name), "static pod from the manifest dir");
            let mut b = PodBook::new(pod, None, wall);
            b.is_static = true;
            books.insert(uid, b);
        }
        self.pending = true;
        removed
    }
}
