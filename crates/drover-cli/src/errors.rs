//! Errors as kubectl words them: `Error from server (NotFound): daemonsets.apps "x" not found`
//! for what a server refused, `error: …` for everything else.

use crate::client::ClientError;
use tonic::Code;

/// An error already worded as kubectl prints it, without the `error: `
/// prefix (one line per failure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reported(pub String);

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Reported {}

/// The Kubernetes status reason that matches a gRPC code.
pub fn reason(code: Code, message: &str) -> &'static str {
    match code {
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::Aborted => "Conflict",
        Code::InvalidArgument if message.contains(" is invalid") => "Invalid",
        Code::InvalidArgument | Code::FailedPrecondition => "BadRequest",
        Code::Unauthenticated => "Unauthorized",
        Code::PermissionDenied => "Forbidden",
        Code::OutOfRange => "Expired",
        Code::DeadlineExceeded => "Timeout",
        Code::ResourceExhausted => "TooManyRequests",
        Code::Unimplemented => "NotImplemented",
        Code::Unavailable => "ServiceUnavailable",
        _ => "InternalError",
    }
}

/// The one line kubectl prints for a server's refusal.
pub fn server_line(code: Code, message: &str) -> String {
    format!("Error from server ({}): {message}", reason(code, message))
}

/// Turns a client error into what the commands return: a server's answer
/// worded like kubectl's, anything else (no server reachable, bad config)
/// as it is.
pub fn kube(e: ClientError) -> anyhow::Error {
    match &e {
        ClientError::Server { code, message } => Reported(server_line(*code, message)).into(),
        _ => e.into(),
    }
}

/// The text `drover` prints on stderr for a failed command: a kubectl
/// server error as it is, anything else as `error: …` with its causes.
pub fn error_text(e: &anyhow::Error) -> String {
    match e.downcast_ref::<Reported>() {
        Some(r) => r.0.clone(),
        None => format!("error: {e:#}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_read_like_kubectl() {
        let e = kube(ClientError::Server {
            code: Code::NotFound,
            message: "daemonsets.apps \"x\" not found".into(),
        });
        assert_eq!(
            error_text(&e),
            "Error from server (NotFound): daemonsets.apps \"x\" not found"
        );
        let e = kube(ClientError::Server {
            code: Code::InvalidArgument,
            message: "DaemonSet.apps \"x\" is invalid: spec.selector: Required value".into(),
        });
        assert!(error_text(&e).starts_with("Error from server (Invalid): DaemonSet.apps"));
        let e = kube(ClientError::Server {
            code: Code::Aborted,
            message: "Operation cannot be fulfilled".into(),
        });
        assert!(error_text(&e).starts_with("Error from server (Conflict): "));
    }

    #[test]
    fn other_errors_keep_the_error_prefix() {
        let e = kube(ClientError::Config("no cluster configured".into()));
        assert_eq!(error_text(&e), "error: no cluster configured");
        let e = anyhow::anyhow!("bad").context("reading x.yaml");
        assert_eq!(error_text(&e), "error: reading x.yaml: bad");
    }
}
