//! The agent sessions this member holds, and the log/exec streams open on
//! them: `drover logs` and `drover exec` travel down an agent's own
//! session, because nodes have no inbound port. The `Pods` service that
//! serves them to clients is [`crate::svc::pods`].
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
//! - An exec with stdin or a TTY carries the client's input the other way
//!   ([`RemoteInput`]): at most [`INPUT_WINDOW`] `ExecInput` messages
//!   unacknowledged, the agent's `input_credit` letting more go. A node's
//!   session carries at most [`MAX_EXECS_PER_NODE`] execs at once.

use drover_proto::reason::Reason;
use drover_proto::v1::{self as pb, agent_message};
use rand::Rng;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, Semaphore};
use tonic::Status;

pub use drover_proto::stream::{CHUNK_MAX, INPUT_WINDOW, MAX_EXECS_PER_NODE, STREAM_WINDOW};

/// Credit is given back in batches of this many chunks.
const CREDIT_BATCH: u32 = STREAM_WINDOW / 2;

/// How long a request may wait for room on a busy session.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// Messages are boxed: a tokio channel allocates its slots 32 at a time
/// (and a second block as the tail moves on), so 128-byte messages cost
/// every session two 4 KiB blocks whatever it carries; pointers, 512 bytes
/// each (heaptrack, 2,000 sim nodes).
pub type SessionTx = mpsc::Sender<Result<Box<pb::ServerMessage>, Status>>;

/// What arrives for an open stream.
pub(crate) enum Piece {
    /// Output, and which (0 a log, 1 stdout, 2 stderr).
    Data(Vec<u8>, u32),
    End(pb::StreamEnd),
}

struct Open {
    /// The session it runs on.
    session: u64,
    tx: mpsc::Sender<Piece>,
    /// The node (execs are counted per node).
    node: String,
    exec: bool,
    /// Input messages the agent takes now (execs).
    input_credit: Arc<Semaphore>,
}

#[derive(Default)]
struct Inner {
    next_session: u64,
    /// node -> (session, its outbound queue): the newest session of a node.
    nodes: HashMap<String, (u64, SessionTx)>,
    /// session -> what ends it when a newer session of its node attaches.
    replaced: HashMap<u64, Arc<tokio::sync::Notify>>,
    streams: HashMap<u64, Open>,
    /// Set by [`Sessions::close_all`]: this member is stopping and takes
    /// no session any more.
    closed: Option<Status>,
}

/// The agent sessions of this member and the streams open on them.
#[derive(Clone, Default)]
pub struct Sessions(Arc<Mutex<Inner>>);

/// A session registered with [`Sessions::attach`]; unregistered on drop.
pub struct Attached {
    sessions: Sessions,
    node: String,
    session: u64,
    replaced: Arc<tokio::sync::Notify>,
}

impl Attached {
    /// Resolves once a newer session of the same node attached to this
    /// member: this one must end (one session per node, one event budget).
    pub async fn replaced(&self) {
        self.replaced.notified().await
    }
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many sessions attached to this member since it started (each
    /// reconnect of a node counts): a node that keeps its session counts
    /// once.
    pub fn opened(&self) -> u64 {
        self.lock().next_session
    }

    /// Registers the session of `node` whose outbound queue is `tx`. It
    /// replaces an older session of the same node (the agent reconnected),
    /// which is ended: told why (`Conflict`, when its queue has room) and
    /// woken through [`Attached::replaced`], so a node holds one session on
    /// this member, never several each with its own budget.
    /// Once this member is stopping ([`Sessions::close_all`]) the session
    /// is ended at once with the same status, and not registered.
    pub fn attach(&self, node: &str, tx: SessionTx) -> Attached {
        let replaced = Arc::new(tokio::sync::Notify::new());
        let mut s = self.lock();
        s.next_session += 1;
        let session = s.next_session;
        match &s.closed {
            Some(status) => {
                let _ = tx.try_send(Err(status.clone()));
            }
            None => {
                s.replaced.insert(session, replaced.clone());
                if let Some((old, old_tx)) = s.nodes.insert(node.to_string(), (session, tx)) {
                    let _ = old_tx.try_send(Err(Reason::Conflict.status(format!(
                        "a newer session of node {node:?} opened on this member: this one ends (one session per node)"
                    ))));
                    if let Some(n) = s.replaced.remove(&old) {
                        n.notify_one();
                    }
                }
            }
        }
        Attached {
            sessions: self.clone(),
            node: node.to_string(),
            session,
            replaced,
        }
    }

    /// How many agent sessions this member holds.
    pub fn count(&self) -> usize {
        self.lock().nodes.len()
    }

    /// Ends every session with `status` (a member stopping): its agents
    /// move to another member at once instead of waiting for the
    /// connection to die.
    /// Sessions that attach later are ended the same way.
    pub fn close_all(&self, status: tonic::Status) {
        let nodes: Vec<SessionTx> = {
            let mut s = self.lock();
            s.closed = Some(status.clone());
            s.nodes.drain().map(|(_, (_, tx))| tx).collect()
        };
        for tx in nodes {
            let _ = tx.try_send(Err(status.clone()));
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
    /// `None` when this member holds no session of the node. An `exec`
    /// beyond [`MAX_EXECS_PER_NODE`] on the node is refused
    /// (TooManyRequests).
    pub(crate) async fn open(
        &self,
        node: &str,
        exec: bool,
        build: impl FnOnce(u64) -> pb::server_message::Msg,
    ) -> Result<Option<RemoteStream>, Status> {
        let (id, session_tx, rx, input_credit) = {
            let mut s = self.lock();
            let Some((session, tx)) = s.nodes.get(node).cloned() else {
                return Ok(None);
            };
            if exec {
                let execs = s
                    .streams
                    .values()
                    .filter(|o| o.exec && o.node == node)
                    .count();
                if execs >= MAX_EXECS_PER_NODE {
                    return Err(Reason::TooManyRequests.status(format!(
                        "node {node:?} runs {execs} execs already, its most; retry later"
                    )));
                }
            }
            let id = loop {
                let id: u64 = rand::rng().random();
                if id != 0 && !s.streams.contains_key(&id) {
                    break id;
                }
            };
            // Room for a whole window and the end: delivery never waits.
            let (tx_piece, rx) = mpsc::channel(STREAM_WINDOW as usize + 1);
            let input_credit = Arc::new(Semaphore::new(INPUT_WINDOW as usize));
            s.streams.insert(
                id,
                Open {
                    session,
                    tx: tx_piece,
                    node: node.to_string(),
                    exec,
                    input_credit: input_credit.clone(),
                },
            );
            (id, tx, rx, input_credit)
        };
        let mut stream = RemoteStream {
            id,
            rx,
            input_credit,
            tx: session_tx.clone(),
            sessions: self.clone(),
            node: node.to_string(),
            done: false,
            taken: 0,
        };
        let msg = pb::ServerMessage {
            msg: Some(build(id)),
        };
        match tokio::time::timeout(SEND_TIMEOUT, session_tx.send(Ok(Box::new(msg)))).await {
            Ok(Ok(())) => Ok(Some(stream)),
            Ok(Err(_)) => {
                stream.done = true;
                self.lock().streams.remove(&id);
                Ok(None)
            }
            Err(_) => Err(Reason::ServiceUnavailable.status(format!(
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
            agent_message::Msg::Chunk(c) => (c.id, Piece::Data(c.data, c.stream)),
            agent_message::Msg::End(e) => (e.id, Piece::End(e)),
            agent_message::Msg::InputCredit(c) => {
                let s = self.sessions.lock();
                if let Some(open) = s.streams.get(&c.id).filter(|o| o.session == self.session) {
                    // Never more than a window outstanding, whatever the agent says.
                    let room = (INPUT_WINDOW as usize)
                        .saturating_sub(open.input_credit.available_permits());
                    open.input_credit.add_permits((c.chunks as usize).min(room));
                }
                return;
            }
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
        s.replaced.remove(&self.session);
        // Dropping their senders ends the streams of this session.
        s.streams.retain(|_, o| o.session != self.session);
    }
}

/// One log or exec stream on an agent session, as this member receives it.
/// Dropping it before its end tells the agent to stop.
pub(crate) struct RemoteStream {
    id: u64,
    rx: mpsc::Receiver<Piece>,
    input_credit: Arc<Semaphore>,
    tx: SessionTx,
    sessions: Sessions,
    node: String,
    done: bool,
    /// Chunks taken since credit was last given back.
    taken: u32,
}

impl RemoteStream {
    /// The next piece; `Err` when the session ended first.
    pub(crate) async fn next(&mut self) -> Result<Piece, Status> {
        let Some(piece) = self.rx.recv().await else {
            self.done = true;
            return Err(Reason::ServiceUnavailable.status(format!(
                "the session of node {:?} ended before the output did (its agent disconnected); retry",
                self.node
            )));
        };
        match &piece {
            Piece::End(_) => self.done = true,
            Piece::Data(..) => {
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
                    let _ = self.tx.send(Ok(Box::new(credit))).await;
                }
            }
        }
        Ok(piece)
    }

    /// The sender of this exec's input.
    pub(crate) fn input(&self) -> RemoteInput {
        RemoteInput {
            id: self.id,
            tx: self.tx.clone(),
            credit: self.input_credit.clone(),
        }
    }
}

/// Sends a client's input for an exec down its agent's session, within the
/// agent's credit ([`INPUT_WINDOW`] messages): stdin in pieces of at most
/// [`CHUNK_MAX`] bytes, then a resize, then the close of stdin.
pub(crate) struct RemoteInput {
    id: u64,
    tx: SessionTx,
    credit: Arc<Semaphore>,
}

impl RemoteInput {
    /// Sends one client message; `Err` when the session is gone.
    pub(crate) async fn send(&self, m: pb::PodExecInput) -> Result<(), ()> {
        let mut pieces: Vec<pb::ExecInput> = m
            .stdin
            .chunks(CHUNK_MAX)
            .map(|c| pb::ExecInput {
                id: self.id,
                stdin: c.to_vec(),
                ..Default::default()
            })
            .collect();
        if pieces.is_empty() {
            pieces.push(pb::ExecInput {
                id: self.id,
                ..Default::default()
            });
        }
        if let Some(last) = pieces.last_mut() {
            last.resize = m.resize;
            last.close_stdin = m.close_stdin;
        }
        for p in pieces {
            if p.stdin.is_empty() && p.resize.is_none() && !p.close_stdin {
                continue;
            }
            self.credit.acquire().await.map_err(|_| ())?.forget();
            let msg = pb::ServerMessage {
                msg: Some(pb::server_message::Msg::Input(p)),
            };
            self.tx.send(Ok(Box::new(msg))).await.map_err(|_| ())?;
        }
        Ok(())
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
        if let Err(mpsc::error::TrySendError::Full(m)) = self.tx.try_send(Ok(Box::new(cancel))) {
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
pub(crate) fn end_status(node: &str, e: &pb::StreamEnd) -> Status {
    match e.reason.as_str() {
        "NotFound" | "NotRunning" => Reason::BadRequest.status(e.error.clone()),
        "TooManyExecs" => Reason::TooManyRequests.status(format!("node {node:?}: {}", e.error)),
        "ExecNotSupported" | "LogsNotSupported" => {
            Reason::NotImplemented.status(format!("node {node:?}: {}", e.error))
        }
        _ => Reason::InternalError
            .status(format!("the runtime of node {node:?} failed: {}", e.error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(id: u64, n: u8) -> agent_message::Msg {
        agent_message::Msg::Chunk(pb::StreamChunk {
            id,
            data: vec![n],
            stream: 0,
        })
    }

    #[tokio::test]
    async fn a_stopping_member_ends_its_sessions_and_every_later_one() {
        let sessions = Sessions::default();
        let (tx, mut before) = mpsc::channel(4);
        let _held = sessions.attach("n1", tx);
        sessions.close_all(Status::unavailable("stopping"));
        assert_eq!(sessions.count(), 0);
        let code = |m: Option<Result<Box<pb::ServerMessage>, Status>>| match m {
            Some(Err(s)) => s.code(),
            other => panic!("expected the stop status, got {other:?}"),
        };
        assert_eq!(code(before.recv().await), tonic::Code::Unavailable);
        // An agent that reconnects on a connection still open is refused
        // at once instead of holding the stopping member.
        let (tx, mut after) = mpsc::channel(4);
        let _late = sessions.attach("n1", tx);
        assert_eq!(sessions.count(), 0);
        assert!(!sessions.holds("n1"));
        assert_eq!(code(after.recv().await), tonic::Code::Unavailable);
    }

    #[tokio::test]
    async fn chunks_flow_with_credit_and_a_drop_cancels() {
        let sessions = Sessions::default();
        let (tx, mut agent_rx) = mpsc::channel(16);
        let attached = sessions.attach("n1", tx);
        assert!(sessions.holds("n1"));
        let mut stream = sessions
            .open("n1", false, |id| {
                pb::server_message::Msg::Cancel(pb::StreamCancel { id })
            })
            .await
            .unwrap()
            .expect("held here");
        let id = match agent_rx.recv().await.map(|r| r.map(|b| *b)) {
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
            assert!(matches!(stream.next().await, Ok(Piece::Data(d, 0)) if d == vec![n]));
        }
        match agent_rx.recv().await.map(|r| r.map(|b| *b)) {
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
        match agent_rx.recv().await.map(|r| r.map(|b| *b)) {
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
    async fn input_waits_for_the_agents_credit_and_execs_are_bounded() {
        let sessions = Sessions::default();
        let (tx, mut agent_rx) = mpsc::channel(128);
        let attached = sessions.attach("n1", tx);
        let open = |exec| {
            sessions.open("n1", exec, |id| {
                pb::server_message::Msg::Cancel(pb::StreamCancel { id })
            })
        };
        let stream = open(true).await.unwrap().expect("held here");
        let _request = agent_rx.recv().await;
        let input = stream.input();
        // 40 KiB of stdin and a close: two pieces, the close on the last.
        let m = pb::PodExecInput {
            stdin: vec![7; CHUNK_MAX + 8 * 1024],
            close_stdin: true,
            ..Default::default()
        };
        input.send(m).await.unwrap();
        let mut got = Vec::new();
        for _ in 0..2 {
            match agent_rx.recv().await.map(|r| r.map(|b| *b)) {
                Some(Ok(pb::ServerMessage {
                    msg: Some(pb::server_message::Msg::Input(i)),
                })) => got.push((i.stdin.len(), i.close_stdin)),
                other => panic!("expected input, got {other:?}"),
            }
        }
        assert_eq!(got, [(CHUNK_MAX, false), (8 * 1024, true)]);
        // The rest of the window, then the sender waits for credit.
        let resize = || pb::PodExecInput {
            resize: Some(pb::TerminalSize {
                width: 80,
                height: 24,
            }),
            ..Default::default()
        };
        for _ in 2..INPUT_WINDOW {
            input.send(resize()).await.unwrap();
        }
        let blocked = tokio::time::timeout(Duration::from_millis(50), input.send(resize())).await;
        assert!(blocked.is_err(), "no credit left");
        // More credit than the window is capped at the window.
        attached.deliver(agent_message::Msg::InputCredit(pb::StreamCredit {
            id: stream.id,
            chunks: 1000,
        }));
        for _ in 0..INPUT_WINDOW {
            input.send(resize()).await.unwrap();
        }
        let blocked = tokio::time::timeout(Duration::from_millis(50), input.send(resize())).await;
        assert!(blocked.is_err(), "the credit was capped at the window");
        // Execs per node are bounded; logs are not counted.
        let mut more = Vec::new();
        for _ in 1..MAX_EXECS_PER_NODE {
            more.push(open(true).await.unwrap().expect("held"));
        }
        let e = open(true).await.err().expect("one too many");
        assert_eq!(Reason::of(&e), Some(Reason::TooManyRequests));
        assert!(open(false).await.unwrap().is_some());
        drop(more);
        assert!(open(true).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn a_session_that_ends_ends_its_streams() {
        let sessions = Sessions::default();
        let (tx, _agent_rx) = mpsc::channel(16);
        let attached = sessions.attach("n1", tx);
        let mut stream = sessions
            .open("n1", false, |id| {
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
            .open("n1", false, |id| pb::server_message::Msg::Cancel(
                pb::StreamCancel { id }
            ))
            .await
            .unwrap()
            .is_none());
    }
}
