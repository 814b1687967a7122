//! Rolling updates end to end, in-process: a one-member server on
//! loopback, simulated nodes (real agents over the in-memory runtime, pods
//! ready 200 ms after they start), and `drover rollout` as the binary runs
//! it. Kubernetes' e2e scenarios (`test/e2e/apps/daemon_set.go`):
//!
//! - RollingUpdate replaces every pod and at no observation more than
//!   maxUnavailable nodes lack a ready pod; `"34%"` of 3 nodes is 2 at once;
//! - OnDelete updates only the pod that is deleted;
//! - a never-ready image stalls at maxUnavailable, `rollout status
//!   --timeout` says so, `rollout undo` brings it back without restarting
//!   the pods never updated and without a third revision;
//! - revisionHistoryLimit 2 after 5 changes keeps at most 3 revisions;
//! - `rollout restart` replaces every pod.
//!
//! Every wait polls with a deadline.

use drover_agent::{Sim, SimOptions};
use drover_api::Kind;
use drover_api::{ControllerRevision, DaemonSet, Manifest, Pod};
use drover_cli::{error_text, rollout, Client};
use drover_server::api::Objects;
use drover_server::Server;
use drover_testkit::{client_of, fast_options, wait_until, TestServer};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);
const NODES: usize = 3;

struct Env {
    server: Server,
    objects: Objects,
    client: Client,
    /// One sim per group of nodes (a group can be killed, as with SIGKILL).
    sims: Vec<Option<Sim>>,
    nodes: usize,
    _tmp: tempfile::TempDir,
}

/// A sim of `nodes` named `prefix…`, keeping its key under `tmp` so that
/// a sim restarted with the same prefix takes its nodes' names back.
fn sim_options(server: &Server, tmp: &std::path::Path, prefix: &str, nodes: usize) -> SimOptions {
    let mut so = drover_testkit::sim_options(
        vec![server.grpc_addr.to_string()],
        &server.identity.node_token,
        prefix,
        nodes,
    );
    so.sim.ready_delay = Duration::from_millis(200);
    so.data_dir = Some(tmp.join(format!("sim-{prefix}")));
    so
}

impl Env {
    /// A server and [`NODES`] sim nodes.
    async fn start() -> Env {
        Env::start_groups(&[("ro", NODES)], None).await
    }

    /// A server (with `node_timeout` when given) and one sim per group
    /// `(prefix, nodes)`.
    async fn start_groups(groups: &[(&str, usize)], node_timeout: Option<Duration>) -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let mut o = fast_options(tmp.path().join("server"));
        if let Some(t) = node_timeout {
            o.controller.node_timeout = t;
        }
        // Returns once the member leads.
        let TestServer {
            server, objects, ..
        } = TestServer::with_options(o, WAIT).await;
        let client = client_of(&server);
        let sims = groups
            .iter()
            .map(|(prefix, n)| {
                Some(Sim::start(sim_options(&server, tmp.path(), prefix, *n)).expect("sim starts"))
            })
            .collect();
        let env = Env {
            server,
            objects,
            client,
            sims,
            nodes: groups.iter().map(|(_, n)| n).sum(),
            _tmp: tmp,
        };
        env.wait_ready_nodes(env.nodes).await;
        env
    }

    async fn wait_ready_nodes(&self, n: usize) {
        wait_until(&format!("{n} nodes Ready"), WAIT, || async {
            self.ready_nodes().await.len() == n
        })
        .await;
    }

    async fn ready_nodes(&self) -> BTreeSet<String> {
        let (list, _) = self.objects.list(Kind::Node, None, None).await.unwrap();
        list.iter()
            .filter_map(|m| match m {
                Manifest::Node(n) if n.is_ready() => Some(n.metadata.name.clone()),
                _ => None,
            })
            .collect()
    }

    async fn stop(mut self) {
        for sim in self.sims.iter_mut().filter_map(Option::take) {
            let _ = tokio::time::timeout(Duration::from_secs(20), sim.shutdown()).await;
        }
        self.server.shutdown().await;
    }

    async fn apply(&self, yaml: &str) {
        self.objects.apply(yaml, false).await.expect("apply");
    }

    async fn pods(&self) -> Vec<Pod> {
        let (list, _) = self.objects.list(Kind::Pod, None, None).await.unwrap();
        list.into_iter()
            .filter_map(|m| match m {
                Manifest::Pod(p) => Some(*p),
                _ => None,
            })
            .collect()
    }

    async fn ds(&self, name: &str) -> DaemonSet {
        match self.objects.get(Kind::DaemonSet, "default", name).await {
            Ok(Manifest::DaemonSet(d)) => *d,
            other => panic!("daemonset {name}: {other:?}"),
        }
    }

    async fn revisions(&self) -> Vec<ControllerRevision> {
        let (list, _) = self
            .objects
            .list(Kind::ControllerRevision, None, None)
            .await
            .unwrap();
        list.into_iter()
            .filter_map(|m| match m {
                Manifest::ControllerRevision(r) => Some(*r),
                _ => None,
            })
            .collect()
    }

    /// Node → names of the pods on it that are ready and not being deleted.
    async fn ready_by_node(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for p in self.pods().await {
            if p.is_ready() && p.metadata.deletion_timestamp.is_none() {
                out.entry(p.spec.node_name.clone())
                    .or_default()
                    .push(p.metadata.name.clone());
            }
        }
        out
    }

    /// Waits for `rollout status` to succeed (the command, with a timeout).
    async fn rolled_out(&self, name: &str) {
        let mut out = Vec::new();
        let r = rollout::status(
            &self.client,
            name,
            "default",
            true,
            Some(WAIT),
            false,
            &mut out,
        )
        .await;
        let text = String::from_utf8_lossy(&out).to_string();
        if let Err(e) = r {
            panic!("rollout status failed: {}\n{text}", error_text(&e));
        }
        assert!(
            text.ends_with(&format!("daemon set \"{name}\" successfully rolled out\n")),
            "{text}"
        );
    }

    /// Pod names, ready or not, not being deleted.
    async fn pod_names(&self) -> BTreeSet<String> {
        self.pods()
            .await
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| p.metadata.name)
            .collect()
    }
}

fn ds_yaml(name: &str, image: &str, strategy: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {name}
spec:
{strategy}  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
      - name: main
        image: \"{image}\"
"
    )
}

fn rolling(max_unavailable: &str) -> String {
    format!("  updateStrategy:\n    type: RollingUpdate\n    rollingUpdate: {{maxUnavailable: {max_unavailable}}}\n")
}

/// Applies `image`, watches until every node runs a ready pod of the new
/// revision, and answers the most nodes seen at once without a ready pod.
async fn roll_and_observe(env: &Env, name: &str, image: &str, strategy: &str) -> usize {
    let before = env.pod_names().await;
    env.apply(&ds_yaml(name, image, strategy)).await;
    let deadline = Instant::now() + WAIT;
    let mut worst = 0;
    loop {
        let ready = env.ready_by_node().await;
        let missing = env.nodes - ready.len();
        worst = worst.max(missing);
        let names: BTreeSet<String> = ready.values().flatten().cloned().collect();
        if ready.len() == env.nodes && names.is_disjoint(&before) {
            let ds = env.ds(name).await;
            if ds.status.updated_number_scheduled == env.nodes as i32
                && ds.status.number_available == env.nodes as i32
                && ds.status.observed_generation == ds.metadata.generation
            {
                return worst;
            }
        }
        assert!(
            Instant::now() < deadline,
            "rollout to {image} did not finish: {ready:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_replaces_every_pod_within_max_unavailable() {
    let env = Env::start().await;
    env.apply(&ds_yaml("ru", "app:1", &rolling("1"))).await;
    env.rolled_out("ru").await;
    let worst = roll_and_observe(&env, "ru", "app:2", &rolling("1")).await;
    assert!(worst <= 1, "{worst} nodes without a ready pod at once");
    let hashes: BTreeSet<String> = env
        .pods()
        .await
        .iter()
        .filter_map(|p| p.metadata.labels.get("controller-revision-hash").cloned())
        .collect();
    assert_eq!(hashes.len(), 1, "every pod on the new revision");
    let revs = env.revisions().await;
    assert_eq!(revs.len(), 2);
    assert_eq!(env.ds("ru").await.metadata.generation, Some(2));
    // "34%" of 3 nodes rounds up to 2 at a time.
    let worst = roll_and_observe(&env, "ru", "app:3", &rolling("\"34%\"")).await;
    assert!(worst <= 2, "{worst} nodes without a ready pod at once");
    assert!(worst == 2, "two nodes were replaced together");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_delete_updates_only_deleted_pods() {
    let env = Env::start().await;
    let on_delete = "  updateStrategy: {type: OnDelete}\n";
    env.apply(&ds_yaml("od", "app:1", on_delete)).await;
    wait_until("3 ready pods", WAIT, || async {
        env.ready_by_node().await.len() == NODES
    })
    .await;
    let before = env.pod_names().await;
    env.apply(&ds_yaml("od", "app:2", on_delete)).await;
    wait_until("the new generation observed", WAIT, || async {
        let d = env.ds("od").await;
        d.status.observed_generation == Some(2)
    })
    .await;
    wait_until("2 revisions", WAIT, || async {
        env.revisions().await.len() == 2
    })
    .await;
    assert_eq!(env.pod_names().await, before, "nothing replaced");
    let mut out = Vec::new();
    let e = rollout::status(&env.client, "od", "default", true, None, false, &mut out)
        .await
        .unwrap_err();
    assert!(error_text(&e).contains("only available for RollingUpdate"));
    let victim = before.iter().next().unwrap().clone();
    env.objects
        .delete(Kind::Pod, "default", &victim)
        .await
        .expect("delete");
    wait_until("the deleted pod replaced", WAIT, || async {
        let names = env.pod_names().await;
        names.len() == NODES && !names.contains(&victim)
    })
    .await;
    let names = env.pod_names().await;
    let kept: BTreeSet<String> = before.iter().filter(|n| **n != victim).cloned().collect();
    assert!(kept.is_subset(&names), "the other pods stay");
    let new_rev = env.ds("od").await.status.updated_number_scheduled;
    wait_until("one updated pod", WAIT, || async {
        env.ds("od").await.status.updated_number_scheduled == 1
    })
    .await;
    let _ = new_rev;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_ready_stalls_and_undo_restores_without_restarts() {
    let env = Env::start().await;
    env.apply(&ds_yaml("nr", "app:1", &rolling("1"))).await;
    env.rolled_out("nr").await;
    let before = env.pod_names().await;
    env.apply(&ds_yaml("nr", "sim/never-ready:1", &rolling("1")))
        .await;
    wait_until("one never-ready pod", WAIT, || async {
        env.ds("nr").await.status.updated_number_scheduled == 1
    })
    .await;
    // Stalled: rollout status times out and says why.
    let mut out = Vec::new();
    let e = rollout::status(
        &env.client,
        "nr",
        "default",
        true,
        Some(Duration::from_secs(2)),
        false,
        &mut out,
    )
    .await
    .unwrap_err();
    let why = error_text(&e);
    assert!(
        why.contains("timed out") && why.contains("not ready"),
        "{why}"
    );
    // On a terminal the same wait is drawn live: counts and the node that
    // holds it, redrawn in place.
    let mut out = Vec::new();
    let _ = rollout::status(
        &env.client,
        "nr",
        "default",
        true,
        Some(Duration::from_millis(1500)),
        true,
        &mut out,
    )
    .await
    .unwrap_err();
    let live = String::from_utf8_lossy(&out);
    assert!(
        live.contains("  nodes: 3 desired, 1 updated")
            && live.contains("  waiting on ro")
            && live.contains("not ready")
            && live.contains("\x1b[3A\r\x1b[J"),
        "{live:?}"
    );
    // `describe ds` says where the rollout is and what it waits for.
    let mut out = Vec::new();
    drover_cli::kubectl::describe(&env.client, "ds", &["nr".to_owned()], None, &mut out)
        .await
        .expect("describe");
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.contains("Rollout:") && text.contains("1 of 3 scheduled nodes updated"),
        "{text}"
    );
    assert!(
        text.contains("Waiting for") && text.contains("replaced in turn"),
        "{text}"
    );
    let names = env.pod_names().await;
    let untouched: BTreeSet<String> = before.intersection(&names).cloned().collect();
    assert_eq!(
        untouched.len(),
        NODES - 1,
        "the rollout stopped at one node"
    );
    assert_eq!(env.ds("nr").await.status.updated_number_scheduled, 1);

    let mut out = Vec::new();
    rollout::undo(&env.client, "nr", "default", None, &mut out)
        .await
        .expect("undo");
    assert_eq!(
        String::from_utf8_lossy(&out),
        "daemonset.apps/nr rolled back\n"
    );
    env.rolled_out("nr").await;
    let after = env.pod_names().await;
    assert!(
        untouched.is_subset(&after),
        "pods never updated kept: {untouched:?} {after:?}"
    );
    let revs = env.revisions().await;
    assert_eq!(revs.len(), 2, "no third revision");
    assert_eq!(revs.iter().map(|r| r.revision).max(), Some(3));
    // Undo again to a revision that does not exist.
    let e = rollout::undo(&env.client, "nr", "default", Some(7), &mut Vec::new())
        .await
        .unwrap_err();
    assert_eq!(
        error_text(&e),
        "error: unable to find specified revision 7 in history"
    );
    let mut out = Vec::new();
    rollout::history_cmd(&env.client, "nr", "default", None, &mut out)
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.contains("REVISION") && text.contains("CHANGE-CAUSE"),
        "{text}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_limit_prunes_old_revisions_and_restart_replaces_every_pod() {
    let env = Env::start().await;
    let strategy = format!("  revisionHistoryLimit: 2\n{}", rolling("\"100%\""));
    for i in 1..=5 {
        env.apply(&ds_yaml("hl", &format!("app:{i}"), &strategy))
            .await;
        env.rolled_out("hl").await;
    }
    wait_until("at most 3 revisions", WAIT, || async {
        env.revisions().await.len() <= 3
    })
    .await;
    let e = rollout::history_cmd(&env.client, "hl", "default", Some(1), &mut Vec::new())
        .await
        .unwrap_err();
    assert_eq!(
        error_text(&e),
        "error: unable to find the specified revision"
    );
    let mut out = Vec::new();
    rollout::history_cmd(&env.client, "hl", "default", Some(5), &mut out)
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.contains("with revision #5") && text.contains("app:5"),
        "{text}"
    );

    let before = env.pod_names().await;
    let mut out = Vec::new();
    rollout::restart(&env.client, "hl", "default", &mut out)
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out),
        "daemonset.apps/hl restarted\n"
    );
    env.rolled_out("hl").await;
    wait_until("every pod replaced", WAIT, || async {
        let names = env.pod_names().await;
        names.len() == NODES && names.is_disjoint(&before)
    })
    .await;
    env.stop().await;
}

/// Node → the pods on it that are not being deleted.
fn by_node(pods: &[Pod]) -> BTreeMap<String, Vec<&Pod>> {
    let mut out: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    for p in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        out.entry(p.spec.node_name.clone()).or_default().push(p);
    }
    out
}

fn image_of(p: &Pod) -> &str {
    p.spec.containers.first().map_or("", |c| c.image.as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_nodes_do_not_hold_the_rollout_and_are_updated_when_back() {
    // 10 nodes: 8 in one sim, 2 in another that is killed (no Leave, the
    // sessions cut, as with SIGKILL); the node timeout is 3 s (three
    // heartbeats: a loaded machine must not make live nodes flap).
    let mut env =
        Env::start_groups(&[("live", 8), ("dead", 2)], Some(Duration::from_secs(3))).await;
    env.apply(&ds_yaml("dn", "app:1", &rolling("1"))).await;
    // Every node runs a ready pod (the status alone could be computed
    // before the controller saw the last nodes join).
    wait_until("10 ready pods", WAIT, || async {
        env.ready_by_node().await.len() == 10
    })
    .await;
    env.rolled_out("dn").await;
    let on_dead: BTreeSet<String> = env
        .pods()
        .await
        .into_iter()
        .filter(|p| p.spec.node_name.starts_with("dead"))
        .map(|p| p.metadata.name)
        .collect();
    assert_eq!(on_dead.len(), 2);

    if let Some(sim) = env.sims[1].take() {
        sim.kill();
    }
    let live: BTreeSet<String> = (0..8).map(|i| format!("live{i}")).collect();
    wait_until("exactly the live nodes Ready", WAIT, || async {
        env.ready_nodes().await == live
    })
    .await;
    env.apply(&ds_yaml("dn", "app:2", &rolling("1"))).await;

    // The 8 Ready nodes are updated one at a time; the dead nodes keep
    // their pods (not deleted, not counted as unavailable by the rollout).
    let deadline = Instant::now() + WAIT;
    loop {
        let pods = env.pods().await;
        let nodes = by_node(&pods);
        let updated_live = nodes
            .iter()
            .filter(|(n, ps)| {
                n.starts_with("live")
                    && ps.len() == 1
                    && image_of(ps[0]) == "app:2"
                    && ps[0].is_ready()
            })
            .count();
        let live_without_ready = (0..8)
            .filter(|i| {
                nodes
                    .get(&format!("live{i}"))
                    .is_none_or(|ps| !ps.iter().any(|p| p.is_ready()))
            })
            .count();
        assert!(
            live_without_ready <= 1,
            "{live_without_ready} live nodes without a ready pod at once"
        );
        let dead_names: BTreeSet<String> = pods
            .iter()
            .filter(|p| p.spec.node_name.starts_with("dead"))
            .map(|p| p.metadata.name.clone())
            .collect();
        assert_eq!(dead_names, on_dead, "the dead nodes' pods are kept");
        if updated_live == 8 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the 8 live nodes were not updated: {nodes:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // `rollout status` is not held by the dead nodes, and names them.
    let mut out = Vec::new();
    rollout::status(
        &env.client,
        "dn",
        "default",
        true,
        Some(WAIT),
        false,
        &mut out,
    )
    .await
    .expect("rolled out on the Ready nodes");
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.contains("successfully rolled out")
            && text.contains("2 node(s) not Ready still run an older revision and are updated when they are back: dead0, dead1"),
        "{text}"
    );

    // The dead nodes come back: they are updated and the rollout completes.
    env.sims[1] = Some(
        Sim::start(sim_options(&env.server, env._tmp.path(), "dead", 2)).expect("sim restarts"),
    );
    env.wait_ready_nodes(10).await;
    wait_until("every node on the new revision", WAIT, || async {
        let pods = env.pods().await;
        let nodes = by_node(&pods);
        nodes.len() == 10
            && nodes
                .values()
                .all(|ps| ps.len() == 1 && image_of(ps[0]) == "app:2" && ps[0].is_ready())
    })
    .await;
    wait_until("the status counts 10 updated", WAIT, || async {
        let s = env.ds("dn").await.status;
        s.desired_number_scheduled == 10 && s.updated_number_scheduled == 10
    })
    .await;
    env.rolled_out("dn").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn surge_keeps_its_invariants_while_pods_are_deleted_and_crash() {
    const N: usize = 10;
    let env = Env::start_groups(&[("su", N)], None).await;
    let surge =
        "  updateStrategy:\n    type: RollingUpdate\n    rollingUpdate: {maxUnavailable: 0, maxSurge: \"20%\"}\n";
    env.apply(&ds_yaml("su", "app:1", surge)).await;
    wait_until("a ready pod on every node", WAIT, || async {
        env.ready_by_node().await.len() == N
    })
    .await;
    env.rolled_out("su").await;
    env.apply(&ds_yaml("su", "app:2", surge)).await;

    // A fixed-seed xorshift picks what to disturb: deterministic runs.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let sim = env.sims[0].as_ref().expect("sim");
    // Nodes whose pods the test deleted or crashed: only those may lack a
    // ready pod (maxUnavailable 0: the rollout itself never takes one away).
    let mut disturbed: BTreeSet<String> = BTreeSet::new();
    let mut observations = 0u64;
    let mut most_surging = 0;
    let deadline = Instant::now() + WAIT;
    loop {
        let pods = env.pods().await;
        let nodes = by_node(&pods);
        observations += 1;
        let mut surging = 0;
        for i in 0..N {
            let node = format!("su{i}");
            let ps = nodes.get(&node).cloned().unwrap_or_default();
            assert!(ps.len() <= 2, "{node} runs {} pods: {ps:?}", ps.len());
            let new = ps.iter().filter(|p| image_of(p) == "app:2").count();
            assert!(new <= 1, "{node} runs {new} new pods");
            if ps.len() == 2 {
                surging += 1;
            }
            if !ps.iter().any(|p| p.is_ready()) {
                assert!(
                    disturbed.contains(&node),
                    "{node} lost its ready pod to the rollout (observation {observations})"
                );
            }
        }
        most_surging = most_surging.max(surging);
        // Every 7th observation, up to 6 times: delete a pod or crash one.
        if observations.is_multiple_of(7) && disturbed.len() < 6 {
            let i = (next() % N as u64) as usize;
            let node = format!("su{i}");
            if let Some(ps) = nodes.get(&node) {
                let victim = ps[(next() % ps.len() as u64) as usize];
                if next() % 2 == 0 {
                    let _ = env
                        .objects
                        .delete(Kind::Pod, "default", &victim.metadata.name)
                        .await;
                } else if let Some(rt) = sim.runtime(i) {
                    rt.kill(&victim.metadata.uid, "main", 1);
                }
                disturbed.insert(node);
            }
        }
        let done = nodes.len() == N
            && nodes
                .values()
                .all(|ps| ps.len() == 1 && image_of(ps[0]) == "app:2" && ps[0].is_ready());
        if done {
            let ds = env.ds("su").await;
            if ds.status.updated_number_scheduled == N as i32
                && ds.status.number_available == N as i32
            {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the surge rollout did not finish: {nodes:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(most_surging >= 1, "the rollout surged");
    assert!(!disturbed.is_empty(), "the test disturbed the rollout");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_rollback_returns_to_the_previous_revision() {
    let env = Env::start().await;
    let yaml = |image: &str| {
        ds_yaml("ar", image, &rolling("1")).replace(
            "metadata:\n  name: ar\n",
            "metadata:\n  name: ar\n  annotations:\n    rollout.drover.io/auto-rollback-after: \"1s\"\n",
        )
    };
    env.apply(&yaml("app:1")).await;
    env.rolled_out("ar").await;
    let before = env.pod_names().await;
    env.apply(&yaml("sim/never-ready:1")).await;
    wait_until("the automatic rollback", WAIT, || async {
        let ds = env.ds("ar").await;
        ds.spec.template.spec.containers[0].image == "app:1"
            && ds
                .metadata
                .annotations
                .contains_key("rollout.drover.io/rolled-back-from")
    })
    .await;
    env.rolled_out("ar").await;
    let after = env.pod_names().await;
    assert_eq!(
        before.intersection(&after).count(),
        NODES - 1,
        "the pods never updated were not restarted: {before:?} {after:?}"
    );
    let revs = env.revisions().await;
    assert_eq!(revs.len(), 2, "no third revision");
    let (events, _) = env.objects.list(Kind::Event, None, None).await.unwrap();
    let rolled_back = events.iter().find_map(|m| match m {
        Manifest::Event(e) if e.reason == "AutoRollback" => Some(e.message.clone()),
        _ => None,
    });
    let message = rolled_back.expect("an AutoRollback event");
    assert!(
        message.contains("not available after 1s on 1 node(s)")
            && message.contains("rolled back to revision 1"),
        "{message}"
    );
    env.stop().await;
}
