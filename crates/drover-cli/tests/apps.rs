//! drover's own commands on Deployments and ReplicaSets against a real
//! one-member server, in-process: apply, `get deploy,rs` (table, wide,
//! yaml), `describe deploy|rs`, `scale`, `set image`, `rollout
//! status|history|undo|restart|pause|resume`.
//!
//! The Deployment and ReplicaSet controllers are off here
//! (`ControllerConfig::workloads`): the ReplicaSets are applied as their
//! controller would make them, and the statuses written through the
//! status subresource, so that the commands are checked against states
//! chosen by the test.

use drover_api::{Kind, Manifest};
use drover_cli::kubectl::{self, GetOptions, Source};
use drover_cli::printers::Output;
use drover_cli::{rollout_deploy, scale, Client};
use drover_testkit::{Ran, TestServer};
use serde_json::{json, Value};

fn inline(text: &str) -> Vec<Source> {
    vec![Source {
        name: "inline.yaml".into(),
        text: text.into(),
    }]
}

async fn apply(c: &Client, text: &str) -> Ran {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let r = kubectl::apply(
        c,
        &inline(text),
        None,
        None,
        drover_api::FieldValidation::Strict,
        &mut out,
        &mut err,
    )
    .await;
    Ran::new(out, err, r)
}

async fn get(c: &Client, kind: &str, output: Option<Output>) -> Ran {
    let o = GetOptions {
        kind: kind.into(),
        output,
        ..GetOptions::default()
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let r = kubectl::get(c, &o, &mut out, &mut err).await;
    Ran::new(out, err, r)
}

async fn deployment(c: &Client) -> Value {
    let m = c.get_object("deployments", "default", "web").await.unwrap();
    serde_json::to_value(&m).unwrap()
}

/// Writes the status a controller would write (the status subresource).
async fn write_status(s: &TestServer, kind: Kind, name: &str, status: Value) {
    s.objects
        .update_status(kind, "default", name, "", status)
        .await
        .expect("status written");
}

/// Runs one of the commands below into a [`Ran`].
macro_rules! ran {
    ($call:expr) => {{
        let mut out = Vec::new();
        let r = $call(&mut out).await;
        Ran::new(out, Vec::new(), r)
    }};
}

const WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: \"local/busybox:2\"}
";

fn replica_set(uid: &str, hash: &str, image: &str, revision: u32, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web-{hash}
  annotations: {{deployment.kubernetes.io/revision: \"{revision}\", kubernetes.io/change-cause: \"image {image}\"}}
  ownerReferences: [{{apiVersion: apps/v1, kind: Deployment, name: web, uid: \"{uid}\", controller: true}}]
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web, pod-template-hash: \"{hash}\"}}}}
  template:
    metadata: {{labels: {{app: web, pod-template-hash: \"{hash}\"}}}}
    spec:
      containers:
      - {{name: web, image: \"{image}\"}}
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drover_commands_on_deployments_and_replica_sets() {
    let tmp = tempfile::tempdir().unwrap();
    let s =
        TestServer::start_tuned(&tmp.path().join("m0"), |o| o.controller.workloads = false).await;
    let c = s.client();
    let out = apply(&c, WEB).await.ok();
    assert_eq!(out.out, "deployment.apps/web created\n");
    let uid = deployment(&c).await["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    apply(&c, &replica_set(&uid, "aaa", "local/busybox:1", 1, 0))
        .await
        .ok();
    apply(&c, &replica_set(&uid, "bbb", "local/busybox:2", 2, 2))
        .await
        .ok();
    write_status(
        &s,
        Kind::ReplicaSet,
        "web-bbb",
        json!({"replicas": 2, "readyReplicas": 2, "availableReplicas": 2}),
    )
    .await;
    write_status(
        &s,
        Kind::Deployment,
        "web",
        json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
                "readyReplicas": 2, "availableReplicas": 2,
                "conditions": [{"type": "Available", "status": "True",
                    "reason": "MinimumReplicasAvailable"}]}),
    )
    .await;

    // get: both kinds, wide, yaml.
    let r = get(&c, "deploy,rs", None).await.ok();
    let lines = r.lines();
    assert!(lines[0].starts_with("NAME "), "{}", r.out);
    assert!(
        lines[0].contains("READY   UP-TO-DATE   AVAILABLE   AGE"),
        "{}",
        r.out
    );
    assert!(
        lines[1].starts_with("deployment.apps/web   2/2     2            2"),
        "{}",
        r.out
    );
    assert!(
        lines[3].contains("DESIRED   CURRENT   READY   AGE"),
        "{}",
        r.out
    );
    assert!(
        lines[4].starts_with("replicaset.apps/web-aaa   0         0         0"),
        "{}",
        r.out
    );
    assert!(
        lines[5].starts_with("replicaset.apps/web-bbb   2         2         2"),
        "{}",
        r.out
    );
    // `get all`: the kinds of kubectl's `all` category.
    let r = get(&c, "all", None).await.ok();
    assert!(r.out.contains("deployment.apps/web "), "{}", r.out);
    assert!(r.out.contains("replicaset.apps/web-bbb "), "{}", r.out);
    let r = get(&c, "rs", Some(Output::Wide)).await.ok();
    assert!(
        r.out
            .contains("local/busybox:2   app=web,pod-template-hash=bbb"),
        "{}",
        r.out
    );
    let r = get(&c, "deployments", Some(Output::Yaml)).await.ok();
    assert!(r.out.contains("kind: Deployment"), "{}", r.out);
    assert!(r.out.contains("maxSurge: 25%"), "{}", r.out);

    // describe: the new ReplicaSet (the template's), no old one with pods.
    let mut out = Vec::new();
    kubectl::describe(&c, "deploy", &["web".into()], None, &mut out)
        .await
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("Replicas:               2 desired | 2 updated | 2 total | 2 available | 0 unavailable\n"), "{text}");
    assert!(text.contains("OldReplicaSets:  <none>\n"), "{text}");
    assert!(
        text.contains("NewReplicaSet:   web-bbb (2/2 replicas created)\n"),
        "{text}"
    );
    let mut out = Vec::new();
    kubectl::describe(&c, "rs", &["web-bbb".into()], None, &mut out)
        .await
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("Controlled By:  Deployment/web\n"), "{text}");
    assert!(
        text.contains("Replicas:       2 current / 2 desired\n"),
        "{text}"
    );

    // rollout status and history.
    let r = ran!(|o| rollout_deploy::status(&c, "web", "default", false, None, o)).ok();
    assert_eq!(r.out, "deployment \"web\" successfully rolled out\n");
    let r = ran!(|o| rollout_deploy::history(&c, "web", "default", None, o)).ok();
    assert_eq!(
        r.out,
        "deployment.apps/web \nREVISION  CHANGE-CAUSE\n1         image local/busybox:1\n2         image local/busybox:2\n"
    );
    let r = ran!(|o| rollout_deploy::history(&c, "web", "default", Some(1), o)).ok();
    assert!(
        r.out
            .starts_with("deployment.apps/web with revision #1\nPod Template:\n"),
        "{}",
        r.out
    );
    assert!(r.out.contains("local/busybox:1"), "{}", r.out);

    // scale and set image write the spec.
    let r = ran!(|o| scale::scale(&c, Kind::Deployment, "web", "default", 5, o)).ok();
    assert_eq!(r.out, "deployment.apps/web scaled\n");
    assert_eq!(deployment(&c).await["spec"]["replicas"], 5);
    let r = ran!(|o| scale::scale(&c, Kind::DaemonSet, "web", "default", 5, o));
    r.failed_with("drover scales deployments and replicasets");
    let images = ["web=local/busybox:3".to_string()];
    let r = ran!(|o| scale::set_image(&c, Kind::Deployment, "web", "default", &images, o)).ok();
    assert_eq!(r.out, "deployment.apps/web image updated\n");
    assert_eq!(
        deployment(&c).await["spec"]["template"]["spec"]["containers"][0]["image"],
        "local/busybox:3"
    );
    // Not observed yet: rollout status says so.
    let r = ran!(|o| rollout_deploy::status(&c, "web", "default", false, None, o)).ok();
    assert_eq!(
        r.out,
        "Waiting for deployment spec update to be observed...\n"
    );

    // undo: no ReplicaSet of the new template yet (no controller here), so
    // kubectl's choice is the one before the newest, revision 1; its
    // template comes back without its pod-template-hash.
    let r = ran!(|o| rollout_deploy::undo(&c, "web", "default", None, o)).ok();
    assert_eq!(r.out, "deployment.apps/web rolled back\n");
    let d = deployment(&c).await;
    assert_eq!(
        d["spec"]["template"],
        json!({"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "local/busybox:1",
                "imagePullPolicy": "IfNotPresent"}],
                "restartPolicy": "Always", "terminationGracePeriodSeconds": 30}})
    );
    assert_eq!(
        d["metadata"]["annotations"]["kubernetes.io/change-cause"],
        "image local/busybox:1"
    );
    let r = ran!(|o| rollout_deploy::undo(&c, "web", "default", Some(1), o)).ok();
    assert_eq!(
        r.out,
        "deployment.apps/web skipped rollback (current template already matches revision 1)\n"
    );
    ran!(|o| rollout_deploy::undo(&c, "web", "default", Some(9), o))
        .failed_with("unable to find specified revision 9 in history");

    // pause, resume, restart.
    let r = ran!(|o| rollout_deploy::pause(&c, "web", "default", true, o)).ok();
    assert_eq!(r.out, "deployment.apps/web paused\n");
    let r = ran!(|o| rollout_deploy::pause(&c, "web", "default", true, o)).ok();
    assert_eq!(r.out, "deployment.apps/web already paused\n");
    assert_eq!(deployment(&c).await["spec"]["paused"], true);
    ran!(|o| rollout_deploy::restart(&c, "web", "default", o))
        .failed_with("can't restart paused deployment (run rollout resume first)");
    ran!(|o| rollout_deploy::undo(&c, "web", "default", None, o))
        .failed_with("you cannot rollback a paused deployment");
    let r = ran!(|o| rollout_deploy::pause(&c, "web", "default", false, o)).ok();
    assert_eq!(r.out, "deployment.apps/web resumed\n");
    let r = ran!(|o| rollout_deploy::restart(&c, "web", "default", o)).ok();
    assert_eq!(r.out, "deployment.apps/web restarted\n");
    let d = deployment(&c).await;
    assert!(
        d["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
            .is_string(),
        "{d}"
    );
    assert_eq!(d["spec"]["paused"], Value::Null);

    // A passed progress deadline fails rollout status.
    let generation = d["metadata"]["generation"].clone();
    write_status(
        &s,
        Kind::Deployment,
        "web",
        json!({"observedGeneration": generation,
                "conditions": [{"type": "Progressing", "status": "False",
                    "reason": "ProgressDeadlineExceeded"}]}),
    )
    .await;
    ran!(|o| rollout_deploy::status(&c, "web", "default", true, None, o))
        .failed_with("deployment \"web\" exceeded its progress deadline");

    let rs_uid = c
        .get_object("replicasets", "default", "web-bbb")
        .await
        .unwrap()
        .metadata()
        .uid
        .clone();
    // The scaled ReplicaSet keeps its selector: a change is refused.
    let Manifest::ReplicaSet(mut rs) = c
        .get_object("replicasets", "default", "web-aaa")
        .await
        .unwrap()
    else {
        panic!("a ReplicaSet")
    };
    // Still matching the template's labels, but another selector.
    rs.spec
        .selector
        .as_mut()
        .unwrap()
        .match_labels
        .remove("pod-template-hash");
    let e = c
        .update_object(&Manifest::ReplicaSet(rs))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("field is immutable"), "{e}");

    // logs and exec find a Deployment's pod through its ReplicaSets.
    apply(
        &c,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-bbb-x1\n  labels: {app: web, pod-template-hash: bbb}\n  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-bbb, uid: web-bbb-uid, controller: true}]\nspec: {nodeName: n1, containers: [{name: web, image: \"local/busybox:2\"}]}\n"
            .replace("web-bbb-uid", &rs_uid)
            .as_str(),
    )
    .await
    .ok();
    for target in ["deploy/web", "rs/web-bbb"] {
        let mut err = Vec::new();
        let pod = drover_cli::logs::resolve_pod(&c, target, "default", &mut err)
            .await
            .unwrap();
        assert_eq!(pod, "web-bbb-x1", "{target}");
        assert_eq!(
            String::from_utf8(err).unwrap(),
            "Found 1 pods, using pod/web-bbb-x1\n"
        );
    }
    let mut err = Vec::new();
    let e = drover_cli::logs::resolve_pod(&c, "rs/web-aaa", "default", &mut err)
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("replicaset.apps/web-aaa has no pods"),
        "{e}"
    );

    // The seeds' Deployment applies unchanged.
    let seed = include_str!("../../drover-api/tests/data/10-deployment-antiaffinity.yaml");
    let r = apply(&c, seed).await.ok();
    assert_eq!(r.out, "deployment.apps/on-every-node-deployment created\n");
    assert_eq!(r.err, "");
    s.shutdown().await;
}
