//! The proxy's decisions, pure: which local requests it refuses (a `Host`
//! that is not the listener's own, a browser page of another origin),
//! which headers never cross it, and whether a request that failed on one
//! member may be sent to another.

use hyper::header::{HeaderMap, HeaderName};
use hyper::Method;

/// Where a forwarded request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failed {
    /// No connection to the member could be made: nothing was sent.
    Connect,
    /// The connection was there but the request was handed back unsent
    /// (the connection closed before it went out).
    Unsent,
    /// The request went out and no answer came (the member died, the
    /// connection broke, or no answer's head within the time allowed).
    NoAnswer,
}

/// Whether a request that failed `failed` may be sent to another member.
/// Always when nothing was sent; after a request went out, only when
/// sending it twice is harmless: GET, HEAD and OPTIONS. (An answer that
/// began and then broke, a watch mid-stream, is never retried: its head
/// is already on its way to the client, which re-watches.)
pub fn may_retry(method: &Method, failed: Failed) -> bool {
    match failed {
        Failed::Connect | Failed::Unsent => true,
        Failed::NoAnswer => idempotent(method),
    }
}

/// GET, HEAD and OPTIONS: reading twice changes nothing.
pub fn idempotent(method: &Method) -> bool {
    *method == Method::GET || *method == Method::HEAD || *method == Method::OPTIONS
}

/// Why a local request is refused before anything is forwarded: the
/// reason code (`x-drover-reason`) and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
}

/// The hosts (without the port) a request's `Host` may name: the loopback
/// names, and the listening address when it is another one.
pub fn allowed_hosts(listen_ip: std::net::IpAddr) -> Vec<String> {
    let mut v = vec![
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        "[::1]".to_string(),
    ];
    let own = match listen_ip {
        std::net::IpAddr::V4(a) => a.to_string(),
        std::net::IpAddr::V6(a) => format!("[{a}]"),
    };
    if !listen_ip.is_unspecified() && !v.contains(&own) {
        v.push(own);
    }
    v
}

/// `host[:port]` split; a bracketed IPv6 address keeps its brackets.
fn split_host(h: &str) -> (&str, Option<&str>) {
    if h.starts_with('[') {
        return match h.find(']') {
            Some(i) => {
                let (a, rest) = h.split_at(i + 1);
                (a, rest.strip_prefix(':'))
            }
            None => (h, None),
        };
    }
    match h.rsplit_once(':') {
        Some((a, p)) => (a, Some(p)),
        None => (h, None),
    }
}

/// Whether `host` (a `Host` header, or an origin's host) names this
/// listener: an allowed host, and our port when it names one.
fn own_host(host: &str, allowed: &[String], port: u16) -> bool {
    let (h, p) = split_host(host.trim());
    let port_ok = match p {
        Some(p) => p.parse::<u16>().ok() == Some(port),
        None => port == 80,
    };
    port_ok && allowed.iter().any(|a| a.eq_ignore_ascii_case(h))
}

/// The checks of every local request, before anything else: its `Host`
/// names this listener (a page of another name that resolves to
/// 127.0.0.1, DNS rebinding, is refused), and a browser request comes from
/// the proxy's own pages (`Origin`, when sent, is this listener;
/// `Sec-Fetch-Site` is not `cross-site` or `same-site`).
pub fn check_local(headers: &HeaderMap, allowed: &[String], port: u16) -> Result<(), Refusal> {
    let host = headers
        .get(hyper::header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !own_host(host, allowed, port) {
        return Err(Refusal {
            reason: "ProxyHostRefused",
            message: format!(
                "Host {host:?} is not this proxy's address: use http://127.0.0.1:{port} (a page of another name that resolves here is refused)"
            ),
        });
    }
    if let Some(origin) = headers.get(hyper::header::ORIGIN) {
        let o = origin.to_str().unwrap_or("");
        let ok = o
            .strip_prefix("http://")
            .is_some_and(|h| own_host(h, allowed, port));
        if !ok {
            return Err(Refusal {
                reason: "ProxyCrossOrigin",
                message: format!(
                    "a request from the page {o:?} is refused: only this proxy's own pages (http://127.0.0.1:{port}) may call it"
                ),
            });
        }
    }
    let site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if site.eq_ignore_ascii_case("cross-site") || site.eq_ignore_ascii_case("same-site") {
        return Err(Refusal {
            reason: "ProxyCrossOrigin",
            message: format!(
                "a request from another site's page (Sec-Fetch-Site: {site}) is refused: open http://127.0.0.1:{port} yourself"
            ),
        });
    }
    Ok(())
}

/// Hop-by-hop headers (RFC 9110 7.6.1), which concern one connection only.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Removes the hop-by-hop headers, and those the `Connection` header names.
pub fn drop_hop_by_hop(h: &mut HeaderMap) {
    let named: Vec<HeaderName> = h
        .get_all(hyper::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for n in named {
        h.remove(n);
    }
    for n in HOP_BY_HOP {
        h.remove(n);
    }
}

/// What of a local request goes to a member: no hop-by-hop header, and
/// nothing that speaks for the local caller: its `Authorization` and
/// cookies (the proxy adds its own credential), its `Host` (the member's
/// is used) and its `Origin` and `Referer` (checked here, they name this
/// listener, not the member).
pub fn upstream_headers(local: &HeaderMap) -> HeaderMap {
    let mut h = local.clone();
    drop_hop_by_hop(&mut h);
    for n in [
        hyper::header::AUTHORIZATION,
        hyper::header::COOKIE,
        hyper::header::HOST,
        hyper::header::ORIGIN,
        hyper::header::REFERER,
    ] {
        h.remove(n);
    }
    h.remove("sec-fetch-site");
    h
}

/// What of a member's answer goes back: no hop-by-hop header, and no
/// cookie the member sets (the proxy keeps the dashboard's session itself).
pub fn downstream_headers(h: &mut HeaderMap) {
    drop_hop_by_hop(h);
    h.remove(hyper::header::SET_COOKIE);
}

/// The address a client dials for a member's HTTPS address `http`: a
/// wildcard host becomes the host of its gRPC address `grpc`, else the
/// loopback.
pub fn dialable(http: &str, grpc: &str) -> String {
    let unspecified = |h: &str| matches!(h, "0.0.0.0" | "[::]" | "::" | "");
    match split_host(http) {
        (h, Some(port)) if unspecified(h) => {
            let host = match split_host(grpc) {
                (g, Some(_)) if !unspecified(g) => g.to_string(),
                _ => "127.0.0.1".to_string(),
            };
            format!("{host}:{port}")
        }
        _ => http.to_string(),
    }
}

/// The members' addresses in the order the proxy tries them: the leader
/// `leader` first (a write reaches it without the hop of a forward), then
/// the others by address.
pub fn order_members(mut members: Vec<(u64, String)>, leader: u64) -> Vec<String> {
    members.sort_by(|a, b| (a.0 != leader, &a.1).cmp(&(b.0 != leader, &b.1)));
    members.into_iter().map(|(_, a)| a).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).expect("a header value"));
        }
        h
    }

    #[test]
    fn only_what_was_never_sent_or_reads_go_to_another_member() {
        let all = [
            Method::GET,
            Method::HEAD,
            Method::OPTIONS,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
        ];
        for m in &all {
            assert!(may_retry(m, Failed::Connect), "{m} before connecting");
            assert!(may_retry(m, Failed::Unsent), "{m} handed back unsent");
        }
        for m in &all[..3] {
            assert!(may_retry(m, Failed::NoAnswer), "{m} with no answer");
        }
        for m in &all[3..] {
            assert!(!may_retry(m, Failed::NoAnswer), "{m} with no answer");
        }
    }

    #[test]
    fn the_host_must_be_the_listeners_own() {
        let allowed = allowed_hosts("127.0.0.1".parse().expect("ip"));
        let ok = |h: &str| check_local(&headers(&[("host", h)]), &allowed, 8001);
        assert!(ok("127.0.0.1:8001").is_ok());
        assert!(ok("localhost:8001").is_ok());
        assert!(ok("[::1]:8001").is_ok());
        for bad in [
            "evil.example:8001",
            "127.0.0.1:8002",
            "127.0.0.1",
            "127.0.0.1.evil.example:8001",
            "",
        ] {
            let r = ok(bad).expect_err(bad);
            assert_eq!(r.reason, "ProxyHostRefused", "{bad}");
        }
        assert_eq!(
            check_local(&HeaderMap::new(), &allowed, 8001)
                .expect_err("no host")
                .reason,
            "ProxyHostRefused"
        );
        // An explicit address of another interface is its own host too.
        let lan = allowed_hosts("10.1.2.3".parse().expect("ip"));
        assert!(check_local(&headers(&[("host", "10.1.2.3:8001")]), &lan, 8001).is_ok());
        assert!(check_local(&headers(&[("host", "10.1.2.4:8001")]), &lan, 8001).is_err());
    }

    #[test]
    fn pages_of_another_origin_are_refused() {
        let allowed = allowed_hosts("127.0.0.1".parse().expect("ip"));
        let with = |extra: &[(&'static str, &str)]| {
            let mut pairs = vec![("host", "127.0.0.1:8001")];
            pairs.extend_from_slice(extra);
            check_local(&headers(&pairs), &allowed, 8001)
        };
        assert!(with(&[("origin", "http://127.0.0.1:8001")]).is_ok());
        assert!(with(&[("origin", "http://localhost:8001")]).is_ok());
        assert!(with(&[("sec-fetch-site", "same-origin")]).is_ok());
        assert!(with(&[("sec-fetch-site", "none")]).is_ok());
        for bad in [
            vec![("origin", "http://evil.example")],
            vec![("origin", "http://127.0.0.1:3000")],
            vec![("origin", "https://127.0.0.1:8001")],
            vec![("origin", "null")],
            vec![("sec-fetch-site", "cross-site")],
            vec![("sec-fetch-site", "same-site")],
        ] {
            let r = with(&bad).expect_err("refused");
            assert_eq!(r.reason, "ProxyCrossOrigin", "{bad:?}");
        }
    }

    #[test]
    fn the_callers_credential_and_hop_by_hop_headers_stay_here() {
        let local = headers(&[
            ("host", "127.0.0.1:8001"),
            ("authorization", "Bearer stolen"),
            ("cookie", "drover-ui=x"),
            ("connection", "keep-alive, x-private"),
            ("x-private", "1"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("origin", "http://127.0.0.1:8001"),
            ("accept", "application/json"),
            ("content-type", "application/yaml"),
        ]);
        let up = upstream_headers(&local);
        let mut names: Vec<&str> = up.keys().map(|k| k.as_str()).collect();
        names.sort();
        assert_eq!(names, ["accept", "content-type"]);

        let mut down = headers(&[
            ("set-cookie", "drover-session=s; Secure"),
            ("connection", "close"),
            ("content-type", "text/html"),
        ]);
        downstream_headers(&mut down);
        let names: Vec<&str> = down.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["content-type"]);
    }

    #[test]
    fn the_leader_is_tried_first() {
        let m = vec![(3, "c:1".to_string()), (1, "a:1".into()), (2, "b:1".into())];
        assert_eq!(order_members(m.clone(), 2), ["b:1", "a:1", "c:1"]);
        assert_eq!(order_members(m, 0), ["a:1", "b:1", "c:1"]);
    }

    #[test]
    fn a_wildcard_listening_address_is_dialled_at_the_members_host() {
        assert_eq!(dialable("0.0.0.0:7680", "10.0.0.2:7600"), "10.0.0.2:7680");
        assert_eq!(dialable("[::]:7680", "0.0.0.0:7600"), "127.0.0.1:7680");
        assert_eq!(dialable("10.0.0.3:7680", "10.0.0.2:7600"), "10.0.0.3:7680");
        assert_eq!(dialable("[::1]:7680", "x:1"), "[::1]:7680");
    }
}
