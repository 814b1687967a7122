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
