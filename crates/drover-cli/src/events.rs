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
        &Default::default(),
        widths,
        out,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::parse_manifests;

    fn event(kind: &str, name: &str, ns: &str, last: &str, count: i32, msg: &str) -> Event {
        let m = parse_manifests(&format!(
            r#"
apiVersion: v1
kind: Event
metadata: {{name: {name}.1, namespace: {ns}}}
involvedObject: {{kind: {kind}, name: {name}, namespace: {ns}}}
reason: R
message: "{msg}"
type: Normal
firstTimestamp: "2024-05-03T15:00:00Z"
lastTimestamp: "{last}"
count: {count}
"#
        ))
        .unwrap()
        .remove(0);
        as_event(m).unwrap()
    }

    #[test]
    fn events_sorted_by_time_like_kubectl_events() {
        let now = crate::timefmt::parse_time("2024-05-03T16:00:00Z").unwrap();
        let evs = vec![
            event("Node", "n1", "default", "2024-05-03T15:59:00Z", 1, "later"),
            event(
                "DaemonSet",
                "ds",
                "kube-system",
                "2024-05-03T15:30:00Z",
                4,
                "earlier",
            ),
        ];
        assert_eq!(
            events_table(&evs, true, now),
            "NAMESPACE     LAST SEEN           TYPE     REASON   OBJECT         MESSAGE\n\
             kube-system   30m (x4 over 60m)   Normal   R        DaemonSet/ds   earlier\n\
             default       60m                 Normal   R        Node/n1        later\n"
        );
    }
}
