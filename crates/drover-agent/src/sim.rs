//! `drover sim`: many simulated nodes in one process.
//!
//! Each node is a real agent ([`crate::agent`]'s sync loop, restart backoff,
//! status reporting, leave) over its own [`SimRuntime`]. What makes 10,000
//! of them fit on 2 cores:
//!
//! - one tokio runtime, one task per node and no other per-node task or
//!   thread; a node's only timer is the one its loop re-arms;
//! - the simulated runtime computes container states from the clock when
//!   asked, so a container costs no timer either;
//! - every node joins with its own key and certificate (made at start, kept
//!   in memory) and so holds its own TLS connection: the server knows each
//!   node by its certificate, as it knows a real agent;
//! - at most `max_joining` (256) nodes register at once, so a start or a
//!   reconnect storm queues instead of piling up on the server;
//! - heartbeats start at a random phase and are skipped right after a
//!   status report (which the server counts as one);
//! - small codec buffers per session.

use crate::agent::{NodeAgent, Shared, Stats};
use crate::clock::{Clock, TokioClock};
use crate::link;
use crate::node;
use crate::runtime::Runtime;
use crate::sim_runtime::{SimConfig, SimRuntime};
use crate::Tuning;
use anyhow::{bail, Context, Result};
use drover_api::Taint;
use rand::Rng;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

/// Everything `drover sim` takes:
///
/// `drover sim --server ADDR[,ADDR…] --token T --nodes N [--prefix sim-]
/// [--label k=v]… [--taint k=v:Effect]…`
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// `--server`: `host:port` of one or more servers.
    pub servers: Vec<String>,
    /// `--token`: the cluster's join token.
    pub token: String,
    /// `--nodes`: how many nodes.
    pub nodes: usize,
    /// `--prefix`: nodes are named `<prefix>0 … <prefix>(N-1)` (default `sim-`).
    pub prefix: String,
    /// `--label k=v`, on every node.
    pub labels: BTreeMap<String, String>,
    /// `--taint k=v:Effect`, on every node.
    pub taints: Vec<Taint>,
    /// How simulated containers behave (`--ready-delay`, crash timing).
    pub sim: SimConfig,
    /// Timings (the defaults suit; resync is 10 s for sim nodes).
    pub tuning: Tuning,
    /// Nodes registering at the same time.
    pub max_joining: usize,
    /// `--data-dir`: where the sim keeps the key its nodes join with
    /// (`sim-node.key`, 0600), so that a sim restarted from it (after a
    /// SIGKILL, with the same `--prefix`) takes its nodes' names back: a
    /// node's name belongs to the key that first joined as it. `None`: a
    /// new key per node, and a restarted sim is refused the names of its
    /// nodes that still exist.
    pub data_dir: Option<std::path::PathBuf>,
}

impl SimOptions {
    /// `nodes` nodes named `sim-0…` on `servers` with `token`, defaults for
    /// the rest.
    pub fn new(servers: Vec<String>, token: impl Into<String>, nodes: usize) -> Self {
        SimOptions {
            servers,
            token: token.into(),
            nodes,
            prefix: "sim-".into(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            sim: SimConfig::default(),
            tuning: Tuning {
                resync: Duration::from_secs(10),
                ..Tuning::default()
            },
            max_joining: 256,
            data_dir: None,
        }
    }
}

/// A running sim: N nodes, each an agent task.
pub struct Sim {
    tasks: JoinSet<()>,
    stop: watch::Sender<bool>,
    stats: Arc<Stats>,
    runtimes: Vec<Arc<SimRuntime>>,
    names: Vec<String>,
}

impl Sim {
    /// Starts every node (in the current tokio runtime); they join in the
    /// background.
    pub fn start(opts: SimOptions) -> Result<Sim> {
        let servers = crate::normalize_servers(&opts.servers)?;
        if opts.token.is_empty() {
            bail!(
                "--token: the cluster's node token is required (node-token in a server's data dir)"
            );
        }
        let token = Some(link::node_token(&opts.token)?);
        let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
        let cfg = Arc::new(opts.sim.clone());
        let runtime_version = SimRuntime::new(clock.clone(), cfg.clone()).version();
        let names: Vec<String> = (0..opts.nodes)
            .map(|i| format!("{}{i}", opts.prefix))
            .collect();
        // Check the names and labels once, with the first and last node.
        for name in [names.first(), names.last()].into_iter().flatten() {
            let facts = node::sim_facts(name, "100.64.0.1", &runtime_version);
            let n = node::node_object(name, &opts.labels, &opts.taints, &facts);
            drover_api::validation::validate_node(&n)
                .with_context(|| format!("node {name:?} (--prefix {:?})", opts.prefix))?;
        }
        let stats = Arc::new(Stats::default());
        let join_key = match &opts.data_dir {
            Some(d) => Some(sim_key(d)?),
            None => None,
        };
        let shared = Arc::new(Shared {
            servers,
            token,
            labels: opts.labels.clone(),
            taints: opts.taints.clone(),
            reserved: BTreeMap::new(),
            tuning: opts.tuning.clone(),
            clock: clock.clone(),
            gate: Some(Arc::new(Semaphore::new(opts.max_joining.max(1)))),
            loud: false,
            sim_facts: true,
            runtime_version,
            stats: stats.clone(),
            // Simulated nodes are disposable: they leave on Ctrl-C.
            leave_on_stop: true,
            join_key,
        });
        let seed = opts.tuning.seed.unwrap_or_else(|| rand::rng().random());
        let (stop, stop_rx) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let mut runtimes = Vec::with_capacity(opts.nodes);
        for (i, name) in names.iter().enumerate() {
            let rt = Arc::new(SimRuntime::with_id_base(
                clock.clone(),
                cfg.clone(),
                i as u64,
            ));
            runtimes.push(rt.clone());
            let agent = NodeAgent::new(
                shared.clone(),
                name.clone(),
                node::sim_host_ip(i),
                None,
                rt,
                seed.wrapping_add(i as u64),
                Vec::new(),
            );
            let mut rx = stop_rx.clone();
            let name = name.clone();
            tasks.spawn(async move {
                let stopped = async move {
                    let _ = rx.wait_for(|s| *s).await;
                };
                if let Err(e) = agent.run(stopped).await {
                    tracing::warn!(node = %name, "{e:#}");
                }
            });
        }
        tracing::info!(
            nodes = opts.nodes,
            "sim started: nodes {}0 … {}{}",
            opts.prefix,
            opts.prefix,
            opts.nodes.saturating_sub(1)
        );
        Ok(Sim {
            tasks,
            stop,
            stats,
            runtimes,
            names,
        })
    }

    /// How many nodes.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether the sim has no node.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The nodes' names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The nodes' counters (sessions, events).
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// How many nodes have a session open now.
    pub fn connected(&self) -> usize {
        self.stats.connected.load(Ordering::Relaxed)
    }

    /// The runtime of node `i` (to look at or kill its containers).
    pub fn runtime(&self, i: usize) -> Option<&Arc<SimRuntime>> {
        self.runtimes.get(i)
    }

    /// Every node leaves (Leave, then its pods stop); returns how many the
    /// servers took.
    pub async fn shutdown(mut self) -> usize {
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
        self.stats.left.load(Ordering::Relaxed)
    }

    /// Every node dies at once, as with SIGKILL: no Leave, the sessions are
    /// cut.
    pub fn kill(mut self) {
        self.tasks.abort_all();
    }
}

/// `drover sim`: starts the nodes, and on `shutdown` (SIGTERM) makes them
/// all leave.
pub async fn run_sim(opts: SimOptions, shutdown: impl Future<Output = ()>) -> Result<()> {
    let n = opts.nodes;
    let sim = Sim::start(opts)?;
    let mut shutdown = std::pin::pin!(shutdown);
    // One line a second at most, when nodes joined, lost their server,
    // moved to another or rejoined (each node says so at debug).
    let mut every = tokio::time::interval(Duration::from_secs(1));
    let mut seen = [0usize; 4];
    loop {
        tokio::select! {
            _ = shutdown.as_mut() => break,
            _ = every.tick() => {}
        }
        let s = &sim.stats;
        let now = [&s.joined, &s.lost, &s.moved, &s.rejoined].map(|c| c.load(Ordering::Relaxed));
        if now != seen {
            let d: Vec<usize> = now
                .iter()
                .zip(seen)
                .map(|(a, b)| a.saturating_sub(b))
                .collect();
            tracing::info!(
                "sim: {}/{n} nodes connected ({} joined, {} lost their server, {} moved to another, {} rejoined)",
                sim.connected(),
                d[0],
                d[1],
                d[2],
                d[3]
            );
            seen = now;
        }
    }
    tracing::info!("sim: {n} nodes leaving");
    let left = sim.shutdown().await;
    if left < n {
        tracing::warn!(
            "sim: {} of {n} nodes could not leave (no server took it)",
            n - left
        );
    } else {
        tracing::info!("sim: all {n} nodes left");
    }
    Ok(())
}

/// The key the nodes of a sim with data dir `dir` join with:
/// `DIR/sim-node.key`, made (0600) on the first start.
fn sim_key(dir: &std::path::Path) -> Result<drover_pki::Credential> {
    let path = dir.join("sim-node.key");
    let key_pem = match drover_pki::read_optional(&path)? {
        Some(k) => k,
        None => {
            std::fs::create_dir_all(dir)
                .and_then(|()| {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                })
                .with_context(|| format!("--data-dir {}: cannot make it", dir.display()))?;
            let k = drover_pki::Credential::generate("sim")?.key_pem;
            drover_pki::write_private(&path, k.as_bytes())?;
            k
        }
    };
    let cred = drover_pki::Credential {
        key_pem,
        csr_pem: String::new(),
        cert_pem: String::new(),
    };
    // Readable as a key, or say so now rather than on every join.
    cred.renew_request("sim")
        .with_context(|| format!("{}: not a key this sim made; remove it", path.display()))?;
    Ok(cred)
}
