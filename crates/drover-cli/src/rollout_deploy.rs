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
use crate::describe::describe_pod_template;
use crate::errors::{kube, Reported};
use anyhow::{bail, Result};
use drover_api::{Deployment, Kind, Manifest, ReplicaSet};
use drover_controller::daemon::rollout::{CHANGE_CAUSE_ANNOTATION, RESTARTED_AT_ANNOTATION};
use drover_controller::deployment::view::{
    equal_ignoring_hash, owned, revision, roll_back, status_line, undo_target,
};
use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime};

/// How often `rollout status` reads the Deployment while waiting.
const POLL: Duration = Duration::from_millis(250);

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
    update(c, ns, name, |d| {
        roll_back(d, target);
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
