//! drover: a 3-member cluster of the release binary on loopback. The first
//! member bootstraps, the others `--join` it with its server token; restarts
//! resume from the data dir with `--data-dir` alone. Every port speaks TLS
//! 1.3: the client and the `/health` probe (HTTPS) trust the cluster CA
//! that the first member writes to DATA_DIR/ca.crt.
//!
//! Every member first starts with `--listen 127.0.0.1:0 --http
//! 127.0.0.1:0`: it binds port 0 and records the ports it got in
//! DATA_DIR/server.json, where the benchmark reads them (as the tests do);
//! a restart from the data dir binds them again.

use crate::cluster::{all_healthy, health_tls_config, poll, Cluster, Member};
use crate::target::Target;
use anyhow::{Context, Result};
use drover_cli::{Client, ClientConfig};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct DroverCluster {
    members: Vec<Member>,
    /// gRPC address of each member (empty until it recorded it).
    grpc: Vec<String>,
    /// Data dir of each member.
    dirs: Vec<PathBuf>,
    /// The admin token, known once the first member serves.
    token: String,
    /// The cluster CA (PEM), from the first member's client.yaml.
    ca: String,
}

impl DroverCluster {
    /// Lays out the members (nothing runs yet).
    pub fn new(bin: &Path, dir: &Path) -> DroverCluster {
        let mut members = Vec::new();
        let mut dirs = Vec::new();
        for i in 0..3 {
            let name = format!("m{}", i + 1);
            let data = dir.join(&name);
            let d = data.display().to_string();
            let first = [
                "server".to_string(),
                "--data-dir".into(),
                d.clone(),
                "--listen".into(),
                LOOPBACK_0.into(),
                "--http".into(),
                LOOPBACK_0.into(),
            ];
            let m = Member::new(&name, bin, dir.join(format!("{name}.log")), None)
                .first_args(first)
                .restart_args(["server", "--data-dir", &d]);
            members.push(m);
            dirs.push(data);
        }
        DroverCluster {
            members,
            grpc: vec![String::new(); 3],
            dirs,
            token: String::new(),
            ca: String::new(),
        }
    }

    /// Waits until member `i` recorded the ports it bound
    /// (DATA_DIR/server.json, written whole before it serves) and takes
    /// them.
    async fn learn_addrs(&mut self, i: usize) -> Result<()> {
        let path = self.dirs[i].join("server.json");
        let (grpc, http) = poll(
            &format!("the addresses in {}", path.display()),
            Duration::from_secs(30),
            || async { recorded_addrs(&path) },
        )
        .await?;
        self.grpc[i] = grpc;
        self.members[i].set_health(http);
        Ok(())
    }

    /// Waits until member `i`'s view of the cluster has `n` voters.
    async fn wait_voters(&self, i: usize, n: usize) -> Result<()> {
        let c = Client::single(&self.grpc[i], &self.token, &self.ca)?;
        poll(
            &format!("{n} voting drover members"),
            Duration::from_secs(60),
            || async {
                let s = c.status().await.ok()?;
                let voters = s
                    .members
                    .iter()
                    .filter(|m| !m.learner && !m.removed)
                    .count();
                (voters >= n).then_some(())
            },
        )
        .await
    }
}

/// What every member binds first: loopback, a port the kernel picks.
const LOOPBACK_0: &str = "127.0.0.1:0";

/// The gRPC and HTTP addresses recorded in a member's server.json (fields
/// `addr` and `http`), or `None` while it has not written one.
fn recorded_addrs(path: &Path) -> Option<(String, SocketAddr)> {
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let grpc = v.get("addr")?.as_str()?.to_string();
    let http = v.get("http")?.as_str()?.parse().ok()?;
    Some((grpc, http))
}

impl Cluster for DroverCluster {
    fn name(&self) -> &'static str {
        "drover"
    }

    async fn bootstrap(&mut self) -> Result<()> {
        self.members[0].start()?;
        self.learn_addrs(0).await?;
        let d1 = self.dirs[0].clone();
        let cfg = poll(
            "the first member's client.yaml",
            Duration::from_secs(30),
            || async { ClientConfig::load(&d1.join("client.yaml")).ok() },
        )
        .await?;
        self.token = cfg.token;
        self.ca = cfg.ca;
        // The HTTP port is HTTPS, its certificate signed by the cluster CA
        // (the same CA for the members that join).
        let ca_crt = poll(
            "the first member's ca.crt",
            Duration::from_secs(30),
            || async { std::fs::read_to_string(d1.join("ca.crt")).ok() },
        )
        .await?;
        let tls = health_tls_config(&ca_crt)?;
        for m in &mut self.members {
            m.set_health_tls(tls.clone());
        }
        let server_token = std::fs::read_to_string(d1.join("server-token"))
            .context("reading the first member's server-token")?
            .trim()
            .to_string();
        all_healthy(&self.members[..1], Duration::from_secs(30)).await?;
        // Members join one at a time (learner, then voter).
        for i in 1..3 {
            let mut args = vec![
                "server".to_string(),
                "--data-dir".into(),
                self.dirs[i].display().to_string(),
                "--listen".into(),
                LOOPBACK_0.into(),
                "--http".into(),
                LOOPBACK_0.into(),
                "--join".into(),
                self.grpc[0].clone(),
            ];
            args.extend(["--token".to_string(), server_token.clone()]);
            self.members[i].set_first_args(args);
            self.members[i].start()?;
            self.learn_addrs(i).await?;
            self.wait_voters(0, i + 1).await?;
        }
        all_healthy(&self.members, Duration::from_secs(30)).await?;
        let t = self.target(0)?;
        let v = crate::workload::value(8);
        poll("a first put", Duration::from_secs(10), || async {
            t.put("bench/ready", &v).await.ok()
        })
        .await
    }

    fn members(&mut self) -> &mut [Member] {
        &mut self.members
    }

    fn target(&self, i: usize) -> Result<Target> {
        Ok(Target::Drover(Client::single(
            &self.grpc[i],
            &self.token,
            &self.ca,
        )?))
    }

    async fn leader(&self) -> Result<usize> {
        let leader = poll(
            "a drover member that is the leader",
            Duration::from_secs(10),
            || async {
                for (i, a) in self.grpc.iter().enumerate() {
                    let Ok(c) = Client::single(a, &self.token, &self.ca) else {
                        continue;
                    };
                    if let Ok(Ok(s)) =
                        tokio::time::timeout(Duration::from_secs(2), c.status()).await
                    {
                        if s.role == "leader" {
                            return Some(i);
                        }
                    }
                }
                None
            },
        )
        .await;
        leader.context("finding the drover leader")
    }
}
