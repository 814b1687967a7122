//! What every part of a member shares: its store, credentials and
//! in-memory state of agents (heartbeats, sessions), and the one way to run
//! a leader-only operation from any member ([`forward`]).
//!
//! This is the bottom layer of the server: it knows the store and how to
//! reach the leader, nothing of objects, controllers or services.

mod forward;

use crate::error::ApiError;
use crate::heartbeats::Heartbeats;
use crate::sessions::Sessions;
use crate::trust::Trust;
use drover_pki::revoke::{token_mark, Revocations};
use drover_store::{Error as StoreError, Store};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

pub use forward::{forwarded, from_peer, hops, Forwarding, Route, HOPS};

/// Scheduled snapshots of the store (taken on the leader).
#[derive(Debug, Clone, Default)]
pub struct Snapshots {
    pub dir: std::path::PathBuf,
    /// Off when `None`.
    pub interval: Option<Duration>,
    pub retain: usize,
}

/// What every service and loop of a member shares.
pub struct Ctx {
    pub store: Store,
    pub id: u64,
    /// Empty while a joining member has not finished joining.
    admin_token: RwLock<String>,
    /// The SHA-256 (hex) of the metrics token, once one was made
    /// (`drover token rotate metrics`): only a digest, it is only checked.
    metrics_token: RwLock<Option<String>>,
    /// Revoked certificates and the admin token in force, for requests and
    /// for the connections already open (shared with the ports' gate).
    pub revocations: Arc<Revocations>,
    /// The CA, this member's certificate, the join tokens.
    pub trust: Arc<Trust>,
    /// How long a call waits for a leader, a read or a write.
    pub timeout: Duration,
    /// How long a joining member may take to catch up with the log before
    /// its join fails and its learner is removed.
    pub join_catch_up: Duration,
    /// Where scheduled snapshots go (`--snapshot-dir`, default
    /// DATA_DIR/snapshots), and their interval and how many are kept, when
    /// they are on (`--snapshot-interval`, `--snapshot-retain`).
    pub snapshots: Snapshots,
    /// Node heartbeats heard here (and, on the leader, relayed here).
    pub heartbeats: Heartbeats,
    /// Agent sessions held here, for logs and exec.
    pub sessions: Sessions,
    /// This member's Prometheus metrics.
    pub metrics: crate::metrics::Metrics,
    /// Channels to other members, made with the certificate of the
    /// renewal counted first ([`Trust::renewals`]).
    channels: Mutex<(u64, HashMap<String, Channel>)>,
}

impl Ctx {
    pub fn new(store: Store, admin_token: String, trust: Arc<Trust>, timeout: Duration) -> Self {
        Ctx::with_revocations(store, admin_token, trust, timeout, Revocations::new())
    }

    /// [`Ctx::new`] sharing `revocations` with the ports' connection gate.
    pub fn with_revocations(
        store: Store,
        admin_token: String,
        trust: Arc<Trust>,
        timeout: Duration,
        revocations: Arc<Revocations>,
    ) -> Self {
        if !admin_token.is_empty() {
            revocations.set_token(token_mark(&admin_token));
        }
        Ctx {
            id: store.id(),
            store,
            admin_token: RwLock::new(admin_token),
            metrics_token: RwLock::new(None),
            revocations,
            trust,
            timeout,
            join_catch_up: Duration::from_secs(60),
            snapshots: Snapshots::default(),
            heartbeats: Default::default(),
            sessions: Default::default(),
            metrics: Default::default(),
            channels: Mutex::new((0, HashMap::new())),
        }
    }

    /// The cluster's admin token; empty while this member is joining.
    pub fn admin_token(&self) -> String {
        self.admin_token
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Sets the admin token (a joining member learns it from the leader,
    /// every member a rotated one from the store): connections let in with
    /// another token are cut.
    pub fn set_admin_token(&self, token: String) {
        if !token.is_empty() {
            self.revocations.set_token(token_mark(&token));
        }
        *self.admin_token.write().unwrap_or_else(|e| e.into_inner()) = token;
    }

    /// The SHA-256 (hex) of the metrics token, if one was made.
    pub fn metrics_token(&self) -> Option<String> {
        self.metrics_token
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn set_metrics_token(&self, sha256: Option<String>) {
        *self
            .metrics_token
            .write()
            .unwrap_or_else(|e| e.into_inner()) = sha256;
    }

    /// A (lazily connected, shared) channel to another member, over TLS
    /// with this member's certificate.
    pub fn channel(&self, addr: &str) -> Result<Channel, ApiError> {
        let mut g = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        // Renewed since these channels were made: new connections, with
        // the new certificate.
        let renewal = self.trust.renewal_count();
        if g.0 != renewal {
            *g = (renewal, HashMap::new());
        }
        let ch = &mut g.1;
        if let Some(c) = ch.get(addr) {
            return Ok(c.clone());
        }
        let ep = drover_pki::net::endpoint(addr)
            .map_err(|e| ApiError::Internal(format!("member address {addr:?} is invalid: {e}")))?
            .connect_timeout(Duration::from_secs(1))
            .tcp_nodelay(true);
        let c = drover_pki::net::lazy(ep, self.trust.client_tls());
        ch.insert(addr.to_string(), c.clone());
        Ok(c)
    }

    /// Runs a read, waiting out elections and unconfirmed ReadIndex rounds.
    pub async fn read<T, F, Fut>(&self, f: F) -> Result<T, ApiError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        let deadline = self.deadline();
        loop {
            match f().await {
                Ok(v) => return Ok(v),
                Err(StoreError::NotLeader { leader: None }) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if self.store.wait_leader(left).await.is_none() {
                        return Err(ApiError::Unavailable(
                            "no leader is elected, so a linearizable read is impossible; retry, or read with --local".into(),
                        ));
                    }
                }
                Err(e @ StoreError::Unavailable(_)) => {
                    if !pause(deadline).await {
                        return Err(e.into());
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The servers a member or a node should talk to: voters that are not
    /// removed (a learner still joining is no one's server yet), sorted.
    pub fn voters(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .store
            .members()
            .values()
            .filter(|m| !m.removed && !m.learner && !m.addr.is_empty())
            .map(|m| m.addr.clone())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// When a call that starts now must be answered.
    pub fn deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }
}

/// Waits a little before the next attempt; false when the deadline is too
/// close for another one.
pub async fn pause(deadline: Instant) -> bool {
    if Instant::now() + Duration::from_millis(20) >= deadline {
        return false;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    true
}
