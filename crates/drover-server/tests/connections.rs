//! Finding 4 of the second audit, against a real member: one address
//! without a credential cannot hold the server's connections (and so its
//! file descriptors). Silent connections are closed at the TLS handshake
//! timeout, at the first-request timeout (no HTTP/2 preface, half an
//! HTTP/1.1 header), and one address holds at most its share across both
//! ports while clients from other addresses are served.

use drover_pki::net::Limits;
use drover_testkit::{wait_until, TestServer};
use rustls::pki_types::ServerName;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const HANDSHAKE: Duration = Duration::from_millis(1500);
const FIRST_REQUEST: Duration = Duration::from_millis(1500);

async fn server(dir: &std::path::Path, limits: Limits) -> TestServer {
    TestServer::start_tuned(dir, |o| o.connection_limits = Some(limits)).await
}

fn timeouts() -> Limits {
    Limits {
        handshake_timeout: HANDSHAKE,
        first_request_timeout: FIRST_REQUEST,
        ..Limits::default()
    }
}

/// A TCP connection to `to` from the loopback address `from` (the whole of
/// 127/8 is this machine: another address without another machine).
async fn tcp_from(from: &str, to: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpSocket::new_v4()?;
    s.bind(format!("{from}:0").parse().expect("an address"))?;
    s.connect(to).await
}

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

/// A TLS connection from `from`, trusting the cluster CA, with no
/// credential: `h1` offers HTTP/1.1 alone, else HTTP/2.
async fn tls_from(from: &str, to: SocketAddr, ca: &str, h1: bool) -> std::io::Result<Tls> {
    let cfg: Arc<rustls::ClientConfig> = if h1 {
        drover_pki::tls::https_client_config(ca).expect("TLS")
    } else {
        drover_pki::tls::client_config(ca, None).expect("TLS")
    };
    let tcp = tcp_from(from, to).await?;
    tokio_rustls::TlsConnector::from(cfg)
        .connect(ServerName::try_from(drover_pki::SERVER_NAME).unwrap(), tcp)
        .await
}

/// Reads until the server closes (or resets) the connection, and answers
/// how long that took and the bytes it sent; `None` if still open after
/// `within`.
async fn closed_within<S: AsyncReadExt + Unpin>(
    s: &mut S,
    within: Duration,
) -> Option<(Duration, Vec<u8>)> {
    let t = Instant::now();
    let mut got = Vec::new();
    let r = tokio::time::timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    r.ok().map(|()| (t.elapsed(), got))
}

fn grpc(s: &TestServer) -> SocketAddr {
    s.server.grpc_addr
}
fn http(s: &TestServer) -> SocketAddr {
    s.server.http_addr
}

#[tokio::test]
async fn a_connection_that_never_starts_tls_is_closed_at_the_handshake_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let s = server(&tmp.path().join("s"), timeouts()).await;
    for to in [grpc(&s), http(&s)] {
        let mut c = tcp_from("127.0.0.2", to).await.unwrap();
        let (took, _) = closed_within(&mut c, HANDSHAKE + Duration::from_secs(5))
            .await
            .unwrap_or_else(|| panic!("{to}: a silent TCP connection still open"));
        eprintln!("{to}: no TLS, closed after {took:?}");
        assert!(took >= HANDSHAKE - Duration::from_millis(200), "{took:?}");
    }
    s.shutdown().await;
}

#[tokio::test]
async fn a_tls_connection_that_sends_no_request_is_closed_on_both_ports() {
    let tmp = tempfile::tempdir().unwrap();
    let s = server(&tmp.path().join("s"), timeouts()).await;
    for (to, h1) in [(grpc(&s), false), (http(&s), false), (http(&s), true)] {
        let mut c = tls_from("127.0.0.2", to, &s.ca, h1).await.unwrap();
        let (took, _) = closed_within(&mut c, FIRST_REQUEST + Duration::from_secs(5))
            .await
            .unwrap_or_else(|| panic!("{to} (h1 {h1}): TLS without a request still open"));
        eprintln!("{to} (h1 {h1}): no preface or header, closed after {took:?}");
        assert!(
            took >= FIRST_REQUEST - Duration::from_millis(200),
            "{took:?}"
        );
    }
    // Half the HTTP/2 preface is no request either.
    let mut c = tls_from("127.0.0.2", grpc(&s), &s.ca, false).await.unwrap();
    c.write_all(b"PRI * HTTP/2.0\r\n\r\n").await.unwrap();
    c.flush().await.unwrap();
    assert!(
        closed_within(&mut c, FIRST_REQUEST + Duration::from_secs(5))
            .await
            .is_some(),
        "half a preface kept the connection open"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn a_half_sent_http1_header_is_closed_first_or_later_on_a_connection() {
    let tmp = tempfile::tempdir().unwrap();
    let s = server(&tmp.path().join("s"), timeouts()).await;
    // The first request's header, half sent.
    let mut c = tls_from("127.0.0.2", http(&s), &s.ca, true).await.unwrap();
    c.write_all(b"GET /healthz HTTP/1.1\r\nHost: drover\r\nX-Slow: ")
        .await
        .unwrap();
    c.flush().await.unwrap();
    let (took, _) = closed_within(&mut c, FIRST_REQUEST + Duration::from_secs(5))
        .await
        .expect("a half-sent header still open");
    eprintln!("half a first header: closed after {took:?}");

    // A whole request is answered, and the connection kept; then half a
    // second header is closed as well.
    let mut c = tls_from("127.0.0.2", http(&s), &s.ca, true).await.unwrap();
    c.write_all(b"GET /healthz HTTP/1.1\r\nHost: drover\r\n\r\n")
        .await
        .unwrap();
    c.flush().await.unwrap();
    let mut buf = [0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
        .await
        .expect("an answer")
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    c.write_all(b"GET /healthz HTTP/1.1\r\nHost: dro")
        .await
        .unwrap();
    c.flush().await.unwrap();
    let (took, _) = closed_within(&mut c, FIRST_REQUEST + Duration::from_secs(5))
        .await
        .expect("a half-sent second header still open");
    eprintln!("half a second header: closed after {took:?}");
    s.shutdown().await;
}

#[tokio::test]
async fn one_address_is_capped_across_both_ports_while_others_are_served() {
    let tmp = tempfile::tempdir().unwrap();
    // Long timeouts: only the cap may close a connection here.
    let s = server(
        &tmp.path().join("s"),
        Limits {
            handshake_timeout: Duration::from_secs(60),
            first_request_timeout: Duration::from_secs(60),
            per_ip: 6,
            total: 100,
        },
    )
    .await;
    // Six from 127.0.0.2: three on each port, TLS done, nothing sent.
    let mut held = Vec::new();
    for to in [grpc(&s), http(&s)] {
        for _ in 0..3 {
            held.push(tls_from("127.0.0.2", to, &s.ca, false).await.unwrap());
        }
    }
    // (Each was counted at its accept, before its handshake could end.)
    // A seventh, on either port, is closed before TLS.
    for to in [grpc(&s), http(&s)] {
        let e = tls_from("127.0.0.2", to, &s.ca, false).await;
        assert!(e.is_err(), "{to}: a seventh connection from one address");
    }
    assert_eq!(
        s.server.connections.open_from("127.0.0.2".parse().unwrap()),
        6
    );
    // Other addresses are served meanwhile: the admin's client (from
    // 127.0.0.1) and an HTTPS health check from 127.0.0.3.
    s.client().status().await.expect("a client from 127.0.0.1");
    let mut h = tls_from("127.0.0.3", http(&s), &s.ca, true).await.unwrap();
    h.write_all(b"GET /healthz HTTP/1.1\r\nHost: drover\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let (_, body) = closed_within(&mut h, Duration::from_secs(5))
        .await
        .expect("answered and closed");
    let body = String::from_utf8_lossy(&body);
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    // A connection closed frees its slot.
    held.pop();
    wait_until("a slot freed", Duration::from_secs(5), || async {
        tls_from("127.0.0.2", grpc(&s), &s.ca, false).await.is_ok()
    })
    .await;
    drop(held);
    s.shutdown().await;
}

/// `GET path` over HTTP/1.1 with a client certificate of `role` (or none)
/// and `token` (or none): the status line's code.
async fn get_as(
    s: &TestServer,
    role: Option<drover_pki::Role>,
    token: Option<&str>,
    path: &str,
) -> u16 {
    let ident = role.map(|r| {
        let (issued, key) = s
            .server
            .trust
            .ca
            .issue(
                &r,
                &[],
                Duration::from_secs(600),
                std::time::SystemTime::now(),
            )
            .unwrap();
        (issued.cert_pem, key)
    });
    let cfg = drover_pki::tls::client_config(
        &s.ca,
        ident.as_ref().map(|(c, k)| (c.as_str(), k.as_str())),
    )
    .unwrap();
    let mut cfg = (*cfg).clone();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = tcp_from("127.0.0.1", http(s)).await.unwrap();
    let mut c = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from(drover_pki::SERVER_NAME).unwrap(), tcp)
        .await
        .unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    c.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: drover\r\n{auth}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let (_, body) = closed_within(&mut c, Duration::from_secs(10))
        .await
        .expect("an answer");
    let head = String::from_utf8_lossy(&body);
    head.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_viewer_certificate_reads_metrics_and_status_and_a_node_certificate_does_not() {
    use drover_pki::Role;
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("s")).await;
    let admin = s.server.identity.admin_token.clone();
    for path in ["/metrics", "/status"] {
        assert_eq!(
            get_as(&s, Some(Role::Viewer("scraper".into())), None, path).await,
            200,
            "{path}"
        );
        assert_eq!(
            get_as(&s, Some(Role::Admin("ops".into())), None, path).await,
            200,
            "{path}"
        );
        assert_eq!(get_as(&s, None, Some(&admin), path).await, 200, "{path}");
        assert_eq!(
            get_as(&s, Some(Role::Node("n1".into())), None, path).await,
            403,
            "{path}"
        );
        assert_eq!(get_as(&s, None, None, path).await, 401, "{path}");
        assert_eq!(
            get_as(&s, None, Some("drover-admin-nope"), path).await,
            403,
            "{path}"
        );
    }
    s.shutdown().await;
}
