//! `describe ds NAME`: kubectl's layout, then what kubectl does not say:
//! the rollout's progress with the nodes it waits for, and every node that
//! has no pod of the DaemonSet and why (computed in [`super::explain`]).

use super::explain::{nodes_without_pod, owned_by, rollout_waiting};
use super::layout::{annotations_multiline, events, events_for, labels_multiline, W};
use super::pod_template::pod_template;
use crate::printers::{format_labels, format_selector};
use drover_api::{ControllerRevision, DaemonSet, Event, Node, Pod, PodPhase};
use drover_controller::daemon::pods::CONTROLLER_REVISION_HASH_LABEL;
use std::time::SystemTime;

/// At most this many waiting nodes are listed by `describe ds`.
const ROLLOUT_LINES: usize = 20;

fn rollout_section(
    w: &mut W,
    ds: &DaemonSet,
    pods: &[Pod],
    nodes: &[Node],
    revisions: &[ControllerRevision],
) {
    let Some(current) = revisions
        .iter()
        .filter(|r| {
            r.metadata
                .controller_ref()
                .is_some_and(|o| o.uid == ds.metadata.uid)
        })
        .max_by_key(|r| r.revision)
    else {
        return;
    };
    let Some(hash) = current.metadata.labels.get(CONTROLLER_REVISION_HASH_LABEL) else {
        return;
    };
    let st = &ds.status;
    let waiting = rollout_waiting(ds, hash, pods, nodes);
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
            "Rollout:\trevision {} ({hash}), {progress}\n",
            current.revision
        ),
    );
    if waiting.is_empty() {
        return;
    }
    w.flush();
    w.w(1, "Node\tWaiting for\n");
    w.w(1, "----\t-----------\n");
    for (node, why) in waiting.iter().take(ROLLOUT_LINES) {
        w.w(1, format!("{node}\t{why}\n"));
    }
    if waiting.len() > ROLLOUT_LINES {
        w.w(1, format!("… and {} more\n", waiting.len() - ROLLOUT_LINES));
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
    let owned: Vec<&Pod> = pods.iter().filter(|p| owned_by(p, ds)).collect();
    let count = |phase: PodPhase| {
        owned
            .iter()
            .filter(|p| p.status.phase.as_ref() == Some(&phase))
            .count()
    };
    let waiting = owned
        .iter()
        .filter(|p| matches!(p.status.phase, None | Some(PodPhase::Pending)))
        .count();
    w.w(
        0,
        format!(
            "Pods Status:\t{} Running / {waiting} Waiting / {} Succeeded / {} Failed\n",
            count(PodPhase::Running),
            count(PodPhase::Succeeded),
            count(PodPhase::Failed)
        ),
    );
    pod_template(&mut w, &ds.spec.template);
    rollout_section(&mut w, ds, pods, nodes, revisions);
    let without = nodes_without_pod(ds, pods, nodes);
    if without.is_empty() {
        w.w(0, "Nodes without a pod:\t<none>\n");
    } else {
        w.flush();
        w.w(0, "Nodes without a pod:\n  Node\tReason\n");
        w.w(1, "----\t------\n");
        for (node, reasons) in &without {
            for (i, r) in reasons.iter().enumerate() {
                let name = if i == 0 { node.as_str() } else { "" };
                w.w(1, format!("{name}\t{r}\n"));
            }
        }
    }
    let evs = events_for(all_events, "DaemonSet", &m.namespace, &m.name, &m.uid);
    events(&mut w, &evs, now);
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::describe::fixtures::*;

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

    #[test]
    fn no_events_and_no_missing_nodes() {
        let d = ds(GPU_DS);
        let text = describe_daemon_set(&d, &[], &[], &[], &[], now());
        assert!(
            text.contains("\nNodes without a pod:  <none>\nEvents:               <none>\n"),
            "{text}"
        );
    }
}
