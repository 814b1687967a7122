//! `get --field-selector`: kubectl's field selectors (`a=b`, `a==b`,
//! `a!=b`, comma-separated, all must hold), on the fields the API server
//! supports for each kind, applied on the client.

use anyhow::{bail, Result};
use drover_api::selector::Selector;
use drover_api::{Kind, Manifest};
use serde_json::Value;

/// The fields a kind may be selected on (besides `metadata.name` and
/// `metadata.namespace`), as the API server has them.
fn fields(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Event => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        Kind::Pod => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "status.phase",
            "status.podIP",
        ],
        Kind::Node => &["spec.unschedulable"],
        _ => &[],
    }
}

/// A parsed field selector.
#[derive(Debug, Clone, Default)]
pub struct FieldSelector {
    /// Field, value, and whether it must equal (else differ).
    terms: Vec<(String, String, bool)>,
}

impl FieldSelector {
    /// Parses `text` for `kind`; an unknown field is refused as the API
    /// server words it.
    pub fn parse(kind: Kind, text: &str) -> Result<FieldSelector> {
        let mut terms = Vec::new();
        for term in text.split(',').filter(|t| !t.is_empty()) {
            let (field, value, equal) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, v, true)
            } else {
                bail!("invalid selector: {term:?}: a field selector is FIELD=VALUE, FIELD==VALUE or FIELD!=VALUE");
            };
            let field = field.trim();
            let known = ["metadata.name", "metadata.namespace"].contains(&field)
                || fields(kind).contains(&field);
            if !known {
                let mut all = vec!["metadata.name", "metadata.namespace"];
                all.extend(fields(kind));
                bail!(
                    "field label not supported: {field} ({} may be selected on {})",
                    kind.resource(),
                    all.join(", ")
                );
            }
            terms.push((field.to_string(), value.trim().to_string(), equal));
        }
        Ok(FieldSelector { terms })
    }

    /// Whether `m` has every field as the selector says.
    pub fn matches(&self, m: &Manifest) -> bool {
        if self.terms.is_empty() {
            return true;
        }
        let v = serde_json::to_value(m).unwrap_or(Value::Null);
        self.terms.iter().all(|(field, want, equal)| {
            let path = if field == "source" {
                "source.component"
            } else {
                field
            };
            let got = path
                .split('.')
                .try_fold(&v, |v, k| v.get(k))
                .map(|x| match x {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                })
                .unwrap_or_default();
            (got == *want) == *equal
        })
    }
}

/// What `get` keeps: a label selector and a field selector.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// `-l`.
    pub labels: Option<Selector>,
    /// `--field-selector`.
    pub fields: FieldSelector,
}

impl Filter {
    /// Whether `m` passes both.
    pub fn matches(&self, m: &Manifest) -> bool {
        self.labels
            .as_ref()
            .is_none_or(|s| s.matches(&m.metadata().labels))
            && self.fields.matches(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_by_involved_object() {
        let ev = |name: &str| {
            drover_api::parse_manifests(&format!(
                "apiVersion: v1\nkind: Event\nmetadata: {{name: {name}.1, namespace: default}}\ninvolvedObject: {{kind: Pod, name: {name}}}\nreason: BackOff\ntype: Warning\nsource: {{component: kubelet}}\n"
            ))
            .expect("event")
            .remove(0)
        };
        let s = FieldSelector::parse(Kind::Event, "involvedObject.name=web").expect("parse");
        assert!(s.matches(&ev("web")));
        assert!(!s.matches(&ev("db")));
        let s = FieldSelector::parse(Kind::Event, "type!=Normal,source=kubelet,reason==BackOff")
            .expect("parse");
        assert!(s.matches(&ev("web")));
        let e = FieldSelector::parse(Kind::Event, "involvedObject.colour=red")
            .expect_err("unknown field");
        assert!(e.to_string().contains("field label not supported"), "{e}");
        assert!(FieldSelector::parse(Kind::Event, "reason").is_err());
    }
}
