//! Kubernetes' DaemonSet e2e scenarios (`test/e2e/apps/daemon_set.go`) on
//! a one-member server in this process with simulated nodes: every node is
//! a real agent (sync loop, status reports, heartbeats, leave) over the
//! in-memory runtime, started by [`Sim`]. Nodes are edited as a user would
//! (read, change, compare-and-swap write), pods' `status.phase` and `Ready`
//! condition are the ones the agents wrote.
//!
//! Scenarios: simple daemon (a deleted pod is revived, status counters),
//! node selector following labels and template changes, required node
//! affinity, taints (NoSchedule, NoExecute, cordon), failed pods replaced
//! with backoff, nodes joining and leaving, invalid manifests refused whole.
//! The process-level ones (SIGKILLed sim, leader failover) are in the root
//! package's `tests/e2e_process.rs`.
//!
//! Every wait polls with a deadline; nothing relies on a fixed sleep. When
//! a test must show that something did *not* happen, it waits for a later
//! controller write that could only have been made after the pass that
//! would have done it (a DaemonSet's status, another DaemonSet's pods).

use drover_agent::{Sim, SimConfig, SimOptions};
use drover_api::Kind;
use drover_api::{
    ConditionStatus, DaemonSet, DaemonSetStatus, Manifest, Node, Pod, PodPhase, Taint, TaintEffect,
};
use drover_testkit::{is_running_and_ready, sim_options, wait_until, TestServer};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Deadline of every wait: generous for a loaded 2-core machine, well
/// under the 30 s a test may take.
const WAIT: Duration = Duration::from_secs(15);

/// How soon the controller must act on a change it can act on at once. It
/// reacts in tens of milliseconds; without the wake-up on a change it would
/// act on its idle pass, up to 1 s later (the pause in
/// `drover-server/src/loops/controller.rs` is at most 1 s): the bound is
/// that second less a 300 ms margin for a loaded 2-core machine.
const REACTION: Duration = Duration::from_millis(700);

/// A server and one sim of `nodes` nodes named `<prefix>0…`, all registered,
/// Ready and connected.
struct Env {
    s: TestServer,
    sim: Option<Sim>,
    _tmp: tempfile::TempDir,
}

impl Env {
    async fn start(nodes: usize, prefix: &str) -> Env {
        Self::start_with(nodes, prefix, |_| {}).await
    }

    async fn start_with(nodes: usize, prefix: &str, tune: impl FnOnce(&mut SimOptions)) -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let s = TestServer::start(&tmp.path().join("server")).await;
        let sim = start_sim(&s, nodes, prefix, tune).await;
        Env {
            s,
            sim: Some(sim),
            _tmp: tmp,
        }
    }

    fn sim(&self) -> &Sim {
        self.sim.as_ref().expect("the sim runs")
    }

    async fn stop(mut self) {
        if let Some(sim) = self.sim.take() {
            let n = sim.len();
            let left = tokio::time::timeout(Duration::from_secs(20), sim.shutdown())
                .await
                .expect("the sim stops in time");
            assert_eq!(left, n, "every node left");
            assert_eq!(self.s.node_count().await, 0);
        }
        self.s.shutdown().await;
    }
}

/// Starts a sim on `s` and waits until its nodes are registered, Ready and
/// connected.
async fn start_sim(
    s: &TestServer,
    nodes: usize,
    prefix: &str,
    tune: impl FnOnce(&mut SimOptions),
) -> Sim {
    let mut o = sim_options(vec![s.addr.clone()], &s.node_token, prefix, nodes);
    tune(&mut o);
    let sim = Sim::start(o).expect("sim starts");
    let names: Vec<String> = sim.names().to_vec();
    wait_until("the sim's nodes Ready", WAIT, || async {
        let mut ok = true;
        for n in &names {
            ok &= s.node(n).await.is_some_and(|n| n.is_ready());
        }
        ok
    })
    .await;
    wait_until("the sim's sessions open", WAIT, || async {
        sim.connected() == nodes
    })
    .await;
    sim
}

fn names(prefix: &str, idx: &[usize]) -> Vec<String> {
    idx.iter().map(|i| format!("{prefix}{i}")).collect()
}

/// A DaemonSet `name` (pods labelled `app: name`) with extra lines for the
/// pod template's spec, indented by six spaces.
fn ds(name: &str, image: &str, template_spec: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {name}
spec:
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
{template_spec}      containers:
      - name: main
        image: \"{image}\"
"
    )
}

async fn get_ds(s: &TestServer, name: &str) -> Option<DaemonSet> {
    match s.objects.get(Kind::DaemonSet, "default", name).await {
        Ok(Manifest::DaemonSet(d)) => Some(*d),
        _ => None,
    }
}

async fn ds_status(s: &TestServer, name: &str) -> DaemonSetStatus {
    get_ds(s, name).await.map(|d| d.status).unwrap_or_default()
}

/// Every pod of the cluster.
async fn all_pods(s: &TestServer) -> Vec<Pod> {
    let (list, _) = s.objects.list(Kind::Pod, None, None).await.expect("list");
    list.into_iter()
        .filter_map(|m| match m {
            Manifest::Pod(p) => Some(*p),
            _ => None,
        })
        .collect()
}

/// The pods of DaemonSet `name` by node; panics if a node has two (never
/// two pods of a DaemonSet on one node).
async fn placement(s: &TestServer, name: &str) -> BTreeMap<String, Pod> {
    let mut out = BTreeMap::new();
    for p in all_pods(s).await {
        if p.metadata.labels.get("app").map(String::as_str) != Some(name) {
            continue;
        }
        let node = p.spec.node_name.clone();
        if let Some(other) = out.insert(node.clone(), p.clone()) {
            panic!(
                "two pods of {name} on node {node}: {} and {}",
                other.metadata.name, p.metadata.name
            );
        }
    }
    out
}

fn keys(m: &BTreeMap<String, Pod>) -> Vec<String> {
    m.keys().cloned().collect()
}

fn uids(m: &BTreeMap<String, Pod>) -> BTreeMap<String, String> {
    m.iter()
        .map(|(n, p)| (n.clone(), p.metadata.uid.clone()))
        .collect()
}

/// Waits until DaemonSet `name` has one pod, Running and Ready, on exactly
/// `nodes`, and answers them.
async fn wait_running_on(s: &TestServer, name: &str, nodes: &[String]) -> BTreeMap<String, Pod> {
    let want: Vec<String> = nodes
        .iter()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let start = Instant::now();
    let last = loop {
        let p = placement(s, name).await;
        if keys(&p) == want && p.values().all(is_running_and_ready) {
            eprintln!(
                "{name}: Running and Ready on {want:?} after {:?}",
                start.elapsed()
            );
            return p;
        }
        if start.elapsed() > WAIT {
            break p;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let seen: Vec<String> = last
        .iter()
        .map(|(n, p)| {
            format!(
                "{n}: {} {:?} ready={}",
                p.metadata.name,
                p.status.phase,
                p.is_ready()
            )
        })
        .collect();
    panic!("timed out waiting for {name} Running and Ready on {want:?}; pods: {seen:?}");
}

/// Reads a node, changes it with `f` and writes it back with
/// compare-and-swap, retrying on a conflict (the agents and the node
/// lifecycle controller write nodes too).
async fn edit_node(s: &TestServer, name: &str, f: impl Fn(&mut Node)) {
    for _ in 0..20 {
        let mut n = s.node(name).await.expect("the node exists");
        f(&mut n);
        match s.objects.update(Manifest::Node(Box::new(n))).await {
            Ok(_) => return,
            Err(drover_server::ApiError::Conflict(_)) => continue,
            Err(e) => panic!("update node {name}: {e}"),
        }
    }
    panic!("node {name} kept changing");
}

async fn label(s: &TestServer, node: &str, key: &str, value: Option<&str>) {
    edit_node(s, node, |n| match value {
        Some(v) => {
            n.metadata.labels.insert(key.into(), v.into());
        }
        None => {
            n.metadata.labels.remove(key);
        }
    })
    .await;
}

async fn taint(s: &TestServer, node: &str, key: &str, value: &str, effect: TaintEffect) {
    edit_node(s, node, |n| {
        n.spec.taints.push(Taint {
            key: key.into(),
            value: value.into(),
            effect: Some(effect.clone()),
            ..Default::default()
        })
    })
    .await;
}

fn has_taint(n: &Node, key: &str, effect: TaintEffect) -> bool {
    n.spec
        .taints
        .iter()
        .any(|t| t.key == key && t.effect.as_ref() == Some(&effect))
}

/// Containers running on node `i` of the sim for pod `uid`.
fn running_containers(sim: &Sim, i: usize, uid: &str) -> usize {
    sim.runtime(i)
        .expect("node index")
        .containers()
        .iter()
        .filter(|c| c.pod_uid == uid && c.state.is_running())
        .count()
}

async fn events_with_reason(s: &TestServer, reason: &str) -> usize {
    let (events, _) = s.objects.list(Kind::Event, None, None).await.unwrap();
    events
        .iter()
        .filter(|e| matches!(e, Manifest::Event(ev) if ev.reason == reason))
        .count()
}

/// "should run and stop simple daemon" and "should verify changes to a
/// daemon set status": one Running and Ready pod per node, the counters
/// agree, and a deleted pod is revived under a new name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simple_daemon_runs_everywhere_and_a_deleted_pod_is_revived() {
    let t0 = Instant::now();
    let env = Env::start(6, "n-").await;
    let s = &env.s;
    let all = names("n-", &[0, 1, 2, 3, 4, 5]);
    s.apply(&ds("simple", "nginx:1.27", "")).await;
    let pods = wait_running_on(s, "simple", &all).await;

    let d = get_ds(s, "simple").await.unwrap();
    for (node, p) in &pods {
        // What the agent wrote.
        assert_eq!(p.status.phase, Some(PodPhase::Running), "{node}");
        let ready = p.condition("Ready").expect("a Ready condition");
        assert_eq!(ready.status, Some(ConditionStatus::True), "{node}");
        assert!(!p.status.pod_ip.is_empty(), "{node}: a pod IP");
        // What the controller wrote.
        assert!(
            p.metadata.name.starts_with("simple-") && p.metadata.name.len() > "simple-".len(),
            "{}",
            p.metadata.name
        );
        let owner = p.metadata.controller_ref().expect("a controller reference");
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("DaemonSet", "simple", d.metadata.uid.as_str())
        );
        assert_eq!(&p.spec.node_name, node);
        for key in [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable",
        ] {
            assert!(
                p.spec
                    .tolerations
                    .iter()
                    .any(|t| t.key == key && t.effect == Some(TaintEffect::NoExecute)),
                "{node}: daemon pods tolerate {key}:NoExecute: {:?}",
                p.spec.tolerations
            );
        }
    }
    for (i, node) in all.iter().enumerate() {
        assert_eq!(
            running_containers(env.sim(), i, &pods[node].metadata.uid),
            1,
            "{node} runs its pod"
        );
    }
    let status_ok = |st: &DaemonSetStatus, n: i32| {
        st.desired_number_scheduled == n
            && st.current_number_scheduled == n
            && st.number_ready == n
            && st.number_available == n
            && st.updated_number_scheduled == n
            && st.number_misscheduled == 0
            && st.number_unavailable == 0
            && st.observed_generation == Some(1)
    };
    wait_until("status 6/6/6/6", WAIT, || async {
        status_ok(&ds_status(s, "simple").await, 6)
    })
    .await;

    // Stop a daemon pod: it is revived, with a new name and uid.
    let victim = pods["n-3"].clone();
    s.objects
        .delete(Kind::Pod, "default", &victim.metadata.name)
        .await
        .expect("delete the pod");
    let t = Instant::now();
    let revived = wait_running_on(s, "simple", &all).await;
    let new = &revived["n-3"];
    assert_ne!(new.metadata.name, victim.metadata.name, "a new name");
    assert_ne!(new.metadata.uid, victim.metadata.uid, "a new pod");
    for node in all.iter().filter(|n| *n != "n-3") {
        assert_eq!(
            revived[node].metadata.uid, pods[node].metadata.uid,
            "{node}'s pod is untouched"
        );
    }
    wait_until(
        "the old container stopped, the new one runs",
        WAIT,
        || async {
            running_containers(env.sim(), 3, &victim.metadata.uid) == 0
                && running_containers(env.sim(), 3, &new.metadata.uid) == 1
        },
    )
    .await;
    wait_until("status back to 6/6/6/6", WAIT, || async {
        status_ok(&ds_status(s, "simple").await, 6)
    })
    .await;
    eprintln!(
        "pod revived and counters back in {:?}; whole test {:?}",
        t.elapsed(),
        t0.elapsed()
    );
    assert!(events_with_reason(s, "SuccessfulCreate").await >= 7);
    env.stop().await;
}

/// "should run and stop complex daemon": a nodeSelector follows the nodes'
/// labels and the DaemonSet's template.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_selector_follows_labels_and_template_changes() {
    let t0 = Instant::now();
    let env = Env::start(5, "c-").await;
    let s = &env.s;
    let blue = ds("color", "nginx", "      nodeSelector: {color: blue}\n");
    s.apply(&blue).await;
    // Initially on no node (the controller has looked: observedGeneration).
    wait_until("color observed, on no node", WAIT, || async {
        let st = ds_status(s, "color").await;
        st.observed_generation == Some(1) && st.desired_number_scheduled == 0
    })
    .await;
    assert!(placement(s, "color").await.is_empty());

    // Label a node blue: it gets a pod.
    label(s, "c-1", "color", Some("blue")).await;
    let pods = wait_running_on(s, "color", &names("c-", &[1])).await;
    let uid = pods["c-1"].metadata.uid.clone();
    assert_eq!(running_containers(env.sim(), 1, &uid), 1);

    // Relabel it green: its pod is deleted and stops.
    label(s, "c-1", "color", Some("green")).await;
    wait_until("the pod of c-1 deleted", WAIT, || async {
        placement(s, "color").await.is_empty()
    })
    .await;
    wait_until("the container on c-1 stopped", WAIT, || async {
        running_containers(env.sim(), 1, &uid) == 0
    })
    .await;

    // The DaemonSet now selects green: placement follows the template.
    label(s, "c-3", "color", Some("green")).await;
    s.apply(&blue.replace("color: blue", "color: green")).await;
    wait_running_on(s, "color", &names("c-", &[1, 3])).await;
    wait_until("status for generation 2", WAIT, || async {
        let st = ds_status(s, "color").await;
        st.observed_generation == Some(2)
            && st.desired_number_scheduled == 2
            && st.number_ready == 2
            && st.number_misscheduled == 0
    })
    .await;

    // A node that loses the label loses the pod; one that gains it gets one.
    label(s, "c-1", "color", None).await;
    label(s, "c-4", "color", Some("green")).await;
    wait_running_on(s, "color", &names("c-", &[3, 4])).await;
    eprintln!("whole test {:?}", t0.elapsed());
    env.stop().await;
}

/// "should run and stop complex daemon with node affinity": required node
/// affinity (terms ORed, expressions ANDed, In and NotIn) places pods on
/// exactly the matching nodes, and follows label changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_node_affinity_places_pods_exactly_on_matching_nodes() {
    let t0 = Instant::now();
    let env = Env::start(7, "a-").await;
    let s = &env.s;
    for (node, labels) in [
        ("a-0", vec![("zone", "a")]),
        ("a-1", vec![("zone", "b")]),
        ("a-2", vec![("zone", "c")]),
        ("a-3", vec![("zone", "a"), ("tier", "core")]),
        ("a-4", vec![("tier", "core")]),
        ("a-5", vec![("zone", "b"), ("tier", "edge")]),
        ("a-6", vec![("zone", "d")]),
    ] {
        for (k, v) in labels {
            label(s, node, k, Some(v)).await;
        }
    }
    let affinity = "      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions:
              - {key: zone, operator: In, values: [a, b]}
              - {key: tier, operator: NotIn, values: [edge]}
            - matchExpressions:
              - {key: zone, operator: In, values: [c]}
";
    s.apply(&ds("affine", "nginx", affinity)).await;
    // zone a|b without tier=edge (a-0, a-1, a-3; NotIn holds without the
    // key), or zone c (a-2). Not a-4 (no zone), a-5 (edge), a-6 (zone d).
    wait_running_on(s, "affine", &names("a-", &[0, 1, 2, 3])).await;
    wait_until("status: 4 desired", WAIT, || async {
        let st = ds_status(s, "affine").await;
        st.desired_number_scheduled == 4 && st.number_ready == 4
    })
    .await;

    // Labels change: a-5 leaves the edge (gets a pod), a-0 leaves the
    // zones (loses it), a-6 moves to zone c (gets one).
    label(s, "a-5", "tier", None).await;
    label(s, "a-0", "zone", Some("x")).await;
    label(s, "a-6", "zone", Some("c")).await;
    wait_running_on(s, "affine", &names("a-", &[1, 2, 3, 5, 6])).await;

    // A label removed from under an In term: unscheduled (the e2e test's
    // last step).
    label(s, "a-2", "zone", None).await;
    wait_running_on(s, "affine", &names("a-", &[1, 3, 5, 6])).await;
    eprintln!("whole test {:?}", t0.elapsed());
    env.stop().await;
}

/// Taints: NoSchedule keeps new pods off unless tolerated and keeps the
/// existing ones; NoExecute evicts; a cordoned node still runs daemon pods
/// and gets those of a new DaemonSet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taints_keep_pods_off_evict_them_and_cordoned_nodes_still_run_daemons() {
    let t0 = Instant::now();
    let env = Env::start(5, "t-").await;
    let s = &env.s;

    // NoSchedule before the DaemonSets exist.
    taint(s, "t-0", "dedicated", "infra", TaintEffect::NoSchedule).await;
    s.apply(&ds("plain", "nginx", "")).await;
    let plain = wait_running_on(s, "plain", &names("t-", &[1, 2, 3, 4])).await;
    wait_until("plain: 4 desired", WAIT, || async {
        ds_status(s, "plain").await.desired_number_scheduled == 4
    })
    .await;
    let tolerant = ds(
        "tolerant",
        "nginx",
        "      tolerations:
      - {key: dedicated, operator: Equal, value: infra, effect: NoSchedule}
",
    );
    s.apply(&tolerant).await;
    let tol = wait_running_on(s, "tolerant", &names("t-", &[0, 1, 2, 3, 4])).await;
    assert!(
        !placement(s, "plain").await.contains_key("t-0"),
        "no untolerated pod on t-0"
    );

    // NoSchedule on a node with pods: they stay (but count as misscheduled
    // for plain, as in Kubernetes).
    taint(s, "t-1", "maintenance", "soon", TaintEffect::NoSchedule).await;
    wait_until("plain: t-1 no longer desired", WAIT, || async {
        let st = ds_status(s, "plain").await;
        st.desired_number_scheduled == 3 && st.number_misscheduled == 1
    })
    .await;
    let now = placement(s, "plain").await;
    assert_eq!(
        now.get("t-1").map(|p| p.metadata.uid.clone()),
        Some(plain["t-1"].metadata.uid.clone()),
        "a NoSchedule taint does not evict"
    );

    // NoExecute: both DaemonSets' pods leave t-2 (neither tolerates it).
    taint(s, "t-2", "evict", "now", TaintEffect::NoExecute).await;
    wait_running_on(s, "plain", &names("t-", &[1, 3, 4])).await;
    wait_running_on(s, "tolerant", &names("t-", &[0, 1, 3, 4])).await;
    wait_until("t-2's containers stopped", WAIT, || async {
        running_containers(env.sim(), 2, &plain["t-2"].metadata.uid) == 0
            && running_containers(env.sim(), 2, &tol["t-2"].metadata.uid) == 0
    })
    .await;

    // Cordon t-3: the controller adds the unschedulable taint; the daemon
    // pods stay, and a new DaemonSet gets a pod there too.
    edit_node(s, "t-3", |n| n.spec.unschedulable = true).await;
    wait_until("t-3 tainted unschedulable", WAIT, || async {
        s.node("t-3").await.is_some_and(|n| {
            has_taint(
                &n,
                "node.kubernetes.io/unschedulable",
                TaintEffect::NoSchedule,
            )
        })
    })
    .await;
    s.apply(&ds("late", "nginx", "")).await;
    // t-0: dedicated, t-1: maintenance (NoSchedule), t-2: NoExecute.
    wait_running_on(s, "late", &names("t-", &[3, 4])).await;
    wait_until("late: 2 desired", WAIT, || async {
        ds_status(s, "late").await.desired_number_scheduled == 2
    })
    .await;
    let plain_now = placement(s, "plain").await;
    let tol_now = placement(s, "tolerant").await;
    for (name, before, now) in [("plain", &plain, &plain_now), ("tolerant", &tol, &tol_now)] {
        assert_eq!(
            now.get("t-3").map(|p| &p.metadata.uid),
            Some(&before["t-3"].metadata.uid),
            "{name}'s pod on the cordoned node stays"
        );
    }
    eprintln!("whole test {:?}", t0.elapsed());
    env.stop().await;
}

/// "should retry creating failed daemon pods": a pod whose phase is set to
/// Failed is deleted and replaced on its node; a further failure there waits
/// for the backoff (1 s, doubling). Crash-looping pods (restartPolicy Always) are the
/// agent's business and are never replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_daemon_pod_is_replaced_with_backoff() {
    let t0 = Instant::now();
    let env = Env::start_with(4, "f-", |o| {
        o.sim = SimConfig {
            crash_after: Duration::from_millis(100),
            ..SimConfig::default()
        };
        o.tuning.restart_backoff = Duration::from_millis(100);
        o.tuning.restart_backoff_max = Duration::from_millis(400);
    })
    .await;
    let s = &env.s;
    let all = names("f-", &[0, 1, 2, 3]);
    s.apply(&ds("fail", "nginx", "")).await;
    let pods = wait_running_on(s, "fail", &all).await;

    let set_failed = |p: Pod| async move {
        let mut status = serde_json::to_value(&p.status).unwrap();
        status["phase"] = "Failed".into();
        s.objects
            .update_status(
                Kind::Pod,
                "default",
                &p.metadata.name,
                &p.metadata.uid,
                status,
            )
            .await
            .expect("update_status");
    };

    // A new pod of `fail` on f-2 (any phase) other than `old`: how long
    // after `since` it was first seen.
    let replacement = |old: Vec<String>, since: Instant| async move {
        loop {
            if let Some(p) = placement(s, "fail").await.get("f-2") {
                if !old.contains(&p.metadata.uid) {
                    return since.elapsed();
                }
            }
            assert!(since.elapsed() < WAIT, "no replacement on f-2");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };

    // First failure: deleted at once and replaced on the next sync (as in
    // Kubernetes: backoff delays deleting further failed pods, never the
    // creation of the replacement).
    let a = pods["f-2"].clone();
    let t_fail = Instant::now();
    set_failed(a.clone()).await;
    wait_until("the failed pod deleted", WAIT, || async {
        s.pod(&a.metadata.name).await.is_none()
    })
    .await;
    let gone = Instant::now();
    let deleted_after = t_fail.elapsed();
    let created_after = replacement(vec![a.metadata.uid.clone()], gone).await;
    let replaced = wait_running_on(s, "fail", &all).await;
    let b = replaced["f-2"].clone();
    assert_ne!(b.metadata.uid, a.metadata.uid);
    eprintln!(
        "failed pod deleted {deleted_after:?} after its failure; the replacement created \
         {created_after:?} after the deletion, Running and Ready {:?} after the failure",
        t_fail.elapsed()
    );
    assert!(
        created_after < REACTION,
        "the replacement of a deleted failed pod came {created_after:?} after the deletion \
         (the controller's next pass should follow its own deletion at once)"
    );
    for n in all.iter().filter(|n| *n != "f-2") {
        assert_eq!(
            replaced[n].metadata.uid, pods[n].metadata.uid,
            "{n} untouched"
        );
    }
    assert!(events_with_reason(s, "FailedDaemonPod").await >= 1);

    // Further failures on the same node: each deletion waits for the
    // backoff, INITIAL_BACKOFF after the first deletion and doubling with
    // each further one. The controller reads its clock for a pass after
    // taking the view that shows the failure, so the backoff of a deletion
    // runs from at or after `failed_at` of that pod (read by this test
    // before it wrote the failure): the next deletion comes at least
    // `delay` after it. That bound is exact, no margin. Without backoff the
    // next deletion would follow its own failure within one reaction, as
    // the first did (`deleted_after`, measured with no backoff): the check
    // proves something only when the next failure comes early enough,
    // `into + deleted_after < delay`. When the machine was too slow for
    // that (the replacement took long to run), the next round has the
    // delay doubled: an informative round is certain long before the
    // waits' deadlines.
    let no_backoff = deleted_after;
    let mut prev_failed_at = t_fail;
    let mut delay = drover_controller::daemon::backoff::INITIAL_BACKOFF;
    let mut current = b;
    let mut gone_uids = vec![a.metadata.uid.clone()];
    for round in 1.. {
        let failed_at = Instant::now();
        let into = failed_at - prev_failed_at;
        let proves = into + no_backoff < delay;
        set_failed(current.clone()).await;
        wait_until("the failed pod deleted again", WAIT, || async {
            s.pod(&current.metadata.name).await.is_none()
        })
        .await;
        let gone = Instant::now();
        let since_prev = gone - prev_failed_at;
        eprintln!(
            "failure {} came {into:?} after the previous one (backoff {delay:?}): deleted \
             {since_prev:?} after it{}",
            round + 1,
            if proves {
                ""
            } else {
                " (too late to show the backoff: another round)"
            }
        );
        assert!(
            since_prev >= delay,
            "failed pod {} went {since_prev:?} after the previous failure: no {delay:?} backoff",
            round + 1
        );
        gone_uids.push(current.metadata.uid.clone());
        let created_after = replacement(gone_uids.clone(), gone).await;
        assert!(
            created_after < REACTION,
            "the replacement came {created_after:?} after the deletion"
        );
        if proves {
            break;
        }
        assert!(
            delay < Duration::from_secs(4),
            "no failure came early enough to show the backoff, up to a {delay:?} one"
        );
        current = wait_running_on(s, "fail", &all).await["f-2"].clone();
        prev_failed_at = failed_at;
        delay *= 2;
    }
    wait_running_on(s, "fail", &all).await;

    // Crash-looping containers: the pods stay (Running phase, not Ready),
    // restarted by the agents, never replaced by the controller.
    s.apply(&ds(
        "crashy",
        "sim/crash:1",
        "      nodeSelector: {kubernetes.io/hostname: f-0}\n",
    ))
    .await;
    let start = Instant::now();
    let mut first_uid: Option<String> = None;
    loop {
        let p = placement(s, "crashy").await;
        if let Some(pod) = p.get("f-0") {
            let uid = first_uid.get_or_insert_with(|| pod.metadata.uid.clone());
            assert_eq!(
                *uid, pod.metadata.uid,
                "a crash-looping pod is not replaced"
            );
            assert_ne!(pod.status.phase, Some(PodPhase::Failed));
            if pod
                .status
                .container_statuses
                .first()
                .is_some_and(|c| c.restart_count >= 2)
            {
                break;
            }
        }
        assert!(start.elapsed() < WAIT, "crashy was not restarted twice");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("crashy restarted twice in place in {:?}", start.elapsed());
    let st = ds_status(s, "crashy").await;
    assert_eq!(
        (st.desired_number_scheduled, st.current_number_scheduled),
        (1, 1)
    );
    eprintln!("whole test {:?}", t0.elapsed());
    env.stop().await;
}

/// Nodes that join get pods (with their labels), nodes that leave
/// gracefully take their Node and their pods with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joining_nodes_get_pods_and_leaving_nodes_take_theirs() {
    let t0 = Instant::now();
    let env = Env::start(3, "j-").await;
    let s = &env.s;
    s.apply(&ds("everywhere", "nginx", "")).await;
    s.apply(&ds("pool-b", "nginx", "      nodeSelector: {pool: b}\n"))
        .await;
    let before = wait_running_on(s, "everywhere", &names("j-", &[0, 1, 2])).await;
    wait_until("pool-b observed", WAIT, || async {
        ds_status(s, "pool-b").await.observed_generation == Some(1)
    })
    .await;
    assert!(placement(s, "pool-b").await.is_empty());

    // A second sim joins with 4 nodes labelled pool=b.
    let t = Instant::now();
    let more = start_sim(s, 4, "k-", |o| {
        o.labels.insert("pool".into(), "b".into());
    })
    .await;
    let mut all = names("j-", &[0, 1, 2]);
    all.extend(names("k-", &[0, 1, 2, 3]));
    wait_running_on(s, "everywhere", &all).await;
    wait_running_on(s, "pool-b", &names("k-", &[0, 1, 2, 3])).await;
    eprintln!(
        "4 joining nodes ran their pods {:?} after the sim started",
        t.elapsed()
    );
    wait_until("everywhere: 7 desired and ready", WAIT, || async {
        let st = ds_status(s, "everywhere").await;
        st.desired_number_scheduled == 7 && st.number_ready == 7
    })
    .await;
    assert_eq!(
        uids(&placement(s, "everywhere").await)
            .into_iter()
            .filter(|(n, _)| n.starts_with("j-"))
            .collect::<BTreeMap<_, _>>(),
        uids(&before),
        "the first nodes' pods are untouched"
    );

    // It leaves gracefully: its Nodes are deleted by the time it returns,
    // and their pods go.
    let t = Instant::now();
    let left = tokio::time::timeout(Duration::from_secs(20), more.shutdown())
        .await
        .expect("the second sim stops in time");
    assert_eq!(left, 4);
    for n in names("k-", &[0, 1, 2, 3]) {
        assert!(s.node(&n).await.is_none(), "{n} is deleted");
    }
    assert_eq!(s.node_count().await, 3);
    wait_until("the leaving nodes' pods gone", WAIT, || async {
        all_pods(s)
            .await
            .iter()
            .all(|p| !p.spec.node_name.starts_with("k-"))
    })
    .await;
    eprintln!("4 nodes left and their pods went in {:?}", t.elapsed());
    assert_eq!(
        uids(&wait_running_on(s, "everywhere", &names("j-", &[0, 1, 2])).await),
        uids(&before)
    );
    wait_until("counters follow", WAIT, || async {
        let (e, b) = (
            ds_status(s, "everywhere").await,
            ds_status(s, "pool-b").await,
        );
        e.desired_number_scheduled == 3
            && e.current_number_scheduled == 3
            && b.desired_number_scheduled == 0
            && b.current_number_scheduled == 0
    })
    .await;
    eprintln!("whole test {:?}", t0.elapsed());
    env.stop().await;
}

/// A manifest stream with one bad document is refused whole, with the
/// field path and the reason, and changes nothing: no object is created or
/// updated and no pod moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_manifests_are_refused_and_change_nothing() {
    let t0 = Instant::now();
    let env = Env::start(3, "v-").await;
    let s = &env.s;
    let all = names("v-", &[0, 1, 2]);
    let keep = ds("keep", "nginx:1.0", "");
    s.apply(&keep).await;
    let pods = wait_running_on(s, "keep", &all).await;
    wait_until("keep's status written", WAIT, || async {
        ds_status(s, "keep").await.number_ready == 3
    })
    .await;
    let stored = get_ds(s, "keep").await.unwrap();

    let mismatched = "apiVersion: apps/v1
kind: DaemonSet
metadata: {name: bad}
spec:
  selector: {matchLabels: {app: one}}
  template:
    metadata: {labels: {app: two}}
    spec:
      containers: [{name: c, image: nginx}]
";
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        (
            "a selector that does not match the template",
            format!(
                "{}---\n{mismatched}---\n{}",
                ds("new-ok", "nginx", ""),
                keep.replace("nginx:1.0", "nginx:2.0")
            ),
            vec!["spec.template.metadata.labels", "does not match"],
        ),
        (
            "a changed (immutable) selector",
            format!(
                "{}---\n{}",
                ds("new-ok", "nginx", ""),
                keep.replace(
                    "matchLabels: {app: keep}",
                    "matchLabels: {app: keep, v: \"2\"}"
                )
                .replace("labels: {app: keep}", "labels: {app: keep, v: \"2\"}")
            ),
            vec!["spec.selector", "field is immutable"],
        ),
        (
            "a document that is not YAML",
            format!("{}---\nkind: [DaemonSet\n", ds("new-ok", "nginx", "")),
            vec![],
        ),
        (
            "bad tolerations, container names and a bad node name",
            format!(
                "{}---\n{}---\napiVersion: v1\nkind: Node\nmetadata: {{name: Bad_Node}}\n",
                ds("new-ok", "nginx", ""),
                ds(
                    "bad-tol",
                    "nginx",
                    "      tolerations:\n      - {key: k, operator: Exists, value: v}\n"
                )
                .replace("name: main", "name: Main_1"),
            ),
            vec!["tolerations[0]", "containers[0].name", "Bad_Node"],
        ),
    ];
    for (what, text, expect) in cases {
        for dry_run in [true, false] {
            let err = s.objects.apply(&text, dry_run).await.expect_err(what);
            // Refused as the request's fault (Invalid or BadRequest).
            assert_eq!(
                err.reason().code(),
                tonic::Code::InvalidArgument,
                "{what}: {err:?}"
            );
            let message = err.to_string();
            for e in &expect {
                assert!(
                    message.contains(e),
                    "{what}: the error names {e:?}: {message}"
                );
            }
            eprintln!(
                "{what} (dry run {dry_run}): {}",
                message.replace('\n', " | ")
            );
        }
    }

    // A valid apply afterwards is the barrier: once its pods run, the
    // controller has seen everything written before, which is nothing.
    s.apply(&ds("after", "nginx", "")).await;
    wait_running_on(s, "after", &all).await;
    let (dss, _) = s.objects.list(Kind::DaemonSet, None, None).await.unwrap();
    let mut ds_names: Vec<&str> = dss.iter().map(|m| m.name()).collect();
    ds_names.sort();
    assert_eq!(
        ds_names,
        ["after", "keep"],
        "no refused DaemonSet was created"
    );
    assert!(s.node("Bad_Node").await.is_none());
    let now = get_ds(s, "keep").await.unwrap();
    assert_eq!(now.metadata.generation, stored.metadata.generation);
    assert_eq!(now.spec, stored.spec, "keep is unchanged");
    assert_eq!(
        uids(&placement(s, "keep").await),
        uids(&pods),
        "keep's pods are untouched"
    );
    let images: BTreeSet<String> = all_pods(s)
        .await
        .iter()
        .flat_map(|p| p.spec.containers.iter().map(|c| c.image.clone()))
        .collect();
    assert!(!images.contains("nginx:2.0"), "{images:?}");
    assert_eq!(all_pods(s).await.len(), 6, "only keep's and after's pods");
    eprintln!("whole test {:?}", t0.elapsed());
    env.stop().await;
}
