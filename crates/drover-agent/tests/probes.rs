//! Probes and preStop hooks on simulated nodes against a real one-member
//! server in this process: readiness gates Ready (and a DaemonSet's
//! numberReady), a failed liveness probe restarts the container, the
//! startup probe holds liveness back, httpGet and tcpSocket probes against
//! local listeners, preStop runs before the stop and within the grace
//! period. Probe results are flipped through the simulated runtime's files
//! (`cat /tmp/ready`, see `drover_agent::sim_runtime`). Every wait has a
//! deadline; nothing relies on a fixed sleep.

use drover_agent::sim_runtime::ANY_POD;
use drover_agent::{AgentOptions, Sim, SimConfig, SimRuntime};
use drover_api::Kind;
use drover_api::{ConditionStatus, DaemonSet, Manifest, Pod};
use drover_testkit::{
    is_running_and_ready, quick_tuning, sim_options, start_sim_agent, wait_until, TestAgent,
    TestServer,
};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(15);

/// How long an agent may take to leave.
const STOP: Duration = Duration::from_secs(10);

/// An agent named `name` over a simulated runtime, joined to `s`.
fn start_agent(s: &TestServer, name: &str) -> TestAgent<SimRuntime> {
    let mut o = AgentOptions::new(vec![s.addr.clone()], s.node_token.clone(), name);
    o.tuning = quick_tuning(1);
    start_sim_agent(o, SimConfig::default())
}

async fn node_up(s: &TestServer, name: &str) {
    wait_until("the node", WAIT, || async { s.node(name).await.is_some() }).await;
}

/// A pod on `node` whose container `c` has `extra` (YAML, indented by 4)
/// in its spec; `pod_extra` goes into the pod spec (indented by 2).
fn pod_yaml(name: &str, node: &str, pod_extra: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {node}\n{pod_extra}  containers:\n  - name: c\n    image: nginx\n{extra}"
    )
}

fn ready_cond(p: &Pod) -> Option<ConditionStatus> {
    p.condition("Ready").and_then(|c| c.status.clone())
}

fn restarts(p: &Pod) -> i32 {
    p.status
        .container_statuses
        .first()
        .map_or(0, |c| c.restart_count)
}

fn cmd(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

#[tokio::test]
async fn a_readiness_exec_probe_gates_ready_and_the_daemon_sets_number_ready() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let o = sim_options(vec![s.addr.clone()], &s.node_token, "probe-", 2);
    let sim = Sim::start(o).expect("sim starts");
    for n in sim.names() {
        node_up(&s, n).await;
    }
    s.apply(
        "apiVersion: apps/v1
kind: DaemonSet
metadata: {name: gated}
spec:
  selector: {matchLabels: {app: gated}}
  template:
    metadata: {labels: {app: gated}}
    spec:
      containers:
      - name: main
        image: nginx
        readinessProbe:
          exec: {command: [cat, /tmp/ready]}
          periodSeconds: 1
          failureThreshold: 1
",
    )
    .await;
    let pods = || async {
        let (l, _) = s.objects.list(Kind::Pod, None, None).await.unwrap();
        l.into_iter()
            .filter_map(|m| match m {
                Manifest::Pod(p) => Some(*p),
                _ => None,
            })
            .collect::<Vec<Pod>>()
    };
    let number_ready = || async {
        match s.objects.get(Kind::DaemonSet, "default", "gated").await {
            Ok(Manifest::DaemonSet(d)) => {
                let d: DaemonSet = *d;
                (d.status.number_ready, d.status.desired_number_scheduled)
            }
            _ => (-1, -1),
        }
    };
    // Running, but the probe fails: not Ready.
    wait_until("both pods Running, not Ready", WAIT, || async {
        let p = pods().await;
        p.len() == 2
            && p.iter().all(|p| {
                p.status.phase == Some(drover_api::PodPhase::Running)
                    && ready_cond(p) == Some(ConditionStatus::False)
                    && p.condition("ContainersReady")
                        .and_then(|c| c.status.clone())
                        == Some(ConditionStatus::False)
                    && !p.status.container_statuses[0].ready
            })
    })
    .await;
    assert_eq!(number_ready().await, (0, 2));

    // The file appears on both nodes: Ready, counted.
    let t = Instant::now();
    for i in 0..2 {
        sim.runtime(i)
            .unwrap()
            .write_file(ANY_POD, "/tmp/ready", "ok");
    }
    wait_until("both pods Ready", WAIT, || async {
        pods().await.iter().all(is_running_and_ready)
    })
    .await;
    eprintln!("readiness flip -> Ready in the store: {:?}", t.elapsed());
    wait_until("numberReady 2", WAIT, || async {
        number_ready().await == (2, 2)
    })
    .await;

    // It goes on node 0: that pod only turns NotReady, quickly.
    let t = Instant::now();
    sim.runtime(0).unwrap().remove_file(ANY_POD, "/tmp/ready");
    wait_until("the pod of probe-0 NotReady", WAIT, || async {
        pods().await.iter().all(|p| {
            let want = if p.spec.node_name == "probe-0" {
                ConditionStatus::False
            } else {
                ConditionStatus::True
            };
            ready_cond(p) == Some(want)
        })
    })
    .await;
    let took = t.elapsed();
    eprintln!("readiness flip -> NotReady in the store: {took:?}");
    // A probe period (periodSeconds 1, failureThreshold 1) and a status
    // interval (200 ms), and a margin of 2.8 s for a loaded 2-core machine.
    assert!(
        took < Duration::from_secs(4),
        "a probe period (1 s) and a status interval, with room for a loaded machine: {took:?}"
    );
    wait_until("numberReady 1", WAIT, || async {
        number_ready().await == (1, 2)
    })
    .await;
    let p0 = pods()
        .await
        .into_iter()
        .find(|p| p.spec.node_name == "probe-0")
        .unwrap();
    assert_eq!(restarts(&p0), 0, "readiness never restarts");
    assert_eq!(
        p0.condition("Ready").unwrap().message,
        "containers with unready status: [main]"
    );
    let left = tokio::time::timeout(Duration::from_secs(20), sim.shutdown())
        .await
        .expect("the sim stops");
    assert_eq!(left, 2);
    s.shutdown().await;
}

#[tokio::test]
async fn a_failed_liveness_probe_restarts_the_container_after_its_pre_stop_hook() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let agent = start_agent(&s, "n1");
    node_up(&s, "n1").await;
    let rt = agent.runtime.clone();
    rt.write_file(ANY_POD, "/tmp/alive", "");
    s.apply(&pod_yaml(
        "live",
        "n1",
        "",
        "    livenessProbe:
      exec: {command: [cat, /tmp/alive]}
      periodSeconds: 1
      failureThreshold: 2
    lifecycle:
      preStop:
        exec: {command: [touch, /tmp/prestop]}
",
    ))
    .await;
    wait_until("live Running and Ready", WAIT, || async {
        s.pod("live")
            .await
            .is_some_and(|p| is_running_and_ready(&p))
    })
    .await;
    let uid = s.pod("live").await.unwrap().metadata.uid;
    // Passing liveness probes run and change nothing.
    wait_until("two liveness probes", WAIT, || async {
        rt.exec_history(&uid).len() >= 2
    })
    .await;
    assert_eq!(restarts(&s.pod("live").await.unwrap()), 0);

    let t = Instant::now();
    rt.remove_file(ANY_POD, "/tmp/alive");
    wait_until("restartCount 1", WAIT, || async {
        s.pod("live").await.is_some_and(|p| restarts(&p) >= 1)
    })
    .await;
    eprintln!("liveness failing -> restarted: {:?}", t.elapsed());
    rt.write_file(ANY_POD, "/tmp/alive", "");
    // The preStop hook ran, in the running container (exec refuses any
    // other), before the stop signal.
    assert!(
        rt.file(&uid, "/tmp/prestop").is_some(),
        "the preStop hook ran"
    );
    let h = rt.exec_history(&uid);
    let hook = h.iter().position(|c| *c == cmd(&["touch", "/tmp/prestop"]));
    assert!(hook.is_some(), "{h:?}");
    wait_until("live Ready again, with a lastState", WAIT, || async {
        s.pod("live").await.is_some_and(|p| {
            is_running_and_ready(&p)
                && p.status.container_statuses[0]
                    .last_state
                    .terminated
                    .as_ref()
                    .is_some_and(|t| t.exit_code == 143)
        })
    })
    .await;
    let p = s.pod("live").await.unwrap();
    assert_eq!(restarts(&p), 1, "restarted once");
    agent.stop(STOP).await;
    s.shutdown().await;
}

#[tokio::test]
async fn the_startup_probe_holds_liveness_and_readiness_back() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let agent = start_agent(&s, "n1");
    node_up(&s, "n1").await;
    let rt = agent.runtime.clone();
    // Liveness would kill it at the first run: the startup probe must hold
    // it back while it fails.
    s.apply(&pod_yaml(
        "slow",
        "n1",
        "",
        "    startupProbe:
      exec: {command: [cat, /tmp/started]}
      periodSeconds: 1
      failureThreshold: 60
    livenessProbe:
      exec: {command: [sh, -c, cat /tmp/alive]}
      periodSeconds: 1
      failureThreshold: 1
    readinessProbe:
      exec: {command: ['true']}
      periodSeconds: 1
",
    ))
    .await;
    wait_until("slow Running, not started", WAIT, || async {
        s.pod("slow").await.is_some_and(|p| {
            p.status.phase == Some(drover_api::PodPhase::Running)
                && p.status.container_statuses[0].started == Some(false)
        })
    })
    .await;
    let uid = s.pod("slow").await.unwrap().metadata.uid;
    wait_until("three startup probes", WAIT, || async {
        rt.exec_history(&uid).len() >= 3
    })
    .await;
    let h = rt.exec_history(&uid);
    assert!(
        h.iter().all(|c| *c == cmd(&["cat", "/tmp/started"])),
        "only the startup probe runs before it succeeds: {h:?}"
    );
    let p = s.pod("slow").await.unwrap();
    assert_eq!(restarts(&p), 0);
    assert_eq!(ready_cond(&p), Some(ConditionStatus::False));

    // Started: readiness passes, and liveness (failing) now kills it.
    rt.write_file(&uid, "/tmp/started", "");
    wait_until("slow restarted by liveness", WAIT, || async {
        s.pod("slow").await.is_some_and(|p| restarts(&p) >= 1)
    })
    .await;
    let h = rt.exec_history(&uid);
    assert!(h.contains(&cmd(&["sh", "-c", "cat /tmp/alive"])), "{h:?}");
    // With liveness passing, the new instance starts, then is ready.
    rt.write_file(&uid, "/tmp/alive", "");
    wait_until("slow Ready", WAIT, || async {
        s.pod("slow").await.is_some_and(|p| {
            is_running_and_ready(&p) && p.status.container_statuses[0].started == Some(true)
        })
    })
    .await;
    agent.stop(STOP).await;
    s.shutdown().await;
}

/// A tiny HTTP server on loopback answering with the status in `status`.
async fn http_server(status: Arc<AtomicU16>) -> (u16, JoinHandle<()>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        while let Ok((mut sock, _)) = l.accept().await {
            let status = status.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 2048];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let code = status.load(Ordering::SeqCst);
                let resp = format!("HTTP/1.1 {code} X\r\nContent-Length: 0\r\n\r\n");
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    (port, task)
}

#[tokio::test]
async fn http_get_and_tcp_socket_probes_reach_a_host_network_pod() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let agent = start_agent(&s, "n1");
    node_up(&s, "n1").await;
    let status = Arc::new(AtomicU16::new(200));
    let (http_port, http_task) = http_server(status.clone()).await;
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tcp_port = tcp.local_addr().unwrap().port();
    // hostNetwork: the probes go to the node's IP, 127.0.0.1 here; the
    // HTTP port is given by name.
    s.apply(&format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: web}}
spec:
  nodeName: n1
  hostNetwork: true
  containers:
  - name: http
    image: nginx
    ports: [{{name: web, containerPort: {http_port}}}]
    readinessProbe:
      httpGet: {{path: /healthz, port: web, httpHeaders: [{{name: X-Check, value: '1'}}]}}
      periodSeconds: 1
      failureThreshold: 1
  - name: tcp
    image: nginx
    readinessProbe:
      tcpSocket: {{port: {tcp_port}}}
      periodSeconds: 1
      failureThreshold: 1
"
    ))
    .await;
    let ready_of = |p: &Pod, c: &str| {
        p.status
            .container_statuses
            .iter()
            .find(|s| s.name == c)
            .is_some_and(|s| s.ready)
    };
    wait_until("web Ready (HTTP 200, port open)", WAIT, || async {
        s.pod("web").await.is_some_and(|p| is_running_and_ready(&p))
    })
    .await;
    assert_eq!(s.pod("web").await.unwrap().status.pod_ip, "127.0.0.1");

    // HTTP 500: the http container is unready, the pod NotReady.
    status.store(500, Ordering::SeqCst);
    wait_until("http unready on 500", WAIT, || async {
        s.pod("web")
            .await
            .is_some_and(|p| !ready_of(&p, "http") && ready_of(&p, "tcp") && !p.is_ready())
    })
    .await;
    // A redirect counts as success.
    status.store(301, Ordering::SeqCst);
    wait_until("http ready on 301", WAIT, || async {
        s.pod("web").await.is_some_and(|p| is_running_and_ready(&p))
    })
    .await;
    // The TCP port closes: the tcp container is unready.
    drop(tcp);
    wait_until("tcp unready once closed", WAIT, || async {
        s.pod("web")
            .await
            .is_some_and(|p| ready_of(&p, "http") && !ready_of(&p, "tcp") && !p.is_ready())
    })
    .await;
    assert_eq!(restarts(&s.pod("web").await.unwrap()), 0);
    http_task.abort();
    agent.stop(STOP).await;
    s.shutdown().await;
}

#[tokio::test]
async fn pre_stop_runs_before_the_stop_and_within_the_grace_period() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let agent = start_agent(&s, "n1");
    node_up(&s, "n1").await;
    let rt = agent.runtime.clone();
    let hook =
        |cmd: &str| format!("    lifecycle:\n      preStop:\n        exec: {{command: [{cmd}]}}\n");
    s.apply(&pod_yaml("polite", "n1", "", &hook("touch, /tmp/bye")))
        .await;
    s.apply(&pod_yaml(
        "stubborn",
        "n1",
        "  terminationGracePeriodSeconds: 1\n",
        &hook("sleep, '600'"),
    ))
    .await;
    for name in ["polite", "stubborn"] {
        wait_until("the pods Ready", WAIT, || async {
            s.pod(name).await.is_some_and(|p| is_running_and_ready(&p))
        })
        .await;
    }
    let polite = s.pod("polite").await.unwrap().metadata.uid;
    let stubborn = s.pod("stubborn").await.unwrap().metadata.uid;

    // Deleted: the hook runs in the running container, then it stops.
    s.objects
        .delete(Kind::Pod, "default", "polite")
        .await
        .unwrap();
    wait_until("polite's container gone", WAIT, || async {
        rt.containers().iter().all(|c| c.pod_uid != polite)
    })
    .await;
    assert!(
        rt.file(&polite, "/tmp/bye").is_some(),
        "the preStop hook ran"
    );
    assert_eq!(rt.exec_history(&polite), vec![cmd(&["touch", "/tmp/bye"])]);

    // A hook that would run for 10 minutes is cut at the grace period
    // (1 s), and the stop gets the kubelet's 2 s more at most.
    let t = Instant::now();
    s.objects
        .delete(Kind::Pod, "default", "stubborn")
        .await
        .unwrap();
    wait_until("stubborn's container gone", WAIT, || async {
        rt.containers().iter().all(|c| c.pod_uid != stubborn)
    })
    .await;
    let took = t.elapsed();
    eprintln!("delete with a 600 s preStop and a 1 s grace -> gone in {took:?}");
    assert!(took >= Duration::from_millis(900), "the hook ran: {took:?}");
    // The grace period (1 s) and the 2 s more, and a margin of 5 s for a
    // loaded machine; the hook alone would run 600 s.
    assert!(
        took < Duration::from_secs(8),
        "bounded by the grace period: {took:?}"
    );
    assert_eq!(rt.exec_history(&stubborn), vec![cmd(&["sleep", "600"])]);
    agent.stop(STOP).await;
    s.shutdown().await;
}
