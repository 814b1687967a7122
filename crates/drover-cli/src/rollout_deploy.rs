//! `drover rollout status|history|undo|restart|pause|resume
//! deployment/NAME`, worded like kubectl's (`kubectl/pkg/polymorphichelpers`:
//! `DeploymentStatusViewer`, `DeploymentHistoryViewer`,
//! `DeploymentRollbacker`, `ObjectPauser`, `ObjectResumer`,
//! `ObjectRestarter`). A Deployment's history is its ReplicaSets, each
//! numbered by its `deployment.kubernetes.io/revision` annotation; `undo`
//! copies the chosen one's template (without `pod-template-hash`) back
//! into the Deployment. Every write is a compare-and-swap on the
//! Deployment as read, again on a conflict.

use crate::client::Client;
use crate::deployments::{equal_ignoring_hash, owned, revision, status_line};
use crate::describe::describe_pod_template;
use crate::errors::{kube, Reported};
use anyhow::{bail, Result};
use drover_api::{
    Deployment, Kind, Manifest, ReplicaSet, DEPLOYMENT_REVISION_ANNOTATION, POD_TEMPLATE_HASH_LABEL,
};
use drover_controller::daemon::rollout::{CHANGE_CAUSE_ANNOTATION, RESTARTED_AT_ANNOTATION};
use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime};

/// How often `rollout status` reads the Deployment while waiting.
const POLL: Duration = Duration::from_millis(250);

/// The annotations `undo` keeps from the Deployment rather than taking
/// from the ReplicaSet (kubectl's `annotationsToSkip`).
const ANNOTATIONS_TO_SKIP: [&str; 6] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    DEPLOYMENT_REVISION_ANNOTATION,
    "deployment.kubernetes.io/revision-history",
    "deployment.kubernetes.io/desired-replicas",
    "deployment.kubernetes.io/max-replicas",
    "deprecated.deployment.rollback.to",
];

async fn get(c: &Client, ns: &str, name: &str) -> Result<Deployment> {
    match c
        .get_object(Kind::Deployment.plural(), ns, name)
        .await
        .map_err(kube)?
    {
        Manifest::Deployment(d) => Ok(*d),
        m => bail!("{} is not a deployment", m.reference()),
    }
}

/// The ReplicaSets the Deployment controls, oldest first.
async fn replica_sets(c: &Client, d: &Deployment) -> Result<Vec<ReplicaSet>> {
    let all: Vec<ReplicaSet> = c
        .list_objects(Kind::ReplicaSet.plural(), &d.metadata.namespace, "")
        .await
        .map_err(kube)?
        .items
        .into_iter()
        .filter_map(crate::kubectl::as_replica_set)
        .collect();
    Ok(owned(d, &all).into_iter().cloned().collect())
}

/// Reads the Deployment, changes it with `f`, writes it back with
/// compare-and-swap, again on a conflict ([`crate::scale::update`]). `f`
/// answers false for "nothing to change" (nothing is written then).
async fn update<F>(c: &Client, ns: &str, name: &str, mut f: F) -> Result<bool>
where
    F: FnMut(&mut Deployment) -> Result<bool>,
{
    crate::scale::update(c, Kind::Deployment, name, ns, |m| match m {
        Manifest::Deployment(d) => f(d),
        other => bail!("{} is not a deployment", other.reference()),
    })
    .await
}

/// `drover rollout status deployment/NAME [--timeout D] [-w=false]`: one
/// line per change, as kubectl prints them; fails when the rollout's
/// progress deadline passes.
pub async fn status(
    c: &Client,
    name: &str,
    ns: &str,
    watch: bool,
    timeout: Option<Duration>,
    out: &mut impl Write,
) -> Result<()> {
    let start = Instant::now();
    let mut last = String::new();
    loop {
        let d = get(c, ns, name).await?;
        let (line, done) = status_line(&d).map_err(Reported)?;
        if line != last {
            writeln!(out, "{line}")?;
            out.flush()?;
            last = line;
        }
        if done || !watch {
            return Ok(());
        }
        if timeout.is_some_and(|t| start.elapsed() >= t) {
            return Err(Reported(format!(
                "timed out waiting for deployment {name:?} to roll out: {}",
                last.trim_end_matches("...")
            ))
            .into());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `drover rollout history deployment/NAME [--revision N]`.
pub async fn history(
    c: &Client,
    name: &str,
    ns: &str,
    revision_wanted: Option<i64>,
    out: &mut impl Write,
) -> Result<()> {
    let d = get(c, ns, name).await?;
    let sets = replica_sets(c, &d).await?;
    let mut by_revision: BTreeMap<i64, &ReplicaSet> = BTreeMap::new();
    for rs in &sets {
        if let Some(r) = revision(rs) {
            by_revision.insert(r, rs);
        }
    }
    if let Some(n) = revision_wanted.filter(|n| *n > 0) {
        let Some(rs) = by_revision.get(&n) else {
            bail!("unable to find the specified revision");
        };
        writeln!(out, "deployment.apps/{name} with revision #{n}")?;
        let mut t = rs.spec.template.clone();
        if let Some(cause) = rs.metadata.annotations.get(CHANGE_CAUSE_ANNOTATION) {
            t.metadata
                .annotations
                .insert(CHANGE_CAUSE_ANNOTATION.into(), cause.clone());
        }
        write!(out, "{}", describe_pod_template(&t))?;
        return Ok(());
    }
    writeln!(out, "deployment.apps/{name} ")?;
    if by_revision.is_empty() {
        writeln!(out, "No rollout history found.")?;
        return Ok(());
    }
    let rows: Vec<(i64, &str)> = by_revision
        .iter()
        .map(|(r, rs)| {
            let cause = rs.metadata.annotations.get(CHANGE_CAUSE_ANNOTATION);
            (*r, cause.map_or("<none>", String::as_str))
        })
        .collect();
    write!(out, "{}", crate::rollout::history_table(&rows))?;
    Ok(())
}

/// The ReplicaSet `undo` goes back to: revision `to` (0: the one before
/// the newest), as kubectl's `deploymentRevision` picks it.
pub fn undo_target<'a>(
    d: &Deployment,
    sets: &'a [ReplicaSet],
    to: i64,
) -> Result<&'a ReplicaSet, String> {
    let mut numbered: Vec<(i64, &ReplicaSet)> = sets
        .iter()
        .filter_map(|rs| Some((revision(rs)?, rs)))
        .collect();
    if to > 0 {
        return numbered
            .into_iter()
            .find(|(r, _)| *r == to)
            .map(|(_, rs)| rs)
            .ok_or_else(|| format!("unable to find specified revision {to} in history"));
    }
    numbered.sort_by_key(|(r, _)| *r);
    numbered.pop();
    numbered.pop().map(|(_, rs)| rs).ok_or_else(|| {
        format!(
            "no rollout history found for deployment {:?}",
            d.metadata.name
        )
    })
}

/// `drover rollout undo deployment/NAME [--to-revision N]`.
pub async fn undo(
    c: &Client,
    name: &str,
    ns: &str,
    to_revision: Option<i64>,
    out: &mut impl Write,
) -> Result<()> {
    let d = get(c, ns, name).await?;
    if d.spec.paused == Some(true) {
        bail!("you cannot rollback a paused deployment; resume it first with 'drover rollout resume deployment/{name}' and try again");
    }
    let sets = replica_sets(c, &d).await?;
    let to = to_revision.unwrap_or(0);
    let target = undo_target(&d, &sets, to).map_err(Reported)?;
    if equal_ignoring_hash(&target.spec.template, &d.spec.template) {
        writeln!(
            out,
            "deployment.apps/{name} skipped rollback (current template already matches revision {})",
            revision(target).unwrap_or(to)
        )?;
        return Ok(());
    }
    let mut template = target.spec.template.clone();
    template.metadata.labels.remove(POD_TEMPLATE_HASH_LABEL);
    let from_set = target.metadata.annotations.clone();
    update(c, ns, name, |d| {
        let mut annotations: BTreeMap<String, String> = d
            .metadata
            .annotations
            .iter()
            .filter(|(k, _)| ANNOTATIONS_TO_SKIP.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (k, v) in &from_set {
            if !ANNOTATIONS_TO_SKIP.contains(&k.as_str()) {
                annotations.insert(k.clone(), v.clone());
            }
        }
        d.metadata.annotations = annotations.into_iter().collect();
        d.spec.template = template.clone();
        Ok(true)
    })
    .await?;
    writeln!(out, "deployment.apps/{name} rolled back")?;
    Ok(())
}

/// `drover rollout restart deployment/NAME`: sets the template annotation
/// `kubectl.kubernetes.io/restartedAt`, which starts a rollout.
pub async fn restart(c: &Client, name: &str, ns: &str, out: &mut impl Write) -> Result<()> {
    let now = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    update(c, ns, name, |d| {
        if d.spec.paused == Some(true) {
            bail!("can't restart paused deployment (run rollout resume first)");
        }
        d.spec
            .template
            .metadata
            .annotations
            .insert(RESTARTED_AT_ANNOTATION.to_owned(), now.clone());
        Ok(true)
    })
    .await?;
    writeln!(out, "deployment.apps/{name} restarted")?;
    Ok(())
}

/// `drover rollout pause|resume deployment/NAME`: sets `spec.paused`;
/// `deployment.apps/NAME paused` (or `already paused`).
pub async fn pause(
    c: &Client,
    name: &str,
    ns: &str,
    paused: bool,
    out: &mut impl Write,
) -> Result<()> {
    let changed = update(c, ns, name, |d| {
        if d.spec.paused.unwrap_or(false) == paused {
            return Ok(false);
        }
        d.spec.paused = Some(paused).filter(|p| *p);
        Ok(true)
    })
    .await?;
    let word = if paused { "paused" } else { "resumed" };
    let already = if changed { "" } else { "already " };
    writeln!(out, "deployment.apps/{name} {already}{word}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rs(name: &str, rev: Option<&str>) -> ReplicaSet {
        let mut annotations = serde_json::Map::new();
        if let Some(r) = rev {
            annotations.insert(DEPLOYMENT_REVISION_ANNOTATION.into(), json!(r));
        }
        let m = Manifest::from_value(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"template": {"spec": {"containers": []}}}}))
        .unwrap();
        let Manifest::ReplicaSet(rs) = m else {
            panic!()
        };
        *rs
    }

    #[test]
    fn undo_goes_to_the_revision_before_the_newest_or_the_one_named() {
        let d = Deployment::default();
        let sets = [
            rs("a", Some("1")),
            rs("c", Some("3")),
            rs("b", Some("2")),
            rs("x", None),
        ];
        let name = |r: Result<&ReplicaSet, String>| r.map(|rs| rs.metadata.name.clone());
        assert_eq!(name(undo_target(&d, &sets, 0)), Ok("b".into()));
        assert_eq!(name(undo_target(&d, &sets, 1)), Ok("a".into()));
        assert_eq!(
            name(undo_target(&d, &sets, 7)),
            Err("unable to find specified revision 7 in history".into())
        );
        assert_eq!(
            name(undo_target(&d, &sets[..1], 0)),
            Err("no rollout history found for deployment \"\"".into())
        );
    }
}
