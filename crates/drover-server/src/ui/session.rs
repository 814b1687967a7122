//! Dashboard sessions: the cookie `/ui/login` sets and every other `/ui`
//! request must carry, and the CSRF token every write must carry.
//!
//! A session is stateless: its cookie holds who signed in (role, name),
//! the credential it is bound to (the admin token's [`token_mark`], or a
//! client certificate's serial), when it expires and a random id, signed
//! with HMAC-SHA256 under a key every member derives from the CA key
//! ([`crate::trust::Trust::session_key`]). So any member accepts a cookie
//! another made, and no one without the CA key can make one. The binding
//! is checked on every request ([`Session::check_binding`]): once the
//! admin token is rotated or the certificate revoked, its sessions end.
//!
//! The CSRF token is an HMAC of the session's id under the same key: a
//! page embeds it, and a write sends it back in `x-csrf-token` (or the
//! form field `csrf`). A page of another site can neither read it nor
//! send the cookie (`SameSite=Strict`).
//!
//! Pure: time comes in as an argument.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use drover_pki::revoke::token_mark;
use ring::hmac;
use serde::{Deserialize, Serialize};

/// The cookie's name.
pub const COOKIE: &str = "drover_session";

/// How long a session lasts at most (a certificate's session also ends
/// with the certificate).
pub const SESSION_SECONDS: u64 = 8 * 3600;

/// A cookie longer than this is refused before it is read.
pub const MAX_COOKIE_BYTES: usize = 2048;

/// What a session may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UiRole {
    /// Everything a viewer may, and the admin actions.
    Admin,
    /// Read everything but Secret values.
    Viewer,
}

impl UiRole {
    pub fn as_str(self) -> &'static str {
        match self {
            UiRole::Admin => "admin",
            UiRole::Viewer => "viewer",
        }
    }
}

/// The credential a session was made from, and lives only as long as.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Binding {
    /// The admin token, by its [`token_mark`].
    Token(u64),
    /// A client certificate, by its serial.
    Cert(String),
}

/// A signed-in browser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub role: UiRole,
    /// Who: `admin-token`, or the certificate's name.
    pub who: String,
    pub binding: Binding,
    /// Unix seconds.
    pub expires: u64,
    /// Random, hex: what the CSRF token is made from.
    pub id: String,
}

/// Why a request's session is refused: a reason code, never text to
/// branch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("not signed in: open /ui/login and sign in with the admin token or a viewer or admin certificate")]
    Missing,
    #[error("the session cookie is malformed: sign in again at /ui/login")]
    Malformed,
    #[error("the session cookie's signature does not match: sign in again at /ui/login")]
    BadSignature,
    #[error("the session expired: sign in again at /ui/login")]
    Expired,
    #[error("the admin token this session was made with was rotated: sign in again with the new token (DATA_DIR/client.yaml)")]
    TokenRotated,
    #[error("the certificate this session was made with was revoked: ask an admin for a new client config (drover access issue)")]
    CertRevoked,
}

impl Session {
    /// A new session for `who`, bound to `binding`, lasting
    /// [`SESSION_SECONDS`] from `now` or until `not_after`, whichever
    /// comes first.
    pub fn new(
        role: UiRole,
        who: &str,
        binding: Binding,
        now: u64,
        not_after: Option<u64>,
    ) -> Session {
        let id: [u8; 16] = rand::random();
        let expires = (now + SESSION_SECONDS).min(not_after.unwrap_or(u64::MAX));
        Session {
            role,
            who: who.to_string(),
            binding,
            expires,
            id: hex(&id),
        }
    }

    /// The cookie's value: the session (JSON, base64url) and its HMAC.
    pub fn seal(&self, key: &hmac::Key) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let body = B64.encode(json);
        let tag = hmac::sign(key, body.as_bytes());
        format!("{body}.{}", B64.encode(tag.as_ref()))
    }

    /// The session of a cookie value, if its signature holds and it has
    /// not expired at `now`.
    pub fn open(value: &str, key: &hmac::Key, now: u64) -> Result<Session, SessionError> {
        if value.len() > MAX_COOKIE_BYTES {
            return Err(SessionError::Malformed);
        }
        let (body, tag) = value.split_once('.').ok_or(SessionError::Malformed)?;
        let tag = B64.decode(tag).map_err(|_| SessionError::Malformed)?;
        hmac::verify(key, body.as_bytes(), &tag).map_err(|_| SessionError::BadSignature)?;
        let json = B64.decode(body).map_err(|_| SessionError::Malformed)?;
        let s: Session = serde_json::from_slice(&json).map_err(|_| SessionError::Malformed)?;
        if s.expires <= now {
            return Err(SessionError::Expired);
        }
        Ok(s)
    }

    /// Whether the credential the session was made from still holds:
    /// `admin_token` is the one in force, `revoked` tells a revoked serial.
    pub fn check_binding(
        &self,
        admin_token: &str,
        revoked: impl Fn(&str) -> bool,
    ) -> Result<(), SessionError> {
        match &self.binding {
            Binding::Token(mark) => {
                if admin_token.is_empty() || token_mark(admin_token) != *mark {
                    Err(SessionError::TokenRotated)
                } else {
                    Ok(())
                }
            }
            Binding::Cert(serial) if revoked(serial) => Err(SessionError::CertRevoked),
            Binding::Cert(_) => Ok(()),
        }
    }

    /// The CSRF token of this session.
    pub fn csrf(&self, key: &hmac::Key) -> String {
        let tag = hmac::sign(key, format!("csrf:{}", self.id).as_bytes());
        B64.encode(tag.as_ref())
    }

    /// Whether `given` is this session's CSRF token (constant time).
    pub fn csrf_matches(&self, key: &hmac::Key, given: &str) -> bool {
        match B64.decode(given.trim()) {
            Ok(tag) => hmac::verify(key, format!("csrf:{}", self.id).as_bytes(), &tag).is_ok(),
            Err(_) => false,
        }
    }

    /// The `set-cookie` header value that stores this session.
    pub fn set_cookie(&self, key: &hmac::Key, now: u64) -> String {
        format!(
            "{COOKIE}={}; Path=/ui; Max-Age={}; HttpOnly; Secure; SameSite=Strict",
            self.seal(key),
            self.expires.saturating_sub(now)
        )
    }
}

/// The `set-cookie` header value that removes the session cookie.
pub fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/ui; Max-Age=0; HttpOnly; Secure; SameSite=Strict")
}

/// The session cookie's value among a request's `cookie` headers.
pub fn cookie_value<'a>(headers: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    headers
        .into_iter()
        .flat_map(|h| h.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, v)| v)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: &[u8]) -> hmac::Key {
        hmac::Key::new(hmac::HMAC_SHA256, seed)
    }

    const NOW: u64 = 1_800_000_000;

    #[test]
    fn a_sealed_session_opens_with_its_key_only_and_until_it_expires() {
        let k = key(b"one");
        let s = Session::new(
            UiRole::Viewer,
            "alice",
            Binding::Cert("0a".into()),
            NOW,
            None,
        );
        assert_eq!(s.expires, NOW + SESSION_SECONDS);
        let sealed = s.seal(&k);
        assert_eq!(Session::open(&sealed, &k, NOW).unwrap(), s);
        assert_eq!(
            Session::open(&sealed, &key(b"two"), NOW),
            Err(SessionError::BadSignature)
        );
        assert_eq!(
            Session::open(&sealed, &k, s.expires),
            Err(SessionError::Expired)
        );
        assert_eq!(Session::open("x", &k, NOW), Err(SessionError::Malformed));
        assert_eq!(
            Session::open(&"a".repeat(MAX_COOKIE_BYTES + 1), &k, NOW),
            Err(SessionError::Malformed)
        );
    }

    #[test]
    fn a_changed_payload_is_refused() {
        let k = key(b"one");
        let s = Session::new(UiRole::Viewer, "bob", Binding::Cert("0b".into()), NOW, None);
        let sealed = s.seal(&k);
        let (_, tag) = sealed.split_once('.').unwrap();
        let mut forged = s.clone();
        forged.role = UiRole::Admin;
        let body = B64.encode(serde_json::to_vec(&forged).unwrap());
        assert_eq!(
            Session::open(&format!("{body}.{tag}"), &k, NOW),
            Err(SessionError::BadSignature)
        );
    }

    #[test]
    fn a_certificate_session_ends_with_its_certificate() {
        let s = Session::new(
            UiRole::Admin,
            "ops",
            Binding::Cert("0c".into()),
            NOW,
            Some(NOW + 60),
        );
        assert_eq!(s.expires, NOW + 60);
    }

    #[test]
    fn the_binding_ends_with_a_rotated_token_or_a_revoked_certificate() {
        let t = Session::new(
            UiRole::Admin,
            "admin-token",
            Binding::Token(token_mark("old")),
            NOW,
            None,
        );
        assert_eq!(t.check_binding("old", |_| false), Ok(()));
        assert_eq!(
            t.check_binding("new", |_| false),
            Err(SessionError::TokenRotated)
        );
        assert_eq!(
            t.check_binding("", |_| false),
            Err(SessionError::TokenRotated)
        );
        let c = Session::new(UiRole::Viewer, "v", Binding::Cert("0d".into()), NOW, None);
        assert_eq!(c.check_binding("old", |s| s == "0e"), Ok(()));
        assert_eq!(
            c.check_binding("old", |s| s == "0d"),
            Err(SessionError::CertRevoked)
        );
    }

    #[test]
    fn csrf_tokens_belong_to_one_session() {
        let k = key(b"one");
        let a = Session::new(UiRole::Admin, "a", Binding::Token(1), NOW, None);
        let b = Session::new(UiRole::Admin, "a", Binding::Token(1), NOW, None);
        assert!(a.csrf_matches(&k, &a.csrf(&k)));
        assert!(!a.csrf_matches(&k, &b.csrf(&k)));
        assert!(!a.csrf_matches(&k, ""));
        assert!(!a.csrf_matches(&key(b"two"), &a.csrf(&k)));
    }

    #[test]
    fn the_cookie_is_found_among_others_and_carries_its_attributes() {
        assert_eq!(
            cookie_value(["a=1; drover_session=xyz.abc", "b=2"]),
            Some("xyz.abc")
        );
        assert_eq!(cookie_value(["drover_sessionx=1"]), None);
        let k = key(b"one");
        let s = Session::new(UiRole::Viewer, "v", Binding::Token(1), NOW, None);
        let c = s.set_cookie(&k, NOW);
        for attr in [
            "HttpOnly",
            "Secure",
            "SameSite=Strict",
            "Path=/ui",
            "Max-Age=28800",
        ] {
            assert!(c.contains(attr), "{c} lacks {attr}");
        }
    }
}
