//! `Raft`: the receiving side of the raft transport, and heartbeats
//! relayed by followers. Members only: the caller's member certificate,
//! for an id in the membership (not removed), and every message's sender
//! must be that member.

use super::{authorize, status, Access};
use crate::auth::Caller;
use crate::ctx::Ctx;
use drover_proto::reason::Reason;
use drover_proto::v1::{self as pb, raft_server};
use protobuf::Message as _;
use std::sync::Arc;
use tonic::{Request, Response, Status, Streaming};

pub struct RaftSvc(pub Arc<Ctx>);

#[tonic::async_trait]
impl raft_server::Raft for RaftSvc {
    async fn send(&self, req: Request<pb::RaftBatch>) -> Result<Response<pb::RaftAck>, Status> {
        let caller = authorize(&self.0, &req, Access::Member, WHAT)?;
        self.step(&caller, req.into_inner())?;
        Ok(Response::new(pb::RaftAck {}))
    }

    async fn stream(
        &self,
        req: Request<Streaming<pb::RaftBatch>>,
    ) -> Result<Response<pb::RaftAck>, Status> {
        let (meta, ext, mut batches) = req.into_parts();
        let who = Request::from_parts(meta, ext, ());
        authorize(&self.0, &who, Access::Member, WHAT)?;
        while let Some(b) = batches.message().await? {
            // A certificate revoked, or its member removed, while the
            // stream is open stops it at the next batch.
            let caller = authorize(&self.0, &who, Access::Member, WHAT)?;
            self.step(&caller, b)?;
        }
        Ok(Response::new(pb::RaftAck {}))
    }

    async fn heartbeats(
        &self,
        req: Request<pb::HeartbeatBatch>,
    ) -> Result<Response<pb::HeartbeatAck>, Status> {
        authorize(&self.0, &req, Access::Member, "relayed heartbeats")?;
        self.0.heartbeats.beat_all(&req.into_inner().nodes);
        Ok(Response::new(pb::HeartbeatAck::default()))
    }
}

/// What the transport is called in refusals.
const WHAT: &str = "the raft transport";

impl RaftSvc {
    /// Hands one batch from `caller` to raft: only from a member of the
    /// cluster (or, before this member learnt the membership, anyone it
    /// takes the leader's messages from), and only messages sent as that
    /// member.
    fn step(&self, caller: &Caller, b: pb::RaftBatch) -> Result<(), Status> {
        if *caller != Caller::Member(b.from) {
            return Err(Reason::Forbidden.status(format!(
                "{caller} may not send raft messages as member {:016x}",
                b.from
            )));
        }
        let store = &self.0.store;
        let members = store.members();
        match members.get(&b.from) {
            Some(m) if m.removed => {
                return Err(Reason::MemberRemoved
                    .status(format!("member {:x} was removed from the cluster", b.from)))
            }
            Some(_) => {}
            // A member that joins knows no membership until the leader's
            // first snapshot: it takes the leader's messages.
            None if members.is_empty() => {
                if !b.from_addr.is_empty() {
                    store.learn_peer(b.from, b.from_addr.clone())
                }
            }
            // A certificate of an id the cluster never added (or not yet:
            // raft sends again once this member applied the change).
            None => {
                return Err(Reason::Forbidden.status(format!(
                    "member {:016x} is not a member of this cluster: its certificate carries no raft messages",
                    b.from
                )))
            }
        }
        for bytes in &b.msgs {
            let msg = raft::eraftpb::Message::parse_from_bytes(bytes)
                .map_err(|e| Reason::BadRequest.status(format!("malformed raft message: {e}")))?;
            if msg.from != b.from {
                return Err(
                    Reason::BadRequest.status("raft message sender does not match the batch")
                );
            }
            store.step(msg).map_err(|e| status(e.into()))?;
        }
        Ok(())
    }
}
