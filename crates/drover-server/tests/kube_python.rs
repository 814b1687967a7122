//! The Python `kubernetes` client (PyPI, pinned in `.ci/run`) with its
//! default settings against an in-process server with sim nodes, through
//! the `DATA_DIR/kubeconfig` the server writes: `tests/kube/daemonsets.py`
//! lists DaemonSets and watches them; `tests/kube/deployments.py` creates,
//! scales (the `scale` subresource) and lists Deployments. The test fails loudly when `python3`
//! or the `kubernetes` module is missing, unless the run opts out out loud
//! with `DROVER_TEST_SKIP=python`.

mod kube;

use kube::{Kube, WAIT};
use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

const PYTHON: &str = "python3";
const INSTALL: &str = "python3 -m pip install 'kubernetes==31.0.0' (as .ci/run does)";

/// Whether this run opted out of the Python tests: `DROVER_TEST_SKIP`
/// lists `python` (comma-separated).
fn skipping_python() -> bool {
    std::env::var("DROVER_TEST_SKIP")
        .map(|v| v.split(',').any(|w| w.trim() == "python"))
        .unwrap_or(false)
}

/// `true` when python3 and its `kubernetes` module are there; `false` (with
/// a notice) when they are not and the run opted out; a panic otherwise.
fn python_ready() -> bool {
    let out = std::process::Command::new(PYTHON)
        .args(["-c", "import kubernetes; print(kubernetes.__version__)"])
        .output();
    let why = match out {
        Ok(o) if o.status.success() => return true,
        Ok(o) => format!(
            "python3 cannot import the kubernetes module ({}): install it with {INSTALL}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or_default()
        ),
        Err(e) => format!("no python3 on PATH ({e}): install CPython 3, then {INSTALL}"),
    };
    if skipping_python() {
        eprintln!("SKIPPED (DROVER_TEST_SKIP=python): {why}");
        return false;
    }
    panic!("{why}; or opt out of the Python tests with DROVER_TEST_SKIP=python");
}

/// The script running, its stdout read as JSON lines.
struct Script {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    seen: Vec<String>,
}

impl Script {
    fn start(k: &Kube, args: &[&str]) -> Script {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kube/daemonsets.py");
        let mut child = Command::new(PYTHON)
            .arg(&script)
            .arg(&k.kubeconfig)
            .args(args)
            .env("HOME", &k.home)
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("python3 starts");
        let out = child.stdout.take().expect("stdout");
        Script {
            child,
            lines: BufReader::new(out).lines(),
            seen: Vec::new(),
        }
    }

    /// Reads lines until one satisfies `f` (at most [`WAIT`]); answers it.
    async fn wait_line(&mut self, what: &str, f: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.next_line()).await {
                Ok(Ok(Some(l))) => {
                    self.seen.push(l.clone());
                    let v: Value = serde_json::from_str(&l)
                        .unwrap_or_else(|e| panic!("the script printed {l:?}, not JSON: {e}"));
                    if f(&v) {
                        return v;
                    }
                }
                Ok(Ok(None)) | Ok(Err(_)) => {
                    panic!("the script ended before {what}; it printed {:?}", self.seen)
                }
                Err(_) => panic!(
                    "no {what} within {WAIT:?}; the script printed {:?}",
                    self.seen
                ),
            }
        }
    }

    /// Waits for the script's end (at most [`WAIT`]); fails unless it
    /// succeeded.
    async fn finish(mut self) {
        let st = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the script did not end within {WAIT:?}"))
            .expect("wait for python3");
        assert!(st.success(), "the script: {st}; it printed {:?}", self.seen);
    }
}

fn names(list: &Value) -> Vec<(String, String, i64)> {
    let mut v: Vec<_> = list
        .as_array()
        .expect("a list")
        .iter()
        .map(|d| {
            (
                d["namespace"].as_str().unwrap_or_default().to_string(),
                d["name"].as_str().unwrap_or_default().to_string(),
                d["desiredNumberScheduled"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    v.sort();
    v
}

fn ds_yaml(ns: &str, name: &str, extra_label: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: {name}, namespace: {ns}, labels: {{app: {name}{extra_label}}}}}\nspec:\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec: {{containers: [{{name: c, image: 'busybox:1'}}]}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn python_client_lists_and_watches_daemonsets() {
    if !python_ready() {
        return;
    }
    let k = Kube::start(2).await;
    k.server.apply(&ds_yaml("default", "web", "")).await;
    k.server.apply(&ds_yaml("kube-system", "agent", "")).await;
    k.wait_pods(4).await;
    k.wait_for("both DaemonSets desire 2 pods", || async {
        let out = k
            .ok(&[
                "get",
                "ds",
                "-A",
                "-o",
                "jsonpath={range .items[*]}{.status.desiredNumberScheduled} {end}",
            ])
            .await;
        out.split_whitespace().collect::<Vec<_>>() == ["2", "2"]
    })
    .await;

    let mut py = Script::start(&k, &["default", "late", "step=2", "25"]);
    let listed = py
        .wait_line("the lists", |v| v.get("listed").is_some())
        .await;
    let listed = &listed["listed"];
    assert_eq!(listed["kind"], "DaemonSetList", "{listed}");
    assert_eq!(listed["apiVersion"], "apps/v1", "{listed}");
    assert_eq!(
        names(&listed["all"]),
        [
            ("default".to_string(), "web".to_string(), 2),
            ("kube-system".to_string(), "agent".to_string(), 2),
        ],
        "{listed}"
    );
    assert_eq!(
        names(&listed["namespaced"]),
        [("default".to_string(), "web".to_string(), 2)],
        "{listed}"
    );
    assert!(
        listed["resourceVersion"]
            .as_str()
            .is_some_and(|rv| !rv.is_empty()),
        "{listed}"
    );

    py.wait_line("the watch open", |v| v.get("watching").is_some())
        .await;
    k.server.apply(&ds_yaml("default", "late", "")).await;
    let added = py
        .wait_line("ADDED late", |v| {
            v["event"] == "ADDED" && v["name"] == "late"
        })
        .await;
    assert_eq!(added["type"], "V1DaemonSet", "{added}");
    assert_eq!(added["namespace"], "default", "{added}");
    k.server
        .apply(&ds_yaml("default", "late", ", step: '2'"))
        .await;
    let modified = py
        .wait_line("MODIFIED late with step=2", |v| {
            v["event"] == "MODIFIED" && v["name"] == "late" && v["labels"]["step"] == "2"
        })
        .await;
    assert_ne!(
        modified["resourceVersion"], added["resourceVersion"],
        "{modified} after {added}"
    );
    let done = py
        .wait_line("the script's end", |v| v.get("done").is_some())
        .await;
    assert_eq!(done["done"], true, "{done}");
    // Nothing came before the ADDED event of the DaemonSet created after
    // the list but changes of the listed ones (their status).
    for l in &py.seen {
        let v: Value = serde_json::from_str(l).unwrap();
        if v["event"] == "ADDED" {
            assert_eq!(v["name"], "late", "only late is new: {:?}", py.seen);
        }
    }
    py.finish().await;
    k.stop().await;
}

/// `tests/kube/deployments.py`: the client creates a Deployment (defaulted
/// by the server), scales it through the `scale` subresource and lists
/// Deployments and ReplicaSets.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_python_client_creates_scales_and_lists_deployments() {
    if !python_ready() {
        return;
    }
    // No workload controllers: the script counts the ReplicaSets it made.
    let k = Kube::start_tuned(0, |o| o.controller.workloads = false).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kube/deployments.py");
    let out = tokio::time::timeout(
        WAIT,
        Command::new(PYTHON)
            .arg(&script)
            .arg(&k.kubeconfig)
            .args(["default", "web"])
            .env("HOME", &k.home)
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("the script did not end within {WAIT:?}"))
    .expect("python3 runs");
    assert!(
        out.status.success(),
        "the script: {}; stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("the script prints JSON");
    assert_eq!(
        v,
        serde_json::json!({
            "created": {"replicas": 1, "strategy": "RollingUpdate", "maxSurge": "25%"},
            "scaled": 3,
            "scale": {"kind": "Scale", "replicas": 3, "selector": "app=web"},
            "read": 3,
            "listed": ["web"],
            "listKind": "DeploymentList",
            "replicaSets": 0,
        })
    );
    k.stop().await;
}
