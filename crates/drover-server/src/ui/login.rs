//! Signing in and out of the dashboard: `/ui/login` takes the admin token
//! (a form field) or the admin or viewer certificate the browser presents
//! on the connection, and answers a session cookie ([`super::session`]).
//! Metrics and node credentials, member certificates and revoked
//! certificates are refused with a reason code.

use super::html::{esc, STYLE};
use super::session::{clear_cookie, Binding, Session, UiRole};
use super::{html_page, read_form, unix_now};
use crate::auth::{self, same_token, Caller};
use crate::ctx::Ctx;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::time::SystemTime;

/// Why a sign-in was refused, with its status code and reason code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub code: StatusCode,
    pub reason: &'static str,
    pub message: String,
}

fn refused(code: StatusCode, reason: &'static str, message: impl Into<String>) -> Refused {
    Refused {
        code,
        reason,
        message: message.into(),
    }
}

/// The certificate of the connection a request came on.
fn peer_cert(parts: &Parts) -> Option<std::sync::Arc<drover_pki::PeerCert>> {
    parts
        .extensions
        .get::<ConnectInfo<crate::kapi::Peer>>()
        .and_then(|c| c.0 .0.as_ref())
        .and_then(|p| p.cert.clone())
}

/// The sign-in form, with the refusal of a failed attempt.
pub fn form(ctx: &Ctx, parts: &Parts, error: Option<&Refused>) -> Response {
    let cert = peer_cert(parts).and_then(|c| auth::of_certificate(&c, &ctx.revocations));
    let cert_button = match cert {
        Some(c @ (Caller::Admin(_) | Caller::Viewer(_))) => format!(
            r#"<form method="post" action="/ui/login"><input type="hidden" name="use" value="certificate"><button id="cert-login" type="submit">Sign in as {}</button></form><p class="muted">with the certificate your browser presented</p>"#,
            esc(&c.to_string())
        ),
        _ => String::new(),
    };
    let err = error
        .map(|r| {
            format!(
                r#"<p class="error" id="login-error" data-reason="{}">{}</p>"#,
                r.reason,
                esc(&r.message)
            )
        })
        .unwrap_or_default();
    let body = format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Sign in · drover</title><style>{STYLE}</style></head>
<body class="login"><main><h1>drover</h1>{err}{cert_button}
<form method="post" action="/ui/login" id="token-form"><label for="token">Admin token</label>
<input id="token" name="token" type="password" autocomplete="off" required placeholder="drover-admin-…">
<button type="submit">Sign in</button></form>
<p class="muted">The admin token is in a server's <code>DATA_DIR/client.yaml</code>. A viewer signs in with a viewer certificate (<code>drover access issue NAME --role viewer</code>) presented by the browser, or opens the dashboard through <code>drover ui</code>.</p></main></body></html>"#
    );
    let code = error.map_or(StatusCode::OK, |r| r.code);
    html_page(code, body)
}

/// Who a sign-in speaks for, from its form and its connection.
pub fn who_signs_in(
    ctx: &Ctx,
    parts: &Parts,
    token: Option<&str>,
) -> Result<(UiRole, String, Binding, Option<SystemTime>), Refused> {
    if let Some(token) = token.map(str::trim).filter(|t| !t.is_empty()) {
        let admin = ctx.admin_token();
        if admin.is_empty() {
            return Err(refused(
                StatusCode::SERVICE_UNAVAILABLE,
                "Joining",
                "this server is still joining its cluster; sign in on another member or retry",
            ));
        }
        if same_token(token, &admin) {
            return Ok((
                UiRole::Admin,
                "admin-token".into(),
                Binding::Token(drover_pki::revoke::token_mark(&admin)),
                None,
            ));
        }
        let metrics = ctx.metrics_token().is_some_and(|want| {
            drover_pki::token::same(crate::trust::sha256_hex(token).as_bytes(), want.as_bytes())
        });
        if metrics {
            return Err(refused(
                StatusCode::FORBIDDEN,
                "MetricsCredential",
                "the metrics token reads /metrics and /status only: sign in with the admin token or a viewer certificate",
            ));
        }
        if token.starts_with("drover-node-") || token.starts_with("drover-server-") {
            return Err(refused(
                StatusCode::FORBIDDEN,
                "JoinToken",
                "a join token makes certificates only: sign in with the admin token or a viewer certificate",
            ));
        }
        return Err(refused(
            StatusCode::UNAUTHORIZED,
            "WrongToken",
            "wrong token: use the admin token from a server's DATA_DIR/client.yaml",
        ));
    }
    let Some(cert) = peer_cert(parts) else {
        return Err(refused(
            StatusCode::UNAUTHORIZED,
            "NoCredential",
            "no credential: enter the admin token, or present an admin or viewer certificate",
        ));
    };
    match auth::of_certificate(&cert, &ctx.revocations) {
        Some(Caller::Admin(n)) => Ok((
            UiRole::Admin,
            n,
            Binding::Cert(cert.serial.clone()),
            Some(cert.not_after),
        )),
        Some(Caller::Viewer(n)) => Ok((
            UiRole::Viewer,
            n,
            Binding::Cert(cert.serial.clone()),
            Some(cert.not_after),
        )),
        Some(Caller::Revoked { who, serial }) => Err(refused(
            StatusCode::UNAUTHORIZED,
            "CertificateRevoked",
            auth::revoked_message(&who, &serial),
        )),
        Some(Caller::Metrics(n)) => Err(refused(
            StatusCode::FORBIDDEN,
            "MetricsCredential",
            format!("the metrics certificate of {n} reads /metrics and /status only: use an admin or viewer certificate"),
        )),
        Some(other) => Err(refused(
            StatusCode::FORBIDDEN,
            "NotAPerson",
            format!("{other}'s certificate may not sign in to the dashboard: use an admin or viewer certificate"),
        )),
        None => Err(refused(
            StatusCode::UNAUTHORIZED,
            "CertificateExpired",
            "the certificate the browser presented has expired: ask an admin for a new one (drover access issue)",
        )),
    }
}

/// `POST /ui/login`: a session cookie and a redirect to the overview, or
/// the form again with why not.
pub async fn sign_in(ctx: &Ctx, parts: &Parts, body: Body) -> Response {
    let form = match read_form(body).await {
        Ok(f) => f,
        Err(r) => return r,
    };
    let token = form.get("token").map(String::as_str);
    match who_signs_in(ctx, parts, token) {
        Ok((role, who, binding, not_after)) => {
            let now = unix_now();
            let not_after = not_after.map(|t| {
                t.duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs())
            });
            let s = Session::new(role, &who, binding, now, not_after);
            tracing::info!("dashboard: {who} signed in as {}", role.as_str());
            let cookie = s.set_cookie(&ctx.trust.session_key(), now);
            let mut r = (StatusCode::SEE_OTHER, [(header::LOCATION, "/ui")]).into_response();
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Err(refusal) => {
            tracing::info!("dashboard: sign-in refused ({})", refusal.reason);
            let mut r = form_after(ctx, parts, &refusal);
            if let Ok(v) = HeaderValue::from_str(refusal.reason) {
                r.headers_mut().insert("x-drover-reason", v);
            }
            r
        }
    }
}

fn form_after(ctx: &Ctx, parts: &Parts, refusal: &Refused) -> Response {
    form(ctx, parts, Some(refusal))
}

/// `POST /ui/logout`: the cookie removed, back to the sign-in form.
pub fn sign_out() -> Response {
    let mut r = (StatusCode::SEE_OTHER, [(header::LOCATION, "/ui/login")]).into_response();
    if let Ok(v) = HeaderValue::from_str(&clear_cookie()) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}
