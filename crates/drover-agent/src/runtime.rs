//! [`Runtime`]: the one seam between a pod and the machine.
//!
//! The agent's sync loop (the same code for every runtime) decides *what*
//! must happen: which container of which pod to start, which to remove, when
//! a crashed container may restart. A runtime only does it, and says what
//! runs. It is kept small so that each implementation is thin:
//!
//! - the simulated runtime ([`crate::SimRuntime`]), in memory;
//! - Docker (later, through bollard): `start` = create + start a container
//!   labelled with the node, the pod's namespace, name and uid, the
//!   container's name, its attempt and its spec hash; `list` = the
//!   containers that carry this node's label (all of them, exited ones
//!   too), which is how an agent restarted adopts what already runs;
//!   `remove_pod` = stop (SIGTERM, grace, SIGKILL) and remove every
//!   container (and the pod's network sandbox) of a pod uid.
//!
//! A container instance is identified by its pod uid, its name in the pod
//! and its attempt (0 for the first run, +1 for each restart: the attempt of
//! the newest instance is the container's `restartCount`, as for the
//! kubelet). Its spec hash ([`spec_hash`]) tells the agent whether it still
//! runs the current spec.

use crate::events::{EventType, Note};
use drover_api::pod_config::VolumeFiles;
use drover_api::{Container, Pod};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// What a runtime knows of one container instance.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerInfo {
    /// The runtime's id of this instance (Docker's container id).
    pub id: String,
    /// The uid of the pod it belongs to.
    pub pod_uid: String,
    /// The pod's namespace (informational; labels on Docker).
    pub pod_namespace: String,
    /// The pod's name (informational; labels on Docker).
    pub pod_name: String,
    /// The container's name in the pod spec.
    pub container: String,
    /// 0 for the first run, +1 for every restart.
    pub attempt: u32,
    /// [`spec_hash`] of the container spec it was started from.
    pub spec_hash: String,
    /// The image it runs.
    pub image: String,
    /// The image's id, when the runtime knows it.
    pub image_id: String,
    /// Where it is in its life.
    pub state: RunState,
    /// The runtime's own view of readiness (the simulated runtime decides it
    /// by image name; Docker says true while running, and readiness probes,
    /// when they come, are ANDed with it).
    pub ready: bool,
    /// The pod's IP, when the runtime gives pods their own address.
    pub pod_ip: Option<String>,
}

/// Where a container instance is in its life.
#[derive(Debug, Clone, PartialEq)]
pub enum RunState {
    /// Created, not running yet (pulling, creating, starting).
    Creating,
    /// Running since `started_at`.
    Running {
        /// When the process started.
        started_at: SystemTime,
    },
    /// Exited.
    Exited {
        /// The process's exit code (128 + signal when killed).
        exit_code: i32,
        /// Kubernetes' reason: `Completed` (0), `Error`, `OOMKilled`, ….
        reason: String,
        /// When it started, if it ever did.
        started_at: Option<SystemTime>,
        /// When it exited.
        finished_at: SystemTime,
    },
}

impl RunState {
    /// Whether the instance is running.
    pub fn is_running(&self) -> bool {
        matches!(self, RunState::Running { .. })
    }

    /// Whether the instance exited.
    pub fn is_exited(&self) -> bool {
        matches!(self, RunState::Exited { .. })
    }
}

/// The files of a pod's `configMap`, `secret` and `projected` volumes, by
/// volume name, as the agent resolved them from the ConfigMaps and Secrets
/// the server sent.
pub type ConfigVolumes = BTreeMap<String, VolumeFiles>;

/// Everything a runtime needs to start one container of a pod. Owned, so
/// that the agent can hand it to a task.
#[derive(Debug, Clone)]
pub struct StartContainer {
    /// The pod (its spec: containers, volumes, hostNetwork, …). The
    /// container to start has its environment resolved: `envFrom` and the
    /// `configMapKeyRef`/`secretKeyRef` values are literal `env` entries
    /// (`$` escaped as `$$`), so a runtime never sees those sources.
    pub pod: Arc<Pod>,
    /// The files of the pod's `configMap`, `secret` and `projected` volumes.
    pub volumes: Arc<ConfigVolumes>,
    /// The container's index in `pod.spec.containers`.
    pub index: usize,
    /// The attempt this instance is (see [`ContainerInfo::attempt`]).
    pub attempt: u32,
    /// [`spec_hash`] of the container, to be recorded with the instance.
    pub spec_hash: String,
    /// The node's name (a Docker label; the downward API's `spec.nodeName`).
    pub node_name: String,
    /// The node's IP (the downward API's `status.hostIP`; the pod IP of a
    /// `hostNetwork` pod).
    pub host_ip: String,
    /// Where the runtime tells what it does (Pulling, Pulled, FailedMount
    /// …): the pod's events.
    pub events: EventSink,
}

impl StartContainer {
    /// The container to start.
    pub fn container(&self) -> Option<&Container> {
        self.pod.spec.containers.get(self.index)
    }

    /// Notes an event about the container being started.
    pub fn event(&self, r#type: EventType, reason: &'static str, message: String) {
        let name = self.container().map_or("", |c| c.name.as_str());
        self.events
            .send(Note::container(&self.pod, name, r#type, reason, message));
    }
}

/// Where the events of a pod's operations go, in order (the agent's sync
/// loop counts them: [`crate::events`]); the default drops them.
///
/// Notes travel boxed: a tokio channel allocates its slots 32 at a time, so
/// an idle node's channel of whole notes held 5 KiB (heaptrack of a 2,000
/// node sim), of pointers 256 bytes.
#[derive(Debug, Clone, Default)]
pub struct EventSink(Option<tokio::sync::mpsc::UnboundedSender<Box<Note>>>);

impl EventSink {
    /// A sink into `tx`.
    pub fn new(tx: tokio::sync::mpsc::UnboundedSender<Box<Note>>) -> Self {
        EventSink(Some(tx))
    }

    /// Notes `note` (dropped when nobody listens).
    pub fn send(&self, note: Note) {
        if let Some(tx) = &self.0 {
            let _ = tx.send(Box::new(note));
        }
    }
}

/// A runtime operation that failed; `reason` becomes the container's
/// waiting reason, as the kubelet reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct RuntimeError {
    /// `ErrImagePull`, `ErrImageNeverPull`, `CreateContainerError`,
    /// `RunContainerError`, or `RuntimeUnavailable` for a runtime that does
    /// not answer.
    pub reason: String,
    /// Details for `describe`.
    pub message: String,
}

impl RuntimeError {
    /// An error with this reason and message.
    pub fn new(reason: impl Into<String>, message: impl Into<String>) -> Self {
        RuntimeError {
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// The seam between a pod and the machine; see the module documentation.
///
/// Every method may be called concurrently for different pods; the agent
/// never runs two operations on the same pod at once.
pub trait Runtime: Send + Sync + 'static {
    /// The runtime and its version as the Node reports it
    /// (`nodeInfo.containerRuntimeVersion`), e.g. `sim://0.1.0` or
    /// `docker://24.0.7`.
    fn version(&self) -> String;

    /// Every container instance this runtime holds for the node, running or
    /// exited (the agent keeps the newest exited instance of each container
    /// for `lastState`, and asks to remove older ones).
    fn list(&self) -> impl Future<Output = Result<Vec<ContainerInfo>, RuntimeError>> + Send;

    /// Creates and starts one container instance. Starting an instance that
    /// already exists (same pod uid, name and attempt) is not an error.
    fn start(&self, req: StartContainer) -> impl Future<Output = Result<(), RuntimeError>> + Send;

    /// Stops (gracefully, within `grace`) and removes one container instance.
    /// Removing an instance that does not exist is not an error.
    fn remove(
        &self,
        id: &str,
        grace: Duration,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send;

    /// Stops (gracefully, within `grace`) and removes every container of a
    /// pod, and whatever the runtime holds for the pod itself.
    fn remove_pod(
        &self,
        pod_uid: &str,
        grace: Duration,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send;

    /// Stops (gracefully, within `grace`) one container instance without
    /// removing it: it stays, exited, for `lastState` and `logs
    /// --previous` (a failed liveness probe; the restart is the sync
    /// loop's). Stopping an instance that is not running is not an error.
    /// The default removes it, which loses its `lastState`: runtimes should
    /// override it.
    fn stop(
        &self,
        id: &str,
        grace: Duration,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send {
        self.remove(id, grace)
    }

    /// Rewrites the `configMap`, `secret` and `projected` volumes of a pod
    /// whose containers run (a ConfigMap or Secret changed): the files
    /// change in place, atomically, and no container restarts. A volume not
    /// mounted yet is left to the next start. The default does nothing.
    fn update_volumes(
        &self,
        pod: Arc<Pod>,
        volumes: Arc<ConfigVolumes>,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send {
        let _ = (pod, volumes);
        async { Ok(()) }
    }

    /// When the state of some container may next change on its own, if the
    /// runtime knows (the simulated runtime does; Docker does not, and the
    /// agent relists it every resync period).
    fn next_change(&self) -> Option<SystemTime> {
        None
    }

    /// Runs `cmd` inside a running container instance and waits for it (at
    /// most `timeout`): exec probes, `lifecycle.preStop` and `drover exec`.
    /// A runtime that cannot exec says so with reason `ExecNotSupported`.
    fn exec(
        &self,
        id: &str,
        cmd: Vec<String>,
        timeout: Duration,
    ) -> impl Future<Output = Result<ExecOutput, RuntimeError>> + Send {
        let _ = (id, cmd, timeout);
        async {
            Err(RuntimeError::new(
                "ExecNotSupported",
                "this runtime cannot run commands in containers",
            ))
        }
    }

    /// Starts `spec.cmd` inside a running container instance with its
    /// output streamed (`drover exec`, `kubectl exec [-i] [-t]`): the
    /// session's events are stdout and stderr as they come, then the exit
    /// code; its input carries stdin (when `spec.stdin`), terminal resizes
    /// (when `spec.tty`) and the close of stdin (also when the input is
    /// dropped). Dropping the session ends the command's streams (Docker
    /// cannot kill an exec: the command loses its stdin and output, and a
    /// TTY's process gets SIGHUP). The default runs [`Runtime::exec`] and
    /// refuses stdin and TTY (`ExecNotSupported`).
    fn exec_session(
        &self,
        id: &str,
        spec: ExecSpec,
    ) -> impl Future<Output = Result<ExecSession, RuntimeError>> + Send {
        async move {
            if spec.stdin || spec.tty {
                return Err(RuntimeError::new(
                    "ExecNotSupported",
                    "this runtime cannot attach stdin or a terminal to a command",
                ));
            }
            let o = self.exec(id, spec.cmd, spec.timeout).await?;
            Ok(ExecSession::finished(o))
        }
    }

    /// The output (stdout and stderr, interleaved as written) of one
    /// container instance, as a stream of chunks: `drover logs`. With
    /// `follow` the stream stays open while the container runs.
    fn logs(
        &self,
        id: &str,
        opts: LogOptions,
    ) -> impl Future<Output = Result<LogStream, RuntimeError>> + Send {
        let _ = (id, opts);
        async {
            Err(RuntimeError::new(
                "LogsNotSupported",
                "this runtime keeps no container logs",
            ))
        }
    }
}

/// What a command run in a container ([`Runtime::exec`]) gave.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecOutput {
    /// Its exit code (`-1` when it was killed at the timeout).
    pub exit_code: i32,
    /// Its stdout and stderr, interleaved, truncated to a few KiB.
    pub output: Vec<u8>,
}

/// A command to start with [`Runtime::exec_session`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecSpec {
    /// The command and its arguments.
    pub cmd: Vec<String>,
    /// Attach its stdin to the session's input.
    pub stdin: bool,
    /// Allocate a terminal (stdout and stderr are then one stream).
    pub tty: bool,
    /// The session ends (exit code -1) after this long.
    pub timeout: Duration,
}

/// Input for a running [`ExecSession`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecInput {
    /// Bytes for the command's stdin.
    Stdin(Vec<u8>),
    /// The client's terminal has this size now.
    Resize {
        /// Columns.
        width: u16,
        /// Rows.
        height: u16,
    },
    /// No more stdin.
    CloseStdin,
}

/// What a running [`ExecSession`] gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecEvent {
    /// Output on stdout (or the terminal).
    Stdout(Vec<u8>),
    /// Output on stderr (never with a terminal).
    Stderr(Vec<u8>),
    /// The command ended with this code (-1: at the timeout); the last event.
    Exit(i32),
}

/// How many [`ExecEvent`]s and [`ExecInput`]s a session queues: a runtime
/// stops reading the command's output while its consumer is behind.
pub const EXEC_QUEUE: usize = 4;

/// A command running in a container ([`Runtime::exec_session`]).
#[derive(Debug)]
pub struct ExecSession {
    /// The command's input (bounded: [`EXEC_QUEUE`]); dropping it closes stdin.
    pub input: tokio::sync::mpsc::Sender<ExecInput>,
    /// Its output, then its exit code; an error ends it.
    pub events: tokio::sync::mpsc::Receiver<Result<ExecEvent, RuntimeError>>,
}

impl ExecSession {
    /// The session of a command that already ran: its output (on stdout),
    /// then its exit code; input goes nowhere.
    pub fn finished(o: ExecOutput) -> ExecSession {
        let (input, _) = tokio::sync::mpsc::channel(1);
        let (tx, events) = tokio::sync::mpsc::channel(2);
        if !o.output.is_empty() {
            let _ = tx.try_send(Ok(ExecEvent::Stdout(o.output)));
        }
        let _ = tx.try_send(Ok(ExecEvent::Exit(o.exit_code)));
        ExecSession { input, events }
    }
}

/// Which part of a container's log to read ([`Runtime::logs`]), as
/// `drover logs` asks for it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogOptions {
    /// Keep the stream open and send new output as it comes (`-f`).
    pub follow: bool,
    /// Only the last N lines (`--tail N`).
    pub tail: Option<u64>,
    /// Only output written at or after this time (`--since`).
    pub since: Option<SystemTime>,
    /// Prefix each line with its RFC 3339 time (`--timestamps`).
    pub timestamps: bool,
}

/// A container's log as a stream of chunks of bytes.
pub type LogStream = std::pin::Pin<
    Box<dyn tokio_stream::Stream<Item = Result<Vec<u8>, RuntimeError>> + Send + 'static>,
>;

/// A stable hash of a container's spec (FNV-1a, 64 bits, of its JSON), as
/// 16 hex digits. It changes when anything in the container spec changes,
/// and is the same across agent builds and machines.
pub fn spec_hash(container: &Container) -> String {
    let json = serde_json::to_vec(container).unwrap_or_default();
    format!("{:016x}", fnv1a(&json))
}

/// FNV-1a, 64 bits.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_hash_is_stable_and_follows_the_spec() {
        let c = Container {
            name: "c".into(),
            image: "busybox".into(),
            ..Default::default()
        };
        let h = spec_hash(&c);
        assert_eq!(h.len(), 16);
        assert_eq!(h, spec_hash(&c.clone()));
        let mut d = c.clone();
        d.image = "busybox:2".into();
        assert_ne!(h, spec_hash(&d));
        // FNV-1a's published test vector.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
