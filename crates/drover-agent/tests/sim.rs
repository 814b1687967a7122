//! `drover sim` in-process: 200 simulated nodes against a real one-member
//! server register, run a pod, and all leave on shutdown.

use drover_agent::{Sim, SimOptions};
use drover_testkit::{is_running_and_ready, pod_yaml, wait_until, TestServer};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_sim_nodes_register_run_pods_and_leave() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let mut o = SimOptions::new(vec![s.addr.clone()], s.node_token.clone(), 200);
    o.labels.insert("pool".into(), "sim".into());
    // Two connections' worth of sessions, to exercise the sharding.
    o.tuning.seed = Some(42);
    let t0 = Instant::now();
    let sim = Sim::start(o).expect("sim starts");
    assert_eq!(sim.len(), 200);
    assert_eq!(sim.names()[199], "sim-199");
    let took = wait_until("200 nodes registered", Duration::from_secs(60), || async {
        s.node_count().await == 200
    })
    .await;
    eprintln!("200 sim nodes registered in {took:?}");
    wait_until("200 sessions open", Duration::from_secs(10), || async {
        sim.connected() == 200
    })
    .await;
    let n = s.node("sim-7").await.unwrap();
    assert!(n.is_ready());
    assert_eq!(n.metadata.labels["pool"], "sim");
    assert_eq!(n.status.addresses[0].address, "100.64.0.8");
    assert_eq!(n.status.capacity["cpu"].0, "4");

    // Pods bound to a few nodes run there.
    for i in [0, 7, 199] {
        s.apply(&pod_yaml(&format!("p{i}"), &format!("sim-{i}"), "nginx"))
            .await;
    }
    let took = wait_until(
        "3 pods Running and Ready",
        Duration::from_secs(10),
        || async {
            let mut ok = true;
            for i in [0, 7, 199] {
                ok &= s
                    .pod(&format!("p{i}"))
                    .await
                    .is_some_and(|p| is_running_and_ready(&p));
            }
            ok
        },
    )
    .await;
    eprintln!("pods on sim nodes Running/Ready in {took:?}");
    assert_eq!(sim.runtime(7).unwrap().containers().len(), 1);
    assert!(sim.runtime(8).unwrap().containers().is_empty());

    // SIGTERM: every node leaves.
    let t = Instant::now();
    let left = tokio::time::timeout(Duration::from_secs(60), sim.shutdown())
        .await
        .expect("the sim stops in time");
    eprintln!(
        "200 nodes left in {:?} (whole test {:?})",
        t.elapsed(),
        t0.elapsed()
    );
    assert_eq!(left, 200);
    assert_eq!(s.node_count().await, 0, "every Node is deleted");
    s.shutdown().await;
}

#[tokio::test]
async fn killed_sim_nodes_stay_registered() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let mut o = SimOptions::new(vec![s.addr.clone()], s.node_token.clone(), 5);
    o.prefix = "k-".into();
    let sim = Sim::start(o).expect("sim starts");
    wait_until("5 nodes", Duration::from_secs(20), || async {
        s.node_count().await == 5
    })
    .await;
    wait_until("5 sessions", Duration::from_secs(10), || async {
        sim.connected() == 5
    })
    .await;
    // SIGKILL: no Leave; the nodes stay until the server judges them.
    sim.kill();
    // Wait until the server has heard nothing from any of them for longer
    // than two heartbeat intervals: the agents are really gone ...
    let quiet = Duration::from_secs(2);
    wait_until(
        "the killed nodes to fall silent",
        Duration::from_secs(10),
        || async {
            let beats = s.server.ctx.heartbeats.snapshot();
            (0..5).all(|i| {
                beats
                    .get(format!("k-{i}").as_str())
                    .is_some_and(|t| t.elapsed() > quiet)
            })
        },
    )
    .await;
    // ... and their Nodes are still registered (no Leave was sent).
    assert_eq!(s.node_count().await, 5);
    s.shutdown().await;
}

#[tokio::test]
async fn sim_nodes_count_their_joins_losses_and_rejoins() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("server");
    let s = TestServer::start(&dir).await;
    let o = drover_testkit::sim_options(vec![s.addr.clone()], &s.node_token, "j-", 5);
    let sim = Sim::start(o).expect("sim starts");
    wait_until("5 sessions", Duration::from_secs(20), || async {
        sim.connected() == 5
    })
    .await;
    let count = |c: &std::sync::atomic::AtomicUsize| c.load(std::sync::atomic::Ordering::Relaxed);
    let st = sim.stats();
    assert_eq!(count(&st.joined), 5);
    assert_eq!(count(&st.lost) + count(&st.moved) + count(&st.rejoined), 0);
    // The only server goes and comes back on the same address: every node
    // loses it and rejoins it (one line each at info for a lone agent; the
    // sim sums them up once a second).
    s.shutdown().await;
    wait_until("5 sessions lost", Duration::from_secs(10), || async {
        count(&sim.stats().lost) == 5
    })
    .await;
    let s = TestServer::restart(&dir).await;
    wait_until("5 nodes back", Duration::from_secs(20), || async {
        sim.connected() == 5
    })
    .await;
    let st = sim.stats();
    assert_eq!(count(&st.rejoined), 5, "the same server again");
    assert_eq!(count(&st.moved), 0, "there is no other");
    assert_eq!(count(&st.joined), 5, "joined once each");
    sim.shutdown().await;
    s.shutdown().await;
}

/// A member that holds more sessions than it answers heartbeats a second
/// asks its agents to beat less often, in the answers to their heartbeats
/// as well as in the welcome: the first nodes, welcomed into a small
/// cluster, beat less often once it grew. The nodes stay Ready and keep
/// their sessions meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_with_many_sessions_asks_for_fewer_heartbeats() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start_tuned(&tmp.path().join("server"), |o| {
        // 4 sessions at 4 a second: every second; 12: every 3 s (at most
        // 4 s, two fifths of the 10 s node timeout).
        o.heartbeats_per_second = 4;
        o.controller.node_timeout = Duration::from_secs(10);
    })
    .await;
    let sim_of = |prefix: &str, nodes| {
        let mut o = SimOptions::new(vec![s.addr.clone()], s.node_token.clone(), nodes);
        o.prefix = prefix.into();
        o.tuning.seed = Some(7);
        Sim::start(o).expect("sim starts")
    };
    let first = sim_of("first-", 4);
    wait_until("4 sessions", Duration::from_secs(20), || async {
        first.connected() == 4
    })
    .await;
    let more = sim_of("more-", 8);
    wait_until("8 more sessions", Duration::from_secs(20), || async {
        more.connected() == 8
    })
    .await;
    assert_eq!(s.server.ctx.heartbeats.interval(4), Duration::from_secs(1));
    assert_eq!(s.server.ctx.heartbeats.interval(12), Duration::from_secs(3));
    let names: Vec<String> = (0..4)
        .map(|i| format!("first-{i}"))
        .chain((0..8).map(|i| format!("more-{i}")))
        .collect();
    // Over 12 s, each node's last heartbeat grows older than 2.75 s at
    // least once (the first four were welcomed with 1 s: only the answers
    // told them 3 s), and never older than 3 s and 2 s of slack for a
    // loaded machine. Why 12: a node welcomed with 2.75 s (11 sessions)
    // beats after a random phase of up to 2.75 s, and once more 2.75 s
    // later (a beat already due keeps its time when the interval grows);
    // only then come the gaps of 3 s. With 8 s, CI once saw such a node's
    // oldest heartbeat at 2.73 s.
    let count = |c: &std::sync::atomic::AtomicUsize| c.load(std::sync::atomic::Ordering::Relaxed);
    let lost_before = count(&first.stats().lost) + count(&more.stats().lost);
    let (watch, slow, bound) = (
        Duration::from_secs(12),
        Duration::from_millis(2_750),
        Duration::from_secs(5),
    );
    let mut oldest = std::collections::BTreeMap::<&str, Duration>::new();
    let t0 = Instant::now();
    while t0.elapsed() < watch {
        let beats = s.server.ctx.heartbeats.snapshot();
        for name in &names {
            let age = beats.get(name.as_str()).expect("heard").elapsed();
            let o = oldest.entry(name).or_default();
            *o = (*o).max(age);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("the oldest heartbeat of each node: {oldest:?}");
    for (node, age) in &oldest {
        assert!(
            *age > slow,
            "{node} beat more often than asked: at most {age:?} apart"
        );
        assert!(
            *age < bound,
            "{node}: a heartbeat waited {age:?} (every 3 s)"
        );
    }
    for name in &names {
        let n = s.node(name).await.expect("registered");
        assert!(n.is_ready(), "{name} is Ready");
    }
    let lost_after = count(&first.stats().lost) + count(&more.stats().lost);
    assert_eq!(lost_after, lost_before, "no session was given up");
    first.kill();
    more.kill();
    s.shutdown().await;
}
