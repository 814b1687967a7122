//! `describe deploy NAME` and `describe rs NAME`, as kubectl's
//! `DeploymentDescriber` and `ReplicaSetDescriber` print them: replicas,
//! strategy, the pod template, conditions, the old and new ReplicaSets
//! (a Deployment), the pods by phase (a ReplicaSet), events.

use super::layout::{annotations_multiline, events, events_for, labels_multiline, W};
use super::pod_template::pod_template;
use drover_api::columns::format_label_selector;
use drover_api::timefmt::describe_time;
use drover_api::{ConditionStatus, Deployment, Event, Pod, PodPhase, ReplicaSet};
use drover_controller::deployment::view::{new_replica_set, old_replica_sets, owned};
use std::time::SystemTime;

/// `Type \tStatus\tReason` rows of conditions, as both describers print them.
fn conditions<'a>(
    w: &mut W,
    rows: impl Iterator<Item = (&'a str, Option<&'a ConditionStatus>, &'a str)>,
) {
    let rows: Vec<_> = rows.collect();
    if rows.is_empty() {
        return;
    }
    w.w(0, "Conditions:\n  Type\tStatus\tReason\n");
    w.w(1, "----\t------\t------\n");
    for (t, status, reason) in rows {
        let status = status.map_or("", |s| s.as_str());
        w.w(1, format!("{t} \t{status}\t{reason}\n"));
    }
}

/// kubectl's `printReplicaSetsByLabels`: `name (current/desired replicas
/// created)`, comma-separated, `<none>` when there are none.
fn replica_sets_line(sets: &[&ReplicaSet]) -> String {
    if sets.is_empty() {
        return "<none>".into();
    }
    sets.iter()
        .map(|rs| {
            format!(
                "{} ({}/{} replicas created)",
                rs.metadata.name,
                rs.status.replicas,
                rs.spec.replicas.unwrap_or(1)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `describe deploy NAME`: `replica_sets` are the namespace's (those the
/// Deployment controls are picked by owner reference), `all_events` the
/// namespace's events.
pub fn describe_deployment(
    d: &Deployment,
    replica_sets: &[ReplicaSet],
    all_events: &[Event],
    now: SystemTime,
) -> String {
    let mut w = W::default();
    let m = &d.metadata;
    let s = &d.status;
    w.w(0, format!("Name:\t{}\n", m.name));
    w.w(0, format!("Namespace:\t{}\n", m.namespace));
    w.w(
        0,
        format!(
            "CreationTimestamp:\t{}\n",
            describe_time(m.creation_timestamp.as_deref())
        ),
    );
    labels_multiline(&mut w, "Labels", &m.labels);
    annotations_multiline(&mut w, "Annotations", &m.annotations);
    w.w(
        0,
        format!(
            "Selector:\t{}\n",
            format_label_selector(d.spec.selector.as_ref())
        ),
    );
    w.w(
        0,
        format!(
            "Replicas:\t{} desired | {} updated | {} total | {} available | {} unavailable\n",
            d.spec.replicas.unwrap_or(1),
            s.updated_replicas,
            s.replicas,
            s.available_replicas,
            s.unavailable_replicas
        ),
    );
    let strategy = d.spec.strategy.r#type.as_ref().map_or("", |t| t.as_str());
    w.w(0, format!("StrategyType:\t{strategy}\n"));
    w.w(
        0,
        format!(
            "MinReadySeconds:\t{}\n",
            d.spec.min_ready_seconds.unwrap_or(0)
        ),
    );
    if let Some(ru) = &d.spec.strategy.rolling_update {
        let text = |v: &Option<drover_api::IntOrString>| {
            v.as_ref().map_or_else(|| "0".to_owned(), |v| v.to_string())
        };
        w.w(
            0,
            format!(
                "RollingUpdateStrategy:\t{} max unavailable, {} max surge\n",
                text(&ru.max_unavailable),
                text(&ru.max_surge)
            ),
        );
    }
    pod_template(&mut w, &d.spec.template);
    let rows = s.conditions.iter();
    conditions(
        &mut w,
        rows.map(|c| (c.r#type.as_str(), c.status.as_ref(), c.reason.as_str())),
    );
    let owned = owned(d, replica_sets);
    let new = new_replica_set(d, &owned);
    let old = old_replica_sets(d, &owned);
    if new.is_some() || !old.is_empty() {
        w.w(0, format!("OldReplicaSets:\t{}\n", replica_sets_line(&old)));
        let new: Vec<&ReplicaSet> = new.into_iter().collect();
        w.w(0, format!("NewReplicaSet:\t{}\n", replica_sets_line(&new)));
    }
    let evs = events_for(all_events, "Deployment", &m.namespace, &m.name, &m.uid);
    events(&mut w, &evs, now);
    w.finish()
}

/// `describe rs NAME`: `pods` are the namespace's (those the ReplicaSet
/// controls are counted by owner reference), `all_events` the namespace's.
pub fn describe_replica_set(
    rs: &ReplicaSet,
    pods: &[Pod],
    all_events: &[Event],
    now: SystemTime,
) -> String {
    let mut w = W::default();
    let m = &rs.metadata;
    w.w(0, format!("Name:\t{}\n", m.name));
    w.w(0, format!("Namespace:\t{}\n", m.namespace));
    w.w(
        0,
        format!(
            "Selector:\t{}\n",
            format_label_selector(rs.spec.selector.as_ref())
        ),
    );
    labels_multiline(&mut w, "Labels", &m.labels);
    annotations_multiline(&mut w, "Annotations", &m.annotations);
    if let Some(owner) = m.controller_ref() {
        w.w(
            0,
            format!("Controlled By:\t{}/{}\n", owner.kind, owner.name),
        );
    }
    w.w(
        0,
        format!(
            "Replicas:\t{} current / {} desired\n",
            rs.status.replicas,
            rs.spec.replicas.unwrap_or(1)
        ),
    );
    let (mut running, mut waiting, mut succeeded, mut failed) = (0, 0, 0, 0);
    for p in pods.iter().filter(|p| {
        p.metadata.namespace == m.namespace
            && p.metadata.controller_ref().is_some_and(|o| o.uid == m.uid)
    }) {
        match p.status.phase {
            Some(PodPhase::Running) => running += 1,
            Some(PodPhase::Succeeded) => succeeded += 1,
            Some(PodPhase::Failed) => failed += 1,
            _ => waiting += 1,
        }
    }
    w.w(
        0,
        format!(
            "Pods Status:\t{running} Running / {waiting} Waiting / {succeeded} Succeeded / {failed} Failed\n"
        ),
    );
    pod_template(&mut w, &rs.spec.template);
    let rows = rs.status.conditions.iter();
    conditions(
        &mut w,
        rows.map(|c| (c.r#type.as_str(), c.status.as_ref(), c.reason.as_str())),
    );
    let evs = events_for(all_events, "ReplicaSet", &m.namespace, &m.name, &m.uid);
    events(&mut w, &evs, now);
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{event, now, parse, pod};
    use super::*;
    use drover_api::Manifest;

    const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  uid: d-uid
  creationTimestamp: "2024-05-03T15:00:00Z"
  labels: {app: web}
  annotations: {deployment.kubernetes.io/revision: "2"}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 25%, maxSurge: 25%}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: busybox, image: "local/busybox:2"}
status:
  replicas: 4
  updatedReplicas: 2
  readyReplicas: 3
  availableReplicas: 3
  unavailableReplicas: 1
  conditions:
  - {type: Available, status: "True", reason: MinimumReplicasAvailable}
  - {type: Progressing, status: "True", reason: ReplicaSetUpdated}
"#;

    fn replica_set(name: &str, image: &str, replicas: i32, current: i32) -> ReplicaSet {
        let yaml = format!(
            r#"
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: {name}
  namespace: default
  uid: {name}-uid
  creationTimestamp: "2024-05-03T15:00:00Z"
  labels: {{app: web, pod-template-hash: {name}}}
  ownerReferences: [{{apiVersion: apps/v1, kind: Deployment, name: web, uid: d-uid, controller: true}}]
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web, pod-template-hash: {name}}}}}
  template:
    metadata: {{labels: {{app: web, pod-template-hash: {name}}}}}
    spec:
      containers:
      - {{name: busybox, image: "{image}"}}
status: {{replicas: {current}, readyReplicas: {current}}}
"#
        );
        match parse(&yaml).remove(0) {
            Manifest::ReplicaSet(rs) => *rs,
            _ => panic!(),
        }
    }

    fn deployment() -> Deployment {
        match parse(DEPLOYMENT).remove(0) {
            Manifest::Deployment(d) => *d,
            _ => panic!(),
        }
    }

    #[test]
    fn a_deployment_as_kubectl_describes_it() {
        let sets = [
            replica_set("web-old", "local/busybox:1", 2, 2),
            replica_set("web-new", "local/busybox:2", 2, 2),
        ];
        let ev = event(
            r#"
apiVersion: v1
kind: Event
metadata: {name: web.1, namespace: default}
involvedObject: {kind: Deployment, name: web, namespace: default, uid: d-uid}
reason: ScalingReplicaSet
message: Scaled up replica set web-new to 2
type: Normal
source: {component: deployment-controller}
count: 1
firstTimestamp: "2024-05-03T15:59:00Z"
lastTimestamp: "2024-05-03T15:59:00Z"
"#,
        );
        let text = describe_deployment(&deployment(), &sets, &[ev], now());
        let want = "\
Name:                   web
Namespace:              default
CreationTimestamp:      Fri, 03 May 2024 15:00:00 +0000
Labels:                 app=web
Annotations:            deployment.kubernetes.io/revision: 2
Selector:               app=web
Replicas:               3 desired | 2 updated | 4 total | 3 available | 1 unavailable
StrategyType:           RollingUpdate
MinReadySeconds:        0
RollingUpdateStrategy:  25% max unavailable, 25% max surge
Pod Template:
  Labels:  app=web
  Containers:
   busybox:
    Image:         local/busybox:2
    Port:          <none>
    Host Port:     <none>
    Environment:   <none>
    Mounts:        <none>
  Volumes:         <none>
  Node-Selectors:  <none>
  Tolerations:     <none>
Conditions:
  Type           Status  Reason
  ----           ------  ------
  Available      True    MinimumReplicasAvailable
  Progressing    True    ReplicaSetUpdated
OldReplicaSets:  web-old (2/2 replicas created)
NewReplicaSet:   web-new (2/2 replicas created)
Events:
  Type    Reason             Age   From                   Message
  ----    ------             ----  ----                   -------
  Normal  ScalingReplicaSet  60s   deployment-controller  Scaled up replica set web-new to 2
";
        assert_eq!(text, want, "{text}");
        // Without ReplicaSets kubectl prints neither line.
        let bare = describe_deployment(&deployment(), &[], &[], now());
        assert!(!bare.contains("ReplicaSets:"), "{bare}");
        assert!(bare.ends_with("Events:         <none>\n"), "{bare}");
    }

    #[test]
    fn a_replica_set_as_kubectl_describes_it() {
        let rs = replica_set("web-new", "local/busybox:2", 3, 2);
        let mine = |name: &str, phase: &str| {
            pod(&format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: web-new, uid: web-new-uid, controller: true}}]}}\nspec: {{containers: [{{name: c, image: i}}]}}\nstatus: {{phase: {phase}}}\n"
            ))
        };
        let other = pod("apiVersion: v1\nkind: Pod\nmetadata: {name: o, namespace: default}\nspec: {containers: [{name: c, image: i}]}\nstatus: {phase: Running}\n");
        let pods = [mine("a", "Running"), mine("b", "Pending"), other];
        let text = describe_replica_set(&rs, &pods, &[], now());
        let head = "\
Name:           web-new
Namespace:      default
Selector:       app=web,pod-template-hash=web-new
Labels:         app=web
                pod-template-hash=web-new
Annotations:    <none>
Controlled By:  Deployment/web
Replicas:       2 current / 3 desired
Pods Status:    1 Running / 1 Waiting / 0 Succeeded / 0 Failed
Pod Template:
";
        assert!(text.starts_with(head), "{text}");
        assert!(text.ends_with("Events:            <none>\n"), "{text}");
    }
}
