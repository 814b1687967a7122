//! Static pods (`drover agent --manifest-dir`) on a simulated node: they
//! run with no server reachable, appear as mirror pods once one is,
//! mirror pods are read-only through the API (a deleted one comes back),
//! the DaemonSet controller leaves them alone, file changes replace and
//! remove pods, and mirror pods go with their node. The manifest is
//! `../shared/manifests/08-static-pod.yaml` (copied in drover-api's test
//! data). Every wait has a deadline.

use drover_agent::{AgentOptions, ContainerInfo, SimConfig, SimRuntime, Tuning};
use drover_api::Kind;
use drover_api::{pod_annotation, Manifest, Pod};
use drover_testkit::{
    is_running_and_ready, quick_reconnect, start_sim_agent, wait_until, TestAgent, TestServer,
};
use std::path::Path;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(15);
const STATIC: &str = include_str!("../../drover-api/tests/data/08-static-pod.yaml");

/// How long an agent may take to leave.
const STOP: Duration = Duration::from_secs(10);

/// An agent named `name` over a simulated runtime, running the static pods
/// of `manifests`.
fn start_agent(server: &str, token: &str, name: &str, manifests: &Path) -> TestAgent<SimRuntime> {
    let mut o = AgentOptions::new(vec![server.to_string()], token, name);
    o.manifest_dir = Some(manifests.to_path_buf());
    o.tuning = Tuning {
        connect_timeout: Duration::from_secs(2),
        static_poll: Duration::from_millis(100),
        ..quick_reconnect(1)
    };
    start_sim_agent(o, SimConfig::default())
}

/// The running container of the pod named `name`.
fn running(rt: &SimRuntime, name: &str) -> Option<ContainerInfo> {
    rt.containers()
        .into_iter()
        .find(|c| c.pod_name == name && c.state.is_running())
}

fn mirror_of(p: &Pod) -> Option<&str> {
    p.metadata
        .annotations
        .get(pod_annotation::CONFIG_MIRROR)
        .map(String::as_str)
}

#[tokio::test]
async fn static_pods_run_without_a_server_and_appear_as_read_only_mirror_pods() {
    let tmp = tempfile::tempdir().unwrap();
    let manifests = tmp.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    std::fs::write(manifests.join("08-static-pod.yaml"), STATIC).unwrap();
    std::fs::write(
        manifests.join("edge.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: edge, labels: {app: edge}}\nspec:\n  containers: [{name: c, image: busybox}]\n",
    )
    .unwrap();
    // A cluster made and stopped: its node token is known, no server
    // listens at its address yet.
    let server_dir = tmp.path().join("server");
    let first = TestServer::start(&server_dir).await;
    let (addr, token) = (first.addr.clone(), first.node_token.clone());
    first.shutdown().await;

    // 1. No server: the static pods run anyway.
    let agent = start_agent(&addr, &token, "edge-1", &manifests);
    let took = wait_until("the static pods running offline", WAIT, || async {
        running(&agent.runtime, "static-example-edge-1").is_some()
            && running(&agent.runtime, "edge-edge-1").is_some()
    })
    .await;
    eprintln!("static pods running with no server: {took:?}");
    let c0 = running(&agent.runtime, "static-example-edge-1").unwrap();

    // 2. A server on that address: the node joins, mirror pods appear.
    let s = TestServer::restart(&server_dir).await;
    let t = Instant::now();
    wait_until("mirror pods Running and Ready", WAIT, || async {
        let a = s.pod("static-example-edge-1").await;
        let b = s.pod("edge-edge-1").await;
        a.is_some_and(|p| is_running_and_ready(&p)) && b.is_some_and(|p| is_running_and_ready(&p))
    })
    .await;
    eprintln!("server up -> mirror pods Ready: {:?}", t.elapsed());
    assert_eq!(
        running(&agent.runtime, "static-example-edge-1").map(|c| c.id),
        Some(c0.id.clone()),
        "the static pod kept running: never restarted"
    );
    let m = s.pod("static-example-edge-1").await.unwrap();
    assert_eq!(mirror_of(&m), Some(c0.pod_uid.as_str()));
    assert_ne!(m.metadata.uid, c0.pod_uid, "a mirror has its own uid");
    let owner = m.metadata.controller_ref().expect("owned");
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Node", "edge-1")
    );
    assert_eq!(m.spec.node_name, "edge-1");
    assert_eq!(m.status.container_statuses[0].image, "nginx");

    // 3. Read-only through the API.
    let mut changed = m.clone();
    changed.spec.containers[0].image = "nginx:2".into();
    let e = s
        .objects
        .update(Manifest::Pod(Box::new(changed)))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("default/static-example-edge-1") && e.contains("--manifest-dir"),
        "{e}"
    );
    let e = s
        .objects
        .apply(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: static-example-edge-1}\nspec:\n  nodeName: edge-1\n  containers: [{name: nginx, image: nginx:2}]\n",
            false,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("read-only"), "{e}");
    assert!(
        !e.contains("pod updates may not change"),
        "one clear reason: {e}"
    );

    // 4. Deleted through the API: it comes back (new uid), the container
    //    keeps running.
    s.objects
        .delete(Kind::Pod, "default", "static-example-edge-1")
        .await
        .unwrap();
    let t = Instant::now();
    wait_until("the mirror back", WAIT, || async {
        s.pod("static-example-edge-1")
            .await
            .is_some_and(|p| p.metadata.uid != m.metadata.uid && is_running_and_ready(&p))
    })
    .await;
    eprintln!("mirror deleted -> recreated: {:?}", t.elapsed());
    assert_eq!(
        running(&agent.runtime, "static-example-edge-1").unwrap().id,
        c0.id
    );

    // 5. A DaemonSet whose selector matches a static pod leaves it alone
    //    and runs its own pod beside it.
    s.apply(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: edge}\nspec:\n  selector: {matchLabels: {app: edge}}\n  template:\n    metadata: {labels: {app: edge}}\n    spec:\n      containers: [{name: c, image: busybox}]\n",
    )
    .await;
    wait_until("the DaemonSet's own pod Ready", WAIT, || async {
        let (l, _) = s.objects.list(Kind::Pod, None, None).await.unwrap();
        l.iter().any(|m| match m {
            Manifest::Pod(p) => {
                !p.is_mirror()
                    && p.metadata.labels.get("app").is_some_and(|a| a == "edge")
                    && is_running_and_ready(p)
            }
            _ => false,
        })
    })
    .await;
    let e = s.pod("edge-edge-1").await.unwrap();
    assert_eq!(
        e.metadata.controller_ref().map(|o| o.kind.as_str()),
        Some("Node"),
        "not adopted"
    );

    // 6. The node leaves: its mirror pods go with it.
    agent.stop(STOP).await;
    wait_until("mirror pods gone with the node", WAIT, || async {
        s.pod("static-example-edge-1").await.is_none() && s.pod("edge-edge-1").await.is_none()
    })
    .await;
    s.shutdown().await;
}

#[tokio::test]
async fn changed_and_removed_manifest_files_replace_and_remove_static_pods() {
    let tmp = tempfile::tempdir().unwrap();
    let manifests = tmp.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    let file = manifests.join("static.yaml");
    std::fs::write(&file, STATIC).unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let agent = start_agent(&s.addr, &s.node_token, "n1", &manifests);
    wait_until("the mirror Ready", WAIT, || async {
        s.pod("static-example-n1")
            .await
            .is_some_and(|p| is_running_and_ready(&p))
    })
    .await;
    let old = running(&agent.runtime, "static-example-n1").unwrap();

    // Changed: a new pod (new uid) replaces the old one, and its mirror.
    std::fs::write(&file, STATIC.replace("image: nginx", "image: nginx:1.27")).unwrap();
    let t = Instant::now();
    wait_until("the new version running and mirrored", WAIT, || async {
        let new = running(&agent.runtime, "static-example-n1");
        let m = s.pod("static-example-n1").await;
        new.as_ref()
            .is_some_and(|c| c.pod_uid != old.pod_uid && c.image == "nginx:1.27")
            && m.is_some_and(|m| {
                mirror_of(&m) == new.as_ref().map(|c| c.pod_uid.as_str())
                    && m.spec.containers[0].image == "nginx:1.27"
                    && is_running_and_ready(&m)
            })
    })
    .await;
    eprintln!("manifest changed -> new pod mirrored: {:?}", t.elapsed());
    assert!(
        agent
            .runtime
            .containers()
            .iter()
            .all(|c| c.pod_uid != old.pod_uid),
        "the old pod is stopped"
    );

    // Removed: the pod stops and its mirror goes.
    std::fs::remove_file(&file).unwrap();
    let t = Instant::now();
    wait_until("the static pod and its mirror gone", WAIT, || async {
        agent.runtime.containers().is_empty() && s.pod("static-example-n1").await.is_none()
    })
    .await;
    eprintln!("manifest removed -> pod and mirror gone: {:?}", t.elapsed());
    assert!(s.node("n1").await.is_some(), "the node stays");
    agent.stop(STOP).await;
    s.shutdown().await;
}
