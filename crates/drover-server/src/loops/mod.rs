//! What a member runs in the background, over the object API and the
//! cache:
//!
//! - [`controller`]: on the leader, the DaemonSet controller (with its
//!   ControllerRevisions, [`revisions`]) and the node lifecycle controller;
//! - [`scheduler`]: on the leader, the scheduler that binds pods without
//!   `spec.nodeName`;
//! - [`workloads`]: on the leader, the Deployment and ReplicaSet
//!   controllers, their garbage collection and taint-based eviction;
//! - [`session`]: one agent's session (pushing its pods, writing what it
//!   reports);
//! - [`statuses`]: the pod statuses a session reports, written by a task
//!   of their own (the session's reader never waits on the store);
//! - [`mirror`]: mirror pods kept in step with a node's static pods;
//! - [`heartbeats`]: a follower relaying the heartbeats it hears to the
//!   leader;
//! - [`tokens`]: rotated join tokens, replicated, taken up by every member;
//! - [`snapshots`]: on the leader, the cluster id and scheduled snapshots;
//! - [`renewal`]: every member renews its own certificate while it runs.

mod changed;
pub mod controller;
pub mod events;
pub mod heartbeats;
pub mod mirror;
pub mod renewal;
pub mod revisions;
pub mod scheduler;
pub mod session;
pub mod snapshots;
pub mod statuses;
pub mod tokens;
pub mod workloads;

use crate::ctx::Ctx;
use drover_api::Manifest;
use std::future::Future;
use tokio::sync::watch;

/// Runs `lead` for each term this member leads, until `stop`: `lead` is
/// dropped (cancelled) as soon as the member stops leading or the term
/// changes, and called again when it leads anew. `lead` returning early
/// waits for the end of the term.
pub async fn each_term<F, Fut>(ctx: &Ctx, mut stop: watch::Receiver<bool>, mut lead: F)
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut leader = ctx.store.subscribe_leader();
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            r = leader.wait_for(|l| l.is_leader) => if r.is_err() { return },
        }
        let term = ctx.store.leader().term;
        let ended = leader.clone();
        let mut ended = ended;
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = ended.wait_for(|l| !l.is_leader || l.term != term) => {}
            _ = async { lead(term).await; std::future::pending::<()>().await } => {}
        }
    }
}

/// The pods by the uid of their controller, and those without one (which
/// a controller may adopt): what each controller's plan is given.
pub(crate) fn pods_by_controller<'a>(
    pods: &[&'a drover_api::Pod],
) -> (
    drover_controller::FastMap<&'a str, Vec<&'a drover_api::Pod>>,
    Vec<&'a drover_api::Pod>,
) {
    let mut bare = Vec::new();
    let mut by_owner: drover_controller::FastMap<&str, Vec<&drover_api::Pod>> =
        drover_controller::FastMap::default();
    for &p in pods {
        match p.metadata.controller_ref() {
            Some(o) => by_owner.entry(o.uid.as_str()).or_default().push(p),
            None => bare.push(p),
        }
    }
    (by_owner, bare)
}

/// The store revision of an object the API just wrote (what a loop waits
/// for its cache to reach); 0, nothing to wait for, when it carries none.
/// Never a compare-and-swap precondition: those come from
/// [`crate::api::revision_of`].
fn written_revision(m: &Manifest) -> u64 {
    m.metadata().revision().ok().flatten().unwrap_or(0)
}
