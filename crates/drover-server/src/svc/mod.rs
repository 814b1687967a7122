//! The gRPC services: thin adapters that check who calls, decode the
//! request, call the layer below ([`crate::api`], [`crate::ctx`],
//! [`crate::loops`]) and encode the answer. This is the one place where an
//! [`ApiError`] becomes a `tonic::Status`: its code, its message and its
//! reason code (metadata `x-drover-reason`, [`drover_proto::reason`]).
//!
//! Who may call what ([`crate::auth::Caller`]: the connection's
//! certificate, or the admin token). Members may call everything an admin
//! may (they forward clients' calls, which they authorised themselves).
//!
//! | service | calls | who |
//! |---|---|---|
//! | `Store` ([`store`]) | get, list, watch, write (raw keys) | admin, member |
//! | `Objects` ([`objects`]) | get, list, watch | admin, viewer, member |
//! | `Objects` | apply, update, delete | admin, member |
//! | `Pods` ([`pods`]) | logs | admin, viewer, member |
//! | `Pods` | exec | admin, member |
//! | `Pods` | locate | member |
//! | `Cluster` ([`cluster`]) | status | admin, viewer, member |
//! | `Cluster` | remove member, issue client, rotate token | admin, member |
//! | `Cluster` | snapshot (every Secret, the CA key and the tokens), list snapshots | admin, member (tested: `tests/snapshots.rs` refuses a viewer, a wrong token and no credential) |
//! | `Cluster` | join | the member certificate of the joining id, or a current member's relaying it to the leader (forwarded, hops > 0) |
//! | `Cluster` | certify | anyone with the server or node token in the request; a node renewing its own certificate |
//! | `Raft` ([`raft`]) | send, heartbeats | member (a message's sender must be the certificate's member) |
//! | `Agent` ([`agent`]) | session | node, for its own name, with its current certificate |
//!
//! Inside a session (`loops/session.rs`), the node's messages speak for its
//! own objects only: `PodStatuses` and `PodEvents` ([`crate::loops::events`])
//! about pods whose `spec.nodeName` is the node, named by uid; `StaticPods`
//! make mirror pods of that node; `Leave` deletes that Node.

pub mod agent;
pub mod cluster;
pub mod objects;
pub mod pods;
pub mod raft;
pub mod store;

use crate::auth::{self, Caller};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::limits::MAX_STATUS_MESSAGE_BYTES;
use drover_proto::reason::Reason;
use tonic::{Request, Status};

/// The wire form of an error: its reason's code and reason code, and its
/// message cut to [`MAX_STATUS_MESSAGE_BYTES`] (the message travels in a
/// header; the start names the object and the field path).
pub fn status(e: ApiError) -> Status {
    e.reason().status(capped(e.to_string()))
}

/// `message`, or its first [`MAX_STATUS_MESSAGE_BYTES`] (at a character
/// boundary, room left for the note) and how many bytes were left out.
fn capped(mut message: String) -> String {
    if message.len() <= MAX_STATUS_MESSAGE_BYTES {
        return message;
    }
    let total = message.len();
    // The note is at most 40 bytes.
    let mut end = MAX_STATUS_MESSAGE_BYTES - 40;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message.truncate(end);
    message.push_str(&format!("\u{2026} ({} more bytes)", total - end));
    message
}

/// Gives a reason code to tonic's own refusal of a message over a
/// service's decoding limit (`OUT_OF_RANGE`, "decoded message length too
/// large"), which tonic answers before any handler runs and so without
/// one: `RequestEntityTooLarge`, so that a client says "too large" (not
/// `Expired`, the other `OUT_OF_RANGE`, which always carries its reason).
/// A layer over every gRPC service (`serve_grpc`); such a refusal comes
/// before any message, in the response's headers.
pub fn too_large_reason<B>(
    mut r: tonic::codegen::http::Response<B>,
) -> tonic::codegen::http::Response<B> {
    let out_of_range = (tonic::Code::OutOfRange as i32).to_string();
    let h = r.headers_mut();
    if h.get("grpc-status")
        .is_some_and(|v| v.as_bytes() == out_of_range.as_bytes())
        && !h.contains_key(drover_proto::reason::KEY)
    {
        h.insert(
            drover_proto::reason::KEY,
            tonic::codegen::http::HeaderValue::from_static(Reason::RequestEntityTooLarge.as_str()),
        );
    }
    r
}

impl From<ApiError> for Status {
    fn from(e: ApiError) -> Status {
        status(e)
    }
}

/// What a call needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads, watches, logs: admin, viewer or member.
    Read,
    /// Everything else: admin or member.
    Write,
    /// Members only (the raft transport, relays).
    Member,
}

/// Who `req` comes from, or the refusal when that caller may not do
/// `what` with `access`.
pub fn authorize<T>(
    ctx: &Ctx,
    req: &Request<T>,
    access: Access,
    what: &str,
) -> Result<Caller, Status> {
    let token = ctx.admin_token();
    let caller = auth::caller(req, &token, &ctx.revocations);
    if let Caller::Revoked { who, serial } = &caller {
        return Err(Reason::Unauthorized.status(auth::revoked_message(who, serial)));
    }
    // A member certificate counts only while its member is in the cluster:
    // removing a member revokes it.
    if let Caller::Member(id) = caller {
        if ctx.store.members().get(&id).is_some_and(|m| m.removed) {
            return Err(Reason::MemberRemoved.status(format!(
                "member {id:016x} was removed from this cluster: its certificate counts for nothing"
            )));
        }
    }
    let ok = matches!(
        (&caller, access),
        (Caller::Member(_), _)
            | (Caller::Admin(_), Access::Read | Access::Write)
            | (Caller::Viewer(_), Access::Read)
    );
    if ok {
        return Ok(caller);
    }
    if token.is_empty() && !matches!(caller, Caller::Member(_)) {
        return Err(Reason::Joining
            .status("this server is still joining its cluster; ask another member or retry"));
    }
    let metrics = ctx.metrics_token();
    if let (Caller::Anonymous, Some(t), Some(m)) = (&caller, auth::token_of(req), metrics) {
        if drover_pki::token::same(crate::trust::sha256_hex(t).as_bytes(), m.as_bytes()) {
            return Err(Reason::Forbidden.status(format!(
                "the metrics token may not call {what}: it reads /metrics and /status on the HTTP port only"
            )));
        }
    }
    if caller == Caller::Anonymous && auth::token_of(req).is_some() {
        return Err(Reason::Forbidden.status(format!(
            "wrong token for {what}: use the admin token from the server's client.yaml"
        )));
    }
    Err(refusal(&caller, what, access))
}

/// The refusal of `what` for `caller`.
pub fn refusal(caller: &Caller, what: &str, access: Access) -> Status {
    match caller {
        Caller::Anonymous if access != Access::Member => Reason::Unauthorized.status(format!(
            "no credential: {what} needs a client certificate or the admin token (`drover --config DATA_DIR/client.yaml`)"
        )),
        Caller::Anonymous => Reason::Unauthorized.status(format!(
            "{what} is for members of the cluster only"
        )),
        Caller::Metrics(_) => Reason::Forbidden.status(format!(
            "{caller} may not call {what}: a metrics credential reads /metrics and /status on the HTTP port only"
        )),
        other => Reason::Forbidden.status(format!("{other} may not call {what}")),
    }
}

/// Refuses the request unless an admin (or a member) sends it.
pub fn admin<T>(ctx: &Ctx, req: &Request<T>, what: &str) -> Result<(), Status> {
    authorize(ctx, req, Access::Write, what).map(|_| ())
}

/// Refuses the request unless an admin, a viewer or a member sends it.
pub fn reader<T>(ctx: &Ctx, req: &Request<T>, what: &str) -> Result<(), Status> {
    authorize(ctx, req, Access::Read, what).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_reach_the_wire_with_their_reason() {
        let s = status(ApiError::not_found(drover_api::Kind::Pod, "p"));
        assert_eq!(s.code(), tonic::Code::NotFound);
        assert_eq!(s.message(), "pods \"p\" not found");
        assert_eq!(Reason::of(&s), Some(Reason::NotFound));
        let s = status(ApiError::NotLeader("x".into()));
        assert_eq!(s.code(), tonic::Code::Unavailable);
        assert_eq!(Reason::of(&s), Some(Reason::NotLeader));
    }

    #[test]
    fn long_messages_are_cut_keeping_their_start_and_reason() {
        let long = format!("spec.x: Invalid value: {}", "é".repeat(10_000));
        let s = status(ApiError::BadRequest(long.clone()));
        assert!(
            s.message().len() <= MAX_STATUS_MESSAGE_BYTES,
            "{}",
            s.message().len()
        );
        assert!(s.message().starts_with("spec.x: Invalid value: é"));
        assert!(s.message().ends_with(" more bytes)"), "{}", s.message());
        assert_eq!(Reason::of(&s), Some(Reason::BadRequest));
        let short = status(ApiError::BadRequest("short".into()));
        assert_eq!(short.message(), "short");
    }
}
