//! `drover logs` and `drover exec` on the agent: requests that come down
//! the agent's own session (nodes have no inbound port) and whose output
//! goes back up the same stream.
//!
//! - The server sends `LogRequest` or `ExecRequest` with an id; [`Remote`]
//!   runs each as a task that resolves the pod's container to a runtime
//!   instance (the newest attempt, or with `previous` the one before it, the
//!   instance the sync loop keeps for `lastState`), calls
//!   [`Runtime::logs`] or [`Runtime::exec`], and sends the output as
//!   `StreamChunk`s of at most [`CHUNK_MAX`] bytes, then one `StreamEnd`
//!   (an error, or exec's exit code).
//! - Flow control: a request starts with [`STREAM_WINDOW`] chunks of credit
//!   and waits for `StreamCredit` when it has used them up, so a fast log is
//!   paced by the client that reads it. Output goes through its own queue
//!   ([`Outbound`]), which the session sends only when no heartbeat or
//!   status waits: a log never delays them.
//! - `StreamCancel` (the client went away) aborts the task, which drops the
//!   runtime's log stream: the runtime stops reading. A task also ends when
//!   its session does.
//! - An exec runs through [`Runtime::exec_session`]: its stdout and stderr
//!   go up as they come (chunks marked with the stream), its exit code in
//!   the end. With `stdin` or `tty`, the server's `ExecInput` messages
//!   (stdin bytes, resizes, the close of stdin) go to the command, at most
//!   [`INPUT_WINDOW`] queued per exec: the agent gives `input_credit` back
//!   as the runtime takes them. At most [`MAX_EXECS_PER_NODE`] execs run at
//!   once; more are refused (`TooManyExecs`).

use crate::clock::Clock;
use crate::runtime::{
    ContainerInfo, ExecEvent, ExecInput, ExecSession, ExecSpec, LogOptions, Runtime, RuntimeError,
};
use drover_proto::stream::{CHUNK_MAX, INPUT_WINDOW, MAX_EXECS_PER_NODE, STREAM_WINDOW};
use drover_proto::v1::{self as pb, agent_message, server_message};
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::AbortHandle;
use tokio_stream::{Stream, StreamExt};

/// Output messages queued for the session, behind everything else.
pub(crate) const OUTPUT_QUEUE: usize = 2;

/// An exec whose request carries no timeout is killed after this long.
const EXEC_TIMEOUT: Duration = Duration::from_secs(300);

/// A session's outbound stream: the control queue (hello, heartbeats,
/// statuses, leave) first; output only when no control message waits. It
/// ends when the control queue closes (the agent dropped the session).
pub(crate) struct Outbound {
    control: mpsc::Receiver<Box<pb::AgentMessage>>,
    output: mpsc::Receiver<pb::AgentMessage>,
}

impl Outbound {
    /// Merges the two queues, control first.
    pub(crate) fn new(
        control: mpsc::Receiver<Box<pb::AgentMessage>>,
        output: mpsc::Receiver<pb::AgentMessage>,
    ) -> Self {
        Outbound { control, output }
    }
}

impl Stream for Outbound {
    type Item = pb::AgentMessage;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match this.control.poll_recv(cx) {
            Poll::Ready(m) => return Poll::Ready(m.map(|m| *m)),
            Poll::Pending => {}
        }
        match this.output.poll_recv(cx) {
            Poll::Ready(Some(m)) => Poll::Ready(Some(m)),
            // No output sender left: wait for control alone.
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }
}

struct Running {
    abort: AbortHandle,
    credit: Arc<Semaphore>,
    /// An exec (counted against [`MAX_EXECS_PER_NODE`]).
    exec: bool,
    /// An exec's input queue, with `stdin` or `tty`.
    input: Option<mpsc::Sender<pb::ExecInput>>,
}

/// The log and exec requests of one node; see the module documentation.
pub(crate) struct Remote<R: Runtime> {
    runtime: Arc<R>,
    clock: Arc<dyn Clock>,
    running: HashMap<u64, Running>,
}

/// Why a request failed: `reason` for the server, `message` for the user.
struct Fail {
    reason: String,
    message: String,
}

impl Fail {
    fn new(reason: &str, message: String) -> Fail {
        Fail {
            reason: reason.into(),
            message,
        }
    }
}

impl From<RuntimeError> for Fail {
    fn from(e: RuntimeError) -> Fail {
        Fail {
            message: e.to_string(),
            reason: e.reason,
        }
    }
}

impl<R: Runtime> Remote<R> {
    /// No request yet.
    pub(crate) fn new(runtime: Arc<R>, clock: Arc<dyn Clock>) -> Self {
        Remote {
            runtime,
            clock,
            running: HashMap::new(),
        }
    }

    /// Acts on a message of the server (log, exec, cancel, credit; anything
    /// else is ignored). Output goes to `output`, the session's output queue.
    pub(crate) fn handle(
        &mut self,
        msg: server_message::Msg,
        output: &mpsc::Sender<pb::AgentMessage>,
    ) {
        self.running.retain(|_, r| !r.abort.is_finished());
        match msg {
            server_message::Msg::Log(r) => {
                let (rt, clock) = (self.runtime.clone(), self.clock.clone());
                self.spawn(r.id, output, move |credit, out| async move {
                    logs(&*rt, &*clock, r, &credit, &out).await
                });
            }
            server_message::Msg::Exec(r) => {
                let execs = self.running.values().filter(|r| r.exec).count();
                if execs >= MAX_EXECS_PER_NODE {
                    let f = Fail::new(
                        "TooManyExecs",
                        format!("the node runs {execs} execs already, its most; retry later"),
                    );
                    self.spawn(r.id, output, move |_, _| async move { Err(f) });
                    return;
                }
                let (tx, rx) = if r.stdin || r.tty {
                    let (tx, rx) = mpsc::channel(INPUT_WINDOW as usize);
                    (Some(tx), Some(rx))
                } else {
                    (None, None)
                };
                let (rt, id) = (self.runtime.clone(), r.id);
                self.spawn(r.id, output, move |credit, out| async move {
                    exec(&*rt, r, &credit, &out, rx).await
                });
                if let Some(running) = self.running.get_mut(&id) {
                    running.exec = true;
                    running.input = tx;
                }
            }
            server_message::Msg::Input(i) => {
                let Some(r) = self.running.get(&i.id) else {
                    // Ended meanwhile: what was in flight is dropped.
                    return;
                };
                let id = i.id;
                let fits = match &r.input {
                    Some(tx) if i.stdin.len() <= CHUNK_MAX => match tx.try_send(i) {
                        Ok(()) => true,
                        // The command ended meanwhile: its input goes nowhere.
                        Err(mpsc::error::TrySendError::Closed(_)) => true,
                        Err(mpsc::error::TrySendError::Full(_)) => false,
                    },
                    _ => false,
                };
                if !fits {
                    tracing::warn!(id, "the server sent input beyond the exec's window or size, or for an exec without input; ending it");
                    if let Some(r) = self.running.remove(&id) {
                        r.abort.abort();
                    }
                    let end = pb::StreamEnd {
                        id,
                        error: "the exec's input went beyond its window or size".into(),
                        reason: "ExecError".into(),
                        exit_code: None,
                    };
                    let _ = output.try_send(pb::AgentMessage {
                        msg: Some(agent_message::Msg::End(end)),
                    });
                }
            }
            server_message::Msg::Cancel(c) => {
                if let Some(r) = self.running.remove(&c.id) {
                    tracing::debug!(id = c.id, "log/exec stream cancelled by the server");
                    r.abort.abort();
                }
            }
            server_message::Msg::Credit(c) => {
                if let Some(r) = self.running.get(&c.id) {
                    r.credit.add_permits(c.chunks.min(STREAM_WINDOW) as usize);
                }
            }
            _ => {}
        }
    }

    /// Runs one request as a task that ends with a `StreamEnd`, or silently
    /// when the session is gone.
    fn spawn<F, Fut>(&mut self, id: u64, output: &mpsc::Sender<pb::AgentMessage>, work: F)
    where
        F: FnOnce(Arc<Semaphore>, mpsc::Sender<pb::AgentMessage>) -> Fut,
        Fut: std::future::Future<Output = Result<Option<i32>, Fail>> + Send + 'static,
    {
        let credit = Arc::new(Semaphore::new(STREAM_WINDOW as usize));
        let out = output.clone();
        let fut = work(credit.clone(), out.clone());
        let task = tokio::spawn(async move {
            let result = tokio::select! {
                r = fut => r,
                _ = out.closed() => return,
            };
            let end = match result {
                Ok(exit_code) => pb::StreamEnd {
                    id,
                    exit_code,
                    ..Default::default()
                },
                Err(f) => pb::StreamEnd {
                    id,
                    error: f.message,
                    reason: f.reason,
                    exit_code: None,
                },
            };
            let msg = pb::AgentMessage {
                msg: Some(agent_message::Msg::End(end)),
            };
            let _ = out.send(msg).await;
        });
        self.running.insert(
            id,
            Running {
                abort: task.abort_handle(),
                credit,
                exec: false,
                input: None,
            },
        );
    }
}

/// The pod's name without its namespace, as kubectl words its errors.
fn pod_name(pod: &str) -> &str {
    pod.rsplit('/').next().unwrap_or(pod)
}

/// The instance a request is for: the newest attempt of the container, or
/// with `previous` the one before it.
async fn instance<R: Runtime>(
    rt: &R,
    uid: &str,
    pod: &str,
    container: &str,
    previous: bool,
) -> Result<ContainerInfo, Fail> {
    let mut mine: Vec<ContainerInfo> = rt
        .list()
        .await?
        .into_iter()
        .filter(|c| c.pod_uid == uid && c.container == container)
        .collect();
    mine.sort_by_key(|c| std::cmp::Reverse(c.attempt));
    let name = pod_name(pod);
    if previous {
        return mine.into_iter().nth(1).ok_or_else(|| {
            Fail::new(
                "NotFound",
                format!("previous terminated container {container:?} in pod {name:?} not found"),
            )
        });
    }
    mine.into_iter().next().ok_or_else(|| {
        Fail::new(
            "NotRunning",
            format!("container {container:?} in pod {name:?} has not been started yet"),
        )
    })
}

/// Sends `data` as chunks of `stream` (0 for a log, 1 stdout, 2 stderr),
/// each when credit allows.
async fn send_output(
    data: &[u8],
    stream: u32,
    id: u64,
    credit: &Semaphore,
    out: &mpsc::Sender<pb::AgentMessage>,
) -> Result<(), Fail> {
    for piece in data.chunks(CHUNK_MAX) {
        send_chunk(piece.to_vec(), stream, id, credit, out).await?;
    }
    Ok(())
}

/// Sends one chunk once credit allows.
async fn send_chunk(
    data: Vec<u8>,
    stream: u32,
    id: u64,
    credit: &Semaphore,
    out: &mpsc::Sender<pb::AgentMessage>,
) -> Result<(), Fail> {
    match credit.acquire().await {
        Ok(p) => p.forget(),
        Err(_) => return Err(Fail::new("Cancelled", "the stream was closed".into())),
    }
    let msg = pb::AgentMessage {
        msg: Some(agent_message::Msg::Chunk(pb::StreamChunk {
            id,
            data,
            stream,
        })),
    };
    out.send(msg)
        .await
        .map_err(|_| Fail::new("Cancelled", "the session ended".into()))
}

async fn logs<R: Runtime>(
    rt: &R,
    clock: &dyn Clock,
    r: pb::LogRequest,
    credit: &Semaphore,
    out: &mpsc::Sender<pb::AgentMessage>,
) -> Result<Option<i32>, Fail> {
    let c = instance(rt, &r.pod_uid, &r.pod, &r.container, r.previous).await?;
    let opts = LogOptions {
        follow: r.follow,
        tail: r.tail,
        since: r
            .since_ms
            .map(|ms| clock.wall() - Duration::from_millis(ms)),
        timestamps: r.timestamps,
    };
    tracing::debug!(pod = %r.pod, container = %r.container, id = %c.id, follow = r.follow, "streaming a log");
    let mut stream = rt.logs(&c.id, opts).await?;
    // An empty chunk says the log was found and opened: the server answers
    // an HTTP client's request (`kubectl logs`) only then, so that a
    // refusal (no previous instance, a container never started) is an HTTP
    // error with its reason rather than an empty log, without holding the
    // answer of a quiet `logs -f` until the first line.
    send_chunk(Vec::new(), 0, r.id, credit, out).await?;
    while let Some(chunk) = stream.next().await {
        send_output(&chunk?, 0, r.id, credit, out).await?;
    }
    Ok(None)
}

async fn exec<R: Runtime>(
    rt: &R,
    r: pb::ExecRequest,
    credit: &Semaphore,
    out: &mpsc::Sender<pb::AgentMessage>,
    input: Option<mpsc::Receiver<pb::ExecInput>>,
) -> Result<Option<i32>, Fail> {
    let c = instance(rt, &r.pod_uid, &r.pod, &r.container, false).await?;
    if !c.state.is_running() {
        return Err(Fail::new(
            "NotRunning",
            format!(
                "container {:?} in pod {:?} is not running",
                r.container,
                pod_name(&r.pod)
            ),
        ));
    }
    let timeout = match r.timeout_ms {
        0 => EXEC_TIMEOUT,
        ms => Duration::from_millis(ms),
    };
    tracing::debug!(pod = %r.pod, container = %r.container, command = ?r.command, stdin = r.stdin, tty = r.tty, "exec");
    let spec = ExecSpec {
        cmd: r.command,
        stdin: r.stdin,
        tty: r.tty,
        timeout,
    };
    let ExecSession {
        input: to_command,
        mut events,
    } = rt.exec_session(&c.id, spec).await?;
    let id = r.id;
    let pump = pump_input(id, input, to_command, out.clone());
    let output = async {
        while let Some(e) = events.recv().await {
            match e? {
                ExecEvent::Stdout(d) => send_output(&d, 1, id, credit, out).await?,
                ExecEvent::Stderr(d) => send_output(&d, 2, id, credit, out).await?,
                ExecEvent::Exit(code) => return Ok(Some(code)),
            }
        }
        Err(Fail::new(
            "ExecError",
            "the runtime ended the exec without its exit code".into(),
        ))
    };
    tokio::select! {
        r = output => r,
        never = pump => match never {},
    }
}

/// Passes the server's input on to the command, and credit back as the
/// runtime takes it; when the input ends (or there is none), the command's
/// stdin is closed. Never returns: the output decides the end.
async fn pump_input(
    id: u64,
    input: Option<mpsc::Receiver<pb::ExecInput>>,
    to_command: mpsc::Sender<ExecInput>,
    out: mpsc::Sender<pb::AgentMessage>,
) -> std::convert::Infallible {
    if let Some(mut rx) = input {
        let mut taken = 0;
        'messages: while let Some(m) = rx.recv().await {
            for i in inputs_of(m) {
                if to_command.send(i).await.is_err() {
                    break 'messages;
                }
            }
            taken += 1;
            if taken >= INPUT_WINDOW / 2 {
                let credit = pb::AgentMessage {
                    msg: Some(agent_message::Msg::InputCredit(pb::StreamCredit {
                        id,
                        chunks: taken,
                    })),
                };
                taken = 0;
                if out.send(credit).await.is_err() {
                    break;
                }
            }
        }
    }
    drop(to_command);
    std::future::pending().await
}

/// The runtime's inputs of one `ExecInput`, in its order: stdin, resize, close.
fn inputs_of(m: pb::ExecInput) -> Vec<ExecInput> {
    let mut v = Vec::new();
    if !m.stdin.is_empty() {
        v.push(ExecInput::Stdin(m.stdin));
    }
    if let Some(size) = m.resize {
        v.push(ExecInput::Resize {
            width: u16::try_from(size.width).unwrap_or(u16::MAX),
            height: u16::try_from(size.height).unwrap_or(u16::MAX),
        });
    }
    if m.close_stdin {
        v.push(ExecInput::CloseStdin);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(n: u8) -> pb::AgentMessage {
        pb::AgentMessage {
            msg: Some(agent_message::Msg::Chunk(pb::StreamChunk {
                id: u64::from(n),
                data: vec![],
                stream: 0,
            })),
        }
    }

    fn id(m: Option<pb::AgentMessage>) -> u64 {
        match m.and_then(|m| m.msg) {
            Some(agent_message::Msg::Chunk(c)) => c.id,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test]
    async fn control_messages_go_before_queued_output() {
        let (ctx, crx) = mpsc::channel(8);
        let (otx, orx) = mpsc::channel(8);
        let mut s = Outbound::new(crx, orx);
        otx.send(msg(10)).await.unwrap();
        otx.send(msg(11)).await.unwrap();
        ctx.send(Box::new(msg(1))).await.unwrap();
        assert_eq!(id(s.next().await), 1, "control first");
        assert_eq!(id(s.next().await), 10);
        ctx.send(Box::new(msg(2))).await.unwrap();
        assert_eq!(id(s.next().await), 2, "control jumps the queue");
        assert_eq!(id(s.next().await), 11);
        drop(otx);
        ctx.send(Box::new(msg(3))).await.unwrap();
        assert_eq!(id(s.next().await), 3, "no output sender left is fine");
        drop(ctx);
        assert!(s.next().await.is_none(), "ends with the control queue");
    }
}
