//! The scheduler on the leader (`loops/scheduler.rs`), with simulated
//! nodes (4 CPUs, 8 GiB, 110 pods each) of a server in this process:
//! bare pods without `spec.nodeName` are bound and run; seed 10's pods
//! (required hostname anti-affinity, worker nodes only) land one per
//! worker and the rest wait with kube-scheduler's message and one
//! `FailedScheduling` event, until a node labelled a worker takes one
//! within a second; requests, cordons and taints are respected; a bind is
//! a compare-and-swap that a stale reader loses; and a new leader binds
//! what the old one left pending, once.

use drover_agent::Sim;
use drover_api::{ConditionStatus, Kind, Manifest, Node, Pod};
use drover_server::api::batch::{Write, Written};
use drover_server::api::Objects;
use drover_testkit::{client, is_running_and_ready, sim_options, wait_for, wait_until, TestServer};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);

/// A one-member server and `n` sim nodes `<prefix>0…`, all Ready.
async fn cluster(tmp: &std::path::Path, prefix: &str, n: usize) -> (TestServer, Sim) {
    let s = TestServer::start(&tmp.join("server")).await;
    let sim = Sim::start(sim_options(vec![s.addr.clone()], &s.node_token, prefix, n)).expect("sim");
    drover_testkit::wait_nodes_ready(&s.objects, prefix, n, WAIT).await;
    (s, sim)
}

async fn pods(objects: &Objects) -> Vec<Pod> {
    let (list, _) = objects
        .list(Kind::Pod, None, None)
        .await
        .unwrap_or_default();
    list.into_iter()
        .filter_map(|m| match m {
            Manifest::Pod(p) => Some(*p),
            _ => None,
        })
        .collect()
}

/// Each pod of `app` and its node (empty: unbound).
async fn placement(objects: &Objects, app: &str) -> BTreeMap<String, String> {
    pods(objects)
        .await
        .into_iter()
        .filter(|p| p.metadata.labels.get("app").map(String::as_str) == Some(app))
        .map(|p| (p.metadata.name.clone(), p.spec.node_name.clone()))
        .collect()
}

/// The message of the pod's `PodScheduled=False`, `Unschedulable`
/// condition, if it waits so.
fn waiting_message(p: &Pod) -> Option<String> {
    p.status
        .conditions
        .iter()
        .find(|c| {
            c.r#type == "PodScheduled"
                && c.status == Some(ConditionStatus::False)
                && c.reason == "Unschedulable"
        })
        .filter(|_| p.spec.node_name.is_empty())
        .map(|c| c.message.clone())
}

/// The events with `reason` about each pod (by pod name).
async fn events(objects: &Objects, reason: &str) -> BTreeMap<String, Vec<String>> {
    let (list, _) = objects
        .list(Kind::Event, None, None)
        .await
        .unwrap_or_default();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in list {
        if let Manifest::Event(e) = m {
            if e.reason == reason && e.involved_object.kind == "Pod" {
                out.entry(e.involved_object.name.clone())
                    .or_default()
                    .push(e.message.clone());
            }
        }
    }
    out
}

/// Changes the Node `name` (read, change, compare-and-swap; again on a
/// conflict).
async fn change_node(objects: &Objects, name: &str, f: impl Fn(&mut Node)) {
    for _ in 0..20 {
        let Ok(Manifest::Node(mut n)) = objects.get(Kind::Node, "", name).await else {
            panic!("no node {name}");
        };
        f(&mut n);
        if objects.update(Manifest::Node(n)).await.is_ok() {
            return;
        }
    }
    panic!("node {name} could not be changed");
}

fn bare_pod(name: &str, app: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{app: {app}}}\nspec:\n{extra_spec}  containers:\n  - {{name: main, image: busybox}}\n"
    )
}

fn requesting(cpu: &str) -> String {
    format!("  containers:\n  - name: main\n    image: busybox\n    resources: {{requests: {{cpu: \"{cpu}\"}}}}\n")
}

fn cpu_pod(name: &str, cpu: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{app: cpu}}\nspec:\n{}",
        requesting(cpu)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_pod_and_seed_08_are_bound_and_run_on_a_sim_node() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, _sim) = cluster(tmp.path(), "bare-", 2).await;
    s.apply(&bare_pod("web", "web", "")).await;
    s.apply(include_str!(
        "../../drover-api/tests/data/08-static-pod.yaml"
    ))
    .await;
    for name in ["web", "static-example"] {
        let p = wait_for(
            &format!("{name} bound and Running"),
            WAIT,
            Duration::from_millis(20),
            || async {
                s.pod(name)
                    .await
                    .filter(|p| !p.spec.node_name.is_empty() && is_running_and_ready(p))
            },
        )
        .await;
        assert!(p.spec.node_name.starts_with("bare-"), "{name}: {p:?}");
        let scheduled = p
            .status
            .conditions
            .iter()
            .find(|c| c.r#type == "PodScheduled")
            .expect("PodScheduled");
        assert_eq!(scheduled.status, Some(ConditionStatus::True));
        let e = wait_for(
            "the Scheduled event",
            WAIT,
            Duration::from_millis(20),
            || async { events(&s.objects, "Scheduled").await.remove(name) },
        )
        .await;
        assert_eq!(
            e,
            [format!(
                "Successfully assigned default/{name} to {}",
                p.spec.node_name
            )]
        );
    }
    // A pod for another scheduler is left alone.
    s.apply(&bare_pod("mine", "mine", "  schedulerName: my-scheduler\n"))
        .await;
    s.apply(&bare_pod("after", "after", "")).await;
    wait_until("a later pod bound", WAIT, || async {
        s.pod("after")
            .await
            .is_some_and(|p| !p.spec.node_name.is_empty())
    })
    .await;
    let mine = s.pod("mine").await.expect("mine");
    assert!(mine.spec.node_name.is_empty(), "{mine:?}");
    assert!(mine.status.conditions.is_empty(), "{mine:?}");
}

/// Seed 10 as bare pods: the Deployment's template, six times.
fn seed_10_pod(i: usize) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: agent-{i}
  labels: {{app: distributed-agent}}
spec:
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector:
          matchExpressions:
          - {{key: app, operator: In, values: [distributed-agent]}}
        topologyKey: "kubernetes.io/hostname"
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {{key: node-type, operator: In, values: [worker]}}
  containers:
  - name: agent
    image: busybox:latest
    command: ["sh", "-c", "sleep 3600"]
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_10_lands_one_per_worker_and_a_new_worker_takes_a_waiting_pod_within_a_second() {
    let all: Vec<String> = (0..6).map(seed_10_pod).collect();
    seed_10_over_six_nodes(&all.join("---\n")).await;
}

/// Seed 10 itself, unchanged: its Deployment of 6 replicas with required
/// hostname anti-affinity, over 4 workers and 2 other nodes.
#[tokio::test]
async fn seed_10_as_its_deployment_runs_one_pod_per_worker_and_two_wait() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../drover-api/tests/data/10-deployment-antiaffinity.yaml");
    let seed = std::fs::read_to_string(&path).expect("seed 10");
    seed_10_over_six_nodes(&seed).await;
}

/// Applies `manifests` (six pods of seed 10's template, bare or through
/// its Deployment) over 6 sim nodes of which 4 are workers: one pod per
/// worker, two waiting with kube-scheduler's message and one
/// FailedScheduling event each; a fifth worker takes one within a second.
async fn seed_10_over_six_nodes(manifests: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let (s, _sim) = cluster(tmp.path(), "w-", 6).await;
    for i in 0..4 {
        change_node(&s.objects, &format!("w-{i}"), |n| {
            n.metadata
                .labels
                .insert("node-type".into(), "worker".into());
        })
        .await;
    }
    s.apply(manifests).await;
    const MESSAGE: &str = "0/6 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 4 node(s) didn't match pod anti-affinity rules.";
    let waiting = wait_for(
        "four bound, two waiting",
        WAIT,
        Duration::from_millis(20),
        || async {
            let ps = pods(&s.objects).await;
            let mut bound: Vec<String> = ps
                .iter()
                .filter(|p| !p.spec.node_name.is_empty())
                .map(|p| p.spec.node_name.clone())
                .collect();
            bound.sort();
            let waiting: Vec<(String, String)> = ps
                .iter()
                .filter_map(|p| waiting_message(p).map(|m| (p.metadata.name.clone(), m)))
                .collect();
            (bound == ["w-0", "w-1", "w-2", "w-3"] && waiting.len() == 2).then_some(waiting)
        },
    )
    .await;
    for (name, message) in &waiting {
        assert_eq!(message, MESSAGE, "{name}");
    }
    // The bound pods run, which changes them many times: the waiting ones
    // still have one FailedScheduling event each.
    wait_until("the four Running", WAIT, || async {
        pods(&s.objects)
            .await
            .iter()
            .filter(|p| is_running_and_ready(p))
            .count()
            == 4
    })
    .await;
    let failed = wait_for(
        "the FailedScheduling events",
        WAIT,
        Duration::from_millis(20),
        || async {
            let e = events(&s.objects, "FailedScheduling").await;
            (e.len() == 2).then_some(e)
        },
    )
    .await;
    for (name, _) in &waiting {
        assert_eq!(failed[name], [MESSAGE], "{name}");
    }
    // A fifth worker: one of the two is bound there within a second.
    let t = Instant::now();
    change_node(&s.objects, "w-4", |n| {
        n.metadata
            .labels
            .insert("node-type".into(), "worker".into());
    })
    .await;
    wait_until_fast("a waiting pod bound to w-4", || async {
        placement(&s.objects, "distributed-agent")
            .await
            .values()
            .any(|n| n == "w-4")
    })
    .await;
    let took = t.elapsed();
    println!("labelled to bound: {took:?}");
    assert!(took < Duration::from_secs(1), "took {took:?}");
    let last = s
        .pods(None)
        .await
        .into_iter()
        .find(|p| p.spec.node_name.is_empty())
        .expect("one still waits");
    assert_eq!(
        waiting_message(&last).as_deref(),
        Some("0/6 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 5 node(s) didn't match pod anti-affinity rules.")
    );
}

/// Polls every 5 ms for up to [`WAIT`].
async fn wait_until_fast<F, Fut>(what: &str, f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    drover_testkit::wait_until_every(what, WAIT, Duration::from_millis(5), f).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_count_and_a_deleted_pod_makes_room_for_a_waiting_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, _sim) = cluster(tmp.path(), "cpu-", 1).await;
    // More than any node has.
    s.apply(&cpu_pod("huge", "5")).await;
    s.apply(&cpu_pod("a", "3")).await;
    wait_until("a bound", WAIT, || async {
        s.pod("a")
            .await
            .is_some_and(|p| p.spec.node_name == "cpu-0")
    })
    .await;
    s.apply(&cpu_pod("b", "3")).await;
    for name in ["huge", "b"] {
        let m = wait_for(
            &format!("{name} unschedulable"),
            WAIT,
            Duration::from_millis(20),
            || async { s.pod(name).await.and_then(|p| waiting_message(&p)) },
        )
        .await;
        assert_eq!(m, "0/1 nodes are available: 1 Insufficient cpu.", "{name}");
    }
    s.objects
        .delete(Kind::Pod, "default", "a")
        .await
        .expect("delete a");
    wait_until("b bound once a is gone", WAIT, || async {
        s.pod("b")
            .await
            .is_some_and(|p| p.spec.node_name == "cpu-0")
    })
    .await;
    let huge = s.pod("huge").await.expect("huge");
    assert!(huge.spec.node_name.is_empty(), "{huge:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cordoned_node_and_an_untolerated_taint_get_no_pods() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, _sim) = cluster(tmp.path(), "t-", 3).await;
    change_node(&s.objects, "t-0", |n| n.spec.unschedulable = true).await;
    change_node(&s.objects, "t-1", |n| {
        n.spec.taints.push(drover_api::Taint {
            key: "dedicated".into(),
            value: "gpu".into(),
            effect: Some(drover_api::TaintEffect::NoSchedule),
            ..Default::default()
        })
    })
    .await;
    let many: Vec<String> = (0..8)
        .map(|i| bare_pod(&format!("p{i}"), "spread", ""))
        .collect();
    s.apply(&many.join("---\n")).await;
    wait_until("all eight bound", WAIT, || async {
        placement(&s.objects, "spread")
            .await
            .values()
            .all(|n| !n.is_empty())
            && placement(&s.objects, "spread").await.len() == 8
    })
    .await;
    let nodes: Vec<String> = placement(&s.objects, "spread")
        .await
        .into_values()
        .collect();
    assert!(nodes.iter().all(|n| n == "t-2"), "{nodes:?}");
    // One that tolerates the taint goes to t-1 when it asks for it.
    s.apply(&bare_pod(
        "tolerant",
        "tolerant",
        "  tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]\n  nodeSelector: {kubernetes.io/hostname: t-1}\n",
    ))
    .await;
    wait_until("the tolerant pod on t-1", WAIT, || async {
        s.pod("tolerant")
            .await
            .is_some_and(|p| p.spec.node_name == "t-1")
    })
    .await;
    // And one that does not tolerate it, pinned there, waits saying why.
    s.apply(&bare_pod(
        "intolerant",
        "intolerant",
        "  nodeSelector: {kubernetes.io/hostname: t-1}\n",
    ))
    .await;
    let m = wait_for(
        "the intolerant pod waits",
        WAIT,
        Duration::from_millis(20),
        || async { s.pod("intolerant").await.and_then(|p| waiting_message(&p)) },
    )
    .await;
    assert_eq!(
        m,
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) were unschedulable."
    );
}

/// A bind is a compare-and-swap on the version read: of two schedulers
/// that read the same pod, or a pass retried on a stale view, one wins
/// and the other is refused with a conflict; the pod is bound once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_reader_cannot_bind_a_pod_twice() {
    let tmp = tempfile::tempdir().unwrap();
    // No nodes: the scheduler leaves the pod unbound, as two rival
    // schedulers would read it.
    let s = TestServer::start(&tmp.path().join("server")).await;
    s.apply(&bare_pod("race", "race", "")).await;
    let read = wait_for("the pod", WAIT, Duration::from_millis(20), || async {
        s.pod("race").await.filter(|p| waiting_message(p).is_some())
    })
    .await;
    assert_eq!(
        waiting_message(&read).as_deref(),
        Some("no nodes available to schedule pods")
    );
    let bind = |node: &str| {
        let mut p = read.clone();
        p.spec.node_name = node.into();
        Write::Update(Manifest::Pod(Box::new(p)))
    };
    // Both in one batch (one falls back to one by one) and one after.
    let r = s.objects.execute(vec![bind("n1"), bind("n2")]).await;
    let won: Vec<bool> = r.iter().map(Result::is_ok).collect();
    assert_eq!(won.iter().filter(|w| **w).count(), 1, "{r:?}");
    let again = s.objects.execute(vec![bind("n3")]).await;
    assert!(
        matches!(&again[0], Err(drover_server::error::ApiError::Conflict(_))),
        "{again:?}"
    );
    let winner = if won[0] { "n1" } else { "n2" };
    match &r[usize::from(!won[0])] {
        Ok(Written::Updated(Manifest::Pod(p))) => assert_eq!(p.spec.node_name, winner),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.pod("race").await.expect("race").spec.node_name, winner);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_leader_binds_what_the_old_one_left_pending_once() {
    let tmp = tempfile::tempdir().unwrap();
    let drover_testkit::Voters {
        mut servers,
        addrs,
        ca,
        admin_token: admin,
        node_token,
    } = drover_testkit::start_voters(tmp.path(), 3, WAIT).await;
    let _sim = Sim::start(sim_options(addrs.clone(), &node_token, "lf-", 3)).expect("sim");
    drover_testkit::wait_nodes_ready(&servers[0].objects(), "lf-", 3, WAIT).await;
    // Pods that fit nowhere yet (no node is labelled for them).
    let many: Vec<String> = (0..10)
        .map(|i| bare_pod(&format!("p{i}"), "lf", "  nodeSelector: {tier: gold}\n"))
        .collect();
    let c = client(addrs.clone(), &admin, &ca);
    c.apply(&many.join("---\n"), false).await.expect("apply");
    let o = servers[0].objects();
    wait_until("ten pods waiting", WAIT, || async {
        pods(&o)
            .await
            .iter()
            .filter(|p| waiting_message(p).is_some())
            .count()
            == 10
    })
    .await;
    // The leader goes; through the survivors, the nodes are labelled.
    let leader = servers
        .iter()
        .position(|s| s.store.leader().is_leader)
        .expect("a leader");
    let mut old = servers.remove(leader);
    old.shutdown().await;
    let o = servers[0].objects();
    for i in 0..3 {
        change_node(&o, &format!("lf-{i}"), |n| {
            n.metadata.labels.insert("tier".into(), "gold".into());
        })
        .await;
    }
    wait_until("every pod bound by the new leader", WAIT, || async {
        let ps = placement(&o, "lf").await;
        ps.len() == 10 && ps.values().all(|n| !n.is_empty())
    })
    .await;
    let scheduled = wait_for(
        "one Scheduled event each",
        WAIT,
        Duration::from_millis(20),
        || async {
            let e = events(&o, "Scheduled").await;
            (e.len() == 10).then_some(e)
        },
    )
    .await;
    let placed = placement(&o, "lf").await;
    for (name, messages) in scheduled {
        assert_eq!(
            messages,
            [format!(
                "Successfully assigned default/{name} to {}",
                placed[&name]
            )],
            "{name} bound once"
        );
    }
    for mut s in servers {
        s.shutdown().await;
    }
}

/// A client certificate of `role` for `name` and its key (PEM).
async fn certificate(s: &TestServer, role: &str, name: &str) -> (String, String) {
    let cred = drover_pki::Credential::generate(role).expect("a key");
    let r = s
        .client()
        .issue_client(drover_proto::v1::IssueClientRequest {
            name: name.into(),
            role: role.into(),
            ttl_seconds: 3600,
            csr: cred.csr_pem.clone(),
        })
        .await
        .expect("issue a certificate");
    (r.cert, cred.key_pem)
}

/// POSTs a Binding of the pod `hand` to `n1`: the status code and body.
async fn post_binding(
    http: &str,
    ca: &str,
    token: Option<&str>,
    identity: Option<(&str, &str)>,
) -> (u16, String) {
    let body = br#"{"apiVersion":"v1","kind":"Binding","metadata":{"name":"hand"},"target":{"apiVersion":"v1","kind":"Node","name":"n1"}}"#;
    let r = drover_testkit::HttpsRequest {
        method: "POST",
        path: "/api/v1/namespaces/default/pods/hand/binding",
        token,
        identity,
        body: Some(("application/json", &body[..])),
        headers: &[],
    };
    tokio::time::timeout(WAIT, drover_testkit::https(http, ca, r))
        .await
        .expect("an answer in time")
        .expect("an answer")
}

/// `pods/binding` binds an unbound pod for the admin, once: a second
/// binding is 409 in the API server's words; a viewer, metrics or node
/// certificate is refused (403), no credential 401, and nothing is bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_binding_binds_once_and_only_for_the_admin() {
    let tmp = tempfile::tempdir().unwrap();
    // A selector no node matches: the scheduler leaves the pod unbound
    // (a binding, as the API server's, does not check it).
    let s = TestServer::start(&tmp.path().join("server")).await;
    s.apply(&bare_pod("hand", "hand", "  nodeSelector: {by: hand}\n"))
        .await;
    let http = s.server.http_addr.to_string();
    let post = |token, identity| post_binding(&http, &s.ca, token, identity);
    let (viewer_cert, viewer_key) = certificate(&s, "viewer", "v1").await;
    let (metrics_cert, metrics_key) = certificate(&s, "metrics", "m1").await;
    let (node_cert, node_key) =
        drover_testkit::node_certificate(&s.addr, &s.ca, &s.node_token, "n1").await;
    for (who, cert, key) in [
        ("viewer", &viewer_cert, &viewer_key),
        ("metrics", &metrics_cert, &metrics_key),
        ("node", &node_cert, &node_key),
    ] {
        let (code, text) = post(None, Some((cert.as_str(), key.as_str()))).await;
        assert_eq!(code, 403, "{who}: {text}");
    }
    let (code, text) = post(None, None).await;
    assert_eq!(code, 401, "{text}");
    assert!(s.pod("hand").await.expect("hand").spec.node_name.is_empty());

    let admin = s.server.identity.admin_token.clone();
    let (code, text) = post(Some(&admin), None).await;
    assert_eq!(code, 201, "{text}");
    let p = s.pod("hand").await.expect("hand");
    assert_eq!(p.spec.node_name, "n1");
    assert!(p
        .status
        .conditions
        .iter()
        .any(|c| c.r#type == "PodScheduled" && c.status == Some(ConditionStatus::True)));
    let (code, text) = post(Some(&admin), None).await;
    assert_eq!(code, 409, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).expect("a Status");
    assert_eq!(
        v["message"],
        "Operation cannot be fulfilled on pods/binding \"hand\": pod hand is already assigned to node \"n1\""
    );
    assert_eq!(v["reason"], "Conflict");
}

fn priority_class(name: &str, value: i32, never: bool) -> String {
    let policy = if never {
        "preemptionPolicy: Never\n"
    } else {
        ""
    };
    format!("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\nvalue: {value}\n{policy}---\n")
}

fn classed_cpu_pod(name: &str, class: &str, cpu: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{app: cpu}}\nspec:\n  priorityClassName: {class}\n{}",
        requesting(cpu)
    )
}

/// A pod that fits nowhere preempts pods of lower priority on a node (they
/// are deleted with a `Preempted` event), is nominated there and bound
/// once they are gone; a pod whose class says `preemptionPolicy: Never`
/// waits instead, whatever its priority.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_of_higher_priority_preempts_and_one_that_may_not_waits() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, _sim) = cluster(tmp.path(), "pre-", 1).await;
    s.apply(&format!(
        "{}{}{}",
        priority_class("low", 10, false),
        priority_class("high", 1000, false),
        priority_class("polite", 2000, true)
    ))
    .await;
    s.apply(&classed_cpu_pod("victim", "low", "3")).await;
    wait_until("the low pod bound", WAIT, || async {
        s.pod("victim")
            .await
            .is_some_and(|p| p.spec.node_name == "pre-0")
    })
    .await;
    s.apply(&classed_cpu_pod("important", "high", "3")).await;
    let p = wait_for(
        "the high pod bound where the low one was",
        WAIT,
        Duration::from_millis(20),
        || async {
            s.pod("important")
                .await
                .filter(|p| p.spec.node_name == "pre-0")
        },
    )
    .await;
    assert!(s.pod("victim").await.is_none(), "the victim is gone");
    assert!(p.status.nominated_node_name.is_empty(), "{p:?}");
    let preempted = wait_for(
        "the Preempted event",
        WAIT,
        Duration::from_millis(20),
        || async { events(&s.objects, "Preempted").await.remove("victim") },
    )
    .await;
    assert_eq!(
        preempted,
        [format!("Preempted by pod {} on node pre-0", p.metadata.uid)]
    );
    // Higher still, but it may not preempt: it waits, and the high pod
    // stays.
    s.apply(&classed_cpu_pod("polite", "polite", "3")).await;
    let m = wait_for(
        "the polite pod waits",
        WAIT,
        Duration::from_millis(20),
        || async { s.pod("polite").await.and_then(|p| waiting_message(&p)) },
    )
    .await;
    assert_eq!(m, "0/1 nodes are available: 1 Insufficient cpu.");
    let polite = s.pod("polite").await.expect("polite");
    assert!(polite.status.nominated_node_name.is_empty(), "{polite:?}");
    assert_eq!(
        s.pod("important").await.expect("important").spec.node_name,
        "pre-0"
    );
}
