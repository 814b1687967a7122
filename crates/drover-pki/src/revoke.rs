//! What a server no longer accepts, for the connections already open: the
//! serials of revoked certificates and the admin token in force. A server
//! keeps one [`Revocations`] in its connection [`crate::net::Gate`]; each
//! connection it hands out watches it and fails its next read or write
//! once its certificate is revoked, or once the admin token it was let in
//! with is replaced. Its streams (watches, logs, exec) end with it.
//!
//! Requests are checked one by one by the server's authorization, which
//! gives the reason; cutting the connection is for what is already open.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::watch;

/// What is refused now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Revoked {
    /// Serials (hex, as [`crate::PeerCert::serial`]) of revoked certificates.
    pub serials: Arc<HashSet<String>>,
    /// The [`token_mark`] of the admin token in force (0: none yet).
    pub token: u64,
}

/// The revocations of one server, shared by its listeners.
#[derive(Debug)]
pub struct Revocations(watch::Sender<Revoked>);

impl Default for Revocations {
    fn default() -> Self {
        Revocations(watch::channel(Revoked::default()).0)
    }
}

impl Revocations {
    pub fn new() -> Arc<Revocations> {
        Arc::new(Revocations::default())
    }

    /// Replaces the revoked serials; connections of a newly revoked
    /// certificate are cut.
    pub fn set_serials(&self, serials: HashSet<String>) {
        self.0.send_if_modified(|r| {
            if *r.serials == serials {
                return false;
            }
            r.serials = Arc::new(serials);
            true
        });
    }

    /// The admin token in force is now `mark`'s: connections let in with
    /// another are cut.
    pub fn set_token(&self, mark: u64) {
        self.0.send_if_modified(|r| {
            if r.token == mark {
                return false;
            }
            r.token = mark;
            true
        });
    }

    pub fn is_revoked(&self, serial: &str) -> bool {
        self.0.borrow().serials.contains(serial)
    }

    /// The mark of the admin token in force.
    pub fn token(&self) -> u64 {
        self.0.borrow().token
    }

    pub fn subscribe(&self) -> watch::Receiver<Revoked> {
        self.0.subscribe()
    }
}

/// A short fingerprint of a token (the first 8 bytes of its SHA-256,
/// never 0): what a connection remembers of the token it used, so that
/// it is cut when that token is replaced.
pub fn token_mark(token: &str) -> u64 {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&d.as_ref()[..8]);
    u64::from_le_bytes(b).max(1)
}

/// The token a connection was let in with ([`token_mark`]; 0: none),
/// shared by every request on it.
#[derive(Debug, Default)]
pub struct TokenUse(AtomicU64);

impl TokenUse {
    /// A request on this connection was let in with the token of `mark`.
    pub fn used(&self, mark: u64) {
        self.0.store(mark, Ordering::Relaxed);
    }

    pub fn mark(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Why a connection is cut now, if it is: its certificate `serial` was
/// revoked after it opened (`revoked_at_open` false), or the token it was
/// let in with is no longer the one in force.
pub fn cut_reason(
    r: &Revoked,
    serial: Option<&str>,
    revoked_at_open: bool,
    token: &TokenUse,
) -> Option<&'static str> {
    if !revoked_at_open && serial.is_some_and(|s| r.serials.contains(s)) {
        return Some("its certificate was revoked");
    }
    let used = token.mark();
    if used != 0 && r.token != 0 && used != r.token {
        return Some("the admin token it used was replaced");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_cut_for_a_revocation_after_it_opened_or_a_new_token() {
        let revs = Revocations::new();
        let old = token_mark("drover-admin-old");
        revs.set_token(old);
        let by_cert = TokenUse::default();
        let by_token = TokenUse::default();
        by_token.used(old);
        let r = revs.subscribe().borrow().clone();
        assert_eq!(cut_reason(&r, Some("ab"), false, &by_cert), None);
        assert_eq!(cut_reason(&r, None, false, &by_token), None);

        revs.set_serials(["ab".to_string()].into());
        let r = revs.subscribe().borrow().clone();
        assert!(cut_reason(&r, Some("ab"), false, &by_cert).is_some());
        // Already revoked when it opened: each request is refused with its
        // reason instead.
        assert_eq!(cut_reason(&r, Some("ab"), true, &by_cert), None);
        assert_eq!(cut_reason(&r, Some("cd"), false, &by_cert), None);

        revs.set_token(token_mark("drover-admin-new"));
        let r = revs.subscribe().borrow().clone();
        assert!(cut_reason(&r, None, false, &by_token).is_some());
        by_token.used(token_mark("drover-admin-new"));
        assert_eq!(cut_reason(&r, None, false, &by_token), None);
    }

    #[test]
    fn marks_differ_by_token_and_are_never_zero() {
        assert_ne!(token_mark("a"), token_mark("b"));
        assert_eq!(token_mark("a"), token_mark("a"));
        assert_ne!(token_mark(""), 0);
    }
}
