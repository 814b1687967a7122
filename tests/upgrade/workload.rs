//! What runs through the upgrade test: the writer, the node watch, the
//! DaemonSets and their rollout, what each member's absence cost.

use super::*;

// ------------------------------------------------------------ the workload

/// What the writer did.
#[derive(Default)]
pub struct Writes {
    /// Every key tried, with its value.
    pub attempted: BTreeMap<String, String>,
    /// Acknowledged creates: key, revision, when acknowledged.
    pub acked: BTreeMap<String, (u64, Instant)>,
    /// Every acknowledged write: when it was sent, how long it took.
    pub latencies: Vec<(Instant, Duration)>,
    /// Failed creates (outcome unknown): key and error.
    pub failed: Vec<(String, String)>,
    /// Fresh keys answered ALREADY_EXISTS: a retry applied twice.
    pub already_exists: Vec<String>,
}

/// Creates `/upgrade/w/{i:06}` = `v{i}` one after the other until stopped.
pub async fn writer(client: Client, stop: Arc<AtomicBool>, log: Arc<Mutex<Writes>>) {
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("/upgrade/w/{i:06}");
        let value = format!("v{i}");
        i += 1;
        log.lock()
            .unwrap()
            .attempted
            .insert(key.clone(), value.clone());
        let sent = Instant::now();
        match client.create(&key, value.into_bytes()).await {
            Ok(r) => {
                let mut l = log.lock().unwrap();
                l.acked.insert(key, (r.revision, Instant::now()));
                l.latencies.push((sent, sent.elapsed()));
            }
            Err(e) if e.code().map(i32::from) == Some(GRPC_ALREADY_EXISTS) => {
                log.lock().unwrap().already_exists.push(key);
            }
            Err(e) => log.lock().unwrap().failed.push((key, e.to_string())),
        }
    }
}

/// What the node watch saw.
#[derive(Default)]
pub struct NodeLog {
    /// Every node seen not Ready or deleted: what, when (since the watch
    /// started).
    pub violations: Vec<String>,
    /// Node events seen.
    pub events: usize,
    /// Times the watch was resumed (its member went away).
    pub resumed: usize,
    /// Times it had to list again (its revision was compacted away).
    pub relisted: usize,
    /// The nodes seen Ready: from then on they must stay so (a node that
    /// joins is not Ready before its agent's first report).
    pub names: BTreeSet<String>,
}

pub fn node_ready(n: &Value) -> Option<String> {
    let cond = n["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready");
    match cond {
        Some(c) if c["status"] == "True" => None,
        Some(c) => Some(format!(
            "Ready={} ({}: {})",
            c["status"].as_str().unwrap_or("?"),
            c["reason"].as_str().unwrap_or(""),
            c["message"].as_str().unwrap_or("")
        )),
        None => Some("no Ready condition".into()),
    }
}

/// Lists the Nodes, then follows their changes, resuming from the last
/// revision seen when the stream ends; runs until aborted.
pub async fn watch_nodes(client: Client, log: Arc<Mutex<NodeLog>>) {
    let started = Instant::now();
    let mut rv = String::new();
    let note = |n: &Value, what: &str, log: &Mutex<NodeLog>| {
        let name = n["metadata"]["name"].as_str().unwrap_or("?").to_string();
        let mut l = log.lock().unwrap();
        let bad = if what == "DELETED" {
            Some("deleted".to_string())
        } else {
            node_ready(n)
        };
        if bad.is_none() {
            l.names.insert(name.clone());
        }
        if let Some(b) = bad.filter(|_| l.names.contains(&name)) {
            l.violations
                .push(format!("{:?}: node {name} {what}: {b}", started.elapsed()));
        }
    };
    loop {
        if rv.is_empty() {
            match client.list_objects("nodes", "", "").await {
                Ok(list) => {
                    for n in &list.items {
                        let v = serde_json::to_value(n).expect("a node as JSON");
                        note(&v, "listed", &log);
                    }
                    rv = list.resource_version;
                }
                Err(_) => {
                    tokio::time::sleep(POLL).await;
                    continue;
                }
            }
        }
        let mut w = match client.watch_objects("nodes", "", &rv).await {
            Ok(w) => w,
            Err(e) => {
                if e.code().map(i32::from) == Some(GRPC_OUT_OF_RANGE) {
                    log.lock().unwrap().relisted += 1;
                    rv.clear();
                }
                tokio::time::sleep(POLL).await;
                continue;
            }
        };
        // Until the stream ends or fails (its member went away): resume.
        while let Ok(Some(ev)) = w.next().await {
            let v = serde_json::to_value(&ev.object).expect("a node as JSON");
            if let Some(r) = v["metadata"]["resourceVersion"].as_str() {
                rv = r.to_string();
            }
            log.lock().unwrap().events += 1;
            note(&v, &ev.r#type, &log);
        }
        log.lock().unwrap().resumed += 1;
    }
}

/// DaemonSet `name` whose template is round `round` of its rollout.
/// `roll` waits [`ROLL_MIN_READY`] seconds on each new pod, so that a round
/// lasts longer than a member is away.
pub fn daemon_set(name: &str, round: usize) -> String {
    let min_ready = if name == "roll" { ROLL_MIN_READY } else { 0 };
    format!(
        "apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: {name}, namespace: default}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  minReadySeconds: {min_ready}
  updateStrategy: {{type: RollingUpdate, rollingUpdate: {{maxUnavailable: 1}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: local/busybox:1
        command: [sleep, \"1000000\"]
        env: [{{name: ROUND, value: \"{round}\"}}]
"
    )
}

/// A pod as the test follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFacts {
    pub uid: String,
    pub node: String,
    pub container_id: String,
    pub restarts: i64,
    pub started_at: String,
    pub round: String,
    pub running_ready: bool,
}

/// The pods of DaemonSet `app` by name.
pub async fn pods(client: &Client, app: &str) -> Option<BTreeMap<String, PodFacts>> {
    let list = client
        .list_objects("pods", "default", &format!("app={app}"))
        .await
        .ok()?;
    let mut out = BTreeMap::new();
    for p in &list.items {
        let v = serde_json::to_value(p).ok()?;
        if !v["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let cs = &v["status"]["containerStatuses"][0];
        let ready = v["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        let env = &v["spec"]["containers"][0]["env"];
        let round = env
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["name"] == "ROUND")
            .and_then(|e| e["value"].as_str())
            .unwrap_or("")
            .to_string();
        out.insert(
            v["metadata"]["name"].as_str().unwrap_or("").to_string(),
            PodFacts {
                uid: v["metadata"]["uid"].as_str().unwrap_or("").to_string(),
                node: v["spec"]["nodeName"].as_str().unwrap_or("").to_string(),
                container_id: cs["containerID"].as_str().unwrap_or("").to_string(),
                restarts: cs["restartCount"].as_i64().unwrap_or(-1),
                started_at: cs["state"]["running"]["startedAt"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                round,
                running_ready: v["status"]["phase"] == "Running" && ready,
            },
        );
    }
    Some(out)
}

/// Every node has one pod of `app`, Running and Ready, of template round
/// `round`, and the DaemonSet's status says its rollout is complete.
pub async fn rolled_out(
    client: &Client,
    app: &str,
    round: usize,
    nodes: usize,
) -> Option<BTreeMap<String, PodFacts>> {
    let ds = client.get_object("ds", "default", app).await.ok()?;
    let ds = serde_json::to_value(&ds).ok()?;
    let st = &ds["status"];
    let n = nodes as u64;
    let done = st["observedGeneration"] == ds["metadata"]["generation"]
        && st["desiredNumberScheduled"].as_u64() == Some(n)
        && st["updatedNumberScheduled"].as_u64() == Some(n)
        && st["numberAvailable"].as_u64() == Some(n)
        && st["numberReady"].as_u64() == Some(n);
    if !done {
        return None;
    }
    let pods = pods(client, app).await?;
    let on: BTreeSet<&str> = pods.values().map(|p| p.node.as_str()).collect();
    (pods.len() == nodes
        && on.len() == nodes
        && pods
            .values()
            .all(|p| p.running_ready && p.round == round.to_string()))
    .then_some(pods)
}

pub async fn apply(client: &Client, text: &str) {
    let r = client.apply(text, false).await;
    assert!(r.is_ok(), "apply failed: {:?}\n{text}", r.err());
}

// ------------------------------------------------------------ the test

/// One member's upgrade (or downgrade), as measured.
pub struct Away {
    pub who: String,
    /// SIGTERM to exit.
    pub exit: Duration,
    /// SIGTERM to serving again as a voter that caught up.
    pub away: Duration,
    /// Writes acknowledged meanwhile.
    pub acked: usize,
    /// The longest time between two acknowledgements meanwhile.
    pub max_gap: Duration,
    /// The slowest write sent meanwhile: sent this long after SIGTERM, it
    /// took this long.
    pub slowest: Option<(Duration, Duration)>,
}

/// The writes acknowledged between `from` and `to`, the longest time
/// without one, and the slowest write sent meanwhile (when, how long).
pub fn acks_between(
    w: &Writes,
    from: Instant,
    to: Instant,
) -> (usize, Duration, Option<(Duration, Duration)>) {
    let mut times: Vec<Instant> = w
        .acked
        .values()
        .map(|(_, t)| *t)
        .filter(|t| *t >= from && *t <= to)
        .collect();
    times.sort();
    let mut gap = Duration::ZERO;
    let mut last = from;
    for t in &times {
        gap = gap.max(*t - last);
        last = *t;
    }
    gap = gap.max(to - last);
    let slowest = w
        .latencies
        .iter()
        .filter(|(sent, _)| *sent >= from && *sent <= to)
        .max_by_key(|(_, took)| *took)
        .map(|(sent, took)| (*sent - from, *took));
    (times.len(), gap, slowest)
}
