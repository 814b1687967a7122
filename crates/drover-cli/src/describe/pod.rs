//! `describe pod NAME`.

use super::layout::{
    annotations_multiline, events, events_for, labels_multiline, tolerations_multiline, W,
};
use super::pending::Waiting;
use super::pod_template::{containers, volumes};
use crate::timefmt::{age, describe_time};
use drover_api::{Event, Pod, PodPhase, PodSpec};
use std::time::SystemTime;

/// Kubernetes' QoS class of a pod: BestEffort (no requests or limits),
/// Guaranteed (cpu and memory limits everywhere, requests equal), else
/// Burstable.
pub fn qos_class(spec: &PodSpec) -> &'static str {
    let cs = &spec.containers;
    let any = cs
        .iter()
        .any(|c| !c.resources.requests.is_empty() || !c.resources.limits.is_empty());
    if !any {
        return "BestEffort";
    }
    let guaranteed = cs.iter().all(|c| {
        ["cpu", "memory"].iter().all(|r| {
            let limit = c.resources.limits.get(*r);
            let request = c.resources.requests.get(*r);
            match (limit, request) {
                (Some(l), Some(q)) => l.to_nanos().ok() == q.to_nanos().ok(),
                (Some(_), None) => true,
                _ => false,
            }
        })
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// `describe pod NAME`; `waiting` says why an unbound pod waits
/// ([`super::pending::waiting`]).
pub fn describe_pod(
    p: &Pod,
    all_events: &[Event],
    waiting: Option<&Waiting>,
    now: SystemTime,
) -> String {
    let mut w = W::default();
    let m = &p.metadata;
    w.w(0, format!("Name:\t{}\n", m.name));
    w.w(0, format!("Namespace:\t{}\n", m.namespace));
    if !p.spec.priority_class_name.is_empty() {
        w.w(
            0,
            format!("Priority Class Name:\t{}\n", p.spec.priority_class_name),
        );
    }
    if !p.spec.service_account_name.is_empty() {
        w.w(
            0,
            format!("Service Account:\t{}\n", p.spec.service_account_name),
        );
    }
    if p.spec.node_name.is_empty() {
        w.w(0, "Node:\t<none>\n");
    } else {
        w.w(
            0,
            format!("Node:\t{}/{}\n", p.spec.node_name, p.status.host_ip),
        );
    }
    if let Some(t) = &p.status.start_time {
        w.w(0, format!("Start Time:\t{}\n", describe_time(Some(t))));
    }
    labels_multiline(&mut w, "Labels", &m.labels);
    annotations_multiline(&mut w, "Annotations", &m.annotations);
    let phase = p.status.phase.as_ref().map(|x| x.as_str()).unwrap_or("");
    let terminal = matches!(
        p.status.phase,
        Some(PodPhase::Failed) | Some(PodPhase::Succeeded)
    );
    if let (Some(del), false) = (&m.deletion_timestamp, terminal) {
        w.w(
            0,
            format!("Status:\tTerminating (lasts {})\n", age(Some(del), now)),
        );
        if let Some(g) = m.deletion_grace_period_seconds {
            w.w(0, format!("Termination Grace Period:\t{g}s\n"));
        }
    } else {
        w.w(0, format!("Status:\t{phase}\n"));
    }
    if !p.status.reason.is_empty() {
        w.w(0, format!("Reason:\t{}\n", p.status.reason));
    }
    if !p.status.message.is_empty() {
        w.w(0, format!("Message:\t{}\n", p.status.message));
    }
    w.w(0, format!("IP:\t{}\n", p.status.pod_ip));
    if p.status.pod_ip.is_empty() {
        w.w(0, "IPs:\t<none>\n");
    } else {
        w.w(0, "IPs:\n");
        w.w(1, format!("IP:\t{}\n", p.status.pod_ip));
    }
    if let Some(r) = m.controller_ref() {
        w.w(0, format!("Controlled By:\t{}/{}\n", r.kind, r.name));
    }
    containers(&mut w, &p.spec.containers, Some(p), "");
    if !p.status.conditions.is_empty() {
        w.w(0, "Conditions:\n  Type\tStatus\n");
        for c in &p.status.conditions {
            let s = c.status.as_ref().map(|x| x.as_str()).unwrap_or("");
            w.w(1, format!("{} \t{s} \n", c.r#type));
        }
    }
    volumes(&mut w, &p.spec.volumes, "");
    w.w(0, format!("QoS Class:\t{}\n", qos_class(&p.spec)));
    labels_multiline(&mut w, "Node-Selectors", &p.spec.node_selector);
    tolerations_multiline(&mut w, "Tolerations", &p.spec.tolerations);
    if let Some(waiting) = waiting {
        super::pending::section(&mut w, waiting);
    }
    let evs = events_for(all_events, "Pod", &m.namespace, &m.name, &m.uid);
    events(&mut w, &evs, now);
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::describe::fixtures::*;

    #[test]
    fn pod_layout() {
        let p = pod(r#"
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
  labels: {app: web}
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: web, uid: u, controller: true}]
spec:
  nodeName: n1
  containers:
  - name: app
    image: nginx:alpine
    command: [nginx, -g, daemon off;]
    readinessProbe: {httpGet: {path: /healthz, port: 8080}}
  tolerations: [{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 300}, {operator: Exists}]
status:
  phase: Running
  hostIP: 10.0.0.1
  podIP: 10.1.0.7
  startTime: "2024-05-03T15:00:00Z"
  conditions: [{type: Ready, status: "True"}, {type: PodScheduled, status: "True"}]
  containerStatuses:
  - name: app
    ready: true
    restartCount: 1
    image: nginx:alpine
    imageID: sim://nginx
    containerID: sim://abc
    state: {running: {startedAt: "2024-05-03T15:01:00Z"}}
    lastState: {terminated: {exitCode: 1, reason: Error, startedAt: "2024-05-03T15:00:10Z", finishedAt: "2024-05-03T15:00:50Z"}}
"#);
        let text = describe_pod(&p, &[], None, now());
        // Go's tabwriter: a line without a tab ("IPs:", "Command:") ends an
        // alignment block, as in kubectl's own output.
        let want = "\
Name:         web
Namespace:    default
Node:         n1/10.0.0.1
Start Time:   Fri, 03 May 2024 15:00:00 +0000
Labels:       app=web
Annotations:  <none>
Status:       Running
IP:           10.1.0.7
IPs:
  IP:           10.1.0.7
Controlled By:  DaemonSet/web
Containers:
  app:
    Container ID:  sim://abc
    Image:         nginx:alpine
    Image ID:      sim://nginx
    Port:          <none>
    Host Port:     <none>
    Command:
      nginx
      -g
      daemon off;
    State:          Running
      Started:      Fri, 03 May 2024 15:01:00 +0000
    Last State:     Terminated
      Reason:       Error
      Exit Code:    1
      Started:      Fri, 03 May 2024 15:00:10 +0000
      Finished:     Fri, 03 May 2024 15:00:50 +0000
    Ready:          True
    Restart Count:  1
    Readiness:      http-get http://:8080/healthz delay=0s timeout=1s period=10s successThreshold=1 failureThreshold=3
    Environment:    <none>
    Mounts:         <none>
Conditions:
  Type           Status
  Ready          True 
  PodScheduled   True 
Volumes:         <none>
QoS Class:       BestEffort
Node-Selectors:  <none>
Tolerations:     op=Exists
                 node.kubernetes.io/not-ready:NoExecute op=Exists for 300s
Events:          <none>
";
        assert_eq!(text, want, "\n{text}");
    }
}
