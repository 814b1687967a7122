//! Container probes (`startupProbe`, `readinessProbe`, `livenessProbe`) and
//! the `lifecycle.preStop` hook, run the way the kubelet runs them.
//!
//! - **Decisions, pure.** [`ProbeState`] is one probe: consecutive results
//!   against `successThreshold`/`failureThreshold`, and when the next run
//!   is due (`initialDelaySeconds` after the container started, then every
//!   `periodSeconds`). [`ContainerProbes`] puts a container's probes
//!   together with Kubernetes' rules: the startup probe gates the other two
//!   (neither runs before it succeeded, and the container is neither
//!   started nor ready meanwhile); readiness starts as failed, liveness as
//!   passed; a startup or liveness probe that reaches its failure threshold
//!   makes the container [`Verdict::Unhealthy`] and puts the probes on
//!   hold. Time comes in as an argument.
//! - **Handlers.** `exec` goes through [`Runtime::exec`]; `httpGet` is a
//!   minimal HTTP/1.1 GET over a TCP stream (success: a status in
//!   200..=399; `HTTPS` is refused by name: the agent carries no TLS
//!   client for probes); `tcpSocket` connects. The host defaults to the
//!   pod's IP (the node's for `hostNetwork` pods); the port is a number or
//!   the name of one of the container's ports. Each run is bounded by
//!   `timeoutSeconds`.
//! - **Workers.** [`run_worker`] is one task per container instance that
//!   has probes. It never touches the pod: it sends what changed
//!   ([`ProbeReport`]) to the sync loop, which ANDs readiness into the
//!   container's `ready`, and kills an unhealthy container (its preStop
//!   hook first, then the stop signal); the restart is the sync loop's
//!   usual one, with backoff and a growing `restartCount`.
//! - **preStop.** [`pre_stop`] runs a container's hook (exec, httpGet or
//!   sleep) before the stop signal, bounded by the grace period; the stop
//!   gets what is left of it ([`remaining_grace`]).

use crate::clock::Clock;
use crate::runtime::Runtime;
use drover_api::{Container, Probe, UriScheme};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Which of a container's probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProbeKind {
    /// `startupProbe`.
    Startup,
    /// `readinessProbe`.
    Readiness,
    /// `livenessProbe`.
    Liveness,
}

impl ProbeKind {
    /// Its name in messages: `startup`, `readiness`, `liveness`.
    pub fn name(self) -> &'static str {
        match self {
            ProbeKind::Startup => "startup",
            ProbeKind::Readiness => "readiness",
            ProbeKind::Liveness => "liveness",
        }
    }

    /// Its field in the container spec (`livenessProbe`, …).
    pub fn field(self) -> &'static str {
        match self {
            ProbeKind::Startup => "startupProbe",
            ProbeKind::Readiness => "readinessProbe",
            ProbeKind::Liveness => "livenessProbe",
        }
    }

    /// The container's probe of this kind.
    pub fn of(self, c: &Container) -> Option<&Probe> {
        match self {
            ProbeKind::Startup => c.startup_probe.as_ref(),
            ProbeKind::Readiness => c.readiness_probe.as_ref(),
            ProbeKind::Liveness => c.liveness_probe.as_ref(),
        }
    }
}

/// The outcome of one probe run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It passed.
    Success,
    /// It failed (or timed out).
    Failure,
}

/// A probe's timing and thresholds, with Kubernetes' defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// `initialDelaySeconds` (0).
    pub initial_delay: Duration,
    /// `periodSeconds` (10, at least 1).
    pub period: Duration,
    /// `timeoutSeconds` (1, at least 1).
    pub timeout: Duration,
    /// `successThreshold` (1).
    pub success_threshold: u32,
    /// `failureThreshold` (3).
    pub failure_threshold: u32,
}

impl Timing {
    /// The timing of `p`, defaults filled in.
    pub fn of(p: &Probe) -> Timing {
        let secs = |v: Option<i32>, default: u64, min: u64| {
            Duration::from_secs(
                v.map_or(default, |v| u64::try_from(v).unwrap_or(0))
                    .max(min),
            )
        };
        let count = |v: Option<i32>, default: u32| {
            v.map_or(default, |v| u32::try_from(v).unwrap_or(0)).max(1)
        };
        Timing {
            initial_delay: secs(p.initial_delay_seconds, 0, 0),
            period: secs(p.period_seconds, 10, 1),
            timeout: secs(p.timeout_seconds, 1, 1),
            success_threshold: count(p.success_threshold, 1),
            failure_threshold: count(p.failure_threshold, 3),
        }
    }
}

/// One probe of one container instance: its result and when it runs next.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeState {
    timing: Timing,
    /// What the probe says; `None` until a threshold is first reached
    /// (only the startup probe starts undecided).
    result: Option<Outcome>,
    /// The last run's outcome and how many runs in a row gave it.
    last: Option<Outcome>,
    run: u32,
    due: Instant,
}

impl ProbeState {
    /// A probe of a container that started at `started`: first due
    /// `initialDelaySeconds` later, with `initial` as its result until the
    /// runs decide otherwise.
    pub fn new(timing: Timing, initial: Option<Outcome>, started: Instant) -> Self {
        ProbeState {
            timing,
            result: initial,
            last: None,
            run: 0,
            due: started + timing.initial_delay,
        }
    }

    /// When the next run is due.
    pub fn due(&self) -> Instant {
        self.due
    }

    /// What the probe says now.
    pub fn result(&self) -> Option<Outcome> {
        self.result
    }

    /// Its timing.
    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// Records a run that ended at `now` and schedules the next one on the
    /// probe's period (a run that overran skips the ticks it missed, like
    /// the kubelet's ticker). Answers the new result when it changed.
    pub fn record(&mut self, outcome: Outcome, now: Instant) -> Option<Outcome> {
        if self.last == Some(outcome) {
            self.run = self.run.saturating_add(1);
        } else {
            self.last = Some(outcome);
            self.run = 1;
        }
        let period = self.timing.period;
        let mut next = self.due + period;
        if next <= now {
            let behind = now.duration_since(next).as_nanos();
            let ticks = behind / period.as_nanos().max(1) + 1;
            next += period * u32::try_from(ticks).unwrap_or(u32::MAX);
        }
        self.due = next;
        let threshold = match outcome {
            Outcome::Success => self.timing.success_threshold,
            Outcome::Failure => self.timing.failure_threshold,
        };
        if self.run < threshold || self.result == Some(outcome) {
            return None;
        }
        self.result = Some(outcome);
        Some(outcome)
    }
}

/// What the probes say of a container, for its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProbeStatus {
    /// `started`: no startup probe, or it succeeded.
    pub started: bool,
    /// Started, and no readiness probe or it passes (ANDed with the
    /// runtime's own view).
    pub ready: bool,
}

/// What a probe run changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing the sync loop needs to know.
    Unchanged,
    /// The container's started/ready changed.
    Status(ProbeStatus),
    /// The startup or liveness probe reached its failure threshold: kill
    /// the container (the probes are on hold from now on).
    Unhealthy(ProbeKind),
}

/// All probes of one container instance; see the module documentation.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerProbes {
    startup: Option<ProbeState>,
    readiness: Option<ProbeState>,
    liveness: Option<ProbeState>,
    on_hold: bool,
}

impl ContainerProbes {
    /// The probes of container `c` whose instance started at `started`;
    /// `None` when it has none.
    pub fn new(c: &Container, started: Instant) -> Option<Self> {
        let state = |p: Option<&Probe>, initial| {
            p.map(|p| ProbeState::new(Timing::of(p), initial, started))
        };
        let probes = ContainerProbes {
            startup: state(c.startup_probe.as_ref(), None),
            readiness: state(c.readiness_probe.as_ref(), Some(Outcome::Failure)),
            liveness: state(c.liveness_probe.as_ref(), Some(Outcome::Success)),
            on_hold: false,
        };
        (probes.startup.is_some() || probes.readiness.is_some() || probes.liveness.is_some())
            .then_some(probes)
    }

    /// What the probes of a container without any state yet say (its
    /// worker has not started): started unless it has a startup probe,
    /// ready unless it has a startup or readiness probe.
    pub fn initial_status(c: &Container) -> ProbeStatus {
        let started = c.startup_probe.is_none();
        ProbeStatus {
            started,
            ready: started && c.readiness_probe.is_none(),
        }
    }

    fn state(&self, kind: ProbeKind) -> Option<&ProbeState> {
        match kind {
            ProbeKind::Startup => self.startup.as_ref(),
            ProbeKind::Readiness => self.readiness.as_ref(),
            ProbeKind::Liveness => self.liveness.as_ref(),
        }
    }

    fn state_mut(&mut self, kind: ProbeKind) -> Option<&mut ProbeState> {
        match kind {
            ProbeKind::Startup => self.startup.as_mut(),
            ProbeKind::Readiness => self.readiness.as_mut(),
            ProbeKind::Liveness => self.liveness.as_mut(),
        }
    }

    /// The timing of one of the probes.
    pub fn timing(&self, kind: ProbeKind) -> Option<Timing> {
        self.state(kind).map(ProbeState::timing)
    }

    fn started(&self) -> bool {
        self.startup
            .as_ref()
            .is_none_or(|s| s.result() == Some(Outcome::Success))
    }

    /// What the probes say now.
    pub fn status(&self) -> ProbeStatus {
        let started = self.started();
        let ready = started
            && self
                .readiness
                .as_ref()
                .is_none_or(|r| r.result() == Some(Outcome::Success));
        ProbeStatus { started, ready }
    }

    /// The next probe to run and when: the startup probe until it
    /// succeeded, then whichever of readiness and liveness is due first;
    /// `None` on hold.
    pub fn next(&self) -> Option<(ProbeKind, Instant)> {
        if self.on_hold {
            return None;
        }
        if !self.started() {
            return self.startup.as_ref().map(|s| (ProbeKind::Startup, s.due()));
        }
        [ProbeKind::Liveness, ProbeKind::Readiness]
            .into_iter()
            .filter_map(|k| self.state(k).map(|s| (k, s.due())))
            .min_by_key(|(_, due)| *due)
    }

    /// Records a run of probe `kind` that ended at `now`.
    pub fn record(&mut self, kind: ProbeKind, outcome: Outcome, now: Instant) -> Verdict {
        let before = self.status();
        let Some(state) = self.state_mut(kind) else {
            return Verdict::Unchanged;
        };
        let changed = state.record(outcome, now);
        if changed == Some(Outcome::Failure) && kind != ProbeKind::Readiness {
            self.on_hold = true;
            return Verdict::Unhealthy(kind);
        }
        let after = self.status();
        if after == before {
            Verdict::Unchanged
        } else {
            Verdict::Status(after)
        }
    }
}

// ------------------------------------------------------------ handlers

mod handlers;

pub use handlers::{pre_stop, probe_once, remaining_grace, Target, MIN_GRACE_AFTER_HOOK};

// ------------------------------------------------------------ workers

/// What a probe worker tells the sync loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReport {
    /// The pod's uid.
    pub pod_uid: String,
    /// The container's index in the pod spec.
    pub index: usize,
    /// The instance probed.
    pub container_id: String,
    /// What changed.
    pub verdict: Verdict,
    /// Why the last run failed (empty when it passed).
    pub message: String,
    /// The probe whose run just failed, if one did (the kubelet's
    /// `Unhealthy` event, on every failed run).
    pub failed: Option<ProbeKind>,
}

/// The container instance a probe worker probes.
#[derive(Debug, Clone)]
pub struct Probed {
    /// The container's spec (its probes).
    pub container: Container,
    /// The pod's uid.
    pub pod_uid: String,
    /// The container's index in the pod spec.
    pub index: usize,
    /// Where its probes go.
    pub target: Target,
}

/// Probes one container instance until its probes are on hold (it is
/// unhealthy) or the sync loop drops the task (the instance stopped, or
/// the pod went). Reports only changes.
pub(crate) async fn run_worker<R: Runtime>(
    rt: Arc<R>,
    clock: Arc<dyn Clock>,
    probed: Probed,
    mut probes: ContainerProbes,
    tx: mpsc::Sender<Box<ProbeReport>>,
) {
    let Probed {
        container,
        pod_uid,
        index,
        target,
    } = probed;
    for kind in [
        ProbeKind::Startup,
        ProbeKind::Readiness,
        ProbeKind::Liveness,
    ] {
        let https = kind
            .of(&container)
            .and_then(|p| p.http_get.as_ref())
            .is_some_and(|h| h.scheme == Some(UriScheme::Https));
        if https {
            tracing::warn!(
                pod_uid = %pod_uid,
                container = %container.name,
                "{}.httpGet.scheme HTTPS is not supported by drover's prober: the probe fails; use HTTP, a tcpSocket or an exec probe",
                kind.field()
            );
        }
    }
    while let Some((kind, at)) = probes.next() {
        tokio::time::sleep_until(at).await;
        let Some(spec) = kind.of(&container) else {
            return;
        };
        let (outcome, message) = probe_once(rt.as_ref(), &target, spec).await;
        if outcome == Outcome::Failure {
            tracing::debug!(pod_uid = %pod_uid, container = %container.name, "{} probe failed: {message}", kind.name());
        }
        let verdict = probes.record(kind, outcome, clock.now());
        let failed = (outcome == Outcome::Failure).then_some(kind);
        if verdict == Verdict::Unchanged && failed.is_none() {
            continue;
        }
        let report = ProbeReport {
            pod_uid: pod_uid.clone(),
            index,
            container_id: target.container_id.clone(),
            verdict,
            message,
            failed,
        };
        if tx.send(Box::new(report)).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::ExecAction;

    fn probe(period: i32, success: i32, failure: i32, delay: i32) -> Probe {
        Probe {
            exec: Some(ExecAction {
                command: vec!["true".into()],
                ..Default::default()
            }),
            period_seconds: Some(period),
            success_threshold: Some(success),
            failure_threshold: Some(failure),
            initial_delay_seconds: Some(delay),
            ..Default::default()
        }
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn timing_defaults_are_kubernetes_ones() {
        let t = Timing::of(&Probe::default());
        assert_eq!(
            t,
            Timing {
                initial_delay: Duration::ZERO,
                period: secs(10),
                timeout: secs(1),
                success_threshold: 1,
                failure_threshold: 3,
            }
        );
        // Nonsense values are clamped, never a zero period.
        let t = Timing::of(&probe(0, 0, -1, -5));
        assert_eq!(t.period, secs(1));
        assert_eq!((t.success_threshold, t.failure_threshold), (1, 1));
        assert_eq!(t.initial_delay, Duration::ZERO);
    }

    #[test]
    fn thresholds_decide_and_runs_follow_the_period() {
        let t0 = Instant::now();
        let mut s = ProbeState::new(Timing::of(&probe(2, 2, 3, 5)), Some(Outcome::Failure), t0);
        assert_eq!(s.due(), t0 + secs(5), "initialDelaySeconds after the start");
        // One success is not enough with successThreshold 2.
        assert_eq!(s.record(Outcome::Success, t0 + secs(5)), None);
        assert_eq!(s.due(), t0 + secs(7));
        assert_eq!(
            s.record(Outcome::Success, t0 + secs(7)),
            Some(Outcome::Success)
        );
        assert_eq!(s.result(), Some(Outcome::Success));
        // A failure in between resets the run.
        assert_eq!(s.record(Outcome::Failure, t0 + secs(9)), None);
        assert_eq!(s.record(Outcome::Failure, t0 + secs(11)), None);
        assert_eq!(s.record(Outcome::Success, t0 + secs(13)), None);
        assert_eq!(s.record(Outcome::Failure, t0 + secs(15)), None);
        assert_eq!(s.record(Outcome::Failure, t0 + secs(17)), None);
        assert_eq!(
            s.record(Outcome::Failure, t0 + secs(19)),
            Some(Outcome::Failure)
        );
        assert_eq!(
            s.record(Outcome::Failure, t0 + secs(21)),
            None,
            "no change, no news"
        );
        // A run that overran skips the ticks it missed.
        assert_eq!(s.due(), t0 + secs(23));
        s.record(Outcome::Failure, t0 + secs(28));
        assert_eq!(s.due(), t0 + secs(29));
    }

    fn container(startup: bool, readiness: bool, liveness: bool) -> Container {
        Container {
            name: "c".into(),
            startup_probe: startup.then(|| probe(1, 1, 2, 0)),
            readiness_probe: readiness.then(|| probe(1, 1, 1, 3)),
            liveness_probe: liveness.then(|| probe(1, 1, 2, 0)),
            ..Default::default()
        }
    }

    #[test]
    fn no_probes_no_worker_and_the_initial_status() {
        let t0 = Instant::now();
        assert!(ContainerProbes::new(&container(false, false, false), t0).is_none());
        let ready = ContainerProbes::initial_status(&container(false, false, true));
        assert_eq!(
            ready,
            ProbeStatus {
                started: true,
                ready: true
            }
        );
        let r = ContainerProbes::initial_status(&container(false, true, false));
        assert_eq!(
            r,
            ProbeStatus {
                started: true,
                ready: false
            }
        );
        let s = ContainerProbes::initial_status(&container(true, false, false));
        assert_eq!(
            s,
            ProbeStatus {
                started: false,
                ready: false
            }
        );
        for c in [container(false, true, true), container(true, true, true)] {
            let p = ContainerProbes::new(&c, t0).unwrap();
            assert_eq!(p.status(), ContainerProbes::initial_status(&c));
        }
    }

    #[test]
    fn readiness_starts_failed_and_flips_both_ways() {
        let t0 = Instant::now();
        let mut p = ContainerProbes::new(&container(false, true, false), t0).unwrap();
        assert_eq!(p.next(), Some((ProbeKind::Readiness, t0 + secs(3))));
        let v = p.record(ProbeKind::Readiness, Outcome::Success, t0 + secs(3));
        assert_eq!(
            v,
            Verdict::Status(ProbeStatus {
                started: true,
                ready: true
            })
        );
        assert_eq!(
            p.record(ProbeKind::Readiness, Outcome::Success, t0 + secs(4)),
            Verdict::Unchanged
        );
        let v = p.record(ProbeKind::Readiness, Outcome::Failure, t0 + secs(5));
        assert_eq!(
            v,
            Verdict::Status(ProbeStatus {
                started: true,
                ready: false
            })
        );
        // Readiness never kills.
        for i in 6..20 {
            assert_eq!(
                p.record(ProbeKind::Readiness, Outcome::Failure, t0 + secs(i)),
                Verdict::Unchanged
            );
        }
        assert!(p.next().is_some());
    }

    #[test]
    fn liveness_failures_make_the_container_unhealthy_once() {
        let t0 = Instant::now();
        let mut p = ContainerProbes::new(&container(false, false, true), t0).unwrap();
        assert_eq!(
            p.status(),
            ProbeStatus {
                started: true,
                ready: true
            }
        );
        assert_eq!(p.next(), Some((ProbeKind::Liveness, t0)));
        assert_eq!(
            p.record(ProbeKind::Liveness, Outcome::Failure, t0),
            Verdict::Unchanged
        );
        assert_eq!(
            p.record(ProbeKind::Liveness, Outcome::Success, t0 + secs(1)),
            Verdict::Unchanged
        );
        assert_eq!(
            p.record(ProbeKind::Liveness, Outcome::Failure, t0 + secs(2)),
            Verdict::Unchanged
        );
        assert_eq!(
            p.record(ProbeKind::Liveness, Outcome::Failure, t0 + secs(3)),
            Verdict::Unhealthy(ProbeKind::Liveness)
        );
        assert_eq!(p.next(), None, "on hold until the container is replaced");
    }

    #[test]
    fn the_startup_probe_gates_readiness_and_liveness() {
        let t0 = Instant::now();
        let mut p = ContainerProbes::new(&container(true, true, true), t0).unwrap();
        assert_eq!(
            p.status(),
            ProbeStatus {
                started: false,
                ready: false
            }
        );
        // Only the startup probe runs, whatever the others' due times.
        assert_eq!(p.next(), Some((ProbeKind::Startup, t0)));
        assert_eq!(
            p.record(ProbeKind::Startup, Outcome::Failure, t0),
            Verdict::Unchanged
        );
        assert_eq!(p.next(), Some((ProbeKind::Startup, t0 + secs(1))));
        let v = p.record(ProbeKind::Startup, Outcome::Success, t0 + secs(1));
        assert_eq!(
            v,
            Verdict::Status(ProbeStatus {
                started: true,
                ready: false
            })
        );
        // Then liveness (due since t0) and readiness (t0 + 3 s).
        let ms = Duration::from_millis;
        assert_eq!(p.next(), Some((ProbeKind::Liveness, t0)));
        p.record(ProbeKind::Liveness, Outcome::Success, t0 + secs(1));
        assert_eq!(
            p.next(),
            Some((ProbeKind::Liveness, t0 + secs(2))),
            "the next tick"
        );
        p.record(ProbeKind::Liveness, Outcome::Success, t0 + secs(2) + ms(10));
        assert_eq!(
            p.next(),
            Some((ProbeKind::Liveness, t0 + secs(3))),
            "a tie: liveness first"
        );
        p.record(ProbeKind::Liveness, Outcome::Success, t0 + secs(3) + ms(10));
        assert_eq!(p.next(), Some((ProbeKind::Readiness, t0 + secs(3))));
        let v = p.record(ProbeKind::Readiness, Outcome::Success, t0 + secs(3));
        assert_eq!(
            v,
            Verdict::Status(ProbeStatus {
                started: true,
                ready: true
            })
        );

        // A startup probe that keeps failing kills the container.
        let mut p = ContainerProbes::new(&container(true, true, true), t0).unwrap();
        p.record(ProbeKind::Startup, Outcome::Failure, t0);
        assert_eq!(
            p.record(ProbeKind::Startup, Outcome::Failure, t0 + secs(1)),
            Verdict::Unhealthy(ProbeKind::Startup)
        );
        assert_eq!(p.next(), None);
    }
}
