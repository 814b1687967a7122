//! A node's name belongs to the key that first joined as it (issue 22,
//! finding 3): the node token alone never takes over a node, however long
//! it has been away; the real node always comes back, and only an admin's
//! `delete node` frees the name.

use drover_agent::{AgentOptions, SimConfig};
use drover_api::{Kind, Manifest, Node, ObjectMeta};
use drover_pki::Credential;
use drover_proto::v1 as pb;
use drover_server::api::node_certs::{CERT_ANNOTATION, KEY_ANNOTATION};
use drover_testkit::{
    cert_channel, grpc_channel, quick_tuning, start_sim_agent, wait_until, TestServer,
};
use std::time::Duration;
use tonic::Code;

const WAIT: Duration = Duration::from_secs(20);

/// A join as `name` with the node token and the key of `cred`.
async fn join(
    s: &TestServer,
    name: &str,
    cred: &Credential,
) -> Result<pb::CertifyResponse, tonic::Status> {
    let ch = grpc_channel(&s.addr, &s.ca).await;
    pb::cluster_client::ClusterClient::new(ch)
        .certify(pb::CertifyRequest {
            token: s.node_token.clone(),
            csr: cred.csr_pem.clone(),
            node: name.into(),
            ..Default::default()
        })
        .await
        .map(|r| r.into_inner())
}

fn annotation(n: &Node, key: &str) -> String {
    n.metadata.annotations.get(key).cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_node_that_is_away_keeps_its_name_until_an_admin_deletes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start_tuned(&tmp.path().join("s"), |o| {
        o.controller.node_timeout = Duration::from_secs(2);
    })
    .await;
    let data = tmp.path().join("node-b");
    let options = || {
        let mut o = AgentOptions::new(vec![s.addr.clone()], &s.node_token, "node-b");
        o.tuning = quick_tuning(3);
        o.data_dir = Some(data.clone());
        o.leave_on_stop = false;
        o
    };
    let agent = start_sim_agent(options(), SimConfig::default());
    wait_until("node-b Ready", WAIT, || async {
        s.node("node-b").await.is_some_and(|n| n.is_ready())
    })
    .await;
    let before = s.node("node-b").await.unwrap();
    let serial = annotation(&before, CERT_ANNOTATION);
    let owner = annotation(&before, KEY_ANNOTATION);
    assert_eq!(owner.len(), 64, "the join records the key: {owner:?}");

    // node-b goes away (SIGKILL: nothing said to the server).
    agent.kill().await;
    wait_until("node-b NotReady", WAIT, || async {
        s.node("node-b").await.is_some_and(|n| !n.is_ready())
    })
    .await;

    // A fresh machine with the node token and node-b's name is refused,
    // and nothing of node-b changes.
    let stranger = Credential::generate("x").unwrap();
    let e = join(&s, "node-b", &stranger)
        .await
        .expect_err("the node token takes over a node that is away");
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
    assert!(
        e.message().contains("belongs to the key"),
        "{}",
        e.message()
    );
    assert!(
        e.message().contains("drover delete node node-b"),
        "{}",
        e.message()
    );
    let now = s.node("node-b").await.unwrap();
    assert_eq!(annotation(&now, CERT_ANNOTATION), serial);
    assert_eq!(annotation(&now, KEY_ANNOTATION), owner);

    // The real node comes back from its data dir, with its name.
    let agent = start_sim_agent(options(), SimConfig::default());
    wait_until("node-b Ready again", WAIT, || async {
        s.node("node-b").await.is_some_and(|n| n.is_ready())
    })
    .await;
    assert_eq!(
        annotation(&s.node("node-b").await.unwrap(), KEY_ANNOTATION),
        owner
    );

    // The node itself may join again with the node token (its certificate
    // lost or expired): the same key, a new certificate, even while Ready.
    let kept = Credential::load(&data, "node").unwrap().expect("node.key");
    let again = join(&s, "node-b", &kept.renew_request("x").unwrap())
        .await
        .expect("the owner's key joins again");
    let rebound = s.node("node-b").await.unwrap();
    assert_ne!(annotation(&rebound, CERT_ANNOTATION), serial);
    assert_eq!(annotation(&rebound, KEY_ANNOTATION), owner);
    let ch = cert_channel(&s.addr, &s.ca, &again.cert, &kept.key_pem).await;
    let mut c = pb::cluster_client::ClusterClient::new(ch);
    let renewed = c
        .certify(pb::CertifyRequest {
            csr: kept.renew_request("x").unwrap().csr_pem,
            node: "node-b".into(),
            ..Default::default()
        })
        .await
        .expect("a renewal with the owner's key");
    // A renewal with another key is refused: renewing keeps the key.
    let ch = cert_channel(&s.addr, &s.ca, &renewed.into_inner().cert, &kept.key_pem).await;
    let e = pb::cluster_client::ClusterClient::new(ch)
        .certify(pb::CertifyRequest {
            csr: stranger.csr_pem.clone(),
            node: "node-b".into(),
            ..Default::default()
        })
        .await
        .expect_err("a renewal onto another key");
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
    agent.kill().await;

    // An admin frees the name: then a new machine may take it.
    s.objects
        .delete(Kind::Node, "", "node-b")
        .await
        .expect("delete node");
    join(&s, "node-b", &stranger)
        .await
        .expect("a freed name is free");
    let taken = s.node("node-b").await.unwrap();
    assert_ne!(annotation(&taken, KEY_ANNOTATION), owner);
    s.shutdown().await;
}

#[tokio::test]
async fn a_node_bound_before_keys_were_recorded_is_bound_to_the_key_of_its_next_join() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("s")).await;
    // As an older server left it: a certificate serial, no key, not Ready.
    let mut n = Node {
        metadata: ObjectMeta {
            name: "old-1".into(),
            ..Default::default()
        },
        ..Default::default()
    };
    n.metadata
        .annotations
        .insert(CERT_ANNOTATION.into(), "0badc0de".into());
    s.objects
        .create(Manifest::Node(Box::new(n)))
        .await
        .expect("create");
    let first = Credential::generate("x").unwrap();
    join(&s, "old-1", &first)
        .await
        .expect("the older rule once: a node that is not Ready");
    let bound = s.node("old-1").await.unwrap();
    assert_eq!(annotation(&bound, KEY_ANNOTATION).len(), 64);
    let e = join(&s, "old-1", &Credential::generate("y").unwrap())
        .await
        .expect_err("bound to a key now");
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
    s.shutdown().await;
}
