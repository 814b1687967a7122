//! `Cluster`: membership. `status` and `remove_member` need the admin
//! token; `join` carries the join token in its request. Changes run on the
//! leader (forwarded there from any member).

use super::admin;
use crate::auth;
use crate::ctx::{hops, Ctx, Forwarding};
use crate::error::ApiError;
use drover_proto::reason::Reason;
use drover_proto::v1::cluster_client::ClusterClient;
use drover_proto::v1::{self as pb, cluster_server};
use drover_store::{Error as StoreError, Member, MemberChange};
use std::sync::Arc;
use std::time::{Duration, Instant};
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
        admin(&self.0, &req, "cluster status")?;
        let s = self.0.store.status().await.map_err(ApiError::from)?;
        Ok(Response::new(status_response(s)))
    }

    async fn join(
        &self,
        req: Request<pb::JoinRequest>,
    ) -> Result<Response<pb::JoinResponse>, Status> {
        let hops = hops(&req);
        let r = req.into_inner();
        if !auth::same_token(&r.join_token, &self.0.join_token) {
            return Err(Reason::Forbidden
                .status("wrong join token: use the content of DIR/join-token of a member"));
        }
        if r.id == 0 || r.addr.is_empty() {
            return Err(Reason::BadRequest.status("join: id and addr are required"));
        }
        let how = Forwarding {
            body: &r,
            token: None,
            hops,
            deadline: Instant::now() + self.0.timeout.max(Duration::from_secs(60)),
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
            .await?;
        Ok(Response::new(resp))
    }
}
