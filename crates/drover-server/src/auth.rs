//! Who calls: the client certificate of the connection (verified against
//! the cluster CA by TLS, see [`drover_pki::net`]) or, for admin clients
//! that use it, `authorization: Bearer <admin token>`.

use drover_pki::net::PeerInfo;
use drover_pki::revoke::Revocations;
use drover_pki::{PeerCert, Role};
use std::time::SystemTime;
use tonic::metadata::MetadataValue;
use tonic::Request;

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A control-plane member (member certificate).
    Member(u64),
    /// A node (node certificate): its name, the certificate's serial and
    /// the SHA-256 (hex) of its public key.
    Node {
        name: String,
        serial: String,
        key: String,
    },
    /// The admin token or an admin certificate.
    Admin(String),
    /// A viewer certificate: reads, watches, logs.
    Viewer(String),
    /// A metrics certificate: `/metrics` and `/status` only.
    Metrics(String),
    /// A client certificate an admin revoked (`drover access revoke`):
    /// who it was for, and its serial.
    Revoked { who: String, serial: String },
    /// No credential (or an expired certificate).
    Anonymous,
}

impl std::fmt::Display for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Caller::Member(id) => write!(f, "member {id:016x}"),
            Caller::Node { name, .. } => write!(f, "node {name}"),
            Caller::Admin(n) => write!(f, "admin {n}"),
            Caller::Viewer(n) => write!(f, "viewer {n}"),
            Caller::Metrics(n) => write!(f, "metrics reader {n}"),
            Caller::Revoked { who, serial } => {
                write!(f, "the revoked certificate {serial} of {who}")
            }
            Caller::Anonymous => f.write_str("an anonymous caller"),
        }
    }
}

/// The connection a request came on (absent only in in-process calls that
/// bypass the listener).
pub fn peer<T>(req: &Request<T>) -> Option<&PeerInfo> {
    req.extensions().get::<PeerInfo>()
}

/// Who sent `req`: its certificate first, then the admin token (a
/// connection let in with the token remembers it, so that it is cut when
/// the token is replaced).
pub fn caller<T>(req: &Request<T>, admin_token: &str, revocations: &Revocations) -> Caller {
    let peer = peer(req);
    if let Some(cert) = peer.and_then(|p| p.cert.as_ref()) {
        if let Some(c) = of_certificate(cert, revocations) {
            return c;
        }
    }
    match token_of(req) {
        Some(t) if same_token(t, admin_token) => {
            if let Some(p) = peer {
                p.token.used(revocations.token());
            }
            Caller::Admin("admin-token".into())
        }
        _ => Caller::Anonymous,
    }
}

/// Who a verified client certificate speaks for; `None` once it expired
/// (a connection may outlive its certificate: an expired one counts for
/// nothing). A revoked client certificate is [`Caller::Revoked`].
pub fn of_certificate(cert: &PeerCert, revocations: &Revocations) -> Option<Caller> {
    if cert.not_after <= SystemTime::now() {
        return None;
    }
    let client = |who: String, c: Caller| {
        if revocations.is_revoked(&cert.serial) {
            Caller::Revoked {
                who,
                serial: cert.serial.clone(),
            }
        } else {
            c
        }
    };
    Some(match &cert.role {
        Role::Member(id) => Caller::Member(*id),
        Role::Node(name) => Caller::Node {
            name: name.clone(),
            serial: cert.serial.clone(),
            key: cert.key.clone(),
        },
        Role::Admin(n) => client(format!("admin {n}"), Caller::Admin(n.clone())),
        Role::Viewer(n) => client(format!("viewer {n}"), Caller::Viewer(n.clone())),
        Role::Metrics(n) => client(format!("metrics reader {n}"), Caller::Metrics(n.clone())),
    })
}

/// The refusal's words for a revoked certificate.
pub fn revoked_message(who: &str, serial: &str) -> String {
    format!(
        "the certificate of {who} (serial {serial}) was revoked by an admin (drover access revoke): ask an admin for a new client config (drover access issue)"
    )
}

/// gRPC messages may be this large (snapshots, big lists).
pub const MAX_MESSAGE: usize = 256 << 20;

/// The metadata value for a token.
pub fn bearer(token: &str) -> MetadataValue<tonic::metadata::Ascii> {
    MetadataValue::try_from(format!("Bearer {token}"))
        .unwrap_or_else(|_| MetadataValue::from_static("Bearer invalid"))
}

use drover_pki::token::same;

/// The token a request carries, if any.
pub fn token_of<T>(req: &Request<T>) -> Option<&str> {
    req.metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// Constant-time equality of two tokens (false when `expected` is empty).
pub fn same_token(given: &str, expected: &str) -> bool {
    !expected.is_empty() && same(given.as_bytes(), expected.as_bytes())
}
