//! Node heartbeats, kept in memory: heartbeats are not raft writes (a
//! thousand nodes would be a write storm). Every member records the nodes
//! it hears from; a follower relays their names to the leader
//! ([`crate::loops::heartbeats`]), whose node lifecycle loop judges them.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often agents heartbeat.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

/// The last heartbeat of every node, as this member heard it (and, on the
/// leader, as followers relayed it).
#[derive(Default)]
pub struct Heartbeats {
    last: Mutex<HashMap<String, Instant>>,
    relay: Mutex<HashSet<String>>,
}

impl Heartbeats {
    /// Records a heartbeat of `node` now.
    pub fn beat(&self, node: &str) {
        let now = Instant::now();
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(node.to_string(), now);
        self.relay
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(node.to_string());
    }

    /// Records heartbeats relayed by a follower.
    pub fn beat_all(&self, nodes: &[String]) {
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        for n in nodes {
            last.insert(n.clone(), now);
        }
    }

    /// The last heartbeat of each node.
    pub fn snapshot(&self) -> HashMap<String, Instant> {
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
