//! Figures of a Deployment's pods from apply to bound and to Running over
//! sim nodes of a server in this process (a benchmark, not a test: it
//! prints, never asserts on time). Run with
//!
//! ```sh
//! DROVER_BENCH_PODS=2000 DROVER_BENCH_NODES=200 \
//!   cargo test -p drover-server --test workloads_bench -- --ignored --nocapture
//! ```
//!
//! One Deployment of `DROVER_BENCH_PODS` replicas (requests 10m CPU) onto
//! `DROVER_BENCH_NODES` sim nodes: the time from the apply until every pod
//! exists, is bound, and runs ready; then a rolling update of the whole
//! Deployment (maxSurge 25 %, maxUnavailable 25 %) until it is complete.

use drover_agent::Sim;
use drover_api::{Kind, Manifest};
use drover_testkit::{is_running_and_ready, sim_options, wait_nodes_ready, TestServer};
use std::time::{Duration, Instant};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn deployment(replicas: usize, image: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: bench}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: bench}}}}
  template:
    metadata: {{labels: {{app: bench}}}}
    spec:
      containers:
      - name: c
        image: \"{image}\"
        resources: {{requests: {{cpu: 10m}}}}
"
    )
}

/// (pods, bound, running and ready, of `image`), from the member's view.
fn counts(s: &TestServer, image: &str) -> (usize, usize, usize) {
    let view = s.server.cache.snapshot();
    let mut c = (0, 0, 0);
    for p in view.pods.values() {
        if p.metadata.labels.get("app").map(String::as_str) != Some("bench")
            || p.spec.containers[0].image != image
            || p.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        c.0 += 1;
        c.1 += usize::from(!p.spec.node_name.is_empty());
        c.2 += usize::from(is_running_and_ready(p));
    }
    c
}

/// Waits for each milestone of `image` and prints when it was reached.
async fn milestones(s: &TestServer, image: &str, pods: usize, from: Instant, what: &str) {
    let mut changes = s.server.cache.subscribe();
    let (mut created, mut bound) = (None, None);
    let limit = Duration::from_secs(env("DROVER_BENCH_LIMIT_SECS", 600) as u64);
    loop {
        changes.borrow_and_update();
        let (n, b, r) = counts(s, image);
        if created.is_none() && n >= pods {
            created = Some(from.elapsed());
        }
        if bound.is_none() && b >= pods {
            bound = Some(from.elapsed());
        }
        if r >= pods && n == pods {
            let running = from.elapsed();
            let rate = |d: Duration| pods as f64 / d.as_secs_f64();
            let (c, b) = (created.unwrap_or(running), bound.unwrap_or(running));
            println!(
                "{what}: {pods} pods created in {c:.2?} ({:.0}/s), bound in {b:.2?} ({:.0}/s), running and ready in {running:.2?} ({:.0}/s)",
                rate(c),
                rate(b),
                rate(running)
            );
            return;
        }
        if from.elapsed() > limit {
            println!("{what}: not done after {limit:?}: {n} pods, {b} bound, {r} ready");
            let view = s.server.cache.snapshot();
            let stuck = view.pods.values().filter(|p| {
                p.metadata.labels.get("app").map(String::as_str) == Some("bench")
                    && p.metadata.deletion_timestamp.is_none()
                    && !is_running_and_ready(p)
            });
            for p in stuck.take(5) {
                println!(
                    "  not ready: {} on {:?}: phase {:?}, conditions {:?}, containers {:?}",
                    p.metadata.name,
                    p.spec.node_name,
                    p.status.phase,
                    p.status
                        .conditions
                        .iter()
                        .map(|c| (c.r#type.as_str(), c.status.clone(), c.reason.as_str()))
                        .collect::<Vec<_>>(),
                    p.status.container_statuses
                );
            }
            return;
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), changes.changed()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a benchmark: prints figures"]
async fn deployment_pods_from_apply_to_running() {
    let pods = env("DROVER_BENCH_PODS", 2000);
    let nodes = env("DROVER_BENCH_NODES", 200);
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let _sim = Sim::start(sim_options(
        vec![s.addr.clone()],
        &s.node_token,
        "b-",
        nodes,
    ))
    .expect("sim");
    wait_nodes_ready(&s.objects, "b-", nodes, Duration::from_secs(120)).await;
    let start = Instant::now();
    s.objects
        .apply(&deployment(pods, "busybox:1"), false)
        .await
        .expect("apply");
    milestones(&s, "busybox:1", pods, start, "first rollout").await;
    let start = Instant::now();
    s.objects
        .apply(&deployment(pods, "busybox:2"), false)
        .await
        .expect("apply v2");
    milestones(&s, "busybox:2", pods, start, "rolling update").await;
    let (list, _) = s.objects.list(Kind::ReplicaSet, None, None).await.unwrap();
    let sizes: Vec<String> = list
        .iter()
        .filter_map(|m| match m {
            Manifest::ReplicaSet(rs) => Some(format!(
                "{}={}",
                rs.metadata.name,
                rs.spec.replicas.unwrap_or(1)
            )),
            _ => None,
        })
        .collect();
    println!("replica sets at the end: {}", sizes.join(", "));
    s.shutdown().await;
}
