//! The limits of a member (`drover_server::limits`, docs/security.md) and
//! what a caller sees when it crosses one, through the real gRPC and HTTP
//! ports of a one-member server: long names, large objects and requests,
//! an apply that is all or nothing, health and status, and agents that
//! never say hello.

use drover_proto::reason::Reason;
use drover_proto::v1::agent_client::AgentClient;
use drover_proto::v1::agent_server::AgentServer;
use drover_proto::v1::objects_client::ObjectsClient;
use drover_proto::v1::store_client::StoreClient;
use drover_proto::v1::{self as pb};
use drover_server::Server;
use drover_testkit::{authed, cert_channel, grpc_channel, loopback_options, node_certificate};
use serde_json::Value;
use std::time::Duration;
use tonic::transport::Channel;
use tonic::Code;

const DS: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
      - {name: agent, image: busybox:1.36}
"#;

fn pod(name: &str, arg: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: n1\n  containers:\n  - {{name: c, image: busybox, args: [\"{arg}\"]}}\n"
    )
}

struct Api {
    _tmp: tempfile::TempDir,
    server: Server,
    ch: Channel,
    c: ObjectsClient<Channel>,
    token: String,
}

impl Api {
    async fn start() -> Api {
        let tmp = tempfile::tempdir().unwrap();
        let server = Server::start(loopback_options(tmp.path().join("s")))
            .await
            .unwrap();
        let ch = grpc_channel(server.grpc_addr, server.trust.ca.cert_pem()).await;
        Api {
            token: server.identity.admin_token.clone(),
            _tmp: tmp,
            server,
            c: ObjectsClient::new(ch.clone()),
            ch,
        }
    }

    async fn apply(&mut self, text: &str) -> Result<Vec<pb::ApplyResult>, tonic::Status> {
        let r = authed(
            pb::ApplyRequest {
                manifests: text.into(),
                dry_run: false,
                ..Default::default()
            },
            &self.token,
        );
        Ok(self.c.apply(r).await?.into_inner().results)
    }

    async fn get(&mut self, kind: &str, name: &str) -> Option<Value> {
        let r = authed(
            pb::ObjectRef {
                kind: kind.into(),
                namespace: String::new(),
                name: name.into(),
            },
            &self.token,
        );
        match self.c.get(r).await {
            Ok(o) => Some(serde_json::from_slice(&o.into_inner().object).unwrap()),
            Err(e) if e.code() == Code::NotFound => None,
            Err(e) => panic!("get {kind}/{name}: {e}"),
        }
    }
}

#[tokio::test]
async fn a_name_of_10000_characters_is_refused_as_invalid_with_its_field_path() {
    let mut api = Api::start().await;
    let long = "a".repeat(10_000);
    for text in [
        pod(&long, "x"),
        DS.replace("name: agent}", &format!("name: {long}}}")),
    ] {
        let e = api.apply(&text).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert_eq!(Reason::of(&e), Some(Reason::Invalid), "{e}");
        assert!(
            e.message().contains("metadata.name: Invalid value: \"aaaa"),
            "{}",
            e.message()
        );
        assert!(e.message().contains("(9744 more bytes)"), "{}", e.message());
        assert!(e.message().len() <= drover_server::limits::MAX_STATUS_MESSAGE_BYTES);
    }
    api.server.shutdown().await;
}

#[tokio::test]
async fn an_object_over_1_5_mib_is_refused_and_nothing_of_its_apply_is_written() {
    let mut api = Api::start().await;
    let big = "x".repeat(drover_server::limits::MAX_OBJECT_BYTES);
    // The last object of the stream is too large: the first is not written.
    let stream = format!("{DS}---\n{}", pod("big", &big));
    let e = api.apply(&stream).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert_eq!(Reason::of(&e), Some(Reason::BadRequest));
    assert!(
        e.message().starts_with("pod/big: the object is "),
        "{}",
        e.message()
    );
    assert!(
        e.message().contains("limit of 1572864 bytes"),
        "{}",
        e.message()
    );
    assert_eq!(api.get("ds", "agent").await, None, "nothing was written");
    assert_eq!(api.get("pod", "big").await, None);

    // Update (and apply over an existing object) are refused alike.
    api.apply(&pod("small", "x")).await.unwrap();
    let mut p = api.get("pod", "small").await.unwrap();
    // A pod update may change an image, and only that.
    p["spec"]["containers"][0]["image"] = serde_json::json!(big);
    let r = authed(
        pb::UpdateObjectRequest {
            object: serde_json::to_vec(&p).unwrap(),
        },
        &api.token,
    );
    let e = api.c.update(r).await.unwrap_err();
    assert_eq!(Reason::of(&e), Some(Reason::BadRequest), "{e}");
    assert!(
        e.message().starts_with("pod/small: the object is "),
        "{}",
        e.message()
    );
    let e = api
        .apply(&pod("small", "x").replace("image: busybox", &format!("image: {big}")))
        .await
        .unwrap_err();
    assert_eq!(Reason::of(&e), Some(Reason::BadRequest), "{e}");
    let now = api.get("pod", "small").await.unwrap();
    assert_eq!(now["spec"]["containers"][0]["image"], "busybox");
    api.server.shutdown().await;
}

#[tokio::test]
async fn requests_over_16_mib_are_refused_by_objects_and_store() {
    let mut api = Api::start().await;
    let huge = format!(
        "# {}\n{DS}",
        "x".repeat(drover_server::limits::MAX_REQUEST_BYTES)
    );
    let e = api.apply(&huge).await.unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange, "{e}");
    // Said as too large, not as the other OUT_OF_RANGE (Expired).
    assert_eq!(Reason::of(&e), Some(Reason::RequestEntityTooLarge), "{e}");
    let line = drover_cli::errors::server_line(e.code(), Reason::of(&e), e.message());
    assert!(
        line.starts_with("Error from server (RequestEntityTooLarge): "),
        "{line}"
    );
    assert_eq!(api.get("ds", "agent").await, None);
    let mut store = StoreClient::new(api.ch.clone());
    let w = pb::WriteRequest {
        op: Some(pb::Op {
            op: Some(pb::op::Op::Create(pb::Create {
                key: "/x".into(),
                value: vec![0; drover_server::limits::MAX_REQUEST_BYTES + 1],
            })),
        }),
        request_id: 0,
    };
    let e = store.write(authed(w, &api.token)).await.unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange, "{e}");
    assert_eq!(Reason::of(&e), Some(Reason::RequestEntityTooLarge), "{e}");
    // Just under the limit is fine.
    api.apply(DS).await.unwrap();
    api.server.shutdown().await;
}

#[tokio::test]
async fn a_multi_object_apply_is_one_write_and_reports_each_object() {
    let mut api = Api::start().await;
    let stream = format!("{DS}---\n{}", pod("p", "x"));
    let r = api.apply(&stream).await.unwrap();
    let actions: Vec<_> = r
        .iter()
        .map(|r| (r.reference.as_str(), r.action.as_str()))
        .collect();
    assert_eq!(
        actions,
        [("daemonset.apps/agent", "created"), ("pod/p", "created")]
    );
    let rv = |v: &Value| {
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let stored: Vec<Value> = r
        .iter()
        .map(|r| serde_json::from_slice(&r.object).unwrap())
        .collect();
    assert_eq!(
        rv(&stored[0]),
        rv(&stored[1]),
        "both written by one raft entry"
    );
    let p = api.get("pod", "p").await.unwrap();
    assert_eq!(rv(&p), rv(&stored[1]));

    let changed = format!("{}---\n{}", DS.replace("1.36", "1.37"), pod("p", "x"));
    let r = api.apply(&changed).await.unwrap();
    let actions: Vec<_> = r.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(actions, ["configured", "unchanged"]);
    let ds2 = api.get("ds", "agent").await.unwrap();
    assert_eq!(ds2["metadata"]["generation"], 2);
    assert_eq!(rv(&api.get("pod", "p").await.unwrap()), rv(&p));

    // The same object twice in one stream is refused, naming it.
    let e = api.apply(&format!("{DS}---\n{DS}")).await.unwrap_err();
    assert_eq!(Reason::of(&e), Some(Reason::BadRequest), "{e}");
    assert!(
        e.message().contains("daemonset.apps/agent"),
        "{}",
        e.message()
    );
    api.server.shutdown().await;
}

/// One HTTP/1.1 GET: the status code and the body.
async fn http_get(
    addr: std::net::SocketAddr,
    ca: &str,
    path: &str,
    token: Option<&str>,
) -> (u16, String) {
    drover_testkit::https_get(&addr.to_string(), path, ca, token)
        .await
        .expect("an answer over HTTPS")
}

#[tokio::test]
async fn health_says_only_healthy_and_status_needs_the_admin_token() {
    let mut api = Api::start().await;
    let addr = api.server.http_addr;
    let ca = api.server.trust.ca.cert_pem().to_string();
    let http_get = |addr, path, token| http_get(addr, &ca, path, token);
    let (code, body) = http_get(addr, "/health", None).await;
    assert_eq!(code, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v, serde_json::json!({"health": "true"}));

    let (code, body) = http_get(addr, "/status", None).await;
    assert_eq!(code, 401, "{body}");
    assert!(!body.contains(&format!("{:016x}", api.server.identity.id)));
    let (code, body) = http_get(addr, "/status", Some("not-the-token")).await;
    assert_eq!(code, 403, "{body}");
    let (code, body) = http_get(addr, "/status", Some(&api.server.identity.node_token)).await;
    assert_eq!(code, 403, "the node token is not the admin token: {body}");
    let (code, body) = http_get(addr, "/status", Some(&api.token)).await;
    assert_eq!(code, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["member"], format!("{:016x}", api.server.identity.id));
    // A stopped store: unhealthy, and still nothing more.
    api.server.store.shutdown().await;
    let (code, body) = http_get(addr, "/health", None).await;
    assert_eq!(code, 503, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v, serde_json::json!({"health": "false"}));
    api.server.shutdown().await;
}

#[tokio::test]
async fn an_agent_stream_without_hello_is_dropped_after_the_hello_timeout() {
    let mut api = Api::start().await;
    // The member's own Agent service, with a short hello timeout, on a
    // port of its own.
    let svc = drover_server::svc::agent::AgentSvc {
        ctx: api.server.ctx.clone(),
        objects: api.server.objects(),
        cache: api.server.cache.clone(),
        hello_timeout: Duration::from_millis(300),
    };
    // Over TLS, as the member serves it: the silent agent has a real node
    // certificate, so only the missing hello can end its stream.
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let conns = drover_pki::net::incoming(l, api.server.trust.grpc.clone(), Default::default());
    let serving = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(AgentServer::new(svc))
            .serve_with_incoming(tokio_stream::StreamExt::map(
                tokio_stream::wrappers::ReceiverStream::new(conns),
                Ok::<_, std::io::Error>,
            )),
    );
    let ca = api.server.trust.ca.cert_pem().to_string();
    let (cert, key) = node_certificate(
        api.server.grpc_addr,
        &ca,
        &api.server.identity.node_token,
        "silent",
    )
    .await;
    let mut agent = AgentClient::new(cert_channel(addr, &ca, &cert, &key).await);
    let (tx, rx) = tokio::sync::mpsc::channel::<pb::AgentMessage>(1);
    let call = agent.session(tonic::Request::new(
        tokio_stream::wrappers::ReceiverStream::new(rx),
    ));
    let e = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the server gave up on the silent agent within 10 s")
        .unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    assert_eq!(Reason::of(&e), Some(Reason::Timeout));
    assert!(e.message().contains("hello"), "{}", e.message());
    // The stream is gone: what the agent would send has nowhere to go.
    tokio::time::timeout(Duration::from_secs(10), tx.closed())
        .await
        .expect("the request stream was dropped within 10 s");
    serving.abort();
    api.server.shutdown().await;
}

#[tokio::test]
async fn a_json_patch_that_doubles_the_object_is_refused_at_the_object_size_limit() {
    let mut api = Api::start().await;
    api.apply(DS).await.unwrap();
    // Each copy doubles the spec: 2^14 times it (some MB) without the
    // bound, past the object limit, yet harmless to run against a build
    // without the fix.
    let ops: Vec<Value> = (0..14)
        .map(|i| serde_json::json!({"op": "copy", "from": "/spec", "path": format!("/spec/c{i}")}))
        .collect();
    let body = serde_json::to_vec(&ops).unwrap();
    let http = api.server.http_addr.to_string();
    let r = drover_testkit::HttpsRequest {
        method: "PATCH",
        path: "/apis/apps/v1/namespaces/default/daemonsets/agent",
        token: Some(&api.token),
        body: Some(("application/json-patch+json", &body)),
        ..Default::default()
    };
    let (code, answer) = tokio::time::timeout(
        Duration::from_secs(30),
        drover_testkit::https(&http, api.server.trust.ca.cert_pem(), r),
    )
    .await
    .expect("an answer in time")
    .expect("an answer");
    assert_eq!(code, 413, "{answer}");
    let status: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(status["reason"], "RequestEntityTooLarge", "{answer}");
    let limit = drover_server::limits::MAX_OBJECT_BYTES.to_string();
    assert!(
        status["message"].as_str().unwrap().contains(&limit),
        "{answer}"
    );
    // Nothing was patched.
    let ds = api.get("ds", "agent").await.expect("the DaemonSet");
    assert!(ds["spec"].get("c0").is_none());
    api.server.shutdown().await;
}
