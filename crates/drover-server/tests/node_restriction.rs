//! The attacks of the second audit (issue 22) that a node certificate
//! makes through its own agent session, against a real member over its
//! TLS port: static pods whose mirror would make the server send the node
//! Secrets and ConfigMaps it has no pod for, mirror pods in namespaces
//! that do not exist, reports too large, and parallel sessions of one node.

use drover_proto::v1::{self as pb};
use drover_server::limits::MAX_STATIC_PODS_PER_REPORT;
use drover_testkit::{
    cert_channel, node_certificate, open_session, wait_until, AgentSession, TestServer,
};
use serde_json::{json, Value};
use std::time::Duration;
use tonic::transport::Channel;
use tonic::Streaming;

const WAIT: Duration = Duration::from_secs(15);

type Session = AgentSession;

fn hello(name: &str) -> pb::Hello {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}});
    pb::Hello {
        node: serde_json::to_vec(&node).unwrap(),
        agent_version: "test".into(),
        ..Default::default()
    }
}

/// An agent session on `ch` as `name`, once the welcome came.
async fn session(ch: Channel, name: &str) -> Session {
    let (tx, mut down) = open_session(ch, hello(name)).await.expect("session");
    match down.message().await.expect("welcome") {
        Some(pb::ServerMessage {
            msg: Some(pb::server_message::Msg::Welcome(_)),
        }) => (tx, down),
        other => panic!("expected a welcome, got {other:?}"),
    }
}

/// A static pod of node `node` as an agent reports it, with `spec` merged
/// over a minimal one.
fn static_pod(ns: &str, name: &str, node: &str, extra_spec: Value) -> Value {
    let mut spec = json!({"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]});
    for (k, v) in extra_spec.as_object().unwrap() {
        spec[k] = v.clone();
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{ns}-{name}")},
        "spec": spec,
    })
}

fn report(pods: &[Value]) -> pb::AgentMessage {
    pb::AgentMessage {
        msg: Some(pb::agent_message::Msg::StaticPods(pb::StaticPods {
            pods: pods
                .iter()
                .map(|p| serde_json::to_vec(p).unwrap())
                .collect(),
        })),
    }
}

async fn mirror_exists(s: &TestServer, ns: &str, name: &str) -> bool {
    s.pods(Some(ns))
        .await
        .iter()
        .any(|p| p.metadata.name == name && p.is_mirror())
}

/// Reads the session until a pod list naming `pod` comes; answers every
/// Secret name the session was sent before it.
async fn secrets_sent_until_pod(down: &mut Streaming<pb::ServerMessage>, pod: &str) -> Vec<String> {
    let mut secrets = Vec::new();
    let read = async {
        loop {
            let m = down.message().await.expect("session").expect("open");
            match m.msg {
                Some(pb::server_message::Msg::Config(c)) => {
                    for s in &c.secrets {
                        let v: Value = serde_json::from_slice(s).unwrap();
                        secrets.push(format!(
                            "{}/{}",
                            v["metadata"]["namespace"].as_str().unwrap_or(""),
                            v["metadata"]["name"].as_str().unwrap_or("")
                        ));
                    }
                }
                Some(pb::server_message::Msg::Pods(p)) => {
                    let names: Vec<String> = p
                        .pods
                        .iter()
                        .map(|b| {
                            let v: Value = serde_json::from_slice(b).unwrap();
                            v["metadata"]["name"].as_str().unwrap_or("").to_string()
                        })
                        .collect();
                    if names.iter().any(|n| n == pod) {
                        return;
                    }
                }
                _ => {}
            }
        }
    };
    tokio::time::timeout(WAIT, read)
        .await
        .expect("the pod list with the benign mirror");
    secrets
}

#[tokio::test]
async fn a_node_cannot_mirror_a_static_pod_that_references_secrets_configmaps_or_owners() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("s")).await;
    s.apply("apiVersion: v1\nkind: Secret\nmetadata: {name: db-creds, namespace: prod}\nstringData: {password: hunter2}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: prod}\ndata: {k: v}\n")
        .await;
    let (cert, key) = node_certificate(&s.addr, &s.ca, &s.node_token, "n1").await;
    let ch = cert_channel(&s.addr, &s.ca, &cert, &key).await;
    let (tx, mut down) = session(ch, "n1").await;

    let attacks = [
        static_pod(
            "prod",
            "vol",
            "n1",
            json!({"volumes": [{"name": "v", "secret": {"secretName": "db-creds"}}]}),
        ),
        static_pod(
            "prod",
            "env",
            "n1",
            json!({"containers": [{"name": "c", "image": "busybox", "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "db-creds", "key": "password"}}}]}]}),
        ),
        static_pod(
            "prod",
            "envfrom",
            "n1",
            json!({"containers": [{"name": "c", "image": "busybox", "envFrom": [{"configMapRef": {"name": "settings"}}]}]}),
        ),
        static_pod(
            "prod",
            "projected",
            "n1",
            json!({"volumes": [{"name": "v", "projected": {"sources": [{"secret": {"name": "db-creds"}}]}}]}),
        ),
        static_pod(
            "prod",
            "pull",
            "n1",
            json!({"imagePullSecrets": [{"name": "db-creds"}]}),
        ),
        static_pod(
            "prod",
            "pvc",
            "n1",
            json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}),
        ),
        static_pod("prod", "sa", "n1", json!({"serviceAccountName": "admin"})),
        {
            let mut p = static_pod("prod", "owned", "n1", json!({}));
            p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "x", "uid": "u", "controller": true}]);
            p
        },
        // A namespace nobody made: the mirror would be its first object.
        static_pod("nowhere", "ns", "n1", json!({})),
    ];
    let benign = static_pod("default", "benign", "n1", json!({}));
    let mut all = attacks.to_vec();
    all.push(benign);
    tx.send(report(&all)).await.unwrap();

    // The benign mirror is made (the report was handled) and sent to the
    // node; no Secret came before it.
    let secrets = secrets_sent_until_pod(&mut down, "benign").await;
    assert!(secrets.is_empty(), "the node was sent {secrets:?}");
    assert!(mirror_exists(&s, "default", "benign").await);
    for name in [
        "vol",
        "env",
        "envfrom",
        "projected",
        "pull",
        "pvc",
        "sa",
        "owned",
    ] {
        assert!(!mirror_exists(&s, "prod", name).await, "mirror prod/{name}");
    }
    assert!(
        s.pods(Some("nowhere")).await.is_empty(),
        "a mirror made namespace nowhere"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn a_static_pods_report_over_the_limit_is_refused_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("s")).await;
    let (cert, key) = node_certificate(&s.addr, &s.ca, &s.node_token, "n1").await;
    let ch = cert_channel(&s.addr, &s.ca, &cert, &key).await;
    let (tx, mut down) = session(ch, "n1").await;
    let many: Vec<Value> = (0..=MAX_STATIC_PODS_PER_REPORT)
        .map(|i| static_pod("default", &format!("p{i}"), "n1", json!({})))
        .collect();
    tx.send(report(&many)).await.unwrap();
    // Then a report within the limit: once its mirror is there, the first
    // report was handled, and made nothing.
    tx.send(report(&[static_pod("default", "benign", "n1", json!({}))]))
        .await
        .unwrap();
    secrets_sent_until_pod(&mut down, "benign").await;
    let mirrors: Vec<String> = s
        .pods(None)
        .await
        .into_iter()
        .filter(|p| p.is_mirror())
        .map(|p| p.metadata.name)
        .collect();
    assert_eq!(mirrors, ["benign"]);
    s.shutdown().await;
}

#[tokio::test]
async fn a_new_session_of_a_node_ends_its_older_one() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("s")).await;
    let (cert, key) = node_certificate(&s.addr, &s.ca, &s.node_token, "n1").await;
    let ch = cert_channel(&s.addr, &s.ca, &cert, &key).await;
    let (_tx1, mut down1) = session(ch.clone(), "n1").await;
    let (tx2, mut down2) = session(ch, "n1").await;
    // The first one ends (told why when its queue has room), whatever it
    // was sent before.
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            match down1.message().await {
                Ok(Some(_)) => continue,
                other => return other,
            }
        }
    })
    .await
    .expect("the older session ends");
    if let Err(e) = &ended {
        assert_eq!(
            drover_proto::reason::Reason::of(e),
            Some(drover_proto::reason::Reason::Conflict),
            "{e}"
        );
    }
    // The newer one works: a static pod reported on it gets its mirror.
    tx2.send(report(&[static_pod("default", "benign", "n1", json!({}))]))
        .await
        .unwrap();
    secrets_sent_until_pod(&mut down2, "benign").await;
    wait_until("one session held", WAIT, || async {
        s.server.ctx.sessions.count() == 1
    })
    .await;
    s.shutdown().await;
}
