//! The dashboard in a real browser (issue 25): Debian's headless Chromium
//! through chromedriver, driven by PyPI's selenium (`tests/browser/
//! dashboard.py`, one scenario per run) against an in-process member with
//! sim nodes. Without chromium, chromedriver or selenium the tests fail
//! loudly, unless the run opts out out loud (`DROVER_TEST_SKIP=browser`).
//! `DROVER_DASHBOARD_SHOTS=DIR` keeps the screenshots (docs/dashboard.md's
//! come from `DIR=docs/dashboard`).

mod dash;

use dash::{deployment, rolled_out, start_sim, web};
use drover_testkit::{wait_until, TestServer};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const WAIT: Duration = Duration::from_secs(30);

/// Whether the browser and its driver are here; a panic saying what to
/// install when they are not, unless `DROVER_TEST_SKIP` lists `browser`.
fn browser_ready() -> bool {
    let missing: Vec<&str> = [
        ("chromium", "/usr/bin/chromium"),
        ("chromium-driver", "/usr/bin/chromedriver"),
    ]
    .iter()
    .filter(|(_, path)| !std::path::Path::new(path).exists())
    .map(|(pkg, _)| *pkg)
    .chain(
        std::process::Command::new("python3")
            .args(["-c", "import selenium"])
            .output()
            .map_or(true, |o| !o.status.success())
            .then_some("selenium (pip)"),
    )
    .collect();
    if missing.is_empty() {
        return true;
    }
    let skip = std::env::var("DROVER_TEST_SKIP")
        .map(|v| v.split(',').any(|w| w.trim() == "browser"))
        .unwrap_or(false);
    if skip {
        eprintln!("SKIPPED (DROVER_TEST_SKIP=browser): missing {missing:?}");
        return false;
    }
    panic!(
        "the browser tests need {missing:?}: apt-get install chromium chromium-driver; pip install selenium (.ci/run does both), or opt out with DROVER_TEST_SKIP=browser"
    );
}

fn shots_dir(tmp: &std::path::Path) -> PathBuf {
    match std::env::var("DROVER_DASHBOARD_SHOTS") {
        Ok(d) if !d.is_empty() => {
            let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
            let dir = root.join(d);
            std::fs::create_dir_all(&dir).unwrap();
            dir
        }
        _ => tmp.to_path_buf(),
    }
}

/// One scenario of the script, running.
struct Script {
    child: Child,
    out: tokio::io::Lines<BufReader<ChildStdout>>,
    input: ChildStdin,
    lines: Vec<String>,
}

impl Script {
    fn start(scenario: &str, env: &[(&str, String)]) -> Script {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser/dashboard.py");
        let mut cmd = Command::new("python3");
        cmd.arg(script)
            .arg(scenario)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("python3 runs");
        let out = BufReader::new(child.stdout.take().unwrap()).lines();
        let input = child.stdin.take().unwrap();
        Script {
            child,
            out,
            input,
            lines: Vec::new(),
        }
    }

    /// Reads lines until `line` (when it came), failing with the script's
    /// stderr if it ends first.
    async fn expect(&mut self, line: &str, within: Duration) -> Instant {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.out.next_line()).await {
                Ok(Ok(Some(l))) => {
                    let at = Instant::now();
                    println!("script: {l}");
                    self.lines.push(l.clone());
                    if l == line {
                        return at;
                    }
                }
                Ok(_) => {
                    self.fail(&format!("the script ended before {line:?}"))
                        .await
                }
                Err(_) => self.fail(&format!("no {line:?} within {within:?}")).await,
            }
        }
    }

    async fn fail(&mut self, why: &str) -> ! {
        let _ = self.child.start_kill();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            use tokio::io::AsyncReadExt;
            let _ = tokio::time::timeout(Duration::from_secs(5), e.read_to_string(&mut err)).await;
        }
        panic!("{why}; lines {:?}; stderr:\n{err}", self.lines);
    }

    async fn go(&mut self) {
        self.input.write_all(b"GO\n").await.unwrap();
        self.input.flush().await.unwrap();
    }

    /// Waits for the script's end: its RESULT lines, or a panic with why
    /// it failed.
    async fn finish(mut self, within: Duration) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + within;
        while let Ok(Ok(Some(l))) = tokio::time::timeout_at(deadline, self.out.next_line()).await {
            println!("script: {l}");
            self.lines.push(l);
        }
        match tokio::time::timeout_at(deadline, self.child.wait()).await {
            Ok(Ok(s)) if s.success() => self.lines,
            _ => self.fail("the scenario failed").await,
        }
    }
}

/// When `node` is NotReady in the store, polled every 10 ms from now.
async fn not_ready_at(s: &TestServer, node: &str) -> Instant {
    let start = Instant::now();
    while start.elapsed() < WAIT {
        if s.node(node).await.is_some_and(|n| !n.is_ready()) {
            return Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{node} not NotReady in the store within {WAIT:?}");
}

fn base_env(s: &TestServer, shots: &std::path::Path) -> Vec<(&'static str, String)> {
    vec![
        ("DASH_URL", format!("https://{}", s.server.http_addr)),
        ("DASH_SHOTS", shots.display().to_string()),
    ]
}

async fn login(s: &TestServer, token: Option<&str>, id: Option<(&str, &str)>) -> String {
    dash::session_cookie(&dash::login(s, token, id).await)
}

fn daemon_set(version: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: agent}}\nspec:\n  selector: {{matchLabels: {{app: agent}}}}\n  minReadySeconds: 1\n  updateStrategy: {{type: RollingUpdate, rollingUpdate: {{maxUnavailable: 3}}}}\n  template:\n    metadata: {{labels: {{app: agent}}}}\n    spec:\n      containers: [{{name: agent, image: \"local/busybox:1\", env: [{{name: VERSION, value: \"{version}\"}}]}}]\n"
    )
}

#[tokio::test]
async fn browser_sign_in_is_refused_and_accepted_per_role_and_a_viewer_cannot_act() {
    if !browser_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let shots = shots_dir(tmp.path());
    let s = TestServer::start(&tmp.path().join("s")).await;
    let sim = start_sim(&s, "edge-", 3).await;
    s.apply(&daemon_set("1")).await;
    let metrics = s.client().rotate_token("metrics").await.unwrap();
    let mut env = base_env(&s, &shots);
    env.push(("DASH_TOKEN", s.server.identity.admin_token.clone()));
    env.push(("DASH_METRICS_TOKEN", metrics));
    let lines = Script::start("signin", &env).finish(WAIT * 2).await;
    assert!(lines.contains(&"RESULT refused=MetricsCredential".to_string()));
    assert!(lines.contains(&"RESULT signed-in=admin".to_string()));

    let (cert, key) = dash::issue(&s.server, "vera", "viewer").await;
    let cookie = login(&s, None, Some((&cert, &key))).await;
    let mut env = base_env(&s, &shots);
    env.push(("DASH_COOKIE", cookie));
    env.push(("DASH_NODE", "edge-0".into()));
    wait_until("a pod of agent on edge-0", WAIT, || async {
        s.pods(Some("default"))
            .await
            .iter()
            .any(|p| p.spec.node_name == "edge-0")
    })
    .await;
    let pod = s
        .pods(Some("default"))
        .await
        .into_iter()
        .find(|p| p.spec.node_name == "edge-0")
        .unwrap();
    env.push((
        "DASH_POD_PATH",
        format!("/ui/pods/default/{}", pod.metadata.name),
    ));
    let lines = Script::start("viewer", &env).finish(WAIT * 2).await;
    assert!(lines.contains(&"RESULT viewer-refused=403".to_string()));
    assert!(!s.node("edge-0").await.unwrap().spec.unschedulable);
    sim.shutdown().await;
    s.shutdown().await;
}

#[tokio::test]
async fn browser_the_rollout_grid_goes_from_waiting_to_updated_over_20_sim_nodes() {
    if !browser_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let shots = shots_dir(tmp.path());
    let s = TestServer::start(&tmp.path().join("s")).await;
    let sim = start_sim(&s, "edge-", 20).await;
    s.apply(&daemon_set("1")).await;
    let updated = |n: i32| {
        let s = &s;
        async move {
            match s
                .objects
                .get(drover_api::Kind::DaemonSet, "default", "agent")
                .await
            {
                Ok(drover_api::Manifest::DaemonSet(ds)) => {
                    ds.status.updated_number_scheduled == n && ds.status.number_available == n
                }
                _ => false,
            }
        }
    };
    wait_until("20 pods updated and available", WAIT, || updated(20)).await;
    let cookie = login(&s, Some(&s.server.identity.admin_token), None).await;
    let mut env = base_env(&s, &shots);
    env.push(("DASH_COOKIE", cookie));
    env.push(("DASH_PATH", "/ui/daemonsets/default/agent".into()));
    env.push(("DASH_NODES", "20".into()));
    let mut script = Script::start("rollout", &env);
    script.expect("READY", WAIT * 2).await;
    let started = Instant::now();
    s.apply(&daemon_set("2")).await;
    script.go().await;
    let lines = script.finish(Duration::from_secs(90)).await;
    println!(
        "the grid showed the rollout of 20 nodes, done {:?} after the apply",
        started.elapsed()
    );
    let states = lines
        .iter()
        .find_map(|l| l.strip_prefix("RESULT states="))
        .expect("the states the grid showed");
    assert!(states.contains("s-updated"), "{states}");
    assert!(
        states.contains("s-waiting") || states.contains("s-updating"),
        "the grid never showed a node waiting: {states}"
    );
    sim.shutdown().await;
    s.shutdown().await;
}

#[tokio::test]
async fn browser_a_deployment_turns_over_in_its_grid_and_a_viewer_cannot_press_its_buttons() {
    if !browser_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let shots = shots_dir(tmp.path());
    let s = TestServer::start(&tmp.path().join("s")).await;
    let sim = start_sim(&s, "edge-", 5).await;
    s.apply(&deployment("1", 6, false)).await;
    rolled_out(&s, "local/busybox:1", 6).await;
    let cookie = login(&s, Some(&s.server.identity.admin_token), None).await;
    let mut env = base_env(&s, &shots);
    env.push(("DASH_COOKIE", cookie));
    env.push(("DASH_PATH", "/ui/deployments/default/web".into()));
    env.push(("DASH_NODES", "6".into()));
    env.push(("DASH_SHOT_PREFIX", "dashboard-deployment".into()));
    let mut script = Script::start("rollout", &env);
    script.expect("READY", WAIT * 2).await;
    let started = Instant::now();
    // `set image`: the template's image changes.
    s.apply(&deployment("2", 6, false)).await;
    script.go().await;
    let lines = script.finish(Duration::from_secs(90)).await;
    println!(
        "the grid showed the Deployment's 6 pods turn over, done {:?} after the apply",
        started.elapsed()
    );
    let states = lines
        .iter()
        .find_map(|l| l.strip_prefix("RESULT states="))
        .expect("the states the grid showed");
    assert!(states.contains("s-updated"), "{states}");
    assert!(
        ["s-old", "s-updating", "s-pending", "s-terminating"]
            .iter()
            .any(|st| states.contains(st)),
        "the grid never showed a pod not updated: {states}"
    );
    rolled_out(&s, "local/busybox:2", 6).await;

    let (cert, key) = dash::issue(&s.server, "vera", "viewer").await;
    let mut env = base_env(&s, &shots);
    env.push(("DASH_COOKIE", login(&s, None, Some((&cert, &key))).await));
    env.push(("DASH_PATH", "/ui/deployments/default/web".into()));
    let lines = Script::start("viewer-deploy", &env).finish(WAIT * 2).await;
    assert!(lines.contains(&"RESULT unauthenticated=401".to_string()));
    assert!(lines.contains(&"RESULT viewer-refused=403".to_string()));
    // Nothing changed.
    let d = web(&s).await;
    assert_eq!(d.spec.template.spec.containers[0].image, "local/busybox:2");
    assert!(d.spec.template.metadata.annotations.is_empty());
    sim.shutdown().await;
    s.shutdown().await;
}

#[tokio::test]
async fn browser_the_nodes_of_a_killed_sim_turn_red_within_2_s() {
    if !browser_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let shots = shots_dir(tmp.path());
    let s = TestServer::start_tuned(&tmp.path().join("s"), |o| {
        o.controller.node_timeout = Duration::from_secs(2);
    })
    .await;
    let stays = start_sim(&s, "stays-", 5).await;
    let dies = start_sim(&s, "dies-", 5).await;
    let cookie = login(&s, Some(&s.server.identity.admin_token), None).await;
    let mut env = base_env(&s, &shots);
    env.push(("DASH_COOKIE", cookie));
    env.push(("DASH_PATH", "/ui/nodes".into()));
    env.push(("DASH_NODE", "dies-0".into()));
    let mut script = Script::start("red", &env);
    script.expect("READY", WAIT * 2).await;
    let killed = Instant::now();
    dies.kill();
    let in_store = not_ready_at(&s, "dies-0").await;
    let red = script.expect("RED", WAIT).await;
    script.finish(WAIT).await;
    let late = red.saturating_duration_since(in_store);
    println!(
        "dies-0 red in the browser {late:?} after the store showed it NotReady ({:?} after the kill, node timeout 2 s)",
        red - killed
    );
    assert!(
        late < Duration::from_secs(2),
        "red {late:?} after the store"
    );
    stays.shutdown().await;
    s.shutdown().await;
}

#[tokio::test]
async fn browser_a_5000_node_page_paints_within_a_second() {
    if !browser_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let shots = shots_dir(tmp.path());
    let s = TestServer::start(&tmp.path().join("s")).await;
    // 5,000 (the issue's page); DROVER_DASHBOARD_PAINT_NODES=10000 for the
    // figure at 10,000 (a multiple of 500).
    let nodes: usize = std::env::var("DROVER_DASHBOARD_PAINT_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    for batch in 0..nodes / 500 {
        let yaml: String = (0..500)
            .map(|i| {
                format!(
                    "apiVersion: v1\nkind: Node\nmetadata: {{name: node-{:05}, labels: {{zone: z{}}}}}\n---\n",
                    batch * 500 + i,
                    i % 4
                )
            })
            .collect();
        s.apply(&yaml).await;
    }
    s.apply("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: wide}\nspec:\n  selector: {matchLabels: {app: wide}}\n  template:\n    metadata: {labels: {app: wide}}\n    spec:\n      nodeSelector: {zone: z1}\n      containers: [{name: c, image: \"local/busybox:1\"}]\n")
        .await;
    let cookie = login(&s, Some(&s.server.identity.admin_token), None).await;
    wait_until("the informer holds every node", WAIT, || async {
        s.server.cache.snapshot().nodes.len() == nodes
    })
    .await;
    // The DaemonSet's pods (one on each node of zone z1, a quarter) are
    // created before the pages are measured: the page of a settled cluster,
    // not one racing the controller's burst of 1,250 creates (which made
    // the node list answer in 1.5 s instead of 0.01-0.2 s in one run).
    wait_until("the DaemonSet's pods exist", WAIT, || async {
        s.server.cache.snapshot().pods.len() == nodes / 4
    })
    .await;
    let mut figures = Vec::new();
    for (path, shot) in [
        ("/ui/nodes", "dashboard-nodes-5000.png"),
        (
            "/ui/daemonsets/default/wide",
            "dashboard-daemonset-5000.png",
        ),
    ] {
        let mut env = base_env(&s, &shots);
        env.push(("DASH_COOKIE", cookie.clone()));
        env.push(("DASH_PATH", path.into()));
        env.push(("DASH_SHOT", shot.into()));
        let lines = Script::start("paint", &env).finish(WAIT * 2).await;
        let result = lines
            .iter()
            .find(|l| l.starts_with("RESULT first-paint-ms="))
            .expect("a first paint")
            .clone();
        let ms: f64 = result
            .trim_start_matches("RESULT first-paint-ms=")
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        println!("{path} at {nodes} nodes: {result}");
        figures.push((path, ms));
    }
    // The issue's bound for the node list: its first paint within 1 s.
    assert!(figures[0].1 < 1000.0, "{figures:?}");
    s.shutdown().await;
}

/// This process's resident memory (KiB), from /proc.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// A benchmark, not a test (ignored; figures printed, never judged):
/// first paint of the node list and of a DaemonSet's grid, the time from
/// the store to the browser for nodes going NotReady, and the extra
/// resident memory of the member's process while a dashboard is open,
/// at `DROVER_DASHBOARD_NODES` sim nodes (1,000 by default).
#[tokio::test]
#[ignore]
async fn browser_figures_at_scale() {
    if !browser_ready() {
        return;
    }
    let n: usize = std::env::var("DROVER_DASHBOARD_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let tmp = tempfile::tempdir().unwrap();
    let shots = tmp.path().to_path_buf();
    let s = TestServer::start_tuned(&tmp.path().join("s"), |o| {
        o.controller.node_timeout = Duration::from_secs(4);
    })
    .await;
    let started = Instant::now();
    let stays = start_sim(&s, "stays-", n - 10).await;
    let dies = start_sim(&s, "dies-", 10).await;
    println!("{n} sim nodes Ready in {:?}", started.elapsed());
    s.apply(&daemon_set("1")).await;
    wait_until(
        "the DaemonSet on every node",
        Duration::from_secs(300),
        || async {
            match s
                .objects
                .get(drover_api::Kind::DaemonSet, "default", "agent")
                .await
            {
                Ok(drover_api::Manifest::DaemonSet(ds)) => ds.status.number_available == n as i32,
                _ => false,
            }
        },
    )
    .await;
    let cookie = login(&s, Some(&s.server.identity.admin_token), None).await;
    for path in ["/ui/nodes", "/ui/daemonsets/default/agent"] {
        let mut env = base_env(&s, &shots);
        env.push(("DASH_COOKIE", cookie.clone()));
        env.push(("DASH_PATH", path.into()));
        let lines = Script::start("paint", &env).finish(WAIT * 2).await;
        let r = lines.iter().find(|l| l.starts_with("RESULT")).cloned();
        println!("FIGURE {path} at {n} nodes: {r:?}");
    }
    let before = rss_kib();
    let mut env = base_env(&s, &shots);
    env.push(("DASH_COOKIE", cookie.clone()));
    env.push(("DASH_PATH", "/ui/nodes?q=dies".into()));
    env.push(("DASH_NODE", "dies-0".into()));
    let mut script = Script::start("red", &env);
    script.expect("READY", WAIT * 2).await;
    let open = rss_kib();
    dies.kill();
    let in_store = not_ready_at(&s, "dies-0").await;
    let red = script.expect("RED", WAIT).await;
    script.finish(WAIT).await;
    println!(
        "FIGURE at {n} nodes: NotReady shown {:?} after the store; RSS {before} KiB before the dashboard, {open} KiB with it open (+{} KiB)",
        red.saturating_duration_since(in_store),
        open.saturating_sub(before)
    );
    stays.shutdown().await;
    s.shutdown().await;
}
