//! The controllers on a one-member server, with Nodes applied by hand (no
//! agents): a DaemonSet gets exactly one pod on every eligible node, follows
//! label changes, replaces deleted pods, reports status, and its pods go
//! with it; silent nodes turn NotReady with the unreachable taints.

use drover_api::Kind;
use drover_api::Manifest;
use drover_server::api::Objects;
use drover_server::Server;
use drover_testkit::{loopback_options, wait_until_every};
use std::time::Duration;

const DS: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: mon}
spec:
  selector: {matchLabels: {app: mon}}
  template:
    metadata: {labels: {app: mon}}
    spec:
      nodeSelector: {role: edge}
      containers: [{name: mon, image: busybox}]
"#;

fn node(name: &str, role: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{role: {role}}}\n---\n"
    )
}

async fn start(node_timeout: Duration) -> (tempfile::TempDir, Server, Objects) {
    let tmp = tempfile::tempdir().unwrap();
    let mut o = loopback_options(tmp.path().join("s"));
    o.controller.node_timeout = node_timeout;
    let server = Server::start(o).await.unwrap();
    let objects = server.objects();
    (tmp, server, objects)
}

/// The nodes that run a pod of `ds`, sorted; panics on two pods on a node.
async fn placement(objects: &Objects) -> Vec<String> {
    let (pods, _) = objects.list(Kind::Pod, None, None).await.unwrap();
    let mut nodes: Vec<String> = pods
        .iter()
        .filter_map(|m| match m {
            Manifest::Pod(p) if p.metadata.labels.get("app").map(String::as_str) == Some("mon") => {
                Some(p.spec.node_name.clone())
            }
            _ => None,
        })
        .collect();
    nodes.sort();
    let mut dedup = nodes.clone();
    dedup.dedup();
    assert_eq!(dedup, nodes, "two pods of one DaemonSet on a node");
    nodes
}

/// Waits up to 15 s for `f`, polling every 20 ms.
async fn eventually<F, Fut>(what: &str, f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    wait_until_every(what, Duration::from_secs(15), Duration::from_millis(20), f).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_set_follows_nodes_and_labels() {
    let (_tmp, mut server, objects) = start(Duration::from_secs(3600)).await;
    let nodes = format!(
        "{}{}{}",
        node("a", "edge"),
        node("b", "edge"),
        node("c", "core")
    );
    objects.apply(&nodes, false).await.unwrap();
    objects.apply(DS, false).await.unwrap();
    eventually("pods on a and b", || async {
        placement(&objects).await == ["a", "b"]
    })
    .await;

    // Status counters.
    eventually("status", || async {
        let Ok(Manifest::DaemonSet(ds)) = objects.get(Kind::DaemonSet, "default", "mon").await
        else {
            return false;
        };
        ds.status.desired_number_scheduled == 2
            && ds.status.current_number_scheduled == 2
            && ds.status.observed_generation == Some(1)
    })
    .await;

    // A node that joins gets its pod; relabelling moves pods.
    objects.apply(&node("d", "edge"), false).await.unwrap();
    eventually("pod on d", || async {
        placement(&objects).await == ["a", "b", "d"]
    })
    .await;
    objects.apply(&node("a", "core"), false).await.unwrap();
    objects.apply(&node("c", "edge"), false).await.unwrap();
    eventually("pods follow labels", || async {
        placement(&objects).await == ["b", "c", "d"]
    })
    .await;

    // A deleted pod is revived.
    let (pods, _) = objects.list(Kind::Pod, None, None).await.unwrap();
    let victim = pods
        .iter()
        .find(|m| m.metadata().labels.contains_key("app"))
        .unwrap();
    let (ns, name) = (victim.namespace().to_string(), victim.name().to_string());
    objects.delete(Kind::Pod, &ns, &name).await.unwrap();
    eventually("pod revived", || async {
        let p = placement(&objects).await;
        p == ["b", "c", "d"] && objects.get(Kind::Pod, &ns, &name).await.is_err()
    })
    .await;

    // A node that leaves takes its pod; deleting the DaemonSet takes the rest.
    objects.delete(Kind::Node, "", "d").await.unwrap();
    eventually("pod of d gone", || async {
        placement(&objects).await == ["b", "c"]
    })
    .await;
    objects
        .delete(Kind::DaemonSet, "default", "mon")
        .await
        .unwrap();
    eventually("pods gone with the DaemonSet", || async {
        placement(&objects).await.is_empty()
    })
    .await;

    // The controller recorded what it did.
    let (events, _) = objects.list(Kind::Event, None, None).await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Manifest::Event(ev) if ev.reason == "SuccessfulCreate")),
        "no SuccessfulCreate event among {}",
        events.len()
    );
    server.shutdown().await;
}

/// A pass writes its pods and the DaemonSet's new status in one raft
/// entry (one store revision), not one entry for each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_writes_its_pods_and_the_status_in_one_revision() {
    let (_tmp, mut server, objects) = start(Duration::from_secs(3600)).await;
    let nodes = format!("{}{}", node("a", "edge"), node("b", "edge"));
    objects.apply(&nodes, false).await.unwrap();
    let (_, from) = objects.list(Kind::Node, None, None).await.unwrap();
    let mut watch = objects.ctx().store.watch("/registry/", from + 1).unwrap();
    objects.apply(DS, false).await.unwrap();
    let batch = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            let b = watch.next().await.unwrap();
            let keys: Vec<String> = b
                .events
                .iter()
                .filter_map(|e| e.kv.as_ref().map(|kv| kv.key.clone()))
                .collect();
            if keys.iter().any(|k| k.starts_with("/registry/pods/")) {
                return keys;
            }
        }
    })
    .await
    .expect("the pods were created");
    let pods = batch
        .iter()
        .filter(|k| k.starts_with("/registry/pods/default/mon-"))
        .count();
    assert_eq!(pods, 2, "both pods in one revision: {batch:?}");
    assert!(
        batch
            .iter()
            .any(|k| k == "/registry/daemonsets/default/mon"),
        "the status went in another revision than the pods: {batch:?}"
    );
    server.shutdown().await;
}

/// The pass after the one that creates the pods writes only the new
/// status (it counts the pods now); the pass that status write would wake
/// is not run, since it would plan the same view. Afterwards the
/// controller still acts on a change: a node relabelled loses its pod.
/// (The loop's 1 s timer would also run that pass, so this does not show
/// that the change itself woke it; `cache/changes.rs`'s unit tests check
/// that a change of anyone else's, even in the same raft entry, is never
/// taken for the controller's own.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_woken_only_by_its_own_status_write_is_skipped() {
    let (_tmp, mut server, objects) = start(Duration::from_secs(3600)).await;
    let nodes = format!("{}{}", node("a", "edge"), node("b", "edge"));
    objects.apply(&nodes, false).await.unwrap();
    let skipped = || objects.ctx().metrics.controller_passes_skipped.get();
    let before = skipped();
    objects.apply(DS, false).await.unwrap();
    eventually(
        "the status counts both pods and a pass was skipped",
        || async {
            let status_counts = match objects.get(Kind::DaemonSet, "default", "mon").await {
                Ok(Manifest::DaemonSet(ds)) => ds.status.current_number_scheduled == 2,
                _ => false,
            };
            status_counts && skipped() > before
        },
    )
    .await;
    objects.apply(&node("b", "core"), false).await.unwrap();
    eventually("the relabelled node lost its pod", || async {
        placement(&objects).await == ["a"]
    })
    .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_nodes_become_not_ready_and_keep_their_pods() {
    let (_tmp, mut server, objects) = start(Duration::from_millis(600)).await;
    objects
        .apply(
            &format!("{}{}", node("live", "edge"), node("dead", "edge")),
            false,
        )
        .await
        .unwrap();
    objects.apply(DS, false).await.unwrap();
    eventually("pods on both", || async {
        placement(&objects).await == ["dead", "live"]
    })
    .await;
    // Only "live" heartbeats.
    let hb = server.ctx.clone();
    let beating = tokio::spawn(async move {
        loop {
            hb.heartbeats.beat("live");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    eventually("dead is NotReady with the unreachable taints", || async {
        let Ok(Manifest::Node(n)) = objects.get(Kind::Node, "", "dead").await else {
            return false;
        };
        let unknown =
            n.status.conditions.iter().any(|c| {
                c.r#type == "Ready" && c.status == Some(drover_api::ConditionStatus::Unknown)
            });
        let taints: Vec<_> = n.spec.taints.iter().map(|t| t.key.as_str()).collect();
        unknown
            && taints
                .iter()
                .filter(|k| **k == "node.kubernetes.io/unreachable")
                .count()
                == 2
    })
    .await;
    let Ok(Manifest::Node(live)) = objects.get(Kind::Node, "", "live").await else {
        panic!()
    };
    assert!(
        live.spec.taints.is_empty(),
        "the beating node stays untainted"
    );
    // Its pod stays (daemon pods tolerate unreachable NoExecute).
    assert_eq!(placement(&objects).await, ["dead", "live"]);
    beating.abort();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_placed_pod_waits_for_its_node_then_is_collected() {
    let pod = |name: &str, node: &str| {
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {node}\n  containers: [{{name: c, image: busybox}}]\n---\n")
    };
    // Default grace (40 s): a pod applied before its node survives.
    let (_tmp, mut server, objects) = start(Duration::from_secs(3600)).await;
    objects
        .apply(&pod("early", "late-node"), false)
        .await
        .unwrap();
    objects
        .apply(&node("late-node", "edge"), false)
        .await
        .unwrap();
    objects.apply(DS, false).await.unwrap();
    // Once the DaemonSet's pod exists, passes have run with the node present.
    eventually("daemon pod on late-node", || async {
        placement(&objects).await == ["late-node"]
    })
    .await;
    assert!(objects.get(Kind::Pod, "default", "early").await.is_ok());
    server.shutdown().await;

    // A short grace: a pod whose node never comes is collected.
    let tmp = tempfile::tempdir().unwrap();
    let mut o = loopback_options(tmp.path().join("s"));
    o.controller.orphan_pod_grace = Duration::from_millis(300);
    let mut server = Server::start(o).await.unwrap();
    let objects = server.objects();
    objects
        .apply(&pod("lost", "no-such-node"), false)
        .await
        .unwrap();
    eventually("the orphan pod collected", || async {
        objects.get(Kind::Pod, "default", "lost").await.is_err()
    })
    .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_expire_after_the_event_ttl() {
    let tmp = tempfile::tempdir().unwrap();
    let mut o = loopback_options(tmp.path().join("s"));
    o.controller.event_ttl = Duration::from_secs(2);
    let mut server = Server::start(o).await.unwrap();
    let objects = server.objects();
    let event = |name: &str, last: &str| {
        format!(
            "apiVersion: v1\nkind: Event\nmetadata: {{name: {name}, namespace: default}}\n\
             involvedObject: {{kind: Pod, name: p, namespace: default}}\n\
             reason: Test\nmessage: m\ntype: Normal\n\
             firstTimestamp: \"2020-01-01T00:00:00Z\"\nlastTimestamp: \"{last}\"\n"
        )
    };
    // Last seen long ago: expires. Seen again "later" (in the future here):
    // it lives on, whatever its first occurrence.
    objects
        .apply(&event("old", "2020-01-01T00:00:00Z"), false)
        .await
        .unwrap();
    let tomorrow = drover_controller::Timestamp::from(
        std::time::SystemTime::now() + Duration::from_secs(86_400),
    )
    .to_rfc3339();
    objects
        .apply(&event("recurring", &tomorrow), false)
        .await
        .unwrap();
    eventually("the old event deleted", || async {
        objects.get(Kind::Event, "default", "old").await.is_err()
    })
    .await;
    assert!(objects
        .get(Kind::Event, "default", "recurring")
        .await
        .is_ok());
    server.shutdown().await;
}

/// Once every node is Ready, a pass judges only the nodes whose verdict
/// may have changed (`drover_controller::node::NodeWatch`), and the
/// DaemonSet's plan, from its memo, diffs only the nodes that changed
/// (`drover_controller::daemon::Memo`): relabelling one node of 40 costs
/// the passes that follow a few judgements and diffs, where passes over
/// every node would take 40 each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_judges_only_the_nodes_that_changed() {
    let (_tmp, mut server, objects) = start(Duration::from_secs(3600)).await;
    let names: Vec<String> = (0..40).map(|i| format!("n{i:02}")).collect();
    let all: String = names.iter().map(|n| node(n, "edge")).collect();
    objects.apply(&all, false).await.unwrap();
    for n in &names {
        server.ctx.heartbeats.beat(n);
    }
    objects.apply(DS, false).await.unwrap();
    eventually("every node Ready, each with its pod", || async {
        let (nodes, _) = objects.list(Kind::Node, None, None).await.unwrap();
        let ready = nodes
            .iter()
            .filter(|m| match m {
                Manifest::Node(n) => n.status.conditions.iter().any(|c| {
                    c.r#type == "Ready" && c.status == Some(drover_api::ConditionStatus::True)
                }),
                _ => false,
            })
            .count();
        ready == 40 && placement(&objects).await.len() == 40
    })
    .await;
    let metrics = &objects.ctx().metrics;
    let judged = || metrics.controller_nodes_judged.get();
    let planned = || metrics.controller_daemon_nodes_planned.get();
    // Passes done (an idle leader passes at least once a second).
    let passes = || {
        metrics
            .render(&drover_server::metrics::Facts::default())
            .lines()
            .find_map(|l| l.strip_prefix("drover_controller_pass_duration_seconds_count "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    // The pass that wrote the nodes Ready also created their pods, so the
    // wait above can end before the next pass judges those 40 nodes again
    // (changed, and written by the last plan). Count from a settled
    // controller: two passes done and no node judged since the last mark
    // (so one whole pass judged none).
    let mut mark = (judged(), passes());
    eventually("a whole pass that judges no node", || {
        let now = (judged(), passes());
        let settled = now.0 == mark.0 && now.1 >= mark.1 + 2;
        if now.0 != mark.0 {
            mark = now;
        }
        async move { settled }
    })
    .await;
    let (judged_before, planned_before) = (judged(), planned());
    objects.apply(&node("n07", "core"), false).await.unwrap();
    eventually("the relabelled node lost its pod", || async {
        placement(&objects).await.len() == 39
    })
    .await;
    let spent = judged() - judged_before;
    assert!(
        (1..40).contains(&spent),
        "{spent} nodes judged for one relabelled node (40 a pass when every node is judged again)"
    );
    // The DaemonSet's plans, from its memo, diffed only that node too.
    let diffed = planned() - planned_before;
    assert!(
        (1..40).contains(&diffed),
        "{diffed} nodes diffed by the DaemonSet's plans for one relabelled node (40 a pass when it plans every node)"
    );
    server.shutdown().await;
}
