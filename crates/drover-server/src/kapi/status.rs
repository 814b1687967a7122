//! Errors as the Kubernetes API server answers them: a `Status` object
//! with the HTTP code, the reason and, for `Invalid`, the field causes
//! (kubectl prints them). This is the one place where an [`ApiError`]
//! becomes an HTTP answer.

use crate::error::ApiError;
use crate::limits::MAX_STATUS_MESSAGE_BYTES;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use drover_api::validation::ErrorType;
use drover_api::Kind;
use serde_json::{json, Value};

/// An HTTP refusal or failure, as a `Status` object.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub code: StatusCode,
    pub reason: &'static str,
    pub message: String,
    pub details: Value,
}

impl Refusal {
    pub fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            reason,
            message: capped(message.into()),
            details: Value::Null,
        }
    }

    /// No credential, or a wrong one.
    pub fn unauthorized(message: impl Into<String>) -> Refusal {
        Refusal::new(StatusCode::UNAUTHORIZED, "Unauthorized", message)
    }

    /// A credential that may not do this.
    pub fn forbidden(message: impl Into<String>) -> Refusal {
        Refusal::new(StatusCode::FORBIDDEN, "Forbidden", message)
    }

    /// A malformed request.
    pub fn bad_request(message: impl Into<String>) -> Refusal {
        Refusal::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    /// A path drover does not serve.
    pub fn not_found(message: impl Into<String>) -> Refusal {
        Refusal::new(StatusCode::NOT_FOUND, "NotFound", message)
    }

    /// A verb the resource does not have.
    pub fn method_not_allowed(message: impl Into<String>) -> Refusal {
        Refusal::new(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", message)
    }

    /// Names the object in `details`, as the API server does.
    pub fn about(mut self, kind: Kind, name: &str) -> Refusal {
        let mut d = match self.details.take() {
            Value::Object(m) => m,
            _ => Default::default(),
        };
        // An Invalid's details already name the kind (`DaemonSet`).
        if !d.contains_key("kind") {
            d.insert("name".into(), json!(name));
            d.insert("group".into(), json!(kind.group()));
            d.insert("kind".into(), json!(kind.plural()));
        }
        self.details = Value::Object(d);
        self
    }

    /// The `Status` object.
    pub fn body(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code.as_u16(),
        });
        if !self.details.is_null() {
            s["details"] = self.details.clone();
        }
        s
    }
}

impl From<ApiError> for Refusal {
    fn from(e: ApiError) -> Refusal {
        let (code, reason) = match &e {
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "NotFound"),
            ApiError::AlreadyExists(_) => (StatusCode::CONFLICT, "AlreadyExists"),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, "Conflict"),
            ApiError::Invalid { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "Invalid"),
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "BadRequest"),
            ApiError::Expired(_) => (StatusCode::GONE, "Expired"),
            ApiError::Timeout(_) => (StatusCode::GATEWAY_TIMEOUT, "Timeout"),
            ApiError::Unavailable(_)
            | ApiError::NotLeader(_)
            | ApiError::Joining(_)
            | ApiError::MemberRemoved(_) => (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "Forbidden"),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
        };
        let mut r = Refusal::new(code, reason, e.to_string());
        if let ApiError::Invalid { causes, .. } = &e {
            if let Some(first) = causes.first() {
                let causes: Vec<Value> = causes
                    .iter()
                    .flat_map(|i| &i.errors)
                    .map(|f| {
                        json!({
                            "reason": field_reason(f.error_type),
                            "message": f.body(),
                            "field": f.path,
                        })
                    })
                    .collect();
                let (kind, group) = match first.kind.split_once('.') {
                    Some((k, g)) => (k.to_string(), g.to_string()),
                    None => (first.kind.clone(), String::new()),
                };
                r.details = json!({
                    "name": first.name,
                    "group": group,
                    "kind": kind,
                    "causes": causes,
                });
            }
        }
        r
    }
}

/// The `FieldValue…` reason of a field error's type, as Kubernetes names
/// them (`Required value` is `FieldValueRequired`).
fn field_reason(error_type: ErrorType) -> &'static str {
    match error_type {
        ErrorType::NotFound => "FieldValueNotFound",
        ErrorType::Required => "FieldValueRequired",
        ErrorType::Duplicate => "FieldValueDuplicate",
        ErrorType::Invalid => "FieldValueInvalid",
        ErrorType::NotSupported => "FieldValueNotSupported",
        ErrorType::Forbidden => "FieldValueForbidden",
        ErrorType::TooLong => "FieldValueTooLong",
        ErrorType::TooMany => "FieldValueTooMany",
    }
}

/// `message`, cut to [`MAX_STATUS_MESSAGE_BYTES`] at a character boundary.
fn capped(mut message: String) -> String {
    if message.len() <= MAX_STATUS_MESSAGE_BYTES {
        return message;
    }
    let total = message.len();
    let mut end = MAX_STATUS_MESSAGE_BYTES - 40;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message.truncate(end);
    message.push_str(&format!("\u{2026} ({} more bytes)", total - end));
    message
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        json_response(self.code, &self.body())
    }
}

/// A JSON answer.
pub fn json_response(code: StatusCode, v: &Value) -> Response {
    json_body(code, serde_json::to_vec(v).unwrap_or_default())
}

/// An answer of JSON already encoded.
pub fn json_body(code: StatusCode, body: Vec<u8>) -> Response {
    let mut r = (code, body).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// The answer to a successful request.
pub fn ok(v: &Value) -> Response {
    json_response(StatusCode::OK, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_keep_their_kubernetes_codes() {
        for (e, code, reason) in [
            (ApiError::not_found(Kind::Pod, "p"), 404, "NotFound"),
            (
                ApiError::already_exists(Kind::Pod, "p"),
                409,
                "AlreadyExists",
            ),
            (ApiError::conflict(Kind::Pod, "p"), 409, "Conflict"),
            (ApiError::BadRequest("x".into()), 400, "BadRequest"),
            (ApiError::Expired("x".into()), 410, "Expired"),
            (ApiError::Forbidden("x".into()), 403, "Forbidden"),
            (ApiError::NotLeader("x".into()), 503, "ServiceUnavailable"),
            (ApiError::Internal("x".into()), 500, "InternalError"),
        ] {
            let r = Refusal::from(e);
            assert_eq!(r.code.as_u16(), code);
            assert_eq!(r.body()["reason"], reason);
            assert_eq!(r.body()["kind"], "Status");
        }
        let long = Refusal::bad_request("x".repeat(10_000));
        assert!(long.message.len() <= MAX_STATUS_MESSAGE_BYTES);
    }

    #[test]
    fn invalid_objects_name_their_fields() {
        let m = drover_api::parse_manifests(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: c}}\n    spec: {containers: [{name: c, image: i}]}\n",
        )
        .unwrap()
        .remove(0);
        let inv = drover_api::validation::validate_manifest(&m).unwrap_err();
        let r = Refusal::from(ApiError::invalid(vec![inv]));
        let b = r.body();
        assert_eq!(b["code"], 422);
        assert_eq!(b["details"]["kind"], "DaemonSet");
        assert_eq!(b["details"]["group"], "apps");
        assert_eq!(b["details"]["name"], "x");
        let cause = &b["details"]["causes"][0];
        assert_eq!(cause["field"], "spec.template.metadata.labels");
        assert_eq!(cause["reason"], "FieldValueInvalid");
        let msg = cause["message"].as_str().unwrap();
        assert!(msg.starts_with("Invalid value: "), "{msg}");
    }
}
