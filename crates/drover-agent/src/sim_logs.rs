//! The simulated runtime's container logs ([`crate::SimRuntime`]'s
//! [`crate::Runtime::logs`]): synthetic, computed from the clock, so the same
//! times give the same log.
//!
//! A container that ran from `started_at` writes
//!
//! ```text
//! sim: <container> started (attempt <n>)     at started_at
//! sim: <container> tick <k>                   at started_at + k × period, while it runs
//! sim: <container> exited with code <code>    when it exits
//! ```
//!
//! (`period` is [`crate::SimConfig::log_every`], 1 s by default). `tail`,
//! `since` and `timestamps` (RFC 3339 with nanoseconds, as Docker writes
//! them) apply as for Docker; a followed log sends each line when the clock
//! reaches it, and ends when the container exits or is removed. Every open
//! stream is counted ([`crate::SimRuntime::open_log_streams`]) until it is
//! dropped, so tests can see that a cancelled `logs -f` stopped reading.

use crate::clock::Clock;
use crate::runtime::{LogOptions, LogStream, RuntimeError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// What the log of one container instance is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogSource {
    pub(crate) container: String,
    pub(crate) attempt: u32,
    pub(crate) started_at: SystemTime,
    /// When it exits (or exited) and with which code, if known.
    pub(crate) exit: Option<(SystemTime, i32)>,
}

/// The lines written in `(after, until]` (every line up to `until` when
/// `after` is `None`), oldest first.
pub(crate) fn lines(
    src: &LogSource,
    period: Duration,
    after: Option<SystemTime>,
    until: SystemTime,
) -> Vec<(SystemTime, String)> {
    let mut out = Vec::new();
    let wanted = |t: SystemTime| t <= until && after.is_none_or(|a| t > a);
    let name = &src.container;
    if wanted(src.started_at) {
        out.push((
            src.started_at,
            format!("sim: {name} started (attempt {})", src.attempt),
        ));
    }
    let end = match src.exit {
        Some((at, _)) => at.min(until),
        None => until,
    };
    if !period.is_zero() {
        // The first tick after `after`, without walking from the start.
        let mut k: u32 = match after.and_then(|a| a.duration_since(src.started_at).ok()) {
            Some(d) => u32::try_from(d.as_nanos() / period.as_nanos()).unwrap_or(u32::MAX),
            None => 0,
        };
        loop {
            k = k.saturating_add(1);
            let t = src.started_at + period * k;
            if t > end || (src.exit.is_some_and(|(at, _)| t >= at)) || k == u32::MAX {
                break;
            }
            if wanted(t) {
                out.push((t, format!("sim: {name} tick {k}")));
            }
        }
    }
    if let Some((at, code)) = src.exit {
        if wanted(at) {
            out.push((at, format!("sim: {name} exited with code {code}")));
        }
    }
    out
}

/// When the next line after `after` is written, if ever.
fn next_line(src: &LogSource, period: Duration, after: SystemTime) -> Option<SystemTime> {
    if after < src.started_at {
        return Some(src.started_at);
    }
    let tick = (!period.is_zero()).then(|| {
        let k = after
            .duration_since(src.started_at)
            .map(|d| d.as_nanos() / period.as_nanos())
            .unwrap_or(0);
        src.started_at + period * u32::try_from(k + 1).unwrap_or(u32::MAX)
    });
    match (tick, src.exit) {
        (_, Some((at, _))) if at <= after => None,
        (Some(t), Some((at, _))) => Some(t.min(at)),
        (t, Some((at, _))) => t.or(Some(at)),
        (t, None) => t,
    }
}

fn render(lines: &[(SystemTime, String)], timestamps: bool) -> Vec<u8> {
    let mut out = String::new();
    for (t, line) in lines {
        if timestamps {
            out.push_str(&humantime::format_rfc3339_nanos(*t).to_string());
            out.push(' ');
        }
        out.push_str(line);
        out.push('\n');
    }
    out.into_bytes()
}

/// Counts itself among the open streams while it lives.
struct Open(Arc<AtomicUsize>);

impl Open {
    fn new(count: &Arc<AtomicUsize>) -> Open {
        count.fetch_add(1, Ordering::SeqCst);
        Open(count.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Opens the log of the instance `lookup` finds (it answers `None` once the
/// instance is removed).
pub(crate) fn open(
    lookup: impl Fn() -> Option<LogSource> + Send + 'static,
    clock: Arc<dyn Clock>,
    period: Duration,
    opts: LogOptions,
    count: &Arc<AtomicUsize>,
) -> Result<LogStream, RuntimeError> {
    let Some(src) = lookup() else {
        return Err(RuntimeError::new(
            "ContainerNotFound",
            "the container is gone".to_string(),
        ));
    };
    let open = Open::new(count);
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        let _open = open;
        let now = clock.wall();
        let mut backlog = lines(&src, period, None, now);
        if let Some(since) = opts.since {
            backlog.retain(|(t, _)| *t >= since);
        }
        if let Some(n) = opts.tail {
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            backlog.drain(..backlog.len().saturating_sub(n));
        }
        if !backlog.is_empty()
            && tx
                .send(Ok(render(&backlog, opts.timestamps)))
                .await
                .is_err()
        {
            return;
        }
        if !opts.follow {
            return;
        }
        let mut last = now;
        loop {
            let Some(src) = lookup() else { return };
            let Some(next) = next_line(&src, period, last) else {
                return;
            };
            tokio::select! {
                _ = tokio::time::sleep_until(clock.instant_at(next)) => {}
                _ = tx.closed() => return,
            }
            let Some(src) = lookup() else { return };
            let now = clock.wall().max(next);
            let new = lines(&src, period, Some(last), now);
            last = now;
            if !new.is_empty() && tx.send(Ok(render(&new, opts.timestamps))).await.is_err() {
                return;
            }
        }
    });
    Ok(Box::pin(ReceiverStream::new(rx)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{ManualClock, TokioClock};
    use tokio_stream::StreamExt;

    const T0: u64 = 1_000_000;

    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(T0) + Duration::from_millis(ms)
    }

    fn src(exit: Option<(u64, i32)>) -> LogSource {
        LogSource {
            container: "c".into(),
            attempt: 0,
            started_at: at(0),
            exit: exit.map(|(ms, code)| (at(ms), code)),
        }
    }

    fn texts(l: &[(SystemTime, String)]) -> Vec<&str> {
        l.iter().map(|(_, s)| s.as_str()).collect()
    }

    #[test]
    fn a_line_at_start_one_per_period_and_one_at_exit() {
        let p = Duration::from_secs(1);
        assert!(lines(&src(None), p, None, at(0) - Duration::from_millis(1)).is_empty());
        assert_eq!(
            texts(&lines(&src(None), p, None, at(2500))),
            [
                "sim: c started (attempt 0)",
                "sim: c tick 1",
                "sim: c tick 2"
            ]
        );
        assert_eq!(
            texts(&lines(&src(Some((2000, 1))), p, None, at(9000))),
            [
                "sim: c started (attempt 0)",
                "sim: c tick 1",
                "sim: c exited with code 1"
            ]
        );
        // Only what is after `after`.
        assert_eq!(
            texts(&lines(&src(None), p, Some(at(1000)), at(3000))),
            ["sim: c tick 2", "sim: c tick 3"]
        );
        assert_eq!(next_line(&src(None), p, at(1000)), Some(at(2000)));
        assert_eq!(
            next_line(&src(Some((1500, 0))), p, at(1000)),
            Some(at(1500))
        );
        assert_eq!(next_line(&src(Some((1500, 0))), p, at(1500)), None);
    }

    #[tokio::test]
    async fn tail_since_and_timestamps() {
        let clock = Arc::new(ManualClock::new(at(0)));
        clock.advance(Duration::from_millis(3500));
        let clock: Arc<dyn Clock> = clock;
        let count = Arc::new(AtomicUsize::new(0));
        let p = Duration::from_secs(1);
        let read = |opts: LogOptions| {
            let s = open(move || Some(src(None)), clock.clone(), p, opts, &count).unwrap();
            async move {
                let chunks: Vec<_> = s.collect().await;
                let bytes: Vec<u8> = chunks.into_iter().flat_map(|c| c.unwrap()).collect();
                String::from_utf8(bytes).unwrap()
            }
        };
        let all = read(LogOptions::default()).await;
        assert_eq!(all.lines().count(), 4, "{all}");
        let tail = read(LogOptions {
            tail: Some(2),
            ..Default::default()
        })
        .await;
        assert_eq!(tail, "sim: c tick 2\nsim: c tick 3\n");
        let since = read(LogOptions {
            since: Some(at(2000)),
            timestamps: true,
            ..Default::default()
        })
        .await;
        assert_eq!(
            since,
            "1970-01-12T13:46:42.000000000Z sim: c tick 2\n1970-01-12T13:46:43.000000000Z sim: c tick 3\n"
        );
        assert_eq!(count.load(Ordering::SeqCst), 0, "every stream ended");
    }

    #[tokio::test]
    async fn follow_sends_lines_as_the_clock_reaches_them_until_dropped() {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
        let started = clock.wall();
        let count = Arc::new(AtomicUsize::new(0));
        let source = move || {
            Some(LogSource {
                started_at: started,
                ..src(None)
            })
        };
        let opts = LogOptions {
            follow: true,
            tail: Some(0),
            ..Default::default()
        };
        let mut s = open(source, clock, Duration::from_millis(20), opts, &count).unwrap();
        let mut text = String::new();
        for _ in 0..2 {
            text.push_str(&String::from_utf8(s.next().await.unwrap().unwrap()).unwrap());
        }
        let ticks: Vec<u32> = text
            .lines()
            .map(|l| l.strip_prefix("sim: c tick ").unwrap().parse().unwrap())
            .collect();
        assert!(ticks.len() >= 2, "{text}");
        assert!(ticks.windows(2).all(|w| w[1] == w[0] + 1), "{text}");
        assert_eq!(count.load(Ordering::SeqCst), 1);
        drop(s);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while count.load(Ordering::SeqCst) != 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the reader is still there"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
