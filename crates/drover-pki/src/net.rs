//! Sockets with TLS: a tonic channel that dials over TLS, and a listener
//! whose connections carry the peer's verified certificate.

use crate::cert::PeerCert;
use crate::revoke::{cut_reason, Revocations, TokenUse};
use crate::Error;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ServerConfig};
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
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
    connected: Option<Arc<AtomicBool>>,
) -> impl tower::Service<Uri, Response = ClientIo, Error = std::io::Error, Future = Connecting> + Clone
{
    tower::service_fn(move |uri: Uri| {
        let tls = tls.clone();
        let connected = connected.clone();
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
            if let Some(c) = &connected {
                c.store(true, Ordering::Relaxed);
            }
            Ok(TokioIo::new(s))
        });
        fut
    })
}

/// A channel that connects (and reconnects) on first use, over TLS.
pub fn lazy(ep: Endpoint, tls: Arc<ClientConfig>) -> Channel {
    ep.connect_with_connector_lazy(connector(tls, None))
}

/// [`lazy`], and `answered` turns true once the server completed a TLS
/// handshake on it: the server itself is there and working, not only a
/// host or a relay that took the TCP connection. An agent opening a
/// session reads it to tell a cut link or a frozen server (no answer:
/// another attempt on a new connection, or to another server, may get
/// through) from a busy one (another attempt only adds to its load).
pub fn lazy_watched(ep: Endpoint, tls: Arc<ClientConfig>, answered: Arc<AtomicBool>) -> Channel {
    ep.connect_with_connector_lazy(connector(tls, Some(answered)))
}

/// A channel connected now, over TLS.
pub async fn connect(
    ep: Endpoint,
    tls: Arc<ClientConfig>,
) -> Result<Channel, tonic::transport::Error> {
    ep.connect_with_connector(connector(tls, None)).await
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

/// Bounds on a server's connections (one [`Gate`] may count the
/// connections of several listeners).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A connection that has not finished its TLS handshake by then (from
    /// its accept) is closed.
    pub handshake_timeout: Duration,
    /// A connection whose first request has not arrived by then (from the
    /// end of its handshake) is closed: the whole HTTP/2 preface, or an
    /// HTTP/1.1 request's header through its empty line.
    pub first_request_timeout: Duration,
    /// Open connections from one IP address.
    pub per_ip: usize,
    /// Open connections in all.
    pub total: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            handshake_timeout: Duration::from_secs(10),
            first_request_timeout: Duration::from_secs(10),
            per_ip: 1024,
            total: 4096,
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
    /// The admin token a request on this connection was let in with, if
    /// any: the connection is cut when that token is replaced.
    pub token: Arc<TokenUse>,
}

impl PeerInfo {
    /// A peer without a certificate, as an in-process test makes it.
    pub fn anonymous(remote: SocketAddr) -> PeerInfo {
        PeerInfo {
            remote,
            cert: None,
            token: Arc::default(),
        }
    }
}

#[derive(Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// The open connections of the listeners that share it, against one
/// [`Limits`]: a server gives its ports one gate, so that one address
/// holds at most `per_ip` connections across all of them.
pub struct Gate {
    limits: Limits,
    revocations: Arc<Revocations>,
    counts: Mutex<Counts>,
    /// When a refusal was last logged (one line per 10 s at most).
    refused_logged: Mutex<Option<std::time::Instant>>,
}

impl Gate {
    pub fn new(limits: Limits) -> Arc<Gate> {
        Gate::with_revocations(limits, Revocations::new())
    }

    /// A gate whose connections are cut by `revocations` (see
    /// [`crate::revoke`]).
    pub fn with_revocations(limits: Limits, revocations: Arc<Revocations>) -> Arc<Gate> {
        Arc::new(Gate {
            limits,
            revocations,
            counts: Mutex::new(Counts::default()),
            refused_logged: Mutex::new(None),
        })
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    pub fn revocations(&self) -> &Arc<Revocations> {
        &self.revocations
    }

    /// Connections open in all (handshakes under way included).
    pub fn open(&self) -> usize {
        self.counts.lock().map(|c| c.total).unwrap_or(0)
    }

    /// Connections open from `ip`.
    pub fn open_from(&self, ip: IpAddr) -> usize {
        self.counts
            .lock()
            .map(|c| c.per_ip.get(&ip).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    /// A slot for a new connection from `ip`, or `None` over a limit.
    fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Guard> {
        let mut c = self.counts.lock().ok()?;
        let mine = c.per_ip.get(&ip).copied().unwrap_or(0);
        if c.total >= self.limits.total || mine >= self.limits.per_ip {
            let (total, l) = (c.total, self.limits);
            drop(c);
            if let Ok(mut last) = self.refused_logged.lock() {
                if last.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                    tracing::warn!(
                        "refusing connections from {ip}: {mine} open from it, {total} in all (limits {} per address, {} in all)",
                        l.per_ip, l.total
                    );
                    *last = Some(std::time::Instant::now());
                }
            }
            return None;
        }
        c.total += 1;
        *c.per_ip.entry(ip).or_insert(0) += 1;
        Some(Guard {
            gate: self.clone(),
            ip,
        })
    }
}

struct Guard {
    gate: Arc<Gate>,
    ip: IpAddr,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(mut c) = self.gate.counts.lock() {
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

/// The HTTP/2 connection preface.
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Waits for a connection's first request: closes it at `deadline` unless
/// its bytes so far hold the HTTP/2 preface or an HTTP/1.1 header through
/// its empty line. Only the first bytes of a connection are looked at.
struct FirstRequest {
    deadline: Pin<Box<tokio::time::Sleep>>,
    timeout: Duration,
    seen: usize,
    /// The bytes so far are a prefix of the HTTP/2 preface.
    h2: bool,
    /// The last four bytes.
    tail: u32,
}

impl FirstRequest {
    fn new(timeout: Duration) -> FirstRequest {
        FirstRequest {
            deadline: Box::pin(tokio::time::sleep(timeout)),
            timeout,
            seen: 0,
            h2: true,
            tail: 0,
        }
    }

    /// Takes in bytes read; true once the first request has arrived.
    fn scan(&mut self, bytes: &[u8]) -> bool {
        for &b in bytes {
            if self.h2 && H2_PREFACE[self.seen] != b {
                self.h2 = false;
            }
            self.seen += 1;
            self.tail = (self.tail << 8) | u32::from(b);
            if self.h2 {
                if self.seen == H2_PREFACE.len() {
                    return true;
                }
            } else if self.tail == 0x0d0a_0d0a || self.tail & 0xffff == 0x0a0a {
                return true;
            }
        }
        false
    }
}

/// A server-side TLS connection.
pub struct TlsConn {
    inner: tokio_rustls::server::TlsStream<TcpStream>,
    info: PeerInfo,
    _guard: Guard,
    /// Until the first request has arrived.
    first: Option<FirstRequest>,
    /// Ready, with the reason, once the listener's owner cuts every
    /// connection (see [`incoming_until`]) or this one's credential is
    /// revoked (see [`crate::revoke`]); from then on every read and write
    /// fails.
    cut: Pin<Box<dyn Future<Output = &'static str> + Send>>,
    /// Why it was cut, once it was.
    cut_for: Option<&'static str>,
}

impl TlsConn {
    fn check_cut(&mut self, cx: &mut Context<'_>) -> std::io::Result<()> {
        if self.cut_for.is_none() {
            if let Poll::Ready(why) = self.cut.as_mut().poll(cx) {
                tracing::info!("closing the connection of {}: {why}", self.info.remote);
                self.cut_for = Some(why);
            }
        }
        match self.cut_for {
            Some(why) => Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                why,
            )),
            None => Ok(()),
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
        if let Some(f) = &mut self.first {
            if f.deadline.as_mut().poll(cx).is_ready() {
                let t = f.timeout;
                self.first = None;
                tracing::debug!("{} sent no request within {t:?}", self.info.remote);
                return Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no request within {t:?} of the TLS handshake"),
                )));
            }
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let (Poll::Ready(Ok(())), Some(f)) = (&r, &mut self.first) {
            if f.scan(&buf.filled()[before..]) {
                self.first = None;
            }
        }
        r
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
    incoming_until(l, tls, Gate::new(limits), cut)
}

/// [`incoming`], and once `cut` turns true every connection it handed out
/// fails its next read or write (at once if it waits on one), so the tasks
/// serving them end and drop what they hold: a stopping server is not kept
/// alive by a client that keeps its connection open. The connections are
/// counted in `gate`, which other listeners may share.
pub fn incoming_until(
    l: TcpListener,
    tls: Arc<ServerTls>,
    gate: Arc<Gate>,
    cut: watch::Receiver<bool>,
) -> mpsc::Receiver<TlsConn> {
    let (tx, rx) = mpsc::channel(256);
    let limits = gate.limits();
    let revocations = gate.revocations().clone();
    tokio::spawn(async move {
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
            let Some(guard) = gate.admit(remote.ip()) else {
                drop(tcp);
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.get());
            let tx = tx.clone();
            let cut = cut.clone();
            let revocations = revocations.clone();
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
                let token = Arc::new(TokenUse::default());
                let serial = cert.as_ref().map(|c| c.serial.clone());
                let revoked_at_open = serial.as_deref().is_some_and(|s| revocations.is_revoked(s));
                let mut revoked = revocations.subscribe();
                let uses = token.clone();
                let conn = TlsConn {
                    inner: stream,
                    info: PeerInfo {
                        remote,
                        cert,
                        token,
                    },
                    _guard: guard,
                    first: Some(FirstRequest::new(limits.first_request_timeout)),
                    cut: Box::pin(async move {
                        let stopping = async {
                            if cut.wait_for(|c| *c).await.is_err() {
                                // Its sender is gone without cutting: never.
                                std::future::pending::<()>().await;
                            }
                            "this server is stopping"
                        };
                        let revoked = async {
                            let mut why = "";
                            let gone = revoked
                                .wait_for(|r| {
                                    match cut_reason(r, serial.as_deref(), revoked_at_open, &uses) {
                                        Some(w) => {
                                            why = w;
                                            true
                                        }
                                        None => false,
                                    }
                                })
                                .await
                                .is_err();
                            if gone {
                                std::future::pending::<()>().await;
                            }
                            why
                        };
                        tokio::select! {
                            why = stopping => why,
                            why = revoked => why,
                        }
                    }),
                    cut_for: None,
                };
                let _ = tx.send(conn).await;
            });
        }
    });
    rx
}
