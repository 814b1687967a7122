//! `drover drain NODE… [--ignore-daemonsets] [--delete-emptydir-data]
//! [--force] [--timeout D]`, as kubectl's: cordon the node, then decide
//! for each of its pods with kubectl's filters, in kubectl's order (the
//! first that keeps a pod decides): a DaemonSet's pod is refused
//! ("cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to
//! ignore)") or, with the flag, left running; a mirror of a static pod
//! is left alone; a pod with an emptyDir needs `--delete-emptydir-data`;
//! a pod that no controller owns needs `--force`. A pod that has
//! finished (Succeeded, Failed) is always deleted. Any refusal deletes
//! nothing and fails; otherwise every other pod is deleted (drover's API
//! has no Eviction subresource, so this is what kubectl does here too:
//! `pod/NAME deleted`), drain waits until they are gone (at most
//! `--timeout`, 0 forever) and prints `node/NAME drained`.
//!
//! The decision ([`plan`]) is pure; [`drain`] does the I/O.

use crate::errors::{kube, Reported};
use crate::kubectl::cordon;
use crate::Client;
use anyhow::Result;
use drover_api::core_v1::pod_annotation::CONFIG_MIRROR;
use drover_api::{Pod, PodPhase};
use std::collections::BTreeSet;
use std::io::Write;
use std::time::{Duration, Instant};
use tonic::Code;

/// What drain was told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrainOptions {
    pub ignore_daemonsets: bool,
    pub delete_emptydir_data: bool,
    pub force: bool,
    /// None: wait as long as it takes.
    pub timeout: Option<Duration>,
}

/// Why a pod is kept or needs a flag, in kubectl's words; the order is
/// the order drain reports them in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Why {
    Unmanaged,
    DaemonSet,
    LocalStorage,
    /// Its DaemonSet is gone (deleted with --force).
    OrphanedDaemonSet,
}

impl Why {
    fn fatal(self) -> &'static str {
        match self {
            Why::Unmanaged => "Pods that declare no controller (use --force to override)",
            Why::DaemonSet => "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)",
            Why::LocalStorage => "Pods with local storage (use --delete-emptydir-data to override)",
            Why::OrphanedDaemonSet => {
                "Pods of a DaemonSet that no longer exists (use --force to override)"
            }
        }
    }

    fn warning(self) -> &'static str {
        match self {
            Why::Unmanaged => "deleting Pods that declare no controller",
            Why::DaemonSet => "ignoring DaemonSet-managed Pods",
            Why::LocalStorage => "deleting Pods with local storage",
            Why::OrphanedDaemonSet => "deleting Pods of a DaemonSet that no longer exists",
        }
    }
}

/// One filter's verdict on a pod.
enum Verdict {
    Delete,
    DeleteWarn(Why),
    Skip,
    SkipWarn(Why),
    Refuse(Why),
}

/// What drain will do on one node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrainPlan {
    /// The pods to delete: (namespace, name, uid).
    pub delete: Vec<(String, String, String)>,
    /// kubectl's `Warning: …` line, when there is one.
    pub warning: Option<String>,
    /// kubectl's refusals, one per reason (`cannot delete …: ns/pod, …`).
    pub errors: Vec<String>,
}

fn finished(p: &Pod) -> bool {
    matches!(
        p.status.phase,
        Some(PodPhase::Succeeded) | Some(PodPhase::Failed)
    )
}

/// kubectl's filters, in its order; the first that does not delete decides.
fn verdict(p: &Pod, o: &DrainOptions, daemon_sets: &BTreeSet<(String, String)>) -> Verdict {
    let filters: [&dyn Fn() -> Verdict; 4] = [
        &|| match p.metadata.controller_ref() {
            Some(r) if r.kind == "DaemonSet" => {
                let key = (p.metadata.namespace.clone(), r.name.clone());
                if !daemon_sets.contains(&key) {
                    if o.force {
                        Verdict::DeleteWarn(Why::OrphanedDaemonSet)
                    } else {
                        Verdict::Refuse(Why::OrphanedDaemonSet)
                    }
                } else if o.ignore_daemonsets {
                    Verdict::SkipWarn(Why::DaemonSet)
                } else {
                    Verdict::Refuse(Why::DaemonSet)
                }
            }
            _ => Verdict::Delete,
        },
        &|| {
            if p.metadata.annotations.contains_key(CONFIG_MIRROR) {
                Verdict::Skip
            } else {
                Verdict::Delete
            }
        },
        &|| {
            let local = p.spec.volumes.iter().any(|v| v.empty_dir.is_some());
            if !local || finished(p) {
                Verdict::Delete
            } else if o.delete_emptydir_data {
                Verdict::DeleteWarn(Why::LocalStorage)
            } else {
                Verdict::Refuse(Why::LocalStorage)
            }
        },
        &|| {
            if finished(p) || p.metadata.controller_ref().is_some() {
                Verdict::Delete
            } else if o.force {
                Verdict::DeleteWarn(Why::Unmanaged)
            } else {
                Verdict::Refuse(Why::Unmanaged)
            }
        },
    ];
    let mut last = Verdict::Delete;
    for f in filters {
        last = f();
        if !matches!(last, Verdict::Delete | Verdict::DeleteWarn(_)) {
            break;
        }
    }
    last
}

/// Decides what draining `node` does to `pods` (every pod; those of other
/// nodes are ignored). `daemon_sets` are the (namespace, name) that exist.
pub fn plan(
    node: &str,
    pods: &[Pod],
    daemon_sets: &BTreeSet<(String, String)>,
    o: &DrainOptions,
) -> DrainPlan {
    let mut mine: Vec<&Pod> = pods.iter().filter(|p| p.spec.node_name == node).collect();
    mine.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    let mut warned: Vec<(Why, Vec<String>)> = Vec::new();
    let mut refused: Vec<(Why, Vec<String>)> = Vec::new();
    let mut plan = DrainPlan::default();
    let add = |list: &mut Vec<(Why, Vec<String>)>, why: Why, p: &Pod| {
        let name = format!("{}/{}", p.metadata.namespace, p.metadata.name);
        match list.iter_mut().find(|(w, _)| *w == why) {
            Some((_, names)) => names.push(name),
            None => list.push((why, vec![name])),
        }
    };
    for p in mine {
        match verdict(p, o, daemon_sets) {
            Verdict::Delete => {}
            Verdict::DeleteWarn(w) => add(&mut warned, w, p),
            Verdict::Skip => continue,
            Verdict::SkipWarn(w) => {
                add(&mut warned, w, p);
                continue;
            }
            Verdict::Refuse(w) => {
                add(&mut refused, w, p);
                continue;
            }
        }
        plan.delete.push((
            p.metadata.namespace.clone(),
            p.metadata.name.clone(),
            p.metadata.uid.clone(),
        ));
    }
    warned.sort_by_key(|(w, _)| *w);
    refused.sort_by_key(|(w, _)| *w);
    if !warned.is_empty() {
        let parts: Vec<String> = warned
            .iter()
            .map(|(w, names)| format!("{}: {}", w.warning(), names.join(", ")))
            .collect();
        plan.warning = Some(parts.join("; "));
    }
    plan.errors = refused
        .iter()
        .map(|(w, names)| format!("cannot delete {}: {}", w.fatal(), names.join(", ")))
        .collect();
    plan
}

/// Kubernetes' aggregate error: one as is, several in brackets.
fn aggregate(errs: &[String]) -> String {
    match errs {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// `drover drain`: every node in turn; a node that cannot be drained is
/// reported and the others still drained, then the command fails.
pub async fn drain(
    c: &Client,
    nodes: &[String],
    o: &DrainOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<()> {
    if nodes.is_empty() {
        anyhow::bail!("USAGE: drover drain NODE [--ignore-daemonsets] [--delete-emptydir-data] [--force] [--timeout D]");
    }
    // Every node must exist before any is cordoned, as kubectl checks.
    for n in nodes {
        c.get_object("nodes", "", n).await.map_err(kube)?;
    }
    let mut pending = Vec::new();
    let mut reasons = Vec::new();
    for n in nodes {
        cordon(c, std::slice::from_ref(n), true, out).await?;
        match drain_one(c, n, o, out, err).await {
            Ok(()) => writeln!(out, "node/{n} drained")?,
            Err(e) => {
                let text = crate::errors::error_text(&e);
                writeln!(
                    err,
                    "error: unable to drain node {n:?} due to error: {}, continuing command...",
                    aggregate(&text.lines().map(str::to_string).collect::<Vec<_>>())
                )?;
                pending.push(n.clone());
                reasons.push(text);
            }
        }
    }
    if pending.is_empty() {
        return Ok(());
    }
    writeln!(err, "There are pending nodes to be drained:")?;
    for n in &pending {
        writeln!(err, " {n}")?;
    }
    Err(Reported(reasons.join("\n")).into())
}

async fn drain_one(
    c: &Client,
    node: &str,
    o: &DrainOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<()> {
    let pods: Vec<Pod> = c
        .list_objects("pods", "", "")
        .await
        .map_err(kube)?
        .items
        .into_iter()
        .filter_map(crate::kubectl::as_pod)
        .collect();
    let daemon_sets: BTreeSet<(String, String)> = c
        .list_objects("daemonsets", "", "")
        .await
        .map_err(kube)?
        .items
        .iter()
        .map(|m| (m.namespace().to_string(), m.name().to_string()))
        .collect();
    let p = plan(node, &pods, &daemon_sets, o);
    if !p.errors.is_empty() {
        return Err(Reported(p.errors.join("\n")).into());
    }
    if let Some(w) = &p.warning {
        writeln!(err, "Warning: {w}")?;
    }
    let started = Instant::now();
    for (ns, name, _) in &p.delete {
        match c.delete_object("pods", ns, name).await {
            Ok(_) => writeln!(out, "pod/{name} deleted")?,
            Err(e) if e.code() == Some(Code::NotFound) => {}
            Err(e) => return Err(kube(e)),
        }
    }
    out.flush()?;
    // Gone: not found, or a new pod of the same name (another uid).
    for (ns, name, uid) in &p.delete {
        loop {
            match c.get_object("pods", ns, name).await {
                Err(e) if e.code() == Some(Code::NotFound) => break,
                Err(e) => return Err(kube(e)),
                Ok(m) if &m.metadata().uid != uid => break,
                Ok(_) => {}
            }
            if let Some(t) = o.timeout {
                if started.elapsed() >= t {
                    let t = humantime::format_duration(t);
                    return Err(Reported(format!(
                        "error when waiting for pod {name:?} in namespace {ns:?} to terminate: drain did not complete within {t}"
                    ))
                    .into());
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::parse_manifests;

    const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: ds-a
  uid: u1
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: fluent, uid: d1, controller: true}]
spec: {nodeName: n0, containers: [{name: c, image: x}]}
---
apiVersion: v1
kind: Pod
metadata: {name: bare, uid: u2}
spec: {nodeName: n0, containers: [{name: c, image: x}]}
---
apiVersion: v1
kind: Pod
metadata: {name: scratch, uid: u3}
spec:
  nodeName: n0
  volumes: [{name: s, emptyDir: {}}]
  containers: [{name: c, image: x}]
---
apiVersion: v1
kind: Pod
metadata: {name: web-n0, uid: u4, annotations: {kubernetes.io/config.mirror: abc}}
spec: {nodeName: n0, containers: [{name: c, image: x}]}
---
apiVersion: v1
kind: Pod
metadata: {name: done, uid: u5}
spec:
  nodeName: n0
  volumes: [{name: s, emptyDir: {}}]
  containers: [{name: c, image: x}]
status: {phase: Succeeded}
---
apiVersion: v1
kind: Pod
metadata: {name: elsewhere, uid: u6}
spec: {nodeName: n1, containers: [{name: c, image: x}]}
"#;

    fn pods() -> Vec<Pod> {
        parse_manifests(PODS)
            .expect("pods parse")
            .into_iter()
            .filter_map(crate::kubectl::as_pod)
            .collect()
    }

    fn fluent() -> BTreeSet<(String, String)> {
        [("default".to_string(), "fluent".to_string())].into()
    }

    fn names(p: &DrainPlan) -> Vec<&str> {
        p.delete.iter().map(|(_, n, _)| n.as_str()).collect()
    }

    #[test]
    fn without_flags_every_refusal_is_kubectls() {
        let p = plan("n0", &pods(), &fluent(), &DrainOptions::default());
        assert_eq!(
            p.errors,
            vec![
                "cannot delete Pods that declare no controller (use --force to override): default/bare",
                "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): default/ds-a",
                "cannot delete Pods with local storage (use --delete-emptydir-data to override): default/scratch",
            ]
        );
        // The finished pod and nothing of the mirror pod or other nodes.
        assert_eq!(names(&p), vec!["done"]);
    }

    /// A ReplicaSet's pod is deleted without any flag (its controller
    /// makes another elsewhere), as kubectl's drain evicts it; the
    /// DaemonSet's pod beside it is what needs --ignore-daemonsets.
    #[test]
    fn replica_set_pods_are_deleted_without_a_flag() {
        let mut all = pods();
        all.extend(
            parse_manifests(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-abc-1\n  uid: u7\n  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-abc, uid: r1, controller: true}]\nspec: {nodeName: n0, containers: [{name: c, image: x}]}\n",
            )
            .unwrap()
            .into_iter()
            .filter_map(crate::kubectl::as_pod),
        );
        let o = DrainOptions {
            ignore_daemonsets: true,
            delete_emptydir_data: true,
            force: true,
            ..DrainOptions::default()
        };
        let p = plan("n0", &all, &fluent(), &o);
        assert!(names(&p).contains(&"web-abc-1"), "{p:?}");
        let only_rs: Vec<Pod> = all
            .iter()
            .filter(|p| p.metadata.name == "web-abc-1")
            .cloned()
            .collect();
        let p = plan("n0", &only_rs, &fluent(), &DrainOptions::default());
        assert_eq!(p.errors, Vec::<String>::new());
        assert_eq!(p.warning, None);
        assert_eq!(names(&p), vec!["web-abc-1"]);
    }

    #[test]
    fn with_the_flags_daemon_and_mirror_pods_stay() {
        let o = DrainOptions {
            ignore_daemonsets: true,
            delete_emptydir_data: true,
            force: true,
            timeout: None,
        };
        let p = plan("n0", &pods(), &fluent(), &o);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert_eq!(names(&p), vec!["bare", "done", "scratch"]);
        assert_eq!(
            p.warning.as_deref(),
            Some("deleting Pods that declare no controller: default/bare, default/scratch; ignoring DaemonSet-managed Pods: default/ds-a")
        );
    }

    #[test]
    fn a_pod_of_a_deleted_daemon_set_needs_force() {
        let none = BTreeSet::new();
        let o = DrainOptions {
            ignore_daemonsets: true,
            ..Default::default()
        };
        let p = plan("n0", &pods()[..1], &none, &o);
        assert_eq!(p.errors.len(), 1);
        assert!(p.errors[0].contains("(use --force to override): default/ds-a"));
        let o = DrainOptions { force: true, ..o };
        let p = plan("n0", &pods()[..1], &none, &o);
        assert_eq!(names(&p), vec!["ds-a"]);
    }
}
