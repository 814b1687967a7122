//! The gRPC services: thin adapters that check who calls, decode the
//! request, call the layer below ([`crate::api`], [`crate::ctx`],
//! [`crate::loops`]) and encode the answer. This is the one place where an
//! [`ApiError`] becomes a `tonic::Status`: its code, its message and its
//! reason code (metadata `x-drover-reason`, [`drover_proto::reason`]).
//!
//! Who may call what:
//!
//! | service | calls | credential |
//! |---|---|---|
//! | `Store` ([`store`]) | get, list, write, watch | admin token |
//! | `Objects` ([`objects`]) | apply, get, list, update, delete, watch | admin token |
//! | `Pods` ([`pods`]) | logs, exec | admin token |
//! | `Pods` | locate | join token (members) |
//! | `Cluster` ([`cluster`]) | status, remove member | admin token |
//! | `Cluster` | join | join token in the request |
//! | `Raft` ([`raft`]) | send, heartbeats | join token (members) |
//! | `Agent` ([`agent`]) | session | join token |

pub mod agent;
pub mod cluster;
pub mod objects;
pub mod pods;
pub mod raft;
pub mod store;

use crate::auth;
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

impl From<ApiError> for Status {
    fn from(e: ApiError) -> Status {
        status(e)
    }
}

/// Refuses the request unless it carries the cluster's admin token.
pub fn admin<T>(ctx: &Ctx, req: &Request<T>, what: &str) -> Result<(), Status> {
    let token = ctx.admin_token();
    if token.is_empty() {
        return Err(Reason::Joining
            .status("this server is still joining its cluster; ask another member or retry"));
    }
    auth::check(req, &token, what)
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
