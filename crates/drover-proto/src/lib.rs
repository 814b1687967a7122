//! The generated gRPC code of `proto/drover.proto` (package `drover.v1`).
//!
//! Everything on the wire between clients, servers and (later) agents is
//! defined there; this crate only includes what tonic/prost generate.
#![allow(clippy::all, missing_docs)]

pub mod v1 {
    tonic::include_proto!("drover.v1");
}
pub use v1::*;

pub mod caps;

pub mod codec {
    //! The codec of every generated service: prost, with small initial
    //! buffers.
    //!
    //! tonic's default codec starts every stream with an 8 KiB encode and
    //! an 8 KiB decode buffer. A server holds one agent session per node,
    //! so at 1,000 nodes those buffers alone were 16 MiB of the server's
    //! memory although an agent's messages are a few hundred bytes. Buffers
    //! still grow for large messages (a list of 10,000 pods).

    use std::marker::PhantomData;
    use tonic::codec::{BufferSettings, Codec};
    use tonic_prost::{ProstDecoder, ProstEncoder};

    /// Initial size of a stream's encode and decode buffers.
    pub const INITIAL_BUFFER: usize = 1024;
    /// Encoded bytes after which a stream's encoder flushes (tonic's default).
    pub const YIELD_THRESHOLD: usize = 32 * 1024;

    /// [`tonic_prost::ProstCodec`] with [`INITIAL_BUFFER`]-sized buffers.
    #[derive(Debug, Clone, Copy)]
    pub struct SmallCodec<T, U>(PhantomData<(T, U)>);

    impl<T, U> Default for SmallCodec<T, U> {
        fn default() -> Self {
            SmallCodec(PhantomData)
        }
    }

    fn settings() -> BufferSettings {
        BufferSettings::new(INITIAL_BUFFER, YIELD_THRESHOLD)
    }

    impl<T, U> Codec for SmallCodec<T, U>
    where
        T: prost::Message + Send + 'static,
        U: prost::Message + Default + Send + 'static,
    {
        type Encode = T;
        type Decode = U;
        type Encoder = ProstEncoder<T>;
        type Decoder = ProstDecoder<U>;

        fn encoder(&mut self) -> Self::Encoder {
            ProstEncoder::new(settings())
        }

        fn decoder(&mut self) -> Self::Decoder {
            ProstDecoder::new(settings())
        }
    }
}

pub mod reason {
    //! Why a call failed, as data: a reason code carried beside the gRPC
    //! status (metadata key [`KEY`]), so that no client or peer decides
    //! what to do by reading an error's text.
    //!
    //! The names are the Kubernetes `Status.reason` values where one fits
    //! (`NotFound`, `Conflict`, `Invalid`, …), plus drover's own for the
    //! control plane (`NotLeader`, `MemberRemoved`, `Joining`). A status
    //! without a reason did not come from a drover server's handler (a
    //! transport error, tonic's own client-side timeout).

    use tonic::metadata::{MetadataMap, MetadataValue};
    use tonic::{Code, Status};

    /// The metadata (trailer) key of the reason.
    pub const KEY: &str = "x-drover-reason";

    macro_rules! reasons {
        ($($(#[$doc:meta])* $v:ident = $s:literal,)*) => {
            /// A reason code.
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
            pub enum Reason {
                $($(#[$doc])* $v,)*
            }

            impl Reason {
                /// Every reason.
                pub const ALL: &'static [Reason] = &[$(Reason::$v,)*];

                /// The code as it travels.
                pub fn as_str(self) -> &'static str {
                    match self {
                        $(Reason::$v => $s,)*
                    }
                }

                /// Parses a code; `None` for one this build does not know.
                pub fn parse(s: &str) -> Option<Reason> {
                    match s {
                        $($s => Some(Reason::$v),)*
                        _ => None,
                    }
                }
            }
        };
    }

    reasons! {
        /// The object does not exist.
        NotFound = "NotFound",
        /// An object of that name exists.
        AlreadyExists = "AlreadyExists",
        /// A compare-and-swap lost: the object changed meanwhile.
        Conflict = "Conflict",
        /// The object is invalid (validation; the message lists the fields).
        Invalid = "Invalid",
        /// The request is malformed (not an object, a bad selector, …).
        BadRequest = "BadRequest",
        /// No or a wrong credential.
        Unauthorized = "Unauthorized",
        /// The credential may not do this.
        Forbidden = "Forbidden",
        /// A watch or read asked for a revision that was compacted: relist.
        Expired = "Expired",
        /// The server gave up waiting (on raft, on the leader).
        Timeout = "Timeout",
        /// A limit was reached.
        TooManyRequests = "TooManyRequests",
        /// A request is larger than the server decodes (gRPC's message
        /// limit; Kubernetes' 413).
        RequestEntityTooLarge = "RequestEntityTooLarge",
        /// The server cannot answer now (no leader, stopping): retry.
        ServiceUnavailable = "ServiceUnavailable",
        /// This member is not the leader: ask the leader (or retry).
        NotLeader = "NotLeader",
        /// The calling member was removed from the cluster.
        MemberRemoved = "MemberRemoved",
        /// This member is still joining its cluster.
        Joining = "Joining",
        /// The server or the node cannot do this at all (exec on a runtime
        /// without it).
        NotImplemented = "NotImplemented",
        /// The member holds no session of the node a log/exec call is for
        /// (answered to a relayed call: ask another member).
        NoSession = "NoSession",
        /// The server failed (a corrupt object, a storage error).
        InternalError = "InternalError",
    }

    impl Reason {
        /// The gRPC code that goes with the reason.
        pub fn code(self) -> Code {
            match self {
                Reason::NotFound => Code::NotFound,
                Reason::AlreadyExists => Code::AlreadyExists,
                Reason::Conflict => Code::Aborted,
                Reason::Invalid | Reason::BadRequest => Code::InvalidArgument,
                Reason::Unauthorized => Code::Unauthenticated,
                Reason::Forbidden => Code::PermissionDenied,
                Reason::Expired | Reason::RequestEntityTooLarge => Code::OutOfRange,
                Reason::Timeout => Code::DeadlineExceeded,
                Reason::TooManyRequests => Code::ResourceExhausted,
                Reason::ServiceUnavailable | Reason::NotLeader | Reason::Joining => {
                    Code::Unavailable
                }
                Reason::MemberRemoved | Reason::NoSession => Code::FailedPrecondition,
                Reason::NotImplemented => Code::Unimplemented,
                Reason::InternalError => Code::Internal,
            }
        }

        /// The Kubernetes `Status.reason` a client shows (drover's own
        /// control-plane reasons are `ServiceUnavailable` there).
        pub fn kubernetes(self) -> &'static str {
            match self {
                Reason::NotLeader | Reason::Joining | Reason::MemberRemoved => "ServiceUnavailable",
                Reason::NoSession => "BadRequest",
                other => other.as_str(),
            }
        }

        /// A status with this reason's code, `message` and the reason.
        pub fn status(self, message: impl Into<String>) -> Status {
            let mut md = MetadataMap::new();
            md.insert(KEY, MetadataValue::from_static(self.as_str()));
            Status::with_metadata(self.code(), message, md)
        }

        /// The reason a status carries, if a drover handler set one.
        pub fn of(status: &Status) -> Option<Reason> {
            status
                .metadata()
                .get(KEY)
                .and_then(|v| v.to_str().ok())
                .and_then(Reason::parse)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn reasons_round_trip_through_a_status() {
            for &r in Reason::ALL {
                assert_eq!(Reason::parse(r.as_str()), Some(r));
                let s = r.status("m");
                assert_eq!(s.code(), r.code());
                assert_eq!(Reason::of(&s), Some(r));
                assert_eq!(s.message(), "m");
            }
            assert_eq!(Reason::of(&Status::unavailable("not the leader")), None);
            assert_eq!(Reason::parse("not the leader"), None);
        }
    }
}

pub mod stream {
    //! Protocol constants of `drover logs` and `drover exec` streaming
    //! between an agent and a server.
    //!
    //! The output of a log or exec request travels up the agent's session
    //! as `StreamChunk`s. Flow control is by credit: an agent sends at most
    //! [`STREAM_WINDOW`] chunks of a stream before it waits for
    //! `StreamCredit`, and the server buffers exactly that many per stream,
    //! so the session's reader never waits for a slow client. Both sides
    //! must agree on these values.

    /// Largest chunk of output an agent sends in one message (the server's
    /// limit too).
    pub const CHUNK_MAX: usize = 32 * 1024;

    /// Chunks an agent may send on one stream before it waits for credit
    /// (the server buffers exactly this many per stream).
    pub const STREAM_WINDOW: u32 = 8;

    /// `ExecInput` messages a server sends on one exec before it waits for
    /// the agent's `input_credit` (the agent buffers at most this many).
    pub const INPUT_WINDOW: u32 = 8;

    /// The most execs an agent runs at once, and a server opens on one
    /// node's session.
    pub const MAX_EXECS_PER_NODE: usize = 16;
}
