//! The second audit's "a viewer becomes admin" (issue 22): what a viewer
//! certificate can read, against a real member, holds no credential and
//! no key; raw keys (kv get, list, watch) are for admins only; the join
//! tokens replicated under `/drover/tokens/` are sealed, and another member
//! still takes a rotated one up.

use drover_api::Kind;
use drover_pki::{JoinToken, TokenKind};
use drover_server::Server;
use drover_testkit::{
    cert_channel, client_of, https, node_certificate, start_servers, wait_until, HttpsRequest,
    TestServer,
};
use std::time::Duration;
use tonic::Code;

const WAIT: Duration = Duration::from_secs(20);

/// The path of the list of every object of `kind` in the Kubernetes API.
fn kapi_list(kind: Kind) -> String {
    match kind.api_version() {
        "v1" => format!("/api/v1/{}", kind.plural()),
        v => format!("/apis/{v}/{}", kind.plural()),
    }
}

/// What must never reach a viewer: every token (the whole text and its
/// secret), the CA key and the member key, and any private key at all.
fn forbidden_texts(s: &Server, dir: &std::path::Path, rotated: &[&JoinToken]) -> Vec<String> {
    let mut out = vec![
        s.identity.admin_token.clone(),
        "PRIVATE KEY".to_string(),
        s.trust.ca.key_pem().lines().nth(1).unwrap().to_string(),
    ];
    let member_key = std::fs::read_to_string(dir.join("member.key")).unwrap();
    out.push(member_key.lines().nth(1).unwrap().to_string());
    for t in [
        s.identity.server_token.as_str(),
        s.identity.node_token.as_str(),
    ] {
        let t = JoinToken::parse(t, "test").unwrap();
        out.push(t.secret.clone());
    }
    for t in rotated {
        out.push(t.to_string());
        out.push(t.secret.clone());
    }
    out
}

fn assert_clean(what: &str, text: &str, forbidden: &[String]) {
    for f in forbidden {
        assert!(
            !text.contains(f.as_str()),
            "{what} shows a credential or key ({}…)",
            &f[..f.len().min(12)]
        );
    }
}

#[tokio::test]
async fn a_viewer_reads_no_credential_and_no_raw_key() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("s")).await;
    let admin = s.client();
    // Rotated tokens are what the store holds under /drover/tokens/.
    let server_token = JoinToken::parse(&admin.rotate_token("server").await.unwrap(), "t").unwrap();
    let node_token = JoinToken::parse(&admin.rotate_token("node").await.unwrap(), "t").unwrap();
    s.apply("apiVersion: v1\nkind: Secret\nmetadata: {name: app}\nstringData: {k: v}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {k: v}\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:\n      containers: [{name: c, image: busybox}]\n")
        .await;
    // A node joined: its Node carries its certificate's binding.
    let (cert, key) = node_certificate(&s.addr, &s.ca, &node_token.to_string(), "n1").await;
    let _ch = cert_channel(&s.addr, &s.ca, &cert, &key).await;
    let forbidden = forbidden_texts(&s.server, &s.dir, &[&server_token, &node_token]);

    // Even an admin's raw read shows the replicated tokens sealed.
    let (kvs, _) = admin
        .list("/drover/tokens/", false)
        .await
        .expect("admin kv list");
    assert_eq!(
        kvs.len(),
        2,
        "{:?}",
        kvs.iter().map(|kv| &kv.key).collect::<Vec<_>>()
    );
    for kv in &kvs {
        assert_clean(&kv.key, &String::from_utf8_lossy(&kv.value), &forbidden);
    }

    let (viewer, vcert, vkey) = drover_testkit::viewer_client(&s, "viewer-1").await;
    // Raw keys: refused.
    for (what, e) in [
        (
            "kv get",
            viewer.get("/drover/tokens/server", false).await.err(),
        ),
        ("kv list", viewer.list("/", false).await.err()),
        ("kv watch", viewer.watch("/", 0).await.err()),
    ] {
        let e = e.unwrap_or_else(|| panic!("a viewer's {what} was answered"));
        assert_eq!(e.code(), Some(Code::PermissionDenied), "{what}: {e}");
    }
    let write = viewer
        .create("/x", b"y".to_vec())
        .await
        .expect_err("kv write");
    assert_eq!(write.code(), Some(Code::PermissionDenied), "{write}");

    // Everything a viewer may read: every kind through Objects, and the
    // cluster status.
    for kind in Kind::ALL {
        let list = viewer
            .list_objects(kind.plural(), "", "")
            .await
            .unwrap_or_else(|e| panic!("a viewer lists {}: {e}", kind.plural()));
        let text = serde_json::to_string(&list.items).unwrap();
        assert_clean(kind.plural(), &text, &forbidden);
    }
    let status = viewer.status().await.expect("cluster status");
    assert_clean("cluster status", &format!("{status:?}"), &forbidden);
    // And through the Kubernetes API, with the viewer's certificate.
    let http = s.server.http_addr.to_string();
    let mut paths: Vec<String> = Kind::ALL.into_iter().map(kapi_list).collect();
    paths.extend(
        [
            "/api",
            "/apis",
            "/version",
            "/api/v1",
            "/apis/apps/v1",
            "/openapi/v3",
        ]
        .map(String::from),
    );
    for path in &paths {
        let r = HttpsRequest {
            method: "GET",
            path,
            identity: Some((&vcert, &vkey)),
            ..Default::default()
        };
        let (code, body) = tokio::time::timeout(WAIT, https(&http, &s.ca, r))
            .await
            .expect("an answer")
            .unwrap_or_else(|| panic!("GET {path}"));
        assert_eq!(code, 200, "GET {path}: {body}");
        assert_clean(path, &body, &forbidden);
    }
    s.shutdown().await;
}

#[tokio::test]
async fn a_rotated_token_is_replicated_sealed_and_taken_up_by_every_member() {
    let tmp = tempfile::tempdir().unwrap();
    let servers = start_servers(tmp.path(), 2).await;
    let admin = client_of(&servers[0]);
    wait_until("two voters", WAIT, || async {
        admin.status().await.is_ok_and(|s| {
            s.members
                .iter()
                .filter(|m| !m.learner && !m.removed)
                .count()
                == 2
        })
    })
    .await;
    let new = admin.rotate_token("node").await.expect("rotate");
    let (kv, _) = admin.get("/drover/tokens/node", false).await.unwrap();
    let value = String::from_utf8(kv.expect("replicated").value).unwrap();
    let secret = JoinToken::parse(&new, "t").unwrap().secret;
    assert!(
        !value.contains(&secret),
        "the token is stored in clear: {value}"
    );
    // The other member unsealed it: it writes it for people and takes it.
    let other = &servers[1];
    wait_until("the other member's node-token", WAIT, || async {
        std::fs::read_to_string(tmp.path().join("m1").join("node-token"))
            .is_ok_and(|t| t.trim() == new)
    })
    .await;
    assert_eq!(other.trust.token(TokenKind::Node).to_string(), new);
    let (cert, _) = node_certificate(
        &other.grpc_addr.to_string(),
        other.trust.ca.cert_pem(),
        &new,
        "late",
    )
    .await;
    assert!(cert.contains("BEGIN CERTIFICATE"));
    for mut s in servers {
        s.shutdown().await;
    }
}
