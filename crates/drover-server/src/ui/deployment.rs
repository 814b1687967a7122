//! The dashboard's Deployment page (`/ui/deployments/NS/NAME`): its
//! counters and `rollout status` line, conditions, strategy, ReplicaSets,
//! its pods as a grid coloured by state ([`super::deploy_grid`]), its
//! revisions and events; rollout restart and undo. The parts that move
//! are [`live_parts`], which the page and its live stream
//! ([`super::live`]) both render, so a live update is the page as a
//! reload would show it.

use super::deploy_grid::{self, PodCell, PodState};
use super::html::{action_button, esc, frame, legend, link, table, url, Section};
use super::pages::{events_about, events_table, not_found};
use super::{html_page, Signed};
use crate::api::codec::key;
use crate::api::Objects;
use crate::cache::{Informer, Snapshot};
use crate::ctx::Ctx;
use axum::http::StatusCode;
use axum::response::Response;
use drover_api::timefmt::age;
use drover_api::{
    Deployment, DeploymentStrategyType, Kind, Pod, ReplicaSet, POD_TEMPLATE_HASH_LABEL,
};
use drover_controller::daemon::rollout::CHANGE_CAUSE_ANNOTATION;
use drover_controller::deployment::view::{new_replica_set, owned, revision, status_line};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::SystemTime;

/// The table of pods not updated lists at most this many.
pub const MAX_POD_ROWS: usize = 200;

/// The ReplicaSets of `d`'s namespace in the informer's view.
fn replica_sets_of(snap: &Snapshot, d: &Deployment) -> Vec<ReplicaSet> {
    snap.replica_sets
        .values()
        .filter(|rs| rs.metadata.namespace == d.metadata.namespace)
        .map(|rs| (**rs).clone())
        .collect()
}

/// The Deployment `ns/name` in the view, with its namespace's ReplicaSets
/// and pods.
pub fn find(snap: &Snapshot, ns: &str, name: &str) -> Option<(Deployment, Vec<ReplicaSet>)> {
    let d = snap.deployments.get(&key(Kind::Deployment, ns, name))?;
    let sets = replica_sets_of(snap, d);
    Some(((**d).clone(), sets))
}

fn pods_of<'a>(snap: &'a Snapshot, ns: &str) -> Vec<&'a Pod> {
    snap.pods
        .values()
        .filter(|p| p.metadata.namespace == ns)
        .map(|p| p.as_ref())
        .collect()
}

fn strategy_text(d: &Deployment) -> String {
    let s = &d.spec.strategy;
    match s.r#type {
        Some(DeploymentStrategyType::Recreate) => "Recreate".into(),
        _ => {
            let v = |x: Option<&drover_api::IntOrString>| {
                x.map_or("25%".into(), |v| {
                    serde_json::to_string(v)
                        .unwrap_or_default()
                        .trim_matches('"')
                        .to_string()
                })
            };
            let r = s.rolling_update.as_ref();
            format!(
                "RollingUpdate (maxUnavailable {}, maxSurge {})",
                v(r.and_then(|r| r.max_unavailable.as_ref())),
                v(r.and_then(|r| r.max_surge.as_ref()))
            )
        }
    }
}

fn images(rs: &ReplicaSet) -> String {
    rs.spec
        .template
        .spec
        .containers
        .iter()
        .map(|c| c.image.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

fn grid_html(cells: &[PodCell], ns: &str) -> String {
    let counts = deploy_grid::counts(cells);
    let mut out = legend(
        counts.iter().map(|(s, n)| (s.class(), s.label(), *n)),
        "pc-",
    );
    out.push_str(r#"<div class="grid" id="grid">"#);
    for c in cells {
        let _ = write!(
            out,
            r#"<a class="c s-{}" id="p:{}" href="/ui/pods/{}/{}" title="{}: {}"></a>"#,
            c.state.class(),
            esc(&c.pod),
            url(ns),
            url(&c.pod),
            esc(&c.pod),
            esc(&c.why)
        );
    }
    if cells.is_empty() {
        out.push_str(r#"<span class="muted">no pods</span>"#);
    }
    out.push_str("</div>");
    out
}

fn waiting_table(cells: &[PodCell], ns: &str) -> String {
    let rows: Vec<(Option<String>, Vec<String>)> = cells
        .iter()
        .filter(|c| c.state != PodState::Updated)
        .take(MAX_POD_ROWS)
        .map(|c| {
            (
                None,
                vec![
                    link(&format!("/ui/pods/{}/{}", url(ns), url(&c.pod)), &c.pod),
                    format!(
                        r#"<span class="pill s-{}">{}</span>"#,
                        c.state.class(),
                        c.state.label()
                    ),
                    esc(&c.replica_set),
                    esc(&c.why),
                ],
            )
        })
        .collect();
    table(&["POD", "STATE", "REPLICASET", "WHY"], &rows)
}

fn conditions_table(d: &Deployment, now: SystemTime) -> String {
    let rows: Vec<(Option<String>, Vec<String>)> = d
        .status
        .conditions
        .iter()
        .map(|c| {
            (
                None,
                vec![
                    esc(&c.r#type),
                    esc(c.status.as_ref().map_or("Unknown", |s| s.as_str())),
                    esc(&c.reason),
                    age(c.last_update_time.as_deref(), now),
                    esc(&c.message),
                ],
            )
        })
        .collect();
    table(&["TYPE", "STATUS", "REASON", "UPDATED", "MESSAGE"], &rows)
}

fn replica_sets_table(d: &Deployment, sets: &[&ReplicaSet], now: SystemTime) -> String {
    let new = new_replica_set(d, sets).map(|rs| rs.metadata.uid.clone());
    let rows: Vec<(Option<String>, Vec<String>)> = sets
        .iter()
        .rev()
        .map(|rs| {
            let is_new = Some(&rs.metadata.uid) == new.as_ref();
            (
                Some(format!("rs:{}", rs.metadata.name)),
                vec![
                    format!(
                        "{}{}",
                        esc(&rs.metadata.name),
                        if is_new {
                            r#" <span class="pill ok">new</span>"#
                        } else {
                            ""
                        }
                    ),
                    revision(rs).map_or("-".into(), |r| r.to_string()),
                    rs.spec.replicas.unwrap_or(1).to_string(),
                    rs.status.replicas.to_string(),
                    rs.status.ready_replicas.to_string(),
                    esc(rs
                        .metadata
                        .labels
                        .get(POD_TEMPLATE_HASH_LABEL)
                        .map_or("", String::as_str)),
                    esc(&images(rs)),
                    age(rs.metadata.creation_timestamp.as_deref(), now),
                ],
            )
        })
        .collect();
    table(
        &[
            "NAME",
            "REVISION",
            "DESIRED",
            "CURRENT",
            "READY",
            "POD-TEMPLATE-HASH",
            "IMAGES",
            "AGE",
        ],
        &rows,
    )
}

fn revisions_table(sets: &[&ReplicaSet]) -> String {
    let mut by_revision: BTreeMap<i64, &ReplicaSet> = BTreeMap::new();
    for rs in sets.iter().copied() {
        if let Some(r) = revision(rs) {
            by_revision.insert(r, rs);
        }
    }
    let rows: Vec<(Option<String>, Vec<String>)> = by_revision
        .iter()
        .rev()
        .map(|(r, rs)| {
            (
                None,
                vec![
                    r.to_string(),
                    esc(rs
                        .metadata
                        .annotations
                        .get(CHANGE_CAUSE_ANNOTATION)
                        .map_or("<none>", String::as_str)),
                    esc(&rs.metadata.name),
                    esc(&images(rs)),
                ],
            )
        })
        .collect();
    table(&["REVISION", "CHANGE-CAUSE", "REPLICASET", "IMAGES"], &rows)
}

/// What moves on the page: the counters (`textContent` by id) and the
/// sections (HTML by id), from the view now.
pub fn live_parts(
    snap: &Snapshot,
    d: &Deployment,
    sets: &[ReplicaSet],
    now: SystemTime,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let ns = d.metadata.namespace.as_str();
    let pods = pods_of(snap, ns);
    let cells = deploy_grid::cells(d, sets, &pods);
    let mine = owned(d, sets);
    let st = &d.status;
    let mut text = BTreeMap::new();
    for (k, v) in [
        ("desired", d.spec.replicas.unwrap_or(1)),
        ("current", st.replicas),
        ("ready", st.ready_replicas),
        ("updated", st.updated_replicas),
        ("available", st.available_replicas),
    ] {
        text.insert(format!("dp-{k}"), v.to_string());
    }
    let status = match status_line(d) {
        Ok((line, _)) => line,
        Err(e) => e,
    };
    text.insert("dp-status".into(), status);
    let mut html = BTreeMap::new();
    html.insert("dp-conditions".into(), conditions_table(d, now));
    html.insert("dp-pods".into(), grid_html(&cells, ns));
    html.insert("dp-waiting".into(), waiting_table(&cells, ns));
    html.insert("dp-rs".into(), replica_sets_table(d, &mine, now));
    html.insert("dp-revisions".into(), revisions_table(&mine));
    (text, html)
}

/// `/ui/deployments/NS/NAME`.
pub async fn page(
    ctx: &Arc<Ctx>,
    informer: &Informer,
    signed: &Signed,
    ns: &str,
    name: &str,
) -> Response {
    let snap = informer.snapshot();
    let Some((d, sets)) = find(&snap, ns, name) else {
        return not_found(signed, &format!("Deployment {ns}/{name} not found"));
    };
    let now = SystemTime::now();
    let (text, html) = live_parts(&snap, &d, &sets, now);
    drop(snap);
    let t = |k: &str| esc(text.get(k).map_or("", String::as_str));
    let h = |k: &str| html.get(k).cloned().unwrap_or_default();
    let mut body = format!(
        r#"<h1>Deployment {ns}/{name}</h1><div class="counts"><span class="count"><b id="dp-desired">{}</b> desired</span><span class="count"><b id="dp-current">{}</b> current</span><span class="count ok"><b id="dp-ready">{}</b> ready</span><span class="count"><b id="dp-updated">{}</b> up-to-date</span><span class="count"><b id="dp-available">{}</b> available</span></div><p id="dp-status">{}</p><p class="muted">strategy {} · revision {} · minReadySeconds {} · progressDeadlineSeconds {}{} · generation {} observed {}</p>"#,
        t("dp-desired"),
        t("dp-current"),
        t("dp-ready"),
        t("dp-updated"),
        t("dp-available"),
        t("dp-status"),
        esc(&strategy_text(&d)),
        esc(d
            .metadata
            .annotations
            .get(drover_api::DEPLOYMENT_REVISION_ANNOTATION)
            .map_or("-", String::as_str)),
        d.spec.min_ready_seconds.unwrap_or(0),
        d.spec.progress_deadline_seconds.unwrap_or(600),
        if d.spec.paused == Some(true) {
            " · paused"
        } else {
            ""
        },
        d.metadata.generation.unwrap_or(0),
        d.status.observed_generation.unwrap_or(0),
        ns = esc(ns),
        name = esc(name),
    );
    let fields = [("kind", "deployment"), ("namespace", ns), ("name", name)];
    let restart = action_button(
        signed,
        "restart",
        "Rollout restart",
        &format!("Restart every pod of Deployment {ns}/{name}, as its strategy allows?"),
        &fields,
    );
    let undo = action_button(
        signed,
        "undo",
        "Rollout undo",
        &format!("Roll Deployment {ns}/{name} back to its previous revision?"),
        &fields,
    );
    let _ = write!(body, r#"<div class="actions">{restart}{undo}</div>"#);
    for (id, title) in [
        ("dp-conditions", "Conditions"),
        ("dp-pods", "Pods"),
        ("dp-waiting", "Pods not updated"),
        ("dp-rs", "ReplicaSets"),
        ("dp-revisions", "Revisions"),
    ] {
        let _ = write!(
            body,
            r#"<section><h2>{title}</h2><div id="{id}">{}</div></section>"#,
            h(id)
        );
    }
    let objects = Objects::new(ctx.clone());
    let evs = events_about(&objects, "Deployment", ns, name).await;
    let _ = write!(
        body,
        "<section><h2>Events</h2>{}</section>",
        events_table(&evs)
    );
    let live = format!("/ui/live/deployments/{}/{}", url(ns), url(name));
    html_page(
        StatusCode::OK,
        frame(
            signed,
            &format!("Deployment {name}"),
            Section::Workloads,
            Some(&live),
            &body,
        ),
    )
}
