//! A [`Target`]: a client of one member of either system, all the workload
//! knows of it (put a key, count keys under a prefix). The clusters hand
//! them out (`Cluster::target`), the workload drives them.

use crate::etcd_client::EtcdClient;
use anyhow::{bail, Result};
use std::time::Duration;

/// How long one put may take before it counts as failed.
pub const PUT_TIMEOUT: Duration = Duration::from_secs(5);

/// A client of one system, pointed at one member over its own connection.
#[derive(Clone)]
pub enum Target {
    /// drover's own client; a put is an unconditional upsert.
    Drover(drover_cli::Client),
    /// The minimal etcd v3 gRPC client of this crate.
    Etcd(EtcdClient),
}

impl Target {
    /// Writes `value` at `key` (create or replace), bounded by [`PUT_TIMEOUT`].
    pub async fn put(&self, key: &str, value: &[u8]) -> Result<()> {
        let put = async {
            match self {
                Target::Drover(c) => {
                    c.update(key, value.to_vec(), 0, true).await?;
                }
                Target::Etcd(c) => {
                    c.put(key, value).await?;
                }
            }
            anyhow::Ok(())
        };
        match tokio::time::timeout(PUT_TIMEOUT, put).await {
            Ok(r) => r,
            Err(_) => bail!("put timed out after {PUT_TIMEOUT:?}"),
        }
    }

    /// How many keys start with `prefix` (a linearizable read).
    pub async fn count(&self, prefix: &str) -> Result<u64> {
        Ok(match self {
            Target::Drover(c) => c.list(prefix, false).await?.0.len() as u64,
            Target::Etcd(c) => c.count_prefix(prefix).await?,
        })
    }
}
