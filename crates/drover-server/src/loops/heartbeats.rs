//! A follower relays the names of the nodes it heard from to the leader
//! every half heartbeat interval (`Raft.Heartbeats`, join token), so the
//! leader's node lifecycle loop sees every node whatever member its agent
//! talks to.

use crate::ctx::Ctx;
use crate::heartbeats::HEARTBEAT_INTERVAL;
use drover_proto::v1 as pb;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tonic::Request;

/// Relays the heartbeats this member heard to the leader, when it is not
/// the leader itself, until `stop`.
pub async fn relay(ctx: Arc<Ctx>, mut stop: watch::Receiver<bool>) {
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
        // Authenticated by this member's certificate (the channel's TLS).
        let mut req = Request::new(pb::HeartbeatBatch { nodes });
        req.set_timeout(Duration::from_secs(2));
        if let Err(e) = pb::raft_client::RaftClient::new(ch).heartbeats(req).await {
            tracing::debug!("cannot relay heartbeats to the leader: {}", e.message());
        }
    }
}
