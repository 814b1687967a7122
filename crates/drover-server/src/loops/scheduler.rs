//! The scheduler, on the leader: binds the pods without `spec.nodeName`
//! that are the default scheduler's (bare pods, a ReplicaSet's; not a
//! DaemonSet's, which its controller binds) to a node, as kube-scheduler
//! does, with the pure planner of `drover_controller::schedule`.
//!
//! A pass reads the informer's view, takes the pending pods worth a try
//! ([`Backlog`]: new ones at once, unschedulable ones only when something
//! they depend on changed; nothing is polled), orders them as
//! kube-scheduler's queue ([`queue_order`]: priority, then age) and
//! decides them in one batch ([`Cluster::schedule_batch`]: each decision
//! counts the ones before it). Then, in as few raft entries as possible
//! ([`Objects::execute`]):
//!
//! - a pod that fits is bound by compare-and-swap on the version read
//!   (`spec.nodeName` and `PodScheduled=True` in one write), so two
//!   leaders or a retried pass never bind it twice, with the `Scheduled`
//!   event;
//! - a pod that fits nowhere gets `PodScheduled=False`, `Unschedulable`,
//!   kube-scheduler's message, and a `FailedScheduling` event, both only
//!   when the message changes; if it may preempt ([`preemption`]), the
//!   victims are deleted (each at the version read, with a `Preempted`
//!   event) and the pod is nominated to their node
//!   (`status.nominatedNodeName`), where the room they leave is its.
//!
//! After writing, the loop waits until its view holds its own writes
//! before the next pass (the controllers' expectations), so it never
//! schedules on a view that lacks its bindings.

use super::controller::event_writer;
use crate::api::batch::{Write, Written};
use crate::api::codec::key;
use crate::api::Objects;
use crate::cache::{Informer, Snapshot};
use crate::ctx::Ctx;
use crate::error::ApiError;
use drover_api::{Event, Kind, Manifest, Pod, Priorities};
use drover_controller::daemon::pods::{bound, set_unschedulable, unschedulable_message};
use drover_controller::daemon::NodeUsage;
use drover_controller::schedule::{
    preemption, queue_order, Backlog, Cluster, Decision, Preemption,
};
use drover_controller::Timestamp;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;

/// While the scheduler waits for its view to hold its own writes, it warns
/// this often.
const VIEW_WARN_EVERY: Duration = Duration::from_secs(10);

/// Runs the scheduler whenever this member leads, until `stop`.
pub async fn run(ctx: Arc<Ctx>, objects: Objects, informer: Informer, stop: watch::Receiver<bool>) {
    super::each_term(&ctx, stop, |term| {
        let mut s = Scheduler::new(&ctx, objects.clone(), informer.clone());
        async move {
            tracing::info!("leading (term {term}): running the scheduler");
            s.run().await
        }
    })
    .await
}

/// One term's scheduler.
struct Scheduler {
    ctx: Arc<Ctx>,
    objects: Objects,
    informer: Informer,
    backlog: Backlog,
    rng: StdRng,
    events: tokio::sync::mpsc::Sender<Vec<Event>>,
}

/// What one pass decided for one pod, to be written.
enum Outcome {
    /// Bind the pod (as read).
    Bind(Pod),
    /// The pod (as read) fits nowhere.
    Wait {
        pod: Pod,
        /// The message changed: record `FailedScheduling`.
        event: bool,
    },
}

/// What one pass decided, owned (decided on a blocking thread).
struct Plan {
    writes: Vec<Write>,
    /// One per write, in the same order.
    outcomes: Vec<Outcome>,
    /// Preemptions, with the preemptor's uid.
    victims: Vec<(Preemption, String)>,
    /// Pods that fit nowhere and had nothing new to say (as read).
    unchanged: Vec<Pod>,
    /// How many pods fit nowhere.
    unschedulable: u64,
}

/// Decides the pods of `view` with the store keys `due`: the writes to
/// make (pure but for the RNG).
fn decide(view: &Snapshot, due: &[String], mut rng: StdRng, now: Timestamp) -> Plan {
    let nodes = || view.nodes.values().map(|n| &**n);
    let due: Vec<&Pod> = due
        .iter()
        .filter_map(|k| view.pods.get(k).map(|p| &**p))
        .collect();
    let priorities = Priorities::new(view.priority_classes.values().map(|c| &**c));
    let ordered = queue_order(&due, &priorities);
    // The pods being scheduled hold no room for themselves (a pod
    // nominated after a preemption must not find its own room taken).
    let deciding: HashSet<&str> = due.iter().map(|p| p.metadata.uid.as_str()).collect();
    let others = || {
        view.pods
            .values()
            .map(|p| &**p)
            .filter(|p| !deciding.contains(p.metadata.uid.as_str()))
    };
    let mut cluster = Cluster::new(nodes(), others());
    let decisions = cluster.schedule_batch(ordered, &mut rng);
    drop(cluster);

    let mut usage: Option<NodeUsage> = None;
    let mut plan = Plan {
        writes: Vec::with_capacity(decisions.len()),
        outcomes: Vec::with_capacity(decisions.len()),
        victims: Vec::new(),
        unchanged: Vec::new(),
        unschedulable: 0,
    };
    for (pod, decision) in decisions {
        match decision {
            Decision::Bind(p) => {
                plan.writes.push(Write::Update(Manifest::Pod(Box::new(bound(
                    pod, &p.node, now,
                )))));
                plan.outcomes.push(Outcome::Bind(pod.clone()));
            }
            Decision::Unschedulable(why) => {
                plan.unschedulable += 1;
                let usage = usage.get_or_insert_with(|| {
                    NodeUsage::with_priorities(others(), priorities.clone())
                });
                let preempt = preemption(pod, &why, nodes(), usage);
                let message = why.message();
                let mut next = pod.clone();
                set_unschedulable(&mut next.status, message.clone(), now);
                if let Some(p) = &preempt {
                    next.status.nominated_node_name = p.node.clone();
                    for v in &p.victims {
                        usage.remove(&p.node, &v.uid);
                    }
                    usage.add(&next);
                }
                let event = unschedulable_message(pod) != Some(message.as_str());
                if let Some(p) = preempt {
                    plan.victims.push((p, pod.metadata.uid.clone()));
                }
                if next.status == pod.status {
                    // Nothing new to say: it waits as it is.
                    plan.unchanged.push(pod.clone());
                    continue;
                }
                plan.writes
                    .push(Write::Update(Manifest::Pod(Box::new(next))));
                plan.outcomes.push(Outcome::Wait {
                    pod: pod.clone(),
                    event,
                });
            }
        }
    }
    plan
}

fn now() -> Timestamp {
    Timestamp::from(SystemTime::now())
}

impl Scheduler {
    fn new(ctx: &Arc<Ctx>, objects: Objects, informer: Informer) -> Self {
        Scheduler {
            ctx: ctx.clone(),
            events: event_writer(objects.clone()),
            objects,
            informer,
            backlog: Backlog::new(),
            rng: StdRng::from_rng(&mut rand::rng()),
        }
    }

    async fn run(&mut self) {
        // Start from a view at least as new as everything committed before
        // this term (see `controller.rs`): a pod bound by the last leader
        // is never bound again.
        let committed = self.committed().await;
        self.informer.hold(committed, VIEW_WARN_EVERY).await;
        let mut changes = self.informer.subscribe();
        loop {
            changes.borrow_and_update();
            let view = self.informer.snapshot();
            let written = self.pass(view).await;
            if written > 0 {
                self.informer.hold(written, VIEW_WARN_EVERY).await;
            }
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// The store's last change, as of a ReadIndex round; retried until it
    /// answers.
    async fn committed(&self) -> u64 {
        loop {
            let store = &self.ctx.store;
            match self.ctx.read(|| store.consistent_revision()).await {
                Ok(r) => return r,
                Err(e) => {
                    tracing::info!("the scheduler waits for a ReadIndex round: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// One pass; answers the highest revision written (0: none).
    async fn pass(&mut self, view: Arc<Snapshot>) -> u64 {
        let nodes = || view.nodes.values().map(|n| &**n);
        let pods = || view.pods.values().map(|p| &**p);
        let changes = self.backlog.changes(nodes(), pods());
        let due: Vec<String> = self
            .backlog
            .due(pods(), changes)
            .into_iter()
            .map(|p| key(Kind::Pod, &p.metadata.namespace, &p.metadata.name))
            .collect();
        if changes != Default::default() || !due.is_empty() {
            self.backlog.judged_on(nodes(), pods());
        }
        if due.is_empty() {
            return 0;
        }
        let started = Instant::now();
        let now = now();
        // Deciding is CPU work (10,000 pods over 1,000 nodes): off the
        // async workers, which serve the API and the agents meanwhile.
        let rng = StdRng::from_rng(&mut self.rng);
        let decided = {
            let view = view.clone();
            tokio::task::spawn_blocking(move || decide(&view, &due, rng, now)).await
        };
        let plan = match decided {
            Ok(plan) => plan,
            Err(e) => {
                tracing::error!("a scheduling pass failed: {e}");
                return 0;
            }
        };
        for pod in &plan.unchanged {
            self.backlog.wait(pod, &pod.metadata.resource_version);
        }
        let Plan {
            writes,
            outcomes,
            victims,
            unschedulable,
            ..
        } = plan;
        let results = self.objects.execute(writes).await;
        let mut written = 0u64;
        let mut events = Vec::new();
        let mut bound_now = 0u64;
        for (outcome, r) in outcomes.into_iter().zip(results) {
            let m = match r {
                Ok(Written::Updated(m)) => m,
                Ok(w) => {
                    written = written.max(w.revision());
                    continue;
                }
                Err(e) => {
                    let pod = match &outcome {
                        Outcome::Bind(p) | Outcome::Wait { pod: p, .. } => p,
                    };
                    // Changed meanwhile (or bound by someone else): the
                    // next pass, on a view that holds the change, decides
                    // again.
                    self.backlog.forget(&pod.metadata.uid);
                    log_refusal(pod, &e);
                    continue;
                }
            };
            written = written.max(super::written_revision(&m));
            let Manifest::Pod(p) = &m else { continue };
            match outcome {
                Outcome::Bind(_) => {
                    bound_now += 1;
                    events.push(super::events::scheduled(p, now));
                }
                Outcome::Wait { pod, event } => {
                    self.backlog.wait(&pod, &p.metadata.resource_version);
                    if event {
                        events.push(super::events::failed_scheduling(p, now));
                    }
                }
            }
        }
        written = written.max(self.preempt(&view, victims, now, &mut events).await);
        let m = &self.ctx.metrics;
        m.scheduler_pods_bound.inc_by(bound_now);
        m.scheduler_pods_unschedulable.inc_by(unschedulable);
        m.scheduler_pass_duration
            .observe(started.elapsed().as_secs_f64());
        if !events.is_empty() {
            let _ = self.events.send(events).await;
        }
        written
    }

    /// Deletes the victims of this pass's preemptions (each at the version
    /// the pass read, so a pod that changed meanwhile is spared) and
    /// records a `Preempted` event on each. Answers the highest revision
    /// written.
    async fn preempt(
        &self,
        view: &Snapshot,
        preemptions: Vec<(Preemption, String)>,
        now: Timestamp,
        events: &mut Vec<Event>,
    ) -> u64 {
        let mut deletes = Vec::new();
        let mut doomed: Vec<(&Pod, &str, &str)> = Vec::new();
        for (p, by) in &preemptions {
            for v in &p.victims {
                let Some(victim) = view.pods.get(&key(Kind::Pod, &v.namespace, &v.name)) else {
                    continue;
                };
                if victim.metadata.uid != v.uid {
                    continue;
                }
                deletes.push(Write::Delete(Kind::Pod, Box::new(victim.metadata.clone())));
                doomed.push((victim, by.as_str(), p.node.as_str()));
            }
        }
        if deletes.is_empty() {
            return 0;
        }
        let mut written = 0;
        for ((victim, by, node), r) in doomed.into_iter().zip(self.objects.execute(deletes).await) {
            match r {
                Ok(w) => {
                    written = written.max(w.revision());
                    self.ctx.metrics.scheduler_preemption_victims.inc();
                    let m = &victim.metadata;
                    events.push(drover_controller::events::pod_event(
                        (&m.namespace, &m.name, &m.uid),
                        super::events::SCHEDULER,
                        drover_api::event_type::NORMAL,
                        "Preempted",
                        format!("Preempted by pod {by} on node {node}"),
                        now,
                    ));
                }
                Err(e) => tracing::debug!(pod = %victim.metadata.name, "preemption: {e}"),
            }
        }
        written
    }
}

fn log_refusal(pod: &Pod, e: &ApiError) {
    let m = &pod.metadata;
    match e {
        ApiError::Conflict(_) | ApiError::NotFound(_) => {
            tracing::debug!(pod = %format!("{}/{}", m.namespace, m.name), "scheduling write: {e}")
        }
        _ => tracing::warn!(pod = %format!("{}/{}", m.namespace, m.name), "scheduling write: {e}"),
    }
}
