//! Join tokens that `drover token rotate` replaced: the new token is
//! written under [`crate::trust::token_key`] (one raft write), and every
//! member takes it up from its own applied state ([`refresh`]), so the old
//! token stops working everywhere. Nodes and members already joined keep
//! their certificates: a token only matters for joining.

use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::trust::token_key;
use drover_pki::{JoinToken, TokenKind};
use drover_proto::v1::{self as pb, op};
use drover_store::Consistency;

/// Replicates a new token (through the leader).
pub async fn publish(ctx: &Ctx, token: &JoinToken) -> Result<(), ApiError> {
    let body = pb::WriteRequest {
        op: Some(pb::Op {
            op: Some(op::Op::Update(pb::Update {
                key: token_key(token.kind),
                value: token.to_string().into_bytes(),
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

/// Takes up the tokens replicated to this member.
pub async fn refresh(ctx: &Ctx) {
    for kind in [TokenKind::Server, TokenKind::Node] {
        let Ok((Some(kv), _)) = ctx.store.get(&token_key(kind), Consistency::Local).await else {
            continue;
        };
        let Ok(text) = std::str::from_utf8(&kv.value) else {
            continue;
        };
        match JoinToken::parse(text, "the replicated token") {
            Ok(t) if t != ctx.trust.token(kind) => ctx.trust.set_token(t),
            Ok(_) => {}
            Err(e) => tracing::warn!("ignoring a replicated {} token: {e}", kind.as_str()),
        }
    }
}
