//! What a member runs in the background, over the object API and the
//! cache:
//!
//! - [`controller`]: on the leader, the DaemonSet controller (with its
//!   ControllerRevisions, [`revisions`]) and the node lifecycle controller;
//! - [`session`]: one agent's session (pushing its pods, writing what it
//!   reports);
//! - [`mirror`]: mirror pods kept in step with a node's static pods;
//! - [`heartbeats`]: a follower relaying the heartbeats it hears to the
//!   leader;
//! - [`tokens`]: rotated join tokens, replicated, taken up by every member.

pub mod controller;
pub mod events;
pub mod heartbeats;
pub mod mirror;
pub mod revisions;
pub mod session;
pub mod snapshots;
pub mod tokens;

use drover_api::Manifest;

/// The store revision of an object the API just wrote (what a loop waits
/// for its cache to reach); 0, nothing to wait for, when it carries none.
/// Never a compare-and-swap precondition: those come from
/// [`crate::api::revision_of`].
fn written_revision(m: &Manifest) -> u64 {
    m.metadata().revision().ok().flatten().unwrap_or(0)
}
