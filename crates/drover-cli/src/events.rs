//! `drover events [-n NS | -A] [-w]`: kubectl events' table (LAST SEEN,
//! TYPE, REASON, OBJECT, MESSAGE), oldest first, then one line per new or
//! repeated event with `-w`.

use crate::client::Client;
use crate::errors::kube;
use crate::field_selector::Filter;
use crate::kubectl::{as_event, scope, watch};
use crate::printers;
use crate::table::{self, Widths};
use anyhow::Result;
use drover_api::{Event, Kind};
use std::io::Write;
use std::time::SystemTime;

/// The table `drover events` prints: kubectl events' columns, oldest
/// first.
pub fn events_table(events: &[Event], all_namespaces: bool, now: SystemTime) -> String {
    let mut sorted: Vec<&Event> = events.iter().collect();
    sorted.sort_by_key(|e| printers::event_sort_time(e));
    let (headers, rows) = events_rows(&sorted, all_namespaces, now);
    table::render(&headers, &rows)
}

/// The headers and rows of [`events_table`], in the order given.
fn events_rows(
    sorted: &[&Event],
    all_namespaces: bool,
    now: SystemTime,
) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let mut headers = Vec::new();
    if all_namespaces {
        headers.push("NAMESPACE");
    }
    headers.extend(["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]);
    let rows: Vec<Vec<String>> = sorted
        .iter()
        .map(|e| {
            let mut r = Vec::new();
            if all_namespaces {
                r.push(e.metadata.namespace.clone());
            }
            r.extend([
                printers::event_interval(e, now),
                e.r#type.clone(),
                e.reason.clone(),
                format!("{}/{}", e.involved_object.kind, e.involved_object.name),
                e.message.trim().to_string(),
            ]);
            r
        })
        .collect();
    (headers, rows)
}

/// `drover events [-n NS | -A] [-w]`: every event, oldest first; with
/// `-w`, then one line per new or repeated event until interrupted.
pub async fn events(
    c: &Client,
    namespace: Option<&str>,
    all_namespaces: bool,
    follow: bool,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<()> {
    let ns = scope(Kind::Event, namespace, all_namespaces);
    let list = c
        .list_objects(Kind::Event.plural(), &ns, "")
        .await
        .map_err(kube)?;
    let evs: Vec<Event> = list.items.into_iter().filter_map(as_event).collect();
    let mut widths = Widths::default();
    if evs.is_empty() {
        if all_namespaces {
            writeln!(err, "No events found.")?;
        } else {
            writeln!(err, "No events found in {ns} namespace.")?;
        }
    } else {
        let now = SystemTime::now();
        let mut sorted: Vec<&Event> = evs.iter().collect();
        sorted.sort_by_key(|e| printers::event_sort_time(e));
        let (headers, rows) = events_rows(&sorted, all_namespaces, now);
        write!(out, "{}", table::render_with(&mut widths, &headers, &rows))?;
    }
    if !follow {
        return Ok(());
    }
    out.flush()?;
    watch(
        c,
        Kind::Event,
        &ns,
        &[],
        &Filter::default(),
        list.resource_version,
        None,
        widths,
        out,
    )
    .await
}
