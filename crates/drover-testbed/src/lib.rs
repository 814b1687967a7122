//! The multi-host fault testbed (issue 11): drover's own servers and
//! agents, each in its own container on a private Docker network of this
//! machine, a workload that records every call and answer, a seeded
//! schedule of faults (Jepsen's nemeses), and the checks.
//!
//! | module | owns |
//! | --- | --- |
//! | [`lin`] | the linearizability checker for one key (Wing & Gong with Lowe's memoisation), pure |
//! | [`rng`] | SplitMix64: a seed gives the same schedule on every machine |
//! | [`schedule`] | the seeded fault schedule: kinds, targets, hold times; printed |
//! | [`docker`] | the `docker` CLI, the image built from the debug binary, cleanup by label |
//! | [`fleet`] | the cluster in containers: network, servers, agents (simulated runtime, and one on the host's Docker engine), the nemeses' actions |
//! | [`engine`] | the Docker node's pod containers: kept running while its agent is away, not restarted when it returns |
//! | [`workload`] | kv writers and readers, DaemonSet changes; every invocation and answer recorded |
//! | [`observe`] | what the cluster shows while faults run: nodes' readiness, pods per node |
//! | [`run`] | one run: setup, workload, faults, heals, convergence, final checks, the report |
//!
//! Dev-only (`publish = false`): the root package's `tests/fleet_faults.rs`
//! is its only user.

pub mod docker;
pub mod engine;
pub mod fleet;
pub mod lin;
pub mod observe;
pub mod rng;
pub mod run;
pub mod schedule;
pub mod workload;

/// What the testbed's steps fail with (a failed check is not an error:
/// it is in the report).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("docker {args}: {message}")]
    Docker { args: String, message: String },
    #[error("{0}")]
    Client(#[from] drover_cli::ClientError),
    #[error("timed out after {:.1} s waiting for {what}", waited.as_secs_f64())]
    Timeout {
        what: String,
        waited: std::time::Duration,
    },
    #[error("{0}")]
    Setup(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
