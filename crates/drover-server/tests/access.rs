//! The second audit's "credentials cannot be rotated or revoked" (issue
//! 22, finding 5), against real members on loopback ports:
//! `drover access revoke NAME` refuses NAME's certificates on every member
//! within a second and ends the streams they hold open (gRPC watches and
//! Kubernetes API watches); `drover token rotate admin` does the same for
//! the old admin token and every member writes the new one in its client
//! files; a metrics credential (token or certificate) reads `/metrics`
//! and `/status` and nothing else.

use drover_proto::v1::{self as pb, objects_client::ObjectsClient};
use drover_server::Server;
use drover_testkit::{authed, cert_channel, client_of, https, start_servers, HttpsRequest};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::{Code, Streaming};

const WAIT: Duration = Duration::from_secs(20);
/// How soon every member must refuse a revoked credential and end what it
/// holds open (the issue's bound).
const CLUSTER_WIDE: Duration = Duration::from_secs(1);

/// A client certificate for `name` in `role`, issued through `s`:
/// (certificate, key).
async fn issue(s: &Server, name: &str, role: &str) -> (String, String) {
    let (cred, r) = drover_testkit::issue_client(s, name, role).await;
    (r.cert, cred.key_pem)
}

fn ca(s: &Server) -> String {
    s.trust.ca.cert_pem().to_string()
}

fn watch_request() -> pb::WatchObjectsRequest {
    pb::WatchObjectsRequest {
        kind: "configmaps".into(),
        namespace: String::new(),
        resource_version: String::new(),
    }
}

/// Waits until `stream` delivers the ConfigMap `name`: the watch is live.
async fn live(stream: &mut Streaming<pb::ObjectEvent>, name: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = tokio::time::timeout(left, stream.message())
            .await
            .expect("the watch delivers the new ConfigMap")
            .expect("the watch is open")
            .expect("the watch is open");
        if String::from_utf8_lossy(&ev.object).contains(name) {
            return;
        }
    }
}

/// Whether `stream` ends (an error or its end) within `within`.
async fn ends_within(stream: &mut Streaming<pb::ObjectEvent>, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.message()).await {
            Err(_) => return false,
            Ok(Ok(Some(_))) => continue,
            Ok(_) => return true,
        }
    }
}

type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// A Kubernetes API watch of ConfigMaps on `addr` (HTTP/1.1), with a
/// client certificate or a token, read up to the end of its header.
async fn kapi_watch(addr: &str, ca: &str, cert: Option<(&str, &str)>, token: Option<&str>) -> Tls {
    let mut tls = match cert {
        Some(id) => (*drover_pki::tls::client_config(ca, Some(id)).unwrap()).clone(),
        None => (*drover_pki::tls::https_client_config(ca).unwrap()).clone(),
    };
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from(drover_pki::SERVER_NAME).unwrap();
    let mut s = tokio_rustls::TlsConnector::from(std::sync::Arc::new(tls))
        .connect(name, tcp)
        .await
        .unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let head = format!("GET /api/v1/configmaps?watch=true HTTP/1.1\r\nHost: {addr}\r\n{auth}\r\n");
    s.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(WAIT, s.read(&mut buf))
            .await
            .expect("the watch answers")
            .unwrap();
        assert!(n > 0, "the watch closed before its header");
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    s
}

/// Whether the server closes `s` within `within`.
async fn closed_within(s: &mut Tls, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

async fn list_with_cert(addr: &str, ca: &str, id: (&str, &str)) -> Result<(), tonic::Status> {
    let ch = cert_channel(addr, ca, id.0, id.1).await;
    ObjectsClient::new(ch)
        .list(pb::ListObjectsRequest {
            kind: "configmaps".into(),
            ..Default::default()
        })
        .await
        .map(|_| ())
}

async fn list_with_token(addr: &str, ca: &str, token: &str) -> Result<(), tonic::Status> {
    let ch = drover_testkit::grpc_channel(addr, ca).await;
    ObjectsClient::new(ch)
        .list(authed(
            pb::ListObjectsRequest {
                kind: "configmaps".into(),
                ..Default::default()
            },
            token,
        ))
        .await
        .map(|_| ())
}

fn configmap(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{k: v}}\n")
}

#[tokio::test]
async fn a_revoked_certificate_is_refused_and_its_streams_end_within_a_second_on_every_member() {
    let tmp = tempfile::tempdir().unwrap();
    let servers = start_servers(tmp.path(), 3).await;
    let ca = ca(&servers[0]);
    let admin = client_of(&servers[0]);
    let alice = issue(&servers[0], "alice", "viewer").await;
    let alice2 = issue(&servers[1], "alice", "admin").await;
    let bob = issue(&servers[2], "bob", "viewer").await;
    let alice_id = (alice.0.as_str(), alice.1.as_str());
    let alice2_id = (alice2.0.as_str(), alice2.1.as_str());
    let bob_id = (bob.0.as_str(), bob.1.as_str());

    // Alice holds a gRPC watch on every member and a Kubernetes API watch
    // on member 1; both of her certificates work everywhere.
    let mut watches = Vec::new();
    for s in &servers {
        let ch = cert_channel(s.grpc_addr, &ca, alice_id.0, alice_id.1).await;
        let w = ObjectsClient::new(ch)
            .watch(watch_request())
            .await
            .expect("alice watches")
            .into_inner();
        watches.push(w);
        list_with_cert(&s.grpc_addr.to_string(), &ca, alice2_id)
            .await
            .expect("alice's admin certificate works");
    }
    let http1 = servers[1].http_addr.to_string();
    let mut kapi = kapi_watch(&http1, &ca, Some(alice_id), None).await;
    drover_server::api::Objects::new(servers[0].ctx.clone())
        .apply(&configmap("before"), false)
        .await
        .expect("apply");
    for w in &mut watches {
        live(w, "before").await;
    }

    // Who may not revoke or list: a viewer, and anyone without a credential.
    let bob_ch = cert_channel(servers[0].grpc_addr, &ca, bob_id.0, bob_id.1).await;
    let mut bob_cluster = pb::cluster_client::ClusterClient::new(bob_ch);
    let e = bob_cluster
        .revoke_access(pb::RevokeAccessRequest {
            name: "alice".into(),
            serial: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    let e = bob_cluster
        .list_access(pb::ListAccessRequest {})
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    let anon = drover_testkit::grpc_channel(servers[0].grpc_addr, &ca).await;
    let e = pb::cluster_client::ClusterClient::new(anon)
        .revoke_access(pb::RevokeAccessRequest {
            name: "alice".into(),
            serial: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");

    // Every certificate is on record; no record holds a key.
    let records = admin.list_access().await.expect("list");
    assert_eq!(records.len(), 3, "{records:?}");
    assert!(records.iter().all(|r| r.revoked_at == 0));
    let (raw, _) = admin.list("/drover/access/", false).await.expect("kv");
    for kv in &raw {
        let text = String::from_utf8_lossy(&kv.value);
        assert!(
            !text.contains("PRIVATE KEY") && !text.contains("CERTIFICATE"),
            "{text}"
        );
    }

    let revoked = admin.revoke_access("alice", "").await.expect("revoke");
    let at = Instant::now();
    assert_eq!(revoked.len(), 2, "{revoked:?}");
    for (i, w) in watches.iter_mut().enumerate() {
        let left = CLUSTER_WIDE.saturating_sub(at.elapsed());
        assert!(
            ends_within(w, left).await,
            "alice's watch on member {i} is still open {:?} after the revocation",
            at.elapsed()
        );
    }
    assert!(
        closed_within(&mut kapi, CLUSTER_WIDE.saturating_sub(at.elapsed())).await,
        "alice's Kubernetes API watch is still open {:?} after the revocation",
        at.elapsed()
    );
    let ended = at.elapsed();
    // New requests of either certificate: refused on every member, saying
    // why; bob goes on.
    for s in &servers {
        let addr = s.grpc_addr.to_string();
        for id in [alice_id, alice2_id] {
            let e = list_with_cert(&addr, &ca, id).await.unwrap_err();
            assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
            assert!(e.message().contains("revoked"), "{}", e.message());
        }
        list_with_cert(&addr, &ca, bob_id)
            .await
            .expect("bob is not revoked");
        let http = s.http_addr.to_string();
        for path in ["/api/v1/configmaps", "/metrics"] {
            let (code, body) = https(
                &http,
                &ca,
                HttpsRequest {
                    method: "GET",
                    path,
                    identity: Some(alice_id),
                    ..Default::default()
                },
            )
            .await
            .expect("answer");
            assert_eq!(code, 401, "{path}: {body}");
            assert!(body.contains("revoked"), "{path}: {body}");
        }
    }
    eprintln!("alice's streams on 3 members ended {ended:?} after the revocation");

    // Listed as revoked; revoking again changes nothing; an unknown name
    // is an error that says what to do.
    let records = admin.list_access().await.expect("list");
    let revoked_names: Vec<_> = records
        .iter()
        .filter(|r| r.revoked_at != 0)
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(revoked_names, ["alice", "alice"], "{records:?}");
    assert!(admin.revoke_access("alice", "").await.unwrap().is_empty());
    let e = admin.revoke_access("carol", "").await.unwrap_err();
    assert!(e.to_string().contains("--serial"), "{e}");
    // A serial not on record (a certificate from before records) is
    // refused too once revoked by it.
    let r = admin
        .revoke_access("legacy", "00ff")
        .await
        .expect("revoke a serial");
    assert_eq!(r.len(), 1);
    // Another name's serial is refused, and bob keeps working.
    let bob_serial = records
        .iter()
        .find(|r| r.name == "bob")
        .map(|r| r.serial.clone())
        .expect("bob's record");
    let e = admin.revoke_access("alice", &bob_serial).await.unwrap_err();
    assert!(e.to_string().contains("bob's"), "{e}");
    list_with_cert(&servers[0].grpc_addr.to_string(), &ca, bob_id)
        .await
        .expect("bob is not revoked");
    for mut s in servers {
        s.shutdown().await;
    }
}

#[tokio::test]
async fn a_rotated_admin_token_is_refused_everywhere_and_every_member_writes_the_new_one() {
    let tmp = tempfile::tempdir().unwrap();
    let servers = start_servers(tmp.path(), 3).await;
    let ca = ca(&servers[0]);
    let old = servers[0].identity.admin_token.clone();
    // Open with the old token: a gRPC watch on member 2 and a Kubernetes
    // API watch on member 1.
    let ch = drover_testkit::grpc_channel(servers[2].grpc_addr, &ca).await;
    let mut watch = ObjectsClient::new(ch)
        .watch(authed(watch_request(), &old))
        .await
        .expect("watch")
        .into_inner();
    let mut kapi = kapi_watch(&servers[1].http_addr.to_string(), &ca, None, Some(&old)).await;
    drover_server::api::Objects::new(servers[0].ctx.clone())
        .apply(&configmap("before"), false)
        .await
        .expect("apply");
    live(&mut watch, "before").await;

    // A viewer may not rotate it.
    let (vc, vk) = issue(&servers[0], "viewer-1", "viewer").await;
    let vch = cert_channel(servers[0].grpc_addr, &ca, &vc, &vk).await;
    let e = pb::cluster_client::ClusterClient::new(vch)
        .rotate_token(pb::RotateTokenRequest {
            kind: "admin".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");

    let new = client_of(&servers[0])
        .rotate_token("admin")
        .await
        .expect("rotate");
    let at = Instant::now();
    assert_ne!(new, old);
    assert!(
        ends_within(&mut watch, CLUSTER_WIDE).await,
        "a watch of the old token is open {:?} after the rotation",
        at.elapsed()
    );
    assert!(
        closed_within(&mut kapi, CLUSTER_WIDE.saturating_sub(at.elapsed())).await,
        "a Kubernetes API watch of the old token is open {:?} after the rotation",
        at.elapsed()
    );
    eprintln!(
        "the old token's streams ended {:?} after the rotation",
        at.elapsed()
    );
    for s in &servers {
        let addr = s.grpc_addr.to_string();
        let e = list_with_token(&addr, &ca, &old).await.unwrap_err();
        assert!(
            matches!(e.code(), Code::PermissionDenied | Code::Unauthenticated),
            "{e:?}"
        );
        list_with_token(&addr, &ca, &new)
            .await
            .expect("the new token works on every member");
        let (code, _) =
            drover_testkit::https_get(&s.http_addr.to_string(), "/status", &ca, Some(&old))
                .await
                .expect("answer");
        assert_eq!(code, 403);
    }
    // Every member writes the new token where its people read it.
    for (i, s) in servers.iter().enumerate() {
        let dir = tmp.path().join(format!("m{i}"));
        drover_testkit::wait_until(
            &format!("member {i} writes the new admin token"),
            WAIT,
            || {
                let dir = dir.clone();
                let (old, new) = (old.clone(), new.clone());
                async move {
                    ["client.yaml", "kubeconfig", "server.json"]
                        .iter()
                        .all(|f| {
                            std::fs::read_to_string(dir.join(f))
                                .is_ok_and(|t| t.contains(&new) && !t.contains(&old))
                        })
                }
            },
        )
        .await;
        assert_eq!(s.ctx.admin_token(), new);
    }
    for mut s in servers {
        s.shutdown().await;
    }
}

#[tokio::test]
async fn metrics_credentials_read_metrics_and_status_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let s = drover_testkit::TestServer::start(&tmp.path().join("s")).await;
    let ca = s.ca.clone();
    let http = s.server.http_addr.to_string();
    let grpc = s.addr.clone();
    let admin = s.client();
    let get = |path: &'static str, token: Option<String>, id: Option<(String, String)>| {
        let (http, ca) = (http.clone(), ca.clone());
        async move {
            https(
                &http,
                &ca,
                HttpsRequest {
                    method: "GET",
                    path,
                    token: token.as_deref(),
                    identity: id.as_ref().map(|(c, k)| (c.as_str(), k.as_str())),
                    ..Default::default()
                },
            )
            .await
            .expect("answer")
        }
    };
    // No metrics token yet: a made-up one is refused.
    let (code, _) = get("/metrics", Some("drover-metrics-0000".into()), None).await;
    assert_eq!(code, 403);

    let t1 = admin.rotate_token("metrics").await.expect("metrics token");
    for path in ["/metrics", "/status"] {
        let (code, body) = get(path, Some(t1.clone()), None).await;
        assert_eq!(code, 200, "{path}: {body}");
    }
    // Nothing else: the Kubernetes API, the object API, raw keys.
    let (code, _) = get("/api/v1/secrets", Some(t1.clone()), None).await;
    assert_eq!(code, 401);
    let e = list_with_token(&grpc, &ca, &t1).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("metrics token"), "{}", e.message());
    // Only its SHA-256 is stored.
    let (kv, _) = admin
        .get("/drover/tokens/metrics", false)
        .await
        .expect("kv");
    let stored = String::from_utf8_lossy(&kv.expect("the record").value).to_string();
    assert!(!stored.contains(&t1), "{stored}");
    assert!(stored.contains("sha256"), "{stored}");
    // A new one replaces it.
    let t2 = admin.rotate_token("metrics").await.expect("metrics token");
    let (code, _) = get("/metrics", Some(t1.clone()), None).await;
    assert_eq!(code, 403);
    let (code, _) = get("/metrics", Some(t2.clone()), None).await;
    assert_eq!(code, 200);

    // A metrics certificate: /metrics and /status, nothing else.
    let (cert, key) = issue(&s.server, "prometheus", "metrics").await;
    let id = Some((cert.clone(), key.clone()));
    for path in ["/metrics", "/status"] {
        let (code, body) = get(path, None, id.clone()).await;
        assert_eq!(code, 200, "{path}: {body}");
    }
    let (code, body) = get("/api/v1/secrets", None, id.clone()).await;
    assert_eq!(code, 403, "{body}");
    let e = list_with_cert(&grpc, &ca, (&cert, &key)).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(e.message().contains("metrics"), "{}", e.message());
    s.shutdown().await;
}
