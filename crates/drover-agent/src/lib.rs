//! drover's node agent: it joins a cluster, keeps one outbound session to a
//! server, runs the pods the server assigns to its node through a
//! [`Runtime`], and reports their status.
//!
//! - [`run_agent`] (`drover agent`) runs one node; [`run_sim`] and [`Sim`]
//!   (`drover sim`) run many simulated nodes in one process, each through
//!   the same sync loop.
//! - The sync loop (`src/agent/`) is one task per node that owns all of the
//!   node's state: `agent/mod.rs` is the owner and its loop; each concern
//!   is a struct it owns, in its own file: `link.rs` (the session with a
//!   server: connect, reconnect with backoff, heartbeats, sending),
//!   `ops.rs` (runtime operations in flight, preStop hooks, stopping
//!   everything on leave), `outbox.rs` (which statuses go, batched),
//!   `probes.rs` (probe workers), `static_pods.rs` (the manifest dir's pods
//!   and their report), `desired.rs` (the server's pod list, saved with
//!   [`persist`]), `shared.rs` (what the nodes of one process share).
//!   `link.rs` and `remote.rs` at the crate root are the wire underneath
//!   (channels, opening a session; `drover logs`/`exec` streams).
//! - [`Runtime`] is the seam between a pod and the machine; [`SimRuntime`]
//!   keeps containers in memory (faults asked for by reserved images:
//!   `sim/crash`, `sim/never-ready`, see [`sim_runtime`]); [`DockerRuntime`] runs real
//!   containers through the Docker engine (see [`docker`]).
//! - The decisions are pure and tested without I/O: [`plan`] (what to start,
//!   restart, remove), [`status`] (the Kubernetes PodStatus), [`backoff`]
//!   (the kubelet's restart backoff, jittered reconnects).
//! - Time comes from a [`Clock`]; randomness from a seedable RNG
//!   ([`Tuning::seed`]).
//!
//! # Flags
//!
//! ```text
//! drover agent --server ADDR[,ADDR…] --token-file F --name NAME [--label k=v]…
//!              [--taint k=v:Effect]… [--runtime docker|sim] [--docker-host URL]
//!              [--data-dir DIR]
//!              [--manifest-dir DIR]
//! drover sim   --server ADDR[,ADDR…] --token-file F --nodes N [--prefix sim-]
//!              [--label k=v]… [--taint k=v:Effect]…
//! ```
//!
//! map to [`AgentOptions`] and [`SimOptions`]; [`flags`] has clap value
//! parsers for `--server`, `--label` and `--taint`. The token is the
//! cluster's node token (`node-token` in a server's data dir,
//! `drover-node-<CA digest>-<secret>`): a node uses it once, to get its
//! certificate over TLS pinned to that CA (`link.rs`), and keeps the
//! certificate in `--data-dir` (a sim node keeps it in memory).
//!
//! ```no_run
//! use drover_agent::{flags, run_agent, run_sim, AgentOptions, SimOptions};
//!
//! # async fn wiring() -> anyhow::Result<()> {
//! let servers = flags::parse_servers("10.0.0.1:7600,10.0.0.2:7600")?;
//! let mut o = AgentOptions::new(servers.clone(), "drover-node-…", "edge-1");
//! o.labels = flags::labels(&[flags::parse_label("zone=eu-1")?])?;
//! o.taints = flags::taints(&[flags::parse_taint("dedicated=edge:NoSchedule")?])?;
//! o.data_dir = Some("/var/lib/drover/agent".into());
//! // Resolves on SIGTERM/SIGINT: the node leaves gracefully.
//! let shutdown = async {
//!     let _ = tokio::signal::ctrl_c().await;
//! };
//! run_agent(o, shutdown).await?;
//!
//! let mut s = SimOptions::new(servers, "drover-node-…", 10_000);
//! s.prefix = "sim-".into();
//! run_sim(s, async {
//!     let _ = tokio::signal::ctrl_c().await;
//! })
//! .await
//! # }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod agent;
pub mod backoff;
pub mod clock;
pub mod docker;
pub mod events;
pub mod flags;
mod link;
pub mod metrics;
pub mod node;
pub mod persist;
pub mod plan;
pub mod probe;
mod remote;
pub mod runtime;
mod sim;
mod sim_exec;
mod sim_logs;
pub mod sim_runtime;
pub mod static_pods;
pub mod status;

pub use agent::Stats;
pub use clock::{Clock, ManualClock, TokioClock};
pub use docker::{DockerOptions, DockerRuntime};
pub use runtime::{
    ContainerInfo, ExecEvent, ExecInput, ExecOutput, ExecSession, ExecSpec, LogOptions, LogStream,
    RunState, Runtime, RuntimeError, StartContainer,
};
pub use sim::{run_sim, Sim, SimOptions};
pub use sim_runtime::{SimConfig, SimRuntime};

use anyhow::{bail, Context, Result};
use drover_api::{Quantity, Taint};
use rand::Rng;
use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The agent's version (`nodeInfo.kubeletVersion` is `drover-<VERSION>`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Timings of the sync loop. The defaults are the production values; tests
/// and sims shorten them.
#[derive(Debug, Clone, PartialEq)]
pub struct Tuning {
    /// Heartbeat interval; `None` takes the server's (1 s, longer on a
    /// member with many sessions, which says so in its answers).
    pub heartbeat: Option<Duration>,
    /// Status reports are sent at most this often (coalesced), 200 ms.
    pub status_interval: Duration,
    /// First restart backoff of a crashed container (the kubelet's 10 s).
    pub restart_backoff: Duration,
    /// Longest restart backoff (the kubelet's 5 min).
    pub restart_backoff_max: Duration,
    /// First wait before reconnecting (jittered, doubling), 200 ms.
    pub reconnect_min: Duration,
    /// Longest wait before reconnecting, 1.5 s (jittered down to half): a
    /// node whose link heals is back within 2 s however long it was cut.
    pub reconnect_max: Duration,
    /// The runtime is relisted at least this often, 1 s.
    pub resync: Duration,
    /// Opening a session (connect, hello, welcome) gives up after this, 10 s.
    pub connect_timeout: Duration,
    /// While an attempt to open a session has had no answer for this long,
    /// another one starts beside it (a new connection, to the next server),
    /// 1 s: an attempt whose packets went into a cut link can wait out its
    /// whole `connect_timeout`, and a node whose link heals must not.
    pub attempt_stagger: Duration,
    /// A leaving node waits this long for the server to take its Leave, 5 s.
    pub leave_timeout: Duration,
    /// Seed of the RNG (server choice, jitter, heartbeat phase); random
    /// when `None`.
    pub seed: Option<u64>,
    /// How often `--manifest-dir` is read again for static pods, 2 s.
    pub static_poll: Duration,
    /// The pod events' spam filter: a burst of 25 writes per pod, then one
    /// per 5 minutes (client-go's; [`events`]).
    pub events: events::EventLimits,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            heartbeat: None,
            status_interval: Duration::from_millis(200),
            restart_backoff: Duration::from_secs(10),
            restart_backoff_max: Duration::from_secs(300),
            reconnect_min: Duration::from_millis(200),
            reconnect_max: Duration::from_millis(1500),
            resync: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(10),
            attempt_stagger: Duration::from_secs(1),
            leave_timeout: Duration::from_secs(5),
            seed: None,
            static_poll: Duration::from_secs(2),
            events: events::EventLimits::default(),
        }
    }
}

/// The container runtime of `drover agent --runtime`.
///
/// The default is Docker. An agent whose engine does not answer refuses to
/// start (as the kubelet does without its container runtime) and says to
/// start the engine, point `--docker-host` at it, or pass `--runtime sim`;
/// it never falls back to simulated containers on its own.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RuntimeKind {
    /// `--runtime docker`: real containers ([`DockerRuntime`]).
    #[default]
    Docker,
    /// `--runtime sim`: containers in memory ([`SimRuntime`]).
    Sim,
}

impl std::str::FromStr for RuntimeKind {
    type Err = flags::FlagError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "docker" => Ok(RuntimeKind::Docker),
            "sim" => Ok(RuntimeKind::Sim),
            other => Err(flags::FlagError(format!(
                "--runtime {other}: this agent supports: docker, sim"
            ))),
        }
    }
}

/// Everything `drover agent` takes:
///
/// `drover agent --server ADDR[,ADDR…] --token T --name NAME [--label k=v]…
/// [--taint k=v:Effect]… [--runtime sim] [--data-dir DIR] [--manifest-dir DIR]`
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// `--server`: `host:port` of one or more servers ([`flags::parse_servers`]).
    pub servers: Vec<String>,
    /// `--token`: the cluster's join token.
    pub token: String,
    /// `--name`: the node's name (a DNS subdomain), e.g. the hostname.
    pub name: String,
    /// `--label k=v` ([`flags::parse_label`], [`flags::labels`]).
    pub labels: BTreeMap<String, String>,
    /// `--taint k=v:Effect` ([`flags::parse_taint`]).
    pub taints: Vec<Taint>,
    /// `--data-dir`: where the desired pods are kept across restarts; `None`
    /// keeps nothing (an agent restarted while no server answers then runs
    /// nothing until one does).
    pub data_dir: Option<PathBuf>,
    /// `--runtime`.
    pub runtime: RuntimeKind,
    /// Behaviour of the simulated runtime (`--runtime sim`).
    pub sim: SimConfig,
    /// `--docker-host`: the engine of `--runtime docker`; `None` takes
    /// `DOCKER_HOST`, else `unix:///var/run/docker.sock`.
    pub docker_host: Option<String>,
    /// `--no-pull`: the Docker runtime never pulls ([`DockerOptions::no_pull`]).
    pub no_pull: bool,
    /// `--manifest-dir`: static pods to run on this node whatever the
    /// servers say ([`static_pods`]).
    pub manifest_dir: Option<PathBuf>,
    /// Timings.
    pub tuning: Tuning,
    /// When `shutdown` resolves: leave the cluster (the Node is deleted and
    /// the pods stopped; `drover agent --leave`, `drover up`, the tests'
    /// default) or just stop, leaving every container running (`drover
    /// agent` on SIGTERM: a restart, an upgrade or a reboot).
    pub leave_on_stop: bool,
    /// What the node keeps for itself (`--reserved cpu=500m,memory=1Gi`,
    /// the kubelet's `--system-reserved`): its allocatable is its capacity
    /// minus this, and daemon pods are placed against the allocatable.
    pub reserved: BTreeMap<String, Quantity>,
    /// `--metrics ADDR`: serve the agent's Prometheus metrics there (plain
    /// HTTP, [`metrics`]); off when `None`.
    pub metrics: Option<String>,
    /// Set to the address the metrics are served on, once bound (with port
    /// 0 the system picks it): for embedders and tests.
    pub metrics_bound: Option<Arc<std::sync::OnceLock<std::net::SocketAddr>>>,
}

impl AgentOptions {
    /// An agent named `name` for `servers` with `token`, defaults for the rest.
    pub fn new(servers: Vec<String>, token: impl Into<String>, name: impl Into<String>) -> Self {
        AgentOptions {
            servers,
            token: token.into(),
            name: name.into(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            data_dir: None,
            runtime: RuntimeKind::Docker,
            sim: SimConfig::default(),
            docker_host: None,
            no_pull: false,
            manifest_dir: None,
            tuning: Tuning::default(),
            leave_on_stop: true,
            reserved: BTreeMap::new(),
            metrics: None,
            metrics_bound: None,
        }
    }
}

/// `host:port` without scheme, checked; at least one.
pub(crate) fn normalize_servers(servers: &[String]) -> Result<Vec<String>> {
    flags::parse_servers(&servers.join(",")).map_err(anyhow::Error::from)
}

/// Whether the node of `opts` has its certificate in its data dir.
fn has_certificate(opts: &AgentOptions) -> bool {
    opts.data_dir
        .as_deref()
        .is_some_and(|d| d.join("node.crt").exists())
}

/// Where a node's data dir keeps its name: `--leave` (or a restart)
/// without `--name` is the node that ran there, not the hostname.
const NAME_FILE: &str = "node-name";

/// The name of the node that ran with data dir `dir`, if it kept one.
pub fn saved_name(dir: &std::path::Path) -> Result<Option<String>> {
    match std::fs::read_to_string(dir.join(NAME_FILE)) {
        Ok(s) if !s.trim().is_empty() => Ok(Some(s.trim().to_string())),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow::Error::from(e)
            .context(format!("cannot read {}", dir.join(NAME_FILE).display()))),
    }
}

fn save_name(dir: &std::path::Path, name: &str) -> Result<()> {
    if saved_name(dir)?.as_deref() == Some(name) {
        return Ok(());
    }
    drover_pki::write_private(&dir.join(NAME_FILE), name.as_bytes())
        .with_context(|| format!("cannot keep the node's name in {}", dir.display()))
}

/// `drover agent --leave`: the node (its certificate in `--data-dir`)
/// leaves the cluster now: the Node is deleted and its pods are stopped.
pub async fn leave_now(mut opts: AgentOptions) -> Result<()> {
    if !has_certificate(&opts) {
        bail!(
            "--leave: no node certificate in --data-dir{}; pass the data dir the agent ran with",
            opts.data_dir
                .as_deref()
                .map(|d| format!(" {}", d.display()))
                .unwrap_or_default()
        );
    }
    opts.leave_on_stop = true;
    // Start, then shut down at once: the agent leaves.
    run_agent(opts, async {}).await
}

/// `drover agent`: runs one node until `shutdown` resolves (SIGTERM/SIGINT),
/// then leaves the cluster gracefully (see [`run_agent_with`]).
pub async fn run_agent(opts: AgentOptions, shutdown: impl Future<Output = ()>) -> Result<()> {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    match opts.runtime {
        RuntimeKind::Docker => {
            // emptyDirs live in the data dir; without one, in a temp dir.
            let data_dir = opts
                .data_dir
                .clone()
                .unwrap_or_else(|| std::env::temp_dir().join("drover-agent").join(&opts.name));
            let mut d = DockerOptions::new(opts.name.clone(), data_dir);
            d.host = opts.docker_host.clone();
            d.no_pull = opts.no_pull;
            let address = d.address();
            let rt = DockerRuntime::connect(d).await.map_err(|e| {
                anyhow::anyhow!(
                    "--runtime docker: {}. Start the Docker engine, point --docker-host (or DOCKER_HOST) at it, or run simulated containers with --runtime sim",
                    e.message
                )
            })?;
            tracing::info!(node = %opts.name, engine = %address, "using Docker {}", rt.engine_version());
            run_agent_with(opts, Arc::new(rt), clock, shutdown).await
        }
        RuntimeKind::Sim => {
            let rt = Arc::new(SimRuntime::new(clock.clone(), Arc::new(opts.sim.clone())));
            tracing::info!(node = %opts.name, "using the simulated container runtime");
            run_agent_with(opts, rt, clock, shutdown).await
        }
    }
}

/// Runs one node with the given runtime and clock until `shutdown`
/// resolves; then sends Leave, and once a server took it stops every pod
/// and forgets the saved pods. Errors only for bad options or a data dir it
/// cannot use; unreachable servers are retried forever, and the pods keep
/// running meanwhile.
pub async fn run_agent_with<R: Runtime>(
    opts: AgentOptions,
    runtime: Arc<R>,
    clock: Arc<dyn Clock>,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let Some(addr) = opts.metrics.clone() else {
        return run_node(opts, runtime, clock, shutdown).await;
    };
    let m = Arc::new(metrics::AgentMetrics::new());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (bound, task) = metrics::serve(&addr, m.clone(), async move {
        let _ = stopped.await;
    })
    .await?;
    tracing::info!(node = %opts.name, "metrics on http://{bound}/metrics");
    if let Some(cell) = &opts.metrics_bound {
        let _ = cell.set(bound);
    }
    let r = run_node(
        opts,
        Arc::new(metrics::Timed::new(runtime, m)),
        clock,
        shutdown,
    )
    .await;
    let _ = stop.send(());
    let _ = task.await;
    r
}

async fn run_node<R: Runtime>(
    opts: AgentOptions,
    runtime: Arc<R>,
    clock: Arc<dyn Clock>,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let servers = normalize_servers(&opts.servers)?;
    let runtime_version = runtime.version();
    let host_ip = node::host_ip(&servers).await;
    {
        let facts = node::machine_facts(&opts.name, &host_ip, &runtime_version);
        let n = node::node_object(&opts.name, &opts.labels, &opts.taints, &facts);
        drover_api::validation::validate_node(&n).context("--name, --label or --taint")?;
    }
    // The token is needed only until the node has a certificate (kept in
    // the data dir: a restart needs none).
    let token = if opts.token.is_empty() {
        if !has_certificate(&opts) {
            bail!("--token: the cluster's node token is required (node-token in a server's data dir) until this node has a certificate in its data dir");
        }
        None
    } else {
        Some(link::node_token(&opts.token)?)
    };

    let saved = match &opts.data_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .and_then(|()| {
                    // The agent's own files are its user's only.
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                })
                .with_context(|| {
                    format!(
                        "cannot create the data dir {} readable by its owner only (0700)",
                        dir.display()
                    )
                })?;
            save_name(dir, &opts.name)?;
            let pods = persist::load(dir, &opts.name)?;
            if !pods.is_empty() {
                tracing::info!(
                    node = %opts.name,
                    "running {} pod(s) saved in {} until a server answers",
                    pods.len(),
                    dir.display()
                );
            }
            pods
        }
        None => Vec::new(),
    };
    let seed = opts.tuning.seed.unwrap_or_else(|| rand::rng().random());
    let shared = Arc::new(agent::Shared {
        servers,
        token,
        labels: opts.labels.clone(),
        taints: opts.taints.clone(),
        reserved: opts.reserved.clone(),
        tuning: opts.tuning.clone(),
        clock,
        gate: None,
        loud: true,
        sim_facts: false,
        runtime_version,
        stats: Arc::new(Stats::default()),
        leave_on_stop: opts.leave_on_stop,
        join_key: None,
    });
    let mut agent = agent::NodeAgent::new(
        shared,
        opts.name.clone(),
        host_ip,
        opts.data_dir.clone(),
        runtime,
        seed,
        saved,
    );
    if let Some(dir) = &opts.manifest_dir {
        // Read before the first sync, so that the containers of static pods
        // that already run are adopted, not removed.
        let scan = static_pods::scan(dir, &opts.name);
        static_pods::log_problems(&opts.name, &scan);
        tracing::info!(node = %opts.name, "{} static pod(s) in {}", scan.pods.len(), dir.display());
        agent.static_pods(dir.clone(), scan);
    }
    agent.run(shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_kind_parses() {
        assert_eq!("sim".parse::<RuntimeKind>().unwrap(), RuntimeKind::Sim);
        assert_eq!(
            "docker".parse::<RuntimeKind>().unwrap(),
            RuntimeKind::Docker
        );
        assert_eq!(RuntimeKind::default(), RuntimeKind::Docker);
        assert!("containerd".parse::<RuntimeKind>().is_err());
    }

    #[tokio::test]
    async fn bad_options_are_refused_before_anything_runs() {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
        let rt = Arc::new(SimRuntime::new(
            clock.clone(),
            Arc::new(SimConfig::default()),
        ));
        let o = AgentOptions::new(vec!["127.0.0.1:1".into()], "t", "Not_A_Name");
        let e = run_agent_with(o, rt.clone(), clock.clone(), async {})
            .await
            .unwrap_err();
        assert!(format!("{e:#}").contains("metadata.name"), "{e:#}");
        let o = AgentOptions::new(vec!["127.0.0.1:1".into()], "", "n");
        assert!(run_agent_with(o, rt.clone(), clock.clone(), async {})
            .await
            .is_err());
        let o = AgentOptions::new(vec![], "t", "n");
        assert!(run_agent_with(o, rt, clock, async {}).await.is_err());
    }
}
