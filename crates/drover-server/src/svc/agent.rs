//! `Agent.Session`: one stream per node agent, opened with its node
//! certificate, for its own name only, while that certificate is the one
//! bound to the Node ([`crate::api::node_certs`]). The first message must
//! be the agent's hello; the session itself runs in
//! [`crate::loops::session`].

use super::status;
use crate::api::node_certs::Cert;
use crate::api::Objects;
use crate::cache::Informer;
use crate::ctx::Ctx;
use crate::loops::session;
use drover_proto::reason::Reason;
use drover_proto::v1::{self as pb, agent_message, agent_server};
use std::sync::Arc;
use std::time::Duration;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

/// Messages queued towards one agent.
const SESSION_QUEUE: usize = 16;

pub struct AgentSvc {
    pub ctx: Arc<Ctx>,
    pub objects: Objects,
    pub cache: Informer,
    /// A stream that sends no hello within this is dropped
    /// ([`crate::limits::HELLO_TIMEOUT`]; shorter in tests).
    pub hello_timeout: Duration,
}

#[tonic::async_trait]
impl agent_server::Agent for AgentSvc {
    type SessionStream = tokio_stream::adapters::Map<
        ReceiverStream<Result<Box<pb::ServerMessage>, Status>>,
        fn(Result<Box<pb::ServerMessage>, Status>) -> Result<pb::ServerMessage, Status>,
    >;

    async fn session(
        &self,
        req: Request<Streaming<pb::AgentMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let caller = crate::auth::caller(&req, "", &self.ctx.revocations);
        let (name, serial) = match caller {
            crate::auth::Caller::Node { name, serial, key } => (name, Cert { serial, key }),
            crate::auth::Caller::Anonymous => {
                return Err(Reason::Unauthorized.status(
                    "an agent session needs a node certificate: `drover agent` gets one with the node token (--token-file DATA_DIR/node-token of a server)",
                ))
            }
            other => {
                return Err(Reason::Forbidden
                    .status(format!("{other} may not open an agent session")))
            }
        };
        let mut inbound = req.into_inner();
        // Until the hello, nothing is registered: on timeout the stream is
        // dropped with this call, which is all the session holds.
        let first = tokio::time::timeout(self.hello_timeout, inbound.message())
            .await
            .map_err(|_| {
                Reason::Timeout.status(format!(
                    "no hello within {} s: an agent session must start with the agent's hello; reconnect and send it first",
                    self.hello_timeout.as_secs_f64()
                ))
            })??
            .ok_or_else(|| {
                Reason::BadRequest.status("the agent closed the stream before saying hello")
            })?;
        let Some(agent_message::Msg::Hello(hello)) = first.msg else {
            return Err(
                Reason::BadRequest.status("the first message of an agent session must be hello")
            );
        };
        let node = session::hello_node(&hello).map_err(status)?;
        if node.metadata.name != name {
            return Err(Reason::Forbidden.status(format!(
                "the certificate of node {name} cannot open a session as node {:?}",
                node.metadata.name
            )));
        }
        session::check_bound(&self.objects, &name, &serial)
            .await
            .map_err(status)?;
        let node = session::register(&self.objects, node, &serial)
            .await
            .map_err(status)?;
        self.ctx.heartbeats.beat(&node);
        let peer = session::agent_peer(&hello);
        tracing::info!(node = %node, agent = %peer.describe(), "agent connected");
        if let (Some(theirs), ours) = (
            crate::upgrade::Version::parse(&peer.version),
            crate::upgrade::Version::this_build(),
        ) {
            if !theirs.within_skew(ours) {
                tracing::warn!(
                    node = %node,
                    "agent version {theirs} is more than one minor version from this server's {ours}: unsupported (docs/upgrades.md); upgrade the agent"
                );
            }
        }

        let (tx, rx) = tokio::sync::mpsc::channel(SESSION_QUEUE);
        tx.send(Ok(Box::new(session::welcome(&self.ctx, &node))))
            .await
            .map_err(|_| Status::cancelled("the agent went away"))?;
        session::run(
            self.ctx.clone(),
            self.objects.clone(),
            self.cache.clone(),
            node,
            serial.serial,
            tx,
            inbound,
        );
        use tokio_stream::StreamExt;
        let unbox: fn(Result<Box<pb::ServerMessage>, Status>) -> Result<pb::ServerMessage, Status> =
            |m| m.map(|b| *b);
        Ok(Response::new(ReceiverStream::new(rx).map(unbox)))
    }
}
