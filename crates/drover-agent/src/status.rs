//! Pod status, built the way the kubelet builds it (pure).
//!
//! - `containerStatuses`, one per container of the spec, from the newest
//!   instance the runtime holds: `waiting` (`ContainerCreating`, or
//!   `CrashLoopBackOff` while a restart backoff runs, or the reason of a
//!   failed start), `running` with `startedAt`, or `terminated` with the
//!   exit code and reason; `lastState` from the instance before;
//!   `restartCount` = the newest instance's attempt; `started` when running
//!   and its startup probe (if any) succeeded; `ready` when running and both
//!   the runtime and the probes ([`crate::probe`]: startup, then readiness)
//!   say so.
//! - `phase` by the kubelet's rules: Pending while a container never ran,
//!   Running while one runs or will be restarted, Succeeded/Failed once
//!   all exited for good.
//! - conditions `PodScheduled`, `Initialized`, `ContainersReady`, `Ready`,
//!   whose `lastTransitionTime` moves only when their status does.
//! - `hostIP`, `podIP`, `startTime`.

use crate::backoff::RestartPolicy;
use crate::clock::rfc3339;
use crate::plan::{restarts, PodBook};
use crate::probe::{ContainerProbes, ProbeStatus};
use crate::runtime::{ContainerInfo, RunState};
use drover_api::{
    pod_condition, ConditionStatus, ContainerState, ContainerStateRunning,
    ContainerStateTerminated, ContainerStateWaiting, ContainerStatus, PodCondition, PodPhase,
    PodStatus,
};
use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

/// The node-level facts a status needs.
#[derive(Debug, Clone, Copy)]
pub struct StatusContext<'a> {
    /// The node's IP.
    pub host_ip: &'a str,
    /// The container restart backoff (for `CrashLoopBackOff`).
    pub policy: &'a RestartPolicy,
    /// Now.
    pub now: SystemTime,
    /// What the probes say, by container instance id; an instance without
    /// an entry has [`ContainerProbes::initial_status`].
    pub probes: &'a HashMap<String, ProbeStatus>,
}

fn terminated(c: &ContainerInfo) -> Option<ContainerStateTerminated> {
    match &c.state {
        RunState::Exited {
            exit_code,
            reason,
            started_at,
            finished_at,
        } => Some(ContainerStateTerminated {
            exit_code: *exit_code,
            reason: reason.clone(),
            started_at: started_at.map(rfc3339),
            finished_at: Some(rfc3339(*finished_at)),
            ..Default::default()
        }),
        _ => None,
    }
}

fn waiting(reason: &str, message: String) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: reason.into(),
            message,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn container_status(
    book: &PodBook,
    index: usize,
    instances: &[&ContainerInfo],
    cx: &StatusContext<'_>,
    scheme: &str,
) -> ContainerStatus {
    let spec = &book.pod.spec.containers[index];
    let mut cs = ContainerStatus {
        name: spec.name.clone(),
        image: spec.image.clone(),
        ..Default::default()
    };
    let failure = book.failures[index].as_ref();
    let Some(latest) = instances.first() else {
        cs.state = match failure {
            // A pull that failed again after its first retry: the kubelet's
            // ImagePullBackOff while the next attempt waits.
            Some(f) if f.error.reason == "ErrImagePull" && book.restarts[index].is_some() => {
                waiting(
                    "ImagePullBackOff",
                    format!(
                        "Back-off pulling image {:?}: {}",
                        spec.image, f.error.message
                    ),
                )
            }
            Some(f) => waiting(&f.error.reason, f.error.message.clone()),
            None => waiting("ContainerCreating", String::new()),
        };
        cs.started = Some(false);
        return cs;
    };
    let with_scheme = |c: &ContainerInfo| format!("{scheme}://{}", c.id);
    cs.restart_count = i32::try_from(latest.attempt).unwrap_or(i32::MAX);
    if !latest.image_id.is_empty() {
        cs.image_id = latest.image_id.clone();
    }
    cs.container_id = with_scheme(latest);
    let previous = instances.get(1).and_then(|c| {
        terminated(c).map(|mut t| {
            t.container_id = with_scheme(c);
            t
        })
    });
    cs.last_state = ContainerState {
        terminated: previous,
        ..Default::default()
    };
    match &latest.state {
        RunState::Creating => {
            cs.state = waiting("ContainerCreating", String::new());
            cs.started = Some(false);
        }
        RunState::Running { started_at } => {
            cs.state = ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(rfc3339(*started_at)),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let probes = cx
                .probes
                .get(&latest.id)
                .copied()
                .unwrap_or_else(|| ContainerProbes::initial_status(spec));
            cs.started = Some(probes.started);
            cs.ready = latest.ready && probes.ready;
        }
        RunState::Exited {
            exit_code,
            finished_at,
            ..
        } => {
            cs.started = Some(false);
            let mut t = terminated(latest).unwrap_or_default();
            t.container_id = with_scheme(latest);
            let restart = restarts(book.pod.spec.restart_policy.as_ref(), *exit_code);
            let entry = book.restarts[index];
            let finished = match failure {
                Some(f) if f.at > *finished_at => f.at,
                _ => *finished_at,
            };
            let restart_at = cx.policy.restart_at(entry.as_ref(), finished);
            if restart && failure.is_some() {
                // The restart itself failed.
                if let Some(f) = failure {
                    cs.state = waiting(&f.error.reason, f.error.message.clone());
                }
                cs.last_state.terminated = Some(t);
            } else if restart && restart_at > cx.now {
                let delay = entry.map(|e| e.delay).unwrap_or_default();
                cs.state = waiting(
                    "CrashLoopBackOff",
                    format!(
                        "back-off {} restarting failed container={} pod={}_{}({})",
                        humantime::format_duration(delay),
                        spec.name,
                        book.pod.metadata.name,
                        book.pod.metadata.namespace,
                        book.pod.metadata.uid
                    ),
                );
                cs.last_state.terminated = Some(t);
            } else {
                cs.state = ContainerState {
                    terminated: Some(t),
                    ..Default::default()
                };
            }
        }
    }
    cs
}

/// The kubelet's `getPhase`, without init containers.
fn phase(book: &PodBook, statuses: &[ContainerStatus]) -> PodPhase {
    let (mut waiting, mut running, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for cs in statuses {
        if cs.state.running.is_some() {
            running += 1;
        } else if let Some(t) = &cs.state.terminated {
            stopped += 1;
            if t.exit_code == 0 {
                succeeded += 1;
            }
        } else if cs.last_state.terminated.is_some() {
            stopped += 1;
        } else {
            waiting += 1;
        }
    }
    let policy = book.pod.spec.restart_policy.as_ref();
    if waiting > 0 {
        PodPhase::Pending
    } else if running > 0 {
        PodPhase::Running
    } else if stopped > 0 {
        match policy {
            Some(drover_api::RestartPolicy::Always) | None => PodPhase::Running,
            _ if stopped == succeeded => PodPhase::Succeeded,
            Some(drover_api::RestartPolicy::Never) => PodPhase::Failed,
            _ => PodPhase::Running,
        }
    } else {
        PodPhase::Pending
    }
}

fn condition(
    previous: &BTreeMap<&str, &PodCondition>,
    kind: &str,
    ok: bool,
    reason: &str,
    message: String,
    now: &str,
) -> PodCondition {
    let status = if ok {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    let since = previous
        .get(kind)
        .filter(|c| c.status.as_ref() == Some(&status))
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.to_string());
    PodCondition {
        r#type: kind.into(),
        status: Some(status),
        last_transition_time: Some(since),
        reason: if ok { String::new() } else { reason.into() },
        message: if ok { String::new() } else { message },
        ..Default::default()
    }
}

/// Builds a pod's status from what the runtime holds for it (`observed`:
/// its instances, any order). `book.status` is the previous status, whose
/// conditions' transition times are kept. `scheme` prefixes container ids
/// (`sim`, `docker`).
pub fn build_status(
    book: &PodBook,
    observed: &BTreeMap<&str, Vec<&ContainerInfo>>,
    cx: &StatusContext<'_>,
    scheme: &str,
) -> PodStatus {
    let now = rfc3339(cx.now);
    let statuses: Vec<ContainerStatus> = book
        .pod
        .spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut instances: Vec<&ContainerInfo> =
                observed.get(c.name.as_str()).cloned().unwrap_or_default();
            instances.sort_by_key(|c| std::cmp::Reverse(c.attempt));
            container_status(book, i, &instances, cx, scheme)
        })
        .collect();
    let phase = phase(book, &statuses);
    let previous: BTreeMap<&str, &PodCondition> = book
        .status
        .iter()
        .flat_map(|s| s.conditions.iter())
        .map(|c| (c.r#type.as_str(), c))
        .collect();
    let unready: Vec<&str> = statuses
        .iter()
        .filter(|c| !c.ready)
        .map(|c| c.name.as_str())
        .collect();
    let terminal = matches!(phase, PodPhase::Succeeded | PodPhase::Failed);
    let all_ready = unready.is_empty() && !terminal;
    let (reason, message) = if terminal {
        ("PodCompleted", String::new())
    } else {
        (
            "ContainersNotReady",
            format!("containers with unready status: [{}]", unready.join(" ")),
        )
    };
    let conditions = vec![
        condition(
            &previous,
            pod_condition::POD_SCHEDULED,
            true,
            "",
            String::new(),
            &book.start_time,
        ),
        condition(
            &previous,
            "Initialized",
            true,
            "",
            String::new(),
            &book.start_time,
        ),
        condition(
            &previous,
            pod_condition::CONTAINERS_READY,
            all_ready,
            reason,
            message.clone(),
            &now,
        ),
        condition(
            &previous,
            pod_condition::READY,
            all_ready,
            reason,
            message,
            &now,
        ),
    ];
    let pod_ip = if book.pod.spec.host_network {
        cx.host_ip.to_string()
    } else {
        observed
            .values()
            .flatten()
            .find_map(|c| c.pod_ip.clone())
            .unwrap_or_default()
    };
    PodStatus {
        phase: Some(phase),
        conditions,
        host_ip: cx.host_ip.to_string(),
        pod_ip,
        start_time: Some(book.start_time.clone()),
        container_statuses: statuses,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::Backoff;
    use crate::plan::tests::{book, exited, inst, pod, t};
    use crate::plan::StartFailure;
    use crate::runtime::RuntimeError;
    use std::time::Duration;

    fn policy() -> RestartPolicy {
        RestartPolicy {
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
        }
    }

    fn build(b: &PodBook, observed: &[ContainerInfo], now: SystemTime) -> PodStatus {
        build_with(b, observed, now, &HashMap::new())
    }

    fn build_with(
        b: &PodBook,
        observed: &[ContainerInfo],
        now: SystemTime,
        probes: &HashMap<String, ProbeStatus>,
    ) -> PodStatus {
        let p = policy();
        let cx = StatusContext {
            host_ip: "192.0.2.7",
            policy: &p,
            now,
            probes,
        };
        let mut m: BTreeMap<&str, Vec<&ContainerInfo>> = BTreeMap::new();
        for c in observed {
            m.entry(c.container.as_str()).or_default().push(c);
        }
        build_status(b, &m, &cx, "sim")
    }

    fn cond<'a>(s: &'a PodStatus, kind: &str) -> &'a PodCondition {
        s.conditions.iter().find(|c| c.r#type == kind).unwrap()
    }

    #[test]
    fn a_pod_not_started_yet_is_pending_and_creating() {
        let b = book(pod("a", &[("c", "img")]));
        let s = build(&b, &[], t(0));
        assert_eq!(s.phase, Some(PodPhase::Pending));
        let cs = &s.container_statuses[0];
        assert_eq!(cs.name, "c");
        assert_eq!(cs.image, "img");
        assert_eq!(
            cs.state.waiting.as_ref().unwrap().reason,
            "ContainerCreating"
        );
        assert!(!cs.ready);
        assert_eq!(cond(&s, "PodScheduled").status, Some(ConditionStatus::True));
        assert_eq!(cond(&s, "Ready").status, Some(ConditionStatus::False));
        assert_eq!(cond(&s, "Ready").reason, "ContainersNotReady");
        assert_eq!(
            cond(&s, "Ready").message,
            "containers with unready status: [c]"
        );
        assert_eq!(s.host_ip, "192.0.2.7");
        assert_eq!(s.start_time.as_deref(), Some("2023-11-14T22:13:20Z"));
        // Kubernetes field names on the wire.
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v["containerStatuses"][0]["state"]["waiting"]["reason"],
            "ContainerCreating"
        );
        assert_eq!(v["hostIP"], "192.0.2.7");
    }

    #[test]
    fn a_running_ready_pod_and_stable_transition_times() {
        let mut b = book(pod("a", &[("c", "img")]));
        let running = vec![inst(&b, 0, 0, "x", RunState::Running { started_at: t(0) })];
        let s1 = build(&b, &running, t(1000));
        assert_eq!(s1.phase, Some(PodPhase::Running));
        assert_eq!(cond(&s1, "Ready").status, Some(ConditionStatus::True));
        assert_eq!(
            cond(&s1, "ContainersReady").status,
            Some(ConditionStatus::True)
        );
        let cs = &s1.container_statuses[0];
        assert!(cs.ready);
        assert_eq!(cs.started, Some(true));
        assert_eq!(cs.container_id, "sim://x");
        assert_eq!(
            cs.state.running.as_ref().unwrap().started_at.as_deref(),
            Some("2023-11-14T22:13:20Z")
        );
        assert_eq!(s1.pod_ip, "10.0.0.9");
        // Later, nothing changed: the same status, to the byte.
        b.status = Some(s1.clone());
        let s2 = build(&b, &running, t(60_000));
        assert_eq!(s1, s2);
    }

    #[test]
    fn never_ready_containers_keep_the_pod_unready() {
        let b = book(pod("a", &[("c", "sim/never-ready")]));
        let mut i = inst(&b, 0, 0, "x", RunState::Running { started_at: t(0) });
        i.ready = false;
        let s = build(&b, &[i], t(10));
        assert_eq!(s.phase, Some(PodPhase::Running));
        assert_eq!(cond(&s, "Ready").status, Some(ConditionStatus::False));
        assert!(!s.container_statuses[0].ready);
    }

    #[test]
    fn probes_gate_started_and_ready() {
        let mut p = pod("a", &[("c", "img"), ("d", "img")]);
        p.spec.containers[0].readiness_probe = Some(drover_api::Probe::default());
        p.spec.containers[1].startup_probe = Some(drover_api::Probe::default());
        let b = book(p);
        let run = RunState::Running { started_at: t(0) };
        let observed = vec![inst(&b, 0, 0, "x", run.clone()), inst(&b, 1, 0, "y", run)];
        // No probe has passed yet: not ready, d not even started.
        let s = build(&b, &observed, t(10));
        let (c, d) = (&s.container_statuses[0], &s.container_statuses[1]);
        assert_eq!((c.started, c.ready), (Some(true), false));
        assert_eq!((d.started, d.ready), (Some(false), false));
        assert_eq!(cond(&s, "Ready").status, Some(ConditionStatus::False));
        assert_eq!(
            cond(&s, "Ready").message,
            "containers with unready status: [c d]"
        );
        assert_eq!(
            cond(&s, "ContainersReady").status,
            Some(ConditionStatus::False)
        );
        // Both pass: ready.
        let ok = ProbeStatus {
            started: true,
            ready: true,
        };
        let probes: HashMap<String, ProbeStatus> =
            [("x".to_string(), ok), ("y".to_string(), ok)].into();
        let s = build_with(&b, &observed, t(20), &probes);
        assert!(s
            .container_statuses
            .iter()
            .all(|c| c.ready && c.started == Some(true)));
        assert_eq!(cond(&s, "Ready").status, Some(ConditionStatus::True));
        assert_eq!(
            cond(&s, "ContainersReady").status,
            Some(ConditionStatus::True)
        );
        // Readiness ANDs with the runtime's own view.
        let mut never = observed.clone();
        never[0].ready = false;
        let s = build_with(&b, &never, t(30), &probes);
        assert!(!s.container_statuses[0].ready);
    }

    #[test]
    fn crash_loop_back_off_while_waiting_to_restart() {
        let mut b = book(pod("a", &[("c", "sim/crash")]));
        b.restarts[0] = Some(Backoff {
            delay: Duration::from_millis(200),
            last_restart: t(1000),
        });
        let observed = vec![
            inst(&b, 0, 1, "x1", exited(1, 500, 900)),
            inst(&b, 0, 2, "x2", exited(1, 1000, 1500)),
        ];
        let s = build(&b, &observed, t(1600));
        assert_eq!(
            s.phase,
            Some(PodPhase::Running),
            "restartPolicy Always keeps it Running"
        );
        let cs = &s.container_statuses[0];
        assert_eq!(cs.restart_count, 2);
        let w = cs.state.waiting.as_ref().unwrap();
        assert_eq!(w.reason, "CrashLoopBackOff");
        assert_eq!(
            w.message,
            "back-off 200ms restarting failed container=c pod=pod-a_default(a)"
        );
        let last = cs.last_state.terminated.as_ref().unwrap();
        assert_eq!(last.exit_code, 1);
        assert_eq!(last.reason, "Error");
        assert_eq!(last.container_id, "sim://x2");
        // Backoff over: terminated, about to restart.
        let s = build(&b, &observed, t(1700));
        assert!(s.container_statuses[0].state.terminated.is_some());
    }

    #[test]
    fn restart_policy_never_fails_and_succeeds() {
        let mut p = pod("a", &[("c", "i")]);
        p.spec.restart_policy = Some(drover_api::RestartPolicy::Never);
        let b = book(p);
        let s = build(&b, &[inst(&b, 0, 0, "x", exited(3, 0, 10))], t(20));
        assert_eq!(s.phase, Some(PodPhase::Failed));
        assert_eq!(cond(&s, "Ready").reason, "PodCompleted");
        let term = s.container_statuses[0].state.terminated.as_ref().unwrap();
        assert_eq!(term.exit_code, 3);
        let s = build(&b, &[inst(&b, 0, 0, "x", exited(0, 0, 10))], t(20));
        assert_eq!(s.phase, Some(PodPhase::Succeeded));
    }

    #[test]
    fn a_failed_start_shows_its_reason() {
        let mut b = book(pod("a", &[("c", "missing")]));
        b.failures[0] = Some(StartFailure {
            at: t(0),
            error: RuntimeError::new("ErrImageNeverPull", "image \"missing\" is not present"),
        });
        let s = build(&b, &[], t(5));
        let w = s.container_statuses[0].state.waiting.as_ref().unwrap();
        assert_eq!(w.reason, "ErrImageNeverPull");
        assert_eq!(s.phase, Some(PodPhase::Pending));
    }

    #[test]
    fn a_pull_that_fails_again_is_image_pull_back_off() {
        let mut b = book(pod("a", &[("c", "registry.invalid/x:1")]));
        b.failures[0] = Some(StartFailure {
            at: t(0),
            error: RuntimeError::new("ErrImagePull", "Failed to pull image"),
        });
        let s = build(&b, &[], t(1));
        let w = s.container_statuses[0].state.waiting.as_ref().unwrap();
        assert_eq!(w.reason, "ErrImagePull");
        // Retried once and failed again: backing off.
        b.restarts[0] = Some(crate::backoff::Backoff {
            delay: Duration::from_secs(10),
            last_restart: t(1),
        });
        b.failures[0] = Some(StartFailure {
            at: t(2),
            error: RuntimeError::new("ErrImagePull", "Failed to pull image"),
        });
        let s = build(&b, &[], t(3));
        let w = s.container_statuses[0].state.waiting.as_ref().unwrap();
        assert_eq!(w.reason, "ImagePullBackOff");
        assert!(
            w.message
                .starts_with("Back-off pulling image \"registry.invalid/x:1\""),
            "{}",
            w.message
        );
        assert_eq!(s.phase, Some(PodPhase::Pending));
    }
}
