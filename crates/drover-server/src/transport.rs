//! The raft transport over gRPC: one queue and one sending task per peer.
//!
//! The raft thread hands messages to [`GrpcTransport::send`], which never
//! blocks: it queues them for the peer's task. The task sends everything
//! queued as one `Raft.Send` call, so a burst of appends costs one round
//! trip. Failures are reported back to raft (`report_unreachable`, snapshot
//! status); raft retransmits, so a full queue simply drops messages.

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
        let mut failures = 0u32;
        while let Some(first) = rx.recv().await {
            // The connection presents the certificate it was made with,
            // which the peer refuses once it expires: after a renewal,
            // a new connection with the new one.
            if self.renewals.has_changed().unwrap_or(false) {
                self.renewals.borrow_and_update();
                client = self.client(&endpoint);
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
            let mut req = tonic::Request::new(batch);
            req.set_timeout(if snapshots > 0 {
                Duration::from_secs(120)
            } else {
                Duration::from_secs(5)
            });
            match client.send(req).await {
                Ok(_) => {
                    failures = 0;
                    for _ in 0..snapshots {
                        self.reporter.snapshot(self.to, true);
                    }
                }
                Err(status) => {
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
}
