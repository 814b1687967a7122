//! Leader-only operations from any member: route to the leader (waiting
//! for an election when there is none), forward with the caller's token
//! and a hop count, and retry across leader changes. A peer's refusal comes
//! back as its reason code ([`drover_proto::reason`]), never read from its
//! text.

use super::{pause, Ctx};
use crate::auth::{self, MAX_MESSAGE};
use crate::error::ApiError;
use drover_proto::reason::Reason;
use drover_proto::v1::{self as pb, store_client::StoreClient};
use drover_store::Error as StoreError;
use std::time::{Duration, Instant};
use tonic::transport::Channel;
use tonic::{Request, Status};

/// The metadata key of the hop count of a forwarded call.
pub const HOPS: &str = "x-drover-hops";

/// A forwarded call is refused after this many hops (leadership moving).
const MAX_HOPS: u32 = 3;

/// Where a leader-only call goes.
pub enum Route {
    /// This member leads.
    Local,
    /// The leader, through this channel.
    Forward(Channel),
}

/// How many times a request was forwarded already.
pub fn hops<T>(req: &Request<T>) -> u32 {
    req.metadata()
        .get(HOPS)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A forwarded copy of a request, with the caller's token and one more hop.
pub fn forwarded<T>(
    body: T,
    token: Option<&str>,
    hops: u32,
    left: Duration,
) -> Result<Request<T>, ApiError> {
    if hops >= MAX_HOPS {
        return Err(ApiError::Unavailable(
            "leadership is moving; the request was forwarded too often, retry".into(),
        ));
    }
    let mut r = Request::new(body);
    if let Some(t) = token {
        r.metadata_mut().insert("authorization", auth::bearer(t));
    }
    r.metadata_mut().insert(HOPS, (hops + 1).into());
    r.set_timeout(left.max(Duration::from_millis(100)));
    Ok(r)
}

/// A peer's refusal as an error of this member: by its reason code; a
/// status without one did not come from a drover handler (the connection
/// failed, the call timed out on the way): unavailable, so it is retried.
pub fn from_peer(s: &Status) -> ApiError {
    match Reason::of(s) {
        Some(r) => ApiError::from_reason(r, s.message().to_string()),
        None => match s.code() {
            tonic::Code::PermissionDenied | tonic::Code::Unauthenticated => {
                ApiError::Forbidden(s.message().to_string())
            }
            tonic::Code::InvalidArgument => ApiError::BadRequest(s.message().to_string()),
            _ => ApiError::Unavailable(format!("the leader did not answer: {}", s.message())),
        },
    }
}

impl Ctx {
    /// Where a leader-only call goes: here, or the leader's channel.
    pub async fn route(&self, hint: Option<u64>, deadline: Instant) -> Result<Route, ApiError> {
        let state = self.store.leader();
        if state.is_leader {
            return Ok(Route::Local);
        }
        let leader = match hint.or(state.leader) {
            Some(l) => Some(l),
            None => {
                let left = deadline.saturating_duration_since(Instant::now());
                self.store.wait_leader(left).await
            }
        };
        match leader {
            None => Err(ApiError::Unavailable(
                "no leader is elected (is a majority of the members up?); retry".into(),
            )),
            Some(l) if l == self.id => Ok(Route::Local),
            Some(l) => match self.store.members().get(&l) {
                Some(m) if !m.removed => Ok(Route::Forward(self.channel(&m.addr)?)),
                _ => Err(ApiError::Unavailable(format!(
                    "the leader {l:x} is not yet in this member's membership; retry"
                ))),
            },
        }
    }

    /// Runs a leader-only operation: `local` when this member leads,
    /// otherwise `forward` with a forwarded copy of `body` (the caller's
    /// token, one more hop) on the leader's channel; both again, after a
    /// pause, while the answer is "not the leader" or — for an idempotent
    /// operation — unavailable, until the deadline.
    pub async fn on_leader<B, T, L, LF, F, FF>(
        &self,
        how: &Forwarding<'_, B>,
        mut local: L,
        mut forward: F,
    ) -> Result<T, ApiError>
    where
        B: Clone,
        L: FnMut() -> LF,
        LF: std::future::Future<Output = Result<T, StoreError>>,
        F: FnMut(Channel, Request<B>) -> FF,
        FF: std::future::Future<Output = Result<T, Status>>,
    {
        let mut hint = None;
        loop {
            let err = match self.route(hint, how.deadline).await? {
                Route::Local => match local().await {
                    Ok(v) => return Ok(v),
                    Err(e @ StoreError::NotLeader { leader }) => {
                        hint = leader;
                        ApiError::from(e)
                    }
                    Err(e @ (StoreError::Ambiguous | StoreError::Unavailable(_)))
                        if how.idempotent =>
                    {
                        hint = None;
                        ApiError::from(e)
                    }
                    Err(e) => return Err(e.into()),
                },
                Route::Forward(ch) => {
                    let left = how.deadline.saturating_duration_since(Instant::now());
                    let req = forwarded(how.body.clone(), how.token, how.hops, left)?;
                    match forward(ch, req).await {
                        Ok(v) => return Ok(v),
                        Err(s) => {
                            let e = from_peer(&s);
                            // Not the leader: surely not applied there.
                            let again = matches!(e, ApiError::NotLeader(_))
                                || (how.idempotent && e.is_retryable());
                            if !again {
                                return Err(e);
                            }
                            hint = None;
                            e
                        }
                    }
                }
            };
            if !pause(how.deadline).await {
                return Err(err);
            }
        }
    }

    /// Applies a write on the leader: here, or forwarded with `token` (the
    /// caller's, or this member's admin token) to the leader. A write with a
    /// request id is retried across leader changes (applied at most once);
    /// one without only when it surely was not applied (not the leader).
    pub async fn write(
        &self,
        body: pb::WriteRequest,
        token: Option<&str>,
        hops: u32,
    ) -> Result<pb::WriteResponse, ApiError> {
        let op = body.op.clone().filter(|o| o.op.is_some()).ok_or_else(|| {
            ApiError::BadRequest("op: one of create, update or delete is required".into())
        })?;
        let own_token;
        let token = match token {
            Some(t) => t,
            None => {
                own_token = self.admin_token();
                own_token.as_str()
            }
        };
        let how = Forwarding {
            idempotent: body.request_id != 0,
            body: &body,
            token: Some(token),
            hops,
            deadline: self.deadline(),
        };
        self.on_leader(
            &how,
            || async {
                let started = std::time::Instant::now();
                let w = self.store.write(op.clone(), body.request_id).await?;
                self.metrics.write_done(started.elapsed());
                Ok(pb::WriteResponse {
                    revision: w.revision,
                    kv: Some(w.kv),
                    replayed: w.replayed,
                })
            },
            |ch, req| async move {
                let mut c = StoreClient::new(ch)
                    .max_decoding_message_size(MAX_MESSAGE)
                    .max_encoding_message_size(MAX_MESSAGE);
                c.write(req).await.map(|r| r.into_inner())
            },
        )
        .await
    }
}

/// How [`Ctx::on_leader`] forwards: the request's body, the caller's
/// token, how often it was forwarded already, until when it may try, and
/// whether running it twice is harmless (then it is also tried again after
/// an ambiguous or unavailable answer).
pub struct Forwarding<'a, B> {
    pub body: &'a B,
    pub token: Option<&'a str>,
    pub hops: u32,
    pub deadline: Instant,
    pub idempotent: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_understood_by_reason_not_by_text() {
        let s = Reason::NotLeader.status("anything at all");
        assert_eq!(from_peer(&s), ApiError::NotLeader("anything at all".into()));
        // The old text without a reason is no longer special.
        let s = Status::unavailable("not the leader");
        assert!(matches!(from_peer(&s), ApiError::Unavailable(_)));
        let s = Reason::Conflict.status("c");
        assert!(!from_peer(&s).is_retryable());
    }

    #[test]
    fn forwarding_counts_hops() {
        let r = forwarded((), Some("t"), 1, Duration::from_secs(1)).unwrap();
        assert_eq!(hops(&r), 2);
        assert!(forwarded((), None, MAX_HOPS, Duration::from_secs(1)).is_err());
    }
}
