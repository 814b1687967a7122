//! The cluster in containers: one private network (`--internal`: no way
//! out of this machine, with its own /24 so that every container keeps a
//! fixed address across a disconnect), servers and agents as containers
//! of the testbed image, and the actions of the nemeses on them.
//!
//! The test process reaches the containers on their bridge addresses (the
//! host is on every bridge, internal ones included), so the workload's
//! client runs in the test. Everything a run creates carries the labels of
//! [`crate::docker`] and is removed when the [`Fleet`] is dropped, panics
//! included.

use crate::docker::{self, docker, LABEL_PID, LABEL_RUN};
use crate::{Error, Result};
use drover_cli::{Client, ClientConfig};
use std::time::{Duration, Instant};

/// The gRPC port of every server, inside its container.
pub const PORT: u16 = 7600;

/// How the fleet is tuned.
#[derive(Debug, Clone)]
pub struct Options {
    pub servers: usize,
    pub agents: usize,
    /// Agents labelled `tb/edge=true` (the first ones): the eligible nodes
    /// of the selective DaemonSet.
    pub edge_agents: usize,
    /// Agents (the first ones) that run their pods on this machine's Docker
    /// engine (its socket mounted in their container) instead of the
    /// simulated runtime: their containers are checked through the faults.
    pub docker_agents: usize,
    /// `--snapshot-every` / `--keep-entries` of the servers: small, so that
    /// restarted members catch up from snapshots.
    pub snapshot_every: u64,
    pub keep_entries: u64,
    /// `DROVER_LOG` of the servers and agents.
    pub log: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            servers: 3,
            agents: 5,
            edge_agents: 3,
            docker_agents: 1,
            snapshot_every: 500,
            keep_entries: 100,
            log: "info,raft=warn".into(),
        }
    }
}

/// One server container.
#[derive(Debug, Clone)]
pub struct Server {
    pub name: String,
    pub ip: String,
    /// Its raft id (from its status once it serves).
    pub id: u64,
}

impl Server {
    pub fn addr(&self) -> String {
        format!("{}:{PORT}", self.ip)
    }
}

/// One agent container; the node has the container's name.
#[derive(Debug, Clone)]
pub struct Agent {
    pub name: String,
    pub ip: String,
    pub edge: bool,
    /// Runs its pods on the host's Docker engine.
    pub docker: bool,
}

/// A running fleet; removes all of its containers and its network when dropped.
pub struct Fleet {
    pub run: String,
    pub network: String,
    pub image: String,
    /// The first three octets of the network's /24.
    subnet: String,
    next_host: u8,
    opts: Options,
    pub servers: Vec<Server>,
    pub agents: Vec<Agent>,
    /// Servers removed from the cluster (their containers are gone).
    pub removed: Vec<Server>,
    server_token: String,
    node_token: String,
    /// The admin's client config (servers: the current members).
    pub client_cfg: ClientConfig,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        // The agents first: a live agent would restart its pods.
        docker::remove_run(&self.run);
        for a in self.agents.iter().filter(|a| a.docker) {
            crate::engine::remove_pods_of(&a.name);
        }
    }
}

/// The host path of the engine's socket (`DOCKER_HOST=unix://…`, else the
/// default), mounted in the agents that use the engine.
fn engine_socket() -> String {
    std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(str::to_string))
        .unwrap_or_else(|| "/var/run/docker.sock".to_string())
}

/// Polls `f` every `every` until it yields a value; an error after `timeout`.
pub async fn poll<T, F, Fut>(what: &str, timeout: Duration, every: Duration, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if start.elapsed() >= timeout {
            return Err(Error::Timeout {
                what: what.to_string(),
                waited: start.elapsed(),
            });
        }
        tokio::time::sleep(every).await;
    }
}

impl Fleet {
    /// Creates the network (a /24 of 10.200-249.x.0 that no other network
    /// holds) and starts the servers (the first bootstraps, the others
    /// join it) and the agents, and waits until every member is a voter
    /// and every node Ready.
    pub async fn start(image: &str, run: &str, seed: u64, opts: Options) -> Result<Fleet> {
        let network = format!("tb-{run}");
        let pid = std::process::id().to_string();
        let mut subnet = None;
        let mut rng = crate::rng::Rng::new(seed ^ u64::from(std::process::id()));
        for _ in 0..20 {
            let s = format!("10.{}.{}", 200 + rng.below(50), rng.below(256));
            let cidr = format!("{s}.0/24");
            let r = docker(&[
                "network",
                "create",
                "--internal",
                "--subnet",
                &cidr,
                "--label",
                &format!("{LABEL_RUN}={run}"),
                "--label",
                &format!("{LABEL_PID}={pid}"),
                &network,
            ]);
            match r {
                Ok(_) => {
                    subnet = Some(s);
                    break;
                }
                Err(Error::Docker { message, .. }) if message.contains("overlap") => continue,
                Err(e) => return Err(e),
            }
        }
        let Some(subnet) = subnet else {
            return Err(Error::Setup(
                "no free /24 under 10.200.0.0/10 for the testbed network".into(),
            ));
        };
        let mut fleet = Fleet {
            run: run.to_string(),
            network,
            image: image.to_string(),
            subnet,
            next_host: 10,
            opts: opts.clone(),
            servers: Vec::new(),
            agents: Vec::new(),
            removed: Vec::new(),
            server_token: String::new(),
            node_token: String::new(),
            client_cfg: ClientConfig::default(),
        };
        // The first member bootstraps.
        let first = fleet.new_server_container(None)?;
        let dir = tempfile::tempdir()?;
        let client_yaml = poll(
            "the first member's client.yaml",
            Duration::from_secs(60),
            Duration::from_millis(100),
            || {
                let r = fleet.read_file(&first.name, "/data/client.yaml", dir.path());
                async move { r.ok() }
            },
        )
        .await?;
        let path = dir.path().join("client.yaml");
        std::fs::write(&path, client_yaml)?;
        let mut cfg = ClientConfig::load(&path)?;
        cfg.servers = vec![first.addr()];
        fleet.client_cfg = cfg;
        fleet.server_token = fleet.read_file(&first.name, "/data/server-token", dir.path())?;
        fleet.node_token = fleet.read_file(&first.name, "/data/node-token", dir.path())?;
        let mut first = first;
        first.id = fleet.wait_member(&first).await?;
        fleet.servers.push(first);
        for _ in 1..opts.servers {
            fleet.add_server().await?;
        }
        for i in 0..opts.agents {
            let agent = Agent {
                name: format!("tb-{run}-a{}", i + 1),
                ip: fleet.next_ip()?,
                edge: i < opts.edge_agents,
                docker: i < opts.docker_agents,
            };
            fleet.run_agent(&agent)?;
            fleet.agents.push(agent);
        }
        let names: Vec<String> = fleet.agents.iter().map(|a| a.name.clone()).collect();
        let client = fleet.client()?;
        poll(
            "every node Ready",
            Duration::from_secs(90),
            Duration::from_millis(200),
            || {
                let client = client.clone();
                let names = names.clone();
                async move {
                    let nodes = crate::observe::nodes(&client).await.ok()?;
                    names
                        .iter()
                        .all(|n| nodes.get(n).copied() == Some(true))
                        .then_some(())
                }
            },
        )
        .await?;
        Ok(fleet)
    }

    fn next_ip(&mut self) -> Result<String> {
        if self.next_host >= 250 {
            return Err(Error::Setup(
                "the testbed network ran out of addresses".into(),
            ));
        }
        let ip = format!("{}.{}", self.subnet, self.next_host);
        self.next_host += 1;
        Ok(ip)
    }

    /// Copies a file out of a container (running or not) and returns it.
    fn read_file(&self, container: &str, path: &str, tmp: &std::path::Path) -> Result<String> {
        let dest = tmp.join("copied");
        let _ = std::fs::remove_file(&dest);
        docker(&[
            "cp",
            &format!("{container}:{path}"),
            &dest.display().to_string(),
        ])?;
        let text = std::fs::read_to_string(&dest)?;
        if text.trim().is_empty() {
            return Err(Error::Setup(format!("{container}:{path} is empty")));
        }
        Ok(text.trim().to_string())
    }

    fn labels(&self) -> Vec<String> {
        vec![
            "--label".into(),
            format!("{LABEL_RUN}={}", self.run),
            "--label".into(),
            format!("{LABEL_PID}={}", std::process::id()),
        ]
    }

    /// Starts a server container: bootstrap when `join` is None, else
    /// `--join` that member with the server token. A restart (`docker
    /// start`) runs the same command, which resumes from the data dir.
    fn new_server_container(&mut self, join: Option<&str>) -> Result<Server> {
        let n = self.servers.len() + self.removed.len() + 1;
        let server = Server {
            name: format!("tb-{}-s{n}", self.run),
            ip: self.next_ip()?,
            id: 0,
        };
        let mut args: Vec<String> = vec!["run".into(), "-d".into()];
        args.extend(self.labels());
        args.extend(
            [
                "--name",
                &server.name,
                "--hostname",
                &server.name,
                "--network",
                &self.network,
                "--ip",
                &server.ip,
                "-e",
                &format!("DROVER_LOG={}", self.opts.log),
            ]
            .map(String::from),
        );
        if join.is_some() {
            args.extend([
                "-e".to_string(),
                format!("DROVER_TOKEN={}", self.server_token),
            ]);
        }
        args.extend(
            [
                &self.image,
                "server",
                "--data-dir",
                "/data",
                "--listen",
                &format!("0.0.0.0:{PORT}"),
                "--http",
                "0.0.0.0:7680",
                "--advertise",
                &server.addr(),
                "--snapshot-every",
                &self.opts.snapshot_every.to_string(),
                "--keep-entries",
                &self.opts.keep_entries.to_string(),
            ]
            .map(String::from),
        );
        if let Some(j) = join {
            args.extend(["--join".to_string(), j.to_string()]);
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        docker(&refs)?;
        Ok(server)
    }

    /// Starts an agent container (simulated runtime, or the host's Docker
    /// engine through its socket; its data dir in the container: a restart
    /// keeps the node's certificate and pods).
    fn run_agent(&self, agent: &Agent) -> Result<()> {
        let servers: Vec<String> = self.servers.iter().map(Server::addr).collect();
        let mut args: Vec<String> = vec!["run".into(), "-d".into()];
        args.extend(self.labels());
        if agent.docker {
            let socket = engine_socket();
            args.extend(["-v".to_string(), format!("{socket}:/var/run/docker.sock")]);
        }
        let runtime = if agent.docker { "docker" } else { "sim" };
        args.extend(
            [
                "--name",
                &agent.name,
                "--hostname",
                &agent.name,
                "--network",
                &self.network,
                "--ip",
                &agent.ip,
                "-e",
                &format!("DROVER_LOG={}", self.opts.log),
                "-e",
                &format!("DROVER_TOKEN={}", self.node_token),
                &self.image,
                "agent",
                "--runtime",
                runtime,
                "--data-dir",
                "/data",
                "--name",
                &agent.name,
                "--server",
                &servers.join(","),
            ]
            .map(String::from),
        );
        if agent.edge {
            args.extend(["--label".to_string(), "tb/edge=true".to_string()]);
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        docker(&refs)?;
        Ok(())
    }

    /// Waits until `server` answers its status as a voter of the cluster,
    /// and returns its raft id.
    async fn wait_member(&self, server: &Server) -> Result<u64> {
        let single = self.single(&server.addr())?;
        poll(
            &format!("{} to serve as a voter", server.name),
            Duration::from_secs(60),
            Duration::from_millis(100),
            || {
                let single = single.clone();
                async move {
                    let s = single.status().await.ok()?;
                    let me = s.members.iter().find(|m| m.id == s.id)?;
                    (!me.learner && !me.removed && s.leader != 0).then_some(s.id)
                }
            },
        )
        .await
    }

    /// Adds a member: a new container that joins a current member.
    pub async fn add_server(&mut self) -> Result<Server> {
        let target = self
            .servers
            .first()
            .map(Server::addr)
            .ok_or_else(|| Error::Setup("no member to join".into()))?;
        let mut s = self.new_server_container(Some(&target))?;
        s.id = self.wait_member(&s).await?;
        self.servers.push(s.clone());
        self.client_cfg.servers = self.servers.iter().map(Server::addr).collect();
        Ok(s)
    }

    /// Removes `id` from the cluster, then its container.
    pub async fn remove_server(&mut self, id: u64) -> Result<Server> {
        let Some(i) = self.servers.iter().position(|s| s.id == id) else {
            return Err(Error::Setup(format!("no member {id:016x}")));
        };
        let client = self.client()?;
        client.remove_member(id).await?;
        let s = self.servers.remove(i);
        self.client_cfg.servers = self.servers.iter().map(Server::addr).collect();
        docker(&["rm", "-f", "-v", &s.name])?;
        self.removed.push(s.clone());
        Ok(s)
    }

    /// The admin's client over the current members (6 s per call at most).
    pub fn client(&self) -> Result<Client> {
        let mut c = Client::new(&self.client_cfg)?;
        c.deadline = Duration::from_secs(6);
        Ok(c)
    }

    /// A client of one member only, no failover.
    pub fn single(&self, addr: &str) -> Result<Client> {
        Ok(Client::single(
            addr,
            &self.client_cfg.token,
            &self.client_cfg.ca,
        )?)
    }

    /// The leader's id as some member sees it (0: none known).
    pub async fn leader(&self) -> u64 {
        for s in &self.servers {
            if let Ok(c) = self.single(&s.addr()) {
                if let Ok(st) = c.status().await {
                    if st.leader != 0 {
                        return st.leader;
                    }
                }
            }
        }
        0
    }

    // The nemeses' actions.

    pub fn kill(&self, container: &str) -> Result<()> {
        docker(&["kill", "-s", "KILL", container]).map(drop)
    }

    pub fn start_again(&self, container: &str) -> Result<()> {
        docker(&["start", container]).map(drop)
    }

    pub fn pause(&self, container: &str) -> Result<()> {
        docker(&["pause", container]).map(drop)
    }

    pub fn unpause(&self, container: &str) -> Result<()> {
        docker(&["unpause", container]).map(drop)
    }

    /// Cuts a container from the network (and so from everyone).
    pub fn disconnect(&self, container: &str) -> Result<()> {
        docker(&["network", "disconnect", "-f", &self.network, container]).map(drop)
    }

    /// Connects it again, at its old address.
    pub fn connect(&self, container: &str, ip: &str) -> Result<()> {
        docker(&["network", "connect", "--ip", ip, &self.network, container]).map(drop)
    }

    /// Every container of the run, servers removed or not yet joined included.
    fn containers(&self) -> Vec<String> {
        let filter = format!("label={LABEL_RUN}={}", self.run);
        docker(&["ps", "-a", "--filter", &filter, "--format", "{{.Names}}"])
            .map(|o| o.lines().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// The last lines of every container's log (for a failure's report).
    pub fn logs_tail(&self, lines: usize) -> String {
        let mut out = String::new();
        let mut names = self.containers();
        names.sort();
        for name in names {
            let r = std::process::Command::new("docker")
                .args(["logs", "--tail", &lines.to_string(), &name])
                .output();
            out.push_str(&format!("===== {name}\n"));
            if let Ok(o) = r {
                out.push_str(&String::from_utf8_lossy(&o.stdout));
                out.push_str(&String::from_utf8_lossy(&o.stderr));
            }
        }
        out
    }

    /// Writes every container's whole log to `dir/<container>.log`.
    pub fn save_logs(&self, dir: &std::path::Path) -> Result<()> {
        std::fs::create_dir_all(dir)?;
        for name in self.containers() {
            let o = std::process::Command::new("docker")
                .args(["logs", "-t", &name])
                .output()?;
            let mut text = o.stdout;
            text.extend_from_slice(&o.stderr);
            std::fs::write(dir.join(format!("{name}.log")), text)?;
        }
        Ok(())
    }
}
