//! Issue 13's metrics, scraped as Prometheus would: a server's `/metrics`
//! (HTTPS, the admin token; anyone else refused) and an agent's
//! `--metrics` (plain HTTP), both parsed with a Prometheus text parser
//! (`prometheus-parse`) and checked against what the cluster did.

use drover_agent::{AgentOptions, SimConfig};
use drover_testkit::{
    https_get, is_running_and_ready, pod_yaml, quick_tuning, start_sim_agent, wait_until,
    TestServer,
};
use prometheus_parse::{Sample, Scrape, Value};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(15);

fn parse(text: &str) -> Scrape {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    Scrape::parse(lines).expect("the Prometheus text format")
}

/// The value of the sample `name` whose labels include `labels`.
fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let found: Vec<&Sample> = s
        .samples
        .iter()
        .filter(|x| x.metric == name && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .collect();
    match found.first()?.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => Some(v),
        Value::Histogram(ref h) => h.last().map(|b| b.count),
        Value::Summary(_) => None,
    }
}

/// `GET /metrics` over plain HTTP/1.1.
async fn http_get(addr: std::net::SocketAddr) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.ok()?;
    let text = String::from_utf8_lossy(&buf).to_string();
    text.starts_with("HTTP/1.1 200")
        .then(|| text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()))
        .flatten()
}

#[tokio::test]
async fn a_server_and_an_agent_are_scraped_and_parsed() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let mut o = AgentOptions::new(vec![s.addr.clone()], s.node_token.clone(), "scraped");
    o.tuning = quick_tuning(1);
    o.metrics = Some("127.0.0.1:0".into());
    let bound = Arc::new(OnceLock::new());
    o.metrics_bound = Some(bound.clone());
    let agent = start_sim_agent(o, SimConfig::default());
    s.apply(&pod_yaml("web", "scraped", "busybox")).await;
    wait_until("web Running and Ready", WAIT, || async {
        s.pod("web").await.is_some_and(|p| is_running_and_ready(&p))
    })
    .await;

    // The agent: its starts and its runtime calls.
    let addr = *bound.get().expect("the agent's metrics address");
    let text = http_get(addr).await.expect("the agent's /metrics");
    let scrape = parse(&text);
    assert!(
        value(&scrape, "drover_agent_pod_starts_total", &[]).is_some_and(|v| v >= 1.0),
        "{text}"
    );
    for call in ["start", "list"] {
        assert!(
            value(
                &scrape,
                "drover_agent_runtime_call_duration_seconds_count",
                &[("call", call)]
            )
            .is_some_and(|v| v >= 1.0),
            "no {call} call timed:\n{text}"
        );
    }

    // The server: with the admin token only.
    let http = s.server.http_addr.to_string();
    let ca = s.ca.clone();
    assert_eq!(
        https_get(&http, "/metrics", &ca, None).await.map(|r| r.0),
        Some(401)
    );
    assert_eq!(
        https_get(&http, "/metrics", &ca, Some("not-the-token"))
            .await
            .map(|r| r.0),
        Some(403)
    );
    let token = s.server.ctx.admin_token();
    let (code, text) = https_get(&http, "/metrics", &ca, Some(&token))
        .await
        .expect("the server's /metrics");
    assert_eq!(code, 200, "{text}");
    let scrape = parse(&text);
    let v = |name: &str, labels: &[(&str, &str)]| value(&scrape, name, labels);
    assert_eq!(v("drover_build_info", &[]), Some(1.0), "{text}");
    assert!(
        v("drover_raft_term", &[]).is_some_and(|t| t >= 1.0),
        "{text}"
    );
    assert_eq!(v("drover_raft_is_leader", &[]), Some(1.0));
    let commit = v("drover_raft_commit_index", &[]).unwrap_or(0.0);
    assert!(commit >= 1.0 && v("drover_raft_applied_index", &[]).is_some());
    assert!(
        v("drover_store_writes_total", &[]).is_some_and(|w| w >= 1.0),
        "{text}"
    );
    assert!(
        v("drover_store_write_duration_seconds_count", &[]).is_some_and(|w| w >= 1.0),
        "{text}"
    );
    assert!(v("drover_controller_pass_duration_seconds_count", &[]).is_some_and(|w| w >= 1.0));
    assert!(
        v("drover_controller_passes_skipped_total", &[]).is_some(),
        "{text}"
    );
    assert_eq!(v("drover_agent_sessions", &[]), Some(1.0));
    assert_eq!(v("drover_nodes", &[("ready", "true")]), Some(1.0), "{text}");
    assert_eq!(v("drover_nodes", &[("ready", "false")]), Some(0.0));
    assert_eq!(
        v("drover_pods", &[("phase", "Running")]),
        Some(1.0),
        "{text}"
    );
    // No series names a node or a pod.
    assert!(
        !text.contains("scraped") && !text.contains("\"web\""),
        "{text}"
    );

    agent.stop(WAIT).await;
    s.shutdown().await;
}
