//! The columns of kubectl's tables for drover's kinds (`-o wide` and `-A`
//! included): the headers and each object's cells, as the API server's
//! `Table` answers and `drover get` print them. Pure: objects and "now" in,
//! strings out.

use crate::selector::Selector;
use crate::timefmt::age;
use crate::{
    Container, ContainerStatus, ControllerRevision, DaemonSet, Event, Kind, LabelSelector, Labels,
    Manifest, Node, Pod, PodPhase,
};
use std::time::SystemTime;

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
        Kind::Deployment => {
            h.extend(["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
            if o.wide {
                h.extend(["CONTAINERS", "IMAGES", "SELECTOR"]);
            }
        }
        Kind::ReplicaSet => {
            h.extend(["NAME", "DESIRED", "CURRENT", "READY", "AGE"]);
            if o.wide {
                h.extend(["CONTAINERS", "IMAGES", "SELECTOR"]);
            }
        }
        Kind::Pod => {
            h.extend(["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
            if o.wide {
                h.extend(["IP", "NODE", "NOMINATED NODE", "READINESS GATES"]);
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
        Manifest::Deployment(d) => {
            let st = &d.status;
            r.extend([
                d.metadata.name.clone(),
                format!("{}/{}", st.ready_replicas, d.spec.replicas.unwrap_or(1)),
                st.updated_replicas.to_string(),
                st.available_replicas.to_string(),
                age(d.metadata.creation_timestamp.as_deref(), o.now),
            ]);
            if o.wide {
                r.extend(wide_cells(
                    &d.spec.template.spec.containers,
                    d.spec.selector.as_ref(),
                ));
            }
        }
        Manifest::ReplicaSet(rs) => {
            r.extend([
                rs.metadata.name.clone(),
                rs.spec.replicas.unwrap_or(1).to_string(),
                rs.status.replicas.to_string(),
                rs.status.ready_replicas.to_string(),
                age(rs.metadata.creation_timestamp.as_deref(), o.now),
            ]);
            if o.wide {
                r.extend(wide_cells(
                    &rs.spec.template.spec.containers,
                    rs.spec.selector.as_ref(),
                ));
            }
        }
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
    format_label_selector(ds.spec.selector.as_ref())
}

/// A label selector as kubectl prints it (see [`format_selector`]).
pub fn format_label_selector(selector: Option<&LabelSelector>) -> String {
    let Some(sel) = selector else {
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
        r.extend(wide_cells(
            &ds.spec.template.spec.containers,
            ds.spec.selector.as_ref(),
        ));
    }
    r
}

/// The CONTAINERS, IMAGES and SELECTOR cells that `-o wide` adds to the
/// tables of DaemonSets, Deployments and ReplicaSets.
fn wide_cells(containers: &[Container], selector: Option<&LabelSelector>) -> [String; 3] {
    [
        containers
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(","),
        containers
            .iter()
            .map(|c| c.image.as_str())
            .collect::<Vec<_>>()
            .join(","),
        format_label_selector(selector),
    ]
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
        // The node the scheduler's preemption made room on, for a pod that
        // waits for it.
        r.push(or_none(&p.status.nominated_node_name));
        // drover keeps no `spec.readinessGates`: kubectl's `<none>`.
        r.push("<none>".to_string());
    }
    r
}

/// STATUS of a node: `Ready`, `NotReady` (Ready is False or Unknown) or
/// `Unknown` (no Ready condition), with `,SchedulingDisabled` when cordoned.
pub fn node_status(n: &Node) -> String {
    let mut s = match n.condition(crate::node_condition::READY) {
        Some(c) if c.status == Some(crate::ConditionStatus::True) => "Ready".to_string(),
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

#[cfg(test)]
#[path = "columns_tests.rs"]
mod tests;
