//! Addresses for tests that cannot let a server bind port 0 itself: a
//! loopback address where nothing listens (and nothing can start to while
//! the test holds it), and a host port for a container; and a small HTTPS
//! `GET`. Servers, in-process ([`crate::loopback_options`]) or as child
//! processes ([`crate::member_addrs`]), bind port 0 and report the port they
//! got.

use std::net::{SocketAddr, TcpListener};

/// A loopback address where nothing listens, reserved for as long as the
/// returned socket lives: the socket is bound (without `SO_REUSEADDR`) and
/// never listens, so the kernel refuses every connection to it (RST) and no
/// other socket, listening or connecting, can take its port meanwhile. (A
/// listener that never accepts would complete the handshake instead; a port
/// found free and released again may be taken by anyone before it is used.)
pub fn refusing_port() -> (tokio::net::TcpSocket, SocketAddr) {
    let s = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
    s.bind("127.0.0.1:0".parse().expect("an address"))
        .expect("bind an ephemeral port");
    let addr = s.local_addr().expect("local addr");
    (s, addr)
}

/// A port of this machine for a container's `hostPort`, which the container
/// engine binds on every interface: a port free on `0.0.0.0` outside the
/// kernel's ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`), so
/// that no outgoing connection takes it before the engine binds it; only a
/// process binding that very port explicitly could. Nothing can hold it for
/// the engine, so it is released when returned: tried from a point that
/// differs per process, so parallel test binaries start apart.
pub fn host_port() -> u16 {
    let (low, _) = ephemeral_range();
    // Below the ephemeral range and above the well-known ports (1024..).
    let (first, last) = (10_000u16, low.saturating_sub(1).max(10_001));
    let span = u32::from(last - first) + 1;
    let start = (std::process::id() * 7919) % span;
    (0..span)
        .map(|i| first + ((start + i) % span) as u16)
        .find(|p| TcpListener::bind(("0.0.0.0", *p)).is_ok())
        .expect("a free port below the ephemeral range")
}

/// The kernel's ephemeral port range (Linux's default when it cannot be
/// read).
fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| {
            let mut it = t.split_whitespace().map(|x| x.parse::<u16>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((32768, 60999))
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
    let r = HttpsRequest {
        method: "GET",
        path,
        token,
        ..Default::default()
    };
    tokio::time::timeout(std::time::Duration::from_secs(2), https(addr, ca, r))
        .await
        .ok()
        .flatten()
}

/// One HTTPS (HTTP/1.1) request for [`https`].
#[derive(Debug, Clone, Copy, Default)]
pub struct HttpsRequest<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// `authorization: Bearer` this.
    pub token: Option<&'a str>,
    /// A client certificate and its key (PEM).
    pub identity: Option<(&'a str, &'a str)>,
    /// The content type and the body.
    pub body: Option<(&'a str, &'a [u8])>,
    /// Further headers (a cookie, a CSRF token, an origin).
    pub headers: &'a [(&'a str, &'a str)],
}

/// An HTTPS answer with its headers (names lower-cased).
#[derive(Debug, Clone)]
pub struct HttpsAnswer {
    pub code: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpsAnswer {
    /// The first value of a header.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `r` over HTTPS on `addr`, trusting the cluster CA `ca` (PEM): the status
/// code and the body, or `None` when the connection or the answer fails
/// (the caller bounds the time).
pub async fn https(addr: &str, ca: &str, r: HttpsRequest<'_>) -> Option<(u16, String)> {
    https_answer(addr, ca, r).await.map(|a| (a.code, a.body))
}

/// [`https`], with the answer's headers.
pub async fn https_answer(addr: &str, ca: &str, r: HttpsRequest<'_>) -> Option<HttpsAnswer> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tls = match r.identity {
        None => drover_pki::tls::https_client_config(ca).ok()?,
        Some(id) => {
            let mut c = (*drover_pki::tls::client_config(ca, Some(id)).ok()?).clone();
            c.alpn_protocols = vec![b"http/1.1".to_vec()];
            std::sync::Arc::new(c)
        }
    };
    let tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
    let name = rustls::pki_types::ServerName::try_from(drover_pki::SERVER_NAME).ok()?;
    let mut s = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await
        .ok()?;
    let auth = r
        .token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let (content, body) = match r.body {
        Some((ty, b)) => (
            format!("Content-Type: {ty}\r\nContent-Length: {}\r\n", b.len()),
            b,
        ),
        None => (String::new(), &[][..]),
    };
    let extra: String = r
        .headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let head = format!(
        "{} {} HTTP/1.1\r\nHost: {addr}\r\n{auth}{content}{extra}Connection: close\r\n\r\n",
        r.method, r.path
    );
    s.write_all(head.as_bytes()).await.ok()?;
    s.write_all(body).await.ok()?;
    let mut buf = Vec::new();
    // A TLS peer may close without close_notify: keep what came.
    let _ = s.read_to_end(&mut buf).await;
    let text = String::from_utf8_lossy(&buf).to_string();
    let code = text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some(HttpsAnswer {
        code,
        headers,
        body: body.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_listens_at_a_refusing_port_and_nobody_can_take_it() {
        let (_held, addr) = refusing_port();
        let e = std::net::TcpStream::connect(addr).expect_err("nothing listens");
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
        assert!(TcpListener::bind(addr).is_err(), "the port is held");
    }

    #[test]
    fn a_host_port_is_free_on_every_interface_and_below_the_ephemeral_range() {
        let p = host_port();
        assert!(p < ephemeral_range().0 && p >= 10_000, "{p}");
        TcpListener::bind(("0.0.0.0", p)).expect("free");
    }
}
