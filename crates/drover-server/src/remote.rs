//! `drover logs` and `drover exec` on the server: requests that travel down
//! an agent's own session, because nodes have no inbound port.
//!
//! - [`Sessions`]: the agent sessions this member holds, by node, and the
//!   log/exec streams open on them. An agent session registers itself
//!   ([`Sessions::attach`]) and hands the chunks it reads to the returned
//!   [`Attached`]; when the session ends, its open streams end with an error.
//! - Flow control is by credit ([`STREAM_WINDOW`] chunks per stream): the
//!   agent never has more than a window of chunks unacknowledged, and this
//!   member buffers exactly that much per stream, so the session's reader
//!   never waits for a slow client (a heartbeat behind a log chunk is read at
//!   once). Credit goes back as the client takes the output.
//! - [`PodsSvc`] (`Pods.Logs`, `Pods.Exec`): resolves the pod (namespace and
//!   name -> node, uid, container), then serves the stream from a session
//!   held here, or relays it from the member that holds the session.
//!
//! **Which member holds a node's session.** A member that does not hold it
//! asks every other member at once (`Pods.Locate`, join token) and relays
//! the call to one that says yes (`relayed` set, so a call is relayed at
//! most once). Nothing is kept in sync for this: a session is where it is
//! when the call comes, and a cluster has a handful of members. (The
//! leader's heartbeat relay does not say which follower heard a node, and a
//! follower would still need a second hop through the leader.)

use crate::auth;
use crate::objects::{Kind, Objects};
use crate::service::Ctx;
use drover_api::{Manifest, Pod};
use drover_proto::v1::{self as pb, agent_message, pods_client::PodsClient, pods_server};
use rand::Rng;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status, Streaming};

/// Largest chunk of output an agent sends in one message.
pub const CHUNK_MAX: usize = 32 * 1024;

/// Chunks an agent may send on one stream before it waits for credit.
pub const STREAM_WINDOW: u32 = 8;

/// Credit is given back in batches of this many chunks.
const CREDIT_BATCH: u32 = STREAM_WINDOW / 2;

/// How long a request may wait for room on a busy session.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// How long asking the other members where a session is may take.
const LOCATE_TIMEOUT: Duration = Duration::from_secs(2);

/// The answer of a relayed call to a member that does not hold the session.
const NOT_HERE: &str = "this member holds no session of the node";

/// An exec without a timeout is killed after this long.
const EXEC_TIMEOUT: Duration = Duration::from_secs(300);

type SessionTx = mpsc::Sender<Result<pb::ServerMessage, Status>>;

/// What arrives for an open stream.
enum Piece {
    Data(Vec<u8>),
    End(pb::StreamEnd),
}

struct Open {
    /// The session it runs on.
    session: u64,
    tx: mpsc::Sender<Piece>,
}

#[derive(Default)]
struct Inner {
    next_session: u64,
    /// node -> (session, its outbound queue): the newest session of a node.
    nodes: HashMap<String, (u64, SessionTx)>,
    streams: HashMap<u64, Open>,
}

/// The agent sessions of this member and the streams open on them.
#[derive(Clone, Default)]
pub struct Sessions(Arc<Mutex<Inner>>);

/// A session registered with [`Sessions::attach`]; unregistered on drop.
pub struct Attached {
    sessions: Sessions,
    node: String,
    session: u64,
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers the session of `node` whose outbound queue is `tx`. It
    /// replaces an older session of the same node (the agent reconnected).
    pub fn attach(&self, node: &str, tx: SessionTx) -> Attached {
        let mut s = self.lock();
        s.next_session += 1;
        let session = s.next_session;
        s.nodes.insert(node.to_string(), (session, tx));
        Attached {
            sessions: self.clone(),
            node: node.to_string(),
            session,
        }
    }

    /// Whether this member holds a session of `node`.
    pub fn holds(&self, node: &str) -> bool {
        self.lock()
            .nodes
            .get(node)
            .is_some_and(|(_, tx)| !tx.is_closed())
    }

    /// How many log/exec streams are open on this member's sessions.
    pub fn open_streams(&self) -> usize {
        self.lock().streams.len()
    }

    /// Sends a request (built with its id) down the session of `node`.
    /// `None` when this member holds no session of the node.
    async fn open(
        &self,
        node: &str,
        build: impl FnOnce(u64) -> pb::server_message::Msg,
    ) -> Result<Option<RemoteStream>, Status> {
        let (id, session_tx, rx) = {
            let mut s = self.lock();
            let Some((session, tx)) = s.nodes.get(node).cloned() else {
                return Ok(None);
            };
            let id = loop {
                let id: u64 = rand::rng().random();
                if id != 0 && !s.streams.contains_key(&id) {
                    break id;
                }
            };
            // Room for a whole window and the end: delivery never waits.
            let (tx_piece, rx) = mpsc::channel(STREAM_WINDOW as usize + 1);
            s.streams.insert(
                id,
                Open {
                    session,
                    tx: tx_piece,
                },
            );
            (id, tx, rx)
        };
        let mut stream = RemoteStream {
            id,
            rx,
            tx: session_tx.clone(),
            sessions: self.clone(),
            node: node.to_string(),
            done: false,
            taken: 0,
        };
        let msg = pb::ServerMessage {
            msg: Some(build(id)),
        };
        match tokio::time::timeout(SEND_TIMEOUT, session_tx.send(Ok(msg))).await {
            Ok(Ok(())) => Ok(Some(stream)),
            Ok(Err(_)) => {
                stream.done = true;
                self.lock().streams.remove(&id);
                Ok(None)
            }
            Err(_) => Err(Status::unavailable(format!(
                "the session of node {node:?} is too busy to take the request; retry"
            ))),
        }
    }
}

impl Attached {
    /// Hands a message the agent sent on this session to the stream it is
    /// for (chunks and ends; anything else is ignored). Never waits.
    pub fn deliver(&self, msg: agent_message::Msg) {
        let (id, piece) = match msg {
            agent_message::Msg::Chunk(c) => (c.id, Piece::Data(c.data)),
            agent_message::Msg::End(e) => (e.id, Piece::End(e)),
            _ => return,
        };
        let mut s = self.sessions.lock();
        let end = matches!(piece, Piece::End(_));
        let Some(open) = s.streams.get(&id).filter(|o| o.session == self.session) else {
            // Cancelled meanwhile: what was in flight is dropped.
            return;
        };
        if open.tx.try_send(piece).is_err() || end {
            if !end {
                tracing::warn!(node = %self.node, "the agent sent more than its window on a log/exec stream; ending it");
            }
            s.streams.remove(&id);
        }
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        let mut s = self.sessions.lock();
        if s.nodes
            .get(&self.node)
            .is_some_and(|(id, _)| *id == self.session)
        {
            s.nodes.remove(&self.node);
        }
        // Dropping their senders ends the streams of this session.
        s.streams.retain(|_, o| o.session != self.session);
    }
}

/// One log or exec stream on an agent session, as this member receives it.
/// Dropping it before its end tells the agent to stop.
struct RemoteStream {
    id: u64,
    rx: mpsc::Receiver<Piece>,
    tx: SessionTx,
    sessions: Sessions,
    node: String,
    done: bool,
    /// Chunks taken since credit was last given back.
    taken: u32,
}

impl RemoteStream {
    /// The next piece; `Err` when the session ended first.
    async fn next(&mut self) -> Result<Piece, Status> {
        let Some(piece) = self.rx.recv().await else {
            self.done = true;
            return Err(Status::unavailable(format!(
                "the session of node {:?} ended before the output did (its agent disconnected); retry",
                self.node
            )));
        };
        match &piece {
            Piece::End(_) => self.done = true,
            Piece::Data(_) => {
                self.taken += 1;
                if self.taken >= CREDIT_BATCH {
                    let credit = pb::ServerMessage {
                        msg: Some(pb::server_message::Msg::Credit(pb::StreamCredit {
                            id: self.id,
                            chunks: self.taken,
                        })),
                    };
                    self.taken = 0;
                    // A session that is gone ends the stream on the next recv.
                    let _ = self.tx.send(Ok(credit)).await;
                }
            }
        }
        Ok(piece)
    }
}

impl Drop for RemoteStream {
    fn drop(&mut self) {
        self.sessions.lock().streams.remove(&self.id);
        if self.done {
            return;
        }
        let cancel = pb::ServerMessage {
            msg: Some(pb::server_message::Msg::Cancel(pb::StreamCancel {
                id: self.id,
            })),
        };
        if let Err(mpsc::error::TrySendError::Full(m)) = self.tx.try_send(Ok(cancel)) {
            if let Ok(h) = tokio::runtime::Handle::try_current() {
                let tx = self.tx.clone();
                h.spawn(async move {
                    let _ = tx.send(m).await;
                });
            }
        }
    }
}

/// The status a client gets for an agent's failed end.
fn end_status(node: &str, e: &pb::StreamEnd) -> Status {
    match e.reason.as_str() {
        "NotFound" | "NotRunning" => Status::invalid_argument(e.error.clone()),
        "ExecNotSupported" | "LogsNotSupported" => {
            Status::unimplemented(format!("node {node:?}: {}", e.error))
        }
        _ => Status::internal(format!("the runtime of node {node:?} failed: {}", e.error)),
    }
}

// ------------------------------------------------------------------ Pods service

/// A pod resolved for logs or exec.
struct Target {
    node: String,
    uid: String,
    /// `namespace/name`.
    pod: String,
    container: String,
}

/// The container a request names, or the pod's only one.
fn container_of(pod: &Pod, asked: &str) -> Result<String, Status> {
    let names: Vec<&str> = pod
        .spec
        .containers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    let name = &pod.metadata.name;
    if asked.is_empty() {
        return match names.as_slice() {
            [one] => Ok(one.to_string()),
            _ => Err(Status::invalid_argument(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                names.join(" ")
            ))),
        };
    }
    if names.contains(&asked) {
        Ok(asked.to_string())
    } else {
        Err(Status::invalid_argument(format!(
            "container {asked} is not valid for pod {name}; its containers are: [{}]",
            names.join(" ")
        )))
    }
}

/// One of the two calls, to serve here or relay.
#[derive(Clone)]
enum Call {
    Logs(pb::PodLogsRequest),
    Exec(pb::PodExecRequest),
}

impl Call {
    fn relayed(&self) -> bool {
        match self {
            Call::Logs(r) => r.relayed,
            Call::Exec(r) => r.relayed,
        }
    }

    fn agent_msg(&self, t: &Target, id: u64) -> pb::server_message::Msg {
        use pb::server_message::Msg;
        match self {
            Call::Logs(r) => Msg::Log(pb::LogRequest {
                id,
                pod_uid: t.uid.clone(),
                pod: t.pod.clone(),
                container: t.container.clone(),
                follow: r.follow,
                tail: r.tail,
                since_ms: r.since_ms,
                timestamps: r.timestamps,
                previous: r.previous,
            }),
            Call::Exec(r) => Msg::Exec(pb::ExecRequest {
                id,
                pod_uid: t.uid.clone(),
                pod: t.pod.clone(),
                container: t.container.clone(),
                command: r.command.clone(),
                timeout_ms: match r.timeout_ms {
                    0 => EXEC_TIMEOUT.as_millis() as u64,
                    ms => ms,
                },
            }),
        }
    }

    /// Calls the same RPC on another member, marked as relayed.
    async fn relay(
        &self,
        ch: tonic::transport::Channel,
        token: Option<&str>,
    ) -> Result<Streaming<pb::PodOutput>, Status> {
        let mut c = PodsClient::new(ch);
        let auth = token.map(auth::bearer);
        fn req<T>(
            body: T,
            auth: Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>,
        ) -> Request<T> {
            let mut r = Request::new(body);
            if let Some(a) = auth {
                r.metadata_mut().insert("authorization", a);
            }
            r
        }
        let r = match self.clone() {
            Call::Logs(mut r) => {
                r.relayed = true;
                c.logs(req(r, auth)).await?
            }
            Call::Exec(mut r) => {
                r.relayed = true;
                c.exec(req(r, auth)).await?
            }
        };
        Ok(r.into_inner())
    }
}

/// `Pods`: logs and exec for clients, and `Locate` between members.
pub struct PodsSvc {
    pub ctx: Arc<Ctx>,
    pub objects: Objects,
}

type Output = ReceiverStream<Result<pb::PodOutput, Status>>;

impl PodsSvc {
    async fn target(&self, namespace: &str, name: &str, container: &str) -> Result<Target, Status> {
        if name.is_empty() {
            return Err(Status::invalid_argument("pod: a pod name is required"));
        }
        let pod = match self.objects.get(Kind::Pod, namespace, name).await? {
            Manifest::Pod(p) => p,
            _ => return Err(Status::internal(format!("pods {name:?} is not a pod"))),
        };
        let ns = pod.metadata.namespace.clone();
        if pod.spec.node_name.is_empty() {
            return Err(Status::failed_precondition(format!(
                "pod {ns}/{name} is not scheduled to a node yet; it has no logs and nothing to exec in"
            )));
        }
        Ok(Target {
            container: container_of(&pod, container)?,
            node: pod.spec.node_name.clone(),
            uid: pod.metadata.uid.clone(),
            pod: format!("{ns}/{name}"),
        })
    }

    async fn serve(
        &self,
        t: Target,
        call: Call,
        token: Option<String>,
    ) -> Result<Response<Output>, Status> {
        let sessions = &self.ctx.remote;
        if let Some(stream) = sessions.open(&t.node, |id| call.agent_msg(&t, id)).await? {
            tracing::debug!(node = %t.node, pod = %t.pod, container = %t.container, "log/exec stream opened");
            return Ok(Response::new(pipe_local(stream, t.node)));
        }
        if call.relayed() {
            return Err(Status::failed_precondition(NOT_HERE));
        }
        let (holders, silent) = self.locate(&t.node).await;
        for (member, ch) in holders {
            match call.relay(ch, token.as_deref()).await {
                Ok(upstream) => return Ok(Response::new(pipe_relayed(upstream))),
                Err(s) if s.code() == Code::FailedPrecondition && s.message() == NOT_HERE => {
                    tracing::debug!(node = %t.node, member = format_args!("{member:016x}"), "the session moved");
                }
                Err(s) => return Err(s),
            }
        }
        let node = &t.node;
        Err(Status::failed_precondition(if silent.is_empty() {
            format!(
                "node {node} has no session to any server; its agent may be down (pod {})",
                t.pod
            )
        } else {
            format!(
                "node {node} has no session to any server that answered ({} did not); its agent may be down (pod {})",
                silent.join(", "),
                t.pod
            )
        }))
    }

    /// The other members that hold a session of `node`, and the addresses
    /// of those that did not answer.
    async fn locate(&self, node: &str) -> (Vec<(u64, tonic::transport::Channel)>, Vec<String>) {
        let members = self.ctx.store.members();
        let asks = members
            .values()
            .filter(|m| m.id != self.ctx.id && !m.removed && !m.addr.is_empty())
            .map(|m| {
                let ch = self.ctx.channel(&m.addr);
                let (id, addr) = (m.id, m.addr.clone());
                let token = self.ctx.join_token.clone();
                let node = node.to_string();
                async move {
                    let ch = ch.ok()?;
                    let mut r = Request::new(pb::LocateRequest { node });
                    r.metadata_mut()
                        .insert("authorization", auth::bearer(&token));
                    r.set_timeout(LOCATE_TIMEOUT);
                    let held =
                        tokio::time::timeout(LOCATE_TIMEOUT, PodsClient::new(ch.clone()).locate(r))
                            .await
                            .ok()
                            .and_then(|r| r.ok())
                            .map(|r| r.into_inner().held);
                    Some((id, addr, ch, held))
                }
            });
        let mut holders = Vec::new();
        let mut silent = Vec::new();
        for (id, addr, ch, held) in futures_util::future::join_all(asks)
            .await
            .into_iter()
            .flatten()
        {
            match held {
                Some(true) => holders.push((id, ch)),
                Some(false) => {}
                None => silent.push(addr),
            }
        }
        (holders, silent)
    }
}

/// Streams a session's output to the client; the client going away drops
/// the stream, which cancels it on the agent.
fn pipe_local(mut stream: RemoteStream, node: String) -> Output {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        loop {
            let piece = tokio::select! {
                p = stream.next() => p,
                _ = tx.closed() => return,
            };
            let out = match piece {
                Ok(Piece::Data(data)) => Ok(pb::PodOutput {
                    data,
                    exit_code: None,
                }),
                Ok(Piece::End(e)) if e.error.is_empty() => {
                    if let Some(code) = e.exit_code {
                        let _ = tx
                            .send(Ok(pb::PodOutput {
                                data: Vec::new(),
                                exit_code: Some(code),
                            }))
                            .await;
                    }
                    return;
                }
                Ok(Piece::End(e)) => {
                    let _ = tx.send(Err(end_status(&node, &e))).await;
                    return;
                }
                Err(s) => {
                    let _ = tx.send(Err(s)).await;
                    return;
                }
            };
            if tx.send(out).await.is_err() {
                return;
            }
        }
    });
    ReceiverStream::new(rx)
}

/// Streams another member's answer to the client; the client going away
/// drops the upstream call, which cancels it there.
fn pipe_relayed(mut upstream: Streaming<pb::PodOutput>) -> Output {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                n = upstream.message() => n,
                _ = tx.closed() => return,
            };
            let (item, end) = match next {
                Ok(Some(o)) => (Ok(o), false),
                Ok(None) => return,
                Err(s) => (Err(s), true),
            };
            if tx.send(item).await.is_err() || end {
                return;
            }
        }
    });
    ReceiverStream::new(rx)
}

#[tonic::async_trait]
impl pods_server::Pods for PodsSvc {
    type LogsStream = Output;

    async fn logs(
        &self,
        req: Request<pb::PodLogsRequest>,
    ) -> Result<Response<Self::LogsStream>, Status> {
        self.ctx.admin(&req, "logs")?;
        let token = auth::token_of(&req).map(str::to_string);
        let r = req.into_inner();
        let t = self.target(&r.namespace, &r.pod, &r.container).await?;
        self.serve(t, Call::Logs(r), token).await
    }

    type ExecStream = Output;

    async fn exec(
        &self,
        req: Request<pb::PodExecRequest>,
    ) -> Result<Response<Self::ExecStream>, Status> {
        self.ctx.admin(&req, "exec")?;
        let token = auth::token_of(&req).map(str::to_string);
        let r = req.into_inner();
        if r.command.is_empty() || r.command[0].is_empty() {
            return Err(Status::invalid_argument(
                "command: a command to run is required (drover exec POD -- CMD ARGS…)",
            ));
        }
        let t = self.target(&r.namespace, &r.pod, &r.container).await?;
        self.serve(t, Call::Exec(r), token).await
    }

    async fn locate(
        &self,
        req: Request<pb::LocateRequest>,
    ) -> Result<Response<pb::LocateResponse>, Status> {
        auth::check(&req, &self.ctx.join_token, "locating an agent session")?;
        let held = self.ctx.remote.holds(&req.into_inner().node);
        Ok(Response::new(pb::LocateResponse { held }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::Container;

    fn pod(containers: &[&str]) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = "web".into();
        p.spec.containers = containers
            .iter()
            .map(|n| Container {
                name: n.to_string(),
                ..Default::default()
            })
            .collect();
        p
    }

    #[test]
    fn the_only_container_is_the_default_and_others_are_listed() {
        assert_eq!(container_of(&pod(&["a"]), "").unwrap(), "a");
        assert_eq!(container_of(&pod(&["a", "b"]), "b").unwrap(), "b");
        let e = container_of(&pod(&["a", "b"]), "").unwrap_err();
        assert_eq!(
            e.message(),
            "a container name must be specified for pod web, choose one of: [a b]"
        );
        let e = container_of(&pod(&["a", "b"]), "x").unwrap_err();
        assert!(e.message().contains("container x is not valid for pod web"));
        assert!(e.message().contains("[a b]"));
    }

    fn chunk(id: u64, n: u8) -> agent_message::Msg {
        agent_message::Msg::Chunk(pb::StreamChunk { id, data: vec![n] })
    }

    #[tokio::test]
    async fn chunks_flow_with_credit_and_a_drop_cancels() {
        let sessions = Sessions::default();
        let (tx, mut agent_rx) = mpsc::channel(16);
        let attached = sessions.attach("n1", tx);
        assert!(sessions.holds("n1"));
        let mut stream = sessions
            .open("n1", |id| {
                pb::server_message::Msg::Cancel(pb::StreamCancel { id })
            })
            .await
            .unwrap()
            .expect("held here");
        let id = match agent_rx.recv().await {
            Some(Ok(pb::ServerMessage {
                msg: Some(pb::server_message::Msg::Cancel(c)),
            })) => c.id,
            other => panic!("expected the request, got {other:?}"),
        };
        // A whole window fits without the reader waiting.
        for n in 0..STREAM_WINDOW as u8 {
            attached.deliver(chunk(id, n));
        }
        for n in 0..CREDIT_BATCH as u8 {
            assert!(matches!(stream.next().await, Ok(Piece::Data(d)) if d == vec![n]));
        }
        match agent_rx.recv().await {
            Some(Ok(pb::ServerMessage {
                msg: Some(pb::server_message::Msg::Credit(c)),
            })) => {
                assert_eq!((c.id, c.chunks), (id, CREDIT_BATCH));
            }
            other => panic!("expected credit, got {other:?}"),
        }
        assert_eq!(sessions.open_streams(), 1);
        drop(stream);
        assert_eq!(sessions.open_streams(), 0);
        match agent_rx.recv().await {
            Some(Ok(pb::ServerMessage {
                msg: Some(pb::server_message::Msg::Cancel(c)),
            })) => assert_eq!(c.id, id),
            other => panic!("expected a cancel, got {other:?}"),
        }
        // Late chunks of a cancelled stream are dropped.
        attached.deliver(chunk(id, 0));
        drop(attached);
        assert!(!sessions.holds("n1"));
    }

    #[tokio::test]
    async fn a_session_that_ends_ends_its_streams() {
        let sessions = Sessions::default();
        let (tx, _agent_rx) = mpsc::channel(16);
        let attached = sessions.attach("n1", tx);
        let mut stream = sessions
            .open("n1", |id| {
                pb::server_message::Msg::Cancel(pb::StreamCancel { id })
            })
            .await
            .unwrap()
            .expect("held here");
        // A newer session of the same node replaces it; the old one's drop
        // does not unregister the new one.
        let (tx2, _rx2) = mpsc::channel(16);
        let newer = sessions.attach("n1", tx2);
        drop(attached);
        assert!(sessions.holds("n1"));
        let e = stream.next().await.err().expect("ended");
        assert!(e.message().contains("ended before the output did"), "{e}");
        drop(newer);
        assert!(!sessions.holds("n1"));
        assert!(sessions
            .open("n1", |id| pb::server_message::Msg::Cancel(
                pb::StreamCancel { id }
            ))
            .await
            .unwrap()
            .is_none());
    }
}
