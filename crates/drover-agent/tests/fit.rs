//! Daemon pods are placed only where they fit, as the Kubernetes scheduler
//! places them: on simulated nodes (4 CPUs, 8 GiB, 110 pods each) of a
//! one-member server in this process, two DaemonSets that want the same
//! host port never share a node, and a DaemonSet that asks for more CPU
//! than a node has gets no running pod: its pods wait unbound (Pending,
//! `PodScheduled=False` with the scheduler's reason, a `FailedScheduling`
//! event), and `describe ds` says why.

use drover_agent::Sim;
use drover_api::{Kind, Manifest};
use drover_cli::kubectl;
use drover_testkit::{is_running_and_ready, sim_options, wait_until, TestServer};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(15);
const NODES: usize = 3;

fn exporter(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: {name}}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - name: main
        image: busybox
{extra}"
    )
}

async fn status(s: &TestServer, name: &str) -> drover_api::DaemonSetStatus {
    match s.objects.get(Kind::DaemonSet, "default", name).await {
        Ok(Manifest::DaemonSet(d)) => d.status,
        _ => Default::default(),
    }
}

/// The pods of `app` waiting unbound: (pinned node, PodScheduled message).
async fn waiting_pods_of(s: &TestServer, app: &str) -> Vec<(String, String)> {
    let (pods, _) = s.objects.list(Kind::Pod, None, None).await.expect("list");
    let mut out: Vec<(String, String)> = pods
        .into_iter()
        .filter_map(|m| match m {
            Manifest::Pod(p)
                if p.metadata.labels.get("app").map(String::as_str) == Some(app)
                    && p.spec.node_name.is_empty() =>
            {
                let node = drover_api::node_affinity::pinned_node(&p.spec)?.to_string();
                let c = p.status.conditions.iter().find(|c| {
                    c.r#type == "PodScheduled"
                        && c.status == Some(drover_api::ConditionStatus::False)
                        && c.reason == "Unschedulable"
                })?;
                (p.status.phase == Some(drover_api::PodPhase::Pending))
                    .then(|| (node, c.message.clone()))
            }
            _ => None,
        })
        .collect();
    out.sort();
    out
}

async fn failed_scheduling_events(s: &TestServer, app: &str) -> usize {
    let (events, _) = s
        .objects
        .list(Kind::Event, None, None)
        .await
        .expect("events");
    events
        .iter()
        .filter(|m| {
            matches!(m, Manifest::Event(e) if e.reason == "FailedScheduling"
                && e.r#type == "Warning"
                && e.involved_object.name.starts_with(&format!("{app}-")))
        })
        .count()
}

async fn running_pods_of(s: &TestServer, app: &str) -> Vec<String> {
    let (pods, _) = s.objects.list(Kind::Pod, None, None).await.expect("list");
    let mut nodes: Vec<String> = pods
        .into_iter()
        .filter_map(|m| match m {
            Manifest::Pod(p) if p.metadata.labels.get("app").map(String::as_str) == Some(app) => {
                is_running_and_ready(&p).then(|| p.spec.node_name.clone())
            }
            _ => None,
        })
        .collect();
    nodes.sort();
    nodes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_pods_go_only_where_their_ports_and_requests_fit() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let sim = Sim::start(sim_options(
        vec![s.addr.clone()],
        &s.node_token,
        "fit-",
        NODES,
    ))
    .expect("sim");
    let all: Vec<String> = (0..NODES).map(|i| format!("fit-{i}")).collect();
    wait_until("the nodes Ready", WAIT, || async {
        let mut ok = true;
        for n in &all {
            ok &= s.node(n).await.is_some_and(|n| n.is_ready());
        }
        ok
    })
    .await;

    // Two node exporters on host port 9100, applied together: one gets
    // every node, the other none (never both on a node).
    let port = "        ports: [{containerPort: 9100, hostPort: 9100}]\n";
    s.apply(&format!(
        "{}---\n{}",
        exporter("exporter-a", port),
        exporter("exporter-b", port)
    ))
    .await;
    wait_until("one exporter on every node", WAIT, || async {
        let (a, b) = (
            running_pods_of(&s, "exporter-a").await,
            running_pods_of(&s, "exporter-b").await,
        );
        (a == all && b.is_empty()) || (b == all && a.is_empty())
    })
    .await;
    let (winner, loser) = if running_pods_of(&s, "exporter-a").await == all {
        ("exporter-a", "exporter-b")
    } else {
        ("exporter-b", "exporter-a")
    };
    // The nodes are desired; on each the loser's pod waits unbound, with
    // the scheduler's reason, and none is ready.
    wait_until("the loser's status", WAIT, || async {
        let st = status(&s, loser).await;
        (
            st.desired_number_scheduled,
            st.current_number_scheduled,
            st.number_ready,
        ) == (NODES as i32, NODES as i32, 0)
    })
    .await;
    let waiting = waiting_pods_of(&s, loser).await;
    let pinned: Vec<&String> = waiting.iter().map(|(n, _)| n).collect();
    assert_eq!(pinned, all.iter().collect::<Vec<_>>(), "{waiting:?}");
    for (_, message) in &waiting {
        assert!(
            message.starts_with("0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports (9100/TCP is taken by pod default/"),
            "{message}"
        );
    }
    wait_until("a FailedScheduling event per waiting pod", WAIT, || async {
        failed_scheduling_events(&s, loser).await >= NODES
    })
    .await;

    // More CPU than any node has.
    s.apply(&exporter(
        "greedy",
        "        resources: {requests: {cpu: \"16\"}}\n",
    ))
    .await;
    wait_until("greedy's status written", WAIT, || async {
        status(&s, "greedy").await.desired_number_scheduled == NODES as i32
    })
    .await;
    // `describe ds` says why for each node.
    let c = s.client();
    let describe = |name: &'static str| {
        let c = c.clone();
        async move {
            let mut out = Vec::new();
            kubectl::describe(&c, "ds", &[name.to_string()], None, &mut out)
                .await
                .expect("describe");
            String::from_utf8(out).expect("utf-8")
        }
    };
    let text = describe("greedy").await;
    for n in &all {
        assert!(
            text.contains(&format!("{n}  Insufficient cpu (the pod requests 16000m; the node's other pods request 0m of 4000m allocatable)")),
            "{text}"
        );
    }
    let text = describe(loser).await;
    assert!(
        text.contains(&format!(
            "node(s) didn't have free ports for the requested pod ports (9100/TCP is taken by pod default/{winner}-"
        )),
        "{text}"
    );
    assert!(running_pods_of(&s, "greedy").await.is_empty());
    wait_until("greedy's pods wait on every node", WAIT, || async {
        let w = waiting_pods_of(&s, "greedy").await;
        w.len() == NODES
            && w.iter()
                .all(|(_, m)| m.contains("1 Insufficient cpu (the pod requests 16000m"))
    })
    .await;
    // The winner's pods are gone: the loser's waiting pods are bound there.
    let before: Vec<String> = {
        let (pods, _) = s.objects.list(Kind::Pod, None, None).await.expect("list");
        let mut uids: Vec<String> = pods
            .iter()
            .filter_map(|m| match m {
                Manifest::Pod(p)
                    if p.metadata.labels.get("app").map(String::as_str) == Some(loser) =>
                {
                    Some(p.metadata.uid.clone())
                }
                _ => None,
            })
            .collect();
        uids.sort();
        uids
    };
    s.objects
        .delete(Kind::DaemonSet, "default", winner)
        .await
        .expect("delete");
    wait_until("the other exporter on every node", WAIT, || async {
        running_pods_of(&s, loser).await == all
    })
    .await;
    {
        let (pods, _) = s.objects.list(Kind::Pod, None, None).await.expect("list");
        let mut uids: Vec<String> = pods
            .iter()
            .filter_map(|m| match m {
                Manifest::Pod(p)
                    if p.metadata.labels.get("app").map(String::as_str) == Some(loser) =>
                {
                    Some(p.metadata.uid.clone())
                }
                _ => None,
            })
            .collect();
        uids.sort();
        assert_eq!(uids, before, "the waiting pods were bound, not replaced");
    }

    // A critical exporter on the same port preempts it on every node; the
    // preempted DaemonSet waits (lower priority never takes it back).
    s.apply(&exporter(
        "critical",
        "        ports: [{containerPort: 9100, hostPort: 9100}]\n      priorityClassName: system-node-critical\n",
    ))
    .await;
    wait_until(
        "critical on every node, the other on none",
        WAIT,
        || async {
            running_pods_of(&s, "critical").await == all
                && running_pods_of(&s, loser).await.is_empty()
        },
    )
    .await;
    let (events, _) = s
        .objects
        .list(Kind::Event, None, None)
        .await
        .expect("events");
    let preempted = events
        .iter()
        .filter(|m| matches!(m, Manifest::Event(e) if e.reason == "Preempted"))
        .count();
    assert!(preempted >= NODES, "{preempted} Preempted events");
    let text = describe(loser).await;
    assert!(
        text.contains("9100/TCP is taken by pod default/critical-"),
        "{text}"
    );
    drop(sim);
    s.shutdown().await;
}
