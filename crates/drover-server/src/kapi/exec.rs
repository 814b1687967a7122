//! `pods/exec` as kubectl 1.32 speaks it: a WebSocket upgrade with the
//! subprotocol `v5.channel.k8s.io` (or `v4`), binary messages whose first
//! byte is the stream: from the server 1 stdout, 2 stderr (not with a TTY),
//! 3 the final `Status`; from the client 0 stdin, 4 a terminal resize
//! (`{"Width":…,"Height":…}`), and (v5) 255 followed by a stream id, that
//! stream's close (`255 0`: stdin ends). The command runs over the same
//! path as `drover exec` ([`crate::svc::pods`]), with the client's input
//! passed on when it asked for `stdin` or `tty`. SPDY (kubectl's fallback,
//! a POST) is refused with the reason.
//!
//! Bounds: a client message is at most [`MAX_MESSAGE`] bytes, and at most
//! [`INPUT_QUEUE`] of them wait while the agent is behind (the WebSocket is
//! not read meanwhile); the agent's side is bounded by the session's
//! credit ([`crate::sessions`]). An exec ends after [`EXEC_LIMIT`], when
//! the command ends, or when the client goes away (the agent is told to
//! stop).

use super::status::Refusal;
use super::Target;
use crate::api::Objects;
use crate::error::ApiError;
use crate::svc::pods::PodsSvc;
use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use bytes::Bytes;
use drover_proto::reason::Reason;
use drover_proto::v1 as pb;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;

/// The most arguments of a command, and bytes of all of them.
const MAX_COMMAND_ARGS: usize = 1024;
const MAX_COMMAND_BYTES: usize = 64 << 10;

/// The largest WebSocket message a client may send (kubectl sends stdin
/// in pieces of 32 KiB).
pub const MAX_MESSAGE: usize = 128 << 10;

/// Client messages read ahead of the agent.
pub const INPUT_QUEUE: usize = 2;

/// An exec through this API ends after this long (kubelet's streaming
/// connections end after 4 h idle by default).
pub const EXEC_LIMIT: Duration = Duration::from_secs(4 * 3600);

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;

/// The exec parameters of a query string (`command` repeats).
pub struct ExecParams {
    pub command: Vec<String>,
    pub container: String,
    pub stdin: bool,
    pub tty: bool,
    /// Whether the client reads stderr (kubectl asks for it without a TTY).
    pub stderr: bool,
}

fn truthy(v: &str) -> bool {
    matches!(v, "1" | "true" | "True")
}

/// Reads the parameters.
pub fn params(query: Option<&str>) -> Result<ExecParams, Refusal> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or(""))
        .map_err(|e| Refusal::bad_request(format!("the query string: {e}")))?;
    let mut p = ExecParams {
        command: Vec::new(),
        container: String::new(),
        stdin: false,
        tty: false,
        stderr: false,
    };
    for (k, v) in pairs {
        match k.as_str() {
            "command" => p.command.push(v),
            "container" => p.container = v,
            "stdin" => p.stdin = truthy(&v),
            "tty" => p.tty = truthy(&v),
            "stderr" => p.stderr = truthy(&v),
            _ => {}
        }
    }
    let bytes: usize = p.command.iter().map(String::len).sum();
    if p.command.len() > MAX_COMMAND_ARGS || bytes > MAX_COMMAND_BYTES {
        return Err(Refusal::bad_request(format!(
            "the command has {} arguments and {bytes} bytes, more than the limits of {MAX_COMMAND_ARGS} and {MAX_COMMAND_BYTES}",
            p.command.len()
        )));
    }
    if p.command.first().is_none_or(|c| c.is_empty()) {
        return Err(Refusal::bad_request(
            "command: a command to run is required (kubectl exec POD -- CMD ARGS…)",
        ));
    }
    Ok(p)
}

fn refusal(s: tonic::Status) -> Refusal {
    let reason = Reason::of(&s).unwrap_or(Reason::InternalError);
    Refusal::from(ApiError::from_reason(reason, s.message().to_string()))
}

/// The final `Status` on the error stream.
fn final_status(exit_code: Option<i32>, error: Option<String>) -> Value {
    match (exit_code, error) {
        (_, Some(message)) => json!({
            "metadata": {}, "status": "Failure", "message": message, "reason": "InternalError",
        }),
        (Some(0) | None, None) => json!({ "metadata": {}, "status": "Success" }),
        (Some(code), None) => json!({
            "metadata": {},
            "status": "Failure",
            "message": format!("command terminated with non-zero exit code: exit status {code}"),
            "reason": "NonZeroExitCode",
            "details": { "causes": [{ "reason": "ExitCode", "message": code.to_string() }] },
        }),
    }
}

fn frame(stream: u8, data: &[u8]) -> Message {
    let mut v = Vec::with_capacity(data.len() + 1);
    v.push(stream);
    v.extend_from_slice(data);
    Message::Binary(Bytes::from(v))
}

/// A terminal size as kubectl sends it.
#[derive(serde::Deserialize)]
struct Size {
    #[serde(rename = "Width")]
    width: u32,
    #[serde(rename = "Height")]
    height: u32,
}

/// What a client's message means.
enum Incoming {
    Input(pb::PodExecInput),
    Nothing,
    /// The client closed the WebSocket (or it broke).
    Gone,
}

/// Reads one client message (channels 0, 4 and 255; anything else is
/// ignored).
fn incoming(m: Option<Result<Message, axum::Error>>) -> Incoming {
    let data = match m {
        Some(Ok(Message::Binary(b))) => b,
        Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return Incoming::Gone,
        Some(Ok(_)) => return Incoming::Nothing,
    };
    let Some((&channel, rest)) = data.split_first() else {
        return Incoming::Nothing;
    };
    let input = match channel {
        STDIN if !rest.is_empty() => pb::PodExecInput {
            stdin: rest.to_vec(),
            ..Default::default()
        },
        RESIZE => match serde_json::from_slice::<Size>(rest) {
            Ok(s) => pb::PodExecInput {
                resize: Some(pb::TerminalSize {
                    width: s.width,
                    height: s.height,
                }),
                ..Default::default()
            },
            Err(e) => {
                tracing::debug!("exec: an unreadable resize message: {e}");
                return Incoming::Nothing;
            }
        },
        CLOSE if rest.first() == Some(&STDIN) => pb::PodExecInput {
            close_stdin: true,
            ..Default::default()
        },
        _ => return Incoming::Nothing,
    };
    Incoming::Input(input)
}

/// Starts the command, then upgrades to a WebSocket that carries its
/// output (and the client's input). An error before the command runs is a
/// `Status` answer.
pub async fn exec(
    objects: &Objects,
    t: &Target,
    p: ExecParams,
    ws: Option<WebSocketUpgrade>,
) -> Result<Response, Refusal> {
    let Some(name) = &t.name else {
        return Err(Refusal::not_found("exec needs a pod's name"));
    };
    let interactive = p.stdin || p.tty;
    let req = pb::PodExecRequest {
        namespace: t.namespace.clone().unwrap_or_default(),
        pod: name.clone(),
        container: p.container,
        command: p.command,
        timeout_ms: EXEC_LIMIT.as_millis() as u64,
        relayed: false,
        stdin: p.stdin,
        tty: p.tty,
    };
    let Some(ws) = ws else {
        // kubectl falls back to SPDY when the WebSocket attempt fails:
        // answer the pod's or container's error rather than the protocol.
        let pod = objects
            .get(drover_api::Kind::Pod, &req.namespace, name)
            .await
            .map_err(|e| Refusal::from(e).about(drover_api::Kind::Pod, name))?;
        if let drover_api::Manifest::Pod(pod) = &pod {
            crate::svc::pods::container_of(pod, &req.container).map_err(refusal)?;
        }
        return Err(Refusal::bad_request(
            "drover serves pods/exec over WebSocket (v5.channel.k8s.io) only, not SPDY",
        ));
    };
    let ctx = objects.ctx().clone();
    // The caller was authorised (as a writer) by the Kubernetes API; a
    // relayed call goes on as the admin token.
    let token = Some(ctx.admin_token());
    let svc = PodsSvc {
        ctx,
        objects: objects.clone(),
    };
    let (input_tx, input_rx) = mpsc::channel::<pb::PodExecInput>(INPUT_QUEUE);
    let input: Option<crate::svc::pods::Input> =
        interactive.then(|| Box::pin(tokio_stream::wrappers::ReceiverStream::new(input_rx)) as _);
    let output = svc
        .start_exec(req, token, input)
        .await
        .map_err(refusal)?
        .into_inner();
    let stderr = p.stderr && !p.tty;
    Ok(ws
        .protocols(["v5.channel.k8s.io", "v4.channel.k8s.io"])
        .max_message_size(MAX_MESSAGE)
        .max_frame_size(MAX_MESSAGE)
        .on_upgrade(move |socket| {
            serve_socket(socket, output, interactive.then_some(input_tx), stderr)
        }))
}

/// Carries the output to the client and its input to the command until
/// the command ends (then the final `Status` and a normal close) or the
/// client goes away (the output is dropped, which stops the command).
async fn serve_socket(
    mut socket: WebSocket,
    mut output: impl tokio_stream::Stream<Item = Result<pb::PodOutput, tonic::Status>> + Unpin,
    mut input: Option<mpsc::Sender<pb::PodExecInput>>,
    stderr: bool,
) {
    let mut exit = None;
    let mut error = None;
    let mut queued: VecDeque<pb::PodExecInput> = VecDeque::new();
    loop {
        let has_room = queued.len() < INPUT_QUEUE;
        let waiting = input.is_some() && !queued.is_empty();
        tokio::select! {
            next = output.next() => match next {
                Some(Ok(o)) => {
                    let stream = if o.stream == 2 { STDERR } else { STDOUT };
                    let wanted = stream == STDOUT || stderr;
                    if wanted && !o.data.is_empty() && socket.send(frame(stream, &o.data)).await.is_err() {
                        return;
                    }
                    if o.exit_code.is_some() {
                        exit = o.exit_code;
                    }
                }
                Some(Err(s)) => {
                    error = Some(s.message().to_string());
                    break;
                }
                None => break,
            },
            permit = async { input.clone()?.reserve_owned().await.ok() }, if waiting => match permit {
                Some(permit) => {
                    if let Some(m) = queued.pop_front() {
                        permit.send(m);
                    }
                }
                // The command takes no more input.
                None => {
                    input = None;
                    queued.clear();
                }
            },
            msg = socket.recv(), if has_room => match incoming(msg) {
                Incoming::Gone => return,
                Incoming::Nothing => {}
                Incoming::Input(m) => {
                    if input.is_some() {
                        queued.push_back(m);
                    }
                }
            },
        }
    }
    let status = serde_json::to_vec(&final_status(exit, error)).unwrap_or_default();
    let _ = socket.send(frame(ERROR, &status)).await;
    // A normal closure (1000) is the streams' end for the client.
    let _ = socket
        .send(Message::Close(Some(CloseFrame {
            code: close_code::NORMAL,
            reason: "".into(),
        })))
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_repeat_and_stdin_and_tty_are_read() {
        let p = params(Some(
            "command=sh&command=-c&command=echo+hi&container=c&stdout=true",
        ))
        .unwrap();
        assert_eq!(p.command, ["sh", "-c", "echo hi"]);
        assert_eq!(p.container, "c");
        assert!(!p.stdin && !p.tty && !p.stderr);
        let p = params(Some("command=sh&stdin=true&tty=1&stderr=true")).unwrap();
        assert!(p.stdin && p.tty && p.stderr);
        assert!(params(Some("container=c")).is_err());
        let many = "command=x&".repeat(MAX_COMMAND_ARGS + 1);
        assert!(params(Some(&many)).is_err());
    }

    #[test]
    fn client_messages_are_stdin_resizes_and_the_close_of_stdin() {
        let bin = |b: &[u8]| Some(Ok(Message::Binary(Bytes::copy_from_slice(b))));
        match incoming(bin(b"\x00hi")) {
            Incoming::Input(m) => assert_eq!(m.stdin, b"hi"),
            _ => panic!("stdin"),
        }
        match incoming(bin(b"\x04{\"Width\":80,\"Height\":24}")) {
            Incoming::Input(m) => assert_eq!(
                m.resize,
                Some(pb::TerminalSize {
                    width: 80,
                    height: 24
                })
            ),
            _ => panic!("resize"),
        }
        match incoming(bin(&[255, 0])) {
            Incoming::Input(m) => assert!(m.close_stdin && m.stdin.is_empty()),
            _ => panic!("close"),
        }
        // Unreadable or unknown messages are ignored; a close is the end.
        assert!(matches!(incoming(bin(b"\x04{nope")), Incoming::Nothing));
        assert!(matches!(incoming(bin(&[255, 1])), Incoming::Nothing));
        assert!(matches!(incoming(bin(b"")), Incoming::Nothing));
        assert!(matches!(incoming(bin(b"\x09x")), Incoming::Nothing));
        assert!(matches!(incoming(None), Incoming::Gone));
        assert!(matches!(
            incoming(Some(Ok(Message::Close(None)))),
            Incoming::Gone
        ));
    }

    #[test]
    fn the_final_status_carries_the_exit_code() {
        assert_eq!(final_status(Some(0), None)["status"], "Success");
        let f = final_status(Some(3), None);
        assert_eq!(f["reason"], "NonZeroExitCode");
        assert_eq!(f["details"]["causes"][0]["message"], "3");
        assert_eq!(final_status(None, Some("gone".into()))["status"], "Failure");
    }
}
