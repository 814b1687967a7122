//! Validation rules, one test each, checked against the API server's words.

use drover_api::validation::{
    validate_daemon_set, validate_daemon_set_update, validate_node, validate_pod,
    validate_pod_update,
};
use drover_api::{parse_manifests, DaemonSet, IntOrString, Manifest, Node, Pod};

const BASE: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
  labels: {team: infra}
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      containers:
      - name: agent
        image: busybox:1.36
        ports:
        - {name: metrics, containerPort: 9100}
        volumeMounts:
        - {name: logs, mountPath: /var/log}
      volumes:
      - name: logs
        hostPath: {path: /var/log}
"#;

fn base() -> DaemonSet {
    match parse_manifests(BASE).expect("base parses").remove(0) {
        Manifest::DaemonSet(ds) => *ds,
        other => panic!("unexpected {}", other.kind()),
    }
}

fn from_yaml<T>(yaml: &str, pick: impl Fn(Manifest) -> Option<T>) -> T {
    let manifest = parse_manifests(yaml).expect("parses").remove(0);
    pick(manifest).expect("kind")
}

/// The messages of the errors of the base DaemonSet once changed.
fn errors(change: impl FnOnce(&mut DaemonSet)) -> Vec<String> {
    let mut ds = base();
    change(&mut ds);
    match validate_daemon_set(&ds) {
        Ok(()) => Vec::new(),
        Err(invalid) => invalid.errors.iter().map(ToString::to_string).collect(),
    }
}

fn assert_error(change: impl FnOnce(&mut DaemonSet), expected: &str) {
    let errors = errors(change);
    assert!(
        errors.iter().any(|e| e == expected),
        "expected {expected:?} among {errors:#?}"
    );
}

fn assert_valid(change: impl FnOnce(&mut DaemonSet)) {
    let errors = errors(change);
    assert!(errors.is_empty(), "unexpected errors: {errors:#?}");
}

const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn container(ds: &mut DaemonSet) -> &mut drover_api::Container {
    &mut ds.spec.template.spec.containers[0]
}

#[test]
fn the_base_is_valid() {
    assert_valid(|_| {});
}

#[test]
fn whole_error_reads_like_the_api_server() {
    let mut ds = base();
    container(&mut ds).name = "Foo_1".into();
    let err = validate_daemon_set(&ds).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("DaemonSet.apps \"agent\" is invalid: spec.template.spec.containers[0].name: Invalid value: \"Foo_1\": {LABEL_MSG}")
    );
    ds.spec.selector = None;
    let err = validate_daemon_set(&ds).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("DaemonSet.apps \"agent\" is invalid: [spec.selector: Required value, spec.template.spec.containers[0].name: Invalid value: \"Foo_1\": {LABEL_MSG}]")
    );
}

#[test]
fn object_names_are_dns_subdomains() {
    assert_valid(|ds| ds.metadata.name = "agent.v2".into());
    assert_error(
        |ds| ds.metadata.name = "Agent".into(),
        &format!("metadata.name: Invalid value: \"Agent\": {SUBDOMAIN_MSG}"),
    );
    assert_error(
        |ds| ds.metadata.name = "a".repeat(254),
        &format!(
            "metadata.name: Invalid value: \"{}\": must be no more than 253 characters",
            "a".repeat(254)
        ),
    );
    assert_error(
        |ds| ds.metadata.name.clear(),
        "metadata.name: Required value: name or generateName is required",
    );
    assert_error(
        |ds| ds.metadata.namespace = "kube.system".into(),
        "metadata.namespace: Invalid value: \"kube.system\": must not contain dots",
    );
}

#[test]
fn container_names_are_unique_dns_labels() {
    assert_error(
        |ds| container(ds).name = "a.b".into(),
        "spec.template.spec.containers[0].name: Invalid value: \"a.b\": must not contain dots",
    );
    assert_error(
        |ds| container(ds).name.clear(),
        "spec.template.spec.containers[0].name: Required value",
    );
    assert_error(
        |ds| {
            let mut second = container(ds).clone();
            second.ports.clear();
            ds.spec.template.spec.containers.push(second);
        },
        "spec.template.spec.containers[1].name: Duplicate value: \"agent\"",
    );
    assert_error(
        |ds| ds.spec.template.spec.containers.clear(),
        "spec.template.spec.containers: Required value",
    );
    assert_error(
        |ds| container(ds).image.clear(),
        "spec.template.spec.containers[0].image: Required value",
    );
}

#[test]
fn ports_are_in_range_with_valid_unique_names() {
    assert_error(
        |ds| container(ds).ports[0].container_port = 70000,
        "spec.template.spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
    );
    assert_error(
        |ds| container(ds).ports[0].container_port = 0,
        "spec.template.spec.containers[0].ports[0].containerPort: Required value",
    );
    assert_error(
        |ds| container(ds).ports[0].host_port = Some(-1),
        "spec.template.spec.containers[0].ports[0].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive",
    );
    assert_error(
        |ds| container(ds).ports[0].name = "Metrics".into(),
        "spec.template.spec.containers[0].ports[0].name: Invalid value: \"Metrics\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
    );
    assert_error(
        |ds| container(ds).ports[0].name = "a-very-long-port-name".into(),
        "spec.template.spec.containers[0].ports[0].name: Invalid value: \"a-very-long-port-name\": must be no more than 15 characters",
    );
    assert_error(
        |ds| {
            let port = container(ds).ports[0].clone();
            container(ds).ports.push(drover_api::ContainerPort {
                container_port: 9101,
                ..port
            });
        },
        "spec.template.spec.containers[0].ports[1].name: Duplicate value: \"metrics\"",
    );
    assert_error(
        |ds| container(ds).ports[0].protocol = Some("HTTP".into()),
        "spec.template.spec.containers[0].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"TCP\", \"UDP\", \"SCTP\"",
    );
}

#[test]
fn host_ports_are_unique_and_match_with_host_network() {
    assert_error(
        |ds| {
            container(ds).ports[0].host_port = Some(9100);
            let mut second = container(ds).clone();
            second.name = "second".into();
            second.ports[0].name.clear();
            ds.spec.template.spec.containers.push(second);
        },
        "spec.template.spec.containers[1].ports[0].hostPort: Duplicate value: \"TCP//9100\"",
    );
    assert_error(
        |ds| {
            ds.spec.template.spec.host_network = true;
            container(ds).ports[0].host_port = Some(9200);
        },
        "spec.template.spec.containers[0].ports[0].containerPort: Invalid value: 9100: must match `hostPort` when `hostNetwork` is true",
    );
    assert_valid(|ds| ds.spec.template.spec.host_network = true);
}

#[test]
fn selector_is_required_non_empty_and_matches_the_template() {
    assert_error(
        |ds| ds.spec.selector = None,
        "spec.selector: Required value",
    );
    assert_error(
        |ds| ds.spec.selector = Some(Default::default()),
        "spec.selector: Invalid value: {}: empty selector is invalid for daemonset",
    );
    assert_error(
        |ds| {
            ds.spec.template.metadata.labels = [("app".to_string(), "other".to_string())].into();
        },
        "spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`",
    );
    assert_error(
        |ds| {
            ds.spec.selector.as_mut().unwrap().match_expressions = vec![drover_api::LabelSelectorRequirement {
                key: "tier".into(),
                operator: Some(drover_api::LabelSelectorOperator::In),
                ..Default::default()
            }];
        },
        "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
    );
    assert_error(
        |ds| {
            ds.spec.selector.as_mut().unwrap().match_expressions = vec![drover_api::LabelSelectorRequirement {
                key: "tier".into(),
                operator: Some(drover_api::LabelSelectorOperator::Exists),
                values: vec!["x".into()],
                ..Default::default()
            }];
        },
        "spec.selector.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
    );
    assert_error(
        |ds| {
            ds.spec.selector.as_mut().unwrap().match_expressions = vec![drover_api::LabelSelectorRequirement {
                key: "tier".into(),
                operator: Some("Gt".into()),
                values: vec!["1".into()],
                ..Default::default()
            }];
        },
        "spec.selector.matchExpressions[0].operator: Invalid value: \"Gt\": not a valid selector operator",
    );
}

#[test]
fn selector_is_immutable_on_update() {
    let old = base();
    let mut new = base();
    new.spec.template.spec.containers[0].image = "busybox:1.37".into();
    assert_eq!(validate_daemon_set_update(&new, &old), Ok(()));

    new.spec
        .selector
        .as_mut()
        .unwrap()
        .match_labels
        .insert("tier".into(), "x".into());
    new.spec
        .template
        .metadata
        .labels
        .insert("tier".into(), "x".into());
    let err = validate_daemon_set_update(&new, &old).unwrap_err();
    assert_eq!(
        err.to_string(),
        "DaemonSet.apps \"agent\" is invalid: spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"agent\",\"tier\":\"x\"}}: field is immutable"
    );

    let mut renamed = base();
    renamed.metadata.name = "other".into();
    assert!(validate_daemon_set_update(&renamed, &old)
        .unwrap_err()
        .to_string()
        .contains("metadata.name: Invalid value: \"other\": field is immutable"));
}

#[test]
fn daemon_set_templates_restart_always() {
    assert_valid(|ds| {
        ds.spec.template.spec.restart_policy = Some(drover_api::RestartPolicy::Always)
    });
    assert_valid(|ds| ds.spec.template.spec.restart_policy = None);
    let errors =
        errors(|ds| ds.spec.template.spec.restart_policy = Some(drover_api::RestartPolicy::Never));
    assert_eq!(
        errors,
        ["spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""]
    );
}

#[test]
fn toleration_rules() {
    use drover_api::{TaintEffect, Toleration, TolerationOperator};
    let with =
        |t: Toleration| move |ds: &mut DaemonSet| ds.spec.template.spec.tolerations = vec![t];
    assert_valid(with(Toleration {
        operator: Some(TolerationOperator::Exists),
        ..Default::default()
    }));
    assert_error(
        with(Toleration {
            value: "x".into(),
            ..Default::default()
        }),
        "spec.template.spec.tolerations[0].operator: Invalid value: \"\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
    );
    assert_error(
        with(Toleration {
            key: "k".into(),
            operator: Some(TolerationOperator::Exists),
            value: "v".into(),
            ..Default::default()
        }),
        "spec.template.spec.tolerations[0].operator: Invalid value: {\"key\":\"k\",\"operator\":\"Exists\",\"value\":\"v\"}: value must be empty when `operator` is 'Exists'",
    );
    assert_error(
        with(Toleration {
            key: "k".into(),
            effect: Some(TaintEffect::NoSchedule),
            toleration_seconds: Some(60),
            ..Default::default()
        }),
        "spec.template.spec.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
    );
    assert_valid(with(Toleration {
        key: "k".into(),
        operator: Some(TolerationOperator::Exists),
        effect: Some(TaintEffect::NoExecute),
        toleration_seconds: Some(60),
        ..Default::default()
    }));
    assert_error(
        with(Toleration {
            key: "k".into(),
            operator: Some("Lt".into()),
            ..Default::default()
        }),
        "spec.template.spec.tolerations[0].operator: Unsupported value: \"Lt\": supported values: \"Equal\", \"Exists\"",
    );
    assert_error(
        with(Toleration {
            key: "k".into(),
            effect: Some("Evict".into()),
            ..Default::default()
        }),
        "spec.template.spec.tolerations[0].effect: Unsupported value: \"Evict\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
    );
    assert_error(
        with(Toleration {
            key: "bad key".into(),
            ..Default::default()
        }),
        "spec.template.spec.tolerations[0].key: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    );
}

fn with_affinity(yaml_terms: &'static str) -> impl FnOnce(&mut DaemonSet) {
    move |ds| {
        let doc = format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  affinity:\n    nodeAffinity:\n{yaml_terms}"
        );
        let pod: Pod = from_yaml(&doc, |m| match m {
            Manifest::Pod(p) => Some(*p),
            _ => None,
        });
        ds.spec.template.spec.affinity = pod.spec.affinity;
    }
}

#[test]
fn node_affinity_operators_and_values() {
    let prefix = "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]";
    assert_valid(with_affinity(
        "      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions:\n          - {key: zone, operator: In, values: [a, b]}\n          - {key: cores, operator: Gt, values: [\"4\"]}\n          - {key: gpu, operator: DoesNotExist}\n          matchFields:\n          - {key: metadata.name, operator: NotIn, values: [node-1]}\n",
    ));
    assert_error(
        with_affinity("      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions:\n          - {key: zone, operator: In}\n"),
        &format!("{prefix}.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"),
    );
    assert_error(
        with_affinity("      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions:\n          - {key: zone, operator: Exists, values: [a]}\n"),
        &format!("{prefix}.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
    );
    assert_error(
        with_affinity("      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions:\n          - {key: cores, operator: Lt, values: [\"1\", \"2\"]}\n"),
        &format!("{prefix}.matchExpressions[0].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"),
    );
    assert_error(
        with_affinity("      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions:\n          - {key: cores, operator: Gt, values: [many]}\n"),
        &format!("{prefix}.matchExpressions[0].values[0]: Invalid value: \"many\": must be an integer when `operator` is 'Lt' or 'Gt'"),
    );
    assert_error(
        with_affinity("      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions:\n          - {key: zone, operator: Near, values: [a]}\n"),
        &format!("{prefix}.matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator"),
    );
    assert_error(
        with_affinity("      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchFields:\n          - {key: metadata.uid, operator: In, values: [a]}\n"),
        &format!("{prefix}.matchFields[0].key: Invalid value: \"metadata.uid\": not a valid field selector key"),
    );
    assert_error(
        with_affinity("      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchFields:\n          - {key: metadata.name, operator: In, values: [a, b]}\n"),
        &format!("{prefix}.matchFields[0].values: Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector"),
    );
    assert_error(
        with_affinity("      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms: []\n"),
        "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: Required value: must have at least one node selector term",
    );
    assert_error(
        with_affinity("      preferredDuringSchedulingIgnoredDuringExecution:\n      - weight: 101\n        preference:\n          matchExpressions: [{key: a, operator: Exists}]\n"),
        "spec.template.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 101: must be in the range 1-100",
    );
}

#[test]
fn rolling_update_parameters() {
    use drover_api::RollingUpdateDaemonSet;
    let rolling = |unavailable: Option<IntOrString>, surge: Option<IntOrString>| {
        move |ds: &mut DaemonSet| {
            ds.spec.update_strategy.rolling_update = Some(RollingUpdateDaemonSet {
                max_unavailable: unavailable,
                max_surge: surge,
                ..Default::default()
            });
        }
    };
    let path = "spec.updateStrategy.rollingUpdate";
    assert_valid(rolling(Some(IntOrString::Int(2)), None));
    assert_valid(rolling(Some("25%".into()), Some(IntOrString::Int(0))));
    assert_valid(rolling(Some(IntOrString::Int(0)), Some("10%".into())));
    assert_valid(rolling(None, None));
    assert_error(
        rolling(Some(IntOrString::Int(0)), Some(IntOrString::Int(0))),
        &format!("{path}.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"),
    );
    assert_error(
        rolling(Some("0%".into()), None),
        &format!("{path}.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"),
    );
    assert_error(
        rolling(None, Some(IntOrString::Int(1))),
        &format!(
            "{path}.maxSurge: Invalid value: 1: may not be set when maxUnavailable is non-zero"
        ),
    );
    assert_error(
        rolling(Some(IntOrString::Int(-1)), None),
        &format!("{path}.maxUnavailable: Invalid value: -1: must be greater than or equal to 0"),
    );
    assert_error(
        rolling(Some("150%".into()), None),
        &format!("{path}.maxUnavailable: Invalid value: \"150%\": must not be greater than 100%"),
    );
    assert_error(
        rolling(Some("ten".into()), None),
        &format!("{path}.maxUnavailable: Invalid value: \"ten\": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"),
    );
    assert_error(
        |ds| ds.spec.update_strategy.r#type = Some("Recreate".into()),
        "spec.updateStrategy.type: Unsupported value: \"Recreate\": supported values: \"RollingUpdate\", \"OnDelete\"",
    );
    assert_error(
        |ds| ds.spec.min_ready_seconds = Some(-1),
        "spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0",
    );
    assert_error(
        |ds| ds.spec.revision_history_limit = Some(-1),
        "spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0",
    );
}

#[test]
fn label_keys_and_values() {
    let label = |key: &str, value: &str| {
        let (key, value) = (key.to_string(), value.to_string());
        move |ds: &mut DaemonSet| {
            ds.metadata.labels.insert(key, value);
        }
    };
    assert_valid(label("example.com/role", "a_b.c-1"));
    assert_valid(label("x", ""));
    assert_error(
        label("x", "-bad"),
        "metadata.labels: Invalid value: \"-bad\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
    );
    assert_error(
        label("x", &"v".repeat(64)),
        &format!(
            "metadata.labels: Invalid value: \"{}\": must be no more than 63 characters",
            "v".repeat(64)
        ),
    );
    assert_error(
        label("/x", "v"),
        "metadata.labels: Invalid value: \"/x\": prefix part must be non-empty",
    );
    assert_error(
        label("Example.com/x", "v"),
        &format!("metadata.labels: Invalid value: \"Example.com/x\": prefix part {SUBDOMAIN_MSG}"),
    );
    assert_error(label("a/b/c", "v"), "metadata.labels: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
    assert_error(
        label("x/", "v"),
        "metadata.labels: Invalid value: \"x/\": name part must be non-empty",
    );
    assert_error(
        |ds| {
            ds.spec.template.spec.node_selector.insert("zone".into(), "a b".into());
        },
        "spec.template.spec.nodeSelector: Invalid value: \"a b\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
    );
}

#[test]
fn volumes_and_mounts() {
    assert_error(
        |ds| container(ds).volume_mounts[0].name = "nope".into(),
        "spec.template.spec.containers[0].volumeMounts[0].name: Not found: \"nope\"",
    );
    assert_error(
        |ds| {
            let mount = container(ds).volume_mounts[0].clone();
            container(ds).volume_mounts.push(mount);
        },
        "spec.template.spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/var/log\": must be unique",
    );
    assert_error(
        |ds| {
            let volume = ds.spec.template.spec.volumes[0].clone();
            ds.spec.template.spec.volumes.push(volume);
        },
        "spec.template.spec.volumes[1].name: Duplicate value: \"logs\"",
    );
    assert_error(
        |ds| ds.spec.template.spec.volumes[0].host_path = None,
        "spec.template.spec.volumes[0]: Required value: must specify a volume type",
    );
    assert_error(
        |ds| ds.spec.template.spec.volumes[0].empty_dir = Some(Default::default()),
        "spec.template.spec.volumes[0].emptyDir: Forbidden: may not specify more than 1 volume type",
    );
    assert_error(
        |ds| ds.spec.template.spec.volumes[0].host_path.as_mut().unwrap().path = "/var/../etc".into(),
        "spec.template.spec.volumes[0].hostPath.path: Invalid value: \"/var/../etc\": must not contain '..'",
    );
}

#[test]
fn env_resources_and_probes() {
    let doc = r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    image: i
    env:
    - {name: 1BAD, value: x}
    - name: NODE
      value: x
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
    - name: WHERE
      valueFrom: {fieldRef: {fieldPath: spec.hostname}}
    resources:
      limits: {cpu: 500m, memory: lots}
      requests: {cpu: "1"}
    livenessProbe:
      exec: {command: ["true"]}
      httpGet: {port: 8080}
      successThreshold: 2
    readinessProbe:
      tcpSocket: {port: 0}
"#;
    let pod: Pod = from_yaml(doc, |m| match m {
        Manifest::Pod(p) => Some(*p),
        _ => None,
    });
    let err = validate_pod(&pod).unwrap_err();
    let messages: Vec<String> = err.errors.iter().map(ToString::to_string).collect();
    for expected in [
        "spec.containers[0].env[0].name: Invalid value: \"1BAD\": a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')",
        "spec.containers[0].env[1].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty",
        "spec.containers[0].env[2].valueFrom.fieldRef.fieldPath: Unsupported value: \"spec.hostname\": supported values: \"metadata.name\", \"metadata.namespace\", \"metadata.uid\", \"spec.nodeName\", \"spec.serviceAccountName\", \"status.hostIP\", \"status.podIP\", \"status.podIPs\"",
        "spec.containers[0].resources.limits[memory]: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        "spec.containers[0].resources.requests[cpu]: Invalid value: \"1\": must be less than or equal to cpu limit of 500m",
        "spec.containers[0].livenessProbe.httpGet: Forbidden: may not specify more than 1 handler type",
        "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
        "spec.containers[0].readinessProbe.tcpSocket.port: Invalid value: 0: must be between 1 and 65535, inclusive",
    ] {
        assert!(messages.iter().any(|m| m == expected), "expected {expected:?} among {messages:#?}");
    }
    assert_eq!(messages.len(), 8, "{messages:#?}");
    assert!(err.to_string().starts_with("Pod \"p\" is invalid: ["));
}

#[test]
fn pod_updates_change_only_images_and_add_tolerations() {
    let doc = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: i:1}]\n";
    let old: Pod = from_yaml(doc, |m| match m {
        Manifest::Pod(p) => Some(*p),
        _ => None,
    });
    let mut new = old.clone();
    new.spec.containers[0].image = "i:2".into();
    new.spec.node_name = "n1".into();
    new.spec.tolerations.push(drover_api::Toleration {
        operator: Some(drover_api::TolerationOperator::Exists),
        ..Default::default()
    });
    assert_eq!(validate_pod_update(&new, &old), Ok(()));
    new.spec.host_network = true;
    assert!(validate_pod_update(&new, &old)
        .unwrap_err()
        .to_string()
        .contains("spec: Forbidden: pod updates may not change fields other than"));
}

#[test]
fn node_taints() {
    let doc = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec:\n  taints:\n  - {key: a, effect: NoSchedule}\n  - {key: a, value: x, effect: NoSchedule}\n  - {key: b}\n  - {key: c, effect: Sometimes}\n";
    let node: Node = from_yaml(doc, |m| match m {
        Manifest::Node(n) => Some(*n),
        _ => None,
    });
    let err = validate_node(&node).unwrap_err();
    let messages: Vec<String> = err.errors.iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    // (The JSON of the value is not compared: its key order depends on serde_json's features.)
    assert!(messages[0].starts_with("spec.taints[1]: Duplicate value: {"));
    assert!(messages[0].ends_with("}: taints must be unique by key and effect pair"));
    assert_eq!(
        messages[1..],
        [
            "spec.taints[2].effect: Required value",
            "spec.taints[3].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
        ]
    );
    let mut node = node;
    node.metadata.name = "n1.example.com".into();
    node.spec.taints.truncate(1);
    assert_eq!(validate_node(&node), Ok(()));
}

#[test]
fn name_checks_return_the_api_server_messages() {
    use drover_api::validation::{
        is_dns1123_label, is_env_var_name, is_qualified_name, is_valid_label_value,
        is_valid_port_name,
    };
    assert!(is_dns1123_label("a-1").is_empty());
    assert_eq!(
        is_dns1123_label(&"a".repeat(64)),
        ["must be no more than 63 characters"]
    );
    assert_eq!(is_dns1123_label("-a"), [LABEL_MSG]);
    assert!(is_qualified_name("kubernetes.io/os").is_empty());
    assert!(is_valid_label_value("").is_empty());
    assert_eq!(
        is_valid_port_name("-1--"),
        [
            "must contain at least one letter (a-z)",
            "must not contain consecutive hyphens",
            "must not begin or end with a hyphen",
        ]
    );
    assert!(is_valid_port_name("http-2").is_empty());
    assert!(is_env_var_name("MY_VAR.x-1").is_empty());
    assert_eq!(is_env_var_name("..a")[0], "must not start with '..'");
}

#[test]
fn identical_errors_are_shown_once() {
    let errors = errors(|ds| {
        ds.metadata.labels.insert("a".into(), "-x".into());
        ds.metadata.labels.insert("b".into(), "-x".into());
    });
    assert_eq!(errors.len(), 2);
    let mut ds = base();
    ds.metadata.labels.insert("a".into(), "-x".into());
    ds.metadata.labels.insert("b".into(), "-x".into());
    let message = validate_daemon_set(&ds).unwrap_err().to_string();
    assert!(!message.contains("is invalid: ["), "{message}");
}

#[test]
fn surge_with_host_port_or_host_network_is_warned_about() {
    use drover_api::apps_v1::RollingUpdateDaemonSet;
    let mut ds = base();
    // No surge: nothing to warn about, even with a host port.
    ds.spec.template.spec.containers[0].ports[0].host_port = Some(9100);
    assert!(Manifest::DaemonSet(Box::new(ds.clone()))
        .warnings()
        .is_empty());

    ds.spec.update_strategy.rolling_update = Some(RollingUpdateDaemonSet {
        max_unavailable: Some(IntOrString::Int(0)),
        max_surge: Some(IntOrString::String("10%".into())),
        ..RollingUpdateDaemonSet::default()
    });
    ds.spec.template.spec.host_network = true;
    let warnings = Manifest::DaemonSet(Box::new(ds.clone())).warnings();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains("hostNetwork"), "{warnings:?}");
    assert!(
        warnings[1].contains("containers[0].ports[0].hostPort 9100"),
        "{warnings:?}"
    );
    // Still valid: a warning, not an error.
    validate_daemon_set(&ds).expect("valid");

    // A surge of 0% warns about nothing.
    ds.spec.update_strategy.rolling_update = Some(RollingUpdateDaemonSet {
        max_unavailable: Some(IntOrString::Int(1)),
        max_surge: Some(IntOrString::String("0%".into())),
        ..RollingUpdateDaemonSet::default()
    });
    assert!(Manifest::DaemonSet(Box::new(ds)).warnings().is_empty());
}

#[test]
fn a_pod_template_has_at_most_64_containers() {
    let with = |n: usize| {
        move |ds: &mut DaemonSet| {
            let container = ds.spec.template.spec.containers[0].clone();
            ds.spec.template.spec.containers = (0..n)
                .map(|i| {
                    let mut c = container.clone();
                    c.name = format!("c{i}");
                    c.ports.clear();
                    c
                })
                .collect();
        }
    };
    let at_the_limit = errors(with(64));
    assert!(at_the_limit.is_empty(), "{at_the_limit:?}");
    assert_error(
        with(65),
        "spec.template.spec.containers: Too many: 65: must have at most 64 items",
    );
}

#[test]
fn labels_have_a_count_and_a_size_limit() {
    let many = |n: usize| {
        move |ds: &mut DaemonSet| {
            ds.metadata.labels = (0..n).map(|i| (format!("k{i}"), "v".to_string())).collect();
        }
    };
    assert!(errors(many(256)).is_empty());
    assert_error(
        many(257),
        "metadata.labels: Too many: 257: must have at most 256 items",
    );
    // 200 labels of 63-byte values and 253+1+63-byte keys: over 64 KiB.
    let big = |ds: &mut DaemonSet| {
        ds.metadata.labels = (0..200)
            .map(|i| {
                let prefix = format!("{}{i:03}.example.com", "p".repeat(200));
                (format!("{prefix}/{}", "n".repeat(63)), "v".repeat(63))
            })
            .collect();
    };
    assert_error(
        big,
        "metadata.labels: Too long: must have at most 65536 bytes",
    );
    // Annotations: 256 KiB in all, as Kubernetes.
    assert_error(
        |ds| {
            ds.metadata
                .annotations
                .insert("a".into(), "x".repeat(256 * 1024));
        },
        "metadata.annotations: Too long: must have at most 262144 bytes",
    );
}

#[test]
fn long_values_are_shortened_in_messages() {
    let long = "a".repeat(10_000);
    let mut ds = base();
    ds.metadata.name = long.clone();
    let e = validate_daemon_set(&ds).unwrap_err().to_string();
    assert!(e.len() < 1_000, "{} bytes: {e}", e.len());
    let shown = format!("\"{}\"\u{2026} (9744 more bytes)", "a".repeat(256));
    assert!(
        e.starts_with(&format!("DaemonSet.apps {shown} is invalid: ")),
        "{e}"
    );
    assert!(
        e.contains(&format!(
            "metadata.name: Invalid value: {shown}: must be no more than 253 characters"
        )),
        "{e}"
    );
    // Multi-byte characters are cut at a boundary.
    let accented = format!("a{}", "é".repeat(200));
    let (shown, more) = drover_api::validation::shorten(&accented);
    assert_eq!((shown.len(), more), (255, 146));
}
