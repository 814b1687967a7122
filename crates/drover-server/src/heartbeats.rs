//! Node heartbeats, kept in memory: heartbeats are not raft writes (a
//! thousand nodes would be a write storm). Every member records the nodes
//! it hears from; a follower relays their names to the leader
//! ([`crate::loops::heartbeats`]), whose node lifecycle loop judges them.
//!
//! # How often agents beat
//!
//! Every heartbeat is answered ([`crate::loops::session`]), and each costs
//! the member a read, a write and their TLS records: at 10,000 nodes
//! beating every second an idle member spent 0.67 of a core of a 2-core
//! machine on them, and its 10,000 sim nodes as much again. So, as Nomad's
//! servers do (`max_heartbeats_per_second`, its heartbeat TTL grown with
//! the number of nodes), a member holding many sessions asks its agents to
//! beat less often: [`interval_for`] gives the interval for the sessions it
//! holds, said in the welcome and in every answer. It is never longer than
//! two fifths of the node timeout, so that a node misses two heartbeats in
//! a row before it turns NotReady, as with a second's beat and the default
//! 5 s timeout before: with that timeout the interval stays between 1 and
//! 2 s, and a killed node turns NotReady within the timeout of its last
//! heartbeat either way.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often agents heartbeat on a member with few sessions (the shortest
/// interval [`interval_for`] gives).
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

/// Intervals are whole steps of this: while nodes join one by one the
/// interval changes a step at a time, not at every session.
const INTERVAL_STEP: Duration = Duration::from_millis(250);

/// The heartbeat interval for a member that holds `sessions` agent
/// sessions and answers at most `per_second` heartbeats a second, in a
/// cluster whose nodes turn NotReady after `node_timeout` of silence:
/// `sessions / per_second`, rounded up to a step of 250 ms, at least
/// [`HEARTBEAT_INTERVAL`] and at most [`max_interval`].
pub fn interval_for(sessions: usize, per_second: usize, node_timeout: Duration) -> Duration {
    let per_second = per_second.max(1) as u128;
    let step = INTERVAL_STEP.as_millis();
    let ms = (sessions as u128 * 1000).div_ceil(per_second);
    let ms = ms.div_ceil(step) * step;
    let want = Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX));
    want.clamp(HEARTBEAT_INTERVAL, max_interval(node_timeout))
}

/// The longest heartbeat interval with `node_timeout`: two fifths of it,
/// in whole steps (a node misses two heartbeats before it turns NotReady),
/// and never below [`HEARTBEAT_INTERVAL`].
pub fn max_interval(node_timeout: Duration) -> Duration {
    let step = INTERVAL_STEP.as_millis();
    let ms = (node_timeout.as_millis() * 2 / 5) / step * step;
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX)).max(HEARTBEAT_INTERVAL)
}

/// A node heard from after this long without a heartbeat (or for the
/// first time) is *back*: the node lifecycle controller is woken at once
/// instead of at its next check (up to a second later), so a node whose
/// link healed is Ready again as soon as its session is. Twice the longest
/// interval any member may ask for ([`max_interval`]; a leader hears the
/// nodes of its followers' sessions too), and at least 2 s: below the node
/// timeout whenever that is over 2.5 s, so a node that was NotReady is
/// back when heard.
fn back_after(node_timeout: Duration) -> Duration {
    (max_interval(node_timeout) * 2).max(Duration::from_secs(2))
}

/// When each node was last heard from. The names are shared: the node
/// lifecycle controller copies the map on every pass (a pass at 2,000 nodes
/// copied 2,000 strings), and looks up every node in it twice.
pub type LastHeard = drover_controller::FastMap<Arc<str>, Instant>;

/// The last heartbeat of every node, as this member heard it (and, on the
/// leader, as followers relayed it).
pub struct Heartbeats {
    last: Mutex<LastHeard>,
    relay: Mutex<HashSet<String>>,
    back: tokio::sync::Notify,
    /// The node timeout, in milliseconds ([`Heartbeats::configure`]).
    node_timeout_ms: AtomicU64,
    /// The heartbeats a second this member answers before it asks for a
    /// longer interval ([`interval_for`]).
    per_second: AtomicU64,
}

impl Default for Heartbeats {
    fn default() -> Self {
        Heartbeats {
            last: Mutex::default(),
            relay: Mutex::default(),
            back: tokio::sync::Notify::new(),
            node_timeout_ms: AtomicU64::new(5_000),
            per_second: AtomicU64::new(crate::limits::HEARTBEATS_PER_SECOND as u64),
        }
    }
}

impl Heartbeats {
    /// Sets the node timeout (the controllers' `--node-timeout`; default
    /// 5 s) and the heartbeats a second this member answers before it asks
    /// its agents to beat less often (`--heartbeats-per-second`; default
    /// [`crate::limits::HEARTBEATS_PER_SECOND`]).
    pub fn configure(&self, node_timeout: Duration, per_second: usize) {
        let ms = u64::try_from(node_timeout.as_millis()).unwrap_or(u64::MAX);
        self.node_timeout_ms.store(ms, Ordering::Relaxed);
        self.per_second.store(per_second as u64, Ordering::Relaxed);
    }

    fn node_timeout(&self) -> Duration {
        Duration::from_millis(self.node_timeout_ms.load(Ordering::Relaxed))
    }

    /// The interval to ask of agents while this member holds `sessions`
    /// sessions ([`interval_for`]).
    pub fn interval(&self, sessions: usize) -> Duration {
        let per_second =
            usize::try_from(self.per_second.load(Ordering::Relaxed)).unwrap_or(usize::MAX);
        interval_for(sessions, per_second, self.node_timeout())
    }

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
        let back_after = back_after(self.node_timeout());
        if before.is_none_or(|b| now.saturating_duration_since(b) >= back_after) {
            // One stored permit: a burst of returns wakes one pass.
            self.back.notify_one();
        }
    }

    /// Resolves when a node is heard from again after a silence of
    /// [`back_after`] (or for the first time) since the last call.
    pub async fn node_back(&self) {
        self.back.notified().await
    }

    /// When `node` was last heard from (on this member).
    pub fn last_heard(&self, node: &str) -> Option<Instant> {
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(node)
            .copied()
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

#[cfg(test)]
mod tests {
    use super::*;

    const S5: Duration = Duration::from_secs(5);

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn few_sessions_beat_every_second() {
        for sessions in [0, 1, 100, 2_000] {
            assert_eq!(interval_for(sessions, 2_000, S5), HEARTBEAT_INTERVAL);
        }
    }

    #[test]
    fn many_sessions_beat_less_often_in_steps_up_to_two_fifths_of_the_timeout() {
        assert_eq!(interval_for(2_001, 2_000, S5), ms(1_250));
        assert_eq!(interval_for(3_000, 2_000, S5), ms(1_500));
        assert_eq!(interval_for(4_000, 2_000, S5), ms(2_000));
        // Capped: with a 5 s timeout a node misses two beats before NotReady.
        assert_eq!(interval_for(10_000, 2_000, S5), ms(2_000));
        assert_eq!(interval_for(usize::MAX, 2_000, S5), ms(2_000));
        // A longer timeout allows a longer interval.
        let s40 = Duration::from_secs(40);
        assert_eq!(interval_for(10_000, 2_000, s40), ms(5_000));
        assert_eq!(interval_for(100_000, 2_000, s40), ms(16_000));
        // Never below a second, even with a short timeout or no budget.
        assert_eq!(
            interval_for(10_000, 2_000, Duration::from_secs(1)),
            HEARTBEAT_INTERVAL
        );
        assert_eq!(interval_for(10, 0, S5), ms(2_000));
    }

    #[test]
    fn the_interval_never_shrinks_as_sessions_grow() {
        let mut last = Duration::ZERO;
        for sessions in (0..20_000).step_by(37) {
            let i = interval_for(sessions, 2_000, S5);
            assert!(i >= last, "{sessions} sessions: {i:?} after {last:?}");
            assert_eq!(i.as_millis() % 250, 0);
            last = i;
        }
    }

    #[test]
    fn a_node_back_after_the_timeout_is_always_back() {
        for secs in [3, 5, 10, 40, 300] {
            let timeout = Duration::from_secs(secs);
            let back = back_after(timeout);
            assert!(back < timeout, "{timeout:?}: back after {back:?}");
            // A node beating at the longest interval is never taken for back.
            assert!(back >= max_interval(timeout) * 2);
        }
        assert_eq!(back_after(S5), Duration::from_secs(4));
    }

    #[test]
    fn the_member_asks_for_the_interval_of_its_sessions() {
        let h = Heartbeats::default();
        assert_eq!(h.interval(10), HEARTBEAT_INTERVAL);
        assert_eq!(h.interval(10_000), ms(2_000));
        h.configure(Duration::from_secs(10), 100);
        assert_eq!(h.interval(250), ms(2_500));
        assert_eq!(h.interval(10_000), ms(4_000));
    }
}
