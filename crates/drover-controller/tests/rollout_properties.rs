//! Property tests of DaemonSet rolling updates, driven through the public
//! planner (`daemon::plan`) over a small simulated cluster, checked against
//! what Kubernetes guarantees (`pkg/controller/daemon/update.go`,
//! `rollingUpdate`, and the DaemonSet rolling-update documentation), with
//! availability from the independent `oracle::availability` (never the
//! planner's `is_available`):
//!
//! - random `maxSurge` with `maxUnavailable`, each an integer or a
//!   percentage (rounded up against the desired nodes), one of them maybe
//!   0 but never both; `minReadySeconds` 0 to 5; or `OnDelete`;
//! - while the rollout runs, pods start (turn ready), pods fail (the
//!   planner replaces them, with its backoff), and nodes flap NotReady
//!   (Ready `Unknown` with the `unreachable` taints, or `False` with the
//!   `not-ready` ones; their pods marked not ready) and back, and nodes
//!   join; a deleted pod may stay terminating for a few
//!   seconds (`deletionTimestamp` set), and never counts as available.
//!
//! Checked at every step:
//!
//! - an available pod is taken down (deleted, leaving its node without an
//!   available pod) only when the Ready desired nodes the rollout already
//!   made unavailable (no pod, or a new pod not yet available; not those
//!   whose old pod is unavailable by itself, which Kubernetes replaces at
//!   once without counting it) plus those taken down stay within
//!   `maxUnavailable`; with surge, never (Kubernetes deletes an available
//!   old pod only once the new pod beside it is available);
//! - a new pod is started beside an available old one only while the
//!   surging nodes (old and new pod, the new not yet available) stay
//!   within `maxSurge`; without surge no node ever has two pods;
//! - never two pods of one revision on a node;
//! - `OnDelete`: nothing is replaced but failed pods;
//! - drover's documented difference: a node that is not Ready is left
//!   alone (no rollout deletion there, but for the old pod of a surge
//!   pair, which Kubernetes' manage loop deletes once it is not ready).
//!
//! And at the end, once the faults stop and pods turn ready: every Ready
//! node runs exactly one pod, of the new revision, available (with
//! `OnDelete`: the old pods that never failed are still there).
//!
//! At every step the same plan is also made with a [`daemon::Memo`] from
//! only the nodes that changed since the last step (as the server's
//! controller does), and must be the plan of the whole cluster but for the
//! random names: the same deletions, creations by node, status, backoff,
//! decision events and requeue time.

mod oracle;
mod seed;
mod shadow;

use drover_api::{
    ConditionStatus, Container, DaemonSet, DaemonSetUpdateStrategyType, IntOrString, LabelSelector,
    Node, NodeCondition, OwnerReference, Pod, PodCondition, PodPhase, RollingUpdateDaemonSet,
    Taint, TaintEffect,
};
use drover_controller::daemon::{self, DeletionReason, FailedPodBackoff, PlanInput};
use drover_controller::Timestamp;
use oracle::availability::available_since;
use proptest::prelude::*;
use proptest::sample::Index;
use rand::rngs::StdRng;
use rand::SeedableRng;
use shadow::Shadow;

const NEW: &str = "new";
const OLD: &str = "old";
const HASH_LABEL: &str = "controller-revision-hash";

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_unix_seconds(1_700_000_000 + seconds)
}

#[derive(Debug, Clone)]
enum Strategy_ {
    Rolling {
        max_surge: IntOrString,
        max_unavailable: IntOrString,
    },
    OnDelete,
}

/// The number an `IntOrString` budget carries (what validation looks at).
fn number(v: &IntOrString) -> i64 {
    match v {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(s) => s.trim_end_matches('%').parse().unwrap(),
    }
}

/// Kubernetes' `GetScaledValueFromIntOrPercent(v, total, roundUp=true)`.
fn scaled(v: &IntOrString, total: i64) -> i64 {
    match v {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(_) => (number(v) * total + 99) / 100,
    }
}

fn budget() -> impl proptest::strategy::Strategy<Value = IntOrString> {
    prop_oneof![
        (0i32..=3).prop_map(IntOrString::Int),
        prop::sample::select(vec![0, 10, 25, 34, 50, 100])
            .prop_map(|p| IntOrString::String(format!("{p}%"))),
    ]
}

fn update_strategy() -> impl proptest::strategy::Strategy<Value = Strategy_> {
    prop_oneof![
        6 => (budget(), budget())
            .prop_filter("maxSurge and maxUnavailable may not both be 0", |(s, u)| {
                number(s) != 0 || number(u) != 0
            })
            .prop_map(|(max_surge, max_unavailable)| Strategy_::Rolling {
                max_surge,
                max_unavailable,
            }),
        1 => Just(Strategy_::OnDelete),
    ]
}

fn daemon_set(strategy: &Strategy_, min_ready: i64) -> DaemonSet {
    let mut ds = DaemonSet::default();
    ds.metadata.name = "agent".into();
    ds.metadata.namespace = "default".into();
    ds.metadata.uid = "ds-uid".into();
    ds.metadata.generation = Some(2);
    let labels: drover_api::Labels = [("app".to_string(), "agent".to_string())].into();
    ds.spec.selector = Some(LabelSelector {
        match_labels: labels.clone(),
        ..Default::default()
    });
    ds.spec.template.metadata.labels = labels;
    ds.spec.template.spec.containers = vec![Container {
        name: "agent".into(),
        image: "busybox:2".into(),
        ..Default::default()
    }];
    ds.spec.min_ready_seconds = Some(min_ready as i32);
    match strategy {
        Strategy_::Rolling {
            max_surge,
            max_unavailable,
        } => {
            ds.spec.update_strategy.r#type = Some(DaemonSetUpdateStrategyType::RollingUpdate);
            ds.spec.update_strategy.rolling_update = Some(RollingUpdateDaemonSet {
                max_unavailable: Some(max_unavailable.clone()),
                max_surge: Some(max_surge.clone()),
                ..Default::default()
            });
        }
        Strategy_::OnDelete => {
            ds.spec.update_strategy.r#type = Some(DaemonSetUpdateStrategyType::OnDelete);
        }
    }
    ds
}

/// A pod as the simulation knows it.
#[derive(Debug, Clone)]
struct SimPod {
    name: String,
    node: usize,
    new: bool,
    created: i64,
    /// Its container is up and would pass readiness on a Ready node.
    started: bool,
    failed: bool,
    /// Ready since (the simulation's truth).
    ready_since: Option<i64>,
}

struct World {
    ds: DaemonSet,
    min_ready: i64,
    rolling: Option<(IntOrString, IntOrString)>,
    ready: Vec<bool>,
    pods: Vec<SimPod>,
    clock: i64,
    backoff: FailedPodBackoff,
    next: usize,
    /// Old pods that failed (OnDelete: the only ones replaced).
    failed_old: Vec<String>,
    /// Deleted pods still terminating, and the second they are gone.
    terminating: Vec<(SimPod, i64)>,
    /// How long each deletion takes, in turn (seconds; 0: at once).
    lingers: Vec<i64>,
    deletions: usize,
    shadow: Shadow,
}

impl World {
    fn node(&self, i: usize) -> Node {
        let mut node = Node::default();
        node.metadata.name = format!("n{i}");
        let ready = self.ready[i];
        // Away: even nodes unreachable (Ready Unknown), odd ones reported
        // not ready by their agent (Ready False), with the lifecycle's
        // taints.
        let (status, taint) = match (ready, i % 2) {
            (true, _) => (ConditionStatus::True, ""),
            (false, 0) => (ConditionStatus::Unknown, "node.kubernetes.io/unreachable"),
            (false, _) => (ConditionStatus::False, "node.kubernetes.io/not-ready"),
        };
        node.status.conditions.push(NodeCondition {
            r#type: "Ready".into(),
            status: Some(status),
            ..Default::default()
        });
        if !ready {
            for effect in [TaintEffect::NoSchedule, TaintEffect::NoExecute] {
                node.spec.taints.push(Taint {
                    key: taint.into(),
                    effect: Some(effect),
                    ..Default::default()
                });
            }
        }
        node
    }

    fn pod(&self, p: &SimPod) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = p.name.clone();
        pod.metadata.namespace = "default".into();
        pod.metadata.uid = format!("uid-{}", p.name);
        pod.metadata.labels = [
            ("app".to_string(), "agent".to_string()),
            (
                HASH_LABEL.to_string(),
                if p.new { NEW } else { OLD }.to_string(),
            ),
        ]
        .into();
        pod.metadata.creation_timestamp = Some(at(p.created).to_rfc3339());
        pod.metadata.owner_references.push(OwnerReference {
            api_version: "apps/v1".into(),
            kind: "DaemonSet".into(),
            name: "agent".into(),
            uid: "ds-uid".into(),
            controller: Some(true),
            ..Default::default()
        });
        pod.spec.node_name = format!("n{}", p.node);
        pod.status.phase = Some(if p.failed {
            PodPhase::Failed
        } else {
            PodPhase::Running
        });
        pod.status.conditions.push(PodCondition {
            r#type: "Ready".into(),
            status: Some(if p.ready_since.is_some() {
                ConditionStatus::True
            } else {
                ConditionStatus::False
            }),
            last_transition_time: Some(at(p.ready_since.unwrap_or(p.created)).to_rfc3339()),
            ..Default::default()
        });
        pod
    }

    fn available(&self, p: &SimPod) -> bool {
        !p.failed && available_since(p.ready_since, self.min_ready, self.clock)
    }

    fn on(&self, node: usize) -> impl Iterator<Item = &SimPod> {
        self.pods.iter().filter(move |p| p.node == node)
    }

    /// Ready nodes unavailable because of the rollout: without an
    /// available pod, except those whose pods are all old (an old pod that
    /// is not available is not the rollout's doing: Kubernetes replaces it
    /// at once and does not count it against `maxUnavailable`).
    fn unavailable_by_rollout(&self) -> usize {
        (0..self.ready.len())
            .filter(|&i| {
                let mut pods = self.on(i).peekable();
                let only_old = pods.peek().is_some() && self.on(i).all(|p| !p.new);
                self.ready[i] && !self.on(i).any(|p| self.available(p)) && !only_old
            })
            .count()
    }

    /// Nodes with an old and a new pod whose new pod is not available.
    fn surging(&self) -> usize {
        (0..self.ready.len())
            .filter(|&i| {
                self.on(i).any(|p| !p.new) && self.on(i).any(|p| p.new && !self.available(p))
            })
            .count()
    }

    fn budgets(&self) -> (i64, i64) {
        let desired = self.ready.iter().filter(|r| **r).count() as i64;
        let Some((surge, unavailable)) = &self.rolling else {
            return (0, 0);
        };
        let (s, u) = (scaled(surge, desired), scaled(unavailable, desired));
        if desired > 0 && s == 0 && u == 0 {
            (0, 1)
        } else {
            (s, u)
        }
    }

    /// One plan at the current time, checked, then applied. Returns whether
    /// it changed pods, and when it asks to be run again.
    fn step(&mut self, seed: u64) -> Result<(bool, Option<Timestamp>), TestCaseError> {
        let nodes: Vec<Node> = (0..self.ready.len()).map(|i| self.node(i)).collect();
        let clock = self.clock;
        self.terminating.retain(|(_, gone)| *gone > clock);
        let mut pods: Vec<Pod> = self.pods.iter().map(|p| self.pod(p)).collect();
        for (p, _) in &self.terminating {
            let mut pod = self.pod(p);
            pod.metadata.deletion_timestamp = Some(at(clock).to_rfc3339());
            pods.push(pod);
        }
        let now = at(self.clock);
        let input = PlanInput::new(&self.ds, &nodes, &pods, now)
            .with_backoff(&self.backoff)
            .with_revision_hash(NEW);
        let plan = daemon::plan(&input, &mut StdRng::seed_from_u64(seed));
        self.shadow.check(&input, &nodes, &pods, seed, &plan)?;
        let (max_surge, max_unavailable) = self.budgets();
        let unavailable_before = self.unavailable_by_rollout();
        let surging_before = self.surging();

        // Deletions.
        let mut taken_down = 0usize;
        for d in &plan.delete {
            let i = self.pods.iter().position(|p| p.name == d.name);
            prop_assert!(
                i.is_some(),
                "t={}: deletes {}, gone or terminating",
                clock,
                d.name
            );
            let pod = self.pods.remove(i.unwrap());
            let linger = self.lingers[self.deletions % self.lingers.len()];
            self.deletions += 1;
            if linger > 0 {
                self.terminating.push((pod.clone(), clock + linger));
            }
            prop_assert_eq!(&d.uid, &format!("uid-{}", pod.name));
            if self.rolling.is_none() {
                prop_assert!(
                    pod.failed,
                    "OnDelete deletes only failed pods, not {:?} ({:?})",
                    pod,
                    d.reason
                );
            }
            if d.reason == DeletionReason::Rollout && !self.ready[pod.node] {
                // Only the old pod of a surge pair (Kubernetes'
                // podsShouldBeOnNode: an old pod that is not ready goes
                // once a new one is beside it); never a lone pod.
                prop_assert!(
                    !pod.new && self.on(pod.node).any(|p| p.new),
                    "t={}: rollout deletion of {} on NotReady n{}",
                    clock,
                    pod.name,
                    pod.node
                );
            }
            if self.available(&pod) && !self.on(pod.node).any(|p| self.available(p)) {
                taken_down += 1;
            }
            if pod.failed && !pod.new {
                self.failed_old.push(pod.name.clone());
            }
        }
        if taken_down > 0 {
            prop_assert!(
                max_surge == 0,
                "t={}: with maxSurge {} an available pod was taken down",
                clock,
                max_surge
            );
            prop_assert!(
                (unavailable_before + taken_down) as i64 <= max_unavailable,
                "t={}: {} unavailable + {} taken down > maxUnavailable {}",
                clock,
                unavailable_before,
                taken_down,
                max_unavailable
            );
        }

        // Creations.
        let mut surged = 0;
        for c in &plan.create {
            let node: usize = c.pod.spec.node_name[1..].parse().unwrap();
            prop_assert_eq!(
                c.pod.metadata.labels.get(HASH_LABEL).map(String::as_str),
                Some(NEW)
            );
            let over_available = self.on(node).any(|p| !p.new && self.available(p));
            if self.rolling.is_none() {
                prop_assert!(self.on(node).next().is_none(), "OnDelete never surges");
            }
            if over_available {
                surged += 1;
            }
            self.next += 1;
            self.pods.push(SimPod {
                name: format!("new{}", self.next),
                node,
                new: true,
                created: clock,
                started: false,
                failed: false,
                ready_since: None,
            });
        }
        if surged > 0 {
            prop_assert!(
                (surging_before + surged) as i64 <= max_surge,
                "t={}: {} surging + {} new beside available pods > maxSurge {}",
                clock,
                surging_before,
                surged,
                max_surge
            );
        }

        for i in 0..self.ready.len() {
            let here: Vec<&SimPod> = self.on(i).filter(|p| !p.failed).collect();
            prop_assert!(
                here.iter().filter(|p| p.new).count() <= 1,
                "two new pods on n{}",
                i
            );
            prop_assert!(
                here.iter().filter(|p| !p.new).count() <= 1,
                "two old pods on n{}",
                i
            );
            if max_surge == 0 && self.rolling.is_some() {
                let live = self.on(i).count();
                prop_assert!(
                    live <= 1,
                    "t={}: {} pods on n{} without surge",
                    clock,
                    live,
                    i
                );
            }
        }
        self.backoff = plan.backoff.clone();
        Ok((plan.changes_pods(), plan.requeue_at))
    }

    fn start(&mut self, i: usize) {
        let ready = self.ready[self.pods[i].node];
        let p = &mut self.pods[i];
        if p.started || p.failed {
            return;
        }
        p.started = true;
        if ready {
            p.ready_since = Some(self.clock);
        }
    }

    fn fail(&mut self, i: usize) {
        let p = &mut self.pods[i];
        p.failed = true;
        p.ready_since = None;
    }

    fn flap(&mut self, node: usize) {
        self.ready[node] = !self.ready[node];
        let ready = self.ready[node];
        let clock = self.clock;
        for p in self.pods.iter_mut().filter(|p| p.node == node) {
            p.ready_since = (ready && p.started && !p.failed).then_some(clock);
        }
    }

    fn done(&self) -> bool {
        (0..self.ready.len()).filter(|&i| self.ready[i]).all(|i| {
            let here: Vec<&SimPod> = self.on(i).collect();
            here.len() == 1
                && self.available(here[0])
                && (here[0].new || self.rolling.is_none())
                && self.terminating.is_empty()
        })
    }
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    Start,
    Fail,
    Flap,
    Join,
}

fn fault() -> impl proptest::strategy::Strategy<Value = (Fault, Index)> {
    (
        prop_oneof![6 => Just(Fault::Start), 2 => Just(Fault::Fail), 2 => Just(Fault::Flap), 1 => Just(Fault::Join)],
        any::<Index>(),
    )
}

proptest! {
    #![proptest_config(seed::config(512))]

    #[test]
    fn rollouts_keep_kubernetes_guarantees(
        n in 1usize..9,
        initially_not_ready in prop::collection::vec(prop::bool::weighted(0.15), 9),
        strategy in update_strategy(),
        min_ready in prop_oneof![1 => Just(0i64), 3 => 1i64..=5],
        faults in prop::collection::vec(fault(), 0..40),
        ticks in prop::collection::vec(1i64..=3, 40),
        left_not_ready in prop::collection::vec(prop::bool::weighted(0.1), 9),
        lingers in prop::collection::vec(prop_oneof![2 => Just(0i64), 1 => 1i64..=3], 16),
        seed in any::<u64>(),
    ) {
        let ds = daemon_set(&strategy, min_ready);
        let rolling = match &strategy {
            Strategy_::Rolling { max_surge, max_unavailable } => Some((max_surge.clone(), max_unavailable.clone())),
            Strategy_::OnDelete => None,
        };
        let ready: Vec<bool> = (0..n).map(|i| !initially_not_ready[i]).collect();
        let pods = (0..n)
            .map(|i| SimPod {
                name: format!("old{i}"),
                node: i,
                new: false,
                created: -100,
                started: true,
                failed: false,
                ready_since: ready[i].then_some(-100),
            })
            .collect();
        let mut w = World {
            ds,
            min_ready,
            rolling,
            ready,
            pods,
            clock: 0,
            backoff: FailedPodBackoff::new(),
            next: 0,
            failed_old: Vec::new(),
            terminating: Vec::new(),
            lingers,
            deletions: 0,
            shadow: Shadow::default(),
        };

        // The rollout, with faults.
        for (round, (fault, index)) in faults.iter().enumerate() {
            w.step(seed.wrapping_add(round as u64))?;
            match fault {
                Fault::Start => {
                    let waiting: Vec<usize> = (0..w.pods.len()).filter(|&i| !w.pods[i].started && !w.pods[i].failed).collect();
                    if !waiting.is_empty() {
                        w.start(waiting[index.index(waiting.len())]);
                    }
                }
                Fault::Fail => {
                    let live: Vec<usize> = (0..w.pods.len()).filter(|&i| !w.pods[i].failed).collect();
                    if !live.is_empty() {
                        w.fail(live[index.index(live.len())]);
                    }
                }
                Fault::Flap => {
                    let node = index.index(w.ready.len());
                    w.flap(node);
                }
                Fault::Join => {
                    if w.ready.len() < 9 {
                        w.ready.push(true);
                    }
                }
            }
            w.clock += ticks[round % ticks.len()];
        }

        // Calm: nodes come back (a few stay away), pods turn ready.
        for (i, away) in left_not_ready.iter().enumerate().take(w.ready.len()) {
            if w.ready[i] == *away {
                w.flap(i);
            }
        }
        let mut finished = false;
        for round in 0..400u64 {
            for i in 0..w.pods.len() {
                w.start(i);
            }
            let (changed, requeue) = w.step(seed.wrapping_add(1000 + round))?;
            if w.done() {
                finished = true;
                break;
            }
            w.clock = match requeue {
                Some(t) if !changed => {
                    let wait = t.duration_since(at(w.clock)).as_secs() as i64;
                    w.clock + wait.max(1)
                }
                _ => w.clock + 1,
            };
        }
        prop_assert!(finished, "the rollout ends: {:?}", w.pods);
        if w.rolling.is_none() {
            // OnDelete: the old pods that never failed are still there.
            for i in (0..w.ready.len()).filter(|&i| w.ready[i]) {
                let here: Vec<&SimPod> = w.on(i).collect();
                let old = format!("old{i}");
                if i >= n || w.failed_old.contains(&old) {
                    prop_assert!(here[0].new);
                } else {
                    prop_assert_eq!(&here[0].name, &old, "OnDelete replaced {} by itself", old);
                }
            }
        }
    }
}
