//! One long session of the kubectl-style commands against one server:
//! apply, get in every output format, describe, label, taint, cordon,
//! delete, watch, and invalid manifests refused whole.

use super::*;

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
