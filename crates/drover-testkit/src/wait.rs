//! Polling with a deadline: every wait of the tests names what it waits
//! for, and panics with that name when the deadline passes.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often [`wait_until`] polls.
pub const POLL: Duration = Duration::from_millis(10);

/// Polls `f` every [`POLL`] until it holds; panics with `what` after
/// `timeout`. Returns how long it took.
pub async fn wait_until<F, Fut>(what: &str, timeout: Duration, f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    wait_until_every(what, timeout, POLL, f).await
}

/// [`wait_until`], polling every `every`.
pub async fn wait_until_every<F, Fut>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut f: F,
) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    wait_for(what, timeout, every, || {
        let holds = f();
        async move { holds.await.then_some(()) }
    })
    .await;
    start.elapsed()
}

/// Polls `f` every `every` until it yields a value, and returns it; panics
/// with `what` after `timeout`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, every: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    poll(what, timeout, every, || {
        let v = f();
        async move { v.await.ok_or_else(String::new) }
    })
    .await
}

/// Polls `f` every [`POLL`] until it yields `Ok`, and returns its value;
/// after `timeout`, panics with `what` and the last `Err`: what was seen
/// instead, so that a failure says which part did not hold.
pub async fn wait_explained<T, F, Fut>(what: &str, timeout: Duration, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    poll(what, timeout, POLL, f).await
}

/// The loop of [`wait_for`] and [`wait_explained`]: `Err` carries what was
/// seen instead (empty: nothing to say).
async fn poll<T, F, Fut>(what: &str, timeout: Duration, every: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match f().await {
            Ok(v) => return v,
            Err(seen) => assert!(
                Instant::now() < deadline,
                "timed out after {timeout:?} waiting for {what}{}{seen}",
                if seen.is_empty() { "" } else { "; last seen: " }
            ),
        }
        tokio::time::sleep(every).await;
    }
}

/// [`wait_until_every`] for tests without a runtime (they drive child
/// processes): sleeps the thread between polls.
pub fn wait_until_blocking(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut f: impl FnMut() -> bool,
) -> Duration {
    let start = Instant::now();
    let deadline = start + timeout;
    while !f() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(every);
    }
    start.elapsed()
}
