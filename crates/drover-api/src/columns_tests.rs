//! The tables of `kubectl get` (and `-o wide`, `-A`), as Kubernetes'
//! printers (`pkg/printers/internalversion/printers.go`) draw them.

use super::*;
use crate::timefmt::parse_time;
use serde_json::{json, Value};

const NOW: &str = "2024-05-03T16:00:00Z";

fn opts(wide: bool, all_namespaces: bool) -> TableOptions {
    TableOptions {
        wide,
        all_namespaces,
        now: parse_time(NOW).unwrap(),
    }
}

fn manifest(value: Value) -> Manifest {
    Manifest::from_value(value).unwrap()
}

fn cells(m: &Manifest, wide: bool) -> Vec<String> {
    row(m, &opts(wide, false))
}

fn pod(value: Value) -> Pod {
    serde_json::from_value(value).unwrap()
}

fn node(value: Value) -> Node {
    serde_json::from_value(value).unwrap()
}

fn event(value: Value) -> Event {
    serde_json::from_value(value).unwrap()
}

// ------------------------------------------------------------------ headers

#[test]
fn every_kind_has_the_columns_of_kubectl_get() {
    let narrow = opts(false, false);
    let cases: [(Kind, &[&str]); 12] = [
        (
            Kind::Deployment,
            &["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        ),
        (
            Kind::ReplicaSet,
            &["NAME", "DESIRED", "CURRENT", "READY", "AGE"],
        ),
        (
            Kind::DaemonSet,
            &[
                "NAME",
                "DESIRED",
                "CURRENT",
                "READY",
                "UP-TO-DATE",
                "AVAILABLE",
                "NODE SELECTOR",
                "AGE",
            ],
        ),
        (Kind::Pod, &["NAME", "READY", "STATUS", "RESTARTS", "AGE"]),
        (Kind::Node, &["NAME", "STATUS", "ROLES", "AGE", "VERSION"]),
        (
            Kind::Event,
            &["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        ),
        (
            Kind::ControllerRevision,
            &["NAME", "CONTROLLER", "REVISION", "AGE"],
        ),
        (
            Kind::PriorityClass,
            &["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"],
        ),
        (Kind::ConfigMap, &["NAME", "DATA", "AGE"]),
        (Kind::Secret, &["NAME", "TYPE", "DATA", "AGE"]),
        (Kind::Namespace, &["NAME", "STATUS", "AGE"]),
        (Kind::ServiceAccount, &["NAME", "SECRETS", "AGE"]),
    ];
    for (kind, want) in cases {
        assert_eq!(headers(kind, &narrow), want, "{kind:?}");
    }
}

#[test]
fn wide_tables_add_the_columns_of_kubectl_get_o_wide() {
    let wide = opts(true, false);
    assert_eq!(
        headers(Kind::DaemonSet, &wide),
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE SELECTOR",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    assert_eq!(
        headers(Kind::Pod, &wide),
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED NODE",
            "READINESS GATES"
        ]
    );
    assert_eq!(
        headers(Kind::Node, &wide),
        [
            "NAME",
            "STATUS",
            "ROLES",
            "AGE",
            "VERSION",
            "INTERNAL-IP",
            "EXTERNAL-IP",
            "OS-IMAGE",
            "KERNEL-VERSION",
            "CONTAINER-RUNTIME"
        ]
    );
    assert_eq!(
        headers(Kind::Event, &wide),
        [
            "LAST SEEN",
            "TYPE",
            "REASON",
            "OBJECT",
            "SUBOBJECT",
            "SOURCE",
            "MESSAGE",
            "FIRST SEEN",
            "COUNT",
            "NAME"
        ]
    );
    // Kinds without wide columns keep their narrow ones.
    assert_eq!(
        headers(Kind::ConfigMap, &wide),
        headers(Kind::ConfigMap, &opts(false, false))
    );
}

#[test]
fn all_namespaces_puts_a_namespace_column_first_for_namespaced_kinds_only() {
    let all = opts(false, true);
    for kind in Kind::ALL {
        let h = headers(kind, &all);
        let plain = headers(kind, &opts(false, false));
        if kind.namespaced() {
            assert_eq!(h[0], "NAMESPACE", "{kind:?}");
            assert_eq!(h[1..], plain[..], "{kind:?}");
        } else {
            assert_eq!(h, plain, "{kind:?}");
        }
    }
    assert_eq!(
        headers(Kind::Pod, &opts(true, true)),
        [
            "NAMESPACE",
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED NODE",
            "READINESS GATES"
        ]
    );
}

// ------------------------------------------------------------------- labels

#[test]
fn labels_print_sorted_as_key_equals_value_or_none() {
    assert_eq!(format_labels(&Labels::new()), "<none>");
    let labels: Labels = [("zone", "b"), ("disk", "ssd"), ("gpu", "")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(format_labels(&labels), "disk=ssd,gpu=,zone=b");
}

// --------------------------------------------------------------- DaemonSets

#[test]
fn a_daemon_set_row_has_its_counters_node_selector_and_wide_template() {
    let ds = manifest(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "kube-system",
                     "creationTimestamp": "2024-05-01T12:00:00Z"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/os": "linux", "disk": "ssd"},
                    "containers": [{"name": "agent", "image": "busybox:1.36"},
                                   {"name": "log", "image": "fluentd:1"}]
                }
            }
        },
        "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3,
                   "numberReady": 2, "updatedNumberScheduled": 1,
                   "numberAvailable": 2, "numberMisscheduled": 0}
    }));
    assert_eq!(
        cells(&ds, false),
        [
            "agent",
            "3",
            "3",
            "2",
            "1",
            "2",
            "disk=ssd,kubernetes.io/os=linux",
            "2d4h"
        ]
    );
    assert_eq!(
        cells(&ds, true)[8..],
        ["agent,log", "busybox:1.36,fluentd:1", "app=agent"]
    );
    assert_eq!(row(&ds, &opts(false, true))[0], "kube-system");
}

#[test]
fn deployments_and_replica_sets_as_kubectl_prints_them() {
    let wide = opts(true, false);
    for kind in [Kind::Deployment, Kind::ReplicaSet] {
        assert_eq!(
            headers(kind, &wide)[5..],
            ["CONTAINERS", "IMAGES", "SELECTOR"],
            "{kind:?}"
        );
    }
    let d = manifest(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "prod",
            "creationTimestamp": "2024-05-03T15:58:00Z"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1"},
                                        {"name": "log", "image": "busybox:1"}]}}},
        "status": {"replicas": 4, "updatedReplicas": 2, "readyReplicas": 1,
            "availableReplicas": 1}
    }));
    assert_eq!(cells(&d, false), ["web", "1/3", "2", "1", "2m"]);
    assert_eq!(
        cells(&d, true)[5..],
        ["web,log", "nginx:1,busybox:1", "app=web"]
    );
    assert_eq!(row(&d, &opts(false, true))[0], "prod");
    let rs = manifest(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-abc", "creationTimestamp": "2024-05-03T15:00:00Z"},
        "spec": {"selector": {"matchLabels": {"app": "web", "pod-template-hash": "abc"}},
            "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}},
        "status": {"replicas": 2, "readyReplicas": 1}
    }));
    // An unset spec.replicas reads as its default, 1.
    assert_eq!(cells(&rs, false), ["web-abc", "1", "2", "1", "60m"]);
    assert_eq!(
        cells(&rs, true)[5..],
        ["web", "nginx:1", "app=web,pod-template-hash=abc"]
    );
}

#[test]
fn a_daemon_set_selector_prints_like_format_label_selector() {
    let with = |selector: Value| {
        let mut ds: DaemonSet = serde_json::from_value(json!({
            "metadata": {"name": "agent"}
        }))
        .unwrap();
        ds.spec.selector = serde_json::from_value(selector).unwrap();
        format_selector(&ds)
    };
    assert_eq!(with(Value::Null), "<none>");
    assert_eq!(with(json!({})), "<none>");
    assert_eq!(
        with(json!({"matchLabels": {"app": "agent"},
                    "matchExpressions": [{"key": "tier", "operator": "In",
                                          "values": ["b", "a"]}]})),
        "app=agent,tier in (a,b)"
    );
    assert_eq!(
        with(json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": []}]})),
        "<error>"
    );
}

// --------------------------------------------------------------------- Pods

#[test]
fn a_running_pod_shows_ready_containers_status_and_wide_ip_and_node() {
    let p = manifest(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default",
                     "creationTimestamp": "2024-05-03T15:55:00Z"},
        "spec": {"nodeName": "node-1",
                 "containers": [{"name": "app", "image": "nginx"},
                                {"name": "side", "image": "busybox"}]},
        "status": {
            "phase": "Running", "podIP": "10.244.1.7",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"name": "app", "ready": true, "restartCount": 0,
                 "state": {"running": {"startedAt": "2024-05-03T15:55:10Z"}}},
                {"name": "side", "ready": true, "restartCount": 0,
                 "state": {"running": {"startedAt": "2024-05-03T15:55:10Z"}}}
            ]
        }
    }));
    assert_eq!(cells(&p, false), ["web", "2/2", "Running", "0", "5m"]);
    assert_eq!(
        cells(&p, true),
        [
            "web",
            "2/2",
            "Running",
            "0",
            "5m",
            "10.244.1.7",
            "node-1",
            "<none>",
            "<none>"
        ]
    );
    assert_eq!(
        row(&p, &opts(false, true)),
        ["default", "web", "2/2", "Running", "0", "5m"]
    );
}

#[test]
fn a_pending_pod_without_ip_or_node_shows_none_in_the_wide_columns() {
    let p = manifest(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "queued", "creationTimestamp": "2024-05-03T15:59:30Z"},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
        "status": {"phase": "Pending"}
    }));
    assert_eq!(
        cells(&p, true),
        ["queued", "0/1", "Pending", "0", "30s", "<none>", "<none>", "<none>", "<none>"]
    );
    // A pod that waits for the room preemption made on a node names it.
    let mut nominated = p.clone();
    if let Manifest::Pod(pod) = &mut nominated {
        pod.status.nominated_node_name = "n2".into();
    }
    assert_eq!(cells(&nominated, true)[7], "n2");
}

#[test]
fn a_running_container_counts_as_ready_only_once_its_readiness_passes() {
    let p = manifest(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "warming", "creationTimestamp": "2024-05-03T15:59:50Z"},
        "spec": {"containers": [{"name": "app", "image": "nginx"},
                                {"name": "side", "image": "busybox"}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [
                {"name": "app", "ready": false, "state": {"running": {}}},
                {"name": "side", "ready": true, "state": {"running": {}}}
            ]
        }
    }));
    assert_eq!(cells(&p, false), ["warming", "1/2", "Running", "0", "10s"]);
    // Ready but not running (the kubelet has not caught up): not counted.
    let stale = pod(
        json!({"spec": {"containers": [{"name": "app", "image": "i"}]},
        "status": {"phase": "Running", "containerStatuses": [
            {"name": "app", "ready": true,
             "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
        ]}}),
    );
    assert_eq!(pod_ready(&stale), "0/1");
    assert_eq!(pod_status(&stale), "Completed");
}

#[test]
fn a_crash_looping_pod_shows_the_waiting_reason_and_when_it_last_restarted() {
    let p = manifest(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "crashy", "creationTimestamp": "2024-05-03T15:00:00Z"},
        "spec": {"containers": [{"name": "app", "image": "busybox"},
                                {"name": "side", "image": "busybox"}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "app", "ready": false, "restartCount": 3,
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                 "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                     "finishedAt": "2024-05-03T15:57:00Z"}}},
                {"name": "side", "ready": true, "restartCount": 2,
                 "state": {"running": {}},
                 "lastState": {"terminated": {"exitCode": 0, "reason": "Completed",
                     "finishedAt": "2024-05-03T15:40:00Z"}}}
            ]
        }
    }));
    // RESTARTS sums the containers' restarts and dates the latest.
    assert_eq!(
        cells(&p, false),
        ["crashy", "1/2", "CrashLoopBackOff", "5 (3m ago)", "60m"]
    );
}

#[test]
fn restarts_without_a_last_termination_time_show_the_count_only() {
    let p = pod(json!({
        "status": {"containerStatuses": [
            {"name": "app", "restartCount": 2, "state": {"running": {}}}
        ]}
    }));
    assert_eq!(pod_restarts(&p, parse_time(NOW).unwrap()), "2");
    let no_restart = pod(json!({"status": {"containerStatuses": [
        {"name": "app", "restartCount": 0,
         "lastState": {"terminated": {"finishedAt": "2024-05-03T15:57:00Z"}}}
    ]}}));
    assert_eq!(pod_restarts(&no_restart, parse_time(NOW).unwrap()), "0");
}

#[test]
fn a_terminated_container_shows_its_reason_else_its_signal_else_its_exit_code() {
    let with = |terminated: Value| {
        pod_status(&pod(json!({"status": {"phase": "Running",
            "containerStatuses": [{"name": "app", "state": {"terminated": terminated}}]}})))
    };
    assert_eq!(
        with(json!({"exitCode": 137, "reason": "OOMKilled"})),
        "OOMKilled"
    );
    assert_eq!(with(json!({"exitCode": 137, "signal": 9})), "Signal:9");
    assert_eq!(with(json!({"exitCode": 2, "signal": 0})), "ExitCode:2");
    assert_eq!(with(json!({"exitCode": 0})), "ExitCode:0");
}

#[test]
fn the_first_container_with_a_reason_wins_the_status_column() {
    // kubectl walks the containers from the last to the first.
    let p = pod(json!({"status": {"phase": "Pending", "containerStatuses": [
        {"name": "a", "state": {"waiting": {"reason": "ErrImagePull"}}},
        {"name": "b", "state": {"waiting": {"reason": "ContainerCreating"}}}
    ]}}));
    assert_eq!(pod_status(&p), "ErrImagePull");
}

#[test]
fn a_completed_container_beside_a_running_one_shows_running_or_not_ready() {
    let mut p = pod(json!({"status": {"phase": "Running",
    "conditions": [{"type": "Ready", "status": "True"}],
    "containerStatuses": [
        {"name": "init-like", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
        {"name": "app", "ready": true, "state": {"running": {}}}
    ]}}));
    assert_eq!(pod_status(&p), "Running");
    p.status.conditions[0].status = Some(crate::ConditionStatus::False);
    assert_eq!(pod_status(&p), "NotReady");
    // A container that runs but is not ready does not turn Completed back.
    p.status.container_statuses[1].ready = false;
    assert_eq!(pod_status(&p), "Completed");
}

#[test]
fn the_status_reason_of_a_pod_replaces_its_phase() {
    let p = pod(json!({"status": {"phase": "Failed", "reason": "Evicted"}}));
    assert_eq!(pod_status(&p), "Evicted");
    let p = pod(json!({"status": {"phase": "Succeeded"}}));
    assert_eq!(pod_status(&p), "Succeeded");
    // The API server defaults the phase to Pending.
    assert_eq!(pod_status(&pod(json!({}))), "Pending");
}

#[test]
fn a_pod_that_is_deleted_and_not_terminal_is_terminating() {
    let deleted = |phase: &str, reason: &str| {
        pod_status(&pod(json!({
            "metadata": {"name": "p", "deletionTimestamp": "2024-05-03T15:59:00Z"},
            "status": {"phase": phase, "reason": reason}
        })))
    };
    assert_eq!(deleted("Running", ""), "Terminating");
    assert_eq!(deleted("Pending", ""), "Terminating");
    assert_eq!(deleted("Succeeded", ""), "Succeeded");
    assert_eq!(deleted("Failed", ""), "Failed");
    assert_eq!(deleted("Running", "NodeLost"), "Unknown");
    // Not deleted: never Terminating, whatever the phase.
    let live = pod(json!({"status": {"phase": "Running"}}));
    assert_eq!(pod_status(&live), "Running");
    let done = pod(json!({"status": {"phase": "Succeeded", "reason": "NodeLost"}}));
    assert_eq!(pod_status(&done), "NodeLost");
}

// -------------------------------------------------------------------- Nodes

#[test]
fn a_ready_node_shows_its_roles_version_addresses_and_system_info() {
    let n = manifest(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-1", "creationTimestamp": "2024-04-03T16:00:00Z",
            "labels": {"node-role.kubernetes.io/control-plane": "",
                       "node-role.kubernetes.io/": "",
                       "kubernetes.io/role": "worker",
                       "kubernetes.io/hostname": "node-1"}},
        "status": {
            "conditions": [{"type": "MemoryPressure", "status": "False"},
                           {"type": "Ready", "status": "True"}],
            "addresses": [{"type": "Hostname", "address": "node-1"},
                          {"type": "InternalIP", "address": "10.0.0.11"},
                          {"type": "ExternalIP", "address": "203.0.113.11"},
                          {"type": "InternalIP", "address": "10.0.0.99"}],
            "nodeInfo": {"kubeletVersion": "v1.30.0",
                         "osImage": "Debian GNU/Linux 12 (bookworm)",
                         "kernelVersion": "6.1.0-18-amd64",
                         "containerRuntimeVersion": "containerd://1.7.13"}
        }
    }));
    assert_eq!(
        cells(&n, true),
        [
            "node-1",
            "Ready",
            "control-plane,worker",
            "30d",
            "v1.30.0",
            "10.0.0.11",
            "203.0.113.11",
            "Debian GNU/Linux 12 (bookworm)",
            "6.1.0-18-amd64",
            "containerd://1.7.13"
        ]
    );
    // Nodes are not namespaced: no NAMESPACE cell with -A.
    assert_eq!(row(&n, &opts(false, true))[0], "node-1");
}

#[test]
fn a_node_without_addresses_or_system_info_shows_none_and_unknown() {
    let n = manifest(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "bare"},
        "status": {"addresses": [{"type": "Hostname", "address": "bare"}]}
    }));
    assert_eq!(
        cells(&n, true),
        [
            "bare",
            "Unknown",
            "<none>",
            "<unknown>",
            "",
            "<none>",
            "<none>",
            "<unknown>",
            "<unknown>",
            "<unknown>"
        ]
    );
}

#[test]
fn node_status_is_ready_not_ready_or_unknown_and_scheduling_disabled_when_cordoned() {
    let with = |ready: Option<&str>, unschedulable: bool| {
        let conditions: Vec<Value> = ready
            .map(|s| {
                vec![
                    json!({"type": "DiskPressure", "status": "True"}),
                    json!({"type": "Ready", "status": s}),
                ]
            })
            .unwrap_or_default();
        node_status(&node(json!({
            "spec": {"unschedulable": unschedulable},
            "status": {"conditions": conditions}
        })))
    };
    assert_eq!(with(Some("True"), false), "Ready");
    assert_eq!(with(Some("False"), false), "NotReady");
    assert_eq!(with(Some("Unknown"), false), "NotReady");
    assert_eq!(with(None, false), "Unknown");
    assert_eq!(with(Some("True"), true), "Ready,SchedulingDisabled");
    assert_eq!(with(Some("False"), true), "NotReady,SchedulingDisabled");
    assert_eq!(with(None, true), "Unknown,SchedulingDisabled");
}

// ------------------------------------------------------------------- Events

fn back_off() -> Event {
    event(json!({
        "metadata": {"name": "web.17c1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web",
                           "fieldPath": "spec.containers{app}"},
        "reason": "BackOff",
        "message": "  Back-off restarting failed container app\n",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2024-05-03T15:50:00Z",
        "lastTimestamp": "2024-05-03T15:57:00Z",
        "count": 5,
        "type": "Warning"
    }))
}

#[test]
fn an_event_row_shows_last_seen_type_reason_object_and_trimmed_message() {
    let e = Manifest::Event(Box::new(back_off()));
    assert_eq!(
        cells(&e, false),
        [
            "3m",
            "Warning",
            "BackOff",
            "pod/web",
            "Back-off restarting failed container app"
        ]
    );
    assert_eq!(
        cells(&e, true),
        [
            "3m",
            "Warning",
            "BackOff",
            "pod/web",
            "spec.containers{app}",
            "kubelet, node-1",
            "Back-off restarting failed container app",
            "10m",
            "5",
            "web.17c1"
        ]
    );
    assert_eq!(row(&e, &opts(false, true))[0], "default");
}

#[test]
fn a_repeated_event_interval_reads_last_seen_times_count_over_first_seen() {
    let now = parse_time(NOW).unwrap();
    let mut e = back_off();
    assert_eq!(event_interval(&e, now), "3m (x5 over 10m)");
    e.count = Some(2);
    assert_eq!(event_interval(&e, now), "3m (x2 over 10m)");
    e.count = Some(1);
    assert_eq!(event_interval(&e, now), "10m");
    e.count = None;
    assert_eq!(event_interval(&e, now), "10m");
}

#[test]
fn an_event_with_only_an_event_time_is_dated_by_it() {
    let e = event(json!({
        "metadata": {"name": "agent.1", "namespace": "kube-system"},
        "involvedObject": {"kind": "Node"},
        "reason": "SuccessfulCreate",
        "message": "Created pod: agent-x",
        "eventTime": "2024-05-03T15:58:00.000000Z",
        "firstTimestamp": "",
        "reportingComponent": "daemonset-controller",
        "type": "Normal"
    }));
    assert_eq!(event_first_time(&e), Some("2024-05-03T15:58:00.000000Z"));
    assert_eq!(event_last_time(&e), Some("2024-05-03T15:58:00.000000Z"));
    assert_eq!(event_sort_time(&e), parse_time("2024-05-03T15:58:00Z"));
    assert_eq!(event_interval(&e, parse_time(NOW).unwrap()), "2m");
    assert_eq!(
        cells(&Manifest::Event(Box::new(e)), true),
        [
            "2m",
            "Normal",
            "SuccessfulCreate",
            "node",
            "",
            "daemonset-controller",
            "Created pod: agent-x",
            "2m",
            "1",
            "agent.1"
        ]
    );
}

#[test]
fn an_event_without_any_time_is_of_unknown_age() {
    let e = event(json!({"metadata": {"name": "x"}, "count": 0}));
    assert_eq!(event_first_time(&e), None);
    assert_eq!(event_sort_time(&e), None);
    assert_eq!(event_interval(&e, parse_time(NOW).unwrap()), "<unknown>");
    // COUNT shows at least 1.
    assert_eq!(cells(&Manifest::Event(Box::new(e)), true)[8], "1");
}

#[test]
fn the_event_source_is_the_component_and_host_or_the_reporting_controller() {
    let mut e = back_off();
    assert_eq!(event_source(&e), "kubelet, node-1");
    e.source.host.clear();
    assert_eq!(event_source(&e), "kubelet");
    e.source.component.clear();
    e.reporting_component = "daemonset-controller".into();
    e.reporting_instance = "server-0".into();
    assert_eq!(event_source(&e), "daemonset-controller, server-0");
}

// ------------------------------------------------------ ControllerRevisions

#[test]
fn a_controller_revision_row_names_its_controller_by_kind_group_and_name() {
    let revision = |owners: Value| {
        manifest(json!({
            "apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": "agent-5d8f9c", "namespace": "kube-system",
                         "creationTimestamp": "2024-05-01T16:00:00Z",
                         "ownerReferences": owners},
            "revision": 3
        }))
    };
    let owned = revision(json!([
        {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u0"},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
         "uid": "u1", "controller": true}
    ]));
    assert_eq!(
        cells(&owned, false),
        ["agent-5d8f9c", "daemonset.apps/agent", "3", "2d"]
    );
    assert_eq!(
        row(&owned, &opts(true, true)),
        [
            "kube-system",
            "agent-5d8f9c",
            "daemonset.apps/agent",
            "3",
            "2d"
        ]
    );
    let core = revision(json!([
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u2", "controller": true}
    ]));
    assert_eq!(cells(&core, false)[1], "pod/p");
    let orphan = revision(json!([
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
         "uid": "u1", "controller": false}
    ]));
    assert_eq!(cells(&orphan, false), ["agent-5d8f9c", "<none>", "3", "2d"]);
}

// ---------------------------------------------------------- the other kinds

#[test]
fn priority_classes_config_maps_secrets_namespaces_and_service_accounts_have_rows() {
    let created = "2024-05-03T15:00:00Z";
    let pc = manifest(json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "high", "creationTimestamp": created},
        "value": 1000, "globalDefault": false
    }));
    assert_eq!(
        cells(&pc, false),
        ["high", "1000", "false", "60m", "PreemptLowerPriority"]
    );
    let cm = manifest(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": "default", "creationTimestamp": created},
        "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}
    }));
    assert_eq!(cells(&cm, false), ["cfg", "3", "60m"]);
    let secret = manifest(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s", "namespace": "default", "creationTimestamp": created},
        "type": "Opaque", "data": {"k": "dg=="}
    }));
    assert_eq!(cells(&secret, false), ["s", "Opaque", "1", "60m"]);
    let ns = manifest(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "team", "creationTimestamp": created},
        "status": {"phase": "Active"}
    }));
    assert_eq!(cells(&ns, false), ["team", "Active", "60m"]);
    assert_eq!(row(&ns, &opts(false, true)), ["team", "Active", "60m"]);
    let sa = manifest(json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": "team", "creationTimestamp": created}
    }));
    assert_eq!(cells(&sa, false), ["default", "0", "60m"]);
}
