//! The member's two ports, served over TLS: gRPC (tonic) and HTTP (axum,
//! served by hyper here so that its HTTP/1.1 header timeout and HTTP/2
//! keep-alive can be set). Both count their connections in one
//! [`Gate`]: one address holds at most its share across both.

use crate::{api, cache, ctx, http, kapi, limits, svc};
use drover_pki::net::{Gate, TlsConn};
use drover_proto::v1::{
    agent_server::AgentServer, cluster_server::ClusterServer, objects_server::ObjectsServer,
    pods_server::PodsServer, raft_server::RaftServer, store_server::StoreServer,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// HTTP/2 streams one connection may have open at once.
pub const MAX_STREAMS: u32 = 200;

/// HTTP/2 pings on an open connection: every 10 s; a peer that has not
/// answered one within 20 s is gone and its connection is closed.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

pub(crate) async fn serve_grpc(
    l: TcpListener,
    ctx: Arc<ctx::Ctx>,
    cache: cache::Informer,
    gate: Arc<Gate>,
    mut stop: watch::Receiver<bool>,
    cut: watch::Receiver<bool>,
) {
    use limits::{MAX_RAFT_MESSAGE_BYTES as MAX_MESSAGE, MAX_REQUEST_BYTES};
    use tokio_stream::StreamExt;
    let incoming = drover_pki::net::incoming_until(l, ctx.trust.grpc.clone(), gate, cut);
    let incoming =
        tokio_stream::wrappers::ReceiverStream::new(incoming).map(Ok::<_, std::io::Error>);
    let r = tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .max_concurrent_streams(Some(MAX_STREAMS))
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .layer(tower::util::MapResponseLayer::new(
            svc::too_large_reason::<tonic::body::Body>,
        ))
        .add_service(
            StoreServer::new(svc::store::StoreSvc(ctx.clone()))
                .max_decoding_message_size(MAX_REQUEST_BYTES)
                .max_encoding_message_size(MAX_MESSAGE),
        )
        .add_service(ClusterServer::new(svc::cluster::ClusterSvc(ctx.clone())))
        .add_service(AgentServer::new(svc::agent::AgentSvc {
            ctx: ctx.clone(),
            objects: api::Objects::new(ctx.clone()),
            cache: cache.clone(),
            hello_timeout: limits::HELLO_TIMEOUT,
        }))
        .add_service(
            ObjectsServer::new(svc::objects::ObjectsSvc(
                api::Objects::new(ctx.clone()),
                cache,
            ))
            .max_decoding_message_size(MAX_REQUEST_BYTES)
            .max_encoding_message_size(MAX_MESSAGE),
        )
        .add_service(PodsServer::new(svc::pods::PodsSvc {
            ctx: ctx.clone(),
            objects: api::Objects::new(ctx.clone()),
        }))
        .add_service(
            RaftServer::new(svc::raft::RaftSvc(ctx))
                .max_decoding_message_size(MAX_MESSAGE)
                .max_encoding_message_size(MAX_MESSAGE),
        )
        .serve_with_incoming_shutdown(incoming, async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await;
    if let Err(e) = r {
        tracing::error!("the gRPC server failed: {e}");
    }
}

/// Serves the HTTP port until `stop`, then lets open connections finish
/// (`cut` ends those that do not) and returns once all are closed.
pub(crate) async fn serve_http(
    l: TcpListener,
    ctx: Arc<ctx::Ctx>,
    informer: cache::Informer,
    gate: Arc<Gate>,
    mut stop: watch::Receiver<bool>,
    cut: watch::Receiver<bool>,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    // Every HTTP/1.1 request's header, not only the first, within the
    // first-request timeout (from the end of the previous response: an
    // idle keep-alive connection is closed then).
    let header_timeout = gate.limits().first_request_timeout;
    let mut rx = drover_pki::net::incoming_until(l, ctx.trust.http.clone(), gate, cut);
    let app = http::router(ctx.clone(), informer);
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        // CONNECT, for WebSockets over HTTP/2 (exec).
        .enable_connect_protocol()
        .max_concurrent_streams(MAX_STREAMS)
        .keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT);
    let builder = Arc::new(builder);
    // Each connection's task holds a receiver; all are gone once every
    // connection has closed.
    let (open_tx, open_rx) = watch::channel(());
    loop {
        let conn: TlsConn = tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            c = rx.recv() => match c {
                Some(c) => c,
                None => break,
            },
        };
        let peer = kapi::Peer(Some(conn.info().clone()));
        let remote = peer.0.as_ref().map(|p| p.remote);
        let app = app.clone();
        let svc = tower::service_fn(move |req: axum::http::Request<hyper::body::Incoming>| {
            use tower::ServiceExt;
            let mut req = req.map(axum::body::Body::new);
            req.extensions_mut()
                .insert(axum::extract::ConnectInfo(peer.clone()));
            app.clone().oneshot(req)
        });
        let builder = builder.clone();
        let mut stop = stop.clone();
        let open = open_rx.clone();
        tokio::spawn(async move {
            let svc = hyper_util::service::TowerToHyperService::new(svc);
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(conn), svc);
            let mut conn = std::pin::pin!(conn);
            let mut stopping = false;
            loop {
                tokio::select! {
                    r = conn.as_mut() => {
                        if let Err(e) = r {
                            tracing::debug!("HTTP connection from {remote:?}: {e}");
                        }
                        break;
                    }
                    _ = stop.wait_for(|s| *s), if !stopping => {
                        stopping = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
            drop(open);
        });
    }
    drop(open_rx);
    drop(rx);
    open_tx.closed().await;
}
