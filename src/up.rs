//! `drover up`: a whole cluster in one process — a one-member server and a
//! local node agent (plus, on request, simulated nodes) — with the client
//! configuration written where `drover` looks by default, so `drover get
//! nodes` works next with no flags.

use anyhow::{Context, Result};
use drover_agent::{AgentOptions, RuntimeKind, SimOptions};
use drover_server::{Server, ServerOptions};
use std::path::{Path, PathBuf};
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

/// Runs until `shutdown` resolves: then the nodes leave and the server stops.
pub async fn up(opts: UpOptions, shutdown: impl std::future::Future<Output = ()>) -> Result<()> {
    let mut so = ServerOptions::new(&opts.data_dir);
    so.listen = Some(opts.listen.clone());
    so.http = Some(opts.http.clone());
    so.controller.node_timeout = opts.node_timeout;
    let mut server = Server::start(so).await?;
    let addr = server.grpc_addr.to_string();
    let join_token = server.identity.join_token.clone();
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

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };

    // The local node. The Docker runtime arrives with the next issue; until
    // then the local node runs its pods in the simulated runtime.
    let mut agent = AgentOptions::new(vec![addr.clone()], join_token.clone(), opts.name.clone());
    agent.data_dir = Some(opts.data_dir.join("agent"));
    agent.runtime = RuntimeKind::Sim;
    eprintln!(
        "drover up: local node {:?} runs pods with the simulated runtime (no container is started)",
        opts.name
    );
    let agent_task = tokio::spawn(drover_agent::run_agent(agent, stopped(stop_rx.clone())));

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

    let reason = tokio::select! {
        _ = shutdown => None,
        e = server.stopped() => Some(e),
    };
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
