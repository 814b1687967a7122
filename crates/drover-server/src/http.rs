//! The HTTP port: health for anyone, status and metrics for the admin,
//! the dashboard under `/ui` ([`crate::ui`], which says who may call
//! what), and every other path the Kubernetes API ([`crate::kapi`], which
//! says who may call what).
//!
//! `/health` (and `/healthz`) say only whether this member is healthy: 200
//! with `{"health":"true"}`, or 503 with `{"health":"false"}`; nothing
//! about the cluster (member ids, terms, errors) leaks to whoever can reach
//! the port. `/status` tells it all and needs the metrics token or the
//! admin token (`authorization: Bearer T`), or a metrics, viewer, admin
//! or member certificate (a scraper need not hold admin, nor read
//! Secrets): without one it answers 401, with another token or a node
//! certificate 403, with a revoked certificate 401. `/metrics` (the
//! Prometheus text format, [`crate::metrics`]) needs the same: it names
//! DaemonSets and counts nodes and pods.

use crate::auth::same_token;
use crate::cache::Informer;
use crate::ctx::Ctx;
use crate::metrics::{DaemonSetFacts, Facts};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::routing::{any, get};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::sync::Arc;

pub fn router(ctx: Arc<Ctx>, informer: Informer) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/healthz", get(health))
        .route("/status", get(status))
        .route("/metrics", {
            let informer = informer.clone();
            get(move |State(ctx): State<Arc<Ctx>>, req: Request| {
                metrics(ctx, informer.clone(), req)
            })
        })
        .route("/ui", any(crate::ui::handle))
        .route("/ui/{*rest}", any(crate::ui::handle))
        .fallback(crate::kapi::handle)
        .layer(axum::Extension(std::sync::Arc::new(
            crate::ui::Ui::default(),
        )))
        .layer(axum::Extension(informer))
        .with_state(ctx)
}

/// `/metrics`: the admin's; the values read now from this member's store
/// and informer (see `docs/metrics.md`).
async fn metrics(ctx: Arc<Ctx>, informer: Informer, req: Request) -> axum::response::Response {
    use axum::response::IntoResponse;
    if let Err(refused) = reader(&ctx, &req) {
        return refused.into_response();
    }
    let leader = ctx.store.leader();
    let mut facts = Facts {
        term: leader.term,
        is_leader: leader.is_leader,
        commit: 0,
        applied: ctx.store.applied(),
        ..Facts::default()
    };
    facts.sessions = ctx.sessions.count();
    facts.heartbeat_interval = ctx.heartbeats.interval(facts.sessions);
    if let Ok(s) = ctx.store.status().await {
        facts.commit = s.commit;
        facts.applied = s.applied;
    }
    let view = informer.snapshot();
    facts.nodes_ready = view.nodes.values().filter(|n| n.is_ready()).count();
    facts.nodes_not_ready = view.nodes.len() - facts.nodes_ready;
    facts.daemon_sets = view
        .daemon_sets
        .values()
        .map(|d| {
            let s = &d.status;
            DaemonSetFacts {
                namespace: d.metadata.namespace.clone(),
                name: d.metadata.name.clone(),
                counters: vec![
                    (
                        "desiredNumberScheduled",
                        i64::from(s.desired_number_scheduled),
                    ),
                    (
                        "currentNumberScheduled",
                        i64::from(s.current_number_scheduled),
                    ),
                    ("numberReady", i64::from(s.number_ready)),
                    ("numberAvailable", i64::from(s.number_available)),
                    ("numberUnavailable", i64::from(s.number_unavailable)),
                    ("numberMisscheduled", i64::from(s.number_misscheduled)),
                    (
                        "updatedNumberScheduled",
                        i64::from(s.updated_number_scheduled),
                    ),
                ],
            }
        })
        .collect();
    let mut phases: std::collections::BTreeMap<String, usize> = Default::default();
    for p in view.pods.values() {
        let phase = p
            .status
            .phase
            .as_ref()
            .map_or("Pending", |ph| ph.as_str())
            .to_string();
        *phases.entry(phase).or_default() += 1;
    }
    facts.pods = phases.into_iter().collect();
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        ctx.metrics.render(&facts),
    )
        .into_response()
}

/// 200 when this member knows a leader and its store runs; 503 otherwise.
async fn health(State(ctx): State<Arc<Ctx>>) -> (StatusCode, Json<Value>) {
    let store = &ctx.store;
    let ok = store.leader().leader.is_some() && store.stop_state().is_none();
    if ok {
        (StatusCode::OK, Json(json!({ "health": "true" })))
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "health": "false" })),
        )
    }
}

/// Lets in a viewer, admin, metrics or member certificate (unexpired,
/// not revoked), else [`by_token`]'s check; a node certificate is refused
/// (403), a revoked one 401.
fn reader(ctx: &Ctx, req: &Request) -> Result<(), (StatusCode, Json<Value>)> {
    use crate::auth::{self, Caller};
    let peer = req
        .extensions()
        .get::<ConnectInfo<crate::kapi::Peer>>()
        .and_then(|c| c.0 .0.as_ref());
    let caller = peer
        .and_then(|p| p.cert.as_ref())
        .and_then(|c| auth::of_certificate(c, &ctx.revocations));
    let refuse = |code, msg: String| Err((code, Json(json!({ "error": msg }))));
    match caller {
        Some(Caller::Viewer(_) | Caller::Admin(_) | Caller::Member(_) | Caller::Metrics(_)) => {
            Ok(())
        }
        Some(Caller::Revoked { who, serial }) => refuse(
            StatusCode::UNAUTHORIZED,
            auth::revoked_message(&who, &serial),
        ),
        Some(other) => refuse(
            StatusCode::FORBIDDEN,
            format!("{other}'s certificate may not read /status or /metrics: use a metrics or viewer certificate (drover access issue NAME --role metrics), the metrics token (drover token rotate metrics) or the admin token"),
        ),
        None => by_token(ctx, req.headers(), peer),
    }
}

/// Lets in the admin token or the metrics token; refuses a request
/// without a token (401) or with another (403). A member still joining
/// has no admin token yet: 503.
fn by_token(
    ctx: &Ctx,
    headers: &HeaderMap,
    peer: Option<&drover_pki::net::PeerInfo>,
) -> Result<(), (StatusCode, Json<Value>)> {
    let token = ctx.admin_token();
    if token.is_empty() {
        return Err((
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({
                "error": "this server is still joining its cluster; ask another member or retry"
            })),
        ));
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match given {
        None => Err((
            StatusCode::UNAUTHORIZED,
            Json(json!({
                "error": "/status and /metrics need a credential: the metrics token (`authorization: Bearer T`, made by drover token rotate metrics), a metrics or viewer certificate (drover access issue NAME --role metrics), or the admin token"
            })),
        )),
        Some(t) if same_token(t, &token) => {
            if let Some(p) = peer {
                p.token.used(ctx.revocations.token());
            }
            Ok(())
        }
        Some(t)
            if ctx.metrics_token().is_some_and(|want| {
                drover_pki::token::same(crate::trust::sha256_hex(t).as_bytes(), want.as_bytes())
            }) =>
        {
            Ok(())
        }
        Some(_) => Err((
            StatusCode::FORBIDDEN,
            Json(json!({
                "error": "wrong token for /status and /metrics: use the metrics token (drover token rotate metrics makes a new one) or the admin token from the server's client.yaml"
            })),
        )),
    }
}

async fn status(State(ctx): State<Arc<Ctx>>, req: Request) -> (StatusCode, Json<Value>) {
    if let Err(refused) = reader(&ctx, &req) {
        return refused;
    }
    match ctx.store.status().await {
        Ok(s) => (
            StatusCode::OK,
            Json(json!({
                "member": format!("{:016x}", s.id),
                "role": s.role.to_string(),
                "leader": s.leader.map(|l| format!("{l:016x}")),
                "term": s.term,
                "commit": s.commit,
                "applied": s.applied,
                "firstIndex": s.first_index,
                "lastIndex": s.last_index,
                "members": s.members.iter().map(|m| json!({
                    "id": format!("{:016x}", m.id),
                    "addr": m.addr,
                    "http": m.http,
                    "learner": m.learner,
                })).collect::<Vec<_>>(),
            })),
        ),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "error": e.to_string() })),
        ),
    }
}
