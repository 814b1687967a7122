//! `drover apply` and `kubectl apply` mixed on one object: drover writes
//! `kubectl.kubernetes.io/last-applied-configuration` as kubectl does, so
//! kubectl neither warns that it is missing nor keeps the fields the user
//! removed, whichever client applied first.

mod kube;

use drover_api::FieldValidation;
use drover_cli::kubectl::{self, Source};
use kube::Kube;
use serde_json::Value;

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A DaemonSet `name`; `full` has a `tier` label, a `note` annotation and
/// a `BAR` env var that the other one lacks.
fn manifest(name: &str, full: bool) -> String {
    let (label, note, bar) = if full {
        (
            "\n    tier: web",
            "\n  annotations:\n    note: x",
            "\n        - {name: BAR, value: '2'}",
        )
    } else {
        ("", "", "")
    };
    format!(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: {name}\n  labels:\n    app: {name}{label}{note}\nspec:\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      containers:\n      - name: c\n        image: 'busybox:1'\n        env:\n        - {{name: FOO, value: '1'}}{bar}\n"
    )
}

/// Writes `text` to a file of the test for kubectl.
fn file(k: &Kube, name: &str, text: &str) -> String {
    let path = k.tmp.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// `drover apply` of `text`: what it printed.
async fn drover_apply(k: &Kube, text: &str) -> String {
    let c = k.server.client();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    kubectl::apply(
        &c,
        &[Source {
            name: "inline.yaml".into(),
            text: text.into(),
        }],
        None,
        None,
        FieldValidation::Strict,
        &mut out,
        &mut err,
    )
    .await
    .expect("drover apply");
    assert!(err.is_empty(), "{}", String::from_utf8_lossy(&err));
    String::from_utf8(out).unwrap()
}

/// `kubectl apply -f`: its stdout; the test fails on any warning.
async fn kubectl_apply(k: &Kube, path: &str) -> String {
    let o = k.run(&["apply", "-f", path]).await;
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    );
    assert!(o.status.success(), "kubectl apply: {out}{err}");
    assert!(err.is_empty(), "kubectl apply warned: {err}");
    out
}

async fn ds(k: &Kube, name: &str) -> Value {
    let out = k.ok(&["get", "ds", name, "-o", "json"]).await;
    serde_json::from_str(&out).unwrap()
}

/// Whether the DaemonSet is the `full` manifest or the reduced one.
fn assert_is(d: &Value, full: bool) {
    let meta = &d["metadata"];
    assert_eq!(meta["labels"].get("tier").is_some(), full, "{meta}");
    assert_eq!(meta["annotations"].get("note").is_some(), full, "{meta}");
    let env = &d["spec"]["template"]["spec"]["containers"][0]["env"];
    let want = if full {
        serde_json::json!([{"name": "FOO", "value": "1"}, {"name": "BAR", "value": "2"}])
    } else {
        serde_json::json!([{"name": "FOO", "value": "1"}])
    };
    assert_eq!(env, &want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn drover_apply_and_kubectl_apply_mix_without_warnings() {
    let k = Kube::start(0).await;

    // drover first, then kubectl.
    let full = manifest("one", true);
    let out = drover_apply(&k, &full).await;
    assert_eq!(out, "daemonset.apps/one created\n");
    let written = ds(&k, "one").await["metadata"]["annotations"][LAST_APPLIED].clone();
    assert!(written.is_string(), "drover wrote the annotation");
    // kubectl finds the annotation it would write itself: nothing to patch.
    let path = file(&k, "one-full.yaml", &full);
    assert_eq!(
        kubectl_apply(&k, &path).await,
        "daemonset.apps/one unchanged\n"
    );
    // A field removed from the manifest is removed by kubectl's three-way patch.
    let path = file(&k, "one.yaml", &manifest("one", false));
    assert_eq!(
        kubectl_apply(&k, &path).await,
        "daemonset.apps/one configured\n"
    );
    assert_is(&ds(&k, "one").await, false);

    // kubectl first, then drover.
    let path = file(&k, "two-full.yaml", &manifest("two", true));
    assert_eq!(
        kubectl_apply(&k, &path).await,
        "daemonset.apps/two created\n"
    );
    let by_kubectl = ds(&k, "two").await["metadata"]["annotations"][LAST_APPLIED].clone();
    // drover's annotation for the same manifest is kubectl's, byte for byte.
    let mut parsed = drover_api::parse_manifests(&manifest("two", true)).unwrap();
    drover_cli::last_applied::annotate(&mut parsed[0]).unwrap();
    assert_eq!(
        Value::String(parsed[0].metadata().annotations[LAST_APPLIED].clone()),
        by_kubectl
    );
    // drover removes what the user removed, and writes the new annotation.
    let out = drover_apply(&k, &manifest("two", false)).await;
    assert_eq!(out, "daemonset.apps/two configured\n");
    assert_is(&ds(&k, "two").await, false);
    // kubectl agrees there is nothing to do, then puts the fields back.
    let path = file(&k, "two.yaml", &manifest("two", false));
    assert_eq!(
        kubectl_apply(&k, &path).await,
        "daemonset.apps/two unchanged\n"
    );
    let path = file(&k, "two-full-again.yaml", &manifest("two", true));
    assert_eq!(
        kubectl_apply(&k, &path).await,
        "daemonset.apps/two configured\n"
    );
    assert_is(&ds(&k, "two").await, true);
    k.stop().await;
}
