//! Watches served from the informer's watch cache
//! (`crates/drover-server/src/cache/window.rs`): resumed from a
//! resourceVersion inside the window, 410 Gone before it, a slow watcher
//! cut without delaying the others, and one JSON encoding per change
//! whatever the number of watchers (`drover_watch_cache_*` counters).

use drover_proto::v1::{self as pb, objects_client::ObjectsClient};
use drover_server::limits::WatchWindow;
use drover_testkit::{authed, grpc_channel, https, wait_until, HttpsRequest, TestServer};
use serde_json::Value;
use std::time::Duration;
use tonic::transport::Channel;

const WAIT: Duration = Duration::from_secs(30);

fn config_maps(from: usize, to: usize, data_bytes: usize) -> String {
    let data = "x".repeat(data_bytes);
    (from..to)
        .map(|i| {
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm{i}, namespace: default}}\ndata: {{d: {data}}}\n")
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

/// The resourceVersion of each ConfigMap of `from..to`, applied one by one.
async fn apply_each(s: &TestServer, from: usize, to: usize) -> Vec<String> {
    let mut rvs = Vec::new();
    for i in from..to {
        let applied = s
            .objects
            .apply(&config_maps(i, i + 1, 1), false)
            .await
            .expect("apply");
        rvs.push(applied[0].0.object().metadata().resource_version.clone());
    }
    rvs
}

/// The whole body of a watch that ends after `timeoutSeconds=1`.
async fn watch_body(s: &TestServer, query: &str) -> (u16, String) {
    let addr = s.server.http_addr.to_string();
    let token = s.server.identity.admin_token.clone();
    let path = format!("/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1&{query}");
    let r = HttpsRequest {
        method: "GET",
        path: &path,
        token: Some(&token),
        ..Default::default()
    };
    tokio::time::timeout(Duration::from_secs(20), https(&addr, &s.ca, r))
        .await
        .expect("the watch ends after its timeoutSeconds")
        .expect("an answer")
}

/// The body of a chunked answer, its chunks joined.
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            panic!("not a chunked body: {body:?}");
        };
        if n == 0 {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

fn events(body: &str) -> Vec<(String, String)> {
    dechunk(body)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
            (
                v["type"].as_str().unwrap_or_default().to_string(),
                v["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

fn added(names: impl IntoIterator<Item = usize>) -> Vec<(String, String)> {
    names
        .into_iter()
        .map(|i| ("ADDED".to_string(), format!("cm{i}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_watch_resumes_inside_the_window_and_is_gone_before_it() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start_tuned(tmp.path(), |o| {
        o.watch_window = WatchWindow {
            events: 4,
            bytes: 1 << 20,
        };
    })
    .await;
    let rvs = apply_each(&s, 0, 10).await;
    // The window holds cm6 … cm9: from cm6's version, cm7 … cm9.
    let (code, body) = watch_body(&s, &format!("resourceVersion={}", rvs[6])).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(events(&body), added(7..10), "{body}");
    // From cm5's, cm6 … cm9 (the window's first change is cm6).
    let (code, body) = watch_body(&s, &format!("resourceVersion={}", rvs[5])).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(events(&body), added(6..10), "{body}");
    // From before the window: 410 Gone, Expired, as Kubernetes.
    let (code, body) = watch_body(&s, &format!("resourceVersion={}", rvs[2])).await;
    assert_eq!(code, 410, "{body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["reason"], "Expired", "{body}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("the watch cache of configmaps"),
        "{body}"
    );
    // Without a resourceVersion: every ConfigMap as ADDED, from memory.
    let (code, body) = watch_body(&s, "").await;
    assert_eq!(code, 200, "{body}");
    let names: Vec<_> = events(&body);
    assert_eq!(names.len(), 10, "{body}");
    let c = &s.server.ctx.metrics.watch;
    assert_eq!(c.expired.get(), 1);
    assert_eq!(c.store_decodes.get(), 0, "ConfigMaps came from the store");
    s.shutdown().await;
}

async fn objects_client(s: &TestServer) -> ObjectsClient<Channel> {
    ObjectsClient::new(grpc_channel(&s.addr, &s.ca).await)
}

async fn watch_config_maps(
    s: &TestServer,
    c: &mut ObjectsClient<Channel>,
) -> tonic::Streaming<pb::ObjectEvent> {
    let r = authed(
        pb::WatchObjectsRequest {
            kind: "configmap".into(),
            namespace: "default".into(),
            resource_version: String::new(),
        },
        &s.server.identity.admin_token,
    );
    c.watch(r).await.expect("watch").into_inner()
}

/// W watchers of one kind: each change is decoded once (by the
/// informer) and encoded once, not W times.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_watchers_share_one_decode_and_one_encoding_per_change() {
    const W: usize = 8;
    const N: usize = 20;
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(tmp.path()).await;
    let mut client = objects_client(&s).await;
    let mut streams = Vec::new();
    for _ in 0..W {
        streams.push(watch_config_maps(&s, &mut client).await);
    }
    let c = s.server.ctx.metrics.watch.clone();
    assert_eq!(c.watchers.get(), W as i64);
    let events_before = c.events.get();
    apply_each(&s, 0, N).await;
    for w in &mut streams {
        for i in 0..N {
            let e = tokio::time::timeout(WAIT, w.message())
                .await
                .expect("an event in time")
                .expect("no error")
                .expect("the stream goes on");
            let o: Value = serde_json::from_slice(&e.object).unwrap();
            assert_eq!(e.r#type, "ADDED");
            assert_eq!(o["metadata"]["name"], format!("cm{i}"));
        }
    }
    // N changes of ConfigMaps, each encoded once for the W watchers; the
    // informer decoded each change once (the events it put into the
    // window include other kinds' changes: nodes, leases are not there).
    assert_eq!(c.encodes.get(), N as u64);
    assert_eq!(c.sent.get(), (W * N) as u64);
    assert!(c.events.get() - events_before >= N as u64);
    assert_eq!(c.store_decodes.get(), 0);
    drop(streams);
    wait_until("the watchers gone", WAIT, || async {
        c.watchers.get() == 0
    })
    .await;
    s.shutdown().await;
}

/// A watcher whose client does not read falls behind the window and is
/// cut (Expired), while a watcher that reads gets every change in time,
/// and the informer keeps up: a slow client never holds the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_watcher_is_cut_and_does_not_delay_the_others() {
    const PER_APPLY: usize = 25;
    const APPLIES: usize = 40;
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start_tuned(tmp.path(), |o| {
        o.watch_window = WatchWindow {
            events: 200,
            bytes: 64 << 20,
        };
    })
    .await;
    let mut client = objects_client(&s).await;
    let mut slow = watch_config_maps(&s, &mut client).await;
    let mut fast = watch_config_maps(&s, &mut client).await;
    let total = PER_APPLY * APPLIES;
    let reader = tokio::spawn(async move {
        let mut seen = 0;
        while seen < total {
            let e = tokio::time::timeout(WAIT, fast.message())
                .await
                .expect("an event in time")
                .expect("the fast watcher is not cut")
                .expect("the stream goes on");
            assert_eq!(e.r#type, "ADDED");
            seen += 1;
        }
        seen
    });
    for a in 0..APPLIES {
        s.objects
            .apply(
                &config_maps(a * PER_APPLY, (a + 1) * PER_APPLY, 16 << 10),
                false,
            )
            .await
            .expect("apply");
    }
    assert_eq!(reader.await.unwrap(), total);
    // The informer is at the store's last change, whatever the slow
    // watcher.
    let applied = s.server.store.applied();
    assert!(
        s.server.cache.wait_for(applied, WAIT).await,
        "the informer fell behind"
    );
    // The slow watcher, read at last: some changes, then Expired.
    let mut got = 0;
    let status = loop {
        match tokio::time::timeout(WAIT, slow.message())
            .await
            .expect("an event or the end in time")
        {
            Ok(Some(_)) => got += 1,
            Ok(None) => panic!("the slow watcher ended without an error after {got} events"),
            Err(status) => break status,
        }
    };
    assert!(got < total, "the slow watcher got every change");
    assert!(
        status.message().contains("too old resource version"),
        "{status:?}"
    );
    assert_eq!(s.server.ctx.metrics.watch.expired.get(), 1);
    s.shutdown().await;
}
