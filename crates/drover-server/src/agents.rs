//! The server side of node agents: sessions, heartbeats and the pod index.
//!
//! - [`PodIndex`]: every member follows the pods in its own applied state
//!   (list, then watch) and keeps them by `spec.nodeName`, so an agent's
//!   session is told when its node's pods change without scanning all pods.
//! - [`Heartbeats`]: heartbeats are not raft writes. The leader keeps the
//!   last heartbeat of every node in memory; a follower that serves agents
//!   relays the names it heard from to the leader every half second
//!   (`Raft.Heartbeats`). The node lifecycle loop on the leader reads them.
//! - [`AgentSvc`]: one stream per agent. Hello registers (or re-uses) the
//!   Node; the server pushes the node's complete desired pod list on every
//!   change; pod status reports are written with compare-and-swap; Leave
//!   deletes the Node.

use crate::objects::{self, Kind, Objects};
use crate::service::Ctx;
use drover_api::{Manifest, Node};
use drover_proto::v1::{self as pb, agent_message, agent_server, server_message};
use drover_store::{Consistency, Error as StoreError, EventType, Store};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

/// How often agents heartbeat.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

// ------------------------------------------------------------------ heartbeats

/// The last heartbeat of every node, as this member heard it (and, on the
/// leader, as followers relayed it).
#[derive(Default)]
pub struct Heartbeats {
    last: Mutex<HashMap<String, Instant>>,
    relay: Mutex<HashSet<String>>,
}

impl Heartbeats {
    /// Records a heartbeat of `node` now.
    pub fn beat(&self, node: &str) {
        let now = Instant::now();
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(node.to_string(), now);
        self.relay
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(node.to_string());
    }

    /// Records heartbeats relayed by a follower.
    pub fn beat_all(&self, nodes: &[String]) {
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        for n in nodes {
            last.insert(n.clone(), now);
        }
    }

    /// The last heartbeat of each node.
    pub fn snapshot(&self) -> HashMap<String, Instant> {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Forgets a node (it left or was removed).
    pub fn forget(&self, node: &str) {
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(node);
    }

    fn take_relay(&self) -> Vec<String> {
        let mut r = self.relay.lock().unwrap_or_else(|e| e.into_inner());
        r.drain().collect()
    }
}

/// Relays the heartbeats this member heard to the leader, when it is not
/// the leader itself.
pub async fn relay_heartbeats(ctx: Arc<Ctx>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tokio::time::sleep(HEARTBEAT_INTERVAL / 2) => {}
        }
        let nodes = ctx.heartbeats.take_relay();
        let state = ctx.store.leader();
        if nodes.is_empty() || state.is_leader {
            continue;
        }
        let Some(leader) = state.leader else { continue };
        let Some(m) = ctx.store.members().get(&leader).cloned() else {
            continue;
        };
        let Ok(ch) = ctx.channel(&m.addr) else {
            continue;
        };
        let mut req = Request::new(pb::HeartbeatBatch { nodes });
        req.metadata_mut()
            .insert("authorization", crate::auth::bearer(&ctx.join_token));
        req.set_timeout(Duration::from_secs(2));
        if let Err(e) = pb::raft_client::RaftClient::new(ch).heartbeats(req).await {
            tracing::debug!("cannot relay heartbeats to the leader: {}", e.message());
        }
    }
}

// ------------------------------------------------------------------ pod index

#[derive(Default)]
struct IndexState {
    /// node -> pod key -> pod JSON (with resourceVersion).
    by_node: HashMap<String, BTreeMap<String, Vec<u8>>>,
    /// pod key -> the pod without status and resourceVersion: what an agent
    /// must act on. A change of status alone (the agent's own report) does
    /// not push the node's pods again.
    desired: HashMap<String, u64>,
    /// pod key -> node.
    node_of: HashMap<String, String>,
    versions: HashMap<String, watch::Sender<u64>>,
    revision: u64,
}

impl IndexState {
    fn bump(&mut self, node: &str) {
        let rev = self.revision;
        self.versions
            .entry(node.to_string())
            .or_insert_with(|| watch::channel(0).0)
            .send_replace(rev);
    }

    fn remove(&mut self, key: &str) {
        self.desired.remove(key);
        if let Some(node) = self.node_of.remove(key) {
            if let Some(p) = self.by_node.get_mut(&node) {
                p.remove(key);
                if p.is_empty() {
                    self.by_node.remove(&node);
                }
            }
            self.bump(&node);
        }
    }

    fn put(&mut self, key: String, node: String, json: Vec<u8>) {
        if self.node_of.get(&key).is_some_and(|n| *n != node) {
            self.remove(&key);
        }
        if node.is_empty() {
            return;
        }
        let desired = desired_part(&json);
        let unchanged = self.desired.get(&key) == Some(&desired);
        self.desired.insert(key.clone(), desired);
        self.by_node
            .entry(node.clone())
            .or_default()
            .insert(key.clone(), json);
        self.node_of.insert(key, node.clone());
        if !unchanged {
            self.bump(&node);
        }
    }
}

/// The pods of every node, following this member's applied state.
#[derive(Clone)]
pub struct PodIndex {
    state: Arc<Mutex<IndexState>>,
    loaded: Arc<watch::Sender<bool>>,
}

impl Default for PodIndex {
    fn default() -> Self {
        PodIndex {
            state: Arc::default(),
            loaded: Arc::new(watch::channel(false).0),
        }
    }
}

/// A hash of the pod as far as its agent must act on it: without status
/// and version.
fn desired_part(json: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut v: Value = serde_json::from_slice(json).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
        if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    h.finish()
}

fn node_of(json: &[u8]) -> String {
    serde_json::from_slice::<Value>(json)
        .ok()
        .and_then(|v| v["spec"]["nodeName"].as_str().map(str::to_string))
        .unwrap_or_default()
}

impl PodIndex {
    fn lock(&self) -> std::sync::MutexGuard<'_, IndexState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Follows the store until `stop`: list, then watch; relist when the
    /// watch falls behind compaction.
    pub async fn run(self, store: Store, mut stop: watch::Receiver<bool>) {
        let prefix = objects::prefix(Kind::Pod, None);
        loop {
            let (kvs, rev) = match store.list(&prefix, Consistency::Local).await {
                Ok(v) => v,
                Err(StoreError::Stopped | StoreError::Removed) => return,
                Err(e) => {
                    tracing::warn!("pod index: cannot list pods: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            {
                let mut s = self.lock();
                let nodes: Vec<String> = s.by_node.keys().cloned().collect();
                s.by_node.clear();
                s.node_of.clear();
                s.desired.clear();
                s.revision = rev;
                for kv in &kvs {
                    if let Ok(json) = objects::decode(kv).and_then(|m| objects::to_json(&m)) {
                        let node = node_of(&json);
                        s.put(kv.key.clone(), node, json);
                    }
                }
                for n in nodes {
                    s.bump(&n);
                }
            }
            self.loaded.send_replace(true);
            let mut w = match store.watch(&prefix, rev) {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!("pod index: cannot watch pods: {e}");
                    continue;
                }
            };
            loop {
                let batch = tokio::select! {
                    _ = stop.wait_for(|s| *s) => return,
                    b = w.next() => b,
                };
                let batch = match batch {
                    Ok(b) => b,
                    Err(StoreError::Stopped | StoreError::Removed) => return,
                    Err(e) => {
                        tracing::info!("pod index: relisting ({e})");
                        break;
                    }
                };
                let mut s = self.lock();
                s.revision = batch.revision;
                for e in batch.events {
                    let Some(kv) = e.kv else { continue };
                    if e.r#type == EventType::Delete as i32 {
                        s.remove(&kv.key);
                    } else if let Ok(json) = objects::decode(&kv).and_then(|m| objects::to_json(&m))
                    {
                        let node = node_of(&json);
                        s.put(kv.key.clone(), node, json);
                    }
                }
            }
        }
    }

    /// Waits until the index holds the first list of pods.
    pub async fn wait_loaded(&self) -> bool {
        let mut rx = self.loaded.subscribe();
        let loaded = rx.wait_for(|l| *l).await.is_ok();
        loaded
    }

    /// The pods bound to `node` and the index's revision.
    pub fn pods(&self, node: &str) -> (Vec<Vec<u8>>, u64) {
        let s = self.lock();
        let pods = s
            .by_node
            .get(node)
            .map(|p| p.values().cloned().collect())
            .unwrap_or_default();
        (pods, s.revision)
    }

    /// Changes whenever the pods of `node` change.
    pub fn subscribe(&self, node: &str) -> watch::Receiver<u64> {
        let mut s = self.lock();
        let rev = s.revision;
        s.versions
            .entry(node.to_string())
            .or_insert_with(|| watch::channel(rev).0)
            .subscribe()
    }
}

// ------------------------------------------------------------------ sessions

pub struct AgentSvc {
    pub ctx: Arc<Ctx>,
    pub objects: Objects,
    pub index: PodIndex,
}

fn now() -> String {
    objects::now_rfc3339()
}

/// The Node to write for an agent's hello: a new one from the agent's own
/// description, or the existing one with the agent's status (addresses,
/// capacity, system info) and the user's labels, taints and spec kept.
pub fn node_from_hello(hello: Node, existing: Option<Node>, now: &str) -> Node {
    match existing {
        None => {
            let mut n = hello;
            n.metadata.namespace.clear();
            n.metadata.resource_version.clear();
            let ready = drover_api::NodeCondition {
                r#type: "Ready".into(),
                status: Some(drover_api::ConditionStatus::True),
                last_heartbeat_time: Some(now.into()),
                last_transition_time: Some(now.into()),
                reason: "AgentReady".into(),
                message: "drover agent is posting ready status".into(),
                ..Default::default()
            };
            n.status.conditions = vec![ready];
            n
        }
        Some(mut n) => {
            n.status.addresses = hello.status.addresses;
            n.status.capacity = hello.status.capacity;
            n.status.allocatable = hello.status.allocatable;
            n.status.node_info = hello.status.node_info;
            n
        }
    }
}

impl AgentSvc {
    async fn register(&self, hello: &pb::Hello) -> Result<String, Status> {
        let v: Value = serde_json::from_slice(&hello.node)
            .map_err(|e| Status::invalid_argument(format!("hello.node: not JSON: {e}")))?;
        let Manifest::Node(node) = Manifest::from_value(v)
            .map_err(|e| Status::invalid_argument(format!("hello.node: {e}")))?
        else {
            return Err(Status::invalid_argument("hello.node: must be a Node"));
        };
        let name = node.metadata.name.clone();
        drover_api::validation::validate_node(&node)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        for _ in 0..5 {
            let existing = match self.objects.get(Kind::Node, "", &name).await {
                Ok(Manifest::Node(n)) => Some(*n),
                Ok(_) => None,
                Err(s) if s.code() == tonic::Code::NotFound => None,
                Err(s) => return Err(s),
            };
            let creating = existing.is_none();
            let n = node_from_hello((*node).clone(), existing, &now());
            let r = if creating {
                self.objects.create(Manifest::Node(Box::new(n))).await
            } else {
                self.objects.update(Manifest::Node(Box::new(n))).await
            };
            match r {
                Ok(_) => return Ok(name),
                Err(s) if matches!(s.code(), tonic::Code::Aborted | tonic::Code::AlreadyExists) => {
                    continue
                }
                Err(s) => return Err(s),
            }
        }
        Err(Status::aborted(format!(
            "node {name:?} kept changing while it registered; retry"
        )))
    }
}

#[tonic::async_trait]
impl agent_server::Agent for AgentSvc {
    type SessionStream = ReceiverStream<Result<pb::ServerMessage, Status>>;

    async fn session(
        &self,
        req: Request<Streaming<pb::AgentMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        crate::auth::check(
            &req,
            &self.ctx.join_token,
            "an agent session (use the join token)",
        )?;
        let mut inbound = req.into_inner();
        let first = inbound.message().await?.ok_or_else(|| {
            Status::invalid_argument("the agent closed the stream before saying hello")
        })?;
        let Some(agent_message::Msg::Hello(hello)) = first.msg else {
            return Err(Status::invalid_argument(
                "the first message of an agent session must be hello",
            ));
        };
        let node = self.register(&hello).await?;
        self.ctx.heartbeats.beat(&node);
        tracing::info!(node = %node, agent = %hello.agent_version, "agent connected");

        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let welcome = pb::ServerMessage {
            msg: Some(server_message::Msg::Welcome(pb::Welcome {
                node: node.clone(),
                heartbeat_interval_ms: HEARTBEAT_INTERVAL.as_millis() as u32,
                member: self.ctx.id,
            })),
        };
        tx.send(Ok(welcome))
            .await
            .map_err(|_| Status::cancelled("the agent went away"))?;

        // Push the desired pods now and on every change.
        let index = self.index.clone();
        let push_node = node.clone();
        let push_tx = tx.clone();
        let pusher = tokio::spawn(async move {
            let mut changes = index.subscribe(&push_node);
            // Never tell an agent "no pods" before the index has loaded.
            if !index.wait_loaded().await {
                return;
            }
            loop {
                let (pods, rev) = index.pods(&push_node);
                let msg = pb::ServerMessage {
                    msg: Some(server_message::Msg::Pods(pb::DesiredPods {
                        pods,
                        resource_version: rev.to_string(),
                    })),
                };
                if push_tx.send(Ok(msg)).await.is_err() {
                    return;
                }
                if changes.changed().await.is_err() {
                    return;
                }
            }
        });

        // Read what the agent says until it goes away.
        let remote = self.ctx.remote.attach(&node, tx.clone());
        let ctx = self.ctx.clone();
        let objects = self.objects.clone();
        let index = self.index.clone();
        tokio::spawn(async move {
            loop {
                let msg = tokio::select! {
                    m = inbound.message() => m,
                    _ = tx.closed() => break,
                };
                match msg {
                    Ok(Some(m)) => match m.msg {
                        Some(agent_message::Msg::Heartbeat(_)) => ctx.heartbeats.beat(&node),
                        Some(agent_message::Msg::Statuses(s)) => {
                            ctx.heartbeats.beat(&node);
                            write_statuses(&objects, &node, s).await;
                        }
                        Some(agent_message::Msg::Leave(_)) => {
                            match objects.delete(Kind::Node, "", &node).await {
                                Ok(_) => tracing::info!(node = %node, "node left the cluster"),
                                Err(e) => tracing::warn!(node = %node, "leave: {}", e.message()),
                            }
                            ctx.heartbeats.forget(&node);
                            break;
                        }
                        Some(agent_message::Msg::StaticPods(s)) => {
                            ctx.heartbeats.beat(&node);
                            crate::mirror::reconcile(&objects, &index, &node, s).await;
                        }
                        Some(agent_message::Msg::Hello(_)) | None => {}
                        Some(other) => remote.deliver(other),
                    },
                    Ok(None) | Err(_) => break,
                }
            }
            pusher.abort();
            tracing::info!(node = %node, "agent disconnected");
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// Writes reported pod statuses (compare-and-swap; a report for another
/// incarnation of the pod, or a deleted pod, is dropped).
async fn write_statuses(objects: &Objects, node: &str, s: pb::PodStatuses) {
    let writes = s.pods.into_iter().map(|p| async move {
        let status: Value = match serde_json::from_slice(&p.status) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(node = %node, pod = %p.name, "bad pod status: {e}");
                return;
            }
        };
        if let Err(e) = objects
            .update_status(Kind::Pod, &p.namespace, &p.name, &p.uid, status)
            .await
        {
            if e.code() != tonic::Code::NotFound {
                tracing::debug!(node = %node, pod = %p.name, "status not written: {}", e.message());
            }
        }
    });
    futures_util::future::join_all(writes).await;
}
