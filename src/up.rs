//! `drover up`: a whole cluster in one process — a one-member server and a
//! local node agent (plus, on request, simulated nodes) — with the client
//! configuration written where `drover` looks by default, so `drover get
//! nodes` works next with no flags.
//!
//! The local node runs real containers through the Docker engine when one
//! answers, and says so; with no engine it runs its pods in the simulated
//! runtime and says that instead. `--runtime docker` requires the engine,
//! `--runtime sim` never asks it. Simulated nodes (`--sim-nodes`) are
//! always simulated.

use anyhow::{Context, Result};
use drover_agent::{
    AgentOptions, Clock, DockerOptions, DockerRuntime, RuntimeKind, SimOptions, TokioClock,
};
use drover_server::{Server, ServerOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What `drover up` takes.
pub struct UpOptions {
    pub data_dir: PathBuf,
    pub listen: String,
    pub http: String,
    /// The local node's name.
    pub name: String,
    /// Simulated nodes to add beside the local one.
    pub sim_nodes: usize,
    pub node_timeout: Duration,
    /// The local node's runtime; `None`: Docker when an engine answers,
    /// else simulated.
    pub runtime: Option<RuntimeKind>,
    /// The Docker engine (`--docker-host`, `DOCKER_HOST`); `None`: the
    /// default socket.
    pub docker_host: Option<String>,
    /// `-f`: manifests to apply once the cluster runs; the pods are then
    /// printed as they come up (until Ctrl-C).
    pub files: Vec<String>,
}

/// The runtime the local node will use, chosen before anything starts.
enum LocalRuntime {
    Docker(Arc<DockerRuntime>),
    Sim,
}

/// `--runtime docker`: the engine must answer (an error says what to do).
/// `--runtime sim`: no engine is asked. Neither: Docker when the engine
/// answers, else the simulated runtime, with a notice that says why.
async fn local_runtime(opts: &UpOptions) -> Result<LocalRuntime> {
    let mut d = DockerOptions::new(opts.name.clone(), opts.data_dir.join("agent"));
    d.host = opts.docker_host.clone();
    match opts.runtime {
        Some(RuntimeKind::Sim) => {
            eprintln!(
                "drover up: local node {:?} runs pods with the simulated runtime (--runtime sim: no container is started)",
                opts.name
            );
            Ok(LocalRuntime::Sim)
        }
        Some(RuntimeKind::Docker) => match DockerRuntime::connect(d).await {
            Ok(rt) => Ok(LocalRuntime::Docker(Arc::new(rt))),
            Err(e) => anyhow::bail!(
                "--runtime docker: {}. Start the Docker engine, point --docker-host (or DOCKER_HOST) at it, or run simulated containers with --runtime sim",
                e.message
            ),
        },
        None => match DockerRuntime::connect(d).await {
            Ok(rt) => Ok(LocalRuntime::Docker(Arc::new(rt))),
            Err(e) => {
                eprintln!(
                    "drover up: {}: the local node {:?} runs pods with the SIMULATED runtime instead (no container is started). \
                     For real containers start the Docker engine or point --docker-host (DOCKER_HOST) at it; \
                     --runtime docker refuses to start without one, --runtime sim skips this check",
                    e.message, opts.name
                );
                Ok(LocalRuntime::Sim)
            }
        },
    }
}

/// `$XDG_DATA_HOME/drover` or `~/.local/share/drover`.
pub fn default_data_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("drover");
    }
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".local/share/drover"),
        None => PathBuf::from("drover-data"),
    }
}

/// This machine's name as a node name (lower case, as Kubernetes wants).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_ascii_lowercase())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

fn install_client_config(from: &Path) -> Result<Option<PathBuf>> {
    let Some(to) = drover_cli::client::default_config_path() else {
        return Ok(None);
    };
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let text = std::fs::read(from).with_context(|| format!("cannot read {}", from.display()))?;
    drover_server::identity::write_private(&to, &text)?;
    Ok(Some(to))
}

/// Prints the pods (`drover get pods -A -o wide`) whenever one appears,
/// goes, moves or changes its status (not every second for its age), until
/// `stop`. Reads the member's own object API: no connection needed.
async fn show_pods(objects: drover_server::api::Objects, mut stop: watch::Receiver<bool>) {
    use drover_api::{Kind, Manifest};
    let mut last = None;
    loop {
        if let Ok((items, _)) = objects.list(Kind::Pod, None, None).await {
            let seen: Vec<(String, String, String, bool)> = items
                .iter()
                .filter_map(|m| match m {
                    Manifest::Pod(p) => Some((
                        format!("{}/{}", p.metadata.namespace, p.metadata.name),
                        p.spec.node_name.clone(),
                        drover_cli::printers::pod_status(p),
                        p.is_ready(),
                    )),
                    _ => None,
                })
                .collect();
            // Nothing to show before the first pod.
            if last.as_ref() != Some(&seen) && !(last.is_none() && seen.is_empty()) {
                let o = drover_cli::printers::TableOptions {
                    wide: true,
                    all_namespaces: true,
                    now: std::time::SystemTime::now(),
                };
                println!("{}", drover_cli::printers::table(Kind::Pod, &items, &o));
                last = Some(seen);
            }
        }
        let stopped = tokio::time::timeout(Duration::from_secs(1), stop.wait_for(|s| *s)).await;
        if stopped.is_ok() {
            return;
        }
    }
}

/// Runs until `shutdown` resolves: then the nodes leave and the server stops.
pub async fn up(opts: UpOptions, shutdown: impl std::future::Future<Output = ()>) -> Result<()> {
    // Before the server starts, so that a bad -f or `--runtime docker`
    // without an engine fails with nothing to undo.
    let sources = if opts.files.is_empty() {
        Vec::new()
    } else {
        drover_cli::kubectl::read_sources(&opts.files, &mut std::io::stdin())?
    };
    let local = local_runtime(&opts).await?;
    let mut so = ServerOptions::new(&opts.data_dir);
    so.listen = Some(opts.listen.clone());
    so.http = Some(opts.http.clone());
    so.controller.node_timeout = opts.node_timeout;
    let mut server = Server::start(so).await?;
    let addr = server.grpc_addr.to_string();
    let join_token = server.identity.node_token.clone();
    let config = install_client_config(&opts.data_dir.join("client.yaml"))?;
    eprintln!(
        "drover up: server {:016x} on {} (HTTP {}), data in {}",
        server.identity.id,
        addr,
        server.http_addr,
        opts.data_dir.display()
    );
    match &config {
        Some(p) => eprintln!(
            "drover up: client config written to {} (drover get nodes works now)",
            p.display()
        ),
        None => eprintln!(
            "drover up: no HOME: use --config {}",
            opts.data_dir.join("client.yaml").display()
        ),
    }
    let kubeconfig = opts.data_dir.join(drover_server::kapi::kubeconfig::FILE);
    let kubeconfig = std::fs::canonicalize(&kubeconfig).unwrap_or(kubeconfig);
    eprintln!(
        "drover up: kubectl works with this (it never touches ~/.kube/config):\n  export KUBECONFIG={}",
        kubeconfig.display()
    );

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };

    // The local node.
    let mut agent = AgentOptions::new(vec![addr.clone()], join_token.clone(), opts.name.clone());
    agent.data_dir = Some(opts.data_dir.join("agent"));
    let agent_task = match local {
        LocalRuntime::Docker(rt) => {
            eprintln!(
                "drover up: local node {:?} runs pods as Docker containers (engine {} at {})",
                opts.name,
                rt.engine_version(),
                rt.address()
            );
            let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
            tokio::spawn(drover_agent::run_agent_with(
                agent,
                rt,
                clock,
                stopped(stop_rx.clone()),
            ))
        }
        LocalRuntime::Sim => {
            agent.runtime = RuntimeKind::Sim;
            tokio::spawn(drover_agent::run_agent(agent, stopped(stop_rx.clone())))
        }
    };

    let sim_task = if opts.sim_nodes > 0 {
        let sim = SimOptions::new(vec![addr.clone()], join_token, opts.sim_nodes);
        eprintln!(
            "drover up: adding {} simulated nodes ({}0 …)",
            opts.sim_nodes, sim.prefix
        );
        Some(tokio::spawn(drover_agent::run_sim(
            sim,
            stopped(stop_rx.clone()),
        )))
    } else {
        None
    };

    let show_task = if sources.is_empty() {
        None
    } else {
        let cfg = drover_cli::ClientConfig::load(&opts.data_dir.join("client.yaml"))?;
        let c = drover_cli::Client::new(&cfg)?;
        let mut out = std::io::stdout();
        let mut err = std::io::stderr();
        drover_cli::kubectl::apply(
            &c,
            &sources,
            None,
            None,
            drover_api::FieldValidation::Strict,
            &mut out,
            &mut err,
        )
        .await?;
        Some(tokio::spawn(show_pods(server.objects(), stop_rx.clone())))
    };

    let reason = tokio::select! {
        _ = shutdown => None,
        e = server.stopped() => Some(e),
    };
    if let Some(t) = show_task {
        t.abort();
    }
    eprintln!("drover up: stopping (nodes leave, then the server stops)");
    let _ = stop_tx.send(true);
    if let Ok(Err(e)) = agent_task.await {
        eprintln!("drover up: local agent: {e:#}");
    }
    if let Some(t) = sim_task {
        if let Ok(Err(e)) = t.await {
            eprintln!("drover up: simulated nodes: {e:#}");
        }
    }
    server.shutdown().await;
    match reason {
        Some(e) => Err(anyhow::anyhow!("the store stopped: {e}")),
        None => Ok(()),
    }
}
