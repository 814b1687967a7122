//! Deployments and ReplicaSets through the real kubectl (v1.32) against
//! an in-process server: `create deployment` (its protobuf body), `get`
//! tables and `-o wide`, the `scale` subresource, `set image`, `rollout
//! pause|resume|restart|status|history`, the `status` subresource,
//! `describe`, `explain`, `api-resources`, and who may call (an admin
//! writes; a viewer reads; a metrics or node credential is refused).
//!
//! The Deployment and ReplicaSet controllers are off here
//! (`ControllerConfig::workloads`): the status a controller would write is
//! written through the status subresource, so that `get`, `describe` and
//! `rollout status` are checked against states chosen by the test. The
//! same commands against the running controllers and sim nodes:
//! `crates/drover-server/tests/workloads_kubectl.rs`.

mod kube;

use drover_api::Kind;
use kube::Kube;
use serde_json::{json, Value};

async fn object(k: &Kube, what: &str) -> Value {
    let out = k.ok(&["get", what, "-o", "json"]).await;
    serde_json::from_str(&out).expect("kubectl prints JSON")
}

/// The cells of each line of a table (split on runs of spaces).
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

/// Writes the status a controller would write, as the status subresource.
async fn write_status(k: &Kube, kind: Kind, name: &str, status: Value) {
    k.server
        .objects
        .update_status(kind, "default", name, "", status)
        .await
        .expect("status written");
}

/// A ReplicaSet of Deployment `web` (uid `uid`), as its controller names
/// and labels it.
fn replica_set(uid: &str, hash: &str, image: &str, revision: u32) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web-{hash}
  labels: {{app: web, pod-template-hash: "{hash}"}}
  annotations: {{deployment.kubernetes.io/revision: "{revision}"}}
  ownerReferences:
  - {{apiVersion: apps/v1, kind: Deployment, name: web, uid: "{uid}", controller: true, blockOwnerDeletion: true}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web, pod-template-hash: "{hash}"}}}}
  template:
    metadata: {{labels: {{app: web, pod-template-hash: "{hash}"}}}}
    spec:
      containers:
      - {{name: busybox, image: "{image}"}}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_drives_deployments_and_replica_sets() {
    let k = Kube::start_tuned(0, |o| o.controller.workloads = false).await;

    // Discovery: both kinds, their short names, under apps/v1.
    let out = k.ok(&["api-resources", "--api-group=apps"]).await;
    let r = rows(&out);
    assert!(
        r.contains(
            &["deployments", "deploy", "apps/v1", "true", "Deployment"]
                .map(String::from)
                .to_vec()
        ),
        "{out}"
    );
    assert!(
        r.contains(
            &["replicasets", "rs", "apps/v1", "true", "ReplicaSet"]
                .map(String::from)
                .to_vec()
        ),
        "{out}"
    );

    // create deployment sends protobuf; the server defaults it.
    let out = k
        .ok(&["create", "deployment", "web", "--image=local/busybox:1"])
        .await;
    assert_eq!(out, "deployment.apps/web created\n");
    let d = object(&k, "deploy/web").await;
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(
        d["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}})
    );
    assert_eq!(
        d["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert_eq!(d["spec"]["progressDeadlineSeconds"], 600);
    assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["name"], "busybox");
    assert_eq!(container["image"], "local/busybox:1");
    let uid = d["metadata"]["uid"].as_str().unwrap().to_owned();
    // Every field kubectl's generator sets, through its protobuf body.
    let out = k
        .ok(&[
            "create",
            "deployment",
            "db",
            "--image=local/busybox:1",
            "--port=8080",
            "--replicas=0",
            "--",
            "sleep",
            "3600",
        ])
        .await;
    assert_eq!(out, "deployment.apps/db created\n");
    let db = object(&k, "deploy/db").await;
    assert_eq!(db["spec"]["replicas"], 0, "an explicit 0 is kept");
    let c = &db["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["command"], json!(["sleep", "3600"]));
    assert_eq!(
        c["ports"],
        json!([{"containerPort": 8080, "protocol": "TCP"}])
    );
    k.ok(&["delete", "deploy", "db"]).await;

    // A ReplicaSet as the controller would write it, and both statuses.
    k.server
        .apply(&replica_set(&uid, "5d8f9c7b6", "local/busybox:1", 1))
        .await;
    write_status(
        &k,
        Kind::ReplicaSet,
        "web-5d8f9c7b6",
        json!({"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}),
    )
    .await;
    // kubectl writes a status too (the status subresource over HTTP).
    k.ok(&[
        "patch",
        "deploy/web",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"observedGeneration":1,"replicas":1,"updatedReplicas":1,"readyReplicas":1,"availableReplicas":1}}"#,
    ])
    .await;

    let out = k.ok(&["get", "deploy,rs"]).await;
    let r = rows(&out);
    assert_eq!(
        r[0],
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{out}"
    );
    assert_eq!(r[1][..4], ["deployment.apps/web", "1/1", "1", "1"], "{out}");
    assert_eq!(
        r[3],
        ["NAME", "DESIRED", "CURRENT", "READY", "AGE"],
        "{out}"
    );
    assert_eq!(
        r[4][..4],
        ["replicaset.apps/web-5d8f9c7b6", "1", "1", "1"],
        "{out}"
    );
    let out = k.ok(&["get", "deploy", "-o", "wide"]).await;
    let r = rows(&out);
    assert_eq!(
        r[0],
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ],
        "{out}"
    );
    assert_eq!(
        r[1][5..],
        ["busybox", "local/busybox:1", "app=web"],
        "{out}"
    );
    let out = k.ok(&["get", "rs", "-o", "wide"]).await;
    assert!(
        out.lines()
            .next()
            .unwrap()
            .ends_with("CONTAINERS   IMAGES            SELECTOR"),
        "{out}"
    );
    assert!(out.contains("app=web,pod-template-hash=5d8f9c7b6"), "{out}");

    // kubectl's own describer reads the ReplicaSets and events.
    let out = k.ok(&["describe", "deploy", "web"]).await;
    for want in [
        "Replicas:               1 desired | 1 updated | 1 total | 1 available | 0 unavailable",
        "StrategyType:           RollingUpdate",
        "RollingUpdateStrategy:  25% max unavailable, 25% max surge",
        "web-5d8f9c7b6 (1/1 replicas created)",
    ] {
        assert!(out.contains(want), "{want:?} in {out}");
    }

    // rollout status reads the status; done when available = updated = wanted.
    let out = k
        .ok(&["rollout", "status", "deploy/web", "--timeout=20s"])
        .await;
    assert_eq!(out, "deployment \"web\" successfully rolled out\n");
    let out = k.ok(&["rollout", "history", "deploy/web"]).await;
    assert!(
        out.starts_with("deployment.apps/web \nREVISION  CHANGE-CAUSE\n1         <none>"),
        "{out}"
    );

    // `get all` takes both kinds (their category).
    let out = k.ok(&["get", "all"]).await;
    assert!(out.contains("deployment.apps/web "), "{out}");
    assert!(out.contains("replicaset.apps/web-5d8f9c7b6 "), "{out}");

    // The scale subresource; a watch sees the change.
    let mut watch = k.spawn(&["get", "deploy", "web", "-w"]);
    watch
        .wait_line("the Deployment listed", |l| {
            l.starts_with("web ") && l.contains("1/1")
        })
        .await;
    let out = k.ok(&["scale", "deploy/web", "--replicas=3"]).await;
    assert_eq!(out, "deployment.apps/web scaled\n");
    watch
        .wait_line("the scaled Deployment", |l| {
            l.starts_with("web ") && l.contains("1/3")
        })
        .await;
    watch.stop().await;
    assert_eq!(object(&k, "deploy/web").await["spec"]["replicas"], 3);
    let out = k.ok(&["scale", "rs/web-5d8f9c7b6", "--replicas=2"]).await;
    assert_eq!(out, "replicaset.apps/web-5d8f9c7b6 scaled\n");
    assert_eq!(object(&k, "rs/web-5d8f9c7b6").await["spec"]["replicas"], 2);
    let e = k.fails(&["scale", "deploy/web", "--replicas=-1"]).await;
    assert!(e.contains("--replicas=COUNT"), "{e}");
    let rv = object(&k, "deploy/web").await["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let e = k
        .fails(&[
            "scale",
            "deploy/web",
            "--replicas=4",
            "--resource-version=1",
        ])
        .await;
    assert!(e.contains("Expected resource version to be 1"), "{e}");
    let out = k
        .ok(&[
            "scale",
            "deploy/web",
            "--replicas=4",
            &format!("--resource-version={rv}"),
        ])
        .await;
    assert_eq!(out, "deployment.apps/web scaled\n");
    let status = k
        .ok(&[
            "get",
            "--raw",
            "/apis/apps/v1/namespaces/default/deployments/web/scale",
        ])
        .await;
    let scale: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 4);
    assert_eq!(
        scale["status"],
        json!({"replicas": 1, "selector": "app=web"})
    );

    // set image; pause, resume; restart.
    let out = k
        .ok(&["set", "image", "deployment/web", "busybox=local/busybox:2"])
        .await;
    assert_eq!(out, "deployment.apps/web image updated\n");
    let d = object(&k, "deploy/web").await;
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "local/busybox:2"
    );
    // Each scale and the new template moved the generation, as in Kubernetes.
    assert_eq!(d["metadata"]["generation"], 4, "{d}");
    // A status not yet observed: rollout status waits for the controller.
    let out = k
        .ok(&["rollout", "status", "deploy/web", "--watch=false"])
        .await;
    assert_eq!(
        out,
        "Waiting for deployment spec update to be observed...\n"
    );
    write_status(
        &k,
        Kind::Deployment,
        "web",
        json!({"observedGeneration": 4, "replicas": 5, "updatedReplicas": 4,
            "readyReplicas": 3, "availableReplicas": 3, "unavailableReplicas": 1}),
    )
    .await;
    let out = k
        .ok(&["rollout", "status", "deploy/web", "--watch=false"])
        .await;
    assert_eq!(
        out,
        "Waiting for deployment \"web\" rollout to finish: 1 old replicas are pending termination...\n"
    );
    let out = k.ok(&["rollout", "pause", "deployment/web"]).await;
    assert_eq!(out, "deployment.apps/web paused\n");
    assert_eq!(object(&k, "deploy/web").await["spec"]["paused"], true);
    let e = k.fails(&["rollout", "restart", "deployment/web"]).await;
    assert!(e.contains("paused"), "{e}");
    let out = k.ok(&["rollout", "resume", "deployment/web"]).await;
    assert_eq!(out, "deployment.apps/web resumed\n");
    assert_eq!(
        object(&k, "deploy/web").await["spec"]["paused"],
        Value::Null
    );
    let out = k.ok(&["rollout", "restart", "deployment/web"]).await;
    assert_eq!(out, "deployment.apps/web restarted\n");
    let d = object(&k, "deploy/web").await;
    assert!(
        d["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
            .is_string(),
        "{d}"
    );
    // The status is the status subresource's: a write of the object keeps it.
    assert_eq!(d["status"]["updatedReplicas"], 4, "{d}");

    // rollout undo: kubectl's JSON patch puts revision 1's template back,
    // without its pod-template-hash. It replaces metadata.annotations,
    // which must exist (as in Kubernetes): the controller writes the
    // revision annotation there.
    k.ok(&[
        "annotate",
        "deploy/web",
        "deployment.kubernetes.io/revision=2",
    ])
    .await;
    let out = k
        .ok(&["rollout", "history", "deploy/web", "--revision=1"])
        .await;
    assert!(
        out.starts_with("deployment.apps/web with revision #1\nPod Template:\n"),
        "{out}"
    );
    let out = k
        .ok(&["rollout", "undo", "deploy/web", "--to-revision=1"])
        .await;
    assert_eq!(out, "deployment.apps/web rolled back\n");
    let d = object(&k, "deploy/web").await;
    assert_eq!(
        d["spec"]["template"]["metadata"],
        json!({"labels": {"app": "web"}}),
        "{d}"
    );
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "local/busybox:1"
    );
    let out = k
        .ok(&["rollout", "undo", "deploy/web", "--to-revision=1"])
        .await;
    assert_eq!(
        out,
        "deployment.apps/web skipped rollback (current template already matches revision 1)\n"
    );

    // A progress deadline that passed fails rollout status.
    let generation = d["metadata"]["generation"].clone();
    write_status(
        &k,
        Kind::Deployment,
        "web",
        json!({"observedGeneration": generation, "replicas": 4, "updatedReplicas": 1,
            "conditions": [{"type": "Progressing", "status": "False",
                "reason": "ProgressDeadlineExceeded"}]}),
    )
    .await;
    let e = k
        .fails(&["rollout", "status", "deploy/web", "--timeout=20s"])
        .await;
    assert!(
        e.contains("deployment \"web\" exceeded its progress deadline"),
        "{e}"
    );

    // explain reads the OpenAPI schemas.
    let out = k.ok(&["explain", "deployment.spec.replicas"]).await;
    assert!(out.contains("KIND:       Deployment"), "{out}");
    assert!(out.contains("FIELD: replicas <integer>"), "{out}");
    let out = k.ok(&["explain", "deployment.spec.strategy"]).await;
    assert!(out.contains("rollingUpdate"), "{out}");
    let out = k.ok(&["explain", "rs.spec"]).await;
    assert!(out.contains("template"), "{out}");

    // The seeds' Deployment applies unchanged.
    let seed = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../drover-api/tests/data/10-deployment-antiaffinity.yaml");
    let out = k.ok(&["apply", "-f", seed.to_str().unwrap()]).await;
    assert_eq!(out, "deployment.apps/on-every-node-deployment created\n");
    // Applied again changed: kubectl's three-way strategic merge patch.
    let text = std::fs::read_to_string(&seed)
        .unwrap()
        .replace("replicas: 6", "replicas: 2")
        .replace("busybox:latest", "local/busybox:1");
    let changed = k.tmp.path().join("changed.yaml");
    std::fs::write(&changed, text).unwrap();
    let out = k.ok(&["apply", "-f", changed.to_str().unwrap()]).await;
    assert_eq!(out, "deployment.apps/on-every-node-deployment configured\n");
    let d = object(&k, "deploy/on-every-node-deployment").await;
    assert_eq!(d["spec"]["replicas"], 2);
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["containers"][0]["image"], "local/busybox:1");
    assert_eq!(
        pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
            ["topologyKey"],
        "kubernetes.io/hostname"
    );
    let out = k.ok(&["apply", "-f", changed.to_str().unwrap()]).await;
    assert_eq!(out, "deployment.apps/on-every-node-deployment unchanged\n");
    let out = k.ok(&["delete", "-f", changed.to_str().unwrap()]).await;
    assert_eq!(
        out,
        "deployment.apps \"on-every-node-deployment\" deleted\n"
    );
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_an_admin_writes_deployments_and_a_node_or_metrics_credential_reads_nothing() {
    let k = Kube::start(1).await;
    k.ok(&["create", "deployment", "web", "--image=local/busybox:1"])
        .await;
    let server = &k.server.server;
    let issue = |name: &'static str, role: &'static str| async move {
        let (cred, r) = drover_testkit::issue_client(server, name, role).await;
        (r.cert, cred.key_pem)
    };
    let (cert, key) = issue("viewer-1", "viewer").await;
    let viewer = k.user_kubeconfig("viewer", &cert, &key);
    let (cert, key) = issue("prom", "metrics").await;
    let metrics = k.user_kubeconfig("metrics", &cert, &key);
    let (cert, key) =
        drover_testkit::node_certificate(&k.server.addr, &k.server.ca, &k.server.node_token, "kx0")
            .await;
    let node = k.user_kubeconfig("node", &cert, &key);

    let run = |cfg: std::path::PathBuf, args: &'static [&'static str]| {
        let k = &k;
        async move {
            let o = k.run_with(&cfg, args).await;
            (
                o.status.success(),
                String::from_utf8_lossy(&o.stdout).to_string()
                    + &String::from_utf8_lossy(&o.stderr),
            )
        }
    };
    // A viewer reads, and may not write (scale, create, set image).
    let (ok, out) = run(viewer.clone(), &["get", "deploy,rs"]).await;
    assert!(ok, "{out}");
    let (ok, out) = run(
        viewer.clone(),
        &[
            "get",
            "--raw",
            "/apis/apps/v1/namespaces/default/deployments/web/scale",
        ],
    )
    .await;
    assert!(ok, "{out}");
    for args in [
        &["scale", "deploy/web", "--replicas=2"][..],
        &["create", "deployment", "db", "--image=local/busybox:1"],
        &["set", "image", "deploy/web", "busybox=x:2"],
        &["rollout", "pause", "deploy/web"],
    ] {
        let args: &'static [&'static str] = Box::leak(args.to_vec().into_boxed_slice());
        let (ok, out) = run(viewer.clone(), args).await;
        assert!(!ok, "{args:?}: {out}");
        assert!(
            out.contains("viewer viewer-1 may not write"),
            "{args:?}: {out}"
        );
    }
    // A metrics or node credential may neither read nor write them.
    for (who, cfg) in [("metrics", &metrics), ("node", &node)] {
        for args in [
            &["get", "deploy"][..],
            &["get", "rs"],
            &["scale", "deploy/web", "--replicas=2"],
            &["create", "deployment", "db", "--image=local/busybox:1"],
        ] {
            let args: &'static [&'static str] = Box::leak(args.to_vec().into_boxed_slice());
            let (ok, out) = run(cfg.clone(), args).await;
            assert!(!ok, "{who} {args:?}: {out}");
            assert!(
                out.contains(&format!(
                    "may not {}",
                    if args[0] == "get" { "read" } else { "write" }
                )) || out.contains("may not read"),
                "{who} {args:?}: {out}"
            );
        }
    }
    let d = object(&k, "deploy/web").await;
    assert_eq!(d["spec"]["replicas"], 1, "nothing changed it");
    assert_eq!(
        k.ok(&["get", "deploy", "db", "--ignore-not-found"]).await,
        "",
        "nobody but the admin created it"
    );
    k.stop().await;
}
