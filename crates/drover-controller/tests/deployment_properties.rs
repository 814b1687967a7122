//! Property tests of Deployment rollouts, driven through the public
//! planners (`deployment::plan` and `replicaset::plan`) over a simulated
//! namespace, checked against the bounds Kubernetes documents
//! (`oracle::deployment`) with availability from the independent
//! `oracle::availability` (never the planners' own helpers):
//!
//! - random replicas (1 to 12), `maxSurge` and `maxUnavailable` (each an
//!   integer or a percentage, maybe 0), `minReadySeconds` 0 to 3, or
//!   `Recreate`;
//! - the Deployment first rolls out its first template from nothing, then
//!   its template changes; pods turn ready at random for a while (some
//!   stay not ready for many steps), then all do; a deleted pod may stay
//!   terminating for a few steps.
//!
//! Checked at every step of the update:
//!
//! - `RollingUpdate`: the pods that are not terminating never exceed
//!   `replicas + maxSurge`, and the available ones never drop below
//!   `replicas - maxUnavailable`;
//! - `Recreate`: no pod of the new template runs while any old pod
//!   (terminating included) is left.
//!
//! And at the end, once every pod turns ready: exactly `replicas` pods,
//! all of the new template and available, the old ReplicaSets at 0, and
//! the Deployment's status says so (`NewReplicaSetAvailable`).

mod oracle;
mod seed;

use drover_api::{
    ConditionStatus, Container, Deployment, DeploymentStrategyType, IntOrString, LabelSelector,
    Pod, PodCondition, PodPhase, ReplicaSet, RollingUpdateDeployment,
};
use drover_controller::{deployment, replicaset, Timestamp};
use oracle::availability::pod_available;
use oracle::deployment::rolling_bounds;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_unix_seconds(1_700_000_000 + seconds)
}

#[derive(Debug, Clone)]
enum Plan {
    Rolling(IntOrString, IntOrString),
    Recreate,
}

fn budget() -> impl Strategy<Value = IntOrString> {
    prop_oneof![
        (0i32..=4).prop_map(IntOrString::Int),
        prop::sample::select(vec![0, 10, 25, 34, 50, 100])
            .prop_map(|p| IntOrString::String(format!("{p}%"))),
    ]
}

fn strategy() -> impl Strategy<Value = Plan> {
    prop_oneof![
        5 => (budget(), budget()).prop_map(|(s, u)| Plan::Rolling(s, u)),
        1 => Just(Plan::Recreate),
    ]
}

fn deployment(replicas: i32, plan: &Plan, min_ready: i32, image: &str) -> Deployment {
    let mut d = Deployment::default();
    d.metadata.name = "web".into();
    d.metadata.namespace = "default".into();
    d.metadata.uid = "d-uid".into();
    d.metadata.generation = Some(1);
    d.spec.replicas = Some(replicas);
    d.spec.min_ready_seconds = Some(min_ready);
    let labels: drover_api::Labels = [("app".to_string(), "web".to_string())].into();
    d.spec.selector = Some(LabelSelector {
        match_labels: labels.clone(),
        ..Default::default()
    });
    d.spec.template.metadata.labels = labels;
    d.spec.template.spec.containers = vec![Container {
        name: "web".into(),
        image: image.into(),
        ..Default::default()
    }];
    match plan {
        Plan::Rolling(s, u) => {
            d.spec.strategy.r#type = Some(DeploymentStrategyType::RollingUpdate);
            d.spec.strategy.rolling_update = Some(RollingUpdateDeployment {
                max_surge: Some(s.clone()),
                max_unavailable: Some(u.clone()),
                ..Default::default()
            });
        }
        Plan::Recreate => d.spec.strategy.r#type = Some(DeploymentStrategyType::Recreate),
    }
    d
}

/// A pod of the simulation: the object and, once deleted, the step it is
/// gone at.
struct SimPod {
    pod: Pod,
    gone_at: Option<i64>,
}

struct Sim {
    d: Deployment,
    sets: Vec<ReplicaSet>,
    pods: Vec<SimPod>,
    now: i64,
    uids: u64,
    rng: StdRng,
    /// Percent chance a not-ready pod turns ready at a step, until
    /// `flaky_until`; after it every pod turns ready.
    ready_odds: u32,
    flaky_until: i64,
    linger: i64,
}

impl Sim {
    fn uid(&mut self) -> String {
        self.uids += 1;
        format!("uid-{}", self.uids)
    }

    fn chance(&mut self, percent: u32) -> bool {
        self.rng.next_u32() % 100 < percent
    }

    fn active(&self) -> impl Iterator<Item = &Pod> {
        self.pods
            .iter()
            .filter(|p| p.pod.metadata.deletion_timestamp.is_none())
            .map(|p| &p.pod)
    }

    fn step(&mut self) {
        self.now += 1;
        let now = self.now;
        self.pods.retain(|p| p.gone_at.is_none_or(|t| t > now));
        // Readiness.
        for i in 0..self.pods.len() {
            let p = &self.pods[i].pod;
            if p.metadata.deletion_timestamp.is_some() || p.is_ready() {
                continue;
            }
            let odds = self.ready_odds;
            if now >= self.flaky_until || self.chance(odds) {
                self.pods[i].pod.status.conditions.push(PodCondition {
                    r#type: "Ready".into(),
                    status: Some(ConditionStatus::True),
                    last_transition_time: Some(at(now).to_rfc3339()),
                    ..Default::default()
                });
            }
        }
        self.deployment_pass();
        self.replica_set_passes();
    }

    fn deployment_pass(&mut self) {
        let input = deployment::PlanInput {
            deployment: &self.d,
            replica_sets: self.sets.iter().collect(),
            pods: self.pods.iter().map(|p| &p.pod).collect(),
            now: at(self.now),
        };
        let plan = deployment::plan(&input, &mut self.rng.clone());
        for rs in plan.update {
            let slot = self
                .sets
                .iter_mut()
                .find(|s| s.metadata.name == rs.metadata.name)
                .expect("an update of a ReplicaSet that exists");
            *slot = rs;
        }
        if let Some(mut rs) = plan.create {
            assert!(
                self.sets
                    .iter()
                    .all(|s| s.metadata.name != rs.metadata.name),
                "a new ReplicaSet named as an existing one"
            );
            rs.metadata.uid = self.uid();
            rs.metadata.creation_timestamp = Some(at(self.now).to_rfc3339());
            self.sets.push(rs);
        }
        for gone in plan.delete {
            self.sets.retain(|s| s.metadata.uid != gone.uid);
        }
        if let Some(a) = plan.annotations {
            self.d.metadata.annotations = a;
        }
        self.d.status = plan.status;
    }

    fn replica_set_passes(&mut self) {
        for i in 0..self.sets.len() {
            let plan = {
                let input = replicaset::PlanInput {
                    replica_set: &self.sets[i],
                    pods: self.pods.iter().map(|p| &p.pod).collect(),
                    now: at(self.now),
                };
                replicaset::plan(&input, &mut self.rng.clone())
            };
            assert!(plan.adopt.is_empty() && plan.release.is_empty());
            for c in plan.create {
                let mut pod = c.pod;
                pod.metadata.uid = self.uid();
                pod.metadata.creation_timestamp = Some(at(self.now).to_rfc3339());
                pod.spec.node_name = format!("n{}", self.uids % 3);
                pod.status.phase = Some(PodPhase::Running);
                self.pods.push(SimPod { pod, gone_at: None });
            }
            for d in plan.delete {
                let linger = if self.linger > 0 {
                    (self.rng.next_u32() as i64) % (self.linger + 1)
                } else {
                    0
                };
                let now = self.now;
                let p = self
                    .pods
                    .iter_mut()
                    .find(|p| p.pod.metadata.uid == d.uid)
                    .expect("a deletion of a pod that exists");
                p.pod.metadata.deletion_timestamp = Some(at(now).to_rfc3339());
                p.gone_at = Some(now + linger);
            }
            let now = self.now;
            self.pods.retain(|p| p.gone_at.is_none_or(|t| t > now));
            self.sets[i].status = plan.status;
        }
    }

    fn image_of(pod: &Pod) -> &str {
        &pod.spec.containers[0].image
    }
}

fn check_rollout(
    replicas: i32,
    strategy: Plan,
    min_ready: i32,
    ready_odds: u32,
    flaky_steps: i64,
    linger: i64,
    seed: u64,
) -> Result<(), TestCaseError> {
    let mut sim = Sim {
        d: deployment(replicas, &strategy, min_ready, "busybox:1"),
        sets: Vec::new(),
        pods: Vec::new(),
        now: 0,
        uids: 0,
        rng: StdRng::seed_from_u64(seed),
        ready_odds,
        flaky_until: flaky_steps,
        linger,
    };
    let min_ready_i = i64::from(min_ready);
    let (max_total, min_available) = match &strategy {
        Plan::Rolling(s, u) => rolling_bounds(i64::from(replicas), s, u),
        Plan::Recreate => (i64::from(replicas), 0),
    };
    let done = |sim: &Sim, image: &str| {
        let active: Vec<&Pod> = sim.active().collect();
        active.len() == replicas as usize
            && active.iter().all(|p| Sim::image_of(p) == image)
            && active
                .iter()
                .all(|p| pod_available(p, min_ready_i, at(sim.now)))
            && sim.pods.len() == replicas as usize
            && sim.d.status.updated_replicas == replicas
            && sim.d.status.available_replicas == replicas
            && sim.d.status.replicas == replicas
    };
    // Once every pod turns ready at once, even one pod at a time
    // (`maxSurge` 0, `maxUnavailable` 1) takes a step to scale down, one
    // to scale up, one to turn ready and `minReadySeconds` + 1 to become
    // available, for each replica.
    let budget = i64::from(replicas + 2) * (min_ready_i + 4) + 20;
    // The first rollout, from nothing.
    let limit = flaky_steps + budget;
    while !done(&sim, "busybox:1") {
        sim.step();
        let active = sim.active().count() as i64;
        prop_assert!(
            active <= max_total,
            "{active} pods above {max_total} at {}",
            sim.now
        );
        prop_assert!(
            sim.now < limit,
            "the first rollout did not finish: {:?}",
            sim.d.status
        );
    }
    // The update.
    let mut next = deployment(replicas, &strategy, min_ready, "busybox:2");
    next.metadata.generation = Some(2);
    next.metadata.annotations = sim.d.metadata.annotations.clone();
    next.status = sim.d.status.clone();
    sim.d = next;
    sim.flaky_until = sim.now + flaky_steps;
    let limit = sim.now + flaky_steps + budget;
    while !done(&sim, "busybox:2") {
        sim.step();
        let now = at(sim.now);
        let active: Vec<&Pod> = sim.active().collect();
        let n = active.len() as i64;
        let available = active
            .iter()
            .filter(|p| pod_available(p, min_ready_i, now))
            .count() as i64;
        match &strategy {
            Plan::Rolling(..) => {
                prop_assert!(n <= max_total, "{n} pods above {max_total} at {}", sim.now);
                prop_assert!(
                    available >= min_available,
                    "{available} available below {min_available} at {}",
                    sim.now
                );
            }
            Plan::Recreate => {
                let new = sim
                    .pods
                    .iter()
                    .filter(|p| Sim::image_of(&p.pod) == "busybox:2")
                    .count();
                let old = sim.pods.len() - new;
                prop_assert!(new == 0 || old == 0, "{old} old pods beside {new} new");
            }
        }
        prop_assert!(
            sim.now < limit,
            "the update did not finish: {:?}",
            sim.d.status
        );
    }
    // Old ReplicaSets at 0, the new one has every replica, and the
    // Deployment says it is complete.
    let new_rs: Vec<&ReplicaSet> = sim
        .sets
        .iter()
        .filter(|rs| rs.spec.template.spec.containers[0].image == "busybox:2")
        .collect();
    prop_assert_eq!(new_rs.len(), 1);
    prop_assert_eq!(new_rs[0].spec.replicas, Some(replicas));
    for rs in &sim.sets {
        if rs.spec.template.spec.containers[0].image != "busybox:2" {
            prop_assert_eq!(rs.spec.replicas, Some(0));
        }
    }
    sim.step();
    let progressing = sim
        .d
        .status
        .conditions
        .iter()
        .find(|c| c.r#type == "Progressing")
        .map(|c| c.reason.clone());
    prop_assert_eq!(progressing.as_deref(), Some("NewReplicaSetAvailable"));
    prop_assert_eq!(
        sim.d
            .metadata
            .annotations
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("2")
    );
    Ok(())
}

proptest! {
    #![proptest_config(seed::config(256))]

    #[test]
    fn rollouts_stay_within_surge_and_availability(
        replicas in 1i32..=12,
        strategy in strategy(),
        min_ready in 0i32..=3,
        ready_odds in 10u32..=90,
        flaky_steps in 0i64..=30,
        linger in 0i64..=2,
        seed in any::<u64>(),
    ) {
        check_rollout(replicas, strategy, min_ready, ready_odds, flaky_steps, linger, seed)?;
    }
}

#[test]
fn a_rollout_of_ten_with_the_defaults_finishes() {
    let plan = Plan::Rolling("25%".into(), "25%".into());
    check_rollout(10, plan, 1, 50, 10, 1, 7).unwrap();
}
