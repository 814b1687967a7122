//! Pod events from simulated nodes against a real one-member server: a
//! crash-looping DaemonSet on many sim nodes records the kubelet's events
//! (Scheduled, Pulled, Created, Started, BackOff) whose counts grow while
//! the number of Event objects stays bounded, and the writes are
//! rate-limited per pod. Every wait has a deadline.

use drover_agent::events::EventLimits;
use drover_agent::{Sim, SimConfig, SimOptions};
use drover_api::{Event, Kind, Manifest};
use drover_testkit::{wait_until, TestServer};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const NODES: usize = 40;

async fn events(s: &TestServer) -> Vec<Event> {
    let (list, _) = s
        .objects
        .list(Kind::Event, Some("default"), None)
        .await
        .unwrap_or_default();
    list.into_iter()
        .filter_map(|m| match m {
            Manifest::Event(e) if e.involved_object.kind == "Pod" => Some(*e),
            _ => None,
        })
        .collect()
}

/// The BackOff count of each pod.
fn back_offs(evs: &[Event]) -> BTreeMap<String, i32> {
    evs.iter()
        .filter(|e| e.reason == "BackOff")
        .map(|e| (e.involved_object.name.clone(), e.count.unwrap_or(1)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_loop_on_many_sim_nodes_counts_back_offs_in_a_bounded_number_of_events() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let mut o = SimOptions::new(vec![s.addr.clone()], s.node_token.clone(), NODES);
    o.tuning.seed = Some(7);
    o.tuning.reconnect_min = Duration::from_millis(50);
    o.tuning.reconnect_max = Duration::from_millis(500);
    // Crash fast, restart fast; a small spam filter so that the test sees
    // it work: 8 writes per pod, then one every 500 ms.
    o.sim = SimConfig {
        crash_after: Duration::from_millis(100),
        ..SimConfig::default()
    };
    o.tuning.restart_backoff = Duration::from_millis(100);
    o.tuning.restart_backoff_max = Duration::from_millis(200);
    o.tuning.events = EventLimits {
        burst: 8,
        refill: Duration::from_millis(500),
    };
    let sim = Sim::start(o).expect("sim starts");
    wait_until("every node registered", Duration::from_secs(60), || async {
        s.node_count().await == NODES
    })
    .await;
    s.apply(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: crashy}\nspec:\n  selector: {matchLabels: {app: crashy}}\n  template:\n    metadata: {labels: {app: crashy}}\n    spec:\n      containers: [{name: app, image: sim/crash:1}]\n",
    )
    .await;
    let t0 = Instant::now();
    wait_until(
        "a BackOff event about every pod",
        Duration::from_secs(60),
        || async { back_offs(&events(&s).await).len() == NODES },
    )
    .await;
    let first = events(&s).await;
    let counts0 = back_offs(&first);
    eprintln!(
        "{NODES} pods: a BackOff event each after {:?}; {} Event objects",
        t0.elapsed(),
        first.len()
    );
    // Every pod has the kubelet's story, once per reason.
    let pod = first
        .iter()
        .find(|e| e.reason == "BackOff")
        .map(|e| e.involved_object.name.clone())
        .expect("a pod");
    let mut reasons: Vec<&str> = first
        .iter()
        .filter(|e| e.involved_object.name == pod)
        .map(|e| e.reason.as_str())
        .collect();
    reasons.sort_unstable();
    assert_eq!(
        reasons,
        ["BackOff", "Created", "Pulled", "Scheduled", "Started"],
        "{pod}'s events"
    );
    let back_off = first
        .iter()
        .find(|e| e.involved_object.name == pod && e.reason == "BackOff")
        .expect("BackOff");
    assert_eq!(back_off.r#type, "Warning");
    assert_eq!(back_off.source.component, "kubelet");
    assert!(back_off.source.host.starts_with("sim-"));
    assert_eq!(back_off.involved_object.field_path, "spec.containers{app}");
    assert!(
        back_off
            .message
            .starts_with("Back-off restarting failed container app in pod "),
        "{}",
        back_off.message
    );

    // The loop goes on: counts grow (past the burst: the spam filter lets
    // one write through every 500 ms, with the whole count), the number of
    // Event objects does not.
    wait_until(
        "BackOff counts to grow past the burst on every pod",
        Duration::from_secs(60),
        || async {
            let now = back_offs(&events(&s).await);
            now.len() == NODES && now.iter().all(|(p, c)| *c >= counts0[p] + 8)
        },
    )
    .await;
    let later = events(&s).await;
    assert_eq!(
        later.len(),
        first.len(),
        "the number of Event objects stays the same"
    );
    assert!(later.len() <= NODES * 5 + NODES, "bounded: {}", later.len());
    let stats = sim.stats();
    let noted = stats.events_noted.load(Ordering::Relaxed);
    let sent = stats.events_sent.load(Ordering::Relaxed);
    let total: i64 = back_offs(&later).values().map(|c| i64::from(*c)).sum();
    eprintln!(
        "after {:?}: {noted} events noted by {NODES} nodes, {sent} written, {} Event objects, BackOff counts sum {total}",
        t0.elapsed(),
        later.len()
    );
    assert!(
        sent * 2 < noted,
        "deduplicated and rate-limited: {sent} written of {noted}"
    );
    sim.shutdown().await;
    s.shutdown().await;
}

/// Figures, not a check (`cargo nextest run -p drover-agent --test events
/// --run-ignored only`): `EVENT_NODES` (1000) sim nodes crash-loop for
/// `EVENT_SECS` (120) with the default spam filter (25 writes per pod, then
/// one per 5 minutes) and restarts backing off from 1 s to 10 s; prints the
/// events noted, written and stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a report: run it on purpose"]
async fn crash_loop_event_figures() {
    let var = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let nodes = var("EVENT_NODES", 1000) as usize;
    let secs = var("EVENT_SECS", 120);
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let mut o = SimOptions::new(vec![s.addr.clone()], s.node_token.clone(), nodes);
    o.tuning.seed = Some(11);
    o.tuning.restart_backoff = Duration::from_secs(1);
    o.tuning.restart_backoff_max = Duration::from_secs(10);
    let sim = Sim::start(o).expect("sim starts");
    wait_until(
        "every node registered",
        Duration::from_secs(300),
        || async { s.node_count().await == nodes },
    )
    .await;
    s.apply(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: crashy}\nspec:\n  selector: {matchLabels: {app: crashy}}\n  template:\n    metadata: {labels: {app: crashy}}\n    spec:\n      containers: [{name: app, image: sim/crash:1}]\n",
    )
    .await;
    let t0 = Instant::now();
    let mut next = Duration::from_secs(30);
    while t0.elapsed() < Duration::from_secs(secs) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if t0.elapsed() >= next || t0.elapsed() >= Duration::from_secs(secs) {
            next += Duration::from_secs(30);
            let evs = events(&s).await;
            let st = sim.stats();
            eprintln!(
                "{:>4}s: {nodes} crash-looping pods: {} events noted, {} written by the nodes, {} Event objects, BackOff counts sum {}",
                t0.elapsed().as_secs(),
                st.events_noted.load(Ordering::Relaxed),
                st.events_sent.load(Ordering::Relaxed),
                evs.len(),
                back_offs(&evs).values().map(|c| i64::from(*c)).sum::<i64>()
            );
        }
    }
    sim.shutdown().await;
    s.shutdown().await;
}
