//! The agent's Prometheus metrics, served on `drover agent --metrics ADDR`
//! (off by default): `GET /metrics` in the text format. The list:
//! `docs/metrics.md`.
//!
//! [`Timed`] wraps the node's [`Runtime`]: every call is timed
//! (`drover_agent_runtime_call_duration_seconds{call}`) and every
//! container instance started is counted (`drover_agent_pod_starts_total`).
//!
//! Who may call: whoever can reach `ADDR` (plain HTTP, no credential, like
//! a node exporter's port): bind it to loopback or a private interface.
//! What it tells is counts and durations of this node's runtime calls,
//! nothing about pods or the cluster.

use crate::runtime::{
    ContainerInfo, ExecOutput, LogOptions, LogStream, Runtime, RuntimeError, StartContainer,
};
use prometheus_client::encoding::{text, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    call: &'static str,
}

fn call_histogram() -> Histogram {
    // 1 ms … ~65 s (an image pull, a graceful stop).
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The agent's metrics.
pub struct AgentMetrics {
    registry: Registry,
    pod_starts: Counter,
    calls: Family<CallLabels, Histogram, fn() -> Histogram>,
}

impl Default for AgentMetrics {
    fn default() -> Self {
        AgentMetrics::new()
    }
}

impl AgentMetrics {
    /// The agent's metrics, registered, all zero.
    pub fn new() -> AgentMetrics {
        let mut registry = Registry::default();
        let pod_starts = Counter::default();
        let calls: Family<CallLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(call_histogram);
        registry.register(
            "drover_agent_pod_starts",
            "Container instances this agent started (a pod's containers, restarts included)",
            pod_starts.clone(),
        );
        registry.register(
            "drover_agent_runtime_call_duration_seconds",
            "Time of each call to the container runtime, by call",
            calls.clone(),
        );
        AgentMetrics {
            registry,
            pod_starts,
            calls,
        }
    }

    fn observe(&self, call: &'static str, since: Instant) {
        self.calls
            .get_or_create(&CallLabels { call })
            .observe(since.elapsed().as_secs_f64());
    }

    /// The Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = text::encode(&mut out, &self.registry);
        out
    }
}

/// A [`Runtime`] that times every call of the one it wraps.
pub struct Timed<R> {
    inner: Arc<R>,
    metrics: Arc<AgentMetrics>,
}

impl<R> Timed<R> {
    /// `inner`, timed into `metrics`.
    pub fn new(inner: Arc<R>, metrics: Arc<AgentMetrics>) -> Timed<R> {
        Timed { inner, metrics }
    }
}

impl<R: Runtime> Runtime for Timed<R> {
    fn version(&self) -> String {
        self.inner.version()
    }

    async fn list(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        let t = Instant::now();
        let r = self.inner.list().await;
        self.metrics.observe("list", t);
        r
    }

    async fn start(&self, req: StartContainer) -> Result<(), RuntimeError> {
        let t = Instant::now();
        let r = self.inner.start(req).await;
        self.metrics.observe("start", t);
        if r.is_ok() {
            self.metrics.pod_starts.inc();
        }
        r
    }

    async fn remove(&self, id: &str, grace: Duration) -> Result<(), RuntimeError> {
        let t = Instant::now();
        let r = self.inner.remove(id, grace).await;
        self.metrics.observe("remove", t);
        r
    }

    async fn remove_pod(&self, pod_uid: &str, grace: Duration) -> Result<(), RuntimeError> {
        let t = Instant::now();
        let r = self.inner.remove_pod(pod_uid, grace).await;
        self.metrics.observe("remove_pod", t);
        r
    }

    async fn stop(&self, id: &str, grace: Duration) -> Result<(), RuntimeError> {
        let t = Instant::now();
        let r = self.inner.stop(id, grace).await;
        self.metrics.observe("stop", t);
        r
    }

    async fn update_volumes(
        &self,
        pod: Arc<drover_api::Pod>,
        volumes: Arc<crate::runtime::ConfigVolumes>,
    ) -> Result<(), RuntimeError> {
        let t = Instant::now();
        let r = self.inner.update_volumes(pod, volumes).await;
        self.metrics.observe("update_volumes", t);
        r
    }

    fn next_change(&self) -> Option<SystemTime> {
        self.inner.next_change()
    }

    async fn exec(
        &self,
        id: &str,
        cmd: Vec<String>,
        timeout: Duration,
    ) -> Result<ExecOutput, RuntimeError> {
        let t = Instant::now();
        let r = self.inner.exec(id, cmd, timeout).await;
        self.metrics.observe("exec", t);
        r
    }

    async fn exec_session(
        &self,
        id: &str,
        spec: crate::runtime::ExecSpec,
    ) -> Result<crate::runtime::ExecSession, RuntimeError> {
        // Times the start only: the session runs as long as its client.
        let t = Instant::now();
        let r = self.inner.exec_session(id, spec).await;
        self.metrics.observe("exec_session", t);
        r
    }

    async fn logs(&self, id: &str, opts: LogOptions) -> Result<LogStream, RuntimeError> {
        let t = Instant::now();
        let r = self.inner.logs(id, opts).await;
        self.metrics.observe("logs", t);
        r
    }
}

/// Serves `GET /metrics` on `addr` (plain HTTP) until `stop` resolves;
/// answers the address bound (port 0 picks one). Any other path is 404.
pub async fn serve(
    addr: &str,
    metrics: Arc<AgentMetrics>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    use anyhow::Context;
    use axum::routing::get;
    let l = tokio::net::TcpListener::bind(addr).await.with_context(|| {
        format!("--metrics {addr}: cannot listen there; choose another address")
    })?;
    let bound = l.local_addr()?;
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let m = metrics.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    m.render(),
                )
            }
        }),
    );
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(l, app).with_graceful_shutdown(stop).await {
            tracing::warn!("--metrics: {e}");
        }
    });
    Ok((bound, task))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_timed_by_name_and_starts_counted() {
        let m = AgentMetrics::new();
        m.observe("list", Instant::now());
        m.pod_starts.inc();
        let text = m.render();
        for line in [
            "# TYPE drover_agent_pod_starts counter",
            "drover_agent_pod_starts_total 1",
            "# TYPE drover_agent_runtime_call_duration_seconds histogram",
            "drover_agent_runtime_call_duration_seconds_count{call=\"list\"} 1",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
    }
}
