//! Join tokens: `drover-<kind>-<sha256 of the CA certificate>-<secret>`.
//!
//! The digest lets a joining machine check the server's CA before it sends
//! anything (kubeadm's `--discovery-token-ca-cert-hash`, Swarm's
//! `SWMTKN-1-<digest>-<secret>`); the secret proves it may join. Servers
//! and nodes have separate tokens: a node token makes a node certificate,
//! never a member or an admin.

use crate::Error;

/// Which token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// Joins a control-plane member (`DATA_DIR/server-token`).
    Server,
    /// Joins a node (`DATA_DIR/node-token`).
    Node,
}

impl TokenKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenKind::Server => "server",
            TokenKind::Node => "node",
        }
    }
}

/// A parsed join token.
#[derive(Clone, PartialEq, Eq)]
pub struct JoinToken {
    pub kind: TokenKind,
    /// SHA-256 of the CA certificate, hex.
    pub ca_digest: String,
    pub secret: String,
}

impl std::fmt::Debug for JoinToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinToken")
            .field("kind", &self.kind)
            .field("ca_digest", &self.ca_digest)
            .finish_non_exhaustive()
    }
}

impl JoinToken {
    /// A new token with a random 128-bit secret.
    pub fn generate(kind: TokenKind, ca_digest: &str) -> JoinToken {
        let bytes: [u8; 16] = rand::random();
        JoinToken {
            kind,
            ca_digest: ca_digest.to_string(),
            secret: crate::hex(&bytes),
        }
    }

    /// Reads a token; `flag` names where it came from in the error.
    pub fn parse(text: &str, flag: &str) -> Result<JoinToken, Error> {
        let t = text.trim();
        let bad = |why: &str| {
            Error::BadToken(format!(
                "{flag}: {why}; a join token looks like drover-node-<64 hex digits>-<secret> (the file node-token or server-token in a server's data dir)"
            ))
        };
        let rest = t
            .strip_prefix("drover-")
            .ok_or_else(|| bad("it does not start with drover-"))?;
        let (kind, rest) = rest.split_once('-').ok_or_else(|| bad("it has no kind"))?;
        let kind = match kind {
            "server" => TokenKind::Server,
            "node" => TokenKind::Node,
            other => {
                return Err(bad(&format!(
                    "{other:?} is not a token kind (server or node)"
                )))
            }
        };
        let (digest, secret) = rest
            .split_once('-')
            .ok_or_else(|| bad("it has no CA digest"))?;
        if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad("its CA digest is not 64 hex digits"));
        }
        if secret.len() < 16 || !secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad("its secret is shorter than 16 printable characters"));
        }
        Ok(JoinToken {
            kind,
            ca_digest: digest.to_ascii_lowercase(),
            secret: secret.to_string(),
        })
    }

    /// Whether `given` is this token's secret (constant time).
    pub fn secret_matches(&self, given: &JoinToken) -> bool {
        self.kind == given.kind
            && self.ca_digest == given.ca_digest
            && same(self.secret.as_bytes(), given.secret.as_bytes())
    }
}

impl std::fmt::Display for JoinToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "drover-{}-{}-{}",
            self.kind.as_str(),
            self.ca_digest,
            self.secret
        )
    }
}

/// Compares without leaking where the first difference is.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_bad_ones_say_why() {
        let d = "ab".repeat(32);
        let t = JoinToken::generate(TokenKind::Node, &d);
        let back = JoinToken::parse(&t.to_string(), "--token").unwrap();
        assert_eq!(back, t);
        assert!(t.secret_matches(&back));
        let other = JoinToken::generate(TokenKind::Node, &d);
        assert!(!t.secret_matches(&other));
        let mut server = back.clone();
        server.kind = TokenKind::Server;
        assert!(!t.secret_matches(&server));
        for bad in [
            "",
            "drover-join-abc",
            &format!("drover-node-{}-short", d),
            &format!("drover-node-{}-{}", "zz".repeat(32), "s".repeat(20)),
            &format!("drover-admin-{}-{}", d, "s".repeat(20)),
        ] {
            let e = JoinToken::parse(bad, "--token").unwrap_err();
            assert!(e.to_string().starts_with("--token: "), "{e}");
        }
    }
}
