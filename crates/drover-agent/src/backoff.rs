//! Backoff arithmetic: container restarts (the kubelet's) and reconnects
//! (jittered exponential, with a seedable RNG). Pure: time is an argument.

use rand::Rng;
use std::time::{Duration, SystemTime};

/// The kubelet's restart backoff for crashed containers: the first restart
/// is immediate, then the container waits 10 s, 20 s, 40 s … up to 5 min
/// after each exit. The backoff is forgotten once a container ran for more
/// than twice the maximum (10 min) since its last restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// The first wait (10 s in Kubernetes).
    pub base: Duration,
    /// The longest wait (5 min in Kubernetes).
    pub max: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            base: Duration::from_secs(10),
            max: Duration::from_secs(300),
        }
    }
}

/// The backoff state of one container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait before the next restart.
    pub delay: Duration,
    /// When it was last restarted.
    pub last_restart: SystemTime,
}

impl RestartPolicy {
    fn expired(&self, entry: &Backoff, finished_at: SystemTime) -> bool {
        finished_at
            .duration_since(entry.last_restart)
            .is_ok_and(|ran| ran > self.max * 2)
    }

    /// When a container that exited at `finished_at` may start again.
    pub fn restart_at(&self, entry: Option<&Backoff>, finished_at: SystemTime) -> SystemTime {
        match entry {
            Some(e) if !self.expired(e, finished_at) => finished_at + e.delay,
            _ => finished_at,
        }
    }

    /// The backoff after restarting, at `now`, a container that exited at
    /// `finished_at`.
    pub fn after_restart(
        &self,
        entry: Option<&Backoff>,
        finished_at: SystemTime,
        now: SystemTime,
    ) -> Backoff {
        let delay = match entry {
            Some(e) if !self.expired(e, finished_at) => (e.delay * 2).min(self.max),
            _ => self.base.min(self.max),
        };
        Backoff {
            delay,
            last_restart: now,
        }
    }
}

/// Jittered exponential backoff between connection attempts: each wait is
/// drawn from `[d/2, d]`, and `d` doubles from `min` up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconnect {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Reconnect {
    /// Starts at `min`, never waits more than `max`.
    pub fn new(min: Duration, max: Duration) -> Self {
        let min = min.max(Duration::from_millis(1));
        Reconnect {
            min,
            max: max.max(min),
            next: min,
        }
    }

    /// The wait before the next attempt.
    pub fn next_delay(&mut self, rng: &mut impl Rng) -> Duration {
        let d = self.next;
        self.next = (d * 2).min(self.max);
        let half = d / 2;
        let nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(rng.random_range(0..=nanos))
    }

    /// A connection succeeded: start again from `min`.
    pub fn reset(&mut self) {
        self.next = self.min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn t(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + s)
    }

    #[test]
    fn restarts_wait_0_10_20_40_up_to_5_minutes() {
        let p = RestartPolicy::default();
        let mut entry: Option<Backoff> = None;
        let mut now = t(0);
        let mut waits = Vec::new();
        for _ in 0..9 {
            // The container runs 1 s, then crashes.
            let finished = now + Duration::from_secs(1);
            let at = p.restart_at(entry.as_ref(), finished);
            waits.push(at.duration_since(finished).unwrap().as_secs());
            now = at;
            entry = Some(p.after_restart(entry.as_ref(), finished, now));
        }
        assert_eq!(waits, vec![0, 10, 20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn a_container_that_ran_long_enough_restarts_at_once() {
        let p = RestartPolicy::default();
        let e = Backoff {
            delay: Duration::from_secs(160),
            last_restart: t(0),
        };
        // Ran 10 min: still backing off.
        let finished = t(600);
        assert_eq!(p.restart_at(Some(&e), finished), t(760));
        // Ran more than 10 min: forgiven.
        let finished = t(601);
        assert_eq!(p.restart_at(Some(&e), finished), finished);
        let next = p.after_restart(Some(&e), finished, t(602));
        assert_eq!(next.delay, Duration::from_secs(10));
        assert_eq!(next.last_restart, t(602));
    }

    #[test]
    fn small_bases_for_tests_and_sims() {
        let p = RestartPolicy {
            base: Duration::from_millis(100),
            max: Duration::from_millis(250),
        };
        let e = p.after_restart(None, t(0), t(0));
        assert_eq!(e.delay, Duration::from_millis(100));
        let soon = t(0) + Duration::from_millis(10);
        let e = p.after_restart(Some(&e), soon, soon);
        assert_eq!(e.delay, Duration::from_millis(200));
        let e = p.after_restart(Some(&e), soon, soon);
        assert_eq!(e.delay, Duration::from_millis(250));
        // Running longer than twice the maximum forgives.
        let later = soon + Duration::from_millis(501);
        assert_eq!(p.after_restart(Some(&e), later, later).delay, p.base);
    }

    #[test]
    fn reconnect_waits_are_jittered_doubling_and_seeded() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut r = Reconnect::new(Duration::from_millis(100), Duration::from_secs(1));
        let mut waits = Vec::new();
        for _ in 0..6 {
            waits.push(r.next_delay(&mut rng));
        }
        let bounds = [100, 200, 400, 800, 1000, 1000];
        for (w, b) in waits.iter().zip(bounds) {
            let b = Duration::from_millis(b);
            assert!(*w >= b / 2 && *w <= b, "{w:?} not in [{:?}, {b:?}]", b / 2);
        }
        // The same seed draws the same waits.
        let mut rng2 = SmallRng::seed_from_u64(7);
        let mut r2 = Reconnect::new(Duration::from_millis(100), Duration::from_secs(1));
        let again: Vec<Duration> = (0..6).map(|_| r2.next_delay(&mut rng2)).collect();
        assert_eq!(waits, again);
        r.reset();
        assert!(r.next_delay(&mut rng) <= Duration::from_millis(100));
    }
}
