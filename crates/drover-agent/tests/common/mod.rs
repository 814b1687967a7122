//! A one-member server in-process on loopback, agents in tasks of the
//! test, and helpers to wait on them. [`docker`]: the fixtures of the tests
//! against the real Docker engine. Each test binary uses a part of this.

#![allow(dead_code)]

pub mod docker;

use drover_agent::{
    run_agent_with, AgentOptions, Clock, Runtime, SimConfig, SimRuntime, TokioClock,
};
use drover_api::Kind;
use drover_api::{Manifest, Node, Pod};
use drover_server::api::Objects;
use drover_server::{Server, ServerOptions};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub struct TestServer {
    pub server: Server,
    pub dir: PathBuf,
    pub objects: Objects,
    pub addr: String,
    pub join_token: String,
}

fn fast(mut o: ServerOptions) -> ServerOptions {
    o.tick = Duration::from_millis(20);
    o.election_ticks = 10;
    o
}

impl TestServer {
    /// A new one-member cluster in `dir`.
    pub async fn start(dir: &Path) -> TestServer {
        Self::start_tuned(dir, |_| {}).await
    }

    /// A new one-member cluster in `dir`, with the options `tune` changes
    /// (e.g. `o.controller.node_timeout`).
    pub async fn start_tuned(dir: &Path, tune: impl FnOnce(&mut ServerOptions)) -> TestServer {
        let mut o = ServerOptions::new(dir);
        o.listen = Some("127.0.0.1:0".into());
        o.http = Some("127.0.0.1:0".into());
        let mut o = fast(o);
        tune(&mut o);
        Self::with(o).await
    }

    /// The member of `dir` again, on the same address.
    pub async fn restart(dir: &Path) -> TestServer {
        Self::with(fast(ServerOptions::new(dir))).await
    }

    async fn with(o: ServerOptions) -> TestServer {
        // RUST_LOG=drover_agent=debug shows what the agents do.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let dir = o.data_dir.clone();
        let server = Server::start(o).await.expect("server starts");
        let objects = Objects::new(server.ctx.clone());
        let addr = server.grpc_addr.to_string();
        let join_token = server.identity.join_token.clone();
        let s = TestServer {
            server,
            dir,
            objects,
            addr,
            join_token,
        };
        // Wait for a leader (a restarted member elects itself).
        wait_until("a leader", Duration::from_secs(10), || async {
            s.server.store.leader().is_leader
        })
        .await;
        s
    }

    pub async fn shutdown(mut self) {
        self.server.shutdown().await;
    }

    pub async fn apply(&self, yaml: &str) {
        self.objects.apply(yaml, false).await.expect("apply");
    }

    pub async fn node(&self, name: &str) -> Option<Node> {
        match self.objects.get(Kind::Node, "", name).await {
            Ok(Manifest::Node(n)) => Some(*n),
            _ => None,
        }
    }

    pub async fn pod(&self, name: &str) -> Option<Pod> {
        match self.objects.get(Kind::Pod, "default", name).await {
            Ok(Manifest::Pod(p)) => Some(*p),
            _ => None,
        }
    }

    /// The pods of `namespace` (of every namespace with `None`); none when
    /// the list fails.
    pub async fn pods(&self, namespace: Option<&str>) -> Vec<Pod> {
        let (list, _) = self
            .objects
            .list(Kind::Pod, namespace, None)
            .await
            .unwrap_or_default();
        list.into_iter()
            .filter_map(|m| match m {
                Manifest::Pod(p) => Some(*p),
                _ => None,
            })
            .collect()
    }

    pub async fn node_count(&self) -> usize {
        self.objects
            .list(Kind::Node, None, None)
            .await
            .map(|(l, _)| l.len())
            .unwrap_or(usize::MAX)
    }
}

/// An agent (`run_agent_with`) running in a task of the test over
/// `runtime`, until [`TestAgent::stop`] (as SIGTERM) or [`TestAgent::kill`].
pub struct TestAgent<R> {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<anyhow::Result<()>>,
    pub runtime: Arc<R>,
}

impl<R: Runtime> TestAgent<R> {
    /// Starts an agent with `o` over `runtime`, on `clock`.
    pub fn spawn(o: AgentOptions, runtime: Arc<R>, clock: Arc<dyn Clock>) -> TestAgent<R> {
        let (tx, rx) = oneshot::channel::<()>();
        let rt = runtime.clone();
        let task = tokio::spawn(async move {
            run_agent_with(o, rt, clock, async move {
                let _ = rx.await;
            })
            .await
        });
        TestAgent {
            stop: Some(tx),
            task,
            runtime,
        }
    }
}

impl<R> TestAgent<R> {
    /// Graceful stop (SIGTERM): the agent leaves; it must return `Ok`
    /// within `within`.
    pub async fn stop(mut self, within: Duration) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        tokio::time::timeout(within, &mut self.task)
            .await
            .expect("the agent stops in time")
            .expect("the agent task")
            .expect("the agent returns Ok");
    }

    /// As SIGKILL: the task is gone, nothing is said to the server, and
    /// the runtime's containers stay.
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// An agent with `o` over a new simulated runtime (`config`), on the
/// Tokio clock.
pub fn start_sim_agent(o: AgentOptions, config: SimConfig) -> TestAgent<SimRuntime> {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let runtime = Arc::new(SimRuntime::new(clock.clone(), Arc::new(config)));
    TestAgent::spawn(o, runtime, clock)
}

/// Polls `f` every 10 ms until it holds; panics after `timeout`.
pub async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if f().await {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A Pod bound to `node`.
pub fn pod_yaml(name: &str, node: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {node}\n  containers: [{{name: c, image: \"{image}\"}}]\n"
    )
}

pub fn is_running_and_ready(p: &Pod) -> bool {
    p.status.phase == Some(drover_api::PodPhase::Running)
        && p.is_ready()
        && p.status.container_statuses.iter().all(|c| c.ready)
}
