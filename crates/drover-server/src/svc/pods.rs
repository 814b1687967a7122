//! `Pods` (`Pods.Logs`, `Pods.Exec`, `Pods.Locate`): resolves the pod
//! (namespace and name -> node, uid, container), then serves the stream
//! from an agent session held here ([`crate::sessions`]), or relays it from
//! the member that holds the session.
//!
//! **Which member holds a node's session.** A member that does not hold it
//! asks every other member at once (`Pods.Locate`, join token) and relays
//! the call to one that says yes (`relayed` set, so a call is relayed at
//! most once). Nothing is kept in sync for this: a session is where it is
//! when the call comes, and a cluster has a handful of members. (The
//! leader's heartbeat relay does not say which follower heard a node, and a
//! follower would still need a second hop through the leader.)
//!
//! **Input.** `ExecStream` (and `kubectl exec -i/-t` through
//! [`crate::kapi::exec`]) carries the client's stdin, terminal resizes and
//! the close of stdin to the agent ([`crate::sessions::RemoteInput`]), or to
//! the member that holds the session (relayed as an `ExecStream` of its
//! own). The end of the client's input closes stdin; the command's end or
//! the client's going away ends the whole exec (the agent is told to stop).
//!
//! Who may call: `Logs`, `Exec` and `ExecStream` need the admin token;
//! `Locate` is between members (join token).

use crate::api::Objects;
use crate::auth;
use crate::ctx::Ctx;
use crate::sessions::{end_status, Piece, RemoteStream};
use crate::svc::{admin, authorize, reader, Access};
use drover_api::{Kind, Manifest, Pod};
use drover_proto::reason::Reason;
use drover_proto::v1::{self as pb, pods_client::PodsClient, pods_server};
use futures_util::{Stream, StreamExt};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

/// A client's input for an exec: stdin, resizes, the close of stdin (the
/// `start` of a message is ignored).
pub(crate) type Input = Pin<Box<dyn Stream<Item = pb::PodExecInput> + Send>>;

/// How long asking the other members where a session is may take.
const LOCATE_TIMEOUT: Duration = Duration::from_secs(2);

/// An exec without a timeout is killed after this long.
const EXEC_TIMEOUT: Duration = Duration::from_secs(300);

/// A pod resolved for logs or exec.
struct Target {
    node: String,
    uid: String,
    /// `namespace/name`.
    pod: String,
    container: String,
}

/// The container a request names, or the pod's only one.
pub(crate) fn container_of(pod: &Pod, asked: &str) -> Result<String, Status> {
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
            _ => Err(Reason::BadRequest.status(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                names.join(" ")
            ))),
        };
    }
    if names.contains(&asked) {
        Ok(asked.to_string())
    } else {
        Err(Reason::BadRequest.status(format!(
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
                stdin: r.stdin,
                tty: r.tty,
            }),
        }
    }

    /// Calls the same RPC on another member, marked as relayed (an exec
    /// with input as an `ExecStream`, its input pulled from `input`).
    async fn relay(
        &self,
        ch: tonic::transport::Channel,
        token: Option<&str>,
        input: Option<&SharedInput>,
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
                match input {
                    None => c.exec(req(r, auth)).await?,
                    Some(input) => {
                        let first = pb::PodExecInput {
                            start: Some(r),
                            ..Default::default()
                        };
                        let rest = pull(input.clone());
                        let stream = futures_util::stream::once(async move { first }).chain(rest);
                        c.exec_stream(req(stream, auth)).await?
                    }
                }
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

/// An exec's input while the call looks for the member to relay to: each
/// attempt pulls from it.
type SharedInput = Arc<tokio::sync::Mutex<Input>>;

/// The messages of a shared input as a stream, until the stream is dropped
/// (the relayed call ended or failed) or the input ends.
fn pull(input: SharedInput) -> ReceiverStream<pb::PodExecInput> {
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                m = async { input.lock().await.next().await } => m,
                _ = tx.closed() => return,
            };
            let Some(m) = next else {
                return;
            };
            if tx.send(m).await.is_err() {
                return;
            }
        }
    });
    ReceiverStream::new(rx)
}

impl PodsSvc {
    async fn target(&self, namespace: &str, name: &str, container: &str) -> Result<Target, Status> {
        if name.is_empty() {
            return Err(Reason::BadRequest.status("pod: a pod name is required"));
        }
        let pod = match self.objects.get(Kind::Pod, namespace, name).await? {
            Manifest::Pod(p) => p,
            _ => return Err(Reason::InternalError.status(format!("pods {name:?} is not a pod"))),
        };
        let ns = pod.metadata.namespace.clone();
        if pod.spec.node_name.is_empty() {
            return Err(Reason::BadRequest.status(format!(
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
        input: Option<Input>,
    ) -> Result<Response<Output>, Status> {
        let sessions = &self.ctx.sessions;
        let exec = matches!(call, Call::Exec(_));
        if let Some(stream) = sessions
            .open(&t.node, exec, |id| call.agent_msg(&t, id))
            .await?
        {
            tracing::debug!(node = %t.node, pod = %t.pod, container = %t.container, "log/exec stream opened");
            return Ok(Response::new(pipe_local(stream, t.node, input)));
        }
        if call.relayed() {
            return Err(Reason::NoSession.status("this member holds no session of the node"));
        }
        let input: Option<SharedInput> = input.map(|i| Arc::new(tokio::sync::Mutex::new(i)));
        let (holders, silent) = self.locate(&t.node).await;
        for (member, ch) in holders {
            match call.relay(ch, token.as_deref(), input.as_ref()).await {
                Ok(upstream) => return Ok(Response::new(pipe_relayed(upstream))),
                Err(s) if Reason::of(&s) == Some(Reason::NoSession) => {
                    tracing::debug!(node = %t.node, member = format_args!("{member:016x}"), "the session moved");
                }
                Err(s) => return Err(s),
            }
        }
        let node = &t.node;
        Err(Reason::NoSession.status(if silent.is_empty() {
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

    /// Runs an exec for a caller already authorised (as an admin), with its
    /// input if any. `token` is passed on when the call is relayed.
    pub(crate) async fn start_exec(
        &self,
        r: pb::PodExecRequest,
        token: Option<String>,
        input: Option<Input>,
    ) -> Result<Response<Output>, Status> {
        if r.command.is_empty() || r.command[0].is_empty() {
            return Err(Reason::BadRequest
                .status("command: a command to run is required (drover exec POD -- CMD ARGS…)"));
        }
        let t = self.target(&r.namespace, &r.pod, &r.container).await?;
        self.serve(t, Call::Exec(r), token, input).await
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
                let node = node.to_string();
                async move {
                    let ch = ch.ok()?;
                    let mut r = Request::new(pb::LocateRequest { node });
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

/// Streams a session's output to the client, and the client's input (if
/// any) to the session; the client going away drops the stream, which
/// cancels it on the agent. The end of the input closes stdin; the end of
/// the output ends both.
fn pipe_local(mut stream: RemoteStream, node: String, input: Option<Input>) -> Output {
    let (tx, rx) = mpsc::channel(4);
    let input = input.map(|i| (stream.input(), i));
    tokio::spawn(async move {
        let output = async {
            loop {
                let out = match stream.next().await {
                    Ok(Piece::Data(data, which)) => Ok(pb::PodOutput {
                        data,
                        exit_code: None,
                        stream: which,
                    }),
                    Ok(Piece::End(e)) if e.error.is_empty() => {
                        if let Some(code) = e.exit_code {
                            let _ = tx
                                .send(Ok(pb::PodOutput {
                                    exit_code: Some(code),
                                    ..Default::default()
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
        };
        let pump = async {
            if let Some((remote, mut input)) = input {
                let mut closed = false;
                while let Some(mut m) = input.next().await {
                    if closed {
                        // Nothing after the close of stdin but resizes.
                        m.stdin.clear();
                        m.close_stdin = false;
                    }
                    closed |= m.close_stdin;
                    if remote.send(m).await.is_err() {
                        break;
                    }
                }
                if !closed {
                    let close = pb::PodExecInput {
                        close_stdin: true,
                        ..Default::default()
                    };
                    let _ = remote.send(close).await;
                }
            }
            std::future::pending::<()>().await;
        };
        tokio::select! {
            _ = output => {}
            _ = pump => {}
            _ = tx.closed() => {}
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
        reader(&self.ctx, &req, "logs")?;
        let token = auth::token_of(&req).map(str::to_string);
        let r = req.into_inner();
        let t = self.target(&r.namespace, &r.pod, &r.container).await?;
        self.serve(t, Call::Logs(r), token, None).await
    }

    type ExecStream = Output;

    async fn exec(
        &self,
        req: Request<pb::PodExecRequest>,
    ) -> Result<Response<Self::ExecStream>, Status> {
        admin(&self.ctx, &req, "exec")?;
        let token = auth::token_of(&req).map(str::to_string);
        let r = req.into_inner();
        if r.stdin || r.tty {
            return Err(Reason::BadRequest
                .status("stdin and tty need Pods.ExecStream, which carries the input"));
        }
        self.start_exec(r, token, None).await
    }

    type ExecStreamStream = Output;

    async fn exec_stream(
        &self,
        req: Request<Streaming<pb::PodExecInput>>,
    ) -> Result<Response<Self::ExecStreamStream>, Status> {
        admin(&self.ctx, &req, "exec")?;
        let token = auth::token_of(&req).map(str::to_string);
        let mut input = req.into_inner();
        let Some(r) = input.message().await?.and_then(|m| m.start) else {
            return Err(Reason::BadRequest
                .status("the first message of an ExecStream must carry the request (start)"));
        };
        // The input ends with the client's stream, or at its first error.
        let rest = tokio_stream::StreamExt::map_while(input, Result::ok);
        self.start_exec(r, token, Some(Box::pin(rest))).await
    }

    async fn locate(
        &self,
        req: Request<pb::LocateRequest>,
    ) -> Result<Response<pb::LocateResponse>, Status> {
        authorize(&self.ctx, &req, Access::Member, "locating an agent session")?;
        let held = self.ctx.sessions.holds(&req.into_inner().node);
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
}
