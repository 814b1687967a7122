//! Probes on a Docker node, against the real engine: a one-member server
//! in this process and an agent over [`DockerRuntime`].
//!
//! - an exec readinessProbe gates Ready: the pod is Running and not Ready
//!   while the probe (seen to run) fails, Ready once the test creates the
//!   file with `docker exec`, and not Ready again when it is removed, with
//!   no restart;
//! - a failing livenessProbe restarts its container (restartCount grows,
//!   the container ID changes, the old instance got SIGTERM) and leaves the
//!   pod's other container, whose liveness probe passes, alone;
//! - an httpGet readinessProbe (a named port) against busybox `httpd`: the
//!   probe gets 404 from the server (its log shows it) and the pod is not
//!   Ready; Ready once the served path exists;
//! - a tcpSocket readinessProbe: not Ready while nothing listens on the
//!   port, Ready once `nc` listens (started late with `docker exec -d`),
//!   and the probe is seen connecting;
//! - a rolling update (RollingUpdate, maxUnavailable 1) of a DaemonSet
//!   whose container has an exec readiness probe: the new container
//!   starts, the old one is gone, the new pod is Ready only once its probe
//!   passes, and then the DaemonSet's status and `drover rollout status`
//!   say the rollout is done.
//!
//! Pods are not on the host network: each has a pause sandbox on Docker's
//! default bridge, whose IP is the pod IP that httpGet and tcpSocket probes
//! go to from the agent (on the engine's host).
//!
//! The image `local/busybox:1` is built by `deploy/examples/busybox-image.sh`
//! (never pulled). Every test names its node uniquely and a guard removes
//! every container of the node whatever happens. Every wait polls a
//! condition with a deadline. Without an engine the tests fail, unless the
//! run opts out with `DROVER_TEST_SKIP=docker`.

use drover_agent::{AgentOptions, DockerOptions, DockerRuntime, TokioClock};
use drover_api::Kind;
use drover_api::{ConditionStatus, ContainerStatus, DaemonSet, Manifest, Pod, PodPhase};
use drover_cli::{error_text, rollout, Client, ClientConfig};
use drover_testkit::docker::{docker_ps, engine_ready, node_name, tuning, Cleanup, IMAGE};
use drover_testkit::{wait_until, TestAgent, TestServer};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Deadline of every wait.
const WAIT: Duration = Duration::from_secs(20);

/// How soon a readiness flip shows in the pod's status: one probe period
/// (`periodSeconds: 1` in these manifests) and one status interval (200 ms,
/// `Tuning::status_interval`), with a margin of 3.8 s for probes run
/// through the engine on a loaded 2-core machine. A flip that waited
/// several probe periods more exceeds it.
const FLIP: Duration = Duration::from_secs(5);
/// A container that runs until SIGTERM, then exits 7 at once (so that a
/// stop by the agent is told from a crash, and takes no grace period).
const SLEEPER: &str = "trap 'echo got TERM; exit 7' TERM; sleep 3600 & wait";

// ------------------------------------------------------------ fixtures

fn docker(args: &[&str]) -> Output {
    Command::new("docker")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("docker {args:?}: {e}"))
}

/// `docker exec ID sh -c SCRIPT`, which must succeed; its stdout.
fn exec_sh(id: &str, script: &str) -> String {
    let out = docker(&["exec", id, "sh", "-c", script]);
    assert!(
        out.status.success(),
        "docker exec {id} sh -c {script:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Whether the container is running, by `docker inspect` (false when gone).
fn docker_running(id: &str) -> bool {
    let out = docker(&["inspect", "-f", "{{.State.Running}}", id]);
    out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "true"
}

fn docker_env(id: &str) -> String {
    let out = docker(&["inspect", "-f", "{{json .Config.Env}}", id]);
    assert!(out.status.success(), "docker inspect {id}");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// A container's stdout and stderr so far.
fn docker_logs(id: &str) -> String {
    let out = docker(&["logs", id]);
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// How long an agent may take to leave (its pods are stopped as it does).
const STOP: Duration = Duration::from_secs(20);

/// An agent for `node` over `rt`, joined to `s`, its data in `dir/agent`.
fn start_agent(
    s: &TestServer,
    node: &str,
    dir: &Path,
    rt: DockerRuntime,
) -> TestAgent<DockerRuntime> {
    let mut o = AgentOptions::new(vec![s.addr.clone()], s.node_token.clone(), node);
    o.data_dir = Some(dir.join("agent"));
    o.tuning = tuning(5);
    TestAgent::spawn(o, Arc::new(rt), Arc::new(TokioClock::new()))
}

/// A server and a Docker node, named for `test`; `None` without an engine.
struct Env {
    s: TestServer,
    node: String,
    agent: TestAgent<DockerRuntime>,
    _tmp: tempfile::TempDir,
    // Last: containers are removed after the agent and the server are gone.
    _cleanup: Cleanup,
}

impl Env {
    async fn start(test: &str) -> Option<Env> {
        if !engine_ready() {
            return None;
        }
        let node = node_name("dp", test);
        let cleanup = Cleanup::new(&node);
        let tmp = tempfile::tempdir().unwrap();
        let s = TestServer::start(&tmp.path().join("server")).await;
        let rt = DockerRuntime::connect(DockerOptions::new(node.clone(), tmp.path()))
            .await
            .expect("the engine answers");
        let agent = start_agent(&s, &node, tmp.path(), rt);
        wait_until("the node Ready", WAIT, || async {
            s.node(&node).await.is_some_and(|n| n.is_ready())
        })
        .await;
        Some(Env {
            s,
            node,
            agent,
            _tmp: tmp,
            _cleanup: cleanup,
        })
    }

    /// Stops the agent (its pods are stopped as it leaves) and checks that
    /// nothing of the node is left.
    async fn finish(self) {
        let Env { s, node, agent, .. } = self;
        agent.stop(STOP).await;
        assert!(
            docker_ps(&node, &[]).is_empty(),
            "the node left, its containers are gone"
        );
        s.shutdown().await;
    }

    /// A pod bound to the node: `containers` is the YAML list of its
    /// containers, indented by 2.
    async fn apply_pod(&self, name: &str, containers: &str) {
        self.s
            .apply(&format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {}\n  terminationGracePeriodSeconds: 1\n  containers:\n{containers}",
                self.node
            ))
            .await;
    }
}

fn status<'a>(p: &'a Pod, container: &str) -> Option<&'a ContainerStatus> {
    p.status
        .container_statuses
        .iter()
        .find(|c| c.name == container)
}

/// The Docker id of a container's current instance.
fn docker_id(p: &Pod, container: &str) -> Option<String> {
    status(p, container)
        .map(|c| c.container_id.trim_start_matches("docker://").to_string())
        .filter(|id| !id.is_empty())
}

/// Whether the pod is Running with `container` running.
fn running(p: &Pod, container: &str) -> bool {
    p.status.phase == Some(PodPhase::Running)
        && status(p, container).is_some_and(|c| c.state.running.is_some())
}

fn condition(p: &Pod, kind: &str) -> Option<ConditionStatus> {
    p.condition(kind).and_then(|c| c.status.clone())
}

/// Running, its container running but not ready: the Ready and
/// ContainersReady conditions False.
fn running_not_ready(p: &Pod, container: &str) -> bool {
    running(p, container)
        && status(p, container).is_some_and(|c| !c.ready)
        && condition(p, "Ready") == Some(ConditionStatus::False)
        && condition(p, "ContainersReady") == Some(ConditionStatus::False)
}

/// Running, its container running and ready, the pod Ready.
fn running_ready(p: &Pod, container: &str) -> bool {
    running(p, container)
        && status(p, container).is_some_and(|c| c.ready)
        && condition(p, "Ready") == Some(ConditionStatus::True)
        && condition(p, "ContainersReady") == Some(ConditionStatus::True)
}

fn restarts(p: &Pod, container: &str) -> i32 {
    status(p, container).map_or(-1, |c| c.restart_count)
}

// ------------------------------------------------------------ probes

#[tokio::test]
async fn an_exec_readiness_probe_gates_ready() {
    let Some(env) = Env::start("exec").await else {
        return;
    };
    let s = &env.s;
    // Each probe run leaves a line in /tmp/probed, then tests the file.
    env.apply_pod(
        "gated",
        &format!(
            "  - name: c
    image: {IMAGE}
    command: [sh, -c, {SLEEPER:?}]
    readinessProbe:
      exec: {{command: [sh, -c, 'echo run >> /tmp/probed; test -f /tmp/ready']}}
      periodSeconds: 1
      failureThreshold: 1
"
        ),
    )
    .await;
    let t0 = Instant::now();
    wait_until("gated Running, not Ready", WAIT, || async {
        s.pod("gated")
            .await
            .is_some_and(|p| running_not_ready(&p, "c"))
    })
    .await;
    let p = s.pod("gated").await.unwrap();
    let id = docker_id(&p, "c").expect("a container id");
    assert!(docker_running(&id));
    assert!(!p.status.pod_ip.is_empty(), "{:?}", p.status);
    // The probe runs (and fails): three runs, and the pod is still not Ready.
    wait_until("three probe runs", WAIT, || async {
        exec_sh(&id, "cat /tmp/probed 2>/dev/null || true")
            .lines()
            .count()
            >= 3
    })
    .await;
    let p = s.pod("gated").await.unwrap();
    assert!(running_not_ready(&p, "c"), "{:?}", p.status);
    assert_eq!(
        p.condition("Ready").unwrap().reason,
        "ContainersNotReady",
        "{:?}",
        p.status
    );
    eprintln!(
        "applied -> Running, three failed probe runs: {:?}",
        t0.elapsed()
    );

    // The file appears: Ready within a probe period (and a status send).
    exec_sh(&id, "touch /tmp/ready");
    let took = wait_until("gated Ready", WAIT, || async {
        s.pod("gated").await.is_some_and(|p| running_ready(&p, "c"))
    })
    .await;
    eprintln!("/tmp/ready created -> pod Ready: {took:?}");
    assert!(took < FLIP, "{took:?}");

    // And gone: not Ready again; readiness never restarts anything.
    exec_sh(&id, "rm /tmp/ready");
    let took = wait_until("gated not Ready again", WAIT, || async {
        s.pod("gated")
            .await
            .is_some_and(|p| running_not_ready(&p, "c"))
    })
    .await;
    eprintln!("/tmp/ready removed -> pod not Ready: {took:?}");
    let p = s.pod("gated").await.unwrap();
    assert_eq!(restarts(&p, "c"), 0);
    assert_eq!(docker_id(&p, "c").as_deref(), Some(id.as_str()));
    assert!(docker_running(&id));
    env.finish().await;
}

#[tokio::test]
async fn a_failing_liveness_probe_restarts_its_container() {
    let Some(env) = Env::start("liveness").await else {
        return;
    };
    let s = &env.s;
    // `sick` is never alive (no /tmp/alive in a new container); `well` is,
    // with room for a slow `docker exec` on a loaded machine (a probe that
    // times out fails, as the kubelet's does: a run beside 3 busy loops on
    // 2 cores restarted `well` once with timeoutSeconds 1, threshold 1).
    env.apply_pod(
        "lively",
        &format!(
            "  - name: sick
    image: {IMAGE}
    command: [sh, -c, {SLEEPER:?}]
    livenessProbe:
      exec: {{command: [test, -f, /tmp/alive]}}
      periodSeconds: 1
      failureThreshold: 2
  - name: well
    image: {IMAGE}
    command: [sh, -c, {SLEEPER:?}]
    livenessProbe:
      exec: {{command: ['true']}}
      periodSeconds: 1
      timeoutSeconds: 10
      failureThreshold: 3
"
        ),
    )
    .await;
    let t0 = Instant::now();
    let first = Mutex::new(None::<(String, String)>);
    wait_until("lively Running, both containers up", WAIT, || async {
        let Some(p) = s.pod("lively").await else {
            return false;
        };
        if running(&p, "sick") && running(&p, "well") && restarts(&p, "sick") == 0 {
            *first.lock().unwrap() = docker_id(&p, "sick").zip(docker_id(&p, "well"));
        }
        first.lock().unwrap().is_some()
    })
    .await;
    let (sick0, well0) = first.into_inner().unwrap().unwrap();

    // Every instance of `sick` seen, in order.
    let seen = Mutex::new(vec![sick0.clone()]);
    let took = wait_until("sick restarted twice, running again", WAIT, || async {
        let Some(p) = s.pod("lively").await else {
            return false;
        };
        if let Some(id) = docker_id(&p, "sick") {
            let mut seen = seen.lock().unwrap();
            if seen.last() != Some(&id) {
                seen.push(id);
            }
        }
        restarts(&p, "sick") >= 2 && running(&p, "sick")
    })
    .await;
    eprintln!(
        "applied -> liveness failed, restartCount >= 2: {:?} (from Running: {took:?})",
        t0.elapsed()
    );
    let p = s.pod("lively").await.unwrap();
    let sick = status(&p, "sick").unwrap();
    let now = docker_id(&p, "sick").unwrap();
    assert_ne!(now, sick0, "a new container instance");
    let seen = seen.into_inner().unwrap();
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(!docker_running(&sick0), "the first instance was stopped");
    // The last instance was stopped by the agent (SIGTERM: exit 7), not a crash.
    let last = sick
        .last_state
        .terminated
        .as_ref()
        .expect("lastState.terminated");
    assert_eq!(last.exit_code, 7, "{last:?}");
    assert_ne!(last.container_id.trim_start_matches("docker://"), now);
    assert!(
        seen.iter()
            .any(|id| last.container_id.ends_with(id.as_str())),
        "{last:?} {seen:?}"
    );
    // The other container's liveness passes: untouched.
    assert_eq!(restarts(&p, "well"), 0);
    assert_eq!(docker_id(&p, "well").as_deref(), Some(well0.as_str()));
    assert!(docker_running(&well0));
    env.finish().await;
}

#[tokio::test]
async fn an_http_get_readiness_probe_is_ready_once_the_path_is_served() {
    let Some(env) = Env::start("http").await else {
        return;
    };
    let s = &env.s;
    // httpd -vv logs every request ("url:/healthz", "response:404") to
    // stderr, which `docker logs` shows.
    env.apply_pod(
        "web",
        &format!(
            "  - name: c
    image: {IMAGE}
    command: [sh, -c, \"mkdir -p /www; trap 'exit 7' TERM; httpd -f -vv -p 8080 -h /www & wait\"]
    ports: [{{name: web, containerPort: 8080}}]
    readinessProbe:
      httpGet: {{path: /healthz, port: web}}
      periodSeconds: 1
      failureThreshold: 1
"
        ),
    )
    .await;
    let t0 = Instant::now();
    wait_until("web Running, not Ready", WAIT, || async {
        s.pod("web")
            .await
            .is_some_and(|p| running_not_ready(&p, "c"))
    })
    .await;
    let p = s.pod("web").await.unwrap();
    let id = docker_id(&p, "c").unwrap();
    // The probe reaches httpd at the pod IP and gets 404, twice.
    wait_until("two probes answered 404", WAIT, || async {
        let logs = docker_logs(&id);
        logs.contains("url:/healthz") && logs.matches("response:404").count() >= 2
    })
    .await;
    let p = s.pod("web").await.unwrap();
    assert!(running_not_ready(&p, "c"), "{:?}", p.status);
    let logs = docker_logs(&id);
    assert!(!logs.contains("response:200"), "{logs}");
    eprintln!(
        "applied -> Running, probes answered 404: {:?}",
        t0.elapsed()
    );

    exec_sh(&id, "echo ok > /www/healthz");
    let took = wait_until("web Ready", WAIT, || async {
        s.pod("web").await.is_some_and(|p| running_ready(&p, "c"))
    })
    .await;
    eprintln!("/www/healthz served -> pod Ready: {took:?}");
    assert!(took < FLIP, "{took:?}");
    let logs = docker_logs(&id);
    assert!(logs.contains("response:200"), "{logs}");
    // The probe came from outside the pod (the agent, through the bridge).
    let pod_ip = s.pod("web").await.unwrap().status.pod_ip;
    assert!(
        !pod_ip.is_empty() && !pod_ip.starts_with("127."),
        "{pod_ip}"
    );
    assert_eq!(restarts(&s.pod("web").await.unwrap(), "c"), 0);
    env.finish().await;
}

#[tokio::test]
async fn a_host_network_pods_http_get_probe_goes_to_the_node() {
    let Some(env) = Env::start("hostnet").await else {
        return;
    };
    let s = &env.s;
    // The pod shares the host's network and its httpd binds the port
    // itself, so nothing can hold it for it: a port free on the host below
    // the kernel's ephemeral range, which no outgoing connection takes.
    let port = drover_testkit::host_port();
    s.apply(&format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: hostweb}}
spec:
  nodeName: {}
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: {IMAGE}
    command: [sh, -c, \"mkdir -p /www; trap 'exit 7' TERM; httpd -f -vv -p {port} -h /www & wait\"]
    readinessProbe:
      httpGet: {{path: /healthz, port: {port}}}
      periodSeconds: 1
      failureThreshold: 1
",
        env.node
    ))
    .await;
    wait_until("hostweb Running, not Ready", WAIT, || async {
        s.pod("hostweb")
            .await
            .is_some_and(|p| running_not_ready(&p, "c"))
    })
    .await;
    let p = s.pod("hostweb").await.unwrap();
    let id = docker_id(&p, "c").unwrap();
    wait_until("two probes answered 404", WAIT, || async {
        docker_logs(&id).matches("response:404").count() >= 2
    })
    .await;
    assert!(running_not_ready(&s.pod("hostweb").await.unwrap(), "c"));
    exec_sh(&id, "echo ok > /www/healthz");
    let took = wait_until("hostweb Ready", WAIT, || async {
        s.pod("hostweb")
            .await
            .is_some_and(|p| running_ready(&p, "c"))
    })
    .await;
    eprintln!("/www/healthz served on the host network -> pod Ready: {took:?}");
    let p = s.pod("hostweb").await.unwrap();
    // As in Kubernetes, a hostNetwork pod's IP is its node's.
    assert!(!p.status.host_ip.is_empty(), "{:?}", p.status);
    assert_eq!(p.status.pod_ip, p.status.host_ip, "{:?}", p.status);
    assert!(docker_logs(&id).contains("response:200"));
    env.finish().await;
}

#[tokio::test]
async fn a_tcp_socket_readiness_probe_is_ready_once_something_listens() {
    let Some(env) = Env::start("tcp").await else {
        return;
    };
    let s = &env.s;
    env.apply_pod(
        "listener",
        &format!(
            "  - name: c
    image: {IMAGE}
    command: [sh, -c, {SLEEPER:?}]
    readinessProbe:
      tcpSocket: {{port: 9000}}
      periodSeconds: 1
      failureThreshold: 1
"
        ),
    )
    .await;
    wait_until("listener Running, not Ready", WAIT, || async {
        s.pod("listener")
            .await
            .is_some_and(|p| running_not_ready(&p, "c"))
    })
    .await;
    let p = s.pod("listener").await.unwrap();
    let id = docker_id(&p, "c").unwrap();
    let addr = format!("{}:9000", p.status.pod_ip);
    // Nothing listens: a connection to the pod's port is refused, and the
    // pod stays not Ready for three probe periods.
    let refused = tokio::net::TcpStream::connect(&addr).await;
    assert!(refused.is_err(), "{addr} answered");
    let window = Instant::now();
    while window.elapsed() < Duration::from_secs(3) {
        let p = s.pod("listener").await.unwrap();
        assert!(running_not_ready(&p, "c"), "{:?}", p.status);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Something listens (late): each connection appends a line to /tmp/hits.
    let out = docker(&[
        "exec",
        "-d",
        &id,
        "nc",
        "-ll",
        "-p",
        "9000",
        "-e",
        "sh",
        "-c",
        "echo hit >> /tmp/hits",
    ]);
    assert!(out.status.success(), "{out:?}");
    let t0 = Instant::now();
    let took = wait_until("listener Ready", WAIT, || async {
        s.pod("listener")
            .await
            .is_some_and(|p| running_ready(&p, "c"))
    })
    .await;
    eprintln!("nc listens -> pod Ready: {took:?}");
    assert!(took < FLIP, "{took:?}");
    // The probe connects to that listener, period after period.
    wait_until("two probe connections", WAIT, || async {
        exec_sh(&id, "cat /tmp/hits 2>/dev/null || true")
            .lines()
            .count()
            >= 2
    })
    .await;
    eprintln!("nc listens -> two probe connections: {:?}", t0.elapsed());
    assert_eq!(restarts(&s.pod("listener").await.unwrap(), "c"), 0);
    env.finish().await;
}

// ------------------------------------------------------------ rollout

/// The DaemonSet `gated`: RollingUpdate, maxUnavailable 1; its container
/// is ready once /tmp/ready exists, which it makes itself at start when
/// `GATE` is `open`.
fn gated_ds(gate: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: gated}}
spec:
  selector: {{matchLabels: {{app: gated}}}}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate: {{maxUnavailable: 1}}
  template:
    metadata: {{labels: {{app: gated}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: {IMAGE}
        command: [sh, -c, {:?}]
        env: [{{name: GATE, value: {gate}}}]
        readinessProbe:
          exec: {{command: [sh, -c, 'echo run >> /tmp/probed; test -f /tmp/ready']}}
          periodSeconds: 1
          failureThreshold: 1
",
        format!("if [ \"$GATE\" = open ]; then touch /tmp/ready; fi; {SLEEPER}")
    )
}

async fn daemon_set(s: &TestServer, name: &str) -> DaemonSet {
    match s.objects.get(Kind::DaemonSet, "default", name).await {
        Ok(Manifest::DaemonSet(d)) => *d,
        other => panic!("DaemonSet {name}: {other:?}"),
    }
}

async fn ds_pods(s: &TestServer, ds: &str) -> Vec<Pod> {
    s.pods(Some("default"))
        .await
        .into_iter()
        .filter(|p| p.metadata.controller_ref().is_some_and(|o| o.name == ds))
        .collect()
}

/// `drover rollout status ds/NAME` as the command runs it.
async fn rollout_status(c: &Client, name: &str, watch: bool) -> String {
    let mut out = Vec::new();
    let r = rollout::status(c, name, "default", watch, Some(WAIT), false, &mut out).await;
    let text = String::from_utf8_lossy(&out).to_string();
    if let Err(e) = r {
        panic!("rollout status failed: {}\n{text}", error_text(&e));
    }
    text
}

#[tokio::test]
async fn a_rolling_update_waits_for_the_new_pods_readiness_probe() {
    let Some(env) = Env::start("rollout").await else {
        return;
    };
    let s = &env.s;
    let client = Client::new(&ClientConfig {
        servers: vec![s.addr.clone()],
        token: s.server.identity.admin_token.clone(),
        ca: s.ca.clone(),
        ..Default::default()
    })
    .expect("client");

    // Version 1 makes its own /tmp/ready: Ready after its first probe.
    let t0 = Instant::now();
    s.apply(&gated_ds("open")).await;
    wait_until(
        "the v1 pod Ready, the DaemonSet available",
        WAIT,
        || async {
            let pods = ds_pods(s, "gated").await;
            let d = daemon_set(s, "gated").await;
            matches!(pods.as_slice(), [p] if running_ready(p, "main"))
                && d.status.number_available == 1
        },
    )
    .await;
    eprintln!("v1 applied -> Ready, available: {:?}", t0.elapsed());
    let text = rollout_status(&client, "gated", true).await;
    assert!(
        text.ends_with("daemon set \"gated\" successfully rolled out\n"),
        "{text}"
    );
    let old = ds_pods(s, "gated").await.remove(0);
    let old_id = docker_id(&old, "main").unwrap();
    assert!(docker_env(&old_id).contains("GATE=open"));

    // Version 2 (only the env changes) does not: its probe fails.
    let t0 = Instant::now();
    s.apply(&gated_ds("closed")).await;
    let new = Mutex::new(None::<Pod>);
    wait_until("the v2 pod Running, not Ready", WAIT, || async {
        let pods = ds_pods(s, "gated").await;
        let found = pods
            .into_iter()
            .find(|p| p.metadata.uid != old.metadata.uid && running_not_ready(p, "main"));
        let done = found.is_some();
        *new.lock().unwrap() = found;
        done
    })
    .await;
    eprintln!(
        "v2 applied -> new pod Running, not Ready: {:?}",
        t0.elapsed()
    );
    let new = new.into_inner().unwrap().unwrap();
    let new_id = docker_id(&new, "main").unwrap();
    assert_ne!(new_id, old_id);
    assert!(docker_env(&new_id).contains("GATE=closed"));
    // maxUnavailable 1, maxSurge 0: the old pod and container are gone.
    wait_until("the old pod and container gone", WAIT, || async {
        ds_pods(s, "gated").await.len() == 1
            && docker_ps(
                &env.node,
                &[&format!("label=io.drover.pod.uid={}", old.metadata.uid)],
            )
            .is_empty()
    })
    .await;
    // The new pod's probe runs and fails: still not Ready, not available.
    wait_until("three probe runs in the new container", WAIT, || async {
        exec_sh(&new_id, "cat /tmp/probed 2>/dev/null || true")
            .lines()
            .count()
            >= 3
    })
    .await;
    let p = s.pod(&new.metadata.name).await.unwrap();
    assert!(running_not_ready(&p, "main"), "{:?}", p.status);
    wait_until("the DaemonSet counts the updated pod", WAIT, || async {
        let d = daemon_set(s, "gated").await;
        d.status.observed_generation == d.metadata.generation
            && d.status.updated_number_scheduled == 1
    })
    .await;
    let d = daemon_set(s, "gated").await;
    assert_eq!(d.status.desired_number_scheduled, 1, "{:?}", d.status);
    assert_eq!(d.status.number_ready, 0, "{:?}", d.status);
    assert_eq!(d.status.number_available, 0, "{:?}", d.status);
    assert_eq!(d.status.number_unavailable, 1, "{:?}", d.status);
    let text = rollout_status(&client, "gated", false).await;
    assert!(!text.contains("successfully rolled out"), "{text}");
    assert!(
        text.starts_with("Waiting for daemon set \"gated\" rollout"),
        "{text}"
    );

    // The probe passes: Ready, available, rolled out.
    exec_sh(&new_id, "touch /tmp/ready");
    let t0 = Instant::now();
    wait_until(
        "the v2 pod Ready, the DaemonSet available",
        WAIT,
        || async {
            let ready = s
                .pod(&new.metadata.name)
                .await
                .is_some_and(|p| running_ready(&p, "main"));
            ready && daemon_set(s, "gated").await.status.number_available == 1
        },
    )
    .await;
    eprintln!(
        "/tmp/ready created -> pod Ready, available: {:?}",
        t0.elapsed()
    );
    let d = daemon_set(s, "gated").await;
    assert_eq!(
        (
            d.status.desired_number_scheduled,
            d.status.updated_number_scheduled,
            d.status.number_ready,
            d.status.number_available,
            d.status.number_unavailable
        ),
        (1, 1, 1, 1, 0),
        "{:?}",
        d.status
    );
    let text = rollout_status(&client, "gated", true).await;
    assert!(
        text.ends_with("daemon set \"gated\" successfully rolled out\n"),
        "{text}"
    );
    let p = s.pod(&new.metadata.name).await.unwrap();
    assert_eq!(restarts(&p, "main"), 0);
    assert_eq!(docker_id(&p, "main").as_deref(), Some(new_id.as_str()));
    assert!(!docker_running(&old_id), "the old container is gone");
    let containers = docker_ps(&env.node, &["label=io.drover.role=container"]);
    assert_eq!(containers, vec![new_id.clone()]);
    env.finish().await;
}
