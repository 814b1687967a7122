//! Sockets with TLS: a tonic channel that dials over TLS, and a listener
//! whose connections carry the peer's verified certificate.

use crate::cert::PeerCert;
use crate::Error;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ServerConfig};
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tonic::transport::{Channel, Endpoint, Uri};

/// An error and its causes on one line (a TLS refusal is a few levels
/// down a connection error).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

/// An endpoint for `host:port` (the scheme is added here; TLS comes from
/// [`lazy`] or [`connect`]).
pub fn endpoint(addr: &str) -> Result<Endpoint, Error> {
    let a = addr
        .strip_prefix("https://")
        .or_else(|| addr.strip_prefix("http://"))
        .unwrap_or(addr);
    Endpoint::from_shared(format!("http://{a}"))
        .map_err(|e| Error::Tls(format!("{addr:?} is not a host:port address ({e})")))
}

/// A client-side TLS connection, as hyper reads it.
type ClientIo = TokioIo<tokio_rustls::client::TlsStream<TcpStream>>;

/// What the connector's service answers.
type Connecting = Pin<Box<dyn std::future::Future<Output = std::io::Result<ClientIo>> + Send>>;

fn connector(
    tls: Arc<ClientConfig>,
) -> impl tower::Service<Uri, Response = ClientIo, Error = std::io::Error, Future = Connecting> + Clone
{
    tower::service_fn(move |uri: Uri| {
        let tls = tls.clone();
        let fut: Connecting = Box::pin(async move {
            let host = uri
                .host()
                .unwrap_or_default()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = uri.port_u16().unwrap_or(7600);
            let tcp = TcpStream::connect((host.as_str(), port)).await?;
            tcp.set_nodelay(true)?;
            let name = ServerName::try_from(crate::SERVER_NAME)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            let s = tokio_rustls::TlsConnector::from(tls)
                .connect(name, tcp)
                .await?;
            Ok(TokioIo::new(s))
        });
        fut
    })
}

/// A channel that connects (and reconnects) on first use, over TLS.
pub fn lazy(ep: Endpoint, tls: Arc<ClientConfig>) -> Channel {
    ep.connect_with_connector_lazy(connector(tls))
}

/// A channel connected now, over TLS.
pub async fn connect(
    ep: Endpoint,
    tls: Arc<ClientConfig>,
) -> Result<Channel, tonic::transport::Error> {
    ep.connect_with_connector(connector(tls)).await
}

/// A server's TLS configuration, replaceable while it serves (renewal).
pub struct ServerTls(RwLock<Arc<ServerConfig>>);

impl ServerTls {
    pub fn new(c: Arc<ServerConfig>) -> Arc<ServerTls> {
        Arc::new(ServerTls(RwLock::new(c)))
    }
    pub fn set(&self, c: Arc<ServerConfig>) {
        if let Ok(mut g) = self.0.write() {
            *g = c;
        }
    }
    fn get(&self) -> Arc<ServerConfig> {
        match self.0.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

/// Bounds on a listener's connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A connection that has not finished its TLS handshake by then is closed.
    pub handshake_timeout: Duration,
    /// Open connections from one IP address.
    pub per_ip: usize,
    /// Open connections in all.
    pub total: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            handshake_timeout: Duration::from_secs(10),
            per_ip: 12_000,
            total: 16_000,
        }
    }
}

/// Who is on the other end of a connection.
#[derive(Debug, Clone)]
pub struct PeerInfo {
    pub remote: SocketAddr,
    /// The client certificate, verified against the cluster CA; `None` for
    /// a token holder or an anonymous caller.
    pub cert: Option<Arc<PeerCert>>,
}

#[derive(Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

struct Guard {
    counts: Arc<Mutex<Counts>>,
    ip: IpAddr,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(mut c) = self.counts.lock() {
            c.total = c.total.saturating_sub(1);
            if let Some(n) = c.per_ip.get_mut(&self.ip) {
                *n -= 1;
                if *n == 0 {
                    c.per_ip.remove(&self.ip);
                }
            }
        }
    }
}

/// A server-side TLS connection.
pub struct TlsConn {
    inner: tokio_rustls::server::TlsStream<TcpStream>,
    info: PeerInfo,
    _guard: Guard,
    /// Ready once the listener's owner cuts every connection (see
    /// [`incoming_until`]); from then on every read and write fails.
    cut: Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl TlsConn {
    fn check_cut(&mut self, cx: &mut Context<'_>) -> std::io::Result<()> {
        match self.cut.as_mut().poll(cx) {
            Poll::Ready(()) => Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "this server is stopping",
            )),
            Poll::Pending => Ok(()),
        }
    }
}

impl TlsConn {
    pub fn info(&self) -> &PeerInfo {
        &self.info
    }
}

impl AsyncRead for TlsConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        self.check_cut(cx)?;
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.check_cut(cx)?;
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.check_cut(cx)?;
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl tonic::transport::server::Connected for TlsConn {
    type ConnectInfo = PeerInfo;
    fn connect_info(&self) -> PeerInfo {
        self.info.clone()
    }
}

/// Accepts TCP connections on `l`, completes TLS handshakes concurrently
/// (each bounded by `limits.handshake_timeout`), and hands out the
/// connections that made it. Connections over `limits` are closed at once.
/// The accept loop ends when the receiver is dropped.
pub fn incoming(l: TcpListener, tls: Arc<ServerTls>, limits: Limits) -> mpsc::Receiver<TlsConn> {
    // A sender that is dropped at once never cuts.
    let (_never, cut) = watch::channel(false);
    incoming_until(l, tls, limits, cut)
}

/// [`incoming`], and once `cut` turns true every connection it handed out
/// fails its next read or write (at once if it waits on one), so the tasks
/// serving them end and drop what they hold: a stopping server is not kept
/// alive by a client that keeps its connection open.
pub fn incoming_until(
    l: TcpListener,
    tls: Arc<ServerTls>,
    limits: Limits,
    cut: watch::Receiver<bool>,
) -> mpsc::Receiver<TlsConn> {
    let (tx, rx) = mpsc::channel(256);
    let counts = Arc::new(Mutex::new(Counts::default()));
    tokio::spawn(async move {
        let mut refused_logged = std::time::Instant::now() - Duration::from_secs(60);
        loop {
            let accepted = tokio::select! {
                _ = tx.closed() => return,
                a = l.accept() => a,
            };
            let (tcp, remote) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: do not spin.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let guard = {
                let Ok(mut c) = counts.lock() else { return };
                let ip = remote.ip();
                let mine = c.per_ip.get(&ip).copied().unwrap_or(0);
                if c.total >= limits.total || mine >= limits.per_ip {
                    if refused_logged.elapsed() > Duration::from_secs(10) {
                        tracing::warn!(
                            "refusing connections from {ip}: {mine} open from it, {} in all (limits {} per address, {} in all)",
                            c.total, limits.per_ip, limits.total
                        );
                        refused_logged = std::time::Instant::now();
                    }
                    drop(tcp);
                    continue;
                }
                c.total += 1;
                *c.per_ip.entry(ip).or_insert(0) += 1;
                Guard {
                    counts: counts.clone(),
                    ip,
                }
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.get());
            let tx = tx.clone();
            let cut = cut.clone();
            tokio::spawn(async move {
                let hs = tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await;
                let stream = match hs {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        tracing::debug!("TLS handshake with {remote} failed: {e}");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!("TLS handshake with {remote} timed out");
                        return;
                    }
                };
                let cert = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .and_then(|der| match PeerCert::parse(der.as_ref()) {
                        Ok(p) => Some(Arc::new(p)),
                        Err(e) => {
                            tracing::warn!("{remote} presented a CA-signed certificate drover cannot read: {e}");
                            None
                        }
                    });
                let mut cut = cut;
                let conn = TlsConn {
                    inner: stream,
                    info: PeerInfo { remote, cert },
                    _guard: guard,
                    cut: Box::pin(async move {
                        if cut.wait_for(|c| *c).await.is_err() {
                            // Its sender is gone without cutting: never.
                            std::future::pending::<()>().await;
                        }
                    }),
                };
                let _ = tx.send(conn).await;
            });
        }
    });
    rx
}
