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
use drover_proto::reason::Reason;
use tonic::{Request, Status};

/// The wire form of an error.
pub fn status(e: ApiError) -> Status {
    e.reason().status(e.to_string())
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
}
