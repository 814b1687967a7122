//! Credentials: every call carries `authorization: Bearer <token>`.

use drover_proto::reason::Reason;
use tonic::metadata::MetadataValue;
use tonic::{Request, Status};

/// gRPC messages may be this large (snapshots, big lists).
pub const MAX_MESSAGE: usize = 256 << 20;

/// The metadata value for a token.
pub fn bearer(token: &str) -> MetadataValue<tonic::metadata::Ascii> {
    MetadataValue::try_from(format!("Bearer {token}"))
        .unwrap_or_else(|_| MetadataValue::from_static("Bearer invalid"))
}

/// Compares without leaking where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token a request carries, if any.
pub fn token_of<T>(req: &Request<T>) -> Option<&str> {
    req.metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// Refuses the request unless it carries `expected`.
pub fn check<T>(req: &Request<T>, expected: &str, what: &str) -> Result<(), Status> {
    match token_of(req) {
        None => Err(Reason::Unauthorized.status(format!(
            "no token: {what} needs a token (`drover --token T`, or a client config from the server's data dir)"
        ))),
        Some(t) if !expected.is_empty() && same(t.as_bytes(), expected.as_bytes()) => Ok(()),
        Some(_) => Err(Reason::Forbidden.status(format!(
            "wrong token for {what}: use the admin token from the server's client.yaml"
        ))),
    }
}

/// Constant-time equality of two tokens (false when `expected` is empty).
pub fn same_token(given: &str, expected: &str) -> bool {
    !expected.is_empty() && same(given.as_bytes(), expected.as_bytes())
}
