//! What the dashboard's tests share (`dashboard.rs`, `dashboard_browser.rs`):
//! client certificates, HTTPS calls to a member's HTTP port, signing in,
//! pages, actions and live streams, sim nodes, a Deployment.

#![allow(dead_code)]

use drover_agent::Sim;
use drover_server::Server;
use drover_testkit::{
    https_answer, sim_options, wait_until, HttpsAnswer, HttpsRequest, TestServer,
};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

pub async fn get(s: &TestServer, path: &str, cookie: Option<&str>) -> HttpsAnswer {
    let h = cookie.map(|c| [("Cookie", c)]);
    call(
        s,
        HttpsRequest {
            method: "GET",
            path,
            headers: h.as_ref().map_or(&[], |h| &h[..]),
            ..Default::default()
        },
    )
    .await
}

/// The CSRF token a page carries for its session.
pub async fn csrf_of(s: &TestServer, cookie: &str) -> String {
    let page = get(s, "/ui", Some(cookie)).await;
    assert_eq!(page.code, 200, "{}", page.body);
    let at = page
        .body
        .find(r#"<meta name="csrf" content=""#)
        .expect("the page carries a CSRF token");
    let rest = &page.body[at + r#"<meta name="csrf" content=""#.len()..];
    rest[..rest.find('"').unwrap()].to_string()
}

pub async fn act(
    s: &TestServer,
    cookie: Option<&str>,
    csrf: Option<&str>,
    form: &str,
    origin: Option<&str>,
) -> HttpsAnswer {
    let mut headers: Vec<(&str, &str)> = Vec::new();
    if let Some(c) = cookie {
        headers.push(("Cookie", c));
    }
    if let Some(t) = csrf {
        headers.push(("x-csrf-token", t));
    }
    if let Some(o) = origin {
        headers.push(("Origin", o));
    }
    call(
        s,
        HttpsRequest {
            method: "POST",
            path: "/ui/action",
            headers: &headers,
            body: Some(("application/x-www-form-urlencoded", form.as_bytes())),
            ..Default::default()
        },
    )
    .await
}

pub fn reason(a: &HttpsAnswer) -> String {
    if let Some(r) = a.header("x-drover-reason") {
        return r.to_string();
    }
    serde_json::from_str::<serde_json::Value>(&a.body)
        .ok()
        .and_then(|v| v["reason"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A live stream of `path` with the session `cookie`, read as it comes.
pub struct Live {
    pub tls: tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    pub seen: String,
}

impl Live {
    pub async fn open(s: &TestServer, path: &str, cookie: &str) -> Live {
        let tls = drover_pki::tls::https_client_config(&s.ca).unwrap();
        let tcp = tokio::net::TcpStream::connect(http(s)).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from(drover_pki::SERVER_NAME).unwrap();
        let mut tls = tokio_rustls::TlsConnector::from(tls)
            .connect(name, tcp)
            .await
            .unwrap();
        let head = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nCookie: {cookie}\r\nAccept: text/event-stream\r\n\r\n",
            http(s)
        );
        tls.write_all(head.as_bytes()).await.unwrap();
        Live {
            tls,
            seen: String::new(),
        }
    }

    /// Reads until `pattern` comes (the time it came), or `None` when the
    /// stream ends or `within` passes first.
    pub async fn until(&mut self, pattern: &str, within: Duration) -> Option<Instant> {
        let deadline = tokio::time::Instant::now() + within;
        let mut buf = [0u8; 16384];
        loop {
            if self.seen.contains(pattern) {
                return Some(Instant::now());
            }
            let n = tokio::time::timeout_at(deadline, self.tls.read(&mut buf))
                .await
                .ok()?
                .ok()?;
            if n == 0 {
                return self.seen.contains(pattern).then(Instant::now);
            }
            self.seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }
}

const SIM_WAIT: Duration = Duration::from_secs(30);

/// `nodes` sim nodes named `prefix`N, once every one is Ready.
pub async fn start_sim(s: &TestServer, prefix: &str, nodes: usize) -> Sim {
    let sim = Sim::start(sim_options(
        vec![s.addr.clone()],
        &s.node_token,
        prefix,
        nodes,
    ))
    .expect("sim starts");
    let names = sim.names().to_vec();
    wait_until("the sim's nodes Ready", SIM_WAIT, || async {
        let mut ok = true;
        for n in &names {
            ok &= s.node(n).await.is_some_and(|n| n.is_ready());
        }
        ok
    })
    .await;
    sim
}

/// A Deployment `web` of `replicas` pods of image `local/busybox:VERSION`
/// (maxUnavailable 1, maxSurge 1), paused or not.
pub fn deployment(version: &str, replicas: usize, paused: bool) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  replicas: {replicas}\n  paused: {paused}\n  selector: {{matchLabels: {{app: web}}}}\n  strategy: {{type: RollingUpdate, rollingUpdate: {{maxUnavailable: 1, maxSurge: 1}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers: [{{name: web, image: \"local/busybox:{version}\"}}]\n"
    )
}

/// Deployment `web` as the store has it.
pub async fn web(s: &TestServer) -> drover_api::Deployment {
    match s
        .objects
        .get(drover_api::Kind::Deployment, "default", "web")
        .await
    {
        Ok(drover_api::Manifest::Deployment(d)) => *d,
        other => panic!("deployment web: {other:?}"),
    }
}

/// Waits until Deployment `web` runs `replicas` pods of image `image`, all
/// available, and says so (`rollout status`'s "successfully rolled out").
pub async fn rolled_out(s: &TestServer, image: &str, replicas: i32) {
    wait_until(
        &format!("web rolled out to {image}"),
        SIM_WAIT * 2,
        || async {
            let d = web(s).await;
            let st = &d.status;
            d.spec.template.spec.containers[0].image == image
                && st.observed_generation == d.metadata.generation
                && st.updated_replicas == replicas
                && st.replicas == replicas
                && st.available_replicas == replicas
        },
    )
    .await;
}

/// Waits until the page at `path` shows `n` grid cells in `state` (a
/// class such as `s-updated`): this member's informer has caught up.
pub async fn wait_shown(s: &TestServer, path: &str, cookie: &str, state: &str, n: usize) {
    // Grid cells have an id; the legend's swatch has none.
    let pattern = format!(r#"class="c {state}" id="#);
    wait_until(&format!("{n} cells {state} on {path}"), WAIT, || async {
        get(s, path, Some(cookie))
            .await
            .body
            .matches(&pattern)
            .count()
            == n
    })
    .await;
}
