//! The proxy's side towards the cluster: every member's HTTPS address
//! (learnt from the cluster status, refreshed), one HTTP/2 connection per
//! member under the cluster CA with the user's credential, and sending a
//! request to one member after another until one answers, as far as
//! [`super::guard::may_retry`] allows.

use super::guard::{may_retry, Failed};
use crate::client::{Client, ClientConfig};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Method, Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio_rustls::TlsConnector;

/// How long a TCP connection and a TLS handshake to a member may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the head of an answer may take before the member counts as
/// not answering (a watch's head comes at once; a write waits out an
/// election well within this).
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one request keeps trying members before the proxy answers 503.
pub const FIND_MEMBER: Duration = Duration::from_secs(20);
/// How often the member list is read again.
pub const REFRESH_EVERY: Duration = Duration::from_secs(10);

/// A request as the proxy holds it: buffered, so it can be sent again.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub method: Method,
    /// The path and query.
    pub target: String,
    /// Already stripped of what must not cross ([`super::guard::upstream_headers`]).
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Sending it twice is harmless whatever its method (the dashboard's
    /// sign-in).
    pub repeatable: bool,
}

/// Why no member answered, for the caller's 502/503.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The request went out to a member that then gave no answer, and it
    /// is not safe to send it again: its outcome is unknown.
    #[error("{member} took the {method} request but gave no answer ({cause}); it was not sent again because it may have been applied: check with a read, then retry")]
    Unknown {
        member: String,
        method: Method,
        cause: String,
    },
    /// No member could be reached within [`FIND_MEMBER`].
    #[error("no member of the cluster answered within {:.0} s (tried {members}): {last}", waited.as_secs_f64())]
    NoMember {
        waited: Duration,
        members: String,
        last: String,
    },
}

impl UpstreamError {
    /// The reason code the proxy's answer carries.
    pub fn reason(&self) -> &'static str {
        match self {
            UpstreamError::Unknown { .. } => "ProxyOutcomeUnknown",
            UpstreamError::NoMember { .. } => "ProxyNoMember",
        }
    }
}

/// The members and the connections to them.
pub struct Upstream {
    status_client: RwLock<Client>,
    cfg: ClientConfig,
    tls: TlsConnector,
    bearer: Option<HeaderValue>,
    members: RwLock<Vec<String>>,
    current: AtomicUsize,
    conns: Mutex<HashMap<String, SendRequest<Full<Bytes>>>>,
}

impl Upstream {
    /// Reads the member list once (a member of `cfg.servers` must answer),
    /// ready to forward.
    pub async fn start(cfg: &ClientConfig) -> anyhow::Result<Arc<Upstream>> {
        let identity = (!cfg.cert.is_empty()).then_some((cfg.cert.as_str(), cfg.key.as_str()));
        let tls = drover_pki::tls::client_config(&cfg.ca, identity)
            .map_err(|e| anyhow::anyhow!("the client config: {e}"))?;
        let bearer = if cfg.token.is_empty() {
            None
        } else {
            Some(
                HeaderValue::from_str(&format!("Bearer {}", cfg.token)).map_err(|_| {
                    anyhow::anyhow!("the client config: token: must be printable ASCII")
                })?,
            )
        };
        let mut client = Client::new(cfg)?;
        client.deadline = Duration::from_secs(10);
        let up = Arc::new(Upstream {
            status_client: RwLock::new(client),
            cfg: cfg.clone(),
            tls: TlsConnector::from(tls),
            bearer,
            members: RwLock::new(Vec::new()),
            current: AtomicUsize::new(0),
            conns: Mutex::new(HashMap::new()),
        });
        up.refresh().await?;
        Ok(up)
    }

    /// The members' HTTPS addresses, as last read.
    pub fn members(&self) -> Vec<String> {
        self.members
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reads the member list again from the cluster status (through any
    /// server the client knows: those of the config and every member's
    /// gRPC address learnt so far).
    pub async fn refresh(&self) -> anyhow::Result<()> {
        let client = self
            .status_client
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let st = client.status().await?;
        let live: Vec<_> = st
            .members
            .iter()
            .filter(|m| !m.removed && !m.http.is_empty())
            .collect();
        if live.is_empty() {
            anyhow::bail!("the cluster status lists no member with an HTTPS address");
        }
        let http = super::guard::order_members(
            live.iter()
                .map(|m| (m.id, super::guard::dialable(&m.http, &m.addr)))
                .collect(),
            st.leader,
        );
        let mut grpc: Vec<String> = live.iter().map(|m| m.addr.clone()).collect();
        for s in &self.cfg.servers {
            if !grpc.contains(s) {
                grpc.push(s.clone());
            }
        }
        if grpc != client.servers() {
            let mut cfg = self.cfg.clone();
            cfg.servers = grpc;
            if let Ok(mut c) = Client::new(&cfg) {
                c.deadline = client.deadline;
                *self
                    .status_client
                    .write()
                    .unwrap_or_else(|e| e.into_inner()) = c;
            }
        }
        let mut members = self.members.write().unwrap_or_else(|e| e.into_inner());
        if *members != http {
            tracing::info!("proxy: the cluster's members: {}", http.join(", "));
            *members = http;
            // The leader first: writes reach it without a hop.
            self.current.store(0, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Keeps the member list fresh until the process ends.
    pub fn follow(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(REFRESH_EVERY).await;
                let Some(up) = me.upgrade() else { return };
                if let Err(e) = up.refresh().await {
                    tracing::warn!("proxy: cannot read the member list: {e:#}");
                }
            }
        });
    }

    /// A connection to `member`: the open one, or a new one.
    async fn conn(&self, member: &str) -> anyhow::Result<SendRequest<Full<Bytes>>> {
        if let Some(c) = self
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(member)
        {
            if !c.is_closed() {
                return Ok(c.clone());
            }
        }
        let c = tokio::time::timeout(CONNECT_TIMEOUT, self.connect(member))
            .await
            .map_err(|_| anyhow::anyhow!("no connection within {CONNECT_TIMEOUT:?}"))??;
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(member.to_string(), c.clone());
        Ok(c)
    }

    async fn connect(&self, member: &str) -> anyhow::Result<SendRequest<Full<Bytes>>> {
        let tcp = tokio::net::TcpStream::connect(member).await?;
        tcp.set_nodelay(true)?;
        let name = tokio_rustls::rustls::pki_types::ServerName::try_from(drover_pki::SERVER_NAME)
            .map_err(|e| anyhow::anyhow!("server name: {e}"))?;
        let tls = self.tls.connect(name, tcp).await?;
        if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
            anyhow::bail!("{member} does not speak HTTP/2 on its HTTPS port");
        }
        let (send, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls)).await?;
        let who = member.to_string();
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("proxy: the connection to {who} ended: {e}");
            }
        });
        Ok(send)
    }

    fn forget(&self, member: &str) {
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(member);
    }

    /// Sends `req` to one member, moving on to the next while
    /// [`may_retry`] allows, until one answers or [`FIND_MEMBER`] passes.
    /// `cookie` is the dashboard's session, sent as the `Cookie`.
    pub async fn send(
        &self,
        req: &Outgoing,
        cookie: Option<&str>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        let start = Instant::now();
        let mut tried = 0usize;
        let mut last = String::from("no member known");
        loop {
            let members = self.members();
            if !members.is_empty() {
                let i = self.current.load(Ordering::Relaxed) % members.len();
                let member = &members[i];
                match self.send_once(member, req, cookie).await {
                    Ok(r) => return Ok(r),
                    Err((failed, cause)) => {
                        tracing::info!(
                            "proxy: {} {} to {member}: {failed:?}: {cause}",
                            req.method,
                            req.target
                        );
                        if failed != Failed::Unsent {
                            self.forget(member);
                        }
                        let _ = self.current.compare_exchange(
                            i,
                            i + 1,
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        );
                        if !(req.repeatable || may_retry(&req.method, failed)) {
                            return Err(UpstreamError::Unknown {
                                member: member.clone(),
                                method: req.method.clone(),
                                cause,
                            });
                        }
                        last = format!("{member}: {cause}");
                    }
                }
            }
            tried += 1;
            if start.elapsed() >= FIND_MEMBER {
                return Err(UpstreamError::NoMember {
                    waited: start.elapsed(),
                    members: members.join(", "),
                    last,
                });
            }
            // After a whole round: read the member list again (a member
            // may have moved or joined), and pace the next round.
            if members.is_empty() || tried.is_multiple_of(members.len()) {
                if let Ok(Err(e)) =
                    tokio::time::timeout(Duration::from_secs(3), self.refresh()).await
                {
                    tracing::debug!("proxy: cannot read the member list: {e:#}");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    async fn send_once(
        &self,
        member: &str,
        req: &Outgoing,
        cookie: Option<&str>,
    ) -> Result<Response<Incoming>, (Failed, String)> {
        let mut conn = self
            .conn(member)
            .await
            .map_err(|e| (Failed::Connect, format!("{e:#}")))?;
        let mut r = Request::builder()
            .method(req.method.clone())
            .uri(format!("https://{member}{}", req.target))
            .body(Full::new(req.body.clone()))
            .map_err(|e| (Failed::Unsent, format!("the request: {e}")))?;
        *r.headers_mut() = req.headers.clone();
        if let Some(b) = &self.bearer {
            r.headers_mut()
                .insert(hyper::header::AUTHORIZATION, b.clone());
        }
        if let Some(c) = cookie.and_then(|c| HeaderValue::from_str(c).ok()) {
            r.headers_mut().insert(hyper::header::COOKIE, c);
        }
        match tokio::time::timeout(HEAD_TIMEOUT, conn.try_send_request(r)).await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(mut e)) => {
                let unsent = e.take_message().is_some();
                let failed = if unsent {
                    Failed::Unsent
                } else {
                    Failed::NoAnswer
                };
                Err((failed, e.into_error().to_string()))
            }
            Err(_) => Err((
                Failed::NoAnswer,
                format!("no answer within {HEAD_TIMEOUT:?}"),
            )),
        }
    }
}
