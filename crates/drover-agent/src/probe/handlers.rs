//! The handlers of probes and hooks: `exec` through [`Runtime::exec`],
//! `httpGet` (a minimal HTTP/1.1 GET: success for a status in 200..=399;
//! `HTTPS` refused by name), `tcpSocket` (connect), and the
//! `lifecycle.preStop` hook; see the parent module.

use super::{Outcome, Timing};
use crate::runtime::{ContainerInfo, Runtime};
use drover_api::{
    Container, ContainerPort, HttpGetAction, HttpHeader, IntOrString, LifecycleHandler, Pod, Probe,
    UriScheme,
};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Where the probes and hooks of one container instance go.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The runtime's id of the instance (for exec).
    pub container_id: String,
    /// The container's name (for messages).
    pub container: String,
    /// The default host of httpGet and tcpSocket: the pod's IP, or the
    /// node's for a `hostNetwork` pod; empty when the runtime gave none.
    pub ip: String,
    /// The container's ports (for ports given by name).
    pub ports: Vec<ContainerPort>,
}

impl Target {
    /// The target of container `spec` of `pod`, running as `info`, on a
    /// node whose IP is `host_ip`.
    pub fn of(pod: &Pod, spec: &Container, info: &ContainerInfo, host_ip: &str) -> Target {
        let ip = if pod.spec.host_network {
            host_ip.to_string()
        } else {
            info.pod_ip.clone().unwrap_or_default()
        };
        Target {
            container_id: info.id.clone(),
            container: spec.name.clone(),
            ip,
            ports: spec.ports.clone(),
        }
    }

    /// A port given by number or by the name of one of the container's
    /// ports.
    pub fn port(&self, port: &IntOrString) -> Result<u16, String> {
        match port {
            IntOrString::Int(n) => u16::try_from(*n)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("port {n} is not a valid port number")),
            IntOrString::String(s) => {
                if let Ok(n) = s.parse::<u16>() {
                    if n > 0 {
                        return Ok(n);
                    }
                }
                self.ports
                    .iter()
                    .find(|p| p.name == *s)
                    .and_then(|p| u16::try_from(p.container_port).ok())
                    .ok_or_else(|| {
                        format!(
                            "port {s:?} is not the name of a port of container {:?} (ports[].name)",
                            self.container
                        )
                    })
            }
        }
    }

    fn host<'a>(&'a self, host: &'a str) -> Result<&'a str, String> {
        let h = if host.is_empty() {
            self.ip.as_str()
        } else {
            host
        };
        if h.is_empty() {
            Err("the pod has no IP yet to probe".into())
        } else {
            Ok(h)
        }
    }
}

/// The output a failed exec shows at most, in messages.
const MAX_MESSAGE: usize = 256;

fn snippet(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    let s = s.trim();
    if s.len() <= MAX_MESSAGE {
        return s.to_string();
    }
    let mut end = MAX_MESSAGE;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Runs `cmd` in the container through the runtime, at most `timeout`.
async fn exec<R: Runtime>(
    rt: &R,
    t: &Target,
    cmd: &[String],
    timeout: Duration,
) -> (Outcome, String) {
    if cmd.is_empty() {
        return (Outcome::Failure, "exec.command is empty".into());
    }
    // The runtime bounds the command itself; this bounds a runtime that
    // does not answer.
    let work = rt.exec(&t.container_id, cmd.to_vec(), timeout);
    match tokio::time::timeout(timeout + Duration::from_secs(1), work).await {
        Ok(Ok(out)) if out.exit_code == 0 => (Outcome::Success, String::new()),
        Ok(Ok(out)) if out.exit_code < 0 => (
            Outcome::Failure,
            format!("command {cmd:?} timed out after {timeout:?}"),
        ),
        Ok(Ok(out)) => (
            Outcome::Failure,
            format!(
                "command {cmd:?} exited with {}: {}",
                out.exit_code,
                snippet(&out.output)
            ),
        ),
        Ok(Err(e)) => (Outcome::Failure, format!("command {cmd:?}: {e}")),
        Err(_) => (
            Outcome::Failure,
            format!("command {cmd:?} timed out after {timeout:?}"),
        ),
    }
}

/// `host:port` for a Host header or a message (IPv6 in brackets).
fn authority(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// A minimal HTTP/1.1 GET: answers the response's status code.
async fn get_status(
    host: &str,
    port: u16,
    path: &str,
    headers: &[HttpHeader],
) -> Result<u16, String> {
    let addr = authority(host, port);
    let host_for_connect = host.trim_start_matches('[').trim_end_matches(']');
    let mut stream = TcpStream::connect((host_for_connect, port))
        .await
        .map_err(|e| format!("GET http://{addr}{path}: cannot connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    let mut req = format!("GET {path} HTTP/1.1\r\n");
    if !headers.iter().any(|h| h.name.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    if !headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("user-agent"))
    {
        req.push_str(&format!(
            "User-Agent: kube-probe/drover-{}\r\n",
            crate::VERSION
        ));
    }
    if !headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("accept"))
    {
        req.push_str("Accept: */*\r\n");
    }
    for h in headers {
        // A header that would break the request line is not sent.
        if h.name.is_empty() || h.name.contains(['\r', '\n', ':']) || h.value.contains(['\r', '\n'])
        {
            continue;
        }
        req.push_str(&format!("{}: {}\r\n", h.name, h.value));
    }
    req.push_str("Connection: close\r\n\r\n");
    stream
        .write_all(req.as_bytes())
        .await
        .map_err(|e| format!("GET http://{addr}{path}: {e}"))?;
    // Only the status line matters.
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 256];
    let line_end = loop {
        if let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
            break i;
        }
        if buf.len() > 4096 {
            return Err(format!("GET http://{addr}{path}: no HTTP status line"));
        }
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| format!("GET http://{addr}{path}: {e}"))?;
        if n == 0 {
            return Err(format!(
                "GET http://{addr}{path}: the connection closed before a response"
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let line = String::from_utf8_lossy(&buf[..line_end]);
    let mut parts = line.split_whitespace();
    let version = parts.next().unwrap_or_default();
    let code = parts.next().and_then(|c| c.parse::<u16>().ok());
    match code {
        Some(code) if version.starts_with("HTTP/") => Ok(code),
        _ => Err(format!(
            "GET http://{addr}{path}: not an HTTP response: {line:?}"
        )),
    }
}

/// An httpGet action: success for a status in 200..=399.
async fn http_get(t: &Target, h: &HttpGetAction, timeout: Duration) -> (Outcome, String) {
    if h.scheme == Some(UriScheme::Https) {
        return (
            Outcome::Failure,
            "httpGet.scheme HTTPS is not supported by drover's prober: use HTTP, a tcpSocket or an exec probe".into(),
        );
    }
    let host = match t.host(&h.host) {
        Ok(h) => h,
        Err(e) => return (Outcome::Failure, e),
    };
    let port = match t.port(&h.port) {
        Ok(p) => p,
        Err(e) => return (Outcome::Failure, format!("httpGet.port: {e}")),
    };
    let path = if h.path.starts_with('/') {
        h.path.clone()
    } else {
        format!("/{}", h.path)
    };
    match tokio::time::timeout(timeout, get_status(host, port, &path, &h.http_headers)).await {
        Ok(Ok(code)) if (200..400).contains(&code) => (Outcome::Success, String::new()),
        Ok(Ok(code)) => (
            Outcome::Failure,
            format!("HTTP probe failed with statuscode: {code}"),
        ),
        Ok(Err(e)) => (Outcome::Failure, e),
        Err(_) => (
            Outcome::Failure,
            format!(
                "GET http://{}{path}: no response within {timeout:?}",
                authority(host, port)
            ),
        ),
    }
}

/// A tcpSocket action: success when a connection opens.
async fn tcp_socket(
    t: &Target,
    host: &str,
    port: &IntOrString,
    timeout: Duration,
) -> (Outcome, String) {
    let host = match t.host(host) {
        Ok(h) => h.trim_start_matches('[').trim_end_matches(']').to_string(),
        Err(e) => return (Outcome::Failure, e),
    };
    let port = match t.port(port) {
        Ok(p) => p,
        Err(e) => return (Outcome::Failure, format!("tcpSocket.port: {e}")),
    };
    match tokio::time::timeout(timeout, TcpStream::connect((host.as_str(), port))).await {
        Ok(Ok(_)) => (Outcome::Success, String::new()),
        Ok(Err(e)) => (
            Outcome::Failure,
            format!("dial tcp {}: {e}", authority(&host, port)),
        ),
        Err(_) => (
            Outcome::Failure,
            format!("dial tcp {}: i/o timeout", authority(&host, port)),
        ),
    }
}

/// Runs probe `p` once against `t`, bounded by its `timeoutSeconds`.
pub async fn probe_once<R: Runtime>(rt: &R, t: &Target, p: &Probe) -> (Outcome, String) {
    let timeout = Timing::of(p).timeout;
    if let Some(e) = &p.exec {
        exec(rt, t, &e.command, timeout).await
    } else if let Some(h) = &p.http_get {
        http_get(t, h, timeout).await
    } else if let Some(s) = &p.tcp_socket {
        tcp_socket(t, &s.host, &s.port, timeout).await
    } else {
        (
            Outcome::Failure,
            "the probe has no handler (exec, httpGet or tcpSocket)".into(),
        )
    }
}

// ------------------------------------------------------------ preStop

/// The least time the stop signal gets after a preStop hook, however long
/// the hook took (the kubelet's 2 s).
pub const MIN_GRACE_AFTER_HOOK: Duration = Duration::from_secs(2);

/// The grace period left for the stop signal after a hook took `spent`.
pub fn remaining_grace(grace: Duration, spent: Duration) -> Duration {
    grace.saturating_sub(spent).max(MIN_GRACE_AFTER_HOOK)
}

/// Runs a container's `lifecycle.preStop` hook, for at most `grace`;
/// answers how long it took. A hook that fails or overruns is logged, and
/// the container is stopped anyway, as the kubelet does.
pub async fn pre_stop<R: Runtime>(
    rt: &R,
    t: &Target,
    hook: &LifecycleHandler,
    grace: Duration,
) -> Duration {
    let start = Instant::now();
    let work = async {
        let (outcome, message) = if let Some(e) = &hook.exec {
            exec(rt, t, &e.command, grace).await
        } else if let Some(h) = &hook.http_get {
            http_get(t, h, grace).await
        } else if let Some(s) = &hook.sleep {
            let secs = u64::try_from(s.seconds).unwrap_or(0);
            tokio::time::sleep(Duration::from_secs(secs)).await;
            (Outcome::Success, String::new())
        } else if hook.tcp_socket.is_some() {
            (
                Outcome::Failure,
                "lifecycle.preStop.tcpSocket is not supported (as in Kubernetes): use exec, httpGet or sleep".into(),
            )
        } else {
            (Outcome::Success, String::new())
        };
        if outcome == Outcome::Failure {
            tracing::warn!(container = %t.container, "lifecycle.preStop hook failed: {message}");
        }
    };
    if tokio::time::timeout(grace, work).await.is_err() {
        tracing::warn!(
            container = %t.container,
            "lifecycle.preStop hook still running after the grace period ({grace:?}): stopping the container anyway"
        );
    }
    start.elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::{ExecAction, TcpSocketAction};
    use tokio::sync::mpsc;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn exec_probe() -> Probe {
        Probe {
            exec: Some(ExecAction {
                command: vec!["true".into()],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn target(ip: &str) -> Target {
        Target {
            container_id: "x".into(),
            container: "c".into(),
            ip: ip.into(),
            ports: vec![ContainerPort {
                name: "http".into(),
                container_port: 8080,
                ..Default::default()
            }],
        }
    }

    #[test]
    fn ports_by_number_or_name() {
        let t = target("127.0.0.1");
        assert_eq!(t.port(&IntOrString::Int(80)), Ok(80));
        assert_eq!(t.port(&IntOrString::String("http".into())), Ok(8080));
        assert_eq!(t.port(&IntOrString::String("81".into())), Ok(81));
        let e = t.port(&IntOrString::String("metrics".into())).unwrap_err();
        assert!(
            e.contains("\"metrics\"") && e.contains("container \"c\""),
            "{e}"
        );
        assert!(t.port(&IntOrString::Int(0)).is_err());
        assert!(t.port(&IntOrString::Int(70000)).is_err());
        assert_eq!(authority("::1", 80), "[::1]:80");
    }

    /// A one-shot HTTP server: answers every connection with `status`,
    /// and hands back the requests it read.
    async fn http_server(status: u16) -> (u16, mpsc::UnboundedReceiver<String>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = tx.send(String::from_utf8_lossy(&got).to_string());
                let resp = format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n");
                let _ = s.write_all(resp.as_bytes()).await;
            }
        });
        (port, rx)
    }

    fn http(port: IntOrString, path: &str) -> Probe {
        Probe {
            http_get: Some(HttpGetAction {
                port,
                path: path.into(),
                http_headers: vec![HttpHeader {
                    name: "X-Probe".into(),
                    value: "yes".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    struct NoExec;
    impl Runtime for NoExec {
        fn version(&self) -> String {
            "none://".into()
        }
        async fn list(&self) -> Result<Vec<ContainerInfo>, crate::RuntimeError> {
            Ok(Vec::new())
        }
        async fn start(&self, _: crate::StartContainer) -> Result<(), crate::RuntimeError> {
            Ok(())
        }
        async fn remove(&self, _: &str, _: Duration) -> Result<(), crate::RuntimeError> {
            Ok(())
        }
        async fn remove_pod(&self, _: &str, _: Duration) -> Result<(), crate::RuntimeError> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn http_get_succeeds_on_2xx_3xx_and_fails_otherwise() {
        for (status, want) in [
            (200, Outcome::Success),
            (302, Outcome::Success),
            (500, Outcome::Failure),
            (404, Outcome::Failure),
        ] {
            let (port, mut reqs) = http_server(status).await;
            let p = http(IntOrString::Int(i32::from(port)), "healthz");
            let (o, msg) = probe_once(&NoExec, &target("127.0.0.1"), &p).await;
            assert_eq!(o, want, "status {status}: {msg}");
            if want == Outcome::Failure {
                assert_eq!(msg, format!("HTTP probe failed with statuscode: {status}"));
            }
            let req = reqs.recv().await.unwrap();
            assert!(req.starts_with("GET /healthz HTTP/1.1\r\n"), "{req}");
            assert!(
                req.contains(&format!("Host: 127.0.0.1:{port}\r\n")),
                "{req}"
            );
            assert!(req.contains("X-Probe: yes\r\n"), "{req}");
        }
        // By port name, on a host given in the probe.
        let (port, _reqs) = http_server(204).await;
        let mut t = target("");
        t.ports[0].container_port = i32::from(port);
        let mut p = http(IntOrString::String("http".into()), "/");
        assert_eq!(
            probe_once(&NoExec, &t, &p).await.0,
            Outcome::Failure,
            "no pod IP"
        );
        p.http_get.as_mut().unwrap().host = "127.0.0.1".into();
        assert_eq!(probe_once(&NoExec, &t, &p).await.0, Outcome::Success);
        // HTTPS is refused by name.
        p.http_get.as_mut().unwrap().scheme = Some(UriScheme::Https);
        let (o, msg) = probe_once(&NoExec, &t, &p).await;
        assert_eq!(o, Outcome::Failure);
        assert!(msg.contains("HTTPS is not supported"), "{msg}");
    }

    #[tokio::test]
    async fn http_get_and_tcp_fail_on_a_closed_port_or_a_silent_server() {
        // Bound and never listening, held for the whole test: refused, and
        // nothing else can take the port meanwhile.
        let held = tokio::net::TcpSocket::new_v4().unwrap();
        held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let closed = held.local_addr().unwrap().port();
        let p = http(IntOrString::Int(i32::from(closed)), "/");
        let (o, msg) = probe_once(&NoExec, &target("127.0.0.1"), &p).await;
        assert_eq!(o, Outcome::Failure);
        assert!(msg.contains("cannot connect"), "{msg}");
        let tcp = |port: u16| Probe {
            tcp_socket: Some(TcpSocketAction {
                port: IntOrString::Int(i32::from(port)),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            probe_once(&NoExec, &target("127.0.0.1"), &tcp(closed))
                .await
                .0,
            Outcome::Failure
        );
        // A server that accepts but never answers: the timeout (1 s) decides.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = silent.local_addr().unwrap().port();
        assert_eq!(
            probe_once(&NoExec, &target("127.0.0.1"), &tcp(port))
                .await
                .0,
            Outcome::Success
        );
        let t = std::time::Instant::now();
        let (o, msg) = probe_once(
            &NoExec,
            &target("127.0.0.1"),
            &http(IntOrString::Int(i32::from(port)), "/"),
        )
        .await;
        assert_eq!(o, Outcome::Failure);
        assert!(msg.contains("no response within"), "{msg}");
        assert!(t.elapsed() < secs(3));
        drop(silent);
        drop(held);
    }

    #[tokio::test]
    async fn exec_needs_a_runtime_that_can() {
        let (o, msg) = probe_once(&NoExec, &target("127.0.0.1"), &exec_probe()).await;
        assert_eq!(o, Outcome::Failure);
        assert!(msg.contains("ExecNotSupported"), "{msg}");
        assert_eq!(remaining_grace(secs(30), secs(5)), secs(25));
        assert_eq!(remaining_grace(secs(3), secs(5)), MIN_GRACE_AFTER_HOOK);
    }
}
