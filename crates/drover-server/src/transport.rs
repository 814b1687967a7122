//! The raft transport over gRPC: one queue and one sending task per peer.
//!
//! The raft thread hands messages to [`GrpcTransport::send`], which never
//! blocks: it queues them for the peer's task. The task packs everything
//! queued into one batch and writes it on a long-lived `Raft.Stream` to the
//! peer: no HTTP/2 stream to open, no answer to wait for, and on the peer
//! one task reads them all (one `Raft.Send` call per batch cost each member
//! about a third more CPU per write). Snapshots go by `Raft.Send`, whose
//! answer reports them delivered, and so does everything for a peer of an
//! older version, which has no stream. Failures are reported back to raft
//! (`report_unreachable`, snapshot status); raft retransmits, so a full
//! queue or a broken stream simply drops messages.

use crate::auth::MAX_MESSAGE;
use drover_proto::reason::Reason;
use drover_proto::v1::raft_client::RaftClient;
use drover_proto::v1::RaftBatch;
use drover_store::{RaftMessage, Reporter, Transport};
use protobuf::Message as _;
use raft::eraftpb::MessageType;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tonic::transport::{Channel, Endpoint};
use tonic::Code;

/// How members dial each other: TLS with the member certificate.
pub type ClientTls = Arc<rustls::ClientConfig>;

const QUEUE: usize = 8192;

struct Peer {
    addr: String,
    tx: mpsc::Sender<RaftMessage>,
}

/// Sends raft messages to peers over gRPC.
pub struct GrpcTransport {
    id: u64,
    addr: String,
    tls: ClientTls,
    /// This member's certificate renewals: each peer's connection is made
    /// anew after one (see [`crate::trust::Trust::renewals`]).
    renewals: watch::Receiver<u64>,
    rt: tokio::runtime::Handle,
    peers: Mutex<HashMap<u64, Peer>>,
}

impl GrpcTransport {
    /// `id` and `addr` are this member's; `tls` carries its member
    /// certificate, which is what authenticates it to peers; `renewals`
    /// changes when that certificate is renewed.
    pub fn new(
        id: u64,
        addr: String,
        tls: ClientTls,
        renewals: watch::Receiver<u64>,
        rt: tokio::runtime::Handle,
    ) -> Self {
        GrpcTransport {
            id,
            addr,
            tls,
            renewals,
            rt,
            peers: Mutex::new(HashMap::new()),
        }
    }

    fn spawn_peer(&self, to: u64, addr: &str, reporter: &Reporter) -> Peer {
        let (tx, rx) = mpsc::channel(QUEUE);
        let task = PeerTask {
            from: self.id,
            from_addr: self.addr.clone(),
            to,
            tls: self.tls.clone(),
            renewals: self.renewals.clone(),
            reporter: reporter.clone(),
        };
        let endpoint = drover_pki::net::endpoint(addr);
        let reporter2 = reporter.clone();
        self.rt.spawn(async move {
            match endpoint {
                Ok(e) => task.run(e, rx).await,
                Err(e) => {
                    tracing::error!("member {to:x} has an invalid address: {e}");
                    reporter2.unreachable(to);
                }
            }
        });
        Peer {
            addr: addr.to_string(),
            tx,
        }
    }
}

impl Transport for GrpcTransport {
    fn send(&self, to: u64, addr: &str, msg: RaftMessage, reporter: &Reporter) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let stale = peers
            .get(&to)
            .is_none_or(|p| p.addr != addr || p.tx.is_closed());
        if stale {
            let p = self.spawn_peer(to, addr, reporter);
            peers.insert(to, p);
        }
        let Some(peer) = peers.get(&to) else { return };
        let is_snapshot = msg.get_msg_type() == MessageType::MsgSnapshot;
        if peer.tx.try_send(msg).is_err() {
            reporter.unreachable(to);
            if is_snapshot {
                reporter.snapshot(to, false);
            }
        }
    }
}

struct PeerTask {
    from: u64,
    from_addr: String,
    to: u64,
    tls: ClientTls,
    renewals: watch::Receiver<u64>,
    reporter: Reporter,
}

impl PeerTask {
    fn client(&self, endpoint: &Endpoint) -> RaftClient<Channel> {
        let channel: Channel = drover_pki::net::lazy(endpoint.clone(), self.tls.clone());
        RaftClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    async fn run(mut self, endpoint: Endpoint, mut rx: mpsc::Receiver<RaftMessage>) {
        let endpoint = endpoint
            .connect_timeout(Duration::from_secs(1))
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(5));
        self.renewals.borrow_and_update();
        let mut client = self.client(&endpoint);
        let mut outbound: Option<Outbound> = None;
        // Until the peer answers that it has no `Raft.Stream` (a member of
        // an older version, mid-upgrade): then every batch goes by `Send`.
        let mut streams = true;
        let mut failures = 0u32;
        while let Some(first) = rx.recv().await {
            // The connection presents the certificate it was made with,
            // which the peer refuses once it expires: after a renewal,
            // a new connection with the new one.
            if self.renewals.has_changed().unwrap_or(false) {
                self.renewals.borrow_and_update();
                client = self.client(&endpoint);
                outbound = None;
            }
            let mut msgs = vec![first];
            while msgs.len() < 1024 {
                match rx.try_recv() {
                    Ok(m) => msgs.push(m),
                    Err(_) => break,
                }
            }
            let snapshots = msgs
                .iter()
                .filter(|m| m.get_msg_type() == MessageType::MsgSnapshot)
                .count();
            let mut batch = RaftBatch {
                from: self.from,
                from_addr: self.from_addr.clone(),
                msgs: Vec::with_capacity(msgs.len()),
            };
            for m in &msgs {
                match m.write_to_bytes() {
                    Ok(b) => batch.msgs.push(b),
                    Err(e) => tracing::error!("cannot encode a raft message: {e}"),
                }
            }
            let sent = if streams && snapshots == 0 {
                // A stream that ended answers why at the next batch (which
                // may be that the peer has none): a new one opens after.
                let mut out = outbound.take().unwrap_or_else(|| Outbound::open(&client));
                match out.send(batch).await {
                    Ok(()) => {
                        outbound = Some(out);
                        Ok(())
                    }
                    Err((status, batch)) if status.code() == Code::Unimplemented => {
                        tracing::info!(
                            "member {:x} has no raft stream (an older version): sending batches one call each",
                            self.to
                        );
                        streams = false;
                        self.send_one(&mut client, batch, false).await
                    }
                    Err((status, _)) => Err(status),
                }
            } else {
                self.send_one(&mut client, batch, snapshots > 0).await
            };
            match sent {
                Ok(()) => {
                    failures = 0;
                    for _ in 0..snapshots {
                        self.reporter.snapshot(self.to, true);
                    }
                }
                Err(status) => {
                    // The peer may come back as another version (a rolling
                    // upgrade): try a stream again.
                    streams = true;
                    if Reason::of(&status) == Some(Reason::MemberRemoved) {
                        tracing::warn!("member {:x} says this member was removed", self.to);
                        self.reporter.removed();
                    }
                    failures += 1;
                    if failures == 1 || failures.is_multiple_of(50) {
                        tracing::debug!("cannot reach member {:x}: {}", self.to, status.message());
                    }
                    self.reporter.unreachable(self.to);
                    for _ in 0..snapshots {
                        self.reporter.snapshot(self.to, false);
                    }
                    // Drop what queued up meanwhile (raft resends) and back off a little.
                    while rx.try_recv().is_ok() {}
                    let backoff = Duration::from_millis(50 * u64::from(failures.min(10)));
                    tokio::time::sleep(backoff).await;
                }
            }
        }
    }

    /// Sends one batch as its own `Raft.Send` call, answered once the peer
    /// handed it to raft.
    async fn send_one(
        &self,
        client: &mut RaftClient<Channel>,
        batch: RaftBatch,
        snapshot: bool,
    ) -> Result<(), tonic::Status> {
        let mut req = tonic::Request::new(batch);
        req.set_timeout(if snapshot {
            Duration::from_secs(120)
        } else {
            SEND_TIMEOUT
        });
        client.send(req).await.map(|_| ())
    }
}

/// How long a batch may wait to be sent (or answered, by `Send`) before
/// the peer counts as unreachable.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// How many batches may wait for an open stream's connection.
const STREAM_QUEUE: usize = 64;

/// An open `Raft.Stream` to one peer: batches go in through `tx`; `call`
/// ends only when the stream does (the peer refused it, or the
/// connection broke).
struct Outbound {
    tx: mpsc::Sender<RaftBatch>,
    call: tokio::task::JoinHandle<Result<(), tonic::Status>>,
}

impl Outbound {
    fn open(client: &RaftClient<Channel>) -> Outbound {
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        let mut client = client.clone();
        let call = tokio::spawn(async move {
            client
                .stream(tokio_stream::wrappers::ReceiverStream::new(rx))
                .await
                .map(|_| ())
        });
        Outbound { tx, call }
    }

    /// Queues `batch` on the stream. When the stream has ended, answers
    /// why (and gives the batch back); a stream that takes no batch within
    /// [`SEND_TIMEOUT`] counts as broken.
    async fn send(&mut self, batch: RaftBatch) -> Result<(), (tonic::Status, RaftBatch)> {
        match tokio::time::timeout(SEND_TIMEOUT, self.tx.send(batch)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(mpsc::error::SendError(batch))) => {
                let status = match (&mut self.call).await {
                    Ok(Err(status)) => status,
                    Ok(Ok(())) => tonic::Status::unavailable("the peer ended the raft stream"),
                    Err(e) => {
                        tonic::Status::internal(format!("the raft stream's task failed: {e}"))
                    }
                };
                Err((status, batch))
            }
            Err(_) => Err((
                tonic::Status::deadline_exceeded(format!(
                    "the raft stream took no batch for {SEND_TIMEOUT:?}"
                )),
                RaftBatch::default(),
            )),
        }
    }
}

impl Drop for Outbound {
    fn drop(&mut self) {
        self.call.abort();
    }
}
