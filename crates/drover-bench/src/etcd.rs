//! etcd: a 3-member cluster of Debian's `etcd` (3.4) on loopback, started
//! as `../shared/anchors/etcd.sh` does; its client is `etcd_client.rs`.
//!
//! With TLS (the default, as drover always runs it), client and peer URLs
//! are `https://`: a throw-away CA made here with `drover_pki::Ca` signs one
//! certificate per member (ECDSA P-256, server and client use, SANs
//! `drover-server`, `127.0.0.1`, `localhost`), used for both ports, and
//! the members are started with `--cert-file`/`--key-file` and
//! `--peer-cert-file`/`--peer-key-file`/`--peer-trusted-ca-file`/
//! `--peer-client-cert-auth` (peers prove who they are, as drover's
//! members do). Clients are not asked for a certificate, as drover lets
//! token holders in without one: etcd 3.4 then takes no
//! `--trusted-ca-file` (with it, it requires a client certificate even
//! without `--client-cert-auth`).

use crate::cluster::{all_healthy, health_tls_config, poll, Cluster, Member};
use crate::etcd_client::EtcdClient;
use crate::target::Target;
use anyhow::{bail, Context, Result};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio_rustls::rustls::ClientConfig;

/// Three etcd members with throw-away data dirs under one directory.
pub struct EtcdCluster {
    members: Vec<Member>,
    clients: Vec<SocketAddr>,
    /// The gRPC client's TLS (trusting the throw-away CA); `None`: plain.
    tls: Option<Arc<ClientConfig>>,
}

/// Makes the throw-away CA and one certificate per member under `dir`:
/// `ca.crt`, `mN.crt`, `mN.key`. Returns the CA (PEM).
fn make_certs(dir: &Path) -> Result<String> {
    let now = SystemTime::now();
    let ca = drover_pki::Ca::create("etcd-bench", now).context("making etcd's CA")?;
    std::fs::write(dir.join("ca.crt"), ca.cert_pem())?;
    let sans = ["127.0.0.1".to_string(), "localhost".to_string()];
    for i in 1..=3u64 {
        let (cert, key) = ca
            .issue(
                &drover_pki::Role::Member(i),
                &sans,
                Duration::from_secs(86_400),
                now,
            )
            .with_context(|| format!("making etcd member m{i}'s certificate"))?;
        std::fs::write(dir.join(format!("m{i}.crt")), cert.cert_pem)?;
        std::fs::write(dir.join(format!("m{i}.key")), key)?;
    }
    Ok(ca.cert_pem().to_string())
}

impl EtcdCluster {
    /// Lays out the members (nothing runs yet). `ports` holds 6 free ports:
    /// client URLs first, then peer URLs. With `tls`, both are HTTPS.
    pub fn new(bin: &Path, dir: &Path, ports: &[u16], tls: bool) -> Result<EtcdCluster> {
        let scheme = if tls { "https" } else { "http" };
        let ca = if tls { Some(make_certs(dir)?) } else { None };
        let health_tls = ca.as_deref().map(health_tls_config).transpose()?;
        let client_tls = ca
            .as_deref()
            .map(|c| drover_pki::tls::client_config(c, None))
            .transpose()
            .context("etcd's client TLS configuration")?;
        let clients: Vec<SocketAddr> = ports[..3]
            .iter()
            .map(|p| SocketAddr::from(([127, 0, 0, 1], *p)))
            .collect();
        let peers: Vec<String> = ports[3..6]
            .iter()
            .map(|p| format!("{scheme}://127.0.0.1:{p}"))
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
            let url = format!("{scheme}://{}", clients[i]);
            let mut args: Vec<String> = vec![
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
            if tls {
                let f = |n: String| dir.join(n).display().to_string();
                let (crt, key, ca) = (
                    f(format!("{name}.crt")),
                    f(format!("{name}.key")),
                    f("ca.crt".into()),
                );
                args.extend([
                    "--cert-file".into(),
                    crt.clone(),
                    "--key-file".into(),
                    key.clone(),
                    "--peer-cert-file".into(),
                    crt,
                    "--peer-key-file".into(),
                    key,
                    "--peer-trusted-ca-file".into(),
                    ca,
                    "--peer-client-cert-auth".into(),
                ]);
            }
            // etcd ignores the --initial-* flags once its data dir exists,
            // so a restart uses the same arguments.
            let m = Member::new(
                &name,
                bin,
                dir.join(format!("{name}.log")),
                Some(clients[i]),
            )
            .first_args(args.clone())
            .restart_args(args)
            .env_remove(ambient.clone())
            .health_tls(health_tls.clone());
            members.push(m);
        }
        Ok(EtcdCluster {
            members,
            clients,
            tls: client_tls,
        })
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
        Ok(Target::Etcd(EtcdClient::connect_lazy(
            self.clients[i],
            self.tls.clone(),
        )?))
    }

    async fn leader(&self) -> Result<usize> {
        let leader = poll(
            "an etcd member that is the leader",
            Duration::from_secs(10),
            || async {
                for (i, a) in self.clients.iter().enumerate() {
                    let Ok(c) = EtcdClient::connect_lazy(*a, self.tls.clone()) else {
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
