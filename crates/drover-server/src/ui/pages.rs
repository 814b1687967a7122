//! The dashboard's pages about the cluster: the overview, the nodes (a
//! filter box and pages of [`PAGE_SIZE`], so that 10,000 nodes stay
//! fast), one node, the workloads and the events. Everything comes from
//! this member's informer, except the events and the raft status, which
//! the store answers. The DaemonSet and pod pages are in `workloads.rs`,
//! the Deployment page in `deployment.rs`; [`super::page`] routes to each.

use super::html::{esc, frame, link, table, url, Section};
use super::{html_page, Signed};
use crate::api::codec::key;
use crate::api::Objects;
use crate::cache::{Informer, Snapshot};
use crate::ctx::Ctx;
use axum::http::StatusCode;
use axum::response::Response;
use drover_api::columns::{self, TableOptions};
use drover_api::timefmt::{age, human_duration};
use drover_api::{Event, Kind, Manifest, Node, Pod};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// Rows of one page of nodes (or events).
pub const PAGE_SIZE: usize = 100;

/// At most this many events are listed.
pub const MAX_EVENTS: usize = 500;

/// Whether `path` is a page (a browser without a session is sent to the
/// sign-in form rather than refused).
pub fn is_page(path: &str) -> bool {
    !path.starts_with("/ui/live/") && path != "/ui/app.js" && path != "/ui/action"
}

/// The query string's parameters.
pub fn params(query: &str) -> HashMap<String, String> {
    serde_urlencoded::from_str(query).unwrap_or_default()
}

/// A page that says what was not found.
pub fn not_found(signed: &Signed, what: &str) -> Response {
    let body = format!(
        r#"<h1>Not found</h1><p class="error">{}</p><p><a href="/ui">Back to the overview</a></p>"#,
        esc(what)
    );
    html_page(
        StatusCode::NOT_FOUND,
        frame(signed, "Not found", Section::Overview, None, &body),
    )
}

fn opts(wide: bool, all_namespaces: bool) -> TableOptions {
    TableOptions {
        wide,
        all_namespaces,
        now: SystemTime::now(),
    }
}

/// Node counts: total, Ready, NotReady, cordoned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct NodeCounts {
    pub total: usize,
    pub ready: usize,
    pub not_ready: usize,
    pub cordoned: usize,
}

pub fn node_counts<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> NodeCounts {
    let mut c = NodeCounts::default();
    for n in nodes {
        c.total += 1;
        if n.is_ready() {
            c.ready += 1;
        } else {
            c.not_ready += 1;
        }
        if n.spec.unschedulable {
            c.cordoned += 1;
        }
    }
    c
}

pub fn counts_html(c: &NodeCounts) -> String {
    format!(
        r#"<div class="counts"><a class="count" href="/ui/nodes"><b id="count-total">{}</b> nodes</a><a class="count ok" href="/ui/nodes?q=Ready"><b id="count-ready">{}</b> Ready</a><a class="count bad" href="/ui/nodes?q=NotReady"><b id="count-not_ready">{}</b> NotReady</a><a class="count warn" href="/ui/nodes?q=SchedulingDisabled"><b id="count-cordoned">{}</b> cordoned</a></div>"#,
        c.total, c.ready, c.not_ready, c.cordoned
    )
}

pub(super) async fn overview(ctx: &Arc<Ctx>, informer: &Informer, signed: &Signed) -> Response {
    let view = informer.snapshot();
    let mut body = String::from("<h1>Overview</h1>");
    match ctx.store.status().await {
        Ok(s) => {
            let _ = write!(
                body,
                r#"<section><h2>Control plane</h2><p>term <b id="term">{}</b> · commit index <b id="commit">{}</b> · applied <b>{}</b> · this member <code>{:016x}</code></p>"#,
                s.term, s.commit, s.applied, s.id
            );
            let rows: Vec<(Option<String>, Vec<String>)> = s
                .members
                .iter()
                .filter(|m| !m.removed)
                .map(|m| {
                    let role = if Some(m.id) == s.leader {
                        r#"<span class="pill ok">leader</span>"#
                    } else if m.learner {
                        r#"<span class="pill">learner</span>"#
                    } else {
                        r#"<span class="pill">follower</span>"#
                    };
                    (
                        None,
                        vec![
                            format!("<code>{:016x}</code>", m.id),
                            role.to_string(),
                            esc(&m.addr),
                            esc(&m.http),
                        ],
                    )
                })
                .collect();
            body.push_str(&table(&["MEMBER", "ROLE", "ADDRESS", "HTTP"], &rows));
            body.push_str("</section>");
        }
        Err(e) => {
            let _ = write!(
                body,
                r#"<p class="error">this member cannot tell the raft status: {}</p>"#,
                esc(&e.to_string())
            );
        }
    }
    let c = node_counts(view.nodes.values().map(|n| n.as_ref()));
    let _ = write!(body, "<section><h2>Nodes</h2>{}</section>", counts_html(&c));
    body.push_str("<section><h2>Workloads</h2>");
    body.push_str(&workload_table(&view));
    body.push_str("</section>");
    html_page(
        StatusCode::OK,
        frame(
            signed,
            "Overview",
            Section::Overview,
            Some("/ui/live/overview"),
            &body,
        ),
    )
}

/// The DaemonSets and the Deployments in kubectl's columns (`get ds -A`,
/// `get deploy -A`), each a link to its page.
fn workload_table(view: &Snapshot) -> String {
    format!("{}{}", daemon_set_table(view), deployment_table(view))
}

fn deployment_table(view: &Snapshot) -> String {
    let o = opts(false, true);
    let headers = columns::headers(Kind::Deployment, &o);
    let rows: Vec<(Option<String>, Vec<String>)> = view
        .deployments
        .values()
        .map(|d| {
            let m = Manifest::Deployment(Box::new((**d).clone()));
            let mut cells: Vec<String> = columns::row(&m, &o).iter().map(|c| esc(c)).collect();
            if let Some(name) = cells.get_mut(1) {
                *name = link(
                    &format!(
                        "/ui/deployments/{}/{}",
                        url(&d.metadata.namespace),
                        url(&d.metadata.name)
                    ),
                    &d.metadata.name,
                );
            }
            (
                Some(format!("dp:{}/{}", d.metadata.namespace, d.metadata.name)),
                cells,
            )
        })
        .collect();
    format!("<h3>Deployments</h3>{}", table(&headers, &rows))
}

fn daemon_set_table(view: &Snapshot) -> String {
    let o = opts(false, true);
    let headers = columns::headers(Kind::DaemonSet, &o);
    let rows: Vec<(Option<String>, Vec<String>)> = view
        .daemon_sets
        .values()
        .map(|ds| {
            let m = Manifest::DaemonSet(Box::new((**ds).clone()));
            let mut cells: Vec<String> = columns::row(&m, &o).iter().map(|c| esc(c)).collect();
            if let Some(name) = cells.get_mut(1) {
                *name = link(
                    &format!(
                        "/ui/daemonsets/{}/{}",
                        url(&ds.metadata.namespace),
                        url(&ds.metadata.name)
                    ),
                    &ds.metadata.name,
                );
            }
            (
                Some(format!("ds:{}/{}", ds.metadata.namespace, ds.metadata.name)),
                cells,
            )
        })
        .collect();
    format!("<h3>DaemonSets</h3>{}", table(&headers, &rows))
}

pub(super) fn workload_list(informer: &Informer, signed: &Signed) -> Response {
    let view = informer.snapshot();
    let body = format!("<h1>Workloads</h1>{}", workload_table(&view));
    html_page(
        StatusCode::OK,
        frame(
            signed,
            "Workloads",
            Section::Workloads,
            Some("/ui/live/overview"),
            &body,
        ),
    )
}

/// Whether `n` matches every term of a filter: `key=value` (a label),
/// else a case-insensitive part of its name, its STATUS or a label.
pub fn matches(n: &Node, filter: &str) -> bool {
    let status = columns::node_status(n);
    filter.split_whitespace().all(|term| {
        if let Some((k, v)) = term.split_once('=') {
            return n.metadata.labels.get(k).is_some_and(|have| have == v);
        }
        let t = term.to_ascii_lowercase();
        // "Ready" alone means Ready, not NotReady.
        if t == "ready" {
            return n.is_ready();
        }
        n.metadata.name.to_ascii_lowercase().contains(&t)
            || status.to_ascii_lowercase().contains(&t)
            || n.metadata.labels.iter().any(|(k, v)| {
                k.to_ascii_lowercase().contains(&t) || v.to_ascii_lowercase().contains(&t)
            })
    })
}

/// One page (1-based) of `items`: the slice and the number of pages.
pub fn paged<T>(items: &[T], page: usize) -> (&[T], usize) {
    let pages = items.len().div_ceil(PAGE_SIZE).max(1);
    let page = page.clamp(1, pages);
    let start = (page - 1) * PAGE_SIZE;
    let end = (start + PAGE_SIZE).min(items.len());
    (&items[start.min(end)..end], pages)
}

/// CPU millis as Kubernetes prints them (`250m`, `2`).
pub fn cpu(millis: i128) -> String {
    if millis % 1000 == 0 {
        format!("{}", millis / 1000)
    } else {
        format!("{millis}m")
    }
}

/// Bytes as `Mi`/`Gi` (binary), or bytes below 1 Mi.
pub fn bytes(b: i128) -> String {
    const MI: i128 = 1 << 20;
    if b >= 1024 * MI && b % (1024 * MI) == 0 {
        format!("{}Gi", b / (1024 * MI))
    } else if b >= MI {
        format!("{}Mi", b / MI)
    } else {
        b.to_string()
    }
}

/// What the pods of a node request: cpu (millis) and memory (bytes).
pub fn requested(pods: &[Arc<Pod>]) -> (i128, i128) {
    let (mut c, mut m) = (0, 0);
    for p in pods {
        let r = drover_controller::daemon::fit::requests(&p.spec);
        c += r.get("cpu").copied().unwrap_or(0);
        m += r.get("memory").copied().unwrap_or(0);
    }
    (c, m)
}

/// The age of the node's last heartbeat: as this member heard it (the
/// leader hears every node's), else its Ready condition's.
pub fn heartbeat_age(n: &Node, heard: &crate::heartbeats::LastHeard, now: SystemTime) -> String {
    if let Some(at) = heard.get(n.metadata.name.as_str()) {
        return human_duration(at.elapsed());
    }
    let t = n
        .condition(drover_api::node_condition::READY)
        .and_then(|c| c.last_heartbeat_time.as_deref());
    age(t, now)
}

/// A node's STATUS and the pill's class for it.
pub fn node_status_class(n: &Node) -> (String, &'static str) {
    let s = columns::node_status(n);
    let class = if !n.is_ready() {
        "pill bad"
    } else if n.spec.unschedulable {
        "pill warn"
    } else {
        "pill ok"
    };
    (s, class)
}

/// A node's STATUS as a pill coloured by it.
pub fn status_pill(n: &Node) -> String {
    let (s, class) = node_status_class(n);
    format!(r#"<span class="{class}" data-status="">{}</span>"#, esc(&s))
}

fn taints(n: &Node) -> String {
    if n.spec.taints.is_empty() {
        return "&lt;none&gt;".into();
    }
    n.spec
        .taints
        .iter()
        .map(|t| {
            let effect = t.effect.as_ref().map(|e| e.as_str()).unwrap_or("");
            if t.value.is_empty() {
                esc(&format!("{}:{effect}", t.key))
            } else {
                esc(&format!("{}={}:{effect}", t.key, t.value))
            }
        })
        .collect::<Vec<_>>()
        .join("<br>")
}

fn quantity(n: &Node, name: &str) -> String {
    n.status
        .allocatable
        .get(name)
        .map_or("-".into(), |q| q.0.clone())
}

pub(super) fn nodes(
    ctx: &Arc<Ctx>,
    informer: &Informer,
    signed: &Signed,
    q: &HashMap<String, String>,
) -> Response {
    let started = Instant::now();
    let view = informer.snapshot();
    let filter = q.get("q").map(String::as_str).unwrap_or("").trim();
    let page: usize = q.get("page").and_then(|p| p.parse().ok()).unwrap_or(1);
    let all: Vec<&Arc<Node>> = view
        .nodes
        .values()
        .filter(|n| filter.is_empty() || matches(n, filter))
        .collect();
    let (shown, pages) = paged(&all, page);
    let page = page.clamp(1, pages);
    let o = opts(false, false);
    let heard = ctx.heartbeats.snapshot();
    let now = SystemTime::now();
    let mut headers = columns::headers(Kind::Node, &o);
    headers.extend([
        "PODS",
        "CPU REQ/ALLOC",
        "MEMORY REQ/ALLOC",
        "HEARTBEAT",
        "TAINTS",
    ]);
    let rows: Vec<(Option<String>, Vec<String>)> = shown
        .iter()
        .map(|n| {
            let m = Manifest::Node(Box::new((***n).clone()));
            let mut cells: Vec<String> = columns::row(&m, &o).iter().map(|c| esc(c)).collect();
            if let Some(c) = cells.get_mut(0) {
                *c = link(
                    &format!("/ui/nodes/{}", url(&n.metadata.name)),
                    &n.metadata.name,
                );
            }
            if let Some(c) = cells.get_mut(1) {
                *c = status_pill(n);
            }
            let (pods, _) = informer.node_pods(&n.metadata.name);
            let (cpu_req, mem_req) = requested(&pods);
            cells.push(pods.len().to_string());
            cells.push(format!("{} / {}", cpu(cpu_req), esc(&quantity(n, "cpu"))));
            cells.push(format!(
                "{} / {}",
                bytes(mem_req),
                esc(&quantity(n, "memory"))
            ));
            cells.push(heartbeat_age(n, &heard, now));
            cells.push(taints(n));
            (Some(format!("n:{}", n.metadata.name)), cells)
        })
        .collect();
    let c = node_counts(view.nodes.values().map(|n| n.as_ref()));
    let nav = pager("/ui/nodes", filter, page, pages);
    let live = format!("/ui/live/nodes?q={}&page={page}", url(filter));
    let body = format!(
        r#"<h1>Nodes</h1>{counts}<form method="get" action="/ui/nodes" class="filter" role="search"><input type="search" name="q" id="filter" value="{f}" placeholder="filter: name, status, key=value" aria-label="filter nodes"><button type="submit">Filter</button></form><p class="muted" id="shown">{matching} matching of {total}; page {page} of {pages}</p>{nav}{table}{nav}<p class="muted">rendered in {ms} ms</p>"#,
        counts = counts_html(&c),
        f = esc(filter),
        matching = all.len(),
        total = view.nodes.len(),
        table = table(&headers, &rows),
        ms = started.elapsed().as_millis(),
    );
    html_page(
        StatusCode::OK,
        frame(signed, "Nodes", Section::Nodes, Some(&live), &body),
    )
}

/// Links to the previous and next pages.
pub fn pager(base: &str, filter: &str, page: usize, pages: usize) -> String {
    if pages <= 1 {
        return String::new();
    }
    let href = |p: usize| format!("{base}?q={}&page={p}", url(filter));
    let prev = if page > 1 {
        format!(
            r#"<a rel="prev" href="{}">‹ previous</a>"#,
            esc(&href(page - 1))
        )
    } else {
        String::new()
    };
    let next = if page < pages {
        format!(
            r#"<a rel="next" href="{}">next ›</a>"#,
            esc(&href(page + 1))
        )
    } else {
        String::new()
    };
    format!(r#"<nav class="pager">{prev} <span>{page} / {pages}</span> {next}</nav>"#)
}

/// A pods table (`get pods -A -o wide` columns), each pod a link.
pub fn pods_table(pods: &[&Pod]) -> String {
    let o = opts(true, true);
    let headers = columns::headers(Kind::Pod, &o);
    let rows: Vec<(Option<String>, Vec<String>)> = pods
        .iter()
        .map(|p| {
            let m = Manifest::Pod(Box::new((*p).clone()));
            let mut cells: Vec<String> = columns::row(&m, &o).iter().map(|c| esc(c)).collect();
            if let Some(c) = cells.get_mut(1) {
                *c = link(
                    &format!(
                        "/ui/pods/{}/{}",
                        url(&p.metadata.namespace),
                        url(&p.metadata.name)
                    ),
                    &p.metadata.name,
                );
            }
            (
                Some(format!("p:{}/{}", p.metadata.namespace, p.metadata.name)),
                cells,
            )
        })
        .collect();
    table(&headers, &rows)
}

pub(super) async fn node(
    ctx: &Arc<Ctx>,
    informer: &Informer,
    signed: &Signed,
    name: &str,
) -> Response {
    let view = informer.snapshot();
    let Some(n) = view.nodes.get(&key(Kind::Node, "", name)) else {
        return not_found(
            signed,
            &format!("node {name} not found: it may have been deleted"),
        );
    };
    let heard = ctx.heartbeats.snapshot();
    let now = SystemTime::now();
    let (pods, _) = informer.node_pods(name);
    let (cpu_req, mem_req) = requested(&pods);
    let mut body = format!(
        r#"<h1>Node {}</h1><p id="node-status">{}</p>"#,
        esc(name),
        status_pill(n)
    );
    let cordon = if n.spec.unschedulable {
        super::html::action_button(
            signed,
            "uncordon",
            "Uncordon",
            &format!("Uncordon node {name}?"),
            &[("node", name)],
        )
    } else {
        super::html::action_button(
            signed,
            "cordon",
            "Cordon",
            &format!("Cordon node {name}? No new pods will be placed on it."),
            &[("node", name)],
        )
    };
    let drain = super::html::action_button(
        signed,
        "drain",
        "Drain",
        &format!("Drain node {name}? It is cordoned and its pods not managed by a DaemonSet are deleted."),
        &[("node", name)],
    );
    let _ = write!(body, r#"<div class="actions">{cordon}{drain}</div>"#);
    let labels: Vec<String> = n
        .metadata
        .labels
        .iter()
        .map(|(k, v)| format!("<code>{}={}</code>", esc(k), esc(v)))
        .collect();
    let alloc: Vec<String> = n
        .status
        .allocatable
        .iter()
        .map(|(k, v)| format!("{}: {}", esc(k), esc(&v.0)))
        .collect();
    let info = &n.status.node_info;
    let _ = write!(
        body,
        r#"<dl class="facts"><dt>Roles</dt><dd>{roles}</dd><dt>Labels</dt><dd>{labels}</dd><dt>Taints</dt><dd>{taints}</dd><dt>Unschedulable</dt><dd>{unsched}</dd><dt>Allocatable</dt><dd>{alloc}</dd><dt>Requested</dt><dd>cpu: {cpu_req}, memory: {mem_req}</dd><dt>Last heartbeat</dt><dd>{hb} ago</dd><dt>Kubelet version</dt><dd>{kv}</dd><dt>Container runtime</dt><dd>{rt}</dd><dt>Age</dt><dd>{age}</dd></dl>"#,
        roles = esc(&columns::node_roles(n)),
        labels = labels.join(" "),
        taints = taints(n),
        unsched = n.spec.unschedulable,
        alloc = alloc.join(", "),
        cpu_req = cpu(cpu_req),
        mem_req = bytes(mem_req),
        hb = heartbeat_age(n, &heard, now),
        kv = esc(&info.kubelet_version),
        rt = esc(&info.container_runtime_version),
        age = age(n.metadata.creation_timestamp.as_deref(), now),
    );
    let conds: Vec<(Option<String>, Vec<String>)> = n
        .status
        .conditions
        .iter()
        .map(|c| {
            (
                None,
                vec![
                    esc(&c.r#type),
                    esc(c.status.as_ref().map_or("", |s| s.as_str())),
                    esc(c.last_heartbeat_time.as_deref().unwrap_or("")),
                    esc(c.last_transition_time.as_deref().unwrap_or("")),
                    esc(&c.reason),
                    esc(&c.message),
                ],
            )
        })
        .collect();
    let _ = write!(
        body,
        "<h2>Conditions</h2>{}",
        table(
            &[
                "TYPE",
                "STATUS",
                "LASTHEARTBEATTIME",
                "LASTTRANSITIONTIME",
                "REASON",
                "MESSAGE"
            ],
            &conds
        )
    );
    let pod_refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
    let _ = write!(body, "<h2>Pods</h2>{}", pods_table(&pod_refs));
    let objects = Objects::new(ctx.clone());
    let evs = events_about(&objects, "Node", "", name).await;
    let _ = write!(body, "<h2>Events</h2>{}", events_table(&evs));
    let live = format!("/ui/live/nodes?name={}", url(name));
    html_page(
        StatusCode::OK,
        frame(
            signed,
            &format!("Node {name}"),
            Section::Nodes,
            Some(&live),
            &body,
        ),
    )
}

/// Every event, newest first (an empty list when the store cannot be read).
pub async fn all_events(objects: &Objects) -> Vec<Event> {
    let Ok((list, _)) = objects.list(Kind::Event, None, None).await else {
        return Vec::new();
    };
    let mut evs: Vec<Event> = list
        .into_iter()
        .filter_map(|m| match m {
            Manifest::Event(e) => Some(*e),
            _ => None,
        })
        .collect();
    evs.sort_by_key(|e| std::cmp::Reverse(columns::event_sort_time(e)));
    evs
}

/// The events about one object, newest first. Events are named
/// `<object>.<suffix>` in the object's namespace (`default` for a node's),
/// as Kubernetes' recorder names them: only those keys are read, not every
/// event of the cluster.
pub async fn events_about(
    objects: &Objects,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Vec<Event> {
    let ns = if namespace.is_empty() {
        "default"
    } else {
        namespace
    };
    let prefix = key(Kind::Event, ns, &format!("{name}."));
    let store = &objects.ctx().store;
    let Ok((kvs, _)) = objects
        .ctx()
        .read(|| store.list(&prefix, drover_store::Consistency::Linearizable))
        .await
    else {
        return Vec::new();
    };
    let mut evs: Vec<Event> = kvs
        .iter()
        .filter_map(|kv| match crate::api::codec::decode(kv) {
            Ok(Manifest::Event(e)) => Some(*e),
            _ => None,
        })
        .collect();
    evs.sort_by_key(|e| std::cmp::Reverse(columns::event_sort_time(e)));
    evs.into_iter()
        .filter(|e| {
            let o = &e.involved_object;
            o.kind == kind && o.name == name && (namespace.is_empty() || o.namespace == namespace)
        })
        .take(MAX_EVENTS)
        .collect()
}

/// Events in `get events -A` columns.
pub fn events_table(evs: &[Event]) -> String {
    let o = opts(false, true);
    let headers = columns::headers(Kind::Event, &o);
    let rows: Vec<(Option<String>, Vec<String>)> = evs
        .iter()
        .map(|e| {
            let m = Manifest::Event(Box::new(e.clone()));
            let cells = columns::row(&m, &o).iter().map(|c| esc(c)).collect();
            let warn = e.r#type == "Warning";
            (warn.then(|| "warning".to_string()), cells)
        })
        .collect();
    table(&headers, &rows)
}

pub(super) async fn events(
    ctx: &Arc<Ctx>,
    signed: &Signed,
    q: &HashMap<String, String>,
) -> Response {
    let objects = Objects::new(ctx.clone());
    let filter = q.get("q").map(String::as_str).unwrap_or("").trim();
    let want = filter.to_ascii_lowercase();
    let evs: Vec<Event> = all_events(&objects)
        .await
        .into_iter()
        .filter(|e| {
            want.is_empty()
                || [
                    e.reason.as_str(),
                    e.message.as_str(),
                    e.r#type.as_str(),
                    e.involved_object.name.as_str(),
                    e.involved_object.kind.as_str(),
                    e.metadata.namespace.as_str(),
                ]
                .iter()
                .any(|f| f.to_ascii_lowercase().contains(&want))
        })
        .take(MAX_EVENTS)
        .collect();
    let body = format!(
        r#"<h1>Events</h1><form method="get" action="/ui/events" class="filter" role="search"><input type="search" name="q" id="filter" value="{}" placeholder="filter: reason, object, message, Warning" aria-label="filter events"><button type="submit">Filter</button></form><p class="muted">{} shown, newest first (at most {MAX_EVENTS})</p>{}"#,
        esc(filter),
        evs.len(),
        events_table(&evs)
    );
    html_page(
        StatusCode::OK,
        frame(signed, "Events", Section::Events, None, &body),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ready: bool, cordoned: bool, labels: &[(&str, &str)]) -> Node {
        let mut n = Node::default();
        n.metadata.name = name.into();
        n.spec.unschedulable = cordoned;
        for (k, v) in labels {
            n.metadata.labels.insert(k.to_string(), v.to_string());
        }
        n.status.conditions.push(drover_api::NodeCondition {
            r#type: "Ready".into(),
            status: Some(if ready {
                drover_api::ConditionStatus::True
            } else {
                drover_api::ConditionStatus::Unknown
            }),
            ..Default::default()
        });
        n
    }

    #[test]
    fn the_filter_reads_names_statuses_and_labels() {
        let a = node("edge-1", true, false, &[("zone", "a")]);
        let b = node("edge-2", false, false, &[("zone", "b")]);
        let c = node("core-1", true, true, &[("zone", "a")]);
        assert!(matches(&a, "edge"));
        assert!(matches(&a, "Ready") && !matches(&b, "Ready"));
        assert!(matches(&b, "notready") && !matches(&a, "NotReady"));
        assert!(matches(&c, "SchedulingDisabled"));
        assert!(matches(&a, "zone=a") && !matches(&b, "zone=a"));
        assert!(matches(&c, "zone=a core") && !matches(&a, "zone=a core"));
        assert!(matches(&a, ""));
        assert_eq!(
            node_counts([&a, &b, &c]),
            NodeCounts {
                total: 3,
                ready: 2,
                not_ready: 1,
                cordoned: 1
            }
        );
    }

    #[test]
    fn pages_cover_every_item_once() {
        let items: Vec<usize> = (0..250).collect();
        let (p1, pages) = paged(&items, 1);
        assert_eq!((p1.len(), pages), (100, 3));
        assert_eq!(paged(&items, 3).0, &items[200..]);
        assert_eq!(
            paged(&items, 99).0,
            &items[200..],
            "past the end: the last page"
        );
        assert_eq!(paged(&items, 0).0, &items[..100]);
        let none: Vec<usize> = Vec::new();
        assert_eq!(paged(&none, 1), (&none[..], 1));
    }

    #[test]
    fn quantities_as_kubernetes_prints_them() {
        assert_eq!(cpu(250), "250m");
        assert_eq!(cpu(2000), "2");
        assert_eq!(bytes(128 << 20), "128Mi");
        assert_eq!(bytes(2 << 30), "2Gi");
        assert_eq!(bytes(1000), "1000");
    }
}
