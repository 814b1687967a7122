//! `?watch=1`: a stream of `{"type": …, "object": …}` lines (ADDED,
//! MODIFIED, DELETED, BOOKMARK, ERROR). The kinds the informer holds are
//! served from its watch cache ([`crate::cache::window`]: one decode and
//! one JSON encoding per change, shared by every watcher; a watch from
//! before the window, or one that falls behind it, is `410 Gone`); the
//! others from the store's watch of the kind's prefix. Without a `resourceVersion` (or with `0`) the current objects
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
use crate::cache::window::{Expired, Follower, WatchEvent};
use crate::cache::Informer;
use crate::error::ApiError;
use crate::limits::MAX_KAPI_WATCHES;
use crate::metrics::WatchCounters;
use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use drover_api::{Kind, Manifest};
use drover_store::{Error as StoreError, EventType};
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
    let selection = Selection {
        q: q.clone(),
        filtered,
        matching,
        catch_up,
    };
    let prefix = prefix(t.kind, ns.as_deref());
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(64);
    let out = Out {
        tx,
        shape,
        deadline: tokio::time::Instant::now() + q.timeout,
        bookmarks: q.bookmarks,
        bookmarked: from,
    };
    if let Some(cache) = informer.watch_cache(t.kind) {
        // From the watch cache: one decode and one encoding per change,
        // whatever the number of watchers.
        let compacted = objects.ctx().store.compacted();
        if from < compacted {
            return Err(Refusal::from(ApiError::from(StoreError::TooOld {
                requested: from,
                compacted,
            })));
        }
        let mut follower = cache.follow(t.kind, prefix, from);
        let first = follower.take().map_err(expired)?;
        let counters = cache.counters.clone();
        tokio::spawn(async move {
            let _permit = permit;
            from_cache(out, selection, initial, follower, first, counters).await;
        });
    } else {
        let w = objects
            .ctx()
            .store
            .watch(&prefix, from)
            .map_err(|e| Refusal::from(ApiError::from(e)))?;
        let decodes = objects.ctx().metrics.watch.store_decodes.clone();
        tokio::spawn(async move {
            let _permit = permit;
            from_store(out, selection, initial, w, decodes).await;
        });
    }
    let mut r = Body::from_stream(ReceiverStream::new(rx)).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

fn expired(e: Expired) -> Refusal {
    Refusal::from(ApiError::Expired(e.message()))
}

/// Which objects a watcher with selectors is known to have: one that
/// stops matching is sent as DELETED, one that starts as ADDED.
struct Selection {
    q: Query,
    filtered: bool,
    matching: HashSet<String>,
    /// Changes replayed up to this revision may concern objects that
    /// matched at the watch's start revision but no longer do when the
    /// watch starts: one that does not match is sent as DELETED then.
    catch_up: u64,
}

impl Selection {
    /// The type a change of `m` (at `revision`) is sent as, if at all;
    /// `selects` tells whether `m` matches (asked only with selectors).
    fn event(
        &mut self,
        ty: &'static str,
        m: &Manifest,
        revision: u64,
        selects: impl FnOnce(&Query) -> bool,
    ) -> Option<&'static str> {
        if !self.filtered {
            return Some(ty);
        }
        let key = object_key(m);
        let (now, was) = (selects(&self.q), self.matching.contains(&key));
        Some(match (ty, now, was) {
            ("DELETED", _, _) if now || was => {
                self.matching.remove(&key);
                "DELETED"
            }
            ("MODIFIED", false, false) if revision <= self.catch_up => "DELETED",
            ("DELETED", _, _) | (_, false, false) => return None,
            (_, true, true) => "MODIFIED",
            (_, true, false) => {
                self.matching.insert(key);
                "ADDED"
            }
            (_, false, true) => {
                self.matching.remove(&key);
                "DELETED"
            }
        })
    }
}

/// Where a watch's lines go, and its bookmarks and deadline.
struct Out {
    tx: mpsc::Sender<Result<Bytes, Infallible>>,
    shape: Shape,
    deadline: tokio::time::Instant,
    bookmarks: bool,
    bookmarked: u64,
}

impl Out {
    async fn send(&self, line: Bytes) -> bool {
        self.tx.send(Ok(line)).await.is_ok()
    }

    async fn initial(&self, initial: &[Manifest]) -> bool {
        for m in initial {
            if !self.send(line("ADDED", self.shape.object(m))).await {
                return false;
            }
        }
        true
    }

    /// A bookmark at `rev` if asked for and the revision moved.
    async fn bookmark(&mut self, rev: u64) -> bool {
        if !self.bookmarks || rev == self.bookmarked {
            return true;
        }
        self.bookmarked = rev;
        let object = json!({
            "kind": self.shape.kind.name(),
            "apiVersion": self.shape.kind.api_version(),
            "metadata": { "resourceVersion": rev.to_string() },
        });
        self.send(line("BOOKMARK", object)).await
    }

    async fn error(&self, refusal: Refusal) {
        let _ = self.send(line("ERROR", refusal.body())).await;
    }
}

/// A line whose object is already JSON.
fn raw_line(ty: &str, object: &[u8]) -> Bytes {
    let mut v = Vec::with_capacity(object.len() + 32);
    v.extend_from_slice(b"{\"type\":\"");
    v.extend_from_slice(ty.as_bytes());
    v.extend_from_slice(b"\",\"object\":");
    v.extend_from_slice(object);
    v.extend_from_slice(b"}\n");
    Bytes::from(v)
}

/// Sends the changes of the watch cache's window.
async fn from_cache(
    mut out: Out,
    mut selection: Selection,
    initial: Vec<Manifest>,
    mut follower: Follower,
    first: Vec<Arc<WatchEvent>>,
    counters: WatchCounters,
) {
    if !out.initial(&initial).await {
        return;
    }
    drop(initial);
    let mut tick = tokio::time::interval(BOOKMARK_EVERY);
    tick.tick().await;
    let mut batch = first;
    let mut bookmark = false;
    loop {
        for e in &batch {
            let m = e.manifest();
            let Some(ty) = selection.event(e.change.name(), m, e.revision, |q| {
                q.labels
                    .as_ref()
                    .is_none_or(|s| s.matches(&m.metadata().labels))
                    && (q.fields.is_empty() || q.fields.matches(e.value()))
            }) else {
                continue;
            };
            let line = if out.shape.as_table {
                line(ty, out.shape.object(m))
            } else {
                raw_line(ty, e.json(&counters))
            };
            counters.sent.inc();
            if !out.send(line).await {
                return;
            }
        }
        if bookmark && !out.bookmark(follower.cursor()).await {
            return;
        }
        bookmark = false;
        let next = tokio::select! {
            n = follower.next() => n,
            _ = out.tx.closed() => return,
            _ = tokio::time::sleep_until(out.deadline) => return,
            _ = tick.tick() => {
                // Catch up first: the bookmark's revision is sent only
                // once every change before it is.
                bookmark = true;
                Some(follower.take())
            }
        };
        batch = match next {
            Some(Ok(b)) => b,
            Some(Err(e)) => {
                out.error(expired(e)).await;
                return;
            }
            None => return,
        };
    }
}

/// Sends the changes of the store's watch (kinds the informer does not
/// hold), decoding each for this watcher.
async fn from_store(
    mut out: Out,
    mut selection: Selection,
    initial: Vec<Manifest>,
    mut w: drover_store::WatchStream,
    decodes: prometheus_client::metrics::counter::Counter,
) {
    if !out.initial(&initial).await {
        return;
    }
    let mut tick = tokio::time::interval(BOOKMARK_EVERY);
    tick.tick().await;
    loop {
        let next = tokio::select! {
            n = w.next() => n,
            _ = out.tx.closed() => return,
            _ = tokio::time::sleep_until(out.deadline) => return,
            _ = tick.tick() => {
                if !out.bookmark(w.revision()).await {
                    return;
                }
                continue;
            }
        };
        let batch = match next {
            Ok(b) => b,
            Err(e) => {
                out.error(Refusal::from(ApiError::from(e))).await;
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
            let m = match decode(&kv) {
                Ok(m) => m,
                Err(err) => {
                    out.error(Refusal::from(err)).await;
                    return;
                }
            };
            let Some(ty) = selection.event(ty, &m, kv.mod_revision, |q| q.selects(&m)) else {
                continue;
            };
            if !out.send(line(ty, out.shape.object(&m))).await {
                return;
            }
        }
    }
}
