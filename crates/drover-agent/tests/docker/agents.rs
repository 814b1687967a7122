//! A whole agent on the Docker engine: a DaemonSet's containers, restarts
//! with a growing count, and a restarted agent adopting its containers.

use super::*;

/// How long an agent may take to leave.
const STOP: Duration = Duration::from_secs(20);

fn start_agent(
    addr: &str,
    token: &str,
    n: &Node,
    data_dir: Option<PathBuf>,
    rt: Arc<DockerRuntime>,
) -> TestAgent<DockerRuntime> {
    let mut o = AgentOptions::new(vec![addr.to_string()], token, n.name.clone());
    o.tuning = tuning(7);
    o.data_dir = data_dir;
    TestAgent::spawn(o, rt, Arc::new(TokioClock::new()))
}

async fn running(rt: &DockerRuntime, uid: &str) -> Vec<ContainerInfo> {
    rt.list()
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.pod_uid == uid && c.state.is_running())
        .collect()
}

fn bound_pod(name: &str, node: &str, command: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 1\n  containers:\n  - {{name: c, image: {IMAGE}, command: [sh, -c, {command:?}]}}\n"
    )
}

#[tokio::test]
async fn a_daemonset_runs_one_container_per_pod_and_its_removal_removes_them() {
    let Some(n) = node("ds").await else {
        return;
    };
    let s = TestServer::start(&n.dir.path().join("server")).await;
    let agent = start_agent(&s.addr, &s.node_token, &n, None, n.rt.clone());
    wait_until("the node Ready", WAIT, || async {
        s.node(&n.name).await.is_some_and(|n| n.is_ready())
    })
    .await;
    let node_obj = s.node(&n.name).await.unwrap();
    let info = &node_obj.status.node_info;
    assert!(
        info.container_runtime_version.starts_with("docker://"),
        "{info:?}"
    );
    assert_eq!(info.container_runtime_version, n.rt.version());
    assert!(node_obj.status.capacity.contains_key("cpu"));
    assert!(node_obj.status.capacity.contains_key("memory"));

    let t0 = Instant::now();
    s.apply(&format!(
        "apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: agentd}}
spec:
  selector: {{matchLabels: {{app: agentd}}}}
  template:
    metadata: {{labels: {{app: agentd}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: {IMAGE}
        command: [sh, -c, 'echo started; exec sleep 3600']
        env: [{{name: NODE, valueFrom: {{fieldRef: {{fieldPath: spec.nodeName}}}}}}]
"
    ))
    .await;
    let pod_name = std::sync::Mutex::new(String::new());
    wait_until("the daemon pod Running and Ready", WAIT, || async {
        let pods = s
            .objects
            .list(drover_api::Kind::Pod, Some("default"), None)
            .await
            .map(|(l, _)| l)
            .unwrap_or_default();
        pods.iter().any(|m| match m {
            Manifest::Pod(p) if is_running_and_ready(p) => {
                *pod_name.lock().unwrap() = p.metadata.name.clone();
                true
            }
            _ => false,
        })
    })
    .await;
    eprintln!(
        "DaemonSet applied -> container running, reported: {:?}",
        t0.elapsed()
    );
    let pod_name = pod_name.into_inner().unwrap();
    let p = s.pod(&pod_name).await.unwrap();
    let uid = p.metadata.uid.clone();
    let cs = &p.status.container_statuses[0];
    let mine = running(&n.rt, &uid).await;
    assert_eq!(mine.len(), 1, "one container for the pod");
    assert_eq!(cs.container_id, format!("docker://{}", mine[0].id));
    assert!(!p.status.pod_ip.is_empty(), "{:?}", p.status);
    assert_eq!(p.status.pod_ip, mine[0].pod_ip.clone().unwrap());
    let env = docker_inspect(&mine[0].id)["Config"]["Env"].to_string();
    assert!(env.contains(&format!("NODE={}", n.name)), "{env}");

    let t0 = Instant::now();
    s.objects
        .delete(drover_api::Kind::DaemonSet, "default", "agentd")
        .await
        .expect("delete the DaemonSet");
    wait_until("the containers gone", WAIT, || async {
        docker_ps(&n.name).is_empty()
    })
    .await;
    eprintln!("DaemonSet deleted -> containers gone: {:?}", t0.elapsed());
    agent.stop(STOP).await;
    s.shutdown().await;
}

#[tokio::test]
async fn a_crashing_container_is_restarted_with_a_growing_restart_count() {
    let Some(n) = node("crash").await else {
        return;
    };
    let s = TestServer::start(&n.dir.path().join("server")).await;
    let agent = start_agent(&s.addr, &s.node_token, &n, None, n.rt.clone());
    s.apply(&bound_pod("crasher", &n.name, "echo dying; exit 2"))
        .await;
    wait_until("restartCount >= 2", WAIT, || async {
        s.pod("crasher").await.is_some_and(|p| {
            p.status
                .container_statuses
                .first()
                .is_some_and(|c| c.restart_count >= 2)
        })
    })
    .await;
    let p = s.pod("crasher").await.unwrap();
    let cs = &p.status.container_statuses[0];
    let last = cs
        .last_state
        .terminated
        .as_ref()
        .expect("lastState.terminated");
    assert_eq!(last.exit_code, 2);
    assert_eq!(last.reason, "Error");
    assert!(cs.container_id.starts_with("docker://"));
    // Old instances are removed: the newest two remain, with the sandbox.
    wait_until("older instances removed", WAIT, || async {
        docker_ps(&n.name).len() <= 3
    })
    .await;
    agent.stop(STOP).await;
    assert!(
        docker_ps(&n.name).is_empty(),
        "the node left, its pods stopped"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn a_restarted_agent_adopts_its_containers_and_runs_them_with_no_server() {
    let Some(n) = node("adopt").await else {
        return;
    };
    let sdir = n.dir.path().join("server");
    let data = n.dir.path().join("agent");
    let s = TestServer::start(&sdir).await;
    let (addr, token) = (s.addr.clone(), s.node_token.clone());

    // 1. The agent runs a pod.
    let a1 = start_agent(&addr, &token, &n, Some(data.clone()), n.rt.clone());
    s.apply(&bound_pod("p1", &n.name, "exec sleep 3600")).await;
    wait_until("p1 running", WAIT, || async {
        s.pod("p1").await.is_some_and(|p| is_running_and_ready(&p))
    })
    .await;
    let uid1 = s.pod("p1").await.unwrap().metadata.uid;
    let id1 = running(&n.rt, &uid1).await[0].id.clone();

    // 2. Killed and restarted with a new connection to the engine: the
    //    container is adopted, not restarted.
    a1.kill().await;
    let rt2 = Arc::new(
        DockerRuntime::connect(DockerOptions::new(n.name.clone(), &data))
            .await
            .unwrap(),
    );
    let a2 = start_agent(&addr, &token, &n, Some(data.clone()), rt2.clone());
    s.apply(&bound_pod("p2", &n.name, "exec sleep 3600")).await;
    wait_until("p2 running", WAIT, || async {
        s.pod("p2").await.is_some_and(|p| is_running_and_ready(&p))
    })
    .await;
    let uid2 = s.pod("p2").await.unwrap().metadata.uid;
    let p1 = running(&rt2, &uid1).await;
    assert_eq!(p1.len(), 1);
    assert_eq!(p1[0].id, id1, "adopted, not restarted");
    assert_eq!(p1[0].attempt, 0);
    let id2 = running(&rt2, &uid2).await[0].id.clone();

    // 3. The agent and the server die; an agent comes back with no server.
    a2.kill().await;
    s.shutdown().await;
    let rt3 = Arc::new(
        DockerRuntime::connect(DockerOptions::new(n.name.clone(), &data))
            .await
            .unwrap(),
    );
    let a3 = start_agent(&addr, &token, &n, Some(data.clone()), rt3.clone());
    // A container that dies meanwhile is restarted, server or not.
    assert!(Command::new("docker")
        .args(["kill", &id1])
        .output()
        .unwrap()
        .status
        .success());
    let took = wait_until("p1 restarted offline", WAIT, || async {
        running(&rt3, &uid1)
            .await
            .first()
            .is_some_and(|c| c.attempt == 1)
    })
    .await;
    eprintln!("killed container -> restarted with no server: {took:?}");
    assert_eq!(running(&rt3, &uid2).await[0].id, id2, "p2 untouched");

    // 4. The server is back: the restart is reported, nothing else restarts.
    let s = TestServer::restart(&sdir).await;
    wait_until("p1's restart reported", WAIT, || async {
        s.pod("p1").await.is_some_and(|p| {
            is_running_and_ready(&p) && p.status.container_statuses[0].restart_count == 1
        })
    })
    .await;
    let p1 = s.pod("p1").await.unwrap();
    let last = p1.status.container_statuses[0]
        .last_state
        .terminated
        .clone()
        .expect("lastState of the killed instance");
    assert_eq!(last.exit_code, 137);
    assert_eq!(running(&rt3, &uid2).await[0].id, id2, "p2 not restarted");

    // 5. Graceful stop: the node leaves, every container goes.
    a3.stop(STOP).await;
    assert!(docker_ps(&n.name).is_empty(), "{:?}", docker_ps(&n.name));
    s.shutdown().await;
}
