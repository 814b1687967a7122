//! Node heartbeats, kept in memory: heartbeats are not raft writes (a
//! thousand nodes would be a write storm). Every member records the nodes
//! it hears from; a follower relays their names to the leader
//! ([`crate::loops::heartbeats`]), whose node lifecycle loop judges them.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often agents heartbeat.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

/// A node heard from after this long without a heartbeat (or for the
/// first time) is *back*: the node lifecycle controller is woken at once
/// instead of at its next check (up to a second later), so a node whose
/// link healed is Ready again as soon as its session is.
const BACK_AFTER: Duration = Duration::from_secs(2);

/// When each node was last heard from. The names are shared: the node
/// lifecycle controller copies the map on every pass (a pass at 2,000 nodes
/// copied 2,000 strings), and looks up every node in it twice.
pub type LastHeard = drover_controller::FastMap<Arc<str>, Instant>;

/// The last heartbeat of every node, as this member heard it (and, on the
/// leader, as followers relayed it).
#[derive(Default)]
pub struct Heartbeats {
    last: Mutex<LastHeard>,
    relay: Mutex<HashSet<String>>,
    back: tokio::sync::Notify,
}

impl Heartbeats {
    /// Records a heartbeat of `node` now.
    pub fn beat(&self, node: &str) {
        let now = Instant::now();
        // 10,000 nodes beat every second: no allocation for a node already
        // known.
        let before = {
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            match last.get_mut(node) {
                Some(t) => Some(std::mem::replace(t, now)),
                None => last.insert(Arc::from(node), now),
            }
        };
        self.note_return(before, now);
        let mut relay = self.relay.lock().unwrap_or_else(|e| e.into_inner());
        if !relay.contains(node) {
            relay.insert(node.to_string());
        }
    }

    /// Records heartbeats relayed by a follower.
    pub fn beat_all(&self, nodes: &[String]) {
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        for n in nodes {
            let before = match last.get_mut(n.as_str()) {
                Some(t) => Some(std::mem::replace(t, now)),
                None => last.insert(Arc::from(n.as_str()), now),
            };
            self.note_return(before, now);
        }
    }

    fn note_return(&self, before: Option<Instant>, now: Instant) {
        if before.is_none_or(|b| now.saturating_duration_since(b) >= BACK_AFTER) {
            // One stored permit: a burst of returns wakes one pass.
            self.back.notify_one();
        }
    }

    /// Resolves when a node is heard from again after a silence of
    /// [`BACK_AFTER`] (or for the first time) since the last call.
    pub async fn node_back(&self) {
        self.back.notified().await
    }

    /// The last heartbeat of each node.
    pub fn snapshot(&self) -> LastHeard {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Forgets a node (it left or was removed).
    pub fn forget(&self, node: &str) {
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(node);
    }

    /// The nodes heard from since the last call: what a follower relays.
    pub fn take_relay(&self) -> Vec<String> {
        let mut r = self.relay.lock().unwrap_or_else(|e| e.into_inner());
        r.drain().collect()
    }
}
