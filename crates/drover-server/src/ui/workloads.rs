//! The dashboard's workload pages: a DaemonSet with its rollout as a grid
//! of nodes ([`super::grid`], from the controller's `explain()`), its
//! revisions and events; and a pod with its containers, events and the
//! tail of its log. A Deployment's page is [`super::deployment`].

use super::grid::{self, Cell, CellState};
use super::html::{action_button, esc, frame, legend, link, table, url, Section};
use super::pages::{events_about, events_table, not_found, params};
use super::{html_page, Signed};
use crate::api::codec::key;
use crate::api::Objects;
use crate::cache::Informer;
use crate::ctx::Ctx;
use crate::kapi::Target;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use drover_api::columns::{self, TableOptions};
use drover_api::timefmt::age;
use drover_api::{DaemonSet, Kind, Manifest, Node, Pod};
use drover_controller::Timestamp;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::SystemTime;

/// The grid's table of nodes that are not updated lists at most this many.
pub const MAX_WAITING_ROWS: usize = 200;

/// The grid of a DaemonSet over the informer's view now.
pub fn grid_of(informer: &Informer, ds: &DaemonSet) -> (Vec<Cell>, Option<String>) {
    let view = informer.snapshot();
    let nodes: Vec<&Node> = view.nodes.values().map(|n| n.as_ref()).collect();
    let pods: Vec<&Pod> = view.pods.values().map(|p| p.as_ref()).collect();
    grid::cells(ds, &nodes, &pods, Timestamp::from(SystemTime::now()))
}

/// The grid's HTML: a legend with counts, one square per node.
pub fn grid_html(cells: &[Cell]) -> String {
    let counts = grid::counts(cells);
    let mut out = legend(
        counts.iter().map(|(s, n)| (s.class(), s.label(), *n)),
        "cc-",
    );
    out.push_str(r#"<div class="grid" id="grid">"#);
    for c in cells {
        let _ = write!(
            out,
            r#"<i class="c s-{}" id="g:{}" title="{}: {}"></i>"#,
            c.state.class(),
            esc(&c.node),
            esc(&c.node),
            esc(&c.why)
        );
    }
    out.push_str("</div>");
    out
}

/// The nodes not updated and why (the first [`MAX_WAITING_ROWS`]).
pub fn waiting_table(cells: &[Cell]) -> String {
    let rows: Vec<(Option<String>, Vec<String>)> = cells
        .iter()
        .filter(|c| !matches!(c.state, CellState::Updated | CellState::Ineligible))
        .take(MAX_WAITING_ROWS)
        .map(|c| {
            (
                None,
                vec![
                    link(&format!("/ui/nodes/{}", url(&c.node)), &c.node),
                    format!(
                        r#"<span class="pill s-{}">{}</span>"#,
                        c.state.class(),
                        c.state.label()
                    ),
                    esc(&c.why),
                ],
            )
        })
        .collect();
    table(&["NODE", "STATE", "WAITING FOR"], &rows)
}

/// The nodes that should not run the DaemonSet, grouped by why.
pub fn ineligible_table(cells: &[Cell]) -> String {
    let mut by_reason: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for c in cells.iter().filter(|c| c.state == CellState::Ineligible) {
        by_reason.entry(&c.why).or_default().push(&c.node);
    }
    let rows: Vec<(Option<String>, Vec<String>)> = by_reason
        .iter()
        .map(|(why, nodes)| {
            let mut named: Vec<&str> = nodes.iter().take(5).copied().collect();
            if nodes.len() > 5 {
                named.push("…");
            }
            (
                None,
                vec![esc(why), nodes.len().to_string(), esc(&named.join(", "))],
            )
        })
        .collect();
    table(&["REASON", "NODES", "FOR EXAMPLE"], &rows)
}

fn opts() -> TableOptions {
    TableOptions {
        wide: false,
        all_namespaces: false,
        now: SystemTime::now(),
    }
}

/// `/ui/daemonsets/NS/NAME`.
pub async fn daemon_set(
    ctx: &Arc<Ctx>,
    informer: &Informer,
    signed: &Signed,
    ns: &str,
    name: &str,
) -> Response {
    let view = informer.snapshot();
    let Some(ds) = view
        .daemon_sets
        .get(&key(Kind::DaemonSet, ns, name))
        .cloned()
    else {
        return not_found(signed, &format!("DaemonSet {ns}/{name} not found"));
    };
    drop(view);
    let (cells, idle) = grid_of(informer, &ds);
    let st = &ds.status;
    let strategy = &ds.spec.update_strategy;
    let strategy_type = strategy
        .r#type
        .as_ref()
        .map_or("RollingUpdate".to_string(), |t| format!("{t:?}"));
    let strategy_text = match &strategy.rolling_update {
        Some(r) => format!(
            "{} (maxUnavailable {}, maxSurge {})",
            strategy_type,
            r.max_unavailable
                .as_ref()
                .map_or("1".into(), |v| serde_json::to_string(v).unwrap_or_default()),
            r.max_surge
                .as_ref()
                .map_or("0".into(), |v| serde_json::to_string(v).unwrap_or_default())
        ),
        None => strategy_type,
    };
    let mut body = format!(
        r#"<h1>DaemonSet {ns}/{name}</h1><div class="counts"><span class="count"><b id="ds-desired">{}</b> desired</span><span class="count"><b id="ds-current">{}</b> current</span><span class="count ok"><b id="ds-ready">{}</b> ready</span><span class="count"><b id="ds-updated">{}</b> up-to-date</span><span class="count"><b id="ds-available">{}</b> available</span></div><p class="muted">revision hash <code>{}</code> · update strategy {} · generation {} observed {}</p>"#,
        st.desired_number_scheduled,
        st.current_number_scheduled,
        st.number_ready,
        st.updated_number_scheduled,
        st.number_available,
        esc(&grid::current_hash(&ds)),
        esc(&strategy_text),
        ds.metadata.generation.unwrap_or(0),
        st.observed_generation.unwrap_or(0),
        ns = esc(ns),
        name = esc(name),
    );
    let restart = action_button(
        signed,
        "restart",
        "Rollout restart",
        &format!("Restart every pod of DaemonSet {ns}/{name}, as its rolling update allows?"),
        &[("namespace", ns), ("name", name)],
    );
    let undo = action_button(
        signed,
        "undo",
        "Rollout undo",
        &format!("Roll DaemonSet {ns}/{name} back to its previous revision?"),
        &[("namespace", ns), ("name", name)],
    );
    let _ = write!(body, r#"<div class="actions">{restart}{undo}</div>"#);
    if let Some(idle) = idle {
        let _ = write!(body, r#"<p class="error">{}</p>"#, esc(&idle));
    }
    let _ = write!(
        body,
        r#"<section><h2>Rollout</h2>{}</section><section><h2>Nodes not updated</h2><div id="ds-waiting">{}</div></section><section><h2>Nodes that should not run it</h2><div id="ds-ineligible">{}</div></section>"#,
        grid_html(&cells),
        waiting_table(&cells),
        ineligible_table(&cells)
    );
    let objects = Objects::new(ctx.clone());
    let revisions: Vec<Manifest> = objects
        .list(Kind::ControllerRevision, Some(ns), None)
        .await
        .map(|(l, _)| l)
        .unwrap_or_default()
        .into_iter()
        .filter(|m| match m {
            Manifest::ControllerRevision(r) => r
                .metadata
                .controller_ref()
                .is_some_and(|o| o.uid == ds.metadata.uid),
            _ => false,
        })
        .collect();
    let o = opts();
    let rows: Vec<(Option<String>, Vec<String>)> = revisions
        .iter()
        .rev()
        .map(|m| (None, columns::row(m, &o).iter().map(|c| esc(c)).collect()))
        .collect();
    let _ = write!(
        body,
        "<section><h2>Revisions</h2>{}</section>",
        table(&columns::headers(Kind::ControllerRevision, &o), &rows)
    );
    let evs = events_about(&objects, "DaemonSet", ns, name).await;
    let _ = write!(
        body,
        "<section><h2>Events</h2>{}</section>",
        events_table(&evs)
    );
    let live = format!("/ui/live/daemonsets/{}/{}", url(ns), url(name));
    html_page(
        StatusCode::OK,
        frame(
            signed,
            &format!("DaemonSet {name}"),
            Section::Workloads,
            Some(&live),
            &body,
        ),
    )
}

fn container_state(s: &drover_api::ContainerState) -> String {
    if let Some(w) = &s.waiting {
        format!("Waiting: {}", w.reason)
    } else if let Some(r) = &s.running {
        format!("Running since {}", r.started_at.as_deref().unwrap_or("?"))
    } else if let Some(t) = &s.terminated {
        format!("Terminated: {} (exit code {})", t.reason, t.exit_code)
    } else {
        "-".into()
    }
}

/// The Deployment that controls ReplicaSet `ns/rs`, if one does.
fn deployment_of(informer: &Informer, ns: &str, rs: &str) -> Option<String> {
    let snap = informer.snapshot();
    let rs = snap.replica_sets.get(&key(Kind::ReplicaSet, ns, rs))?;
    rs.metadata
        .controller_ref()
        .filter(|o| o.kind == "Deployment")
        .map(|o| o.name.clone())
}

/// `/ui/pods/NS/NAME` (and `…/log`, the container's log as text).
pub async fn pod(
    ctx: &Arc<Ctx>,
    informer: &Informer,
    signed: &Signed,
    ns: &str,
    name: &str,
) -> Response {
    let view = informer.snapshot();
    let Some(p) = view.pods.get(&key(Kind::Pod, ns, name)).cloned() else {
        return not_found(signed, &format!("pod {ns}/{name} not found"));
    };
    drop(view);
    let now = SystemTime::now();
    let node = p.spec.node_name.clone();
    let owner = p
        .metadata
        .controller_ref()
        .map(|o| {
            if o.kind == "DaemonSet" {
                link(
                    &format!("/ui/daemonsets/{}/{}", url(ns), url(&o.name)),
                    &format!("DaemonSet/{}", o.name),
                )
            } else if let Some(d) = deployment_of(informer, ns, &o.name) {
                link(
                    &format!("/ui/deployments/{}/{}", url(ns), url(&d)),
                    &format!("{}/{} (Deployment/{d})", o.kind, o.name),
                )
            } else {
                esc(&format!("{}/{}", o.kind, o.name))
            }
        })
        .unwrap_or_else(|| "&lt;none&gt;".into());
    let mut body = format!(
        r#"<h1>Pod {ns}/{name}</h1><p><span class="pill" id="pod-status">{status}</span></p><dl class="facts"><dt>Node</dt><dd>{node}</dd><dt>Controlled by</dt><dd>{owner}</dd><dt>Ready</dt><dd>{ready}</dd><dt>Restarts</dt><dd>{restarts}</dd><dt>IP</dt><dd>{ip}</dd><dt>Age</dt><dd>{age}</dd></dl>"#,
        ns = esc(ns),
        name = esc(name),
        status = esc(&columns::pod_status(&p)),
        node = if node.is_empty() {
            "&lt;none&gt;".into()
        } else {
            link(&format!("/ui/nodes/{}", url(&node)), &node)
        },
        ready = esc(&columns::pod_ready(&p)),
        restarts = esc(&columns::pod_restarts(&p, now)),
        ip = esc(&p.status.pod_ip),
        age = age(p.metadata.creation_timestamp.as_deref(), now),
    );
    let delete = action_button(
        signed,
        "delete-pod",
        "Delete pod",
        &format!("Delete pod {ns}/{name}? Its controller, if any, makes a new one."),
        &[("namespace", ns), ("name", name)],
    );
    let _ = write!(body, r#"<div class="actions">{delete}</div>"#);
    let rows: Vec<(Option<String>, Vec<String>)> = p
        .spec
        .containers
        .iter()
        .map(|c| {
            let s = p
                .status
                .container_statuses
                .iter()
                .find(|s| s.name == c.name);
            (
                None,
                vec![
                    esc(&c.name),
                    esc(&c.image),
                    esc(&s.map_or("-".into(), |s| container_state(&s.state))),
                    s.map_or("false".into(), |s| s.ready.to_string()),
                    s.map_or("0".into(), |s| s.restart_count.to_string()),
                    esc(&s.map_or(String::new(), |s| container_state(&s.last_state))),
                ],
            )
        })
        .collect();
    let _ = write!(
        body,
        "<h2>Containers</h2>{}",
        table(
            &["NAME", "IMAGE", "STATE", "READY", "RESTARTS", "LAST STATE"],
            &rows
        )
    );
    let conds: Vec<(Option<String>, Vec<String>)> = p
        .status
        .conditions
        .iter()
        .map(|c| {
            (
                None,
                vec![
                    esc(&c.r#type),
                    esc(c.status.as_ref().map_or("", |s| s.as_str())),
                ],
            )
        })
        .collect();
    let _ = write!(
        body,
        "<h2>Conditions</h2>{}",
        table(&["TYPE", "STATUS"], &conds)
    );
    let objects = Objects::new(ctx.clone());
    let evs = events_about(&objects, "Pod", ns, name).await;
    let _ = write!(body, "<h2>Events</h2>{}", events_table(&evs));
    let log = format!("/ui/pods/{}/{}/log", url(ns), url(name));
    let _ = write!(
        body,
        r#"<h2>Log</h2><p><a href="{log}?tailLines=10000" id="full-log">Open the full log</a></p><pre class="log" id="log" data-follow="{log}?follow=true&amp;tailLines=50"></pre>"#,
        log = esc(&log)
    );
    html_page(
        StatusCode::OK,
        frame(
            signed,
            &format!("Pod {name}"),
            Section::Workloads,
            None,
            &body,
        ),
    )
}

/// `/ui/pods/NS/NAME/log`: the container's log as `text/plain`, through
/// the Kubernetes API's `pods/log` (the same parameters).
pub async fn pod_log(ctx: &Arc<Ctx>, ns: &str, name: &str, query: &str) -> Response {
    let objects = Objects::new(ctx.clone());
    let target = Target {
        kind: Kind::Pod,
        namespace: Some(ns.to_string()),
        name: Some(name.to_string()),
        sub: Some("log".into()),
    };
    match crate::kapi::logs::logs(&objects, &target, &params(query)).await {
        Ok(r) => r,
        Err(refusal) => refusal.into_response(),
    }
}
