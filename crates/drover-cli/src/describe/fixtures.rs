//! Objects the tests of `describe` share.

use drover_api::{parse_manifests, DaemonSet, Event, Manifest, Node, Pod};
use std::time::SystemTime;

pub(super) fn now() -> SystemTime {
    crate::timefmt::parse_time("2024-05-03T16:00:00Z").unwrap()
}

pub(super) fn parse(yaml: &str) -> Vec<Manifest> {
    parse_manifests(yaml).unwrap()
}

pub(super) fn ds(yaml: &str) -> DaemonSet {
    match parse(yaml).remove(0) {
        Manifest::DaemonSet(d) => *d,
        _ => panic!(),
    }
}

pub(super) fn node(yaml: &str) -> Node {
    match parse(yaml).remove(0) {
        Manifest::Node(n) => *n,
        _ => panic!(),
    }
}

pub(super) fn pod(yaml: &str) -> Pod {
    match parse(yaml).remove(0) {
        Manifest::Pod(p) => *p,
        _ => panic!(),
    }
}

pub(super) fn event(yaml: &str) -> Event {
    match parse(yaml).remove(0) {
        Manifest::Event(e) => *e,
        _ => panic!(),
    }
}

pub(super) const GPU_DS: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: master-agent, namespace: default, uid: ds-uid, labels: {team: infra}, annotations: {note: hello}}
spec:
  selector: {matchLabels: {app: master-agent}}
  template:
    metadata: {labels: {app: master-agent}}
    spec:
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions: [{key: node-role.kubernetes.io/master, operator: Exists}]
      tolerations: [{key: dedicated, operator: Equal, value: monitoring, effect: NoSchedule}]
      nodeSelector: {node-type: monitoring}
      containers:
      - name: monitoring-agent
        image: prom/node-exporter:latest
        ports: [{containerPort: 9100, protocol: TCP}]
        resources: {limits: {memory: 200Mi}, requests: {cpu: 100m, memory: 200Mi}}
        env: [{name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
        volumeMounts: [{name: varlog, mountPath: /var/log}]
      volumes: [{name: varlog, hostPath: {path: /var/log}}]
status: {desiredNumberScheduled: 1, currentNumberScheduled: 1, numberReady: 1, updatedNumberScheduled: 1, numberAvailable: 1}
"#;

pub(super) fn n(name: &str, labels: &str, spec: &str, status: &str) -> Node {
    node(&format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {labels}}}\nspec: {spec}\nstatus: {status}\n"
        ))
}

pub(super) const READY: &str = r#"{conditions: [{type: Ready, status: "True"}]}"#;
pub(super) const FITS: &str = "{node-role.kubernetes.io/master: '', node-type: monitoring}";

pub(super) fn daemon_pod(name: &str, node: &str, phase: &str) -> Pod {
    pod(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels: {{app: master-agent}}
  ownerReferences: [{{apiVersion: apps/v1, kind: DaemonSet, name: master-agent, uid: ds-uid, controller: true}}]
spec:
  nodeName: {node}
  containers: [{{name: monitoring-agent, image: "prom/node-exporter:latest", resources: {{requests: {{cpu: 100m, memory: 200Mi}}, limits: {{memory: 200Mi}}}}}}]
status: {{phase: {phase}}}
"#
    ))
}
