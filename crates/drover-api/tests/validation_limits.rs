//! The API server's limits, checked at the limit and one past it (with the
//! field path and message): Secret sizes, user and group ids, annotation
//! sizes, DNS label lengths, controller owner references, PriorityClass
//! values and preemption policies, env sources, startup probes, the
//! maxSurge warnings of host ports, and new pods with or without a node.

use drover_api::apps_v1::RollingUpdateDaemonSet;
use drover_api::defaults::default_manifest;
use drover_api::validation::{
    is_dns1123_label, validate_manifest, DNS1123_LABEL_MAX_LENGTH, TOTAL_ANNOTATION_SIZE_LIMIT,
};
use drover_api::{parse_manifests, IntOrString, Manifest, Pod, Secret};

fn parse(yaml: &str) -> Manifest {
    let mut v = parse_manifests(yaml).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.len(), 1);
    v.remove(0)
}

fn defaulted(yaml: &str) -> Manifest {
    let mut m = parse(yaml);
    default_manifest(&mut m);
    m
}

/// The errors of `m` (as `path: message`), none when valid.
fn errors_of(m: &Manifest) -> Vec<String> {
    match validate_manifest(m) {
        Ok(()) => Vec::new(),
        Err(invalid) => invalid.errors.iter().map(ToString::to_string).collect(),
    }
}

/// The errors of a pod whose one container `c` gets the lines `container`
/// (indented by 4) and whose spec gets `spec` (indented by 2).
fn pod_errors(container: &str, spec: &str) -> Vec<String> {
    errors_of(&defaulted(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  nodeName: n1\n  containers:\n  - name: c\n    image: i\n{container}{spec}"
    )))
}

const MIB: usize = 1024 * 1024;

fn secret(data: &[(&str, usize)], string_data: &[(&str, usize)]) -> Manifest {
    let mut s = Secret::default();
    s.metadata.name = "s".into();
    s.metadata.namespace = "default".into();
    for (key, len) in data {
        let bytes = vec![b'x'; *len];
        s.data.insert(
            (*key).into(),
            drover_api::validation::config::encode_base64(&bytes),
        );
    }
    for (key, len) in string_data {
        s.string_data.insert((*key).into(), "y".repeat(*len));
    }
    Manifest::Secret(Box::new(s))
}

const SECRET_TOO_LONG: &str = "data: Too long: must have at most 1048576 bytes";

#[test]
fn a_secret_holds_at_most_one_mebibyte_of_values_data_and_string_data_together() {
    // Only the (decoded) values count, not the keys, as Kubernetes'
    // ValidateSecret: exactly 1 MiB is allowed, one byte more is refused.
    assert_eq!(
        errors_of(&secret(&[("key", MIB)], &[])),
        Vec::<String>::new()
    );
    assert_eq!(
        errors_of(&secret(&[("key", MIB + 1)], &[])),
        [SECRET_TOO_LONG]
    );
    // Before stringData is folded into data, both count together.
    assert_eq!(errors_of(&secret(&[], &[("k", MIB)])), Vec::<String>::new());
    assert_eq!(
        errors_of(&secret(&[], &[("k", MIB + 1)])),
        [SECRET_TOO_LONG]
    );
    let half = MIB / 2;
    assert_eq!(
        errors_of(&secret(&[("a", half)], &[("b", half)])),
        Vec::<String>::new()
    );
    assert_eq!(
        errors_of(&secret(&[("a", half)], &[("b", 2), ("c", half - 1)])),
        [SECRET_TOO_LONG]
    );
    assert_eq!(
        errors_of(&secret(&[("a", half), ("b", 1)], &[("c", half)])),
        [SECRET_TOO_LONG]
    );
}

#[test]
fn a_secret_type_is_free_form_and_only_built_in_types_require_keys() {
    // Kubernetes' ValidateSecret puts no constraint on the type's format:
    // an empty type is Opaque, a custom one is accepted as it is.
    for ty in [
        "",
        "Opaque",
        "example.com/api-credentials",
        "my custom type!",
    ] {
        let mut m = parse("apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: default}\ndata: {k: eA==}\n");
        let Manifest::Secret(s) = &mut m else {
            panic!()
        };
        s.r#type = ty.into();
        assert_eq!(errors_of(&m), Vec::<String>::new(), "type {ty:?}");
    }
    let m = parse("apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: default}\ntype: kubernetes.io/tls\ndata: {k: eA==}\n");
    assert_eq!(
        errors_of(&m),
        [
            "data[tls.crt]: Required value",
            "data[tls.key]: Required value"
        ]
    );
}

#[test]
fn user_and_group_ids_are_between_0_and_2147483647() {
    // apimachinery's IsValidUserID/IsValidGroupID: 0 ..= math.MaxInt32.
    const RANGE: &str = "must be between 0 and 2147483647, inclusive";
    for id in [0, 1000, 2_147_483_647] {
        assert_eq!(
            pod_errors(
                &format!("    securityContext: {{runAsUser: {id}, runAsGroup: {id}}}\n"),
                &format!("  securityContext: {{runAsUser: {id}, runAsGroup: {id}, fsGroup: {id}, supplementalGroups: [{id}]}}\n"),
            ),
            Vec::<String>::new(),
            "id {id}"
        );
    }
    for id in [-1i64, 2_147_483_648] {
        assert_eq!(
            pod_errors(
                &format!("    securityContext: {{runAsUser: {id}, runAsGroup: {id}}}\n"),
                &format!("  securityContext: {{runAsUser: {id}, runAsGroup: {id}, fsGroup: {id}, supplementalGroups: [0, {id}]}}\n"),
            ),
            [
                format!("spec.containers[0].securityContext.runAsUser: Invalid value: {id}: {RANGE}"),
                format!("spec.containers[0].securityContext.runAsGroup: Invalid value: {id}: {RANGE}"),
                format!("spec.securityContext.runAsUser: Invalid value: {id}: {RANGE}"),
                format!("spec.securityContext.runAsGroup: Invalid value: {id}: {RANGE}"),
                format!("spec.securityContext.fsGroup: Invalid value: {id}: {RANGE}"),
                format!("spec.securityContext.supplementalGroups[1]: Invalid value: {id}: {RANGE}"),
            ],
            "id {id}"
        );
    }
}

#[test]
fn annotations_hold_at_most_256_kib_keys_and_values_together() {
    let cm = |value_len: usize| {
        let mut m =
            parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n");
        let Manifest::ConfigMap(cm) = &mut m else {
            panic!()
        };
        // The key "a" counts too.
        cm.metadata
            .annotations
            .insert("a".into(), "v".repeat(value_len));
        m
    };
    assert_eq!(TOTAL_ANNOTATION_SIZE_LIMIT, 256 * 1024);
    assert_eq!(
        errors_of(&cm(TOTAL_ANNOTATION_SIZE_LIMIT - 1)),
        Vec::<String>::new()
    );
    assert_eq!(
        errors_of(&cm(TOTAL_ANNOTATION_SIZE_LIMIT)),
        ["metadata.annotations: Too long: must have at most 262144 bytes"]
    );
}

#[test]
fn a_dns_label_has_at_most_63_characters() {
    assert_eq!(DNS1123_LABEL_MAX_LENGTH, 63);
    assert_eq!(is_dns1123_label(&"a".repeat(63)), Vec::<String>::new());
    assert_eq!(
        is_dns1123_label(&"a".repeat(64)),
        ["must be no more than 63 characters"]
    );
    assert_eq!(pod_errors("", ""), Vec::<String>::new());
    let c63 = "c".repeat(63);
    let c64 = "c".repeat(64);
    assert_eq!(
        pod_errors(&format!("  - name: {c63}\n    image: i\n"), ""),
        Vec::<String>::new()
    );
    assert_eq!(
        pod_errors(&format!("  - name: {c64}\n    image: i\n"), ""),
        [format!(
            "spec.containers[1].name: Invalid value: \"{c64}\": must be no more than 63 characters"
        )]
    );
}

fn owned_pod(owners: &str) -> Manifest {
    defaulted(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  ownerReferences:\n{owners}spec:\n  nodeName: n1\n  containers:\n  - {{name: c, image: i}}\n"
    ))
}

#[test]
fn at_most_one_owner_reference_is_the_controller() {
    let a = "  - {apiVersion: apps/v1, kind: DaemonSet, name: a, uid: u1, controller: true}\n";
    let b = "  - {apiVersion: apps/v1, kind: ReplicaSet, name: b, uid: u2, controller: true}\n";
    let c = "  - {apiVersion: v1, kind: Node, name: c, uid: u3, controller: false}\n";
    assert_eq!(errors_of(&owned_pod(a)), Vec::<String>::new());
    assert_eq!(
        errors_of(&owned_pod(&format!("{a}{c}"))),
        Vec::<String>::new()
    );
    let errors = errors_of(&owned_pod(&format!("{a}{c}{b}")));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("metadata.ownerReferences: Invalid value: ")
            && errors[0].ends_with(
                ": Only one reference can have Controller set to true. Found \"true\" in references for DaemonSet/a and ReplicaSet/b"
            ),
        "{errors:?}"
    );
}

fn priority_class(value: i64, policy: Option<&str>) -> Manifest {
    let policy = policy
        .map(|p| format!("preemptionPolicy: {p}\n"))
        .unwrap_or_default();
    parse(&format!(
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: high}}\nvalue: {value}\n{policy}"
    ))
}

#[test]
fn a_priority_class_value_is_at_most_one_billion_and_its_policy_one_of_two() {
    for value in [-5, 0, 1_000_000_000] {
        assert_eq!(
            errors_of(&priority_class(value, None)),
            Vec::<String>::new()
        );
    }
    assert_eq!(
        errors_of(&priority_class(1_000_000_001, None)),
        ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]
    );
    for policy in ["Never", "PreemptLowerPriority"] {
        assert_eq!(
            errors_of(&priority_class(10, Some(policy))),
            Vec::<String>::new(),
            "{policy}"
        );
    }
    for policy in ["Always", "never", "\"\""] {
        let shown = if policy == "\"\"" { "" } else { policy };
        assert_eq!(
            errors_of(&priority_class(10, Some(policy))),
            [format!(
                "preemptionPolicy: Unsupported value: \"{shown}\": supported values: \"Never\", \"PreemptLowerPriority\""
            )]
        );
    }
}

#[test]
fn an_env_var_takes_its_value_from_exactly_one_source() {
    let field = "fieldRef: {fieldPath: metadata.name}";
    let resource = "resourceFieldRef: {resource: limits.cpu}";
    let env = |from: &str| format!("    env:\n    - name: V\n      valueFrom: {{{from}}}\n");
    for one in [field, resource] {
        assert_eq!(pod_errors(&env(one), ""), Vec::<String>::new(), "{one}");
    }
    assert_eq!(
        pod_errors(&env(&format!("{field}, {resource}")), ""),
        ["spec.containers[0].env[0].valueFrom: Invalid value: \"\": may not have more than one field specified at a time"]
    );
    assert_eq!(
        pod_errors(&env(""), ""),
        ["spec.containers[0].env[0].valueFrom: Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"]
    );
}

#[test]
fn a_startup_probe_succeeds_after_exactly_one_success() {
    let probe = |threshold: i32| {
        format!("    startupProbe:\n      exec: {{command: [\"true\"]}}\n      successThreshold: {threshold}\n")
    };
    assert_eq!(pod_errors(&probe(1), ""), Vec::<String>::new());
    assert_eq!(
        pod_errors(&probe(2), ""),
        ["spec.containers[0].startupProbe.successThreshold: Invalid value: 2: must be 1"]
    );
}

#[test]
fn only_a_host_port_above_zero_is_warned_about_with_a_surge() {
    let mut ds = match parse("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d, namespace: default}\nspec:\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      containers:\n      - name: c\n        image: i\n        ports:\n        - {containerPort: 80, hostPort: 0}\n        - {containerPort: 81, hostPort: 1}\n") {
        Manifest::DaemonSet(ds) => *ds,
        other => panic!("{}", other.kind()),
    };
    ds.spec.update_strategy.rolling_update = Some(RollingUpdateDaemonSet {
        max_unavailable: Some(IntOrString::Int(0)),
        max_surge: Some(IntOrString::Int(1)),
        ..RollingUpdateDaemonSet::default()
    });
    let warnings = Manifest::DaemonSet(Box::new(ds.clone())).warnings();
    assert_eq!(
        warnings,
        ["spec.updateStrategy.rollingUpdate.maxSurge with spec.template.spec.containers[0].ports[1].hostPort 1: the new pod cannot bind the port while the old one holds it, so the rollout stalls; use maxUnavailable instead of maxSurge"]
    );
    ds.spec.template.spec.containers[0].ports[1].host_port = Some(0);
    assert!(Manifest::DaemonSet(Box::new(ds)).warnings().is_empty());
}

fn new_pod(owner_kind: Option<&str>, pinned: bool, node_name: &str) -> Pod {
    let owners = owner_kind
        .map(|kind| {
            format!("  ownerReferences:\n  - {{apiVersion: apps/v1, kind: {kind}, name: o, uid: u, controller: true}}\n")
        })
        .unwrap_or_default();
    let affinity = if pinned {
        "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchFields:\n          - {key: metadata.name, operator: In, values: [n1]}\n"
    } else {
        ""
    };
    match parse(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n{owners}spec:\n  nodeName: \"{node_name}\"\n{affinity}  containers:\n  - {{name: c, image: i}}\n"
    )) {
        Manifest::Pod(p) => *p,
        other => panic!("{}", other.kind()),
    }
}

/// A new pod is valid with or without `spec.nodeName`, whoever owns it:
/// one without waits Pending for the scheduler (or, a DaemonSet's pod
/// pinned to its node, for the DaemonSet controller).
#[test]
fn a_new_pod_is_valid_with_or_without_a_node_name() {
    for owner in [None, Some("DaemonSet"), Some("ReplicaSet")] {
        for pinned in [false, true] {
            for node in ["n1", ""] {
                let pod = new_pod(owner, pinned, node);
                if let Err(invalid) = validate_manifest(&Manifest::Pod(Box::new(pod))) {
                    panic!("{owner:?} pinned {pinned} node {node:?}: {invalid}");
                }
            }
        }
    }
}

#[test]
fn a_stream_of_thousands_of_documents_parses_and_one_past_the_limit_is_refused_clearly() {
    let doc =
        |i: usize| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{i}}}\n");
    let text: String = (0..3_000).map(doc).collect();
    assert_eq!(
        parse_manifests(&text).expect("3,000 documents").len(),
        3_000
    );
    let max = drover_api::manifest::MAX_DOCUMENTS;
    let text: String = (0..=max).map(doc).collect();
    let e = parse_manifests(&text).expect_err("one document past the limit");
    let said = e.to_string();
    assert!(
        said.contains(&format!("more than {max} YAML documents")),
        "{said}"
    );
    assert!(said.contains("split the file"), "{said}");
}
