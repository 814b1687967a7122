//! Agents follow the member list: nodes started with the address of one
//! server of three learn the others, save them, and when that server dies
//! move to the survivors at once: no node turns NotReady, and DaemonSets
//! keep converging. `cluster status` counts each member's sessions.

use drover_api::Manifest;
use drover_testkit::{client, sim_options, wait_for};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);
const NODES: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn losing_the_one_server_the_nodes_were_given_takes_no_node_down() {
    let tmp = tempfile::tempdir().unwrap();
    let drover_testkit::Voters {
        mut servers,
        addrs,
        ca,
        admin_token: admin,
        node_token,
    } = drover_testkit::start_voters(tmp.path(), 3, WAIT).await;

    // The nodes know only the first server.
    let mut o = sim_options(vec![addrs[0].clone()], &node_token, "f-", NODES);
    o.tuning.seed = Some(11);
    let sim = drover_agent::Sim::start(o).expect("sim");
    let survivors = client(addrs[1..].to_vec(), &admin, &ca);
    let names: Vec<String> = (0..NODES).map(|i| format!("f-{i}")).collect();
    let all_ready = |c: drover_cli::Client| {
        let names = names.clone();
        async move {
            let list = c.list_objects("nodes", "", "").await.ok()?;
            let ready = list
                .items
                .iter()
                .filter(|m| matches!(m, Manifest::Node(n) if n.is_ready() && names.contains(&n.metadata.name)))
                .count();
            (ready == names.len()).then_some(())
        }
    };
    wait_for("every node Ready", WAIT, Duration::from_millis(50), || {
        all_ready(survivors.clone())
    })
    .await;
    // Every member says how many sessions it holds; they add up, and they
    // are spread: a new node learns the members when it gets its
    // certificate and opens its session on a random one (seeded here).
    let held = wait_for(
        "the sessions counted",
        WAIT,
        Duration::from_millis(50),
        || async {
            let mut per = Vec::new();
            for a in &addrs {
                let one = client(vec![a.clone()], &admin, &ca);
                per.push(one.status().await.ok()?.sessions as usize);
            }
            (per.iter().sum::<usize>() == NODES).then_some(per)
        },
    )
    .await;
    assert!(
        held.iter().filter(|n| **n > 0).count() >= 2 && held[0] < NODES,
        "sessions spread over the members, not all on the address given: {held:?}"
    );

    // Kill the first server (the only address the nodes were given).
    let t = Instant::now();
    let mut first = servers.remove(0);
    first.shutdown().await;

    // For longer than the node timeout (5 s) every node stays Ready, and
    // a DaemonSet applied now reaches every node through the survivors.
    survivors
        .apply(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: after}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:\n      containers: [{name: c, image: busybox}]\n",
            false,
        )
        .await
        .expect("apply through the survivors");
    while t.elapsed() < Duration::from_secs(7) {
        if let Ok(list) = survivors.list_objects("nodes", "", "").await {
            for m in &list.items {
                if let Manifest::Node(n) = m {
                    assert!(
                        n.is_ready(),
                        "{} turned NotReady {:?} after its server was killed",
                        n.metadata.name,
                        t.elapsed()
                    );
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let events = survivors
        .list_objects("events", "", "")
        .await
        .expect("events");
    let not_ready: Vec<_> = events
        .items
        .iter()
        .filter(|m| matches!(m, Manifest::Event(e) if e.reason == "NodeNotReady"))
        .collect();
    assert!(not_ready.is_empty(), "{not_ready:?}");
    wait_for(
        "the DaemonSet's pod on every node, Running",
        WAIT,
        Duration::from_millis(50),
        || async {
            let pods = survivors
                .list_objects("pods", "default", "a=b")
                .await
                .ok()?;
            let running = pods
                .items
                .iter()
                .filter(
                    |m| matches!(m, Manifest::Pod(p) if drover_testkit::is_running_and_ready(p)),
                )
                .count();
            (running == NODES).then_some(())
        },
    )
    .await;
    // The sessions moved to the two survivors.
    let mut sum = 0;
    for a in &addrs[1..] {
        sum += client(vec![a.clone()], &admin, &ca)
            .status()
            .await
            .expect("status")
            .sessions;
    }
    assert_eq!(sum as usize, NODES, "every session on a survivor");
    sim.shutdown().await;
    for mut s in servers {
        s.shutdown().await;
    }
}

/// A member that stops cuts the connections its clients keep open: their
/// streams end at once (they reconnect elsewhere), and nothing such a
/// client holds keeps the stopped member's store open, so the member
/// restarts from the same data dir at once.
#[tokio::test]
async fn a_stopping_member_cuts_open_connections_and_frees_its_store() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    let mut server = drover_server::Server::start(drover_testkit::fast_options(&dir))
        .await
        .expect("start");
    let c = drover_testkit::client_of(&server);
    // Long-lived streams that know nothing of the stop: a watch, opened
    // once the member leads.
    let mut watch = wait_for("a watch", WAIT, Duration::from_millis(50), || async {
        c.watch_objects("Pod", "", "").await.ok()
    })
    .await;
    let stopped = Instant::now();
    server.shutdown().await;
    drop(server);
    let ended = tokio::time::timeout(Duration::from_secs(5), watch.next()).await;
    assert!(
        matches!(ended, Ok(Err(_)) | Ok(Ok(None))),
        "the watch still runs on the stopped member: {ended:?}"
    );
    // The client still holds its connection object; the store is free
    // all the same. Only the port may need a retry (an ephemeral one).
    let mut o = drover_testkit::restart_options(&dir);
    o.listen = Some("127.0.0.1:0".to_string());
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut again = loop {
        match drover_server::Server::start(o.clone()).await {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline => {
                eprintln!("restart: {e:#}; again");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!(
                "{:?} after the stop the store is still held: {e:#}",
                stopped.elapsed()
            ),
        }
    };
    drop(c);
    again.shutdown().await;
}
