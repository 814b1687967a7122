//! The Docker runtime against the real engine.
//!
//! Runtime level: the pod spec mapped as the kubelet maps it (inspected),
//! the containers of a pod on one localhost, exits and OOM kills, exec,
//! logs, image pull policies, runAsNonRoot. Agent level, with a one-member
//! server in this process: a DaemonSet runs one container per pod and its
//! removal removes them; a crashing container is restarted with a growing
//! restartCount; a restarted agent adopts its containers, keeps them
//! running without any server and still restarts one that dies.
//!
//! The image is `local/busybox:1`, built without any registry by the
//! repository's `deploy/examples/busybox-image.sh`. Every test names its node
//! uniquely, so that tests running side by side (nextest's processes too)
//! never see each other's containers, and removes everything its node made,
//! even when it fails ([`Cleanup`]). Without an engine the tests
//! fail, unless the run opts out with `DROVER_TEST_SKIP=docker`.

use drover_agent::docker::LABEL_NODE;
use drover_agent::{
    AgentOptions, ContainerInfo, DockerOptions, DockerRuntime, LogOptions, RunState, Runtime,
    StartContainer, TokioClock,
};
use drover_api::{Manifest, Pod};
use drover_testkit::docker::{engine_ready, node_name, tuning, Cleanup, IMAGE};
use drover_testkit::{is_running_and_ready, wait_until, TestAgent, TestServer};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_stream::StreamExt;

mod agents;

/// Deadline of every wait.
const WAIT: Duration = Duration::from_secs(20);

// ------------------------------------------------------------ fixtures

struct Node {
    name: String,
    rt: Arc<DockerRuntime>,
    dir: tempfile::TempDir,
    _cleanup: Cleanup,
}

async fn node(test: &str) -> Option<Node> {
    if !engine_ready() {
        return None;
    }
    let name = node_name("dt", test);
    let cleanup = Cleanup::new(&name);
    let dir = tempfile::tempdir().unwrap();
    let rt = DockerRuntime::connect(DockerOptions::new(name.clone(), dir.path()))
        .await
        .expect("the engine answers");
    Some(Node {
        name,
        rt: Arc::new(rt),
        dir,
        _cleanup: cleanup,
    })
}

/// A pod from YAML, with a uid and the defaults the server would set.
fn pod(yaml: &str, uid: &str) -> Arc<Pod> {
    let mut p = match drover_api::parse_manifests(yaml).unwrap().remove(0) {
        Manifest::Pod(p) => *p,
        other => panic!("not a pod: {other:?}"),
    };
    if p.metadata.namespace.is_empty() {
        p.metadata.namespace = "default".into();
    }
    p.metadata.uid = uid.into();
    drover_api::defaults::default_pod_spec(&mut p.spec);
    Arc::new(p)
}

fn start_req(n: &Node, p: &Arc<Pod>, index: usize, attempt: u32) -> StartContainer {
    StartContainer {
        pod: p.clone(),
        volumes: Default::default(),
        index,
        attempt,
        spec_hash: format!("hash-{index}"),
        node_name: n.name.clone(),
        host_ip: "127.0.0.1".into(),
        events: Default::default(),
    }
}

async fn list_of(n: &Node, uid: &str) -> Vec<ContainerInfo> {
    let mut v: Vec<ContainerInfo> =
        n.rt.list()
            .await
            .unwrap()
            .into_iter()
            .filter(|c| c.pod_uid == uid)
            .collect();
    v.sort_by(|a, b| (&a.container, a.attempt).cmp(&(&b.container, b.attempt)));
    v
}

async fn one(n: &Node, uid: &str, container: &str) -> ContainerInfo {
    list_of(n, uid)
        .await
        .into_iter()
        .find(|c| c.container == container)
        .unwrap_or_else(|| panic!("no container {container} of {uid}"))
}

async fn wait_state(
    n: &Node,
    uid: &str,
    container: &str,
    what: &str,
    f: impl Fn(&RunState) -> bool,
) {
    wait_until(what, WAIT, || async {
        list_of(n, uid)
            .await
            .iter()
            .any(|c| c.container == container && f(&c.state))
    })
    .await;
}

/// Whether `wget` in container `id` gets busybox httpd's page from
/// 127.0.0.1:8080.
async fn localhost_answers(n: &Node, id: &str) -> bool {
    let out =
        n.rt.exec(
            id,
            ["wget", "-q", "-O-", "http://127.0.0.1:8080/"]
                .map(String::from)
                .to_vec(),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    out.exit_code == 0 && String::from_utf8_lossy(&out.output).contains("hello from busybox httpd")
}

fn docker_inspect(id: &str) -> serde_json::Value {
    let out = Command::new("docker")
        .args(["inspect", id])
        .output()
        .unwrap();
    assert!(out.status.success(), "docker inspect {id}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v[0].clone()
}

/// Containers (any role) of a node, by `docker ps`.
fn docker_ps(node: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args(["ps", "-a", "--format", "{{.Names}}", "--filter"])
        .arg(format!("label={LABEL_NODE}={node}"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

// ------------------------------------------------------------ runtime level

#[tokio::test]
async fn a_container_gets_the_settings_of_its_spec() {
    let Some(n) = node("settings").await else {
        return;
    };
    let host_dir = n.dir.path().join("host-data");
    let p = pod(
        &format!(
            "
apiVersion: v1
kind: Pod
metadata: {{name: settings, namespace: ns1}}
spec:
  hostNetwork: true
  hostPID: true
  terminationGracePeriodSeconds: 3
  volumes:
  - {{name: data, hostPath: {{path: {host_dir:?}, type: DirectoryOrCreate}}}}
  containers:
  - name: main
    image: {IMAGE}
    command: [sleep]
    args: ['3600']
    workingDir: /tmp
    env:
    - {{name: PLAIN, value: hello}}
    - {{name: NODE, valueFrom: {{fieldRef: {{fieldPath: spec.nodeName}}}}}}
    - {{name: POD, valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}}}
    - {{name: NS, valueFrom: {{fieldRef: {{fieldPath: metadata.namespace}}}}}}
    - {{name: UID, valueFrom: {{fieldRef: {{fieldPath: metadata.uid}}}}}}
    - {{name: HOST_IP, valueFrom: {{fieldRef: {{fieldPath: status.hostIP}}}}}}
    - {{name: POD_IP, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}
    resources:
      limits: {{memory: 64Mi, cpu: 500m}}
    securityContext:
      runAsUser: 1000
      runAsGroup: 2000
      capabilities: {{drop: [NET_RAW]}}
    volumeMounts:
    - {{name: data, mountPath: /data, readOnly: true}}
"
        ),
        "uid-settings",
    );
    let t0 = Instant::now();
    n.rt.start(start_req(&n, &p, 0, 0)).await.unwrap();
    eprintln!("start (host network): {:?}", t0.elapsed());
    assert!(host_dir.is_dir(), "DirectoryOrCreate made the directory");
    let c = one(&n, "uid-settings", "main").await;
    assert!(c.state.is_running(), "{:?}", c.state);
    assert!(c.ready);
    assert_eq!((c.attempt, c.spec_hash.as_str()), (0, "hash-0"));
    assert_eq!(c.pod_namespace, "ns1");
    assert_eq!(c.pod_name, "settings");

    let i = docker_inspect(&c.id);
    assert_eq!(i["Name"], "/drover_ns1_settings_main_0");
    let env: Vec<&str> = i["Config"]["Env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    let node_env = format!("NODE={}", n.name);
    for want in [
        "PLAIN=hello",
        node_env.as_str(),
        "POD=settings",
        "NS=ns1",
        "UID=uid-settings",
        "HOST_IP=127.0.0.1",
        "POD_IP=127.0.0.1",
    ] {
        assert!(env.contains(&want), "{want} in {env:?}");
    }
    assert_eq!(i["Config"]["Entrypoint"][0], "sleep");
    assert_eq!(i["Config"]["Cmd"][0], "3600");
    assert_eq!(i["Config"]["WorkingDir"], "/tmp");
    assert_eq!(i["Config"]["User"], "1000:2000");
    assert_eq!(i["Config"]["StopTimeout"], 3);
    let labels = &i["Config"]["Labels"];
    assert_eq!(labels["io.drover.node"], n.name.as_str());
    assert_eq!(labels["io.drover.pod.uid"], "uid-settings");
    assert_eq!(labels["io.drover.container.name"], "main");
    assert_eq!(labels["io.drover.attempt"], "0");
    assert_eq!(labels["io.drover.container.hash"], "hash-0");
    let h = &i["HostConfig"];
    assert_eq!(h["NetworkMode"], "host");
    assert_eq!(h["PidMode"], "host");
    assert_eq!(h["Memory"], 64 << 20);
    assert_eq!(h["CpuQuota"], 50_000);
    assert_eq!(h["CpuPeriod"], 100_000);
    assert_eq!(h["CapDrop"][0], "NET_RAW");
    let mount = i["Mounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["Destination"] == "/data")
        .expect("the /data mount");
    assert_eq!(mount["RW"], false, "{mount}");
    assert_eq!(mount["Source"], host_dir.to_str().unwrap());

    // The process runs as the user, sees the host's PIDs, cannot write
    // the read-only bind.
    let out =
        n.rt.exec(
            &c.id,
            vec!["id".into(), "-u".into()],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.output).trim(), "1000");
    let me = std::process::id().to_string();
    let out =
        n.rt.exec(
            &c.id,
            vec!["test".into(), "-d".into(), format!("/proc/{me}")],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, 0, "hostPID: the test process is visible");
    let out =
        n.rt.exec(
            &c.id,
            vec!["touch".into(), "/data/x".into()],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_ne!(out.exit_code, 0, "the bind is read-only");

    // sleep ignores nothing (with hostPID it is no PID 1), so SIGTERM ends
    // it at once; a stop that waited out the grace period (10 s) and then
    // killed it would take at least that: the bound is the grace period.
    const GRACE: Duration = Duration::from_secs(10);
    let t0 = Instant::now();
    n.rt.remove_pod("uid-settings", GRACE).await.unwrap();
    eprintln!("removed with SIGTERM in {:?}", t0.elapsed());
    assert!(t0.elapsed() < GRACE, "{:?}", t0.elapsed());
    assert!(list_of(&n, "uid-settings").await.is_empty());
}

#[tokio::test]
async fn the_containers_of_a_pod_share_localhost_and_an_empty_dir() {
    let Some(n) = node("localhost").await else {
        return;
    };
    let p = pod(
        &format!(
            "
apiVersion: v1
kind: Pod
metadata: {{name: web}}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{{name: shared, emptyDir: {{}}}}]
  containers:
  - name: server
    image: {IMAGE}
    command: [sh, -c, 'echo from-server > /shared/note && exec httpd -f -p 8080 -h /var/www']
    ports: [{{containerPort: 8080}}]
    volumeMounts: [{{name: shared, mountPath: /shared}}]
  - name: client
    image: {IMAGE}
    command: [sleep, '3600']
    env: [{{name: MY_IP, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}]
    volumeMounts: [{{name: shared, mountPath: /shared, readOnly: true}}]
"
        ),
        "uid-localhost",
    );
    let t0 = Instant::now();
    n.rt.start(start_req(&n, &p, 0, 0)).await.unwrap();
    eprintln!(
        "first start of a pod (sandbox + container): {:?}",
        t0.elapsed()
    );
    n.rt.start(start_req(&n, &p, 1, 0)).await.unwrap();
    let names = docker_ps(&n.name);
    assert!(
        names.contains(&"drover_default_web_POD_0".to_string()),
        "{names:?}"
    );
    let client = one(&n, "uid-localhost", "client").await;
    let server = one(&n, "uid-localhost", "server").await;
    let ip = client.pod_ip.clone().expect("a pod IP from the sandbox");
    assert!(!ip.is_empty() && ip != "127.0.0.1", "{ip}");
    assert_eq!(server.pod_ip.as_deref(), Some(ip.as_str()));
    let i = docker_inspect(&client.id);
    let env = i["Config"]["Env"].to_string();
    assert!(env.contains(&format!("MY_IP={ip}")), "{env}");
    assert!(
        i["HostConfig"]["NetworkMode"]
            .as_str()
            .unwrap()
            .starts_with("container:"),
        "{}",
        i["HostConfig"]["NetworkMode"]
    );

    // The client reaches the server on localhost.
    wait_until("the server answers on localhost", WAIT, || {
        localhost_answers(&n, &client.id)
    })
    .await;
    // And reads what the server wrote in the emptyDir.
    let out =
        n.rt.exec(
            &client.id,
            vec!["cat".into(), "/shared/note".into()],
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.output).trim(), "from-server");
    let empty_dir = n.dir.path().join("pods/uid-localhost/volumes/shared");
    assert!(empty_dir.join("note").is_file());

    // The sandbox dies: the next start makes a new one, and the containers
    // left in the old network are stopped (kept, exited) to start over.
    assert!(Command::new("docker")
        .args(["kill", "drover_default_web_POD_0"])
        .output()
        .unwrap()
        .status
        .success());
    n.rt.start(start_req(&n, &p, 1, 1)).await.unwrap();
    let names = docker_ps(&n.name);
    assert!(
        names.contains(&"drover_default_web_POD_1".to_string())
            && !names.contains(&"drover_default_web_POD_0".to_string()),
        "{names:?}"
    );
    let old_server = list_of(&n, "uid-localhost")
        .await
        .into_iter()
        .find(|c| c.id == server.id)
        .expect("the old server is kept");
    assert!(old_server.state.is_exited(), "{:?}", old_server.state);
    n.rt.start(start_req(&n, &p, 0, 1)).await.unwrap();
    let client = list_of(&n, "uid-localhost")
        .await
        .into_iter()
        .find(|c| c.container == "client" && c.attempt == 1)
        .expect("client attempt 1");
    assert_ne!(client.pod_ip.as_deref(), None);
    wait_until("localhost again in the new sandbox", WAIT, || {
        localhost_answers(&n, &client.id)
    })
    .await;

    // Removing the pod removes its containers, its sandbox, its emptyDir.
    n.rt.remove_pod("uid-localhost", Duration::from_secs(1))
        .await
        .unwrap();
    assert!(docker_ps(&n.name).is_empty(), "{:?}", docker_ps(&n.name));
    assert!(!n.dir.path().join("pods/uid-localhost").exists());
}

#[tokio::test]
async fn exits_are_reported_with_their_code_and_an_oom_kill_as_oom_killed() {
    let Some(n) = node("exits").await else {
        return;
    };
    // `tail /dev/zero` keeps its input until a newline that never comes:
    // it grows until the kernel kills it (a pipe such as `head | tail` can
    // thrash for minutes under cgroup v1 before the OOM killer acts).
    let p = pod(
        &format!(
            "
apiVersion: v1
kind: Pod
metadata: {{name: exits}}
spec:
  hostNetwork: true
  containers:
  - {{name: ok, image: {IMAGE}, command: [sh, -c, 'exit 0']}}
  - {{name: fails, image: {IMAGE}, command: [sh, -c, 'exit 3']}}
  - name: hog
    image: {IMAGE}
    command: [tail, /dev/zero]
    resources: {{limits: {{memory: 8Mi}}}}
"
        ),
        "uid-exits",
    );
    for i in 0..3 {
        n.rt.start(start_req(&n, &p, i, 0)).await.unwrap();
    }
    let exited = |c: &str| {
        let c = c.to_string();
        move |s: &RunState| s.is_exited() && !c.is_empty()
    };
    for c in ["ok", "fails", "hog"] {
        wait_state(&n, "uid-exits", c, &format!("{c} exits"), exited(c)).await;
    }
    // The engine may report the exit of an OOM-killed container a moment
    // before it has handled the kernel's OOM event (its inspect then says
    // OOMKilled: false): the state is read again until it says so, as the
    // agent's next sync would.
    wait_state(
        &n,
        "uid-exits",
        "hog",
        "hog OOMKilled",
        |s| matches!(s, RunState::Exited { reason, .. } if reason == "OOMKilled"),
    )
    .await;
    let reason = |c: &ContainerInfo| match &c.state {
        RunState::Exited {
            exit_code,
            reason,
            started_at,
            finished_at,
        } => {
            assert!(started_at.is_some_and(|s| s <= *finished_at));
            (*exit_code, reason.clone())
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(
        reason(&one(&n, "uid-exits", "ok").await),
        (0, "Completed".into())
    );
    assert_eq!(
        reason(&one(&n, "uid-exits", "fails").await),
        (3, "Error".into())
    );
    assert_eq!(
        reason(&one(&n, "uid-exits", "hog").await),
        (137, "OOMKilled".into())
    );
    // A restart is a new instance; the old one stays for lastState.
    n.rt.start(start_req(&n, &p, 1, 1)).await.unwrap();
    let attempts: Vec<u32> = list_of(&n, "uid-exits")
        .await
        .iter()
        .filter(|c| c.container == "fails")
        .map(|c| c.attempt)
        .collect();
    assert_eq!(attempts, vec![0, 1]);
    assert!(docker_ps(&n.name).contains(&"drover_default_exits_fails_1".to_string()));
}

#[tokio::test]
async fn exec_gives_output_and_exit_code_and_logs_follow() {
    let Some(n) = node("exec").await else {
        return;
    };
    let p = pod(
        &format!(
            "
apiVersion: v1
kind: Pod
metadata: {{name: talk}}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 0
  containers:
  - {{name: c, image: {IMAGE}, command: [sh, -c, 'echo one; echo two; echo three; exec sleep 3600']}}
"
        ),
        "uid-exec",
    );
    n.rt.start(start_req(&n, &p, 0, 0)).await.unwrap();
    let c = one(&n, "uid-exec", "c").await;

    let out =
        n.rt.exec(
            &c.id,
            ["sh", "-c", "echo out; echo err >&2; exit 7"]
                .map(String::from)
                .to_vec(),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, 7);
    let text = String::from_utf8_lossy(&out.output);
    assert!(text.contains("out") && text.contains("err"), "{text}");
    let t0 = Instant::now();
    let out =
        n.rt.exec(
            &c.id,
            vec!["sleep".into(), "30".into()],
            Duration::from_millis(300),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, -1, "killed at the timeout");
    // The 300 ms timeout, and up to 10 s for the engine to stop the exec
    // on a loaded machine: still well under the command's own 30 s.
    assert!(
        t0.elapsed() < Duration::from_millis(300) + Duration::from_secs(10),
        "{:?}",
        t0.elapsed()
    );
    let e =
        n.rt.exec(
            "no-such-container",
            vec!["true".into()],
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
    assert_eq!(e.reason, "ContainerNotFound", "{e}");

    // All of it, then the tail.
    let read_all = |opts: LogOptions| {
        let rt = n.rt.clone();
        let id = c.id.clone();
        async move {
            let mut s = rt.logs(&id, opts).await.unwrap();
            let mut out = Vec::new();
            while let Some(chunk) = s.next().await {
                out.extend(chunk.unwrap());
            }
            String::from_utf8(out).unwrap()
        }
    };
    wait_until("three lines logged", WAIT, || async {
        read_all(LogOptions::default()).await == "one\ntwo\nthree\n"
    })
    .await;
    assert_eq!(
        read_all(LogOptions {
            tail: Some(1),
            ..Default::default()
        })
        .await,
        "three\n"
    );
    let stamped = read_all(LogOptions {
        timestamps: true,
        ..Default::default()
    })
    .await;
    assert!(
        stamped
            .lines()
            .all(|l| l.starts_with("20") && l.contains(' ')),
        "{stamped}"
    );

    // Follow: the last line, then new output while the stream is open
    // (the stream is lazy: its first chunk shows that the engine follows).
    let mut s =
        n.rt.logs(
            &c.id,
            LogOptions {
                follow: true,
                tail: Some(1),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let chunk = tokio::time::timeout(WAIT, s.next())
        .await
        .expect("the tail in time")
        .expect("the stream is open")
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&chunk), "three\n");
    n.rt.exec(
        &c.id,
        ["sh", "-c", "echo four > /proc/1/fd/1"]
            .map(String::from)
            .to_vec(),
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    let chunk = tokio::time::timeout(WAIT, s.next())
        .await
        .expect("followed output in time")
        .expect("the stream is open")
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&chunk), "four\n");
    // It ends when the container stops.
    n.rt.stop(&c.id, Duration::ZERO).await.unwrap();
    let end = tokio::time::timeout(WAIT, async {
        while let Some(r) = s.next().await {
            r.unwrap();
        }
    })
    .await;
    assert!(end.is_ok(), "the followed stream ends with the container");
    wait_state(&n, "uid-exec", "c", "stopped, kept", RunState::is_exited).await;
}

#[tokio::test]
async fn image_pull_policies_report_kubelet_reasons() {
    let Some(mut n) = node("images").await else {
        return;
    };
    // Pulls go to a registry on a closed loopback port: they fail at once,
    // and nothing leaves the machine.
    let absent = format!("127.0.0.1:1/drover-test/absent-{}:1", std::process::id());
    let local = format!(
        "127.0.0.1:1/drover-test/local-{}:latest",
        std::process::id()
    );
    assert!(Command::new("docker")
        .args(["tag", IMAGE, &local])
        .output()
        .unwrap()
        .status
        .success());
    n._cleanup.images.push(local.clone());
    let spec = |name: &str, image: &str, policy: &str| {
        pod(
            &format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 0\n  containers:\n  - {{name: c, image: {image:?}, imagePullPolicy: {policy}, command: [sleep, '3600']}}\n"
            ),
            &format!("uid-{name}"),
        )
    };
    let p = spec("never", &absent, "Never");
    let e = n.rt.start(start_req(&n, &p, 0, 0)).await.unwrap_err();
    assert_eq!(e.reason, "ErrImageNeverPull", "{e}");
    assert!(e.message.contains(&absent), "{e}");
    let p = spec("ifnotpresent", &absent, "IfNotPresent");
    let e = n.rt.start(start_req(&n, &p, 0, 0)).await.unwrap_err();
    assert_eq!(e.reason, "ErrImagePull", "{e}");
    assert!(
        e.message.contains("127.0.0.1:1"),
        "the engine's message: {e}"
    );
    assert!(docker_ps(&n.name).is_empty(), "nothing is left behind");
    // Always with a local copy: the pull fails, and so does the start (the
    // kubelet runs no stale copy) ...
    let p = spec("always", &local, "Always");
    let e = n.rt.start(start_req(&n, &p, 0, 0)).await.unwrap_err();
    assert_eq!(e.reason, "ErrImagePull", "{e}");
    assert!(docker_ps(&n.name).is_empty(), "nothing is left behind");
    // ... unless the node never pulls (--no-pull): then what it has runs,
    // whatever the policy, and an absent image is ErrImageNeverPull.
    let mut o = DockerOptions::new(n.name.clone(), n.dir.path());
    o.no_pull = true;
    let offline = DockerRuntime::connect(o).await.expect("the engine answers");
    offline.start(start_req(&n, &p, 0, 0)).await.unwrap();
    assert!(one(&n, "uid-always", "c").await.state.is_running());
    let p = spec("offline-absent", &absent, "Always");
    let e = offline.start(start_req(&n, &p, 0, 0)).await.unwrap_err();
    assert_eq!(e.reason, "ErrImageNeverPull", "{e}");
    assert!(e.message.contains("--no-pull"), "{e}");
    // Not hostNetwork: a failed first start leaves no sandbox behind.
    let p = pod(
        &format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: nonet}}\nspec:\n  containers:\n  - {{name: c, image: {absent:?}, imagePullPolicy: Never}}\n"),
        "uid-nonet",
    );
    let e = n.rt.start(start_req(&n, &p, 0, 0)).await.unwrap_err();
    assert_eq!(e.reason, "ErrImageNeverPull");
    assert!(
        !docker_ps(&n.name).iter().any(|c| c.contains("nonet")),
        "{:?}",
        docker_ps(&n.name)
    );
}

#[tokio::test]
async fn run_as_non_root_refuses_a_root_container() {
    let Some(n) = node("nonroot").await else {
        return;
    };
    let spec = |name: &str, sc: &str| {
        pod(
            &format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  terminationGracePeriodSeconds: 0\n  containers:\n  - {{name: c, image: {IMAGE}, command: [sleep, '3600'], securityContext: {sc}}}\n"
            ),
            &format!("uid-{name}"),
        )
    };
    for (name, sc) in [
        ("uid0", "{runAsNonRoot: true, runAsUser: 0}"),
        ("imageroot", "{runAsNonRoot: true}"),
    ] {
        let e =
            n.rt.start(start_req(&n, &spec(name, sc), 0, 0))
                .await
                .unwrap_err();
        assert_eq!(e.reason, "CreateContainerConfigError", "{e}");
        assert!(
            e.message.contains("runAsNonRoot") && e.message.contains("runAsUser"),
            "{e}"
        );
    }
    assert!(docker_ps(&n.name).is_empty(), "{:?}", docker_ps(&n.name));
    // With a non-root user it runs.
    n.rt.start(start_req(
        &n,
        &spec("ok", "{runAsNonRoot: true, runAsUser: 65534}"),
        0,
        0,
    ))
    .await
    .unwrap();
    assert!(one(&n, "uid-ok", "c").await.state.is_running());
    // A hostPath that must exist and does not is refused by name.
    let p = pod(
        &format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: hp}}\nspec:\n  hostNetwork: true\n  volumes: [{{name: v, hostPath: {{path: /nonexistent/drover, type: Directory}}}}]\n  containers:\n  - {{name: c, image: {IMAGE}, volumeMounts: [{{name: v, mountPath: /v}}]}}\n"),
        "uid-hp",
    );
    let e = n.rt.start(start_req(&n, &p, 0, 0)).await.unwrap_err();
    assert_eq!(e.reason, "CreateContainerConfigError");
    assert!(
        e.message.contains("volume \"v\"") && e.message.contains("/nonexistent/drover"),
        "{e}"
    );
}

#[tokio::test]
async fn an_engine_that_does_not_answer_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("no-docker.sock");
    let mut o = DockerOptions::new("n", dir.path());
    o.host = Some(sock.to_string_lossy().into_owned());
    let e = DockerRuntime::connect(o).await.unwrap_err();
    assert_eq!(e.reason, "RuntimeUnavailable");
    assert!(e.message.contains("no-docker.sock"), "{e}");
    // `drover agent` (Docker is the default) refuses to start, and says how.
    let mut a = AgentOptions::new(vec!["127.0.0.1:1".into()], "t", "n");
    a.docker_host = Some(format!("unix://{}", sock.display()));
    let e = drover_agent::run_agent(a, async {}).await.unwrap_err();
    let text = format!("{e:#}");
    assert!(
        text.contains("--runtime sim")
            && text.contains("--docker-host")
            && text.contains("no-docker.sock"),
        "{text}"
    );
}

// ------------------------------------------------------------ agent level
