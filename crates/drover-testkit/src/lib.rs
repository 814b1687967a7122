//! The scaffolding that drover's tests share, in one dev-only crate (every
//! crate that uses it lists it under `[dev-dependencies]`, none under
//! `[dependencies]`; `publish = false`).
//!
//! | helper | for |
//! | --- | --- |
//! | [`wait_until`], [`wait_until_every`] | polls an async condition until it holds; panics with what it waited for after a deadline; returns how long it took |
//! | [`wait_for`] | the same for a condition that yields a value (`Option<T>`) |
//! | [`wait_until_blocking`] | the same without a runtime (tests that drive child processes) |
//! | [`member_addrs`], [`wait_member_addrs`] | the addresses a `drover server` child bound (it is started on `127.0.0.1:0`), from its `server.json` |
//! | [`refusing_port`], [`host_port`] | a loopback address where nothing listens, held; a free port of the machine for a container's `hostPort` |
//! | [`loopback_options`], [`fast_options`], [`restart_options`] | a member's options with its data dir, on `127.0.0.1:0` (gRPC and HTTP), with raft at its defaults or fast (20 ms tick, 200 ms election); a member restarting from its data dir |
//! | [`TestServer`] | a one-member cluster in the test's process: start (leading), restart from its dir, the internal object API, a few reads (nodes, pods), a client |
//! | [`start_servers`] | a cluster of `n` members in the test's process: the first bootstraps, the others join |
//! | [`client`], [`client_of`] | a connected [`drover_cli::Client`] with the admin token |
//! | [`grpc_channel`], [`authed`] | a raw gRPC channel to a member, and a request with a bearer token |
//! | [`TestAgent`], [`start_sim_agent`] | an agent in a task of the test over any runtime (the simulated one: `start_sim_agent`), stopped as with SIGTERM or killed as with SIGKILL |
//! | [`quick_reconnect`], [`quick_tuning`], [`sim_options`] | the quick agent and sim timings the tests use |
//! | [`pod_yaml`], [`is_running_and_ready`] | a pod bound to a node; the state tests wait for |
//! | [`Ran`], [`SharedBuf`] | a client command's output and outcome; a writer read while the command runs |
//! | [`CuttableLink`] | a TCP relay a test cuts and heals: a partition between an agent and a member |
//! | [`docker`] | fixtures of the tests against the real Docker engine (the test image, unique node names, cleanup) |
//!
//! Every wait has a deadline and says what it waited for; servers bind
//! ephemeral ports and keep their data in a dir the test owns (usually a
//! `tempfile::TempDir`), so tests run in parallel.

pub mod agent;
pub mod cli;
pub mod docker;
pub use docker::skipping_docker;
pub mod link;
pub mod net;
pub mod pods;
pub mod process;
pub mod server;
pub mod wait;

pub use agent::{quick_reconnect, quick_tuning, sim_options, start_sim_agent, TestAgent};
pub use cli::{Ran, SharedBuf};
pub use link::CuttableLink;
pub use net::{
    host_port, https, https_answer, https_get, refusing_port, HttpsAnswer, HttpsRequest,
};
pub use pods::{is_running_and_ready, pod_yaml};
pub use process::{
    await_restart, expect_busy_port_exit, member_addrs, member_http_status, spawn_logged,
    wait_member_addrs, MemberAddrs, Procs,
};
pub use server::{
    authed, cert_channel, client, client_certificate, client_of, fast_options, grpc_channel,
    issue_client, loopback_options, node_certificate, open_session, restart_options, start_servers,
    start_voters, viewer_client, wait_nodes_ready, wait_voting_members, AgentSession, TestServer,
    Voters,
};
pub use wait::{wait_explained, wait_for, wait_until, wait_until_blocking, wait_until_every};
