//! The connection to a drover cluster: any server, with failover.
//!
//! A [`Client`] knows every server of the cluster (from `client.yaml` or
//! flags) and talks to one at a time. When that one is down or answers
//! UNAVAILABLE it moves to the next, until a deadline. Writes carry a random
//! request id, so retrying one after an ambiguous failure applies it at
//! most once.

use drover_api::Manifest;
use drover_proto::reason::Reason;
use drover_proto::v1::cluster_client::ClusterClient;
use drover_proto::v1::objects_client::ObjectsClient;
use drover_proto::v1::pods_client::PodsClient;
use drover_proto::v1::store_client::StoreClient;
use drover_proto::v1::{self as pb, op, Op};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

const MAX_MESSAGE: usize = 256 << 20;

/// How long one object call may take.
const OBJECT_CALL: Duration = Duration::from_secs(12);

/// Where the client finds the cluster and its credentials: the servers,
/// the cluster CA (the only issuer trusted), and either the admin token or
/// a client certificate (`drover access issue`).
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
pub struct ClientConfig {
    pub servers: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token: String,
    /// The cluster CA, PEM.
    #[serde(default)]
    pub ca: String,
    /// A client certificate and its key, PEM.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cert: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
}

/// What a client call can fail with. Messages name the object and say what
/// to do.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Config(String),
    /// A server's answer (or a status the transport made up): its gRPC
    /// code, the drover reason it carries (none from a transport error or
    /// an older server) and its message.
    #[error("{message}")]
    Server {
        code: Code,
        reason: Option<Reason>,
        message: String,
    },
    #[error("no server answered within {:.1} s (tried {servers}): {last}", waited.as_secs_f64())]
    Unreachable {
        waited: Duration,
        servers: String,
        last: String,
    },
    /// The server answered with an object this client cannot read.
    #[error("the server sent an object this client cannot read: {0}")]
    Decode(String),
}

impl ClientError {
    /// The gRPC code of a server answer, if it was one.
    pub fn code(&self) -> Option<Code> {
        match self {
            ClientError::Server { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The reason a server gave, if it was a server's answer with one.
    pub fn reason(&self) -> Option<Reason> {
        match self {
            ClientError::Server { reason, .. } => *reason,
            _ => None,
        }
    }
}

impl From<Status> for ClientError {
    fn from(s: Status) -> Self {
        let message = match s.code() {
            Code::Unauthenticated | Code::PermissionDenied => {
                format!("the server refused the credentials: {}", s.message())
            }
            _ => s.message().to_string(),
        };
        ClientError::Server {
            code: s.code(),
            reason: Reason::of(&s),
            message,
        }
    }
}

impl ClientConfig {
    /// Reads a `client.yaml` as servers write it.
    pub fn load(path: &Path) -> Result<ClientConfig, ClientError> {
        let cfg = ClientConfig::load_unchecked(path)?;
        cfg.check(&path.display().to_string())?;
        Ok(cfg)
    }

    fn check(&self, origin: &str) -> Result<(), ClientError> {
        if self.servers.is_empty() {
            return Err(ClientError::Config(format!(
                "{origin}: servers: lists no server"
            )));
        }
        if self.token.is_empty() && self.cert.is_empty() {
            return Err(ClientError::Config(format!(
                "{origin}: neither a token nor a client certificate (cert, key)"
            )));
        }
        if self.cert.is_empty() != self.key.is_empty() {
            return Err(ClientError::Config(format!(
                "{origin}: cert and key go together"
            )));
        }
        if self.ca.is_empty() {
            return Err(ClientError::Config(format!(
                "{origin}: no ca: the cluster CA is needed to trust the servers (pass --ca DATA_DIR/ca.crt of a server, or use the client.yaml a server writes)"
            )));
        }
        Ok(())
    }

    /// Resolves the configuration the way every command does: `--config
    /// FILE` or `DROVER_CONFIG` (given by the caller as `config`), else the
    /// default path when it exists; then `--server`, `--token` and `--ca`
    /// replace what the file says.
    pub fn resolve(
        servers: Option<&str>,
        token: Option<&str>,
        ca: Option<&Path>,
        config: Option<&Path>,
    ) -> Result<ClientConfig, ClientError> {
        let path = match config {
            Some(p) => Some(p.to_path_buf()),
            None => default_config_path().filter(|p| p.exists()),
        };
        let mut cfg = match &path {
            Some(p) => ClientConfig::load_unchecked(p)?,
            None if servers.is_none() => {
                return Err(ClientError::Config(
                    "no cluster configured: pass --config FILE / DROVER_CONFIG (every server writes DATA_DIR/client.yaml), or --server ADDR --token T --ca CA_FILE"
                        .into(),
                ))
            }
            None => ClientConfig::default(),
        };
        if let Some(s) = servers {
            cfg.servers = s
                .split(',')
                .map(|x| x.trim().to_string())
                .filter(|x| !x.is_empty())
                .collect();
        }
        if let Some(t) = token {
            cfg.token = t.to_string();
        }
        if let Some(p) = ca {
            cfg.ca = std::fs::read_to_string(p).map_err(|e| {
                ClientError::Config(format!("--ca {}: cannot read it: {e}", p.display()))
            })?;
        }
        let origin = match &path {
            Some(p) => p.display().to_string(),
            None => "--server".to_string(),
        };
        cfg.check(&origin)?;
        Ok(cfg)
    }

    fn load_unchecked(path: &Path) -> Result<ClientConfig, ClientError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ClientError::Config(format!(
                "cannot read the client config {}: {e}",
                path.display()
            ))
        })?;
        serde_saphyr::from_str(&text).map_err(|e| {
            ClientError::Config(format!(
                "{} is not a drover client config (servers: [..], ca: .., token: ..): {e}",
                path.display()
            ))
        })
    }
}

/// `$XDG_CONFIG_HOME/drover/client.yaml` or `~/.config/drover/client.yaml`.
pub fn default_config_path() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|x| !x.is_empty()) {
        return Some(PathBuf::from(x).join("drover/client.yaml"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config/drover/client.yaml"))
}

/// A connection to a cluster.
#[derive(Clone)]
pub struct Client {
    cfg: std::sync::Arc<ClientConfig>,
    servers: Vec<String>,
    channels: Vec<Channel>,
    auth: MetadataValue<tonic::metadata::Ascii>,
    current: std::sync::Arc<AtomicUsize>,
    /// How long a call keeps trying other servers.
    pub deadline: Duration,
}

impl Client {
    /// Prepares connections to every server (they connect lazily).
    pub fn new(cfg: &ClientConfig) -> Result<Client, ClientError> {
        let identity = (!cfg.cert.is_empty()).then_some((cfg.cert.as_str(), cfg.key.as_str()));
        let tls = drover_pki::tls::client_config(&cfg.ca, identity)
            .map_err(|e| ClientError::Config(format!("the client config: {e}")))?;
        let mut channels = Vec::new();
        for s in &cfg.servers {
            let ep = drover_pki::net::endpoint(s)
                .map_err(|e| ClientError::Config(format!("server address {s:?} is invalid: {e}")))?
                .connect_timeout(Duration::from_secs(1))
                .tcp_nodelay(true)
                .http2_keep_alive_interval(Duration::from_secs(10));
            channels.push(drover_pki::net::lazy(ep, tls.clone()));
        }
        let auth = MetadataValue::try_from(format!("Bearer {}", cfg.token))
            .map_err(|_| ClientError::Config("token: must be printable ASCII".into()))?;
        let start = rand::rng().random_range(0..channels.len().max(1));
        Ok(Client {
            cfg: std::sync::Arc::new(cfg.clone()),
            servers: cfg.servers.clone(),
            channels,
            auth,
            current: std::sync::Arc::new(AtomicUsize::new(start)),
            deadline: Duration::from_secs(15),
        })
    }

    /// Connects to one server only, with no failover, with the admin token
    /// under the cluster CA `ca` (PEM).
    pub fn single(addr: &str, token: &str, ca: &str) -> Result<Client, ClientError> {
        let mut c = Client::new(&ClientConfig {
            servers: vec![addr.to_string()],
            token: token.to_string(),
            ca: ca.to_string(),
            ..Default::default()
        })?;
        c.deadline = Duration::from_secs(3);
        Ok(c)
    }

    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    fn req<T>(&self, body: T, timeout: Duration) -> Request<T> {
        let mut r = Request::new(body);
        r.metadata_mut().insert("authorization", self.auth.clone());
        r.set_timeout(timeout);
        r
    }

    /// Runs `f` against servers in turn until it answers something other
    /// than UNAVAILABLE, or the deadline passes.
    async fn call<T, F, Fut>(&self, f: F) -> Result<T, ClientError>
    where
        F: Fn(Channel) -> Fut,
        Fut: std::future::Future<Output = Result<T, Status>>,
    {
        let start = Instant::now();
        let mut attempt = 0u32;
        // Whether every server so far refused the connection: nothing
        // listens there, which waiting the whole deadline will not change.
        let mut all_refused = true;
        loop {
            let i = self.current.load(Ordering::Relaxed) % self.channels.len();
            match f(self.channels[i].clone()).await {
                Ok(v) => return Ok(v),
                Err(s) if try_next_server(&s) => {
                    all_refused &= connection_refused(&s);
                    if all_refused && start.elapsed() >= NOTHING_LISTENS_AFTER {
                        return Err(ClientError::Config(format!(
                            "nothing listens at {} (connection refused for {} s): start a cluster with `drover up`, or check --config / DROVER_CONFIG",
                            self.servers.join(", "),
                            NOTHING_LISTENS_AFTER.as_secs()
                        )));
                    }
                    let last = format!("{}: {}", self.servers[i], s.message());
                    // Next server; after a full round, pause a little.
                    self.current.store(i + 1, Ordering::Relaxed);
                    attempt += 1;
                    if start.elapsed() >= self.deadline {
                        return Err(ClientError::Unreachable {
                            waited: start.elapsed(),
                            servers: self.servers.join(", "),
                            last,
                        });
                    }
                    if (attempt as usize).is_multiple_of(self.channels.len()) {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
                Err(s) => return Err(s.into()),
            }
        }
    }

    fn store(&self, ch: Channel) -> StoreClient<Channel> {
        StoreClient::new(ch)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    /// Reads one object (None when absent) and the revision of the read.
    pub async fn get(
        &self,
        key: &str,
        local: bool,
    ) -> Result<(Option<pb::KeyValue>, u64), ClientError> {
        let body = pb::GetRequest {
            key: key.to_string(),
            local,
        };
        let r = self
            .call(|ch| {
                let req = self.req(body.clone(), Duration::from_secs(12));
                async move { self.store(ch).get(req).await }
            })
            .await?
            .into_inner();
        Ok((r.kv, r.revision))
    }

    /// Lists every object under `prefix` and the revision of the list.
    pub async fn list(
        &self,
        prefix: &str,
        local: bool,
    ) -> Result<(Vec<pb::KeyValue>, u64), ClientError> {
        let body = pb::ListRequest {
            prefix: prefix.to_string(),
            local,
        };
        let r = self
            .call(|ch| {
                let req = self.req(body.clone(), Duration::from_secs(12));
                async move { self.store(ch).list(req).await }
            })
            .await?
            .into_inner();
        Ok((r.kvs, r.revision))
    }

    /// Applies one write, retried on other servers with the same request id.
    pub async fn write(&self, o: op::Op) -> Result<pb::WriteResponse, ClientError> {
        let request_id = loop {
            let id: u64 = rand::rng().random();
            if id != 0 {
                break id;
            }
        };
        let body = pb::WriteRequest {
            op: Some(Op { op: Some(o) }),
            request_id,
        };
        Ok(self
            .call(|ch| {
                let req = self.req(body.clone(), Duration::from_secs(12));
                async move { self.store(ch).write(req).await }
            })
            .await?
            .into_inner())
    }

    /// Creates an object; fails with ALREADY_EXISTS when the key is taken.
    pub async fn create(
        &self,
        key: &str,
        value: Vec<u8>,
    ) -> Result<pb::WriteResponse, ClientError> {
        self.write(op::Op::Create(pb::Create {
            key: key.to_string(),
            value,
        }))
        .await
    }

    /// Replaces an object; `expected_revision` 0 means unconditional.
    pub async fn update(
        &self,
        key: &str,
        value: Vec<u8>,
        expected_revision: u64,
        upsert: bool,
    ) -> Result<pb::WriteResponse, ClientError> {
        self.write(op::Op::Update(pb::Update {
            key: key.to_string(),
            value,
            expected_revision,
            upsert,
        }))
        .await
    }

    /// Deletes an object; `expected_revision` 0 means unconditional.
    pub async fn delete(
        &self,
        key: &str,
        expected_revision: u64,
    ) -> Result<pb::WriteResponse, ClientError> {
        self.write(op::Op::Delete(pb::Delete {
            key: key.to_string(),
            expected_revision,
        }))
        .await
    }

    /// Follows changes under `prefix` after `start_revision` (0: from now).
    pub async fn watch(
        &self,
        prefix: &str,
        start_revision: u64,
    ) -> Result<tonic::Streaming<pb::WatchResponse>, ClientError> {
        let body = pb::WatchRequest {
            prefix: prefix.to_string(),
            start_revision,
        };
        Ok(self
            .call(|ch| {
                let mut req = Request::new(body.clone());
                req.metadata_mut()
                    .insert("authorization", self.auth.clone());
                async move { self.store(ch).watch(req).await }
            })
            .await?
            .into_inner())
    }

    fn objects(&self, ch: Channel) -> ObjectsClient<Channel> {
        ObjectsClient::new(ch)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    /// One unary call of the `Objects` service (12 s), on whichever server
    /// answers.
    async fn objects_call<B, R, F, Fut>(&self, body: B, f: F) -> Result<R, ClientError>
    where
        B: Clone,
        F: Fn(ObjectsClient<Channel>, Request<B>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<R>, Status>>,
    {
        let r = self
            .call(|ch| f(self.objects(ch), self.req(body.clone(), OBJECT_CALL)))
            .await?;
        Ok(r.into_inner())
    }

    /// Applies a manifest stream (YAML documents or JSON): the server
    /// validates every object before it writes any. With `dry_run` nothing
    /// is written, and the answer says what would have happened.
    ///
    /// A retry after an ambiguous failure applies the same objects again,
    /// which is harmless (apply is create-or-update) but may then report
    /// `unchanged` for what the first attempt created.
    pub async fn apply(&self, text: &str, dry_run: bool) -> Result<Vec<Applied>, ClientError> {
        self.apply_with(text, dry_run, drover_api::FieldValidation::Strict)
            .await
    }

    /// [`Client::apply`] with a field validation mode (kubectl's
    /// `--validate`): under strict, the default, a field that no Kubernetes
    /// object has refuses the stream.
    pub async fn apply_with(
        &self,
        text: &str,
        dry_run: bool,
        validate: drover_api::FieldValidation,
    ) -> Result<Vec<Applied>, ClientError> {
        let body = pb::ApplyRequest {
            manifests: text.to_string(),
            dry_run,
            field_validation: validate.as_str().to_string(),
        };
        let r = self
            .call(|ch| {
                let req = self.req(body.clone(), Duration::from_secs(30));
                async move { self.objects(ch).apply(req).await }
            })
            .await?
            .into_inner();
        r.results
            .into_iter()
            .map(|a| {
                Ok(Applied {
                    object: decode_object(&a.object)?,
                    reference: a.reference,
                    namespace: a.namespace,
                    action: a.action,
                    warnings: a.warnings,
                })
            })
            .collect()
    }

    /// Reads one object. `kind` as users type it (`ds`, `pods`, `node`…);
    /// `namespace` is ignored for nodes and means `default` when empty.
    pub async fn get_object(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Manifest, ClientError> {
        let body = object_ref(kind, namespace, name);
        let r = self
            .objects_call(body, |mut c, req| async move { c.get(req).await })
            .await?;
        decode_object(&r.object)
    }

    /// Lists the objects of a kind in one namespace (every namespace when
    /// `namespace` is empty) whose labels match `selector` (kubectl's `-l`
    /// syntax; empty matches everything).
    pub async fn list_objects(
        &self,
        kind: &str,
        namespace: &str,
        selector: &str,
    ) -> Result<ObjectList, ClientError> {
        let body = pb::ListObjectsRequest {
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            label_selector: selector.to_string(),
        };
        let r = self
            .objects_call(body, |mut c, req| async move { c.list(req).await })
            .await?;
        Ok(ObjectList {
            items: r
                .items
                .iter()
                .map(|b| decode_object(b))
                .collect::<Result<_, _>>()?,
            resource_version: r.resource_version,
        })
    }

    /// Replaces one object. When it carries `metadata.resourceVersion` the
    /// write is a compare-and-swap: it fails with ABORTED (a conflict) if
    /// the object changed since that version was read.
    pub async fn update_object(&self, object: &Manifest) -> Result<Manifest, ClientError> {
        let json = serde_json::to_vec(object).map_err(|e| {
            ClientError::Config(format!("cannot encode {}: {e}", object.reference()))
        })?;
        let body = pb::UpdateObjectRequest { object: json };
        let r = self
            .objects_call(body, |mut c, req| async move { c.update(req).await })
            .await?;
        decode_object(&r.object)
    }

    /// Deletes one object and returns it as it was.
    pub async fn delete_object(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Manifest, ClientError> {
        let body = object_ref(kind, namespace, name);
        let r = self
            .objects_call(body, |mut c, req| async move { c.delete(req).await })
            .await?;
        decode_object(&r.object)
    }

    /// Follows the changes of a kind (in one namespace, or all when empty)
    /// after `resource_version` (empty or "0": from now), e.g. the
    /// `resource_version` of a [`Client::list_objects`] answer.
    pub async fn watch_objects(
        &self,
        kind: &str,
        namespace: &str,
        resource_version: &str,
    ) -> Result<ObjectWatch, ClientError> {
        let body = pb::WatchObjectsRequest {
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            resource_version: resource_version.to_string(),
        };
        let stream = self
            .call(|ch| {
                let mut req = Request::new(body.clone());
                req.metadata_mut()
                    .insert("authorization", self.auth.clone());
                async move { self.objects(ch).watch(req).await }
            })
            .await?
            .into_inner();
        Ok(ObjectWatch { stream })
    }

    /// The status of whichever server answers.
    pub async fn status(&self) -> Result<pb::StatusResponse, ClientError> {
        Ok(self
            .call(|ch| {
                let req = self.req(pb::StatusRequest {}, Duration::from_secs(5));
                async move { ClusterClient::new(ch).status(req).await }
            })
            .await?
            .into_inner())
    }

    /// Removes a member (by id) from the cluster.
    pub async fn remove_member(&self, id: u64) -> Result<Vec<pb::Member>, ClientError> {
        Ok(self
            .call(|ch| {
                let req = self.req(pb::RemoveMemberRequest { id }, Duration::from_secs(15));
                async move { ClusterClient::new(ch).remove_member(req).await }
            })
            .await?
            .into_inner()
            .members)
    }

    /// Asks for a client certificate (`drover access issue`).
    pub async fn issue_client(
        &self,
        req: pb::IssueClientRequest,
    ) -> Result<pb::IssueClientResponse, ClientError> {
        Ok(self
            .call(|ch| {
                let req = self.req(req.clone(), Duration::from_secs(10));
                async move { ClusterClient::new(ch).issue_client(req).await }
            })
            .await?
            .into_inner())
    }

    /// Replaces a join token (`drover token rotate`); answers the new one.
    pub async fn rotate_token(&self, kind: &str) -> Result<String, ClientError> {
        Ok(self
            .call(|ch| {
                let req = self.req(
                    pb::RotateTokenRequest {
                        kind: kind.to_string(),
                    },
                    Duration::from_secs(15),
                );
                async move { ClusterClient::new(ch).rotate_token(req).await }
            })
            .await?
            .into_inner()
            .token)
    }

    /// The client certificates on record (`drover access list`).
    pub async fn list_access(&self) -> Result<Vec<pb::AccessRecord>, ClientError> {
        Ok(self
            .call(|ch| {
                let req = self.req(pb::ListAccessRequest {}, Duration::from_secs(10));
                async move { ClusterClient::new(ch).list_access(req).await }
            })
            .await?
            .into_inner()
            .records)
    }

    /// Revokes a client's certificates (`drover access revoke`); answers
    /// the ones revoked now.
    pub async fn revoke_access(
        &self,
        name: &str,
        serial: &str,
    ) -> Result<Vec<pb::AccessRecord>, ClientError> {
        Ok(self
            .call(|ch| {
                let req = self.req(
                    pb::RevokeAccessRequest {
                        name: name.to_string(),
                        serial: serial.to_string(),
                    },
                    Duration::from_secs(15),
                );
                async move { ClusterClient::new(ch).revoke_access(req).await }
            })
            .await?
            .into_inner()
            .revoked)
    }

    /// Opens a snapshot of the whole store (`drover cluster snapshot save`).
    pub async fn snapshot(&self) -> Result<tonic::Streaming<pb::SnapshotChunk>, ClientError> {
        Ok(self
            .call(|ch| {
                let r = self.req(pb::SnapshotRequest {}, Duration::from_secs(600));
                async move { ClusterClient::new(ch).snapshot(r).await }
            })
            .await?
            .into_inner())
    }

    /// The scheduled snapshots kept by the member this client talks to.
    pub async fn list_snapshots(&self) -> Result<pb::ListSnapshotsResponse, ClientError> {
        Ok(self
            .call(|ch| {
                let r = self.req(pb::ListSnapshotsRequest {}, Duration::from_secs(10));
                async move { ClusterClient::new(ch).list_snapshots(r).await }
            })
            .await?
            .into_inner())
    }

    /// Opens a container's log (`drover logs`). Errors found before any
    /// output (no such pod or container, node not connected) come back here;
    /// later ones (the runtime's) from the stream.
    pub async fn pod_logs(
        &self,
        req: pb::PodLogsRequest,
    ) -> Result<tonic::Streaming<pb::PodOutput>, ClientError> {
        Ok(self
            .call(|ch| {
                let mut r = Request::new(req.clone());
                r.metadata_mut().insert("authorization", self.auth.clone());
                async move { PodsClient::new(ch).logs(r).await }
            })
            .await?
            .into_inner())
    }

    /// Runs a command in a container (`drover exec`); the stream's last
    /// message carries the exit code.
    pub async fn pod_exec(
        &self,
        req: pb::PodExecRequest,
    ) -> Result<tonic::Streaming<pb::PodOutput>, ClientError> {
        Ok(self
            .call(|ch| {
                let mut r = Request::new(req.clone());
                r.metadata_mut().insert("authorization", self.auth.clone());
                async move { PodsClient::new(ch).exec(r).await }
            })
            .await?
            .into_inner())
    }

    /// Runs a command in a container with stdin (`drover exec -i`): `req`
    /// first, then the messages of `input` (stdin, its close). A call
    /// tried on another server goes on from where `input` is.
    pub async fn pod_exec_stream(
        &self,
        req: pb::PodExecRequest,
        input: tokio::sync::mpsc::Receiver<pb::PodExecInput>,
    ) -> Result<tonic::Streaming<pb::PodOutput>, ClientError> {
        use tokio_stream::StreamExt;
        let input = std::sync::Arc::new(tokio::sync::Mutex::new(input));
        Ok(self
            .call(|ch| {
                let first = pb::PodExecInput {
                    start: Some(req.clone()),
                    ..Default::default()
                };
                let rest = shared_input(input.clone());
                let stream = tokio_stream::once(first).chain(rest);
                let mut r = Request::new(stream);
                r.metadata_mut().insert("authorization", self.auth.clone());
                async move { PodsClient::new(ch).exec_stream(r).await }
            })
            .await?
            .into_inner())
    }

    /// The same client, pointed at one of its servers' peers by address.
    pub fn with_server(&self, addr: &str) -> Result<Client, ClientError> {
        let mut cfg = (*self.cfg).clone();
        cfg.servers = vec![addr.to_string()];
        let mut c = Client::new(&cfg)?;
        c.deadline = Duration::from_secs(3);
        Ok(c)
    }

    /// The configuration this client was made from.
    pub fn config(&self) -> &ClientConfig {
        &self.cfg
    }
}

/// The messages of a shared receiver as a stream, until the stream is
/// dropped (the call ended or failed) or the receiver ends.
fn shared_input(
    rx: std::sync::Arc<tokio::sync::Mutex<tokio::sync::mpsc::Receiver<pb::PodExecInput>>>,
) -> impl tokio_stream::Stream<Item = pb::PodExecInput> + Send + 'static {
    let (tx, out) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                m = async { rx.lock().await.recv().await } => m,
                _ = tx.closed() => return,
            };
            match next {
                Some(m) => {
                    if tx.send(m).await.is_err() {
                        return;
                    }
                }
                None => return,
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(out)
}

/// How long every server may refuse connections before a call gives up
/// with "nothing listens".
const NOTHING_LISTENS_AFTER: Duration = Duration::from_secs(2);

/// Whether `s` is a connection the peer refused (by the `io::Error` it
/// carries, not by its text).
fn connection_refused(s: &Status) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(s);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        cur = e.source();
    }
    false
}

/// Whether a failed call goes to the next server: this one is down, not
/// reachable or not serving (UNAVAILABLE, a broken or cancelled
/// connection), or the call ran out of time before a server's handler
/// answered. A DEADLINE_EXCEEDED that carries no drover reason is the
/// client's own or the transport's timeout; one with [`Reason::Timeout`]
/// is a server's answer (it gave up waiting on raft) and is returned.
fn try_next_server(s: &Status) -> bool {
    match s.code() {
        Code::Unavailable | Code::Unknown | Code::Cancelled => true,
        Code::DeadlineExceeded => Reason::of(s).is_none(),
        _ => false,
    }
}

fn object_ref(kind: &str, namespace: &str, name: &str) -> pb::ObjectRef {
    pb::ObjectRef {
        kind: kind.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}

/// Reads an object as the Objects service sends it (JSON).
pub fn decode_object(bytes: &[u8]) -> Result<Manifest, ClientError> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| ClientError::Decode(e.to_string()))?;
    Manifest::from_value(value).map_err(|e| ClientError::Decode(e.to_string()))
}

/// What `apply` did with one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// kubectl's reference, e.g. `daemonset.apps/fluentd`.
    pub reference: String,
    /// The object's namespace (empty for nodes).
    pub namespace: String,
    /// `created`, `configured` or `unchanged`.
    pub action: String,
    /// Fields kept but not acted on, e.g. `unknown field "spec.foo" (...)`.
    pub warnings: Vec<String>,
    /// The object as stored (or as it would be, for a dry run).
    pub object: Manifest,
}

/// The answer of [`Client::list_objects`].
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectList {
    pub items: Vec<Manifest>,
    /// Watch from this version to see every later change.
    pub resource_version: String,
}

/// One change seen by [`Client::watch_objects`].
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectEvent {
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub r#type: String,
    /// The object after the change (for `DELETED`, as it was, with the
    /// resourceVersion of the delete).
    pub object: Manifest,
}

/// A stream of object changes.
pub struct ObjectWatch {
    stream: tonic::Streaming<pb::ObjectEvent>,
}

impl ObjectWatch {
    /// The next change; `None` when the server ended the stream.
    pub async fn next(&mut self) -> Result<Option<ObjectEvent>, ClientError> {
        match self.stream.message().await? {
            Some(e) => Ok(Some(ObjectEvent {
                object: decode_object(&e.object)?,
                r#type: e.r#type,
            })),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_go_to_the_next_server_only_when_no_server_answered() {
        // tonic's own client-side timeout: no reason, try the next server.
        assert!(try_next_server(&Status::deadline_exceeded(
            "Timeout expired"
        )));
        assert!(try_next_server(&Status::cancelled("Timeout expired")));
        assert!(try_next_server(&Status::unavailable("connection refused")));
        // The server's handler gave up waiting: its answer, returned.
        assert!(!try_next_server(
            &Reason::Timeout.status("timed out waiting for the write to commit")
        ));
        // Whatever the text says.
        assert!(!try_next_server(&Reason::Timeout.status("Timeout expired")));
        assert!(try_next_server(&Reason::NotLeader.status("not the leader")));
        assert!(!try_next_server(&Reason::NotFound.status("x not found")));
        assert!(!try_next_server(&Status::invalid_argument("bad")));
    }

    #[test]
    fn a_server_error_keeps_its_reason() {
        let e = ClientError::from(Reason::Invalid.status("DaemonSet.apps \"x\" is invalid"));
        assert_eq!(e.code(), Some(Code::InvalidArgument));
        assert_eq!(e.reason(), Some(Reason::Invalid));
        let e = ClientError::from(Status::invalid_argument("x is invalid"));
        assert_eq!(e.reason(), None);
        let e = ClientError::from(Reason::Forbidden.status("no"));
        assert_eq!(e.reason(), Some(Reason::Forbidden));
        assert_eq!(e.to_string(), "the server refused the credentials: no");
    }
}
