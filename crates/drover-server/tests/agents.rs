//! An agent session against a one-member server, driven by hand over gRPC:
//! hello registers the Node, the server pushes the node's pods as they
//! change, status reports are written, heartbeats are recorded in memory,
//! and leave deletes the Node.

use drover_proto::v1::agent_client::AgentClient;
use drover_proto::v1::objects_client::ObjectsClient;
use drover_proto::v1::{self as pb, agent_message, server_message};
use drover_server::Server;
use drover_testkit::{
    authed, cert_channel, grpc_channel, loopback_options, node_certificate, open_session,
};
use serde_json::{json, Value};
use std::time::Duration;
use tonic::Code;

fn msg(m: agent_message::Msg) -> pb::AgentMessage {
    pb::AgentMessage { msg: Some(m) }
}

async fn next_pods(s: &mut tonic::Streaming<pb::ServerMessage>) -> Vec<Value> {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(5), s.message())
            .await
            .expect("a message in time")
            .expect("stream ok")
            .expect("stream open");
        if let Some(server_message::Msg::Pods(p)) = m.msg {
            return p
                .pods
                .iter()
                .map(|b| serde_json::from_slice(b).unwrap())
                .collect();
        }
    }
}

#[tokio::test]
async fn an_agent_registers_gets_its_pods_reports_status_and_leaves() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(loopback_options(tmp.path().join("s")))
        .await
        .unwrap();
    let admin = server.identity.admin_token.clone();
    let join = server.identity.node_token.clone();
    let ca = server.trust.ca.cert_pem().to_string();
    let ch = grpc_channel(server.grpc_addr, &ca).await;
    let mut objects = ObjectsClient::new(ch.clone());
    let mut anonymous = AgentClient::new(ch);

    // A session needs a node certificate: not the admin token, not the
    // node token itself.
    for (token, code) in [
        (admin.as_str(), Code::Unauthenticated),
        (join.as_str(), Code::Unauthenticated),
    ] {
        let (tx0, rx0) = tokio::sync::mpsc::channel(4);
        let e = anonymous
            .session(authed(
                tokio_stream::wrappers::ReceiverStream::new(rx0),
                token,
            ))
            .await
            .expect_err("refused without a node certificate");
        assert_eq!(e.code(), code, "{}", e.message());
        drop(tx0);
    }

    // The node token gets a certificate for edge-1; with it, a session as
    // another node is refused.
    let (cert, key) = node_certificate(server.grpc_addr, &ca, &join, "edge-1").await;
    let agent = cert_channel(server.grpc_addr, &ca, &cert, &key).await;
    let other_node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "edge-2"}});
    let hello = |node: &Value, capabilities| pb::Hello {
        node: serde_json::to_vec(node).unwrap(),
        agent_version: "test".into(),
        capabilities,
    };
    let Err(e) = open_session(agent.clone(), hello(&other_node, Vec::new())).await else {
        panic!("a session as another node was opened");
    };
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());

    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "edge-1", "labels": {"zone": "a"}},
        "spec": {"taints": [{"key": "dedicated", "value": "edge", "effect": "NoSchedule"}]},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.7"}]}
    });
    // An agent of the release before the capabilities were negotiated
    // (7f1d4bf): its hello lists none, and it is welcomed all the same.
    let (tx, mut down) = open_session(agent, hello(&node, Vec::new())).await.unwrap();
    let first = down.message().await.unwrap().unwrap();
    match first.msg {
        Some(server_message::Msg::Welcome(w)) => {
            assert_eq!(w.node, "edge-1");
            assert_eq!(w.heartbeat_interval_ms, 1000);
            // The server says what it is and speaks, for agents that ask.
            assert_eq!(w.server_version, env!("CARGO_PKG_VERSION"));
            let mut caps = w.capabilities.clone();
            caps.sort();
            let mut ours = drover_proto::caps::ours();
            ours.sort();
            assert_eq!(caps, ours);
        }
        other => panic!("expected welcome, got {other:?}"),
    }
    assert!(next_pods(&mut down).await.is_empty());
    assert!(server.ctx.heartbeats.snapshot().contains_key("edge-1"));

    // The Node exists with the agent's labels, taints and a Ready condition.
    let get = |kind: &str, name: &str| pb::ObjectRef {
        kind: kind.into(),
        namespace: String::new(),
        name: name.into(),
    };
    let n: Value = serde_json::from_slice(
        &objects
            .get(authed(get("no", "edge-1"), &admin))
            .await
            .unwrap()
            .into_inner()
            .object,
    )
    .unwrap();
    assert_eq!(n["metadata"]["labels"]["zone"], "a");
    assert_eq!(n["spec"]["taints"][0]["key"], "dedicated");
    assert_eq!(n["status"]["conditions"][0]["type"], "Ready");
    assert_eq!(n["status"]["conditions"][0]["status"], "True");

    // A pod bound to the node is pushed; one bound elsewhere is not.
    let pods = "apiVersion: v1\nkind: Node\nmetadata: {name: edge-2}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  nodeName: edge-1\n  containers: [{name: c, image: busybox}]\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: other}\nspec:\n  nodeName: edge-2\n  containers: [{name: c, image: busybox}]\n";
    objects
        .apply(authed(
            pb::ApplyRequest {
                manifests: pods.into(),
                dry_run: false,
                ..Default::default()
            },
            &admin,
        ))
        .await
        .unwrap();
    let mut got = next_pods(&mut down).await;
    while got.is_empty() {
        got = next_pods(&mut down).await;
    }
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["metadata"]["name"], "web");
    let uid = got[0]["metadata"]["uid"].as_str().unwrap().to_string();
    let other_uid = {
        let p: Value = serde_json::from_slice(
            &objects
                .get(authed(get("po", "other"), &admin))
                .await
                .unwrap()
                .into_inner()
                .object,
        )
        .unwrap();
        p["metadata"]["uid"].as_str().unwrap().to_string()
    };

    // Status reports are written; one for another incarnation is dropped.
    let status = json!({"phase": "Running", "podIP": "10.0.0.7"});
    tx.send(msg(agent_message::Msg::Statuses(pb::PodStatuses {
        pods: vec![
            pb::PodStatusUpdate {
                namespace: "default".into(),
                name: "web".into(),
                uid: uid.clone(),
                status: serde_json::to_vec(&status).unwrap(),
            },
            pb::PodStatusUpdate {
                namespace: "default".into(),
                name: "other".into(),
                uid: "not-its-uid".into(),
                status: serde_json::to_vec(&status).unwrap(),
            },
            // NodeRestriction: edge-2's pod, with its real uid, is not
            // edge-1's to report.
            pb::PodStatusUpdate {
                namespace: "default".into(),
                name: "other".into(),
                uid: other_uid.clone(),
                status: serde_json::to_vec(&json!({"phase": "Failed"})).unwrap(),
            },
        ],
    })))
    .await
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let p: Value = serde_json::from_slice(
            &objects
                .get(authed(get("po", "web"), &admin))
                .await
                .unwrap()
                .into_inner()
                .object,
        )
        .unwrap();
        if p["status"]["phase"] == "Running" {
            assert_eq!(
                p["metadata"]["generation"], 1,
                "status writes leave generation alone"
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "status not written");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The writes of one report run concurrently, so web's being visible
    // says nothing of the refused one: a later report (a barrier) is read
    // only once the whole earlier one was handled, so once the barrier's
    // write shows, the refused write is done or was never made.
    let barrier = json!({"phase": "Running", "podIP": "10.0.0.8"});
    tx.send(msg(agent_message::Msg::Statuses(pb::PodStatuses {
        pods: vec![pb::PodStatusUpdate {
            namespace: "default".into(),
            name: "web".into(),
            uid: uid.clone(),
            status: serde_json::to_vec(&barrier).unwrap(),
        }],
    })))
    .await
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let p: Value = serde_json::from_slice(
            &objects
                .get(authed(get("po", "web"), &admin))
                .await
                .unwrap()
                .into_inner()
                .object,
        )
        .unwrap();
        if p["status"]["podIP"] == "10.0.0.8" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the barrier status not written"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let other: Value = serde_json::from_slice(
        &objects
            .get(authed(get("po", "other"), &admin))
            .await
            .unwrap()
            .into_inner()
            .object,
    )
    .unwrap();
    assert!(
        other["status"]["phase"].is_null(),
        "a report for another uid, or from another node, is dropped"
    );
    // A written status is pushed back to the agent with its pod: that is
    // how the agent learns its report was written (without it, it sends
    // the report again every 2 s for ever).
    loop {
        let pods = next_pods(&mut down).await;
        if pods
            .iter()
            .any(|p| p["metadata"]["name"] == "web" && p["status"]["podIP"] == "10.0.0.8")
        {
            break;
        }
    }

    // Leave deletes the Node.
    tx.send(msg(agent_message::Msg::Leave(pb::Leave {})))
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match objects.get(authed(get("no", "edge-1"), &admin)).await {
            Err(e) if e.code() == Code::NotFound => break,
            _ => {}
        }
        assert!(
            std::time::Instant::now() < deadline,
            "node not deleted on leave"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut server = server;
    server.shutdown().await;
}

/// A session that reconnects with the hello it registered with writes
/// nothing: a server that 10,000 nodes come back to at once (a restart, a
/// stall) is not also handed 10,000 writes of the same Nodes. A hello that
/// describes the node differently (here its addresses) is written.
#[tokio::test]
async fn a_reconnect_that_changes_nothing_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(loopback_options(tmp.path().join("s")))
        .await
        .unwrap();
    let admin = server.identity.admin_token.clone();
    let join = server.identity.node_token.clone();
    let ca = server.trust.ca.cert_pem().to_string();
    let objects = ObjectsClient::new(grpc_channel(server.grpc_addr, &ca).await);
    let (cert, key) = node_certificate(server.grpc_addr, &ca, &join, "edge-r").await;
    let agent = cert_channel(server.grpc_addr, &ca, &cert, &key).await;
    let node = |ip: &str| {
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "edge-r"},
            "status": {"addresses": [{"type": "InternalIP", "address": ip}]}
        })
    };
    // Opens a session with `hello`, waits for its pod list, and closes it
    // again; answers the Node's resourceVersion and address then.
    let session = |hello: Value| {
        let agent = agent.clone();
        async move {
            let hello = pb::Hello {
                node: serde_json::to_vec(&hello).unwrap(),
                agent_version: "test".into(),
                capabilities: drover_proto::caps::ours(),
            };
            let (tx, mut down) = open_session(agent, hello).await.unwrap();
            next_pods(&mut down).await;
            drop(tx);
        }
    };
    let read = || {
        let mut objects = objects.clone();
        let admin = admin.clone();
        async move {
            let r = pb::ObjectRef {
                kind: "no".into(),
                namespace: String::new(),
                name: "edge-r".into(),
            };
            let n: Value = serde_json::from_slice(
                &objects
                    .get(authed(r, &admin))
                    .await
                    .unwrap()
                    .into_inner()
                    .object,
            )
            .unwrap();
            (
                n["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                n["status"]["addresses"][0]["address"].clone(),
            )
        }
    };
    session(node("10.0.0.7")).await;
    let (first, ip) = read().await;
    assert_eq!(ip, "10.0.0.7");
    session(node("10.0.0.7")).await;
    assert_eq!(
        read().await.0,
        first,
        "a reconnect with the same hello wrote the Node"
    );
    session(node("10.0.0.9")).await;
    let (after, ip) = read().await;
    assert_eq!(ip, "10.0.0.9", "a hello with a new address was not written");
    assert_ne!(after, first);
    let mut server = server;
    server.shutdown().await;
}
