//! The Kubernetes API for drover's kinds, on the HTTPS port (TLS 1.3 under
//! the cluster CA), so that an unmodified kubectl (or a client library)
//! drives drover: discovery ([`discovery`]), OpenAPI documents
//! ([`openapi`]), get/list/watch ([`read`], [`watch`]) with `Table`
//! answers ([`table`]), create/update/patch/delete ([`write`], [`patch`]),
//! the `scale` subresource of Deployments and ReplicaSets ([`scale`]),
//! `pods/log` and `pods/exec` ([`logs`], [`exec`], over
//! [`crate::svc::pods`]), errors as `Status`
//! objects ([`status`]). `docs/kubernetes-api.md` is
//! the user's page.
//!
//! Who may call (the connection's client certificate, else
//! `authorization: Bearer <admin token>`):
//!
//! | route | who |
//! |---|---|
//! | `GET` every path (discovery, OpenAPI, get, list, watch, `pods/log`) | admin, viewer, member |
//! | `POST`, `PUT`, `PATCH`, `DELETE`; `pods/exec` (any method) | admin, member |
//! | `POST` `pods/binding` ([`binding`]) | admin |
//! | anything | nobody else: no credential or a wrong token is 401, a node certificate (or a viewer writing) 403 |

pub mod binding;
pub mod cached;
pub mod discovery;
pub mod exec;
pub mod kubeconfig;
pub mod logs;
pub mod openapi;
pub mod paging;
/// The patch types, pure: `drover-api/src/patch/` (shared with `drover patch`).
pub use drover_api::patch;
pub mod protobuf;
pub mod query;
pub mod read;
pub mod scale;
pub mod status;
pub mod table;
pub mod watch;
pub mod write;

use crate::api::Objects;
use crate::auth::{self, same_token, Caller};
use crate::cache::Informer;
use crate::ctx::Ctx;
use crate::limits::MAX_KAPI_BODY_BYTES;
use axum::body::Body;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use drover_api::Kind;
use drover_pki::net::PeerInfo;
use query::Query;
use status::Refusal;
use std::sync::Arc;

/// The connection a request came on: its client certificate, if any.
#[derive(Debug, Clone)]
pub struct Peer(pub Option<PeerInfo>);

/// What a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

/// Who sends a request: its certificate (while valid), then the admin
/// token; a refusal for everyone else.
fn authorize(
    ctx: &Ctx,
    peer: &Peer,
    headers: &HeaderMap,
    access: Access,
) -> Result<Caller, Refusal> {
    let token = ctx.admin_token();
    if token.is_empty() {
        return Err(Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "this server is still joining its cluster; ask another member or retry",
        ));
    }
    let by_cert = peer
        .0
        .as_ref()
        .and_then(|p| p.cert.as_ref())
        .and_then(|c| auth::of_certificate(c, &ctx.revocations));
    let caller = match by_cert {
        Some(Caller::Member(id)) if ctx.store.members().get(&id).is_some_and(|m| m.removed) => {
            return Err(Refusal::forbidden(format!(
                "member {id:016x} was removed from this cluster: its certificate counts for nothing"
            )));
        }
        Some(Caller::Revoked { who, serial }) => {
            return Err(Refusal::unauthorized(auth::revoked_message(&who, &serial)));
        }
        Some(c) => c,
        None => {
            let given = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            match given {
                Some(t) if same_token(t.trim(), &token) => {
                    if let Some(p) = &peer.0 {
                        p.token.used(ctx.revocations.token());
                    }
                    Caller::Admin("admin-token".into())
                }
                Some(_) => {
                    return Err(Refusal::unauthorized(
                        "wrong token: use the admin token (DATA_DIR/kubeconfig has it)",
                    ))
                }
                None => {
                    return Err(Refusal::unauthorized(
                        "no credential: send the admin token (`authorization: Bearer T`) or a client certificate of the cluster; export KUBECONFIG=DATA_DIR/kubeconfig",
                    ))
                }
            }
        }
    };
    let ok = matches!(
        (&caller, access),
        (Caller::Member(_), _) | (Caller::Admin(_), _) | (Caller::Viewer(_), Access::Read)
    );
    if ok {
        Ok(caller)
    } else {
        Err(Refusal::forbidden(format!(
            "{caller} may not {} through the Kubernetes API",
            if access == Access::Read {
                "read"
            } else {
                "write"
            }
        )))
    }
}

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Version,
    Api,
    Apis,
    Group(String),
    GroupVersion(String, String),
    OpenApiV2,
    OpenApiV3,
    OpenApiV3Doc(String, String),
    /// `/api/v1/namespaces[/NAME]`: read, the stored Namespaces and the
    /// implicit ones (named by objects); written or watched, the stored
    /// ones ([`Route::namespace_resource`]).
    Namespaces(Option<String>),
    Resource(Target),
}

/// A resource path: the kind, the namespace (None: cluster-scoped, or
/// every namespace), the name and the subresource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub kind: Kind,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub sub: Option<String>,
}

impl Route {
    /// `/api/v1/namespaces[/NAME]` as the stored kind's path.
    fn namespace_resource(name: Option<String>) -> Route {
        Route::Resource(Target {
            kind: Kind::Namespace,
            namespace: None,
            name,
            sub: None,
        })
    }
}

fn not_served(path: &str) -> Refusal {
    Refusal::not_found(format!(
        "the server could not find the requested resource ({path}): drover serves {}",
        Kind::ALL.map(|k| k.plural()).join(", ")
    ))
}

/// Reads a path.
pub fn route(path: &str) -> Result<Route, Refusal> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest): (&str, &str, &[&str]) = match segs.as_slice() {
        ["version"] => return Ok(Route::Version),
        ["api"] => return Ok(Route::Api),
        ["apis"] => return Ok(Route::Apis),
        ["apis", g] => return Ok(Route::Group(g.to_string())),
        ["openapi", "v2"] => return Ok(Route::OpenApiV2),
        ["openapi", "v3"] => return Ok(Route::OpenApiV3),
        ["openapi", "v3", "api", v] => {
            return Ok(Route::OpenApiV3Doc(String::new(), v.to_string()))
        }
        ["openapi", "v3", "apis", g, v] => {
            return Ok(Route::OpenApiV3Doc(g.to_string(), v.to_string()))
        }
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(not_served(path)),
    };
    let kinds = discovery::kinds_of(group, version);
    if kinds.is_empty() {
        return Err(not_served(path));
    }
    if rest.is_empty() {
        return Ok(Route::GroupVersion(group.to_string(), version.to_string()));
    }
    let find = |plural: &str| kinds.iter().copied().find(|k| k.plural() == plural);
    let (namespace, rest) = match rest {
        ["namespaces"] if group.is_empty() => return Ok(Route::Namespaces(None)),
        ["namespaces", ns] if group.is_empty() => {
            return Ok(Route::Namespaces(Some(ns.to_string())))
        }
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        _ => (None, rest),
    };
    let (plural, name, sub) = match rest {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(n.to_string()), None),
        [p, n, s] => (*p, Some(n.to_string()), Some(s.to_string())),
        _ => return Err(not_served(path)),
    };
    let Some(kind) = find(plural) else {
        return Err(not_served(path));
    };
    if namespace.is_some() != kind.namespaced() && (namespace.is_some() || name.is_some()) {
        return Err(not_served(path));
    }
    if name.as_deref().is_some_and(str::is_empty) {
        return Err(not_served(path));
    }
    Ok(Route::Resource(Target {
        kind,
        namespace,
        name,
        sub,
    }))
}

/// Serves every request of the Kubernetes API (the HTTP router's fallback).
pub async fn handle(
    State(ctx): State<Arc<Ctx>>,
    Extension(informer): Extension<Informer>,
    req: Request,
) -> Response {
    let (mut parts, body) = req.into_parts();
    let peer = parts
        .extensions
        .get::<ConnectInfo<Peer>>()
        .map(|c| c.0.clone())
        .unwrap_or(Peer(None));
    let upgrade = WebSocketUpgrade::from_request_parts(&mut parts, &())
        .await
        .ok();
    match serve(ctx, informer, peer, parts, body, upgrade).await {
        Ok(r) => r,
        Err(refusal) => refusal.into_response(),
    }
}

/// `…/NAME/scale` of a kind that has one.
fn is_scale(t: &Target) -> bool {
    t.sub.as_deref() == Some("scale") && discovery::has_scale(t.kind)
}

fn is_exec(path: &str) -> bool {
    path.trim_end_matches('/').ends_with("/exec")
}

async fn serve(
    ctx: Arc<Ctx>,
    informer: Informer,
    peer: Peer,
    parts: Parts,
    body: Body,
    upgrade: Option<WebSocketUpgrade>,
) -> Result<Response, Refusal> {
    let (method, uri, headers) = (parts.method, parts.uri, parts.headers);
    // exec runs a command: a writer's verb, whatever the HTTP method.
    let access = if (method == Method::GET || method == Method::HEAD) && !is_exec(uri.path()) {
        Access::Read
    } else {
        Access::Write
    };
    let caller = authorize(&ctx, &peer, &headers, access)?;
    let route = route(uri.path())?;
    let query = Query::parse(uri.query())?;
    let objects = Objects::new(ctx.clone());
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let as_table = table::wants_table(&accept);
    if access == Access::Read {
        return match route {
            Route::Version => Ok(status::ok(&discovery::version())),
            Route::Api => Ok(status::ok(&discovery::core_versions())),
            Route::Apis => Ok(status::ok(&discovery::group_list())),
            Route::Group(g) => discovery::group(&g)
                .map(|v| status::ok(&v))
                .ok_or_else(|| not_served(uri.path())),
            Route::GroupVersion(g, v) => discovery::resource_list(&g, &v)
                .map(|v| status::ok(&v))
                .ok_or_else(|| not_served(uri.path())),
            Route::OpenApiV2 => Err(Refusal::not_found(
                "drover serves the OpenAPI v3 documents only (/openapi/v3, with schemas); kubectl reads /openapi/v2 only as protobuf",
            )),
            Route::OpenApiV3 => Ok(status::ok(&openapi::root())),
            Route::OpenApiV3Doc(g, v) => openapi::group_version(&g, &v)
                .map(status::ok)
                .ok_or_else(|| not_served(uri.path())),
            Route::Namespaces(name) if query.watch => {
                let Route::Resource(t) = Route::namespace_resource(name) else {
                    unreachable!("a namespace resource")
                };
                watch::watch(objects, informer, t, query, as_table).await
            }
            Route::Namespaces(name) => read::namespaces(&objects, name, &query, as_table).await,
            Route::Resource(t) if t.kind == Kind::Pod && t.sub.as_deref() == Some("log") => {
                logs::logs(&objects, &t, &query.raw).await
            }
            Route::Resource(t) if is_scale(&t) && !query.watch => {
                scale::serve(&objects, &method, &t, "", &[], false).await
            }
            Route::Resource(t) => {
                if query.watch {
                    watch::watch(objects, informer, t, query, as_table).await
                } else {
                    read::read(&objects, &informer, &t, &query, as_table).await
                }
            }
        };
    }
    if let Route::Resource(t) = &route {
        if t.kind == Kind::Pod && t.sub.as_deref() == Some("exec") {
            let p = exec::params(uri.query())?;
            return exec::exec(&objects, t, p, upgrade).await;
        }
    }
    let route = match route {
        Route::Namespaces(name) => Route::namespace_resource(name),
        other => other,
    };
    let Route::Resource(t) = route else {
        return Err(Refusal::method_not_allowed(format!(
            "{method} is not allowed on {}: it is read-only",
            uri.path()
        )));
    };
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let bytes = axum::body::to_bytes(body, MAX_KAPI_BODY_BYTES)
        .await
        .map_err(|_| {
            Refusal::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "RequestEntityTooLarge",
                format!(
                    "the request body is larger than the limit of {MAX_KAPI_BODY_BYTES} bytes (3 MiB)"
                ),
            )
        })?;
    // kubectl's typed clients (its generators: `create priorityclass`)
    // send protobuf; drover reads it for a create of the kinds
    // `protobuf` knows, and a DELETE ignores it (see write::delete).
    let (content_type, bytes) = if content_type.starts_with(protobuf::CONTENT_TYPE) {
        match method {
            Method::POST => {
                let v = protobuf::decode(&bytes)?;
                let json = serde_json::to_vec(&v).unwrap_or_default();
                ("application/json".to_string(), bytes::Bytes::from(json))
            }
            Method::DELETE => (content_type, bytes),
            _ => {
                return Err(Refusal::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "UnsupportedMediaType",
                    "drover reads protobuf bodies for a create only; send JSON",
                ))
            }
        }
    } else {
        (content_type, bytes)
    };
    if t.kind == Kind::Pod && t.sub.as_deref() == Some("binding") {
        if method != Method::POST {
            return Err(Refusal::method_not_allowed(format!(
                "{method} is not allowed on pods/binding: POST a v1 Binding"
            )));
        }
        binding::may_bind(&caller)?;
        return binding::bind(&objects, &t, &bytes).await;
    }
    if is_scale(&t) {
        return scale::serve(&objects, &method, &t, &content_type, &bytes, query.dry_run).await;
    }
    let req = write::WriteRequest {
        target: t,
        query,
        content_type,
        body: bytes,
        as_table,
        informer,
    };
    match method {
        Method::POST => write::create(&objects, req).await,
        Method::PUT => write::update(&objects, req).await,
        Method::PATCH => write::patch(&objects, req).await,
        Method::DELETE => write::delete(&objects, req).await,
        m => Err(Refusal::method_not_allowed(format!(
            "{m} is not a verb of the Kubernetes API"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(kind: Kind, ns: Option<&str>, name: Option<&str>, sub: Option<&str>) -> Route {
        Route::Resource(Target {
            kind,
            namespace: ns.map(str::to_string),
            name: name.map(str::to_string),
            sub: sub.map(str::to_string),
        })
    }

    #[test]
    fn paths_as_the_api_server_reads_them() {
        assert_eq!(route("/version").unwrap(), Route::Version);
        assert_eq!(route("/api").unwrap(), Route::Api);
        assert_eq!(
            route("/apis/apps/v1").unwrap(),
            Route::GroupVersion("apps".into(), "v1".into())
        );
        assert_eq!(
            route("/api/v1/pods").unwrap(),
            target(Kind::Pod, None, None, None)
        );
        assert_eq!(
            route("/api/v1/namespaces/default/pods/web/status").unwrap(),
            target(Kind::Pod, Some("default"), Some("web"), Some("status"))
        );
        assert_eq!(
            route("/apis/apps/v1/namespaces/kube-system/daemonsets/x").unwrap(),
            target(Kind::DaemonSet, Some("kube-system"), Some("x"), None)
        );
        assert_eq!(
            route("/apis/apps/v1/namespaces/default/deployments/web/scale").unwrap(),
            target(
                Kind::Deployment,
                Some("default"),
                Some("web"),
                Some("scale")
            )
        );
        assert_eq!(
            route("/apis/apps/v1/replicasets").unwrap(),
            target(Kind::ReplicaSet, None, None, None)
        );
        assert_eq!(
            route("/api/v1/nodes/n1").unwrap(),
            target(Kind::Node, None, Some("n1"), None)
        );
        assert_eq!(
            route("/api/v1/namespaces/x").unwrap(),
            Route::Namespaces(Some("x".into()))
        );
        for bad in [
            "/apis/apps/v1/pods",
            "/api/v1/daemonsets",
            "/api/v1/namespaces/a/deployments/web",
            "/apis/extensions/v1beta1/deployments",
            "/apis/batch/v1/jobs",
            "/api/v2/pods",
            "/api/v1/namespaces/a/nodes/n",
            "/api/v1/pods/p",
            "/api/v1/namespaces/a/pods/p/status/x",
            "/",
            "/metrics-nope",
        ] {
            assert_eq!(route(bad).unwrap_err().code, StatusCode::NOT_FOUND, "{bad}");
        }
    }
}
