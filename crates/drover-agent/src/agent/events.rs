//! The node's pod events: what the runtime operations note (through an
//! [`EventSink`], in order), what the plan and the probes note, counted and
//! rate-limited by the [`Correlator`] and sent in `PodEvents` batches (at
//! most one round per status interval, [`MAX_PER_MESSAGE`] a message).
//! Events that cannot go (no session, a full queue) wait, counted, for the
//! next session.

use super::link::Link;
use super::shared::Shared;
use crate::clock::rfc3339;
use crate::events::{Correlator, Note, Recorded};
use crate::runtime::EventSink;
use drover_proto::v1::{self as pb, agent_message};
use std::sync::atomic::Ordering;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Events in one `PodEvents` message (the server refuses more).
pub(super) const MAX_PER_MESSAGE: usize = 100;
/// Messages one flush sends at most (the rest waits for the next).
const MAX_MESSAGES_PER_FLUSH: usize = 10;

/// The node's pod events; see the module docs.
pub(super) struct Events {
    correlator: Correlator,
    sink: EventSink,
    rx: mpsc::UnboundedReceiver<Box<Note>>,
    last_flush: Option<Instant>,
}

fn to_wire(r: Recorded) -> pb::PodEvent {
    pb::PodEvent {
        namespace: r.namespace,
        pod: r.pod,
        uid: r.pod_uid,
        field_path: r.field_path,
        name: r.name,
        r#type: r.r#type.as_str().to_string(),
        reason: r.reason.to_string(),
        message: r.message,
        count: r.count,
        first_timestamp: rfc3339(r.first),
        last_timestamp: rfc3339(r.last),
    }
}

impl Events {
    pub(super) fn new(correlator: Correlator) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Events {
            correlator,
            sink: EventSink::new(tx),
            rx,
            last_flush: None,
        }
    }

    /// Where the runtime operations note their events.
    pub(super) fn sink(&self) -> &EventSink {
        &self.sink
    }

    /// The notes of the runtime operations, in order.
    pub(super) fn notes(&mut self) -> &mut mpsc::UnboundedReceiver<Box<Note>> {
        &mut self.rx
    }

    /// Records `notes` as happening now, and every note already queued.
    pub(super) fn observe_all(&mut self, notes: impl IntoIterator<Item = Note>, shared: &Shared) {
        let wall = shared.clock.wall();
        let mut n = 0;
        for note in notes {
            self.correlator.observe(note, wall);
            n += 1;
        }
        while let Ok(note) = self.rx.try_recv() {
            self.correlator.observe(*note, wall);
            n += 1;
        }
        shared.stats.events_noted.fetch_add(n, Ordering::Relaxed);
    }

    /// Forgets the sent events of pods that are gone.
    pub(super) fn forget_gone(&mut self, live: impl Fn(&str) -> bool) {
        self.correlator.forget_gone(live);
    }

    /// When the next flush is due, if an event waits.
    pub(super) fn flush_at(&self, shared: &Shared, now: Instant) -> Option<Instant> {
        let wall = shared.clock.wall();
        let due = self.correlator.next_due(wall)?;
        // `now` and `wall` are the same moment: due now is `now`.
        let at = now + due.duration_since(wall).unwrap_or_default();
        let interval = shared.tuning.status_interval;
        Some(self.last_flush.map_or(at, |l| at.max(l + interval)))
    }

    /// Sends what is due, if it is time.
    pub(super) fn flush(&mut self, link: &mut Link, shared: &Shared, name: &str, now: Instant) {
        if !link.is_up() || self.flush_at(shared, now).is_none_or(|at| at > now) {
            return;
        }
        self.last_flush = Some(now);
        let wall = shared.clock.wall();
        for _ in 0..MAX_MESSAGES_PER_FLUSH {
            let due = self.correlator.take_due(wall, MAX_PER_MESSAGE);
            if due.is_empty() {
                return;
            }
            let n = due.len();
            let msg = pb::AgentMessage {
                msg: Some(agent_message::Msg::Events(pb::PodEvents {
                    events: due.iter().cloned().map(to_wire).collect(),
                })),
            };
            if !link.send_now(msg, shared, name) {
                self.correlator.unsent(&due);
                return;
            }
            tracing::trace!(node = %name, events = n, "sent pod events");
            shared.stats.events_sent.fetch_add(n, Ordering::Relaxed);
        }
    }
}
