//! Real TLS handshakes on loopback: who gets in, and what the server learns.

use drover_pki::net::{self, Limits, ServerTls};
use drover_pki::tls::{self, Alpn};
use drover_pki::{Ca, Credential, Role};
use rustls::pki_types::ServerName;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::net::{TcpListener, TcpStream};

struct Fixture {
    ca: Ca,
    addr: std::net::SocketAddr,
    conns: tokio::sync::mpsc::Receiver<net::TlsConn>,
}

async fn server(limits: Limits) -> Fixture {
    let now = SystemTime::now();
    let ca = Ca::create("t", now).unwrap();
    let (member, key) = ca
        .issue(
            &Role::Member(7),
            &["127.0.0.1".into()],
            Duration::from_secs(3600),
            now,
        )
        .unwrap();
    let cfg = tls::server_config(ca.cert_pem(), &member.cert_pem, &key, Alpn::Grpc).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let conns = net::incoming(l, ServerTls::new(cfg), limits);
    Fixture { ca, addr, conns }
}

async fn dial(
    addr: std::net::SocketAddr,
    cfg: Arc<rustls::ClientConfig>,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    tokio_rustls::TlsConnector::from(cfg)
        .connect(ServerName::try_from(drover_pki::SERVER_NAME).unwrap(), tcp)
        .await
}

#[tokio::test]
async fn a_node_certificate_reaches_the_server_as_its_role() {
    let mut f = server(Limits::default()).await;
    let mut cred = Credential::generate("x").unwrap();
    let issued =
        f.ca.sign_csr(
            &cred.csr_pem,
            &Role::Node("edge-1".into()),
            &[],
            Duration::from_secs(60),
            SystemTime::now(),
        )
        .unwrap();
    cred.cert_pem = issued.cert_pem;
    let cfg = tls::client_config(f.ca.cert_pem(), Some((&cred.cert_pem, &cred.key_pem))).unwrap();
    let _c = dial(f.addr, cfg).await.unwrap();
    let conn = tokio::time::timeout(Duration::from_secs(5), f.conns.recv())
        .await
        .unwrap()
        .unwrap();
    let peer = conn.info().cert.clone().expect("a client certificate");
    assert_eq!(peer.role, Role::Node("edge-1".into()));
    assert_eq!(peer.serial, issued.serial);

    // Without a certificate the connection is anonymous (a token holder).
    let cfg = tls::client_config(f.ca.cert_pem(), None).unwrap();
    let _c = dial(f.addr, cfg).await.unwrap();
    let conn = f.conns.recv().await.unwrap();
    assert!(conn.info().cert.is_none());
}

#[tokio::test]
async fn the_pinned_digest_decides_whom_a_joiner_trusts() {
    let f = server(Limits::default()).await;
    // The right digest: the handshake completes.
    let ok = tls::pinned_client_config(f.ca.digest()).unwrap();
    dial(f.addr, ok).await.expect("pinned to the right CA");
    // Another digest: refused before anything is sent.
    let other = Ca::create("other", SystemTime::now()).unwrap();
    let bad = tls::pinned_client_config(other.digest()).unwrap();
    let e = dial(f.addr, bad).await.unwrap_err();
    let said = drover_pki::tls::ca_mismatch(&e).expect("a typed refusal");
    assert!(said.contains("does not present the CA"), "{said}");
    // A client that trusts another CA refuses the server too.
    let cfg = tls::client_config(other.cert_pem(), None).unwrap();
    assert!(dial(f.addr, cfg).await.is_err());
}

#[tokio::test]
async fn a_node_certificate_cannot_pose_as_a_server() {
    // A node certificate lacks the server name: a client refuses it.
    let now = SystemTime::now();
    let ca = Ca::create("t", now).unwrap();
    let (node, key) = ca
        .issue(&Role::Node("n".into()), &[], Duration::from_secs(60), now)
        .unwrap();
    let cfg = tls::server_config(ca.cert_pem(), &node.cert_pem, &key, Alpn::Grpc).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let _rx = net::incoming(l, ServerTls::new(cfg), Limits::default());
    let client = tls::client_config(ca.cert_pem(), None).unwrap();
    assert!(dial(addr, client).await.is_err());
}

#[tokio::test]
async fn connections_over_the_limit_are_closed_and_idle_handshakes_time_out() {
    let f = server(Limits {
        handshake_timeout: Duration::from_millis(300),
        per_ip: 2,
        total: 100,
        ..Limits::default()
    })
    .await;
    let cfg = tls::client_config(f.ca.cert_pem(), None).unwrap();
    let _a = dial(f.addr, cfg.clone()).await.unwrap();
    let _b = dial(f.addr, cfg.clone()).await.unwrap();
    // A third from the same address is closed without a handshake.
    assert!(dial(f.addr, cfg.clone()).await.is_err());
    drop(_a);
    drop(f.conns);
    // (The receiver is gone: the listener stops; nothing more to check.)

    // An idle TCP connection that never says hello is closed after the
    // handshake timeout.
    let g = server(Limits {
        handshake_timeout: Duration::from_millis(200),
        ..Limits::default()
    })
    .await;
    let mut idle = TcpStream::connect(g.addr).await.unwrap();
    let mut buf = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(5), async {
        use tokio::io::AsyncReadExt;
        idle.read(&mut buf).await
    })
    .await
    .expect("closed within the deadline");
    assert!(matches!(n, Ok(0) | Err(_)));
}

/// Reads from `conn` until it ends (what the server's side sees: the
/// connection serving code reads, and gets the timeout as an error).
async fn read_to_end(conn: &mut net::TlsConn) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut all = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        let n = conn.read(&mut buf).await?;
        if n == 0 {
            return Ok(all);
        }
        all.extend_from_slice(&buf[..n]);
    }
}

#[tokio::test]
async fn a_connection_without_a_first_request_times_out_and_one_with_it_does_not() {
    use tokio::io::AsyncWriteExt;
    let mut f = server(Limits {
        first_request_timeout: Duration::from_millis(300),
        ..Limits::default()
    })
    .await;
    let cfg = tls::client_config(f.ca.cert_pem(), None).unwrap();
    let cases: [(&[u8], bool); 5] = [
        (b"", false),
        // Half a header, half a preface.
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\n", false),
        (b"PRI * HTTP/2.0\r\n\r\nSM", false),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", true),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", true),
    ];
    for (sent, complete) in cases {
        let mut c = dial(f.addr, cfg.clone()).await.unwrap();
        c.write_all(sent).await.unwrap();
        c.flush().await.unwrap();
        let mut conn = f.conns.recv().await.unwrap();
        let t = std::time::Instant::now();
        let r = tokio::time::timeout(Duration::from_secs(2), read_to_end(&mut conn)).await;
        let what = String::from_utf8_lossy(sent);
        if complete {
            // Still open past the timeout: the read waits on the client.
            assert!(r.is_err(), "{what:?}: {r:?}");
        } else {
            let e = r.expect("closed within 2 s").expect_err("a timeout");
            assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{what:?}: {e}");
            assert!(t.elapsed() >= Duration::from_millis(250), "{what:?}");
        }
    }
}
