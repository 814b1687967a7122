//! Rolling upgrades with version skew (issue 26), with the real binaries:
//! the previous release's `drover` (the commit in `tests/upgrade-base`) and
//! this build's (`CARGO_BIN_EXE_drover`). The skew policy and the runbook
//! this test follows are `docs/upgrades.md`.
//!
//! 1. Three members on the **old** binary (member 0 bootstraps, 1 and 2
//!    join), compacting their logs often so that a restarted member catches
//!    up from a snapshot made by a member of the other version. Two
//!    `drover agent --runtime sim --data-dir` processes, one `drover sim`
//!    of two nodes (`--data-dir`) and a `drover agent` on the Docker engine
//!    (unless the run opts out, `DROVER_TEST_SKIP=docker`), old too, and
//!    one agent of the **new** binary, welcomed by an old member without
//!    capabilities: six nodes. The DaemonSets' pods run `sleep` (Docker)
//!    with a 1 s grace period.
//! 2. Two DaemonSets: `steady` (never changed) and `roll` (RollingUpdate,
//!    maxUnavailable 1, minReadySeconds 2, a template that each round of
//!    the rollout changes).
//! 3. Throughout: a writer creating keys through a failover client and
//!    recording every acknowledged write; a watch on the Nodes (resumed
//!    from its last revision when the member serving it goes away) that
//!    records every node that is ever not Ready or deleted.
//! 4. The members, one at a time (followers first, the leader last): a new
//!    round of the rollout, then SIGTERM, wait for the exit, start the
//!    **new** binary on the same data dir, wait until it serves as a voter
//!    and has applied the leader's commit index.
//! 5. Every session is on a new member, and the new members logged the
//!    hellos of the old agents as carrying no capabilities. Every pod of
//!    `steady` keeps its uid, container id, restart count and start time:
//!    no member's upgrade restarted a container.
//! 6. A last round of the rollout, then the agents one at a time (SIGTERM,
//!    the new binary on the same data dir), then the sim (SIGKILL: SIGTERM
//!    would make its disposable nodes leave; restarted from its data dir it
//!    takes its nodes back), then the Docker node's agent (SIGTERM: its
//!    containers keep running, and the new agent adopts them: its pod keeps
//!    its container, start time and restart count). The simulated runtime
//!    keeps its containers in memory, so a restarted sim agent starts its
//!    pods again: their uids and restart counts stay (no pod is replaced),
//!    their containers are new, and the test counts them rather than
//!    asserting what only a runtime that outlives the agent can keep. The
//!    new agents list their capabilities, and learn the new servers'.
//! 7. The rollout completes on every node; then the leader is downgraded
//!    back to the old binary (the new binary hands leadership over before
//!    it stops) and the cluster still takes writes, through it too;
//!    `drover cluster status` (the new client) shows every member healthy
//!    with its version.
//! 8. Every acknowledged write is on every member; no node was ever not
//!    Ready (the watch, and no `NodeNotReady` event was recorded).
//!
//! The old binary: `DROVER_UPGRADE_FROM_BIN` (what `.ci/run` exports), or
//! built by `.ci/build-upgrade-base` (a git worktree of the base commit,
//! `cargo build --bin drover` into `target/upgrade-base`, cached there).
//! When a release is cut, `tests/upgrade-base` moves to it; once that
//! release negotiates capabilities itself, its members and agents no longer
//! send none, and the checks of "no capabilities sent" here become checks
//! of the capabilities it lists.
//! Every wait has a deadline; every process is SIGKILLed when the test
//! ends, panics included, and the tail of every log is printed on failure
//! (`DROVER_TEST_KEEP=1` keeps the temp dir).

mod procs;
mod workload;

use drover_cli::{Client, ClientConfig};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MEMBERS: usize = 3;
/// `drover agent --runtime sim` processes of the old binary, one node each,
/// upgraded in turn.
const AGENTS: usize = 2;
/// Nodes of the one `drover sim` process.
const SIM_NODES: usize = 2;
/// Every node: the old agents, one agent of the new binary that joins the
/// old cluster (`up-agent2`, never restarted), the sim's.
const NODES: usize = AGENTS + 1 + SIM_NODES;
/// The node of the new agent that joins the old cluster.
const NEW_NODE: &str = "up-agent2";
/// Raft tuning of every start: compact so often that a member that was
/// away catches up from a snapshot (made by a member of the other version).
const SNAPSHOT_EVERY: &str = "50";
const KEEP_ENTRIES: &str = "10";
/// A process started (or restarted) must serve within this.
const START: Duration = Duration::from_secs(30);
/// A SIGTERMed process must have exited within this.
const STOP: Duration = Duration::from_secs(15);
/// Pods Running and Ready everywhere, a rollout complete.
const CONVERGE: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(50);
/// `minReadySeconds` of the `roll` DaemonSet: with maxUnavailable 1, a
/// round of its rollout lasts at least this times the nodes (8 s).
const ROLL_MIN_READY: u64 = 2;
const LOOPBACK_0: &str = "127.0.0.1:0";
/// gRPC codes (the root package does not depend on tonic).
const GRPC_ALREADY_EXISTS: i32 = 6;
const GRPC_OUT_OF_RANGE: i32 = 11;

use procs::*;
use workload::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_upgrade_and_downgrade_with_skew() {
    let started = Instant::now();
    let old = old_binary();
    let new = new_binary();
    eprintln!(
        "old binary: {}\nnew binary: {}",
        old.display(),
        new.display()
    );
    let mut c = Cluster::start(old.clone(), new.clone()).await;
    eprintln!("3 members on the old binary in {:?}", started.elapsed());

    // The nodes, old too.
    for i in 0..AGENTS {
        let args = c.agent_args(i);
        c.agents[i].start(&old, &args);
    }
    let args = c.sim_args();
    c.sim.start(&old, &args);
    // The Docker node: its containers outlive its agent, so its upgrade
    // must keep them (the agent adopts them by their labels).
    if let Some(args) = c.docker.is_some().then(|| c.docker_args()) {
        c.docker_agent().start(&old, &args);
    } else {
        eprintln!("SKIPPED (DROVER_TEST_SKIP=docker): no Docker node, so no node whose containers outlive its agent");
    }
    let nodes = NODES + usize::from(c.docker.is_some());
    // Nodes whose containers must outlive the whole test: the new agent's
    // (never restarted) and the Docker node's (its agent is upgraded).
    let mut kept: Vec<String> = vec![NEW_NODE.to_string()];
    kept.extend(c.docker.as_ref().map(|(_, n)| n.clone()));
    // An agent of the new release in the cluster of the old one: its
    // session is welcomed by an old member, which sends no capabilities.
    let args = c.agent_args(AGENTS);
    c.agents[AGENTS].start(&new, &args);
    let log = c.agents[AGENTS].log.clone();
    wait_for(
        "the new agent's welcome by an old member",
        START,
        || async {
            std::fs::read_to_string(&log)
                .ok()?
                .contains("server_version=unknown version (no capabilities sent: the baseline)")
                .then_some(())
        },
    )
    .await;
    let client = c.client();
    apply(&client, &daemon_set("steady", 0)).await;
    let mut round = 0;
    apply(&client, &daemon_set("roll", round)).await;
    let steady_before = wait_for(
        "steady Running and Ready on every node",
        CONVERGE,
        || async { rolled_out(&client, "steady", 0, nodes).await },
    )
    .await;
    wait_for("roll Running and Ready on every node", CONVERGE, || async {
        rolled_out(&client, "roll", round, nodes).await
    })
    .await;
    eprintln!(
        "{nodes} nodes and both DaemonSets up at {:?}",
        started.elapsed()
    );

    // The writer and the node watch, for the rest of the test.
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(Mutex::new(Writes::default()));
    let writer_task = tokio::spawn(writer(c.client(), stop.clone(), writes.clone()));
    let node_log = Arc::new(Mutex::new(NodeLog::default()));
    let watch_task = tokio::spawn(watch_nodes(c.client(), node_log.clone()));
    let t = Instant::now();
    wait_for("the first acknowledged write", START, || async {
        (!writes.lock().unwrap().acked.is_empty()).then_some(())
    })
    .await;
    eprintln!("writing and watching the nodes after {:?}", t.elapsed());

    // The members, one at a time: followers first, the leader last.
    let leader = c.leader().await;
    let mut order: Vec<usize> = (0..MEMBERS).filter(|i| *i != leader).collect();
    order.push(leader);
    let mut away = Vec::new();
    for &i in &order {
        round += 1;
        apply(&client, &daemon_set("roll", round)).await;
        assert!(
            rolled_out(&client, "roll", round, nodes).await.is_none(),
            "round {round} of the rollout is under way when the member stops"
        );
        let name = c.members[i].proc.name.clone();
        let t = Instant::now();
        let (exit, status) = c.members[i].proc.stop().await;
        assert!(
            status.success(),
            "{name} (old) exited with {status} on SIGTERM"
        );
        let newb = c.new.clone();
        c.members[i].restart(&newb).await;
        let view = c.wait_in_cluster(i).await;
        let back = Instant::now();
        let (acked, max_gap, slowest) = acks_between(&writes.lock().unwrap(), t, back);
        let updated = pods(&client, "roll").await.map_or(0, |p| {
            p.values()
                .filter(|p| p.round == round.to_string() && p.running_ready)
                .count()
        });
        eprintln!(
            "{name} upgraded (was {}): exited {exit:?} after SIGTERM, back as a voter that \
             caught up {:?} after it; {acked} writes acknowledged meanwhile, longest gap \
             {max_gap:?}; reports version {}; rollout round {round}: {updated} of {nodes} \
             pods updated and ready",
            if i == leader {
                "the leader"
            } else {
                "a follower"
            },
            back - t,
            view.version
        );
        away.push(Away {
            who: format!("{name} old->new"),
            exit,
            away: back - t,
            acked,
            max_gap,
            slowest,
        });
        c.assert_all_alive();
    }

    // Every session is now on a new member, and each but the new agent's
    // began with the hello of an old agent, which lists no capabilities:
    // welcomed all the same.
    wait_for("a session for every node", START, || async {
        (c.sessions().await == nodes as u32).then_some(())
    })
    .await;
    let old_hellos = c.member_log_lines("(no capabilities sent: the baseline)");
    assert!(
        old_hellos >= nodes - 1,
        "the new members logged {old_hellos} hellos of old agents, fewer than the {} sessions of old agents they hold",
        nodes - 1
    );

    // A new member sent its raft messages to the old ones one call each:
    // they answer that they have no `Raft.Stream`.
    let fallbacks = c.member_log_lines("has no raft stream (an older version)");
    assert!(
        fallbacks >= 1,
        "no new member logged falling back to one call per raft batch for an old member"
    );

    // No member's upgrade restarted a container: every steady pod is the
    // same pod with the same container, started at the same time.
    let steady_after_servers = wait_for("steady Running and Ready", CONVERGE, || async {
        rolled_out(&client, "steady", 0, nodes).await
    })
    .await;
    assert_eq!(
        steady_after_servers, steady_before,
        "upgrading the members changed a pod of the steady DaemonSet (uid, container, restarts or start time)"
    );

    // The agents, one at a time, then the sim, during a last round of
    // the rollout.
    round += 1;
    apply(&client, &daemon_set("roll", round)).await;
    for i in 0..AGENTS {
        let name = c.agents[i].name.clone();
        let node = format!("up-agent{i}");
        let t = Instant::now();
        let (exit, status) = c.agents[i].stop().await;
        assert!(
            status.success(),
            "{name} (old) exited with {status} on SIGTERM"
        );
        let args = c.agent_args(i);
        let newb = c.new.clone();
        c.agents[i].start(&newb, &args);
        let what = format!("{node} back: its steady pod running again");
        let before = steady_before
            .values()
            .find(|p| p.node == node)
            .expect("a steady pod on every node")
            .clone();
        wait_for(&what, CONVERGE, || async {
            let now = pods(&client, "steady").await?;
            let p = now.values().find(|p| p.node == node)?;
            (p.running_ready && p.started_at != before.started_at).then_some(())
        })
        .await;
        eprintln!(
            "{name} upgraded: exited {exit:?} after SIGTERM, its node's pods running again {:?} after it",
            t.elapsed()
        );
    }
    {
        let t = Instant::now();
        c.sim.kill();
        let args = c.sim_args();
        let newb = c.new.clone();
        c.sim.start(&newb, &args);
        let sims: Vec<PodFacts> = steady_before
            .values()
            .filter(|p| p.node.starts_with("up-sim"))
            .cloned()
            .collect();
        wait_for(
            "the sim's nodes back: their steady pods running again",
            CONVERGE,
            || async {
                let now = pods(&client, "steady").await?;
                sims.iter()
                    .all(|b| {
                        now.values().any(|p| {
                            p.node == b.node && p.running_ready && p.started_at != b.started_at
                        })
                    })
                    .then_some(())
            },
        )
        .await;
        eprintln!(
            "sim upgraded (SIGKILL, restarted from its data dir): its nodes' pods running again {:?} after it",
            t.elapsed()
        );
    }
    if let Some(node) = c.docker.as_ref().map(|(_, node)| node.clone()) {
        // SIGTERM leaves the containers running; the new agent adopts them.
        let before = steady_before
            .values()
            .find(|p| p.node == node)
            .expect("a steady pod on the Docker node")
            .clone();
        let t = Instant::now();
        let agent = c.docker_agent();
        let (exit, status) = agent.stop().await;
        assert!(
            status.success(),
            "the Docker node's agent (old) exited with {status} on SIGTERM"
        );
        let from = agent.log_len();
        let args = c.docker_args();
        let newb = c.new.clone();
        let agent = c.docker_agent();
        agent.start(&newb, &args);
        let log = agent.log.clone();
        wait_for("the Docker node's new agent joined", START, || async {
            let text = std::fs::read_to_string(&log).ok()?;
            text.get(from..)?
                .contains("joined the cluster")
                .then_some(())
        })
        .await;
        let joined = t.elapsed();
        // Its pods report again, from the containers it adopted: the same
        // container, started at the same time, no restart.
        let what = format!("the steady pod of {node} reported by the new agent");
        let after = wait_for(&what, CONVERGE, || async {
            let now = pods(&client, "steady").await?;
            now.values()
                .find(|p| p.node == node && p.running_ready)
                .cloned()
        })
        .await;
        assert_eq!(
            after, before,
            "the Docker node's steady pod changed across its agent's upgrade"
        );
        eprintln!(
            "the Docker node's agent upgraded: exited {exit:?} after SIGTERM, joined again {joined:?} \
             after it, its steady container {} kept",
            before.container_id
        );
    }
    wait_for("a session for every node", START, || async {
        (c.sessions().await == nodes as u32).then_some(())
    })
    .await;
    // New agents list their capabilities, and learn the server's.
    let new_hellos = c.member_log_lines("(capabilities ");
    assert!(
        new_hellos >= nodes,
        "the members logged {new_hellos} hellos that list capabilities, fewer than the {nodes} new nodes"
    );
    for a in &c.agents[..AGENTS] {
        let log = std::fs::read_to_string(&a.log).unwrap_or_default();
        assert!(
            log.contains("server_version=") && log.contains("(capabilities "),
            "{} (new) did not log the new server's version and capabilities",
            a.name
        );
    }

    // The rollout completes everywhere; the steady pods are the same pods.
    let t = Instant::now();
    wait_for(
        "the last round of the rollout complete",
        CONVERGE,
        || async { rolled_out(&client, "roll", round, nodes).await },
    )
    .await;
    eprintln!(
        "rollout round {round} complete {:?} after the agents' upgrade",
        t.elapsed()
    );
    let steady_after = wait_for("steady Running and Ready", CONVERGE, || async {
        rolled_out(&client, "steady", 0, nodes).await
    })
    .await;
    let mut restarted = 0;
    for (name, b) in &steady_before {
        let a = steady_after.get(name).unwrap_or_else(|| {
            panic!("steady pod {name} was replaced (the user asked for no change)")
        });
        assert_eq!(
            (&a.uid, &a.node, a.restarts),
            (&b.uid, &b.node, b.restarts),
            "steady pod {name}: the same pod on the same node, no restart counted"
        );
        if a.started_at != b.started_at || a.container_id != b.container_id {
            assert!(
                !kept.contains(&a.node),
                "steady pod {name} on {}: its container must outlive the test (an agent never \
                 restarted, or a Docker node's), yet it was started again: {b:?} -> {a:?}",
                a.node
            );
            restarted += 1;
        }
    }
    eprintln!(
        "steady: all {} pods kept their uid and restart count, those of {kept:?} their \
         containers too; {restarted} containers were started again by their agent's restart \
         (the simulated runtime keeps containers in the agent's memory)",
        steady_before.len()
    );

    // Downgrade the leader back to the old binary: the new binary hands
    // leadership over before it stops (its log says so), then the old
    // binary resumes from the data dir the new one wrote.
    let i = c.leader().await;
    let name = c.members[i].proc.name.clone();
    let t = Instant::now();
    let (exit, status) = c.members[i].proc.stop().await;
    assert!(
        status.success(),
        "{name} (new) exited with {status} on SIGTERM"
    );
    let oldb = c.old.clone();
    c.members[i].restart(&oldb).await;
    let view = c.wait_in_cluster(i).await;
    let back = Instant::now();
    let (acked, max_gap, slowest) = acks_between(&writes.lock().unwrap(), t, back);
    assert_eq!(
        c.members[i]
            .proc
            .tail(usize::MAX)
            .matches("stopping: handed leadership to member")
            .count(),
        1,
        "{name}, the leader, handed leadership over before it stopped (new binary)"
    );
    away.push(Away {
        who: format!("{name} new->old (was the leader)"),
        exit,
        away: back - t,
        acked,
        max_gap,
        slowest,
    });
    eprintln!(
        "{name} downgraded: back as a voter {:?} after SIGTERM, {acked} writes acknowledged \
         meanwhile; reports version {}",
        back - t,
        view.version
    );
    // Writes through the downgraded member (a follower forwards them).
    let mut through = c.members[i].single(&c.token);
    through.deadline = Duration::from_secs(10);
    for k in 0..10 {
        let key = format!("/upgrade/through-old/{k}");
        let r = through.create(&key, b"x".to_vec()).await;
        assert!(
            r.is_ok(),
            "a write through the downgraded {name}: {:?}",
            r.err()
        );
    }
    let t = Instant::now();
    wait_for("writes acknowledged after the downgrade", START, || async {
        writes
            .lock()
            .unwrap()
            .acked
            .values()
            .any(|(_, at)| *at > t)
            .then_some(())
    })
    .await;

    // The runbook's check, with the new client: every member healthy, and
    // the version each one runs.
    let cfg = c.members[0].dir.join("client.yaml");
    let newb = c.new.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(newb)
            .arg("--config")
            .arg(cfg)
            .args(["cluster", "status"])
            .env_remove("DROVER_CONFIG")
            .env_remove("DROVER_SERVER")
            .output()
            .expect("run drover cluster status")
    })
    .await
    .expect("the client");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "drover cluster status: {text}");
    let header: Vec<&str> = text
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(header.last(), Some(&"VERSION"), "{text}");
    // `drover --version` of the old binary: what its member reports.
    let oldb = c.old.clone();
    let old_version = tokio::task::spawn_blocking(move || {
        let out = Command::new(oldb)
            .arg("--version")
            .output()
            .expect("run the old drover --version");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .last()
            .unwrap_or("")
            .to_string()
    })
    .await
    .expect("the old binary's version");
    let on = |version: &str| {
        text.lines()
            .skip(1)
            .filter(|l| l.contains(" true ") && l.split_whitespace().last() == Some(version))
            .count()
    };
    if old_version == env!("CARGO_PKG_VERSION") {
        assert_eq!(
            on(&old_version),
            MEMBERS,
            "every member healthy, with its version:\n{text}"
        );
    } else {
        assert_eq!(
            (on(env!("CARGO_PKG_VERSION")), on(&old_version)),
            (MEMBERS - 1, 1),
            "every member healthy, the downgraded one on the old version {old_version}:\n{text}"
        );
    }
    eprintln!("drover cluster status (new client, one member downgraded):\n{text}");

    // Stop writing; check every acknowledged write on every member.
    stop.store(true, Ordering::Relaxed);
    tokio::time::timeout(Duration::from_secs(30), writer_task)
        .await
        .expect("the writer stops")
        .expect("the writer panicked");
    watch_task.abort();
    c.assert_all_alive();
    let w = std::mem::take(&mut *writes.lock().unwrap());
    assert!(
        w.already_exists.is_empty(),
        "fresh keys answered ALREADY_EXISTS (a retried write applied twice?): {:?}",
        w.already_exists
    );
    let last = w.acked.values().map(|(r, _)| *r).max().unwrap_or(0);
    let mut lists = Vec::new();
    for i in 0..MEMBERS {
        let name = c.members[i].proc.name.clone();
        let m = c.members[i].single(&c.token);
        let what = format!("{name} to apply revision {last}");
        let (kvs, _) = wait_for(&what, START, || async {
            let (kvs, rev) = m.list("/upgrade/w/", true).await.ok()?;
            (rev >= last).then_some((kvs, rev))
        })
        .await;
        let stored: BTreeMap<String, (Vec<u8>, u64)> = kvs
            .into_iter()
            .map(|kv| (kv.key, (kv.value, kv.create_revision)))
            .collect();
        let lost: Vec<&String> = w
            .acked
            .keys()
            .filter(|k| !stored.contains_key(*k))
            .collect();
        assert!(
            lost.is_empty(),
            "{name} lost {} acknowledged writes: {:?}",
            lost.len(),
            lost.iter().take(10).collect::<Vec<_>>()
        );
        for (k, (rev, _)) in &w.acked {
            let (value, created) = &stored[k];
            assert_eq!(value, w.attempted[k].as_bytes(), "{name}: the value of {k}");
            assert_eq!(
                created, rev,
                "{name}: {k} was acknowledged at revision {rev}"
            );
        }
        for k in stored.keys() {
            assert!(
                w.attempted.contains_key(k),
                "{name} holds {k}, never written"
            );
        }
        lists.push(stored);
    }
    for i in 1..MEMBERS {
        // Compared up to the last acknowledged revision (a failed write may
        // still have landed later on some).
        let upto = |l: &BTreeMap<String, (Vec<u8>, u64)>| -> BTreeMap<String, (Vec<u8>, u64)> {
            l.iter()
                .filter(|(_, (_, r))| *r <= last)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        assert!(
            upto(&lists[i]) == upto(&lists[0]),
            "m{i} and m0 differ up to revision {last}"
        );
    }

    // A backstop for the watch's relists (a compacted revision): the node
    // lifecycle controller records a NodeNotReady event for every node it
    // turns NotReady.
    let events = client.list_objects("events", "", "").await.expect("events");
    let not_ready: Vec<String> = events
        .items
        .iter()
        .filter_map(|e| serde_json::to_value(e).ok())
        .filter(|e| e["reason"] == "NodeNotReady")
        .map(|e| e.to_string())
        .collect();
    assert!(
        not_ready.is_empty(),
        "NodeNotReady events were recorded: {not_ready:#?}"
    );

    let nl = node_log.lock().unwrap();
    assert_eq!(nl.names.len(), nodes, "the node watch saw {:?}", nl.names);
    assert!(
        nl.violations.is_empty(),
        "nodes were not Ready during the upgrade: {:#?}",
        nl.violations
    );
    eprintln!(
        "\nsummary ({:?} in all):\n  writes: {} attempted, {} acknowledged, {} failed (outcome \
         unknown), lost 0\n  node watch: {} events, resumed {} times, relisted {} times, no \
         node ever not Ready\n  rollout: {round} rounds, the last complete on every node",
        started.elapsed(),
        w.attempted.len(),
        w.acked.len(),
        w.failed.len(),
        nl.events,
        nl.resumed,
        nl.relisted
    );
    for a in &away {
        eprintln!(
            "  {}: exit {:?} after SIGTERM, away {:?}, {} writes acknowledged meanwhile, \
             longest gap between acknowledgements {:?}, slowest write {}",
            a.who,
            a.exit,
            a.away,
            a.acked,
            a.max_gap,
            a.slowest.map_or("none".into(), |(at, took)| format!(
                "{took:?} (sent {at:?} after SIGTERM)"
            ))
        );
    }
    for (k, e) in w.failed.iter().take(5) {
        eprintln!("  failed write {k}: {e}");
    }
}
