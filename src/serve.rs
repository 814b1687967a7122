//! `drover server` as a process: its flags into [`drover_server::ServerOptions`],
//! the member run until SIGTERM/Ctrl-C or its removal; and the signal that
//! stops the long-running commands.

use crate::ServerArgs;
use anyhow::Result;
use std::time::Duration;

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
    opts.max_connections_per_address = a.max_connections_per_address;
    opts.tick = tick;
    opts.election_ticks = (a.election_timeout_ms / a.tick_ms.max(1)).max(2) as usize;
    opts.snapshot_every = a.snapshot_every.max(1);
    opts.keep_entries = a.keep_entries;
    opts.controller.node_timeout = a.node_timeout;
    opts.controller.node_gc_after = a.node_gc_after;
    opts.controller.event_ttl = a.event_ttl;
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
        _ = shutdown_signal() => None,
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

/// SIGTERM or Ctrl-C.
pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}
