//! The probe workers of a node: one task per running container instance
//! with probes ([`crate::probe`]); what they report feeds the statuses
//! (readiness, startup) and marks instances unhealthy for the next plan.

use super::shared::{AbortOnDrop, Identity};
use crate::clock::Clock;
use crate::events::{reason, EventType, Note};
use crate::plan::{PodBook, Unhealthy};
use crate::probe::{self, ContainerProbes, ProbeReport, ProbeStatus, Target, Verdict};
use crate::runtime::{ContainerInfo, RunState, Runtime};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::mpsc;

/// The probe workers and what they said.
pub(super) struct Probes {
    /// Probe workers by container instance id.
    workers: HashMap<String, AbortOnDrop>,
    /// What the probes say, by container instance id.
    status: HashMap<String, ProbeStatus>,
    /// Boxed reports: the channel's slots come 32 at a time, whole
    /// reports made every node hold 3 KiB for it (heaptrack of a 2,000 node
    /// sim), pointers 256 bytes.
    tx: mpsc::Sender<Box<ProbeReport>>,
    rx: mpsc::Receiver<Box<ProbeReport>>,
}

impl Probes {
    pub(super) fn new() -> Probes {
        let (tx, rx) = mpsc::channel(256);
        Probes {
            workers: HashMap::new(),
            status: HashMap::new(),
            tx,
            rx,
        }
    }

    /// What the probes say, by container instance id.
    pub(super) fn status(&self) -> &HashMap<String, ProbeStatus> {
        &self.status
    }

    /// The next report of a worker.
    pub(super) async fn recv(&mut self) -> Option<ProbeReport> {
        self.rx.recv().await.map(|r| *r)
    }

    /// Stops every worker.
    pub(super) fn stop(&mut self) {
        self.workers.clear();
    }

    /// Starts a probe worker for every running instance with probes that
    /// has none, and drops the workers of instances that stopped.
    pub(super) fn sync_workers<R: Runtime>(
        &mut self,
        observed: &[ContainerInfo],
        pods: &HashMap<String, PodBook>,
        rt: &Arc<R>,
        clock: &Arc<dyn Clock>,
        me: &Identity,
    ) {
        let now = clock.now();
        let wall = clock.wall();
        let mut want = HashSet::new();
        for c in observed {
            let RunState::Running { started_at } = c.state else {
                continue;
            };
            let Some(book) = pods.get(&c.pod_uid) else {
                continue;
            };
            let Some(index) = book
                .pod
                .spec
                .containers
                .iter()
                .position(|s| s.name == c.container)
            else {
                continue;
            };
            if book.hashes.get(index) != Some(&c.spec_hash) {
                continue; // being replaced
            }
            let spec = &book.pod.spec.containers[index];
            if self.workers.contains_key(&c.id) {
                want.insert(c.id.clone());
                continue;
            }
            // The probes' clock starts when the container did.
            let ago = wall.duration_since(started_at).unwrap_or_default();
            let started = now.checked_sub(ago).unwrap_or(now);
            let Some(probes) = ContainerProbes::new(spec, started) else {
                continue;
            };
            want.insert(c.id.clone());
            self.status.insert(c.id.clone(), probes.status());
            let probed = probe::Probed {
                container: spec.clone(),
                pod_uid: c.pod_uid.clone(),
                index,
                target: Target::of(&book.pod, spec, c, &me.host_ip),
            };
            let task = tokio::spawn(probe::run_worker(
                rt.clone(),
                clock.clone(),
                probed,
                probes,
                self.tx.clone(),
            ));
            self.workers.insert(c.id.clone(), AbortOnDrop(task));
        }
        self.workers.retain(|id, _| want.contains(id));
        self.status.retain(|id, _| want.contains(id));
    }

    /// A worker's news; `true` when the pods must be synced again. A
    /// failed run is the kubelet's `Unhealthy` event, noted in `notes`.
    pub(super) fn report(
        &mut self,
        r: ProbeReport,
        pods: &mut HashMap<String, PodBook>,
        name: &str,
        loud: bool,
        notes: &mut Vec<Note>,
    ) -> bool {
        if !self.workers.contains_key(&r.container_id) {
            return false; // the instance is gone
        }
        if let (Some(kind), Some(book)) = (r.failed, pods.get(&r.pod_uid)) {
            if let Some(c) = book.pod.spec.containers.get(r.index) {
                let mut k = kind.name().to_string();
                if let Some(f) = k.get_mut(0..1) {
                    f.make_ascii_uppercase();
                }
                notes.push(Note::container(
                    &book.pod,
                    &c.name,
                    EventType::Warning,
                    reason::UNHEALTHY,
                    format!("{k} probe failed: {}", r.message.trim()),
                ));
            }
        }
        match r.verdict {
            Verdict::Unchanged => false,
            Verdict::Status(s) => {
                tracing::debug!(node = %name, pod_uid = %r.pod_uid, container_id = %r.container_id, started = s.started, ready = s.ready, "probes");
                self.status.insert(r.container_id, s);
                true
            }
            Verdict::Unhealthy(kind) => {
                let Some(book) = pods.get_mut(&r.pod_uid) else {
                    return false;
                };
                let container = book
                    .pod
                    .spec
                    .containers
                    .get(r.index)
                    .map(|c| c.name.clone())
                    .unwrap_or_default();
                note!(
                    loud,
                    node = %name,
                    pod = %format_args!("{}/{}", book.pod.metadata.namespace, book.pod.metadata.name),
                    "container {container} failed its {} probe, it will be restarted: {}",
                    kind.name(),
                    r.message
                );
                if let Some(slot) = book.unhealthy.get_mut(r.index) {
                    *slot = Some(Unhealthy {
                        id: r.container_id,
                        probe: kind,
                    });
                }
                true
            }
        }
    }
}
