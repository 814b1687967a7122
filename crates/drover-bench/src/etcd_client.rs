//! A minimal etcd v3 gRPC client: `KV.Put`, a count-only `KV.Range` and
//! `Maintenance.Status`, generated from `proto/etcd.proto` (see `build.rs`).

use anyhow::Result;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_rustls::rustls::ClientConfig;
use tonic::transport::{Channel, Endpoint};

/// The generated etcd v3 messages and clients (see `proto/etcd.proto`).
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("etcdserverpb");
}

use pb::kv_client::KvClient;
use pb::maintenance_client::MaintenanceClient;

/// An etcd v3 client over one HTTP/2 connection to one member.
#[derive(Clone)]
pub struct EtcdClient {
    channel: Channel,
}

impl EtcdClient {
    /// Prepares a connection to `addr` (host:port of a client URL); it
    /// connects on first use, over TLS when `tls` is given (through
    /// drover's own connector, which checks the name
    /// [`drover_pki::SERVER_NAME`]: etcd's certificates carry it).
    pub fn connect_lazy(addr: SocketAddr, tls: Option<Arc<ClientConfig>>) -> Result<EtcdClient> {
        let channel = match tls {
            None => Endpoint::from_shared(format!("http://{addr}"))?
                .connect_timeout(Duration::from_secs(1))
                .tcp_nodelay(true)
                .connect_lazy(),
            Some(tls) => drover_pki::net::lazy(
                drover_pki::net::endpoint(&addr.to_string())?
                    .connect_timeout(Duration::from_secs(1))
                    .tcp_nodelay(true),
                tls,
            ),
        };
        Ok(EtcdClient { channel })
    }

    fn req<T>(body: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(body);
        r.set_timeout(Duration::from_secs(5));
        r
    }

    /// `Put(key, value)`; returns the revision of the write.
    pub async fn put(&self, key: &str, value: &[u8]) -> Result<i64> {
        let r = KvClient::new(self.channel.clone())
            .put(Self::req(pb::PutRequest {
                key: key.as_bytes().to_vec(),
                value: value.to_vec(),
                ..Default::default()
            }))
            .await?
            .into_inner();
        Ok(r.header.map(|h| h.revision).unwrap_or_default())
    }

    /// How many keys start with `prefix` (a linearizable count-only Range).
    pub async fn count_prefix(&self, prefix: &str) -> Result<u64> {
        let r = KvClient::new(self.channel.clone())
            .range(Self::req(pb::RangeRequest {
                key: prefix.as_bytes().to_vec(),
                range_end: prefix_end(prefix.as_bytes()),
                count_only: true,
                ..Default::default()
            }))
            .await?
            .into_inner();
        Ok(r.count.max(0) as u64)
    }

    /// `Maintenance.Status` of the member this client talks to.
    pub async fn status(&self) -> Result<pb::StatusResponse> {
        Ok(MaintenanceClient::new(self.channel.clone())
            .status(Self::req(pb::StatusRequest {}))
            .await?
            .into_inner())
    }
}

/// The smallest key greater than every key starting with `prefix`.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0] // every key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_end_of_a_prefix() {
        assert_eq!(prefix_end(b"bench/seq/"), b"bench/seq0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff\xff"), vec![0]);
    }
}
