//! In-process clusters on ephemeral loopback ports: several `Server`s in one
//! test process, each with its own temp data dir, talking real gRPC.
//!
//! Raft runs with a 20 ms tick and a 200 ms election timeout here, so a
//! failover takes well under a second; every wait has a deadline.

use drover_cli::Client;
use drover_proto::v1 as pb;
use drover_server::{Server, ServerOptions};
use drover_testkit::server::{ELECTION_TICKS, TICK};
use drover_testkit::{client, fast_options, grpc_channel, wait_for, wait_until};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tonic::Code;

/// How often [`Cluster::leader`] looks for a leader.
const LEADER_POLL: Duration = Duration::from_millis(5);

fn election_timeout() -> Duration {
    TICK * ELECTION_TICKS as u32
}

struct Member {
    dir: PathBuf,
    server: Option<Server>,
    addr: String,
}

struct Cluster {
    _tmp: tempfile::TempDir,
    members: Vec<Member>,
    token: String,
    node_token: String,
    server_token: String,
    ca: String,
    snapshot_every: u64,
    keep_entries: u64,
}

fn opts(dir: PathBuf, snapshot_every: u64, keep_entries: u64) -> ServerOptions {
    let mut o = fast_options(dir);
    o.snapshot_every = snapshot_every;
    o.keep_entries = keep_entries;
    o
}

impl Cluster {
    async fn start(n: usize) -> Cluster {
        Self::start_with(n, 10_000, 5_000).await
    }

    async fn start_with(n: usize, snapshot_every: u64, keep_entries: u64) -> Cluster {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("m0");
        let first = Server::start(opts(dir.clone(), snapshot_every, keep_entries))
            .await
            .expect("bootstrap");
        let token = first.identity.admin_token.clone();
        let node_token = first.identity.node_token.clone();
        let server_token = first.identity.server_token.clone();
        let ca = first.trust.ca.cert_pem().to_string();
        let addr = first.grpc_addr.to_string();
        let mut c = Cluster {
            _tmp: tmp,
            members: vec![Member {
                dir,
                server: Some(first),
                addr,
            }],
            token,
            node_token,
            server_token,
            ca,
            snapshot_every,
            keep_entries,
        };
        for _ in 1..n {
            c.add_member().await;
        }
        c
    }

    /// Starts one more server that joins through the first live member.
    async fn add_member(&mut self) -> usize {
        let via = self.live().next().expect("a live member").addr.clone();
        self.add_member_via(via).await
    }

    /// Starts one more server that joins through the member at `via`.
    async fn add_member_via(&mut self, via: String) -> usize {
        let i = self.members.len();
        let dir = self._tmp.path().join(format!("m{i}"));
        let mut o = opts(dir.clone(), self.snapshot_every, self.keep_entries);
        o.join = Some(via);
        o.token = Some(self.server_token.clone());
        let s = Server::start(o).await.expect("join");
        assert_eq!(
            s.identity.admin_token, self.token,
            "a joiner learns the admin token"
        );
        let addr = s.grpc_addr.to_string();
        self.members.push(Member {
            dir,
            server: Some(s),
            addr,
        });
        i
    }

    fn live(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|m| m.server.is_some())
    }

    fn client(&self) -> Client {
        client(
            self.live().map(|m| m.addr.clone()).collect(),
            &self.token,
            &self.ca,
        )
    }

    fn client_of(&self, i: usize) -> Client {
        Client::single(&self.members[i].addr, &self.token, &self.ca).expect("client")
    }

    fn server(&self, i: usize) -> &Server {
        self.members[i].server.as_ref().expect("member is running")
    }

    /// The index of the member that currently leads, waiting for one.
    async fn leader(&self) -> usize {
        wait_for(
            "a leader elected",
            election_timeout() * 20,
            LEADER_POLL,
            || async {
                self.members.iter().position(|m| {
                    m.server
                        .as_ref()
                        .is_some_and(|s| s.store.leader().is_leader)
                })
            },
        )
        .await
    }

    async fn stop(&mut self, i: usize) {
        if let Some(mut s) = self.members[i].server.take() {
            s.shutdown().await;
        }
    }

    async fn restart(&mut self, i: usize) {
        assert!(self.members[i].server.is_none());
        // The options of its first start, `127.0.0.1:0` included, as an
        // operator repeats a command line: the member resumes its identity
        // and binds the ports it recorded, not new ones.
        let o = opts(
            self.members[i].dir.clone(),
            self.snapshot_every,
            self.keep_entries,
        );
        let s = Server::start(o).await.expect("restart from the data dir");
        assert_eq!(s.grpc_addr.to_string(), self.members[i].addr);
        assert_eq!(s.http_addr.to_string(), s.identity.http);
        self.members[i].server = Some(s);
    }

    /// Waits until every live member applied the leader's commit index.
    async fn converge(&self) {
        let l = self.leader().await;
        let commit = self.server(l).store.status().await.expect("status").commit;
        for (i, m) in self.members.iter().enumerate() {
            if let Some(s) = &m.server {
                let store = s.store.clone();
                wait_until(
                    &format!("member {i} to apply {commit}"),
                    Duration::from_secs(10),
                    || {
                        let store = store.clone();
                        async move { store.applied() >= commit }
                    },
                )
                .await;
            }
        }
    }

    /// Every member's local view of a prefix.
    async fn local_views(&self, prefix: &str) -> Vec<BTreeMap<String, (Vec<u8>, u64)>> {
        let mut out = Vec::new();
        for m in self.live() {
            let s = m.server.as_ref().expect("live");
            let (kvs, _) = s
                .store
                .list(prefix, drover_store::Consistency::Local)
                .await
                .expect("local list");
            out.push(
                kvs.into_iter()
                    .map(|kv| (kv.key, (kv.value, kv.mod_revision)))
                    .collect(),
            );
        }
        out
    }

    async fn shutdown(mut self) {
        for i in 0..self.members.len() {
            self.stop(i).await;
        }
    }
}

fn code(e: &drover_cli::ClientError) -> Option<Code> {
    e.code()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_members_replicate_every_write() {
    let c = Cluster::start(3).await;
    let client = c.client();
    for i in 0..50 {
        client
            .create(&format!("/r/{i:03}"), format!("v{i}").into_bytes())
            .await
            .expect("write");
    }
    // Writes through a follower are forwarded to the leader.
    let l = c.leader().await;
    let f = (l + 1) % 3;
    let r = c
        .client_of(f)
        .create("/r/via-follower", b"x".to_vec())
        .await
        .expect("forwarded");
    assert!(r.revision > 0);
    c.converge().await;
    let views = c.local_views("/r/").await;
    assert_eq!(views.len(), 3);
    assert_eq!(views[0].len(), 51);
    assert!(views.iter().all(|v| *v == views[0]), "members disagree");
    // A linearizable read on a follower sees the latest write at once.
    let w = client
        .update("/r/000", b"new".to_vec(), 0, false)
        .await
        .expect("update");
    let (kv, rev) = c.client_of(f).get("/r/000", false).await.expect("read");
    assert_eq!(kv.expect("present").value, b"new");
    assert!(rev >= w.revision);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn losing_the_leader_elects_another_and_writes_continue() {
    let mut c = Cluster::start(3).await;
    let client = c.client();
    client
        .create("/f/before", b"1".to_vec())
        .await
        .expect("write");
    let old = c.leader().await;
    let t0 = Instant::now();
    c.stop(old).await;
    // Counted from the end of the shutdown (its grace period is no part
    // of the election): the followers' timers run since the last
    // heartbeat, before that, and fire within twice the election timeout
    // (raft randomises it in 1x..2x); pre-vote and vote are round trips on
    // loopback. The margin of 1 s is for late timers on a loaded 2-core
    // machine; an election that waited for the default timeout (1 s, 2 s
    // randomised) instead of the configured one would exceed it.
    let stopped = Instant::now();
    let new = c.leader().await;
    let elected = stopped.elapsed();
    assert_ne!(new, old);
    let bound = election_timeout() * 2 + Duration::from_secs(1);
    eprintln!(
        "shutdown {:?}, then a new leader after {elected:?}",
        stopped - t0
    );
    assert!(
        elected < bound,
        "a new leader took {elected:?} after the old one stopped (election timeout {:?}, bound {bound:?})",
        election_timeout()
    );
    let client = c.client();
    client
        .create("/f/after", b"2".to_vec())
        .await
        .expect("write after failover");
    let (kvs, _) = client.list("/f/", false).await.expect("list");
    assert_eq!(kvs.len(), 2);
    c.shutdown().await;
}

/// A leader that stops (SIGTERM, a rolling upgrade) hands leadership to
/// another voter first: when its shutdown returns, another member already
/// leads, in a later term, and took the leader's writes with it; the
/// others never wait out an election timeout without a leader, and a
/// client writing to the stopping leader all along is never held up for
/// long.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopping_leader_hands_leadership_over() {
    let mut c = Cluster::start(3).await;
    let client = c.client();
    client
        .create("/h/before", b"1".to_vec())
        .await
        .expect("write");
    let old = c.leader().await;
    let term = c.server(old).store.leader().term;
    // A writer that talks to the leader first, as long as it answers.
    let first = c.members[old].addr.clone();
    let mut servers = vec![first.clone()];
    servers.extend(c.live().map(|m| m.addr.clone()).filter(|a| *a != first));
    let writer = drover_testkit::client(servers, &c.token, &c.ca);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writing = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut slowest = Duration::ZERO;
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = Instant::now();
                writer
                    .create(&format!("/h/w{i}"), b"w".to_vec())
                    .await
                    .expect("a write while the leader stops");
                slowest = slowest.max(t.elapsed());
                i += 1;
            }
            (i, slowest)
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.stop(old).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (n, slowest) = writing.await.expect("the writer");
    eprintln!("{n} writes, the slowest {slowest:?}");
    // A write in flight on the stopping leader goes on to its successor at
    // once. Without waiting for the successor to be heard of, such a write
    // waited (the member, stopping, no longer heard its peers) until the
    // shutdown cut its connection, one second (the grace period) later:
    // the bound is that second, which the fault always reaches.
    assert!(
        slowest < Duration::from_secs(1),
        "a write took {slowest:?} while the leader stopped: held for the shutdown's grace period?"
    );
    // No wait: the handover happened before the shutdown's grace period,
    // during which the stopping leader still sent heartbeats, so without
    // it no other member could lead yet.
    let leaders: Vec<(usize, u64)> = c
        .live()
        .filter_map(|m| m.server.as_ref())
        .map(|s| s.store.leader())
        .enumerate()
        .filter(|(_, l)| l.is_leader)
        .map(|(i, l)| (i, l.term))
        .collect();
    assert_eq!(
        leaders.len(),
        1,
        "one of the others leads as soon as the leader stopped: {leaders:?}"
    );
    assert!(leaders[0].1 > term, "in a later term than {term}");
    let client = c.client();
    client
        .create("/h/after", b"2".to_vec())
        .await
        .expect("write after the handover");
    let (kvs, _) = client.list("/h/", false).await.expect("list");
    assert_eq!(kvs.len(), 2 + n);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_member_has_every_acknowledged_write() {
    let mut c = Cluster::start(3).await;
    let client = c.client();
    let l = c.leader().await;
    let f = (l + 1) % 3;
    let mut acked = BTreeMap::new();
    for i in 0..30 {
        let k = format!("/p/{i:03}");
        client.create(&k, vec![i as u8]).await.expect("write");
        acked.insert(k, vec![i as u8]);
    }
    c.converge().await;
    c.stop(f).await;
    // Writes while it is down, then restart it from its data dir.
    for i in 30..40 {
        let k = format!("/p/{i:03}");
        c.client().create(&k, vec![i as u8]).await.expect("write");
        acked.insert(k, vec![i as u8]);
    }
    c.restart(f).await;
    c.converge().await;
    let s = c.server(f);
    let (kvs, _) = s
        .store
        .list("/p/", drover_store::Consistency::Local)
        .await
        .expect("list");
    let got: BTreeMap<String, Vec<u8>> = kvs.into_iter().map(|kv| (kv.key, kv.value)).collect();
    assert_eq!(got, acked);
    // The whole cluster restarted from disk keeps everything too.
    for i in 0..3 {
        c.stop(i).await;
    }
    for i in 0..3 {
        c.restart(i).await;
    }
    let (kvs, _) = c
        .client()
        .list("/p/", false)
        .await
        .expect("list after full restart");
    assert_eq!(kvs.len(), acked.len());
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_down_during_compaction_catches_up_from_a_snapshot() {
    // Compact every 20 entries, keeping 5: a member that misses 100 writes
    // cannot be served from the log.
    let mut c = Cluster::start_with(3, 20, 5).await;
    let l = c.leader().await;
    let f = (l + 1) % 3;
    c.client()
        .create("/s/first", b"0".to_vec())
        .await
        .expect("write");
    c.converge().await;
    let behind = c.server(f).store.status().await.expect("status").last_index;
    c.stop(f).await;
    let client = c.client();
    for i in 0..100 {
        client
            .create(&format!("/s/{i:03}"), vec![1])
            .await
            .expect("write");
    }
    let leader_first = c
        .server(c.leader().await)
        .store
        .status()
        .await
        .expect("status")
        .first_index;
    assert!(
        leader_first > behind + 1,
        "the leader's log starts at {leader_first}, the member stopped at {behind}: it must need a snapshot"
    );
    c.restart(f).await;
    c.converge().await;
    let views = c.local_views("/s/").await;
    assert_eq!(views[0].len(), 101);
    assert!(
        views.iter().all(|v| *v == views[0]),
        "the snapshot-fed member disagrees"
    );
    // Watching from before the compaction point is refused clearly.
    let err = c.client().watch("/s/", 2).await;
    let err = match err {
        Err(e) => e,
        Ok(mut s) => match s.message().await {
            Err(st) => drover_cli::ClientError::from(st),
            Ok(m) => panic!("watch from a compacted revision answered {m:?}"),
        },
    };
    assert_eq!(code(&err), Some(Code::OutOfRange), "{err}");
    assert!(err.to_string().contains("too old"), "{err}");
    c.shutdown().await;
}

/// Found by the fault testbed (tests/fleet_faults.rs, replace-member): a
/// follower relays `Cluster.Join` to the leader over its own member
/// certificate, and the leader refused it because the certificate was not
/// the joiner's, so a member could only join through the leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_joins_through_a_follower() {
    let mut c = Cluster::start(2).await;
    let l = c.leader().await;
    let follower = c.members[1 - l].addr.clone();
    let third = c.add_member_via(follower).await;
    let st = c.client().status().await.expect("status");
    assert_eq!(st.members.len(), 3);
    assert!(
        st.members.iter().all(|m| !m.learner),
        "the joiner was promoted to voter"
    );
    assert!(c
        .server(third)
        .store
        .status()
        .await
        .expect("status")
        .leader
        .is_some());
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fourth_member_joins_and_a_member_is_removed() {
    let mut c = Cluster::start(3).await;
    let client = c.client();
    for i in 0..20 {
        client
            .create(&format!("/j/{i:03}"), b"x".to_vec())
            .await
            .expect("write");
    }
    let fourth = c.add_member().await;
    // The join returns once the promotion is committed; the member that
    // answers `status` may apply it a moment later.
    let client = c.client();
    wait_until(
        "four voters in the status",
        Duration::from_secs(10),
        || async {
            client
                .status()
                .await
                .is_ok_and(|st| st.members.len() == 4 && st.members.iter().all(|m| !m.learner))
        },
    )
    .await;
    c.converge().await;
    let (kvs, _) = c
        .server(fourth)
        .store
        .list("/j/", drover_store::Consistency::Local)
        .await
        .expect("list");
    assert_eq!(kvs.len(), 20);
    // The joiner's data dir has its own client files.
    let yaml =
        std::fs::read_to_string(c.members[fourth].dir.join("client.yaml")).expect("client.yaml");
    assert!(yaml.contains(&c.token));

    // Remove a follower (not the joiner) from any live member.
    let l = c.leader().await;
    let victim = (0..4)
        .find(|i| *i != l && *i != fourth)
        .expect("a follower");
    let victim_id = c.server(victim).identity.id;
    let left = c
        .client_of(fourth)
        .remove_member(victim_id)
        .await
        .expect("remove");
    assert_eq!(left.len(), 3);
    assert!(left.iter().all(|m| m.id != victim_id));
    // The removed member notices and stops.
    let stopped = tokio::time::timeout(Duration::from_secs(10), c.server(victim).stopped())
        .await
        .expect("the removed member stops");
    assert_eq!(stopped, drover_store::Error::Removed);
    // Its member certificate counts for nothing any more, on every member
    // that applied the removal: wait until the one asked has (the removed
    // member may stop before a follower applies the entry; this raced).
    wait_until(
        "the fourth member applied the removal",
        Duration::from_secs(10),
        || async {
            c.server(fourth)
                .store
                .status()
                .await
                .is_ok_and(|st| !st.members.iter().any(|m| m.id == victim_id && !m.removed))
        },
    )
    .await;
    let victim_tls = c.server(victim).trust.client_tls();
    let ep = drover_pki::net::endpoint(&c.members[fourth].addr).expect("endpoint");
    let ch = drover_pki::net::connect(ep, victim_tls).await.expect("TLS");
    let e = pb::store_client::StoreClient::new(ch)
        .list(pb::ListRequest {
            prefix: "/j/".into(),
            ..Default::default()
        })
        .await
        .expect_err("a removed member's certificate");
    assert_eq!(e.code(), Code::FailedPrecondition, "{}", e.message());
    c.stop(victim).await;
    c.client()
        .create("/j/after-remove", b"y".to_vec())
        .await
        .expect("write after removal");
    // Removing the leader hands leadership over first.
    let l = c.leader().await;
    let leader_id = c.server(l).identity.id;
    let left = c
        .client()
        .remove_member(leader_id)
        .await
        .expect("remove the leader");
    assert_eq!(left.len(), 2);
    c.stop(l).await;
    c.client()
        .create("/j/after-leader-removal", b"z".to_vec())
        .await
        .expect("write");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_gets_clear_errors_and_changes_nothing() {
    let c = Cluster::start(3).await;
    let good = c.client();
    good.create("/b/keep", b"1".to_vec()).await.expect("write");
    let before = good.list("", false).await.expect("list").0;
    let members_before = good.status().await.expect("status").members.len();

    // Wrong admin token: refused, nothing written.
    let wrong = client(vec![c.members[0].addr.clone()], "not-the-token", &c.ca);
    let e = wrong
        .create("/b/evil", b"x".to_vec())
        .await
        .expect_err("wrong token");
    assert_eq!(code(&e), Some(Code::PermissionDenied), "{e}");
    assert!(e.to_string().contains("wrong token"), "{e}");
    let e = wrong
        .remove_member(c.server(1).identity.id)
        .await
        .expect_err("wrong token");
    assert_eq!(code(&e), Some(Code::PermissionDenied));
    // Neither join token is an admin token.
    for t in [&c.node_token, &c.server_token] {
        let joiner = Client::single(&c.members[0].addr, t, &c.ca).expect("client");
        assert_eq!(
            code(&joiner.list("", false).await.expect_err("join token")),
            Some(Code::PermissionDenied)
        );
    }

    // No token at all.
    let ch = grpc_channel(&c.members[1].addr, &c.ca).await;
    let mut raw = pb::store_client::StoreClient::new(ch.clone());
    let e = raw
        .get(pb::GetRequest {
            key: "/b/keep".into(),
            local: false,
        })
        .await
        .expect_err("no token");
    assert_eq!(e.code(), Code::Unauthenticated);

    // Unknown member.
    let e = good
        .remove_member(0x1234)
        .await
        .expect_err("unknown member");
    assert_eq!(code(&e), Some(Code::NotFound));
    assert!(e.to_string().contains("no member"), "{e}");

    // Malformed requests: no op, empty key, CAS on a stale revision.
    let authed = |body| {
        let mut r = tonic::Request::new(body);
        r.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", c.token).parse().expect("ascii"),
        );
        r
    };
    let e = raw
        .write(authed(pb::WriteRequest {
            op: None,
            request_id: 0,
        }))
        .await
        .expect_err("no op");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let e = good.create("", b"x".to_vec()).await.expect_err("empty key");
    assert_eq!(code(&e), Some(Code::InvalidArgument));
    let kv = good
        .get("/b/keep", false)
        .await
        .expect("get")
        .0
        .expect("present");
    let e = good
        .update("/b/keep", b"2".to_vec(), kv.mod_revision + 1000, false)
        .await
        .expect_err("stale CAS");
    assert_eq!(code(&e), Some(Code::Aborted));
    assert!(e.to_string().contains("conflict"), "{e}");
    let e = good.delete("/b/missing", 0).await.expect_err("missing");
    assert_eq!(code(&e), Some(Code::NotFound));

    // Joining without a member certificate, or certifying a member with
    // the node token or a wrong one.
    let mut cl = pb::cluster_client::ClusterClient::new(ch.clone());
    let e = cl
        .join(pb::JoinRequest {
            id: 77,
            addr: "127.0.0.1:1".into(),
            http: String::new(),
        })
        .await
        .expect_err("no member certificate");
    assert_eq!(e.code(), Code::PermissionDenied);
    let csr = drover_pki::Credential::generate("x").expect("key").csr_pem;
    for t in [c.node_token.clone(), "wrong".to_string()] {
        let e = cl
            .certify(pb::CertifyRequest {
                token: t,
                csr: csr.clone(),
                member: 77,
                ..Default::default()
            })
            .await
            .expect_err("not the server token");
        assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
    }

    // Garbage on the raft transport from a non-member: refused before it
    // is read.
    let mut rc = pb::raft_client::RaftClient::new(ch);
    let mut r = tonic::Request::new(pb::RaftBatch {
        from: 5,
        from_addr: String::new(),
        msgs: vec![vec![0xff, 0xff, 0xff]],
    });
    r.metadata_mut().insert(
        "authorization",
        format!("Bearer {}", c.node_token).parse().expect("ascii"),
    );
    assert_eq!(
        rc.send(r).await.expect_err("garbage").code(),
        Code::PermissionDenied
    );
    let r = tonic::Request::new(pb::RaftBatch {
        from: 5,
        from_addr: String::new(),
        msgs: vec![],
    });
    assert_eq!(
        rc.send(r).await.expect_err("no token").code(),
        Code::Unauthenticated
    );

    // Nothing changed.
    let after = good.list("", false).await.expect("list").0;
    assert_eq!(after, before);
    assert_eq!(
        good.status().await.expect("status").members.len(),
        members_before
    );
    c.shutdown().await;
}

/// A list on a follower is served from its informer's memory (ConfigMaps
/// are a kind it holds) and still holds every write acknowledged before
/// it, however little time the follower had to apply it: the list waits
/// for a ReadIndex round and then for the informer to reach the store's
/// last change (`Informer::consistent_view`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_list_on_a_follower_holds_every_write_acknowledged_before_it() {
    let c = Cluster::start(3).await;
    let l = c.leader().await;
    let leader = c.client_of(l);
    let follower = c.client_of((l + 1) % 3);
    let mut last_rv = 0u64;
    for i in 0..40 {
        let name = format!("cm-{i:02}");
        let applied = leader
            .apply(
                &format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{i: \"{i}\"}}\n"
                ),
                false,
            )
            .await
            .expect("apply");
        let written: u64 = applied[0]
            .object
            .metadata()
            .resource_version
            .parse()
            .expect("a revision");
        let listed = follower
            .list_objects("configmaps", "", "")
            .await
            .expect("list on the follower");
        let names: Vec<&str> = listed.items.iter().map(|m| m.name()).collect();
        assert!(
            names.contains(&name.as_str()),
            "write {i} (revision {written}) acknowledged, then missing from the follower's list at {}: {names:?}",
            listed.resource_version
        );
        assert_eq!(names.len(), i + 1, "{names:?}");
        let rv: u64 = listed.resource_version.parse().expect("a revision");
        assert!(
            rv >= written && rv >= last_rv,
            "list at {rv} after a write at {written}"
        );
        last_rv = rv;
    }
    c.shutdown().await;
}
