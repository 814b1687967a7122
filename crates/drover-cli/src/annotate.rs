//! `drover annotate KIND NAME k=v… k-… [--overwrite]`, as kubectl's: a
//! value may hold anything (`=` included, split at the first one); changing
//! a value that is there needs `--overwrite` (kubectl's refusal, which never
//! applies to `kubernetes.io/change-cause`); the object is written back with
//! compare-and-swap and reported `KIND/NAME annotated`.

use crate::kubectl::read_modify_write;
use crate::Client;
use anyhow::{bail, Result};
use drover_api::{Kind, Labels, DEFAULT_NAMESPACE};
use std::collections::BTreeMap;
use std::io::Write;

/// kubectl lets this one change without `--overwrite`.
const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";

/// What `annotate` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AnnotationChanges {
    pub set: BTreeMap<String, String>,
    pub remove: Vec<String>,
}

/// Reads `annotate`'s arguments as kubectl's `ParsePairs` does.
pub fn parse_annotation_args(args: &[String]) -> Result<AnnotationChanges> {
    let mut ch = AnnotationChanges::default();
    let mut invalid = Vec::new();
    for a in args {
        if let Some((k, v)) = a.split_once('=') {
            ch.set.insert(k.to_string(), v.to_string());
        } else if let Some(k) = a.strip_suffix('-') {
            ch.remove.push(k.to_string());
        } else {
            invalid.push(a.as_str());
        }
    }
    if !invalid.is_empty() {
        bail!(
            "invalid annotation format: {} (expected key=value to set, key- to remove)",
            invalid.join(" ")
        );
    }
    if ch.set.is_empty() && ch.remove.is_empty() {
        bail!("at least one annotation update is required");
    }
    let both: Vec<&str> = ch
        .remove
        .iter()
        .filter(|k| ch.set.contains_key(*k))
        .map(String::as_str)
        .collect();
    if !both.is_empty() {
        bail!(
            "can not both modify and remove the following annotation(s) in the same command: {}",
            both.join(", ")
        );
    }
    Ok(ch)
}

/// Applies the changes; answers whether anything changed. Refuses, as
/// kubectl, to change a value without `overwrite`.
pub fn apply_annotations(
    annotations: &mut Labels,
    ch: &AnnotationChanges,
    overwrite: bool,
) -> Result<bool> {
    if !overwrite {
        let clashes: Vec<String> = ch
            .set
            .iter()
            .filter(|(k, _)| k.as_str() != CHANGE_CAUSE)
            .filter_map(|(k, v)| match annotations.get(k) {
                Some(old) if old != v => Some(format!("'{k}' already has a value ({old})")),
                _ => None,
            })
            .collect();
        if !clashes.is_empty() {
            bail!(
                "--overwrite is false but found the following declared annotation(s): {}",
                clashes.join("; ")
            );
        }
    }
    let mut changed = false;
    for (k, v) in &ch.set {
        if annotations.get(k) != Some(v) {
            annotations.insert(k.clone(), v.clone());
            changed = true;
        }
    }
    for k in &ch.remove {
        changed |= annotations.remove(k).is_some();
    }
    Ok(changed)
}

/// `KIND NAME k=v…` or `KIND/NAME k=v…`: the kind, the name and the changes.
pub fn target_args(kind: &str, name: &str, rest: &[String]) -> (String, String, Vec<String>) {
    match kind.split_once('/') {
        Some((k, n)) => {
            let mut changes = vec![name.to_string()];
            changes.extend(rest.iter().cloned());
            (k.to_string(), n.to_string(), changes)
        }
        None => (kind.to_string(), name.to_string(), rest.to_vec()),
    }
}

/// `drover annotate`.
pub async fn annotate(
    c: &Client,
    kind: &str,
    name: &str,
    args: &[String],
    overwrite: bool,
    namespace: Option<&str>,
    out: &mut impl Write,
) -> Result<()> {
    let (kind, name, args) = target_args(kind, name, args);
    let kind = Kind::parse(&kind)?;
    let changes = parse_annotation_args(&args)?;
    let ns = match namespace.filter(|n| !n.is_empty()) {
        _ if !kind.namespaced() => "",
        Some(n) => n,
        None => DEFAULT_NAMESPACE,
    };
    let (m, _) = read_modify_write(c, kind, ns, &name, |m| {
        let changed = apply_annotations(&mut m.metadata_mut().annotations, &changes, overwrite)?;
        Ok((String::new(), changed))
    })
    .await?;
    writeln!(out, "{} annotated", m.reference())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn values_keep_everything_after_the_first_equals_sign() {
        let ch = parse_annotation_args(&args(&["a=b=c", "url=http://x/?q=1", "empty=", "gone-"]))
            .unwrap();
        assert_eq!(ch.set["a"], "b=c");
        assert_eq!(ch.set["url"], "http://x/?q=1");
        assert_eq!(ch.set["empty"], "");
        assert_eq!(ch.remove, vec!["gone".to_string()]);
    }

    #[test]
    fn bad_arguments_are_refused_as_kubectl_does() {
        let e = parse_annotation_args(&args(&["plain"])).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid annotation format: plain"),
            "{e}"
        );
        let e = parse_annotation_args(&args(&["a=1", "a-"])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "can not both modify and remove the following annotation(s) in the same command: a"
        );
    }

    #[test]
    fn changing_a_value_needs_overwrite() {
        let mut a = Labels::default();
        a.insert("team".into(), "red".into());
        let ch = parse_annotation_args(&args(&["team=blue"])).unwrap();
        let e = apply_annotations(&mut a, &ch, false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--overwrite is false but found the following declared annotation(s): 'team' already has a value (red)"
        );
        assert_eq!(a.get("team").map(String::as_str), Some("red"));
        assert!(apply_annotations(&mut a, &ch, true).unwrap());
        assert_eq!(a.get("team").map(String::as_str), Some("blue"));
        // The same value again, and the change cause, need no --overwrite.
        assert!(!apply_annotations(&mut a, &ch, false).unwrap());
        a.insert(CHANGE_CAUSE.into(), "one".into());
        let cause = parse_annotation_args(&args(&["kubernetes.io/change-cause=two"])).unwrap();
        assert!(apply_annotations(&mut a, &cause, false).unwrap());
        let rm = parse_annotation_args(&args(&["team-", "never-"])).unwrap();
        assert!(apply_annotations(&mut a, &rm, false).unwrap());
        assert!(!a.contains_key("team"));
    }

    #[test]
    fn kind_slash_name_takes_the_name_from_the_first_argument() {
        let (k, n, c) = target_args("ds/web", "a=1", &args(&["b-"]));
        assert_eq!((k.as_str(), n.as_str()), ("ds", "web"));
        assert_eq!(c, args(&["a=1", "b-"]));
        let (k, n, c) = target_args("ds", "web", &args(&["a=1"]));
        assert_eq!((k.as_str(), n.as_str(), c), ("ds", "web", args(&["a=1"])));
    }
}
