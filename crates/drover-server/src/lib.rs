//! `drover server`: one control-plane member.
//!
//! A member owns one [`drover_store::Store`] and serves, on one gRPC port,
//! the client API, membership, the raft transport and agent sessions
//! ([`svc`]), and on one HTTP port health and status ([`http`]).
//! [`Server::start`] bootstraps a new cluster, joins an existing one, or
//! resumes from the data dir.
//!
//! The crate in layers, each using only those above it:
//!
//! 1. leaves: [`error`] ([`ApiError`]), [`auth`] (who calls), [`identity`],
//!    [`trust`] (CA, certificates, tokens), [`heartbeats`], [`sessions`]
//!    (agent sessions' log/exec streams), [`transport`] (raft messages out),
//!    [`limits`] (every limit), [`fds`] (the descriptor limit);
//! 2. [`ctx`]: what every part shares (store, tokens, heartbeats,
//!    sessions) and forwarding to the leader;
//! 3. [`api`]: the object API ([`api::Objects`]), answering [`ApiError`];
//! 4. [`cache`]: the one informer (nodes, DaemonSets, pods; the pods of
//!    each node) that the loops and agent sessions read;
//! 5. [`loops`]: controllers, node lifecycle, agent sessions, mirror pods,
//!    heartbeat relay;
//! 6. [`svc`]: the gRPC services, where errors become statuses; [`http`]
//!    and [`kapi`], the Kubernetes API on the HTTP port;
//! 7. [`ports`] (both ports served over TLS, one connection gate) and
//!    this file: wiring.
//!
//! Start-up, in order: read or create the identity (`server.json`) and the
//! trust ([`trust`]: a new CA at bootstrap; a joining member first calls
//! `Cluster.Certify` with the server token, over TLS pinned to the CA digest
//! the token carries, and receives its member certificate and the CA), open
//! the store, bind and serve both ports over TLS, then (joining only) call
//! `Cluster.Join` with its member certificate until the leader has added
//! this member as a learner, let it catch up and promoted it. `client.yaml`,
//! `kubeconfig`, `server-token` and `node-token` are written as soon as the member
//! serves, and again whenever the membership or a token changes.

pub mod access;
pub mod api;
pub mod auth;
pub mod cache;
pub mod ctx;
pub mod error;
pub mod fds;
pub mod heartbeats;
pub mod http;
pub mod identity;
pub mod kapi;
pub mod limits;
pub mod loops;
pub mod metrics;
pub mod ports;
pub mod recover;
pub mod sessions;
pub mod svc;
pub mod transport;
pub mod trust;
pub mod ui;
pub mod upgrade;

pub use error::ApiError;
pub use loops::controller::ControllerConfig;
pub use ports::MAX_STREAMS;

use anyhow::{bail, Context, Result};
use drover_proto::v1::cluster_client::ClusterClient;
use drover_store::{Init, Member, Store, StoreConfig};
use identity::Identity;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Everything `drover server` takes.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub data_dir: PathBuf,
    /// gRPC listen address (default 127.0.0.1:7600; port 0 picks one).
    pub listen: Option<String>,
    /// HTTP listen address (default 127.0.0.1:7680).
    pub http: Option<String>,
    /// The gRPC address others use, when it differs from `listen`.
    pub advertise: Option<String>,
    /// Join the cluster of this member instead of bootstrapping.
    pub join: Option<String>,
    /// Join: the cluster's server token (`drover-server-…`).
    pub token: Option<String>,
    /// Bootstrap: the admin token to use (generated when absent).
    pub admin_token: Option<String>,
    /// How long node certificates live.
    pub node_cert_ttl: Duration,
    /// How long member certificates live (see
    /// [`trust::Trust::renew_member_if_due`]).
    pub member_cert_ttl: Duration,
    /// How long a joining member may take to catch up with the log (on the
    /// leader) before its join fails and its learner is removed.
    pub join_catch_up: Duration,
    pub tick: Duration,
    pub election_ticks: usize,
    pub snapshot_every: u64,
    pub keep_entries: u64,
    /// Node timeout and garbage-collection horizon.
    pub controller: ControllerConfig,
    /// Connections one IP address may hold open across both ports
    /// (`--max-connections-per-address`; default
    /// [`limits::MAX_CONNECTIONS_PER_ADDRESS`]).
    pub max_connections_per_address: Option<usize>,
    /// The heartbeats a second this member answers before it asks its
    /// agents to beat less often (`--heartbeats-per-second`; default
    /// [`limits::HEARTBEATS_PER_SECOND`]; see [`heartbeats`]).
    pub heartbeats_per_second: usize,
    /// Every connection limit and timeout at once, instead of those derived
    /// from the descriptor limit ([`limits::connection_limits`]); for tests.
    pub connection_limits: Option<drover_pki::net::Limits>,
    /// A new one-member cluster from this snapshot file (an empty data dir).
    pub restore: Option<PathBuf>,
    /// With `restore`: keep the snapshot's cluster id instead of a new one.
    pub keep_cluster_id: bool,
    /// Make this data dir's member the only member of its cluster (its
    /// quorum is lost for good); refused while another member answers.
    pub force_new_cluster: bool,
    /// Scheduled snapshots on the leader: how often (off when `None`),
    /// how many are kept, where (default DATA_DIR/snapshots).
    pub snapshot_interval: Option<Duration>,
    pub snapshot_retain: usize,
    pub snapshot_dir: Option<PathBuf>,
    /// The watch cache's window of each kind (default
    /// [`limits::WATCH_WINDOW`]; tests make it small).
    pub watch_window: limits::WatchWindow,
}

impl ServerOptions {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        ServerOptions {
            data_dir: data_dir.into(),
            listen: None,
            http: None,
            advertise: None,
            join: None,
            token: None,
            admin_token: None,
            node_cert_ttl: trust::NODE_CERT_TTL,
            member_cert_ttl: trust::MEMBER_CERT_TTL,
            join_catch_up: Duration::from_secs(60),
            tick: Duration::from_millis(100),
            election_ticks: 10,
            snapshot_every: 10_000,
            keep_entries: 5_000,
            controller: ControllerConfig::default(),
            max_connections_per_address: None,
            heartbeats_per_second: limits::HEARTBEATS_PER_SECOND,
            connection_limits: None,
            restore: None,
            keep_cluster_id: false,
            force_new_cluster: false,
            snapshot_interval: None,
            watch_window: limits::WATCH_WINDOW,
            snapshot_retain: 5,
            snapshot_dir: None,
        }
    }
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:7600";
pub const DEFAULT_HTTP: &str = "127.0.0.1:7680";

/// A running member.
pub struct Server {
    pub store: Store,
    /// What the services share (heartbeats, tokens, forwarding).
    pub ctx: Arc<ctx::Ctx>,
    /// The member's informer.
    pub cache: cache::Informer,
    pub identity: Identity,
    /// The CA, this member's certificate, the tokens.
    pub trust: Arc<trust::Trust>,
    pub grpc_addr: SocketAddr,
    pub http_addr: SocketAddr,
    /// The connections of both ports, counted against one set of limits.
    pub connections: Arc<drover_pki::net::Gate>,
    shutdown: watch::Sender<bool>,
    /// Cuts every client connection once the grace period is over.
    cut: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

/// `--listen HOST:0` on a restart: HOST with the port of the member's
/// recorded address `addr`; any other `--listen` as given.
fn keep_port(listen: &str, addr: &str) -> String {
    match (listen.strip_suffix(":0"), addr.rsplit_once(':')) {
        (Some(host), Some((_, port))) if port != "0" => format!("{host}:{port}"),
        _ => listen.to_string(),
    }
}

/// The exit status of `drover server` (and of `drover up`) when an address
/// it must bind is taken: the OS error number of "address in use", so that
/// a supervisor or a test can tell "try again in a moment" (a restart binds
/// the ports its data dir recorded, which an outgoing connection may hold
/// for a while) from any other failure (status 1) without reading the log.
pub const EXIT_ADDR_IN_USE: i32 = 98;

/// How long a stopping leader waits for the member it hands leadership to
/// ([`drover_store::Store::step_down`]); raft itself gives a transfer up
/// after an election timeout (1 s by default).
const STEP_DOWN: Duration = Duration::from_secs(2);

/// A listening address of the member could not be bound.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot listen on {addr} ({what}); is another server using it? choose another with --{what}"
)]
pub struct BindError {
    /// The address as given (`HOST:PORT`).
    pub addr: String,
    /// The flag that names it: `listen` or `http`.
    pub what: &'static str,
    #[source]
    pub source: std::io::Error,
}

impl BindError {
    /// The address is in use (rather than, say, not local or forbidden).
    pub fn in_use(&self) -> bool {
        self.source.kind() == std::io::ErrorKind::AddrInUse
    }
}

/// The exit status for the error `e` that ended `drover server` or `drover
/// up`: [`EXIT_ADDR_IN_USE`] when an address to bind was in use, else 1.
pub fn exit_status(e: &anyhow::Error) -> i32 {
    let busy = e
        .chain()
        .any(|c| c.downcast_ref::<BindError>().is_some_and(BindError::in_use));
    if busy {
        EXIT_ADDR_IN_USE
    } else {
        1
    }
}

async fn bind(addr: &str, what: &'static str) -> Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|source| {
        BindError {
            addr: addr.to_string(),
            what,
            source,
        }
        .into()
    })
}

impl Server {
    /// Starts a member: see the crate docs for the order of things.
    pub async fn start(opts: ServerOptions) -> Result<Server> {
        let dir = &opts.data_dir;
        // A restore reads and checks its snapshot before anything is written.
        let restore = match &opts.restore {
            Some(file) => {
                if opts.join.is_some() || opts.token.is_some() || opts.force_new_cluster {
                    bail!("--restore makes a new cluster: it goes without --join, --token and --force-new-cluster");
                }
                if opts.admin_token.is_some() {
                    bail!("--admin-token: a restore keeps the snapshot's admin token; replace it afterwards with `drover token rotate admin`");
                }
                recover::check_empty(dir)?;
                Some((file, recover::read_snapshot(file)?))
            }
            None => None,
        };
        drover_store::private_dir(dir).with_context(|| {
            format!(
                "cannot create the data dir {} readable by its owner only (0700); check its parent's permissions",
                dir.display()
            )
        })?;
        let existing = Identity::load(dir)?;
        if let Some(id) = &existing {
            for (flag, given, kept) in [
                ("listen", &opts.listen, &id.addr),
                ("advertise", &opts.advertise, &id.addr),
                ("http", &opts.http, &id.http),
            ] {
                if let Some(g) = given {
                    if flag != "listen" && g != kept && !g.ends_with(":0") {
                        bail!("--{flag} {g} differs from {kept}, which this data dir's member uses; members keep their address (remove the member and join anew to move it)");
                    }
                }
            }
        }
        // Bind first: with port 0 the real address goes into the identity.
        // A restart binds the recorded port again, also when given the
        // same `--listen HOST:0` as the first start (peers and clients
        // know the member by that port).
        let listen = match (&existing, &opts.listen) {
            (Some(id), Some(l)) => keep_port(l, &id.addr),
            (Some(id), None) => id.addr.clone(),
            (None, l) => l.clone().unwrap_or_else(|| DEFAULT_LISTEN.to_string()),
        };
        let http = existing
            .as_ref()
            .map(|i| i.http.clone())
            .or_else(|| opts.http.clone())
            .unwrap_or_else(|| DEFAULT_HTTP.to_string());
        let grpc_l = bind(&listen, "listen").await?;
        let http_l = bind(&http, "http").await?;
        let grpc_addr = grpc_l.local_addr()?;
        let http_addr = http_l.local_addr()?;
        let connections = drover_pki::net::Gate::new(opts.connection_limits.unwrap_or_else(|| {
            let nofile = fds::raise_nofile().map_or(1024, |n| n.soft);
            let l = limits::connection_limits(nofile, opts.max_connections_per_address);
            tracing::info!(
                "connections: at most {} per address across both ports, {} in all",
                l.per_ip,
                l.total
            );
            l
        }));

        let hosts_for = |addr: &str| trust::hosts_of(&[addr, &listen]);
        let (identity, init, trust) = match existing {
            Some(id) => {
                let hosts = hosts_for(&id.addr);
                if id.server_token.is_empty() || id.node_token.is_empty() {
                    bail!(
                        "{} was made by a drover from before TLS (its server.json has no server or node token, and there is no ca.crt): this version cannot resume it; move it aside and start with an empty data dir (a new cluster), then apply your manifests again",
                        dir.display()
                    );
                }
                let Some(t) =
                    trust::Trust::load(dir, id.id, &hosts, &id.server_token, &id.node_token)?
                else {
                    bail!(
                        "{} has a member identity but no certificate (ca.crt, member.crt): it never finished joining; start with an empty data dir",
                        dir.display()
                    );
                };
                if opts.force_new_cluster {
                    recover::force_new_cluster(dir, &id, &t).await?;
                }
                (id, Init::Join, t)
            }
            None if opts.force_new_cluster => bail!(
                "--force-new-cluster needs the data dir of a surviving member; {} holds none",
                dir.display()
            ),
            None => {
                let addr = opts
                    .advertise
                    .clone()
                    .unwrap_or_else(|| grpc_addr.to_string());
                let id = identity::new_id();
                let hosts = hosts_for(&addr);
                // This member as the only voter of a new (or restored) cluster.
                let me = || Member {
                    id,
                    addr: addr.clone(),
                    http: http_addr.to_string(),
                    learner: false,
                    removed: false,
                };
                let (t, admin_token, init) = match (&opts.join, &restore) {
                    (None, Some((file, b))) => {
                        let t = trust::Trust::restore(dir, id, &hosts, &b.header)?;
                        let (kvs, cluster) = recover::restored_objects(b, opts.keep_cluster_id);
                        recover::announce_restore(file, b, &cluster, id);
                        let at = if b.header.admin_token.is_empty() {
                            identity::new_token("admin")
                        } else {
                            b.header.admin_token.clone()
                        };
                        let revision = b.header.revision;
                        (
                            t,
                            at,
                            Init::Restore {
                                me: me(),
                                kvs,
                                revision,
                            },
                        )
                    }
                    (None, None) => {
                        if opts.token.is_some() {
                            bail!("--token is for --join (the cluster's server token); a new cluster makes its own tokens");
                        }
                        let at = match &opts.admin_token {
                            Some(t) => {
                                identity::check_token(t, "--admin-token")?;
                                t.clone()
                            }
                            None => identity::new_token("admin"),
                        };
                        let t = trust::Trust::bootstrap(dir, id, &hosts, None, None)?;
                        let me = me();
                        (t, at, Init::Bootstrap(me))
                    }
                    (Some(target), _) => {
                        let Some(text) = opts.token.clone() else {
                            bail!("--join needs --token: the cluster's server token (the file server-token in a member's data dir)");
                        };
                        let token = drover_pki::JoinToken::parse(&text, "--token")?;
                        if token.kind != drover_pki::TokenKind::Server {
                            bail!("--token: a {} token cannot join a server; use the server token (server-token in a member's data dir)", token.kind.as_str());
                        }
                        let t = certify_member(dir, target, &token, id, &hosts).await?;
                        let at = String::new();
                        (t, at, Init::Join)
                    }
                };
                let ident = Identity {
                    id,
                    addr,
                    http: http_addr.to_string(),
                    server_token: t.token(drover_pki::TokenKind::Server).to_string(),
                    node_token: t.token(drover_pki::TokenKind::Node).to_string(),
                    admin_token,
                    join: opts.join.clone(),
                };
                ident.save(dir)?;
                (ident, init, t)
            }
        };
        let mut trust = trust;
        trust.node_cert_ttl = opts.node_cert_ttl;
        trust.member_cert_ttl = opts.member_cert_ttl;
        trust.renew_as(dir, identity.id, &hosts_for(&identity.addr));
        trust
            .renew_member_if_due()
            .context("cannot renew this member's certificate")?;
        let trust = Arc::new(trust);

        let mut cfg = StoreConfig::new(identity.id, dir.join("store"));
        cfg.tick = opts.tick;
        cfg.election_ticks = opts.election_ticks;
        cfg.snapshot_every = opts.snapshot_every;
        cfg.keep_entries = opts.keep_entries;
        let timeout = cfg.request_timeout;
        let transport = Arc::new(transport::GrpcTransport::new(
            identity.id,
            identity.addr.clone(),
            trust.client_tls(),
            trust.renewals(),
            tokio::runtime::Handle::current(),
        ));
        let store = match Store::open(cfg, init, transport) {
            Ok(s) => s,
            Err(drover_store::Error::Removed) => bail!(
                "member {:016x} in {} was removed from its cluster; start with an empty data dir to join again",
                identity.id,
                dir.display()
            ),
            Err(e) => return Err(e).context("cannot open the store"),
        };

        // A joining member learns the admin token with its certificate but
        // serves no admin call before it has joined.
        let admin_now = if identity.join.is_some() {
            String::new()
        } else {
            identity.admin_token.clone()
        };
        let mut ctx = ctx::Ctx::with_revocations(
            store.clone(),
            admin_now,
            trust.clone(),
            timeout,
            connections.revocations().clone(),
        );
        ctx.join_catch_up = opts.join_catch_up.max(timeout);
        ctx.heartbeats
            .configure(opts.controller.node_timeout, opts.heartbeats_per_second);
        ctx.snapshots = ctx::Snapshots {
            dir: opts
                .snapshot_dir
                .clone()
                .unwrap_or_else(|| dir.join("snapshots")),
            interval: opts.snapshot_interval,
            retain: opts.snapshot_retain.max(1),
        };
        let ctx = Arc::new(ctx);
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (cut, cut_rx) = watch::channel(false);
        let informer = cache::Informer::new(opts.watch_window, ctx.metrics.watch.clone());
        let mut tasks = vec![
            tokio::spawn(informer.clone().run(store.clone(), shutdown_rx.clone())),
            tokio::spawn(loops::controller::run(
                ctx.clone(),
                api::Objects::new(ctx.clone()),
                informer.clone(),
                opts.controller.clone(),
                shutdown_rx.clone(),
            )),
            tokio::spawn(loops::scheduler::run(
                ctx.clone(),
                api::Objects::new(ctx.clone()),
                informer.clone(),
                shutdown_rx.clone(),
            )),
            tokio::spawn(loops::heartbeats::relay(ctx.clone(), shutdown_rx.clone())),
            tokio::spawn(access::follow(ctx.clone(), shutdown_rx.clone())),
            tokio::spawn(loops::tokens::follow(ctx.clone(), shutdown_rx.clone())),
            tokio::spawn(loops::snapshots::run(ctx.clone(), shutdown_rx.clone())),
            tokio::spawn(loops::renewal::run(ctx.trust.clone(), shutdown_rx.clone())),
            tokio::spawn(ports::serve_grpc(
                grpc_l,
                ctx.clone(),
                informer.clone(),
                connections.clone(),
                shutdown_rx.clone(),
                cut_rx.clone(),
            )),
            tokio::spawn(ports::serve_http(
                http_l,
                ctx.clone(),
                informer.clone(),
                connections.clone(),
                shutdown_rx.clone(),
                cut_rx,
            )),
        ];
        if opts.controller.workloads {
            tasks.push(tokio::spawn(loops::workloads::run(
                ctx.clone(),
                api::Objects::new(ctx.clone()),
                informer.clone(),
                shutdown_rx.clone(),
            )));
        }

        let mut server = Server {
            store,
            ctx: ctx.clone(),
            cache: informer,
            identity,
            trust,
            grpc_addr,
            http_addr,
            connections,
            shutdown,
            cut,
            tasks,
        };
        if server.identity.join.is_none() {
            server.write_client_files()?;
        }
        if let Some(join) = server.identity.join.clone() {
            if let Err(e) = server.join(&join, &ctx).await {
                server.shutdown().await;
                return Err(e);
            }
        }
        server.tasks.push(tokio::spawn(keep_client_file(
            ctx.clone(),
            server.identity.clone(),
            dir.clone(),
            shutdown_rx,
        )));
        Ok(server)
    }

    /// The object API of this member.
    pub fn objects(&self) -> api::Objects {
        api::Objects::new(self.ctx.clone())
    }

    fn write_client_files(&self) -> Result<()> {
        let servers = server_list(&self.store, &self.identity);
        identity::write_client_files(
            &self.opts_dir(),
            &self.identity,
            self.trust.ca.cert_pem(),
            &servers,
        )?;
        kapi::kubeconfig::write(&self.opts_dir(), &self.ctx, &self.identity.http)
    }

    fn opts_dir(&self) -> PathBuf {
        // The store lives in DIR/store.
        self.store
            .config()
            .dir
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_default()
    }

    async fn join(&mut self, target: &str, ctx: &Arc<ctx::Ctx>) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut last_err = String::new();
        let mut targets = vec![target.to_string()];
        loop {
            for t in targets.clone() {
                let req = drover_proto::v1::JoinRequest {
                    id: self.identity.id,
                    addr: self.identity.addr.clone(),
                    http: self.identity.http.clone(),
                };
                let ep = drover_pki::net::endpoint(&t)
                    .with_context(|| format!("--join {t}: not a host:port address"))?
                    .connect_timeout(Duration::from_secs(2));
                let res = match drover_pki::net::connect(ep, self.trust.client_tls()).await {
                    Ok(ch) => {
                        let mut r = tonic::Request::new(req);
                        r.set_timeout(Duration::from_secs(90));
                        ClusterClient::new(ch).join(r).await.map_err(|s| s.into())
                    }
                    Err(e) => Err(anyhow::Error::from(e)),
                };
                match res {
                    Ok(resp) => {
                        let resp = resp.into_inner();
                        if !resp.admin_token.is_empty() {
                            self.identity.admin_token = resp.admin_token.clone();
                        }
                        self.identity.join = None;
                        self.identity.save(&self.opts_dir())?;
                        ctx.set_admin_token(self.identity.admin_token.clone());
                        self.write_client_files()?;
                        tracing::info!(
                            "joined the cluster as member {:016x} ({} members)",
                            self.identity.id,
                            resp.members.len()
                        );
                        return Ok(());
                    }
                    Err(e) => {
                        if let Some(s) = e.downcast_ref::<tonic::Status>() {
                            if matches!(
                                s.code(),
                                tonic::Code::PermissionDenied | tonic::Code::InvalidArgument
                            ) {
                                bail!("joining {t} was refused: {}", s.message());
                            }
                        }
                        last_err = format!("{t}: {e:#}");
                    }
                }
            }
            if Instant::now() >= deadline {
                bail!("could not join the cluster within 120 s; last error: {last_err}");
            }
            // Known members are worth a try too if the first one is down.
            for m in self.store.members().values() {
                if !m.removed && m.id != self.identity.id && !targets.contains(&m.addr) {
                    targets.push(m.addr.clone());
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Resolves when the store stopped by itself (removed, storage failure).
    pub async fn stopped(&self) -> drover_store::Error {
        self.store.stopped().await
    }

    /// Stops serving and closes the store.
    pub async fn shutdown(&mut self) {
        // A leader hands leadership over first: the others elect its
        // successor at once instead of after an election timeout without
        // writes (a rolling upgrade stops every member in turn;
        // docs/upgrades.md).
        if let Some(to) = self.store.step_down(STEP_DOWN).await {
            tracing::info!("stopping: handed leadership to member {to:016x}");
        }
        // Agents move to another member now, not when a dead connection is
        // noticed.
        self.ctx.sessions.close_all(
            drover_proto::reason::Reason::ServiceUnavailable
                .status("this server is stopping; move to another member"),
        );
        let _ = self.shutdown.send(true);
        // In-flight calls get a moment (one second in all); then every
        // connection is cut, long-lived streams (watches, agents) with them,
        // and their clients reconnect elsewhere. Cutting the connections
        // ends the tasks that serve them, which hold this member's store:
        // a client that keeps its connection open cannot keep a stopped
        // member's store open.
        let grace = tokio::time::Instant::now() + Duration::from_secs(1);
        let mut late = Vec::new();
        for mut t in self.tasks.drain(..) {
            if tokio::time::timeout_at(grace, &mut t).await.is_err() {
                late.push(t);
            }
        }
        let _ = self.cut.send(true);
        for mut t in late {
            if tokio::time::timeout(Duration::from_millis(200), &mut t)
                .await
                .is_err()
            {
                t.abort();
            }
        }
        self.store.shutdown().await;
    }
}

/// Asks `target` for a member certificate with the server token, over TLS
/// pinned to the CA digest the token carries; keeps what it answers.
async fn certify_member(
    dir: &std::path::Path,
    target: &str,
    token: &drover_pki::JoinToken,
    id: u64,
    hosts: &[String],
) -> Result<trust::Trust> {
    let cred = drover_pki::Credential::generate(&drover_pki::Role::Member(id).common_name())?;
    let pinned = drover_pki::tls::pinned_client_config(&token.ca_digest)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ep = drover_pki::net::endpoint(target)
            .with_context(|| format!("--join {target}: not a host:port address"))?
            .connect_timeout(Duration::from_secs(2));
        let res = match drover_pki::net::connect(ep, pinned.clone()).await {
            Ok(ch) => {
                let mut r = tonic::Request::new(drover_proto::v1::CertifyRequest {
                    token: token.to_string(),
                    csr: cred.csr_pem.clone(),
                    member: id,
                    hosts: hosts.to_vec(),
                    ..Default::default()
                });
                r.set_timeout(Duration::from_secs(10));
                ClusterClient::new(ch)
                    .certify(r)
                    .await
                    .map(|r| r.into_inner())
                    .map_err(|s| {
                        let refused = matches!(
                            s.code(),
                            tonic::Code::PermissionDenied
                                | tonic::Code::Unauthenticated
                                | tonic::Code::InvalidArgument
                                | tonic::Code::AlreadyExists
                                | tonic::Code::FailedPrecondition
                        );
                        (
                            refused,
                            format!("{target} refused the join: {}", s.message()),
                        )
                    })
            }
            // A server with another CA is not the cluster the token is
            // for: retrying will not change that.
            Err(e) => match drover_pki::tls::ca_mismatch(&e) {
                Some(why) => Err((true, format!("--join {target}: {why}"))),
                None => Err((
                    false,
                    format!(
                        "cannot reach {target} over TLS: {}",
                        drover_pki::net::error_chain(&e)
                    ),
                )),
            },
        };
        match res {
            Ok(resp) => return trust::Trust::from_certified(dir, cred.key_pem, &resp),
            Err((true, msg)) => bail!(msg),
            Err((false, msg)) if Instant::now() >= deadline => bail!("{msg}; gave up after 60 s"),
            Err((false, msg)) => {
                tracing::warn!("{msg}; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

fn server_list(store: &Store, me: &Identity) -> Vec<String> {
    let mut servers: Vec<String> = vec![me.addr.clone()];
    for m in store.members().values() {
        if !m.removed && !m.learner && !m.addr.is_empty() && !servers.contains(&m.addr) {
            servers.push(m.addr.clone());
        }
    }
    servers
}

/// Rewrites client.yaml when the membership changes, and the token files
/// (and `server.json`) when a rotated token arrives.
async fn keep_client_file(
    ctx: Arc<ctx::Ctx>,
    me: Identity,
    dir: PathBuf,
    mut stop: watch::Receiver<bool>,
) {
    let tokens = |ctx: &ctx::Ctx| {
        (
            ctx.trust.token(drover_pki::TokenKind::Server),
            ctx.trust.token(drover_pki::TokenKind::Node),
            ctx.admin_token(),
        )
    };
    let mut last = server_list(&ctx.store, &me);
    let mut last_tokens = tokens(&ctx);
    // The kubeconfig: once this member has the admin token, again when
    // the membership changes.
    let mut kubeconfig_of: Option<Vec<(u64, String)>> = None;
    loop {
        let now_members = kapi::kubeconfig::members(&ctx, &me.http);
        if !ctx.admin_token().is_empty() && kubeconfig_of.as_ref() != Some(&now_members) {
            match kapi::kubeconfig::write(&dir, &ctx, &me.http) {
                Ok(()) => kubeconfig_of = Some(now_members),
                Err(e) => tracing::warn!("{e:#}"),
            }
        }
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        loops::tokens::refresh(&ctx).await;
        let now = server_list(&ctx.store, &me);
        let now_tokens = tokens(&ctx);
        if now != last || now_tokens != last_tokens {
            if now_tokens.2 != last_tokens.2 && !now_tokens.2.is_empty() {
                // A rotated admin token: the kubeconfig is written again.
                kubeconfig_of = match kapi::kubeconfig::write(&dir, &ctx, &me.http) {
                    Ok(()) => Some(kapi::kubeconfig::members(&ctx, &me.http)),
                    Err(e) => {
                        tracing::warn!("{e:#}");
                        None
                    }
                };
            }
            last_tokens = now_tokens;
            // The identity on disk has the admin token once joined.
            if let Ok(Some(mut id)) = Identity::load(&dir) {
                id.server_token = ctx.trust.token(drover_pki::TokenKind::Server).to_string();
                id.node_token = ctx.trust.token(drover_pki::TokenKind::Node).to_string();
                let admin = ctx.admin_token();
                if !admin.is_empty() {
                    id.admin_token = admin;
                }
                if let Err(e) = id.save(&dir) {
                    tracing::warn!("cannot rewrite server.json: {e:#}");
                }
                if id.join.is_none() {
                    if let Err(e) =
                        identity::write_client_files(&dir, &id, ctx.trust.ca.cert_pem(), &now)
                    {
                        tracing::warn!("cannot rewrite client.yaml: {e:#}");
                    }
                }
            }
            last = now;
        }
    }
}
