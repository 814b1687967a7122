//! kubectl's writes against an in-process server with sim nodes: `apply`
//! (client-side, its default `--validate=strict` answered by drover's
//! validation), `apply --server-side`, `label`, `annotate`, `cordon`,
//! `uncordon`, `taint`, `delete`, `rollout status|history|undo|restart`,
//! `drain --ignore-daemonsets`, `create`, `replace`, `patch`.

mod kube;

use drover_api::{Kind, Manifest, Pod};
use kube::Kube;
use std::path::Path;

/// The DaemonSets of the manifests users bring: the repo's copies of
/// `../shared/manifests/` (`crates/drover-api/tests/manifests.rs` checks
/// that they are the same).
fn daemon_set_files() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../drover-api/tests/data");
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "yaml")
                && std::fs::read_to_string(p).is_ok_and(|t| t.contains("kind: DaemonSet"))
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "DaemonSet manifests in {}", dir.display());
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_apply_creates_configures_and_leaves_unchanged() {
    let k = Kube::start(2).await;
    for f in daemon_set_files() {
        let path = f.to_str().unwrap();
        let text = std::fs::read_to_string(&f).unwrap();
        let m = drover_api::parse_manifests(&text).unwrap().remove(0);
        let reference = m.reference();
        let out = k.ok(&["apply", "-f", path]).await;
        assert_eq!(out, format!("{reference} created\n"), "{path}");
        let out = k.ok(&["apply", "-f", path]).await;
        assert_eq!(out, format!("{reference} unchanged\n"), "{path}");
        // A change: a label of the template.
        let changed = k.tmp.path().join(f.file_name().unwrap());
        let mut v: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        v["spec"]["template"]["metadata"]["labels"]["changed"] = "yes".into();
        v["spec"]["template"]["spec"]["containers"][0]["env"] =
            serde_json::json!([{"name": "ADDED", "value": "1"}]);
        std::fs::write(&changed, serde_json::to_string(&v).unwrap()).unwrap();
        let out = k.ok(&["apply", "-f", changed.to_str().unwrap()]).await;
        assert_eq!(out, format!("{reference} configured\n"), "{path}");
        let ns = m.namespace();
        let got = k
            .server
            .objects
            .get(Kind::DaemonSet, ns, m.name())
            .await
            .unwrap();
        let Manifest::DaemonSet(ds) = got else {
            panic!()
        };
        assert_eq!(
            ds.spec
                .template
                .metadata
                .labels
                .get("changed")
                .map(String::as_str),
            Some("yes")
        );
        assert_eq!(ds.spec.template.spec.containers[0].env[0].name, "ADDED");
        // Back to the file: the env var goes (three-way patch).
        let out = k.ok(&["apply", "-f", path]).await;
        assert_eq!(out, format!("{reference} configured\n"), "{path}");
        let got = k
            .server
            .objects
            .get(Kind::DaemonSet, ns, m.name())
            .await
            .unwrap();
        let Manifest::DaemonSet(ds) = got else {
            panic!()
        };
        let Manifest::DaemonSet(orig) = &m else {
            panic!()
        };
        assert_eq!(
            ds.spec.template.spec.containers[0].env, orig.spec.template.spec.containers[0].env,
            "{path}"
        );
        assert!(!ds.spec.template.metadata.labels.contains_key("changed"));
        // Two of the files share a name: each goes before the next.
        let out = k.ok(&["delete", "-f", path]).await;
        assert!(out.ends_with(" deleted\n"), "{out}");
    }
    // drover's validation decides, and kubectl prints its causes.
    let bad = k.tmp.path().join("bad.yaml");
    std::fs::write(&bad, "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: bad}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: c}}\n    spec: {containers: [{name: c, image: i}]}\n").unwrap();
    let e = k.fails(&["apply", "-f", bad.to_str().unwrap()]).await;
    assert!(
        e.contains(
            "The DaemonSet \"bad\" is invalid: spec.template.metadata.labels: Invalid value: "
        ),
        "{e}"
    );
    let typo = k.tmp.path().join("typo.yaml");
    std::fs::write(&typo, "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: typo}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec: {containers: [{name: c, image: i, imagePullPolcy: Always}]}\n").unwrap();
    let e = k.fails(&["apply", "-f", typo.to_str().unwrap()]).await;
    assert!(e.contains("imagePullPolcy"), "{e}");
    // dry run writes nothing.
    let one = daemon_set_files().remove(0);
    let out = k
        .ok(&["apply", "-f", one.to_str().unwrap(), "--dry-run=server"])
        .await;
    assert!(out.contains("created (server dry run)"), "{out}");
    let e = k.fails(&["get", "-f", one.to_str().unwrap()]).await;
    assert!(e.contains("NotFound"), "{e}");
    // Server-side apply: created, then changed.
    let out = k
        .ok(&["apply", "--server-side", "-f", one.to_str().unwrap()])
        .await;
    assert!(out.contains("serverside-applied"), "{out}");
    let out = k
        .ok(&["apply", "--server-side", "-f", one.to_str().unwrap()])
        .await;
    assert!(out.contains("serverside-applied"), "{out}");
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_edits_nodes_and_objects() {
    let k = Kube::start(2).await;
    k.apply_ds("web", "app=web").await;
    k.wait_pods(2).await;
    assert_eq!(
        k.ok(&["label", "node", "kn0", "disk=ssd"]).await,
        "node/kn0 labeled\n"
    );
    assert_eq!(
        k.ok(&["get", "nodes", "-l", "disk=ssd", "-o", "name"])
            .await,
        "node/kn0\n"
    );
    assert_eq!(
        k.ok(&["label", "node", "kn0", "disk-"]).await,
        "node/kn0 unlabeled\n"
    );
    let e = k
        .fails(&["label", "node", "kn0", "app=x", "--resource-version=1"])
        .await;
    assert!(
        e.contains("Conflict") || e.contains("the object has been modified"),
        "{e}"
    );
    assert_eq!(
        k.ok(&["annotate", "ds", "web", "note=hello"]).await,
        "daemonset.apps/web annotated\n"
    );
    assert_eq!(k.ok(&["cordon", "kn1"]).await, "node/kn1 cordoned\n");
    let t = k.ok(&["get", "node", "kn1"]).await;
    assert!(t.contains("Ready,SchedulingDisabled"), "{t}");
    assert_eq!(k.ok(&["uncordon", "kn1"]).await, "node/kn1 uncordoned\n");
    assert_eq!(
        k.ok(&["taint", "node", "kn1", "dedicated=x:NoSchedule"])
            .await,
        "node/kn1 tainted\n"
    );
    let taints = k
        .ok(&["get", "node", "kn1", "-o", "jsonpath={.spec.taints[*].key}"])
        .await;
    assert!(taints.contains("dedicated"), "{taints}");
    assert_eq!(
        k.ok(&["taint", "node", "kn1", "dedicated:NoSchedule-"])
            .await,
        "node/kn1 untainted\n"
    );
    // patch, every type.
    k.ok(&[
        "patch",
        "ds",
        "web",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"m":"1"}}}"#,
    ])
    .await;
    k.ok(&[
        "patch",
        "ds",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/metadata/labels/j","value":"2"}]"#,
    ])
    .await;
    k.ok(&[
        "patch",
        "ds",
        "web",
        "-p",
        r#"{"metadata":{"labels":{"s":"3"}}}"#,
    ])
    .await;
    let labels = k
        .ok(&["get", "ds", "web", "-o", "jsonpath={.metadata.labels}"])
        .await;
    assert!(
        labels.contains("\"m\":\"1\"")
            && labels.contains("\"j\":\"2\"")
            && labels.contains("\"s\":\"3\""),
        "{labels}"
    );
    // create, replace with a stale resourceVersion is a conflict.
    // kubectl's generators send protobuf, which drover reads for create.
    let out = k
        .ok(&[
            "create",
            "priorityclass",
            "low",
            "--value=10",
            "--description=d",
        ])
        .await;
    assert_eq!(out, "priorityclass.scheduling.k8s.io/low created\n");
    let v = k
        .ok(&["get", "pc", "low", "-o", "jsonpath={.value} {.description}"])
        .await;
    assert_eq!(v, "10 d");
    let pc = k.tmp.path().join("pc.yaml");
    std::fs::write(
        &pc,
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n",
    )
    .unwrap();
    let out = k.ok(&["create", "-f", pc.to_str().unwrap()]).await;
    assert_eq!(out, "priorityclass.scheduling.k8s.io/high created\n");
    let e = k.fails(&["create", "-f", pc.to_str().unwrap()]).await;
    assert!(e.contains("(AlreadyExists)"), "{e}");
    // A body over the limit is refused before it is read whole.
    let big = k.tmp.path().join("big.yaml");
    std::fs::write(
        &big,
        format!(
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: big}}\nvalue: 1\ndescription: {}\n",
            "x".repeat(4 << 20)
        ),
    )
    .unwrap();
    let e = k.fails(&["create", "-f", big.to_str().unwrap()]).await;
    assert!(e.contains("larger than the limit of 3145728 bytes"), "{e}");
    let y = k.ok(&["get", "pc", "high", "-o", "yaml"]).await;
    let stale = k.tmp.path().join("stale.yaml");
    std::fs::write(&stale, &y).unwrap();
    k.ok(&["label", "pc", "high", "x=y"]).await;
    let e = k.fails(&["replace", "-f", stale.to_str().unwrap()]).await;
    assert!(e.contains("(Conflict)"), "{e}");
    // delete: one object, a pod revived by the controller, a file.
    let pod = k.first_pod("app=web").await;
    let out = k.ok(&["delete", "pod", &pod]).await;
    assert_eq!(out, format!("pod \"{pod}\" deleted\n"));
    k.wait_for("a new pod", || async {
        let pods = k.server.pods(None).await;
        pods.len() == 2 && pods.iter().all(|p| p.metadata.name != pod)
    })
    .await;
    assert_eq!(
        k.ok(&["delete", "ds", "web"]).await,
        "daemonset.apps \"web\" deleted\n"
    );
    k.wait_for("the pods gone", || async {
        k.server.pods(None).await.is_empty()
    })
    .await;
    assert_eq!(
        k.ok(&["delete", "pc", "high"]).await,
        "priorityclass.scheduling.k8s.io \"high\" deleted\n"
    );
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_rollout_and_drain() {
    let k = Kube::start(2).await;
    k.apply_ds("web", "app=web").await;
    k.wait_pods(2).await;
    let out = k
        .ok(&["rollout", "status", "ds/web", "--timeout=30s"])
        .await;
    assert!(
        out.contains("daemon set \"web\" successfully rolled out"),
        "{out}"
    );
    k.ok(&["set", "image", "ds/web", "c=busybox:2"]).await;
    let out = k
        .ok(&["rollout", "status", "ds/web", "--timeout=30s"])
        .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    let h = k.ok(&["rollout", "history", "ds/web"]).await;
    assert!(
        h.starts_with("daemonset.apps/web \nREVISION  CHANGE-CAUSE\n1 "),
        "{h}"
    );
    assert!(h.contains("\n2 "), "{h}");
    let out = k.ok(&["rollout", "undo", "ds/web"]).await;
    assert_eq!(out, "daemonset.apps/web rolled back\n");
    k.wait_for("the old image back", || async {
        let img = k
            .ok(&[
                "get",
                "ds",
                "web",
                "-o",
                "jsonpath={.spec.template.spec.containers[0].image}",
            ])
            .await;
        img == "busybox:1"
    })
    .await;
    let out = k
        .ok(&["rollout", "status", "ds/web", "--timeout=30s"])
        .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    let out = k.ok(&["rollout", "restart", "ds/web"]).await;
    assert_eq!(out, "daemonset.apps/web restarted\n");
    let restarted = k
        .ok(&[
            "get",
            "ds",
            "web",
            "-o",
            "jsonpath={.spec.template.metadata.annotations}",
        ])
        .await;
    assert!(
        restarted.contains("kubectl.kubernetes.io/restartedAt"),
        "{restarted}"
    );
    let out = k
        .ok(&["rollout", "status", "ds/web", "--timeout=30s"])
        .await;
    assert!(out.contains("successfully rolled out"), "{out}");

    let out = k.run(&["drain", "kn0", "--ignore-daemonsets"]).await;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("node/kn0 cordoned"), "{text}");
    assert!(
        text.contains("Warning: ignoring DaemonSet-managed Pods: default/web-"),
        "{text}"
    );
    assert!(text.contains("node/kn0 drained"), "{text}");
    k.ok(&["uncordon", "kn0"]).await;
    k.stop().await;
}

/// The pods labelled `app=APP`, sorted by name, each as (name, `what` of
/// it).
async fn pods_of(k: &Kube, app: &str, what: fn(&Pod) -> String) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = k
        .server
        .pods(None)
        .await
        .iter()
        .filter(|p| p.metadata.labels.get("app").map(String::as_str) == Some(app))
        .map(|p| (p.metadata.name.clone(), what(p)))
        .collect();
    out.sort();
    out
}

/// The uid of the pod's owner (empty when it has none).
fn owner(p: &Pod) -> String {
    p.metadata
        .owner_references
        .first()
        .map(|r| r.uid.clone())
        .unwrap_or_default()
}

/// The ID of the pod's first container: the same ID means the same
/// container, never restarted.
fn container(p: &Pod) -> String {
    p.status
        .container_statuses
        .first()
        .map(|c| c.container_id.clone())
        .unwrap_or_default()
}

/// `kubectl delete ds --cascade=orphan|foreground`, as Kubernetes does
/// them: orphan leaves the pods running without their owner (no garbage
/// collection, and a DaemonSet that selects them again adopts them instead
/// of making new ones); foreground returns once the pods are gone too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_deletes_a_daemon_set_orphaning_or_in_the_foreground() {
    let k = Kube::start(2).await;
    k.apply_ds("web", "app=web").await;
    k.wait_pods(2).await;
    let uid = k
        .ok(&["get", "ds", "web", "-o", "jsonpath={.metadata.uid}"])
        .await;
    let before = pods_of(&k, "web", owner).await;
    assert!(
        before.len() == 2 && before.iter().all(|(_, o)| *o == uid),
        "{before:?}"
    );
    let running = pods_of(&k, "web", container).await;
    assert!(running.iter().all(|(_, id)| !id.is_empty()), "{running:?}");
    // Orphan: kubectl waits until the DaemonSet is gone.
    let out = k.ok(&["delete", "ds", "web", "--cascade=orphan"]).await;
    assert_eq!(out, "daemonset.apps \"web\" deleted\n");
    let e = k.fails(&["get", "ds", "web"]).await;
    assert!(e.contains("(NotFound)"), "{e}");
    let names: Vec<&String> = before.iter().map(|(n, _)| n).collect();
    let orphans = pods_of(&k, "web", owner).await;
    assert_eq!(orphans.iter().map(|(n, _)| n).collect::<Vec<_>>(), names);
    assert!(orphans.iter().all(|(_, o)| o.is_empty()), "{orphans:?}");
    // Another DaemonSet converging means the controller (and its garbage
    // collector) went over every pod since: the orphans are still there.
    k.apply_ds("other", "app=other").await;
    k.wait_pods(4).await;
    assert_eq!(pods_of(&k, "web", owner).await, orphans);
    // Released, not restarted: the same containers run.
    assert_eq!(pods_of(&k, "web", container).await, running);
    // The same DaemonSet again adopts them and makes none.
    k.apply_ds("web", "app=web").await;
    let uid = k
        .ok(&["get", "ds", "web", "-o", "jsonpath={.metadata.uid}"])
        .await;
    k.wait_for("the orphans adopted", || async {
        let now = pods_of(&k, "web", owner).await;
        now.iter().map(|(n, _)| n).collect::<Vec<_>>() == names
            && now.iter().all(|(_, o)| *o == uid)
    })
    .await;
    assert_eq!(pods_of(&k, "web", container).await, running);
    // Foreground: when kubectl returns, the pods are gone with it.
    let out = k.ok(&["delete", "ds", "web", "--cascade=foreground"]).await;
    assert_eq!(out, "daemonset.apps \"web\" deleted\n");
    assert_eq!(pods_of(&k, "web", owner).await, []);
    assert_eq!(pods_of(&k, "other", owner).await.len(), 2);
    let e = k.fails(&["get", "ds", "web"]).await;
    assert!(e.contains("(NotFound)"), "{e}");
    k.stop().await;
}
