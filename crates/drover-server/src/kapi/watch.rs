//! `?watch=1`: a stream of `{"type": …, "object": …}` lines (ADDED,
//! MODIFIED, DELETED, BOOKMARK, ERROR) over the store's watch of the kind's
//! prefix. Without a `resourceVersion` (or with `0`) the current objects
//! come first as ADDED; with one, the changes after it; when that revision
//! was compacted away the answer is `410 Gone` (reason `Expired`), as an
//! ERROR event when the stream has already started. With selectors, an
//! object that stops matching comes as DELETED and one that starts as
//! ADDED (from a resourceVersion, the objects matching when the watch
//! starts stand for those that matched at that version).
//! Bookmarks (`allowWatchBookmarks`) come every [`BOOKMARK_EVERY`] when the
//! revision moved. A watch ends after `timeoutSeconds`, at most
//! [`MAX_WATCH_SECONDS`](crate::limits::MAX_WATCH_SECONDS); at most
//! [`MAX_KAPI_WATCHES`] are open in a server process at once.

use super::query::Query;
use super::read::list_page;
use super::status::Refusal;
use super::table;
use super::Target;
use crate::api::{decode, prefix, Objects};
use crate::cache::Informer;
use crate::error::ApiError;
use crate::limits::MAX_KAPI_WATCHES;
use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use drover_api::{Kind, Manifest};
use drover_store::EventType;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};
use tokio::sync::{mpsc, Semaphore};
use tokio_stream::wrappers::ReceiverStream;

/// How often a bookmark is sent (when asked for and the revision moved).
pub const BOOKMARK_EVERY: Duration = Duration::from_secs(5);

fn watches() -> &'static Arc<Semaphore> {
    static W: OnceLock<Arc<Semaphore>> = OnceLock::new();
    W.get_or_init(|| Arc::new(Semaphore::new(MAX_KAPI_WATCHES)))
}

/// How events are written: objects or one-row Tables.
#[derive(Clone, Copy)]
struct Shape {
    kind: Kind,
    as_table: bool,
    include: super::query::IncludeObject,
}

impl Shape {
    fn object(&self, m: &Manifest) -> Value {
        if self.as_table {
            let meta = json!({ "resourceVersion": m.metadata().resource_version });
            table::table(
                self.kind,
                std::slice::from_ref(m),
                self.include,
                meta,
                SystemTime::now(),
            )
        } else {
            serde_json::to_value(m).unwrap_or(Value::Null)
        }
    }
}

fn object_key(m: &Manifest) -> String {
    format!("{}/{}", m.namespace(), m.name())
}

fn line(ty: &str, object: Value) -> Bytes {
    let mut v = serde_json::to_vec(&json!({ "type": ty, "object": object })).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

fn parse_revision(rv: &str) -> Result<u64, Refusal> {
    rv.parse::<u64>().map_err(|_| {
        Refusal::bad_request(format!(
            "resourceVersion {rv:?}: not a resourceVersion this server gave out"
        ))
    })
}

/// Starts a watch.
pub async fn watch(
    objects: Objects,
    informer: Informer,
    t: Target,
    q: Query,
    as_table: bool,
) -> Result<Response, Refusal> {
    if t.sub.is_some() {
        return Err(Refusal::method_not_allowed(
            "a subresource cannot be watched",
        ));
    }
    let permit = watches().clone().try_acquire_owned().map_err(|_| {
        Refusal::new(
            StatusCode::TOO_MANY_REQUESTS,
            "TooManyRequests",
            format!("this server already serves {MAX_KAPI_WATCHES} watches; retry later or on another member"),
        )
    })?;
    let shape = Shape {
        kind: t.kind,
        as_table,
        include: q.include_object,
    };
    let mut q = q;
    if let Some(name) = &t.name {
        // `/pods/NAME?watch=1`, an old form: the one object.
        q.fields.0.push(super::query::FieldTerm {
            path: "metadata.name".into(),
            equal: true,
            value: name.clone(),
        });
    }
    let ns = t.namespace.clone();
    let mut initial = Vec::new();
    let from = match q.resource_version.as_deref() {
        None | Some("") | Some("0") => {
            let mut all = q.clone();
            all.limit = None;
            all.continue_token = None;
            let (items, meta) = list_page(&objects, &informer, t.kind, ns.as_deref(), &all).await?;
            initial = items;
            meta["resourceVersion"]
                .as_str()
                .map(parse_revision)
                .transpose()?
                .unwrap_or(0)
        }
        Some(rv) => parse_revision(rv)?,
    };
    // With selectors, the objects known to match: one that stops matching
    // is sent as DELETED, one that starts as ADDED (as the API server
    // does). From a resourceVersion, those that match now stand for those
    // that matched then.
    let filtered = q.labels.is_some() || !q.fields.is_empty();
    let mut matching: HashSet<String> = HashSet::new();
    // Changes replayed up to this revision may concern objects that
    // matched at `from` but no longer do when the watch starts: one that
    // does not match is sent as DELETED then (a client ignores a delete of
    // what it does not have).
    let mut catch_up = 0;
    if filtered {
        if initial.is_empty() && q.resource_version.is_some() {
            let mut all = q.clone();
            all.limit = None;
            all.continue_token = None;
            let (items, meta) = list_page(&objects, &informer, t.kind, ns.as_deref(), &all).await?;
            matching.extend(items.iter().map(object_key));
            catch_up = meta["resourceVersion"]
                .as_str()
                .and_then(|r| r.parse::<u64>().ok())
                .unwrap_or(0);
        } else {
            matching.extend(initial.iter().map(object_key));
        }
    }
    let mut w = objects
        .ctx()
        .store
        .watch(&prefix(t.kind, ns.as_deref()), from)
        .map_err(|e| Refusal::from(ApiError::from(e)))?;
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(64);
    tokio::spawn(async move {
        let _permit = permit;
        for m in &initial {
            if tx.send(Ok(line("ADDED", shape.object(m)))).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::Instant::now() + q.timeout;
        let mut tick = tokio::time::interval(BOOKMARK_EVERY);
        tick.tick().await;
        let mut bookmarked = from;
        loop {
            let next = tokio::select! {
                n = w.next() => n,
                _ = tx.closed() => return,
                _ = tokio::time::sleep_until(deadline) => return,
                _ = tick.tick() => {
                    let rev = w.revision();
                    if q.bookmarks && rev != bookmarked {
                        bookmarked = rev;
                        let object = json!({
                            "kind": shape.kind.name(),
                            "apiVersion": shape.kind.api_version(),
                            "metadata": { "resourceVersion": rev.to_string() },
                        });
                        if tx.send(Ok(line("BOOKMARK", object))).await.is_err() {
                            return;
                        }
                    }
                    continue;
                }
            };
            let batch = match next {
                Ok(b) => b,
                Err(e) => {
                    let refusal = Refusal::from(ApiError::from(e));
                    let _ = tx.send(Ok(line("ERROR", refusal.body()))).await;
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
                let m = match decode(&kv) {
                    Ok(m) => m,
                    Err(err) => {
                        let _ = tx.send(Ok(line("ERROR", Refusal::from(err).body()))).await;
                        return;
                    }
                };
                let ty = if filtered {
                    let key = object_key(&m);
                    let (now, was) = (q.selects(&m), matching.contains(&key));
                    match (ty, now, was) {
                        ("DELETED", _, _) if now || was => {
                            matching.remove(&key);
                            "DELETED"
                        }
                        ("MODIFIED", false, false) if kv.mod_revision <= catch_up => "DELETED",
                        ("DELETED", _, _) | (_, false, false) => continue,
                        (_, true, true) => "MODIFIED",
                        (_, true, false) => {
                            matching.insert(key);
                            "ADDED"
                        }
                        (_, false, true) => {
                            matching.remove(&key);
                            "DELETED"
                        }
                    }
                } else {
                    ty
                };
                if tx.send(Ok(line(ty, shape.object(&m)))).await.is_err() {
                    return;
                }
            }
        }
    });
    let mut r = Body::from_stream(ReceiverStream::new(rx)).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(r)
}
