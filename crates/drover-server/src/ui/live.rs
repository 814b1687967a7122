//! Live updates of the dashboard's pages: server-sent events fed by this
//! member's informer (no polling). Each stream recomputes its page's
//! view when the informer changes (at most every [`MIN_INTERVAL`]) and
//! sends only what changed since its last message.
//!
//! Bounds: a message is computed only when the connection has taken the
//! previous one (the stream is pulled by the HTTP connection, so a slow
//! browser holds one message and the last view sent, never a queue), and
//! a credential has at most [`MAX_STREAMS_PER_CREDENTIAL`] streams open
//! on a member. A stream ends when its session does: expiry, a rotated
//! admin token, a revoked certificate.

use super::deployment;
use super::grid;
use super::pages::{matches, node_counts, node_status_class, paged, params};
use super::session::{Binding, Session};
use super::workloads::{grid_of, ineligible_table, waiting_table};
use super::{refuse, Signed, Ui};
use crate::api::codec::key;
use crate::cache::Informer;
use crate::ctx::Ctx;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use drover_api::Kind;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Live streams one credential may hold open on one member.
pub const MAX_STREAMS_PER_CREDENTIAL: usize = 8;

/// A stream sends at most one message per this interval.
pub const MIN_INTERVAL: Duration = Duration::from_millis(150);

/// The streams open per credential.
#[derive(Debug, Default)]
pub struct Streams(Mutex<HashMap<Binding, usize>>);

/// A stream's place, given back when the stream ends.
#[derive(Debug)]
pub struct Slot {
    ui: Arc<Ui>,
    binding: Binding,
}

impl Streams {
    /// A place for one more stream of `binding`, if it has fewer than the
    /// limit.
    pub fn acquire(ui: &Arc<Ui>, binding: &Binding) -> Option<Slot> {
        let mut open = ui.streams.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(binding.clone()).or_default();
        if *n >= MAX_STREAMS_PER_CREDENTIAL {
            return None;
        }
        *n += 1;
        Some(Slot {
            ui: ui.clone(),
            binding: binding.clone(),
        })
    }

    /// How many streams `binding` has open.
    pub fn open(&self, binding: &Binding) -> usize {
        let open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        open.get(binding).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.ui.streams.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.binding) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.binding);
            }
        }
    }
}

/// What a page shows that can change: element ids to their new content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct View {
    /// `textContent` by id.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub text: BTreeMap<String, String>,
    /// A status pill (the element, or its `[data-status]` child): class
    /// and text, by id.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub status: BTreeMap<String, (String, String)>,
    /// A grid cell: class and title, by id.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub cells: BTreeMap<String, (String, String)>,
    /// A table row's cells from the third on, by the row's id.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub rows: BTreeMap<String, Vec<String>>,
    /// A section's whole HTML (rendered and escaped here, as the page
    /// renders it), by id: tables whose rows come and go.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub html: BTreeMap<String, String>,
}

impl View {
    /// What changed from `old` to `self`.
    pub fn diff(&self, old: &View) -> View {
        fn changed<V: Clone + PartialEq>(
            new: &BTreeMap<String, V>,
            old: &BTreeMap<String, V>,
        ) -> BTreeMap<String, V> {
            new.iter()
                .filter(|(k, v)| old.get(*k) != Some(*v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        }
        View {
            text: changed(&self.text, &old.text),
            status: changed(&self.status, &old.status),
            cells: changed(&self.cells, &old.cells),
            rows: changed(&self.rows, &old.rows),
            html: changed(&self.html, &old.html),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
            && self.status.is_empty()
            && self.cells.is_empty()
            && self.rows.is_empty()
            && self.html.is_empty()
    }
}

/// Which page a stream feeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Feed {
    Overview,
    /// A page of the nodes list (filter, page), or one node.
    Nodes {
        filter: String,
        page: usize,
        name: Option<String>,
    },
    DaemonSet {
        namespace: String,
        name: String,
    },
    Deployment {
        namespace: String,
        name: String,
    },
}

/// The feed of a `/ui/live/…` path.
pub fn feed(rest: &str, query: &str) -> Option<Feed> {
    let q = params(query);
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["overview"] => Some(Feed::Overview),
        ["nodes"] => Some(Feed::Nodes {
            filter: q.get("q").cloned().unwrap_or_default(),
            page: q.get("page").and_then(|p| p.parse().ok()).unwrap_or(1),
            name: q.get("name").cloned(),
        }),
        ["daemonsets", ns, name] => Some(Feed::DaemonSet {
            namespace: ns.to_string(),
            name: name.to_string(),
        }),
        ["deployments", ns, name] => Some(Feed::Deployment {
            namespace: ns.to_string(),
            name: name.to_string(),
        }),
        _ => None,
    }
}

fn counts_text(view: &mut View, nodes: &crate::cache::Snapshot) {
    let c = node_counts(nodes.nodes.values().map(|n| n.as_ref()));
    for (k, v) in [
        ("total", c.total),
        ("ready", c.ready),
        ("not_ready", c.not_ready),
        ("cordoned", c.cordoned),
    ] {
        view.text.insert(format!("count-{k}"), v.to_string());
    }
}

/// The view of a feed now.
pub fn compute(ctx: &Ctx, informer: &Informer, feed: &Feed) -> View {
    let snap = informer.snapshot();
    let mut view = View::default();
    match feed {
        Feed::Overview => {
            counts_text(&mut view, &snap);
            let leader = ctx.store.leader();
            view.text.insert("term".into(), leader.term.to_string());
            view.text
                .insert("commit".into(), ctx.store.applied().to_string());
            for ds in snap.daemon_sets.values() {
                let s = &ds.status;
                view.rows.insert(
                    format!("ds:{}/{}", ds.metadata.namespace, ds.metadata.name),
                    [
                        s.desired_number_scheduled,
                        s.current_number_scheduled,
                        s.number_ready,
                        s.updated_number_scheduled,
                        s.number_available,
                    ]
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
                );
            }
            let o = drover_api::columns::TableOptions {
                wide: false,
                all_namespaces: true,
                now: std::time::SystemTime::now(),
            };
            for d in snap.deployments.values() {
                // READY, UP-TO-DATE, AVAILABLE (not AGE, which would send
                // every row every time).
                let row = drover_api::columns::row(
                    &drover_api::Manifest::Deployment(Box::new((**d).clone())),
                    &o,
                );
                view.rows.insert(
                    format!("dp:{}/{}", d.metadata.namespace, d.metadata.name),
                    row.into_iter().skip(2).take(3).collect(),
                );
            }
        }
        Feed::Nodes { filter, page, name } => {
            counts_text(&mut view, &snap);
            match name {
                Some(name) => {
                    if let Some(n) = snap.nodes.get(&key(Kind::Node, "", name)) {
                        let (s, class) = node_status_class(n);
                        view.status.insert("node-status".into(), (class.into(), s));
                    }
                }
                None => {
                    let all: Vec<_> = snap
                        .nodes
                        .values()
                        .filter(|n| filter.is_empty() || matches(n, filter))
                        .collect();
                    for n in paged(&all, *page).0 {
                        let (s, class) = node_status_class(n);
                        view.status
                            .insert(format!("n:{}", n.metadata.name), (class.into(), s));
                    }
                }
            }
        }
        Feed::DaemonSet { namespace, name } => {
            let Some(ds) = snap
                .daemon_sets
                .get(&key(Kind::DaemonSet, namespace, name))
                .cloned()
            else {
                return view;
            };
            drop(snap);
            let (cells, _) = grid_of(informer, &ds);
            for (state, n) in grid::counts(&cells) {
                view.text
                    .insert(format!("cc-{}", state.class()), n.to_string());
            }
            view.html.insert("ds-waiting".into(), waiting_table(&cells));
            view.html
                .insert("ds-ineligible".into(), ineligible_table(&cells));
            for c in cells {
                view.cells.insert(
                    format!("g:{}", c.node),
                    (
                        format!("c s-{}", c.state.class()),
                        format!("{}: {}", c.node, c.why),
                    ),
                );
            }
            let s = &ds.status;
            for (k, v) in [
                ("desired", s.desired_number_scheduled),
                ("current", s.current_number_scheduled),
                ("ready", s.number_ready),
                ("updated", s.updated_number_scheduled),
                ("available", s.number_available),
            ] {
                view.text.insert(format!("ds-{k}"), v.to_string());
            }
        }
        Feed::Deployment { namespace, name } => {
            let Some((d, sets)) = deployment::find(&snap, namespace, name) else {
                return view;
            };
            let (text, html) =
                deployment::live_parts(&snap, &d, &sets, std::time::SystemTime::now());
            view.text = text;
            view.html = html;
        }
    }
    view
}

/// Why a stream ends, if its session no longer holds.
fn ended(ctx: &Ctx, s: &Session) -> Option<&'static str> {
    if s.expires <= super::unix_now() {
        return Some("SessionExpired");
    }
    s.check_binding(&ctx.admin_token(), |serial| {
        ctx.revocations.is_revoked(serial)
    })
    .err()
    .map(super::reason_of)
}

struct State {
    ctx: Arc<Ctx>,
    informer: Informer,
    feed: Feed,
    session: Session,
    changes: tokio::sync::watch::Receiver<u64>,
    revocations: tokio::sync::watch::Receiver<drover_pki::revoke::Revoked>,
    last: Option<View>,
    sent_at: Instant,
    done: bool,
    _slot: Slot,
}

async fn next(mut st: State) -> Option<(Result<Event, Infallible>, State)> {
    if st.done {
        return None;
    }
    loop {
        if let Some(reason) = ended(&st.ctx, &st.session) {
            st.done = true;
            let ev = Event::default().event("end").data(reason);
            return Some((Ok(ev), st));
        }
        if let Some(last) = &st.last {
            let until = Instant::now()
                + Duration::from_secs(st.session.expires.saturating_sub(super::unix_now()));
            tokio::select! {
                r = st.changes.changed() => if r.is_err() { return None },
                r = st.revocations.changed() => if r.is_err() { return None },
                _ = tokio::time::sleep_until(until) => {},
            }
            // Coalesce a burst of changes into one message.
            tokio::time::sleep_until(st.sent_at + MIN_INTERVAL).await;
            st.changes.borrow_and_update();
            let now = compute(&st.ctx, &st.informer, &st.feed);
            let diff = now.diff(last);
            if diff.is_empty() {
                continue;
            }
            st.last = Some(now);
            st.sent_at = Instant::now();
            let data = serde_json::to_string(&diff).unwrap_or_default();
            return Some((Ok(Event::default().data(data)), st));
        }
        // The first message is the whole view: the page may be older.
        st.changes.borrow_and_update();
        let now = compute(&st.ctx, &st.informer, &st.feed);
        let data = serde_json::to_string(&now).unwrap_or_default();
        st.last = Some(now);
        st.sent_at = Instant::now();
        return Some((Ok(Event::default().data(data)), st));
    }
}

/// `GET /ui/live/…`: the page's stream.
pub fn stream(
    ctx: &Arc<Ctx>,
    informer: &Informer,
    ui: &Arc<Ui>,
    signed: &Signed,
    rest: &str,
    query: &str,
) -> Response {
    let Some(feed) = feed(rest, query) else {
        return refuse(
            StatusCode::NOT_FOUND,
            "NotFound",
            "no live feed at this path: the feeds are overview, nodes, daemonsets/NS/NAME and deployments/NS/NAME",
        );
    };
    let Some(slot) = Streams::acquire(ui, &signed.session.binding) else {
        return refuse(
            StatusCode::TOO_MANY_REQUESTS,
            "TooManyStreams",
            &format!("this credential has {MAX_STREAMS_PER_CREDENTIAL} live streams open on this member already: close a dashboard tab"),
        );
    };
    let st = State {
        ctx: ctx.clone(),
        informer: informer.clone(),
        feed,
        session: signed.session.clone(),
        changes: informer.subscribe(),
        revocations: ctx.revocations.subscribe(),
        last: None,
        sent_at: Instant::now(),
        done: false,
        _slot: slot,
    };
    let s = futures_util::stream::unfold(st, next);
    Sse::new(s)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_holds_what_changed_only() {
        let mut a = View::default();
        a.text.insert("count-ready".into(), "3".into());
        a.cells
            .insert("g:n1".into(), ("c s-waiting".into(), "n1: x".into()));
        let mut b = a.clone();
        assert!(b.diff(&a).is_empty());
        b.cells
            .insert("g:n1".into(), ("c s-updated".into(), "n1: y".into()));
        b.cells
            .insert("g:n2".into(), ("c s-waiting".into(), "n2: z".into()));
        let d = b.diff(&a);
        assert!(d.text.is_empty());
        assert_eq!(d.cells.len(), 2);
        assert_eq!(
            serde_json::to_value(&d).unwrap()["cells"]["g:n1"],
            serde_json::json!(["c s-updated", "n1: y"])
        );
    }

    #[test]
    fn feeds_are_read_from_their_paths() {
        assert_eq!(feed("overview", ""), Some(Feed::Overview));
        assert_eq!(
            feed("nodes", "q=zone%3Da&page=2"),
            Some(Feed::Nodes {
                filter: "zone=a".into(),
                page: 2,
                name: None
            })
        );
        assert_eq!(
            feed("daemonsets/kube-system/agent", ""),
            Some(Feed::DaemonSet {
                namespace: "kube-system".into(),
                name: "agent".into()
            })
        );
        assert_eq!(
            feed("deployments/default/web", ""),
            Some(Feed::Deployment {
                namespace: "default".into(),
                name: "web".into()
            })
        );
        assert_eq!(feed("secrets", ""), None);
    }

    #[test]
    fn a_credential_holds_a_bounded_number_of_streams() {
        let ui = Arc::new(Ui::default());
        let b = Binding::Token(7);
        let slots: Vec<Slot> = (0..MAX_STREAMS_PER_CREDENTIAL)
            .map(|_| Streams::acquire(&ui, &b).expect("a slot"))
            .collect();
        assert!(Streams::acquire(&ui, &b).is_none());
        assert!(Streams::acquire(&ui, &Binding::Token(8)).is_some());
        drop(slots);
        assert_eq!(ui.streams.open(&b), 0);
        assert!(Streams::acquire(&ui, &b).is_some());
    }
}
