//! The manifests users bring (copies of `../shared/manifests/` in
//! `tests/data`, inside the repository) are read
//! unchanged: every DaemonSet, Deployment and Pod parses, validates, keeps
//! every field.

use std::path::Path;

use drover_api::{parse_manifests, Manifest, ParseError};
use serde_json::Value;

const MANIFESTS: &[(&str, &str)] = &[
    (
        "01-example-daemonset.yaml",
        include_str!("data/01-example-daemonset.yaml"),
    ),
    (
        "02-node-monitoring-daemonset.yaml",
        include_str!("data/02-node-monitoring-daemonset.yaml"),
    ),
    (
        "03-busybox-rolling.yaml",
        include_str!("data/03-busybox-rolling.yaml"),
    ),
    (
        "04-node-exporter.yaml",
        include_str!("data/04-node-exporter.yaml"),
    ),
    ("05-fluentd.yaml", include_str!("data/05-fluentd.yaml")),
    (
        "06-fluentd-elasticsearch.yaml",
        include_str!("data/06-fluentd-elasticsearch.yaml"),
    ),
    (
        "07-affinity-gpu.yaml",
        include_str!("data/07-affinity-gpu.yaml"),
    ),
    (
        "08-static-pod.yaml",
        include_str!("data/08-static-pod.yaml"),
    ),
    (
        "09-pod-nodename.yaml",
        include_str!("data/09-pod-nodename.yaml"),
    ),
    (
        "10-deployment-antiaffinity.yaml",
        include_str!("data/10-deployment-antiaffinity.yaml"),
    ),
];

fn manifest(name: &str) -> &'static str {
    MANIFESTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
        .expect("known manifest")
}

fn parse_one(name: &str) -> Manifest {
    let mut manifests = parse_manifests(manifest(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(manifests.len(), 1, "{name}");
    manifests.remove(0)
}

/// Checks that the object reads back as written: its JSON form equals the
/// document's, except for the namespace that parsing defaults.
fn assert_unchanged(name: &str, parsed: &Manifest) {
    let mut original: Value = serde_saphyr::from_str(manifest(name)).expect("YAML");
    let mut written = serde_json::to_value(parsed).expect("serializes");
    if original["metadata"].get("namespace").is_none() {
        assert_eq!(written["metadata"]["namespace"], "default", "{name}");
        if let Some(meta) = written["metadata"].as_object_mut() {
            meta.remove("namespace");
        }
    }
    normalize(&mut original);
    normalize(&mut written);
    assert_eq!(written, original, "{name} does not read back as written");
}

/// Ports and quantities may be numbers in YAML; compare them as the
/// strings drover keeps for quantities.
fn normalize(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if key == "limits" || key == "requests" {
                    if let Value::Object(quantities) = v {
                        for q in quantities.values_mut() {
                            if let Value::Number(n) = q {
                                *q = Value::String(n.to_string());
                            }
                        }
                    }
                }
                normalize(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        _ => {}
    }
}

#[test]
fn every_daemon_set_deployment_and_pod_is_accepted_unchanged() {
    for (name, _) in MANIFESTS {
        let parsed = parse_one(name);
        assert!(
            matches!(
                parsed,
                Manifest::DaemonSet(_) | Manifest::Pod(_) | Manifest::Deployment(_)
            ),
            "{name}: {}",
            parsed.kind()
        );
        if let Err(e) = parsed.validate() {
            panic!("{name} is refused: {e}");
        }
        assert_unchanged(name, &parsed);

        // JSON and YAML round trips give the same object.
        let json = serde_json::to_string(&parsed).expect("JSON");
        assert_eq!(
            parse_manifests(&json).expect("JSON parses"),
            vec![parsed.clone()],
            "{name}"
        );
        let yaml = serde_saphyr::to_string(&parsed).expect("YAML");
        assert_eq!(
            parse_manifests(&yaml).expect("YAML parses"),
            vec![parsed.clone()],
            "{name}"
        );
    }
}

#[test]
fn unknown_fields_are_reported_by_path() {
    let warnings = |name: &str| -> Vec<String> {
        parse_one(name)
            .unknown_fields()
            .into_iter()
            .map(|w| w.path)
            .collect()
    };
    for name in [
        "05-fluentd.yaml",
        "01-example-daemonset.yaml",
        "02-node-monitoring-daemonset.yaml",
        "03-busybox-rolling.yaml",
        "04-node-exporter.yaml",
        "06-fluentd-elasticsearch.yaml",
        "07-affinity-gpu.yaml",
        "08-static-pod.yaml",
        "09-pod-nodename.yaml",
    ] {
        assert_eq!(warnings(name), Vec::<String>::new(), "{name}");
    }
    // The configMap volume is read, and written back out.
    let parsed = parse_one("05-fluentd.yaml");
    let Manifest::DaemonSet(ds) = &parsed else {
        panic!("a DaemonSet")
    };
    let volume = &ds.spec.template.spec.volumes[2];
    assert_eq!(volume.config_map.as_ref().unwrap().name, "fluentd-config");
    let json = serde_json::to_value(&parsed).unwrap();
    assert_eq!(
        json["spec"]["template"]["spec"]["volumes"][2]["configMap"]["name"],
        "fluentd-config"
    );
}

#[test]
fn the_deployment_is_read_with_its_anti_affinity_and_defaulted_as_the_api_server_does() {
    let Manifest::Deployment(mut d) = parse_one("10-deployment-antiaffinity.yaml") else {
        panic!("a Deployment")
    };
    assert_eq!(d.spec.replicas, Some(6));
    let anti = d.spec.template.spec.affinity.as_ref().unwrap();
    let terms = &anti
        .pod_anti_affinity
        .as_ref()
        .unwrap()
        .required_during_scheduling_ignored_during_execution;
    assert_eq!(terms[0].topology_key, "kubernetes.io/hostname");
    assert_eq!(d.spec.template.spec.containers[0].image, "busybox:latest");
    drover_api::defaults::default_deployment(&mut d);
    let v = serde_json::to_value(&*d).unwrap();
    assert_eq!(
        v["spec"]["strategy"],
        serde_json::json!({"type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert_eq!(v["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(v["spec"]["progressDeadlineSeconds"], 600);
    assert_eq!(v["spec"]["replicas"], 6);
    let c = &v["spec"]["template"]["spec"];
    assert_eq!(c["restartPolicy"], "Always");
    assert_eq!(c["terminationGracePeriodSeconds"], 30);
    assert_eq!(c["containers"][0]["imagePullPolicy"], "Always");
    assert!(Manifest::Deployment(d).validate().is_ok());
}

#[test]
fn other_kinds_that_run_replicas_are_refused_with_a_reason() {
    let text = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\n";
    assert_eq!(
        parse_manifests(text).unwrap_err().to_string(),
        "document 1 (apps/v1 StatefulSet \"db\"): kind StatefulSet is not supported by drover; \
         it runs DaemonSets, Deployments, ReplicaSets and Pods (a DaemonSet puts one pod on every \
         eligible node, which a StatefulSet with pod anti-affinity only approximates)"
    );
    let old = "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: web}\n";
    assert_eq!(
        parse_manifests(old).unwrap_err().to_string(),
        "document 1 (extensions/v1beta1 Deployment \"web\"): no matches for kind \"Deployment\" in version \"extensions/v1beta1\": drover serves it as apps/v1"
    );
}

#[test]
fn specific_fields_are_read() {
    let Manifest::DaemonSet(ds) = parse_one("03-busybox-rolling.yaml") else {
        panic!("DaemonSet expected")
    };
    let rolling = ds.spec.update_strategy.rolling_update.as_ref().unwrap();
    assert_eq!(
        rolling.max_unavailable,
        Some(drover_api::IntOrString::Int(1))
    );
    assert_eq!(
        ds.spec.template.spec.containers[0].command,
        ["sh", "-c", "sleep 3600"]
    );

    let Manifest::DaemonSet(ds) = parse_one("02-node-monitoring-daemonset.yaml") else {
        panic!("DaemonSet expected")
    };
    assert_eq!(ds.metadata.namespace, "monitoring");
    let spec = &ds.spec.template.spec;
    assert!(spec.host_network && spec.host_pid);
    assert_eq!(spec.containers[0].ports[0].host_port, Some(9100));
    assert_eq!(spec.node_selector["kubernetes.io/os"], "linux");

    let Manifest::DaemonSet(ds) = parse_one("05-fluentd.yaml") else {
        panic!("DaemonSet expected")
    };
    let c = &ds.spec.template.spec.containers[0];
    assert_eq!(
        c.resources.limits["memory"].to_units(),
        Ok(500 * 1024 * 1024)
    );
    assert_eq!(c.resources.requests["cpu"].to_millis(), Ok(100));
    let toleration = &ds.spec.template.spec.tolerations[0];
    assert_eq!(toleration.operator, None);

    let Manifest::Pod(pod) = parse_one("09-pod-nodename.yaml") else {
        panic!("Pod expected")
    };
    assert_eq!(pod.spec.node_name, "ip-10-0-1-101.ec2.internal");
    assert_eq!(pod.metadata.namespace, "default");
}

/// The copies in `tests/data` (of `../shared/manifests/`, kept in the
/// repository so that the test never depends on what lies beside it) are
/// all listed in [`MANIFESTS`], and every DaemonSet and Pod among them is
/// accepted. A missing or empty directory fails: it is part of the repository.
#[test]
fn every_copied_manifest_is_listed_and_parses() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (the manifests are part of the repository)",
                dir.display()
            )
        })
        .flatten()
        .filter(|e| e.path().extension().and_then(|x| x.to_str()) == Some("yaml"))
        .collect();
    let mut on_disk: Vec<String> = entries
        .iter()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let listed: Vec<String> = MANIFESTS.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(
        on_disk,
        listed,
        "the manifests in {} and MANIFESTS differ: list each copy there",
        dir.display()
    );
    for entry in &entries {
        let path = entry.path();
        let text = std::fs::read_to_string(&path).expect("readable");
        match parse_manifests(&text) {
            Ok(manifests) => {
                for m in &manifests {
                    assert!(
                        m.validate().is_ok(),
                        "{}: {:?}",
                        path.display(),
                        m.validate()
                    );
                }
            }
            Err(ParseError::Documents(errors)) => {
                assert!(
                    errors
                        .iter()
                        .all(|e| e.reason.contains("is not supported by drover")),
                    "{}: {errors:?}",
                    path.display()
                );
            }
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
}

#[test]
fn multi_document_streams_and_lists() {
    let stream = format!(
        "{}\n---\n{}\n---\n# only a comment\n---\n{}",
        manifest("01-example-daemonset.yaml"),
        manifest("08-static-pod.yaml"),
        manifest("09-pod-nodename.yaml")
    );
    let manifests = parse_manifests(&stream).unwrap();
    let kinds: Vec<&str> = manifests.iter().map(Manifest::kind).collect();
    assert_eq!(kinds, ["DaemonSet", "Pod", "Pod"]);
    assert_eq!(manifests[1].reference(), "pod/static-example");
    assert_eq!(manifests[0].reference(), "daemonset.apps/example-daemonset");

    let list = serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            serde_json::to_value(&manifests[0]).unwrap(),
            serde_json::to_value(&manifests[1]).unwrap(),
        ]
    });
    let from_list = parse_manifests(&list.to_string()).unwrap();
    assert_eq!(from_list, manifests[..2].to_vec());

    // Several JSON objects one after the other.
    let two = format!(
        "{}\n{}",
        serde_json::to_string(&manifests[1]).unwrap(),
        serde_json::to_string(&manifests[2]).unwrap()
    );
    assert_eq!(parse_manifests(&two).unwrap(), manifests[1..].to_vec());

    assert_eq!(parse_manifests("").unwrap(), vec![]);
    assert_eq!(parse_manifests("---\n---\n").unwrap(), vec![]);
}

#[test]
fn every_bad_document_is_reported_with_its_position() {
    let stream = format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: once}}\n---\n{}\n---\napiVersion: v1\nkind: Service\nmetadata: {{name: web}}\n---\nkind: Pod\n---\n- a\n- b\n",
        manifest("08-static-pod.yaml"),
    );
    let Err(ParseError::Documents(errors)) = parse_manifests(&stream) else {
        panic!("errors expected")
    };
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert!(lines[0].starts_with("document 1 (batch/v1 Job \"once\"): kind Job"));
    assert_eq!(
        lines[1],
        "document 3 (v1 Service \"web\"): kind Service is not supported by drover; it runs DaemonSets, Deployments, ReplicaSets and Pods"
    );
    assert_eq!(
        lines[2],
        "document 4 (Pod): apiVersion is missing (every object needs both)"
    );
    assert_eq!(
        lines[3],
        "document 5: expected an object with apiVersion and kind, found an array"
    );

    let list = r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"extensions/v1beta1","kind":"DaemonSet","metadata":{"name":"old"}}]}"#;
    assert_eq!(
        parse_manifests(list).unwrap_err().to_string(),
        "document 1, items[0] (extensions/v1beta1 DaemonSet \"old\"): no matches for kind \"DaemonSet\" in version \"extensions/v1beta1\": drover serves it as apps/v1"
    );
}

#[test]
fn type_errors_name_the_field_path() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: i\n    ports:\n    - containerPort: \"80\"\n";
    assert_eq!(
        parse_manifests(yaml).unwrap_err().to_string(),
        "document 1 (v1 Pod \"p\"): spec.containers[0].ports[0].containerPort: invalid type: string \"80\", expected i32"
    );
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {enabled: true}\n";
    assert!(parse_manifests(yaml)
        .unwrap_err()
        .to_string()
        .contains("metadata.labels.enabled: invalid type: boolean `true`, expected a string"));
    assert!(matches!(parse_manifests("a: [b"), Err(ParseError::Yaml(_))));
    assert!(matches!(
        parse_manifests("{\"a\": "),
        Err(ParseError::Json(_))
    ));
}

#[test]
fn namespaces_default_and_nodes_have_none() {
    let yaml = "apiVersion: v1\nkind: Node\nmetadata: {name: n1, namespace: x, labels: {zone: a}}\nspec:\n  taints: [{key: k, effect: NoSchedule}]\n";
    let manifests = parse_manifests(yaml).unwrap();
    let Manifest::Node(node) = &manifests[0] else {
        panic!("Node expected")
    };
    assert_eq!(node.metadata.namespace, "");
    assert_eq!(
        node.spec.taints[0].effect,
        Some(drover_api::TaintEffect::NoSchedule)
    );
    assert!(manifests[0].validate().is_ok());

    let json = serde_json::to_string(&manifests[0]).unwrap();
    let back: Manifest = serde_json::from_str(&json).unwrap();
    assert_eq!(back, manifests[0]);
}

#[test]
fn nulls_read_as_absent() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, creationTimestamp: null, labels: null}\nspec:\n  containers:\n  - {name: c, image: i, resources: {}, env: null}\nstatus: {}\n";
    let manifests = parse_manifests(yaml).unwrap();
    assert!(manifests[0].validate().is_ok());
    assert!(manifests[0].unknown_fields().is_empty());
}

#[test]
fn unknown_fields_anywhere_are_listed_in_order() {
    let yaml = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: x
  managedFields: [{manager: kubectl}]
spec:
  foo: 1
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec:
      dnsPolicy: ClusterFirstWithHostNet
      initContainers: [{name: init, image: busybox}]
      containers:
      - name: c
        image: busybox
        stdin: true
        securityContext: {seccompProfile: {type: RuntimeDefault}}
"#;
    let manifests = parse_manifests(yaml).unwrap();
    let paths: Vec<String> = manifests[0]
        .unknown_fields()
        .into_iter()
        .map(|w| w.path)
        .collect();
    assert_eq!(
        paths,
        [
            "metadata.managedFields",
            "spec.foo",
            "spec.template.spec.containers[0].securityContext.seccompProfile",
            "spec.template.spec.containers[0].stdin",
            "spec.template.spec.dnsPolicy",
            "spec.template.spec.initContainers",
        ]
    );
    assert!(manifests[0].validate().is_ok());
    let back = serde_json::to_value(&manifests[0]).unwrap();
    assert_eq!(back["spec"]["foo"], 1);
    assert_eq!(
        back["spec"]["template"]["spec"]["initContainers"][0]["name"],
        "init"
    );
}

#[test]
fn apply_with_a_namespace_places_objects_and_refuses_another() {
    use drover_api::parse_manifests_in;
    let text = r#"
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Pod, metadata: {name: a}, spec: {containers: [{name: c, image: i}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: b, namespace: team-a}, spec: {containers: [{name: c, image: i}]}}
---
apiVersion: v1
kind: Node
metadata: {name: n1}
"#;
    let ms = parse_manifests_in(text, "team-a").unwrap();
    let ns: Vec<&str> = ms.iter().map(|m| m.metadata().namespace.as_str()).collect();
    assert_eq!(ns, ["team-a", "team-a", ""]);
    // Without -n, the default namespace.
    let ms = parse_manifests(text).unwrap();
    let ns: Vec<&str> = ms.iter().map(|m| m.metadata().namespace.as_str()).collect();
    assert_eq!(ns, ["default", "team-a", ""]);

    let other = text.replace("namespace: team-a", "namespace: team-b");
    let e = parse_manifests_in(&other, "team-a")
        .unwrap_err()
        .to_string();
    assert!(e.contains("document 1, items[1]"), "{e}");
    assert!(
        e.contains("metadata.namespace \"team-b\" does not match the namespace \"team-a\""),
        "{e}"
    );
}

#[test]
fn a_typed_list_with_items_is_a_list_as_kubectl_get_o_yaml_writes_it() {
    // `kubectl get ds -o yaml` writes `kind: DaemonSetList`: its items are
    // read one by one, as `kind: List`'s are.
    let text = r#"
apiVersion: apps/v1
kind: DaemonSetList
items:
- {apiVersion: apps/v1, kind: DaemonSet, metadata: {name: a}, spec: {selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}, spec: {containers: [{name: c, image: i}]}}}}
- {apiVersion: v1, kind: Pod, metadata: {name: b}, spec: {containers: [{name: c, image: i}]}}
"#;
    let ms = parse_manifests(text).unwrap();
    let names: Vec<(&str, &str)> = ms
        .iter()
        .map(|m| (m.kind(), m.metadata().name.as_str()))
        .collect();
    assert_eq!(names, [("DaemonSet", "a"), ("Pod", "b")]);
}

#[test]
fn validate_refuses_what_the_api_would() {
    let ok = parse_manifests(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}]}\n",
    )
    .unwrap();
    assert!(ok[0].validate().is_ok());
    let bad = parse_manifests(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: Bad_Name}\nspec: {containers: [{name: c, image: i}]}\n",
    )
    .unwrap();
    let e = bad[0].validate().unwrap_err().to_string();
    assert!(e.contains("metadata.name"), "{e}");
}
