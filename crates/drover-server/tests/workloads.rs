//! Deployments and ReplicaSets on servers of this process with simulated
//! nodes (`loops/workloads.rs` with the scheduler): a Deployment runs its
//! replicas; a template change rolls out within `maxSurge` and
//! `maxUnavailable` at every state the member's informer applies;
//! `Recreate` never runs old and new pods together; scaling; a deleted pod
//! is replaced; deleting a Deployment takes its ReplicaSets and pods (or
//! orphans them); a pod on a killed node goes after its
//! `tolerationSeconds` and is replaced on another; a leader failover mid-
//! rollout finishes the rollout with no extra pod.

use drover_agent::Sim;
use drover_api::{Deployment, Kind, Manifest, Pod, ReplicaSet};
use drover_server::api::Objects;
use drover_server::Server;
use drover_testkit::{
    client, is_running_and_ready, sim_options, wait_nodes_ready, wait_until, TestServer,
};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

fn deployment(name: &str, replicas: i32, image: &str, strategy: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  strategy: {strategy}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
{extra_spec}      containers: [{{name: c, image: \"{image}\"}}]
"
    )
}

const ROLLING: &str = "{type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}";

/// A one-member server and `n` Ready sim nodes `<prefix>0…`.
async fn cluster(tmp: &std::path::Path, prefix: &str, n: usize) -> (TestServer, Sim) {
    cluster_tuned(tmp, prefix, n, |_| {}).await
}

async fn cluster_tuned(
    tmp: &std::path::Path,
    prefix: &str,
    n: usize,
    tune: impl FnOnce(&mut drover_server::ServerOptions),
) -> (TestServer, Sim) {
    let s = TestServer::start_tuned(&tmp.join("server"), tune).await;
    let sim = Sim::start(sim_options(vec![s.addr.clone()], &s.node_token, prefix, n)).expect("sim");
    wait_nodes_ready(&s.objects, prefix, n, WAIT).await;
    (s, sim)
}

async fn list<T>(objects: &Objects, kind: Kind, f: impl Fn(Manifest) -> Option<T>) -> Vec<T> {
    let (items, _) = objects.list(kind, None, None).await.unwrap_or_default();
    items.into_iter().filter_map(f).collect()
}

async fn pods_of(objects: &Objects, app: &str) -> Vec<Pod> {
    list(objects, Kind::Pod, |m| match m {
        Manifest::Pod(p) if p.metadata.labels.get("app").map(String::as_str) == Some(app) => {
            Some(*p)
        }
        _ => None,
    })
    .await
}

async fn replica_sets(objects: &Objects) -> Vec<ReplicaSet> {
    list(objects, Kind::ReplicaSet, |m| match m {
        Manifest::ReplicaSet(r) => Some(*r),
        _ => None,
    })
    .await
}

async fn get_deployment(objects: &Objects, name: &str) -> Option<Deployment> {
    match objects.get(Kind::Deployment, "default", name).await {
        Ok(Manifest::Deployment(d)) => Some(*d),
        _ => None,
    }
}

fn image(p: &Pod) -> &str {
    &p.spec.containers[0].image
}

/// `n` pods, all of `img`, all running and ready.
fn all_running(pods: &[&Pod], n: usize, img: &str) -> bool {
    pods.len() == n
        && pods
            .iter()
            .all(|p| image(p) == img && is_running_and_ready(p))
}

/// The Deployment `name` has `n` pods, all running and ready, all of
/// `img`, none terminating, and says its rollout is complete.
async fn rolled_out(objects: &Objects, name: &str, n: usize, img: &str) -> bool {
    let pods = pods_of(objects, name).await;
    let done = pods.len() == n
        && pods.iter().all(|p| {
            is_running_and_ready(p) && image(p) == img && p.metadata.deletion_timestamp.is_none()
        });
    let Some(d) = get_deployment(objects, name).await else {
        return false;
    };
    done && d.status.updated_replicas == n as i32
        && d.status.available_replicas == n as i32
        && d.status.replicas == n as i32
        && d.status
            .conditions
            .iter()
            .any(|c| c.r#type == "Progressing" && c.reason == "NewReplicaSetAvailable")
}

/// Applies `yaml` and waits until it runs `n` ready pods of `img`.
async fn apply_and_wait(objects: &Objects, yaml: &str, name: &str, n: usize, img: &str) {
    objects.apply(yaml, false).await.expect("apply");
    wait_until(&format!("{name}: {n} pods of {img}"), WAIT, || {
        rolled_out(objects, name, n, img)
    })
    .await;
}

/// Applies the Deployment `name` (RollingUpdate, maxSurge 1,
/// maxUnavailable 0) and waits until it runs `n` ready pods of `img`.
async fn rolled(objects: &Objects, name: &str, n: usize, img: &str) {
    apply_and_wait(
        objects,
        &deployment(name, n as i32, img, ROLLING, ""),
        name,
        n,
        img,
    )
    .await;
}

/// Watches the member's informer (every state it applies) until `done`,
/// checking `bound` on the pods of `app` at each.
async fn watch_pods(
    server: &Server,
    app: &str,
    what: &str,
    mut bound: impl FnMut(&[&Pod]) -> Result<(), String>,
    mut done: impl FnMut(&[&Pod]) -> bool,
) -> usize {
    let mut changes = server.cache.subscribe();
    let deadline = Instant::now() + WAIT;
    let mut states = 0;
    loop {
        changes.borrow_and_update();
        let view = server.cache.snapshot();
        let pods: Vec<&Pod> = view
            .pods
            .values()
            .map(|p| &**p)
            .filter(|p| p.metadata.labels.get("app").map(String::as_str) == Some(app))
            .collect();
        states += 1;
        if let Err(e) = bound(&pods) {
            panic!("{what}: at revision {}: {e}", view.revision);
        }
        if done(&pods) {
            return states;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "{what}: not done within {WAIT:?}");
        let _ = tokio::time::timeout(left, changes.changed()).await;
    }
}

fn live<'a>(pods: &[&'a Pod]) -> Vec<&'a Pod> {
    pods.iter()
        .copied()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deployment_runs_rolls_out_within_bounds_scales_and_replaces_pods() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, _sim) = cluster(tmp.path(), "w-", 4).await;
    let o = &s.objects;
    rolled(o, "web", 3, "busybox:1").await;
    // One ReplicaSet `web-<hash>`, its hash on the pods, which the
    // scheduler bound.
    let sets = replica_sets(o).await;
    assert_eq!(sets.len(), 1, "{sets:?}");
    let hash = sets[0].metadata.labels["pod-template-hash"].clone();
    assert_eq!(sets[0].metadata.name, format!("web-{hash}"));
    for p in pods_of(o, "web").await {
        assert_eq!(p.metadata.labels["pod-template-hash"], hash);
        assert!(!p.spec.node_name.is_empty());
        assert!(p.metadata.name.starts_with(&format!("web-{hash}-")));
    }
    // A template change rolls out within maxSurge 1, maxUnavailable 0.
    o.apply(&deployment("web", 3, "busybox:2", ROLLING, ""), false)
        .await
        .expect("apply v2");
    let states = watch_pods(
        &s.server,
        "web",
        "rolling update",
        |pods| {
            let live = live(pods);
            let ready = live.iter().filter(|p| is_running_and_ready(p)).count();
            if live.len() > 4 {
                return Err(format!("{} pods above replicas + maxSurge = 4", live.len()));
            }
            if ready < 3 {
                return Err(format!(
                    "{ready} ready pods below replicas - maxUnavailable = 3"
                ));
            }
            Ok(())
        },
        |pods| all_running(pods, 3, "busybox:2"),
    )
    .await;
    println!("rolling update: {states} informer states checked");
    wait_until("the rollout complete", WAIT, || {
        rolled_out(o, "web", 3, "busybox:2")
    })
    .await;
    let d = get_deployment(o, "web").await.unwrap();
    assert_eq!(
        d.metadata.annotations["deployment.kubernetes.io/revision"],
        "2"
    );
    let sizes: BTreeMap<String, i32> = replica_sets(o)
        .await
        .into_iter()
        .map(|rs| (rs.metadata.name.clone(), rs.spec.replicas.unwrap_or(1)))
        .collect();
    assert_eq!(sizes.len(), 2);
    assert_eq!(sizes[&format!("web-{hash}")], 0, "the old ReplicaSet at 0");

    // Scale up, then down.
    rolled(o, "web", 5, "busybox:2").await;
    rolled(o, "web", 2, "busybox:2").await;

    // A deleted pod is replaced.
    let victim = pods_of(o, "web").await[0].clone();
    o.delete(Kind::Pod, "default", &victim.metadata.name)
        .await
        .expect("delete pod");
    wait_until("the pod replaced", WAIT, || async {
        let pods = pods_of(o, "web").await;
        pods.len() == 2
            && pods
                .iter()
                .all(|p| p.metadata.uid != victim.metadata.uid && is_running_and_ready(p))
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn recreate_never_runs_old_and_new_pods_together() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, _sim) = cluster(tmp.path(), "r-", 3).await;
    let o = &s.objects;
    let recreate = "{type: Recreate}";
    apply_and_wait(
        o,
        &deployment("rec", 3, "busybox:1", recreate, ""),
        "rec",
        3,
        "busybox:1",
    )
    .await;
    o.apply(&deployment("rec", 3, "busybox:2", recreate, ""), false)
        .await
        .expect("apply v2");
    watch_pods(
        &s.server,
        "rec",
        "recreate",
        |pods| {
            let new = pods.iter().filter(|p| image(p) == "busybox:2").count();
            let old = pods.len() - new;
            if new > 0 && old > 0 {
                return Err(format!(
                    "{old} old pods (terminating included) beside {new} new"
                ));
            }
            Ok(())
        },
        |pods| all_running(pods, 3, "busybox:2"),
    )
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleting_a_deployment_takes_or_orphans_its_replica_sets_and_pods() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, _sim) = cluster(tmp.path(), "g-", 2).await;
    let o = &s.objects;
    rolled(o, "gone", 2, "busybox:1").await;
    rolled(o, "kept", 2, "busybox:1").await;
    // Background: the Deployment, then its ReplicaSet, then its pods.
    o.delete(Kind::Deployment, "default", "gone")
        .await
        .expect("delete");
    wait_until("gone's ReplicaSet and pods gone", WAIT, || async {
        pods_of(o, "gone").await.is_empty()
            && !replica_sets(o)
                .await
                .iter()
                .any(|rs| rs.metadata.name.starts_with("gone-"))
    })
    .await;
    // Orphan: the ReplicaSet stays, without its owner, and so do its pods.
    let before: Vec<String> = pods_of(o, "kept")
        .await
        .iter()
        .map(|p| p.metadata.uid.clone())
        .collect();
    o.delete_with_finalizer(Kind::Deployment, "default", "kept", "orphan", None, None)
        .await
        .expect("orphan delete");
    wait_until("kept deleted", WAIT, || async {
        get_deployment(o, "kept").await.is_none()
    })
    .await;
    let sets = replica_sets(o).await;
    let kept: Vec<&ReplicaSet> = sets
        .iter()
        .filter(|rs| rs.metadata.name.starts_with("kept-"))
        .collect();
    assert_eq!(kept.len(), 1, "{sets:?}");
    assert!(kept[0].metadata.owner_references.is_empty());
    // The pods keep running, still the ReplicaSet's, for a while.
    let pods = pods_of(o, "kept").await;
    let mut now: Vec<String> = pods.iter().map(|p| p.metadata.uid.clone()).collect();
    let mut was = before.clone();
    now.sort();
    was.sort();
    assert_eq!(now, was, "the orphaned ReplicaSet keeps its pods");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pod_on_a_killed_node_is_replaced_on_another_after_its_toleration_seconds() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, a) = cluster_tuned(tmp.path(), "ka-", 1, |o| {
        o.controller.node_timeout = Duration::from_secs(1);
    })
    .await;
    let b = Sim::start(sim_options(vec![s.addr.clone()], &s.node_token, "kb-", 1)).expect("sim b");
    wait_nodes_ready(&s.objects, "kb-", 1, WAIT).await;
    let o = &s.objects;
    let tolerations = "      tolerations:
      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 2}
      - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 2}
";
    apply_and_wait(
        o,
        &deployment("ev", 1, "busybox:1", ROLLING, tolerations),
        "ev",
        1,
        "busybox:1",
    )
    .await;
    let first = pods_of(o, "ev").await.remove(0);
    let (doomed, survivor) = if first.spec.node_name.starts_with("ka-") {
        (a, b)
    } else {
        (b, a)
    };
    let dead_node = first.spec.node_name.clone();
    let mut changes = s.server.cache.subscribe();
    doomed.kill();
    // The node is tainted unreachable; at least 2 s later (its
    // tolerationSeconds) the pod goes. Both moments as this member's
    // informer applies them, so that both carry the same delay.
    let (mut tainted_at, mut evicted_at) = (None, None);
    let deadline = Instant::now() + WAIT;
    while evicted_at.is_none() {
        changes.borrow_and_update();
        let view = s.server.cache.snapshot();
        let tainted = view.nodes.values().any(|n| {
            n.metadata.name == dead_node
                && n.spec.taints.iter().any(|t| {
                    t.key == "node.kubernetes.io/unreachable"
                        && t.effect == Some(drover_api::TaintEffect::NoExecute)
                })
        });
        if tainted && tainted_at.is_none() {
            tainted_at = Some(Instant::now());
        }
        let gone = !view.pods.values().any(|p| {
            p.metadata.uid == first.metadata.uid && p.metadata.deletion_timestamp.is_none()
        });
        if gone {
            assert!(
                tainted_at.is_some(),
                "the pod went before its node was tainted"
            );
            evicted_at = Some(Instant::now());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "the pod was not evicted within {WAIT:?}");
        let _ = tokio::time::timeout(left, changes.changed()).await;
    }
    let waited = evicted_at.unwrap() - tainted_at.unwrap();
    // tolerationSeconds 2, less 100 ms for the two observations' jitter.
    assert!(
        waited >= Duration::from_millis(1_900),
        "evicted {waited:?} after the taint, before tolerationSeconds 2"
    );
    wait_until("the pod replaced on the other node", WAIT, || async {
        let pods = pods_of(o, "ev").await;
        pods.iter().any(|p| {
            p.metadata.uid != first.metadata.uid
                && p.spec.node_name == survivor.names()[0]
                && is_running_and_ready(p)
        })
    })
    .await;
    let events = list(o, Kind::Event, |m| match m {
        Manifest::Event(e) if e.reason == "TaintManagerEviction" => Some(e.message),
        _ => None,
    })
    .await;
    assert_eq!(
        events,
        [format!(
            "Marking for deletion Pod default/{}",
            first.metadata.name
        )]
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_failover_mid_rollout_finishes_it_with_no_extra_pod() {
    let tmp = tempfile::tempdir().unwrap();
    let drover_testkit::Voters {
        mut servers,
        addrs,
        ca,
        admin_token: admin,
        node_token,
    } = drover_testkit::start_voters(tmp.path(), 3, WAIT).await;
    let _sim = Sim::start(sim_options(addrs.clone(), &node_token, "lf-", 4)).expect("sim");
    wait_nodes_ready(&servers[0].objects(), "lf-", 4, WAIT).await;
    let c = client(addrs.clone(), &admin, &ca);
    let o = servers[0].objects();
    c.apply(&deployment("fo", 4, "busybox:1", ROLLING, ""), false)
        .await
        .expect("apply");
    wait_until("fo at v1", WAIT, || rolled_out(&o, "fo", 4, "busybox:1")).await;
    c.apply(&deployment("fo", 4, "busybox:2", ROLLING, ""), false)
        .await
        .expect("apply v2");
    wait_until("a new pod", WAIT, || async {
        pods_of(&o, "fo")
            .await
            .iter()
            .any(|p| image(p) == "busybox:2")
    })
    .await;
    let leader = servers
        .iter()
        .position(|s| s.store.leader().is_leader)
        .expect("a leader");
    let mut old = servers.remove(leader);
    old.shutdown().await;
    let watcher = &servers[0];
    let o = watcher.objects();
    watch_pods(
        watcher,
        "fo",
        "rollout across the failover",
        |pods| {
            let live = live(pods);
            if live.len() > 5 {
                return Err(format!("{} pods above replicas + maxSurge = 5", live.len()));
            }
            Ok(())
        },
        |pods| all_running(pods, 4, "busybox:2"),
    )
    .await;
    wait_until("fo at v2", WAIT, || rolled_out(&o, "fo", 4, "busybox:2")).await;
    let sets = replica_sets(&o).await;
    assert_eq!(sets.len(), 2, "one ReplicaSet per template: {sets:?}");
    for mut s in servers {
        s.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_drained_node_s_pods_are_replaced_on_other_nodes() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, _sim) = cluster(tmp.path(), "d-", 3).await;
    let o = &s.objects;
    rolled(o, "dr", 3, "busybox:1").await;
    let node = pods_of(o, "dr").await[0].spec.node_name.clone();
    let opts = drover_cli::drain::DrainOptions {
        ignore_daemonsets: true,
        timeout: Some(WAIT),
        ..Default::default()
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    drover_cli::drain::drain(
        &s.client(),
        std::slice::from_ref(&node),
        &opts,
        &mut out,
        &mut err,
    )
    .await
    .unwrap_or_else(|e| panic!("drain: {e}: {}", String::from_utf8_lossy(&err)));
    wait_until("3 pods again, none on the drained node", WAIT, || async {
        let pods = pods_of(o, "dr").await;
        pods.len() == 3
            && pods
                .iter()
                .all(|p| p.spec.node_name != node && is_running_and_ready(p))
    })
    .await;
    s.shutdown().await;
}
