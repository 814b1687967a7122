//! More of the API server's rules, each checked as a whole (valid and
//! invalid cases, with the field path and message): qualified names,
//! lifecycle handlers, HTTP probe headers, volume mount sub-paths,
//! `envFrom` prefixes, projected volumes and their downward API files,
//! Secret immutability and Events, dockercfg Secret keys, ServiceAccount
//! names, `envFrom` sources, container resource names and metadata updates.

use drover_api::defaults::default_manifest;
use drover_api::validation::config::validate_secret_update;
use drover_api::validation::{is_qualified_name, validate_event, validate_manifest};
use drover_api::{parse_manifests, Event, Manifest, Secret};

fn one(yaml: &str) -> Manifest {
    let mut v = parse_manifests(yaml).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.len(), 1);
    let mut m = v.remove(0);
    default_manifest(&mut m);
    m
}

/// The errors of a pod whose one container `c` gets the lines `container`
/// (indented by 4) and whose spec gets `spec` (indented by 2).
fn pod_errors(container: &str, spec: &str) -> Vec<String> {
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n  - name: c\n    image: i\n{container}{spec}"
    );
    match validate_manifest(&one(&yaml)) {
        Ok(()) => Vec::new(),
        Err(invalid) => invalid.errors.iter().map(ToString::to_string).collect(),
    }
}

#[track_caller]
fn assert_errors(container: &str, spec: &str, expected: &[&str]) {
    let errors = pod_errors(container, spec);
    assert_eq!(errors, expected, "for:\n{container}{spec}");
}

const QUALIFIED_NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

#[test]
fn a_qualified_name_has_a_name_part_of_at_most_63_characters_and_an_optional_subdomain_prefix() {
    let part63 = "a".repeat(63);
    let part64 = "a".repeat(64);
    for valid in [
        "app",
        "MyName",
        "my.name_1-x",
        part63.as_str(),
        &format!("example.com/{part63}"),
        "kubernetes.io/hostname",
    ] {
        assert_eq!(is_qualified_name(valid), Vec::<String>::new(), "{valid}");
    }
    assert_eq!(
        is_qualified_name(&part64),
        ["name part must be no more than 63 characters"]
    );
    assert_eq!(
        is_qualified_name(&format!("example.com/{part64}")),
        ["name part must be no more than 63 characters"]
    );
    assert_eq!(
        is_qualified_name(""),
        ["name part must be non-empty", QUALIFIED_NAME_PART_MSG]
    );
    assert_eq!(is_qualified_name("-app"), [QUALIFIED_NAME_PART_MSG]);
    assert_eq!(is_qualified_name("/app"), ["prefix part must be non-empty"]);
    assert_eq!(
        is_qualified_name("Example.com/app"),
        ["prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]
    );
    assert_eq!(
        is_qualified_name("a/b/c"),
        ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    );
}

#[test]
fn lifecycle_handlers_need_exactly_one_valid_handler() {
    assert_errors(
        "    lifecycle:\n      postStart: {exec: {command: [\"true\"]}}\n      preStop: {httpGet: {port: 8080, path: /quit}}\n",
        "",
        &[],
    );
    assert_errors(
        "    lifecycle:\n      postStart: {tcpSocket: {port: http}}\n      preStop: {sleep: {seconds: 5}}\n",
        "",
        &[],
    );
    assert_errors(
        "    lifecycle:\n      postStart: {}\n",
        "",
        &["spec.containers[0].lifecycle.postStart: Required value: must specify a handler type"],
    );
    assert_errors(
        "    lifecycle:\n      preStop: {exec: {command: []}}\n",
        "",
        &["spec.containers[0].lifecycle.preStop.exec.command: Required value"],
    );
    assert_errors(
        "    lifecycle:\n      preStop:\n        exec: {command: [\"true\"]}\n        httpGet: {port: 80}\n",
        "",
        &["spec.containers[0].lifecycle.preStop.httpGet: Forbidden: may not specify more than 1 handler type"],
    );
    assert_errors(
        "    lifecycle:\n      postStart: {httpGet: {port: 0}}\n      preStop: {tcpSocket: {port: 65536}}\n",
        "",
        &[
            "spec.containers[0].lifecycle.postStart.httpGet.port: Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.containers[0].lifecycle.preStop.tcpSocket.port: Invalid value: 65536: must be between 1 and 65535, inclusive",
        ],
    );
}

#[test]
fn http_get_header_names_are_alphanumerics_and_dashes() {
    assert_errors(
        "    readinessProbe:\n      httpGet:\n        port: 8080\n        httpHeaders:\n        - {name: X-Trace-Id, value: a}\n        - {name: Accept, value: text/plain}\n",
        "",
        &[],
    );
    let bad = |name: &str| {
        format!("spec.containers[0].livenessProbe.httpGet.httpHeaders: Invalid value: {name:?}: a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')")
    };
    assert_errors(
        "    livenessProbe:\n      httpGet:\n        port: 8080\n        httpHeaders:\n        - {name: 'Bad Header', value: a}\n        - {name: Good-1, value: b}\n        - {name: 'X_Under', value: c}\n",
        "",
        &[&bad("Bad Header"), &bad("X_Under")],
    );
}

#[test]
fn a_mount_sub_path_is_relative_without_a_back_step() {
    let mount = |sub: &str| {
        format!("    volumeMounts:\n    - {{name: v, mountPath: /data, subPath: '{sub}'}}\n")
    };
    let volumes = "  volumes:\n  - {name: v, emptyDir: {}}\n";
    for valid in ["logs", "logs/app", "a..b/..c", "./x"] {
        assert_errors(&mount(valid), volumes, &[]);
    }
    let path = "spec.containers[0].volumeMounts[0].subPath";
    assert_errors(
        &mount("../etc"),
        volumes,
        &[&format!(
            "{path}: Invalid value: \"../etc\": must not contain '..'"
        )],
    );
    assert_errors(
        &mount("a/../../b"),
        volumes,
        &[&format!(
            "{path}: Invalid value: \"a/../../b\": must not contain '..'"
        )],
    );
    assert_errors(
        &mount("/etc"),
        volumes,
        &[&format!(
            "{path}: Invalid value: \"/etc\": must be a relative path"
        )],
    );
}

#[test]
fn an_env_from_prefix_is_an_environment_variable_name_when_set() {
    for valid in ["", "APP_", "my.prefix-", "_x"] {
        assert_errors(
            &format!("    envFrom:\n    - configMapRef: {{name: app}}\n      prefix: '{valid}'\n"),
            "",
            &[],
        );
    }
    assert_errors(
        "    envFrom:\n    - secretRef: {name: s}\n      prefix: 1APP_\n",
        "",
        &["spec.containers[0].envFrom[0].prefix: Invalid value: \"1APP_\": a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"],
    );
    assert_errors(
        "    envFrom:\n    - secretRef: {name: s}\n      prefix: '..'\n",
        "",
        &["spec.containers[0].envFrom[0].prefix: Invalid value: \"..\": must not be '..'"],
    );
}

#[test]
fn a_projected_volume_is_one_volume_type() {
    let projected = "    projected:\n      sources:\n      - configMap: {name: app}\n      - secret: {name: s}\n";
    assert_errors("", &format!("  volumes:\n  - name: v\n{projected}"), &[]);
    let errors = pod_errors(
        "",
        &format!("  volumes:\n  - name: v\n    hostPath: {{path: /x}}\n{projected}"),
    );
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].starts_with("spec.volumes[0]")
            && errors[0].ends_with(": Forbidden: may not specify more than 1 volume type"),
        "{errors:#?}"
    );
}

#[test]
fn downward_api_files_read_only_the_pod_fields_a_volume_supports() {
    let volume = |field: &str| {
        format!("  volumes:\n  - name: v\n    projected:\n      sources:\n      - downwardAPI:\n          items:\n          - {{path: f, fieldRef: {{fieldPath: {field}}}}}\n")
    };
    for valid in [
        "metadata.name",
        "metadata.namespace",
        "metadata.uid",
        "metadata.labels",
        "metadata.annotations",
    ] {
        assert_errors("", &volume(valid), &[]);
    }
    for unsupported in ["spec.nodeName", "status.podIP"] {
        assert_errors(
            "",
            &volume(unsupported),
            &[&format!("spec.volumes[0].projected.sources[0].downwardAPI.items[0].fieldRef.fieldPath: Unsupported value: {unsupported:?}: supported values: \"metadata.annotations\", \"metadata.labels\", \"metadata.name\", \"metadata.namespace\", \"metadata.uid\"")],
        );
    }
}

fn secret(yaml: &str) -> Secret {
    match one(yaml) {
        Manifest::Secret(s) => *s,
        other => panic!("unexpected {}", other.kind()),
    }
}

fn update_errors(new: &Secret, old: &Secret) -> Vec<String> {
    match validate_secret_update(new, old) {
        Ok(()) => Vec::new(),
        Err(invalid) => invalid.errors.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn only_a_secret_that_was_immutable_refuses_changes() {
    let head = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n";
    let mutable = secret(&format!("{head}stringData: {{k: a}}\n"));
    let changed = secret(&format!("{head}stringData: {{k: b}}\n"));
    let frozen = secret(&format!("{head}stringData: {{k: a}}\nimmutable: true\n"));
    let frozen_changed = secret(&format!("{head}stringData: {{k: b}}\nimmutable: true\n"));
    // A mutable Secret changes freely, and may become immutable.
    assert_eq!(update_errors(&changed, &mutable), Vec::<String>::new());
    assert_eq!(
        update_errors(&frozen_changed, &mutable),
        Vec::<String>::new()
    );
    // An immutable one may be sent again unchanged…
    assert_eq!(update_errors(&frozen, &frozen), Vec::<String>::new());
    // …but neither its data nor its immutability can change.
    let errors = update_errors(&frozen_changed, &frozen);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].starts_with("data: Forbidden: field is immutable when `immutable` is set"),
        "{errors:#?}"
    );
    assert_eq!(
        update_errors(&mutable, &frozen),
        ["immutable: Forbidden: field is immutable when `immutable` is set"]
    );
}

fn event(name: &str, namespace: &str) -> Event {
    let mut e = Event::default();
    e.metadata.name = name.into();
    e.metadata.namespace = namespace.into();
    e.involved_object.kind = "Pod".into();
    e.involved_object.name = "web-1".into();
    e.involved_object.namespace = namespace.into();
    e.reason = "Scheduled".into();
    e
}

fn event_errors(e: &Event) -> Vec<String> {
    match validate_event(e) {
        Ok(()) => Vec::new(),
        Err(invalid) => invalid.errors.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn an_event_is_a_namespaced_object_with_a_valid_name() {
    assert_eq!(
        event_errors(&event("web-1.17a2b3c4d5e6f708", "default")),
        Vec::<String>::new()
    );
    assert_eq!(
        event_errors(&event("Web_1", "default")),
        ["metadata.name: Invalid value: \"Web_1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]
    );
    assert_eq!(
        event_errors(&event("web-1.1", "")),
        ["metadata.namespace: Required value"]
    );
    assert_eq!(
        event_errors(&event("", "default")),
        ["metadata.name: Required value: name or generateName is required"]
    );
    let err = validate_event(&event("Web_1", "default")).unwrap_err();
    assert!(
        err.to_string().starts_with("Event \"Web_1\" is invalid: "),
        "{err}"
    );
}

/// The errors of `m` (as `path: message`), none when valid.
fn manifest_errors(m: &Manifest) -> Vec<String> {
    match validate_manifest(m) {
        Ok(()) => Vec::new(),
        Err(invalid) => invalid.errors.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn a_dockercfg_secret_needs_its_dockercfg_key() {
    // Kubernetes' ValidateSecret: SecretTypeDockercfg requires the
    // `.dockercfg` key (DockerConfigKey) in data.
    let missing = one("apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: default}\ntype: kubernetes.io/dockercfg\ndata: {k: eA==}\n");
    assert_eq!(
        manifest_errors(&missing),
        ["data[.dockercfg]: Required value"]
    );
    let present = one("apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: default}\ntype: kubernetes.io/dockercfg\ndata: {.dockercfg: e30=}\n");
    assert_eq!(manifest_errors(&present), Vec::<String>::new());
}

#[test]
fn a_service_account_name_is_a_dns_subdomain() {
    let ok = one("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: fluentd.logging-1, namespace: logging}\n");
    assert_eq!(manifest_errors(&ok), Vec::<String>::new());
    let bad = one(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: Bad_Name, namespace: logging}\n",
    );
    assert_eq!(
        manifest_errors(&bad),
        ["metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]
    );
}

#[test]
fn an_env_from_source_names_exactly_one_of_a_config_map_and_a_secret() {
    assert_errors("    envFrom:\n    - configMapRef: {name: app}\n", "", &[]);
    assert_errors("    envFrom:\n    - secretRef: {name: s}\n", "", &[]);
    assert_errors(
        "    envFrom:\n    - configMapRef: {name: app}\n      secretRef: {name: s}\n",
        "",
        &["spec.containers[0].envFrom[0]: Invalid value: \"\": may not have more than one field specified at a time"],
    );
    assert_errors(
        "    envFrom:\n    - prefix: X_\n",
        "",
        &["spec.containers[0].envFrom[0]: Invalid value: \"\": must specify one of: `configMapRef` or `secretRef`"],
    );
}

#[test]
fn a_container_resource_is_standard_or_a_fully_qualified_extended_resource() {
    for valid in [
        "cpu",
        "memory",
        "ephemeral-storage",
        "hugepages-2Mi",
        "example.com/gpu",
    ] {
        assert_errors(
            &format!("    resources:\n      limits: {{{valid}: '1'}}\n"),
            "",
            &[],
        );
    }
    for invalid in ["gpu", "storage"] {
        assert_errors(
            &format!("    resources:\n      requests: {{{invalid}: '1'}}\n"),
            "",
            &[&format!("spec.containers[0].resources.requests[{invalid}]: Invalid value: \"{invalid}\": must be a standard resource for containers")],
        );
    }
}

#[test]
fn an_update_may_not_change_the_name_namespace_or_a_set_uid() {
    use drover_api::validation::{validate_object_meta_update, Path};
    use drover_api::ObjectMeta;
    let meta = |name: &str, namespace: &str, uid: &str| ObjectMeta {
        name: name.into(),
        namespace: namespace.into(),
        uid: uid.into(),
        ..ObjectMeta::default()
    };
    let errors = |new: &ObjectMeta, old: &ObjectMeta| -> Vec<String> {
        validate_object_meta_update(new, old, &Path::new("metadata"))
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    let old = meta("a", "default", "u1");
    assert_eq!(errors(&old, &old), Vec::<String>::new());
    assert_eq!(
        errors(&meta("a", "default", "u2"), &old),
        ["metadata.uid: Invalid value: \"u2\": field is immutable"]
    );
    assert_eq!(
        errors(&meta("b", "other", "u1"), &old),
        [
            "metadata.name: Invalid value: \"b\": field is immutable",
            "metadata.namespace: Invalid value: \"other\": field is immutable"
        ]
    );
    // An applied manifest carries no uid: the server copies its own before
    // validating, so an empty new uid is no change.
    assert_eq!(
        errors(&meta("a", "default", ""), &old),
        Vec::<String>::new()
    );
}

#[test]
fn an_error_shows_its_value_unless_its_type_or_an_omitted_value_says_not() {
    use drover_api::validation::{BadValue, FieldError, Path};
    let p = Path::new("spec").child("x");
    // apimachinery's ErrorBody: Required, Forbidden and TooLong never show
    // the value; other types show it unless it was omitted.
    assert_eq!(
        FieldError::required(&p, "must be set").to_string(),
        "spec.x: Required value: must be set"
    );
    assert_eq!(
        FieldError::invalid(&p, "v", "must be w").to_string(),
        "spec.x: Invalid value: \"v\": must be w"
    );
    assert_eq!(
        FieldError::invalid(&p, BadValue::None, "must be w").to_string(),
        "spec.x: Invalid value: must be w"
    );
    assert_eq!(
        FieldError::invalid(&p, 3i64, "").to_string(),
        "spec.x: Invalid value: 3"
    );
}

#[test]
fn a_dns_subdomain_has_at_most_253_characters() {
    use drover_api::validation::is_dns1123_subdomain;
    let label = "a".repeat(63);
    let longest = format!("{label}.{label}.{label}.{}", "b".repeat(61));
    assert_eq!(longest.len(), 253);
    assert_eq!(is_dns1123_subdomain(&longest), Vec::<String>::new());
    let over = format!("{longest}c");
    let e = is_dns1123_subdomain(&over);
    assert_eq!(e, ["must be no more than 253 characters"], "{e:?}");
}
