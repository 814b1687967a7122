//! `Cluster`: membership and certificates. `status` is for readers,
//! `remove_member`, `issue_client` and `rotate_token` for admins; `certify`
//! carries a join token (or renews a node's own certificate); `join` needs
//! the member certificate `certify` gave. Membership changes run on the
//! leader (forwarded there from any member); any member signs.

use super::{admin, reader};
use crate::api::{snapshot, Objects};
use crate::auth::{self, Caller};
use crate::ctx::{hops, Ctx, Forwarding};
use crate::error::ApiError;
use crate::trust;
use drover_pki::{Role, TokenKind};
use drover_proto::reason::Reason;
use drover_proto::v1::cluster_client::ClusterClient;
use drover_proto::v1::{self as pb, cluster_server};
use drover_store::backup::Encoder;
use drover_store::{Error as StoreError, Member, MemberChange};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

fn member_pb(m: &Member) -> pb::Member {
    m.clone()
}

pub struct ClusterSvc(pub Arc<Ctx>);

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
        sessions: 0,
    }
}

/// Largest certificate signing request accepted.
const CSR_MAX: usize = 16 << 10;

impl ClusterSvc {
    /// Certifies a new member (server token).
    fn certify_member(&self, r: &pb::CertifyRequest) -> Result<pb::CertifyResponse, Status> {
        let ctx = &self.0;
        ctx.trust
            .check_token(&r.token, TokenKind::Server)
            .map_err(super::status)?;
        if let Some(m) = ctx.store.members().get(&r.member) {
            if m.removed {
                return Err(Reason::MemberRemoved.status(format!(
                    "member {:016x} was removed from the cluster; start with an empty data dir to join again",
                    r.member
                )));
            }
            if !m.learner {
                return Err(Reason::Conflict.status(format!(
                    "member {:016x} is already a voting member; a new member needs a new id (an empty data dir)",
                    r.member
                )));
            }
        }
        if r.hosts.len() > 16 || r.hosts.iter().any(|h| h.len() > 253) {
            return Err(
                Reason::BadRequest.status("hosts: at most 16 names of at most 253 characters")
            );
        }
        let issued = ctx
            .trust
            .sign(
                &r.csr,
                &Role::Member(r.member),
                &r.hosts,
                ctx.trust.member_cert_ttl,
            )
            .map_err(super::status)?;
        tracing::info!("certified member {:016x}", r.member);
        Ok(pb::CertifyResponse {
            cert: issued.cert_pem,
            ca: ctx.trust.ca.cert_pem().to_string(),
            ca_key: ctx.trust.ca.key_pem().to_string(),
            server_token: ctx.trust.token(TokenKind::Server).to_string(),
            node_token: ctx.trust.token(TokenKind::Node).to_string(),
            admin_token: ctx.admin_token(),
            servers: ctx.voters(),
        })
    }

    /// Certifies a node: a join (node token) or a renewal (its own
    /// certificate, still bound).
    async fn certify_node(
        &self,
        caller: &Caller,
        r: &pb::CertifyRequest,
    ) -> Result<pb::CertifyResponse, Status> {
        let ctx = &self.0;
        let from = if r.token.is_empty() {
            match caller {
                Caller::Node { name, serial, .. } if *name == r.node => Some(serial.clone()),
                Caller::Node { name, .. } => {
                    return Err(Reason::Forbidden.status(format!(
                        "node {name} may renew only its own certificate, not {:?}'s",
                        r.node
                    )))
                }
                other => {
                    return Err(super::refusal(
                        other,
                        "certify (a node token, or the node's own certificate to renew it)",
                        super::Access::Read,
                    ))
                }
            }
        } else {
            ctx.trust
                .check_token(&r.token, TokenKind::Node)
                .map_err(super::status)?;
            None
        };
        let bad = drover_api::validation::is_dns1123_subdomain(&r.node);
        if !bad.is_empty() {
            let shown: String = r.node.chars().take(64).collect();
            return Err(Reason::Invalid.status(format!(
                "node: Invalid value: {shown:?}: {}",
                bad.join("; ")
            )));
        }
        let issued = ctx
            .trust
            .sign(
                &r.csr,
                &Role::Node(r.node.clone()),
                &[],
                ctx.trust.node_cert_ttl,
            )
            .map_err(super::status)?;
        let described = described_node(r, from.is_none())?;
        Objects::new(ctx.clone())
            .bind_node_cert(
                &r.node,
                &issued.serial,
                &issued.key,
                from.as_deref(),
                described.as_ref(),
            )
            .await
            .map_err(super::status)?;
        if described.is_some() {
            // The session follows within moments: until it does, the node
            // is as alive as this call (the lifecycle controller must not
            // judge a Node whose agent is opening its session).
            ctx.heartbeats.beat(&r.node);
        }
        tracing::info!(
            node = %r.node,
            "{} a node certificate",
            if from.is_some() { "renewed" } else { "issued" }
        );
        Ok(pb::CertifyResponse {
            cert: issued.cert_pem,
            ca: ctx.trust.ca.cert_pem().to_string(),
            servers: ctx.voters(),
            ..Default::default()
        })
    }

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
                // A join that fails leaves no learner behind.
                if let Err(e) = store.change_members(MemberChange::Remove(r.id)).await {
                    tracing::warn!("cannot remove the learner {:x} of a failed join: {e}", r.id);
                }
                return Err(StoreError::Unavailable(format!(
                    "member {:x} did not catch up with the log in time (is {} reachable from the leader?); it was removed: join again with an empty data dir",
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
        reader(&self.0, &req, "cluster status")?;
        let s = self.0.store.status().await.map_err(ApiError::from)?;
        let mut r = status_response(s);
        r.sessions = self.0.sessions.count() as u32;
        Ok(Response::new(r))
    }

    async fn join(
        &self,
        req: Request<pb::JoinRequest>,
    ) -> Result<Response<pb::JoinResponse>, Status> {
        let hops = hops(&req);
        let caller = auth::caller(&req, "", &self.0.revocations);
        let r = req.into_inner();
        // The joiner itself, or a member relaying its call to the leader
        // (a follower forwards over its own member certificate, after it
        // checked the joiner's: the branch above, on that member).
        let relayed = hops > 0
            && matches!(caller, Caller::Member(m) if m != r.id
                && self.0.store.members().get(&m).is_some_and(|x| !x.removed));
        if caller != Caller::Member(r.id) && !relayed {
            return Err(Reason::Forbidden.status(format!(
                "{caller} may not join as member {:016x}: a member joins with the certificate `certify` gave it for that id",
                r.id
            )));
        }
        if r.id == 0 || r.addr.is_empty() {
            return Err(Reason::BadRequest.status("join: id and addr are required"));
        }
        let how = Forwarding {
            body: &r,
            token: None,
            hops,
            deadline: Instant::now() + self.0.join_catch_up,
            idempotent: true,
        };
        let resp = self
            .0
            .on_leader(
                &how,
                || async {
                    let members = self.join_here(&r, how.deadline).await?;
                    Ok(pb::JoinResponse {
                        members: members.iter().map(member_pb).collect(),
                        admin_token: self.0.admin_token(),
                    })
                },
                |ch, req| async move {
                    ClusterClient::new(ch)
                        .join(req)
                        .await
                        .map(|r| r.into_inner())
                },
            )
            .await?;
        Ok(Response::new(resp))
    }

    async fn remove_member(
        &self,
        req: Request<pb::RemoveMemberRequest>,
    ) -> Result<Response<pb::RemoveMemberResponse>, Status> {
        admin(&self.0, &req, "remove member")?;
        let hops = hops(&req);
        let token = auth::token_of(&req).map(str::to_string);
        let r = req.into_inner();
        if r.id == 0 {
            return Err(Reason::BadRequest.status("id: the member id to remove is required"));
        }
        let how = Forwarding {
            body: &r,
            token: token.as_deref(),
            hops,
            deadline: self.0.deadline(),
            idempotent: true,
        };
        let resp = self
            .0
            .on_leader(
                &how,
                || async {
                    let members = self
                        .0
                        .store
                        .change_members(MemberChange::Remove(r.id))
                        .await?;
                    Ok(pb::RemoveMemberResponse {
                        members: members.iter().map(member_pb).collect(),
                    })
                },
                |ch, req| async move {
                    ClusterClient::new(ch)
                        .remove_member(req)
                        .await
                        .map(|r| r.into_inner())
                },
            )
            .await
            .map_err(no_quorum_hint)?;
        Ok(Response::new(resp))
    }

    async fn certify(
        &self,
        req: Request<pb::CertifyRequest>,
    ) -> Result<Response<pb::CertifyResponse>, Status> {
        let caller = auth::caller(&req, "", &self.0.revocations);
        let r = req.into_inner();
        if r.csr.len() > CSR_MAX {
            return Err(
                Reason::BadRequest.status(format!("csr: {} bytes; at most {CSR_MAX}", r.csr.len()))
            );
        }
        let resp = match (r.member, r.node.is_empty()) {
            (0, false) => self.certify_node(&caller, &r).await?,
            (m, true) if m != 0 => self.certify_member(&r)?,
            _ => {
                return Err(Reason::BadRequest
                    .status("certify: name either a node (node) or a member id (member)"))
            }
        };
        Ok(Response::new(resp))
    }

    async fn issue_client(
        &self,
        req: Request<pb::IssueClientRequest>,
    ) -> Result<Response<pb::IssueClientResponse>, Status> {
        let caller = super::authorize(
            &self.0,
            &req,
            super::Access::Write,
            "issuing a client certificate",
        )?;
        let r = req.into_inner();
        if r.csr.len() > CSR_MAX {
            return Err(Reason::BadRequest.status(format!(
                "csr: {} bytes; at most {CSR_MAX}: send one PEM certificate signing request (drover access issue makes it)",
                r.csr.len()
            )));
        }
        client_name(&r.name)?;
        let role = match r.role.as_str() {
            "admin" => Role::Admin(r.name.clone()),
            "viewer" => Role::Viewer(r.name.clone()),
            "metrics" => Role::Metrics(r.name.clone()),
            other => {
                let shown: String = other.chars().take(32).collect();
                return Err(Reason::Invalid.status(format!(
                    "role: Unsupported value: {shown:?}: supported values: \"admin\", \"viewer\", \"metrics\""
                )));
            }
        };
        let ttl = match r.ttl_seconds {
            0 => trust::CLIENT_CERT_TTL,
            s if !(60..=10 * 365 * 86_400).contains(&s) => {
                return Err(Reason::Invalid.status("ttl: between one minute and ten years"))
            }
            s => Duration::from_secs(s),
        };
        let issued = self
            .0
            .trust
            .sign(&r.csr, &role, &[], ttl)
            .map_err(super::status)?;
        // On record before it is handed out: every certificate out there
        // can be revoked by its name.
        let record = crate::access::Record {
            name: r.name.clone(),
            role: r.role.clone(),
            serial: issued.serial.clone(),
            not_after: crate::access::unix(issued.not_after),
            issued_at: crate::access::unix(std::time::SystemTime::now()),
            issued_by: caller.to_string(),
            revoked_at: None,
            revoked_by: None,
        };
        crate::access::record_issued(&self.0, &record)
            .await
            .map_err(super::status)?;
        tracing::info!(
            "issued a client certificate for {role} (serial {}) to {caller}",
            issued.serial
        );
        Ok(Response::new(pb::IssueClientResponse {
            cert: issued.cert_pem,
            ca: self.0.trust.ca.cert_pem().to_string(),
            servers: self.0.voters(),
        }))
    }

    async fn rotate_token(
        &self,
        req: Request<pb::RotateTokenRequest>,
    ) -> Result<Response<pb::RotateTokenResponse>, Status> {
        let caller = super::authorize(&self.0, &req, super::Access::Write, "rotating a token")?;
        let kind = match req.get_ref().kind.as_str() {
            "server" => TokenKind::Server,
            "node" => TokenKind::Node,
            "admin" => {
                let token = crate::identity::new_token("admin");
                // The connection that asks keeps working: its caller is
                // the one who knows the new token.
                if let Some(p) = auth::peer(&req) {
                    p.token.used(drover_pki::revoke::token_mark(&token));
                }
                crate::loops::tokens::publish_admin(&self.0, &token)
                    .await
                    .map_err(super::status)?;
                tracing::info!("{caller} rotated the admin token");
                return Ok(Response::new(pb::RotateTokenResponse { token }));
            }
            "metrics" => {
                let token = crate::identity::new_token("metrics");
                crate::loops::tokens::publish_metrics(&self.0, &token)
                    .await
                    .map_err(super::status)?;
                tracing::info!("{caller} made a new metrics token");
                return Ok(Response::new(pb::RotateTokenResponse { token }));
            }
            _ => {
                return Err(Reason::Invalid.status(
                    "kind: Unsupported value: supported values: \"server\", \"node\", \"admin\", \"metrics\"",
                ))
            }
        };
        let token = drover_pki::JoinToken::generate(kind, self.0.trust.ca.digest());
        crate::loops::tokens::publish(&self.0, &token)
            .await
            .map_err(super::status)?;
        tracing::info!("{caller} rotated the {} token", kind.as_str());
        Ok(Response::new(pb::RotateTokenResponse {
            token: token.to_string(),
        }))
    }

    async fn list_access(
        &self,
        req: Request<pb::ListAccessRequest>,
    ) -> Result<Response<pb::ListAccessResponse>, Status> {
        admin(&self.0, &req, "listing client certificates")?;
        let records = crate::access::list(&self.0).await.map_err(super::status)?;
        Ok(Response::new(pb::ListAccessResponse {
            records: records.iter().map(|r| r.to_proto()).collect(),
        }))
    }

    async fn revoke_access(
        &self,
        req: Request<pb::RevokeAccessRequest>,
    ) -> Result<Response<pb::RevokeAccessResponse>, Status> {
        let caller = super::authorize(
            &self.0,
            &req,
            super::Access::Write,
            "revoking a client certificate",
        )?;
        let r = req.into_inner();
        client_name(&r.name)?;
        let serial = (!r.serial.is_empty()).then_some(r.serial.as_str());
        let revoked = crate::access::revoke(&self.0, &r.name, serial, &caller.to_string())
            .await
            .map_err(super::status)?;
        for rec in &revoked {
            tracing::info!(
                "{caller} revoked the certificate {} of {} {}",
                rec.serial,
                rec.role,
                rec.name
            );
        }
        Ok(Response::new(pb::RevokeAccessResponse {
            revoked: revoked.iter().map(|r| r.to_proto()).collect(),
        }))
    }

    type SnapshotStream = ReceiverStream<Result<pb::SnapshotChunk, Status>>;

    /// A snapshot file's bytes, taken from a linearizable list of the
    /// whole store and streamed in pieces of [`SNAPSHOT_CHUNK`] bytes.
    async fn snapshot(
        &self,
        req: Request<pb::SnapshotRequest>,
    ) -> Result<Response<Self::SnapshotStream>, Status> {
        admin(
            &self.0,
            &req,
            "snapshot (it holds every Secret, the CA key and the tokens)",
        )?;
        let started = Instant::now();
        let (header, kvs) = snapshot::take(&self.0).await.map_err(super::status)?;
        tracing::info!(
            "snapshot: {} objects at revision {} for a client ({} ms to read)",
            kvs.len(),
            header.revision,
            started.elapsed().as_millis()
        );
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            // The first piece says what the whole holds.
            let mut head = Some((header.revision, kvs.len() as u64));
            let mut piece = |data, done| {
                let (revision, objects) = head.take().unwrap_or_default();
                pb::SnapshotChunk {
                    data,
                    done,
                    revision,
                    objects,
                }
            };
            let (mut enc, mut buf) = Encoder::start(&header);
            drop(header);
            for kv in &kvs {
                enc.object(kv, &mut buf);
                if buf.len() >= SNAPSHOT_CHUNK
                    && tx
                        .send(Ok(piece(std::mem::take(&mut buf), false)))
                        .await
                        .is_err()
                {
                    return;
                }
            }
            buf.extend(enc.finish());
            let _ = tx.send(Ok(piece(buf, true))).await;
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn list_snapshots(
        &self,
        req: Request<pb::ListSnapshotsRequest>,
    ) -> Result<Response<pb::ListSnapshotsResponse>, Status> {
        admin(&self.0, &req, "list snapshots")?;
        let s = self.0.snapshots.clone();
        let dir = s.dir.clone();
        let snapshots = tokio::task::spawn_blocking(move || snapshot::list(&dir))
            .await
            .map_err(|e| Reason::InternalError.status(format!("listing snapshots failed: {e}")))?
            .map_err(|e| {
                Reason::InternalError.status(format!(
                    "cannot read the snapshot directory {}: {e}",
                    s.dir.display()
                ))
            })?;
        Ok(Response::new(pb::ListSnapshotsResponse {
            dir: s.dir.display().to_string(),
            snapshots,
            schedule: match s.interval {
                Some(every) => format!(
                    "every {}, keeping {}",
                    humantime::format_duration(every),
                    s.retain
                ),
                None => String::new(),
            },
        }))
    }
}

/// A removal that found no leader (or timed out waiting for a quorum)
/// says what to do when the quorum is lost for good.
fn no_quorum_hint(e: ApiError) -> ApiError {
    const HINT: &str = "removing a member needs a quorum (a majority of the members up and talking); if the others are lost for good, stop the most up-to-date surviving server and restart it with `drover server --data-dir DIR --force-new-cluster` (docs/operations.md)";
    match e {
        ApiError::Unavailable(m) => ApiError::Unavailable(format!("{m}; {HINT}")),
        ApiError::Timeout(m) => ApiError::Timeout(format!("{m}; {HINT}")),
        ApiError::NotLeader(m) => ApiError::NotLeader(format!("{m}; {HINT}")),
        other => other,
    }
}

/// The size of the pieces a snapshot is streamed in.
const SNAPSHOT_CHUNK: usize = 1 << 20;

/// Refuses a client's name that is not a DNS subdomain (what a
/// certificate's common name and a record's name may hold).
fn client_name(name: &str) -> Result<(), Status> {
    let bad = drover_api::validation::is_dns1123_subdomain(name);
    if bad.is_empty() {
        return Ok(());
    }
    let shown: String = name.chars().take(64).collect();
    Err(Reason::Invalid.status(format!(
        "name: Invalid value: {shown:?}: {}",
        bad.join("; ")
    )))
}

/// The Node a joining agent describes (`node_object`), checked as a hello's
/// (`None` for a renewal, or an agent that sends none).
fn described_node(
    r: &pb::CertifyRequest,
    joining: bool,
) -> Result<Option<drover_api::Node>, Status> {
    if !joining || r.node_object.is_empty() {
        return Ok(None);
    }
    if r.node_object.len() > crate::limits::MAX_OBJECT_BYTES {
        return Err(Reason::BadRequest.status(format!(
            "node_object: {} bytes, more than the {} an object may have",
            r.node_object.len(),
            crate::limits::MAX_OBJECT_BYTES
        )));
    }
    let hello = pb::Hello {
        node: r.node_object.clone(),
        ..Default::default()
    };
    let node = crate::loops::session::hello_node(&hello).map_err(super::status)?;
    if node.metadata.name != r.node {
        return Err(Reason::Invalid.status(format!(
            "node_object: metadata.name {:?} is not the node {:?} the join certifies",
            node.metadata.name, r.node
        )));
    }
    Ok(Some(node))
}
