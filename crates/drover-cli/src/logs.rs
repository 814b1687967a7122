//! `drover logs` and `drover exec`, as kubectl has them.
//!
//! Both name a pod as `NAME`, `pod/NAME`, or `ds/NAME` (a DaemonSet: the
//! first of its pods by name, said on stderr as kubectl does). The server
//! finds the pod's node and sends the request down that node's agent
//! session (nodes have no inbound port), from whichever server holds it;
//! the output streams back to the command.
//!
//! - `logs` writes the output as it comes; with `-f` it follows until the
//!   container exits or `stop` resolves (Ctrl-C), which ends the call: the
//!   server tells the agent, which stops reading.
//! - `exec`: the command's stdout and stderr come back on ours as they
//!   come, and its exit code is returned for `drover` to exit with. With
//!   `-i` ([`exec_with_stdin`]) our stdin streams to the command, and its
//!   end closes the command's. No `-t` (no terminal handling here:
//!   `kubectl exec -it` has it). With several containers and no `-c` it runs in
//!   the first, as kubectl does.

use crate::client::{Client, ClientError};
use crate::errors::kube;
use anyhow::{bail, Result};
use drover_api::{Kind, Manifest, Pod, DEFAULT_NAMESPACE};
use drover_proto::v1 as pb;
use std::future::Future;
use std::io::Write;
use std::time::Duration;

/// What `drover logs` takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogsOptions {
    /// `POD`, `pod/POD` or `ds/NAME`.
    pub target: String,
    /// `-c`: needed when the pod has several containers.
    pub container: Option<String>,
    /// `-n`.
    pub namespace: Option<String>,
    /// `-f`.
    pub follow: bool,
    /// `--tail N` (negative: everything).
    pub tail: Option<i64>,
    /// `--since DURATION`.
    pub since: Option<Duration>,
    /// `--timestamps`.
    pub timestamps: bool,
    /// `-p`: the previous, terminated instance of the container.
    pub previous: bool,
}

/// What `drover exec` takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOptions {
    /// `POD`, `pod/POD` or `ds/NAME`.
    pub target: String,
    /// `-c`: the first container when absent.
    pub container: Option<String>,
    /// `-n`.
    pub namespace: Option<String>,
    /// The command and its arguments (after `--`).
    pub command: Vec<String>,
    /// `--timeout`: the command is killed after this long (None: the
    /// server's default, 5 minutes).
    pub timeout: Option<Duration>,
    /// `-t` with `-i` on a terminal: the command gets a terminal (its
    /// output arrives as one stream, in the terminal's raw bytes).
    pub tty: bool,
}

/// Stdin is sent in pieces of at most this many bytes.
const STDIN_PIECE: usize = 32 * 1024;

fn namespace(ns: &Option<String>) -> &str {
    ns.as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(DEFAULT_NAMESPACE)
}

/// The pod a `logs`/`exec` argument names: its name, or the first pod of a
/// DaemonSet, a Deployment or a ReplicaSet (said on `err`).
pub async fn resolve_pod(
    c: &Client,
    target: &str,
    ns: &str,
    err: &mut dyn Write,
) -> Result<String> {
    let Some((kind, name)) = target.split_once('/') else {
        if target.is_empty() {
            bail!("a pod name is required: drover logs POD (or pod/NAME, ds/NAME)");
        }
        return Ok(target.to_string());
    };
    if name.is_empty() {
        bail!("{target:?}: expected TYPE/NAME, e.g. pod/web or ds/fluentd");
    }
    let kind = Kind::parse(kind)?;
    if kind == Kind::Pod {
        return Ok(name.to_string());
    }
    if !matches!(kind, Kind::DaemonSet | Kind::Deployment | Kind::ReplicaSet) {
        bail!(
            "{target:?}: drover logs and exec take a pod (NAME or pod/NAME), a DaemonSet (ds/NAME), a Deployment (deploy/NAME) or a ReplicaSet (rs/NAME)"
        );
    }
    let owner = c
        .get_object(kind.plural(), ns, name)
        .await
        .map_err(kube)?
        .metadata()
        .uid
        .clone();
    // A Deployment's pods are those of the ReplicaSets it controls.
    let mut owners = vec![owner.clone()];
    if kind == Kind::Deployment {
        let sets = c.list_objects("replicasets", ns, "").await.map_err(kube)?;
        owners.extend(
            sets.items
                .iter()
                .filter(|m| {
                    m.metadata()
                        .controller_ref()
                        .is_some_and(|r| r.uid == owner)
                })
                .map(|m| m.metadata().uid.clone()),
        );
    }
    let pods = c.list_objects("pods", ns, "").await.map_err(kube)?;
    let mut names: Vec<String> = pods
        .items
        .iter()
        .filter(|m| {
            m.metadata()
                .controller_ref()
                .is_some_and(|r| owners.contains(&r.uid))
        })
        .map(|m| m.name().to_owned())
        .collect();
    names.sort();
    let Some(first) = names.first() else {
        bail!(
            "{}/{name} has no pods (no eligible node yet, or the controller has not created them)",
            kind.singular()
        );
    };
    writeln!(err, "Found {} pods, using pod/{first}", names.len())?;
    Ok(first.clone())
}

/// Writes one piece of output now (followed logs must show at once).
fn write_now(out: &mut dyn Write, data: &[u8]) -> Result<()> {
    out.write_all(data)?;
    out.flush()?;
    Ok(())
}

/// `drover logs`: see the module documentation. Returns when the log
/// ended, or when `stop` resolved (then without error).
pub async fn logs(
    c: &Client,
    o: &LogsOptions,
    out: &mut dyn Write,
    err: &mut dyn Write,
    stop: impl Future<Output = ()>,
) -> Result<()> {
    let mut stop = std::pin::pin!(stop);
    let ns = namespace(&o.namespace);
    let work = async {
        let pod = resolve_pod(c, &o.target, ns, err).await?;
        let req = pb::PodLogsRequest {
            namespace: ns.to_string(),
            pod,
            container: o.container.clone().unwrap_or_default(),
            follow: o.follow,
            tail: o.tail.and_then(|n| u64::try_from(n).ok()),
            since_ms: o
                .since
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            timestamps: o.timestamps,
            previous: o.previous,
            relayed: false,
        };
        c.pod_logs(req).await.map_err(kube)
    };
    let mut stream = tokio::select! {
        s = work => s?,
        _ = stop.as_mut() => return Ok(()),
    };
    loop {
        let next = tokio::select! {
            m = stream.message() => m,
            _ = stop.as_mut() => return Ok(()),
        };
        match next.map_err(|s| kube(ClientError::from(s)))? {
            Some(o) => write_now(out, &o.data)?,
            None => return Ok(()),
        }
    }
}

/// `drover exec`: runs the command and returns its exit code.
pub async fn exec(
    c: &Client,
    o: &ExecOptions,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32> {
    run_exec(c, o, None, None, out, err).await
}

/// `drover exec -i`: [`exec`] with `stdin` streamed to the command; its
/// end closes the command's stdin.
pub async fn exec_with_stdin(
    c: &Client,
    o: &ExecOptions,
    stdin: impl tokio::io::AsyncRead + Send + Unpin + 'static,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32> {
    run_exec(c, o, Some(Box::new(stdin)), None, out, err).await
}

/// `drover exec -it`: [`exec_with_stdin`] with a terminal: each size
/// received on `resizes` (the first one at once) is sent as a terminal
/// resize.
pub async fn exec_with_tty(
    c: &Client,
    o: &ExecOptions,
    stdin: impl tokio::io::AsyncRead + Send + Unpin + 'static,
    resizes: tokio::sync::mpsc::Receiver<pb::TerminalSize>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32> {
    run_exec(c, o, Some(Box::new(stdin)), Some(resizes), out, err).await
}

type Stdin = Box<dyn tokio::io::AsyncRead + Send + Unpin>;

/// Reads `stdin` into exec input messages; the end (or an error) closes
/// the command's stdin.
async fn feed(mut stdin: Stdin, tx: tokio::sync::mpsc::Sender<pb::PodExecInput>) {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; STDIN_PIECE];
    loop {
        let n = match stdin.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let m = pb::PodExecInput {
            stdin: buf[..n].to_vec(),
            ..Default::default()
        };
        if tx.send(m).await.is_err() {
            return;
        }
    }
    let close = pb::PodExecInput {
        close_stdin: true,
        ..Default::default()
    };
    let _ = tx.send(close).await;
}

async fn run_exec(
    c: &Client,
    o: &ExecOptions,
    stdin: Option<Stdin>,
    resizes: Option<tokio::sync::mpsc::Receiver<pb::TerminalSize>>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32> {
    if o.command.is_empty() {
        bail!("you must specify at least one command for the container: drover exec POD -- CMD [ARGS…]");
    }
    let ns = namespace(&o.namespace);
    let pod = resolve_pod(c, &o.target, ns, err).await?;
    let container = match &o.container {
        Some(name) => name.clone(),
        None => match c.get_object("pods", ns, &pod).await.map_err(kube)? {
            Manifest::Pod(p) => default_container(&p, err)?,
            _ => String::new(),
        },
    };
    let req = pb::PodExecRequest {
        namespace: ns.to_string(),
        pod,
        container,
        command: o.command.clone(),
        timeout_ms: o.timeout.map_or(0, |d| {
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
        }),
        relayed: false,
        stdin: stdin.is_some(),
        tty: o.tty && stdin.is_some(),
    };
    let (mut stream, feeder) = match stdin {
        None => (c.pod_exec(req).await.map_err(kube)?, None),
        Some(stdin) => {
            let (tx, rx) = tokio::sync::mpsc::channel(2);
            let resizer = resizes.map(|mut resizes| {
                let tx = tx.clone();
                AbortOnDrop(tokio::spawn(async move {
                    while let Some(size) = resizes.recv().await {
                        let m = pb::PodExecInput {
                            resize: Some(size),
                            ..Default::default()
                        };
                        if tx.send(m).await.is_err() {
                            return;
                        }
                    }
                }))
            });
            let feeder = tokio::spawn(feed(stdin, tx));
            // Ends with the call (the output): the feeder may wait on a
            // stdin that never ends.
            let stream = c.pod_exec_stream(req, rx).await;
            (stream.map_err(kube)?, Some((AbortOnDrop(feeder), resizer)))
        }
    };
    let mut code = None;
    while let Some(o) = stream
        .message()
        .await
        .map_err(|s| kube(ClientError::from(s)))?
    {
        if o.stream == 2 {
            write_now(err, &o.data)?;
        } else {
            write_now(out, &o.data)?;
        }
        if o.exit_code.is_some() {
            code = o.exit_code;
        }
    }
    drop(feeder);
    match code {
        Some(code) => Ok(code),
        None => bail!("the command's output ended without an exit code (its agent went away?)"),
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The container `exec` runs in when none is named: the only one, or the
/// first, said on `err` as kubectl does.
fn default_container(p: &Pod, err: &mut dyn Write) -> Result<String> {
    let names: Vec<&str> = p.spec.containers.iter().map(|c| c.name.as_str()).collect();
    let Some(first) = names.first() else {
        bail!("pod {} has no containers", p.metadata.name);
    };
    if names.len() > 1 {
        writeln!(
            err,
            "Defaulted container {first:?} out of: {}",
            names.join(", ")
        )?;
    }
    Ok(first.to_string())
}
