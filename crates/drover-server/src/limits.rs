//! Every limit a member enforces, in one place (a leaf). `docs/security.md`
//! ("Limits") lists them with the error a caller sees; the limits on the
//! objects themselves (containers, labels, annotations) belong to their
//! validation in `drover-api` and are re-exported here so that this is the
//! whole list.

use std::time::Duration;

pub use drover_api::manifest::MAX_DOCUMENTS;
pub use drover_api::validation::{
    ECHOED_VALUE_MAX_BYTES, MAX_CONTAINERS, MAX_LABELS, TOTAL_ANNOTATION_SIZE_LIMIT,
    TOTAL_LABEL_SIZE_LIMIT,
};

/// The heartbeats a second a member answers before it asks its agents to
/// beat less often (Nomad's `max_heartbeats_per_second`; see
/// [`crate::heartbeats::interval_for`]): up to 2,000 sessions beat every
/// second, 4,000 every 2 s. `drover server --heartbeats-per-second`.
pub const HEARTBEATS_PER_SECOND: usize = 2_000;

/// The largest object, encoded as it is stored (JSON), that create, apply
/// and update write: 1.5 MiB, etcd's default request limit. A bigger one is
/// refused (BadRequest) naming the object, its size and this limit.
pub const MAX_OBJECT_BYTES: usize = 1_572_864;

/// The largest request the `Objects` and `Store` services decode: 16 MiB
/// (an apply of many objects fits; one object is at most
/// [`MAX_OBJECT_BYTES`]). A bigger one is refused by tonic with
/// `OUT_OF_RANGE` ("decoded message length too large") before it is read.
pub const MAX_REQUEST_BYTES: usize = 16 << 20;

/// The most bytes one apply writes, all its objects encoded as stored
/// (statuses kept from the existing objects included): 32 MiB, twice
/// [`MAX_REQUEST_BYTES`]. An apply is one raft entry; a bigger one is
/// refused (BadRequest), asking for smaller groups of objects.
pub const MAX_APPLY_WRITE_BYTES: usize = 32 << 20;

/// The largest message the `Raft` service decodes, and the largest answer
/// the services encode: 256 MiB (raft carries snapshots of the whole store,
/// a list answers every object of a kind).
pub const MAX_RAFT_MESSAGE_BYTES: usize = 256 << 20;

/// The largest message of an error status: 4 KiB. Longer ones are cut (at a
/// character boundary) and say how much was left out; the status's code and
/// reason code (`x-drover-reason`) are kept. gRPC sends the message in a
/// header, and HTTP/2 peers refuse header blocks over 16 KiB (the
/// percent-encoding of the message can triple its size).
pub const MAX_STATUS_MESSAGE_BYTES: usize = 4 << 10;

/// How long an agent session may take to send its hello before the server
/// drops the stream (`DEADLINE_EXCEEDED`, reason Timeout).
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// Pod events in one `PodEvents` message of an agent; a message with more
/// is refused whole (the agent sends at most this many).
pub const MAX_EVENTS_PER_MESSAGE: usize = 100;

/// The longest reason of a pod event an agent reports (letters and digits).
pub const MAX_EVENT_REASON_BYTES: usize = 128;

/// The longest message of a pod event an agent reports (the agent cuts
/// longer ones to this).
pub const MAX_EVENT_MESSAGE_BYTES: usize = 1024;

/// The longest `fieldPath` of a pod event an agent reports.
pub const MAX_EVENT_FIELD_BYTES: usize = 256;

/// Pod events one agent session may write at once (each is a store write);
/// beyond, [`EVENT_BUDGET_PER_SECOND`]. The agent's own spam filter (25
/// per pod, then one per 5 minutes) keeps well below this; a node that
/// does not sees its extra events dropped.
pub const EVENT_BUDGET_BURST: usize = 1000;

/// Pod events per second an agent session may write after its burst.
pub const EVENT_BUDGET_PER_SECOND: f64 = 20.0;

/// The largest request body the Kubernetes API (`kapi/`) reads: 3 MiB (an
/// object is at most [`MAX_OBJECT_BYTES`]; a patch or a `DeleteOptions` is
/// smaller). A bigger one is refused (413, `RequestEntityTooLarge`).
pub const MAX_KAPI_BODY_BYTES: usize = 3 << 20;

/// The longest query string the Kubernetes API reads: 16 KiB (selectors,
/// continue tokens). A longer one is refused (400).
pub const MAX_KAPI_QUERY_BYTES: usize = 16 << 10;

/// The largest page of a list (`limit`): 10,000 objects; a larger `limit`
/// is taken as this one (the client follows `continue`).
pub const MAX_KAPI_LIST_LIMIT: usize = 10_000;

/// The longest a watch of the Kubernetes API stays open (`timeoutSeconds`
/// is capped to it): 30 minutes, the API server's default. The client
/// watches again from the last resourceVersion it saw.
pub const MAX_WATCH_SECONDS: Duration = Duration::from_secs(30 * 60);

/// Watches of the Kubernetes API one server process serves at once (a
/// process runs one member): 1024. One more is refused (429,
/// `TooManyRequests`) until one ends.
pub const MAX_KAPI_WATCHES: usize = 1024;

/// The watch cache's window ([`crate::cache::window`]): the changes of
/// one kind it keeps, for watches that resume from a resourceVersion and
/// for watchers that have not yet sent them. Bounded in count and in bytes
/// (the objects' size as stored, JSON); the oldest change goes first. A
/// watch from a resourceVersion older than the window, or a watcher that
/// falls that far behind (a slow client), ends with 410 Gone (reason
/// `Expired`) and relists, as with the Kubernetes API server's watch
/// cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchWindow {
    pub events: usize,
    pub bytes: usize,
}

/// The default [`WatchWindow`] of each kind: 8,192 changes (a rollout of
/// 1,000 daemon pods is about 5,000), at most 32 MiB of objects.
pub const WATCH_WINDOW: WatchWindow = WatchWindow {
    events: 8192,
    bytes: 32 << 20,
};

/// Changes a watcher takes from the window at once (under its lock): the
/// most it holds before sending them.
pub const WATCH_BATCH: usize = 256;

/// Static pods in one `StaticPods` report of an agent (the whole set the
/// node runs from its `--manifest-dir`); a report with more is refused
/// whole, logged at warn, and no mirror pod changes.
pub const MAX_STATIC_PODS_PER_REPORT: usize = 64;

/// Mirror pods one node may have: a new one beyond is refused, logged at
/// warn (the node's other mirrors stay).
pub const MAX_MIRROR_PODS_PER_NODE: usize = 64;

/// How long a connection may take from its accept to the end of its TLS
/// handshake: 10 s, Go's `http.Transport.TLSHandshakeTimeout` (and the
/// handshake part of kube-apiserver's 32 s `ReadHeaderTimeout`, stricter
/// for the same reason as [`FIRST_REQUEST_TIMEOUT`]). A connection that
/// never starts TLS is closed then, and frees its slot.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection may take, after its TLS handshake, to send its
/// first request whole (the HTTP/2 preface, or an HTTP/1.1 request's
/// header through its empty line): 5 s. kube-apiserver allows 32 s
/// (`ReadHeaderTimeout`); drover's callers are programs (agents, the CLI,
/// kubectl, a scraper) that send their request as soon as they connect,
/// and every silent connection takes a slot of [`MAX_CONNECTIONS_PER_ADDRESS`]
/// from the legitimate clients behind the same address. On the HTTP port
/// every later HTTP/1.1 request's header has the same time, from the end
/// of the previous response (so an idle keep-alive connection is closed
/// then; HTTP/2 connections stay, their peers answering pings).
pub const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The default of the connections one IP address may hold open across both
/// ports (gRPC and HTTP) together: 1024, or an eighth of
/// [`connection_limits`]' total where that is lower. An agent holds one
/// connection per member it talks to, so several hundred nodes behind one
/// NAT fit; `drover server --max-connections-per-address` raises it (a
/// `drover sim` of more nodes from one machine needs that). One more is
/// closed at its accept, before any TLS.
pub const MAX_CONNECTIONS_PER_ADDRESS: usize = 1024;

/// File descriptors a member keeps out of the reach of its clients'
/// connections (the store's files, raft connections to its peers, logs):
/// 1024, or a quarter of the descriptor limit where that is lower.
pub const FD_RESERVE: u64 = 1024;

/// The connection limits of a member whose descriptor limit is `nofile`:
/// in all, `nofile` less [`FD_RESERVE`], so that clients can never take
/// the process's last descriptors; per address, `per_address` (the
/// `--max-connections-per-address` flag, capped to the total) or
/// [`MAX_CONNECTIONS_PER_ADDRESS`] capped to an eighth of the total.
pub fn connection_limits(nofile: u64, per_address: Option<usize>) -> drover_pki::net::Limits {
    let reserve = FD_RESERVE.min(nofile / 4);
    let total = usize::try_from(nofile - reserve)
        .unwrap_or(usize::MAX)
        .max(8);
    let per_ip = match per_address {
        Some(n) => n.clamp(1, total),
        None => MAX_CONNECTIONS_PER_ADDRESS.min(total / 8).max(1),
    };
    drover_pki::net::Limits {
        handshake_timeout: TLS_HANDSHAKE_TIMEOUT,
        first_request_timeout: FIRST_REQUEST_TIMEOUT,
        per_ip,
        total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_limits_stay_below_the_descriptor_limit() {
        let l = connection_limits(20_000, None);
        assert_eq!((l.total, l.per_ip), (18_976, 1024));
        let l = connection_limits(1024, None);
        assert_eq!((l.total, l.per_ip), (768, 96));
        let l = connection_limits(1 << 20, Some(20_000));
        assert_eq!(l.per_ip, 20_000);
        assert_eq!(connection_limits(1024, Some(5000)).per_ip, 768);
        assert_eq!(connection_limits(4, None).per_ip, 1);
    }
}
