//! What both clusters share: member processes, free loopback ports, the
//! `/health` probe (HTTPS to a member that serves TLS, plain HTTP
//! otherwise), and the [`Cluster`] interface the benchmark drives.

use crate::target::Target;
use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::TlsConnector;

/// A 3-member cluster under test, as the benchmark sees it.
pub trait Cluster {
    /// `drover` or `etcd`: the prefix of every figure.
    fn name(&self) -> &'static str;
    /// Starts every member from an empty data dir; returns once all are
    /// healthy and a write succeeded.
    async fn bootstrap(&mut self) -> Result<()>;
    /// The member processes, in a fixed order.
    fn members(&mut self) -> &mut [Member];
    /// A fresh client (its own connection) that talks to member `i` only.
    fn target(&self, i: usize) -> Result<Target>;
    /// The index of the member that answers it is the leader.
    async fn leader(&self) -> Result<usize>;
}

/// One server process, started and restarted with known arguments; its
/// output goes to a log file. Dropping it kills the process.
pub struct Member {
    pub name: String,
    bin: PathBuf,
    /// Arguments of the first start (bootstrap or join).
    first_args: Vec<OsString>,
    /// Arguments of every later start (resume from the data dir).
    restart_args: Vec<OsString>,
    /// Environment variables removed before start.
    env_remove: Vec<String>,
    log: PathBuf,
    /// The HTTP address that answers `GET /health`; `None` until known
    /// (a drover member binds port 0 and records the port it got).
    pub health: Option<SocketAddr>,
    /// When set, `/health` is asked over HTTPS with this configuration (the
    /// certificate must name [`drover_pki::SERVER_NAME`]); plain HTTP else.
    health_tls: Option<Arc<ClientConfig>>,
    started: bool,
    child: Option<Child>,
}

impl Member {
    pub fn new(name: &str, bin: &Path, log: PathBuf, health: Option<SocketAddr>) -> Member {
        Member {
            name: name.to_string(),
            bin: bin.to_path_buf(),
            first_args: Vec::new(),
            restart_args: Vec::new(),
            env_remove: Vec::new(),
            log,
            health,
            health_tls: None,
            started: false,
            child: None,
        }
    }

    pub fn first_args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Member {
        self.first_args = args.into_iter().map(Into::into).collect();
        self
    }

    pub fn restart_args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Member {
        self.restart_args = args.into_iter().map(Into::into).collect();
        self
    }

    pub fn env_remove(mut self, vars: Vec<String>) -> Member {
        self.env_remove = vars;
        self
    }

    /// Asks `/health` over HTTPS with `tls` (see [`health_tls_config`]).
    pub fn health_tls(mut self, tls: Option<Arc<ClientConfig>>) -> Member {
        self.health_tls = tls;
        self
    }

    /// Same as [`Member::health_tls`], for a CA known only once the member
    /// runs (drover writes it at bootstrap).
    pub fn set_health_tls(&mut self, tls: Arc<ClientConfig>) {
        self.health_tls = Some(tls);
    }

    /// Sets the `/health` address, once the member recorded the port it
    /// bound.
    pub fn set_health(&mut self, addr: SocketAddr) {
        self.health = Some(addr);
    }

    /// Replaces the first-start arguments (for values known only once an
    /// earlier member serves, such as a join token).
    pub fn set_first_args<I: IntoIterator<Item = S>, S: Into<OsString>>(&mut self, args: I) {
        self.first_args = args.into_iter().map(Into::into).collect();
    }

    /// Starts the process: the first time with the first-start arguments,
    /// then with the restart arguments.
    pub fn start(&mut self) -> Result<()> {
        if self.child.is_some() {
            bail!("{} is already running", self.name);
        }
        let args = if self.started {
            &self.restart_args
        } else {
            &self.first_args
        };
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("cannot open {}", self.log.display()))?;
        let mut cmd = Command::new(&self.bin);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        for v in &self.env_remove {
            cmd.env_remove(v);
        }
        // SAFETY: prctl is async-signal-safe and touches no memory of the
        // parent. The child is SIGKILLed if the benchmark's spawning thread
        // dies, so no member outlives a benchmark killed without cleanup.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {} ({})", self.name, self.bin.display()))?;
        self.child = Some(child);
        self.started = true;
        Ok(())
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends SIGKILL without waiting (reap it later with [`Member::kill`]).
    pub fn sigkill(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
        }
    }

    /// Sends SIGKILL and reaps the process.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends SIGTERM and waits up to `grace` for the process to exit, then
    /// SIGKILLs it. Returns whether it exited on its own.
    pub async fn terminate(&mut self, grace: Duration) -> bool {
        let Some(mut c) = self.child.take() else {
            return true;
        };
        // SAFETY: kill(2) on the pid of a child we have not reaped yet.
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
        let end = Instant::now() + grace;
        while Instant::now() < end {
            if let Ok(Some(_)) = c.try_wait() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let _ = c.kill();
        let _ = c.wait();
        false
    }

    /// Checks the process is still running (reaping it if it exited).
    pub fn running(&mut self) -> bool {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => true,
            Some(_) => {
                self.child = None;
                false
            }
            None => false,
        }
    }

    /// Resident set size from `/proc/PID/status` (VmRSS), in KiB.
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    }

    /// `GET /health` answers 200 with `"health":"true"` (both etcd and
    /// drover answer so), over HTTPS when the member has a TLS config.
    /// False while the address is not known.
    pub async fn healthy(&self) -> bool {
        match self.health {
            Some(addr) => http_health(addr, self.health_tls.as_ref()).await,
            None => false,
        }
    }

    /// The last `n` lines of the member's log, for diagnostics.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.kill();
    }
}

/// User + system CPU time of a process, from `/proc/PID/stat`.
pub fn proc_cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the line, so the 12th and 13th here.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_secs_f64(ticks as f64 / hz as f64))
}

/// `n` distinct free TCP ports on 127.0.0.1 (bound together, then released),
/// for etcd only: its members must know each other's peer URLs before any
/// of them starts, and it does not report the ports it bound. drover's
/// members bind port 0 and record what they got (see `drover.rs`).
pub fn free_ports(n: usize) -> Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()
        .context("cannot bind a loopback port")?;
    listeners
        .iter()
        .map(|l| Ok(l.local_addr()?.port()))
        .collect()
}

/// The HTTPS configuration of the `/health` probe: trusts `ca_pem` only,
/// speaks HTTP/1.1 (ALPN `http/1.1`).
pub fn health_tls_config(ca_pem: &str) -> Result<Arc<ClientConfig>> {
    drover_pki::tls::https_client_config(ca_pem).context("the /health probe's TLS configuration")
}

/// One `GET /health` over HTTP/1.1, over TLS when `tls` is given (the
/// server name checked is [`drover_pki::SERVER_NAME`]), bounded to one
/// second in all (connect, handshake, request, response).
async fn http_health(addr: SocketAddr, tls: Option<&Arc<ClientConfig>>) -> bool {
    let probe = async {
        let tcp = TcpStream::connect(addr).await.ok()?;
        match tls {
            None => get_health(tcp, addr).await,
            Some(cfg) => {
                let name = ServerName::try_from(drover_pki::SERVER_NAME).ok()?;
                let s = TlsConnector::from(cfg.clone())
                    .connect(name, tcp)
                    .await
                    .ok()?;
                get_health(s, addr).await
            }
        }
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), probe).await,
        Ok(Some(true))
    )
}

/// Sends the request on `s` and judges the answer. The response is read
/// until the server closes; a TLS peer that closes without `close_notify`
/// ends the read with an error, so what arrived before it is judged.
async fn get_health<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, addr: SocketAddr) -> Option<bool> {
    let req = format!("GET /health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    s.flush().await.ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let ok = text.starts_with("HTTP/1.1 200") || text.starts_with("HTTP/1.0 200");
    Some(ok && text.replace(' ', "").contains("\"health\":\"true\""))
}

/// Polls `f` every 50 ms until it returns `Some`, or fails after `limit`.
pub async fn poll<T, F, Fut>(what: &str, limit: Duration, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if Instant::now() >= end {
            bail!("{what}: not within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until every running member answers `/health` with 200.
pub async fn all_healthy(members: &[Member], limit: Duration) -> Result<()> {
    poll("every member healthy", limit, || async {
        for m in members {
            if !m.healthy().await {
                return None;
            }
        }
        Some(())
    })
    .await
}
