//! Backoff for replacing failed daemon pods, per (DaemonSet, node).
//!
//! The same rules as Kubernetes' `flowcontrol.Backoff` as the daemon
//! controller uses it (`NewBackOff(1s, 15m)`):
//!
//! - a failed pod is deleted (and so replaced) at once when its node has no
//!   backoff entry, which then starts at 1 s;
//! - while less than the current delay has passed since the entry's last
//!   update, failed pods on that node are left alone;
//! - each further deletion doubles the delay, up to 15 minutes;
//! - an entry untouched for twice the maximum (30 minutes) has expired: the
//!   next failure starts again at 1 s, and the entry is dropped.
//!
//! Kubernetes keys entries by DaemonSet UID, observed generation and node,
//! so that a changed spec starts afresh; here the caller keeps one
//! [`FailedPodBackoff`] per DaemonSet (by UID), and entries remember the
//! generation they were made for.
//!
//! The planner never mutates the caller's value: it returns the new one in
//! [`super::DaemonSetPlan::backoff`], which the caller keeps and passes
//! back next time. Losing it (a new leader) only means the next failure
//! starts at 1 s again.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::time::Timestamp;

/// The first delay.
pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// The longest delay.
pub const MAX_BACKOFF: Duration = Duration::from_secs(15 * 60);

/// The backoff of one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffEntry {
    /// The DaemonSet generation the entry was made for.
    pub generation: Option<i64>,
    /// The current delay.
    pub delay: Duration,
    /// When a failed pod on the node was last deleted.
    pub last_update: Timestamp,
}

impl BackoffEntry {
    fn expired(&self, now: Timestamp) -> bool {
        now.duration_since(self.last_update) > MAX_BACKOFF * 2
    }

    /// When the node's failed pods may be replaced again.
    pub fn until(&self) -> Timestamp {
        self.last_update + self.delay
    }
}

/// The failed-pod backoff state of one DaemonSet: an entry per node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FailedPodBackoff {
    entries: BTreeMap<String, BackoffEntry>,
}

impl FailedPodBackoff {
    /// No entries.
    pub const fn new() -> Self {
        FailedPodBackoff {
            entries: BTreeMap::new(),
        }
    }

    /// The entry of a node, if any.
    pub fn get(&self, node: &str) -> Option<&BackoffEntry> {
        self.entries.get(node)
    }

    /// Every entry, by node name.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &BackoffEntry)> {
        self.entries
            .iter()
            .map(|(node, entry)| (node.as_str(), entry))
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn live(&self, node: &str, generation: Option<i64>, now: Timestamp) -> Option<&BackoffEntry> {
        self.entries
            .get(node)
            .filter(|e| e.generation == generation && !e.expired(now))
    }

    /// Whether failed pods of this generation on the node must wait
    /// (`IsInBackOffSinceUpdate`); `Some(until)` when they must.
    pub fn in_backoff(
        &self,
        node: &str,
        generation: Option<i64>,
        now: Timestamp,
    ) -> Option<Timestamp> {
        self.live(node, generation, now)
            .filter(|e| now.duration_since(e.last_update) < e.delay)
            .map(BackoffEntry::until)
    }

    /// Records a deletion of a failed pod on the node now (`Next`): the
    /// delay starts at 1 s or doubles.
    pub fn next(&mut self, node: &str, generation: Option<i64>, now: Timestamp) {
        let delay = match self.live(node, generation, now) {
            Some(entry) => (entry.delay * 2).min(MAX_BACKOFF),
            None => INITIAL_BACKOFF,
        };
        self.entries.insert(
            node.to_owned(),
            BackoffEntry {
                generation,
                delay,
                last_update: now,
            },
        );
    }

    /// Drops expired entries, entries of other generations, and entries of
    /// nodes for which `keep` is false (nodes that no longer exist).
    pub fn gc(&mut self, generation: Option<i64>, now: Timestamp, keep: impl Fn(&str) -> bool) {
        self.entries
            .retain(|node, e| e.generation == generation && !e.expired(now) && keep(node));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_unix_seconds(seconds)
    }

    #[test]
    fn doubles_from_one_second_to_fifteen_minutes() {
        let mut b = FailedPodBackoff::new();
        assert_eq!(b.in_backoff("n", Some(1), at(0)), None);
        b.next("n", Some(1), at(0));
        assert_eq!(b.in_backoff("n", Some(1), at(0)), Some(at(1)));
        assert_eq!(b.in_backoff("n", Some(1), at(1)), None);
        let mut now = 1;
        let mut delays = vec![];
        for _ in 0..12 {
            b.next("n", Some(1), at(now));
            let delay = b.get("n").unwrap().delay;
            delays.push(delay.as_secs());
            now += delay.as_secs() as i64;
        }
        assert_eq!(delays, [2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900, 900]);
    }

    #[test]
    fn other_nodes_and_generations_are_independent() {
        let mut b = FailedPodBackoff::new();
        b.next("n", Some(1), at(0));
        assert_eq!(b.in_backoff("m", Some(1), at(0)), None);
        assert_eq!(b.in_backoff("n", Some(2), at(0)), None);
        b.next("n", Some(2), at(0));
        assert_eq!(b.get("n").unwrap().delay, INITIAL_BACKOFF);
    }

    #[test]
    fn expires_after_twice_the_maximum() {
        let mut b = FailedPodBackoff::new();
        b.next("n", None, at(0));
        b.next("n", None, at(1));
        assert_eq!(b.get("n").unwrap().delay, Duration::from_secs(2));
        b.next("n", None, at(1 + 1801));
        assert_eq!(b.get("n").unwrap().delay, INITIAL_BACKOFF);
        b.gc(None, at(1802 + 1800), |_| true);
        assert!(!b.is_empty());
        b.gc(None, at(1802 + 1801), |_| true);
        assert!(b.is_empty());
    }

    #[test]
    fn gc_drops_gone_nodes_and_old_generations() {
        let mut b = FailedPodBackoff::new();
        b.next("a", Some(1), at(0));
        b.next("b", Some(1), at(0));
        b.next("c", Some(0), at(0));
        b.gc(Some(1), at(0), |node| node != "b");
        assert_eq!(b.entries().map(|(n, _)| n).collect::<Vec<_>>(), ["a"]);
    }
}
