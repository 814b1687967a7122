//! `describe` in kubectl's layout (the same keys, order and alignment as
//! `kubectl describe`), plus what kubectl does not say: for a DaemonSet,
//! every node that has no pod of it and why ("Nodes without a pod:").
//!
//! Pure: the objects and "now" in, text out. Text is written with tabs and
//! aligned at the end by [`crate::tabwriter`], as kubectl does.

use crate::printers::{
    event_interval, event_sort_time, format_labels, format_selector, node_roles,
};
use crate::tabwriter;
use crate::timefmt::{age, describe_time};
use drover_api::{
    Container, ContainerState, ControllerRevision, DaemonSet, Event, Labels, Node, Pod, PodPhase,
    PodSpec, PodTemplateSpec, Probe, Quantity, Taint, Toleration, TolerationOperator, Volume,
};
use drover_controller::daemon::node_should_run_daemon_pod;
use drover_controller::daemon::pods::CONTROLLER_REVISION_HASH_LABEL;
use std::collections::BTreeMap;
use std::time::SystemTime;

/// Text with kubectl's indentation levels, aligned on flush.
#[derive(Default)]
struct W {
    buf: String,
    out: String,
}

impl W {
    /// Writes `text` indented by `level` steps of two spaces.
    fn w(&mut self, level: usize, text: impl AsRef<str>) {
        for _ in 0..level {
            self.buf.push_str("  ");
        }
        self.buf.push_str(text.as_ref());
    }

    /// Ends an alignment section (kubectl flushes before the events table).
    fn flush(&mut self) {
        self.out.push_str(&tabwriter::describe(&self.buf));
        self.buf.clear();
    }

    fn finish(mut self) -> String {
        self.flush();
        self.out
    }
}

/// `Title:\tk=v` with one line per label (kubectl's `printLabelsMultiline`).
fn labels_multiline(w: &mut W, title: &str, labels: &Labels) {
    w.w(0, format!("{title}:\t"));
    if labels.is_empty() {
        w.w(0, "<none>\n");
        return;
    }
    for (i, (k, v)) in labels.iter().enumerate() {
        if i != 0 {
            w.w(0, "\t");
        }
        w.w(0, format!("{k}={v}\n"));
    }
}

const MAX_ANNOTATION_LEN: usize = 140;

/// `Title:\tk: v`, long or multi-line values on their own lines, cut at
/// 140 characters (kubectl's `printAnnotationsMultiline`).
fn annotations_multiline(w: &mut W, title: &str, annotations: &Labels) {
    w.w(0, format!("{title}:\t"));
    let keys: Vec<&String> = annotations
        .keys()
        .filter(|k| *k != "kubectl.kubernetes.io/last-applied-configuration")
        .collect();
    if keys.is_empty() {
        w.w(0, "<none>\n");
        return;
    }
    for (i, k) in keys.iter().enumerate() {
        if i != 0 {
            w.w(0, "\t");
        }
        let value = annotations[*k]
            .strip_suffix('\n')
            .unwrap_or(&annotations[*k]);
        if value.len() + k.len() + 2 > MAX_ANNOTATION_LEN || value.contains('\n') {
            w.w(0, format!("{k}:\n"));
            for s in value.split('\n') {
                let s: String = if s.chars().count() > MAX_ANNOTATION_LEN - 2 {
                    format!(
                        "{}...",
                        s.chars().take(MAX_ANNOTATION_LEN - 2).collect::<String>()
                    )
                } else {
                    s.to_string()
                };
                w.w(0, format!("\t  {s}\n"));
            }
        } else {
            w.w(0, format!("{k}: {value}\n"));
        }
    }
}

/// A toleration as `describe` shows it: `key=value:Effect op=Exists for 300s`.
pub fn format_toleration(t: &Toleration) -> String {
    let mut s = t.key.clone();
    if !t.value.is_empty() {
        s.push_str(&format!("={}", t.value));
    }
    if let Some(e) = &t.effect {
        s.push_str(&format!(":{e}"));
    }
    if t.operator == Some(TolerationOperator::Exists) && t.value.is_empty() {
        if !t.key.is_empty() || t.effect.is_some() {
            s.push_str(" op=Exists");
        } else {
            s.push_str("op=Exists");
        }
    }
    if let Some(secs) = t.toleration_seconds {
        s.push_str(&format!(" for {secs}s"));
    }
    s
}

fn tolerations_multiline(w: &mut W, title: &str, tolerations: &[Toleration]) {
    w.w(0, format!("{title}:\t"));
    if tolerations.is_empty() {
        w.w(0, "<none>\n");
        return;
    }
    let mut sorted: Vec<&Toleration> = tolerations.iter().collect();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    for (i, t) in sorted.iter().enumerate() {
        if i != 0 {
            w.w(0, "\t");
        }
        w.w(0, format!("{}\n", format_toleration(t)));
    }
}

fn taints_multiline(w: &mut W, title: &str, taints: &[Taint]) {
    w.w(0, format!("{title}:\t"));
    if taints.is_empty() {
        w.w(0, "<none>\n");
        return;
    }
    let mut sorted: Vec<&Taint> = taints.iter().collect();
    let key = |t: &Taint| {
        format!(
            "{},{}",
            t.effect.as_ref().map(|e| e.as_str()).unwrap_or(""),
            t.key
        )
    };
    sorted.sort_by_key(|t| key(t));
    for (i, t) in sorted.iter().enumerate() {
        if i != 0 {
            w.w(0, "\t");
        }
        w.w(0, format!("{t}\n"));
    }
}

fn or_none(s: &str) -> &str {
    if s.is_empty() {
        "<none>"
    } else {
        s
    }
}

fn ports(c: &Container, host: bool) -> String {
    c.ports
        .iter()
        .map(|p| {
            let port = if host {
                p.host_port.unwrap_or(0)
            } else {
                p.container_port
            };
            let proto = p.protocol.as_ref().map(|x| x.as_str()).unwrap_or("TCP");
            if p.name.is_empty() {
                format!("{port}/{proto}")
            } else {
                format!("{port}/{proto} ({})", p.name)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A probe as kubectl shows it: `http-get http://:8080/healthz delay=0s …`.
pub fn format_probe(p: &Probe) -> String {
    let attrs = format!(
        "delay={}s timeout={}s period={}s successThreshold={} failureThreshold={}",
        p.initial_delay_seconds.unwrap_or(0),
        p.timeout_seconds.unwrap_or(1),
        p.period_seconds.unwrap_or(10),
        p.success_threshold.unwrap_or(1),
        p.failure_threshold.unwrap_or(3)
    );
    if let Some(e) = &p.exec {
        return format!("exec [{}] {attrs}", e.command.join(" "));
    }
    if let Some(h) = &p.http_get {
        let scheme = h
            .scheme
            .as_ref()
            .map(|s| s.as_str().to_ascii_lowercase())
            .unwrap_or_else(|| "http".into());
        let port = h.port.to_string();
        let host = if port.is_empty() {
            h.host.clone()
        } else {
            format!("{}:{port}", h.host)
        };
        return format!("http-get {scheme}://{host}{} {attrs}", h.path);
    }
    if let Some(t) = &p.tcp_socket {
        return format!("tcp-socket {}:{} {attrs}", t.host, t.port);
    }
    format!("unknown {attrs}")
}

fn container_state(w: &mut W, name: &str, s: &ContainerState) {
    if let Some(r) = &s.running {
        w.w(2, format!("{name}:\tRunning\n"));
        w.w(
            3,
            format!("Started:\t{}\n", describe_time(r.started_at.as_deref())),
        );
    } else if let Some(wt) = &s.waiting {
        w.w(2, format!("{name}:\tWaiting\n"));
        if !wt.reason.is_empty() {
            w.w(3, format!("Reason:\t{}\n", wt.reason));
        }
    } else if let Some(t) = &s.terminated {
        w.w(2, format!("{name}:\tTerminated\n"));
        if !t.reason.is_empty() {
            w.w(3, format!("Reason:\t{}\n", t.reason));
        }
        if !t.message.is_empty() {
            w.w(3, format!("Message:\t{}\n", t.message));
        }
        w.w(3, format!("Exit Code:\t{}\n", t.exit_code));
        if let Some(sig) = t.signal.filter(|s| *s > 0) {
            w.w(3, format!("Signal:\t{sig}\n"));
        }
        w.w(
            3,
            format!("Started:\t{}\n", describe_time(t.started_at.as_deref())),
        );
        w.w(
            3,
            format!("Finished:\t{}\n", describe_time(t.finished_at.as_deref())),
        );
    } else {
        w.w(2, format!("{name}:\tWaiting\n"));
    }
}

fn env_value(pod: Option<&Pod>, field_path: &str) -> String {
    let Some(p) = pod else { return String::new() };
    match field_path {
        "metadata.name" => p.metadata.name.clone(),
        "metadata.namespace" => p.metadata.namespace.clone(),
        "metadata.uid" => p.metadata.uid.clone(),
        "spec.nodeName" => p.spec.node_name.clone(),
        "spec.serviceAccountName" => p.spec.service_account_name.clone(),
        "status.hostIP" => p.status.host_ip.clone(),
        "status.podIP" => p.status.pod_ip.clone(),
        _ => String::new(),
    }
}

/// kubectl's `describeContainers`: `space` is "  " inside a pod template.
fn containers(w: &mut W, containers: &[Container], pod: Option<&Pod>, space: &str) {
    let none = if containers.is_empty() { " <none>" } else { "" };
    w.w(0, format!("{space}Containers:{none}\n"));
    let name_indent = if space.is_empty() { "" } else { " " };
    for c in containers {
        let status = pod.and_then(|p| {
            p.status
                .container_statuses
                .iter()
                .find(|s| s.name == c.name)
        });
        w.w(1, format!("{name_indent}{}:\n", c.name));
        if let Some(s) = status {
            w.w(2, format!("Container ID:\t{}\n", s.container_id));
        }
        w.w(2, format!("Image:\t{}\n", c.image));
        if let Some(s) = status {
            w.w(2, format!("Image ID:\t{}\n", s.image_id));
        }
        let p = ports(c, false);
        if p.contains(',') {
            w.w(2, format!("Ports:\t{p}\n"));
        } else {
            w.w(2, format!("Port:\t{}\n", or_none(&p)));
        }
        let hp = ports(c, true);
        if hp.contains(',') {
            w.w(2, format!("Host Ports:\t{hp}\n"));
        } else {
            w.w(2, format!("Host Port:\t{}\n", or_none(&hp)));
        }
        if !c.command.is_empty() {
            w.w(2, "Command:\n");
            for line in c.command.iter().flat_map(|x| x.split('\n')) {
                w.w(3, format!("{line}\n"));
            }
        }
        if !c.args.is_empty() {
            w.w(2, "Args:\n");
            for line in c.args.iter().flat_map(|x| x.split('\n')) {
                w.w(3, format!("{line}\n"));
            }
        }
        if let Some(s) = status {
            container_state(w, "State", &s.state);
            if s.last_state.terminated.is_some() {
                container_state(w, "Last State", &s.last_state);
            }
            w.w(
                2,
                format!("Ready:\t{}\n", if s.ready { "True" } else { "False" }),
            );
            w.w(2, format!("Restart Count:\t{}\n", s.restart_count));
        }
        for (title, list) in [
            ("Limits", &c.resources.limits),
            ("Requests", &c.resources.requests),
        ] {
            if !list.is_empty() {
                w.w(2, format!("{title}:\n"));
                for (k, v) in list {
                    w.w(3, format!("{k}:\t{v}\n"));
                }
            }
        }
        for (title, probe) in [
            ("Liveness", &c.liveness_probe),
            ("Readiness", &c.readiness_probe),
            ("Startup", &c.startup_probe),
        ] {
            if let Some(p) = probe {
                w.w(2, format!("{title}:\t{}\n", format_probe(p)));
            }
        }
        let none = if c.env.is_empty() { "\t<none>" } else { "" };
        w.w(2, format!("Environment:{none}\n"));
        for e in &c.env {
            match &e.value_from {
                None => {
                    for (i, line) in e.value.split('\n').enumerate() {
                        if i == 0 {
                            w.w(3, format!("{}:\t{line}\n", e.name));
                        } else {
                            w.w(3, format!("\t{line}\n"));
                        }
                    }
                }
                Some(from) => {
                    if let Some(f) = &from.field_ref {
                        let api = if f.api_version.is_empty() {
                            "v1"
                        } else {
                            &f.api_version
                        };
                        w.w(
                            3,
                            format!(
                                "{}:\t{} ({api}:{})\n",
                                e.name,
                                env_value(pod, &f.field_path),
                                f.field_path
                            ),
                        );
                    } else if let Some(r) = &from.resource_field_ref {
                        let (list, name) = match r.resource.split_once('.') {
                            Some(("limits", n)) => (&c.resources.limits, n),
                            Some((_, n)) => (&c.resources.requests, n),
                            None => (&c.resources.requests, r.resource.as_str()),
                        };
                        let value = match list.get(name) {
                            Some(q) => q.to_string(),
                            None if r.resource.starts_with("limits.") => "node allocatable".into(),
                            None => "0".into(),
                        };
                        w.w(3, format!("{}:\t{value} ({})\n", e.name, r.resource));
                    } else {
                        w.w(
                            3,
                            format!("{}:\t<set from a source drover does not know>\n", e.name),
                        );
                    }
                }
            }
        }
        let none = if c.volume_mounts.is_empty() {
            "\t<none>"
        } else {
            ""
        };
        w.w(2, format!("Mounts:{none}\n"));
        let mut mounts: Vec<_> = c.volume_mounts.iter().collect();
        mounts.sort_by(|a, b| a.mount_path.cmp(&b.mount_path));
        for m in mounts {
            let mut flags = vec![if m.read_only {
                "ro".to_string()
            } else {
                "rw".to_string()
            }];
            if !m.sub_path.is_empty() {
                flags.push(format!("path={:?}", m.sub_path));
            }
            w.w(
                3,
                format!("{} from {} ({})\n", m.mount_path, m.name, flags.join(",")),
            );
        }
    }
}

fn volumes(w: &mut W, volumes: &[Volume], space: &str) {
    if volumes.is_empty() {
        w.w(0, format!("{space}Volumes:\t<none>\n"));
        return;
    }
    w.w(0, format!("{space}Volumes:\n"));
    let name_indent = if space.is_empty() { "" } else { " " };
    for v in volumes {
        w.w(1, format!("{name_indent}{}:\n", v.name));
        if let Some(h) = &v.host_path {
            w.w(2, "Type:\tHostPath (bare host directory volume)\n");
            w.w(2, format!("Path:\t{}\n", h.path));
            w.w(
                2,
                format!(
                    "HostPathType:\t{}\n",
                    h.r#type.as_ref().map(|t| t.as_str()).unwrap_or("")
                ),
            );
        } else if let Some(e) = &v.empty_dir {
            w.w(
                2,
                "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)\n",
            );
            w.w(2, format!("Medium:\t{}\n", e.medium));
            let limit = e
                .size_limit
                .as_ref()
                .map(|q| q.to_string())
                .unwrap_or_else(|| "<unset>".into());
            w.w(2, format!("SizeLimit:\t{limit}\n"));
        } else if let Some(kind) = v.extra.keys().next() {
            w.w(
                2,
                format!("Type:\t{kind} (kept, but drover does not act on it)\n"),
            );
        } else {
            w.w(1, "<unknown>\n");
        }
    }
}

/// A pod template as `describe` prints it (`rollout history --revision`).
pub fn describe_pod_template(t: &PodTemplateSpec) -> String {
    let mut w = W::default();
    pod_template(&mut w, t);
    w.finish()
}

/// kubectl's `DescribePodTemplate`.
fn pod_template(w: &mut W, t: &PodTemplateSpec) {
    w.w(0, "Pod Template:\n");
    labels_multiline(w, "  Labels", &t.metadata.labels);
    if !t.metadata.annotations.is_empty() {
        annotations_multiline(w, "  Annotations", &t.metadata.annotations);
    }
    if !t.spec.service_account_name.is_empty() {
        w.w(
            1,
            format!("Service Account:\t{}\n", t.spec.service_account_name),
        );
    }
    containers(w, &t.spec.containers, None, "  ");
    volumes(w, &t.spec.volumes, "  ");
    if !t.spec.priority_class_name.is_empty() {
        w.w(
            1,
            format!("Priority Class Name:\t{}\n", t.spec.priority_class_name),
        );
    }
    labels_multiline(w, "  Node-Selectors", &t.spec.node_selector);
    tolerations_multiline(w, "  Tolerations", &t.spec.tolerations);
}

/// kubectl's `DescribeEvents`: sorted by time, in their own alignment.
fn events(w: &mut W, evs: &[&Event], now: SystemTime) {
    if evs.is_empty() {
        w.w(0, "Events:\t<none>\n");
        return;
    }
    w.flush();
    let mut evs = evs.to_vec();
    evs.sort_by_key(|e| event_sort_time(e));
    w.w(0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n");
    w.w(1, "----\t------\t----\t----\t-------\n");
    for e in evs {
        let mut message = e.message.trim().to_string();
        if !e.involved_object.field_path.is_empty() {
            message = format!("{}: {message}", e.involved_object.field_path);
        }
        let source = if e.source.component.is_empty() {
            e.reporting_component.clone()
        } else {
            e.source.component.clone()
        };
        w.w(
            1,
            format!(
                "{}\t{}\t{}\t{}\t{}\n",
                e.r#type,
                e.reason,
                event_interval(e, now),
                source,
                message
            ),
        );
    }
}

/// The events about one object: same kind, name and namespace (and uid,
/// when both sides have one).
pub fn events_for<'a>(
    all: &'a [Event],
    kind: &str,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Vec<&'a Event> {
    all.iter()
        .filter(|e| {
            let o = &e.involved_object;
            o.kind == kind
                && o.name == name
                && (namespace.is_empty() || o.namespace.is_empty() || o.namespace == namespace)
                && (uid.is_empty() || o.uid.is_empty() || o.uid == uid)
        })
        .collect()
}

/// Whether a pod belongs to a DaemonSet: its controller reference names
/// it (by uid when both have one).
pub fn owned_by(p: &Pod, ds: &DaemonSet) -> bool {
    p.metadata.namespace == ds.metadata.namespace
        && p.metadata.controller_ref().is_some_and(|r| {
            r.kind == "DaemonSet"
                && r.name == ds.metadata.name
                && (r.uid.is_empty() || ds.metadata.uid.is_empty() || r.uid == ds.metadata.uid)
        })
}

/// Why a DaemonSet's pod should not be on a node: exactly what the
/// DaemonSet controller decides (`drover_controller`'s
/// `node_should_run_daemon_pod`, Kubernetes' `NodeShouldRunDaemonPod`):
/// every `nodeSelector` label and required-affinity term that fails, and
/// every `NoSchedule`/`NoExecute` taint the pod does not tolerate (with the
/// tolerations every daemon pod gets). A node that is not ready or
/// unreachable shows through the taints the node lifecycle controller puts
/// on it. Empty when the node should run the pod.
pub fn why_not(ds: &DaemonSet, node: &Node) -> Vec<String> {
    let verdict = node_should_run_daemon_pod(ds, node);
    if verdict.should_run {
        return Vec::new();
    }
    verdict.reasons.iter().map(ToString::to_string).collect()
}

/// Every node that runs no pod of the DaemonSet, with why (from
/// [`why_not`]); a node that should run one but has none yet says so.
pub fn nodes_without_pod(
    ds: &DaemonSet,
    pods: &[Pod],
    nodes: &[Node],
) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for n in nodes {
        let has = pods.iter().any(|p| {
            owned_by(p, ds)
                && p.spec.node_name == n.metadata.name
                && p.metadata.deletion_timestamp.is_none()
        });
        if has {
            continue;
        }
        let mut reasons = why_not(ds, n);
        if reasons.is_empty() {
            reasons.push("eligible: the DaemonSet controller has not created its pod yet".into());
        }
        out.push((n.metadata.name.clone(), reasons));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// How [`rollout_waiting`] marks an old pod that only waits for its turn
/// (the consequence of a stall, not its cause).
pub const IN_TURN: &str = "replaced in turn (maxUnavailable/maxSurge)";

/// Why a node still waits in a rolling update, when its node is not Ready.
pub const NODE_NOT_READY: &str = "node not Ready, updated when it is back";

/// The nodes a rollout to revision `hash` is still waiting for, and why:
/// a node that is not Ready (updated when it is back), a new pod that is
/// not ready yet (with its container's waiting reason), an old pod waiting
/// for its turn (`RollingUpdate`) or for the user to delete it
/// (`OnDelete`). Sorted by node.
pub fn rollout_waiting(
    ds: &DaemonSet,
    hash: &str,
    pods: &[Pod],
    nodes: &[Node],
) -> Vec<(String, String)> {
    let on_delete = matches!(
        ds.spec.update_strategy.r#type,
        Some(drover_api::DaemonSetUpdateStrategyType::OnDelete)
    );
    let mut out = Vec::new();
    for p in pods
        .iter()
        .filter(|p| owned_by(p, ds) && p.metadata.deletion_timestamp.is_none())
    {
        let node = &p.spec.node_name;
        let updated = p
            .metadata
            .labels
            .get(CONTROLLER_REVISION_HASH_LABEL)
            .map(String::as_str)
            == Some(hash);
        let node_ready = nodes
            .iter()
            .find(|n| &n.metadata.name == node)
            .is_some_and(|n| n.is_ready());
        let why = if !updated && !node_ready {
            NODE_NOT_READY.to_owned()
        } else if updated && !p.is_ready() {
            let waiting = p
                .status
                .container_statuses
                .iter()
                .find_map(|c| c.state.waiting.as_ref().map(|w| w.reason.clone()))
                .filter(|r| !r.is_empty());
            match waiting {
                Some(r) => format!("new pod {} not ready ({r})", p.metadata.name),
                None => format!("new pod {} not ready", p.metadata.name),
            }
        } else if !updated && on_delete {
            format!(
                "OnDelete: updated when its pod {} is deleted",
                p.metadata.name
            )
        } else if !updated {
            format!("old pod {} {IN_TURN}", p.metadata.name)
        } else {
            continue;
        };
        out.push((node.clone(), why));
    }
    out.sort();
    out.dedup();
    out
}

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
            "Rollout:	revision {} ({hash}), {progress}
",
            current.revision
        ),
    );
    if waiting.is_empty() {
        return;
    }
    w.flush();
    w.w(
        1,
        "Node	Waiting for
",
    );
    w.w(
        1,
        "----	-----------
",
    );
    for (node, why) in waiting.iter().take(ROLLOUT_LINES) {
        w.w(
            1,
            format!(
                "{node}	{why}
"
            ),
        );
    }
    if waiting.len() > ROLLOUT_LINES {
        w.w(
            1,
            format!(
                "… and {} more
",
                waiting.len() - ROLLOUT_LINES
            ),
        );
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

/// `describe pod NAME`.
pub fn describe_pod(p: &Pod, all_events: &[Event], now: SystemTime) -> String {
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
    let evs = events_for(all_events, "Pod", &m.namespace, &m.name, &m.uid);
    events(&mut w, &evs, now);
    w.finish()
}

/// Sums quantities of one resource: `cpu` in millicores (`250m`, `2`),
/// anything else in units (bytes for memory), written with the largest
/// binary suffix that divides it when any term used one.
fn sum_quantity(resource: &str, qs: &[&Quantity]) -> (String, i128) {
    let cpu = resource == "cpu";
    let value: i128 = qs
        .iter()
        .map(|q| if cpu { q.to_millis() } else { q.to_units() }.unwrap_or(0))
        .sum();
    if let [one] = qs {
        return (one.to_string(), value);
    }
    if value == 0 {
        return ("0".into(), 0);
    }
    if cpu {
        return if value % 1000 == 0 {
            (format!("{}", value / 1000), value)
        } else {
            (format!("{value}m"), value)
        };
    }
    let binary = qs.iter().any(|q| q.0.ends_with('i'));
    let (base, suffixes): (i128, [&str; 5]) = if binary {
        (1024, ["Ki", "Mi", "Gi", "Ti", "Pi"])
    } else {
        (1000, ["k", "M", "G", "T", "P"])
    };
    let mut text = value.to_string();
    let mut unit = base;
    for s in suffixes {
        if value % unit != 0 {
            break;
        }
        text = format!("{}{s}", value / unit);
        unit *= base;
    }
    (text, value)
}

fn pod_resources(p: &Pod, resource: &str, limits: bool) -> (String, i128) {
    let qs: Vec<&Quantity> = p
        .spec
        .containers
        .iter()
        .filter_map(|c| {
            if limits {
                c.resources.limits.get(resource)
            } else {
                c.resources.requests.get(resource)
            }
        })
        .collect();
    sum_quantity(resource, &qs)
}

fn percent(value: i128, of: i128) -> i128 {
    if of <= 0 {
        0
    } else {
        value * 100 / of
    }
}

/// `describe node NAME`, with the pods bound to it.
pub fn describe_node(n: &Node, pods: &[Pod], all_events: &[Event], now: SystemTime) -> String {
    let mut w = W::default();
    let m = &n.metadata;
    w.w(0, format!("Name:\t{}\n", m.name));
    w.w(0, format!("Roles:\t{}\n", node_roles(n)));
    labels_multiline(&mut w, "Labels", &m.labels);
    annotations_multiline(&mut w, "Annotations", &m.annotations);
    w.w(
        0,
        format!(
            "CreationTimestamp:\t{}\n",
            describe_time(m.creation_timestamp.as_deref())
        ),
    );
    taints_multiline(&mut w, "Taints", &n.spec.taints);
    w.w(0, format!("Unschedulable:\t{}\n", n.spec.unschedulable));
    if !n.status.conditions.is_empty() {
        w.w(
            0,
            "Conditions:\n  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage\n",
        );
        w.w(
            1,
            "----\t------\t-----------------\t------------------\t------\t-------\n",
        );
        for c in &n.status.conditions {
            w.w(
                1,
                format!(
                    "{} \t{} \t{} \t{} \t{} \t{}\n",
                    c.r#type,
                    c.status.as_ref().map(|x| x.as_str()).unwrap_or(""),
                    describe_time(c.last_heartbeat_time.as_deref()),
                    describe_time(c.last_transition_time.as_deref()),
                    c.reason,
                    c.message
                ),
            );
        }
    }
    w.w(0, "Addresses:\n");
    for a in &n.status.addresses {
        w.w(1, format!("{}:\t{}\n", a.r#type, a.address));
    }
    for (title, list) in [
        ("Capacity", &n.status.capacity),
        ("Allocatable", &n.status.allocatable),
    ] {
        if !list.is_empty() {
            w.w(0, format!("{title}:\n"));
            for (k, v) in list {
                w.w(0, format!("  {k}:\t{v}\n"));
            }
        }
    }
    let info = &n.status.node_info;
    w.w(0, "System Info:\n");
    for (k, v) in [
        ("Machine ID", &info.machine_id),
        ("System UUID", &info.system_uuid),
        ("Boot ID", &info.boot_id),
        ("Kernel Version", &info.kernel_version),
        ("OS Image", &info.os_image),
        ("Operating System", &info.operating_system),
        ("Architecture", &info.architecture),
        ("Container Runtime Version", &info.container_runtime_version),
        ("Kubelet Version", &info.kubelet_version),
    ] {
        w.w(0, format!("  {k}:\t{v}\n"));
    }
    let mut on: Vec<&Pod> = pods
        .iter()
        .filter(|p| {
            p.spec.node_name == m.name
                && !matches!(
                    p.status.phase,
                    Some(PodPhase::Succeeded) | Some(PodPhase::Failed)
                )
        })
        .collect();
    on.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    let alloc = if n.status.allocatable.is_empty() {
        &n.status.capacity
    } else {
        &n.status.allocatable
    };
    let total = |r: &str| {
        alloc
            .get(r)
            .and_then(|q| {
                if r == "cpu" {
                    q.to_millis()
                } else {
                    q.to_units()
                }
                .ok()
            })
            .unwrap_or(0)
    };
    w.w(
        0,
        format!("Non-terminated Pods:\t({} in total)\n", on.len()),
    );
    w.w(
        1,
        "Namespace\tName\t\tCPU Requests\tCPU Limits\tMemory Requests\tMemory Limits\tAge\n",
    );
    w.w(
        1,
        "---------\t----\t\t------------\t----------\t---------------\t-------------\t---\n",
    );
    let mut sums: BTreeMap<(&str, bool), Vec<&Quantity>> = BTreeMap::new();
    for p in &on {
        let cell = |r: &str, limits: bool| {
            let (text, v) = pod_resources(p, r, limits);
            format!("{text} ({}%)", percent(v, total(r)))
        };
        w.w(
            1,
            format!(
                "{}\t{}\t\t{}\t{}\t{}\t{}\t{}\n",
                p.metadata.namespace,
                p.metadata.name,
                cell("cpu", false),
                cell("cpu", true),
                cell("memory", false),
                cell("memory", true),
                age(p.metadata.creation_timestamp.as_deref(), now)
            ),
        );
        for c in &p.spec.containers {
            for (limits, list) in [(false, &c.resources.requests), (true, &c.resources.limits)] {
                for (r, q) in list {
                    sums.entry((r.as_str(), limits)).or_default().push(q);
                }
            }
        }
    }
    w.w(
        0,
        "Allocated resources:\n  (Total limits may be over 100 percent, i.e., overcommitted.)\n",
    );
    w.w(1, "Resource\tRequests\tLimits\n");
    w.w(1, "--------\t--------\t------\n");
    for r in ["cpu", "memory", "ephemeral-storage"] {
        let cell = |limits: bool| {
            let qs = sums.get(&(r, limits)).cloned().unwrap_or_default();
            let (text, v) = sum_quantity(r, &qs);
            format!("{text} ({}%)", percent(v, total(r)))
        };
        w.w(1, format!("{r}\t{}\t{}\n", cell(false), cell(true)));
    }
    let evs = events_for(all_events, "Node", "", &m.name, "");
    events(&mut w, &evs, now);
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::{parse_manifests, Manifest};

    fn now() -> SystemTime {
        crate::timefmt::parse_time("2024-05-03T16:00:00Z").unwrap()
    }

    fn parse(yaml: &str) -> Vec<Manifest> {
        parse_manifests(yaml).unwrap()
    }

    fn ds(yaml: &str) -> DaemonSet {
        match parse(yaml).remove(0) {
            Manifest::DaemonSet(d) => *d,
            _ => panic!(),
        }
    }

    fn node(yaml: &str) -> Node {
        match parse(yaml).remove(0) {
            Manifest::Node(n) => *n,
            _ => panic!(),
        }
    }

    fn pod(yaml: &str) -> Pod {
        match parse(yaml).remove(0) {
            Manifest::Pod(p) => *p,
            _ => panic!(),
        }
    }

    fn event(yaml: &str) -> Event {
        match parse(yaml).remove(0) {
            Manifest::Event(e) => *e,
            _ => panic!(),
        }
    }

    const GPU_DS: &str = r#"
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

    fn n(name: &str, labels: &str, spec: &str, status: &str) -> Node {
        node(&format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {labels}}}\nspec: {spec}\nstatus: {status}\n"
        ))
    }

    const READY: &str = r#"{conditions: [{type: Ready, status: "True"}]}"#;
    const FITS: &str = "{node-role.kubernetes.io/master: '', node-type: monitoring}";

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

    fn daemon_pod(name: &str, node: &str, phase: &str) -> Pod {
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
        let text = describe_pod(&p, &[], now());
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

    #[test]
    fn node_layout() {
        let nd = node(
            r#"
apiVersion: v1
kind: Node
metadata:
  name: n1
  creationTimestamp: "2024-05-03T12:00:00Z"
  labels: {kubernetes.io/hostname: n1, node-role.kubernetes.io/worker: ""}
spec:
  unschedulable: true
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}, {key: a, effect: NoExecute}]
status:
  conditions: [{type: Ready, status: "True", lastHeartbeatTime: "2024-05-03T15:59:59Z", lastTransitionTime: "2024-05-03T12:00:00Z", reason: AgentReady, message: agent is posting ready status}]
  addresses: [{type: InternalIP, address: 10.0.0.1}, {type: Hostname, address: n1}]
  capacity: {cpu: "2", memory: 4Gi, pods: "110"}
  nodeInfo: {kernelVersion: 6.1.0, osImage: Debian GNU/Linux 12 (bookworm), containerRuntimeVersion: "sim://1", kubeletVersion: drover-0.1.0, operatingSystem: linux, architecture: amd64}
"#,
        );
        let mut p1 = daemon_pod("master-agent-1", "n1", "Running");
        p1.metadata.creation_timestamp = Some("2024-05-03T15:00:00Z".into());
        let p2 = daemon_pod("master-agent-2", "n1", "Running");
        let done = daemon_pod("old", "n1", "Succeeded");
        let elsewhere = daemon_pod("x", "n2", "Running");
        let text = describe_node(&nd, &[p1, p2, done, elsewhere], &[], now());
        let want = "\
Name:               n1
Roles:              worker
Labels:             kubernetes.io/hostname=n1
                    node-role.kubernetes.io/worker=
Annotations:        <none>
CreationTimestamp:  Fri, 03 May 2024 12:00:00 +0000
Taints:             a:NoExecute
                    dedicated=gpu:NoSchedule
Unschedulable:      true
Conditions:
  Type    Status  LastHeartbeatTime                 LastTransitionTime                Reason       Message
  ----    ------  -----------------                 ------------------                ------       -------
  Ready   True    Fri, 03 May 2024 15:59:59 +0000   Fri, 03 May 2024 12:00:00 +0000   AgentReady   agent is posting ready status
Addresses:
  InternalIP:  10.0.0.1
  Hostname:    n1
Capacity:
  cpu:     2
  memory:  4Gi
  pods:    110
System Info:
  Machine ID:                 
  System UUID:                
  Boot ID:                    
  Kernel Version:             6.1.0
  OS Image:                   Debian GNU/Linux 12 (bookworm)
  Operating System:           linux
  Architecture:               amd64
  Container Runtime Version:  sim://1
  Kubelet Version:            drover-0.1.0
Non-terminated Pods:          (2 in total)
  Namespace                   Name              CPU Requests  CPU Limits  Memory Requests  Memory Limits  Age
  ---------                   ----              ------------  ----------  ---------------  -------------  ---
  default                     master-agent-1    100m (5%)     0 (0%)      200Mi (4%)       200Mi (4%)     60m
  default                     master-agent-2    100m (5%)     0 (0%)      200Mi (4%)       200Mi (4%)     <unknown>
Allocated resources:
  (Total limits may be over 100 percent, i.e., overcommitted.)
  Resource           Requests    Limits
  --------           --------    ------
  cpu                200m (10%)  0 (0%)
  memory             400Mi (9%)  400Mi (9%)
  ephemeral-storage  0 (0%)      0 (0%)
Events:              <none>
";
        assert_eq!(text, want, "\n{text}");
    }

    #[test]
    fn quantity_sums() {
        let q = |s: &str| Quantity(s.into());
        assert_eq!(sum_quantity("cpu", &[&q("100m"), &q("900m")]).0, "1");
        assert_eq!(sum_quantity("cpu", &[&q("100m"), &q("1")]).0, "1100m");
        assert_eq!(sum_quantity("cpu", &[&q("0.5")]), ("0.5".into(), 500));
        assert_eq!(sum_quantity("memory", &[&q("512Mi"), &q("512Mi")]).0, "1Gi");
        assert_eq!(sum_quantity("memory", &[&q("1G"), &q("500M")]).0, "1500M");
        assert_eq!(sum_quantity("memory", &[]).0, "0");
        assert_eq!(percent(1, 0), 0);
    }

    #[test]
    fn tolerations_like_kubectl() {
        let t = |y: &str| -> Toleration { serde_saphyr::from_str(y).unwrap() };
        assert_eq!(
            format_toleration(&t("{key: a, operator: Exists}")),
            "a op=Exists"
        );
        assert_eq!(
            format_toleration(&t("{operator: Exists, effect: NoSchedule}")),
            ":NoSchedule op=Exists"
        );
        assert_eq!(
            format_toleration(&t(
                "{key: k, value: v, effect: NoExecute, tolerationSeconds: 5}"
            )),
            "k=v:NoExecute for 5s"
        );
    }

    #[test]
    fn long_annotations_get_their_own_lines() {
        let mut w = W::default();
        let long = "x".repeat(200);
        let a: Labels = [
            ("a".to_string(), "short".to_string()),
            ("b".to_string(), long),
        ]
        .into();
        annotations_multiline(&mut w, "Annotations", &a);
        let text = w.finish();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Annotations:  a: short");
        assert_eq!(lines[1], "              b:");
        assert!(lines[2].starts_with("                x"));
        assert!(lines[2].ends_with("x..."));
        assert_eq!(lines[2].trim().len(), 138 + 3);
    }
}
