//! The attacks of the security issue, each against a real member over its
//! TLS port: what a node certificate, a join token, a stranger and a
//! plaintext client may not do, revocation, renewal, rotation and client
//! certificates. Every refusal is checked to change nothing.

use drover_api::{Kind, Manifest};
use drover_pki::{Credential, Role};
use drover_proto::v1::{self as pb};
use drover_server::api::node_certs::CERT_ANNOTATION;
use drover_testkit::{
    authed, cert_channel, grpc_channel, node_certificate, open_session, sim_options, wait_until,
    AgentSession, TestServer,
};
use protobuf::Message as _;
use std::time::{Duration, Instant, SystemTime};
use tonic::transport::Channel;
use tonic::Code;

const WAIT: Duration = Duration::from_secs(15);

fn hello(name: &str) -> pb::Hello {
    let node = serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}});
    pb::Hello {
        node: serde_json::to_vec(&node).unwrap(),
        agent_version: "test".into(),
        ..Default::default()
    }
}

/// Opens an agent session on `ch` as `name`: the inbound stream once the
/// welcome came, with the sender that keeps it open.
async fn session(ch: Channel, name: &str) -> Result<AgentSession, tonic::Status> {
    let (tx, mut down) = open_session(ch, hello(name)).await?;
    match down.message().await? {
        Some(pb::ServerMessage {
            msg: Some(pb::server_message::Msg::Welcome(_)),
        }) => Ok((tx, down)),
        other => panic!("expected a welcome, got {other:?}"),
    }
}

/// Everything the store holds, as (key, revision) pairs.
async fn everything(s: &TestServer) -> Vec<(String, u64)> {
    s.client()
        .list("", false)
        .await
        .expect("list")
        .0
        .into_iter()
        .map(|kv| (kv.key, kv.mod_revision))
        .collect()
}

fn refused<T: std::fmt::Debug>(what: &str, r: Result<T, tonic::Status>) {
    let e = r.expect_err(what);
    assert!(
        matches!(e.code(), Code::PermissionDenied | Code::Unauthenticated),
        "{what}: {:?} {}",
        e.code(),
        e.message()
    );
}

#[tokio::test]
async fn a_node_certificate_may_call_nothing_but_its_own_session() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("s")).await;
    s.apply("apiVersion: v1\nkind: Pod\nmetadata: {name: victim}\nspec:\n  nodeName: other\n  containers: [{name: c, image: busybox}]\n")
        .await;
    let (cert, key) = node_certificate(&s.addr, &s.ca, &s.node_token, "n1").await;
    let ch = cert_channel(&s.addr, &s.ca, &cert, &key).await;
    let before = everything(&s).await;
    let members_before = s.server.store.members();
    let term_before = s.server.store.leader().term;

    let mut objects = pb::objects_client::ObjectsClient::new(ch.clone());
    let evil = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: evil}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:\n      hostPID: true\n      containers: [{name: c, image: busybox, securityContext: {privileged: true}}]\n";
    refused(
        "apply",
        objects
            .apply(pb::ApplyRequest {
                manifests: evil.into(),
                dry_run: false,
                ..Default::default()
            })
            .await,
    );
    // Nor a Deployment or a ReplicaSet (pods a node could make run anywhere).
    let evil_deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: evil}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec: {containers: [{name: c, image: busybox}]}\n";
    for evil in [
        evil_deployment.to_owned(),
        evil_deployment.replace("kind: Deployment", "kind: ReplicaSet"),
    ] {
        refused(
            "apply a Deployment or ReplicaSet",
            objects
                .apply(pb::ApplyRequest {
                    manifests: evil,
                    dry_run: false,
                    ..Default::default()
                })
                .await,
        );
    }
    refused(
        "list deployments",
        objects
            .list(pb::ListObjectsRequest {
                kind: "deployments".into(),
                ..Default::default()
            })
            .await,
    );
    let victim = pb::ObjectRef {
        kind: "pod".into(),
        namespace: "default".into(),
        name: "victim".into(),
    };
    refused("get another node's pod", objects.get(victim.clone()).await);
    refused("delete", objects.delete(victim).await);
    refused(
        "list",
        objects
            .list(pb::ListObjectsRequest {
                kind: "pods".into(),
                ..Default::default()
            })
            .await,
    );
    let mut store = pb::store_client::StoreClient::new(ch.clone());
    refused(
        "kv get",
        store
            .get(pb::GetRequest {
                key: "/registry/nodes/other".into(),
                local: true,
            })
            .await,
    );
    refused(
        "kv write",
        store
            .write(pb::WriteRequest {
                op: Some(pb::Op {
                    op: Some(pb::op::Op::Delete(pb::Delete {
                        key: "/registry/pods/default/victim".into(),
                        expected_revision: 0,
                    })),
                }),
                request_id: 1,
            })
            .await,
    );
    let mut cluster = pb::cluster_client::ClusterClient::new(ch.clone());
    refused("status", cluster.status(pb::StatusRequest {}).await);
    refused(
        "remove member",
        cluster
            .remove_member(pb::RemoveMemberRequest {
                id: s.server.ctx.id,
            })
            .await,
    );
    refused(
        "rotate a token",
        cluster
            .rotate_token(pb::RotateTokenRequest {
                kind: "node".into(),
            })
            .await,
    );
    let csr = Credential::generate("x").unwrap().csr_pem;
    refused(
        "issue an admin certificate",
        cluster
            .issue_client(pb::IssueClientRequest {
                name: "me".into(),
                role: "admin".into(),
                ttl_seconds: 0,
                csr: csr.clone(),
            })
            .await,
    );
    refused(
        "join as a member",
        cluster
            .join(pb::JoinRequest {
                id: 0x77,
                addr: "127.0.0.1:1".into(),
                http: String::new(),
            })
            .await,
    );
    refused(
        "renew another node's certificate",
        cluster
            .certify(pb::CertifyRequest {
                csr: csr.clone(),
                node: "other".into(),
                ..Default::default()
            })
            .await,
    );
    let mut pods = pb::pods_client::PodsClient::new(ch.clone());
    refused(
        "exec",
        pods.exec(pb::PodExecRequest {
            pod: "victim".into(),
            command: vec!["sh".into()],
            ..Default::default()
        })
        .await,
    );
    // The exec with stdin is refused before its first message is read.
    refused(
        "exec with stdin",
        pods.exec_stream(tokio_stream::iter([pb::PodExecInput {
            start: Some(pb::PodExecRequest {
                pod: "victim".into(),
                command: vec!["sh".into()],
                stdin: true,
                ..Default::default()
            }),
            ..Default::default()
        }]))
        .await,
    );
    refused(
        "logs",
        pods.logs(pb::PodLogsRequest {
            pod: "victim".into(),
            ..Default::default()
        })
        .await,
    );
    refused(
        "locate",
        pods.locate(pb::LocateRequest {
            node: "other".into(),
        })
        .await,
    );

    // Raft: a heartbeat from the leader's own id at a far higher term
    // (it would depose the leader), and relayed heartbeats keeping a dead
    // node Ready.
    let mut raft = pb::raft_client::RaftClient::new(ch);
    let mut m = raft::eraftpb::Message::default();
    m.set_msg_type(raft::eraftpb::MessageType::MsgHeartbeat);
    m.from = s.server.ctx.id;
    m.to = s.server.ctx.id;
    m.term = term_before + 100;
    let forged = pb::RaftBatch {
        from: s.server.ctx.id,
        from_addr: String::new(),
        msgs: vec![m.write_to_bytes().unwrap()],
    };
    refused("a forged raft heartbeat", raft.send(forged.clone()).await);
    refused(
        "a forged raft heartbeat on a stream",
        raft.stream(tokio_stream::iter([forged])).await,
    );
    refused(
        "relayed heartbeats",
        raft.heartbeats(pb::HeartbeatBatch {
            nodes: vec!["other".into()],
        })
        .await,
    );

    // Nothing changed: objects, membership, term.
    assert_eq!(everything(&s).await, before);
    assert_eq!(s.server.store.members(), members_before);
    assert_eq!(s.server.store.leader().term, term_before);
    assert!(s.server.store.leader().is_leader);
    assert!(!s.server.ctx.heartbeats.snapshot().contains_key("other"));
    s.shutdown().await;
}

#[tokio::test]
async fn raft_messages_are_taken_only_from_the_member_that_signs_them() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("s")).await;
    let term = s.server.store.leader().term;
    // A certificate of another member id (as a removed or stray member
    // would hold) cannot speak for this member.
    let (issued, key) = s
        .server
        .trust
        .ca
        .issue(
            &Role::Member(0x5eed),
            &[],
            Duration::from_secs(60),
            SystemTime::now(),
        )
        .unwrap();
    let ch = cert_channel(&s.addr, &s.ca, &issued.cert_pem, &key).await;
    let mut raft = pb::raft_client::RaftClient::new(ch);
    let mut m = raft::eraftpb::Message::default();
    m.set_msg_type(raft::eraftpb::MessageType::MsgHeartbeat);
    m.from = s.server.ctx.id;
    m.term = term + 100;
    let as_other = pb::RaftBatch {
        from: s.server.ctx.id,
        from_addr: String::new(),
        msgs: vec![m.write_to_bytes().unwrap()],
    };
    let e = raft
        .send(as_other.clone())
        .await
        .expect_err("sent as another member");
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
    // The same on a stream: its first batch ends it.
    let e = raft
        .stream(tokio_stream::iter([as_other]))
        .await
        .expect_err("streamed as another member");
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());

    // Anonymous, even with a join token: refused before it is read.
    let own = pb::RaftBatch {
        from: 0x5eed,
        from_addr: String::new(),
        msgs: vec![m.write_to_bytes().unwrap()],
    };
    let token = &s.server.identity.server_token;
    let mut anon = pb::raft_client::RaftClient::new(grpc_channel(&s.addr, &s.ca).await);
    let r = anon.send(authed(own.clone(), token)).await;
    refused("raft with the server token", r);
    let r = anon.stream(authed(tokio_stream::iter([own]), token)).await;
    refused("a raft stream with the server token", r);
    assert_eq!(s.server.store.leader().term, term);
    assert!(s.server.store.leader().is_leader);
    s.shutdown().await;
}

#[tokio::test]
async fn raft_messages_from_a_member_certificate_of_no_member_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("s")).await;
    let term = s.server.store.leader().term;
    // A member certificate the CA signed for an id the cluster never added
    // (a leaked CA signature, a member that never joined): it speaks for
    // that id, and that id is not a member.
    let stranger = 0x5eed_u64;
    assert!(!s.server.store.members().contains_key(&stranger));
    let (issued, key) = s
        .server
        .trust
        .ca
        .issue(
            &Role::Member(stranger),
            &[],
            Duration::from_secs(60),
            SystemTime::now(),
        )
        .unwrap();
    let ch = cert_channel(&s.addr, &s.ca, &issued.cert_pem, &key).await;
    let mut raft = pb::raft_client::RaftClient::new(ch);
    let mut m = raft::eraftpb::Message::default();
    m.set_msg_type(raft::eraftpb::MessageType::MsgHeartbeat);
    m.from = stranger;
    m.to = s.server.ctx.id;
    m.term = term + 100;
    let own = pb::RaftBatch {
        from: stranger,
        from_addr: "127.0.0.1:1".into(),
        msgs: vec![m.write_to_bytes().unwrap()],
    };
    let e = raft
        .send(own.clone())
        .await
        .expect_err("raft from a certificate of no member");
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
    let e = raft
        .stream(tokio_stream::iter([own]))
        .await
        .expect_err("a raft stream from a certificate of no member");
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
    // Nothing changed: same term, still the leader, no peer learnt.
    assert_eq!(s.server.store.leader().term, term);
    assert!(s.server.store.leader().is_leader);
    assert!(!s.server.store.members().contains_key(&stranger));
    s.shutdown().await;
}

#[tokio::test]
async fn plaintext_and_clients_of_another_ca_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("s")).await;
    // Plain HTTP/2 (h2c) on the TLS port.
    let plain = tonic::transport::Endpoint::from_shared(format!("http://{}", s.addr))
        .unwrap()
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(2));
    if let Ok(ch) = plain.connect().await {
        let r = pb::cluster_client::ClusterClient::new(ch)
            .status(authed(pb::StatusRequest {}, &s.server.identity.admin_token))
            .await;
        assert!(r.is_err(), "a plaintext call was answered");
    }
    // A client that trusts another CA refuses the server.
    let other = drover_pki::Ca::create("other", SystemTime::now()).unwrap();
    let tls = drover_pki::tls::client_config(other.cert_pem(), None).unwrap();
    let ep = drover_pki::net::endpoint(&s.addr).unwrap();
    assert!(drover_pki::net::connect(ep, tls).await.is_err());
    // A node token pinned to another CA: the joiner refuses to send it.
    let pinned = drover_pki::tls::pinned_client_config(other.digest()).unwrap();
    let ep = drover_pki::net::endpoint(&s.addr).unwrap();
    let e = drover_pki::net::connect(ep, pinned)
        .await
        .expect_err("pinned to another CA");
    let said = drover_pki::tls::ca_mismatch(&e).expect("a typed refusal");
    assert!(said.contains("does not present the CA"), "{said}");
    // Plain HTTP on the HTTPS port gets no HTTP answer.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut t = tokio::net::TcpStream::connect(s.server.http_addr)
        .await
        .unwrap();
    t.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), t.read_to_end(&mut buf)).await;
    assert!(!buf.starts_with(b"HTTP/1.1 200"), "plain HTTP was answered");
    s.shutdown().await;
}

#[tokio::test]
async fn a_name_held_by_a_ready_node_is_refused_and_a_deleted_node_is_revoked_within_a_second() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("s")).await;
    let (cert, key) = node_certificate(&s.addr, &s.ca, &s.node_token, "n1").await;
    let ch = cert_channel(&s.addr, &s.ca, &cert, &key).await;
    let (_tx, mut down) = session(ch.clone(), "n1").await.expect("session");
    wait_until("n1 Ready", WAIT, || async {
        s.node("n1").await.is_some_and(|n| n.is_ready())
    })
    .await;
    let bound = s.node("n1").await.unwrap().metadata.annotations[CERT_ANNOTATION].clone();

    // Another machine with the node token cannot take n1's name.
    let csr = Credential::generate("x").unwrap().csr_pem;
    let anon = grpc_channel(&s.addr, &s.ca).await;
    let e = pb::cluster_client::ClusterClient::new(anon)
        .certify(pb::CertifyRequest {
            token: s.node_token.clone(),
            csr,
            node: "n1".into(),
            ..Default::default()
        })
        .await
        .expect_err("a Ready node's name");
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
    assert!(
        e.message().contains("belongs to the key"),
        "{}",
        e.message()
    );
    assert_eq!(
        s.node("n1").await.unwrap().metadata.annotations[CERT_ANNOTATION],
        bound
    );

    // Deleting the node ends its session within a second.
    let t = Instant::now();
    s.objects
        .delete(Kind::Node, "", "n1")
        .await
        .expect("delete");
    let ended = tokio::time::timeout(Duration::from_secs(1), async {
        loop {
            match down.message().await {
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => return,
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the session outlived the deletion by 1 s");
    eprintln!("session closed {:?} after the delete", t.elapsed());
    // And the certificate opens no session and renews nothing any more.
    let e = session(ch.clone(), "n1").await.expect_err("revoked");
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
    let e = pb::cluster_client::ClusterClient::new(ch)
        .certify(pb::CertifyRequest {
            csr: Credential::generate("x").unwrap().csr_pem,
            node: "n1".into(),
            ..Default::default()
        })
        .await
        .expect_err("renewal of a revoked certificate");
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
    assert!(s.node("n1").await.is_none(), "nothing came back");
    s.shutdown().await;
}

#[tokio::test]
async fn short_lived_node_certificates_renew_without_the_node_leaving_ready() {
    let tmp = tempfile::tempdir().unwrap();
    // 6 s certificates: renewed every 4 s.
    let s = TestServer::start_tuned(&tmp.path().join("s"), |o| {
        o.node_cert_ttl = Duration::from_secs(6);
    })
    .await;
    let mut o = sim_options(vec![s.addr.clone()], &s.node_token, "r-", 1);
    o.tuning.seed = Some(7);
    let sim = drover_agent::Sim::start(o).expect("sim");
    wait_until("r-0 Ready", WAIT, || async {
        s.node("r-0").await.is_some_and(|n| n.is_ready())
    })
    .await;
    let mut serials =
        vec![s.node("r-0").await.unwrap().metadata.annotations[CERT_ANNOTATION].clone()];
    // Three renewals (14 s), Ready at every look.
    let deadline = Instant::now() + Duration::from_secs(14);
    while Instant::now() < deadline {
        let n = s.node("r-0").await.expect("r-0 exists");
        assert!(n.is_ready(), "r-0 turned NotReady during a renewal");
        let serial = n.metadata.annotations[CERT_ANNOTATION].clone();
        if serials.last() != Some(&serial) {
            serials.push(serial);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        serials.len() >= 3,
        "at least two renewals in 14 s of 6 s certificates: {serials:?}"
    );
    sim.shutdown().await;
    s.shutdown().await;
}

#[tokio::test]
async fn viewers_read_admins_write_and_a_rotated_token_replaces_the_old_one() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("s")).await;
    let admin = s.client();
    let issue = |role: &'static str| {
        let admin = admin.clone();
        async move {
            let cred = Credential::generate("x").unwrap();
            let r = admin
                .issue_client(pb::IssueClientRequest {
                    name: format!("{role}-1"),
                    role: role.into(),
                    ttl_seconds: 3600,
                    csr: cred.csr_pem.clone(),
                })
                .await
                .expect("issue");
            drover_cli::Client::new(&drover_cli::ClientConfig {
                servers: r.servers,
                ca: r.ca,
                cert: r.cert,
                key: cred.key_pem,
                ..Default::default()
            })
            .expect("client")
        }
    };
    let viewer = issue("viewer").await;
    let writer = issue("admin").await;
    let ds = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:\n      containers: [{name: c, image: busybox}]\n";
    let e = viewer.apply(ds, false).await.expect_err("a viewer applies");
    assert_eq!(e.code(), Some(Code::PermissionDenied), "{e}");
    assert!(viewer
        .list_objects("ds", "", "")
        .await
        .expect("list")
        .items
        .is_empty());
    writer
        .apply(ds, false)
        .await
        .expect("an admin certificate applies");
    assert_eq!(
        viewer.list_objects("ds", "", "").await.unwrap().items.len(),
        1
    );
    assert!(matches!(
        viewer.get_object("ds", "default", "d").await,
        Ok(Manifest::DaemonSet(_))
    ));

    // Rotation: the old node token makes no certificate, the new one does.
    let old = s.node_token.clone();
    let new = admin.rotate_token("node").await.expect("rotate");
    assert_ne!(new, old);
    let anon = grpc_channel(&s.addr, &s.ca).await;
    let e = pb::cluster_client::ClusterClient::new(anon.clone())
        .certify(pb::CertifyRequest {
            token: old,
            csr: Credential::generate("x").unwrap().csr_pem,
            node: "late".into(),
            ..Default::default()
        })
        .await
        .expect_err("the old token");
    assert_eq!(e.code(), Code::PermissionDenied);
    let (cert, _) = node_certificate(&s.addr, &s.ca, &new, "late").await;
    assert!(cert.contains("BEGIN CERTIFICATE"));
    wait_until("node-token rewritten", WAIT, || async {
        std::fs::read_to_string(s.dir.join("node-token")).is_ok_and(|t| t.trim() == new)
    })
    .await;
    s.shutdown().await;
}

#[tokio::test]
async fn idle_connections_do_not_keep_a_client_waiting() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("s")).await;
    // 2,000 connections that never say hello (the fd limit of the test
    // process bounds how many one test can hold), from two addresses other
    // than the client's, 1,000 each (below the cap of one address).
    let mut idle = Vec::new();
    for i in 0..2000 {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        let from = if i % 2 == 0 {
            "127.0.0.2:0"
        } else {
            "127.0.0.3:0"
        };
        sock.bind(from.parse().unwrap()).unwrap();
        idle.push(sock.connect(s.server.grpc_addr).await.unwrap());
    }
    let c = s.client();
    let t = Instant::now();
    c.status().await.expect("a normal client is answered");
    // Were the listener to wait on the idle connections' handshakes, the
    // client would wait out a handshake timeout (10 s) at least; half of
    // it leaves a loaded 2-core machine seconds for one TLS call.
    let bound = drover_pki::net::Limits::default().handshake_timeout / 2;
    eprintln!("status beside 2,000 idle connections: {:?}", t.elapsed());
    assert!(
        t.elapsed() < bound,
        "took {:?} beside 2,000 idle connections (bound {bound:?})",
        t.elapsed()
    );
    drop(idle);
    s.shutdown().await;
}

#[tokio::test]
async fn a_join_that_does_not_catch_up_leaves_no_learner_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start_tuned(&tmp.path().join("s"), |o| {
        o.join_catch_up = Duration::from_secs(2);
    })
    .await;
    // A member certificate for an id whose address nobody answers on (as a
    // joiner that dies after certifying would leave).
    let (issued, key) = s
        .server
        .trust
        .ca
        .issue(
            &Role::Member(0x77),
            &[],
            Duration::from_secs(60),
            SystemTime::now(),
        )
        .unwrap();
    let ch = cert_channel(&s.addr, &s.ca, &issued.cert_pem, &key).await;
    let mut req = tonic::Request::new(pb::JoinRequest {
        id: 0x77,
        addr: "127.0.0.1:1".into(),
        http: String::new(),
    });
    req.set_timeout(Duration::from_secs(30));
    let e = pb::cluster_client::ClusterClient::new(ch)
        .join(req)
        .await
        .expect_err("a joiner that never catches up");
    assert!(e.message().contains("removed"), "{}", e.message());
    let members = s.server.store.members();
    assert!(
        members.get(&0x77).is_none_or(|m| m.removed),
        "the learner is gone: {members:?}"
    );
    assert!(!members.values().any(|m| m.learner && !m.removed));
    let cfg = drover_cli::ClientConfig::load(&s.dir.join("client.yaml")).unwrap();
    assert_eq!(
        cfg.servers,
        vec![s.addr.clone()],
        "client.yaml names voters only"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn a_data_dir_from_before_tls_is_refused_with_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("old");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("server.json"),
        r#"{"id":"00000000000000ab","addr":"127.0.0.1:0","http":"127.0.0.1:0","join_token":"drover-join-x","admin_token":"drover-admin-y"}"#,
    )
    .unwrap();
    let e = match drover_server::Server::start(drover_testkit::loopback_options(&dir)).await {
        Ok(_) => panic!("a pre-TLS data dir was resumed"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        e.contains("before TLS") && e.contains("empty data dir"),
        "{e}"
    );
}

/// Events in a `PodEvents` message about pod `p` (name, namespace, uid).
fn pod_events(p: &drover_api::Pod, names: &[&str]) -> pb::AgentMessage {
    let events = names
        .iter()
        .map(|n| pb::PodEvent {
            namespace: p.metadata.namespace.clone(),
            pod: p.metadata.name.clone(),
            uid: p.metadata.uid.clone(),
            field_path: "spec.containers{c}".into(),
            name: format!("{}.{n}", p.metadata.name),
            r#type: "Warning".into(),
            reason: "BackOff".into(),
            message: "Back-off restarting failed container c".into(),
            count: 3,
            first_timestamp: "2024-05-03T15:00:00Z".into(),
            last_timestamp: "2024-05-03T15:01:00Z".into(),
        })
        .collect();
    pb::AgentMessage {
        msg: Some(pb::agent_message::Msg::Events(pb::PodEvents { events })),
    }
}

/// The events about `pod`, but the pod garbage collector's (its
/// NodeNotFound: the tests' pods are bound to a node whose Node was never
/// made).
async fn events_about(s: &TestServer, pod: &str) -> Vec<drover_api::Event> {
    let (list, _) = s
        .objects
        .list(Kind::Event, None, None)
        .await
        .expect("list events");
    list.into_iter()
        .filter_map(|m| match m {
            Manifest::Event(e)
                if e.involved_object.name == pod
                    && e.source.component != "pod-garbage-collector" =>
            {
                Some(*e)
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_node_writes_events_about_its_own_pods_only() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("s")).await;
    for (pod, node) in [("mine", "n1"), ("victim", "other")] {
        s.apply(&format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {pod}}}\nspec:\n  nodeName: {node}\n  containers: [{{name: c, image: busybox}}]\n"))
            .await;
    }
    let mine = s.pod("mine").await.expect("mine");
    let victim = s.pod("victim").await.expect("victim");
    let (cert, key) = node_certificate(&s.addr, &s.ca, &s.node_token, "n1").await;
    let ch = cert_channel(&s.addr, &s.ca, &cert, &key).await;
    let (tx, _down) = session(ch, "n1").await.expect("n1's own session");

    // About another node's pod (with its true uid): dropped.
    tx.send(pod_events(&victim, &["a1"])).await.unwrap();
    // About its own pod but with another uid: dropped.
    let mut other_uid = mine.clone();
    other_uid.metadata.uid = "not-the-uid".into();
    tx.send(pod_events(&other_uid, &["a2"])).await.unwrap();
    // More than the limit in one message: refused whole.
    let many: Vec<String> = (0..101).map(|i| format!("{i:x}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    tx.send(pod_events(&mine, &many)).await.unwrap();
    // Then a good one: once it is written, the ones before were handled.
    tx.send(pod_events(&mine, &["b1"])).await.unwrap();
    wait_until("n1's event about its own pod", WAIT, || async {
        !events_about(&s, "mine").await.is_empty()
    })
    .await;
    let written = events_about(&s, "mine").await;
    assert_eq!(written.len(), 1, "only the good one: {written:?}");
    let e = &written[0];
    assert_eq!(e.metadata.name, "mine.b1");
    assert_eq!(e.source.component, "kubelet");
    assert_eq!(e.source.host, "n1");
    assert_eq!(e.count, Some(3));
    assert!(events_about(&s, "victim").await.is_empty());

    // The same name again with a new count updates it; a node cannot take
    // over another node's event by its name either.
    let mut again = pod_events(&mine, &["b1"]);
    if let Some(pb::agent_message::Msg::Events(ev)) = &mut again.msg {
        ev.events[0].count = 7;
    }
    tx.send(again).await.unwrap();
    wait_until("the count to grow", WAIT, || async {
        events_about(&s, "mine").await.first().and_then(|e| e.count) == Some(7)
    })
    .await;
    assert_eq!(events_about(&s, "mine").await.len(), 1);

    // An Event of that shape that is not this node's (the scheduler's) is
    // not taken over by reporting its name.
    s.apply("apiVersion: v1\nkind: Event\nmetadata: {name: mine.c1}\ninvolvedObject: {kind: Pod, name: mine}\nreason: Scheduled\nmessage: theirs\ntype: Normal\nsource: {component: default-scheduler}\n")
        .await;
    tx.send(pod_events(&mine, &["c1"])).await.unwrap();
    tx.send(pod_events(&mine, &["d1"])).await.unwrap();
    wait_until("the next event", WAIT, || async {
        events_about(&s, "mine")
            .await
            .iter()
            .any(|e| e.metadata.name == "mine.d1")
    })
    .await;
    let theirs = events_about(&s, "mine").await;
    let theirs = theirs
        .iter()
        .find(|e| e.metadata.name == "mine.c1")
        .expect("the scheduler's event");
    assert_eq!(theirs.message, "theirs", "unchanged");
    assert_eq!(theirs.source.component, "default-scheduler");
    s.shutdown().await;
}
