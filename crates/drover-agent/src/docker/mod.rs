//! [`DockerRuntime`]: the [`Runtime`] over a Docker engine, through bollard.
//!
//! - **Connect.** `--docker-host` / `DOCKER_HOST` (`unix:///var/run/docker.sock`
//!   by default, `tcp://` too); the API version is negotiated, so engines
//!   that speak 1.41 (Docker 20.10) work.
//! - **Pods.** Each pod that does not use `hostNetwork` gets a sandbox
//!   container (`drover_<ns>_<pod>_POD_<n>`, running a tiny hand-assembled
//!   `pause` program, in an image the agent builds itself) that owns the pod's
//!   network and IPC namespaces and its port bindings; the pod's containers
//!   join it (`NetworkMode: container:<sandbox>`), so they reach each other
//!   on localhost, and its IP is the pod IP. If the sandbox dies, the next
//!   container start makes a new one and stops the containers left in the
//!   old one, so that the agent restarts them in the new.
//! - **Containers.** `drover_<ns>_<pod>_<container>_<attempt>`, mapped from
//!   the spec as the kubelet does (env with `fieldRef`, ports, host
//!   namespaces, hostPath/emptyDir volumes, limits, securityContext); every one
//!   carries the `io.drover.*` labels ([`LABEL_NODE`] …) that [`Runtime::list`]
//!   reads back, which is how a restarted agent adopts what runs.
//! - **Images.** `imagePullPolicy` `Never`: a missing image is
//!   `ErrImageNeverPull`. `IfNotPresent`: pulled when missing. `Always`:
//!   pulled, and a failed pull fails the start with `ErrImagePull` and the
//!   engine's message, even with a copy on the node, as the kubelet does
//!   (`images.rs`); an edge node cut off from its registry runs the agent
//!   with `--no-pull`, which runs local copies whatever the policy.
//! - **Stop.** `docker stop` with the pod's grace period (the image's stop
//!   signal, SIGTERM by default; SIGKILL after the grace), then remove.
//!
//! Inside: `config` maps a container spec (pure), `volumes` prepares
//! hostPath and emptyDir volumes, `images` applies the pull policy,
//! `sandbox` and `pause` make the pod sandbox, `streams` runs exec and
//! logs, `state` reads the engine's container state.
//!
//! The agent checks hostPath volumes and creates emptyDirs in its own view
//! of the file system: it must run on the engine's host.

mod atomic;
mod config;
mod images;
mod pause;
mod sandbox;
mod state;
mod streams;
mod volumes;

use crate::runtime::{
    ContainerInfo, ExecOutput, LogOptions, LogStream, Runtime, RuntimeError, StartContainer,
};
use bollard::errors::Error as EngineError;
use bollard::models::{ContainerCreateBody, ContainerState, ContainerSummary};
use bollard::query_parameters::{
    CreateContainerOptions, ListContainersOptions, RemoveContainerOptions, StopContainerOptions,
};
use bollard::Docker;
use drover_api::Pod;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// Label: the node the container belongs to (what [`Runtime::list`] filters on).
pub const LABEL_NODE: &str = "io.drover.node";
/// Label: the pod's namespace.
pub const LABEL_NAMESPACE: &str = "io.drover.pod.namespace";
/// Label: the pod's name.
pub const LABEL_POD: &str = "io.drover.pod.name";
/// Label: the pod's uid.
pub const LABEL_UID: &str = "io.drover.pod.uid";
/// Label: the container's name in the pod (absent on sandboxes).
pub const LABEL_CONTAINER: &str = "io.drover.container.name";
/// Label: the attempt (0, then +1 per restart; the sandbox's generation on
/// sandboxes).
pub const LABEL_ATTEMPT: &str = "io.drover.attempt";
/// Label: the spec hash the container was started from.
pub const LABEL_HASH: &str = "io.drover.container.hash";
/// Label: `container` or `sandbox`.
pub const LABEL_ROLE: &str = "io.drover.role";
/// Label: the pod's `terminationGracePeriodSeconds`, which bounds the stop
/// of a pod the agent no longer knows.
pub const LABEL_GRACE: &str = "io.drover.pod.grace";

/// The default engine address.
pub const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";

/// How to reach the engine and where to keep pod files.
#[derive(Debug, Clone)]
pub struct DockerOptions {
    /// `--docker-host`: `unix:///path`, a plain socket path, `tcp://host:port`
    /// or `http://host:port`; `None` takes `DOCKER_HOST`, else
    /// [`DEFAULT_HOST`].
    pub host: Option<String>,
    /// The node's name: the [`LABEL_NODE`] of its containers.
    pub node_name: String,
    /// The agent's data dir: emptyDir volumes live under `<data_dir>/pods`.
    pub data_dir: PathBuf,
    /// How long connecting (ping, version negotiation) may take.
    pub connect_timeout: Duration,
    /// `--no-pull` (air-gapped nodes): never pull; an image present on the
    /// node runs whatever its `imagePullPolicy`, an absent one is
    /// `ErrImageNeverPull`. Without it, the kubelet's rules: `Always`
    /// whose pull fails is `ErrImagePull`, local copy or not.
    pub no_pull: bool,
}

impl DockerOptions {
    /// Options for `node_name`, keeping pod files under `data_dir`.
    pub fn new(node_name: impl Into<String>, data_dir: impl Into<PathBuf>) -> Self {
        DockerOptions {
            host: None,
            node_name: node_name.into(),
            data_dir: data_dir.into(),
            connect_timeout: Duration::from_secs(5),
            no_pull: false,
        }
    }

    /// The engine address these options name.
    pub fn address(&self) -> String {
        let host = self
            .host
            .clone()
            .filter(|h| !h.is_empty())
            .or_else(|| std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty()))
            .unwrap_or_else(|| DEFAULT_HOST.to_string());
        if host.starts_with('/') {
            format!("unix://{host}")
        } else {
            host
        }
    }
}

/// What the runtime remembers of a container between lists: its inspected
/// state, valid while the list shows the same state.
struct Cached {
    summary_state: String,
    state: ContainerState,
}

/// The Docker runtime of one node; see the module documentation.
pub struct DockerRuntime {
    docker: Docker,
    address: String,
    node: String,
    engine_version: String,
    arch: String,
    node_cpus: u64,
    node_memory: u64,
    pods_dir: PathBuf,
    pause_image: tokio::sync::OnceCell<String>,
    cache: Mutex<HashMap<String, Cached>>,
    /// `uid/container/attempt` of the instances being started now.
    starting: Mutex<HashSet<String>>,
    /// [`DockerOptions::no_pull`].
    no_pull: bool,
}

impl std::fmt::Debug for DockerRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerRuntime")
            .field("address", &self.address)
            .field("node", &self.node)
            .field("engine_version", &self.engine_version)
            .finish_non_exhaustive()
    }
}

/// Maps an engine error: a refusal keeps `reason` and the engine's
/// message; an engine that does not answer is `RuntimeUnavailable`.
fn engine(reason: &str, what: &str, e: EngineError) -> RuntimeError {
    match e {
        EngineError::DockerResponseServerError { message, .. } => {
            RuntimeError::new(reason, format!("{what}: {message}"))
        }
        EngineError::DockerStreamError { error } => {
            RuntimeError::new(reason, format!("{what}: {error}"))
        }
        e @ (EngineError::RequestTimeoutError
        | EngineError::IOError { .. }
        | EngineError::HyperResponseError { .. }
        | EngineError::HyperLegacyError { .. }
        | EngineError::SocketNotFoundError(_)
        | EngineError::HttpClientError { .. }) => RuntimeError::new(
            "RuntimeUnavailable",
            format!("{what}: the Docker engine does not answer: {e}"),
        ),
        e => RuntimeError::new(reason, format!("{what}: {e}")),
    }
}

fn status_of(e: &EngineError) -> Option<u16> {
    match e {
        EngineError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// `drover_<ns>_<pod>_<container>_<attempt>`.
pub fn container_name(namespace: &str, pod: &str, container: &str, attempt: u32) -> String {
    format!("drover_{namespace}_{pod}_{container}_{attempt}")
}

/// `drover_<ns>_<pod>_POD_<n>`.
pub fn sandbox_name(namespace: &str, pod: &str, n: u32) -> String {
    format!("drover_{namespace}_{pod}_POD_{n}")
}

fn label_filter(pairs: &[(&str, &str)]) -> HashMap<String, Vec<String>> {
    let mut f = HashMap::new();
    f.insert(
        "label".to_string(),
        pairs.iter().map(|(k, v)| format!("{k}={v}")).collect(),
    );
    f
}

fn label<'a>(s: &'a ContainerSummary, key: &str) -> Option<&'a str> {
    s.labels.as_ref()?.get(key).map(String::as_str)
}

fn summary_ip(s: &ContainerSummary) -> Option<String> {
    s.network_settings
        .as_ref()?
        .networks
        .as_ref()?
        .values()
        .filter_map(|n| n.ip_address.clone())
        .find(|ip| !ip.is_empty())
}

fn starting_key(uid: &str, container: &str, attempt: u32) -> String {
    format!("{uid}/{container}/{attempt}")
}

/// What [`DockerRuntime::inputs`] completes into [`config::Inputs`].
struct Inputs<'a> {
    req: &'a StartContainer,
    image_user: &'a str,
    labels: HashMap<String, String>,
    pod_ip: &'a str,
    sandbox: Option<&'a str>,
    mounts: Vec<bollard::models::Mount>,
}

/// Removes its key from the runtime's `starting` set when dropped.
struct Starting<'a> {
    set: &'a Mutex<HashSet<String>>,
    key: String,
}

impl Drop for Starting<'_> {
    fn drop(&mut self) {
        self.set
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
    }
}

impl DockerRuntime {
    /// Connects to the engine (ping and API version negotiation within
    /// `opts.connect_timeout`) and reads its version and resources.
    pub async fn connect(opts: DockerOptions) -> Result<DockerRuntime, RuntimeError> {
        let address = opts.address();
        let unavailable = |e: String| {
            RuntimeError::new(
                "RuntimeUnavailable",
                format!("cannot reach the Docker engine at {address}: {e}"),
            )
        };
        let docker = Docker::connect_with_host(&address).map_err(|e| unavailable(e.to_string()))?;
        let docker = tokio::time::timeout(opts.connect_timeout, docker.negotiate_version())
            .await
            .map_err(|_| unavailable(format!("no answer within {:?}", opts.connect_timeout)))?
            .map_err(|e| unavailable(e.to_string()))?;
        let version = tokio::time::timeout(opts.connect_timeout, docker.version())
            .await
            .map_err(|_| unavailable(format!("no answer within {:?}", opts.connect_timeout)))?
            .map_err(|e| unavailable(e.to_string()))?;
        let info = tokio::time::timeout(opts.connect_timeout, docker.info())
            .await
            .ok()
            .and_then(Result::ok);
        let node_cpus = info
            .as_ref()
            .and_then(|i| i.ncpu)
            .and_then(|n| u64::try_from(n).ok())
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u64));
        let node_memory = info
            .as_ref()
            .and_then(|i| i.mem_total)
            .and_then(|n| u64::try_from(n).ok())
            .unwrap_or(0);
        Ok(DockerRuntime {
            docker,
            address,
            node: opts.node_name,
            engine_version: version.version.unwrap_or_else(|| "unknown".into()),
            arch: version
                .arch
                .unwrap_or_else(|| crate::node::arch().to_string()),
            node_cpus,
            node_memory,
            pods_dir: opts.data_dir.join("pods"),
            pause_image: tokio::sync::OnceCell::new(),
            cache: Mutex::new(HashMap::new()),
            starting: Mutex::new(HashSet::new()),
            no_pull: opts.no_pull,
        })
    }

    /// The engine's address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The engine's version, e.g. `20.10.24`.
    pub fn engine_version(&self) -> &str {
        &self.engine_version
    }

    /// The engine's CPUs and memory (bytes; 0 when unknown).
    pub fn capacity(&self) -> (u64, u64) {
        (self.node_cpus, self.node_memory)
    }

    /// The bollard client, for callers that need more than the trait.
    pub fn client(&self) -> &Docker {
        &self.docker
    }

    fn labels(&self, pod: &Pod, role: &str) -> HashMap<String, String> {
        let mut l = HashMap::new();
        l.insert(LABEL_NODE.to_string(), self.node.clone());
        l.insert(LABEL_NAMESPACE.to_string(), pod.metadata.namespace.clone());
        l.insert(LABEL_POD.to_string(), pod.metadata.name.clone());
        l.insert(LABEL_UID.to_string(), pod.metadata.uid.clone());
        l.insert(LABEL_ROLE.to_string(), role.to_string());
        let grace = pod
            .spec
            .termination_grace_period_seconds
            .unwrap_or(30)
            .max(0);
        l.insert(LABEL_GRACE.to_string(), grace.to_string());
        l
    }

    /// Containers of this node with these labels, in every state.
    async fn find(&self, pairs: &[(&str, &str)]) -> Result<Vec<ContainerSummary>, RuntimeError> {
        let mut all = vec![(LABEL_NODE, self.node.as_str())];
        all.extend_from_slice(pairs);
        let opts = ListContainersOptions {
            all: true,
            filters: Some(label_filter(&all)),
            ..Default::default()
        };
        self.docker
            .list_containers(Some(opts))
            .await
            .map_err(|e| engine("RuntimeUnavailable", "list containers", e))
    }

    /// Creates a container named `name`; when a container of another pod
    /// (an older pod of the same namespace and name) still holds the name,
    /// under `name_<uid prefix>`.
    async fn create(
        &self,
        name: &str,
        uid: &str,
        body: ContainerCreateBody,
        reason: &str,
    ) -> Result<String, RuntimeError> {
        let mut name = name.to_string();
        for round in 0..2 {
            let opts = CreateContainerOptions {
                name: Some(name.clone()),
                ..Default::default()
            };
            match self.docker.create_container(Some(opts), body.clone()).await {
                Ok(r) => return Ok(r.id),
                Err(e) if round == 0 && status_of(&e) == Some(409) => {
                    let short: String = uid.chars().filter(|c| *c != '-').take(8).collect();
                    name = format!("{name}_{short}");
                }
                Err(e) => return Err(engine(reason, &format!("create container {name}"), e)),
            }
        }
        Err(RuntimeError::new(
            reason,
            format!("create container {name}: the name is in use"),
        ))
    }

    /// Stops a container: its stop signal (SIGTERM unless the image says
    /// otherwise), then SIGKILL after `grace`. Returns whether it exists.
    async fn stop_only(&self, id: &str, grace: Duration) -> Result<bool, RuntimeError> {
        let secs = i32::try_from(grace.as_secs() + u64::from(grace.subsec_nanos() > 0))
            .unwrap_or(i32::MAX);
        let patient = self
            .docker
            .clone()
            .with_timeout(grace + Duration::from_secs(120));
        let stop = StopContainerOptions {
            t: Some(secs),
            ..Default::default()
        };
        match patient.stop_container(id, Some(stop)).await {
            Ok(()) => Ok(true),
            Err(e) if status_of(&e) == Some(404) => Ok(false),
            Err(e) => Err(engine(
                "StopContainerError",
                &format!("stop container {id}"),
                e,
            )),
        }
    }

    /// Stops (SIGTERM, `grace`, SIGKILL) and removes a container; one that
    /// is already gone is fine. With no grace it is one forced removal
    /// (SIGKILL and remove, what `docker rm -f` does) instead of a stop
    /// with a zero timeout and then a removal: one call to the engine, not
    /// two, and no wait for the stop's own exit event.
    async fn stop_and_remove(&self, id: &str, grace: Duration) -> Result<(), RuntimeError> {
        if !grace.is_zero() {
            match self.stop_only(id, grace).await {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                Err(e) => tracing::warn!(node = %self.node, "{e}"),
            }
        }
        let rm = RemoveContainerOptions {
            force: true,
            v: true,
            ..Default::default()
        };
        let r = match self.docker.remove_container(id, Some(rm)).await {
            Ok(()) => Ok(()),
            // Gone, or being removed already.
            Err(e) if matches!(status_of(&e), Some(404) | Some(409)) => Ok(()),
            Err(e) => Err(engine(
                "RemoveContainerError",
                &format!("remove container {id}"),
                e,
            )),
        };
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        r
    }

    fn inputs<'a>(&self, i: Inputs<'a>) -> config::Inputs<'a> {
        config::Inputs {
            pod: &i.req.pod,
            index: i.req.index,
            node_name: &i.req.node_name,
            host_ip: &i.req.host_ip,
            pod_ip: i.pod_ip,
            sandbox: i.sandbox,
            image: i.req.container().map_or("", |c| c.image.as_str()),
            image_user: i.image_user,
            node_cpus: self.node_cpus,
            node_memory: self.node_memory,
            labels: i.labels,
            mounts: i.mounts,
        }
    }

    /// `sandboxes`: the pod's sandboxes as just listed.
    async fn start_new(
        &self,
        req: &StartContainer,
        sandboxes: Vec<ContainerSummary>,
    ) -> Result<(), RuntimeError> {
        let pod = &req.pod;
        let uid = pod.metadata.uid.as_str();
        let spec = req.container().ok_or_else(|| {
            RuntimeError::new(
                "CreateContainerError",
                format!("the pod has no container #{}", req.index),
            )
        })?;
        let policy = spec
            .image_pull_policy
            .clone()
            .unwrap_or_else(|| drover_api::defaults::default_image_pull_policy(&spec.image));
        let image = self.ensure_image(&spec.image, &policy, req).await?;
        let image_user = image
            .config
            .as_ref()
            .and_then(|c| c.user.clone())
            .unwrap_or_default();
        let mut labels = self.labels(pod, "container");
        labels.insert(LABEL_CONTAINER.to_string(), spec.name.clone());
        labels.insert(LABEL_ATTEMPT.to_string(), req.attempt.to_string());
        labels.insert(LABEL_HASH.to_string(), req.spec_hash.clone());
        let config_error =
            |e: config::ConfigError| RuntimeError::new("CreateContainerConfigError", e.0);
        let inputs = |pod_ip, sandbox, mounts| Inputs {
            req,
            image_user: &image_user,
            labels: labels.clone(),
            pod_ip,
            sandbox,
            mounts,
        };
        // Refuse a spec that cannot run before making anything for it.
        let placeholder = (!pod.spec.host_network).then_some("");
        config::container(self.inputs(inputs("", placeholder, Vec::new())))
            .map_err(config_error)?;
        let (root, p, s) = (self.pods_dir.clone(), pod.clone(), spec.clone());
        let files = req.volumes.clone();
        let (mounts, volume_warnings) =
            tokio::task::spawn_blocking(move || volumes::prepare(&root, &p, &s, &files))
                .await
                .map_err(|e| RuntimeError::new("CreateContainerConfigError", e.to_string()))?
                .map_err(|e| {
                    let mut note = crate::events::Note::container(
                        pod,
                        &spec.name,
                        crate::events::EventType::Warning,
                        crate::events::reason::FAILED_MOUNT,
                        format!("MountVolume.SetUp failed: {}", e.0),
                    );
                    note.field_path.clear(); // the pod's event, as the kubelet's
                    req.events.send(note);
                    RuntimeError::new("CreateContainerConfigError", e.0)
                })?;
        let grace = Duration::from_secs(
            u64::try_from(pod.spec.termination_grace_period_seconds.unwrap_or(30)).unwrap_or(0),
        );
        // A new sandbox starts while the container that joins it is
        // created (Docker lets a container name another's network before
        // that one runs), unless the container's environment needs the
        // pod's IP, which only a running sandbox has.
        let mut starting_sandbox = None;
        let (sandbox, pod_ip) = if pod.spec.host_network {
            if req.index == 0 && req.attempt == 0 {
                for w in config::pod_warnings(pod) {
                    tracing::warn!(node = %self.node, "{w}");
                }
            }
            (None, req.host_ip.clone())
        } else if config::needs_pod_ip(spec) {
            let (id, ip) = self.ensure_sandbox(req, grace, sandboxes).await?;
            (Some(id), ip)
        } else {
            match self.sandbox(req, grace, sandboxes).await? {
                sandbox::Sandbox::Running { id, ip } => (Some(id), ip),
                sandbox::Sandbox::Created { id, name } => {
                    starting_sandbox = Some((id.clone(), name));
                    (Some(id), String::new())
                }
            }
        };
        let mapped = config::container(self.inputs(inputs(&pod_ip, sandbox.as_deref(), mounts)))
            .map_err(config_error)?;
        if req.attempt == 0 {
            for w in mapped.warnings.iter().chain(&volume_warnings) {
                tracing::warn!(node = %self.node, "{w}");
            }
        }
        let name = container_name(
            &pod.metadata.namespace,
            &pod.metadata.name,
            &spec.name,
            req.attempt,
        );
        let id = match &starting_sandbox {
            None => {
                self.create(&name, uid, mapped.body, "CreateContainerError")
                    .await?
            }
            Some((sid, sname)) => {
                let (started, created) = tokio::join!(
                    self.start_sandbox(sid, sname),
                    self.create(&name, uid, mapped.body, "CreateContainerError"),
                );
                match (started, created) {
                    (Ok(()), Ok(id)) => id,
                    (Err(e), created) => {
                        if let Ok(id) = created {
                            let _ = self.stop_and_remove(&id, Duration::ZERO).await;
                        }
                        return Err(e);
                    }
                    (Ok(()), Err(e)) => return Err(e),
                }
            }
        };
        if let Err(e) = self.docker.start_container(&id, None).await {
            let _ = self.stop_and_remove(&id, Duration::ZERO).await;
            return Err(engine(
                "RunContainerError",
                &format!("start container {name}"),
                e,
            ));
        }
        Ok(())
    }

    /// The inspected state of a listed container, from the cache while the
    /// list shows the same state.
    async fn state_of(&self, s: &ContainerSummary) -> Option<ContainerState> {
        let id = s.id.as_deref()?;
        let summary_state = s
            .state
            .as_ref()
            .map(|st| st.to_string())
            .unwrap_or_default();
        {
            let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = cache.get(id) {
                if c.summary_state == summary_state && summary_state != "created" {
                    return Some(c.state.clone());
                }
            }
        }
        let inspected = self.docker.inspect_container(id, None).await.ok()?;
        let st = inspected.state?;
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).insert(
            id.to_string(),
            Cached {
                summary_state,
                state: st.clone(),
            },
        );
        Some(st)
    }
}

impl Runtime for DockerRuntime {
    fn version(&self) -> String {
        format!("docker://{}", self.engine_version)
    }

    async fn list(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        let all = self.find(&[]).await?;
        // Pod IPs: the running sandbox of each pod (the newest).
        let mut ips: HashMap<String, (u32, String)> = HashMap::new();
        for s in &all {
            if label(s, LABEL_ROLE) != Some("sandbox")
                || s.state != Some(bollard::models::ContainerSummaryStateEnum::RUNNING)
            {
                continue;
            }
            let (Some(uid), Some(ip)) = (label(s, LABEL_UID), summary_ip(s)) else {
                continue;
            };
            let n = label(s, LABEL_ATTEMPT)
                .and_then(|a| a.parse().ok())
                .unwrap_or(0);
            let e = ips.entry(uid.to_string()).or_insert((n, ip.clone()));
            if n >= e.0 {
                *e = (n, ip);
            }
        }
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for s in &all {
            if label(s, LABEL_ROLE) == Some("sandbox") {
                continue;
            }
            let (Some(id), Some(uid), Some(container), Some(attempt)) = (
                s.id.as_deref(),
                label(s, LABEL_UID),
                label(s, LABEL_CONTAINER),
                label(s, LABEL_ATTEMPT).and_then(|a| a.parse::<u32>().ok()),
            ) else {
                continue;
            };
            seen.insert(id.to_string());
            let Some(inspected) = self.state_of(s).await else {
                // Removed between the list and the inspect.
                continue;
            };
            let starting = self
                .starting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&starting_key(uid, container, attempt));
            let state = state::run_state(&inspected, starting, SystemTime::now());
            out.push(ContainerInfo {
                id: id.to_string(),
                pod_uid: uid.to_string(),
                pod_namespace: label(s, LABEL_NAMESPACE).unwrap_or_default().to_string(),
                pod_name: label(s, LABEL_POD).unwrap_or_default().to_string(),
                container: container.to_string(),
                attempt,
                spec_hash: label(s, LABEL_HASH).unwrap_or_default().to_string(),
                image: s.image.clone().unwrap_or_default(),
                image_id: s.image_id.clone().unwrap_or_default(),
                ready: state.is_running(),
                state,
                pod_ip: ips.get(uid).map(|(_, ip)| ip.clone()),
            });
        }
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|id, _| seen.contains(id));
        Ok(out)
    }

    async fn start(&self, req: StartContainer) -> Result<(), RuntimeError> {
        let Some(spec) = req.container() else {
            return Err(RuntimeError::new(
                "CreateContainerError",
                format!("the pod has no container #{}", req.index),
            ));
        };
        let uid = req.pod.metadata.uid.clone();
        let key = starting_key(&uid, &spec.name, req.attempt);
        self.starting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone());
        let _guard = Starting {
            set: &self.starting,
            key,
        };
        // One list of the pod's containers: this attempt of this
        // container, if an agent made it already, and the pod's sandboxes.
        let attempt = req.attempt.to_string();
        let (sandboxes, others): (Vec<_>, Vec<_>) = self
            .find(&[(LABEL_UID, &uid)])
            .await?
            .into_iter()
            .partition(|c| label(c, LABEL_ROLE) == Some("sandbox"));
        let existing: Vec<ContainerSummary> = others
            .into_iter()
            .filter(|c| {
                label(c, LABEL_ROLE) == Some("container")
                    && label(c, LABEL_CONTAINER) == Some(spec.name.as_str())
                    && label(c, LABEL_ATTEMPT) == Some(attempt.as_str())
            })
            .collect();
        if let Some(c) = existing.first() {
            // Made by an agent that died before starting it: start it now.
            if c.state == Some(bollard::models::ContainerSummaryStateEnum::CREATED) {
                let id = c.id.as_deref().unwrap_or_default();
                if let Err(e) = self.docker.start_container(id, None).await {
                    let _ = self.stop_and_remove(id, Duration::ZERO).await;
                    return Err(engine("RunContainerError", "start container", e));
                }
            }
            return Ok(());
        }
        let r = self.start_new(&req, sandboxes).await;
        if r.is_err() && !req.pod.spec.host_network {
            self.drop_lone_sandbox(&uid).await;
        }
        r
    }

    async fn update_volumes(
        &self,
        pod: std::sync::Arc<Pod>,
        config: std::sync::Arc<crate::runtime::ConfigVolumes>,
    ) -> Result<(), RuntimeError> {
        let (root, uid) = (self.pods_dir.clone(), pod.metadata.uid.clone());
        let warnings = tokio::task::spawn_blocking(move || volumes::update(&root, &uid, &config))
            .await
            .map_err(|e| RuntimeError::new("FailedMount", e.to_string()))?
            .map_err(|e| RuntimeError::new("FailedMount", e.0))?;
        for w in warnings {
            tracing::warn!(node = %self.node, "{w}");
        }
        Ok(())
    }

    async fn remove(&self, id: &str, grace: Duration) -> Result<(), RuntimeError> {
        self.stop_and_remove(id, grace).await
    }

    async fn stop(&self, id: &str, grace: Duration) -> Result<(), RuntimeError> {
        self.stop_only(id, grace).await.map(|_| ())
    }

    async fn remove_pod(&self, pod_uid: &str, grace: Duration) -> Result<(), RuntimeError> {
        let all = self.find(&[(LABEL_UID, pod_uid)]).await?;
        let (sandboxes, apps): (Vec<_>, Vec<_>) = all
            .iter()
            .partition(|s| label(s, LABEL_ROLE) == Some("sandbox"));
        // The agent passes its default grace for a pod it no longer knows:
        // the pod's own grace period bounds it. The containers stop first,
        // all at once, while their network still works; then they and the
        // sandbox (whose pause program holds only the pod's namespaces and
        // has nothing to shut down cleanly) are removed all at once.
        let stops = apps.iter().map(|s| {
            let id = s.id.clone().unwrap_or_default();
            let own = label(s, LABEL_GRACE)
                .and_then(|g| g.parse::<u64>().ok())
                .map_or(grace, Duration::from_secs);
            let grace = grace.min(own);
            async move {
                if !grace.is_zero() {
                    if let Err(e) = self.stop_only(&id, grace).await {
                        tracing::warn!(node = %self.node, "{e}");
                    }
                }
            }
        });
        futures_util::future::join_all(stops).await;
        let mut first_error = None;
        let removes = apps.iter().chain(sandboxes.iter()).map(|s| {
            let id = s.id.clone().unwrap_or_default();
            async move { self.stop_and_remove(&id, Duration::ZERO).await }
        });
        for r in futures_util::future::join_all(removes).await {
            if let Err(e) = r {
                first_error.get_or_insert(e);
            }
        }
        let (root, uid) = (self.pods_dir.clone(), pod_uid.to_string());
        match tokio::task::spawn_blocking(move || volumes::remove_pod_dir(&root, &uid)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_error.get_or_insert(RuntimeError::new(
                    "RemovePodError",
                    format!("cannot remove the emptyDirs of pod {pod_uid}: {e}"),
                ));
            }
            Err(e) => {
                first_error.get_or_insert(RuntimeError::new("RemovePodError", e.to_string()));
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    async fn exec(
        &self,
        id: &str,
        cmd: Vec<String>,
        timeout: Duration,
    ) -> Result<ExecOutput, RuntimeError> {
        self.exec_in(id, cmd, timeout).await
    }

    async fn exec_session(
        &self,
        id: &str,
        spec: crate::runtime::ExecSpec,
    ) -> Result<crate::runtime::ExecSession, RuntimeError> {
        self.exec_session_in(id, spec).await
    }

    async fn logs(&self, id: &str, opts: LogOptions) -> Result<LogStream, RuntimeError> {
        self.log_stream(id, opts).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_addresses() {
        assert_eq!(container_name("ns", "p", "c", 3), "drover_ns_p_c_3");
        assert_eq!(sandbox_name("ns", "p", 0), "drover_ns_p_POD_0");
        let mut o = DockerOptions::new("n", "/tmp/x");
        o.host = Some("/run/docker.sock".into());
        assert_eq!(o.address(), "unix:///run/docker.sock");
        o.host = Some("tcp://127.0.0.1:2375".into());
        assert_eq!(o.address(), "tcp://127.0.0.1:2375");
    }
}
