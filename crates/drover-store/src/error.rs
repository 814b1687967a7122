use std::time::Duration;

/// Result alias of the store.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a store call can answer besides success.
///
/// The messages are meant for people: they name the key or member and say
/// what to do next.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum Error {
    /// This member is not the leader; writes must go to `leader`.
    #[error("this member is not the leader{}", match .leader { Some(l) => format!(" (the leader is member {l:x})"), None => " and no leader is known yet".to_string() })]
    NotLeader { leader: Option<u64> },
    #[error("{key:?} already exists; use an update to change it")]
    AlreadyExists { key: String },
    #[error("{key:?} not found")]
    NotFound { key: String },
    #[error("conflict on {key:?}: its resourceVersion is {actual}, the write expected {expected}; read it again and retry")]
    Conflict {
        key: String,
        expected: u64,
        actual: u64,
    },
    #[error("resourceVersion {requested} is too old: history before {compacted} was compacted; list again and watch from the list's revision")]
    TooOld { requested: u64, compacted: u64 },
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The leader changed while the write was in flight: it may or may not
    /// have been applied. Retrying with the same client request id is safe.
    #[error("the leader changed while the write was in flight; its outcome is unknown (retry with the same request id)")]
    Ambiguous,
    #[error("no answer within {0:?}: {1}")]
    Timeout(Duration, &'static str),
    #[error("unavailable: {0}")]
    Unavailable(String),
    #[error("no member {0:x} in the cluster; `drover cluster status` lists the members")]
    UnknownMember(u64),
    #[error("this member was removed from the cluster")]
    Removed,
    #[error("the store is shut down")]
    Stopped,
    #[error("storage: {0}")]
    Storage(String),
}

impl Error {
    /// A stable numeric code kept with deduplicated outcomes.
    pub(crate) fn code(&self) -> u32 {
        match self {
            Error::AlreadyExists { .. } => 1,
            Error::NotFound { .. } => 2,
            Error::Conflict { .. } => 3,
            Error::Invalid(_) => 4,
            _ => 99,
        }
    }
}

impl From<sled::Error> for Error {
    fn from(e: sled::Error) -> Self {
        Error::Storage(e.to_string())
    }
}

impl From<raft::Error> for Error {
    fn from(e: raft::Error) -> Self {
        match e {
            raft::Error::ProposalDropped => {
                Error::Unavailable("the proposal was dropped (leadership is moving); retry".into())
            }
            other => Error::Storage(format!("raft: {other}")),
        }
    }
}

impl From<prost::DecodeError> for Error {
    fn from(e: prost::DecodeError) -> Self {
        Error::Storage(format!("corrupt record: {e}"))
    }
}

impl From<protobuf::ProtobufError> for Error {
    fn from(e: protobuf::ProtobufError) -> Self {
        Error::Storage(format!("corrupt raft record: {e}"))
    }
}
