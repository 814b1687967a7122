//! Servers in the test's process: one member ([`TestServer`]) or several
//! ([`start_servers`]), each on ephemeral loopback ports (port 0) with its
//! data in a dir of the test, and the ways a test talks to them (a
//! [`Client`], a raw gRPC channel, [`Objects`]).

use crate::wait::wait_until;
use drover_api::Kind;
use drover_api::{Manifest, Node, Pod};
use drover_cli::{Client, ClientConfig};
use drover_server::api::Objects;
use drover_server::{Server, ServerOptions};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tonic::transport::Channel;
use tonic::Request;

/// The raft tick of [`fast_options`].
pub const TICK: Duration = Duration::from_millis(20);
/// The election timeout of [`fast_options`], in ticks (200 ms).
pub const ELECTION_TICKS: usize = 10;
/// How long [`TestServer::start`] waits for its member to lead.
pub const LEADER_WAIT: Duration = Duration::from_secs(10);

/// Sends the members' and agents' logs to the test's output, as `RUST_LOG`
/// selects them (`RUST_LOG=drover_agent=debug` shows what the agents do);
/// once per test binary, later calls change nothing.
pub fn log_to_test() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A member with its data in `dir`, its gRPC and HTTP ports chosen by the
/// kernel (`127.0.0.1:0`); raft and the controllers at their defaults.
pub fn loopback_options(dir: impl Into<PathBuf>) -> ServerOptions {
    let mut o = ServerOptions::new(dir);
    o.listen = Some("127.0.0.1:0".into());
    o.http = Some("127.0.0.1:0".into());
    o
}

/// [`loopback_options`] with raft on a [`TICK`] of 20 ms and a 200 ms
/// election timeout, so that elections and failovers take well under a
/// second.
pub fn fast_options(dir: impl Into<PathBuf>) -> ServerOptions {
    fast(loopback_options(dir))
}

/// A member that restarts from its data dir `dir` (its identity and
/// addresses as recorded there), with raft as in [`fast_options`].
pub fn restart_options(dir: impl Into<PathBuf>) -> ServerOptions {
    fast(ServerOptions::new(dir))
}

fn fast(mut o: ServerOptions) -> ServerOptions {
    o.tick = TICK;
    o.election_ticks = ELECTION_TICKS;
    o
}

/// `n` members with [`fast_options`] in `dir/m0` … `dir/m{n-1}`: the first
/// bootstraps, the others join it with its join token.
pub async fn start_servers(dir: &Path, n: usize) -> Vec<Server> {
    let first = Server::start(fast_options(dir.join("m0")))
        .await
        .expect("bootstrap");
    let (via, join) = (
        first.grpc_addr.to_string(),
        first.identity.server_token.clone(),
    );
    let mut all = vec![first];
    for i in 1..n {
        let mut o = fast_options(dir.join(format!("m{i}")));
        o.join = Some(via.clone());
        o.token = Some(join.clone());
        all.push(Server::start(o).await.expect("join"));
    }
    all
}

/// A client of `servers` (with failover between them) with `token`,
/// trusting the cluster CA `ca` (PEM).
pub fn client(servers: Vec<String>, token: &str, ca: &str) -> Client {
    Client::new(&ClientConfig {
        servers,
        token: token.to_string(),
        ca: ca.to_string(),
        ..Default::default()
    })
    .expect("client")
}

/// A client of `s` alone, with its admin token.
pub fn client_of(s: &Server) -> Client {
    client(
        vec![s.grpc_addr.to_string()],
        &s.identity.admin_token,
        s.trust.ca.cert_pem(),
    )
}

/// A raw gRPC channel to the member at `addr` (`host:port`), over TLS
/// under the CA `ca`, with no client certificate; connected.
pub async fn grpc_channel(addr: impl std::fmt::Display, ca: &str) -> Channel {
    let tls = drover_pki::tls::client_config(ca, None).expect("client TLS");
    let ep = drover_pki::net::endpoint(&addr.to_string()).expect("endpoint");
    drover_pki::net::connect(ep, tls).await.expect("connect")
}

/// A raw gRPC channel to `addr` with a client certificate (`cert`, `key`).
pub async fn cert_channel(
    addr: impl std::fmt::Display,
    ca: &str,
    cert: &str,
    key: &str,
) -> Channel {
    let tls = drover_pki::tls::client_config(ca, Some((cert, key))).expect("client TLS");
    let ep = drover_pki::net::endpoint(&addr.to_string()).expect("endpoint");
    drover_pki::net::connect(ep, tls).await.expect("connect")
}

/// An agent session as a test holds it: the sender of the agent's
/// messages (the stream stays open while it lives) and the server's
/// messages (the welcome first).
pub type AgentSession = (
    tokio::sync::mpsc::Sender<drover_proto::v1::AgentMessage>,
    tonic::Streaming<drover_proto::v1::ServerMessage>,
);

/// Opens an `Agent.Session` on `ch` (a channel with a node certificate)
/// with `hello` as its first message, as an agent does; the server's
/// refusal when it refuses the session.
pub async fn open_session(
    ch: Channel,
    hello: drover_proto::v1::Hello,
) -> Result<AgentSession, tonic::Status> {
    use drover_proto::v1::{agent_client::AgentClient, agent_message, AgentMessage};
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tx.send(AgentMessage {
        msg: Some(agent_message::Msg::Hello(hello)),
    })
    .await
    .expect("the session's queue is open");
    let down = AgentClient::new(ch)
        .session(Request::new(tokio_stream::wrappers::ReceiverStream::new(
            rx,
        )))
        .await?
        .into_inner();
    Ok((tx, down))
}

/// A certificate for node `name`, got from `addr` with the node token, as
/// an agent gets it: (certificate, key).
pub async fn node_certificate(
    addr: impl std::fmt::Display,
    ca: &str,
    token: &str,
    name: &str,
) -> (String, String) {
    let cred = drover_pki::Credential::generate("test").expect("key");
    let ch = grpc_channel(addr, ca).await;
    let resp = drover_proto::v1::cluster_client::ClusterClient::new(ch)
        .certify(drover_proto::v1::CertifyRequest {
            token: token.to_string(),
            csr: cred.csr_pem.clone(),
            node: name.to_string(),
            ..Default::default()
        })
        .await
        .expect("certify")
        .into_inner();
    (resp.cert, cred.key_pem)
}

/// A gRPC request carrying `token` as its bearer token.
pub fn authed<T>(body: T, token: &str) -> Request<T> {
    let mut r = Request::new(body);
    r.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("header value"),
    );
    r
}

/// A one-member cluster in the test's process, leading, with the internal
/// object API ([`Objects`]) at hand.
pub struct TestServer {
    pub server: Server,
    pub dir: PathBuf,
    pub objects: Objects,
    /// The gRPC address (`host:port`).
    pub addr: String,
    /// The node token (`drover-node-…`).
    pub node_token: String,
    /// The cluster CA (PEM).
    pub ca: String,
}

impl TestServer {
    /// A new one-member cluster in `dir` ([`fast_options`]).
    pub async fn start(dir: &Path) -> TestServer {
        Self::start_tuned(dir, |_| {}).await
    }

    /// A new one-member cluster in `dir`, with the options `tune` changes
    /// (e.g. `o.controller.node_timeout`).
    pub async fn start_tuned(dir: &Path, tune: impl FnOnce(&mut ServerOptions)) -> TestServer {
        let mut o = fast_options(dir);
        tune(&mut o);
        Self::with_options(o, LEADER_WAIT).await
    }

    /// The member of `dir` again, on the same address.
    pub async fn restart(dir: &Path) -> TestServer {
        Self::with_options(restart_options(dir), LEADER_WAIT).await
    }

    /// A member with `o`; returns once it leads (a restarted member elects
    /// itself), which it must within `leader_within`.
    pub async fn with_options(o: ServerOptions, leader_within: Duration) -> TestServer {
        log_to_test();
        let dir = o.data_dir.clone();
        let server = Server::start(o).await.expect("server starts");
        let objects = server.objects();
        let addr = server.grpc_addr.to_string();
        let node_token = server.identity.node_token.clone();
        let ca = server.trust.ca.cert_pem().to_string();
        let s = TestServer {
            server,
            dir,
            objects,
            addr,
            node_token,
            ca,
        };
        wait_until("a leader", leader_within, || async {
            s.server.store.leader().is_leader
        })
        .await;
        s
    }

    pub async fn shutdown(mut self) {
        self.server.shutdown().await;
    }

    /// A client of this member with the admin token.
    pub fn client(&self) -> Client {
        client_of(&self.server)
    }

    pub async fn apply(&self, yaml: &str) {
        self.objects.apply(yaml, false).await.expect("apply");
    }

    pub async fn node(&self, name: &str) -> Option<Node> {
        match self.objects.get(Kind::Node, "", name).await {
            Ok(Manifest::Node(n)) => Some(*n),
            _ => None,
        }
    }

    pub async fn pod(&self, name: &str) -> Option<Pod> {
        match self.objects.get(Kind::Pod, "default", name).await {
            Ok(Manifest::Pod(p)) => Some(*p),
            _ => None,
        }
    }

    /// The pods of `namespace` (of every namespace with `None`); none when
    /// the list fails.
    pub async fn pods(&self, namespace: Option<&str>) -> Vec<Pod> {
        let (list, _) = self
            .objects
            .list(Kind::Pod, namespace, None)
            .await
            .unwrap_or_default();
        list.into_iter()
            .filter_map(|m| match m {
                Manifest::Pod(p) => Some(*p),
                _ => None,
            })
            .collect()
    }

    /// How many Nodes there are (`usize::MAX` when the list fails).
    pub async fn node_count(&self) -> usize {
        self.objects
            .list(Kind::Node, None, None)
            .await
            .map(|(l, _)| l.len())
            .unwrap_or(usize::MAX)
    }
}

/// Waits (at most `within`) until `n` Nodes named `<prefix>…` are Ready.
pub async fn wait_nodes_ready(objects: &Objects, prefix: &str, n: usize, within: Duration) {
    wait_until(&format!("{n} nodes {prefix}… Ready"), within, || async {
        let Ok((nodes, _)) = objects.list(Kind::Node, None, None).await else {
            return false;
        };
        nodes
            .iter()
            .filter(|m| {
                matches!(m, Manifest::Node(node)
                    if node.metadata.name.starts_with(prefix) && node.is_ready())
            })
            .count()
            == n
    })
    .await;
}

/// Waits (at most `within`) until `server` knows `n` voting members.
pub async fn wait_voting_members(server: &Server, n: usize, within: Duration) {
    wait_until(&format!("{n} voters"), within, || async {
        server
            .store
            .members()
            .values()
            .filter(|m| !m.learner && !m.removed)
            .count()
            == n
    })
    .await;
}

/// Members of one cluster, all voting, with what a test dials them with.
pub struct Voters {
    pub servers: Vec<Server>,
    /// Their gRPC addresses, in order.
    pub addrs: Vec<String>,
    /// The cluster CA (PEM).
    pub ca: String,
    pub admin_token: String,
    pub node_token: String,
}

/// [`start_servers`], then waits (at most `within`) until all `n` vote.
pub async fn start_voters(dir: &Path, n: usize, within: Duration) -> Voters {
    let servers = start_servers(dir, n).await;
    wait_voting_members(&servers[0], n, within).await;
    Voters {
        addrs: servers.iter().map(|s| s.grpc_addr.to_string()).collect(),
        ca: servers[0].trust.ca.cert_pem().to_string(),
        admin_token: servers[0].identity.admin_token.clone(),
        node_token: servers[0].identity.node_token.clone(),
        servers,
    }
}

/// A client certificate for `name` in `role` (admin, viewer, metrics),
/// issued through `s` as `drover access issue` does: the key and the
/// answer (certificate, CA, servers).
pub async fn issue_client(
    s: &Server,
    name: &str,
    role: &str,
) -> (
    drover_pki::Credential,
    drover_proto::v1::IssueClientResponse,
) {
    let cred = drover_pki::Credential::generate(name).expect("a key");
    let r = client_of(s)
        .issue_client(drover_proto::v1::IssueClientRequest {
            name: name.into(),
            role: role.into(),
            ttl_seconds: 3600,
            csr: cred.csr_pem.clone(),
        })
        .await
        .unwrap_or_else(|e| panic!("issue a {role} certificate: {e}"));
    (cred, r)
}

/// [`issue_client`]'s certificate and key (PEM), and the member addresses
/// the answer listed.
pub async fn client_certificate(
    s: &Server,
    name: &str,
    role: &str,
) -> (String, String, Vec<String>) {
    let (cred, r) = issue_client(s, name, role).await;
    (r.cert, cred.key_pem, r.servers)
}

/// A client of `s` with a new viewer certificate for `name` (issued by the
/// admin), and that certificate and its key (PEM).
pub async fn viewer_client(s: &TestServer, name: &str) -> (Client, String, String) {
    let (cert, key, servers) = client_certificate(&s.server, name, "viewer").await;
    let c = Client::new(&ClientConfig {
        servers,
        ca: s.ca.clone(),
        cert: cert.clone(),
        key: key.clone(),
        ..Default::default()
    })
    .expect("client");
    (c, cert, key)
}
