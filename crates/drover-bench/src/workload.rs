//! The workload generator, the same for both systems: it only knows a
//! [`Target`] that can put a key and count keys under a prefix.

use crate::cluster::proc_cpu_time;
use crate::target::Target;
use anyhow::{bail, Result};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// A value of `n` printable bytes (the same for every put and system).
pub fn value(n: usize) -> Vec<u8> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    (0..n)
        .map(|i| ALPHABET[(i * 7 + 3) % ALPHABET.len()])
        .collect()
}

/// Nearest-rank percentile of sorted samples.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let k = ((p / 100.0 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[k]
}

/// Latencies of the sequential phase.
pub struct Sequential {
    /// Sorted put latencies.
    pub latencies: Vec<Duration>,
    pub wall: Duration,
}

/// One client, one put at a time: `warmup` uncounted puts, then `n`
/// counted ones (stopping early at `limit`).
pub async fn sequential(
    t: &Target,
    n: usize,
    warmup: usize,
    value: &[u8],
    limit: Duration,
) -> Result<Sequential> {
    for i in 0..warmup {
        t.put(&format!("bench/warm/{i:06}"), value).await?;
    }
    let mut latencies = Vec::with_capacity(n);
    let start = Instant::now();
    for i in 0..n {
        let t0 = Instant::now();
        t.put(&format!("bench/seq/{i:06}"), value).await?;
        latencies.push(t0.elapsed());
        if start.elapsed() > limit {
            eprintln!("# sequential: time limit hit after {} puts", i + 1);
            break;
        }
    }
    let wall = start.elapsed();
    latencies.sort();
    Ok(Sequential { latencies, wall })
}

/// Results of one concurrent window.
pub struct Concurrent {
    /// Sorted latencies of the puts that completed inside the window.
    pub latencies: Vec<Duration>,
    pub errors: u64,
    /// The first error seen inside the window, if any.
    pub first_error: Option<String>,
    pub window: Duration,
    /// CPU time of the server processes during the window.
    pub server_cpu: Duration,
    /// CPU time of this benchmark process during the window.
    pub client_cpu: Duration,
}

/// `targets.len()` writers, each on its own connection, put as fast as
/// they can for `warmup` (not counted) and then for `window` (counted).
/// Each writer cycles over 1000 keys of its own.
pub async fn concurrent(
    targets: Vec<Target>,
    value: &[u8],
    warmup: Duration,
    window: Duration,
    server_pids: &[u32],
) -> Result<Concurrent> {
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let value: Arc<[u8]> = value.into();
    let mut set = JoinSet::new();
    for (w, t) in targets.into_iter().enumerate() {
        let (stop, measuring, value) = (stop.clone(), measuring.clone(), value.clone());
        set.spawn(async move {
            let mut lat = Vec::new();
            let (mut errors, mut first_error) = (0u64, None);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("bench/conc/{w:03}/{:04}", i % 1000);
                let t0 = Instant::now();
                let r = t.put(&key, &value).await;
                let counted = measuring.load(Ordering::Relaxed);
                match r {
                    Ok(()) if counted => lat.push(t0.elapsed()),
                    Ok(()) => {}
                    Err(e) => {
                        if counted {
                            errors += 1;
                            first_error.get_or_insert_with(|| format!("{e:#}"));
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
                i += 1;
            }
            (lat, errors, first_error)
        });
    }
    tokio::time::sleep(warmup).await;
    let cpu = |pids: &[u32]| -> Duration { pids.iter().filter_map(|p| proc_cpu_time(*p)).sum() };
    let (s0, c0) = (cpu(server_pids), cpu(&[std::process::id()]));
    measuring.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    tokio::time::sleep(window).await;
    measuring.store(false, Ordering::Relaxed);
    let window = t0.elapsed();
    let (s1, c1) = (cpu(server_pids), cpu(&[std::process::id()]));
    stop.store(true, Ordering::Relaxed);
    let mut out = Concurrent {
        latencies: Vec::new(),
        errors: 0,
        first_error: None,
        window,
        server_cpu: s1.saturating_sub(s0),
        client_cpu: c1.saturating_sub(c0),
    };
    // Every writer stops after its current put, which is bounded by PUT_TIMEOUT.
    while let Some(r) = set.join_next().await {
        let (lat, errors, first_error) = r?;
        out.latencies.extend(lat);
        out.errors += errors;
        if out.first_error.is_none() {
            out.first_error = first_error;
        }
    }
    out.latencies.sort();
    Ok(out)
}

/// What [`first_write`] saw.
pub struct FirstWrite {
    /// From `t0` to the end of the first successful put.
    pub elapsed: Duration,
    pub attempts: usize,
    /// Failed attempts by error message (shortened).
    pub errors: BTreeMap<String, usize>,
    /// The member index the successful put went to.
    pub via: usize,
    /// Attempts neither failed nor done at that moment (then abandoned).
    pub pending: usize,
}

/// How [`first_write`] probes.
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    /// A new attempt starts this often.
    pub interval: Duration,
    /// One attempt fails after this long.
    pub attempt_timeout: Duration,
    /// No attempt starts after this long from `t0`.
    pub limit: Duration,
}

/// Probes for availability: every `probe.interval`, a new put on a fresh
/// connection to the next of `members` (round robin), each bounded by
/// `probe.attempt_timeout`, until one succeeds; the time is measured from
/// `t0`. At most `limit / interval` attempts are made.
pub async fn first_write<F>(
    t0: Instant,
    members: &[usize],
    target: F,
    key_prefix: &str,
    value: &[u8],
    probe: Probe,
) -> Result<FirstWrite>
where
    F: Fn(usize) -> Result<Target>,
{
    let Probe {
        interval,
        attempt_timeout,
        limit,
    } = probe;
    let mut set = JoinSet::new();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    let mut attempts = 0usize;
    let value: Arc<[u8]> = value.into();
    loop {
        tokio::select! {
            Some(r) = set.join_next(), if !set.is_empty() => {
                match r? {
                    (Ok(()), at, via) => {
                        let pending = set.len();
                        set.abort_all();
                        return Ok(FirstWrite { elapsed: at - t0, attempts, errors, via, pending });
                    }
                    (Err(e), _, _) => {
                        let mut msg = format!("{e:#}");
                        msg.truncate(120);
                        *errors.entry(msg).or_default() += 1;
                    }
                }
            }
            _ = tick.tick() => {
                if t0.elapsed() >= limit {
                    set.abort_all();
                    bail!("no write succeeded within {limit:?} ({attempts} attempts; errors: {errors:?})");
                }
                let via = members[attempts % members.len()];
                let t = target(via)?;
                let key = format!("{key_prefix}/{attempts:05}");
                let value = value.clone();
                set.spawn(async move {
                    let r = match tokio::time::timeout(attempt_timeout, t.put(&key, &value)).await {
                        Ok(r) => r,
                        Err(_) => Err(anyhow::anyhow!("attempt timed out")),
                    };
                    (r, Instant::now(), via)
                });
                attempts += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&v, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&v, 100.0), Duration::from_millis(100));
        assert_eq!(percentile(&v, 0.0), Duration::from_millis(1));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }

    #[test]
    fn values_are_printable_and_sized() {
        let v = value(100);
        assert_eq!(v.len(), 100);
        assert!(v.iter().all(u8::is_ascii_alphanumeric));
    }
}
