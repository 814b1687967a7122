//! `pods/exec` as kubectl 1.32 speaks it: a WebSocket upgrade with the
//! subprotocol `v5.channel.k8s.io` (or `v4`), binary messages whose first
//! byte is the stream (1 stdout, 3 the final `Status`). The command runs
//! over the same path as `drover exec` (the `Pods.Exec` service of
//! [`crate::svc::pods`]), which has no stdin and no TTY: a request for
//! either is refused before anything runs, and the output comes on stdout.
//! SPDY (kubectl's fallback, a POST) is refused with the reason.

use super::status::Refusal;
use super::Target;
use crate::api::Objects;
use crate::auth;
use crate::error::ApiError;
use crate::svc::pods::PodsSvc;
use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use bytes::Bytes;
use drover_proto::reason::Reason;
use drover_proto::v1 as pb;
use drover_proto::v1::pods_server::Pods;
use serde_json::{json, Value};
use tokio_stream::StreamExt;

/// The most arguments of a command, and bytes of all of them.
const MAX_COMMAND_ARGS: usize = 1024;
const MAX_COMMAND_BYTES: usize = 64 << 10;

const STDOUT: u8 = 1;
const ERROR: u8 = 3;

/// The exec parameters of a query string (`command` repeats).
pub struct ExecParams {
    pub command: Vec<String>,
    pub container: String,
    pub stdin: bool,
    pub tty: bool,
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
    };
    for (k, v) in pairs {
        match k.as_str() {
            "command" => p.command.push(v),
            "container" => p.container = v,
            "stdin" => p.stdin = truthy(&v),
            "tty" => p.tty = truthy(&v),
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
    if p.stdin || p.tty {
        return Err(Refusal::bad_request(
            "drover's exec has no stdin and no TTY yet: run the command without -i and -t (kubectl exec POD -- CMD)",
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

/// Starts the command, then upgrades to a WebSocket that carries its
/// output. An error before the command runs is a `Status` answer.
pub async fn exec(
    objects: &Objects,
    t: &Target,
    p: ExecParams,
    ws: Option<WebSocketUpgrade>,
) -> Result<Response, Refusal> {
    let Some(name) = &t.name else {
        return Err(Refusal::not_found("exec needs a pod's name"));
    };
    let req = pb::PodExecRequest {
        namespace: t.namespace.clone().unwrap_or_default(),
        pod: name.clone(),
        container: p.container,
        command: p.command,
        timeout_ms: 0,
        relayed: false,
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
    // The caller was authorised (as a writer) by the Kubernetes API; the
    // service is called as the admin token, which it passes on to relay.
    let mut call = tonic::Request::new(req);
    call.metadata_mut()
        .insert("authorization", auth::bearer(&ctx.admin_token()));
    let svc = PodsSvc {
        ctx,
        objects: objects.clone(),
    };
    let mut output = svc.exec(call).await.map_err(refusal)?.into_inner();
    Ok(ws
        .protocols(["v5.channel.k8s.io", "v4.channel.k8s.io"])
        .on_upgrade(move |mut socket: WebSocket| async move {
            let mut exit = None;
            let mut error = None;
            loop {
                tokio::select! {
                    next = output.next() => match next {
                        Some(Ok(o)) => {
                            if !o.data.is_empty() && socket.send(frame(STDOUT, &o.data)).await.is_err() {
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
                    incoming = socket.recv() => match incoming {
                        // The client went away: dropping the output cancels
                        // the command on the agent.
                        None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                        Some(Ok(_)) => {}
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
        }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_repeat_and_stdin_is_refused() {
        let p = params(Some(
            "command=sh&command=-c&command=echo+hi&container=c&stdout=true",
        ))
        .unwrap();
        assert_eq!(p.command, ["sh", "-c", "echo hi"]);
        assert_eq!(p.container, "c");
        assert!(params(Some("command=sh&stdin=true")).is_err());
        assert!(params(Some("command=sh&tty=1")).is_err());
        assert!(params(Some("container=c")).is_err());
        let many = "command=x&".repeat(MAX_COMMAND_ARGS + 1);
        assert!(params(Some(&many)).is_err());
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
