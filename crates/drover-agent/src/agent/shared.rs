//! What the agents of one process share (servers, token, tuning, clock) and the counters they keep; nothing in it changes once the
//! agents run, except the counters.

use crate::backoff::RestartPolicy;
use crate::clock::Clock;
use crate::Tuning;
use drover_api::Taint;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// A status the server has not shown back after this many status
/// intervals is sent again.
const CONFIRM_AFTER: u32 = 10;

/// Counters shared by the agents of one process.
#[derive(Debug, Default)]
pub struct Stats {
    /// Sessions open now.
    pub connected: AtomicUsize,
    /// Nodes whose Leave the server took.
    pub left: AtomicUsize,
    /// Sessions opened by nodes that never had one (in this process).
    pub joined: AtomicUsize,
    /// Sessions lost (the server went away, the link broke).
    pub lost: AtomicUsize,
    /// Sessions opened again on another server than the last one.
    pub moved: AtomicUsize,
    /// Sessions opened again on the same server.
    pub rejoined: AtomicUsize,
    /// Pod events sent (each a write of one Event: new, or a new count).
    pub events_sent: AtomicUsize,
    /// Pod events noted (before deduplication and the spam filter).
    pub events_noted: AtomicUsize,
}

/// What the agents of one process share.
pub(crate) struct Shared {
    pub(crate) servers: Vec<String>,
    /// The node token, for nodes without a certificate yet.
    pub(crate) token: Option<drover_pki::JoinToken>,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) taints: Vec<Taint>,
    /// Taken off the capacity for the allocatable (`--reserved`).
    pub(crate) reserved: BTreeMap<String, drover_api::Quantity>,
    pub(crate) tuning: Tuning,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) gate: Option<Arc<Semaphore>>,
    /// Lone agent (info logs, the machine's facts) or sim node (debug logs,
    /// fixed facts).
    pub(crate) loud: bool,
    pub(crate) sim_facts: bool,
    pub(crate) runtime_version: String,
    pub(crate) stats: Arc<Stats>,
    /// On shutdown, leave the cluster (the Node is deleted, the pods
    /// stopped) or just stop (the containers keep running; the node comes
    /// back and adopts them).
    pub(crate) leave_on_stop: bool,
    /// The key a node without a certificate of its own joins with
    /// (`drover sim --data-dir`: one key for all the sim's nodes, kept so
    /// that a restarted sim takes its names back); `None`: a new key.
    pub(crate) join_key: Option<drover_pki::Credential>,
}

impl Shared {
    pub(super) fn restart_policy(&self) -> RestartPolicy {
        RestartPolicy {
            base: self.tuning.restart_backoff,
            max: self.tuning.restart_backoff_max,
        }
    }

    /// How long a sent status (or static pods report) may go without the
    /// server's pod list showing it back before it is sent again.
    pub(super) fn confirm_after(&self) -> Duration {
        self.tuning.status_interval * CONFIRM_AFTER
    }

    /// `sim` of `sim://0.1.0`: the prefix of container ids in statuses.
    pub(super) fn scheme(&self) -> &str {
        self.runtime_version
            .split_once("://")
            .map_or("runtime", |(s, _)| s)
    }
}

/// A task that is aborted when dropped (probe workers, the static pod
/// watcher).
pub(super) struct AbortOnDrop(pub(super) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Who a node's agent is.
pub(super) struct Identity {
    /// The node's name.
    pub(super) name: String,
    /// The node's address (the pods' `hostIP`).
    pub(super) host_ip: String,
    /// Where its certificate is kept (`None`: in memory only, a sim node).
    pub(super) data_dir: Option<std::path::PathBuf>,
}
