//! kubectl's Deployment commands against the running controllers, the
//! scheduler and sim nodes (the real kubectl v1.32): `create deployment`
//! runs its pods, `rollout status` waits for them as kubectl does, `scale`
//! goes through the scale subresource to the ReplicaSet, `set image`
//! rolls a new ReplicaSet out, `rollout history` lists both revisions,
//! `rollout undo` brings the first template back, `rollout
//! pause`/`resume`, `rollout restart`, and `delete` takes the ReplicaSets
//! and pods with the Deployment.

mod kube;

use kube::Kube;
use serde_json::Value;

async fn json(k: &Kube, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    serde_json::from_str(&k.ok(&a).await).expect("kubectl prints JSON")
}

/// The images of the Deployment's running and ready pods, sorted.
async fn ready_images(k: &Kube) -> Vec<String> {
    let mut images: Vec<String> = k
        .server
        .pods(Some("default"))
        .await
        .iter()
        .filter(|p| p.metadata.labels.get("app").map(String::as_str) == Some("web"))
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| drover_testkit::is_running_and_ready(p))
        .map(|p| p.spec.containers[0].image.clone())
        .collect();
    images.sort();
    images
}

async fn rolled_out(k: &Kube) {
    let out = k
        .ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
        .await;
    assert!(
        out.trim_end()
            .ends_with("deployment \"web\" successfully rolled out"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectls_deployment_commands_drive_the_controllers() {
    let k = Kube::start(4).await;
    k.ok(&[
        "create",
        "deployment",
        "web",
        "--image=local/busybox:1",
        "--replicas=3",
    ])
    .await;
    rolled_out(&k).await;
    assert_eq!(ready_images(&k).await, ["local/busybox:1"; 3]);
    let rs = json(&k, &["get", "rs", "-l", "app=web"]).await;
    let items = rs["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "one ReplicaSet: {rs}");
    assert_eq!(items[0]["status"]["readyReplicas"], 3, "{rs}");
    let first_rs = items[0]["metadata"]["name"].as_str().unwrap().to_owned();
    assert!(first_rs.starts_with("web-"), "{first_rs}");

    // Scale through the scale subresource: the ReplicaSet follows.
    k.ok(&["scale", "deployment/web", "--replicas=5"]).await;
    rolled_out(&k).await;
    assert_eq!(ready_images(&k).await, ["local/busybox:1"; 5]);
    let out = k.ok(&["get", "deploy", "web"]).await;
    let row: Vec<&str> = out
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(row[..4], ["web", "5/5", "5", "5"], "{out}");

    // A new template: a second ReplicaSet, rolled out, the first at 0.
    k.ok(&["set", "image", "deployment/web", "busybox=local/busybox:2"])
        .await;
    rolled_out(&k).await;
    k.wait_for("every pod on the new image", || async {
        ready_images(&k).await == ["local/busybox:2"; 5]
    })
    .await;
    let rs = json(&k, &["get", "rs", "-l", "app=web"]).await;
    let items = rs["items"].as_array().expect("items");
    assert_eq!(items.len(), 2, "two ReplicaSets: {rs}");
    let old = items
        .iter()
        .find(|r| r["metadata"]["name"] == first_rs.as_str())
        .expect("the first ReplicaSet is kept for rollback");
    assert_eq!(old["spec"]["replicas"], 0, "{old}");
    let history = k.ok(&["rollout", "history", "deployment/web"]).await;
    let revisions: Vec<&str> = history
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(revisions, ["1", "2"], "{history}");

    // Undo: the first template again, as revision 3.
    k.ok(&["rollout", "undo", "deployment/web"]).await;
    rolled_out(&k).await;
    k.wait_for("every pod back on the first image", || async {
        ready_images(&k).await == ["local/busybox:1"; 5]
    })
    .await;
    let d = json(&k, &["get", "deployment", "web"]).await;
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "3",
        "{d}"
    );
    let rs = json(&k, &["get", "rs", first_rs.as_str()]).await;
    assert_eq!(
        rs["spec"]["replicas"], 5,
        "the first ReplicaSet serves again"
    );

    // Paused: a new image starts no rollout until resumed.
    k.ok(&["rollout", "pause", "deployment/web"]).await;
    k.ok(&["set", "image", "deployment/web", "busybox=local/busybox:3"])
        .await;
    k.wait_for("the paused Deployment says so", || async {
        let d = json(&k, &["get", "deployment", "web"]).await;
        d["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["reason"] == "DeploymentPaused"))
    })
    .await;
    assert_eq!(ready_images(&k).await, ["local/busybox:1"; 5]);
    k.ok(&["rollout", "resume", "deployment/web"]).await;
    rolled_out(&k).await;
    k.wait_for("every pod on the image set while paused", || async {
        ready_images(&k).await == ["local/busybox:3"; 5]
    })
    .await;

    // Restart: new pods of the same image.
    let before: Vec<String> = k
        .server
        .pods(Some("default"))
        .await
        .iter()
        .map(|p| p.metadata.uid.clone())
        .collect();
    k.ok(&["rollout", "restart", "deployment/web"]).await;
    rolled_out(&k).await;
    k.wait_for("five new pods", || async {
        let pods = k.server.pods(Some("default")).await;
        let fresh = pods
            .iter()
            .filter(|p| !before.contains(&p.metadata.uid))
            .filter(|p| drover_testkit::is_running_and_ready(p))
            .count();
        fresh == 5 && pods.len() == 5
    })
    .await;

    // Delete: the ReplicaSets and pods go with it.
    k.ok(&["delete", "deployment", "web"]).await;
    k.wait_for("no ReplicaSet and no pod left", || async {
        k.server.pods(Some("default")).await.is_empty()
            && json(&k, &["get", "rs"]).await["items"]
                .as_array()
                .is_some_and(|i| i.is_empty())
    })
    .await;
    k.stop().await;
}
