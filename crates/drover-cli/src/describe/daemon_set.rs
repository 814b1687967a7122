//! `describe ds NAME`: kubectl's layout, then what kubectl does not say:
//! the rollout's progress with the nodes it waits for, and every node that
//! has no pod of the DaemonSet and why. Both, and the pods counted in
//! `Pods Status`, are the controller's own view
//! ([`drover_controller::daemon::explain()`]); this file only lays them out.

use super::layout::{annotations_multiline, events, events_for, labels_multiline, W};
use super::pod_template::pod_template;
use crate::printers::{format_labels, format_selector};
use drover_api::{ControllerRevision, DaemonSet, Event, Node, Pod};
use drover_controller::daemon::pods::CONTROLLER_REVISION_HASH_LABEL;
use drover_controller::daemon::{explain, Explanation, RolloutProgress};
use drover_controller::Timestamp;
use std::time::SystemTime;

/// At most this many waiting nodes are listed by `describe ds`.
const ROLLOUT_LINES: usize = 20;

/// The DaemonSet's current revision (the newest it controls) and its
/// `controller-revision-hash`, when it has one.
fn current_revision<'r>(
    ds: &DaemonSet,
    revisions: &'r [ControllerRevision],
) -> Option<(&'r ControllerRevision, &'r str)> {
    let current = revisions
        .iter()
        .filter(|r| {
            r.metadata
                .controller_ref()
                .is_some_and(|o| o.uid == ds.metadata.uid)
        })
        .max_by_key(|r| r.revision)?;
    let hash = current
        .metadata
        .labels
        .get(CONTROLLER_REVISION_HASH_LABEL)?;
    Some((current, hash))
}

fn rollout_section(w: &mut W, ds: &DaemonSet, revision: i64, rollout: &RolloutProgress) {
    let st = &ds.status;
    let waiting = &rollout.waiting;
    let progress = if waiting.is_empty() {
        "every node updated".to_owned()
    } else {
        format!(
            "{} of {} scheduled nodes updated, {} available",
            st.updated_number_scheduled, st.desired_number_scheduled, st.number_available
        )
    };
    w.w(
        0,
        format!(
            "Rollout:\trevision {revision} ({}), {progress}\n",
            rollout.hash
        ),
    );
    if waiting.is_empty() {
        return;
    }
    w.flush();
    w.w(1, "Node\tWaiting for\n");
    w.w(1, "----\t-----------\n");
    for wait in waiting.iter().take(ROLLOUT_LINES) {
        w.w(1, format!("{}\t{}\n", wait.node, wait.reason));
    }
    if waiting.len() > ROLLOUT_LINES {
        w.w(1, format!("… and {} more\n", waiting.len() - ROLLOUT_LINES));
    }
}

fn nodes_without_pod_section(w: &mut W, explained: &Explanation<'_>) {
    let without = &explained.nodes_without_pod;
    if without.is_empty() {
        w.w(0, "Nodes without a pod:\t<none>\n");
        return;
    }
    w.flush();
    w.w(0, "Nodes without a pod:\n  Node\tReason\n");
    w.w(1, "----\t------\n");
    for node in without {
        for (i, r) in node.why.lines().iter().enumerate() {
            let name = if i == 0 { node.node.as_str() } else { "" };
            w.w(1, format!("{name}\t{r}\n"));
        }
    }
}

/// `describe ds NAME`.
pub fn describe_daemon_set(
    ds: &DaemonSet,
    pods: &[Pod],
    nodes: &[Node],
    revisions: &[ControllerRevision],
    all_events: &[Event],
    now: SystemTime,
) -> String {
    let revision = current_revision(ds, revisions);
    let explained = explain(
        ds,
        nodes,
        pods,
        revision.map(|(_, hash)| hash),
        Timestamp::from(now),
    );
    let mut w = W::default();
    let m = &ds.metadata;
    w.w(0, format!("Name:\t{}\n", m.name));
    w.w(0, format!("Namespace:\t{}\n", m.namespace));
    w.w(0, format!("Selector:\t{}\n", format_selector(ds)));
    w.w(
        0,
        format!(
            "Node-Selector:\t{}\n",
            format_labels(&ds.spec.template.spec.node_selector)
        ),
    );
    labels_multiline(&mut w, "Labels", &m.labels);
    annotations_multiline(&mut w, "Annotations", &m.annotations);
    let st = &ds.status;
    w.w(
        0,
        format!(
            "Desired Number of Nodes Scheduled: {}\n",
            st.desired_number_scheduled
        ),
    );
    w.w(
        0,
        format!(
            "Current Number of Nodes Scheduled: {}\n",
            st.current_number_scheduled
        ),
    );
    w.w(
        0,
        format!(
            "Number of Nodes Scheduled with Up-to-date Pods: {}\n",
            st.updated_number_scheduled
        ),
    );
    w.w(
        0,
        format!(
            "Number of Nodes Scheduled with Available Pods: {}\n",
            st.number_available
        ),
    );
    w.w(
        0,
        format!("Number of Nodes Misscheduled: {}\n", st.number_misscheduled),
    );
    let phases = explained.phases();
    w.w(
        0,
        format!(
            "Pods Status:\t{} Running / {} Waiting / {} Succeeded / {} Failed\n",
            phases.running, phases.waiting, phases.succeeded, phases.failed
        ),
    );
    pod_template(&mut w, &ds.spec.template);
    if let (Some((current, _)), Some(rollout)) = (revision, &explained.rollout) {
        rollout_section(&mut w, ds, current.revision, rollout);
    }
    nodes_without_pod_section(&mut w, &explained);
    let evs = events_for(all_events, "DaemonSet", &m.namespace, &m.name, &m.uid);
    events(&mut w, &evs, now);
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::describe::fixtures::*;
    use drover_controller::daemon::NoPod;

    /// Why `describe ds` lists `node` without a pod (the node alone, no
    /// pods): the controller's reasons, empty when the node should run one.
    fn why_not(d: &DaemonSet, node: &Node) -> Vec<String> {
        let explained = explain(d, [node], std::iter::empty(), None, now().into());
        match explained.nodes_without_pod.as_slice() {
            [only] if matches!(only.why, NoPod::Ineligible(_)) => only.why.lines(),
            _ => Vec::new(),
        }
    }

    /// The rows of `describe ds`'s "Nodes without a pod:": node, reasons.
    fn nodes_without_pod(
        d: &DaemonSet,
        pods: &[Pod],
        nodes: &[Node],
    ) -> Vec<(String, Vec<String>)> {
        explain(d, nodes, pods, None, now().into())
            .nodes_without_pod
            .iter()
            .map(|n| (n.node.clone(), n.why.lines()))
            .collect()
    }

    #[test]
    fn daemon_set_layout() {
        let d = ds(GPU_DS);
        let nodes = vec![n("n1", FITS, "{}", READY), n("n2", "{}", "{}", READY)];
        let pods = vec![
            daemon_pod("master-agent-1", "n1", "Running"),
            daemon_pod("master-agent-2", "n1", "Pending"),
        ];
        let evs = vec![
            event(
                r#"
apiVersion: v1
kind: Event
metadata: {name: e2, namespace: default}
involvedObject: {kind: DaemonSet, name: master-agent, namespace: default, uid: ds-uid}
reason: SuccessfulCreate
message: "Created pod: master-agent-2"
type: Normal
source: {component: daemonset-controller}
firstTimestamp: "2024-05-03T15:59:00Z"
"#,
            ),
            event(
                r#"
apiVersion: v1
kind: Event
metadata: {name: e1, namespace: default}
involvedObject: {kind: DaemonSet, name: master-agent, namespace: default, uid: ds-uid}
reason: SuccessfulCreate
message: "Created pod: master-agent-1"
type: Normal
source: {component: daemonset-controller}
firstTimestamp: "2024-05-03T15:50:00Z"
lastTimestamp: "2024-05-03T15:58:00Z"
count: 2
"#,
            ),
            event(
                r#"
apiVersion: v1
kind: Event
metadata: {name: other, namespace: default}
involvedObject: {kind: DaemonSet, name: someone-else, namespace: default}
reason: X
type: Normal
"#,
            ),
        ];
        let text = describe_daemon_set(&d, &pods, &nodes, &[], &evs, now());
        let want = "\
Name:           master-agent
Namespace:      default
Selector:       app=master-agent
Node-Selector:  node-type=monitoring
Labels:         team=infra
Annotations:    note: hello
Desired Number of Nodes Scheduled: 1
Current Number of Nodes Scheduled: 1
Number of Nodes Scheduled with Up-to-date Pods: 1
Number of Nodes Scheduled with Available Pods: 1
Number of Nodes Misscheduled: 0
Pods Status:  1 Running / 1 Waiting / 0 Succeeded / 0 Failed
Pod Template:
  Labels:  app=master-agent
  Containers:
   monitoring-agent:
    Image:      prom/node-exporter:latest
    Port:       9100/TCP
    Host Port:  0/TCP
    Limits:
      memory:  200Mi
    Requests:
      cpu:     100m
      memory:  200Mi
    Environment:
      NODE:   (v1:spec.nodeName)
    Mounts:
      /var/log from varlog (rw)
  Volumes:
   varlog:
    Type:          HostPath (bare host directory volume)
    Path:          /var/log
    HostPathType:  
  Node-Selectors:  node-type=monitoring
  Tolerations:     dedicated=monitoring:NoSchedule
Nodes without a pod:
  Node  Reason
  ----  ------
  n2    nodeSelector requires node-type=monitoring, but the node has no label node-type
        no term of the required node affinity matches: term 0: matchExpressions[0] (node-role.kubernetes.io/master Exists): the node has no label node-role.kubernetes.io/master
Events:
  Type    Reason            Age               From                  Message
  ----    ------            ----              ----                  -------
  Normal  SuccessfulCreate  2m (x2 over 10m)  daemonset-controller  Created pod: master-agent-1
  Normal  SuccessfulCreate  60s               daemonset-controller  Created pod: master-agent-2
";
        assert_eq!(text, want, "\n{text}");
    }

    /// A pod of `GPU_DS` of revision `hash` on `node`, Ready (since
    /// `ready_since`) or not.
    fn revision_pod(name: &str, node: &str, hash: &str, ready_since: Option<&str>) -> Pod {
        let mut p = daemon_pod(name, node, "Running");
        p.metadata
            .labels
            .insert(CONTROLLER_REVISION_HASH_LABEL.into(), hash.into());
        let ready = match ready_since {
            Some(t) => format!("{{type: Ready, status: \"True\", lastTransitionTime: \"{t}\"}}"),
            None => "{type: Ready, status: \"False\"}".to_owned(),
        };
        p.status = pod(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: x}}\nstatus: {{phase: Running, conditions: [{ready}]}}\n"
        ))
        .status;
        p
    }

    /// The rollout section and `Pods Status` are the controller's view: its
    /// reasons (a new pod not available yet under `minReadySeconds`
    /// included) and its claim (a pod whose controller reference has no uid,
    /// or another one, is not the DaemonSet's).
    #[test]
    fn rollout_waits_and_pods_are_the_controllers() {
        let mut d = ds(GPU_DS);
        d.spec.min_ready_seconds = Some(60);
        d.status.desired_number_scheduled = 4;
        d.status.updated_number_scheduled = 2;
        d.status.number_available = 1;
        let not_ready = r#"{conditions: [{type: Ready, status: Unknown}]}"#;
        let nodes = vec![
            n("n1", FITS, "{}", READY),
            n("n2", FITS, "{}", READY),
            n("n3", FITS, "{}", READY),
            n("n4", FITS, "{}", not_ready),
        ];
        let mut crashing = revision_pod("master-agent-b", "n2", "new", None);
        crashing.status.container_statuses = pod(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nstatus: {containerStatuses: [{name: monitoring-agent, state: {waiting: {reason: CrashLoopBackOff}}}]}\n",
        )
        .status
        .container_statuses;
        let mut no_uid = revision_pod("master-agent-e", "n3", "old", None);
        no_uid.metadata.owner_references[0].uid.clear();
        let mut namesake = revision_pod("master-agent-f", "n3", "old", None);
        namesake.metadata.owner_references[0].uid = "old-uid".into();
        let pods = vec![
            revision_pod("master-agent-a", "n1", "new", Some("2024-05-03T15:59:30Z")),
            crashing,
            revision_pod("master-agent-c", "n3", "old", Some("2024-05-03T15:00:00Z")),
            revision_pod("master-agent-d", "n4", "old", Some("2024-05-03T15:00:00Z")),
            no_uid,
            namesake,
        ];
        let revisions = parse(
            r#"
apiVersion: apps/v1
kind: ControllerRevision
metadata:
  name: master-agent-new
  namespace: default
  labels: {controller-revision-hash: new}
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: master-agent, uid: ds-uid, controller: true}]
revision: 2
---
apiVersion: apps/v1
kind: ControllerRevision
metadata:
  name: master-agent-old
  namespace: default
  labels: {controller-revision-hash: old}
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: master-agent, uid: ds-uid, controller: true}]
revision: 1
"#,
        )
        .into_iter()
        .map(|m| match m {
            drover_api::Manifest::ControllerRevision(r) => *r,
            _ => panic!(),
        })
        .collect::<Vec<_>>();
        let text = describe_daemon_set(&d, &pods, &nodes, &revisions, &[], now());
        assert!(
            text.contains("\nPods Status:  4 Running / 0 Waiting / 0 Succeeded / 0 Failed\n"),
            "{text}"
        );
        let rollout = text
            .split("\nRollout:")
            .nth(1)
            .and_then(|t| t.split("\nNodes without a pod:").next())
            .unwrap_or_default();
        // The table shares its tab block with "Nodes without a pod:" below.
        let want = "           revision 2 (new), 2 of 4 scheduled nodes updated, 1 available
  Node                Waiting for
  ----                -----------
  n1                  new pod master-agent-a ready since 2024-05-03T15:59:30Z, available after minReadySeconds (60s)
  n2                  new pod master-agent-b not ready (CrashLoopBackOff)
  n3                  old pod master-agent-c replaced in turn (maxUnavailable/maxSurge)
  n4                  node not Ready, updated when it is back";
        assert_eq!(rollout, want, "\n{text}");
        assert!(text.contains("\nNodes without a pod:  <none>\n"), "{text}");
    }

    #[test]
    fn no_events_and_no_missing_nodes() {
        let d = ds(GPU_DS);
        let text = describe_daemon_set(&d, &[], &[], &[], &[], now());
        assert!(
            text.contains("\nNodes without a pod:  <none>\nEvents:               <none>\n"),
            "{text}"
        );
    }

    #[test]
    fn why_not_explains_selector_affinity_and_taints() {
        let d = ds(GPU_DS);
        assert!(why_not(&d, &n("ok", FITS, "{}", READY)).is_empty());
        // Tolerated taint, and cordon (the daemon pod tolerates unschedulable).
        let ok = n("ok2", FITS, "{unschedulable: true, taints: [{key: dedicated, value: monitoring, effect: NoSchedule}, {key: node.kubernetes.io/unschedulable, effect: NoSchedule}]}", READY);
        assert!(why_not(&d, &ok).is_empty(), "{:?}", why_not(&d, &ok));
        let bare = n("bare", "{}", "{}", READY);
        assert_eq!(
            why_not(&d, &bare),
            [
                "nodeSelector requires node-type=monitoring, but the node has no label node-type",
                "no term of the required node affinity matches: term 0: matchExpressions[0] (node-role.kubernetes.io/master Exists): the node has no label node-role.kubernetes.io/master",
            ]
        );
        let wrong = n(
            "wrong",
            "{node-role.kubernetes.io/master: '', node-type: gpu}",
            "{}",
            READY,
        );
        assert_eq!(
            why_not(&d, &wrong),
            ["nodeSelector requires node-type=monitoring, but the node has node-type=gpu"]
        );
        let tainted = n(
            "tainted",
            FITS,
            "{taints: [{key: dedicated, value: gpu, effect: NoSchedule}, {key: x, effect: NoExecute}, {key: soft, effect: PreferNoSchedule}, {key: node.kubernetes.io/unreachable, effect: NoExecute}, {key: node.kubernetes.io/unreachable, effect: NoSchedule}]}",
            r#"{conditions: [{type: Ready, status: Unknown, reason: NodeStatusUnknown}]}"#,
        );
        assert_eq!(
            why_not(&d, &tainted),
            [
                "taint dedicated=gpu:NoSchedule is not tolerated",
                "taint x:NoExecute is not tolerated",
                "the node is unreachable: taint node.kubernetes.io/unreachable:NoSchedule is not tolerated",
            ]
        );
        // Readiness counts through the lifecycle controller's taints only.
        let sick = n(
            "sick",
            FITS,
            "{}",
            r#"{conditions: [{type: Ready, status: "False", message: disk full}]}"#,
        );
        assert!(why_not(&d, &sick).is_empty());
    }

    #[test]
    fn hostnetwork_daemons_tolerate_network_unavailable() {
        let mut d = ds(GPU_DS);
        let nn = n(
            "nn",
            FITS,
            "{taints: [{key: node.kubernetes.io/network-unavailable, effect: NoSchedule}]}",
            READY,
        );
        assert_eq!(
            why_not(&d, &nn),
            ["the node's network is unavailable: taint node.kubernetes.io/network-unavailable:NoSchedule is not tolerated"]
        );
        d.spec.template.spec.host_network = true;
        assert!(why_not(&d, &nn).is_empty());
    }

    #[test]
    fn nodes_without_a_pod() {
        let d = ds(GPU_DS);
        let nodes = vec![
            n("b-bare", "{}", "{}", READY),
            n("a-has", FITS, "{}", READY),
            n("c-eligible", FITS, "{}", READY),
        ];
        let mut other = daemon_pod("x", "c-eligible", "Running");
        other.metadata.owner_references[0].uid = "someone-else".into();
        let pods = vec![daemon_pod("master-agent-1", "a-has", "Running"), other];
        let w = nodes_without_pod(&d, &pods, &nodes);
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].0, "b-bare");
        assert_eq!(w[0].1.len(), 2);
        assert_eq!(
            w[1],
            (
                "c-eligible".to_string(),
                vec!["eligible: the DaemonSet controller has not created its pod yet".to_string()]
            )
        );
    }
}
