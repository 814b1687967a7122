//! A node's session carries exactly the ConfigMaps and Secrets its pods
//! reference (NodeRestriction): read on the wire by a raw session with the
//! node's certificate. An unreferenced Secret, or one referenced only by
//! another node's pod, never reaches it, through creations, updates and
//! deletions; a referenced one arrives before the pods that need it and
//! again when it changes; one no pod references any more goes.

use drover_api::Kind;
use drover_proto::v1::{self as pb, server_message};
use drover_testkit::{cert_channel, node_certificate, open_session, TestServer};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// What a node was told: every ConfigMap and Secret of every Config message.
#[derive(Default)]
struct Seen {
    /// `kind/name=data` of each.
    all: Vec<String>,
}

/// The names (kind/name) and data of a Config message.
fn names(c: &pb::PodConfig) -> Vec<String> {
    let mut out = Vec::new();
    for (kind, list) in [("cm", &c.config_maps), ("secret", &c.secrets)] {
        for b in list {
            let v: Value = serde_json::from_slice(b).unwrap();
            out.push(format!(
                "{kind}/{}={}",
                v["metadata"]["name"].as_str().unwrap(),
                v["data"]
            ));
        }
    }
    out.sort();
    out
}

/// Reads messages until a Config whose names satisfy `want` (recording
/// everything seen), within 10 s.
async fn config_until(
    down: &mut tonic::Streaming<pb::ServerMessage>,
    seen: &mut Seen,
    what: &str,
    want: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let m = tokio::time::timeout(left, down.message())
            .await
            .unwrap_or_else(|_| panic!("no Config with {what} in time"))
            .expect("stream ok")
            .expect("stream open");
        if let Some(server_message::Msg::Config(c)) = m.msg {
            let n = names(&c);
            seen.all.extend(n.iter().cloned());
            if want(&n) {
                return n;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_is_sent_only_what_its_pods_reference() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    s.apply("apiVersion: v1\nkind: Secret\nmetadata: {name: unused}\nstringData: {token: never-sent}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: other}\nstringData: {token: other-node}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: one}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {mode: fast}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: edge-2}\n").await;

    let (cert, key) = node_certificate(&s.addr, &s.ca, &s.node_token, "edge-1").await;
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "edge-1"}});
    let hello = pb::Hello {
        node: serde_json::to_vec(&node).unwrap(),
        agent_version: "test".into(),
        ..Default::default()
    };
    let (tx, mut down) = open_session(cert_channel(&s.addr, &s.ca, &cert, &key).await, hello)
        .await
        .unwrap();
    let mut seen = Seen::default();
    // No pod yet: an empty set.
    config_until(&mut down, &mut seen, "nothing", |n| n.is_empty()).await;

    // A pod here references db and app; a pod of edge-2 references other.
    s.apply("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  nodeName: edge-1\n  containers:\n  - name: c\n    image: busybox\n    env: [{name: P, valueFrom: {secretKeyRef: {name: db, key: password}}}]\n    volumeMounts: [{name: cfg, mountPath: /etc/app}]\n  volumes: [{name: cfg, configMap: {name: app}}]\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: elsewhere}\nspec:\n  nodeName: edge-2\n  containers:\n  - name: c\n    image: busybox\n    envFrom: [{secretRef: {name: other}}]\n").await;
    // The Config comes before the pods that need it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got_config = false;
    loop {
        let m = tokio::time::timeout(deadline - Instant::now(), down.message())
            .await
            .expect("messages in time")
            .unwrap()
            .unwrap();
        match m.msg {
            Some(server_message::Msg::Config(c)) => {
                let n = names(&c);
                seen.all.extend(n.iter().cloned());
                got_config |= n.len() == 2;
            }
            Some(server_message::Msg::Pods(p)) if !p.pods.is_empty() => {
                assert!(got_config, "the pod came before its ConfigMap and Secret");
                break;
            }
            _ => {}
        }
    }
    // Unreferenced Secrets change: nothing is sent; the referenced one
    // changes: the next Config carries it.
    s.apply("apiVersion: v1\nkind: Secret\nmetadata: {name: unused}\nstringData: {token: still-never}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: other}\nstringData: {token: changed}\n").await;
    s.apply("apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: two}\n")
        .await;
    let n = config_until(&mut down, &mut seen, "any change", |_| true).await;
    assert_eq!(
        n,
        [
            "cm/app={\"mode\":\"fast\"}".to_string(),
            "secret/db={\"password\":\"dHdv\"}".to_string()
        ]
    );
    // The pod goes: so do its objects.
    s.objects
        .delete(Kind::Pod, "default", "web")
        .await
        .expect("delete the pod");
    config_until(&mut down, &mut seen, "an empty set", |n| n.is_empty()).await;
    assert!(
        seen.all
            .iter()
            .all(|n| !n.starts_with("secret/unused") && !n.starts_with("secret/other")),
        "{:?}",
        seen.all
    );
    assert!(seen.all.iter().any(|n| n.starts_with("secret/db")));
    drop(tx);
    s.shutdown().await;
}
