//! Free loopback ports, for servers that must be given a port up front
//! (child processes; in-process servers bind port 0 instead, see
//! [`crate::loopback_options`]).

use std::net::TcpListener;

/// A free loopback port (the listener that found it is closed again).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `n` distinct free loopback ports. The listeners are held until all ports
/// are chosen so that no port is picked twice; the server binds with
/// SO_REUSEADDR.
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("local addr").port())
        .collect()
}

/// `GET path` over HTTPS (HTTP/1.1) on `addr`, trusting the cluster CA
/// `ca` (PEM), with `authorization: Bearer token` when given: the status
/// code and the body, or `None` when it does not answer within 2 s.
pub async fn https_get(
    addr: &str,
    path: &str,
    ca: &str,
    token: Option<&str>,
) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let attempt = async {
        let tls = drover_pki::tls::https_client_config(ca).ok()?;
        let tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
        let name = rustls::pki_types::ServerName::try_from(drover_pki::SERVER_NAME).ok()?;
        let mut s = tokio_rustls::TlsConnector::from(tls)
            .connect(name, tcp)
            .await
            .ok()?;
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        // A TLS peer may close without close_notify: keep what came.
        let _ = s.read_to_end(&mut buf).await;
        let text = String::from_utf8_lossy(&buf).to_string();
        let code = text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()?;
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        Some((code, body))
    };
    tokio::time::timeout(std::time::Duration::from_secs(2), attempt)
        .await
        .ok()
        .flatten()
}
