//! The agent's side of the wire: gRPC channels to the servers and the
//! opening of an `Agent.Session` stream.
//!
//! A channel is one HTTP/2 connection that carries many sessions. Servers
//! accept 200 concurrent streams per connection (hyper's default), so a sim
//! process spreads its nodes over several connections per server
//! ([`Channels`], `sessions_per_connection`, 100 by default). Channels
//! connect lazily and reconnect by themselves.
//!
//! Sessions use small codec buffers (1 KiB, growing as needed) instead of
//! tonic's 8 KiB, which matters at 10,000 sessions in one process.

use drover_proto::v1::{self as pb, agent_message, server_message};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Semaphore};
use tonic::codec::{BufferSettings, Codec, Streaming};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Channel, Endpoint};
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

/// Lazily connected channels: `slots` per server.
pub(crate) struct Channels {
    per_server: Vec<Vec<Channel>>,
}

impl Channels {
    /// Channels to every server (`host:port`), `slots` connections each.
    pub(crate) fn new(
        servers: &[String],
        slots: usize,
        connect_timeout: Duration,
    ) -> anyhow::Result<Channels> {
        let mut per_server = Vec::with_capacity(servers.len());
        for s in servers {
            let ep = Endpoint::from_shared(format!("http://{s}"))
                .map_err(|e| anyhow::anyhow!("--server {s}: not a host:port address ({e})"))?
                .connect_timeout(connect_timeout)
                .tcp_nodelay(true)
                .http2_keep_alive_interval(Duration::from_secs(10))
                .keep_alive_timeout(Duration::from_secs(5))
                .keep_alive_while_idle(true);
            per_server.push((0..slots.max(1)).map(|_| ep.connect_lazy()).collect());
        }
        Ok(Channels { per_server })
    }

    /// The channel of `slot` to server `server`.
    pub(crate) fn get(&self, server: usize, slot: usize) -> Channel {
        let list = &self.per_server[server % self.per_server.len()];
        list[slot % list.len()].clone()
    }
}

/// An open session: the outbound queue, the inbound stream and what the
/// server said in its welcome.
pub(crate) struct Session {
    pub(crate) tx: mpsc::Sender<pb::AgentMessage>,
    /// Log and exec output: sent only when nothing waits in `tx`.
    pub(crate) output: mpsc::Sender<pb::AgentMessage>,
    pub(crate) inbound: Streaming<pb::ServerMessage>,
    pub(crate) welcome: pb::Welcome,
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
    token: MetadataValue<Ascii>,
    hello: pb::Hello,
    timeout: Duration,
    gate: Option<Arc<Semaphore>>,
) -> Result<Session, Status> {
    // A sim process lets only so many nodes register at once.
    let _permit = match gate {
        Some(g) => Some(
            g.acquire_owned()
                .await
                .map_err(|_| Status::cancelled("shutting down"))?,
        ),
        None => None,
    };
    let work = async move {
        let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
        tx.send(pb::AgentMessage {
            msg: Some(agent_message::Msg::Hello(hello)),
        })
        .await
        .map_err(|_| Status::internal("the session's queue closed"))?;
        let (output, output_rx) = mpsc::channel(crate::remote::OUTPUT_QUEUE);
        let mut req = Request::new(crate::remote::Outbound::new(rx, output_rx));
        req.metadata_mut().insert("authorization", token);
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
                welcome,
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

/// `Bearer <token>` as a header value.
pub(crate) fn bearer(token: &str) -> anyhow::Result<MetadataValue<Ascii>> {
    format!("Bearer {token}")
        .parse()
        .map_err(|_| anyhow::anyhow!("--token: not a valid token (printable ASCII only)"))
}
