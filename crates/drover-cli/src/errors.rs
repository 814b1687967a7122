//! Errors as kubectl words them: `Error from server (NotFound): daemonsets.apps "x" not found`
//! for what a server refused, `error: …` for everything else.

use crate::client::ClientError;
use drover_proto::reason::Reason;
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

/// The Kubernetes status reason kubectl shows for a server's refusal: the
/// one the server sent; without one (an older server, or a status the
/// transport made up) the one that goes with the gRPC code.
pub fn reason(code: Code, reason: Option<Reason>) -> &'static str {
    if let Some(r) = reason {
        return r.kubernetes();
    }
    match code {
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::Aborted => "Conflict",
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
pub fn server_line(code: Code, why: Option<Reason>, message: &str) -> String {
    format!("Error from server ({}): {message}", reason(code, why))
}

/// Turns a client error into what the commands return: a server's answer
/// worded like kubectl's, anything else (no server reachable, bad config)
/// as it is.
pub fn kube(e: ClientError) -> anyhow::Error {
    match refusal(&e) {
        Some(line) => Reported(line).into(),
        None => e.into(),
    }
}

/// kubectl's line for a server's refusal; `None` for an error that is not
/// a server's answer.
pub fn refusal(e: &ClientError) -> Option<String> {
    match e {
        ClientError::Server {
            code,
            reason,
            message,
        } => Some(server_line(*code, *reason, message)),
        _ => None,
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
            reason: Some(Reason::NotFound),
            message: "daemonsets.apps \"x\" not found".into(),
        });
        assert_eq!(
            error_text(&e),
            "Error from server (NotFound): daemonsets.apps \"x\" not found"
        );
        let e = kube(ClientError::Server {
            code: Code::InvalidArgument,
            reason: Some(Reason::Invalid),
            message: "DaemonSet.apps \"x\" is invalid: spec.selector: Required value".into(),
        });
        assert!(error_text(&e).starts_with("Error from server (Invalid): DaemonSet.apps"));
        let e = kube(ClientError::Server {
            code: Code::Aborted,
            reason: Some(Reason::Conflict),
            message: "Operation cannot be fulfilled".into(),
        });
        assert!(error_text(&e).starts_with("Error from server (Conflict): "));
        // Drover's own control-plane reasons read as kubectl's.
        let e = kube(ClientError::from(
            Reason::NotLeader.status("not the leader"),
        ));
        assert_eq!(
            error_text(&e),
            "Error from server (ServiceUnavailable): not the leader"
        );
    }

    #[test]
    fn the_reason_is_data_not_text() {
        // The reason decides, whatever the message says.
        assert_eq!(
            reason(Code::InvalidArgument, Some(Reason::BadRequest)),
            "BadRequest"
        );
        assert_eq!(
            server_line(
                Code::InvalidArgument,
                Some(Reason::Invalid),
                "Pod \"p\": spec.containers: Required value"
            ),
            "Error from server (Invalid): Pod \"p\": spec.containers: Required value"
        );
        // Without one (an older server, a transport error), the code's.
        assert_eq!(
            server_line(Code::InvalidArgument, None, "x \"y\" is invalid: z"),
            "Error from server (BadRequest): x \"y\" is invalid: z"
        );
        assert_eq!(reason(Code::Aborted, None), "Conflict");
        assert_eq!(reason(Code::DeadlineExceeded, None), "Timeout");
        assert_eq!(reason(Code::Unimplemented, None), "NotImplemented");
        assert_eq!(reason(Code::Internal, None), "InternalError");
    }

    #[test]
    fn other_errors_keep_the_error_prefix() {
        assert_eq!(refusal(&ClientError::Config("x".into())), None);
        let e = kube(ClientError::Config("no cluster configured".into()));
        assert_eq!(error_text(&e), "error: no cluster configured");
        let e = anyhow::anyhow!("bad").context("reading x.yaml");
        assert_eq!(error_text(&e), "error: reading x.yaml: bad");
    }
}
