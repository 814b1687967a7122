//! Join tokens that `drover token rotate` replaced: the new token is
//! written under [`crate::trust::token_key`] (one raft write), sealed with
//! a key of the CA's ([`crate::trust::Trust::seal_token`]: a read of the
//! store does not give it), and every member takes it up from its own
//! applied state ([`refresh`]), so the old token stops working everywhere.
//! Nodes and members already joined keep their certificates: a token only
//! matters for joining.
//!
//! The admin token is replicated the same way, sealed under
//! [`ADMIN_TOKEN_KEY`] (members write it in their `client.yaml` and
//! kubeconfig); taking a new one up cuts the connections the old one let
//! in ([`Ctx::set_admin_token`]). The metrics token is only ever checked,
//! so only its SHA-256 is replicated, under [`METRICS_TOKEN_KEY`].

use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::trust::{sha256_hex, token_key, Replicated, ADMIN_TOKEN_KEY, METRICS_TOKEN_KEY};
use drover_pki::{JoinToken, TokenKind};
use drover_proto::v1::{self as pb, op};
use drover_store::Consistency;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Replicates a new token (through the leader).
pub async fn publish(ctx: &Ctx, token: &JoinToken) -> Result<(), ApiError> {
    put(ctx, token_key(token.kind), ctx.trust.seal_token(token)?).await?;
    ctx.trust.set_token(token.clone());
    Ok(())
}

/// Replicates a new admin token, sealed. Every member (this one too, on
/// its next [`refresh`]) takes it up and refuses the old one.
pub async fn publish_admin(ctx: &Ctx, token: &str) -> Result<(), ApiError> {
    put(
        ctx,
        ADMIN_TOKEN_KEY.to_string(),
        ctx.trust.seal_secret("admin", token)?,
    )
    .await
}

/// What is replicated of the metrics token: its SHA-256 only.
#[derive(serde::Serialize, serde::Deserialize)]
struct MetricsToken {
    sha256: String,
}

/// Replicates the SHA-256 of a new metrics token.
pub async fn publish_metrics(ctx: &Ctx, token: &str) -> Result<(), ApiError> {
    let sha256 = sha256_hex(token);
    let value = serde_json::to_vec(&MetricsToken {
        sha256: sha256.clone(),
    })
    .map_err(|e| ApiError::Internal(format!("metrics token record: {e}")))?;
    put(ctx, METRICS_TOKEN_KEY.to_string(), value).await?;
    ctx.set_metrics_token(Some(sha256));
    Ok(())
}

async fn put(ctx: &Ctx, key: String, value: Vec<u8>) -> Result<(), ApiError> {
    let body = pb::WriteRequest {
        op: Some(pb::Op {
            op: Some(op::Op::Update(pb::Update {
                key,
                value,
                expected_revision: 0,
                upsert: true,
            })),
        }),
        request_id: rand::random::<u64>() | 1,
    };
    ctx.write(body, None, 0).await?;
    Ok(())
}

/// Takes up the admin and metrics tokens replicated to this member.
async fn refresh_client_tokens(ctx: &Ctx) {
    if let Ok((Some(kv), _)) = ctx.store.get(ADMIN_TOKEN_KEY, Consistency::Local).await {
        let current = ctx.admin_token();
        match ctx.trust.open_secret("admin", &kv.value, &current) {
            Ok(Some(t)) => {
                tracing::info!("took up a rotated admin token: the old one is refused from now on");
                ctx.set_admin_token(t);
            }
            Ok(None) => {}
            Err(e) => tracing::warn!("ignoring the replicated admin token: {e}"),
        }
    }
    if let Ok((Some(kv), _)) = ctx.store.get(METRICS_TOKEN_KEY, Consistency::Local).await {
        match serde_json::from_slice::<MetricsToken>(&kv.value) {
            Ok(m) if m.sha256.len() == 64 => {
                if ctx.metrics_token().as_deref() != Some(m.sha256.as_str()) {
                    ctx.set_metrics_token(Some(m.sha256));
                }
            }
            Ok(_) => tracing::warn!("ignoring the replicated metrics token: not a SHA-256"),
            Err(e) => tracing::warn!("ignoring the replicated metrics token: {e}"),
        }
    }
}

/// Takes up the tokens replicated to this member; one a member before
/// sealing wrote in clear is written again, sealed.
pub async fn refresh(ctx: &Ctx) {
    // A member still joining learns the admin token when it has joined.
    if !ctx.admin_token().is_empty() {
        refresh_client_tokens(ctx).await;
    }
    for kind in [TokenKind::Server, TokenKind::Node] {
        let Ok((Some(kv), _)) = ctx.store.get(&token_key(kind), Consistency::Local).await else {
            continue;
        };
        match ctx.trust.open_token(kind, &kv.value) {
            Ok(Replicated::Sealed(t)) => {
                if t != ctx.trust.token(kind) {
                    ctx.trust.set_token(t);
                }
            }
            Ok(Replicated::Clear(t)) => {
                if t != ctx.trust.token(kind) {
                    ctx.trust.set_token(t.clone());
                }
                if let Err(e) = reseal(ctx, &t, kv.mod_revision).await {
                    tracing::debug!(
                        "the replicated {} token is not sealed yet: {e}",
                        kind.as_str()
                    );
                }
            }
            Err(e) => tracing::warn!("ignoring the replicated {} token: {e}", kind.as_str()),
        }
    }
}

/// Writes a token found in clear again, sealed (compare-and-swap on the
/// revision it was read at: a rotation meanwhile wins).
async fn reseal(ctx: &Ctx, token: &JoinToken, revision: u64) -> Result<(), ApiError> {
    let body = pb::WriteRequest {
        op: Some(pb::Op {
            op: Some(op::Op::Update(pb::Update {
                key: token_key(token.kind),
                value: ctx.trust.seal_token(token)?,
                expected_revision: revision,
                upsert: false,
            })),
        }),
        request_id: rand::random::<u64>() | 1,
    };
    ctx.write(body, None, 0).await?;
    Ok(())
}

/// Takes up a rotated token as soon as its write is applied here (the
/// client-file loop also [`refresh`]es every half second, for what this
/// misses): the old admin token stops working on every member within
/// milliseconds, not a tick.
pub async fn follow(ctx: Arc<Ctx>, mut stop: watch::Receiver<bool>) {
    loop {
        let from = ctx.store.applied() + 1;
        let mut w = match ctx.store.watch(crate::trust::TOKEN_KEY, from) {
            Ok(w) => w,
            Err(e) => {
                tracing::debug!("cannot watch the replicated tokens yet: {e}");
                tokio::select! {
                    _ = stop.wait_for(|s| *s) => return,
                    _ = tokio::time::sleep(Duration::from_millis(200)) => continue,
                }
            }
        };
        refresh(&ctx).await;
        loop {
            let next = tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                n = w.next() => n,
            };
            if next.is_err() {
                break;
            }
            refresh(&ctx).await;
        }
    }
}
