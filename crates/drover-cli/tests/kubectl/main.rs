//! The kubectl-style commands against a real one-member server, in-process:
//! apply, get in every output format, describe, label/taint/cordon on
//! nodes created by apply, delete, events, watch, and invalid manifests
//! (refused whole, nothing written).
//!
//! Nodes are created by apply (no agent runs); the server's DaemonSet
//! controller creates the daemon pods, and the node lifecycle controller is
//! told to wait an hour before it judges a silent node. Assertions about
//! pods only rely on what the controller must do (one pod per eligible
//! node).

use drover_api::FieldValidation;
use drover_cli::delete::DeleteOptions;
use drover_cli::kubectl::{self, DryRun, GetOptions, Source};
use drover_cli::printers::Output;
use drover_cli::{error_text, Client};
use drover_server::Server;
use drover_testkit::{client_of, fast_options, wait_until_every, Ran, SharedBuf};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

mod commands;

/// Waits of the test.
const WAIT: Duration = Duration::from_secs(15);
/// How often those waits poll.
const POLL: Duration = Duration::from_millis(50);
/// The waits on a command's output (`watch`, `events -w`).
const OUTPUT_WAIT: Duration = Duration::from_secs(10);
const OUTPUT_POLL: Duration = Duration::from_millis(20);

struct Cluster {
    _tmp: tempfile::TempDir,
    server: Server,
    client: Client,
}

async fn start() -> Cluster {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut o = fast_options(tmp.path().join("m0"));
    // No agent heartbeats here: keep the nodes as applied.
    o.controller.node_timeout = Duration::from_secs(3600);
    let server = Server::start(o).await.expect("server starts");
    let client = client_of(&server);
    Cluster {
        _tmp: tmp,
        server,
        client,
    }
}

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

fn sources(paths: &[&str]) -> Vec<Source> {
    let paths: Vec<String> = paths.iter().map(|p| fixture(p)).collect();
    kubectl::read_sources(&paths, &mut std::io::empty()).expect("fixtures read")
}

fn inline(text: &str) -> Vec<Source> {
    vec![Source {
        name: "inline.yaml".into(),
        text: text.into(),
    }]
}

async fn apply(c: &Client, s: &[Source], dry_run: Option<DryRun>) -> Ran {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let r = kubectl::apply(
        c,
        s,
        None,
        dry_run,
        FieldValidation::Strict,
        &mut out,
        &mut err,
    )
    .await;
    Ran::new(out, err, r)
}

fn get_opts(kind: &str, names: &[&str]) -> GetOptions {
    GetOptions {
        kind: kind.into(),
        names: names.iter().map(|s| s.to_string()).collect(),
        ..GetOptions::default()
    }
}

async fn get(c: &Client, o: GetOptions) -> Ran {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let r = kubectl::get(c, &o, &mut out, &mut err).await;
    Ran::new(out, err, r)
}

async fn get_json(c: &Client, kind: &str, names: &[&str]) -> Value {
    let mut o = get_opts(kind, names);
    o.output = Some(Output::Json);
    let r = get(c, o).await.ok();
    serde_json::from_str(&r.out).expect("get -o json prints JSON")
}

async fn describe(c: &Client, kind: &str, names: &[&str]) -> Ran {
    let mut out = Vec::new();
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let r = kubectl::describe(c, kind, &names, None, &mut out).await;
    Ran::new(out, Vec::new(), r)
}

async fn label(c: &Client, name: &str, args: &[&str], overwrite: bool) -> Ran {
    let mut out = Vec::new();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let r = kubectl::label(c, "node", name, &args, overwrite, None, &mut out).await;
    Ran::new(out, Vec::new(), r)
}

async fn taint(c: &Client, name: &str, args: &[&str]) -> Ran {
    let mut out = Vec::new();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let r = kubectl::taint(c, "node", name, &args, false, &mut out).await;
    Ran::new(out, Vec::new(), r)
}

async fn cordon(c: &Client, name: &str, on: bool) -> Ran {
    let mut out = Vec::new();
    let r = kubectl::cordon(c, &[name.to_string()], on, &mut out).await;
    Ran::new(out, Vec::new(), r)
}

async fn delete(c: &Client, o: DeleteOptions) -> Ran {
    let mut out = Vec::new();
    let r = drover_cli::delete::delete(c, &o, &mut out).await;
    Ran::new(out, Vec::new(), r)
}

/// The cells of a table's lines (columns split on runs of spaces; no cell
/// here has two spaces in a row).
fn cells(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect()
        })
        .collect()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Waits until the output `buf` holds (`f` on its text).
async fn wait_for_output(what: &str, buf: &SharedBuf, f: impl Fn(&str) -> bool) {
    wait_until_every(what, OUTPUT_WAIT, OUTPUT_POLL, || {
        std::future::ready(f(&buf.text()))
    })
    .await;
}

/// A pod placed by hand (`spec.nodeName`) in its own namespace, where no
/// DaemonSet selects it.
const BARE_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: manual
  labels: {app: web}
spec:
  nodeName: n1
  containers: [{name: web, image: "nginx:alpine", ports: [{containerPort: 80}]}]
status:
  phase: Running
  podIP: 10.1.0.5
  hostIP: 10.0.0.1
  conditions: [{type: Ready, status: "True"}]
  containerStatuses: [{name: web, ready: true, restartCount: 0, image: "nginx:alpine", state: {running: {startedAt: "2024-05-01T12:00:00Z"}}}]
"#;

/// The daemon pods of a DaemonSet, by node.
async fn daemon_pods(c: &Client, app: &str) -> std::collections::BTreeMap<String, String> {
    let mut o = get_opts("pods", &[]);
    o.selector = Some(format!("app={app}"));
    o.output = Some(Output::Json);
    let list: Value = serde_json::from_str(&get(c, o).await.ok().out).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["spec"]["nodeName"].as_str().unwrap_or("").to_string(),
                p["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn event_yaml(name: &str, ns: &str, message: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Event
metadata: {{name: {name}, namespace: {ns}}}
involvedObject: {{apiVersion: v1, kind: Pod, name: p, namespace: {ns}}}
reason: Testing
message: "{message}"
type: Normal
source: {{component: test}}
firstTimestamp: "2024-05-01T12:00:00Z"
lastTimestamp: "2024-05-01T12:00:00Z"
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_kinds_namespaces_on_apply_and_following_events() {
    let mut cl = start().await;
    let c = &cl.client;
    apply(c, &sources(&["nodes.yaml"]), None).await.ok();
    apply(c, &sources(&["01-example-daemonset.yaml"]), None)
        .await
        .ok();

    // `get ds,no`: one table per kind, names as TYPE/NAME.
    let r = get(c, get_opts("ds,no,ds", &[])).await.ok();
    let sections: Vec<&str> = r.out.split("\n\n").collect();
    assert_eq!(sections.len(), 2, "{}", r.out);
    let ds = cells(sections[0]);
    assert_eq!(ds[0][0], "NAME");
    assert_eq!(ds[1][0], "daemonset.apps/example-daemonset");
    let nodes = cells(sections[1]);
    assert_eq!(nodes[0][0], "NAME");
    assert!(nodes[1..].iter().any(|r| r[0] == "node/n1"), "{}", r.out);
    // -o json: one list of both kinds.
    let mut o = get_opts("ds,nodes", &[]);
    o.output = Some(Output::Json);
    let v: Value = serde_json::from_str(&get(c, o).await.ok().out).unwrap();
    let kinds: std::collections::BTreeSet<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["DaemonSet", "Node"].into_iter().collect());
    // Names or -w with several kinds are refused with what to do instead.
    let r = get(c, get_opts("ds,po", &["x"])).await.failed();
    assert!(r.error().contains("one kind"), "{}", r.error());
    let mut o = get_opts("ds,po", &[]);
    o.watch = true;
    let r = get(c, o).await.failed();
    assert!(
        r.error().contains("one `drover get KIND -w` per kind"),
        "{}",
        r.error()
    );
    let r = get(c, get_opts("ds,nope", &[])).await.failed();
    assert!(r.error().contains("nope"), "{}", r.error());

    // `apply -n`: objects without a namespace go there; another one is refused.
    let ev = event_yaml("e1", "", "into team-a");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    kubectl::apply(
        c,
        &inline(&ev),
        Some("team-a"),
        None,
        FieldValidation::Strict,
        &mut out,
        &mut err,
    )
    .await
    .unwrap();
    let mut o = get_opts("ev", &["e1"]);
    o.namespace = Some("team-a".into());
    o.output = Some(Output::Json);
    let v: Value = serde_json::from_str(&get(c, o).await.ok().out).unwrap();
    assert_eq!(v["metadata"]["namespace"], "team-a");
    let ev = event_yaml("e2", "team-b", "stays out");
    let r = kubectl::apply(
        c,
        &inline(&ev),
        Some("team-a"),
        None,
        FieldValidation::Strict,
        &mut out,
        &mut err,
    )
    .await;
    let e = error_text(&r.unwrap_err());
    assert!(
        e.contains("does not match the namespace \"team-a\" given with --namespace"),
        "{e}"
    );
    let mut o = get_opts("ev", &["e2"]);
    o.namespace = Some("team-b".into());
    get(c, o).await.failed();

    // `events -w`: the existing events, then new ones as they come.
    let shared = SharedBuf::default();
    let follow = {
        let c = c.clone();
        let mut out = shared.clone();
        tokio::spawn(async move {
            let mut err = Vec::new();
            drover_cli::events::events(&c, Some("team-a"), false, true, &mut out, &mut err).await
        })
    };
    wait_for_output("the listed event", &shared, |t| t.contains("into team-a")).await;
    apply(c, &inline(&event_yaml("e3", "team-a", "a new one")), None)
        .await
        .ok();
    wait_for_output("the followed event", &shared, |t| t.contains("a new one")).await;
    assert!(!follow.is_finished(), "events -w keeps following");
    follow.abort();

    cl.server.shutdown().await;
}

/// The "Nodes without a pod:" section of `describe ds` (the rollout
/// section above it names nodes too).
fn nodes_without_a_pod(describe: &str) -> &str {
    describe
        .split("\nNodes without a pod:")
        .nth(1)
        .and_then(|t| t.split("\nEvents:").next())
        .unwrap_or_default()
}

/// A field no Kubernetes object has (a typo) refuses the apply under the
/// default strict validation, naming every such field and writing nothing;
/// `--validate=warn` applies with a warning, `--validate=ignore` silently.
/// A field Kubernetes has but drover does not act on is always a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_refuses_fields_no_kubernetes_object_has_unless_told_otherwise() {
    let cl = start().await;
    let c = &cl.client;
    let typo = inline(
        r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: typo}
spec:
  selector: {matchLabels: {app: typo}}
  template:
    metadata: {labels: {app: typo}}
    spec:
      dnsConfig: {nameservers: [1.1.1.1]}
      containers:
      - name: c
        image: busybox
        comand: [sleep, "3600"]
        imagePullPolicy: Never
        reources: {}
---
apiVersion: v1
kind: Node
metadata: {name: fine}
"#,
    );
    let run = |mode: FieldValidation, dry: Option<DryRun>| {
        let typo = typo.clone();
        async move {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let r = kubectl::apply(c, &typo, None, dry, mode, &mut out, &mut err).await;
            Ran::new(out, err, r)
        }
    };
    for dry in [None, Some(DryRun::Server)] {
        let r = run(FieldValidation::Strict, dry).await.failed();
        assert!(
            r.error().contains(r#"daemonset.apps/typo (DaemonSet in version "apps/v1"): strict decoding error: unknown field "spec.template.spec.containers[0].comand", unknown field "spec.template.spec.containers[0].reources""#),
            "{r:?}"
        );
        assert!(r.error().contains("--validate=warn"), "{r:?}");
        assert!(!r.error().contains("dnsConfig"), "{r:?}");
    }
    // Nothing was written, not even the valid Node of the same stream.
    let r = get(c, get_opts("nodes", &[])).await.ok();
    assert_eq!(r.out, "", "{r:?}");

    let r = run(FieldValidation::Warn, None).await.ok();
    assert_eq!(r.out, "daemonset.apps/typo created\nnode/fine created\n");
    assert_eq!(
        r.err,
        "Warning: unknown field \"spec.template.spec.containers[0].comand\"\n\
         Warning: unknown field \"spec.template.spec.containers[0].reources\"\n\
         Warning: field \"spec.template.spec.dnsConfig\" is not supported by drover (kept, but drover does not act on it)\n"
    );
    let r = run(FieldValidation::Ignore, None).await.ok();
    assert_eq!(
        r.out,
        "daemonset.apps/typo unchanged\nnode/fine unchanged\n"
    );
    assert_eq!(
        r.err,
        "Warning: field \"spec.template.spec.dnsConfig\" is not supported by drover (kept, but drover does not act on it)\n"
    );
    // The kept field survives a round trip.
    let ds = get_json(c, "ds", &["typo"]).await;
    assert_eq!(
        ds["spec"]["template"]["spec"]["containers"][0]["comand"],
        serde_json::json!(["sleep", "3600"])
    );
}

/// A bare pod without spec.nodeName is accepted Pending for the scheduler;
/// with a node it does not fit (a selector no node matches), `describe
/// pod` says why, node by node, and the FailedScheduling event gives
/// kube-scheduler's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_pod_waits_pending_and_describe_says_why_node_by_node() {
    let cl = start().await;
    let c = &cl.client;
    apply(
        c,
        &inline("apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {disk: hdd}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: lost}\nspec:\n  nodeSelector: {disk: ssd}\n  containers: [{name: c, image: busybox}]\n"),
        None,
    )
    .await
    .ok();
    const MESSAGE: &str =
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.";
    wait_until_every("the FailedScheduling event", WAIT, POLL, || async {
        describe(c, "pod", &["lost"]).await.out.contains(MESSAGE)
    })
    .await;
    let text = describe(c, "pod", &["lost"]).await.ok().out;
    assert!(text.contains("Status:"), "{text}");
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Nodes that do not fit:"))
        .take(4)
        .collect();
    assert_eq!(
        rows,
        [
            "Nodes that do not fit:",
            "  Node  Reason",
            "  ----  ------",
            "  n1    node(s) didn't match Pod's node affinity/selector"
        ],
        "{text}"
    );
    let r = get(c, get_opts("pods", &["lost"])).await.ok();
    assert!(r.out.contains("Pending"), "{}", r.out);
}

/// PriorityClasses: applied, listed with kubectl's columns, validated as
/// the API server does (no `system-` names, at most 1e9, value immutable).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_classes_apply_list_and_validate() {
    let cl = start().await;
    let c = &cl.client;
    let pc = |name: &str, value: i64| {
        inline(&format!(
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\nvalue: {value}\ndescription: monitoring\n"
        ))
    };
    let r = apply(c, &pc("monitoring", 1000), None).await.ok();
    assert_eq!(
        r.out,
        "priorityclass.scheduling.k8s.io/monitoring created\n"
    );
    let r = get(c, get_opts("pc", &[])).await.ok();
    let t = cells(&r.out);
    assert_eq!(
        t[0],
        strings(&["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"])
    );
    assert_eq!(t[1][..3], strings(&["monitoring", "1000", "false"]));
    assert_eq!(t[1][4], "PreemptLowerPriority");
    apply(c, &pc("monitoring", 2000), None)
        .await
        .failed_with("value: Forbidden: may not be changed in an update");
    apply(c, &pc("system-mine", 1), None)
        .await
        .failed_with("priority class names with 'system-' prefix are reserved");
    apply(c, &pc("huge", 2_000_000_000), None)
        .await
        .failed_with("maximum allowed value of a user defined priority is 1000000000");
}
