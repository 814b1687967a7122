//! The agent and a slow engine: a node whose engine answers slowly (Docker
//! on a busy machine) keeps its session. Against a real one-member server
//! in this process; every wait has a deadline.

use drover_agent::{
    AgentOptions, ContainerInfo, Runtime, RuntimeError, SimConfig, SimRuntime, StartContainer,
    TokioClock,
};
use drover_testkit::{
    is_running_and_ready, pod_yaml, quick_tuning, wait_until, TestAgent, TestServer,
};
use std::sync::Arc;
use std::time::Duration;

/// An engine whose lists take `delay` once it is set (a busy machine's
/// Docker): the rest is the simulated runtime's.
struct SlowLists {
    sim: SimRuntime,
    delay: std::sync::Mutex<Duration>,
    /// Lists that took the delay and returned.
    slow: std::sync::atomic::AtomicUsize,
}

impl Runtime for SlowLists {
    fn version(&self) -> String {
        self.sim.version()
    }
    async fn list(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        let delay = *self.delay.lock().unwrap();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
            self.slow.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        self.sim.list().await
    }
    async fn start(&self, req: StartContainer) -> Result<(), RuntimeError> {
        self.sim.start(req).await
    }
    async fn remove(&self, id: &str, grace: Duration) -> Result<(), RuntimeError> {
        self.sim.remove(id, grace).await
    }
    async fn remove_pod(&self, uid: &str, grace: Duration) -> Result<(), RuntimeError> {
        self.sim.remove_pod(uid, grace).await
    }
    fn next_change(&self) -> Option<std::time::SystemTime> {
        self.sim.next_change()
    }
}

/// The agent's loop is deaf while it waits on its engine: the server's
/// answers to its heartbeats wait unread meanwhile. An engine that takes
/// longer than the silence rule's 3 s to list its containers (Docker on a
/// busy machine) once made the agent give its session up and reconnect,
/// again and again, blaming the server for its own deafness.
#[tokio::test]
async fn an_engine_slower_than_the_silence_rule_does_not_cost_the_node_its_session() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let clock: Arc<dyn drover_agent::Clock> = Arc::new(TokioClock::new());
    let rt = Arc::new(SlowLists {
        sim: SimRuntime::new(clock.clone(), Arc::new(SimConfig::default())),
        delay: std::sync::Mutex::new(Duration::ZERO),
        slow: Default::default(),
    });
    let mut o = AgentOptions::new(vec![s.addr.clone()], &s.node_token, "busy");
    o.tuning = quick_tuning(1);
    o.tuning.resync = Duration::from_millis(200);
    let agent = TestAgent::spawn(o, rt.clone(), clock);
    wait_until("the node Ready", Duration::from_secs(10), || async {
        s.node("busy").await.is_some_and(|n| n.is_ready())
    })
    .await;
    s.apply(&pod_yaml("p", "busy", "nginx:1")).await;
    wait_until("its pod Running", Duration::from_secs(10), || async {
        s.pod("p").await.is_some_and(|p| is_running_and_ready(&p))
    })
    .await;
    let sessions = s.server.ctx.sessions.opened();
    assert_eq!(sessions, 1, "one session before the engine slows down");

    *rt.delay.lock().unwrap() = Duration::from_secs(4);
    let took = wait_until("three lists of 4 s", Duration::from_secs(30), || async {
        rt.slow.load(std::sync::atomic::Ordering::SeqCst) >= 3
    })
    .await;
    eprintln!("three slow lists: {took:?}");
    assert_eq!(
        s.server.ctx.sessions.opened(),
        sessions,
        "the node kept its session through lists slower than the silence rule"
    );
    assert!(s.node("busy").await.is_some_and(|n| n.is_ready()));
    agent.kill().await;
}
