//! A node is whole before anything is planned onto it (issue 21, finding
//! 4): DaemonSets applied first, then tainted, labelled nodes join through
//! each member of three (leader and followers). None of them ever gets a
//! pod its taint forbids, and a pod that fits nowhere (1,000 CPUs) is never
//! bound; a DaemonSet that tolerates the taint reaches every one of them,
//! so the controllers did plan with those nodes. Before, the join created a
//! bare Node (no labels, taints or capacity) that the controller planned on
//! before the agent's session registered it.

use drover_api::{Manifest, Pod, TaintEffect};
use drover_testkit::{client, sim_options, wait_for};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);
/// Nodes joining through each member.
const PER_MEMBER: usize = 2;

const PLAIN: &str = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: plain}\nspec:\n  selector: {matchLabels: {app: plain}}\n  template:\n    metadata: {labels: {app: plain}}\n    spec:\n      containers: [{name: c, image: busybox}]\n";
const BIG: &str = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: big}\nspec:\n  selector: {matchLabels: {app: big}}\n  template:\n    metadata: {labels: {app: big}}\n    spec:\n      tolerations: [{operator: Exists}]\n      containers:\n      - name: c\n        image: busybox\n        resources: {requests: {cpu: \"1000\"}}\n";
const EDGE: &str = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: edge}\nspec:\n  selector: {matchLabels: {app: edge}}\n  template:\n    metadata: {labels: {app: edge}}\n    spec:\n      nodeSelector: {zone: south}\n      tolerations: [{key: dedicated, value: edge, effect: NoSchedule}]\n      containers: [{name: c, image: busybox}]\n";

fn app(p: &Pod) -> &str {
    p.metadata
        .labels
        .get("app")
        .map(String::as_str)
        .unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tainted_nodes_joining_through_every_member_get_only_what_they_allow() {
    let tmp = tempfile::tempdir().unwrap();
    let drover_testkit::Voters {
        mut servers,
        addrs,
        ca,
        admin_token: admin,
        node_token,
    } = drover_testkit::start_voters(tmp.path(), 3, WAIT).await;
    let c = client(addrs.clone(), &admin, &ca);
    for ds in [PLAIN, BIG] {
        c.apply(ds, false).await.expect("apply");
    }

    // Nodes join through each member in turn.
    let mut sims = Vec::new();
    for (i, addr) in addrs.iter().enumerate() {
        let mut o = sim_options(
            vec![addr.clone()],
            &node_token,
            &format!("edge{i}-"),
            PER_MEMBER,
        );
        o.labels.insert("zone".into(), "south".into());
        o.taints.push(drover_api::Taint {
            key: "dedicated".into(),
            value: "edge".into(),
            effect: Some(TaintEffect::NoSchedule),
            ..Default::default()
        });
        o.tuning.seed = Some(i as u64);
        sims.push(drover_agent::Sim::start(o).expect("sim"));
    }
    let nodes = 3 * PER_MEMBER;
    c.apply(EDGE, false).await.expect("apply edge");

    // The tolerant DaemonSet runs on every edge node: the controllers have
    // planned with all of them.
    wait_for("the edge DaemonSet on every node", WAIT, POLL, || async {
        let pods = c.list_objects("pods", "default", "app=edge").await.ok()?;
        let bound = pods
            .items
            .iter()
            .filter(|m| matches!(m, Manifest::Pod(p) if !p.spec.node_name.is_empty()))
            .count();
        (bound == nodes).then_some(())
    })
    .await;

    let list = c.list_objects("nodes", "", "").await.expect("nodes");
    assert_eq!(list.items.len(), nodes);
    for m in &list.items {
        let Manifest::Node(n) = m else { continue };
        let name = &n.metadata.name;
        for (k, v) in [
            ("zone", "south"),
            ("kubernetes.io/hostname", name.as_str()),
            ("kubernetes.io/os", "linux"),
        ] {
            assert_eq!(
                n.metadata.labels.get(k).map(String::as_str),
                Some(v),
                "node {name}: label {k}"
            );
        }
        assert!(
            n.spec.taints.iter().any(|t| t.key == "dedicated"),
            "node {name} lost its taint: {:?}",
            n.spec.taints
        );
        assert!(
            n.status.allocatable.contains_key("cpu"),
            "node {name} has no allocatable cpu"
        );
    }
    let pods = c.list_objects("pods", "", "").await.expect("pods");
    for m in &pods.items {
        let Manifest::Pod(p) = m else { continue };
        match app(p) {
            "plain" => panic!(
                "pod {} of a DaemonSet that does not tolerate dedicated=edge:NoSchedule was created for node {:?}",
                p.metadata.name, p.spec.node_name
            ),
            "big" => assert!(
                p.spec.node_name.is_empty(),
                "pod {} requesting 1000 CPUs was bound to node {}",
                p.metadata.name,
                p.spec.node_name
            ),
            _ => {}
        }
    }
    // Nothing was ever bound and then removed: no Scheduled event for them.
    let events = c.list_objects("events", "", "").await.expect("events");
    for m in &events.items {
        let Manifest::Event(e) = m else { continue };
        let of = &e.involved_object.name;
        assert!(
            !(e.reason == "Scheduled" && (of.starts_with("plain-") || of.starts_with("big-"))),
            "{of} was scheduled: {}",
            e.message
        );
    }
    for s in sims {
        s.shutdown().await;
    }
    for s in &mut servers {
        s.shutdown().await;
    }
}
