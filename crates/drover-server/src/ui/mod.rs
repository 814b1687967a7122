//! The web dashboard under `/ui` on the HTTPS port (`docs/dashboard.md`):
//! server-rendered pages from this member's informer ([`pages`],
//! [`workloads`], [`deployment`]), live updates over server-sent events fed by the
//! informer ([`live`]), and the admin's actions ([`actions`]). The script
//! and the stylesheet are embedded in the binary (`assets/`).
//!
//! Who may call (a session is the signed cookie `/ui/login` sets,
//! [`session`]; it lives until it expires or its credential is rotated or
//! revoked):
//!
//! | route | who |
//! |---|---|
//! | `GET /ui/login` | anyone: the sign-in form, nothing else |
//! | `POST /ui/login` | the admin token, or an admin or viewer certificate on the connection; metrics and node credentials (tokens or certificates), member certificates and revoked certificates are refused |
//! | `POST /ui/logout` | a session, with its CSRF token |
//! | `GET` every other page, `/ui/app.js` | a session (admin or viewer) |
//! | `GET /ui/live/…` | a session, at most [`live::MAX_STREAMS_PER_CREDENTIAL`] streams per credential |
//! | `POST /ui/action` | an admin session, with its CSRF token |
//! | anything else | nobody: no session is 401 (a page: 303 to the sign-in form), a viewer's write 403 |

pub mod actions;
pub mod deploy_grid;
pub mod deployment;
pub mod grid;
pub mod html;
pub mod live;
pub mod login;
pub mod pages;
pub mod session;
pub mod workloads;

use crate::cache::Informer;
use crate::ctx::Ctx;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use session::{Session, SessionError, UiRole};
use std::sync::Arc;
use std::time::SystemTime;

/// A request body under `/ui` (a sign-in or an action form) may be this
/// large.
pub const MAX_FORM_BYTES: usize = 8 * 1024;

/// What the dashboard keeps across requests of one member: the live
/// streams open per credential.
#[derive(Debug, Default)]
pub struct Ui {
    pub streams: live::Streams,
}

/// Seconds since the epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A signed-in request: its session, and what pages need of it.
#[derive(Debug, Clone)]
pub struct Signed {
    pub session: Session,
    pub csrf: String,
}

impl Signed {
    pub fn is_admin(&self) -> bool {
        self.session.role == UiRole::Admin
    }
}

/// The session of a request, checked: signature, expiry, and the
/// credential it was made from still in force.
pub fn signed_in(ctx: &Ctx, headers: &HeaderMap) -> Result<Signed, SessionError> {
    let cookies = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok());
    let value = session::cookie_value(cookies).ok_or(SessionError::Missing)?;
    let key = ctx.trust.session_key();
    let s = Session::open(value, &key, unix_now())?;
    s.check_binding(&ctx.admin_token(), |serial| {
        ctx.revocations.is_revoked(serial)
    })?;
    let csrf = s.csrf(&key);
    Ok(Signed { session: s, csrf })
}

/// Headers every `/ui` answer carries: nothing cached, nothing framed,
/// scripts from this origin only, the one inline stylesheet by its hash.
pub fn secure_headers(r: &mut Response) {
    let h = r.headers_mut();
    let set = |h: &mut HeaderMap, k: header::HeaderName, v: &str| {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(k, v);
        }
    };
    set(h, header::CACHE_CONTROL, "no-store");
    set(h, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(h, header::X_FRAME_OPTIONS, "DENY");
    // `same-origin`, not `no-referrer`: with the latter a browser sends
    // `Origin: null` on its own form posts, which [`cross_site`] refuses.
    set(h, header::REFERRER_POLICY, "same-origin");
    set(h, header::CONTENT_SECURITY_POLICY, &html::csp());
}

/// A refusal: JSON `{"error", "reason"}` with the reason code.
pub fn refuse(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = serde_json::json!({ "error": message, "reason": reason });
    (code, axum::Json(body)).into_response()
}

/// The refusal of a request without a valid session: a page is sent to
/// the sign-in form, anything else gets 401.
fn not_signed_in(method: &Method, path: &str, e: SessionError) -> Response {
    if method == Method::GET && pages::is_page(path) {
        let mut r = (
            StatusCode::SEE_OTHER,
            [(header::LOCATION, "/ui/login".to_string())],
        )
            .into_response();
        if e != SessionError::Missing {
            if let Ok(v) = HeaderValue::from_str(&session::clear_cookie()) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
        }
        return r;
    }
    refuse(StatusCode::UNAUTHORIZED, reason_of(e), &e.to_string())
}

/// The reason code of a session refusal.
pub fn reason_of(e: SessionError) -> &'static str {
    match e {
        SessionError::Missing => "NoSession",
        SessionError::Malformed => "MalformedSession",
        SessionError::BadSignature => "BadSessionSignature",
        SessionError::Expired => "SessionExpired",
        SessionError::TokenRotated => "TokenRotated",
        SessionError::CertRevoked => "CertificateRevoked",
    }
}

/// A cross-site POST: its `Origin` (when the browser sends one) is not
/// this host's (the `Host` header in HTTP/1.1, the `:authority` in
/// HTTP/2, which hyper puts in the URI).
fn cross_site(headers: &HeaderMap, uri: &axum::http::Uri) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()))
        .unwrap_or("");
    let bare = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"));
    bare != Some(host)
}

/// Serves every request under `/ui`.
pub async fn handle(
    State(ctx): State<Arc<Ctx>>,
    Extension(informer): Extension<Informer>,
    Extension(ui): Extension<Arc<Ui>>,
    req: Request,
) -> Response {
    let mut r = serve(ctx, informer, ui, req).await;
    secure_headers(&mut r);
    r
}

async fn serve(ctx: Arc<Ctx>, informer: Informer, ui: Arc<Ui>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().trim_end_matches('/').to_string();
    let method = parts.method.clone();
    if method == Method::POST && cross_site(&parts.headers, &parts.uri) {
        return refuse(
            StatusCode::FORBIDDEN,
            "CrossSiteRequest",
            "a request from another site's page is refused: use the dashboard's own pages",
        );
    }
    if path == "/ui/login" {
        return match method {
            Method::GET => login::form(&ctx, &parts, None),
            Method::POST => login::sign_in(&ctx, &parts, body).await,
            _ => method_not_allowed(&method, &path),
        };
    }
    let signed = match signed_in(&ctx, &parts.headers) {
        Ok(s) => s,
        Err(e) => return not_signed_in(&method, &path, e),
    };
    if method == Method::POST {
        let form = match read_form(body).await {
            Ok(f) => f,
            Err(r) => return r,
        };
        let given = parts
            .headers
            .get("x-csrf-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .or_else(|| form.get("csrf").cloned())
            .unwrap_or_default();
        if !signed
            .session
            .csrf_matches(&ctx.trust.session_key(), &given)
        {
            return refuse(
                StatusCode::FORBIDDEN,
                "BadCsrfToken",
                "this write lacks the page's CSRF token (x-csrf-token or the form field csrf): reload the page and try again",
            );
        }
        return match path.as_str() {
            "/ui/logout" => login::sign_out(),
            "/ui/action" => actions::act(&ctx, &informer, &signed, &form, &parts.headers).await,
            _ => method_not_allowed(&method, &path),
        };
    }
    if method != Method::GET && method != Method::HEAD {
        return method_not_allowed(&method, &path);
    }
    let query = parts.uri.query().unwrap_or("");
    if path == "/ui/app.js" {
        return (
            [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
            html::SCRIPT,
        )
            .into_response();
    }
    if let Some(rest) = path.strip_prefix("/ui/live/") {
        return live::stream(&ctx, &informer, &ui, &signed, rest, query);
    }
    page(&ctx, &informer, &signed, &path, query).await
}

fn method_not_allowed(method: &Method, path: &str) -> Response {
    refuse(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        &format!("{method} is not served on {path}: pages are GET, sign-in and actions POST"),
    )
}

/// A form body (`application/x-www-form-urlencoded`), bounded.
pub async fn read_form(body: Body) -> Result<std::collections::HashMap<String, String>, Response> {
    let bytes = axum::body::to_bytes(body, MAX_FORM_BYTES)
        .await
        .map_err(|_| {
            refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                "RequestEntityTooLarge",
                &format!("a dashboard form may be at most {MAX_FORM_BYTES} bytes"),
            )
        })?;
    serde_urlencoded::from_bytes(&bytes).map_err(|e| {
        refuse(
            StatusCode::BAD_REQUEST,
            "BadForm",
            &format!("the form is not application/x-www-form-urlencoded ({e}): send it from the dashboard's pages"),
        )
    })
}

/// An HTML answer.
pub fn html_page(code: StatusCode, body: String) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

/// Serves a page.
pub async fn page(
    ctx: &Arc<Ctx>,
    informer: &Informer,
    signed: &Signed,
    path: &str,
    query: &str,
) -> Response {
    let q = pages::params(query);
    let segs: Vec<&str> = path
        .trim_start_matches("/ui")
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    match segs.as_slice() {
        [] => pages::overview(ctx, informer, signed).await,
        ["nodes"] => pages::nodes(ctx, informer, signed, &q),
        ["nodes", name] => pages::node(ctx, informer, signed, name).await,
        ["workloads"] => pages::workload_list(informer, signed),
        ["events"] => pages::events(ctx, signed, &q).await,
        ["daemonsets", ns, name] => workloads::daemon_set(ctx, informer, signed, ns, name).await,
        ["deployments", ns, name] => deployment::page(ctx, informer, signed, ns, name).await,
        ["pods", ns, name] => workloads::pod(ctx, informer, signed, ns, name).await,
        ["pods", ns, name, "log"] => workloads::pod_log(ctx, ns, name, query).await,
        _ => pages::not_found(signed, &format!("no page at {path}")),
    }
}
