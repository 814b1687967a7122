//! What `get` prints: kubectl's tables (with `-o wide` and `-A`), and the
//! `-o json`, `-o yaml` and `-o name` forms.
//!
//! Everything here is pure: objects and "now" in, text out.

use crate::table;
use crate::timefmt::age;
use drover_api::selector::Selector;
use drover_api::{
    ContainerStatus, ControllerRevision, DaemonSet, Event, Kind, Labels, Manifest, Node, Pod,
    PodPhase,
};
use serde_json::{json, Value};
use std::time::SystemTime;

/// `-o FORMAT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// The table with more columns.
    Wide,
    /// JSON with Kubernetes field names: the object, or a `List`.
    Json,
    /// YAML, the same content as JSON.
    Yaml,
    /// `kind.group/name`, one per line.
    Name,
}

/// How a table is drawn.
#[derive(Debug, Clone, Copy)]
pub struct TableOptions {
    /// `-o wide`.
    pub wide: bool,
    /// `-A`: a NAMESPACE column first (for namespaced kinds).
    pub all_namespaces: bool,
    /// The time ages are measured to.
    pub now: SystemTime,
}

/// The column headers of a kind's table.
pub fn headers(kind: Kind, o: &TableOptions) -> Vec<&'static str> {
    let mut h: Vec<&'static str> = Vec::new();
    if o.all_namespaces && kind.namespaced() {
        h.push("NAMESPACE");
    }
    match kind {
        Kind::DaemonSet => {
            h.extend([
                "NAME",
                "DESIRED",
                "CURRENT",
                "READY",
                "UP-TO-DATE",
                "AVAILABLE",
                "NODE SELECTOR",
                "AGE",
            ]);
            if o.wide {
                h.extend(["CONTAINERS", "IMAGES", "SELECTOR"]);
            }
        }
        Kind::Pod => {
            h.extend(["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
            if o.wide {
                h.extend(["IP", "NODE"]);
            }
        }
        Kind::Node => {
            h.extend(["NAME", "STATUS", "ROLES", "AGE", "VERSION"]);
            if o.wide {
                h.extend([
                    "INTERNAL-IP",
                    "EXTERNAL-IP",
                    "OS-IMAGE",
                    "KERNEL-VERSION",
                    "CONTAINER-RUNTIME",
                ]);
            }
        }
        Kind::Event => {
            if o.wide {
                h.extend([
                    "LAST SEEN",
                    "TYPE",
                    "REASON",
                    "OBJECT",
                    "SUBOBJECT",
                    "SOURCE",
                    "MESSAGE",
                    "FIRST SEEN",
                    "COUNT",
                    "NAME",
                ]);
            } else {
                h.extend(["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]);
            }
        }
        Kind::ControllerRevision => h.extend(["NAME", "CONTROLLER", "REVISION", "AGE"]),
        Kind::PriorityClass => {
            h.extend(["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"])
        }
        Kind::ConfigMap => h.extend(["NAME", "DATA", "AGE"]),
        Kind::Secret => h.extend(["NAME", "TYPE", "DATA", "AGE"]),
        Kind::Namespace => h.extend(["NAME", "STATUS", "AGE"]),
        Kind::ServiceAccount => h.extend(["NAME", "SECRETS", "AGE"]),
    }
    h
}

/// One object's row of its kind's table.
pub fn row(m: &Manifest, o: &TableOptions) -> Vec<String> {
    let mut r = Vec::new();
    if o.all_namespaces && m.namespaced() {
        r.push(m.namespace().to_string());
    }
    match m {
        Manifest::DaemonSet(ds) => r.extend(daemon_set_row(ds, o)),
        Manifest::Pod(p) => r.extend(pod_row(p, o)),
        Manifest::Node(n) => r.extend(node_row(n, o)),
        Manifest::Event(e) => r.extend(event_row(e, o)),
        Manifest::ControllerRevision(cr) => r.extend(controller_revision_row(cr, o)),
        Manifest::PriorityClass(pc) => r.extend([
            pc.metadata.name.clone(),
            pc.value.to_string(),
            pc.global_default.to_string(),
            age(pc.metadata.creation_timestamp.as_deref(), o.now),
            pc.preemption_policy
                .clone()
                .unwrap_or_else(|| "PreemptLowerPriority".into()),
        ]),
        Manifest::ConfigMap(cm) => r.extend([
            cm.metadata.name.clone(),
            (cm.data.len() + cm.binary_data.len()).to_string(),
            age(cm.metadata.creation_timestamp.as_deref(), o.now),
        ]),
        Manifest::Secret(s) => r.extend([
            s.metadata.name.clone(),
            s.r#type.clone(),
            s.data.len().to_string(),
            age(s.metadata.creation_timestamp.as_deref(), o.now),
        ]),
        Manifest::Namespace(ns) => r.extend([
            ns.metadata.name.clone(),
            ns.status.phase.clone(),
            age(ns.metadata.creation_timestamp.as_deref(), o.now),
        ]),
        Manifest::ServiceAccount(sa) => r.extend([
            sa.metadata.name.clone(),
            "0".into(),
            age(sa.metadata.creation_timestamp.as_deref(), o.now),
        ]),
    }
    r
}

/// A whole table, header included.
pub fn table(kind: Kind, items: &[Manifest], o: &TableOptions) -> String {
    let rows: Vec<Vec<String>> = items.iter().map(|m| row(m, o)).collect();
    table::render(&headers(kind, o), &rows)
}

/// `k=v,k2=v2` (sorted), `<none>` when empty: Kubernetes' `FormatLabels`.
pub fn format_labels(labels: &Labels) -> String {
    if labels.is_empty() {
        return "<none>".into();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A DaemonSet's selector as kubectl prints it: `app=x,tier in (a,b)`,
/// `<none>` when empty, `<error>` when it is not valid.
pub fn format_selector(ds: &DaemonSet) -> String {
    let Some(sel) = &ds.spec.selector else {
        return "<none>".into();
    };
    match Selector::from_label_selector(sel) {
        Ok(s) if s.is_empty() => "<none>".into(),
        Ok(s) => s.to_string(),
        Err(_) => "<error>".into(),
    }
}

fn daemon_set_row(ds: &DaemonSet, o: &TableOptions) -> Vec<String> {
    let st = &ds.status;
    let mut r = vec![
        ds.metadata.name.clone(),
        st.desired_number_scheduled.to_string(),
        st.current_number_scheduled.to_string(),
        st.number_ready.to_string(),
        st.updated_number_scheduled.to_string(),
        st.number_available.to_string(),
        format_labels(&ds.spec.template.spec.node_selector),
        age(ds.metadata.creation_timestamp.as_deref(), o.now),
    ];
    if o.wide {
        let containers = &ds.spec.template.spec.containers;
        r.push(
            containers
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(","),
        );
        r.push(
            containers
                .iter()
                .map(|c| c.image.as_str())
                .collect::<Vec<_>>()
                .join(","),
        );
        r.push(format_selector(ds));
    }
    r
}

/// The reason a pod's STATUS column shows, as kubectl's `printPod` works it
/// out: the phase, or the status reason, or a container's waiting or
/// terminated reason, `Terminating` while being deleted.
pub fn pod_status(p: &Pod) -> String {
    let phase = p.status.phase.as_ref().map(|x| x.as_str()).unwrap_or("");
    let mut reason = phase.to_string();
    if !p.status.reason.is_empty() {
        reason = p.status.reason.clone();
    }
    let mut has_running = false;
    for c in p.status.container_statuses.iter().rev() {
        if let Some(w) = c.state.waiting.as_ref().filter(|w| !w.reason.is_empty()) {
            reason = w.reason.clone();
        } else if let Some(t) = &c.state.terminated {
            reason = if !t.reason.is_empty() {
                t.reason.clone()
            } else if let Some(sig) = t.signal.filter(|s| *s != 0) {
                format!("Signal:{sig}")
            } else {
                format!("ExitCode:{}", t.exit_code)
            };
        } else if c.ready && c.state.running.is_some() {
            has_running = true;
        }
    }
    if reason == "Completed" && has_running {
        reason = if p.is_ready() { "Running" } else { "NotReady" }.into();
    }
    let terminal = matches!(
        p.status.phase,
        Some(PodPhase::Succeeded) | Some(PodPhase::Failed)
    );
    if p.metadata.deletion_timestamp.is_some() && p.status.reason == "NodeLost" {
        reason = "Unknown".into();
    } else if p.metadata.deletion_timestamp.is_some() && !terminal {
        reason = "Terminating".into();
    }
    if reason.is_empty() {
        reason = "Pending".into();
    }
    reason
}

/// `ready/total` containers.
pub fn pod_ready(p: &Pod) -> String {
    let ready = p
        .status
        .container_statuses
        .iter()
        .filter(|c| c.ready && c.state.running.is_some())
        .count();
    format!("{ready}/{}", p.spec.containers.len())
}

/// RESTARTS: the sum of the containers' restarts, with how long ago the
/// last one was (`3 (5m ago)`).
pub fn pod_restarts(p: &Pod, now: SystemTime) -> String {
    let restarts: i64 = p
        .status
        .container_statuses
        .iter()
        .map(|c| i64::from(c.restart_count))
        .sum();
    let last = p
        .status
        .container_statuses
        .iter()
        .filter_map(last_finished)
        .max();
    match last {
        Some(t) if restarts != 0 => {
            format!(
                "{restarts} ({} ago)",
                crate::timefmt::human_duration_nanos(
                    now.duration_since(t)
                        .map(|d| d.as_nanos() as i128)
                        .unwrap_or(0)
                )
            )
        }
        _ => restarts.to_string(),
    }
}

fn last_finished(c: &ContainerStatus) -> Option<SystemTime> {
    c.last_state
        .terminated
        .as_ref()
        .and_then(|t| t.finished_at.as_deref())
        .and_then(crate::timefmt::parse_time)
}

fn or_none(s: &str) -> String {
    if s.is_empty() {
        "<none>".into()
    } else {
        s.to_string()
    }
}

fn pod_row(p: &Pod, o: &TableOptions) -> Vec<String> {
    let mut r = vec![
        p.metadata.name.clone(),
        pod_ready(p),
        pod_status(p),
        pod_restarts(p, o.now),
        age(p.metadata.creation_timestamp.as_deref(), o.now),
    ];
    if o.wide {
        r.push(or_none(&p.status.pod_ip));
        r.push(or_none(&p.spec.node_name));
    }
    r
}

/// STATUS of a node: `Ready`, `NotReady` (Ready is False or Unknown) or
/// `Unknown` (no Ready condition), with `,SchedulingDisabled` when cordoned.
pub fn node_status(n: &Node) -> String {
    let mut s = match n.condition(drover_api::node_condition::READY) {
        Some(c) if c.status == Some(drover_api::ConditionStatus::True) => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if n.spec.unschedulable {
        s.push_str(",SchedulingDisabled");
    }
    s
}

/// ROLES: from `node-role.kubernetes.io/ROLE` and `kubernetes.io/role=ROLE`
/// labels, `<none>` without.
pub fn node_roles(n: &Node) -> String {
    let mut roles: Vec<&str> = n
        .metadata
        .labels
        .iter()
        .filter_map(|(k, v)| {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                (!role.is_empty()).then_some(role)
            } else if k == "kubernetes.io/role" && !v.is_empty() {
                Some(v.as_str())
            } else {
                None
            }
        })
        .collect();
    roles.sort_unstable();
    roles.dedup();
    if roles.is_empty() {
        "<none>".into()
    } else {
        roles.join(",")
    }
}

fn node_address(n: &Node, ty: &str) -> String {
    n.status
        .addresses
        .iter()
        .find(|a| a.r#type == ty)
        .map(|a| a.address.clone())
        .unwrap_or_else(|| "<none>".into())
}

fn or_unknown(s: &str) -> String {
    if s.is_empty() {
        "<unknown>".into()
    } else {
        s.to_string()
    }
}

fn node_row(n: &Node, o: &TableOptions) -> Vec<String> {
    let info = &n.status.node_info;
    let mut r = vec![
        n.metadata.name.clone(),
        node_status(n),
        node_roles(n),
        age(n.metadata.creation_timestamp.as_deref(), o.now),
        info.kubelet_version.clone(),
    ];
    if o.wide {
        r.push(node_address(n, "InternalIP"));
        r.push(node_address(n, "ExternalIP"));
        r.push(or_unknown(&info.os_image));
        r.push(or_unknown(&info.kernel_version));
        r.push(or_unknown(&info.container_runtime_version));
    }
    r
}

/// The first time of an event: `firstTimestamp`, else `eventTime`.
pub fn event_first_time(e: &Event) -> Option<&str> {
    e.first_timestamp
        .as_deref()
        .filter(|s| !s.is_empty())
        .or(e.event_time.as_deref().filter(|s| !s.is_empty()))
}

/// The last time of an event: `lastTimestamp`, else its first time.
pub fn event_last_time(e: &Event) -> Option<&str> {
    e.last_timestamp
        .as_deref()
        .filter(|s| !s.is_empty())
        .or_else(|| event_first_time(e))
}

/// The time `kubectl events` sorts by.
pub fn event_sort_time(e: &Event) -> Option<SystemTime> {
    event_last_time(e).and_then(crate::timefmt::parse_time)
}

/// `5m`, or `5m (x3 over 20m)` for a repeated event (kubectl events and
/// describe).
pub fn event_interval(e: &Event, now: SystemTime) -> String {
    let first = age(event_first_time(e), now);
    match e.count {
        Some(n) if n > 1 => format!(
            "{} (x{n} over {first})",
            age(e.last_timestamp.as_deref(), now)
        ),
        _ => first,
    }
}

/// `component, host` (or the reporting controller and instance).
pub fn event_source(e: &Event) -> String {
    let component = if e.source.component.is_empty() {
        &e.reporting_component
    } else {
        &e.source.component
    };
    let instance = if e.source.host.is_empty() {
        &e.reporting_instance
    } else {
        &e.source.host
    };
    if instance.is_empty() {
        component.clone()
    } else {
        format!("{component}, {instance}")
    }
}

fn event_row(e: &Event, o: &TableOptions) -> Vec<String> {
    let first = age(event_first_time(e), o.now);
    let last = age(event_last_time(e), o.now);
    let kind = e.involved_object.kind.to_ascii_lowercase();
    let target = if e.involved_object.name.is_empty() {
        kind
    } else {
        format!("{kind}/{}", e.involved_object.name)
    };
    let message = e.message.trim().to_string();
    if o.wide {
        vec![
            last,
            e.r#type.clone(),
            e.reason.clone(),
            target,
            e.involved_object.field_path.clone(),
            event_source(e),
            message,
            first,
            e.count.unwrap_or(1).max(1).to_string(),
            e.metadata.name.clone(),
        ]
    } else {
        vec![last, e.r#type.clone(), e.reason.clone(), target, message]
    }
}

fn controller_revision_row(cr: &ControllerRevision, o: &TableOptions) -> Vec<String> {
    let controller = match cr.metadata.controller_ref() {
        Some(r) => {
            let group = r.api_version.split_once('/').map(|(g, _)| g).unwrap_or("");
            let kind = r.kind.to_ascii_lowercase();
            if group.is_empty() {
                format!("{kind}/{}", r.name)
            } else {
                format!("{kind}.{group}/{}", r.name)
            }
        }
        None => "<none>".into(),
    };
    vec![
        cr.metadata.name.clone(),
        controller,
        cr.revision.to_string(),
        age(cr.metadata.creation_timestamp.as_deref(), o.now),
    ]
}

/// The object as JSON, keys sorted like kubectl's output.
pub fn object_value(m: &Manifest) -> Value {
    serde_json::to_value(m).unwrap_or(Value::Null)
}

/// What `-o json|yaml` prints for a list (kubectl's shape).
pub fn list_value(items: &[Manifest]) -> Value {
    json!({
        "apiVersion": "v1",
        "items": items.iter().map(object_value).collect::<Vec<_>>(),
        "kind": "List",
        "metadata": {"resourceVersion": ""},
    })
}

/// JSON as kubectl prints it: four-space indentation, a final newline.
pub fn to_json(v: &Value) -> String {
    let mut buf = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
    serde::Serialize::serialize(v, &mut ser).expect("a JSON value always serializes");
    let mut s = String::from_utf8(buf).expect("serde_json writes UTF-8");
    s.push('\n');
    s
}

/// YAML as kubectl prints it (block style, lists not indented under their
/// key).
pub fn to_yaml(v: &Value) -> String {
    let opts = serde_saphyr::ser_options! {
        prefer_block_scalars: false,
    };
    let mut s = serde_saphyr::to_string_with_options(v, opts)
        .unwrap_or_else(|e| format!("# cannot write YAML: {e}\n"));
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

/// `-o name`: `daemonset.apps/x`.
pub fn name(m: &Manifest) -> String {
    m.reference()
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::parse_manifests;

    fn now() -> SystemTime {
        crate::timefmt::parse_time("2024-05-03T16:00:00Z").unwrap()
    }

    fn opts(wide: bool, all: bool) -> TableOptions {
        TableOptions {
            wide,
            all_namespaces: all,
            now: now(),
        }
    }

    fn one(yaml: &str) -> Manifest {
        parse_manifests(yaml).unwrap().remove(0)
    }

    fn ds() -> Manifest {
        one(r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: fluentd, namespace: kube-system, creationTimestamp: "2024-05-01T12:00:00Z"}
spec:
  selector:
    matchLabels: {app: fluentd}
    matchExpressions: [{key: tier, operator: In, values: [b, a]}]
  template:
    metadata: {labels: {app: fluentd, tier: a}}
    spec:
      nodeSelector: {disk: ssd, zone: a}
      containers:
      - {name: fluentd, image: "fluentd:v1"}
      - {name: sidecar, image: "busybox:1.36"}
status: {desiredNumberScheduled: 3, currentNumberScheduled: 2, numberReady: 1, updatedNumberScheduled: 2, numberAvailable: 1}
"#)
    }

    #[test]
    fn daemon_set_tables() {
        let t = table(Kind::DaemonSet, &[ds()], &opts(false, false));
        assert_eq!(
            t,
            "NAME      DESIRED   CURRENT   READY   UP-TO-DATE   AVAILABLE   NODE SELECTOR     AGE\n\
             fluentd   3         2         1       2            1           disk=ssd,zone=a   2d4h\n"
        );
        let t = table(Kind::DaemonSet, &[ds()], &opts(true, true));
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("NAMESPACE     NAME      DESIRED"),
            "{t}"
        );
        assert!(
            lines[0].ends_with("AGE    CONTAINERS        IMAGES                    SELECTOR"),
            "{t}"
        );
        assert!(lines[1].starts_with("kube-system   fluentd   3 "), "{t}");
        assert!(
            lines[1]
                .ends_with("fluentd,sidecar   fluentd:v1,busybox:1.36   app=fluentd,tier in (a,b)"),
            "{t}"
        );
    }

    #[test]
    fn empty_node_selector_reads_none() {
        let m = one("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec: {containers: [{name: c, image: i}]}\n");
        let r = row(&m, &opts(true, false));
        assert_eq!(r[6], "<none>");
        assert_eq!(r[7], "<unknown>");
        assert_eq!(r[10], "a=b");
    }

    fn pod(status: &str) -> Manifest {
        one(&format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: web, creationTimestamp: "2024-05-03T15:59:55Z"}}
spec:
  nodeName: n1
  containers: [{{name: a, image: i}}, {{name: b, image: i}}]
status: {status}
"#
        ))
    }

    #[test]
    fn pod_rows() {
        let p = pod(
            r#"{phase: Running, podIP: 10.0.0.5, conditions: [{type: Ready, status: "True"}],
            containerStatuses: [
              {name: a, ready: true, restartCount: 2, state: {running: {startedAt: "2024-05-03T15:59:56Z"}},
               lastState: {terminated: {exitCode: 1, finishedAt: "2024-05-03T15:55:00Z"}}},
              {name: b, ready: true, restartCount: 1, state: {running: {}}}]}"#,
        );
        assert_eq!(
            table(Kind::Pod, std::slice::from_ref(&p), &opts(true, false)),
            "NAME   READY   STATUS    RESTARTS     AGE   IP         NODE\n\
             web    2/2     Running   3 (5m ago)   5s    10.0.0.5   n1\n"
        );
        let p = pod("{}");
        assert_eq!(
            row(&p, &opts(true, false)),
            ["web", "0/2", "Pending", "0", "5s", "<none>", "n1"]
        );
        let p = pod(
            r#"{phase: Pending, containerStatuses: [{name: a, state: {waiting: {reason: CrashLoopBackOff}}}, {name: b, state: {waiting: {reason: ContainerCreating}}}]}"#,
        );
        assert_eq!(pod_status(as_pod(&p)), "CrashLoopBackOff");
        let p = pod(
            r#"{phase: Failed, containerStatuses: [{name: a, state: {terminated: {exitCode: 137, signal: 9}}}, {name: b, state: {terminated: {exitCode: 2}}}]}"#,
        );
        assert_eq!(pod_status(as_pod(&p)), "Signal:9");
        let mut p = pod("{phase: Running}");
        p.metadata_mut().deletion_timestamp = Some("2024-05-03T16:00:00Z".into());
        assert_eq!(pod_status(as_pod(&p)), "Terminating");
    }

    fn as_pod(m: &Manifest) -> &Pod {
        match m {
            Manifest::Pod(p) => p,
            _ => panic!("not a pod"),
        }
    }

    fn node(extra: &str) -> Manifest {
        one(&format!(
            r#"
apiVersion: v1
kind: Node
metadata:
  name: n1
  creationTimestamp: "2024-05-03T13:00:00Z"
  labels: {{node-role.kubernetes.io/control-plane: "", kubernetes.io/role: worker, disk: ssd}}
{extra}
"#
        ))
    }

    #[test]
    fn node_rows() {
        let n = node(
            r#"spec: {unschedulable: true}
status:
  conditions: [{type: Ready, status: "True"}]
  addresses: [{type: InternalIP, address: 10.0.0.1}]
  nodeInfo: {kubeletVersion: drover-0.1.0, osImage: Debian, containerRuntimeVersion: "sim://1"}"#,
        );
        assert_eq!(
            table(Kind::Node, std::slice::from_ref(&n), &opts(false, true)),
            "NAME   STATUS                     ROLES                  AGE   VERSION\n\
             n1     Ready,SchedulingDisabled   control-plane,worker   3h    drover-0.1.0\n"
        );
        assert_eq!(
            row(&n, &opts(true, false))[5..],
            ["10.0.0.1", "<none>", "Debian", "<unknown>", "sim://1"]
        );
        let n = node("status: {conditions: [{type: Ready, status: Unknown}]}");
        assert_eq!(row(&n, &opts(false, false))[1], "NotReady");
        let n = node("");
        assert_eq!(row(&n, &opts(false, false))[1], "Unknown");
    }

    fn event(count: i32) -> Manifest {
        one(&format!(
            r#"
apiVersion: v1
kind: Event
metadata: {{name: fluentd.17c, namespace: default}}
involvedObject: {{kind: DaemonSet, name: fluentd, namespace: default}}
reason: SuccessfulCreate
message: "Created pod: fluentd-abcde  "
type: Normal
source: {{component: daemonset-controller}}
firstTimestamp: "2024-05-03T15:40:00Z"
lastTimestamp: "2024-05-03T15:58:00Z"
count: {count}
"#
        ))
    }

    #[test]
    fn event_rows() {
        assert_eq!(
            table(Kind::Event, &[event(1)], &opts(false, true)),
            "NAMESPACE   LAST SEEN   TYPE     REASON             OBJECT              MESSAGE\n\
             default     2m          Normal   SuccessfulCreate   daemonset/fluentd   Created pod: fluentd-abcde\n"
        );
        let wide = row(&event(3), &opts(true, false));
        assert_eq!(
            wide,
            [
                "2m",
                "Normal",
                "SuccessfulCreate",
                "daemonset/fluentd",
                "",
                "daemonset-controller",
                "Created pod: fluentd-abcde",
                "20m",
                "3",
                "fluentd.17c"
            ]
        );
        let Manifest::Event(e) = event(3) else {
            panic!()
        };
        assert_eq!(event_interval(&e, now()), "2m (x3 over 20m)");
        let Manifest::Event(e) = event(1) else {
            panic!()
        };
        assert_eq!(event_interval(&e, now()), "20m");
    }

    #[test]
    fn controller_revision_rows() {
        let cr = one(r#"
apiVersion: apps/v1
kind: ControllerRevision
metadata:
  name: fluentd-5d4f
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: fluentd, uid: u, controller: true}]
revision: 2
"#);
        assert_eq!(
            row(&cr, &opts(false, false)),
            ["fluentd-5d4f", "daemonset.apps/fluentd", "2", "<unknown>"]
        );
    }

    #[test]
    fn json_list_shape_like_kubectl() {
        let v = list_value(&[ds()]);
        let text = to_json(&v);
        assert!(text.starts_with("{\n    \"apiVersion\": \"v1\",\n    \"items\": [\n        {\n            \"apiVersion\": \"apps/v1\",\n            \"kind\": \"DaemonSet\","), "{text}");
        assert!(text.ends_with("    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n"), "{text}");
        let empty = to_json(&list_value(&[]));
        assert_eq!(empty, "{\n    \"apiVersion\": \"v1\",\n    \"items\": [],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n");
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            back["items"][0]["spec"]["template"]["spec"]["nodeSelector"]["disk"],
            "ssd"
        );
    }

    #[test]
    fn yaml_like_kubectl() {
        let y = to_yaml(&list_value(&[ds()]));
        assert!(
            y.starts_with(
                "apiVersion: v1\nitems:\n- apiVersion: apps/v1\n  kind: DaemonSet\n  metadata:\n"
            ),
            "{y}"
        );
        assert!(
            y.ends_with("kind: List\nmetadata:\n  resourceVersion: \"\"\n")
                || y.ends_with("kind: List\nmetadata:\n  resourceVersion: ''\n"),
            "{y}"
        );
        let back: Value = serde_saphyr::from_str(&y).unwrap();
        assert_eq!(back, list_value(&[ds()]));
        let y = to_yaml(&object_value(&ds()));
        assert!(
            y.starts_with("apiVersion: apps/v1\nkind: DaemonSet\n"),
            "{y}"
        );
    }

    #[test]
    fn names() {
        assert_eq!(name(&ds()), "daemonset.apps/fluentd");
        assert_eq!(name(&pod("{}")), "pod/web");
        assert_eq!(name(&node("")), "node/n1");
    }
}
