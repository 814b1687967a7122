//! The HTTP port: health and status as JSON (API and metrics come later).

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use drover_store::Store;
use serde_json::{json, Value};

pub fn router(store: Store) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/healthz", get(health))
        .route("/status", get(status))
        .with_state(store)
}

/// 200 when this member knows a leader and its store runs; 503 otherwise.
async fn health(State(store): State<Store>) -> (StatusCode, Json<Value>) {
    let leader = store.leader();
    let stopped = store.stop_state();
    let ok = leader.leader.is_some() && stopped.is_none();
    let body = json!({
        "health": if ok { "true" } else { "false" },
        "member": format!("{:016x}", store.id()),
        "leader": leader.leader.map(|l| format!("{l:016x}")),
        "term": leader.term,
        "applied": store.applied(),
        "reason": stopped.map(|e| e.to_string()).or_else(|| (!ok).then(|| "no leader elected".to_string())),
    });
    let code = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body))
}

async fn status(State(store): State<Store>) -> (StatusCode, Json<Value>) {
    match store.status().await {
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
