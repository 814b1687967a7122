//! Behaviour of the API objects that other crates rely on: pod conditions,
//! the warnings of each field validation mode, and the JSON drover writes.

use drover_api::{
    parse_manifests, ConditionStatus, ControllerRevision, FieldValidation, Manifest, Pod,
    UnknownField,
};
use serde_json::json;

#[test]
fn a_pod_condition_is_found_by_its_type_wherever_it_is_in_the_list() {
    let pod: Pod = serde_json::from_value(json!({
        "status": {"conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Initialized", "status": "True"},
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}
        ]}
    }))
    .unwrap();
    let ready = pod.condition("Ready").unwrap();
    assert_eq!(ready.r#type, "Ready");
    assert_eq!(ready.status, Some(ConditionStatus::False));
    assert_eq!(ready.reason, "ContainersNotReady");
    assert_eq!(
        pod.condition("PodScheduled").unwrap().r#type,
        "PodScheduled"
    );
    assert!(pod.condition("ContainersReady").is_none());
    assert!(!pod.is_ready());
}

#[test]
fn a_pod_is_ready_only_when_its_ready_condition_is_true() {
    let with = |conditions: serde_json::Value| {
        serde_json::from_value::<Pod>(json!({"status": {"conditions": conditions}}))
            .unwrap()
            .is_ready()
    };
    assert!(with(json!([
        {"type": "PodScheduled", "status": "False"},
        {"type": "Ready", "status": "True"}
    ])));
    assert!(!with(json!([{"type": "PodScheduled", "status": "True"}])));
    assert!(!with(json!([{"type": "Ready", "status": "Unknown"}])));
    assert!(!with(json!([])));
}

const POD_WITH_A_TYPO: &str = "apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  dnsPolicy: Default
  containers: [{name: c, image: i, comand: [sh]}]
";

fn typo_pod() -> Manifest {
    parse_manifests(POD_WITH_A_TYPO).unwrap().remove(0)
}

const TYPO: &str = "unknown field \"spec.containers[0].comand\"";
const NOT_SUPPORTED: &str =
    "field \"spec.dnsPolicy\" is not supported by drover (kept, but drover does not act on it)";

#[test]
fn strict_validation_refuses_fields_kubernetes_does_not_have() {
    assert_eq!(
        typo_pod().warnings_under(FieldValidation::Strict),
        Err(vec![UnknownField {
            path: "spec.containers[0].comand".into(),
            in_kubernetes: false,
        }])
    );
}

#[test]
fn warn_validation_names_the_typos_and_the_unsupported_fields() {
    assert_eq!(
        typo_pod().warnings_under(FieldValidation::Warn),
        Ok(vec![TYPO.to_string(), NOT_SUPPORTED.to_string()])
    );
}

#[test]
fn ignore_validation_names_only_the_fields_drover_does_not_act_on() {
    assert_eq!(
        typo_pod().warnings_under(FieldValidation::Ignore),
        Ok(vec![NOT_SUPPORTED.to_string()])
    );
}

#[test]
fn a_controller_revision_without_data_is_written_without_it() {
    let bare: ControllerRevision = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "agent-1"}, "revision": 1
    }))
    .unwrap();
    let written = serde_json::to_value(&bare).unwrap();
    assert_eq!(written.get("data"), None, "{written}");
    assert_eq!(written["revision"], 1);
    let with_data: ControllerRevision = serde_json::from_value(json!({
        "metadata": {"name": "agent-2"}, "revision": 2,
        "data": {"spec": {"template": {}}}
    }))
    .unwrap();
    assert_eq!(
        serde_json::to_value(&with_data).unwrap()["data"],
        json!({"spec": {"template": {}}})
    );
}

/// A node is Ready when its `Ready` condition is `True`; `False`,
/// `Unknown` (the node stopped reporting) or no condition is not ready.
#[test]
fn a_node_is_ready_only_when_its_ready_condition_is_true() {
    let with = |conditions: serde_json::Value| {
        serde_json::from_value::<drover_api::Node>(json!({"status": {"conditions": conditions}}))
            .unwrap()
            .is_ready()
    };
    assert!(with(json!([
        {"type": "MemoryPressure", "status": "False"},
        {"type": "Ready", "status": "True"}
    ])));
    assert!(!with(json!([
        {"type": "MemoryPressure", "status": "True"},
        {"type": "Ready", "status": "False"}
    ])));
    assert!(!with(json!([{"type": "Ready", "status": "Unknown"}])));
    assert!(!with(json!([{"type": "DiskPressure", "status": "True"}])));
    assert!(!with(json!([])));
}

/// The defaults the API server gives a pod: restartPolicy Always, a grace
/// period of 30 s, imagePullPolicy by the tag, ports over TCP, probes'
/// timings; values the pod sets are kept.
#[test]
fn a_pod_gets_the_defaults_the_api_server_applies() {
    let mut pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [
            {"name": "a", "image": "nginx", "ports": [{"containerPort": 80}],
             "readinessProbe": {"httpGet": {"port": 80}}},
            {"name": "b", "image": "nginx:1.25"},
            {"name": "c", "image": "nginx:1.25", "imagePullPolicy": "Never"}
        ]}
    }))
    .unwrap();
    drover_api::defaults::default_pod(&mut pod);
    let spec = serde_json::to_value(&pod.spec).unwrap();
    assert_eq!(spec["restartPolicy"], "Always");
    assert_eq!(spec["terminationGracePeriodSeconds"], 30);
    let c = &spec["containers"];
    assert_eq!(c[0]["imagePullPolicy"], "Always");
    assert_eq!(c[1]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(c[2]["imagePullPolicy"], "Never");
    assert_eq!(c[0]["ports"][0]["protocol"], "TCP");
    assert_eq!(
        c[0]["readinessProbe"],
        json!({"httpGet": {"path": "/", "port": 80, "scheme": "HTTP"},
               "timeoutSeconds": 1, "periodSeconds": 10,
               "successThreshold": 1, "failureThreshold": 3})
    );

    // Set values stay; defaulting a defaulted pod changes nothing.
    let mut set: Pod = serde_json::from_value(json!({
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "a", "image": "i"}]}
    }))
    .unwrap();
    drover_api::defaults::default_pod(&mut set);
    assert_eq!(
        serde_json::to_value(&set.spec).unwrap()["restartPolicy"],
        "Never"
    );
    assert_eq!(set.spec.termination_grace_period_seconds, Some(0));
    let once = pod.clone();
    drover_api::defaults::default_pod(&mut pod);
    assert_eq!(pod, once);

    // A Pod manifest is defaulted the same way.
    let mut m = parse_manifests("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: a, image: nginx}]\n").unwrap().remove(0);
    drover_api::defaults::default_manifest(&mut m);
    let Manifest::Pod(p) = m else { panic!() };
    assert_eq!(p.spec.termination_grace_period_seconds, Some(30));
}

/// An IntOrString field (a probe's port) is always written, whether a
/// number (even 0) or a name, as Kubernetes' `port` has no omitempty.
#[test]
fn a_port_is_written_as_a_number_or_a_name_even_when_zero() {
    for port in [json!(8080), json!(0), json!("http")] {
        let pod: Pod = serde_json::from_value(json!({
            "spec": {"containers": [{"name": "a", "image": "i",
                "livenessProbe": {"httpGet": {"port": port}},
                "readinessProbe": {"tcpSocket": {"port": port}}}]}
        }))
        .unwrap();
        let c = &serde_json::to_value(&pod).unwrap()["spec"]["containers"][0];
        assert_eq!(c["livenessProbe"]["httpGet"], json!({"port": port}));
        assert_eq!(c["readinessProbe"]["tcpSocket"], json!({"port": port}));
    }
}

/// The server reads what it stored in one pass by the kind its key names
/// (`Manifest::from_json_of`); that must be the object the two-step read
/// of any JSON (`Manifest::from_value`) gives, for every kind and for the
/// manifests users bring, and a JSON of another kind must be refused.
#[test]
fn a_stored_object_reads_the_same_in_one_pass_as_through_a_json_value() {
    let mut objects: Vec<serde_json::Value> = Vec::new();
    for text in [
        include_str!("data/01-example-daemonset.yaml"),
        include_str!("data/02-node-monitoring-daemonset.yaml"),
        include_str!("data/03-busybox-rolling.yaml"),
        include_str!("data/04-node-exporter.yaml"),
        include_str!("data/05-fluentd.yaml"),
        include_str!("data/06-fluentd-elasticsearch.yaml"),
        include_str!("data/07-affinity-gpu.yaml"),
        include_str!("data/08-static-pod.yaml"),
        include_str!("data/09-pod-nodename.yaml"),
        include_str!("data/10-deployment-antiaffinity.yaml"),
    ] {
        for m in parse_manifests(text).unwrap() {
            objects.push(serde_json::to_value(&m).unwrap());
        }
    }
    objects.extend([
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"a": "b"}},
               "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
               "status": {"conditions": [{"type": "Ready", "status": "True"}],
                          "capacity": {"cpu": "2", "memory": "1Gi"}}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns",
               "uid": "u", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
               "name": "d", "uid": "x", "controller": true}]},
               "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i",
               "resources": {"requests": {"cpu": "100m"}}}]},
               "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}),
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r"},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}},
               "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
        json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "d-1"},
               "revision": 3, "data": {"spec": {"template": {}}}}),
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "default"},
               "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Started", "count": 2}),
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
               "value": 1000}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "dg=="}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}}),
    ]);
    let mut kinds = std::collections::BTreeSet::new();
    for value in objects {
        let two_steps = Manifest::from_value(value.clone()).unwrap();
        let kind = drover_api::Kind::parse(two_steps.kind()).unwrap();
        kinds.insert(two_steps.kind());
        let json = serde_json::to_vec(&value).unwrap();
        let one_pass = Manifest::from_json_of(kind, &json).unwrap();
        assert_eq!(one_pass, two_steps, "{}", two_steps.reference());
        // The same bytes under the key of another kind are refused.
        let other = if kind == drover_api::Kind::Pod {
            drover_api::Kind::Node
        } else {
            drover_api::Kind::Pod
        };
        assert!(
            Manifest::from_json_of(other, &json).is_err(),
            "{} read as a {other:?}",
            two_steps.reference()
        );
    }
    assert_eq!(kinds.len(), drover_api::Kind::ALL.len(), "{kinds:?}");
}
