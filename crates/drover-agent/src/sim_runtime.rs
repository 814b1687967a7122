//! [`SimRuntime`]: containers in memory, for `drover sim` and tests.
//!
//! Nothing runs: a container is a record whose state is computed from the
//! clock when asked, so a simulated node costs no task and no timer. It
//! still goes through the agent's real sync loop, restart backoff and
//! status reporting.
//!
//! What a container does is decided by its **image name**:
//!
//! | image contains | behaviour |
//! |---|---|
//! | `crash` | runs, then exits with code 1 after [`SimConfig::crash_after`] (default 500 ms); with `restartPolicy: Always` it is restarted with backoff, so restart counts grow and `CrashLoopBackOff` shows |
//! | `never-ready` | runs but never becomes ready (a rollout that stalls) |
//! | anything else | runs and is ready |
//!
//! A container is `ContainerCreating` for [`SimConfig::ready_delay`] after
//! it is started (default 0), then running. Pods get an IP derived from
//! their uid (`10.x.y.z`), or the node's IP with `hostNetwork`.
//! [`SimRuntime::kill`] makes a running container exit, as if its process
//! died.

use crate::clock::Clock;
use crate::runtime::{fnv1a, ContainerInfo, RunState, Runtime, RuntimeError, StartContainer};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// How simulated containers behave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// Time from start to running (`ContainerCreating` meanwhile).
    pub ready_delay: Duration,
    /// How long a `crash` image runs before it exits with code 1.
    pub crash_after: Duration,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            ready_delay: Duration::ZERO,
            crash_after: Duration::from_millis(500),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    Normal,
    Crash,
    NeverReady,
}

impl Behaviour {
    fn of(image: &str) -> Behaviour {
        if image.contains("crash") {
            Behaviour::Crash
        } else if image.contains("never-ready") {
            Behaviour::NeverReady
        } else {
            Behaviour::Normal
        }
    }
}

#[derive(Debug)]
struct SimContainer {
    id: u64,
    pod_uid: String,
    pod_namespace: String,
    pod_name: String,
    container: String,
    attempt: u32,
    spec_hash: String,
    image: String,
    pod_ip: String,
    behaviour: Behaviour,
    created_at: SystemTime,
    /// Killed by [`SimRuntime::kill`]: when, and with which exit code.
    killed: Option<(SystemTime, i32)>,
}

impl SimContainer {
    fn started_at(&self, cfg: &SimConfig) -> SystemTime {
        self.created_at + cfg.ready_delay
    }

    /// The exit time and code, if it exits on its own or was killed.
    fn exit(&self, cfg: &SimConfig) -> Option<(SystemTime, i32)> {
        let natural = match self.behaviour {
            Behaviour::Crash => Some((self.started_at(cfg) + cfg.crash_after, 1)),
            _ => None,
        };
        match (natural, self.killed) {
            (Some(n), Some(k)) => Some(if k.0 < n.0 { k } else { n }),
            (n, k) => n.or(k),
        }
    }

    fn state(&self, cfg: &SimConfig, now: SystemTime) -> RunState {
        let started = self.started_at(cfg);
        if let Some((at, code)) = self.exit(cfg) {
            if now >= at {
                return RunState::Exited {
                    exit_code: code,
                    reason: if code == 0 { "Completed" } else { "Error" }.into(),
                    started_at: (at >= started).then_some(started),
                    finished_at: at,
                };
            }
        }
        if now < started {
            RunState::Creating
        } else {
            RunState::Running {
                started_at: started,
            }
        }
    }

    /// The next time its state changes on its own, after `now`.
    fn next_change(&self, cfg: &SimConfig, now: SystemTime) -> Option<SystemTime> {
        let started = self.started_at(cfg);
        if now < started {
            return Some(started);
        }
        self.exit(cfg).map(|(at, _)| at).filter(|at| *at > now)
    }

    fn info(&self, cfg: &SimConfig, now: SystemTime) -> ContainerInfo {
        let state = self.state(cfg, now);
        ContainerInfo {
            id: format!("{:016x}", self.id),
            pod_uid: self.pod_uid.clone(),
            pod_namespace: self.pod_namespace.clone(),
            pod_name: self.pod_name.clone(),
            container: self.container.clone(),
            attempt: self.attempt,
            spec_hash: self.spec_hash.clone(),
            image: self.image.clone(),
            image_id: String::new(),
            ready: state.is_running() && self.behaviour != Behaviour::NeverReady,
            state,
            pod_ip: Some(self.pod_ip.clone()),
        }
    }
}

#[derive(Debug, Default)]
struct SimState {
    next_id: u64,
    containers: Vec<SimContainer>,
}

/// The simulated runtime of one node; see the module documentation.
pub struct SimRuntime {
    clock: Arc<dyn Clock>,
    cfg: Arc<SimConfig>,
    state: Mutex<SimState>,
    /// Distinguishes container ids across the nodes of one sim process.
    id_base: u64,
}

impl SimRuntime {
    /// An empty runtime.
    pub fn new(clock: Arc<dyn Clock>, cfg: Arc<SimConfig>) -> Self {
        Self::with_id_base(clock, cfg, 0)
    }

    /// An empty runtime whose container ids start at `id_base << 32`, so
    /// that ids are unique across the nodes of one process.
    pub fn with_id_base(clock: Arc<dyn Clock>, cfg: Arc<SimConfig>, id_base: u64) -> Self {
        SimRuntime {
            clock,
            cfg,
            state: Mutex::new(SimState::default()),
            id_base: id_base << 32,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SimState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every container instance, now (what [`Runtime::list`] answers).
    pub fn containers(&self) -> Vec<ContainerInfo> {
        let now = self.clock.wall();
        self.lock()
            .containers
            .iter()
            .map(|c| c.info(&self.cfg, now))
            .collect()
    }

    /// Makes the newest instance of a container exit now with `exit_code`,
    /// as if its process died. Returns whether it was running.
    pub fn kill(&self, pod_uid: &str, container: &str, exit_code: i32) -> bool {
        let now = self.clock.wall();
        let mut s = self.lock();
        let newest = s
            .containers
            .iter_mut()
            .filter(|c| c.pod_uid == pod_uid && c.container == container)
            .max_by_key(|c| c.attempt);
        match newest {
            Some(c) if c.state(&self.cfg, now).is_running() => {
                c.killed = Some((now, exit_code));
                true
            }
            _ => false,
        }
    }
}

/// The pod IP of a pod that has its own network: 10.x.y.z from its uid.
fn pod_ip(uid: &str) -> String {
    let h = fnv1a(uid.as_bytes());
    let b = h.to_be_bytes();
    // Avoid .0 and .255 in the last octet.
    format!("10.{}.{}.{}", b[0], b[1], 1 + b[2] % 254)
}

impl Runtime for SimRuntime {
    fn version(&self) -> String {
        format!("sim://{}", crate::VERSION)
    }

    async fn list(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        Ok(self.containers())
    }

    async fn start(&self, req: StartContainer) -> Result<(), RuntimeError> {
        let Some(spec) = req.container() else {
            return Err(RuntimeError::new(
                "CreateContainerError",
                format!("the pod has no container #{}", req.index),
            ));
        };
        let now = self.clock.wall();
        let uid = &req.pod.metadata.uid;
        let mut s = self.lock();
        let same = |c: &SimContainer| c.pod_uid == *uid && c.container == spec.name;
        if s.containers
            .iter()
            .any(|c| same(c) && c.attempt == req.attempt)
        {
            return Ok(());
        }
        // Keep the newest older instance (for lastState), drop the rest.
        let newest_older = s
            .containers
            .iter()
            .filter(|c| same(c) && c.attempt < req.attempt)
            .map(|c| c.attempt)
            .max();
        s.containers
            .retain(|c| !same(c) || c.attempt > req.attempt || Some(c.attempt) == newest_older);
        s.next_id += 1;
        let id = self.id_base | s.next_id;
        let ip = if req.pod.spec.host_network {
            req.host_ip.clone()
        } else {
            pod_ip(uid)
        };
        s.containers.push(SimContainer {
            id,
            pod_uid: uid.clone(),
            pod_namespace: req.pod.metadata.namespace.clone(),
            pod_name: req.pod.metadata.name.clone(),
            container: spec.name.clone(),
            attempt: req.attempt,
            spec_hash: req.spec_hash.clone(),
            image: spec.image.clone(),
            pod_ip: ip,
            behaviour: Behaviour::of(&spec.image),
            created_at: now,
            killed: None,
        });
        Ok(())
    }

    async fn remove(&self, id: &str, _grace: Duration) -> Result<(), RuntimeError> {
        let Ok(id) = u64::from_str_radix(id, 16) else {
            return Ok(());
        };
        self.lock().containers.retain(|c| c.id != id);
        Ok(())
    }

    async fn remove_pod(&self, pod_uid: &str, _grace: Duration) -> Result<(), RuntimeError> {
        self.lock().containers.retain(|c| c.pod_uid != pod_uid);
        Ok(())
    }

    fn next_change(&self) -> Option<SystemTime> {
        let now = self.clock.wall();
        self.lock()
            .containers
            .iter()
            .filter_map(|c| c.next_change(&self.cfg, now))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use drover_api::{Container, Pod};

    fn pod(uid: &str, images: &[&str]) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.name = "p".into();
        p.metadata.namespace = "default".into();
        p.metadata.uid = uid.into();
        p.spec.containers = images
            .iter()
            .enumerate()
            .map(|(i, image)| Container {
                name: format!("c{i}"),
                image: image.to_string(),
                ..Default::default()
            })
            .collect();
        Arc::new(p)
    }

    fn start(p: &Arc<Pod>, index: usize, attempt: u32) -> StartContainer {
        StartContainer {
            pod: p.clone(),
            index,
            attempt,
            spec_hash: "h".into(),
            node_name: "n".into(),
            host_ip: "192.0.2.1".into(),
        }
    }

    fn setup(cfg: SimConfig) -> (Arc<ManualClock>, SimRuntime) {
        let clock = Arc::new(ManualClock::new(
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
        ));
        let rt = SimRuntime::new(clock.clone(), Arc::new(cfg));
        (clock, rt)
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    #[test]
    fn containers_run_after_the_delay_and_are_ready_by_image() {
        let cfg = SimConfig {
            ready_delay: Duration::from_millis(300),
            ..Default::default()
        };
        let (clock, rt) = setup(cfg);
        let p = pod("u1", &["nginx", "x/never-ready:1"]);
        block_on(rt.start(start(&p, 0, 0))).unwrap();
        block_on(rt.start(start(&p, 1, 0))).unwrap();
        let t0 = clock.wall();
        let all = rt.containers();
        assert_eq!(all.len(), 2);
        assert!(all
            .iter()
            .all(|c| c.state == RunState::Creating && !c.ready));
        assert_eq!(rt.next_change(), Some(t0 + Duration::from_millis(300)));
        clock.advance(Duration::from_millis(300));
        let all = rt.containers();
        let started = t0 + Duration::from_millis(300);
        assert_eq!(
            all[0].state,
            RunState::Running {
                started_at: started
            }
        );
        assert!(all[0].ready, "a normal image is ready");
        assert!(all[1].state.is_running());
        assert!(!all[1].ready, "never-ready never is");
        assert_eq!(rt.next_change(), None, "nothing more happens by itself");
        assert!(all[0].pod_ip.as_deref().unwrap().starts_with("10."));
        // Starting the same attempt again changes nothing.
        block_on(rt.start(start(&p, 0, 0))).unwrap();
        assert_eq!(rt.containers().len(), 2);
    }

    #[test]
    fn a_crash_image_exits_with_1_after_crash_after() {
        let (clock, rt) = setup(SimConfig::default());
        let p = pod("u2", &["sim/crash"]);
        block_on(rt.start(start(&p, 0, 0))).unwrap();
        let t0 = clock.wall();
        assert!(rt.containers()[0].state.is_running());
        assert_eq!(rt.next_change(), Some(t0 + Duration::from_millis(500)));
        clock.advance(Duration::from_millis(500));
        match &rt.containers()[0].state {
            RunState::Exited {
                exit_code,
                reason,
                finished_at,
                started_at,
            } => {
                assert_eq!(*exit_code, 1);
                assert_eq!(reason, "Error");
                assert_eq!(*finished_at, t0 + Duration::from_millis(500));
                assert_eq!(*started_at, Some(t0));
            }
            other => panic!("expected exited, got {other:?}"),
        }
        // Restarts keep the newest older instance only.
        for attempt in 1..=3 {
            block_on(rt.start(start(&p, 0, attempt))).unwrap();
        }
        let mut attempts: Vec<u32> = rt.containers().iter().map(|c| c.attempt).collect();
        attempts.sort();
        assert_eq!(attempts, vec![2, 3]);
    }

    #[test]
    fn kill_and_remove() {
        let (clock, rt) = setup(SimConfig::default());
        let p = pod("u3", &["a", "b"]);
        block_on(rt.start(start(&p, 0, 0))).unwrap();
        block_on(rt.start(start(&p, 1, 0))).unwrap();
        assert!(rt.kill("u3", "c0", 137));
        assert!(!rt.kill("u3", "c0", 137), "already dead");
        clock.advance(Duration::from_millis(1));
        let c0 = rt.containers().into_iter().find(|c| c.container == "c0");
        assert!(matches!(
            c0.map(|c| c.state),
            Some(RunState::Exited { exit_code: 137, .. })
        ));
        let id = rt.containers()[1].id.clone();
        block_on(rt.remove(&id, Duration::ZERO)).unwrap();
        assert_eq!(rt.containers().len(), 1);
        block_on(rt.remove_pod("u3", Duration::ZERO)).unwrap();
        assert!(rt.containers().is_empty());
    }

    #[test]
    fn host_network_pods_use_the_node_ip() {
        let (_clock, rt) = setup(SimConfig::default());
        let mut p = (*pod("u4", &["a"])).clone();
        p.spec.host_network = true;
        let p = Arc::new(p);
        block_on(rt.start(start(&p, 0, 0))).unwrap();
        assert_eq!(rt.containers()[0].pod_ip.as_deref(), Some("192.0.2.1"));
    }
}
