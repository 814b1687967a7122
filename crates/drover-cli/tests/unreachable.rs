//! A client whose servers do not listen says so within about 2 s, with
//! what to do, instead of retrying for its whole deadline.

use drover_cli::{Client, ClientConfig, ClientError};
use std::time::{Duration, Instant};

#[tokio::test]
async fn nothing_listening_is_said_within_two_seconds() {
    // Nothing listens there, and nothing can start to while the test holds
    // the bound (never listening) socket: every connection is refused.
    let (_held, addr) = drover_testkit::refusing_port();
    let ca = drover_pki::Ca::create("t", std::time::SystemTime::now()).unwrap();
    let c = Client::new(&ClientConfig {
        servers: vec![addr.to_string()],
        token: "t".into(),
        ca: ca.cert_pem().to_string(),
        ..Default::default()
    })
    .unwrap();
    let t = Instant::now();
    let e = c.status().await.expect_err("nothing listens");
    let took = t.elapsed();
    assert!(matches!(e, ClientError::Config(_)), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("nothing listens at 127.0.0.1:"), "{text}");
    assert!(text.contains("drover up"), "{text}");
    // 2 s of refusals, not the 15 s deadline: the bound, 10 s, leaves 8 s
    // for a loaded machine and stays 5 s under the deadline it must never
    // reach.
    assert!(took >= Duration::from_secs(2), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
}
