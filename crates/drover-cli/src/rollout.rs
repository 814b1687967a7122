//! `drover rollout status|history|undo|restart ds/NAME`, worded like
//! kubectl's (`kubectl/pkg/polymorphichelpers`: `DaemonSetStatusViewer`,
//! `DaemonSetHistoryViewer`, `DaemonSetRollbacker`).

use crate::client::Client;
use crate::describe::describe_pod_template;
use crate::errors::{kube, Reported};
use anyhow::{bail, Result};
use drover_api::{
    ControllerRevision, DaemonSet, DaemonSetUpdateStrategyType, Kind, Manifest, Node, Pod,
    PodTemplateSpec,
};
use drover_controller::daemon::pods::CONTROLLER_REVISION_HASH_LABEL;
use drover_controller::daemon::rollout::{
    revision_template, CHANGE_CAUSE_ANNOTATION, RESTARTED_AT_ANNOTATION,
};
use drover_controller::daemon::{explain, RolloutProgress};
use drover_controller::Timestamp;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime};
use tonic::Code;

/// How often `rollout status` reads the DaemonSet while waiting.
const POLL: Duration = Duration::from_millis(250);

/// Attempts of a compare-and-swap write before giving up on conflicts.
const CONFLICT_RETRIES: usize = 5;

/// A `KIND/NAME` or `KIND NAME` target, as kubectl reads it: the kind and
/// the name.
pub fn kind_and_name(target: &str, name: Option<&str>) -> Result<(Kind, String)> {
    let (kind, name) = match (target.split_once('/'), name) {
        (Some((k, n)), None) => (k, n),
        (None, Some(n)) => (target, n),
        (Some(_), Some(_)) => bail!("there is no need to specify a resource type as a separate argument when passing arguments in resource/name form"),
        (None, None) => bail!("you must specify a resource and a name, e.g. deployment/NAME"),
    };
    let kind = Kind::parse(kind)?;
    if name.is_empty() {
        bail!(
            "you must specify the name of the {}, e.g. {}/NAME",
            kind.name().to_ascii_lowercase(),
            kind.short_names().first().copied().unwrap_or(kind.plural())
        );
    }
    Ok((kind, name.to_owned()))
}

/// What `rollout` acts on: a DaemonSet or a Deployment.
pub fn rollout_target(target: &str, name: Option<&str>) -> Result<(Kind, String)> {
    let (kind, name) = kind_and_name(target, name)?;
    if !matches!(kind, Kind::DaemonSet | Kind::Deployment) {
        bail!(
            "no rollout for {:?}: drover rolls out daemonsets and deployments (ds/NAME, deployment/NAME)",
            kind.plural()
        );
    }
    Ok((kind, name))
}

/// `ds/NAME`, `daemonset NAME`-style target: the DaemonSet's name.
pub fn daemon_set_name(target: &str, name: Option<&str>) -> Result<String> {
    match rollout_target(target, name)? {
        (Kind::DaemonSet, name) => Ok(name),
        (kind, _) => bail!(
            "{} has no such rollout command: it is for daemonsets (ds/NAME)",
            kind.plural()
        ),
    }
}

async fn get_ds(c: &Client, ns: &str, name: &str) -> Result<DaemonSet> {
    match c.get_object("daemonsets", ns, name).await.map_err(kube)? {
        Manifest::DaemonSet(d) => Ok(*d),
        m => bail!("{} is not a daemonset", m.reference()),
    }
}

/// The DaemonSet's revisions, oldest first.
async fn history(c: &Client, ds: &DaemonSet, ns: &str) -> Result<Vec<ControllerRevision>> {
    let list = c
        .list_objects("controllerrevisions", ns, "")
        .await
        .map_err(kube)?;
    let mut revs: Vec<ControllerRevision> = list
        .items
        .into_iter()
        .filter_map(|m| match m {
            Manifest::ControllerRevision(r) => Some(*r),
            _ => None,
        })
        .filter(|r| {
            r.metadata
                .controller_ref()
                .is_some_and(|o| o.uid == ds.metadata.uid)
        })
        .collect();
    revs.sort_by_key(|r| r.revision);
    Ok(revs)
}

/// One `rollout status` reading: the line to print and whether it is done.
pub fn status_line(ds: &DaemonSet) -> (String, bool) {
    let name = &ds.metadata.name;
    let s = &ds.status;
    if ds.metadata.generation.unwrap_or(0) <= s.observed_generation.unwrap_or(0) {
        if s.updated_number_scheduled < s.desired_number_scheduled {
            return (
                format!(
                    "Waiting for daemon set {name:?} rollout to finish: {} out of {} new pods have been updated...",
                    s.updated_number_scheduled, s.desired_number_scheduled
                ),
                false,
            );
        }
        if s.number_available < s.desired_number_scheduled {
            return (
                format!(
                    "Waiting for daemon set {name:?} rollout to finish: {} of {} updated pods are available...",
                    s.number_available, s.desired_number_scheduled
                ),
                false,
            );
        }
        return (format!("daemon set {name:?} successfully rolled out"), true);
    }
    (
        "Waiting for daemon set spec update to be observed...".to_owned(),
        false,
    )
}

/// How far the rollout to the DaemonSet's current revision is, as the
/// controller sees it ([`explain()`]): the nodes it waits on, each with a
/// [`drover_controller::daemon::WaitReason`]. `None` when nothing can be
/// told (no revision yet, or a read failed).
async fn rollout_progress(c: &Client, ds: &DaemonSet, ns: &str) -> Option<RolloutProgress> {
    let revs = history(c, ds, ns).await.ok()?;
    let hash = revs
        .last()
        .and_then(|r| r.metadata.labels.get(CONTROLLER_REVISION_HASH_LABEL))?;
    let (Ok(pods), Ok(nodes)) = (
        c.list_objects("pods", ns, "").await,
        c.list_objects("nodes", "", "").await,
    ) else {
        return None;
    };
    let nodes: Vec<Node> = nodes
        .items
        .into_iter()
        .filter_map(crate::kubectl::as_node)
        .collect();
    let pods: Vec<Pod> = pods
        .items
        .into_iter()
        .filter_map(crate::kubectl::as_pod)
        .collect();
    let now = Timestamp::from(SystemTime::now());
    explain(ds, &nodes, &pods, Some(hash), now).rollout
}

/// At most this many nodes are named when a rollout times out.
const NAMED_ON_TIMEOUT: usize = 10;

/// Live mode reads the pods and nodes every this many polls (1 s).
const LIVE_EVERY: u64 = 4;
/// Live mode lists at most this many nodes that hold the rollout.
const LIVE_NODES: usize = 8;

/// What holds a rollout ([`RolloutProgress::holding`]: nodes away, new
/// pods not ready or not available yet, `OnDelete` pods), as `node: why`;
/// old pods waiting for their turn are the consequence.
async fn holding(c: &Client, ds: &DaemonSet, ns: &str) -> Vec<String> {
    rollout_progress(c, ds, ns)
        .await
        .map(|progress| holding_lines(&progress))
        .unwrap_or_default()
}

/// [`RolloutProgress::holding`] as `node: why`.
fn holding_lines(progress: &RolloutProgress) -> Vec<String> {
    progress
        .holding()
        .map(|w| format!("{}: {}", w.node, w.reason))
        .collect()
}

/// The line `rollout status` adds once done when nodes that are not Ready
/// ([`RolloutProgress::nodes_away`]) still run an older revision.
fn away_line(progress: &RolloutProgress) -> Option<String> {
    let away: Vec<&str> = progress.nodes_away().collect();
    (!away.is_empty()).then(|| {
        format!(
            "{} node(s) not Ready still run an older revision and are updated when they are back: {}",
            away.len(),
            away.join(", ")
        )
    })
}

/// The lines under the status line in live mode.
fn live_lines(ds: &DaemonSet, holding: &[String]) -> Vec<String> {
    let s = &ds.status;
    let mut lines = vec![format!(
        "  nodes: {} desired, {} updated, {} available, {} unavailable, {} misscheduled",
        s.desired_number_scheduled,
        s.updated_number_scheduled,
        s.number_available,
        s.number_unavailable,
        s.number_misscheduled
    )];
    for h in holding.iter().take(LIVE_NODES) {
        lines.push(format!("  waiting on {h}"));
    }
    if holding.len() > LIVE_NODES {
        lines.push(format!("  … and {} more", holding.len() - LIVE_NODES));
    }
    lines
}

/// Redraws `lines` over the `drawn` lines printed before (cursor up, clear
/// to the end of the screen); answers how many lines are drawn now.
fn redraw(out: &mut impl Write, drawn: usize, lines: &[String]) -> Result<usize> {
    if drawn > 0 {
        write!(out, "\x1b[{drawn}A\r\x1b[J")?;
    }
    for l in lines {
        writeln!(out, "{l}")?;
    }
    out.flush()?;
    Ok(lines.len())
}

/// `drover rollout status ds/NAME [--timeout D] [-w=false]`.
///
/// With `live` (stdout is a terminal) the lines are redrawn in place: the
/// status line, the node counts and the nodes that hold the rollout, read
/// every second. Without, one line per change (as kubectl prints).
pub async fn status(
    c: &Client,
    name: &str,
    namespace: &str,
    watch: bool,
    timeout: Option<Duration>,
    live: bool,
    out: &mut impl Write,
) -> Result<()> {
    let start = Instant::now();
    let mut last = String::new();
    let mut drawn = 0usize;
    let mut polls = 0u64;
    let mut holding_now: Vec<String> = Vec::new();
    loop {
        let ds = get_ds(c, namespace, name).await?;
        if matches!(
            ds.spec.update_strategy.r#type,
            Some(DaemonSetUpdateStrategyType::OnDelete)
        ) {
            bail!("rollout status is only available for RollingUpdate strategy type");
        }
        let (line, done) = status_line(&ds);
        if live && watch {
            if !done && polls.is_multiple_of(LIVE_EVERY) {
                holding_now = holding(c, &ds, namespace).await;
            }
            polls += 1;
            let mut lines = vec![line.clone()];
            if !done {
                lines.extend(live_lines(&ds, &holding_now));
            }
            drawn = redraw(out, drawn, &lines)?;
            last = line;
        } else if line != last {
            writeln!(out, "{line}")?;
            out.flush()?;
            last = line;
        }
        if done {
            // Nodes that are not Ready don't hold a rollout: say which ones
            // still run an older revision.
            let progress = rollout_progress(c, &ds, namespace).await;
            if let Some(line) = progress.as_ref().and_then(away_line) {
                writeln!(out, "{line}")?;
            }
            return Ok(());
        }
        if !watch {
            return Ok(());
        }
        if timeout.is_some_and(|t| start.elapsed() >= t) {
            // What holds it: nodes away and new pods not ready (old pods
            // waiting for their turn are the consequence).
            let holding = holding(c, &ds, namespace).await;
            let mut waiting: Vec<String> = holding.iter().take(NAMED_ON_TIMEOUT).cloned().collect();
            if holding.len() > NAMED_ON_TIMEOUT {
                waiting.push(format!("and {} more", holding.len() - NAMED_ON_TIMEOUT));
            }
            let mut why = format!(
                "timed out waiting for daemon set {name:?} to roll out: {}",
                last.trim_end_matches("...")
            );
            if !waiting.is_empty() {
                why.push_str(&format!("; waiting on {}", waiting.join(", ")));
            }
            return Err(Reported(why).into());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `REVISION  CHANGE-CAUSE` rows as kubectl's `printHistory` writes them
/// (its tabwriter: padding 2).
pub(crate) fn history_table(rows: &[(i64, &str)]) -> String {
    let mut text = "REVISION\tCHANGE-CAUSE\n".to_owned();
    for (revision, cause) in rows {
        text.push_str(&format!("{revision}\t{cause}\n"));
    }
    crate::tabwriter::describe(&text)
}

fn change_cause(r: &ControllerRevision) -> &str {
    r.metadata
        .annotations
        .get(CHANGE_CAUSE_ANNOTATION)
        .map_or("<none>", String::as_str)
}

/// `drover rollout history ds/NAME [--revision N]`.
pub async fn history_cmd(
    c: &Client,
    name: &str,
    namespace: &str,
    revision: Option<i64>,
    out: &mut impl Write,
) -> Result<()> {
    let ds = get_ds(c, namespace, name).await?;
    let revs = history(c, &ds, namespace).await?;
    match revision {
        Some(n) if n > 0 => {
            let Some(r) = revs.iter().find(|r| r.revision == n) else {
                bail!("unable to find the specified revision");
            };
            let Some(t) = revision_template(r) else {
                bail!("controllerrevision {:?} holds no pod template (data.spec.template); delete it and apply the daemonset again", r.metadata.name);
            };
            writeln!(out, "daemonset.apps/{name} with revision #{n}")?;
            write!(out, "{}", describe_pod_template(&t))?;
        }
        _ => {
            writeln!(out, "daemonset.apps/{name} ")?;
            let rows: Vec<(i64, &str)> =
                revs.iter().map(|r| (r.revision, change_cause(r))).collect();
            write!(out, "{}", history_table(&rows))?;
        }
    }
    Ok(())
}

/// Reads the DaemonSet, changes its template with `f`, writes it back with
/// compare-and-swap, again on a conflict. `f` answers false for "nothing to
/// change".
async fn update_template<F>(c: &Client, namespace: &str, name: &str, mut f: F) -> Result<bool>
where
    F: FnMut(&mut PodTemplateSpec) -> Result<bool>,
{
    let mut last = None;
    for _ in 0..CONFLICT_RETRIES {
        let mut ds = get_ds(c, namespace, name).await?;
        if !f(&mut ds.spec.template)? {
            return Ok(false);
        }
        match c.update_object(&Manifest::DaemonSet(Box::new(ds))).await {
            Ok(_) => return Ok(true),
            Err(e) if e.code() == Some(Code::Aborted) => last = Some(e),
            Err(e) => return Err(kube(e)),
        }
    }
    match last {
        Some(e) => Err(kube(e)),
        None => bail!("daemonset {name:?} kept changing; try again"),
    }
}

/// `drover rollout undo ds/NAME [--to-revision N]`.
pub async fn undo(
    c: &Client,
    name: &str,
    namespace: &str,
    to_revision: Option<i64>,
    out: &mut impl Write,
) -> Result<()> {
    let ds = get_ds(c, namespace, name).await?;
    let revs = history(c, &ds, namespace).await?;
    if revs.is_empty() {
        bail!("no rollout history found for daemonset {name:?}");
    }
    let target = match to_revision.filter(|n| *n != 0) {
        Some(n) => match revs.iter().find(|r| r.revision == n) {
            Some(r) => r,
            None => bail!("unable to find specified revision {n} in history"),
        },
        None => {
            if revs.len() < 2 {
                bail!("no last revision to roll back to");
            }
            &revs[revs.len() - 2]
        }
    };
    let Some(template) = revision_template(target) else {
        bail!(
            "controllerrevision {:?} holds no pod template (data.spec.template)",
            target.metadata.name
        );
    };
    let changed = update_template(c, namespace, name, |t| {
        if *t == template {
            return Ok(false);
        }
        *t = template.clone();
        Ok(true)
    })
    .await?;
    if changed {
        writeln!(out, "daemonset.apps/{name} rolled back")?;
    } else {
        writeln!(
            out,
            "daemonset.apps/{name} skipped rollback (current template already matches revision {})",
            target.revision
        )?;
    }
    Ok(())
}

/// `drover rollout restart ds/NAME`: sets the template annotation
/// `kubectl.kubernetes.io/restartedAt`, which makes a new revision.
pub async fn restart(c: &Client, name: &str, namespace: &str, out: &mut impl Write) -> Result<()> {
    let now = humantime::format_rfc3339_micros(SystemTime::now()).to_string();
    update_template(c, namespace, name, |t| {
        t.metadata
            .annotations
            .insert(RESTARTED_AT_ANNOTATION.to_owned(), now.clone());
        Ok(true)
    })
    .await?;
    writeln!(out, "daemonset.apps/{name} restarted")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(daemon_set_name("ds/x", None).unwrap(), "x");
        assert_eq!(daemon_set_name("daemonset", Some("x")).unwrap(), "x");
        assert!(daemon_set_name("pod/x", None).is_err());
        assert!(daemon_set_name("ds", None).is_err());
        assert!(daemon_set_name("deploy/x", None).is_err());
        assert_eq!(
            rollout_target("deploy/web", None).unwrap(),
            (Kind::Deployment, "web".into())
        );
        assert_eq!(
            rollout_target("deployment", Some("web")).unwrap(),
            (Kind::Deployment, "web".into())
        );
        let e = rollout_target("rs/web", None).unwrap_err().to_string();
        assert!(e.starts_with("no rollout for \"replicasets\""), "{e}");
        assert!(rollout_target("deploy/", None).is_err());
        // kubectl's printHistory: a tabwriter with padding 2.
        assert_eq!(
            history_table(&[(1, "<none>"), (12, "kubectl set image")]),
            "REVISION  CHANGE-CAUSE\n1         <none>\n12        kubectl set image\n"
        );
    }

    #[test]
    fn holding_and_away_are_decided_by_the_reason_not_its_text() {
        use drover_controller::daemon::{NodeWait, WaitReason};
        let wait = |node: &str, reason| NodeWait {
            node: node.into(),
            reason,
        };
        let progress = RolloutProgress {
            hash: "new".into(),
            waiting: vec![
                wait("n1", WaitReason::OldPodWaitingItsTurn { pod: "a".into() }),
                wait("n2", WaitReason::NodeNotReady),
                wait(
                    "n3",
                    WaitReason::NewPodNotReady {
                        pod: "c".into(),
                        container_reason: Some("ImagePullBackOff".into()),
                    },
                ),
                wait("n4", WaitReason::NodeNotReady),
            ],
        };
        assert_eq!(
            holding_lines(&progress),
            [
                "n2: node not Ready, updated when it is back",
                "n3: new pod c not ready (ImagePullBackOff)",
                "n4: node not Ready, updated when it is back",
            ]
        );
        assert_eq!(
            away_line(&progress).as_deref(),
            Some("2 node(s) not Ready still run an older revision and are updated when they are back: n2, n4")
        );
        let done = RolloutProgress {
            hash: "new".into(),
            waiting: Vec::new(),
        };
        assert!(holding_lines(&done).is_empty());
        assert_eq!(away_line(&done), None);
    }

    #[test]
    fn status_lines_are_kubectls() {
        let mut ds = DaemonSet::default();
        ds.metadata.name = "x".into();
        ds.metadata.generation = Some(2);
        ds.status.observed_generation = Some(1);
        assert_eq!(
            status_line(&ds).0,
            "Waiting for daemon set spec update to be observed..."
        );
        ds.status.observed_generation = Some(2);
        ds.status.desired_number_scheduled = 3;
        ds.status.updated_number_scheduled = 1;
        assert_eq!(
            status_line(&ds),
            (
                "Waiting for daemon set \"x\" rollout to finish: 1 out of 3 new pods have been updated...".into(),
                false
            )
        );
        ds.status.updated_number_scheduled = 3;
        ds.status.number_available = 2;
        assert!(status_line(&ds)
            .0
            .contains("2 of 3 updated pods are available"));
        ds.status.number_available = 3;
        assert_eq!(
            status_line(&ds),
            ("daemon set \"x\" successfully rolled out".into(), true)
        );
    }
}
