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
use drover_cli::kubectl::{self, DeleteOptions, DryRun, GetOptions, Source};
use drover_cli::printers::Output;
use drover_cli::{error_text, Client};
use drover_server::Server;
use drover_testkit::{client_of, fast_options, wait_until_every, Ran, SharedBuf};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

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
    let r = kubectl::delete(c, &o, &mut out).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_commands_against_a_server() {
    let mut cl = start().await;
    let c = &cl.client;

    // ---------------------------------------------------------------- apply
    let r = apply(c, &sources(&["nodes.yaml"]), None).await.ok();
    assert_eq!(
        r.out,
        "node/n1 created\nnode/n2 created\nnode/n3 created\nnode/ip-10-0-1-101.ec2.internal created\n"
    );
    assert_eq!(r.err, "");

    // Two files in one apply; a dry run first writes nothing.
    let two = sources(&["01-example-daemonset.yaml", "07-affinity-gpu.yaml"]);
    let r = apply(c, &two, Some(DryRun::Client)).await.ok();
    assert_eq!(
        r.out,
        "daemonset.apps/example-daemonset created (dry run)\ndaemonset.apps/master-agent created (dry run)\n"
    );
    let r = get(c, get_opts("ds", &[])).await.ok();
    assert_eq!(r.out, "");
    assert_eq!(r.err, "No resources found in default namespace.\n");
    let r = apply(c, &two, None).await.ok();
    assert_eq!(
        r.out,
        "daemonset.apps/example-daemonset created\ndaemonset.apps/master-agent created\n"
    );
    let r = apply(c, &sources(&["01-example-daemonset.yaml"]), None)
        .await
        .ok();
    assert_eq!(r.out, "daemonset.apps/example-daemonset unchanged\n");
    let r = apply(
        c,
        &sources(&["01-example-daemonset.yaml"]),
        Some(DryRun::Server),
    )
    .await
    .ok();
    assert_eq!(
        r.out,
        "daemonset.apps/example-daemonset unchanged (server dry run)\n"
    );

    // A changed template is "configured"; a field no Kubernetes object has
    // refuses it (strict validation: see
    // apply_refuses_fields_no_kubernetes_object_has_unless_told_otherwise).
    let changed = std::fs::read_to_string(fixture("01-example-daemonset.yaml"))
        .unwrap()
        .replace("nginx:latest", "nginx:1.27");
    let typo = changed.replace("spec:\n  selector:", "spec:\n  foo: bar\n  selector:");
    apply(c, &inline(&typo), None)
        .await
        .failed_with("unknown field \"spec.foo\"");
    let r = apply(c, &inline(&changed), None).await.ok();
    assert_eq!(r.out, "daemonset.apps/example-daemonset configured\n");
    assert_eq!(r.err, "");

    // Invalid manifests: refused whole, nothing written.
    let invalid = "\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: good-one}
spec:
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: a}}
    spec: {containers: [{name: c, image: busybox}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: bad-one}
spec:
  selector: {matchLabels: {app: b}}
  template:
    metadata: {labels: {app: not-b}}
    spec: {containers: [{name: c, image: busybox}]}
";
    let r = apply(c, &inline(invalid), None).await.failed();
    assert!(
        r.error().starts_with("Error from server (Invalid): DaemonSet.apps \"bad-one\" is invalid: spec.template.metadata.labels"),
        "{}",
        r.error()
    );
    assert_eq!(r.out, "");
    let r = get(c, get_opts("ds", &["good-one"])).await.failed();
    assert_eq!(
        r.error(),
        "Error from server (NotFound): daemonsets.apps \"good-one\" not found"
    );
    let deployment = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: web}\n";
    let r = apply(
        c,
        &inline(&format!(
            "{deployment}---\n{}",
            &invalid[..invalid.find("---").unwrap()]
        )),
        None,
    )
    .await
    .failed();
    assert!(
        r.error().starts_with("error: error parsing inline.yaml: document 1 (apps/v1 StatefulSet \"web\"): kind StatefulSet is not supported"),
        "{}",
        r.error()
    );
    get(c, get_opts("ds", &["good-one"])).await.failed();
    let r = apply(c, &inline("---\n"), None).await.failed();
    assert_eq!(r.error(), "error: no objects passed to apply");

    // The controller gives every eligible node a pod: not n3 (tainted).
    let eligible = strings(&["ip-10-0-1-101.ec2.internal", "n1", "n2"]);
    wait_until_every("example-daemonset's pods", WAIT, POLL, || async {
        daemon_pods(c, "example-app")
            .await
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            == eligible
    })
    .await;
    let ds = get_json(c, "ds", &["example-daemonset"]).await;
    assert_eq!(ds["kind"], "DaemonSet");
    let uid = ds["metadata"]["uid"].as_str().expect("a uid").to_string();
    let r = apply(c, &inline(BARE_POD), None).await.ok();
    assert_eq!(r.out, "pod/web created\n");
    let r = apply(c, &sources(&["09-pod-nodename.yaml"]), None)
        .await
        .ok();
    assert_eq!(r.out, "pod/static-pod-on-node-xyz created\n");

    // ---------------------------------------------------------------- get
    let r = get(c, get_opts("ds", &[])).await.ok();
    let t = cells(&r.out);
    assert_eq!(
        t[0],
        strings(&[
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE SELECTOR",
            "AGE"
        ])
    );
    assert_eq!(t.len(), 3, "{}", r.out);
    assert_eq!(t[1][0], "example-daemonset");
    assert_eq!(t[1][6], "<none>");
    assert!(t[1][7].ends_with('s'), "AGE {}", t[1][7]);
    assert_eq!(t[2][0], "master-agent");
    assert_eq!(t[2][6], "node-type=monitoring");

    let mut o = get_opts("daemonsets", &["example-daemonset"]);
    o.output = Some(Output::Wide);
    let t = cells(&get(c, o).await.ok().out);
    assert_eq!(&t[0][8..], strings(&["CONTAINERS", "IMAGES", "SELECTOR"]));
    assert_eq!(
        &t[1][8..],
        strings(&["example-container", "nginx:1.27", "app=example-app"])
    );

    let mut o = get_opts("ds", &[]);
    o.all_namespaces = true;
    let t = cells(&get(c, o).await.ok().out);
    assert_eq!(t[0][0], "NAMESPACE");
    assert_eq!(t[1][..2], strings(&["default", "example-daemonset"]));

    // -o json: one object for one name, a List otherwise (kubectl's shape).
    let one = get_json(c, "ds", &["master-agent"]).await;
    assert_eq!(one["apiVersion"], "apps/v1");
    assert_eq!(one["metadata"]["name"], "master-agent");
    assert!(one["metadata"]["resourceVersion"]
        .as_str()
        .is_some_and(|v| !v.is_empty()));
    let list = get_json(c, "ds", &[]).await;
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(list["kind"], "List");
    assert_eq!(list["metadata"], serde_json::json!({"resourceVersion": ""}));
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    let two_names = get_json(c, "ds", &["master-agent", "example-daemonset"]).await;
    assert_eq!(two_names["kind"], "List");
    assert_eq!(
        two_names["items"][1]["metadata"]["name"],
        "example-daemonset"
    );
    let mut o = get_opts("ds", &[]);
    o.namespace = Some("nowhere".into());
    o.output = Some(Output::Json);
    let r = get(c, o).await.ok();
    let empty: Value = serde_json::from_str(&r.out).unwrap();
    assert_eq!(empty["items"], serde_json::json!([]));
    assert_eq!(r.err, "", "no 'No resources found' for -o json");

    // -o yaml: the same content.
    let mut o = get_opts("ds", &[]);
    o.output = Some(Output::Yaml);
    let y = get(c, o).await.ok().out;
    assert!(
        y.starts_with("apiVersion: v1\nitems:\n- apiVersion: apps/v1\n"),
        "{y}"
    );
    // The same content, but for what the controllers may have written in
    // between the two reads (status, and so resourceVersion).
    let settled = |mut v: Value| {
        for item in v["items"].as_array_mut().unwrap() {
            item.as_object_mut().unwrap().remove("status");
            item["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("resourceVersion");
        }
        v
    };
    let back: Value = serde_saphyr::from_str(&y).unwrap();
    assert_eq!(settled(back), settled(list));

    // -o name, -l, -n.
    let mut o = get_opts("po", &[]);
    o.output = Some(Output::Name);
    o.namespace = Some("manual".into());
    assert_eq!(get(c, o).await.ok().out, "pod/web\n");
    let mut o = get_opts("po", &["web"]);
    o.namespace = Some("manual".into());
    o.output = Some(Output::Wide);
    let t = cells(&get(c, o).await.ok().out);
    assert_eq!(
        t[0],
        strings(&[
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED NODE",
            "READINESS GATES"
        ])
    );
    assert_eq!(t[1][..4], strings(&["web", "1/1", "Running", "0"]));
    assert_eq!(t[1][5..], strings(&["10.1.0.5", "n1", "<none>", "<none>"]));
    let mut o = get_opts("pods", &[]);
    o.selector = Some("app=example-app".into());
    o.output = Some(Output::Wide);
    let t = cells(&get(c, o).await.ok().out);
    assert_eq!(t.len(), 4, "{t:?}");
    let mut nodes: Vec<String> = t[1..].iter().map(|r| r[6].clone()).collect();
    nodes.sort();
    assert_eq!(nodes, eligible);
    assert!(t[1..]
        .iter()
        .all(|r| r[0].starts_with("example-daemonset-")));
    let mut o = get_opts("pods", &[]);
    o.selector = Some("app=nothing-has-this".into());
    let r = get(c, o).await.ok();
    assert_eq!(
        (r.out.as_str(), r.err.as_str()),
        ("", "No resources found in default namespace.\n")
    );
    let mut o = get_opts("pods", &[]);
    o.selector = Some("app in (".into());
    let r = get(c, o).await.failed();
    assert!(
        r.error().starts_with("error: unable to parse selector"),
        "{}",
        r.error()
    );

    // Nodes.
    let mut o = get_opts("nodes", &[]);
    o.output = Some(Output::Wide);
    let t = cells(&get(c, o).await.ok().out);
    assert_eq!(
        t[0],
        strings(&[
            "NAME",
            "STATUS",
            "ROLES",
            "AGE",
            "VERSION",
            "INTERNAL-IP",
            "EXTERNAL-IP",
            "OS-IMAGE",
            "KERNEL-VERSION",
            "CONTAINER-RUNTIME"
        ])
    );
    assert_eq!(t[2][..3], strings(&["n1", "Ready", "<none>"]));
    assert_eq!(
        t[2][4..],
        strings(&[
            "drover-test",
            "10.0.0.1",
            "<none>",
            "Debian GNU/Linux 12 (bookworm)",
            "6.1.0",
            "sim://1"
        ])
    );
    assert_eq!(
        t[0..].iter().map(|r| r[0].as_str()).collect::<Vec<_>>(),
        ["NAME", "ip-10-0-1-101.ec2.internal", "n1", "n2", "n3"]
    );
    assert_eq!(t[3][..3], strings(&["n2", "Ready", "master"]));
    assert_eq!(t[4][..2], strings(&["n3", "NotReady"]));

    // A missing name among found ones: the found are printed, the missing reported.
    let r = get(c, get_opts("ds", &["master-agent", "nope"]))
        .await
        .failed();
    assert_eq!(cells(&r.out).len(), 2);
    assert_eq!(
        r.error(),
        "Error from server (NotFound): daemonsets.apps \"nope\" not found"
    );
    let r = get(c, get_opts("statefulsets", &[])).await.failed();
    assert!(r
        .error()
        .starts_with("error: the server doesn't have a resource type \"statefulsets\""));

    // ---------------------------------------------------------------- describe
    let r = describe(c, "ds", &["example-daemonset"]).await.ok();
    assert!(r.out.starts_with("Name:           example-daemonset\nNamespace:      default\nSelector:       app=example-app\nNode-Selector:  <none>\n"), "{}", r.out);
    assert!(
        r.out.contains("\nDesired Number of Nodes Scheduled: "),
        "{}",
        r.out
    );
    assert!(r.out.contains("\nPods Status:  "), "{}", r.out);
    let line = |prefix: &str| {
        r.out
            .lines()
            .find(|l| l.starts_with(prefix))
            .map(|l| l[prefix.len()..].trim().to_string())
    };
    assert_eq!(
        line("    Image:").as_deref(),
        Some("nginx:1.27"),
        "{}",
        r.out
    );
    assert_eq!(line("    Port:").as_deref(), Some("80/TCP"), "{}", r.out);
    assert!(
        r.out.contains("\nNodes without a pod:\n  Node  Reason\n  ----  ------\n  n3    taint dedicated=gpu:NoSchedule is not tolerated\n"),
        "{}",
        r.out
    );
    let without = nodes_without_a_pod(&r.out);
    for n in &eligible {
        assert!(
            !without.contains(&format!("\n  {n}  ")),
            "{n} runs the pod:\n{}",
            r.out
        );
    }
    wait_until_every("master-agent's pod on n2", WAIT, POLL, || async {
        daemon_pods(c, "master-agent").await.contains_key("n2")
    })
    .await;
    let r = describe(c, "ds", &["master-agent"]).await.ok();
    assert!(
        r.out.contains("\n  n1                          nodeSelector requires node-type=monitoring, but the node has no label node-type\n"),
        "{}",
        r.out
    );
    assert!(
        r.out.contains("no term of the required node affinity matches: term 0: matchExpressions[0] (node-role.kubernetes.io/master Exists): the node has no label node-role.kubernetes.io/master\n"),
        "{}",
        r.out
    );
    assert!(
        !nodes_without_a_pod(&r.out).contains("\n  n2  "),
        "n2 is eligible for master-agent:\n{}",
        r.out
    );

    let mut out = Vec::new();
    kubectl::describe(c, "pod", &strings(&["web"]), Some("manual"), &mut out)
        .await
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.starts_with("Name:         web\nNamespace:    manual\nNode:         n1/10.0.0.1\n"),
        "{text}"
    );
    assert!(
        text.contains("\nStatus:       Running\nIP:           10.1.0.5\n"),
        "{text}"
    );
    let daemon_pod = daemon_pods(c, "example-app").await["n1"].clone();
    let r = describe(c, "pod", &[daemon_pod.as_str()]).await.ok();
    assert!(
        r.out
            .contains("\nControlled By:  DaemonSet/example-daemonset\n"),
        "{}",
        r.out
    );
    let r = describe(c, "node", &["n1"]).await.ok();
    assert!(
        r.out
            .starts_with("Name:               n1\nRoles:              <none>\n"),
        "{}",
        r.out
    );
    assert!(
        r.out.contains("\nNon-terminated Pods:          ("),
        "{}",
        r.out
    );
    assert!(
        r.out
            .contains(&format!("\n  default                     {daemon_pod}  ")),
        "{}",
        r.out
    );
    assert!(
        r.out.contains("\n  manual                      web  "),
        "{}",
        r.out
    );
    let r = describe(c, "ds", &["nope"]).await.failed();
    assert_eq!(
        r.error(),
        "Error from server (NotFound): daemonsets.apps \"nope\" not found"
    );
    let r = describe(c, "events", &[]).await.failed();
    assert!(
        r.error().starts_with("error: describe shows daemonsets"),
        "{}",
        r.error()
    );

    // ---------------------------------------------------------------- label
    assert_eq!(
        label(c, "n1", &["disk=ssd"], false).await.ok().out,
        "node/n1 labeled\n"
    );
    let r = label(c, "n1", &["disk=hdd"], false).await.failed();
    assert_eq!(
        r.error(),
        "error: 'disk' already has a value (ssd), and --overwrite is false"
    );
    assert_eq!(
        label(c, "n1", &["disk=hdd"], true).await.ok().out,
        "node/n1 labeled\n"
    );
    assert_eq!(
        label(c, "n1", &["disk=hdd"], false).await.ok().out,
        "node/n1 not labeled\n"
    );
    let n1 = get_json(c, "node", &["n1"]).await;
    assert_eq!(n1["metadata"]["labels"]["disk"], "hdd");
    assert_eq!(
        label(c, "n1", &["disk-", "gone-"], false).await.ok().out,
        "label \"gone\" not found.\nnode/n1 unlabeled\n"
    );
    let r = label(c, "n1", &["bad key=x"], false).await.failed();
    assert!(
        r.error()
            .starts_with("error: invalid label key: \"bad key=x\""),
        "{}",
        r.error()
    );
    let r = label(c, "ghost", &["a=b"], false).await.failed();
    assert_eq!(
        r.error(),
        "Error from server (NotFound): nodes \"ghost\" not found"
    );

    // Concurrent read-modify-writes: compare-and-swap plus retries keep every label.
    let mut tasks = Vec::new();
    for i in 0..4 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            let args = vec![format!("k{i}=v{i}")];
            kubectl::label(&c, "node", "n2", &args, false, None, &mut out)
                .await
                .map(|_| String::from_utf8(out).unwrap())
                .map_err(|e| error_text(&e))
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), "node/n2 labeled\n");
    }
    let n2 = get_json(c, "node", &["n2"]).await;
    for i in 0..4 {
        assert_eq!(
            n2["metadata"]["labels"][format!("k{i}")],
            format!("v{i}"),
            "{n2}"
        );
    }

    // ---------------------------------------------------------------- taint
    assert_eq!(
        taint(c, "n2", &["dedicated=gpu:NoSchedule"]).await.ok().out,
        "node/n2 tainted\n"
    );
    let r = taint(c, "n2", &["dedicated=other:NoSchedule"])
        .await
        .failed();
    assert_eq!(
        r.error(),
        "error: node n2 already has dedicated taint(s) with same effect(s) and --overwrite is false"
    );
    assert_eq!(
        taint(c, "n2", &["evict:NoExecute"]).await.ok().out,
        "node/n2 tainted\n"
    );
    let n2 = get_json(c, "node", &["n2"]).await;
    let taints = n2["spec"]["taints"].as_array().unwrap();
    assert!(
        taints
            .iter()
            .any(|t| t["key"] == "dedicated" && t["value"] == "gpu"),
        "{n2}"
    );
    assert!(
        taints
            .iter()
            .any(|t| t["key"] == "evict" && t["timeAdded"].is_string()),
        "{n2}"
    );
    // The NoExecute taint evicts master-agent's pod from n2; describe says why.
    wait_until_every("master-agent's pod to leave n2", WAIT, POLL, || async {
        !daemon_pods(c, "master-agent").await.contains_key("n2")
    })
    .await;
    let r = describe(c, "ds", &["master-agent"]).await.ok();
    assert!(
        r.out
            .contains("\n  n2                          taint evict:NoExecute is not tolerated\n"),
        "{}",
        r.out
    );
    assert!(
        r.out.contains(
            "\n                              taint dedicated=gpu:NoSchedule is not tolerated\n"
        ),
        "{}",
        r.out
    );
    assert_eq!(
        taint(c, "n2", &["dedicated:NoSchedule-", "evict-"])
            .await
            .ok()
            .out,
        "node/n2 untainted\n"
    );
    let r = taint(c, "n2", &["dedicated-"]).await.failed();
    assert_eq!(r.error(), "error: taint \"dedicated\" not found");
    let r = taint(c, "n2", &["k=v:Sometimes"]).await.failed();
    assert!(
        r.error()
            .starts_with("error: invalid taint effect: Sometimes"),
        "{}",
        r.error()
    );
    let mut out = Vec::new();
    let e = kubectl::taint(c, "ds", "x", &strings(&["a:NoSchedule"]), false, &mut out)
        .await
        .unwrap_err();
    assert_eq!(
        error_text(&e),
        "error: invalid resource type ds, only node types are supported"
    );

    // ---------------------------------------------------------------- cordon
    assert_eq!(cordon(c, "n1", true).await.ok().out, "node/n1 cordoned\n");
    assert_eq!(
        cordon(c, "n1", true).await.ok().out,
        "node/n1 already cordoned\n"
    );
    let t = cells(&get(c, get_opts("no", &["n1"])).await.ok().out);
    assert_eq!(t[1][1], "Ready,SchedulingDisabled");
    assert_eq!(
        get_json(c, "node", &["n1"]).await["spec"]["unschedulable"],
        true
    );
    assert_eq!(
        cordon(c, "n1", false).await.ok().out,
        "node/n1 uncordoned\n"
    );
    assert_eq!(
        cordon(c, "n1", false).await.ok().out,
        "node/n1 already uncordoned\n"
    );
    let r = cordon(c, "ghost", true).await.failed();
    assert_eq!(
        r.error(),
        "Error from server (NotFound): nodes \"ghost\" not found"
    );

    // ---------------------------------------------------------------- events
    let event = format!(
        r#"
apiVersion: v1
kind: Event
metadata: {{name: example-daemonset.1, namespace: default}}
involvedObject: {{apiVersion: apps/v1, kind: DaemonSet, name: example-daemonset, namespace: default, uid: {uid}}}
reason: SuccessfulCreate
message: "Created pod: example-daemonset-abcde"
type: Normal
source: {{component: daemonset-controller}}
firstTimestamp: "2024-05-01T12:00:00Z"
lastTimestamp: "2024-05-01T12:00:00Z"
"#
    );
    apply(c, &inline(&event), None).await.ok();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    drover_cli::events::events(c, None, false, false, &mut out, &mut err)
        .await
        .unwrap();
    let t = cells(&String::from_utf8(out).unwrap());
    assert_eq!(
        t[0],
        strings(&["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"])
    );
    let row = t
        .iter()
        .find(|r| {
            r.last()
                .is_some_and(|m| m == "Created pod: example-daemonset-abcde")
        })
        .expect("the event");
    assert_eq!(
        row[1..4],
        strings(&["Normal", "SuccessfulCreate", "DaemonSet/example-daemonset"])
    );
    let mut o = get_opts("ev", &[]);
    o.all_namespaces = true;
    let t = cells(&get(c, o).await.ok().out);
    assert!(t
        .iter()
        .any(|r| r.contains(&"daemonset/example-daemonset".to_string())));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    drover_cli::events::events(c, Some("quiet"), false, false, &mut out, &mut err)
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8(err).unwrap(),
        "No events found in quiet namespace.\n"
    );
    let r = describe(c, "ds", &["example-daemonset"]).await.ok();
    assert!(
        r.out.contains("\nEvents:\n  Type    Reason            Age"),
        "{}",
        r.out
    );
    assert!(
        r.out
            .contains("daemonset-controller  Created pod: example-daemonset-abcde\n"),
        "{}",
        r.out
    );

    // ---------------------------------------------------------------- watch
    let watched = SharedBuf::default();
    let w = {
        let c = c.clone();
        let mut buf = watched.clone();
        tokio::spawn(async move {
            let mut err = Vec::new();
            let mut o = get_opts("pods", &[]);
            o.namespace = Some("manual".into());
            o.watch = true;
            kubectl::get(&c, &o, &mut buf, &mut err).await
        })
    };
    wait_for_output("the initial table", &watched, |t| t.contains("web ")).await;
    apply(
        c,
        &inline(&BARE_POD.replace("name: web\n", "name: web2\n")),
        None,
    )
    .await
    .ok();
    wait_for_output("a row for the new pod", &watched, |t| t.contains("web2")).await;
    let t = cells(&watched.text());
    assert_eq!(t[0][0], "NAME");
    assert_eq!(t[1][0], "web");
    assert_eq!(t.last().unwrap()[..3], strings(&["web2", "1/1", "Running"]));

    // ---------------------------------------------------------------- delete
    let r = delete(
        c,
        DeleteOptions {
            kind: Some("ds".into()),
            names: strings(&["nope", "master-agent"]),
            ..DeleteOptions::default()
        },
    )
    .await
    .failed();
    assert_eq!(r.out, "daemonset.apps \"master-agent\" deleted\n");
    assert_eq!(
        r.error(),
        "Error from server (NotFound): daemonsets.apps \"nope\" not found"
    );
    get(c, get_opts("ds", &["master-agent"])).await.failed();

    let r = delete(
        c,
        DeleteOptions {
            kind: Some("pods".into()),
            selector: Some("app=web".into()),
            namespace: Some("manual".into()),
            ..DeleteOptions::default()
        },
    )
    .await
    .ok();
    assert_eq!(r.out, "pod \"web\" deleted\npod \"web2\" deleted\n");
    // The watch shows each deleted pod as kubectl does: Terminating.
    wait_for_output("the deleted pods", &watched, |t| {
        t.matches("Terminating").count() == 2
    })
    .await;
    let t = cells(&watched.text());
    let last: Vec<Vec<String>> = t[t.len() - 2..].iter().map(|r| r[..3].to_vec()).collect();
    assert_eq!(
        last,
        [
            strings(&["web", "1/1", "Terminating"]),
            strings(&["web2", "1/1", "Terminating"])
        ]
    );
    w.abort();
    let r = delete(
        c,
        DeleteOptions {
            sources: sources(&["01-example-daemonset.yaml", "09-pod-nodename.yaml"]),
            ..DeleteOptions::default()
        },
    )
    .await
    .ok();
    assert_eq!(
        r.out,
        "daemonset.apps \"example-daemonset\" deleted\npod \"static-pod-on-node-xyz\" deleted\n"
    );
    let r = delete(
        c,
        DeleteOptions {
            kind: Some("node".into()),
            names: strings(&["n3"]),
            ..DeleteOptions::default()
        },
    )
    .await
    .ok();
    assert_eq!(r.out, "node \"n3\" deleted\n");
    let r = delete(
        c,
        DeleteOptions {
            kind: Some("ds".into()),
            ..DeleteOptions::default()
        },
    )
    .await
    .failed();
    assert!(r
        .error()
        .starts_with("error: resource(s) were provided, but no name was specified"));
    let r = get(c, get_opts("ds", &[])).await.ok();
    assert_eq!(r.err, "No resources found in default namespace.\n");

    cl.server.shutdown().await;
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
