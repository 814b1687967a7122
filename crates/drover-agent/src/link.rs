//! The agent's side of the wire: the node's certificate and its TLS
//! channels to the servers ([`NodeTls`]), getting or renewing that
//! certificate (`Cluster.Certify`, [`certify`]), and the opening of an
//! `Agent.Session` stream ([`open`]).
//!
//! Every node has its own certificate, so its own connection to each
//! server (a sim process holds one per node): the server knows which node
//! a session is from by the connection's TLS, not by what the hello says.
//! Channels connect lazily and reconnect by themselves.
//!
//! Sessions use small codec buffers (1 KiB, growing as needed) instead of
//! tonic's 8 KiB, which matters at 10,000 sessions in one process.

use drover_pki::{Credential, JoinToken, Role};
use drover_proto::v1::{self as pb, agent_message, server_message};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use std::time::SystemTime;
use tokio::sync::mpsc;
use tonic::codec::{BufferSettings, Codec, Streaming};
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tonic_prost::{ProstDecoder, ProstEncoder};

/// Largest message accepted from a server (a node's complete pod list).
const MAX_MESSAGE: usize = 64 << 20;

/// Messages an agent can queue on its stream before it stops sending
/// (heartbeats are then skipped, statuses wait).
pub(crate) const OUTBOUND_QUEUE: usize = 8;

#[derive(Debug, Clone, Copy, Default)]
struct AgentCodec;

impl Codec for AgentCodec {
    type Encode = pb::AgentMessage;
    type Decode = pb::ServerMessage;
    type Encoder = ProstEncoder<pb::AgentMessage>;
    type Decoder = ProstDecoder<pb::ServerMessage>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(BufferSettings::new(1024, 32 * 1024))
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstDecoder::new(BufferSettings::new(1024, 32 * 1024))
    }
}

/// TLS 1.3 tickets a node keeps: rustls keeps up to 8 per server, so this
/// is one server's worth.
const TICKETS_KEPT: usize = 8;

/// A node's certificate, the CA it trusts, and its TLS channels, one per
/// server address (made when first used, connected lazily).
pub(crate) struct NodeTls {
    pub(crate) cred: Credential,
    pub(crate) ca: String,
    issued: SystemTime,
    not_after: SystemTime,
    tls: Arc<rustls::ClientConfig>,
    connect_timeout: Duration,
    channels: std::sync::Mutex<std::collections::HashMap<String, Channel>>,
}

impl NodeTls {
    /// A node's TLS with `cred` (certificate and key) under `ca`.
    pub(crate) fn new(
        cred: Credential,
        ca: String,
        connect_timeout: Duration,
    ) -> Result<NodeTls, Status> {
        let peer = cred
            .peer()
            .map_err(|e| Status::invalid_argument(format!("the node certificate: {e}")))?;
        let tls = drover_pki::tls::client_config(&ca, Some((&cred.cert_pem, &cred.key_pem)))
            .map_err(|e| Status::invalid_argument(format!("the node certificate: {e}")))?;
        // rustls' default session store remembers 32 servers and makes its
        // table for them up front (5.4 KiB a node in a sim); a node talks
        // to one server at a time, so its tickets are kept for one.
        let mut own = (*tls).clone();
        own.resumption = rustls::client::Resumption::in_memory_sessions(TICKETS_KEPT);
        let tls = Arc::new(own);
        Ok(NodeTls {
            cred,
            ca,
            issued: SystemTime::now(),
            not_after: peer.not_after,
            tls,
            connect_timeout,
            channels: Default::default(),
        })
    }

    /// The channel to the server at `addr`.
    pub(crate) fn channel(&self, addr: &str) -> Result<Channel, Status> {
        let mut ch = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = ch.get(addr) {
            return Ok(c.clone());
        }
        let c = drover_pki::net::lazy(endpoint(addr, self.connect_timeout)?, self.tls.clone());
        ch.insert(addr.to_string(), c.clone());
        Ok(c)
    }

    /// A new channel to the server at `addr`, which replaces the one kept
    /// for it: a new attempt to open a session makes a new connection
    /// instead of waiting on one that may have gone into a cut link.
    /// `answered` turns true once the server completed a TLS handshake on
    /// it.
    pub(crate) fn fresh_channel(
        &self,
        addr: &str,
        answered: &Arc<std::sync::atomic::AtomicBool>,
    ) -> Result<Channel, Status> {
        let c = drover_pki::net::lazy_watched(
            endpoint(addr, self.connect_timeout)?,
            self.tls.clone(),
            answered.clone(),
        );
        let mut ch = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        ch.insert(addr.to_string(), c.clone());
        Ok(c)
    }

    /// Whether the certificate has expired (the node was away longer than
    /// it lived): only the node token can make a new one.
    pub(crate) fn expired(&self, now: SystemTime) -> bool {
        now >= self.not_after
    }

    /// Whether the certificate has used two thirds of its life (counted
    /// from when this agent got it or started with it).
    pub(crate) fn renewal_due(&self, now: SystemTime) -> bool {
        let life = self
            .not_after
            .duration_since(self.issued)
            .unwrap_or_default();
        now >= self.issued + life * 2 / 3
    }

    /// Reads `DIR/node.crt`, `DIR/node.key` and `DIR/ca.crt`.
    pub(crate) fn load(dir: &Path) -> anyhow::Result<Option<(Credential, String)>> {
        let Some(cred) = Credential::load(dir, "node")? else {
            return Ok(None);
        };
        let Some(ca) = drover_pki::read_optional(&dir.join("ca.crt"))? else {
            return Ok(None);
        };
        Ok(Some((cred, ca)))
    }

    /// Removes `DIR/node.crt` and `DIR/node.key` (the node left: the
    /// server revoked the certificate, and the next start joins anew with
    /// the node token instead of being refused for ever).
    pub(crate) fn forget(dir: &Path) -> anyhow::Result<()> {
        for f in ["node.crt", "node.key"] {
            let p = dir.join(f);
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(
                        anyhow::Error::from(e).context(format!("cannot remove {}", p.display()))
                    )
                }
            }
        }
        Ok(())
    }

    /// Writes `DIR/node.crt`, `DIR/node.key` and `DIR/ca.crt` (0600).
    pub(crate) fn save(&self, dir: &Path) -> anyhow::Result<()> {
        self.cred.save(dir, "node")?;
        drover_pki::write_private(&dir.join("ca.crt"), self.ca.as_bytes())?;
        Ok(())
    }
}

/// An HTTP/2 ping after this long without a frame from the server…
///
/// A session's server answers every heartbeat with a `HeartbeatAck`, so on
/// a live session this silence never comes and no ping is sent: 10,000
/// nodes cost their server their heartbeats and the answers, not also
/// 10,000 pings and pongs. Longer than any heartbeat interval a server asks
/// for with the default 5 s node timeout (at most 2 s, on a member with
/// over 3,750 sessions; `drover_server::heartbeats`): at 1.5 s, a node
/// asked to beat every 2 s sent a ping between its heartbeats. A channel
/// with no session (a certificate's request) still gets its pings.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// …and the connection is given up when the ping is not answered within
/// this. Only a backstop: a session is given up after 3 s without a
/// message of its server by the agent's own rule (`agent::link`'s
/// `SILENCE`), which a frozen server, a link cut without a reset and a
/// stream that stopped carrying anything all break, and which does not
/// count a stall of the agent's own process against the server. hyper
/// judges a ping's answer before it reads the socket, so with 1.5 s here a
/// process that stalled for a few seconds (10,000 sim nodes taking their
/// pods at once) dropped every connection that had a ping out, with the
/// answers unread in its sockets.
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

fn endpoint(server: &str, connect_timeout: Duration) -> Result<tonic::transport::Endpoint, Status> {
    Ok(drover_pki::net::endpoint(server)
        .map_err(|e| Status::invalid_argument(format!("--server {server}: {e}")))?
        .connect_timeout(connect_timeout)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true))
}

/// What `Cluster.Certify` gave a node.
pub(crate) struct Certified {
    pub(crate) cred: Credential,
    pub(crate) ca: String,
    /// The cluster's servers, as the certifying member knows them.
    pub(crate) servers: Vec<String>,
}

/// Gets a certificate for node `name`: with the node token (a join, over
/// TLS pinned to the CA digest the token carries) or, with `renew`, over
/// the node's own authenticated channel. A join keeps the key of `kept`
/// (the node's last certificate, expired or not) when there is one: a
/// node's name belongs to the key that first joined as it, so the node
/// itself may always join again, and no other key may.
pub(crate) async fn certify(
    server: &str,
    name: &str,
    token: Option<&JoinToken>,
    renew: Option<&NodeTls>,
    kept: Option<&Credential>,
    node: &[u8],
    timeout: Duration,
) -> Result<Certified, Status> {
    let cn = Role::Node(name.to_string()).common_name();
    let (mut cred, channel, token_text) = match (renew, token) {
        (Some(current), _) => {
            let cred = current
                .cred
                .renew_request(&cn)
                .map_err(|e| Status::internal(format!("cannot make a signing request: {e}")))?;
            (cred, current.channel(server)?, String::new())
        }
        (None, Some(t)) => {
            let cred = match kept {
                Some(k) => k.renew_request(&cn),
                None => Credential::generate(&cn),
            }
            .map_err(|e| Status::internal(format!("cannot make a key: {e}")))?;
            let pinned = drover_pki::tls::pinned_client_config(&t.ca_digest)
                .map_err(|e| Status::internal(e.to_string()))?;
            let ep = endpoint(server, timeout)?;
            let ch = drover_pki::net::connect(ep, pinned).await.map_err(|e| {
                match drover_pki::tls::ca_mismatch(&e) {
                    // Not the cluster the token was made for: a refusal.
                    Some(why) => Status::permission_denied(format!("{server}: {why}")),
                    None => Status::unavailable(format!(
                        "cannot reach {server} over TLS: {}",
                        drover_pki::net::error_chain(&e)
                    )),
                }
            })?;
            (cred, ch, t.to_string())
        }
        (None, None) => {
            return Err(Status::failed_precondition(
                "this node has no certificate and no node token: pass --token (node-token in a server's data dir)",
            ))
        }
    };
    let joining = !token_text.is_empty();
    let mut req = Request::new(pb::CertifyRequest {
        token: token_text,
        csr: cred.csr_pem.clone(),
        node: name.to_string(),
        // A join describes the node (the hello's Node), so that the Node
        // it makes is whole; a renewal needs none.
        node_object: if joining { node.to_vec() } else { Vec::new() },
        ..Default::default()
    });
    req.set_timeout(timeout);
    let resp = tokio::time::timeout(
        timeout,
        pb::cluster_client::ClusterClient::new(channel).certify(req),
    )
    .await
    .map_err(|_| Status::deadline_exceeded(format!("no certificate within {timeout:?}")))??
    .into_inner();
    cred.cert_pem = resp.cert;
    Ok(Certified {
        cred,
        ca: resp.ca,
        servers: resp.servers,
    })
}

/// An open session: the outbound queue, the inbound stream and what the
/// server said in its welcome.
pub(crate) struct Session {
    /// Boxed: a tokio channel's slots come 32 at a time, and a node's
    /// heartbeats move its tail through a second block (two blocks of
    /// whole 72-byte messages, 4.6 KiB a node; of pointers, 512 bytes).
    pub(crate) tx: mpsc::Sender<Box<pb::AgentMessage>>,
    /// Log and exec output: sent only when nothing waits in `tx`.
    pub(crate) output: mpsc::Sender<pb::AgentMessage>,
    pub(crate) inbound: Streaming<pb::ServerMessage>,
    pub(crate) welcome: pb::Welcome,
    /// The server, as its welcome describes it: its version and what it
    /// speaks (a server from before the negotiation: the baseline).
    pub(crate) peer: drover_proto::caps::Peer,
    /// The certificate the session was opened with (new when it was
    /// just issued or renewed).
    pub(crate) tls: Option<Arc<NodeTls>>,
    /// The server the session is on, and the servers its certificate's
    /// answer named (empty when no certificate was made).
    pub(crate) server: String,
    pub(crate) learnt: Vec<String>,
}

/// Whether a failure is the server refusing this agent (bad token, bad
/// node), as opposed to the server being away.
pub(crate) fn is_refusal(s: &Status) -> bool {
    matches!(
        s.code(),
        Code::Unauthenticated | Code::PermissionDenied | Code::InvalidArgument
    )
}

/// Says hello on a new `Agent.Session` stream and waits for the welcome.
pub(crate) async fn open(
    channel: Channel,
    hello: pb::Hello,
    timeout: Duration,
) -> Result<Session, Status> {
    let work = async move {
        let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
        tx.send(Box::new(pb::AgentMessage {
            msg: Some(agent_message::Msg::Hello(hello)),
        }))
        .await
        .map_err(|_| Status::internal("the session's queue closed"))?;
        let (output, output_rx) = mpsc::channel(crate::remote::OUTPUT_QUEUE);
        let req = Request::new(crate::remote::Outbound::new(rx, output_rx));
        let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(MAX_MESSAGE);
        grpc.ready()
            .await
            .map_err(|e| Status::unavailable(format!("cannot connect: {e}")))?;
        let path = tonic::codegen::http::uri::PathAndQuery::from_static("/drover.v1.Agent/Session");
        let mut inbound = grpc.streaming(req, path, AgentCodec).await?.into_inner();
        match inbound.message().await? {
            Some(pb::ServerMessage {
                msg: Some(server_message::Msg::Welcome(welcome)),
            }) => Ok(Session {
                tx,
                output,
                inbound,
                peer: server_peer(&welcome),
                welcome,
                tls: None,
                server: String::new(),
                learnt: Vec::new(),
            }),
            Some(other) => Err(Status::internal(format!(
                "the server's first message was not a welcome: {other:?}"
            ))),
            None => Err(Status::unavailable("the server closed the session")),
        }
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(Status::deadline_exceeded(format!(
            "no welcome within {timeout:?}"
        ))),
    }
}

/// The server of a session, as its welcome describes it.
pub(crate) fn server_peer(welcome: &pb::Welcome) -> drover_proto::caps::Peer {
    drover_proto::caps::Peer::new(&welcome.server_version, &welcome.capabilities)
}

/// Reads `--token` (a node token).
pub(crate) fn node_token(text: &str) -> anyhow::Result<JoinToken> {
    let t = JoinToken::parse(text, "--token")?;
    if t.kind != drover_pki::TokenKind::Node {
        anyhow::bail!(
            "--token: a {} token cannot join a node; use the node token (node-token in a server's data dir)",
            t.kind.as_str()
        );
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_proto::caps;

    #[test]
    fn a_server_that_answers_no_capabilities_speaks_the_baseline() {
        // A server of the release before the negotiation (7f1d4bf): its
        // welcome has neither a version nor capabilities.
        let old = pb::Welcome {
            node: "edge-1".into(),
            heartbeat_interval_ms: 1000,
            member: 1,
            servers: vec!["10.0.0.1:7600".into()],
            ..Default::default()
        };
        let peer = server_peer(&old);
        assert!(!peer.announced);
        assert_eq!(peer.version, "");
        for c in caps::BASELINE {
            assert!(peer.supports(c), "{c}");
        }
        // A newer server: exactly what it lists.
        let new = pb::Welcome {
            server_version: "0.2.0".into(),
            capabilities: vec![caps::HEARTBEAT_ACK.into(), "newer".into()],
            ..old
        };
        let peer = server_peer(&new);
        assert!(peer.announced);
        assert_eq!(peer.version, "0.2.0");
        assert!(peer.supports("newer"));
        assert!(!peer.supports(caps::POD_CONFIG));
    }
}
