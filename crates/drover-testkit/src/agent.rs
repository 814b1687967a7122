//! Agents in the test's process: [`TestAgent`] runs `run_agent_with` in a
//! task over any runtime (usually the simulated one, [`start_sim_agent`]),
//! and the quick timings the tests give agents and sims.

use drover_agent::{
    run_agent_with, AgentOptions, Clock, Runtime, SimConfig, SimOptions, SimRuntime, TokioClock,
    Tuning,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

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

    /// Graceful stop (SIGTERM), waiting at most `within`, whatever the
    /// agent returns: for tests that check nothing of the agent's end.
    pub async fn stop_unchecked(mut self, within: Duration) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = tokio::time::timeout(within, &mut self.task).await;
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

/// The default timings but quick reconnects (50 ms to 300 ms) and the
/// back-off jitter seeded by `seed`.
pub fn quick_reconnect(seed: u64) -> Tuning {
    Tuning {
        reconnect_min: Duration::from_millis(50),
        reconnect_max: Duration::from_millis(300),
        seed: Some(seed),
        ..Tuning::default()
    }
}

/// [`quick_reconnect`] and quick container restarts (back-off 100 ms to
/// 400 ms).
pub fn quick_tuning(seed: u64) -> Tuning {
    Tuning {
        restart_backoff: Duration::from_millis(100),
        restart_backoff_max: Duration::from_millis(400),
        ..quick_reconnect(seed)
    }
}

/// A sim of `nodes` nodes named `<prefix>0…` that joins `servers` with
/// `node_token`, reconnecting quickly (50 ms to 500 ms).
pub fn sim_options(
    servers: Vec<String>,
    node_token: &str,
    prefix: &str,
    nodes: usize,
) -> SimOptions {
    let mut o = SimOptions::new(servers, node_token, nodes);
    o.prefix = prefix.into();
    o.tuning.reconnect_min = Duration::from_millis(50);
    o.tuning.reconnect_max = Duration::from_millis(500);
    o
}
