//! etcd: a 3-member cluster of Debian's `etcd` (3.4) on loopback, started
//! as `../shared/anchors/etcd.sh` does; its client is `etcd_client.rs`.

use crate::cluster::{all_healthy, poll, Cluster, Member};
use crate::etcd_client::EtcdClient;
use crate::target::Target;
use anyhow::{bail, Context, Result};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Three etcd members with throw-away data dirs under one directory.
pub struct EtcdCluster {
    members: Vec<Member>,
    clients: Vec<SocketAddr>,
}

impl EtcdCluster {
    /// Lays out the members (nothing runs yet). `ports` holds 6 free ports:
    /// client URLs first, then peer URLs.
    pub fn new(bin: &Path, dir: &Path, ports: &[u16]) -> Result<EtcdCluster> {
        let clients: Vec<SocketAddr> = ports[..3]
            .iter()
            .map(|p| SocketAddr::from(([127, 0, 0, 1], *p)))
            .collect();
        let peers: Vec<String> = ports[3..6]
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}"))
            .collect();
        let initial = (0..3)
            .map(|i| format!("m{}={}", i + 1, peers[i]))
            .collect::<Vec<_>>()
            .join(",");
        // No ambient ETCD_* variable may configure the members.
        let ambient: Vec<String> = std::env::vars_os()
            .filter_map(|(k, _)| k.into_string().ok())
            .filter(|k| k.starts_with("ETCD_"))
            .collect();
        let mut members = Vec::new();
        for i in 0..3 {
            let name = format!("m{}", i + 1);
            let data: PathBuf = dir.join(&name);
            let url = format!("http://{}", clients[i]);
            let args: Vec<String> = vec![
                "--name".into(),
                name.clone(),
                "--data-dir".into(),
                data.display().to_string(),
                "--listen-client-urls".into(),
                url.clone(),
                "--advertise-client-urls".into(),
                url,
                "--listen-peer-urls".into(),
                peers[i].clone(),
                "--initial-advertise-peer-urls".into(),
                peers[i].clone(),
                "--initial-cluster".into(),
                initial.clone(),
                "--initial-cluster-token".into(),
                "drover-bench".into(),
                "--initial-cluster-state".into(),
                "new".into(),
                "--logger=zap".into(),
                "--log-outputs=stderr".into(),
            ];
            // etcd ignores the --initial-* flags once its data dir exists,
            // so a restart uses the same arguments.
            let m = Member::new(&name, bin, dir.join(format!("{name}.log")), clients[i])
                .first_args(args.clone())
                .restart_args(args)
                .env_remove(ambient.clone());
            members.push(m);
        }
        Ok(EtcdCluster { members, clients })
    }
}

impl Cluster for EtcdCluster {
    fn name(&self) -> &'static str {
        "etcd"
    }

    async fn bootstrap(&mut self) -> Result<()> {
        for m in &mut self.members {
            m.start()?;
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
        Ok(Target::Etcd(EtcdClient::connect_lazy(self.clients[i])?))
    }

    async fn leader(&self) -> Result<usize> {
        let leader = poll(
            "an etcd member that is the leader",
            Duration::from_secs(10),
            || async {
                for (i, a) in self.clients.iter().enumerate() {
                    let Ok(c) = EtcdClient::connect_lazy(*a) else {
                        continue;
                    };
                    if let Ok(Ok(s)) =
                        tokio::time::timeout(Duration::from_secs(2), c.status()).await
                    {
                        if s.header
                            .as_ref()
                            .is_some_and(|h| h.member_id == s.leader && s.leader != 0)
                        {
                            return Some(i);
                        }
                    }
                }
                None
            },
        )
        .await;
        leader.context("finding the etcd leader")
    }
}

/// Checks the etcd binary runs and returns its version line.
pub fn version(bin: &Path) -> Result<String> {
    let out = std::process::Command::new(bin)
        .arg("--version")
        .output()
        .with_context(|| {
            format!(
                "cannot run {} (apt-get install -y etcd-server etcd-client)",
                bin.display()
            )
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.lines().next() {
        Some(l) if out.status.success() => Ok(l.trim().to_string()),
        _ => bail!("{} --version failed", bin.display()),
    }
}
