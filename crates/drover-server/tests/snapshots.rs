//! Backup and disaster recovery (issue 26), in-process: a snapshot saved
//! with `drover cluster snapshot save`, every data dir wiped, the cluster
//! restored with `--restore` on the same address: the same objects at the
//! same resourceVersions, the node back with its own certificate and its
//! pod adopted (same uid, same container, no restart); a corrupt or
//! truncated snapshot refused with nothing written; a lost quorum
//! recovered with `--force-new-cluster`, every acknowledged write kept, and
//! refused while another member answers; scheduled snapshots kept to
//! `--snapshot-retain`; who may take a snapshot.

use drover_agent::{AgentOptions, SimConfig};
use drover_api::{Kind, Pod};
use drover_proto::reason::Reason;
use drover_proto::v1 as pb;
use drover_server::api::node_certs::{CERT_ANNOTATION, KEY_ANNOTATION};
use drover_server::api::snapshot::CLUSTER_KEY;
use drover_server::Server;
use drover_store::backup::Backup;
use drover_testkit::{
    client, fast_options, quick_tuning, start_servers, start_sim_agent, wait_for, wait_until,
    TestServer,
};
use std::collections::BTreeMap;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

const OBJECTS: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: hello
spec:
  selector:
    matchLabels: {app: hello}
  template:
    metadata:
      labels: {app: hello}
    spec:
      containers:
      - name: hello
        image: local/busybox:1
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  level: debug
---
apiVersion: v1
kind: Secret
metadata:
  name: password
stringData:
  password: hunter2
"#;

/// Every object of the cluster: key → (uid, resourceVersion), by kind.
async fn inventory(c: &drover_cli::Client) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    for kind in [
        Kind::Node,
        Kind::DaemonSet,
        Kind::Pod,
        Kind::ConfigMap,
        Kind::Secret,
        Kind::ControllerRevision,
    ] {
        let list = c
            .list_objects(kind.plural(), "", "")
            .await
            .unwrap_or_else(|e| panic!("list {}: {e}", kind.plural()));
        for m in list.items {
            let meta = m.metadata();
            out.insert(
                format!("{}/{}/{}", kind.plural(), meta.namespace.clone(), meta.name),
                (meta.uid.clone(), meta.resource_version.clone()),
            );
        }
    }
    out
}

fn hello_pod(pods: Vec<Pod>) -> Option<Pod> {
    pods.into_iter().find(|p| {
        p.metadata.name.starts_with("hello-")
            && p.status
                .container_statuses
                .first()
                .is_some_and(|c| !c.container_id.is_empty())
            && p.is_ready()
    })
}

/// The hello pod's containers in the node's runtime: pod uid, container
/// id, attempt.
fn hello_containers(rt: &drover_agent::SimRuntime) -> Vec<(String, String, u32)> {
    rt.containers()
        .into_iter()
        .filter(|c| c.pod_name.starts_with("hello-"))
        .map(|c| (c.pod_uid, c.id, c.attempt))
        .collect()
}

fn container(p: &Pod) -> (String, i32) {
    let c = &p.status.container_statuses[0];
    (c.container_id.clone(), c.restart_count)
}

#[tokio::test]
async fn save_wipe_restore_keeps_objects_revisions_and_running_pods() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let s = TestServer::start(&dir).await;
    let mut o = AgentOptions::new(vec![s.addr.clone()], &s.node_token, "node-a");
    o.tuning = quick_tuning(7);
    o.data_dir = Some(tmp.path().join("node-a"));
    o.leave_on_stop = false;
    let agent = start_sim_agent(o, SimConfig::default());
    s.apply(OBJECTS).await;
    let pod = wait_for(
        "the hello pod running on node-a",
        WAIT,
        Duration::from_millis(50),
        || async { hello_pod(s.pods(Some("default")).await) },
    )
    .await;
    let before = inventory(&s.client()).await;
    let containers_before = hello_containers(&agent.runtime);
    assert_eq!(containers_before.len(), 1, "{containers_before:?}");
    let cluster_before = wait_for(
        "the cluster id",
        WAIT,
        Duration::from_millis(50),
        || async {
            s.client()
                .get(CLUSTER_KEY, false)
                .await
                .ok()
                .and_then(|r| r.0)
                .map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
        },
    )
    .await;

    // Save.
    let file = tmp.path().join("backup").join("drover.snapshot");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let mut out = Vec::new();
    drover_cli::snapshot::save(&s.client(), &file, &mut out)
        .await
        .expect("snapshot save");
    let said = String::from_utf8_lossy(&out).into_owned();
    assert!(said.contains("Snapshot saved to"), "{said}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "a snapshot holds the CA key: owner only");
    }
    let b = Backup::decode(&std::fs::read(&file).unwrap()).expect("the file checks");
    assert_eq!(b.header.cluster_id, cluster_before);
    assert!(
        !b.header.ca_key.is_empty(),
        "the CA travels in the snapshot"
    );
    assert!(
        b.kvs
            .iter()
            .any(|kv| kv.key.contains("/secrets/default/password")),
        "the Secret is in the snapshot"
    );

    // The whole server is lost: its data dir wiped.
    let addr = s.addr.clone();
    s.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();

    // Restore into an empty data dir on the same address.
    let mut o = fast_options(&dir);
    o.listen = Some(addr.clone());
    o.restore = Some(file.clone());
    let r = TestServer::with_options(o, Duration::from_secs(10)).await;
    let c = r.client();
    let after = inventory(&c).await;
    for (key, (uid, rv)) in &before {
        // Nodes and pods report status again after the restore (a node's
        // heartbeat condition, a pod's readiness): their uid stays, their
        // revision may move on; every other object is exactly as it was.
        let (uid2, rv2) = after
            .get(key)
            .unwrap_or_else(|| panic!("{key} is missing after the restore"));
        assert_eq!(uid, uid2, "{key}: uid");
        if !key.starts_with("nodes/") && !key.starts_with("pods/") {
            assert_eq!(rv, rv2, "{key}: resourceVersion");
        }
    }
    let cluster_after =
        String::from_utf8_lossy(&c.get(CLUSTER_KEY, false).await.unwrap().0.unwrap().value)
            .into_owned();
    assert_ne!(
        cluster_after, cluster_before,
        "a restore is a new cluster unless told"
    );

    // The node comes back on its own certificate (the CA travelled): its
    // session is held by the restored member.
    wait_until("node-a's session on the restored member", WAIT, || async {
        r.server.ctx.sessions.holds("node-a")
    })
    .await;
    // It follows the restored cluster: a DaemonSet applied now runs there.
    r.apply(
        &OBJECTS
            .split("---")
            .next()
            .unwrap()
            .replace("hello", "after"),
    )
    .await;
    wait_until("the new DaemonSet's pod on node-a", WAIT, || async {
        agent
            .runtime
            .containers()
            .iter()
            .any(|c| c.pod_name.starts_with("after-"))
    })
    .await;
    // And its pod of before is adopted: the same container, not restarted.
    let hello = hello_containers(&agent.runtime);
    assert_eq!(
        hello, containers_before,
        "the pod's container was not touched"
    );
    let again = r.pod(&pod.metadata.name).await.expect("the pod");
    assert_eq!(again.metadata.uid, pod.metadata.uid);
    assert_eq!(
        container(&again),
        container(&pod),
        "the status reports the same container"
    );
    // New writes come after every restored revision.
    let w = c
        .create("/restored/probe", b"x".to_vec())
        .await
        .expect("write");
    assert!(
        w.revision > b.header.revision,
        "{} > {}",
        w.revision,
        b.header.revision
    );
    // Another server joins the restored cluster as usual.
    let mut o = fast_options(tmp.path().join("second"));
    o.join = Some(r.addr.clone());
    o.token = Some(r.server.identity.server_token.clone());
    let mut second = Server::start(o)
        .await
        .expect("a member joins the restored cluster");
    wait_voters(&c, 2).await;
    second.shutdown().await;
    agent.stop_unchecked(Duration::from_secs(5)).await;
    r.shutdown().await;
}

/// A node that renewed its certificate after the snapshot (the snapshot's
/// Node records the older serial) comes back to the restored cluster on
/// its current certificate, which its session (or its renewal) then binds:
/// the node token it joined with was rotated, so joining again is not a
/// way back.
#[tokio::test]
async fn a_node_that_renewed_after_the_snapshot_comes_back_to_the_restore() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    // 9 s node certificates: renewed every 6 s.
    let short = |o: &mut drover_server::ServerOptions| o.node_cert_ttl = Duration::from_secs(9);
    let s = TestServer::start_tuned(&dir, short).await;
    let mut o = AgentOptions::new(vec![s.addr.clone()], &s.node_token, "node-r");
    o.tuning = quick_tuning(9);
    o.data_dir = Some(tmp.path().join("node-r"));
    o.leave_on_stop = false;
    let agent = start_sim_agent(o, SimConfig::default());
    let serial = |n: &drover_api::Node| n.metadata.annotations[CERT_ANNOTATION].clone();
    let first = wait_for("node-r Ready", WAIT, Duration::from_millis(50), || async {
        s.node("node-r").await.filter(|n| n.is_ready())
    })
    .await;
    // The agent's token is the old one from now on (and the snapshot
    // holds the new one).
    s.client()
        .rotate_token("node")
        .await
        .expect("rotate the node token");
    let file = tmp.path().join("drover.snapshot");
    drover_cli::snapshot::save(&s.client(), &file, &mut Vec::new())
        .await
        .expect("snapshot save");
    let saved = Backup::decode(&std::fs::read(&file).unwrap()).expect("the file checks");
    let in_snapshot = saved
        .kvs
        .iter()
        .find(|kv| kv.key.ends_with("/nodes/node-r"))
        .map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
        .expect("node-r is in the snapshot");
    assert!(in_snapshot.contains(&serial(&first)), "{in_snapshot}");
    let renewed = wait_for(
        "node-r renews its certificate after the snapshot",
        WAIT,
        Duration::from_millis(50),
        || async {
            s.node("node-r")
                .await
                .filter(|n| serial(n) != serial(&first))
        },
    )
    .await;

    let addr = s.addr.clone();
    s.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
    let mut o = fast_options(&dir);
    o.listen = Some(addr);
    o.restore = Some(file);
    short(&mut o);
    let r = TestServer::with_options(o, Duration::from_secs(10)).await;
    // The restored Node names the snapshot's serial; the agent presents a
    // later certificate of the same key.
    wait_until("node-r's session on the restored member", WAIT, || async {
        r.server.ctx.sessions.holds("node-r")
    })
    .await;
    let back = wait_for(
        "node-r Ready on the restored member",
        WAIT,
        Duration::from_millis(50),
        || async { r.node("node-r").await.filter(|n| n.is_ready()) },
    )
    .await;
    assert_ne!(
        serial(&back),
        serial(&first),
        "bound to a later certificate"
    );
    assert_eq!(
        back.metadata.annotations[KEY_ANNOTATION], renewed.metadata.annotations[KEY_ANNOTATION],
        "the same key owns the name"
    );
    agent.stop_unchecked(Duration::from_secs(5)).await;
    r.shutdown().await;
}

#[tokio::test]
async fn a_corrupt_or_truncated_snapshot_is_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("s")).await;
    s.apply(OBJECTS).await;
    let file = tmp.path().join("good.snapshot");
    drover_cli::snapshot::save(&s.client(), &file, &mut Vec::new())
        .await
        .expect("save");
    s.shutdown().await;
    let good = std::fs::read(&file).unwrap();
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x20;
    let cases = [
        ("truncated", good[..good.len() - 100].to_vec(), "incomplete"),
        ("flipped", flipped, "damaged"),
        (
            "other",
            b"{\"not\": \"a snapshot\"}".to_vec(),
            "not a drover snapshot",
        ),
    ];
    for (name, bytes, says) in cases {
        let bad = tmp.path().join(format!("{name}.snapshot"));
        std::fs::write(&bad, bytes).unwrap();
        let target = tmp.path().join(format!("restore-{name}"));
        let mut o = fast_options(&target);
        o.restore = Some(bad.clone());
        let e = match Server::start(o).await {
            Ok(_) => panic!("{name}: a bad snapshot was restored"),
            Err(e) => format!("{e:#}"),
        };
        assert!(e.contains(says), "{name}: {e}");
        assert!(e.contains("Nothing was written"), "{name}: {e}");
        assert!(!target.exists(), "{name}: {} was created", target.display());
    }
    // A data dir that holds a member is never overwritten by a restore.
    let mut o = fast_options(tmp.path().join("s"));
    o.restore = Some(file);
    let e = match Server::start(o).await {
        Ok(_) => panic!("a restore overwrote a member's data dir"),
        Err(e) => format!("{e:#}"),
    };
    assert!(e.contains("already holds member"), "{e}");
}

#[tokio::test]
async fn only_an_admin_takes_a_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("s")).await;
    let (viewer, _, _) = drover_testkit::viewer_client(&s, "viewer-1").await;
    let anonymous = client(vec![s.addr.clone()], "", &s.ca);
    let wrong = client(vec![s.addr.clone()], "drover-admin-0123456789abcdef", &s.ca);
    for (who, c, reason) in [
        ("viewer", &viewer, Reason::Forbidden),
        ("an empty token", &anonymous, Reason::Forbidden),
        ("a wrong token", &wrong, Reason::Forbidden),
    ] {
        let e = c
            .snapshot()
            .await
            .err()
            .unwrap_or_else(|| panic!("{who} took a snapshot"));
        assert_eq!(e.reason(), Some(reason), "{who}: {e}");
        let e = c
            .list_snapshots()
            .await
            .err()
            .unwrap_or_else(|| panic!("{who} listed snapshots"));
        assert_eq!(e.reason(), Some(reason), "{who}: {e}");
    }
    // No credential at all.
    let ch = drover_testkit::grpc_channel(&s.addr, &s.ca).await;
    let e = match pb::cluster_client::ClusterClient::new(ch)
        .snapshot(pb::SnapshotRequest {})
        .await
    {
        Ok(_) => panic!("a snapshot without a credential"),
        Err(e) => e,
    };
    assert_eq!(
        Reason::of(&e),
        Some(Reason::Unauthorized),
        "{}",
        e.message()
    );
    s.shutdown().await;
}

#[tokio::test]
async fn scheduled_snapshots_are_taken_on_the_leader_and_pruned() {
    let tmp = tempfile::tempdir().unwrap();
    let snaps = tmp.path().join("snaps");
    let s = TestServer::start_tuned(&tmp.path().join("s"), |o| {
        o.snapshot_interval = Some(Duration::from_millis(200));
        o.snapshot_retain = 2;
        o.snapshot_dir = Some(snaps.clone());
    })
    .await;
    let c = s.client();
    // Writes between snapshots, so that their revisions differ.
    let seen = std::sync::Mutex::new(std::collections::BTreeSet::new());
    wait_until("five different scheduled snapshots", WAIT, || async {
        let n = seen.lock().unwrap().len();
        let _ = c
            .create(&format!("/k/{n}-{}", rand_suffix()), b"v".to_vec())
            .await;
        if let Ok(l) = c.list_snapshots().await {
            let mut seen = seen.lock().unwrap();
            for i in &l.snapshots {
                seen.insert(i.name.clone());
            }
        }
        seen.lock().unwrap().len() >= 5
    })
    .await;
    let l = c.list_snapshots().await.unwrap();
    assert_eq!(
        l.snapshots.len(),
        2,
        "--snapshot-retain 2: {:?}",
        l.snapshots
    );
    assert!(l.schedule.contains("keeping 2"), "{}", l.schedule);
    for i in &l.snapshots {
        let b = Backup::decode(&std::fs::read(snaps.join(&i.name)).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", i.name));
        assert_eq!(b.header.revision, i.revision);
        assert_eq!(b.kvs.len() as u64, i.objects);
    }
    let mut out = Vec::new();
    drover_cli::snapshot::list(&c, &mut out)
        .await
        .expect("list");
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.contains("MEMBER") && text.contains(&l.snapshots[1].name),
        "{text}"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn force_new_cluster_keeps_every_acknowledged_write_and_refuses_while_members_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let mut servers = start_servers(tmp.path(), 3).await;
    let addrs: Vec<String> = servers.iter().map(|s| s.grpc_addr.to_string()).collect();
    let token = servers[0].identity.admin_token.clone();
    let ca = servers[0].trust.ca.cert_pem().to_string();
    let c = client(addrs.clone(), &token, &ca);
    wait_voters(&c, 3).await;
    let mut acked = Vec::new();
    for i in 0..200 {
        let key = format!("/acked/{i:03}");
        let w = c
            .create(&key, format!("v{i}").into_bytes())
            .await
            .expect("write");
        acked.push((key, w.revision));
    }
    // The survivor: a member that is not the leader, so that it must keep
    // what it has in its log beyond what it knew committed.
    let leader = servers[0].store.leader().leader.unwrap_or(0);
    let survivor = servers
        .iter()
        .position(|s| s.identity.id != leader)
        .expect("a follower");
    let dir = tmp.path().join(format!("m{survivor}"));
    let mut s = servers.remove(survivor);
    // A survivor keeps what its log holds: the member to force is the one
    // with the longest log (`drover cluster status`, docs/operations.md).
    // Here it holds every acknowledged write in its log, applied or not
    // (its commit index may lag a heartbeat: the force applies the rest).
    let last = acked.last().unwrap().1;
    wait_until(
        "the survivor's log holds every acknowledged write",
        WAIT,
        || async { s.store.status().await.is_ok_and(|st| st.last_index >= last) },
    )
    .await;
    s.shutdown().await;
    drop(s);

    // Refused while the others answer.
    let mut o = drover_testkit::restart_options(&dir);
    o.force_new_cluster = true;
    let e = match Server::start(o.clone()).await {
        Ok(_) => panic!("forced a new cluster while its members answer"),
        Err(e) => format!("{e:#}"),
    };
    assert!(e.contains("still answers"), "{e}");

    // The other two are lost for good.
    for mut s in servers {
        s.shutdown().await;
    }
    let r = TestServer::with_options(o, Duration::from_secs(10)).await;
    let c = r.client();
    let st = c.status().await.unwrap();
    let live: Vec<_> = st.members.iter().filter(|m| !m.removed).collect();
    assert_eq!(live.len(), 1, "one member left: {:?}", st.members);
    for (key, rev) in &acked {
        let got = c.get(key, false).await.unwrap().0;
        let got = got.unwrap_or_else(|| panic!("{key} (acknowledged at {rev}) was lost"));
        assert_eq!(got.mod_revision, *rev, "{key}");
    }
    let w = c
        .create("/after/force", b"x".to_vec())
        .await
        .expect("writes again");
    assert!(w.revision > acked.last().unwrap().1);
    r.shutdown().await;
}

#[tokio::test]
async fn force_new_cluster_needs_a_member_data_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let mut o = fast_options(tmp.path().join("empty"));
    o.force_new_cluster = true;
    let e = match Server::start(o).await {
        Ok(_) => panic!("forced a cluster out of nothing"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        e.contains("needs the data dir of a surviving member"),
        "{e}"
    );
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[tokio::test]
async fn removing_a_member_without_a_quorum_says_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let mut servers = start_servers(tmp.path(), 3).await;
    let token = servers[0].identity.admin_token.clone();
    let ca = servers[0].trust.ca.cert_pem().to_string();
    let c = client(vec![servers[0].grpc_addr.to_string()], &token, &ca);
    wait_voters(&c, 3).await;
    let gone = servers[2].identity.id;
    for mut s in servers.drain(1..) {
        s.shutdown().await;
    }
    let e = c
        .remove_member(gone)
        .await
        .expect_err("removed without a quorum");
    assert!(e.to_string().contains("--force-new-cluster"), "{e}");
    for mut s in servers {
        s.shutdown().await;
    }
}

/// Waits until `c`'s cluster has `n` voting members.
async fn wait_voters(c: &drover_cli::Client, n: usize) {
    wait_until(&format!("{n} voters"), WAIT, || async {
        c.status().await.is_ok_and(|s| {
            s.members
                .iter()
                .filter(|m| !m.learner && !m.removed)
                .count()
                == n
        })
    })
    .await;
}
