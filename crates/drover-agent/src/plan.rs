//! The sync decisions, pure: given the pods the node should run, what the
//! runtime holds and the time, which containers to start, replace or remove,
//! and when to look again.
//!
//! Per container of a desired pod (the newest instance decides):
//! - none yet: start attempt 0 (after the backoff of a failed start);
//! - running a different spec hash: replace it (attempt + 1);
//! - running, and its startup or liveness probe failed ([`PodBook::unhealthy`]):
//!   kill it (stop, keep the instance); the exited instance then restarts
//!   like a crashed one;
//! - running or being created: nothing;
//! - exited, and the pod's restart policy restarts it (`Always`; `OnFailure`
//!   with a non-zero code): restart it (attempt + 1) once its backoff has
//!   passed ([`RestartPolicy`]), else wake up then;
//! - exited for good: nothing (the phase says Succeeded or Failed).
//!
//! Instances older than the newest and the one before it are removed (the
//! one before is kept for `lastState`). Every container of a pod that is no
//! longer desired is removed. Pods with an operation in flight are skipped.

use crate::backoff::{Backoff, RestartPolicy};
use crate::events::{reason, EventType, Note};
use crate::probe::ProbeKind;
use crate::runtime::{ContainerInfo, RunState, RuntimeError};
use drover_api::{Container, Pod, PodStatus, RestartPolicy as PodRestartPolicy};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::SystemTime;

/// A start that failed: when, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct StartFailure {
    /// When it failed.
    pub at: SystemTime,
    /// What the runtime said.
    pub error: RuntimeError,
}

/// A container instance whose startup or liveness probe failed: the sync
/// loop kills it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy {
    /// The instance.
    pub id: String,
    /// The probe that failed.
    pub probe: ProbeKind,
}

/// What the agent keeps about one desired pod.
#[derive(Debug, Clone)]
pub struct PodBook {
    /// The pod as the server sent it (or as read from the manifest dir),
    /// without its status.
    pub pod: Arc<Pod>,
    /// The version of the pod before the last [`PodBook::update`], whose
    /// containers may still run (their preStop hooks are the old spec's).
    pub previous: Option<Arc<Pod>>,
    /// A static pod (from `--manifest-dir`), not one the server assigned.
    pub is_static: bool,
    /// [`crate::runtime::spec_hash`] of each container, in spec order.
    pub hashes: Vec<String>,
    /// `status.startTime`: when the agent first accepted the pod.
    pub start_time: String,
    /// Restart backoff of each container.
    pub restarts: Vec<Option<Backoff>>,
    /// The last failed start of each container, until one succeeds.
    pub failures: Vec<Option<StartFailure>>,
    /// Each container's running instance that failed its startup or
    /// liveness probe, until it is killed.
    pub unhealthy: Vec<Option<Unhealthy>>,
    /// What each container (by name) last waited for, as noted in a
    /// `BackOff` event: the exited instance's id, or the failed pull's
    /// time. One event per wait, not one per sync (the loop syncs every
    /// second; the count then says how many restarts waited).
    pub backoff_noted: HashMap<String, String>,
    /// The status last built (or the server's, before the first build).
    pub status: Option<PodStatus>,
    /// Whether `status` still has to be sent.
    pub pending: bool,
    /// When `status` was last sent, until the server's pod list shows it
    /// (a report the server could not write is sent again).
    pub sent_at: Option<SystemTime>,
}

impl PodBook {
    /// A book for a pod seen for the first time at `now` (RFC 3339); the
    /// server's status, if any, gives the start time and the conditions'
    /// transition times.
    pub fn new(pod: Pod, server_status: Option<PodStatus>, now: &str) -> PodBook {
        let hashes = pod
            .spec
            .containers
            .iter()
            .map(crate::runtime::spec_hash)
            .collect::<Vec<_>>();
        let n = hashes.len();
        let start_time = server_status
            .as_ref()
            .and_then(|s| s.start_time.clone())
            .unwrap_or_else(|| now.to_string());
        PodBook {
            pod: Arc::new(pod),
            previous: None,
            is_static: false,
            hashes,
            start_time,
            restarts: vec![None; n],
            failures: vec![None; n],
            unhealthy: vec![None; n],
            backoff_noted: HashMap::new(),
            status: server_status,
            pending: true,
            sent_at: None,
        }
    }

    /// Takes a new version of the same pod (same uid). Per-container state
    /// is kept by container name.
    pub fn update(&mut self, pod: Pod) {
        let hashes: Vec<String> = pod
            .spec
            .containers
            .iter()
            .map(crate::runtime::spec_hash)
            .collect();
        if hashes != self.hashes || pod != *self.pod {
            let old_names: Vec<&str> = self
                .pod
                .spec
                .containers
                .iter()
                .map(|c| c.name.as_str())
                .collect();
            let pick = |name: &str| old_names.iter().position(|n| *n == name);
            let restarts = pod
                .spec
                .containers
                .iter()
                .map(|c| pick(&c.name).and_then(|i| self.restarts[i]))
                .collect();
            let failures = pod
                .spec
                .containers
                .iter()
                .map(|c| pick(&c.name).and_then(|i| self.failures[i].clone()))
                .collect();
            let unhealthy = pod
                .spec
                .containers
                .iter()
                .map(|c| pick(&c.name).and_then(|i| self.unhealthy[i].clone()))
                .collect();
            self.restarts = restarts;
            self.failures = failures;
            self.unhealthy = unhealthy;
            self.hashes = hashes;
            self.previous = Some(std::mem::replace(&mut self.pod, Arc::new(pod)));
        }
    }

    /// The spec an instance was started from: the current one when its
    /// hash matches, else the previous version's, else the current
    /// container of that name.
    pub fn spec_of(&self, instance: &ContainerInfo) -> Option<&Container> {
        let current = self
            .pod
            .spec
            .containers
            .iter()
            .position(|c| c.name == instance.container);
        if let Some(i) = current {
            if self.hashes.get(i) == Some(&instance.spec_hash) {
                return self.pod.spec.containers.get(i);
            }
        }
        let old = self.previous.as_ref().and_then(|p| {
            p.spec.containers.iter().find(|c| {
                c.name == instance.container && crate::runtime::spec_hash(c) == instance.spec_hash
            })
        });
        old.or_else(|| current.and_then(|i| self.pod.spec.containers.get(i)))
    }

    /// The uid.
    pub fn uid(&self) -> &str {
        &self.pod.metadata.uid
    }
}

/// One thing to do to a pod's containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Start container `index` as `attempt`.
    Start {
        /// Index in the pod's containers.
        index: usize,
        /// The attempt to start.
        attempt: u32,
    },
    /// Stop and remove instance `id`, then start container `index` as
    /// `attempt` (its spec changed).
    Replace {
        /// The running instance.
        id: String,
        /// Index in the pod's containers.
        index: usize,
        /// The attempt to start.
        attempt: u32,
    },
    /// Stop running instance `id` of container `index` (its startup or
    /// liveness probe failed), keeping it for `lastState`; it restarts like
    /// a crashed container.
    Kill {
        /// The running instance.
        id: String,
        /// Index in the pod's containers.
        index: usize,
    },
    /// Remove an old exited instance.
    Remove {
        /// The instance.
        id: String,
    },
    /// Stop and remove every container of the pod (no longer desired).
    RemovePod,
}

/// The actions for one pod, run in order by one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodOp {
    /// The pod's uid.
    pub uid: String,
    /// What to do, in order.
    pub actions: Vec<Action>,
}

/// The outcome of [`plan`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    /// One entry per pod that needs work.
    pub ops: Vec<PodOp>,
    /// The earliest time a backoff ends (plan again then).
    pub wake_at: Option<SystemTime>,
    /// The kubelet's events for what waits: `BackOff` (a restart, an image
    /// pull) and `Failed` (`Error: ImagePullBackOff`), once per plan, as
    /// the kubelet notes them on every sync.
    pub notes: Vec<Note>,
}

/// Whether the pod's restart policy restarts a container that exited with
/// `exit_code`.
pub fn restarts(policy: Option<&PodRestartPolicy>, exit_code: i32) -> bool {
    match policy {
        Some(PodRestartPolicy::Never) => false,
        Some(PodRestartPolicy::OnFailure) => exit_code != 0,
        _ => true,
    }
}

/// The instances of each container of each pod, newest first.
pub fn group(observed: &[ContainerInfo]) -> HashMap<&str, BTreeMap<&str, Vec<&ContainerInfo>>> {
    let mut by_pod: HashMap<&str, BTreeMap<&str, Vec<&ContainerInfo>>> = HashMap::new();
    for c in observed {
        by_pod
            .entry(c.pod_uid.as_str())
            .or_default()
            .entry(c.container.as_str())
            .or_default()
            .push(c);
    }
    for containers in by_pod.values_mut() {
        for instances in containers.values_mut() {
            instances.sort_by_key(|c| std::cmp::Reverse(c.attempt));
        }
    }
    by_pod
}

fn earliest(a: Option<SystemTime>, b: SystemTime) -> Option<SystemTime> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// Decides what to do; see the module documentation. Restart backoffs in
/// `pods` are advanced for the restarts it decides.
pub fn plan(
    pods: &mut HashMap<String, PodBook>,
    observed: &[ContainerInfo],
    busy: &HashSet<String>,
    policy: &RestartPolicy,
    now: SystemTime,
) -> Plan {
    let grouped = group(observed);
    let mut out = Plan::default();
    let no_instances = BTreeMap::new();
    for (uid, book) in pods.iter_mut() {
        if busy.contains(uid) {
            continue;
        }
        let containers = grouped.get(uid.as_str()).unwrap_or(&no_instances);
        let mut actions = Vec::new();
        let restart_policy = book.pod.spec.restart_policy.clone();
        for (index, spec) in book.pod.spec.containers.iter().enumerate() {
            let instances: &[&ContainerInfo] = containers
                .get(spec.name.as_str())
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            for old in instances.iter().skip(1).enumerate() {
                let (i, c) = old;
                if i >= 1 || !c.state.is_exited() {
                    actions.push(Action::Remove { id: c.id.clone() });
                }
            }
            // A kill decided for an instance that is no longer running is done.
            if book.unhealthy[index].as_ref().is_some_and(|u| {
                instances
                    .first()
                    .is_none_or(|l| l.id != u.id || l.state.is_exited())
            }) {
                book.unhealthy[index] = None;
            }
            let failure = book.failures[index].as_ref();
            let entry = book.restarts[index];
            match instances.first() {
                None => {
                    let at = failure.map_or(now, |f| policy.restart_at(entry.as_ref(), f.at));
                    if now >= at {
                        if let Some(f) = failure {
                            book.restarts[index] =
                                Some(policy.after_restart(entry.as_ref(), f.at, now));
                        }
                        actions.push(Action::Start { index, attempt: 0 });
                    } else {
                        out.wake_at = earliest(out.wake_at, at);
                        let pull = failure.filter(|f| f.error.reason == "ErrImagePull");
                        let key = pull.map(|f| format!("pull {:?}", f.at));
                        if key.is_some() && book.backoff_noted.get(&spec.name) != key.as_ref() {
                            if let Some(k) = key {
                                book.backoff_noted.insert(spec.name.clone(), k);
                            }
                            let note = |t, r, m| Note::container(&book.pod, &spec.name, t, r, m);
                            out.notes.push(note(
                                EventType::Normal,
                                reason::BACK_OFF,
                                format!("Back-off pulling image {:?}", spec.image),
                            ));
                            out.notes.push(note(
                                EventType::Warning,
                                reason::FAILED,
                                "Error: ImagePullBackOff".into(),
                            ));
                        }
                    }
                }
                Some(latest) => match &latest.state {
                    RunState::Creating | RunState::Running { .. } => {
                        if latest.spec_hash != book.hashes[index] {
                            actions.push(Action::Replace {
                                id: latest.id.clone(),
                                index,
                                attempt: latest.attempt + 1,
                            });
                        } else if book.unhealthy[index].is_some() {
                            actions.push(Action::Kill {
                                id: latest.id.clone(),
                                index,
                            });
                        }
                    }
                    RunState::Exited {
                        exit_code,
                        finished_at,
                        ..
                    } => {
                        if !restarts(restart_policy.as_ref(), *exit_code) {
                            continue;
                        }
                        let finished = match failure {
                            Some(f) if f.at > *finished_at => f.at,
                            _ => *finished_at,
                        };
                        let at = policy.restart_at(entry.as_ref(), finished);
                        if now >= at {
                            book.restarts[index] =
                                Some(policy.after_restart(entry.as_ref(), finished, now));
                            actions.push(Action::Start {
                                index,
                                attempt: latest.attempt + 1,
                            });
                        } else {
                            out.wake_at = earliest(out.wake_at, at);
                            let m = &book.pod.metadata;
                            if book.backoff_noted.get(&spec.name) == Some(&latest.id) {
                                continue;
                            }
                            book.backoff_noted
                                .insert(spec.name.clone(), latest.id.clone());
                            out.notes.push(Note::container(
                                &book.pod,
                                &spec.name,
                                EventType::Warning,
                                reason::BACK_OFF,
                                format!(
                                    "Back-off restarting failed container {} in pod {}_{}({})",
                                    spec.name, m.name, m.namespace, m.uid
                                ),
                            ));
                        }
                    }
                },
            }
        }
        // Instances of containers the spec no longer has.
        for (name, instances) in containers {
            if !book.pod.spec.containers.iter().any(|c| c.name == *name) {
                for c in instances {
                    actions.push(Action::Remove { id: c.id.clone() });
                }
            }
        }
        if !actions.is_empty() {
            out.ops.push(PodOp {
                uid: uid.clone(),
                actions,
            });
        }
    }
    let mut gone: Vec<&str> = grouped
        .keys()
        .copied()
        .filter(|uid| !pods.contains_key(*uid) && !busy.contains(*uid))
        .collect();
    gone.sort_unstable();
    for uid in gone {
        out.ops.push(PodOp {
            uid: uid.to_string(),
            actions: vec![Action::RemovePod],
        });
    }
    out.ops.sort_by(|a, b| a.uid.cmp(&b.uid));
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use drover_api::Container;
    use std::time::Duration;

    pub(crate) fn t(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000) + Duration::from_millis(ms)
    }

    pub(crate) fn pod(uid: &str, containers: &[(&str, &str)]) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = format!("pod-{uid}");
        p.metadata.namespace = "default".into();
        p.metadata.uid = uid.into();
        p.spec.node_name = "n1".into();
        p.spec.restart_policy = Some(PodRestartPolicy::Always);
        p.spec.containers = containers
            .iter()
            .map(|(name, image)| Container {
                name: name.to_string(),
                image: image.to_string(),
                ..Default::default()
            })
            .collect();
        p
    }

    pub(crate) fn book(p: Pod) -> PodBook {
        PodBook::new(p, None, "2023-11-14T22:13:20Z")
    }

    pub(crate) fn inst(
        b: &PodBook,
        index: usize,
        attempt: u32,
        id: &str,
        state: RunState,
    ) -> ContainerInfo {
        let spec = &b.pod.spec.containers[index];
        ContainerInfo {
            id: id.into(),
            pod_uid: b.uid().into(),
            pod_namespace: "default".into(),
            pod_name: b.pod.metadata.name.clone(),
            container: spec.name.clone(),
            attempt,
            spec_hash: b.hashes[index].clone(),
            image: spec.image.clone(),
            image_id: String::new(),
            ready: state.is_running(),
            state,
            pod_ip: Some("10.0.0.9".into()),
        }
    }

    pub(crate) fn exited(code: i32, started: u64, finished: u64) -> RunState {
        RunState::Exited {
            exit_code: code,
            reason: if code == 0 { "Completed" } else { "Error" }.into(),
            started_at: Some(t(started)),
            finished_at: t(finished),
        }
    }

    fn pods(books: Vec<PodBook>) -> HashMap<String, PodBook> {
        books
            .into_iter()
            .map(|b| (b.uid().to_string(), b))
            .collect()
    }

    fn fast() -> RestartPolicy {
        RestartPolicy {
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
        }
    }

    #[test]
    fn new_pods_start_every_container_and_removed_pods_go() {
        let mut ps = pods(vec![book(pod("a", &[("c1", "i"), ("c2", "j")]))]);
        let stale = book(pod("z", &[("c", "i")]));
        let observed = vec![inst(
            &stale,
            0,
            0,
            "z0",
            RunState::Running { started_at: t(0) },
        )];
        let p = plan(&mut ps, &observed, &HashSet::new(), &fast(), t(0));
        assert_eq!(
            p.ops,
            vec![
                PodOp {
                    uid: "a".into(),
                    actions: vec![
                        Action::Start {
                            index: 0,
                            attempt: 0
                        },
                        Action::Start {
                            index: 1,
                            attempt: 0
                        },
                    ],
                },
                PodOp {
                    uid: "z".into(),
                    actions: vec![Action::RemovePod],
                },
            ]
        );
        assert_eq!(p.wake_at, None);
    }

    #[test]
    fn healthy_pods_are_left_alone_and_busy_pods_skipped() {
        let b = book(pod("a", &[("c", "i")]));
        let observed = vec![inst(&b, 0, 3, "x", RunState::Running { started_at: t(0) })];
        let mut ps = pods(vec![b]);
        let p = plan(&mut ps, &observed, &HashSet::new(), &fast(), t(5));
        assert!(p.ops.is_empty(), "{p:?}");
        let busy: HashSet<String> = ["a".to_string(), "gone".to_string()].into();
        let mut ps = pods(vec![book(pod("a", &[("c", "i")]))]);
        let other = book(pod("gone", &[("c", "i")]));
        let observed = vec![inst(&other, 0, 0, "g", RunState::Creating)];
        let p = plan(&mut ps, &observed, &busy, &fast(), t(5));
        assert!(p.ops.is_empty(), "busy pods wait for their op: {p:?}");
    }

    #[test]
    fn a_crashed_container_restarts_at_once_then_backs_off() {
        let b = book(pod("a", &[("c", "sim/crash")]));
        let mut ps = pods(vec![b.clone()]);
        let none = HashSet::new();
        // First crash: restarted at once, as attempt 1.
        let observed = vec![inst(&b, 0, 0, "x0", exited(1, 0, 500))];
        let p = plan(&mut ps, &observed, &none, &fast(), t(500));
        assert_eq!(
            p.ops[0].actions,
            vec![Action::Start {
                index: 0,
                attempt: 1
            }]
        );
        // Second crash at 1000: waits 100 ms.
        let observed = vec![
            inst(&b, 0, 0, "x0", exited(1, 0, 500)),
            inst(&b, 0, 1, "x1", exited(1, 500, 1000)),
        ];
        let p = plan(&mut ps, &observed, &none, &fast(), t(1000));
        assert!(p.ops.is_empty());
        assert_eq!(p.wake_at, Some(t(1100)));
        // The kubelet's BackOff event, once per wait (not once per sync).
        assert_eq!(p.notes.len(), 1);
        assert_eq!(p.notes[0].reason, "BackOff");
        assert_eq!(p.notes[0].field_path, "spec.containers{c}");
        assert_eq!(
            p.notes[0].message,
            "Back-off restarting failed container c in pod pod-a_default(a)"
        );
        let p = plan(&mut ps, &observed, &none, &fast(), t(1050));
        assert!(p.notes.is_empty(), "the same wait");
        let p = plan(&mut ps, &observed, &none, &fast(), t(1100));
        assert_eq!(
            p.ops[0].actions,
            vec![Action::Start {
                index: 0,
                attempt: 2
            }]
        );
        // Third crash: waits 200 ms, and the oldest instance is collected.
        let observed = vec![
            inst(&b, 0, 0, "x0", exited(1, 0, 500)),
            inst(&b, 0, 1, "x1", exited(1, 500, 1000)),
            inst(&b, 0, 2, "x2", exited(1, 1100, 1600)),
        ];
        let p = plan(&mut ps, &observed, &none, &fast(), t(1700));
        assert_eq!(p.ops[0].actions, vec![Action::Remove { id: "x0".into() }]);
        assert_eq!(p.wake_at, Some(t(1800)));
        assert_eq!(p.notes.len(), 1, "a new wait: BackOff again");
    }

    #[test]
    fn restart_policies_decide_who_restarts() {
        assert!(restarts(Some(&PodRestartPolicy::Always), 0));
        assert!(restarts(None, 0));
        assert!(restarts(Some(&PodRestartPolicy::OnFailure), 2));
        assert!(!restarts(Some(&PodRestartPolicy::OnFailure), 0));
        assert!(!restarts(Some(&PodRestartPolicy::Never), 1));
        let mut p = pod("a", &[("c", "i")]);
        p.spec.restart_policy = Some(PodRestartPolicy::Never);
        let b = book(p);
        let observed = vec![inst(&b, 0, 0, "x", exited(1, 0, 10))];
        let mut ps = pods(vec![b]);
        let p = plan(&mut ps, &observed, &HashSet::new(), &fast(), t(10_000));
        assert!(p.ops.is_empty() && p.wake_at.is_none());
    }

    #[test]
    fn a_changed_spec_replaces_the_running_container() {
        let old = book(pod("a", &[("c", "v1")]));
        let observed = vec![inst(
            &old,
            0,
            0,
            "x",
            RunState::Running { started_at: t(0) },
        )];
        let mut ps = pods(vec![old]);
        let b = ps.get_mut("a").unwrap();
        b.update(pod("a", &[("c", "v2")]));
        let p = plan(&mut ps, &observed, &HashSet::new(), &fast(), t(5));
        assert_eq!(
            p.ops[0].actions,
            vec![Action::Replace {
                id: "x".into(),
                index: 0,
                attempt: 1
            }]
        );
    }

    #[test]
    fn a_failed_start_is_retried_with_backoff() {
        let mut b = book(pod("a", &[("c", "missing")]));
        b.failures[0] = Some(StartFailure {
            at: t(0),
            error: RuntimeError::new("ErrImageNeverPull", "no image"),
        });
        let mut ps = pods(vec![b]);
        let none = HashSet::new();
        // No backoff yet: retried at once.
        let p = plan(&mut ps, &[], &none, &fast(), t(0));
        assert_eq!(
            p.ops[0].actions,
            vec![Action::Start {
                index: 0,
                attempt: 0
            }]
        );
        // It fails again at 10: waits 100 ms.
        ps.get_mut("a").unwrap().failures[0] = Some(StartFailure {
            at: t(10),
            error: RuntimeError::new("ErrImageNeverPull", "no image"),
        });
        let p = plan(&mut ps, &[], &none, &fast(), t(20));
        assert!(p.ops.is_empty());
        assert_eq!(p.wake_at, Some(t(110)));
    }

    #[test]
    fn an_unhealthy_container_is_killed_then_restarts_like_a_crashed_one() {
        let b = book(pod("a", &[("c", "i")]));
        let mut ps = pods(vec![b.clone()]);
        let none = HashSet::new();
        let running = vec![inst(&b, 0, 0, "x0", RunState::Running { started_at: t(0) })];
        ps.get_mut("a").unwrap().unhealthy[0] = Some(Unhealthy {
            id: "x0".into(),
            probe: ProbeKind::Liveness,
        });
        let p = plan(&mut ps, &running, &none, &fast(), t(100));
        assert_eq!(
            p.ops[0].actions,
            vec![Action::Kill {
                id: "x0".into(),
                index: 0
            }]
        );
        // Killed: the mark goes, and the exited instance restarts as attempt 1.
        let killed = vec![inst(&b, 0, 0, "x0", exited(143, 0, 200))];
        let p = plan(&mut ps, &killed, &none, &fast(), t(200));
        assert_eq!(ps["a"].unhealthy[0], None);
        assert_eq!(
            p.ops[0].actions,
            vec![Action::Start {
                index: 0,
                attempt: 1
            }]
        );
        // A mark for an instance that is already gone is dropped, no kill.
        ps.get_mut("a").unwrap().unhealthy[0] = Some(Unhealthy {
            id: "old".into(),
            probe: ProbeKind::Startup,
        });
        let p = plan(&mut ps, &running, &none, &fast(), t(300));
        assert!(p.ops.is_empty(), "{p:?}");
        assert_eq!(ps["a"].unhealthy[0], None);
    }

    #[test]
    fn spec_of_finds_the_spec_an_instance_runs() {
        let mut b = book(pod("a", &[("c", "v1")]));
        let old = inst(&b, 0, 0, "x", RunState::Running { started_at: t(0) });
        b.update(pod("a", &[("c", "v2")]));
        assert_eq!(b.spec_of(&old).unwrap().image, "v1");
        let new = inst(&b, 0, 1, "y", RunState::Running { started_at: t(0) });
        assert_eq!(b.spec_of(&new).unwrap().image, "v2");
    }

    #[test]
    fn updates_keep_backoff_by_container_name() {
        let mut b = book(pod("a", &[("x", "i"), ("y", "i")]));
        let e = Backoff {
            delay: Duration::from_secs(20),
            last_restart: t(0),
        };
        b.restarts[1] = Some(e);
        b.update(pod("a", &[("y", "i2"), ("x", "i")]));
        assert_eq!(b.restarts, vec![Some(e), None]);
        assert_eq!(b.hashes.len(), 2);
    }
}
