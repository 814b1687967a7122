//! The node lifecycle part of the leader's pass: which nodes stopped
//! heartbeating or came back (`drover_controller::node`), written with
//! compare-and-swap, and the pods of unreachable nodes marked not ready.
//!
//! A pass judges only the nodes whose verdict may have changed since the
//! last one ([`NodeWatch`]): those whose Node changed (the [`Tracker`]'s
//! walk), those whose deadline came, those not `Ready`, and those it wrote
//! to. A pass over 10,000 Ready nodes whose heartbeats keep arriving then
//! judges the few that changed, not all of them.

use super::{rev, Leading, CONCURRENT_WRITES, MAX_POD_MARK_DELAY};
use crate::api::batch::Write;
use crate::cache::Snapshot;
use crate::loops::changed::{Changed, Tracker};
use drover_api::{Kind, Manifest, Node, Pod};
use drover_controller::node::Now;
use drover_controller::Timestamp;
use futures_util::StreamExt;
use std::time::{Instant, SystemTime};

impl Leading {
    /// Plans and writes the nodes and the pods of unreachable ones.
    /// Answers the highest revision written and when to judge again.
    pub(super) async fn node_lifecycle(
        &mut self,
        view: &Snapshot,
        tracker: &Tracker,
        changed: &Changed,
        now: Timestamp,
    ) -> (u64, Option<Timestamp>) {
        let mut written = 0u64;
        // Each judged node's last heartbeat, looked up as it is judged
        // (not a copy of every node's on each pass).
        let heartbeats = &self.ctx.heartbeats;
        let (now_i, now_s) = (Instant::now(), SystemTime::now());
        let last = |name: &str| {
            heartbeats
                .last_heard(name)
                .map(|i| Timestamp::from(now_s - now_i.saturating_duration_since(i)))
        };
        let node = |name: &str| view.node(name);
        let changed = match changed {
            Changed::All => None,
            Changed::Nodes(set) => Some(set),
        };
        let plan = self.nodes.plan_watched(
            &mut self.node_watch,
            view.nodes.values().map(|n| &**n),
            node,
            changed,
            last,
            Now {
                wall: now,
                monotonic: now_i.saturating_duration_since(self.origin),
            },
        );
        self.ctx
            .metrics
            .controller_nodes_judged
            .inc_by(plan.judged as u64);
        let wake = plan.next_check;
        let nodes_written = !plan.updates.is_empty();
        if nodes_written || !plan.remove.is_empty() {
            self.wrote.other();
        }
        // Many nodes can change at once (a sim process dies): one batch of
        // compare-and-swap writes at the versions the view holds, in as few
        // transactions as they allow (a node changed meanwhile is written
        // alone, and the next pass plans it again).
        let names: Vec<String> = plan
            .updates
            .iter()
            .map(|u| u.node.metadata.name.clone())
            .collect();
        let writes = plan
            .updates
            .into_iter()
            .map(|u| Write::Update(Manifest::Node(Box::new(u.node))))
            .collect();
        for (name, r) in names.iter().zip(self.objects.execute(writes).await) {
            match r {
                Ok(w) => written = written.max(w.revision()),
                Err(e) => tracing::debug!(node = %name, "node update: {}", e),
            }
        }
        for r in plan.remove {
            let rv = match r.resource_version.parse::<u64>() {
                Ok(rv) if rv > 0 => rv,
                _ => {
                    tracing::warn!(node = %r.name, "node removal: resourceVersion {:?} is not one the store gave", r.resource_version);
                    continue;
                }
            };
            match self
                .objects
                .delete_at(Kind::Node, "", &r.name, Some(rv))
                .await
            {
                Ok(w) => {
                    tracing::info!(node = %r.name, "removed: unreachable since {}", r.unreachable_since.to_rfc3339());
                    self.ctx.heartbeats.forget(&r.name);
                    written = written.max(w);
                }
                Err(e) => tracing::debug!(node = %r.name, "node removal: {}", e),
            }
        }
        self.record(plan.events).await;

        // Pods of unreachable nodes stop counting as ready (their agents'
        // reports restore them when the nodes are back). Only a node that
        // is not Ready can be unreachable: the watch knows them.
        let defer = nodes_written
            && self
                .pods_deferred
                .get_or_insert_with(Instant::now)
                .elapsed()
                < MAX_POD_MARK_DELAY;
        let marked = if defer {
            // The next pass follows at once (this one's writes wake it).
            Vec::new()
        } else {
            self.pods_deferred = None;
            let unsettled: Vec<&Node> = self.node_watch.unsettled().filter_map(node).collect();
            let pods = unsettled.iter().flat_map(|n| {
                tracker
                    .pods_on(&n.metadata.name)
                    .filter(move |p: &&Pod| p.spec.node_name == n.metadata.name)
            });
            self.nodes
                .pods_not_ready(unsettled.iter().copied(), pods, last, now)
        };
        if !marked.is_empty() {
            self.wrote.other();
            let mut events = Vec::with_capacity(marked.len());
            let writes = marked.into_iter().map(|m| {
                events.push(m.event);
                let objects = self.objects.clone();
                async move {
                    let name = m.pod.metadata.name.clone();
                    match objects
                        .write_status_as_read(Manifest::Pod(Box::new(m.pod)))
                        .await
                    {
                        Ok(m) => rev(&m),
                        Err(e) => {
                            tracing::debug!(pod = %name, "marking not ready: {}", e);
                            0
                        }
                    }
                }
            });
            let revs: Vec<u64> = futures_util::stream::iter(writes)
                .buffer_unordered(CONCURRENT_WRITES)
                .collect()
                .await;
            written = written.max(revs.into_iter().max().unwrap_or(0));
            self.record(events).await;
        }
        (written, wake)
    }
}
