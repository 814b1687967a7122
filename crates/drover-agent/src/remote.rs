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

use crate::clock::Clock;
use crate::runtime::{ContainerInfo, LogOptions, Runtime, RuntimeError};
use drover_proto::stream::{CHUNK_MAX, STREAM_WINDOW};
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
    control: mpsc::Receiver<pb::AgentMessage>,
    output: mpsc::Receiver<pb::AgentMessage>,
}

impl Outbound {
    /// Merges the two queues, control first.
    pub(crate) fn new(
        control: mpsc::Receiver<pb::AgentMessage>,
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
            Poll::Ready(m) => return Poll::Ready(m),
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
                let rt = self.runtime.clone();
                self.spawn(r.id, output, move |credit, out| async move {
                    exec(&*rt, r, &credit, &out).await
                });
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

/// Sends `data` as chunks, each when credit allows.
async fn send_output(
    data: &[u8],
    id: u64,
    credit: &Semaphore,
    out: &mpsc::Sender<pb::AgentMessage>,
) -> Result<(), Fail> {
    for piece in data.chunks(CHUNK_MAX) {
        match credit.acquire().await {
            Ok(p) => p.forget(),
            Err(_) => return Err(Fail::new("Cancelled", "the stream was closed".into())),
        }
        let msg = pb::AgentMessage {
            msg: Some(agent_message::Msg::Chunk(pb::StreamChunk {
                id,
                data: piece.to_vec(),
            })),
        };
        if out.send(msg).await.is_err() {
            return Err(Fail::new("Cancelled", "the session ended".into()));
        }
    }
    Ok(())
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
    while let Some(chunk) = stream.next().await {
        send_output(&chunk?, r.id, credit, out).await?;
    }
    Ok(None)
}

async fn exec<R: Runtime>(
    rt: &R,
    r: pb::ExecRequest,
    credit: &Semaphore,
    out: &mpsc::Sender<pb::AgentMessage>,
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
    tracing::debug!(pod = %r.pod, container = %r.container, command = ?r.command, "exec");
    let o = rt.exec(&c.id, r.command, timeout).await?;
    send_output(&o.output, r.id, credit, out).await?;
    Ok(Some(o.exit_code))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(n: u8) -> pb::AgentMessage {
        pb::AgentMessage {
            msg: Some(agent_message::Msg::Chunk(pb::StreamChunk {
                id: u64::from(n),
                data: vec![],
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
        ctx.send(msg(1)).await.unwrap();
        assert_eq!(id(s.next().await), 1, "control first");
        assert_eq!(id(s.next().await), 10);
        ctx.send(msg(2)).await.unwrap();
        assert_eq!(id(s.next().await), 2, "control jumps the queue");
        assert_eq!(id(s.next().await), 11);
        drop(otx);
        ctx.send(msg(3)).await.unwrap();
        assert_eq!(id(s.next().await), 3, "no output sender left is fine");
        drop(ctx);
        assert!(s.next().await.is_none(), "ends with the control queue");
    }
}
