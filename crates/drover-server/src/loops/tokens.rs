//! Join tokens that `drover token rotate` replaced: the new token is
//! written under [`crate::trust::token_key`] (one raft write), sealed with
//! a key of the CA's ([`crate::trust::Trust::seal_token`]: a read of the
//! store does not give it), and every member takes it up from its own
//! applied state ([`refresh`]), so the old token stops working everywhere.
//! Nodes and members already joined keep their certificates: a token only
//! matters for joining.

use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::trust::{token_key, Replicated};
use drover_pki::{JoinToken, TokenKind};
use drover_proto::v1::{self as pb, op};
use drover_store::Consistency;

/// Replicates a new token (through the leader).
pub async fn publish(ctx: &Ctx, token: &JoinToken) -> Result<(), ApiError> {
    let body = pb::WriteRequest {
        op: Some(pb::Op {
            op: Some(op::Op::Update(pb::Update {
                key: token_key(token.kind),
                value: ctx.trust.seal_token(token)?,
                expected_revision: 0,
                upsert: true,
            })),
        }),
        request_id: rand::random::<u64>() | 1,
    };
    ctx.write(body, None, 0).await?;
    ctx.trust.set_token(token.clone());
    Ok(())
}

/// Takes up the tokens replicated to this member; one a member before
/// sealing wrote in clear is written again, sealed.
pub async fn refresh(ctx: &Ctx) {
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
