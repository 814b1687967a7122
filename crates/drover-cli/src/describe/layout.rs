//! The writer `describe` fills and the sections every kind shares, in
//! kubectl's wording: labels, annotations, tolerations and events.

use crate::printers::{event_interval, event_sort_time};
use crate::tabwriter;
use drover_api::{Event, Labels, Toleration, TolerationOperator};
use std::time::SystemTime;

/// Text with kubectl's indentation levels, aligned on flush.
#[derive(Default)]
pub(super) struct W {
    buf: String,
    out: String,
}

impl W {
    /// Writes `text` indented by `level` steps of two spaces.
    pub(super) fn w(&mut self, level: usize, text: impl AsRef<str>) {
        for _ in 0..level {
            self.buf.push_str("  ");
        }
        self.buf.push_str(text.as_ref());
    }

    /// Ends an alignment section (kubectl flushes before the events table).
    pub(super) fn flush(&mut self) {
        self.out.push_str(&tabwriter::describe(&self.buf));
        self.buf.clear();
    }

    pub(super) fn finish(mut self) -> String {
        self.flush();
        self.out
    }
}

/// `Title:\tk=v` with one line per label (kubectl's `printLabelsMultiline`).
pub(super) fn labels_multiline(w: &mut W, title: &str, labels: &Labels) {
    w.w(0, format!("{title}:\t"));
    if labels.is_empty() {
        w.w(0, "<none>\n");
        return;
    }
    for (i, (k, v)) in labels.iter().enumerate() {
        if i != 0 {
            w.w(0, "\t");
        }
        w.w(0, format!("{k}={v}\n"));
    }
}

const MAX_ANNOTATION_LEN: usize = 140;

/// `Title:\tk: v`, long or multi-line values on their own lines, cut at
/// 140 characters (kubectl's `printAnnotationsMultiline`).
pub(super) fn annotations_multiline(w: &mut W, title: &str, annotations: &Labels) {
    w.w(0, format!("{title}:\t"));
    let keys: Vec<&String> = annotations
        .keys()
        .filter(|k| *k != "kubectl.kubernetes.io/last-applied-configuration")
        .collect();
    if keys.is_empty() {
        w.w(0, "<none>\n");
        return;
    }
    for (i, k) in keys.iter().enumerate() {
        if i != 0 {
            w.w(0, "\t");
        }
        let value = annotations[*k]
            .strip_suffix('\n')
            .unwrap_or(&annotations[*k]);
        if value.len() + k.len() + 2 > MAX_ANNOTATION_LEN || value.contains('\n') {
            w.w(0, format!("{k}:\n"));
            for s in value.split('\n') {
                let s: String = if s.chars().count() > MAX_ANNOTATION_LEN - 2 {
                    format!(
                        "{}...",
                        s.chars().take(MAX_ANNOTATION_LEN - 2).collect::<String>()
                    )
                } else {
                    s.to_string()
                };
                w.w(0, format!("\t  {s}\n"));
            }
        } else {
            w.w(0, format!("{k}: {value}\n"));
        }
    }
}

/// A toleration as `describe` shows it: `key=value:Effect op=Exists for 300s`.
pub fn format_toleration(t: &Toleration) -> String {
    let mut s = t.key.clone();
    if !t.value.is_empty() {
        s.push_str(&format!("={}", t.value));
    }
    if let Some(e) = &t.effect {
        s.push_str(&format!(":{e}"));
    }
    if t.operator == Some(TolerationOperator::Exists) && t.value.is_empty() {
        if !t.key.is_empty() || t.effect.is_some() {
            s.push_str(" op=Exists");
        } else {
            s.push_str("op=Exists");
        }
    }
    if let Some(secs) = t.toleration_seconds {
        s.push_str(&format!(" for {secs}s"));
    }
    s
}

pub(super) fn tolerations_multiline(w: &mut W, title: &str, tolerations: &[Toleration]) {
    w.w(0, format!("{title}:\t"));
    if tolerations.is_empty() {
        w.w(0, "<none>\n");
        return;
    }
    let mut sorted: Vec<&Toleration> = tolerations.iter().collect();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    for (i, t) in sorted.iter().enumerate() {
        if i != 0 {
            w.w(0, "\t");
        }
        w.w(0, format!("{}\n", format_toleration(t)));
    }
}

/// kubectl's `DescribeEvents`: sorted by time, in their own alignment.
pub(super) fn events(w: &mut W, evs: &[&Event], now: SystemTime) {
    if evs.is_empty() {
        w.w(0, "Events:\t<none>\n");
        return;
    }
    w.flush();
    let mut evs = evs.to_vec();
    evs.sort_by_key(|e| event_sort_time(e));
    w.w(0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n");
    w.w(1, "----\t------\t----\t----\t-------\n");
    for e in evs {
        let message = e.message.trim();
        let source = if e.source.component.is_empty() {
            e.reporting_component.clone()
        } else {
            e.source.component.clone()
        };
        w.w(
            1,
            format!(
                "{}\t{}\t{}\t{}\t{}\n",
                e.r#type,
                e.reason,
                event_interval(e, now),
                source,
                message
            ),
        );
    }
}

/// The events about one object: same kind, name and namespace (and uid,
/// when both sides have one).
pub fn events_for<'a>(
    all: &'a [Event],
    kind: &str,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Vec<&'a Event> {
    all.iter()
        .filter(|e| {
            let o = &e.involved_object;
            o.kind == kind
                && o.name == name
                && (namespace.is_empty() || o.namespace.is_empty() || o.namespace == namespace)
                && (uid.is_empty() || o.uid.is_empty() || o.uid == uid)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerations_like_kubectl() {
        let t = |y: &str| -> Toleration { serde_saphyr::from_str(y).unwrap() };
        assert_eq!(
            format_toleration(&t("{key: a, operator: Exists}")),
            "a op=Exists"
        );
        assert_eq!(
            format_toleration(&t("{operator: Exists, effect: NoSchedule}")),
            ":NoSchedule op=Exists"
        );
        assert_eq!(
            format_toleration(&t(
                "{key: k, value: v, effect: NoExecute, tolerationSeconds: 5}"
            )),
            "k=v:NoExecute for 5s"
        );
    }

    #[test]
    fn long_annotations_get_their_own_lines() {
        let mut w = W::default();
        let long = "x".repeat(200);
        let a: Labels = [
            ("a".to_string(), "short".to_string()),
            ("b".to_string(), long),
        ]
        .into();
        annotations_multiline(&mut w, "Annotations", &a);
        let text = w.finish();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Annotations:  a: short");
        assert_eq!(lines[1], "              b:");
        assert!(lines[2].starts_with("                x"));
        assert!(lines[2].ends_with("x..."));
        assert_eq!(lines[2].trim().len(), 138 + 3);
    }
}
