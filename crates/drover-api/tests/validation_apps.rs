//! Deployments and ReplicaSets: the API server's defaults
//! (`SetDefaults_Deployment`, `SetDefaults_ReplicaSet`) and every rule of
//! `ValidateDeploymentSpec` and `ValidateReplicaSetSpec` drover has, each
//! with its field path and message; a real Deployment read and written
//! back unchanged.

use drover_api::defaults::default_manifest;
use drover_api::validation::{validate_manifest, validate_manifest_update};
use drover_api::{parse_manifests, Manifest};

fn one(yaml: &str) -> Manifest {
    let mut v = parse_manifests(yaml).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.len(), 1);
    v.remove(0)
}

/// A Deployment with `spec` lines added (indented by 2) to a valid one.
fn deployment(spec: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n{spec}  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec: {{containers: [{{name: c, image: i}}]}}\n"
    )
}

fn errors(yaml: &str) -> Vec<String> {
    let mut m = one(yaml);
    default_manifest(&mut m);
    match validate_manifest(&m) {
        Ok(()) => Vec::new(),
        Err(invalid) => invalid.errors.iter().map(ToString::to_string).collect(),
    }
}

#[track_caller]
fn assert_errors(yaml: &str, expected: &[&str]) {
    assert_eq!(errors(yaml), expected, "for:\n{yaml}");
}

const REAL: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx-deployment
  namespace: web
  labels:
    app: nginx
  annotations:
    kubernetes.io/change-cause: image 1.25
spec:
  replicas: 3
  revisionHistoryLimit: 5
  minReadySeconds: 5
  progressDeadlineSeconds: 120
  selector:
    matchLabels:
      app: nginx
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 1
      maxUnavailable: 0
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
        ports:
        - containerPort: 80
        resources:
          requests:
            cpu: 10m
        readinessProbe:
          httpGet:
            path: /
            port: 80
"#;

#[test]
fn a_real_deployment_reads_back_as_written_in_json_and_yaml() {
    let m = one(REAL);
    assert!(matches!(m, Manifest::Deployment(_)));
    assert_eq!(m.reference(), "deployment.apps/nginx-deployment");
    assert_eq!(validate_manifest(&m), Ok(()));
    assert!(m.warnings().is_empty(), "{:?}", m.warnings());
    let original: serde_json::Value = serde_saphyr::from_str(REAL).unwrap();
    let mut written = serde_json::to_value(&m).unwrap();
    written["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] =
        serde_json::json!("10m");
    assert_eq!(written, original);
    let json = serde_json::to_string(&m).unwrap();
    assert_eq!(parse_manifests(&json).unwrap(), vec![m.clone()]);
    let yaml = serde_saphyr::to_string(&m).unwrap();
    assert_eq!(parse_manifests(&yaml).unwrap(), vec![m.clone()]);
    // Defaults leave what was given alone.
    let mut defaulted = m.clone();
    default_manifest(&mut defaulted);
    let Manifest::Deployment(d) = defaulted else {
        panic!()
    };
    assert_eq!(d.spec.replicas, Some(3));
    assert_eq!(d.spec.revision_history_limit, Some(5));
    assert_eq!(d.spec.progress_deadline_seconds, Some(120));
    let ru = d.spec.strategy.rolling_update.unwrap();
    assert_eq!(ru.max_surge, Some(drover_api::IntOrString::Int(1)));
    assert_eq!(ru.max_unavailable, Some(drover_api::IntOrString::Int(0)));
}

#[test]
fn defaults_as_the_api_server_fills_them_in() {
    let mut m = one(&deployment(""));
    default_manifest(&mut m);
    let v = serde_json::to_value(&m).unwrap();
    assert_eq!(v["spec"]["replicas"], 1);
    assert_eq!(v["spec"]["strategy"]["type"], "RollingUpdate");
    assert_eq!(v["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
    assert_eq!(
        v["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
        "25%"
    );
    assert_eq!(v["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(v["spec"]["progressDeadlineSeconds"], 600);
    let pod = &v["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Always");
    assert_eq!(pod["terminationGracePeriodSeconds"], 30);
    assert_eq!(pod["containers"][0]["imagePullPolicy"], "Always");

    // Recreate gets no rollingUpdate.
    let mut m = one(&deployment("  strategy: {type: Recreate}\n"));
    default_manifest(&mut m);
    let v = serde_json::to_value(&m).unwrap();
    assert_eq!(
        v["spec"]["strategy"],
        serde_json::json!({"type": "Recreate"})
    );

    let mut rs = one(&deployment("").replace("kind: Deployment", "kind: ReplicaSet"));
    default_manifest(&mut rs);
    let v = serde_json::to_value(&rs).unwrap();
    assert_eq!(v["spec"]["replicas"], 1);
    assert_eq!(v["spec"]["template"]["spec"]["restartPolicy"], "Always");
    assert!(v["spec"].get("strategy").is_none());
}

#[test]
fn every_deployment_rule_in_the_api_servers_words() {
    assert_errors(&deployment(""), &[]);
    assert_errors(
        &deployment("  replicas: -1\n"),
        &["spec.replicas: Invalid value: -1: must be greater than or equal to 0"],
    );
    assert_errors(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: c, image: i}]}\n",
        &["spec.selector: Required value"],
    );
    assert_errors(
        &deployment("").replace("{matchLabels: {app: web}}", "{}"),
        &["spec.selector: Invalid value: {}: empty selector is invalid for deployment"],
    );
    assert_errors(
        &deployment("").replace("{matchLabels: {app: web}}", "{matchLabels: {app: db}}"),
        &["spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`"],
    );
    assert_errors(
        &deployment("").replace("spec: {containers", "spec: {restartPolicy: Never, containers"),
        &["spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""],
    );
    assert_errors(
        &deployment("  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 0, maxUnavailable: 0}}\n"),
        &["spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0"],
    );
    assert_errors(
        &deployment("  strategy: {rollingUpdate: {maxSurge: 0%, maxUnavailable: 0%}}\n"),
        &["spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"0%\": may not be 0 when `maxSurge` is 0"],
    );
    assert_errors(
        &deployment("  strategy: {rollingUpdate: {maxSurge: 200%, maxUnavailable: 101%}}\n"),
        &["spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"101%\": must not be greater than 100%"],
    );
    assert_errors(
        &deployment("  strategy: {rollingUpdate: {maxSurge: -1, maxUnavailable: 1}}\n"),
        &["spec.strategy.rollingUpdate.maxSurge: Invalid value: -1: must be greater than or equal to 0"],
    );
    assert_errors(
        &deployment("  strategy: {rollingUpdate: {maxSurge: x%, maxUnavailable: 1}}\n"),
        &["spec.strategy.rollingUpdate.maxSurge: Invalid value: \"x%\": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"],
    );
    assert_errors(
        &deployment("  strategy: {type: Recreate, rollingUpdate: {maxSurge: 1}}\n"),
        &["spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"],
    );
    assert_errors(
        &deployment("  strategy: {type: Blue}\n"),
        &["spec.strategy.type: Unsupported value: \"Blue\": supported values: \"RollingUpdate\", \"Recreate\""],
    );
    assert_errors(
        &deployment("  minReadySeconds: -1\n  revisionHistoryLimit: -2\n"),
        &[
            "spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0",
            "spec.revisionHistoryLimit: Invalid value: -2: must be greater than or equal to 0",
        ],
    );
    assert_errors(
        &deployment("  minReadySeconds: 30\n  progressDeadlineSeconds: 30\n"),
        &["spec.progressDeadlineSeconds: Invalid value: 30: must be greater than minReadySeconds"],
    );
    // The whole message names the object as the API server does.
    let m = one(&deployment("  replicas: -1\n"));
    assert_eq!(
        validate_manifest(&m).unwrap_err().to_string(),
        "Deployment.apps \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    );
}

#[test]
fn every_replica_set_rule_in_the_api_servers_words() {
    let rs = |spec: &str| deployment(spec).replace("kind: Deployment", "kind: ReplicaSet");
    assert_errors(&rs(""), &[]);
    assert_errors(
        &rs("  replicas: -3\n  minReadySeconds: -1\n"),
        &[
            "spec.replicas: Invalid value: -3: must be greater than or equal to 0",
            "spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0",
        ],
    );
    assert_errors(
        &rs("").replace("{matchLabels: {app: web}}", "{}"),
        &["spec.selector: Invalid value: {}: empty selector is invalid for deployment"],
    );
    assert_errors(
        &rs("").replace("{matchLabels: {app: web}}", "{matchLabels: {app: db}}"),
        &["spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`"],
    );
    assert_errors(
        &rs("").replace("spec: {containers", "spec: {restartPolicy: OnFailure, containers"),
        &["spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\""],
    );
    let m = one(&rs("  replicas: -1\n"));
    assert!(validate_manifest(&m)
        .unwrap_err()
        .to_string()
        .starts_with("ReplicaSet.apps \"web\" is invalid: "));
}

#[test]
fn the_selector_is_immutable() {
    for kind in ["Deployment", "ReplicaSet"] {
        let old = one(&deployment("").replace("kind: Deployment", &format!("kind: {kind}")));
        let new = one(&deployment("")
            .replace("kind: Deployment", &format!("kind: {kind}"))
            .replace(
                "{matchLabels: {app: web}}",
                "{matchLabels: {app: web, tier: a}}",
            )
            .replace("{labels: {app: web}}", "{labels: {app: web, tier: a}}"));
        let e = validate_manifest_update(&new, &old).unwrap_err();
        let lines: Vec<String> = e.errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            ["spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"web\",\"tier\":\"a\"}}: field is immutable"],
            "{kind}"
        );
        let scaled =
            one(&deployment("  replicas: 5\n")
                .replace("kind: Deployment", &format!("kind: {kind}")));
        assert_eq!(validate_manifest_update(&scaled, &old), Ok(()), "{kind}");
    }
}
