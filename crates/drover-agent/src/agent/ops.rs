//! The runtime operations of a node: each pod's start, restart, kill and
//! removal run as one task at a time per pod, with the containers'
//! `preStop` hooks and grace periods; this file keeps which pods have one
//! running, records what the starts answered, and stops everything when
//! the node leaves.

use super::shared::Identity;
use crate::events::{reason, EventType, Note};
use crate::plan::{Action, PodBook, PodOp, StartFailure};
use crate::probe::{self, Target};
use crate::runtime::{ContainerInfo, EventSink, Runtime, RuntimeError, StartContainer};
use drover_api::pod_config::ConfigError;
use drover_api::{LifecycleHandler, Pod};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::task::{Id, JoinError, JoinSet};
use tokio::time::Instant;

/// What one pod's operation task reports.
pub(super) struct OpOutcome {
    uid: String,
    /// The starts it tried: container index and outcome.
    starts: Vec<(usize, Result<(), RuntimeError>)>,
}

/// The end of an operation task, as its join set gives it.
pub(super) type OpDone = Result<(Id, OpOutcome), JoinError>;

/// A container's preStop hook and where it goes.
struct PreStop {
    hook: LifecycleHandler,
    target: Target,
}

/// Runs the preStop hook (if any) of a container about to be stopped;
/// answers the grace left for the stop.
async fn run_pre_stop<R: Runtime>(rt: &R, hook: Option<PreStop>, grace: Duration) -> Duration {
    match hook {
        Some(h) => {
            probe::remaining_grace(grace, probe::pre_stop(rt, &h.target, &h.hook, grace).await)
        }
        None => grace,
    }
}

/// Runs the preStop hooks of a pod's containers together; answers the
/// grace left for the stop.
async fn run_pre_stops<R: Runtime>(rt: &Arc<R>, hooks: Vec<PreStop>, grace: Duration) -> Duration {
    if hooks.is_empty() {
        return grace;
    }
    let start = Instant::now();
    let mut set = JoinSet::new();
    for h in hooks {
        let rt = rt.clone();
        set.spawn(async move { probe::pre_stop(rt.as_ref(), &h.target, &h.hook, grace).await });
    }
    while set.join_next().await.is_some() {}
    probe::remaining_grace(grace, start.elapsed())
}

/// Starts one container and notes the kubelet's events: Created and
/// Started, or Failed with the error (`Error: ErrImagePull` for a pull,
/// whose own message the runtime noted).
async fn started<R: Runtime>(rt: &Arc<R>, req: StartContainer) -> Result<(), RuntimeError> {
    let name = req.container().map(|c| c.name.clone()).unwrap_or_default();
    let (pod, sink) = (req.pod.clone(), req.events.clone());
    let r = rt.start(req).await;
    let note = |t, reason, message| Note::container(&pod, &name, t, reason, message);
    match &r {
        Ok(()) => {
            sink.send(note(
                EventType::Normal,
                reason::CREATED,
                format!("Created container: {name}"),
            ));
            sink.send(note(
                EventType::Normal,
                reason::STARTED,
                format!("Started container {name}"),
            ));
        }
        Err(e) => {
            let message = match e.reason.as_str() {
                "ErrImagePull" | "ErrImageNeverPull" => format!("Error: {}", e.reason),
                _ => format!("Error: {}", e.message),
            };
            sink.send(note(EventType::Warning, reason::FAILED, message));
        }
    }
    r
}

/// A start that cannot have its ConfigMaps or Secrets: the kubelet's
/// events (FailedMount for a volume, Failed with `Error: <message>`) and
/// `CreateContainerConfigError`.
fn config_failed(pod: &Arc<Pod>, index: usize, e: &ConfigError, sink: &EventSink) -> RuntimeError {
    let name = pod
        .spec
        .containers
        .get(index)
        .map(|c| c.name.as_str())
        .unwrap_or_default();
    if let Some(volume) = &e.volume {
        let mut note = Note::container(
            pod,
            name,
            EventType::Warning,
            reason::FAILED_MOUNT,
            format!(
                "MountVolume.SetUp failed for volume {volume:?} : {}",
                e.message
            ),
        );
        note.field_path.clear(); // the pod's event, as the kubelet's
        sink.send(note);
    }
    sink.send(Note::container(
        pod,
        name,
        EventType::Warning,
        reason::FAILED,
        format!("Error: {}", e.message),
    ));
    RuntimeError::new("CreateContainerConfigError", e.message.clone())
}

/// The node's runtime operations in flight, and the pods they may still
/// need.
#[derive(Default)]
pub(super) struct Ops {
    /// Pods with an operation running.
    busy: HashSet<String>,
    /// The running operations' task ids and pods.
    tasks: Vec<(Id, String)>,
    set: JoinSet<OpOutcome>,
    /// Pods no longer desired whose containers may still run (their
    /// preStop hooks and grace periods).
    leaving: HashMap<String, Arc<Pod>>,
}

impl Ops {
    /// Pods with an operation running (the plan leaves them alone).
    pub(super) fn busy(&self) -> &HashSet<String> {
        &self.busy
    }

    /// No operation is running.
    pub(super) fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// The next operation that ends (pending while none runs).
    pub(super) async fn join_next(&mut self) -> Option<OpDone> {
        self.set.join_next_with_id().await
    }

    /// Waits for every running operation to end.
    pub(super) async fn finish(&mut self) {
        while self.set.join_next().await.is_some() {}
    }

    /// `pod` (uid `uid`) is no longer desired: keep its spec while its
    /// containers run.
    pub(super) fn leaving(&mut self, uid: String, pod: Arc<Pod>) {
        self.leaving.insert(uid, pod);
    }

    /// Forgets the leaving pods that have no containers (`runs` says which
    /// have) and no operation running.
    pub(super) fn prune_leaving(&mut self, runs: impl Fn(&str) -> bool) {
        let busy = &self.busy;
        self.leaving
            .retain(|uid, _| runs(uid.as_str()) || busy.contains(uid));
    }

    fn grace(&self, pods: &HashMap<String, PodBook>, uid: &str) -> Duration {
        let secs = pods
            .get(uid)
            .map(|b| &b.pod)
            .or_else(|| self.leaving.get(uid))
            .and_then(|p| p.spec.termination_grace_period_seconds)
            .unwrap_or(30);
        Duration::from_secs(u64::try_from(secs).unwrap_or(0))
    }

    /// The preStop hook of running instance `id` of pod `uid`, if it has one.
    fn pre_stop_of(
        &self,
        pods: &HashMap<String, PodBook>,
        uid: &str,
        info: &ContainerInfo,
        host_ip: &str,
    ) -> Option<PreStop> {
        if !info.state.is_running() {
            return None;
        }
        let (pod, spec) = match pods.get(uid) {
            Some(b) => (&b.pod, b.spec_of(info)?),
            None => {
                let pod = self.leaving.get(uid)?;
                let spec = pod
                    .spec
                    .containers
                    .iter()
                    .find(|c| c.name == info.container)?;
                (pod, spec)
            }
        };
        let hook = spec.lifecycle.as_ref()?.pre_stop.clone()?;
        Some(PreStop {
            hook,
            target: Target::of(pod, spec, info, host_ip),
        })
    }

    /// The grace period of a kill for a failed probe: the probe's own
    /// `terminationGracePeriodSeconds`, else the pod's.
    fn kill_grace(&self, pods: &HashMap<String, PodBook>, uid: &str, index: usize) -> Duration {
        let own = pods.get(uid).and_then(|b| {
            let u = b.unhealthy.get(index)?.as_ref()?;
            let c = b.pod.spec.containers.get(index)?;
            u.probe.of(c)?.termination_grace_period_seconds
        });
        match own {
            Some(s) => Duration::from_secs(u64::try_from(s).unwrap_or(0)),
            None => self.grace(pods, uid),
        }
    }

    /// The kubelet's `Killing` event for stopping instance `info` of pod
    /// `uid`, with why.
    fn killing(
        &self,
        pods: &HashMap<String, PodBook>,
        uid: &str,
        info: &ContainerInfo,
        why: Option<&str>,
    ) -> Option<Note> {
        let pod = pods
            .get(uid)
            .map(|b| &b.pod)
            .or_else(|| self.leaving.get(uid))?;
        let c = &info.container;
        let message = match why {
            Some(why) => format!("Container {c} {why}, will be restarted"),
            None => format!("Stopping container {c}"),
        };
        Some(Note::container(
            pod,
            c,
            EventType::Normal,
            reason::KILLING,
            message,
        ))
    }

    /// Starts the task of one pod's operation; its events go to `sink`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn spawn<R: Runtime>(
        &mut self,
        op: PodOp,
        observed: &[ContainerInfo],
        pods: &HashMap<String, PodBook>,
        rt: &Arc<R>,
        me: &Identity,
        loud: bool,
        config: &super::config::ConfigSet,
        sink: &EventSink,
    ) {
        let mut kills: HashMap<String, Note> = HashMap::new();
        let mut pod_kills: Vec<Note> = Vec::new();
        let rt = rt.clone();
        let book = pods.get(&op.uid).map(|b| (b.pod.clone(), b.hashes.clone()));
        // What each start takes from ConfigMaps and Secrets, resolved now
        // (the task holds no reference to the node's set).
        let mut resolved: HashMap<usize, Result<super::config::Resolved, ConfigError>> =
            HashMap::new();
        if let Some((pod, _)) = &book {
            for a in &op.actions {
                if let Action::Start { index, .. } | Action::Replace { index, .. } = a {
                    resolved.insert(*index, config.resolve(pod, *index));
                }
            }
        }
        let grace = self.grace(pods, &op.uid);
        // Hooks of the containers this op stops, by instance id.
        let mut hooks: HashMap<String, PreStop> = HashMap::new();
        let mut pod_hooks: Vec<PreStop> = Vec::new();
        let mut kill_graces: HashMap<String, Duration> = HashMap::new();
        for a in &op.actions {
            match a {
                Action::Replace { id, .. } | Action::Kill { id, .. } => {
                    if let Some(info) = observed.iter().find(|c| c.id == *id) {
                        if let Some(h) = self.pre_stop_of(pods, &op.uid, info, &me.host_ip) {
                            hooks.insert(id.clone(), h);
                        }
                        let why = match a {
                            Action::Kill { index, .. } => pods
                                .get(&op.uid)
                                .and_then(|b| b.unhealthy.get(*index)?.as_ref())
                                .map(|u| format!("failed {} probe", u.probe.name())),
                            _ => Some("definition changed".to_string()),
                        };
                        let why = why.unwrap_or_else(|| "failed a probe".into());
                        if info.state.is_running() {
                            if let Some(n) = self.killing(pods, &op.uid, info, Some(&why)) {
                                kills.insert(id.clone(), n);
                            }
                        }
                    }
                    if let Action::Kill { id, index } = a {
                        kill_graces.insert(id.clone(), self.kill_grace(pods, &op.uid, *index));
                    }
                }
                Action::RemovePod => {
                    pod_kills.extend(
                        observed
                            .iter()
                            .filter(|c| c.pod_uid == op.uid && c.state.is_running())
                            .filter_map(|c| self.killing(pods, &op.uid, c, None)),
                    );
                    pod_hooks.extend(
                        observed
                            .iter()
                            .filter(|c| c.pod_uid == op.uid)
                            .filter_map(|c| self.pre_stop_of(pods, &op.uid, c, &me.host_ip)),
                    );
                }
                Action::Start { .. } | Action::Remove { .. } => {}
            }
        }
        let node_name = me.name.clone();
        let host_ip = me.host_ip.clone();
        let uid = op.uid.clone();
        let sink = sink.clone();
        let handle = self.set.spawn(async move {
            let mut starts = Vec::new();
            let start = |index: usize, attempt: u32| {
                let (pod, hashes) = book.as_ref()?;
                let r = match resolved.get(&index) {
                    Some(Ok(r)) => Ok(StartContainer {
                        pod: r.pod.clone(),
                        volumes: r.volumes.clone(),
                        index,
                        attempt,
                        spec_hash: hashes.get(index).cloned().unwrap_or_default(),
                        node_name: node_name.clone(),
                        host_ip: host_ip.clone(),
                        events: sink.clone(),
                    }),
                    Some(Err(e)) => Err(config_failed(pod, index, e, &sink)),
                    None => Err(RuntimeError::new("CreateContainerConfigError", "not resolved")),
                };
                Some(r)
            };
            for a in op.actions {
                let r = match a {
                    Action::Start { index, attempt } => {
                        match start(index, attempt) {
                            Some(Ok(req)) => starts.push((index, started(&rt, req).await)),
                            Some(Err(e)) => starts.push((index, Err(e))),
                            None => {}
                        }
                        Ok(())
                    }
                    Action::Replace { id, index, attempt } => {
                        if let Some(n) = kills.remove(&id) {
                            sink.send(n);
                        }
                        let left = run_pre_stop(rt.as_ref(), hooks.remove(&id), grace).await;
                        let r = rt.remove(&id, left).await;
                        if r.is_ok() {
                            match start(index, attempt) {
                                Some(Ok(req)) => starts.push((index, started(&rt, req).await)),
                                Some(Err(e)) => starts.push((index, Err(e))),
                                None => {}
                            }
                        }
                        r
                    }
                    Action::Kill { id, .. } => {
                        if let Some(n) = kills.remove(&id) {
                            sink.send(n);
                        }
                        let grace = kill_graces.get(&id).copied().unwrap_or(grace);
                        let left = run_pre_stop(rt.as_ref(), hooks.remove(&id), grace).await;
                        rt.stop(&id, left).await
                    }
                    Action::Remove { id } => rt.remove(&id, grace).await,
                    Action::RemovePod => {
                        note!(loud, node = %node_name, pod_uid = %op.uid, "stopping a pod that is no longer desired");
                        for n in std::mem::take(&mut pod_kills) {
                            sink.send(n);
                        }
                        let left = run_pre_stops(&rt, std::mem::take(&mut pod_hooks), grace).await;
                        rt.remove_pod(&op.uid, left).await
                    }
                };
                if let Err(e) = r {
                    tracing::warn!(node = %node_name, pod_uid = %op.uid, "runtime: {e}");
                }
            }
            OpOutcome {
                uid: op.uid,
                starts,
            }
        });
        self.tasks.push((handle.id(), uid.clone()));
        self.busy.insert(uid);
    }

    /// An operation ended: its pod is free again, and the outcome of its
    /// starts goes into the pod's book (`wall` is now).
    pub(super) fn done(
        &mut self,
        r: OpDone,
        pods: &mut HashMap<String, PodBook>,
        name: &str,
        wall: SystemTime,
    ) {
        let id = match &r {
            Ok((id, _)) => *id,
            Err(e) => e.id(),
        };
        if let Some(i) = self.tasks.iter().position(|(t, _)| *t == id) {
            let (_, uid) = self.tasks.swap_remove(i);
            self.busy.remove(&uid);
        }
        let out = match r {
            Ok((_, out)) => out,
            Err(e) => {
                tracing::error!(node = %name, "a runtime operation failed: {e}");
                return;
            }
        };
        if let Some(book) = pods.get_mut(&out.uid) {
            for (index, r) in out.starts {
                let Some(slot) = book.failures.get_mut(index) else {
                    continue;
                };
                *slot = match r {
                    Ok(()) => None,
                    Err(error) => {
                        tracing::warn!(node = %name, pod = %book.pod.metadata.name, "cannot start a container: {error}");
                        Some(StartFailure { at: wall, error })
                    }
                };
            }
        }
    }

    /// Stops every pod of the node, known or found in the runtime, each
    /// after its containers' preStop hooks (the node left the cluster).
    pub(super) async fn stop_all<R: Runtime>(
        &self,
        pods: &HashMap<String, PodBook>,
        rt: &Arc<R>,
        me: &Identity,
    ) {
        let mut uids: HashSet<String> = pods.keys().cloned().collect();
        let all = match rt.list().await {
            Ok(all) => all,
            Err(e) => {
                tracing::warn!(node = %me.name, "the runtime does not answer: {e}");
                Vec::new()
            }
        };
        uids.extend(all.iter().map(|c| c.pod_uid.clone()));
        let mut stops = JoinSet::new();
        for uid in uids {
            let rt = rt.clone();
            let grace = self.grace(pods, &uid);
            let hooks: Vec<PreStop> = all
                .iter()
                .filter(|c| c.pod_uid == uid)
                .filter_map(|c| self.pre_stop_of(pods, &uid, c, &me.host_ip))
                .collect();
            stops.spawn(async move {
                let left = run_pre_stops(&rt, hooks, grace).await;
                rt.remove_pod(&uid, left).await
            });
        }
        while let Some(r) = stops.join_next().await {
            if let Ok(Err(e)) = r {
                tracing::warn!(node = %me.name, "cannot stop a pod: {e}");
            }
        }
    }
}
