//! The status outbox: which pod statuses must go to the server (changed,
//! or sent but never shown back), and when and how they go: coalesced, at
//! most one batch per `status_interval`, held back while an operation runs
//! but never longer than that.

use super::link::Link;
use super::shared::Shared;
use super::static_pods::Statics;
use crate::plan::PodBook;
use crate::runtime::ContainerInfo;
use crate::status::{build_status, StatusContext};
use drover_proto::v1::{self as pb, agent_message};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

/// When the statuses went out last, and since when some wait.
#[derive(Default)]
pub(super) struct Outbox {
    last_flush: Option<Instant>,
    /// When the oldest unsent status change was made.
    pending_since: Option<Instant>,
}

/// Rebuilds every pod's status from what runs (`grouped`, by pod uid and
/// container); marks pending the ones that changed and the ones sent but
/// not shown back within `confirm`. `true` if any became pending.
pub(super) fn refresh(
    pods: &mut HashMap<String, PodBook>,
    grouped: &HashMap<&str, BTreeMap<&str, Vec<&ContainerInfo>>>,
    cx: &StatusContext<'_>,
    scheme: &str,
    confirm: Duration,
) -> bool {
    let wall: SystemTime = cx.now;
    let empty = BTreeMap::new();
    let mut changed = false;
    for (uid, book) in pods.iter_mut() {
        let mine = grouped.get(uid.as_str()).unwrap_or(&empty);
        let s = build_status(book, mine, cx, scheme);
        if book.status.as_ref() != Some(&s) {
            book.status = Some(s);
            book.pending = true;
            changed = true;
        } else if book
            .sent_at
            .is_some_and(|t| wall.duration_since(t).is_ok_and(|d| d > confirm))
        {
            // Sent, but the server never showed it back: send it again.
            book.sent_at = None;
            book.pending = true;
            changed = true;
        }
    }
    changed
}

impl Outbox {
    /// Something became pending at `now` (the oldest change counts).
    pub(super) fn hold(&mut self, now: Instant) {
        if self.pending_since.is_none() {
            self.pending_since = Some(now);
        }
    }

    /// When the pending statuses go out (`now` when nothing holds them),
    /// given that some are pending; `ops_running` holds them back for at
    /// most `interval`.
    pub(super) fn flush_at(&self, ops_running: bool, interval: Duration, now: Instant) -> Instant {
        let mut at = self.last_flush.map_or(now, |t| t + interval);
        if ops_running {
            // Let running operations finish, but not for long.
            let since = self.pending_since.unwrap_or(now);
            at = at.max(since + interval);
        }
        at
    }

    /// Sends the static pods report if due and every pending status, on the
    /// session if one is up.
    pub(super) fn flush(
        &mut self,
        link: &mut Link,
        statics: &mut Statics,
        pods: &mut HashMap<String, PodBook>,
        shared: &Shared,
        name: &str,
    ) {
        if !link.is_up() {
            return;
        }
        let now = shared.clock.now();
        self.last_flush = Some(now);
        let wall = shared.clock.wall();
        let mut sent_all = true;
        if statics.due(pods) {
            let msg = Statics::message(pods);
            if link.send_now(msg, shared, name) {
                statics.sent(pods, wall);
            } else {
                sent_all = false;
            }
        }
        let mut uids = Vec::new();
        let mut updates = Vec::new();
        for (uid, b) in pods.iter() {
            if !b.pending || b.is_static {
                continue;
            }
            let Some(s) = &b.status else { continue };
            let Ok(status) = serde_json::to_vec(s) else {
                continue;
            };
            uids.push(uid.clone());
            updates.push(pb::PodStatusUpdate {
                namespace: b.pod.metadata.namespace.clone(),
                name: b.pod.metadata.name.clone(),
                uid: uid.clone(),
                status,
            });
        }
        if !updates.is_empty() {
            tracing::trace!(node = %name, pods = updates.len(), "sending statuses");
            let msg = pb::AgentMessage {
                msg: Some(agent_message::Msg::Statuses(pb::PodStatuses {
                    pods: updates,
                })),
            };
            if link.send_now(msg, shared, name) {
                for uid in uids {
                    if let Some(b) = pods.get_mut(&uid) {
                        b.pending = false;
                        b.sent_at = Some(wall);
                    }
                }
            } else {
                sent_all = false;
            }
        }
        if sent_all {
            self.pending_since = None;
        }
    }
}
