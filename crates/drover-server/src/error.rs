//! Why a control-plane operation failed, as data.
//!
//! Everything below the gRPC services (the object API in [`crate::api`],
//! forwarding in [`crate::ctx`], the loops) answers [`ApiError`]; only the
//! services in [`crate::svc`] turn it into a `tonic::Status` (with the
//! reason code in the status metadata, see [`drover_proto::reason`]). The
//! variants are the Kubernetes `Status` reasons where one fits, so the HTTP
//! API can map them the same way.

use drover_proto::reason::Reason;
use drover_store::Error as StoreError;

/// An error of the object API or of the control plane under it. Every
/// variant holds the message a user sees: it names the object, the field
/// and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// The object does not exist.
    #[error("{0}")]
    NotFound(String),
    /// An object of that name exists.
    #[error("{0}")]
    AlreadyExists(String),
    /// A compare-and-swap lost: the object changed meanwhile.
    #[error("{0}")]
    Conflict(String),
    /// Objects failed validation; `causes` has every object's field errors.
    #[error("{message}")]
    Invalid {
        /// The causes, one line per object, as the API server words them.
        message: String,
        /// The objects' field errors.
        causes: Vec<drover_api::Invalid>,
    },
    /// A malformed request (not JSON, a bad selector, a missing field).
    #[error("{0}")]
    BadRequest(String),
    /// A revision that was compacted away: relist.
    #[error("{0}")]
    Expired(String),
    /// The server gave up waiting.
    #[error("{0}")]
    Timeout(String),
    /// No leader, a leader change, a stopping store: retry.
    #[error("{0}")]
    Unavailable(String),
    /// This member is not the leader (the caller retries on the leader).
    #[error("{0}")]
    NotLeader(String),
    /// This member is still joining its cluster.
    #[error("{0}")]
    Joining(String),
    /// The member (this one or the caller) was removed from the cluster.
    #[error("{0}")]
    MemberRemoved(String),
    /// The request was refused for the caller's credential.
    #[error("{0}")]
    Forbidden(String),
    /// The server failed: a corrupt object, a storage error.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// The reason code that travels with the error.
    pub fn reason(&self) -> Reason {
        match self {
            ApiError::NotFound(_) => Reason::NotFound,
            ApiError::AlreadyExists(_) => Reason::AlreadyExists,
            ApiError::Conflict(_) => Reason::Conflict,
            ApiError::Invalid { .. } => Reason::Invalid,
            ApiError::BadRequest(_) => Reason::BadRequest,
            ApiError::Expired(_) => Reason::Expired,
            ApiError::Timeout(_) => Reason::Timeout,
            ApiError::Unavailable(_) => Reason::ServiceUnavailable,
            ApiError::NotLeader(_) => Reason::NotLeader,
            ApiError::Joining(_) => Reason::Joining,
            ApiError::MemberRemoved(_) => Reason::MemberRemoved,
            ApiError::Forbidden(_) => Reason::Forbidden,
            ApiError::Internal(_) => Reason::InternalError,
        }
    }

    /// The error with a reason and a message, as a peer answered it (see
    /// [`crate::ctx`]): the inverse of [`ApiError::reason`] (field causes
    /// do not travel).
    pub fn from_reason(reason: Reason, message: String) -> ApiError {
        match reason {
            Reason::NotFound => ApiError::NotFound(message),
            Reason::AlreadyExists => ApiError::AlreadyExists(message),
            Reason::Conflict => ApiError::Conflict(message),
            Reason::Invalid => ApiError::Invalid {
                message,
                causes: Vec::new(),
            },
            Reason::BadRequest | Reason::NoSession | Reason::RequestEntityTooLarge => {
                ApiError::BadRequest(message)
            }
            Reason::Unauthorized | Reason::Forbidden => ApiError::Forbidden(message),
            Reason::Expired => ApiError::Expired(message),
            Reason::Timeout => ApiError::Timeout(message),
            Reason::TooManyRequests | Reason::ServiceUnavailable => ApiError::Unavailable(message),
            Reason::NotLeader => ApiError::NotLeader(message),
            Reason::Joining => ApiError::Joining(message),
            Reason::MemberRemoved => ApiError::MemberRemoved(message),
            Reason::NotImplemented | Reason::InternalError => ApiError::Internal(message),
        }
    }

    /// Validation failures of one or more objects.
    pub fn invalid(causes: Vec<drover_api::Invalid>) -> ApiError {
        let message = causes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n");
        ApiError::Invalid { message, causes }
    }

    /// `<resource> "<name>" not found`, as the API server says it.
    pub fn not_found(kind: drover_api::Kind, name: &str) -> ApiError {
        ApiError::NotFound(format!("{} {name:?} not found", kind.resource()))
    }

    /// `<resource> "<name>" already exists`.
    pub fn already_exists(kind: drover_api::Kind, name: &str) -> ApiError {
        ApiError::AlreadyExists(format!("{} {name:?} already exists", kind.resource()))
    }

    /// The API server's optimistic-concurrency conflict.
    pub fn conflict(kind: drover_api::Kind, name: &str) -> ApiError {
        ApiError::Conflict(format!(
            "Operation cannot be fulfilled on {} {name:?}: the object has been modified; please apply your changes to the latest version and try again",
            kind.resource()
        ))
    }

    /// A delete's `preconditions.uid` that is not the object's, in the API
    /// server's words.
    pub fn uid_precondition(wanted: &str, actual: &str) -> ApiError {
        ApiError::Conflict(format!(
            "Precondition failed: UID in precondition: {wanted}, UID in object meta: {actual}"
        ))
    }

    /// Whether trying again (on another member, after a pause) may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ApiError::Unavailable(_) | ApiError::NotLeader(_) | ApiError::Joining(_)
        )
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        let msg = e.to_string();
        match e {
            StoreError::NotLeader { .. } => ApiError::NotLeader(msg),
            // A removed member answers nothing more: its callers go to
            // another member (the raft transport tells a removed peer so
            // with [`ApiError::MemberRemoved`]).
            StoreError::Removed
            | StoreError::Ambiguous
            | StoreError::Unavailable(_)
            | StoreError::Stopped => ApiError::Unavailable(msg),
            StoreError::AlreadyExists { .. } => ApiError::AlreadyExists(msg),
            StoreError::NotFound { .. } | StoreError::UnknownMember(_) => ApiError::NotFound(msg),
            StoreError::Conflict { .. } => ApiError::Conflict(msg),
            StoreError::TooOld { .. } => ApiError::Expired(msg),
            StoreError::Invalid(_) => ApiError::BadRequest(msg),
            StoreError::Timeout(..) => ApiError::Timeout(msg),
            StoreError::Storage(_) => ApiError::Internal(msg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_survives_a_trip_through_its_reason() {
        let all = [
            ApiError::NotFound("m".into()),
            ApiError::AlreadyExists("m".into()),
            ApiError::Conflict("m".into()),
            ApiError::Invalid {
                message: "m".into(),
                causes: Vec::new(),
            },
            ApiError::BadRequest("m".into()),
            ApiError::Expired("m".into()),
            ApiError::Timeout("m".into()),
            ApiError::Unavailable("m".into()),
            ApiError::NotLeader("m".into()),
            ApiError::Joining("m".into()),
            ApiError::MemberRemoved("m".into()),
            ApiError::Forbidden("m".into()),
            ApiError::Internal("m".into()),
        ];
        for e in all {
            assert_eq!(ApiError::from_reason(e.reason(), "m".into()), e);
        }
    }

    #[test]
    fn store_errors_keep_their_meaning() {
        assert!(matches!(
            ApiError::from(StoreError::NotLeader { leader: None }),
            ApiError::NotLeader(_)
        ));
        assert!(ApiError::from(StoreError::Removed).is_retryable());
        assert!(ApiError::from(StoreError::Ambiguous).is_retryable());
        assert!(!ApiError::not_found(drover_api::Kind::Pod, "p").is_retryable());
        assert_eq!(
            ApiError::not_found(drover_api::Kind::DaemonSet, "x").to_string(),
            "daemonsets.apps \"x\" not found"
        );
    }
}
