//! Where the agent's time comes from.
//!
//! The sync loop and the simulated runtime read the time through a
//! [`Clock`]; nothing in this crate calls `SystemTime::now()` or
//! `Instant::now()` directly. [`TokioClock`] (the default) follows tokio's
//! clock, so a test or a simulation that pauses tokio's time
//! (`tokio::time::pause`) drives the wall clock too, and a seed replays
//! exactly. [`ManualClock`] is set by hand, for unit tests of code that
//! reads the time but never sleeps (the simulated runtime).

use std::sync::Mutex;
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

/// A source of time: a monotonic instant (for timers) and the wall clock
/// (for timestamps and container times), which advance together.
pub trait Clock: Send + Sync + 'static {
    /// The monotonic time, on tokio's timeline (what `sleep_until` takes).
    fn now(&self) -> Instant;
    /// The wall-clock time.
    fn wall(&self) -> SystemTime;

    /// The monotonic instant at which the wall clock reads `at` (now, when
    /// `at` is in the past).
    fn instant_at(&self, at: SystemTime) -> Instant {
        let now = self.now();
        match at.duration_since(self.wall()) {
            Ok(ahead) => now + ahead,
            Err(_) => now,
        }
    }
}

/// Tokio's clock, with a wall clock anchored at creation and advanced by
/// tokio's instant (so a paused tokio clock pauses both).
#[derive(Debug, Clone)]
pub struct TokioClock {
    anchor: Instant,
    anchor_wall: SystemTime,
}

impl TokioClock {
    /// A clock whose wall time starts at the system's current time.
    pub fn new() -> Self {
        TokioClock {
            anchor: Instant::now(),
            anchor_wall: SystemTime::now(),
        }
    }

    /// A clock whose wall time starts at `wall` (deterministic runs).
    pub fn starting_at(wall: SystemTime) -> Self {
        TokioClock {
            anchor: Instant::now(),
            anchor_wall: wall,
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall(&self) -> SystemTime {
        self.anchor_wall + Instant::now().saturating_duration_since(self.anchor)
    }
}

/// A clock that moves only when told to.
#[derive(Debug)]
pub struct ManualClock {
    anchor: Instant,
    anchor_wall: SystemTime,
    offset: Mutex<Duration>,
}

impl ManualClock {
    /// A clock reading `wall`, standing still.
    pub fn new(wall: SystemTime) -> Self {
        ManualClock {
            anchor: Instant::now(),
            anchor_wall: wall,
            offset: Mutex::new(Duration::ZERO),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        *self.offset.lock().unwrap_or_else(|e| e.into_inner()) += by;
    }

    fn offset(&self) -> Duration {
        *self.offset.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.anchor + self.offset()
    }

    fn wall(&self) -> SystemTime {
        self.anchor_wall + self.offset()
    }
}

/// Kubernetes' timestamp format: RFC 3339, seconds, UTC.
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_both_timelines_together() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let c = ManualClock::new(start);
        let i0 = c.now();
        c.advance(Duration::from_millis(1500));
        assert_eq!(c.wall(), start + Duration::from_millis(1500));
        assert_eq!(c.now() - i0, Duration::from_millis(1500));
        assert_eq!(
            c.instant_at(start + Duration::from_secs(3)) - c.now(),
            Duration::from_millis(1500)
        );
        assert_eq!(c.instant_at(start), c.now(), "the past is now");
        assert_eq!(rfc3339(start), "2023-11-14T22:13:20Z");
    }
}
