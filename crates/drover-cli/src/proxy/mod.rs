//! `drover proxy` and `drover ui`: a local listener (127.0.0.1 unless
//! asked otherwise) that forwards each request to one of the cluster's
//! members over HTTPS with the user's own credential, following the
//! members as the CLI does (`docs/kubernetes-api.md`, "One address for
//! kubectl"; `docs/dashboard.md`, "Opening it").
//!
//! Who may call it: anyone who can reach the listener, like `kubectl
//! proxy`, which is why it listens on loopback; but only with a `Host`
//! that names the listener (DNS rebinding), and never from another
//! origin's page ([`guard::check_local`]). The dashboard (`/ui`) needs
//! more: the local cookie that only the printed one-time URL gives
//! ([`ui`]). `drover ui` serves the dashboard only.

pub mod guard;
pub mod ui;
pub mod upstream;

use crate::client::ClientConfig;
use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, LOCATION, SET_COOKIE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use upstream::{Outgoing, Upstream};

/// The largest request body forwarded: the server's own limit on the
/// Kubernetes API (`MAX_KAPI_BODY_BYTES` of drover-server's limits), so
/// nothing the server would take is refused here.
pub const MAX_BODY: usize = 3 << 20;
/// Local connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 256;
/// How long a local client may take to send a request's head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

type Body = UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// What the listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The Kubernetes API and the dashboard (`drover proxy`).
    Proxy,
    /// The dashboard only (`drover ui`).
    Ui,
}

/// How to start the listener.
#[derive(Debug, Clone)]
pub struct ProxyOptions {
    pub mode: Mode,
    /// The client config whose credential is used.
    pub config: ClientConfig,
    /// The address to listen on (127.0.0.1 by default; port 0 picks one).
    pub listen: SocketAddr,
    /// Where the kubeconfig pointing at the proxy is written (`Mode::Proxy`).
    pub kubeconfig: Option<PathBuf>,
    /// Try `xdg-open` on the dashboard's URL.
    pub open: bool,
}

/// The directory of the client config's kubeconfigs: the config file's
/// own (a server's data dir holds `client.yaml` beside `kubeconfig`), else
/// the default config's.
pub fn default_kubeconfig(config_path: Option<&std::path::Path>) -> Option<PathBuf> {
    let dir = match config_path {
        Some(p) => p.parent().map(|d| {
            if d.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                d.to_path_buf()
            }
        }),
        None => crate::client::default_config_path().and_then(|p| p.parent().map(PathBuf::from)),
    }?;
    Some(dir.join("kubeconfig-proxy"))
}

/// The kubeconfig of the proxy: one context, `drover-proxy`, at `url`, no
/// credential (the proxy adds it).
pub fn kubeconfig(url: &str) -> String {
    format!(
        "# kubectl through `drover proxy` (it adds the credential and follows the members).\n\
apiVersion: v1\nkind: Config\nclusters:\n- name: drover-proxy\n  cluster:\n    server: {url}\n\
contexts:\n- name: drover-proxy\n  context:\n    cluster: drover-proxy\n    user: drover-proxy\n    namespace: default\n\
current-context: drover-proxy\nusers:\n- name: drover-proxy\n  user: {{}}\npreferences: {{}}\n"
    )
}

/// The shared state of the listener.
struct State {
    mode: Mode,
    up: Arc<Upstream>,
    allowed: Vec<String>,
    port: u16,
    local: ui::Local,
    session: ui::ServerSession,
    token: String,
}

/// Runs the listener until `shutdown` resolves. Prints (to `out`) where it
/// listens, the kubeconfig it wrote and the dashboard's one-time URL.
pub async fn run(
    opts: ProxyOptions,
    shutdown: impl std::future::Future<Output = ()>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<()> {
    let ip = opts.listen.ip();
    if !ip.is_loopback() {
        writeln!(
            err,
            "warning: listening on {ip}, not on loopback: anyone who reaches this address acts on the cluster with this client config's credential"
        )?;
    }
    let up = Upstream::start(&opts.config).await?;
    up.follow();
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .map_err(|e| {
            anyhow::anyhow!("--address/--port {}: cannot listen there: {e}", opts.listen)
        })?;
    let bound = listener.local_addr()?;
    let host = match bound.ip() {
        std::net::IpAddr::V4(a) if a.is_unspecified() => "127.0.0.1".to_string(),
        std::net::IpAddr::V4(a) => a.to_string(),
        std::net::IpAddr::V6(a) if a.is_unspecified() => "[::1]".to_string(),
        std::net::IpAddr::V6(a) => format!("[{a}]"),
    };
    let url = format!("http://{host}:{}", bound.port());
    let state = Arc::new(State {
        mode: opts.mode,
        up,
        allowed: guard::allowed_hosts(bound.ip()),
        port: bound.port(),
        local: ui::Local::new(),
        session: ui::ServerSession::default(),
        token: opts.config.token.clone(),
    });
    let ui_url = format!("{url}{}", state.local.open_path().unwrap_or_default());
    writeln!(
        out,
        "Serving on {url}, forwarding to {}",
        state.up.members().join(", ")
    )?;
    if opts.mode == Mode::Proxy {
        match &opts.kubeconfig {
            Some(path) => {
                drover_pki::write_private(path, kubeconfig(&url).as_bytes())
                    .map_err(|e| anyhow::anyhow!("--kubeconfig {}: {e}", path.display()))?;
                writeln!(out, "kubeconfig: {}", path.display())?;
                writeln!(out, "export KUBECONFIG={}", path.display())?;
            }
            None => writeln!(
                err,
                "no kubeconfig written (no client config file to put it beside): pass --kubeconfig PATH"
            )?,
        }
    }
    writeln!(out, "Dashboard (this link works once): {ui_url}")?;
    out.flush()?;
    if opts.open {
        match std::process::Command::new("xdg-open")
            .arg(&ui_url)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
        {
            Ok(mut c) => {
                tokio::task::spawn_blocking(move || c.wait());
            }
            Err(e) => writeln!(
                err,
                "cannot run xdg-open ({e}): open the URL above yourself"
            )?,
        }
    }
    serve(listener, state, shutdown).await;
    Ok(())
}

async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<State>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => return,
            p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
        };
        let (tcp, _) = tokio::select! {
            _ = &mut shutdown => return,
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("proxy: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let state = state.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(&state, req).await) }
            });
            let mut b = hyper::server::conn::http1::Builder::new();
            b.timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(256 << 10);
            if let Err(e) = b.serve_connection(TokioIo::new(tcp), svc).await {
                tracing::debug!("proxy: a local connection: {e}");
            }
            drop(permit);
        });
    }
}

fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into())
        .map_err(
            |e: std::convert::Infallible| -> Box<dyn std::error::Error + Send + Sync> {
                match e {}
            },
        )
        .boxed_unsync()
}

/// A refusal or failure of the proxy itself, with its reason code: as a
/// Kubernetes `Status` (which kubectl prints) outside `/ui`, as text under it.
fn answer(status: StatusCode, reason: &str, message: &str, ui: bool) -> Response<Body> {
    let (ctype, body) = if ui {
        ("text/plain; charset=utf-8", format!("{message}\n"))
    } else {
        let v = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": message, "reason": reason,
            "code": status.as_u16(),
        });
        ("application/json", v.to_string())
    };
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    if let Ok(v) = HeaderValue::from_str(reason) {
        r.headers_mut().insert("x-drover-reason", v);
    }
    r
}

fn redirect(to: &str, cookie: Option<String>) -> Response<Body> {
    let mut r = Response::new(full(Bytes::new()));
    *r.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(LOCATION, v);
    }
    if let Some(v) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        r.headers_mut().insert(SET_COOKIE, v);
    }
    r
}

async fn handle(state: &State, req: Request<Incoming>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let is_ui = path == "/ui" || path.starts_with("/ui/");
    if let Err(r) = guard::check_local(&parts.headers, &state.allowed, state.port) {
        return answer(StatusCode::FORBIDDEN, r.reason, &r.message, is_ui);
    }
    if parts.headers.contains_key(hyper::header::UPGRADE) {
        return answer(
            StatusCode::NOT_IMPLEMENTED,
            "ProxyNoUpgrade",
            "the proxy does not relay exec, attach or port-forward (a protocol upgrade): use `drover exec`, or a member's context of DATA_DIR/kubeconfig",
            is_ui,
        );
    }
    if is_ui {
        if path == ui::OPEN_PATH {
            return match state.local.open(parts.uri.query().unwrap_or("")) {
                Some(id) => redirect("/ui", Some(ui::set_cookie(&id))),
                None => answer(
                    StatusCode::UNAUTHORIZED,
                    "ProxyBadSecret",
                    "this link's secret is wrong or was used already: open the URL that `drover ui` printed, once (restart it for a new one)",
                    true,
                ),
            };
        }
        if !state.local.signed_in(&parts.headers) {
            return answer(
                StatusCode::UNAUTHORIZED,
                "ProxyNoLocalSession",
                "not signed in to this proxy: open the URL with the one-time secret that `drover ui` (or `drover proxy`) printed",
                true,
            );
        }
        match path.as_str() {
            // The proxy signs in for the browser.
            "/ui/login" => return redirect("/ui", None),
            "/ui/logout" if parts.method == hyper::Method::POST => {
                state.local.sign_out(&parts.headers);
                let next = state.local.renew_secret();
                tracing::info!("dashboard: signed out; the next sign-in opens {next}");
                let mut r = answer(
                    StatusCode::OK,
                    "SignedOut",
                    "signed out of the proxy: open the dashboard again with the new URL `drover ui` printed",
                    true,
                );
                if let Ok(v) = HeaderValue::from_str(&ui::clear_cookie()) {
                    r.headers_mut().insert(SET_COOKIE, v);
                }
                return r;
            }
            _ => {}
        }
    } else if state.mode == Mode::Ui {
        if path == "/" {
            return redirect("/ui", None);
        }
        return answer(
            StatusCode::NOT_FOUND,
            "ProxyUiOnly",
            "`drover ui` serves the dashboard only (/ui): run `drover proxy` for the Kubernetes API",
            false,
        );
    }
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            let too_big = e
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some();
            return if too_big {
                answer(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "ProxyBodyTooLarge",
                    &format!("the request body is over {MAX_BODY} bytes, the server's limit: split the manifest"),
                    is_ui,
                )
            } else {
                answer(
                    StatusCode::BAD_REQUEST,
                    "ProxyBadBody",
                    &format!("cannot read the request body: {e}"),
                    is_ui,
                )
            };
        }
    };
    let target = parts
        .uri
        .path_and_query()
        .map_or_else(|| path.clone(), |p| p.as_str().to_string());
    let out = Outgoing {
        method: parts.method.clone(),
        target,
        headers: guard::upstream_headers(&parts.headers),
        body,
        repeatable: false,
    };
    let resp = if is_ui {
        forward_ui(state, &out).await
    } else {
        state
            .up
            .send(&out, None)
            .await
            .map_err(|e| (e.reason(), e.to_string()))
    };
    match resp {
        Ok(r) => {
            let (mut p, b) = r.into_parts();
            guard::downstream_headers(&mut p.headers);
            let b: Body = b
                .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { Box::new(e) })
                .boxed_unsync();
            Response::from_parts(p, b)
        }
        Err((reason, message)) => {
            let status = if reason == "ProxyNoMember" {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::BAD_GATEWAY
            };
            answer(status, reason, &message, is_ui)
        }
    }
}

/// A dashboard request: with the proxy's session on the server, signed in
/// (again) when the server refuses it, then sent once more (the server
/// refused it before acting on it).
async fn forward_ui(
    state: &State,
    out: &Outgoing,
) -> Result<Response<Incoming>, (&'static str, String)> {
    let mut renewed = false;
    loop {
        let current = state.session.current();
        if current.is_none() {
            renew(state, None).await?;
            renewed = true;
            continue;
        }
        let (cookie, gen) = current.unwrap_or_default();
        let r = state
            .up
            .send(out, Some(&cookie))
            .await
            .map_err(|e| (e.reason(), e.to_string()))?;
        if renewed || !ui::session_refused(r.status(), r.headers()) {
            return Ok(r);
        }
        renew(state, Some(gen)).await?;
        renewed = true;
    }
}

async fn renew(state: &State, seen: Option<u64>) -> Result<(), (&'static str, String)> {
    state
        .session
        .renew(&state.up, seen, &state.token)
        .await
        .map_err(|e| {
            let reason = match &e {
                ui::SignInError::Upstream(u) => u.reason(),
                ui::SignInError::Refused { .. } => "ProxySignInRefused",
            };
            (reason, e.to_string())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubeconfig_has_one_context_at_the_proxy() {
        let text = kubeconfig("http://127.0.0.1:8001");
        let v: serde_json::Value = serde_saphyr::from_str(&text).expect("YAML");
        assert_eq!(v["current-context"], "drover-proxy");
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "http://127.0.0.1:8001"
        );
        assert_eq!(v["contexts"][0]["context"]["cluster"], "drover-proxy");
        assert!(v["users"][0]["user"]
            .as_object()
            .is_some_and(|u| u.is_empty()));
    }

    #[test]
    fn the_kubeconfig_goes_beside_the_client_config() {
        assert_eq!(
            default_kubeconfig(Some(std::path::Path::new("/d/client.yaml"))),
            Some(PathBuf::from("/d/kubeconfig-proxy"))
        );
        assert_eq!(
            default_kubeconfig(Some(std::path::Path::new("client.yaml"))),
            Some(PathBuf::from("./kubeconfig-proxy"))
        );
    }
}
