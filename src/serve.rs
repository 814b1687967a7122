//! `drover server` as a process: its flags into [`drover_server::ServerOptions`],
//! the member run until SIGTERM/Ctrl-C or its removal; and the signal that
//! stops the long-running commands.

use crate::ServerCmd;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// The flags of `drover server`.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct ServerArgs {
    #[command(subcommand)]
    pub(crate) cmd: Option<ServerCmd>,
    /// Where the member keeps its identity, log and state.
    #[arg(long)]
    pub(crate) data_dir: Option<PathBuf>,
    /// gRPC address to listen on (client API, raft, agents) [default: 127.0.0.1:7600].
    /// Port 0 picks a free port, recorded in DATA_DIR/server.json and client.yaml;
    /// a restart from the data dir binds that port again.
    #[arg(long)]
    pub(crate) listen: Option<String>,
    /// HTTP address to listen on (health, status) [default: 127.0.0.1:7680].
    /// Port 0 as for --listen.
    #[arg(long)]
    pub(crate) http: Option<String>,
    /// gRPC address other members and clients use, if not --listen.
    #[arg(long)]
    pub(crate) advertise: Option<String>,
    /// Join the cluster of the member at this address instead of bootstrapping.
    #[arg(long)]
    pub(crate) join: Option<String>,
    /// Bootstrap only: the admin token to use instead of a generated one.
    #[arg(long)]
    pub(crate) admin_token: Option<String>,
    /// Connections one IP address may hold open, both ports together
    /// [default: 1024, or an eighth of what the descriptor limit allows].
    /// Raise it for more agents behind one NAT, or a `drover sim` of more
    /// than about a thousand nodes.
    #[arg(long)]
    pub(crate) max_connections_per_address: Option<usize>,
    /// Heartbeats a second this member answers before it asks its agents to beat less often
    /// (every `sessions / N` seconds, up to two fifths of --node-timeout; Nomad's
    /// max_heartbeats_per_second). Lower it on a small machine with many nodes.
    #[arg(long, default_value_t = drover_server::limits::HEARTBEATS_PER_SECOND as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) heartbeats_per_second: u64,
    /// How long node certificates live; agents renew theirs after two thirds of it.
    #[arg(long, default_value = "30d", value_parser = humantime::parse_duration)]
    pub(crate) node_cert_ttl: Duration,
    /// How long member certificates live; a member renews its own, while it
    /// runs, when a third of it is left (a shorter value than a member's
    /// certificate has renews it at start).
    #[arg(long, default_value = "365d", value_parser = humantime::parse_duration)]
    pub(crate) member_cert_ttl: Duration,
    /// Raft tick in milliseconds.
    #[arg(long, default_value_t = 100)]
    pub(crate) tick_ms: u64,
    /// Election timeout in milliseconds (randomised up to twice as long).
    #[arg(long, default_value_t = 1000)]
    pub(crate) election_timeout_ms: u64,
    /// Compact the raft log every N applied entries.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) snapshot_every: u64,
    /// Entries kept behind the applied index on compaction.
    #[arg(long, default_value_t = 5_000)]
    pub(crate) keep_entries: u64,
    /// A node silent this long turns NotReady (Unknown) with the unreachable taints.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub(crate) node_timeout: Duration,
    /// A node unreachable this long is removed, with its pods.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    pub(crate) node_gc_after: Duration,
    /// Events older than this (since they last occurred) are deleted.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    pub(crate) event_ttl: Duration,
    /// Start a new one-member cluster from this snapshot file (`drover cluster snapshot save`)
    /// in an empty --data-dir: every object at its revision, the same CA and tokens (nodes
    /// and clients keep their certificates), a new cluster id unless --keep-cluster-id.
    /// A corrupt or truncated file is refused and nothing is written.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["join", "force_new_cluster"])]
    pub(crate) restore: Option<PathBuf>,
    /// With --restore: keep the snapshot's cluster id.
    #[arg(long, requires = "restore")]
    pub(crate) keep_cluster_id: bool,
    /// Make this data dir's member the only member of its cluster, keeping every write in
    /// its log, when the other members are lost for good (a majority gone). Refused while
    /// another member answers. Start the other servers anew with --join afterwards.
    #[arg(long)]
    pub(crate) force_new_cluster: bool,
    /// Take a snapshot of the store this often on the leader (e.g. 1h) [default: off].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) snapshot_interval: Option<Duration>,
    /// How many scheduled snapshots to keep (the oldest are deleted).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub(crate) snapshot_retain: u64,
    /// Where scheduled snapshots go [default: DATA_DIR/snapshots].
    #[arg(long, value_name = "DIR")]
    pub(crate) snapshot_dir: Option<PathBuf>,
}

/// Runs a member with the flags of `drover server` until it is told to stop
/// or removed from the cluster.
pub(crate) async fn run_server(a: ServerArgs, join_token: Option<String>) -> Result<()> {
    let Some(data_dir) = a.data_dir else {
        anyhow::bail!("drover server needs --data-dir DIR (where the member keeps its state)");
    };
    let tick = Duration::from_millis(a.tick_ms.max(1));
    let mut opts = drover_server::ServerOptions::new(data_dir);
    opts.listen = a.listen;
    opts.http = a.http;
    opts.advertise = a.advertise;
    opts.join = a.join;
    opts.token = join_token;
    opts.admin_token = a.admin_token;
    if a.node_cert_ttl < Duration::from_secs(5) {
        anyhow::bail!("--node-cert-ttl {:?}: at least 5s", a.node_cert_ttl);
    }
    opts.node_cert_ttl = a.node_cert_ttl;
    if a.member_cert_ttl < Duration::from_secs(5) {
        anyhow::bail!("--member-cert-ttl {:?}: at least 5s", a.member_cert_ttl);
    }
    opts.member_cert_ttl = a.member_cert_ttl;
    opts.max_connections_per_address = a.max_connections_per_address;
    opts.heartbeats_per_second = usize::try_from(a.heartbeats_per_second).unwrap_or(usize::MAX);
    opts.tick = tick;
    opts.election_ticks = (a.election_timeout_ms / a.tick_ms.max(1)).max(2) as usize;
    opts.snapshot_every = a.snapshot_every.max(1);
    opts.keep_entries = a.keep_entries;
    opts.controller.node_timeout = a.node_timeout;
    opts.controller.node_gc_after = a.node_gc_after;
    opts.controller.event_ttl = a.event_ttl;
    opts.restore = a.restore;
    opts.keep_cluster_id = a.keep_cluster_id;
    opts.force_new_cluster = a.force_new_cluster;
    if let Some(every) = a.snapshot_interval {
        if every < Duration::from_secs(1) {
            anyhow::bail!("--snapshot-interval {every:?}: at least 1s");
        }
    }
    opts.snapshot_interval = a.snapshot_interval;
    opts.snapshot_retain = a.snapshot_retain as usize;
    opts.snapshot_dir = a.snapshot_dir;
    // Before the start: a SIGTERM while it starts stops it once started.
    let stop = shutdown_signal();
    let mut server = drover_server::Server::start(opts).await?;
    eprintln!(
        "drover server: member {:016x} serving gRPC on {} and HTTP on {}; client config in {}",
        server.identity.id,
        server.grpc_addr,
        server.http_addr,
        server
            .store
            .config()
            .dir
            .parent()
            .map(|p| p.join("client.yaml").display().to_string())
            .unwrap_or_default()
    );
    let reason = tokio::select! {
        e = server.stopped() => Some(e),
        _ = stop => None,
    };
    server.shutdown().await;
    match reason {
        Some(drover_store::Error::Removed) => {
            eprintln!("drover server: this member was removed from the cluster; exiting");
            Ok(())
        }
        Some(e) => Err(anyhow::anyhow!("the store stopped: {e}")),
        None => Ok(()),
    }
}

/// SIGTERM or Ctrl-C. The handlers are installed when this is called,
/// not when the future is first polled: a server that is sent SIGTERM
/// while it starts (it may already answer) stops cleanly once started,
/// instead of dying of the signal's default action.
pub(crate) fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let term = signal(SignalKind::terminate());
        let int = signal(SignalKind::interrupt());
        async move {
            match (term, int) {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
