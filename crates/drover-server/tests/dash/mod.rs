//! What the dashboard's tests share (`dashboard.rs`, `dashboard_browser.rs`):
//! client certificates, HTTPS calls to a member's HTTP port, signing in.

#![allow(dead_code)]

use drover_server::Server;
use drover_testkit::{https_answer, HttpsAnswer, HttpsRequest, TestServer};
use std::time::Duration;

pub const WAIT: Duration = Duration::from_secs(20);

/// A client certificate for `name` in `role`: (certificate, key).
pub async fn issue(s: &Server, name: &str, role: &str) -> (String, String) {
    let (cert, key, _) = drover_testkit::client_certificate(s, name, role).await;
    (cert, key)
}

pub fn http(s: &TestServer) -> String {
    s.server.http_addr.to_string()
}

pub async fn call(s: &TestServer, r: HttpsRequest<'_>) -> HttpsAnswer {
    tokio::time::timeout(WAIT, https_answer(&http(s), &s.ca, r))
        .await
        .expect("an answer in time")
        .expect("an HTTPS answer")
}

/// `POST /ui/login` with a token, or with the certificate `id` on the
/// connection (no token).
pub async fn login(s: &TestServer, token: Option<&str>, id: Option<(&str, &str)>) -> HttpsAnswer {
    let form = match token {
        Some(t) => format!("token={}", urlencode(t)),
        None => "use=certificate".to_string(),
    };
    call(
        s,
        HttpsRequest {
            method: "POST",
            path: "/ui/login",
            identity: id,
            body: Some(("application/x-www-form-urlencoded", form.as_bytes())),
            ..Default::default()
        },
    )
    .await
}

pub fn urlencode(t: &str) -> String {
    t.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The session cookie (`name=value`) a sign-in set, checked for its
/// attributes.
pub fn session_cookie(a: &HttpsAnswer) -> String {
    assert_eq!(a.code, 303, "a sign-in answers 303: {}", a.body);
    assert_eq!(a.header("location"), Some("/ui"));
    let c = a.header("set-cookie").expect("a session cookie");
    for attr in ["HttpOnly", "Secure", "SameSite=Strict", "Max-Age="] {
        assert!(c.contains(attr), "the cookie lacks {attr}: {c}");
    }
    c.split(';').next().unwrap().to_string()
}
