//! The `drover` binary: argument parsing and wiring, nothing else.

#[cfg(test)]
mod reference;
mod serve;
mod up;

use anyhow::Result;
use clap::{Args, CommandFactory, Parser, Subcommand};
use drover_cli::commands::{self, KvOutput};
use drover_cli::kubectl::{self, Shell};
use drover_cli::{Client, ClientConfig};
use serve::{run_server, shutdown_signal, ServerArgs};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// mimalloc instead of glibc's malloc, whose allocation and consolidation
/// took about a fifth of a busy server's CPU (docs/benchmarks.md, "The
/// allocator"); built without eager arena commit (`.cargo/config.toml`),
/// which doubled a small agent's memory. `--no-default-features` builds
/// on the system allocator, for heap profilers that interpose malloc.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "drover",
    version,
    about = "One copy of a workload on every eligible machine, in one binary"
)]
struct Cli {
    #[command(flatten)]
    conn: Conn,
    #[command(subcommand)]
    cmd: Cmd,
}

/// How client commands reach the cluster.
#[derive(Args)]
struct Conn {
    /// Client config file (servers, CA, credential), as servers write it to DATA_DIR/client.yaml.
    #[arg(long, global = true, env = "DROVER_CONFIG")]
    config: Option<PathBuf>,
    /// Server address(es), comma-separated (replaces the config file's).
    #[arg(long, global = true, env = "DROVER_SERVER")]
    server: Option<String>,
    /// Admin token for client commands; for `server --join`, the server token; for `agent`/`sim`,
    /// the node token. Prefer --token-file or DROVER_TOKEN: a command line is visible in `ps`.
    #[arg(long, global = true)]
    token: Option<String>,
    /// Read the token from this file (e.g. DATA_DIR/node-token of a server).
    #[arg(
        long,
        global = true,
        env = "DROVER_TOKEN_FILE",
        conflicts_with = "token"
    )]
    token_file: Option<PathBuf>,
    /// The cluster CA (DATA_DIR/ca.crt of a server), with --server and --token.
    #[arg(long, global = true, env = "DROVER_CA")]
    ca: Option<PathBuf>,
}

impl Conn {
    /// `--token`, else `--token-file`, else `DROVER_TOKEN`.
    fn token(&self) -> Result<Option<String>> {
        if let Some(t) = &self.token {
            return Ok(Some(t.clone()));
        }
        if let Some(p) = &self.token_file {
            let t = std::fs::read_to_string(p).map_err(|e| {
                anyhow::anyhow!("--token-file {}: cannot read it: {e}", p.display())
            })?;
            return Ok(Some(t.trim().to_string()));
        }
        Ok(std::env::var("DROVER_TOKEN").ok().filter(|t| !t.is_empty()))
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// A whole cluster in one process: a server and a local node (plus simulated ones).
    Up(UpArgs),
    /// Run a control-plane member (bootstrap, join, or resume from --data-dir).
    Server(ServerArgs),
    /// Run a node agent: join with --server ADDR[,ADDR…] --token JOIN_TOKEN and run this node's pods.
    Agent(AgentArgs),
    /// Run N simulated nodes in one process (real agent loop, in-memory runtime).
    Sim(SimArgs),
    /// Cluster membership and status.
    Cluster {
        #[command(subcommand)]
        cmd: ClusterCmd,
    },
    /// Client certificates for people and CI jobs.
    Access {
        #[command(subcommand)]
        cmd: AccessCmd,
    },
    /// Join, admin and metrics tokens.
    Token {
        #[command(subcommand)]
        cmd: TokenCmd,
    },
    /// Generic objects in the store (low level: keys and raw values).
    Kv {
        #[command(subcommand)]
        cmd: KvCmd,
    },
    /// Serve the Kubernetes API (and the dashboard) on 127.0.0.1 with your client config's
    /// credential, following the members (as `kubectl proxy`); writes a kubeconfig pointing at it.
    Proxy(ProxyArgs),
    /// Serve the dashboard on 127.0.0.1 with your client config's credential and print the URL
    /// to open (it carries a one-time secret).
    Ui(UiArgs),
    #[command(flatten)]
    Client(drover_cli::args::ClientCmd),
    /// Print a shell completion script (e.g. `drover completion bash > /etc/bash_completion.d/drover`).
    Completion {
        #[arg(value_enum)]
        shell: Shell,
    },
}

#[derive(Args)]
struct UpArgs {
    /// Where the server and the local node keep their state [default: ~/.local/share/drover].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// gRPC address of the server. Port 0 picks a free port: it is printed and
    /// written into the client config; `drover up` again binds it again.
    #[arg(long, default_value = "127.0.0.1:7600")]
    listen: String,
    /// HTTP address of the server.
    #[arg(long, default_value = "127.0.0.1:7680")]
    http: String,
    /// The local node's name [default: the hostname].
    #[arg(long)]
    name: Option<String>,
    /// Simulated nodes to add beside the local one.
    #[arg(long, default_value_t = 0)]
    sim_nodes: usize,
    /// A node silent this long turns NotReady.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    node_timeout: Duration,
    /// The local node's runtime: docker (refuses to start when the engine does not answer) or sim
    /// [default: docker when an engine answers, else sim].
    #[arg(long)]
    runtime: Option<drover_agent::RuntimeKind>,
    /// The Docker engine [default: unix:///var/run/docker.sock].
    #[arg(long, env = "DOCKER_HOST")]
    docker_host: Option<String>,
    /// Manifests to apply once the cluster runs (a file, a directory or -; repeatable); the pods
    /// are then printed as they come up, until Ctrl-C.
    #[arg(short = 'f', long = "filename")]
    files: Vec<String>,
}

#[derive(Args)]
struct ProxyArgs {
    /// The local port (0 picks a free one; the kubeconfig names it).
    #[arg(long, default_value_t = 8001)]
    port: u16,
    /// The address to listen on. Another than loopback only when you mean it: whoever reaches
    /// it acts on the cluster with your credential (a warning says so).
    #[arg(long, default_value = "127.0.0.1")]
    address: std::net::IpAddr,
    /// Where to write the kubeconfig pointing at the proxy [default: kubeconfig-proxy beside
    /// the client config].
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
}

#[derive(Args)]
struct UiArgs {
    /// The local port (0 picks a free one).
    #[arg(long, default_value_t = 8002)]
    port: u16,
    /// The address to listen on (see `drover proxy --address`).
    #[arg(long, default_value = "127.0.0.1")]
    address: std::net::IpAddr,
    /// Try to open the URL in a browser (xdg-open).
    #[arg(long)]
    open: bool,
}

#[derive(Args)]
struct AgentArgs {
    /// The node's name [default: the hostname].
    #[arg(long)]
    name: Option<String>,
    /// A label the node registers with (k=v); repeatable.
    #[arg(long = "label", value_parser = drover_agent::flags::parse_label)]
    labels: Vec<(String, String)>,
    /// A taint the node registers with (k=v:Effect); repeatable.
    #[arg(long = "taint", value_parser = drover_agent::flags::parse_taint)]
    taints: Vec<drover_api::Taint>,
    /// What the node keeps for itself, off its allocatable (cpu=500m,memory=1Gi); daemon pods are placed against what is left.
    #[arg(long, value_name = "RESOURCES", value_parser = drover_agent::flags::parse_reserved)]
    reserved: Option<std::collections::BTreeMap<String, drover_api::Quantity>>,
    /// The container runtime: docker (refuses to start when the engine does not answer) or sim.
    #[arg(long, default_value = "docker")]
    runtime: drover_agent::RuntimeKind,
    /// The Docker engine [default: unix:///var/run/docker.sock].
    #[arg(long, env = "DOCKER_HOST")]
    docker_host: Option<String>,
    /// Never pull an image (air-gapped nodes): an image on the node runs whatever its imagePullPolicy, an absent one is ErrImageNeverPull. Without it, Always whose pull fails is ErrImagePull, as the kubelet does.
    #[arg(long)]
    no_pull: bool,
    /// Where the agent keeps its desired pods, to run them through control-plane outages.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Static pods: run the Pod manifests of this directory on this node (followed as they change).
    #[arg(long)]
    manifest_dir: Option<PathBuf>,
    /// Leave the cluster now and exit: the Node is deleted and this node's pods are stopped
    /// (needs the certificate in --data-dir). Without it, SIGTERM/SIGINT stop the agent and
    /// leave every container running: the node comes back and adopts them.
    #[arg(long, conflicts_with = "leave_on_stop")]
    leave: bool,
    /// Leave the cluster on SIGTERM/SIGINT instead of keeping the containers (disposable nodes).
    #[arg(long)]
    leave_on_stop: bool,
    /// Serve Prometheus metrics on this address (plain HTTP, GET /metrics, no credential:
    /// bind it to loopback or a private interface); off by default.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
}

#[derive(Args)]
struct SimArgs {
    /// How many nodes.
    #[arg(long)]
    nodes: usize,
    /// Node names are PREFIX0 … PREFIX(N-1).
    #[arg(long, default_value = "sim-")]
    prefix: String,
    /// Keep the key the nodes join with here (sim-node.key): a sim restarted
    /// from it (after a SIGKILL) takes its nodes' names back. Without it a
    /// restarted sim is refused the names of its nodes that still exist.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// A label every node registers with (k=v); repeatable.
    #[arg(long = "label", value_parser = drover_agent::flags::parse_label)]
    labels: Vec<(String, String)>,
    /// A taint every node registers with (k=v:Effect); repeatable.
    #[arg(long = "taint", value_parser = drover_agent::flags::parse_taint)]
    taints: Vec<drover_api::Taint>,
    /// How long a simulated container takes to become ready.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    ready_delay: Duration,
}

#[derive(Subcommand)]
pub(crate) enum ServerCmd {
    /// Remove this data dir's member from its cluster.
    Leave {
        #[arg(long)]
        data_dir: PathBuf,
    },
}

#[derive(Subcommand)]
enum ClusterCmd {
    /// Members, their addresses, the leader, term and commit/applied indexes.
    Status,
    /// Remove a member (by the ID `cluster status` prints, or its address); works for dead members too.
    Remove { member: String },
    /// Save a snapshot of the whole store, or list the scheduled ones.
    Snapshot {
        #[command(subcommand)]
        cmd: SnapshotCmd,
    },
}

#[derive(Subcommand)]
enum SnapshotCmd {
    /// Write a point-in-time copy of the whole store to FILE (0600: it holds every Secret, the CA key and the tokens); restore it with `drover server --data-dir EMPTY_DIR --restore FILE`.
    Save { file: PathBuf },
    /// List the scheduled snapshots (`drover server --snapshot-interval`) that each member keeps.
    List,
}

#[derive(Subcommand)]
enum AccessCmd {
    /// Write a client config with a new certificate for a person or a CI job.
    Issue {
        /// Who it is for (a DNS-style name, e.g. alice or ci-deploy).
        name: String,
        /// admin: everything; viewer: read, watch and read logs; metrics: /metrics and /status only.
        #[arg(long, value_parser = ["admin", "viewer", "metrics"])]
        role: String,
        /// How long the certificate lives [default: 1 year].
        #[arg(long, value_parser = humantime::parse_duration)]
        ttl: Option<Duration>,
        /// Where to write the client config [default: NAME.yaml].
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
    },
    /// List the client certificates on record: who, role, serial, expiry, revoked or not.
    List,
    /// Revoke NAME's certificates: every member refuses them within a second and closes their connections.
    Revoke {
        name: String,
        /// Only this certificate (its serial, from `drover access list`).
        #[arg(long)]
        serial: Option<String>,
    },
}

#[derive(Subcommand)]
enum TokenCmd {
    /// Replace a token and print the new one: server or node (join tokens; joined nodes and members are not affected), admin (connections it let in are closed; members rewrite client.yaml and kubeconfig), metrics (for /metrics and /status; shown only now).
    Rotate {
        #[arg(value_parser = ["server", "node", "admin", "metrics"])]
        kind: String,
    },
}

#[derive(Subcommand)]
enum KvCmd {
    /// Read one key (linearizable unless --local).
    Get {
        key: String,
        #[arg(long)]
        local: bool,
        #[arg(short, long, value_enum, default_value = "value")]
        output: KvOutput,
    },
    /// Write a key: create-or-replace, or --create only, or --if-revision N (compare-and-swap).
    Put {
        key: String,
        value: String,
        #[arg(long, conflicts_with = "if_revision")]
        create: bool,
        #[arg(long)]
        if_revision: Option<u64>,
    },
    /// Delete a key, optionally only at --if-revision N.
    Delete {
        key: String,
        #[arg(long)]
        if_revision: Option<u64>,
    },
    /// List the keys under a prefix.
    List {
        #[arg(default_value = "")]
        prefix: String,
        #[arg(long)]
        local: bool,
        #[arg(short, long, value_enum, default_value = "value")]
        output: KvOutput,
    },
    /// Print every change under a prefix as it happens.
    Watch {
        #[arg(default_value = "")]
        prefix: String,
        /// Start after this revision (0: from now).
        #[arg(long, default_value_t = 0)]
        from: u64,
    },
}

/// Makes every file and directory this process creates its owner's only
/// (0600, 0700): the data dirs of `drover server`, `agent`, `up` and `sim`
/// hold credentials and the cluster's objects. Called before any thread
/// starts (the umask is the process's).
fn private_umask() {
    #[cfg(unix)]
    // SAFETY: umask only sets the process's file mode mask; it cannot fail
    // and touches no memory of ours.
    unsafe {
        libc::umask(0o077);
    }
}

fn main() {
    let cli = Cli::parse();
    if matches!(
        &cli.cmd,
        Cmd::Server(_) | Cmd::Agent(_) | Cmd::Up(_) | Cmd::Sim(_)
    ) {
        private_umask();
    }
    let is_server = matches!(&cli.cmd, Cmd::Server(a) if a.cmd.is_none());
    // Agents say what they do (join, lose a server, move, rejoin) at info.
    let is_agent = matches!(&cli.cmd, Cmd::Agent(_) | Cmd::Sim(_));
    let is_proxy = matches!(&cli.cmd, Cmd::Proxy(_) | Cmd::Ui(_));
    drover_cli::log::init(match (is_server, is_agent) {
        (true, _) => "info,raft=warn",
        (_, true) => "warn,drover_agent=info",
        _ if is_proxy => "warn,drover_cli::proxy=info",
        _ => "warn",
    });
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(run(cli)) {
        // `drover get pods | head -1`: the reader went away; end quietly.
        if drover_cli::run::is_closed_pipe(&e) {
            std::process::exit(0);
        }
        eprintln!("{}", drover_cli::error_text(&e));
        // 98 when an address to bind is in use (drover_server::EXIT_ADDR_IN_USE).
        std::process::exit(drover_server::exit_status(&e));
    }
}

fn client_config(conn: &Conn) -> Result<ClientConfig> {
    let token = conn.token()?;
    Ok(ClientConfig::resolve(
        conn.server.as_deref(),
        token.as_deref(),
        conn.ca.as_deref(),
        conn.config.as_deref(),
    )?)
}

fn client(conn: &Conn) -> Result<Client> {
    Ok(Client::new(&client_config(conn)?)?)
}

async fn run(cli: Cli) -> Result<()> {
    if let Cmd::Up(a) = cli.cmd {
        let opts = up::UpOptions {
            data_dir: a.data_dir.unwrap_or_else(up::default_data_dir),
            listen: a.listen,
            http: a.http,
            name: a.name.unwrap_or_else(up::hostname),
            sim_nodes: a.sim_nodes,
            node_timeout: a.node_timeout,
            runtime: a.runtime,
            docker_host: a.docker_host,
            files: a.files,
        };
        return up::up(opts, shutdown_signal()).await;
    }
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr();
    match cli.cmd {
        // Handled above: `drover up` prints from its tasks and must not
        // find stdout locked.
        Cmd::Up(_) => {}
        Cmd::Agent(a) => {
            let (servers, token) = join_target(&cli.conn)?;
            // Without --name: the node that ran with this data dir, else
            // the hostname.
            let saved = match &a.data_dir {
                Some(d) => drover_agent::saved_name(d)?,
                None => None,
            };
            let name = a.name.or(saved).unwrap_or_else(up::hostname);
            let mut opts = drover_agent::AgentOptions::new(servers, token, name);
            opts.labels = drover_agent::flags::labels(&a.labels)?;
            opts.taints = drover_agent::flags::taints(&a.taints)?;
            opts.runtime = a.runtime;
            opts.docker_host = a.docker_host;
            opts.no_pull = a.no_pull;
            opts.data_dir = a.data_dir;
            opts.manifest_dir = a.manifest_dir;
            opts.leave_on_stop = a.leave_on_stop;
            opts.reserved = a.reserved.unwrap_or_default();
            opts.metrics = a.metrics;
            if a.leave {
                drover_agent::leave_now(opts).await?
            } else {
                drover_agent::run_agent(opts, shutdown_signal()).await?
            }
        }
        Cmd::Sim(a) => {
            let (servers, token) = join_target(&cli.conn)?;
            let mut opts = drover_agent::SimOptions::new(servers, token, a.nodes);
            opts.prefix = a.prefix;
            opts.data_dir = a.data_dir;
            opts.labels = drover_agent::flags::labels(&a.labels)?;
            opts.taints = drover_agent::flags::taints(&a.taints)?;
            opts.sim.ready_delay = a.ready_delay;
            drover_agent::run_sim(opts, shutdown_signal()).await?
        }
        Cmd::Server(a) => match a.cmd {
            Some(ServerCmd::Leave { data_dir }) => {
                commands::server_leave(&data_dir, &mut out).await?
            }
            None => run_server(a, cli.conn.token()?).await?,
        },
        Cmd::Cluster { cmd } => {
            let c = client(&cli.conn)?;
            match cmd {
                ClusterCmd::Status => commands::cluster_status(&c, &mut out).await?,
                ClusterCmd::Remove { member } => {
                    commands::cluster_remove(&c, &member, &mut out).await?
                }
                ClusterCmd::Snapshot {
                    cmd: SnapshotCmd::Save { file },
                } => drover_cli::snapshot::save(&c, &file, &mut out).await?,
                ClusterCmd::Snapshot {
                    cmd: SnapshotCmd::List,
                } => drover_cli::snapshot::list(&c, &mut out).await?,
            }
        }
        Cmd::Access { cmd } => {
            let c = client(&cli.conn)?;
            match cmd {
                AccessCmd::Issue {
                    name,
                    role,
                    ttl,
                    output,
                } => {
                    let path = output.unwrap_or_else(|| PathBuf::from(format!("{name}.yaml")));
                    commands::access_issue(&c, &name, &role, ttl, &path, &mut out).await?
                }
                AccessCmd::List => commands::access_list(&c, &mut out).await?,
                AccessCmd::Revoke { name, serial } => {
                    commands::access_revoke(&c, &name, serial.as_deref(), &mut out).await?
                }
            }
        }
        Cmd::Token { cmd } => {
            let c = client(&cli.conn)?;
            match cmd {
                TokenCmd::Rotate { kind } => commands::token_rotate(&c, &kind, &mut out).await?,
            }
        }
        Cmd::Kv { cmd } => {
            let c = client(&cli.conn)?;
            match cmd {
                KvCmd::Get { key, local, output } => {
                    commands::kv_get(&c, &key, local, output, &mut out).await?
                }
                KvCmd::Put {
                    key,
                    value,
                    create,
                    if_revision,
                } => commands::kv_put(&c, &key, &value, create, if_revision, &mut out).await?,
                KvCmd::Delete { key, if_revision } => {
                    commands::kv_delete(&c, &key, if_revision, &mut out).await?
                }
                KvCmd::List {
                    prefix,
                    local,
                    output,
                } => commands::kv_list(&c, &prefix, local, output, &mut out).await?,
                KvCmd::Watch { prefix, from } => {
                    commands::kv_watch(&c, &prefix, from, &mut out).await?
                }
            }
        }
        Cmd::Client(cmd) => {
            let code = drover_cli::run::run(
                cmd,
                || client(&cli.conn),
                shutdown_signal(),
                &mut out,
                &mut err,
            )
            .await?;
            if code != 0 {
                out.flush()?;
                std::process::exit(code);
            }
        }
        Cmd::Proxy(a) => {
            let config = client_config(&cli.conn)?;
            let kubeconfig = a.kubeconfig.or_else(|| {
                let path =
                    cli.conn.config.clone().or_else(|| {
                        drover_cli::client::default_config_path().filter(|p| p.exists())
                    });
                drover_cli::proxy::default_kubeconfig(path.as_deref())
            });
            let opts = drover_cli::proxy::ProxyOptions {
                mode: drover_cli::proxy::Mode::Proxy,
                config,
                listen: std::net::SocketAddr::new(a.address, a.port),
                kubeconfig,
                open: false,
            };
            drover_cli::proxy::run(opts, shutdown_signal(), &mut out, &mut err).await?
        }
        Cmd::Ui(a) => {
            let opts = drover_cli::proxy::ProxyOptions {
                mode: drover_cli::proxy::Mode::Ui,
                config: client_config(&cli.conn)?,
                listen: std::net::SocketAddr::new(a.address, a.port),
                kubeconfig: None,
                open: a.open,
            };
            drover_cli::proxy::run(opts, shutdown_signal(), &mut out, &mut err).await?
        }
        Cmd::Completion { shell } => kubectl::completion(shell, &mut Cli::command(), &mut out)?,
    }
    out.flush()?;
    Ok(())
}

/// `--server` and the token of `drover agent` and `drover sim`: the servers
/// and the cluster's node token (empty when none is given: an agent with a
/// certificate in its data dir needs none).
fn join_target(conn: &Conn) -> Result<(Vec<String>, String)> {
    let Some(servers) = &conn.server else {
        anyhow::bail!("--server ADDR[,ADDR…] is required: the servers to join");
    };
    let token = conn.token()?.unwrap_or_default();
    Ok((drover_agent::flags::parse_servers(servers)?, token))
}
