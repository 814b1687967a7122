//! [`SimRuntime`]: containers in memory, for `drover sim` and tests.
//!
//! Nothing runs: a container is a record whose state is computed from the
//! clock when asked, so a simulated node costs no task and no timer. It
//! still goes through the agent's real sync loop, restart backoff and
//! status reporting.
//!
//! What a container does is decided by its image, and only images under the
//! reserved prefix `sim/` ask for a fault (so a real image whose name
//! happens to contain "crash" runs like any other, also under `drover up`
//! when it falls back to simulation):
//!
//! | image | behaviour |
//! |---|---|
//! | `sim/crash` (any tag) | runs, then exits with code 1 after [`SimConfig::crash_after`] (default 500 ms); with `restartPolicy: Always` it is restarted with backoff, so restart counts grow and `CrashLoopBackOff` shows |
//! | `sim/never-ready` (any tag) | runs but never becomes ready (a rollout that stalls) |
//! | anything else | runs and is ready |
//!
//! A container is `ContainerCreating` for [`SimConfig::ready_delay`] after
//! it is started (default 0), then running. Pods get an IP derived from
//! their uid (`10.x.y.z`), or the node's IP with `hostNetwork`.
//! [`SimRuntime::kill`] makes a running container exit, as if its process
//! died; [`Runtime::stop`] makes it exit with 143 (SIGTERM).
//!
//! # Logs (`drover logs`)
//!
//! [`Runtime::logs`] gives a synthetic log computed from the clock, the same
//! for the same times: `sim: <container> started (attempt <n>)` when it
//! starts, `sim: <container> tick <k>` every [`SimConfig::log_every`] while
//! it runs, `sim: <container> exited with code <code>` when it exits. A
//! followed log gets each line when the clock reaches it and ends when the
//! container exits or is removed; [`SimRuntime::open_log_streams`] counts
//! the streams still open.
//!
//! # Commands (exec probes, `lifecycle.preStop`, `drover exec`)
//!
//! [`Runtime::exec`] in a running container interprets a few commands
//! against a small in-memory file system per pod (files keyed by pod uid and
//! path; the pod uid `*` stands for every pod of the node), so that tests
//! can flip a probe's result while it runs:
//!
//! | command | exit code |
//! |---|---|
//! | `true` / `false` | 0 / 1 |
//! | `exit N` | N |
//! | `echo ARGS…` | 0, prints ARGS |
//! | `cat PATH` | 0 and the file's contents if it exists, else 1 |
//! | `test -e PATH` (or `-f`) | 0 if the file exists, else 1 |
//! | `touch PATH` / `rm [-f] PATH` | 0: creates / removes the pod's file |
//! | `sleep N` | 0 after N seconds (tokio time), or -1 at the timeout |
//! | `sh -c "CMD ARGS…"` | CMD ARGS as above (no pipes, no `&&`) |
//! | anything else | 127, `command not found` (on stderr) |
//!
//! [`Runtime::exec_session`] (`kubectl exec [-i] [-t]`) runs the same
//! commands, their errors on stderr, and two more that use the session
//! ([`crate::sim_exec`]): `cat` without a path copies stdin to stdout until
//! stdin is closed (exit 0), and `tty` prints `/dev/pts/0` with a terminal
//! (exit 0) or `not a tty` (exit 1) without one. With a terminal, output
//! has `\r\n` line ends (a terminal's `onlcr`) and stderr is stdout; input
//! is not echoed.
//!
//! A readiness probe `exec: {command: [cat, /tmp/ready]}` therefore fails
//! until a test calls [`SimRuntime::write_file`]`(uid, "/tmp/ready", …)`
//! (or with `*` for every pod) and fails again after
//! [`SimRuntime::remove_file`]; a preStop hook `touch /tmp/stopped` leaves a
//! file that [`SimRuntime::file`] shows after the pod is gone (exec fails on
//! a container that is not running, so the file proves the hook ran before
//! the stop).

use crate::clock::Clock;
use crate::runtime::{
    fnv1a, ContainerInfo, ExecOutput, LogOptions, LogStream, RunState, Runtime, RuntimeError,
    StartContainer,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// How simulated containers behave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// Time from start to running (`ContainerCreating` meanwhile).
    pub ready_delay: Duration,
    /// How long a `crash` image runs before it exits with code 1.
    pub crash_after: Duration,
    /// A running container writes a log line this often (see "Logs" in the
    /// module documentation); zero writes only start and exit lines.
    pub log_every: Duration,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            ready_delay: Duration::ZERO,
            crash_after: Duration::from_millis(500),
            log_every: Duration::from_secs(1),
        }
    }
}

/// The reserved image prefix of simulated faults (`sim/crash`,
/// `sim/never-ready`).
pub const SIM_IMAGE_PREFIX: &str = "sim/";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    Normal,
    Crash,
    NeverReady,
}

impl Behaviour {
    /// `sim/NAME[:TAG|@DIGEST]`: a fault by NAME; any other image is normal.
    fn of(image: &str) -> Behaviour {
        let Some(rest) = image.strip_prefix(SIM_IMAGE_PREFIX) else {
            return Behaviour::Normal;
        };
        let name = rest.split([':', '@']).next().unwrap_or_default();
        match name {
            "crash" => Behaviour::Crash,
            "never-ready" => Behaviour::NeverReady,
            _ => Behaviour::Normal,
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
    /// (pod uid or `*`, path) -> contents: what exec'd commands see.
    files: HashMap<(String, String), String>,
    /// The last [`EXEC_HISTORY`] commands exec'd: (pod uid, command).
    execs: std::collections::VecDeque<(String, Vec<String>)>,
    /// (pod uid, container) -> the literal environment of its last start.
    envs: HashMap<(String, String), Vec<(String, String)>>,
}

/// Writes the files of a pod's ConfigMap/Secret volumes where `spec` mounts
/// them (a `subPath` mount only at its start: `only_whole` skips those, as
/// the kubelet never updates them).
fn write_volume_files(
    s: &mut SimState,
    uid: &str,
    spec: &drover_api::Container,
    volumes: &crate::runtime::ConfigVolumes,
    only_whole: bool,
) {
    for vm in &spec.volume_mounts {
        let Some(v) = volumes.get(&vm.name) else {
            continue;
        };
        let root = vm.mount_path.trim_end_matches('/');
        if vm.sub_path.is_empty() {
            let prefix = format!("{root}/");
            s.files
                .retain(|(u, path), _| u != uid || !path.starts_with(&prefix));
            for (rel, f) in &v.files {
                let text = String::from_utf8_lossy(&f.data).into_owned();
                s.files
                    .insert((uid.to_string(), format!("{root}/{rel}")), text);
            }
        } else if !only_whole {
            if let Some(f) = v.files.get(&vm.sub_path) {
                let text = String::from_utf8_lossy(&f.data).into_owned();
                s.files.insert((uid.to_string(), root.to_string()), text);
            }
        }
    }
}

/// Every pod of the node, as the pod uid of [`SimRuntime::write_file`].
pub const ANY_POD: &str = "*";

/// How many exec'd commands [`SimRuntime::exec_history`] remembers.
pub const EXEC_HISTORY: usize = 1024;

/// The simulated runtime of one node; see the module documentation. A
/// clone shares the original's containers.
#[derive(Clone)]
pub struct SimRuntime {
    clock: Arc<dyn Clock>,
    cfg: Arc<SimConfig>,
    state: Arc<Mutex<SimState>>,
    /// Distinguishes container ids across the nodes of one sim process.
    id_base: u64,
    /// Log streams open now ([`SimRuntime::open_log_streams`]).
    open_logs: Arc<std::sync::atomic::AtomicUsize>,
    /// Exec sessions running now ([`SimRuntime::open_exec_sessions`]).
    open_execs: Arc<std::sync::atomic::AtomicUsize>,
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
            state: Arc::default(),
            id_base: id_base << 32,
            open_logs: Arc::default(),
            open_execs: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SimState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many log streams ([`Runtime::logs`]) are open now: a stream
    /// counts until whoever reads it drops it.
    pub fn open_log_streams(&self) -> usize {
        self.open_logs.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many exec sessions ([`Runtime::exec_session`]) run now: one
    /// ends with its command, at its timeout, or when it is dropped.
    pub fn open_exec_sessions(&self) -> usize {
        self.open_execs.load(std::sync::atomic::Ordering::SeqCst)
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

    /// Writes a file that commands exec'd in the pod's containers see
    /// (`pod_uid` [`ANY_POD`]: every pod of this node).
    pub fn write_file(&self, pod_uid: &str, path: &str, contents: &str) {
        self.lock().files.insert(
            (pod_uid.to_string(), path.to_string()),
            contents.to_string(),
        );
    }

    /// Removes a file written by [`SimRuntime::write_file`] (or by a
    /// `touch` in the pod).
    pub fn remove_file(&self, pod_uid: &str, path: &str) {
        self.lock()
            .files
            .remove(&(pod_uid.to_string(), path.to_string()));
    }

    /// The file the pod's commands see at `path`: its own, else the one
    /// written for every pod.
    pub fn file(&self, pod_uid: &str, path: &str) -> Option<String> {
        let s = self.lock();
        s.files
            .get(&(pod_uid.to_string(), path.to_string()))
            .or_else(|| s.files.get(&(ANY_POD.to_string(), path.to_string())))
            .cloned()
    }

    /// The environment container `container` of pod `pod_uid` was last
    /// started with (its literal `env`, ConfigMap and Secret values
    /// resolved; downward API values are not), `None` if it never started.
    pub fn env(&self, pod_uid: &str, container: &str) -> Option<Vec<(String, String)>> {
        self.lock()
            .envs
            .get(&(pod_uid.to_string(), container.to_string()))
            .cloned()
    }

    /// The pod uid of running container `id` (hex), for exec; records
    /// the command in the history.
    fn exec_target(&self, id: &str, cmd: &[String]) -> Result<String, RuntimeError> {
        let now = self.clock.wall();
        let found = u64::from_str_radix(id, 16).ok().and_then(|n| {
            self.lock()
                .containers
                .iter()
                .find(|c| c.id == n)
                .map(|c| (c.pod_uid.clone(), c.state(&self.cfg, now).is_running()))
        });
        match found {
            None => Err(RuntimeError::new(
                "ContainerNotFound",
                format!("no container {id} on this node"),
            )),
            Some((_, false)) => Err(RuntimeError::new(
                "ContainerNotRunning",
                format!("container {id} is not running"),
            )),
            Some((uid, true)) => {
                let mut s = self.lock();
                if s.execs.len() >= EXEC_HISTORY {
                    s.execs.pop_front();
                }
                s.execs.push_back((uid.clone(), cmd.to_vec()));
                Ok(uid)
            }
        }
    }

    /// The commands exec'd in the pod's running containers (probes,
    /// preStop hooks, `drover exec`), oldest first (the last
    /// [`EXEC_HISTORY`] of the node).
    pub fn exec_history(&self, pod_uid: &str) -> Vec<Vec<String>> {
        self.lock()
            .execs
            .iter()
            .filter(|(uid, _)| uid == pod_uid)
            .map(|(_, cmd)| cmd.clone())
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

use crate::sim_exec::Ran;

/// Runs one of the commands of the module documentation for pod `uid`.
async fn run_command(rt: &SimRuntime, uid: &str, cmd: &[String], timeout: Duration) -> Ran {
    let out = |code: i32, stdout: String| Ran {
        code,
        stdout,
        stderr: String::new(),
    };
    let err = |code: i32, stderr: String| Ran {
        code,
        stdout: String::new(),
        stderr,
    };
    let arg = |i: usize| cmd.get(i).map(String::as_str).unwrap_or_default();
    let program = arg(0).rsplit('/').next().unwrap_or_default();
    match program {
        "sh" | "bash" if arg(1) == "-c" => {
            let words: Vec<String> = arg(2).split_whitespace().map(str::to_string).collect();
            Box::pin(run_command(rt, uid, &words, timeout)).await
        }
        "true" => out(0, String::new()),
        "false" => out(1, String::new()),
        "exit" => out(arg(1).parse().unwrap_or(0), String::new()),
        "echo" => out(0, format!("{}\n", cmd[1..].join(" "))),
        "cat" => match rt.file(uid, arg(1)) {
            Some(text) => out(0, text),
            None => err(1, format!("cat: {}: No such file or directory\n", arg(1))),
        },
        "test" | "[" => {
            let path = if arg(1).starts_with('-') {
                arg(2)
            } else {
                arg(1)
            };
            out(i32::from(rt.file(uid, path).is_none()), String::new())
        }
        "touch" => {
            if rt.file(uid, arg(1)).is_none() {
                rt.write_file(uid, arg(1), "");
            }
            out(0, String::new())
        }
        "rm" => {
            let path = if arg(1) == "-f" { arg(2) } else { arg(1) };
            rt.remove_file(uid, path);
            out(0, String::new())
        }
        "sleep" => {
            let secs: f64 = arg(1).parse().unwrap_or(0.0);
            let want = Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(Duration::MAX);
            if want > timeout {
                tokio::time::sleep(timeout).await;
                out(-1, String::new())
            } else {
                tokio::time::sleep(want).await;
                out(0, String::new())
            }
        }
        _ => err(127, format!("sim: {}: command not found\n", arg(0))),
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
        // Every image is there (nothing is pulled in memory).
        req.event(
            crate::events::EventType::Normal,
            crate::events::reason::PULLED,
            format!(
                "Container image {:?} already present on machine",
                spec.image
            ),
        );
        let mut s = self.lock();
        let env = spec
            .env
            .iter()
            .filter(|e| e.value_from.is_none())
            .map(|e| (e.name.clone(), e.value.replace("$$", "$")))
            .collect();
        s.envs.insert((uid.clone(), spec.name.clone()), env);
        write_volume_files(&mut s, uid, spec, &req.volumes, false);
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

    async fn update_volumes(
        &self,
        pod: Arc<drover_api::Pod>,
        volumes: Arc<crate::runtime::ConfigVolumes>,
    ) -> Result<(), RuntimeError> {
        let mut s = self.lock();
        for spec in &pod.spec.containers {
            write_volume_files(&mut s, &pod.metadata.uid, spec, &volumes, true);
        }
        Ok(())
    }

    async fn remove_pod(&self, pod_uid: &str, _grace: Duration) -> Result<(), RuntimeError> {
        self.lock().containers.retain(|c| c.pod_uid != pod_uid);
        Ok(())
    }

    async fn stop(&self, id: &str, _grace: Duration) -> Result<(), RuntimeError> {
        let Ok(id) = u64::from_str_radix(id, 16) else {
            return Ok(());
        };
        let now = self.clock.wall();
        let mut s = self.lock();
        if let Some(c) = s.containers.iter_mut().find(|c| c.id == id) {
            if !c.state(&self.cfg, now).is_exited() {
                c.killed = Some((now, 143));
            }
        }
        Ok(())
    }

    async fn exec(
        &self,
        id: &str,
        cmd: Vec<String>,
        timeout: Duration,
    ) -> Result<ExecOutput, RuntimeError> {
        let uid = self.exec_target(id, &cmd)?;
        let r = run_command(self, &uid, &cmd, timeout).await;
        Ok(ExecOutput {
            exit_code: r.code,
            output: (r.stdout + &r.stderr).into_bytes(),
        })
    }

    async fn exec_session(
        &self,
        id: &str,
        spec: crate::runtime::ExecSpec,
    ) -> Result<crate::runtime::ExecSession, RuntimeError> {
        let uid = self.exec_target(id, &spec.cmd)?;
        let (rt, cmd, timeout) = (self.clone(), spec.cmd.clone(), spec.timeout);
        let runner: crate::sim_exec::Runner =
            Box::new(move || Box::pin(async move { run_command(&rt, &uid, &cmd, timeout).await }));
        Ok(crate::sim_exec::start(
            runner,
            self.open_execs.clone(),
            spec,
        ))
    }

    async fn logs(&self, id: &str, opts: LogOptions) -> Result<LogStream, RuntimeError> {
        let wanted = u64::from_str_radix(id, 16).ok();
        let (state, cfg) = (self.state.clone(), self.cfg.clone());
        let lookup = move || {
            let s = state.lock().unwrap_or_else(|e| e.into_inner());
            let c = s.containers.iter().find(|c| Some(c.id) == wanted)?;
            Some(crate::sim_logs::LogSource {
                container: c.container.clone(),
                attempt: c.attempt,
                started_at: c.started_at(&cfg),
                exit: c.exit(&cfg),
            })
        };
        let period = self.cfg.log_every;
        crate::sim_logs::open(lookup, self.clock.clone(), period, opts, &self.open_logs)
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

    #[test]
    fn only_the_reserved_prefix_asks_for_a_fault() {
        assert_eq!(Behaviour::of("sim/crash"), Behaviour::Crash);
        assert_eq!(Behaviour::of("sim/crash:2"), Behaviour::Crash);
        assert_eq!(
            Behaviour::of("sim/never-ready@sha256:ab"),
            Behaviour::NeverReady
        );
        // Real images whose names merely contain the words run normally.
        for real in [
            "crash",
            "example/crash:1",
            "ghcr.io/acme/crash-reporter:2",
            "x/never-ready:1",
            "sim/crashy",
            "registry/sim/crash",
        ] {
            assert_eq!(Behaviour::of(real), Behaviour::Normal, "{real}");
        }
    }
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
            volumes: Default::default(),
            index,
            attempt,
            spec_hash: "h".into(),
            node_name: "n".into(),
            host_ip: "192.0.2.1".into(),
            events: Default::default(),
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
        let p = pod("u1", &["nginx", "sim/never-ready:1"]);
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

    fn cmd(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[tokio::test]
    async fn exec_sessions_run_the_same_commands_with_errors_on_stderr() {
        use crate::runtime::{ExecEvent, ExecSession, ExecSpec};
        let (_clock, rt) = setup(SimConfig::default());
        rt.start(start(&pod("u7", &["a"]), 0, 0)).await.unwrap();
        let id = rt.containers()[0].id.clone();
        let spec = |words: &[&str]| ExecSpec {
            cmd: cmd(words),
            timeout: Duration::from_secs(1),
            ..Default::default()
        };
        async fn events(mut s: ExecSession) -> Vec<ExecEvent> {
            let mut v = Vec::new();
            while let Some(e) = s.events.recv().await {
                v.push(e.unwrap());
            }
            v
        }
        let s = rt.exec_session(&id, spec(&["nope"])).await.unwrap();
        assert_eq!(
            events(s).await,
            [
                ExecEvent::Stderr(b"sim: nope: command not found\n".to_vec()),
                ExecEvent::Exit(127)
            ]
        );
        let s = rt.exec_session(&id, spec(&["echo", "hi"])).await.unwrap();
        assert_eq!(
            events(s).await,
            [ExecEvent::Stdout(b"hi\n".to_vec()), ExecEvent::Exit(0)]
        );
        assert_eq!(rt.exec_history("u7").len(), 2);
        assert_eq!(rt.open_exec_sessions(), 0);
    }

    #[test]
    fn exec_interprets_commands_against_per_pod_files() {
        let (_clock, rt) = setup(SimConfig::default());
        let p = pod("u5", &["a"]);
        let q = pod("u6", &["a"]);
        block_on(rt.start(start(&p, 0, 0))).unwrap();
        block_on(rt.start(start(&q, 0, 0))).unwrap();
        let id = rt.containers()[0].id.clone();
        let run = |words: &[&str]| {
            block_on(rt.exec(&id, cmd(words), Duration::from_secs(1)))
                .unwrap()
                .exit_code
        };
        assert_eq!(run(&["true"]), 0);
        assert_eq!(run(&["/bin/false"]), 1);
        assert_eq!(run(&["sh", "-c", "exit 3"]), 3);
        assert_eq!(run(&["nonsense"]), 127);
        assert_eq!(run(&["cat", "/tmp/ready"]), 1);
        rt.write_file("u5", "/tmp/ready", "ok");
        assert_eq!(run(&["cat", "/tmp/ready"]), 0);
        assert_eq!(run(&["sh", "-c", "test -f /tmp/ready"]), 0);
        let out =
            block_on(rt.exec(&id, cmd(&["cat", "/tmp/ready"]), Duration::from_secs(1))).unwrap();
        assert_eq!(out.output, b"ok");
        let out =
            block_on(rt.exec(&id, cmd(&["echo", "hi", "there"]), Duration::from_secs(1))).unwrap();
        assert_eq!(out.output, b"hi there\n");
        assert!(rt.file("u6", "/tmp/ready").is_none(), "files are per pod");
        rt.remove_file("u5", "/tmp/ready");
        assert_eq!(run(&["cat", "/tmp/ready"]), 1);
        rt.write_file(ANY_POD, "/tmp/ready", "");
        assert_eq!(run(&["cat", "/tmp/ready"]), 0);
        assert!(rt.file("u6", "/tmp/ready").is_some(), "* is every pod");
        assert_eq!(run(&["touch", "/tmp/x"]), 0);
        assert_eq!(rt.file("u5", "/tmp/x").as_deref(), Some(""));
        assert_eq!(run(&["rm", "-f", "/tmp/x"]), 0);
        assert!(rt.file("u5", "/tmp/x").is_none());
        let h = rt.exec_history("u5");
        assert_eq!(h.first(), Some(&cmd(&["true"])));
        assert_eq!(h.last(), Some(&cmd(&["rm", "-f", "/tmp/x"])));
        assert!(rt.exec_history("u6").is_empty());
        // Not running: exec is refused; stop leaves the instance, exited.
        block_on(rt.stop(&id, Duration::from_secs(1))).unwrap();
        let c = rt.containers().into_iter().find(|c| c.id == id).unwrap();
        assert!(
            matches!(c.state, RunState::Exited { exit_code: 143, .. }),
            "{c:?}"
        );
        let e = block_on(rt.exec(&id, cmd(&["true"]), Duration::from_secs(1))).unwrap_err();
        assert_eq!(e.reason, "ContainerNotRunning");
        let e = block_on(rt.exec("ffff", cmd(&["true"]), Duration::from_secs(1))).unwrap_err();
        assert_eq!(e.reason, "ContainerNotFound");
    }

    #[tokio::test]
    async fn exec_sleep_is_bounded_by_the_timeout() {
        let clock: Arc<dyn Clock> = Arc::new(crate::clock::TokioClock::new());
        let rt = SimRuntime::new(clock, Arc::new(SimConfig::default()));
        let p = pod("u7", &["a"]);
        rt.start(start(&p, 0, 0)).await.unwrap();
        let id = rt.containers()[0].id.clone();
        let t = std::time::Instant::now();
        let out = rt
            .exec(&id, cmd(&["sleep", "30"]), Duration::from_millis(50))
            .await
            .unwrap();
        assert_eq!(out.exit_code, -1);
        assert!(t.elapsed() < Duration::from_secs(5));
        let out = rt
            .exec(&id, cmd(&["sleep", "0.01"]), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(out.exit_code, 0);
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
