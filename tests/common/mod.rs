//! Helpers shared by the process-level tests (the real `drover` binary).

use std::future::Future;
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// Polls `f` every `poll` until it yields a value; panics with `what` after
/// `timeout`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, poll: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(poll).await;
    }
}

/// `n` distinct free loopback ports. The listeners are held until all ports
/// are chosen so that no port is picked twice; the server binds with
/// SO_REUSEADDR.
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("local addr").port())
        .collect()
}
