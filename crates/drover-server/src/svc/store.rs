//! `Store`: the key/value API under the objects (`drover kv`). Admins and
//! members only, reads too: raw keys hold what the object API never shows
//! a viewer (the replicated join tokens under `/drover/tokens/`, sealed,
//! and whatever a future key holds), so a viewer reads objects through
//! `Objects` and the Kubernetes API, never keys.

use super::{admin, status};
use crate::auth;
use crate::ctx::{hops, Ctx};
use crate::error::ApiError;
use drover_proto::v1::{self as pb, store_server};
use drover_store::Consistency;
use std::sync::Arc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

pub struct StoreSvc(pub Arc<Ctx>);

#[tonic::async_trait]
impl store_server::Store for StoreSvc {
    async fn get(&self, req: Request<pb::GetRequest>) -> Result<Response<pb::GetResponse>, Status> {
        admin(&self.0, &req, "kv get")?;
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
        admin(&self.0, &req, "kv list")?;
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
        admin(&self.0, &req, "kv write")?;
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
        admin(&self.0, &req, "kv watch")?;
        let r = req.into_inner();
        let mut w = self
            .0
            .store
            .watch(&r.prefix, r.start_revision)
            .map_err(ApiError::from)?;
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
                    Err(e) => Err(status(e.into())),
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
