//! `GET …/pods/NAME/log`: a container's output as `text/plain`, over the
//! same path as `drover logs` (the `Pods.Logs` service of
//! [`crate::svc::pods`]: the agent session held here, or relayed from the
//! member that holds it). Parameters: `container`, `follow`, `tailLines`,
//! `sinceSeconds`, `previous`, `timestamps`, `limitBytes`.

use super::status::Refusal;
use super::Target;
use crate::api::Objects;
use crate::auth;
use crate::error::ApiError;
use crate::svc::pods::PodsSvc;
use axum::body::Body;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use drover_proto::reason::Reason;
use drover_proto::v1 as pb;
use drover_proto::v1::pods_server::Pods;
use std::collections::HashMap;
use std::convert::Infallible;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

fn number(raw: &HashMap<String, String>, key: &str) -> Result<Option<u64>, Refusal> {
    match raw.get(key).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => v
            .parse::<i64>()
            .map(|n| Some(n.max(0) as u64))
            .map_err(|_| Refusal::bad_request(format!("{key} {v:?}: not a number"))),
    }
}

fn flag(raw: &HashMap<String, String>, key: &str) -> bool {
    raw.get(key)
        .is_some_and(|v| matches!(v.as_str(), "1" | "true" | "True"))
}

/// A gRPC status of the `Pods` service as a `Status` object.
fn refusal(s: tonic::Status) -> Refusal {
    let reason = Reason::of(&s).unwrap_or(Reason::InternalError);
    Refusal::from(ApiError::from_reason(reason, s.message().to_string()))
}

/// Streams a container's log.
pub async fn logs(
    objects: &Objects,
    t: &Target,
    raw: &HashMap<String, String>,
) -> Result<Response, Refusal> {
    let Some(name) = &t.name else {
        return Err(Refusal::not_found("a log needs a pod's name"));
    };
    let tail = number(raw, "tailLines")?;
    let since_ms = number(raw, "sinceSeconds")?.map(|s| s.saturating_mul(1000));
    let limit = number(raw, "limitBytes")?;
    let req = pb::PodLogsRequest {
        namespace: t.namespace.clone().unwrap_or_default(),
        pod: name.clone(),
        container: raw.get("container").cloned().unwrap_or_default(),
        follow: flag(raw, "follow"),
        tail,
        since_ms,
        timestamps: flag(raw, "timestamps"),
        previous: flag(raw, "previous"),
        relayed: false,
    };
    let ctx = objects.ctx().clone();
    // The caller was authorised by the Kubernetes API; the service is
    // called as the admin token (which it passes on when it relays).
    let mut call = tonic::Request::new(req);
    call.metadata_mut()
        .insert("authorization", auth::bearer(&ctx.admin_token()));
    let svc = PodsSvc {
        ctx,
        objects: objects.clone(),
    };
    let mut upstream = svc.logs(call).await.map_err(refusal)?.into_inner();
    // The agent's first piece says whether the log opened (an empty chunk,
    // or the first data) or why not: only then are the headers sent, so
    // that a refusal is an HTTP error (`logs -p` with no previous instance).
    let first = {
        use tokio_stream::StreamExt;
        match upstream.next().await {
            Some(Err(status)) => return Err(refusal(status)),
            first => first,
        }
    };
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(8);
    tokio::spawn(async move {
        use tokio_stream::StreamExt;
        let mut left = limit.unwrap_or(u64::MAX);
        let mut first = Some(first);
        loop {
            let next = match first.take() {
                Some(f) => f,
                None => tokio::select! {
                    n = upstream.next() => n,
                    _ = tx.closed() => return,
                },
            };
            let Some(Ok(out)) = next else { return };
            let mut data = out.data;
            if (data.len() as u64) > left {
                data.truncate(left as usize);
            }
            left -= data.len() as u64;
            if !data.is_empty() && tx.send(Ok(Bytes::from(data))).await.is_err() {
                return;
            }
            if left == 0 {
                return;
            }
        }
    });
    let mut r = Body::from_stream(ReceiverStream::new(rx)).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(r)
}
