//! The gRPC services: the client API (`Store`), membership (`Cluster`) and
//! the raft transport's receiving side (`Raft`).
//!
//! Any member answers any call. Writes and membership changes need the
//! leader: a follower forwards them to the leader it knows (waiting for an
//! election when there is none), so a client never looks for the leader.
//! Reads are served by the member itself, linearizable through ReadIndex.

use crate::auth::{self, MAX_MESSAGE};
use drover_proto::v1::cluster_client::ClusterClient;
use drover_proto::v1::store_client::StoreClient;
use drover_proto::v1::{self as pb, cluster_server, raft_server, store_server};
use drover_store::{Consistency, Error as StoreError, Member, MemberChange, Store};
use protobuf::Message as _;
use std::collections::HashMap;
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};

const HOPS: &str = "x-drover-hops";

/// Maps a store error to a gRPC status with the same text.
pub fn status_of(e: StoreError) -> Status {
    let msg = e.to_string();
    match e {
        StoreError::NotLeader { .. }
        | StoreError::Ambiguous
        | StoreError::Unavailable(_)
        | StoreError::Stopped
        | StoreError::Removed => Status::unavailable(msg),
        StoreError::AlreadyExists { .. } => Status::already_exists(msg),
        StoreError::NotFound { .. } | StoreError::UnknownMember(_) => Status::not_found(msg),
        StoreError::Conflict { .. } => Status::aborted(msg),
        StoreError::TooOld { .. } => Status::out_of_range(msg),
        StoreError::Invalid(_) => Status::invalid_argument(msg),
        StoreError::Timeout(..) => Status::deadline_exceeded(msg),
        StoreError::Storage(_) => Status::internal(msg),
    }
}

fn member_pb(m: &Member) -> pb::Member {
    m.clone()
}

/// What every service shares.
pub struct Ctx {
    pub store: Store,
    pub id: u64,
    /// Empty while a joining member has not finished joining.
    pub admin_token: RwLock<String>,
    pub join_token: String,
    pub timeout: Duration,
    /// Node heartbeats heard here (and, on the leader, relayed here).
    pub heartbeats: crate::agents::Heartbeats,
    /// Agent sessions held here, for logs and exec.
    pub remote: crate::remote::Sessions,
    channels: Mutex<HashMap<String, Channel>>,
}

enum Route {
    Local,
    Forward(Channel),
}

impl Ctx {
    pub fn new(store: Store, admin_token: String, join_token: String, timeout: Duration) -> Self {
        Ctx {
            id: store.id(),
            store,
            admin_token: RwLock::new(admin_token),
            join_token,
            timeout,
            heartbeats: Default::default(),
            remote: Default::default(),
            channels: Mutex::new(HashMap::new()),
        }
    }

    pub fn admin<T>(&self, req: &Request<T>, what: &str) -> Result<(), Status> {
        let token = self
            .admin_token
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if token.is_empty() {
            return Err(Status::unavailable(
                "this server is still joining its cluster; ask another member or retry",
            ));
        }
        auth::check(req, &token, what)
    }

    pub fn channel(&self, addr: &str) -> Result<Channel, Status> {
        let mut ch = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = ch.get(addr) {
            return Ok(c.clone());
        }
        let c = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| Status::internal(format!("member address {addr:?} is invalid: {e}")))?
            .connect_timeout(Duration::from_secs(1))
            .tcp_nodelay(true)
            .connect_lazy();
        ch.insert(addr.to_string(), c.clone());
        Ok(c)
    }

    /// Where a leader-only call goes: here, or the leader's channel.
    async fn route(&self, hint: Option<u64>, deadline: Instant) -> Result<Route, Status> {
        let state = self.store.leader();
        if state.is_leader {
            return Ok(Route::Local);
        }
        let leader = match hint.or(state.leader) {
            Some(l) => Some(l),
            None => {
                let left = deadline.saturating_duration_since(Instant::now());
                self.store.wait_leader(left).await
            }
        };
        match leader {
            None => Err(Status::unavailable(
                "no leader is elected (is a majority of the members up?); retry",
            )),
            Some(l) if l == self.id => Ok(Route::Local),
            Some(l) => match self.store.members().get(&l) {
                Some(m) if !m.removed => Ok(Route::Forward(self.channel(&m.addr)?)),
                _ => Err(Status::unavailable(format!(
                    "the leader {l:x} is not yet in this member's membership; retry"
                ))),
            },
        }
    }

    /// Runs a read, waiting out elections and unconfirmed ReadIndex rounds.
    pub async fn read<T, F, Fut>(&self, f: F) -> Result<T, Status>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        let deadline = self.deadline();
        loop {
            match f().await {
                Ok(v) => return Ok(v),
                Err(StoreError::NotLeader { leader: None }) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if self.store.wait_leader(left).await.is_none() {
                        return Err(Status::unavailable(
                            "no leader is elected, so a linearizable read is impossible; retry, or read with --local",
                        ));
                    }
                }
                Err(e @ StoreError::Unavailable(_)) => {
                    if !pause(deadline).await {
                        return Err(status_of(e));
                    }
                }
                Err(e) => return Err(status_of(e)),
            }
        }
    }

    /// Applies a write on the leader: here, or forwarded with `token` (the
    /// caller's, or this member's admin token) to the leader. A write with a
    /// request id is retried across leader changes (applied at most once).
    pub async fn write(
        &self,
        body: pb::WriteRequest,
        token: Option<&str>,
        hops: u32,
    ) -> Result<pb::WriteResponse, Status> {
        let op = body.op.clone().filter(|o| o.op.is_some()).ok_or_else(|| {
            Status::invalid_argument("op: one of create, update or delete is required")
        })?;
        let own_token;
        let token = match token {
            Some(t) => Some(t),
            None => {
                own_token = self
                    .admin_token
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                Some(own_token.as_str())
            }
        };
        let deadline = self.deadline();
        let mut hint = None;
        loop {
            let err = match self.route(hint, deadline).await? {
                Route::Local => match self.store.write(op.clone(), body.request_id).await {
                    Ok(w) => {
                        return Ok(pb::WriteResponse {
                            revision: w.revision,
                            kv: Some(w.kv),
                            replayed: w.replayed,
                        })
                    }
                    Err(StoreError::NotLeader { leader }) => {
                        hint = leader;
                        Status::unavailable("not the leader")
                    }
                    Err(StoreError::Ambiguous) if body.request_id != 0 => {
                        hint = None;
                        Status::unavailable(StoreError::Ambiguous.to_string())
                    }
                    Err(e) => return Err(status_of(e)),
                },
                Route::Forward(ch) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let fwd = forwarded(body.clone(), token, hops, left)?;
                    let mut c = StoreClient::new(ch)
                        .max_decoding_message_size(MAX_MESSAGE)
                        .max_encoding_message_size(MAX_MESSAGE);
                    match c.write(fwd).await {
                        Ok(r) => return Ok(r.into_inner()),
                        Err(s)
                            if retryable(&s)
                                && (body.request_id != 0
                                    || s.message().contains("not the leader")) =>
                        {
                            hint = None;
                            s
                        }
                        Err(s) => return Err(s),
                    }
                }
            };
            if !pause(deadline).await {
                return Err(err);
            }
        }
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }
}

pub fn hops<T>(req: &Request<T>) -> u32 {
    req.metadata()
        .get(HOPS)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A forwarded copy of a request, with the caller's token and one more hop.
fn forwarded<T>(
    body: T,
    token: Option<&str>,
    hops: u32,
    left: Duration,
) -> Result<Request<T>, Status> {
    if hops >= 3 {
        return Err(Status::unavailable(
            "leadership is moving; the request was forwarded too often, retry",
        ));
    }
    let mut r = Request::new(body);
    if let Some(t) = token {
        r.metadata_mut().insert("authorization", auth::bearer(t));
    }
    r.metadata_mut().insert(
        HOPS,
        (hops + 1)
            .to_string()
            .parse()
            .map_err(|_| Status::internal("hop count"))?,
    );
    r.set_timeout(left.max(Duration::from_millis(100)));
    Ok(r)
}

/// Whether a failed attempt may be tried again before the deadline.
fn retryable(s: &Status) -> bool {
    s.code() == tonic::Code::Unavailable
}

async fn pause(deadline: Instant) -> bool {
    if Instant::now() + Duration::from_millis(20) >= deadline {
        return false;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    true
}

// ------------------------------------------------------------------ Store

pub struct StoreSvc(pub std::sync::Arc<Ctx>);

#[tonic::async_trait]
impl store_server::Store for StoreSvc {
    async fn get(&self, req: Request<pb::GetRequest>) -> Result<Response<pb::GetResponse>, Status> {
        self.0.admin(&req, "get")?;
        let r = req.into_inner();
        let c = if r.local {
            Consistency::Local
        } else {
            Consistency::Linearizable
        };
        let (kv, revision) = self.0.read(|| self.0.store.get(&r.key, c)).await?;
        Ok(Response::new(pb::GetResponse { kv, revision }))
    }

    async fn list(
        &self,
        req: Request<pb::ListRequest>,
    ) -> Result<Response<pb::ListResponse>, Status> {
        self.0.admin(&req, "list")?;
        let r = req.into_inner();
        let c = if r.local {
            Consistency::Local
        } else {
            Consistency::Linearizable
        };
        let (kvs, revision) = self.0.read(|| self.0.store.list(&r.prefix, c)).await?;
        Ok(Response::new(pb::ListResponse { kvs, revision }))
    }

    async fn write(
        &self,
        req: Request<pb::WriteRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        self.0.admin(&req, "write")?;
        let hops = hops(&req);
        let token = auth::token_of(&req).map(str::to_string);
        let body = req.into_inner();
        let r = self.0.write(body, token.as_deref(), hops).await?;
        Ok(Response::new(r))
    }

    type WatchStream = ReceiverStream<Result<pb::WatchResponse, Status>>;

    async fn watch(
        &self,
        req: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        self.0.admin(&req, "watch")?;
        let r = req.into_inner();
        let mut w = self
            .0
            .store
            .watch(&r.prefix, r.start_revision)
            .map_err(status_of)?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    n = w.next() => n,
                    _ = tx.closed() => return,
                };
                let item = match next {
                    Ok(b) => Ok(pb::WatchResponse {
                        events: b.events,
                        revision: b.revision,
                    }),
                    Err(e) => Err(status_of(e)),
                };
                let end = item.is_err();
                if tx.send(item).await.is_err() || end {
                    return;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

// ------------------------------------------------------------------ Cluster

pub struct ClusterSvc(pub std::sync::Arc<Ctx>);

fn status_response(s: drover_store::Status) -> pb::StatusResponse {
    pb::StatusResponse {
        id: s.id,
        leader: s.leader.unwrap_or(0),
        term: s.term,
        commit: s.commit,
        applied: s.applied,
        first_index: s.first_index,
        last_index: s.last_index,
        role: s.role.to_string(),
        members: s.members.iter().map(member_pb).collect(),
        matched: s.matched.into_iter().collect(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

impl ClusterSvc {
    /// On the leader: add as learner, wait until it caught up, promote.
    async fn join_here(
        &self,
        r: &pb::JoinRequest,
        deadline: Instant,
    ) -> Result<Vec<Member>, StoreError> {
        let store = &self.0.store;
        let member = Member {
            id: r.id,
            addr: r.addr.clone(),
            http: r.http.clone(),
            learner: true,
            removed: false,
        };
        store
            .change_members(MemberChange::AddLearner(member))
            .await?;
        let target = store.status().await?.commit;
        loop {
            let st = store.status().await?;
            if st.role != drover_store::Role::Leader {
                return Err(StoreError::NotLeader { leader: st.leader });
            }
            if st.matched.get(&r.id).copied().unwrap_or(0) >= target {
                break;
            }
            if Instant::now() >= deadline {
                return Err(StoreError::Unavailable(format!(
                    "member {:x} did not catch up with the log in time (is {} reachable from the leader?)",
                    r.id, r.addr
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        store.change_members(MemberChange::Promote(r.id)).await
    }
}

#[tonic::async_trait]
impl cluster_server::Cluster for ClusterSvc {
    async fn status(
        &self,
        req: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        self.0.admin(&req, "cluster status")?;
        let s = self.0.store.status().await.map_err(status_of)?;
        Ok(Response::new(status_response(s)))
    }

    async fn join(
        &self,
        req: Request<pb::JoinRequest>,
    ) -> Result<Response<pb::JoinResponse>, Status> {
        let hops = hops(&req);
        let r = req.into_inner();
        if !crate::auth::same_token(&r.join_token, &self.0.join_token) {
            return Err(Status::permission_denied(
                "wrong join token: use the content of DIR/join-token of a member",
            ));
        }
        if r.id == 0 || r.addr.is_empty() {
            return Err(Status::invalid_argument("join: id and addr are required"));
        }
        let deadline = Instant::now() + self.0.timeout.max(Duration::from_secs(60));
        let mut hint = None;
        loop {
            let err = match self.0.route(hint, deadline).await? {
                Route::Local => match self.join_here(&r, deadline).await {
                    Ok(members) => {
                        let admin_token = self
                            .0
                            .admin_token
                            .read()
                            .unwrap_or_else(|e| e.into_inner())
                            .clone();
                        return Ok(Response::new(pb::JoinResponse {
                            members: members.iter().map(member_pb).collect(),
                            admin_token,
                        }));
                    }
                    Err(StoreError::NotLeader { leader }) => {
                        hint = leader;
                        Status::unavailable("not the leader")
                    }
                    Err(e @ (StoreError::Ambiguous | StoreError::Unavailable(_))) => {
                        hint = None;
                        status_of(e)
                    }
                    Err(e) => return Err(status_of(e)),
                },
                Route::Forward(ch) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let fwd = forwarded(r.clone(), None, hops, left)?;
                    match ClusterClient::new(ch).join(fwd).await {
                        Ok(resp) => return Ok(resp),
                        Err(s) if retryable(&s) => {
                            hint = None;
                            s
                        }
                        Err(s) => return Err(s),
                    }
                }
            };
            if !pause(deadline).await {
                return Err(err);
            }
        }
    }

    async fn remove_member(
        &self,
        req: Request<pb::RemoveMemberRequest>,
    ) -> Result<Response<pb::RemoveMemberResponse>, Status> {
        self.0.admin(&req, "remove member")?;
        let hops = hops(&req);
        let token = auth::token_of(&req).map(str::to_string);
        let r = req.into_inner();
        if r.id == 0 {
            return Err(Status::invalid_argument(
                "id: the member id to remove is required",
            ));
        }
        let deadline = self.0.deadline();
        let mut hint = None;
        loop {
            let err = match self.0.route(hint, deadline).await? {
                Route::Local => match self
                    .0
                    .store
                    .change_members(MemberChange::Remove(r.id))
                    .await
                {
                    Ok(members) => {
                        return Ok(Response::new(pb::RemoveMemberResponse {
                            members: members.iter().map(member_pb).collect(),
                        }))
                    }
                    Err(StoreError::NotLeader { leader }) => {
                        hint = leader;
                        Status::unavailable("not the leader")
                    }
                    Err(e @ (StoreError::Ambiguous | StoreError::Unavailable(_))) => {
                        hint = None;
                        status_of(e)
                    }
                    Err(e) => return Err(status_of(e)),
                },
                Route::Forward(ch) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let fwd = forwarded(r, token.as_deref(), hops, left)?;
                    match ClusterClient::new(ch).remove_member(fwd).await {
                        Ok(resp) => return Ok(resp),
                        Err(s) if retryable(&s) => {
                            hint = None;
                            s
                        }
                        Err(s) => return Err(s),
                    }
                }
            };
            if !pause(deadline).await {
                return Err(err);
            }
        }
    }
}

// ------------------------------------------------------------------ Raft

pub struct RaftSvc(pub std::sync::Arc<Ctx>);

#[tonic::async_trait]
impl raft_server::Raft for RaftSvc {
    async fn send(&self, req: Request<pb::RaftBatch>) -> Result<Response<pb::RaftAck>, Status> {
        auth::check(&req, &self.0.join_token, "the raft transport")?;
        let b = req.into_inner();
        let store = &self.0.store;
        let members = store.members();
        match members.get(&b.from) {
            Some(m) if m.removed => {
                return Err(Status::failed_precondition(format!(
                    "member {:x} was removed from the cluster",
                    b.from
                )))
            }
            None if !b.from_addr.is_empty() => store.learn_peer(b.from, b.from_addr.clone()),
            _ => {}
        }
        for bytes in &b.msgs {
            let msg = raft::eraftpb::Message::parse_from_bytes(bytes)
                .map_err(|e| Status::invalid_argument(format!("malformed raft message: {e}")))?;
            if msg.from != b.from {
                return Err(Status::invalid_argument(
                    "raft message sender does not match the batch",
                ));
            }
            store.step(msg).map_err(status_of)?;
        }
        Ok(Response::new(pb::RaftAck {}))
    }

    async fn heartbeats(
        &self,
        req: Request<pb::HeartbeatBatch>,
    ) -> Result<Response<pb::HeartbeatAck>, Status> {
        auth::check(&req, &self.0.join_token, "relayed heartbeats")?;
        self.0.heartbeats.beat_all(&req.into_inner().nodes);
        Ok(Response::new(pb::HeartbeatAck {}))
    }
}
