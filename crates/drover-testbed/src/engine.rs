//! The nodes whose agent runs the Docker runtime (the host's engine,
//! through its socket mounted in the agent's container): what their pod
//! containers are, and the check that an agent cut off from every server,
//! killed or frozen keeps its containers running and restarts none when it
//! is back (issue 11).
//!
//! A pod's containers carry the agent's labels (`io.drover.node`,
//! `io.drover.pod.uid`, `io.drover.role`), so the check reads them from
//! the engine, not from drover.

use crate::docker::docker;
use std::collections::BTreeMap;

/// The labels the agent puts on every container it runs.
const LABEL_NODE: &str = "io.drover.node";
const LABEL_POD_UID: &str = "io.drover.pod.uid";
const LABEL_ROLE: &str = "io.drover.role";

/// One pod container as the engine shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    pub id: String,
    pub started_at: String,
    pub running: bool,
}

/// The containers of `node`'s pods (not their sandboxes), by pod uid; of
/// several attempts, the running one (else the last listed).
pub fn pod_containers(node: &str) -> crate::Result<BTreeMap<String, Running>> {
    let format = format!("{{{{.ID}}}} {{{{.Label \"{LABEL_POD_UID}\"}}}}");
    let node_filter = format!("label={LABEL_NODE}={node}");
    let role_filter = format!("label={LABEL_ROLE}=container");
    let out = docker(&[
        "ps",
        "-a",
        "--no-trunc",
        "--filter",
        &node_filter,
        "--filter",
        &role_filter,
        "--format",
        &format,
    ])?;
    let mut by_uid: BTreeMap<String, Running> = BTreeMap::new();
    for line in out.lines() {
        let Some((id, uid)) = line.split_once(' ') else {
            continue;
        };
        // Gone between the list and the inspect: not running.
        let state = docker(&[
            "inspect",
            "-f",
            "{{.State.StartedAt}} {{.State.Running}}",
            id,
        ])
        .unwrap_or_default();
        let (started_at, running) = state.split_once(' ').unwrap_or(("", "false"));
        let c = Running {
            id: id.to_string(),
            started_at: started_at.to_string(),
            running: running == "true",
        };
        let keep = by_uid.get(uid).is_none_or(|old| !old.running || c.running);
        if keep {
            by_uid.insert(uid.to_string(), c);
        }
    }
    Ok(by_uid)
}

/// What the check saw over a run.
#[derive(Debug, Clone, Default)]
pub struct Kept {
    /// Faults that hit a Docker node (its agent cut, killed or frozen).
    pub faults: usize,
    /// Containers running before such a fault, checked after convergence.
    pub checked: usize,
    /// Of those, the same container, never restarted, still running.
    pub kept: usize,
    /// Of those, containers whose pod was deleted meanwhile (a rolling
    /// update): gone for a reason.
    pub replaced: usize,
    /// Containers no longer running when the fault was healed, just before
    /// the agent was back (their pod had been deleted just before the
    /// fault; a live pod's would be a violation after convergence).
    pub stopped_while_away: usize,
}

/// Compares the containers `before` a fault on a Docker node with those
/// just before the heal (`at_heal`) and after convergence (`after`): a pod
/// still there must run the very same container, started at the same time
/// (kept running while its agent was away, not restarted when it came
/// back). Violations are described in the returned list.
pub fn compare(
    node: &str,
    before: &BTreeMap<String, Running>,
    at_heal: &BTreeMap<String, Running>,
    after: &BTreeMap<String, Running>,
    kept: &mut Kept,
) -> Vec<String> {
    let mut out = Vec::new();
    for (uid, b) in before.iter().filter(|(_, b)| b.running) {
        kept.checked += 1;
        let away = at_heal.get(uid).is_some_and(|h| h.id == b.id && h.running);
        if !away {
            kept.stopped_while_away += 1;
        }
        match after.get(uid) {
            Some(a) if a.running && a.id == b.id && a.started_at == b.started_at => kept.kept += 1,
            Some(a) if a.running => out.push(format!(
                "{node}: pod {uid} was restarted{}: container {} started {} became {} started {}",
                if away {
                    " when its agent came back"
                } else {
                    " (its container stopped while its agent was away)"
                },
                short(&b.id),
                b.started_at,
                short(&a.id),
                a.started_at
            )),
            // Its pod was deleted meanwhile (a rolling update): stopped for
            // a reason.
            _ => kept.replaced += 1,
        }
    }
    out
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// Removes the pod containers of `node` (the engine is shared: the agent's
/// own cleanup does not run when its container is removed).
pub fn remove_pods_of(node: &str) {
    let filter = format!("label={LABEL_NODE}={node}");
    if let Ok(ids) = docker(&["ps", "-a", "-q", "--filter", &filter]) {
        let ids: Vec<&str> = ids.split_whitespace().collect();
        if !ids.is_empty() {
            let mut args = vec!["rm", "-f", "-v"];
            args.extend(ids);
            let _ = docker(&args);
        }
    }
}

/// Removes the pod containers of testbed nodes (`tb-…`) whose agent
/// container is gone: what a run that died left on the engine.
pub fn remove_orphaned_pods() {
    let format = format!("{{{{.Label \"{LABEL_NODE}\"}}}}");
    let filter = format!("label={LABEL_NODE}");
    let Ok(out) = docker(&["ps", "-a", "--filter", &filter, "--format", &format]) else {
        return;
    };
    let mut nodes: Vec<&str> = out.lines().filter(|n| n.starts_with("tb-")).collect();
    nodes.sort();
    nodes.dedup();
    for node in nodes {
        let name = format!("name=^{node}$");
        let alive = docker(&["ps", "-a", "-q", "--filter", &name]).unwrap_or_default();
        if alive.is_empty() {
            remove_pods_of(node);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: &str, started: &str, running: bool) -> Running {
        Running {
            id: id.into(),
            started_at: started.into(),
            running,
        }
    }

    #[test]
    fn a_restart_a_stop_and_a_replacement_are_told_apart() {
        let before: BTreeMap<String, Running> = [
            ("kept".to_string(), c("a", "t0", true)),
            ("restarted".to_string(), c("b", "t0", true)),
            ("replaced".to_string(), c("d", "t0", true)),
            ("stopped".to_string(), c("e", "t0", true)),
            ("was-not-running".to_string(), c("f", "t0", false)),
        ]
        .into();
        let mut at_heal = before.clone();
        at_heal.insert("stopped".into(), c("e", "t0", false));
        let after: BTreeMap<String, Running> = [
            ("kept".to_string(), c("a", "t0", true)),
            ("restarted".to_string(), c("b2", "t1", true)),
            ("replaced".to_string(), c("d", "t0", false)),
            ("stopped".to_string(), c("e2", "t2", true)),
        ]
        .into();
        let mut kept = Kept::default();
        let v = compare("n", &before, &at_heal, &after, &mut kept);
        assert_eq!(
            (
                kept.checked,
                kept.kept,
                kept.replaced,
                kept.stopped_while_away
            ),
            (4, 1, 1, 1)
        );
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(
            v[0].contains("pod restarted was restarted when its agent came back"),
            "{v:?}"
        );
        assert!(
            v[1].contains(
                "pod stopped was restarted (its container stopped while its agent was away)"
            ),
            "{v:?}"
        );
        // The same container restarted in place (`docker restart`): a new
        // start time.
        let only: BTreeMap<String, Running> = [("kept".to_string(), c("a", "t0", true))].into();
        let after: BTreeMap<String, Running> = [("kept".to_string(), c("a", "t9", true))].into();
        let v = compare("n", &only, &only, &after, &mut Kept::default());
        assert_eq!(v.len(), 1, "{v:?}");
    }
}
