//! The dashboard through the proxy (`drover ui`). The browser's leg is
//! plain HTTP on loopback, where the server's `Secure` cookie cannot go:
//! the proxy signs in to the server itself with the user's credential and
//! keeps that session (renewed when the server refuses it), and the
//! browser gets a local cookie of its own only by opening the URL the
//! proxy printed, which carries a random one-time secret (as Jupyter
//! does). Other local users and other pages have neither.

use super::upstream::{Outgoing, Upstream, UpstreamError};
use hyper::header::HeaderMap;
use hyper::{Method, StatusCode};
use rand::Rng;
use std::collections::HashSet;
use std::sync::Mutex;

/// The local cookie's name.
pub const COOKIE: &str = "drover-ui";
/// The path that takes the one-time secret.
pub const OPEN_PATH: &str = "/ui/open";
/// At most this many browsers signed in at once (each opening needs a new
/// secret, so this only bounds memory).
const MAX_LOCAL_SESSIONS: usize = 64;

fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    rand::rng().fill(&mut b[..]);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Why the dashboard's own sign-in failed.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error("{0}")]
    Upstream(#[from] UpstreamError),
    /// The server refused the credential of the client config.
    #[error("the server refused the dashboard sign-in with this client config ({status}, reason {reason}): use an admin token or an admin or viewer certificate")]
    Refused { status: StatusCode, reason: String },
}

impl SignInError {
    pub fn reason(&self) -> &str {
        match self {
            SignInError::Upstream(e) => e.reason(),
            SignInError::Refused { .. } => "ProxySignInRefused",
        }
    }
}

/// The local side: the one-time secret and the browsers that used it.
pub struct Local {
    secret: Mutex<Option<String>>,
    sessions: Mutex<HashSet<String>>,
}

impl Default for Local {
    fn default() -> Self {
        Local::new()
    }
}

impl Local {
    pub fn new() -> Local {
        Local {
            secret: Mutex::new(Some(random_hex(24))),
            sessions: Mutex::new(HashSet::new()),
        }
    }

    /// The path with the secret to print (`None` once used).
    pub fn open_path(&self) -> Option<String> {
        self.secret
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|s| format!("{OPEN_PATH}?secret={s}"))
    }

    /// Trades the one-time secret of `query` for a local session cookie
    /// value; `None` when it is wrong or already used.
    pub fn open(&self, query: &str) -> Option<String> {
        let given = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("secret="))
            .unwrap_or("");
        let mut secret = self.secret.lock().unwrap_or_else(|e| e.into_inner());
        let ok = secret
            .as_ref()
            .is_some_and(|s| drover_pki::token::same(s.as_bytes(), given.as_bytes()));
        if !ok {
            return None;
        }
        *secret = None;
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if sessions.len() >= MAX_LOCAL_SESSIONS {
            sessions.clear();
        }
        let id = random_hex(32);
        sessions.insert(id.clone());
        Some(id)
    }

    /// A fresh one-time secret (after the last was used), for the next
    /// browser; returns the path to open.
    pub fn renew_secret(&self) -> String {
        let s = random_hex(24);
        *self.secret.lock().unwrap_or_else(|e| e.into_inner()) = Some(s.clone());
        format!("{OPEN_PATH}?secret={s}")
    }

    /// Whether the request's cookies hold a local session.
    pub fn signed_in(&self, headers: &HeaderMap) -> bool {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        cookie_values(headers, COOKIE).any(|v| {
            sessions
                .iter()
                .any(|s| drover_pki::token::same(s.as_bytes(), v.as_bytes()))
        })
    }

    /// Ends the local sessions the request's cookies hold.
    pub fn sign_out(&self, headers: &HeaderMap) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        for v in cookie_values(headers, COOKIE) {
            sessions.remove(v);
        }
    }
}

/// The values of the cookie `name` in the request's `Cookie` headers.
fn cookie_values<'a>(headers: &'a HeaderMap, name: &'a str) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(hyper::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(move |kv| {
            let (k, v) = kv.trim().split_once('=')?;
            (k == name).then_some(v)
        })
}

/// The local cookie: no `Secure` (the browser's leg is plain HTTP on
/// loopback), but `HttpOnly` and `SameSite=Strict`, for this session of
/// the browser only.
pub fn set_cookie(id: &str) -> String {
    format!("{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict")
}

/// Removes the local cookie.
pub fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// The session the proxy holds on the server: the `name=value` of the
/// server's cookie, and how many sign-ins made it (so that concurrent
/// refusals renew it once).
#[derive(Default)]
pub struct ServerSession {
    cookie: Mutex<Option<(String, u64)>>,
    renewing: tokio::sync::Mutex<u64>,
}

impl ServerSession {
    /// The cookie to send, and its generation.
    pub fn current(&self) -> Option<(String, u64)> {
        self.cookie
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Signs in again unless someone already did since generation `seen`.
    pub async fn renew(
        &self,
        up: &Upstream,
        seen: Option<u64>,
        token: &str,
    ) -> Result<(), SignInError> {
        let mut gen = self.renewing.lock().await;
        // Someone signed in since the caller's cookie was made (or since
        // the caller found none): use theirs.
        if seen.map_or(*gen > 0, |s| s < *gen) {
            return Ok(());
        }
        let cookie = sign_in(up, token).await?;
        *gen += 1;
        *self.cookie.lock().unwrap_or_else(|e| e.into_inner()) = Some((cookie, *gen));
        Ok(())
    }
}

/// `POST /ui/login` on a member with the user's credential: the admin
/// token as the form's `token`, or the client certificate on the
/// connection. Answers the session cookie's `name=value`.
async fn sign_in(up: &Upstream, token: &str) -> Result<String, SignInError> {
    let body = if token.is_empty() {
        "use=certificate".to_string()
    } else {
        format!("token={}", form_escape(token))
    };
    let mut headers = HeaderMap::new();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/x-www-form-urlencoded"),
    );
    let req = Outgoing {
        method: Method::POST,
        target: "/ui/login".into(),
        headers,
        body: body.into_bytes().into(),
        repeatable: true,
    };
    let resp = up.send(&req, None).await?;
    let status = resp.status();
    let cookie = resp
        .headers()
        .get_all(hyper::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .map(str::trim)
        .find(|kv| kv.split_once('=').is_some_and(|(_, v)| !v.is_empty()))
        .map(str::to_string);
    match cookie {
        Some(c) if status == StatusCode::SEE_OTHER => Ok(c),
        _ => Err(SignInError::Refused {
            status,
            reason: resp
                .headers()
                .get("x-drover-reason")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("none")
                .to_string(),
        }),
    }
}

/// `application/x-www-form-urlencoded` escaping of a value.
fn form_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Whether a member's answer says the session was not accepted: 401, or a
/// page's redirect to the sign-in form.
pub fn session_refused(status: StatusCode, headers: &HeaderMap) -> bool {
    status == StatusCode::UNAUTHORIZED
        || (status == StatusCode::SEE_OTHER
            && headers
                .get(hyper::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|l| l.starts_with("/ui/login")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn with_cookie(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            hyper::header::COOKIE,
            HeaderValue::from_str(v).expect("value"),
        );
        h
    }

    #[test]
    fn the_secret_opens_one_browser_session_once() {
        let l = Local::new();
        let path = l.open_path().expect("a secret");
        let query = path.split_once('?').expect("a query").1;
        assert!(l.open("secret=wrong").is_none());
        assert!(l.open("").is_none());
        let id = l.open(query).expect("the secret opens");
        assert!(l.open(query).is_none(), "a secret works once");
        assert!(l.open_path().is_none());
        assert!(l.signed_in(&with_cookie(&format!("a=b; {COOKIE}={id}"))));
        assert!(!l.signed_in(&with_cookie(&format!("{COOKIE}=x{id}"))));
        assert!(!l.signed_in(&HeaderMap::new()));
        l.sign_out(&with_cookie(&format!("{COOKIE}={id}")));
        assert!(!l.signed_in(&with_cookie(&format!("{COOKIE}={id}"))));
        let next = l.renew_secret();
        assert!(l.open(next.split_once('?').expect("q").1).is_some());
    }

    #[test]
    fn the_local_cookie_is_http_only_and_strict() {
        let c = set_cookie("abc");
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Strict"));
        assert!(clear_cookie().contains("Max-Age=0"));
    }

    #[test]
    fn a_refused_session_is_a_401_or_the_redirect_to_sign_in() {
        let mut h = HeaderMap::new();
        assert!(session_refused(StatusCode::UNAUTHORIZED, &h));
        h.insert(
            hyper::header::LOCATION,
            HeaderValue::from_static("/ui/login"),
        );
        assert!(session_refused(StatusCode::SEE_OTHER, &h));
        h.insert(hyper::header::LOCATION, HeaderValue::from_static("/ui"));
        assert!(!session_refused(StatusCode::SEE_OTHER, &h));
        assert!(!session_refused(StatusCode::FORBIDDEN, &h));
    }

    #[test]
    fn form_values_are_escaped() {
        assert_eq!(
            form_escape("drover-admin-ab+c/="),
            "drover-admin-ab%2Bc%2F%3D"
        );
    }
}
