//! `Objects`: the object API for clients (`drover apply|get|delete|…`).
//! Every call needs the admin token. `Watch` of a kind the informer holds
//! is served from its watch cache ([`crate::cache::window`]), of the
//! others from the store.

use super::{admin, reader, status};
use crate::api::{decode, prefix, to_json, Objects};
use crate::cache::Informer;
use crate::error::ApiError;
use drover_api::selector::Selector;
use drover_api::{Kind, Manifest};
use drover_proto::v1::{self as pb, objects_server};
use drover_store::EventType;
use serde_json::Value;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

/// A kind as a client names it.
fn parse_kind(s: &str) -> Result<Kind, ApiError> {
    Kind::parse(s).map_err(|e| ApiError::BadRequest(e.to_string()))
}

/// The object API, and the informer its lists are served from (for the
/// kinds it holds: [`crate::cache::Informer::consistent_view`]).
pub struct ObjectsSvc(pub Objects, pub Informer);

#[tonic::async_trait]
impl objects_server::Objects for ObjectsSvc {
    async fn apply(
        &self,
        req: Request<pb::ApplyRequest>,
    ) -> Result<Response<pb::ApplyResponse>, Status> {
        admin(self.0.ctx(), &req, "apply")?;
        let r = req.into_inner();
        let mode = drover_api::FieldValidation::parse(&r.field_validation).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "field validation {:?}: not one of Strict, Warn, Ignore",
                r.field_validation
            ))
        })?;
        let applied = self.0.apply_with(&r.manifests, r.dry_run, mode).await?;
        let mut results = Vec::with_capacity(applied.len());
        for (a, warnings) in applied {
            let m = a.object();
            results.push(pb::ApplyResult {
                reference: m.reference(),
                namespace: m.namespace().to_string(),
                action: a.action().into(),
                warnings,
                object: to_json(m)?,
            });
        }
        Ok(Response::new(pb::ApplyResponse { results }))
    }

    async fn get(
        &self,
        req: Request<pb::ObjectRef>,
    ) -> Result<Response<pb::ObjectResponse>, Status> {
        reader(self.0.ctx(), &req, "get")?;
        let r = req.into_inner();
        let m = self
            .0
            .get(parse_kind(&r.kind)?, &r.namespace, &r.name)
            .await?;
        Ok(Response::new(pb::ObjectResponse {
            object: to_json(&m)?,
        }))
    }

    async fn list(
        &self,
        req: Request<pb::ListObjectsRequest>,
    ) -> Result<Response<pb::ListObjectsResponse>, Status> {
        reader(self.0.ctx(), &req, "list")?;
        let r = req.into_inner();
        let kind = parse_kind(&r.kind)?;
        let selector = if r.label_selector.is_empty() {
            None
        } else {
            Some(Selector::parse(&r.label_selector).map_err(|e| {
                ApiError::BadRequest(format!("label selector {:?}: {e}", r.label_selector))
            })?)
        };
        let ns = (!r.namespace.is_empty()).then_some(r.namespace.as_str());
        let keep =
            |m: &drover_api::ObjectMeta| selector.as_ref().is_none_or(|s| s.matches(&m.labels));
        let cached = match self.1.consistent_view(self.0.ctx(), kind).await? {
            Some(view) => view
                .objects(kind, ns, keep)
                .map(|items| (items, view.revision)),
            None => None,
        };
        let (items, rev) = match cached {
            Some(listed) => listed,
            None => self.0.list(kind, ns, selector.as_ref()).await?,
        };
        Ok(Response::new(pb::ListObjectsResponse {
            items: items.iter().map(to_json).collect::<Result<_, _>>()?,
            resource_version: rev.to_string(),
        }))
    }

    async fn update(
        &self,
        req: Request<pb::UpdateObjectRequest>,
    ) -> Result<Response<pb::ObjectResponse>, Status> {
        admin(self.0.ctx(), &req, "update")?;
        let r = req.into_inner();
        let v: Value = serde_json::from_slice(&r.object)
            .map_err(|e| ApiError::BadRequest(format!("object: not JSON: {e}")))?;
        let m = Manifest::from_value(v).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let m = self.0.update(m).await?;
        Ok(Response::new(pb::ObjectResponse {
            object: to_json(&m)?,
        }))
    }

    async fn delete(
        &self,
        req: Request<pb::ObjectRef>,
    ) -> Result<Response<pb::ObjectResponse>, Status> {
        admin(self.0.ctx(), &req, "delete")?;
        let r = req.into_inner();
        let m = self
            .0
            .delete(parse_kind(&r.kind)?, &r.namespace, &r.name)
            .await?;
        Ok(Response::new(pb::ObjectResponse {
            object: to_json(&m)?,
        }))
    }

    type WatchStream = ReceiverStream<Result<pb::ObjectEvent, Status>>;

    async fn watch(
        &self,
        req: Request<pb::WatchObjectsRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        reader(self.0.ctx(), &req, "watch")?;
        let r = req.into_inner();
        let kind = parse_kind(&r.kind)?;
        let from = if r.resource_version.is_empty() {
            0
        } else {
            r.resource_version.parse::<u64>().map_err(|_| {
                ApiError::BadRequest(format!(
                    "resourceVersion {:?}: not a resourceVersion this server gave out",
                    r.resource_version
                ))
            })?
        };
        let ns = (!r.namespace.is_empty()).then_some(r.namespace.as_str());
        let store = &self.0.ctx().store;
        let (tx, rx) = tokio::sync::mpsc::channel(256);
        if let Some(cache) = self.1.watch_cache(kind) {
            // From the watch cache: one decode and one encoding per
            // change, whatever the number of watchers. Without a
            // resourceVersion, the changes after this one.
            let from = if from == 0 { store.applied() } else { from };
            let compacted = store.compacted();
            if from < compacted {
                return Err(ApiError::from(drover_store::Error::TooOld {
                    requested: from,
                    compacted,
                })
                .into());
            }
            let mut follower = cache.follow(kind, prefix(kind, ns), from);
            let first = follower
                .take()
                .map_err(|e| ApiError::Expired(e.message()))?;
            let counters = cache.counters.clone();
            tokio::spawn(async move {
                let mut batch = first;
                loop {
                    for e in &batch {
                        counters.sent.inc();
                        let event = pb::ObjectEvent {
                            r#type: e.change.name().into(),
                            object: e.json(&counters).to_vec(),
                        };
                        if tx.send(Ok(event)).await.is_err() {
                            return;
                        }
                    }
                    let next = tokio::select! {
                        n = follower.next() => n,
                        _ = tx.closed() => return,
                    };
                    batch = match next {
                        Some(Ok(b)) => b,
                        Some(Err(e)) => {
                            let _ = tx.send(Err(status(ApiError::Expired(e.message())))).await;
                            return;
                        }
                        None => return,
                    };
                }
            });
            return Ok(Response::new(ReceiverStream::new(rx)));
        }
        let mut w = store
            .watch(&prefix(kind, ns), from)
            .map_err(ApiError::from)?;
        let decodes = self.0.ctx().metrics.watch.store_decodes.clone();
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    n = w.next() => n,
                    _ = tx.closed() => return,
                };
                let batch = match next {
                    Ok(b) => b,
                    Err(e) => {
                        let _ = tx.send(Err(status(e.into()))).await;
                        return;
                    }
                };
                for e in batch.events {
                    let Some(kv) = e.kv else { continue };
                    let ty = if e.r#type == EventType::Delete as i32 {
                        "DELETED"
                    } else if kv.create_revision == kv.mod_revision {
                        "ADDED"
                    } else {
                        "MODIFIED"
                    };
                    decodes.inc();
                    let item = decode(&kv)
                        .and_then(|m| to_json(&m))
                        .map(|object| pb::ObjectEvent {
                            r#type: ty.into(),
                            object,
                        })
                        .map_err(status);
                    if tx.send(item).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}
