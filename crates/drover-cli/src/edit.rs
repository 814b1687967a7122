//! The pure half of `label`, `taint`, `cordon` and `uncordon`: reading
//! their arguments like kubectl does and changing an object's labels, a
//! node's taints or its `spec.unschedulable`, with kubectl's messages.
//! The commands ([`crate::kubectl`]) read the object, apply one of these,
//! and write it back with compare-and-swap.

use anyhow::{bail, Result};
use drover_api::validation::{is_qualified_name, is_valid_label_value};
use drover_api::{Labels, Taint, TaintEffect};
use std::collections::BTreeMap;

/// What `label` was asked to do: `k=v` sets, `k-` removes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelChanges {
    pub set: BTreeMap<String, String>,
    pub remove: Vec<String>,
}

/// Reads `label`'s arguments: `key=value` or `key-`.
pub fn parse_label_args(args: &[String]) -> Result<LabelChanges> {
    if args.is_empty() {
        bail!("at least one label update is required");
    }
    let mut ch = LabelChanges::default();
    for spec in args {
        if spec.contains('=') {
            let parts: Vec<&str> = spec.split('=').collect();
            let [key, value] = parts.as_slice() else {
                bail!("invalid label spec: {spec}");
            };
            let errs = is_qualified_name(key);
            if !errs.is_empty() {
                bail!("invalid label key: {spec:?}: {}", errs.join("; "));
            }
            let errs = is_valid_label_value(value);
            if !errs.is_empty() {
                bail!("invalid label value: {spec:?}: {}", errs.join("; "));
            }
            ch.set.insert(key.to_string(), value.to_string());
        } else if let Some(key) = spec.strip_suffix('-') {
            let errs = is_qualified_name(key);
            if !errs.is_empty() {
                bail!("invalid label key: {spec:?}: {}", errs.join("; "));
            }
            ch.remove.push(key.to_string());
        } else {
            bail!("unknown label spec: {spec} (expected key=value to set, key- to remove)");
        }
    }
    if ch.remove.iter().any(|k| ch.set.contains_key(k)) {
        bail!("can not both modify and remove a label in the same command");
    }
    Ok(ch)
}

/// What a label change did, in kubectl's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelOutcome {
    /// `labeled`, `unlabeled`, `modified` (both) or `not labeled`.
    pub message: &'static str,
    /// Keys asked to be removed that the object does not have.
    pub not_found: Vec<String>,
}

impl LabelOutcome {
    /// Whether the labels changed (and must be written).
    pub fn changed(&self) -> bool {
        self.message != "not labeled"
    }
}

/// Kubernetes' aggregate error text: one message as is, several in brackets.
fn aggregate(mut errs: Vec<String>) -> Result<()> {
    match errs.len() {
        0 => Ok(()),
        1 => bail!("{}", errs.remove(0)),
        _ => bail!("[{}]", errs.join(", ")),
    }
}

/// Applies label changes; refuses to change an existing value without
/// `overwrite`, with kubectl's message.
pub fn apply_labels(
    labels: &mut Labels,
    ch: &LabelChanges,
    overwrite: bool,
) -> Result<LabelOutcome> {
    if !overwrite {
        aggregate(
            ch.set
                .iter()
                .filter_map(|(k, v)| match labels.get(k) {
                    Some(old) if old != v => Some(format!(
                        "'{k}' already has a value ({old}), and --overwrite is false"
                    )),
                    _ => None,
                })
                .collect(),
        )?;
    }
    let mut added = 0;
    for (k, v) in &ch.set {
        if labels.get(k) != Some(v) {
            labels.insert(k.clone(), v.clone());
            added += 1;
        }
    }
    let mut removed = 0;
    let mut not_found = Vec::new();
    for k in &ch.remove {
        if labels.remove(k).is_some() {
            removed += 1;
        } else {
            not_found.push(k.clone());
        }
    }
    let message = match (added > 0, removed > 0) {
        (true, true) => "modified",
        (true, false) => "labeled",
        (false, true) => "unlabeled",
        (false, false) => "not labeled",
    };
    Ok(LabelOutcome { message, not_found })
}

/// A taint to remove: by key, or by key and effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaintRemoval {
    pub key: String,
    pub effect: Option<TaintEffect>,
}

impl std::fmt::Display for TaintRemoval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.effect {
            Some(e) => write!(f, "{}:{e}", self.key),
            None => f.write_str(&self.key),
        }
    }
}

/// What `taint` was asked to do.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaintChanges {
    pub add: Vec<Taint>,
    pub remove: Vec<TaintRemoval>,
}

/// kubectl's `parseTaint`: `key=value:Effect`, `key:Effect` or `key`.
fn parse_taint(spec: &str) -> Result<(String, String, Option<TaintEffect>)> {
    let parts: Vec<&str> = spec.split(':').collect();
    let (key, value, effect) = match parts.as_slice() {
        [key] => (*key, "", None),
        [kv, effect] => {
            let effect = TaintEffect::from(*effect);
            if !effect.is_known() {
                bail!(
                    "invalid taint effect: {effect}, unsupported taint effect (supported: NoSchedule, PreferNoSchedule, NoExecute)"
                );
            }
            let kvs: Vec<&str> = kv.split('=').collect();
            match kvs.as_slice() {
                [key] => (*key, "", Some(effect)),
                [key, value] => {
                    let errs = is_valid_label_value(value);
                    if !errs.is_empty() {
                        bail!("invalid taint spec: {spec}, {}", errs.join("; "));
                    }
                    (*key, *value, Some(effect))
                }
                _ => bail!("invalid taint spec: {spec}"),
            }
        }
        _ => bail!("invalid taint spec: {spec}"),
    };
    let errs = is_qualified_name(key);
    if !errs.is_empty() {
        bail!("invalid taint spec: {spec}, {}", errs.join("; "));
    }
    Ok((key.to_string(), value.to_string(), effect))
}

/// Reads `taint`'s arguments: `key=value:Effect` or `key:Effect` adds,
/// `key:Effect-` removes that taint, `key-` every taint with the key.
pub fn parse_taint_args(args: &[String]) -> Result<TaintChanges> {
    if args.is_empty() {
        bail!("at least one taint update is required");
    }
    let mut ch = TaintChanges::default();
    for spec in args {
        if let Some(rest) = spec.strip_suffix('-') {
            let (key, _, effect) = parse_taint(rest)?;
            ch.remove.push(TaintRemoval { key, effect });
        } else {
            let (key, value, effect) = parse_taint(spec)?;
            let Some(effect) = effect else {
                bail!("invalid taint spec: {spec} (adding a taint needs an effect: key=value:Effect or key:Effect)");
            };
            if ch
                .add
                .iter()
                .any(|t| t.key == key && t.effect.as_ref() == Some(&effect))
            {
                bail!("duplicated taints with the same key and effect: {spec}");
            }
            ch.add.push(Taint {
                key,
                value,
                effect: Some(effect),
                ..Taint::default()
            });
        }
    }
    let conflicts: Vec<String> = ch
        .remove
        .iter()
        .flat_map(|r| {
            ch.add
                .iter()
                .filter(move |a| a.key == r.key && (r.effect.is_none() || a.effect == r.effect))
                .map(move |_| {
                    format!(
                        "{}={}",
                        r.key,
                        r.effect.as_ref().map(|e| e.as_str()).unwrap_or("")
                    )
                })
        })
        .collect();
    if !conflicts.is_empty() {
        bail!(
            "can not both modify and remove the following taint(s) in the same command: {}",
            conflicts.join(", ")
        );
    }
    Ok(ch)
}

/// Applies taint changes to a node's taints, like kubectl's
/// `reorganizeTaints`; returns `tainted`, `untainted` or `modified`.
/// A new `NoExecute` taint gets `timeAdded` = `now` (RFC 3339).
pub fn apply_taints(
    node: &str,
    taints: &mut Vec<Taint>,
    ch: &TaintChanges,
    overwrite: bool,
    now: &str,
) -> Result<&'static str> {
    if !overwrite {
        let exists: Vec<&str> = ch
            .add
            .iter()
            .filter(|a| {
                taints
                    .iter()
                    .any(|t| t.key == a.key && t.effect == a.effect)
            })
            .map(|a| a.key.as_str())
            .collect();
        if !exists.is_empty() {
            bail!(
                "node {node} already has {} taint(s) with same effect(s) and --overwrite is false",
                exists.join(",")
            );
        }
    }
    let mut new: Vec<Taint> = ch
        .add
        .iter()
        .map(|a| {
            let mut a = a.clone();
            if a.effect == Some(TaintEffect::NoExecute) && a.time_added.is_none() {
                a.time_added = Some(now.to_string());
            }
            a
        })
        .collect();
    for old in taints.iter() {
        if !new
            .iter()
            .any(|t| t.key == old.key && t.effect == old.effect)
        {
            new.push(old.clone());
        }
    }
    let added = taints.len() != new.len();
    let mut errs = Vec::new();
    let mut deleted = false;
    for r in &ch.remove {
        let before = new.len();
        new.retain(|t| !(t.key == r.key && (r.effect.is_none() || t.effect == r.effect)));
        if new.len() == before {
            errs.push(format!("taint {:?} not found", r.to_string()));
        } else {
            deleted = true;
        }
    }
    aggregate(errs)?;
    let op = if (added && deleted) || overwrite {
        "modified"
    } else if added {
        "tainted"
    } else {
        "untainted"
    };
    *taints = new;
    Ok(op)
}

/// Sets `spec.unschedulable`; the message (`cordoned`, `already cordoned`,
/// `uncordoned`, `already uncordoned`) and whether it changed.
pub fn set_unschedulable(current: &mut bool, want: bool) -> (&'static str, bool) {
    let changed = *current != want;
    *current = want;
    let msg = match (want, changed) {
        (true, true) => "cordoned",
        (true, false) => "already cordoned",
        (false, true) => "uncordoned",
        (false, false) => "already uncordoned",
    };
    (msg, changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    fn labels(a: &[(&str, &str)]) -> Labels {
        a.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_args() {
        let ch = parse_label_args(&args(&["disk=ssd", "zone-", "example.com/x=", "a=b"])).unwrap();
        assert_eq!(
            ch.set,
            labels(&[("disk", "ssd"), ("example.com/x", ""), ("a", "b")])
        );
        assert_eq!(ch.remove, ["zone"]);
        for (bad, msg) in [
            ("a=b=c", "invalid label spec: a=b=c"),
            ("disk", "unknown label spec: disk"),
            ("bad key=v", "invalid label key: \"bad key=v\""),
            (
                "k=bad value",
                "invalid label value: \"k=bad value\": a valid label must be",
            ),
            ("-", "invalid label key"),
        ] {
            let e = parse_label_args(&args(&[bad])).unwrap_err().to_string();
            assert!(e.starts_with(msg), "{bad}: {e}");
        }
        let e = parse_label_args(&args(&["a=b", "a-"]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "can not both modify and remove a label in the same command"
        );
        assert_eq!(
            parse_label_args(&[]).unwrap_err().to_string(),
            "at least one label update is required"
        );
    }

    #[test]
    fn labels_need_overwrite_to_change_a_value() {
        let mut l = labels(&[("disk", "hdd")]);
        let ch = parse_label_args(&args(&["disk=ssd"])).unwrap();
        let e = apply_labels(&mut l, &ch, false).unwrap_err().to_string();
        assert_eq!(
            e,
            "'disk' already has a value (hdd), and --overwrite is false"
        );
        assert_eq!(l, labels(&[("disk", "hdd")]));
        let o = apply_labels(&mut l, &ch, true).unwrap();
        assert_eq!(o.message, "labeled");
        assert_eq!(l, labels(&[("disk", "ssd")]));
        // The same value again: nothing to do, no --overwrite needed.
        let o = apply_labels(&mut l, &ch, false).unwrap();
        assert_eq!(o.message, "not labeled");
        assert!(!o.changed());
        let ch = parse_label_args(&args(&["a=1", "b=2"])).unwrap();
        let mut l = labels(&[("a", "0"), ("b", "0")]);
        let e = apply_labels(&mut l, &ch, false).unwrap_err().to_string();
        assert!(e.starts_with("['a' already has a value (0)"), "{e}");
    }

    #[test]
    fn label_removal_messages() {
        let mut l = labels(&[("disk", "ssd"), ("zone", "a")]);
        let o = apply_labels(
            &mut l,
            &parse_label_args(&args(&["zone-", "nope-"])).unwrap(),
            false,
        )
        .unwrap();
        assert_eq!(o.message, "unlabeled");
        assert_eq!(o.not_found, ["nope"]);
        let o = apply_labels(
            &mut l,
            &parse_label_args(&args(&["disk-", "x=y"])).unwrap(),
            false,
        )
        .unwrap();
        assert_eq!(o.message, "modified");
        assert_eq!(l, labels(&[("x", "y")]));
    }

    fn taint(s: &str) -> Taint {
        s.parse().unwrap()
    }

    #[test]
    fn taint_args() {
        let ch = parse_taint_args(&args(&[
            "dedicated=gpu:NoSchedule",
            "x:NoExecute",
            "old:NoSchedule-",
            "gone-",
        ]))
        .unwrap();
        assert_eq!(
            ch.add,
            [taint("dedicated=gpu:NoSchedule"), taint("x:NoExecute")]
        );
        assert_eq!(
            ch.remove,
            [
                TaintRemoval {
                    key: "old".into(),
                    effect: Some(TaintEffect::NoSchedule)
                },
                TaintRemoval {
                    key: "gone".into(),
                    effect: None
                },
            ]
        );
        for (bad, msg) in [
            (
                "dedicated",
                "invalid taint spec: dedicated (adding a taint needs an effect",
            ),
            (
                "dedicated=gpu",
                "invalid taint spec: dedicated=gpu, name part must consist",
            ),
            (
                "k=v:Sometimes",
                "invalid taint effect: Sometimes, unsupported taint effect",
            ),
            ("a:b:NoSchedule", "invalid taint spec: a:b:NoSchedule"),
            ("k=v=w:NoSchedule", "invalid taint spec: k=v=w:NoSchedule"),
            (
                "bad key:NoSchedule",
                "invalid taint spec: bad key:NoSchedule, name part must consist",
            ),
            (
                "k=bad value:NoSchedule",
                "invalid taint spec: k=bad value:NoSchedule, a valid label must be",
            ),
        ] {
            let e = parse_taint_args(&args(&[bad])).unwrap_err().to_string();
            assert!(e.starts_with(msg), "{bad}: {e}");
        }
        let e = parse_taint_args(&args(&["k=v:NoSchedule", "k=w:NoSchedule"])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "duplicated taints with the same key and effect: k=w:NoSchedule"
        );
        let e = parse_taint_args(&args(&["k=v:NoSchedule", "k-"])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "can not both modify and remove the following taint(s) in the same command: k="
        );
        assert!(parse_taint_args(&args(&["k=v:NoSchedule", "k:NoExecute-"])).is_ok());
    }

    #[test]
    fn taint_changes_like_kubectl() {
        let now = "2024-05-03T16:00:00Z";
        let mut t = vec![taint("a:NoSchedule")];
        let add = parse_taint_args(&args(&["b=1:NoExecute"])).unwrap();
        assert_eq!(
            apply_taints("n1", &mut t, &add, false, now).unwrap(),
            "tainted"
        );
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].key, "b");
        assert_eq!(t[0].time_added.as_deref(), Some(now));
        let e = apply_taints("n1", &mut t, &add, false, now)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "node n1 already has b taint(s) with same effect(s) and --overwrite is false"
        );
        let over = parse_taint_args(&args(&["b=2:NoExecute"])).unwrap();
        assert_eq!(
            apply_taints("n1", &mut t, &over, true, now).unwrap(),
            "modified"
        );
        assert_eq!(t.iter().filter(|x| x.key == "b").count(), 1);
        assert_eq!(t[0].value, "2");
        let rm = parse_taint_args(&args(&["a:NoSchedule-"])).unwrap();
        assert_eq!(
            apply_taints("n1", &mut t, &rm, false, now).unwrap(),
            "untainted"
        );
        assert_eq!(t.len(), 1);
        let e = apply_taints("n1", &mut t, &rm, false, now)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "taint \"a:NoSchedule\" not found");
        let rm_key = parse_taint_args(&args(&["b-"])).unwrap();
        assert_eq!(
            apply_taints("n1", &mut t, &rm_key, false, now).unwrap(),
            "untainted"
        );
        assert!(t.is_empty());
    }

    #[test]
    fn cordon_messages() {
        let mut u = false;
        assert_eq!(
            set_unschedulable(&mut u, false),
            ("already uncordoned", false)
        );
        assert_eq!(set_unschedulable(&mut u, true), ("cordoned", true));
        assert!(u);
        assert_eq!(set_unschedulable(&mut u, true), ("already cordoned", false));
        assert_eq!(set_unschedulable(&mut u, false), ("uncordoned", true));
    }
}
