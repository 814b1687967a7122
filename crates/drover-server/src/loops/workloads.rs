//! The leader's workload controllers: Deployments, ReplicaSets, the
//! garbage collection of ReplicaSets whose Deployment is gone, and
//! taint-based eviction. Each term it reads the [`Informer`]'s view, asks
//! the pure planners of `drover-controller` ([`deployment`],
//! [`replicaset`], [`eviction`], [`pod_gc::owner_gone`]) what to do, and
//! writes the answer: pods and ReplicaSets created and deleted through the
//! batched [`Objects::execute`] (a delete at the version read), other
//! writes by compare-and-swap at the version read. After a pass that
//! wrote, it holds the informer until the view has every write of the
//! pass, so no plan ever acts on a view without its own writes (what
//! Kubernetes calls expectations).
//!
//! A ReplicaSet's new pods are created in slow-start batches (1, 2, 4, …):
//! the first batch with a failure stops the pass, and its `ReplicaFailure`
//! condition says why. The pods are unbound: the scheduler binds them.

use super::controller::{committed, event_writer, now, VIEW_WARN_EVERY};
use super::written_revision as rev;
use crate::api::batch::Write;
use crate::api::Objects;
use crate::cache::{Informer, Snapshot};
use crate::ctx::Ctx;
use drover_api::{Deployment, Event, Kind, Manifest, Pod, ReplicaSet, Resource};
use drover_controller::replicaset::{self, ReplicaFailure};
use drover_controller::{deployment, eviction, pod_gc, Timestamp};
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// Runs the workload controllers whenever this member leads, until `stop`.
pub async fn run(ctx: Arc<Ctx>, objects: Objects, informer: Informer, stop: watch::Receiver<bool>) {
    super::each_term(&ctx, stop, |term| {
        let (ctx, objects, informer) = (ctx.clone(), objects.clone(), informer.clone());
        async move {
            tracing::info!("leading (term {term}): running the workload controllers");
            let mut w = Workloads {
                events: event_writer(objects.clone()),
                objects,
                informer,
                rng: StdRng::from_rng(&mut rand::rng()),
            };
            w.run(&ctx).await
        }
    })
    .await
}

struct Workloads {
    objects: Objects,
    informer: Informer,
    rng: StdRng,
    events: mpsc::Sender<Vec<Event>>,
}

/// What a pass wrote (the highest revision) and when it wants to run again.
#[derive(Default)]
struct Outcome {
    written: u64,
    wake: Option<Timestamp>,
}

impl Outcome {
    fn wrote(&mut self, revision: u64) {
        self.written = self.written.max(revision);
    }

    fn wake_at(&mut self, at: Option<Timestamp>) {
        if let Some(at) = at {
            self.wake = Some(self.wake.map_or(at, |w| w.min(at)));
        }
    }
}

impl Workloads {
    async fn run(&mut self, ctx: &Ctx) {
        let start = committed(ctx).await;
        self.informer.hold(start, VIEW_WARN_EVERY).await;
        let mut changes = self.informer.subscribe_view();
        loop {
            changes.borrow_and_update();
            let view = self.informer.snapshot();
            let outcome = self.pass(&view).await;
            if outcome.written > 0 {
                self.informer.hold(outcome.written, VIEW_WARN_EVERY).await;
            }
            let pause = outcome
                .wake
                .map(|t| t.duration_since(now()))
                .unwrap_or(Duration::from_secs(1))
                .clamp(Duration::from_millis(10), Duration::from_secs(1));
            tokio::select! {
                r = changes.changed() => if r.is_err() { return },
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    async fn pass(&mut self, view: &Snapshot) -> Outcome {
        let started = Instant::now();
        let now = now();
        let mut out = Outcome::default();
        let pods: Vec<&Pod> = view.pods.values().map(|p| &**p).collect();

        self.evict(view, &pods, now, &mut out).await;
        self.collect_replica_sets(view, &mut out).await;

        // Every change of the view wakes this pass: with no Deployment and
        // no ReplicaSet, the pods are not grouped (O(pods) on each pass).
        if view.deployments.is_empty() && view.replica_sets.is_empty() {
            return out;
        }
        let mut sets_by_ns: HashMap<&str, Vec<&ReplicaSet>> = HashMap::new();
        for rs in view.replica_sets.values() {
            sets_by_ns
                .entry(rs.metadata.namespace.as_str())
                .or_default()
                .push(rs);
        }
        let mut pods_by_ns: HashMap<&str, Vec<&Pod>> = HashMap::new();
        for &p in &pods {
            pods_by_ns
                .entry(p.metadata.namespace.as_str())
                .or_default()
                .push(p);
        }
        let (by_owner, bare) = super::pods_by_controller(&pods);
        for d in view.deployments.values() {
            let ns = d.metadata.namespace.as_str();
            let input = deployment::PlanInput {
                deployment: d,
                replica_sets: sets_by_ns.get(ns).cloned().unwrap_or_default(),
                pods: pods_by_ns.get(ns).cloned().unwrap_or_default(),
                now,
            };
            let plan = deployment::plan(&input, &mut self.rng);
            self.apply_deployment(d, plan, &mut out).await;
        }
        for rs in view.replica_sets.values() {
            let ns = rs.metadata.namespace.as_str();
            // Its own pods and the namespace's orphans (which it may
            // adopt); a pod controlled by anything else is never its.
            let mine: Vec<&Pod> = by_owner
                .get(rs.metadata.uid.as_str())
                .into_iter()
                .flatten()
                .copied()
                .chain(bare.iter().copied().filter(|p| p.metadata.namespace == ns))
                .collect();
            let input = replicaset::PlanInput {
                replica_set: rs,
                pods: mine,
                now,
            };
            let plan = replicaset::plan(&input, &mut self.rng);
            self.apply_replica_set(rs, plan, now, &mut out).await;
        }
        if started.elapsed() > Duration::from_millis(500) {
            tracing::debug!("workload pass took {:?}", started.elapsed());
        }
        out
    }

    /// Pods on nodes with a `NoExecute` taint they do not tolerate (or no
    /// longer: `tolerationSeconds` passed) are deleted.
    async fn evict(&mut self, view: &Snapshot, pods: &[&Pod], now: Timestamp, out: &mut Outcome) {
        let plan = eviction::plan(view.nodes.values().map(|n| &**n), pods.iter().copied(), now);
        out.wake_at(plan.requeue_at);
        if plan.evict.is_empty() {
            return;
        }
        let by_uid: HashMap<&str, &Pod> =
            pods.iter().map(|p| (p.metadata.uid.as_str(), *p)).collect();
        let mut writes = Vec::new();
        let mut events = Vec::new();
        for e in plan.evict {
            if let Some(p) = by_uid.get(e.uid.as_str()) {
                writes.push(Write::Delete(Kind::Pod, Box::new(p.metadata.clone())));
                events.push(e.event);
            }
        }
        let mut recorded = Vec::new();
        for (event, r) in events.into_iter().zip(self.objects.execute(writes).await) {
            match r {
                Ok(w) => {
                    out.wrote(w.revision());
                    recorded.push(event);
                }
                Err(e) => tracing::debug!("eviction: {e}"),
            }
        }
        self.record(recorded).await;
    }

    /// ReplicaSets whose Deployment is gone (background propagation).
    async fn collect_replica_sets(&mut self, view: &Snapshot, out: &mut Outcome) {
        let live: HashSet<&str> = view
            .deployments
            .values()
            .map(|d| d.metadata.uid.as_str())
            .collect();
        let writes: Vec<Write> = view
            .replica_sets
            .values()
            .filter(|rs| {
                pod_gc::owner_gone(&rs.metadata, &[Deployment::KIND], |uid| live.contains(uid))
            })
            .map(|rs| Write::Delete(Kind::ReplicaSet, Box::new(rs.metadata.clone())))
            .collect();
        for r in self.objects.execute(writes).await {
            match r {
                Ok(w) => out.wrote(w.revision()),
                Err(e) => tracing::debug!("replica set garbage collection: {e}"),
            }
        }
    }

    async fn apply_deployment(
        &mut self,
        d: &Deployment,
        plan: deployment::DeploymentPlan,
        out: &mut Outcome,
    ) {
        out.wake_at(plan.requeue_at);
        if plan.is_empty() {
            return;
        }
        let mut ok = true;
        if let Some(rs) = plan.create {
            let name = rs.metadata.name.clone();
            match self
                .objects
                .execute(vec![Write::Create(Manifest::ReplicaSet(Box::new(rs)))])
                .await
                .pop()
            {
                Some(Ok(w)) => out.wrote(w.revision()),
                Some(Err(e)) => {
                    ok = false;
                    tracing::info!(deployment = %d.metadata.name, replicaset = %name, "create: {e}");
                }
                None => ok = false,
            }
        }
        for rs in plan.update {
            let name = rs.metadata.name.clone();
            match self
                .objects
                .update(Manifest::ReplicaSet(Box::new(rs)))
                .await
            {
                Ok(m) => out.wrote(rev(&m)),
                Err(e) => {
                    ok = false;
                    tracing::debug!(replicaset = %name, "update: {e}");
                }
            }
        }
        let view = self.informer.snapshot();
        let deletes: Vec<Write> = plan
            .delete
            .iter()
            .filter_map(|g| {
                view.replica_sets
                    .values()
                    .find(|rs| rs.metadata.uid == g.uid)
                    .map(|rs| Write::Delete(Kind::ReplicaSet, Box::new(rs.metadata.clone())))
            })
            .collect();
        for r in self.objects.execute(deletes).await {
            match r {
                Ok(w) => out.wrote(w.revision()),
                Err(e) => tracing::debug!("old replica set: {e}"),
            }
        }
        if let Some(annotations) = plan.annotations {
            let mut new = d.clone();
            new.metadata.annotations = annotations;
            match self
                .objects
                .update(Manifest::Deployment(Box::new(new)))
                .await
            {
                Ok(m) => out.wrote(rev(&m)),
                Err(e) => tracing::debug!(deployment = %d.metadata.name, "revision: {e}"),
            }
        }
        if plan.status_changed {
            self.write_status(Kind::Deployment, &d.metadata, &plan.status, out)
                .await;
        }
        if plan.finalize {
            match self
                .objects
                .delete_read(Kind::Deployment, &d.metadata)
                .await
            {
                Ok(w) => out.wrote(w),
                Err(e) => tracing::debug!(deployment = %d.metadata.name, "finalize: {e}"),
            }
        }
        if ok {
            self.record(plan.events).await;
        }
    }

    async fn apply_replica_set(
        &mut self,
        rs: &ReplicaSet,
        plan: replicaset::ReplicaSetPlan,
        now: Timestamp,
        out: &mut Outcome,
    ) {
        out.wake_at(plan.requeue_at);
        if plan.is_empty() {
            return;
        }
        let mut events = plan.events.clone();
        for pod in plan.adopt.iter().chain(plan.release.iter()) {
            match self
                .objects
                .update(Manifest::Pod(Box::new(pod.clone())))
                .await
            {
                Ok(m) => out.wrote(rev(&m)),
                Err(e) => tracing::debug!(pod = %pod.metadata.name, "adopt/release: {e}"),
            }
        }
        let mut failure: Option<(ReplicaFailure, String)> = None;
        // Deletions at the version this member holds, if still that pod.
        let view = self.informer.snapshot();
        let by_uid: HashMap<&str, &Arc<Pod>> = view
            .pods
            .values()
            .map(|p| (p.metadata.uid.as_str(), p))
            .collect();
        let mut doomed = Vec::new();
        let mut deletes = Vec::new();
        for d in &plan.delete {
            if let Some(p) = by_uid.get(d.uid.as_str()) {
                deletes.push(Write::Delete(Kind::Pod, Box::new(p.metadata.clone())));
                doomed.push(d);
            }
        }
        for (d, r) in doomed.into_iter().zip(self.objects.execute(deletes).await) {
            match r {
                Ok(w) => {
                    out.wrote(w.revision());
                    events.push(d.event.clone());
                }
                Err(e) => {
                    failure.get_or_insert((ReplicaFailure::Delete, e.to_string()));
                }
            }
        }
        // Creates in slow-start batches; the first batch with a failure
        // ends them (what is left is not tried).
        let mut next = plan.create.iter();
        for size in replicaset::slow_start_batches(plan.create.len()) {
            let batch: Vec<_> = next.by_ref().take(size).collect();
            let writes = batch
                .iter()
                .map(|c| Write::Create(Manifest::Pod(Box::new(c.pod.clone()))))
                .collect();
            let mut failed = false;
            for (c, r) in batch.iter().zip(self.objects.execute(writes).await) {
                match r {
                    Ok(w) => {
                        out.wrote(w.revision());
                        events.push(c.event.clone());
                    }
                    Err(e) => {
                        failed = true;
                        let message = e.to_string();
                        tracing::info!(replicaset = %rs.metadata.name, "create: {message}");
                        events.push(replicaset::failed_create_event(
                            rs,
                            &message,
                            now,
                            &mut self.rng,
                        ));
                        failure.get_or_insert((ReplicaFailure::Create, message));
                    }
                }
            }
            if failed {
                break;
            }
        }
        let mut status = plan.status.clone();
        replicaset::set_replica_failure(&mut status, failure, now);
        if status != rs.status {
            self.write_status(Kind::ReplicaSet, &rs.metadata, &status, out)
                .await;
        }
        if plan.finalize {
            match self
                .objects
                .delete_read(Kind::ReplicaSet, &rs.metadata)
                .await
            {
                Ok(w) => out.wrote(w),
                Err(e) => tracing::debug!(replicaset = %rs.metadata.name, "finalize: {e}"),
            }
        }
        self.record(events).await;
    }

    async fn write_status<S: serde::Serialize>(
        &self,
        kind: Kind,
        meta: &drover_api::ObjectMeta,
        status: &S,
        out: &mut Outcome,
    ) {
        let value = match serde_json::to_value(status) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(name = %meta.name, "cannot encode its status: {e}");
                return;
            }
        };
        match self
            .objects
            .update_status(kind, &meta.namespace, &meta.name, &meta.uid, value)
            .await
        {
            Ok(m) => out.wrote(rev(&m)),
            Err(e) => tracing::debug!(name = %meta.name, "status: {e}"),
        }
    }

    async fn record(&self, events: Vec<Event>) {
        if !events.is_empty() {
            let _ = self.events.send(events).await;
        }
    }
}
