//! `drover proxy` and `drover ui` as processes, with the real kubectl.
//!
//! - `kubectl_through_the_proxy_survives_a_leader_sigkill`: three `drover
//!   server` processes and `drover proxy`; kubectl, with only the
//!   kubeconfig the proxy wrote, reads and applies, the leader is
//!   SIGKILLed, and kubectl reads and applies again through the same
//!   address, without switching contexts.
//! - `the_proxy_refuses_what_is_not_its_own`: one server; a foreign
//!   `Host`, another origin's page, the dashboard without the one-time
//!   secret, a local `Authorization` (never forwarded), a request without
//!   a credential straight to the member; a viewer's admin action through
//!   `drover ui` refused by the server, an admin's done.
//!
//! Every wait has a deadline; children are SIGKILLed when the test ends.

use drover_cli::{Client, ClientConfig};
use drover_testkit::Procs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const START: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(25);
/// How long one kubectl command may take (the proxy tries members for
/// 20 s at most).
const KUBECTL: Duration = Duration::from_secs(40);

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_drover")
}

fn require_kubectl() {
    match std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .output()
    {
        Ok(o) if o.status.success() => {}
        other => panic!("these tests need kubectl v1.32 on PATH: {other:?}"),
    }
}

/// One `drover server` process.
struct Member {
    dir: PathBuf,
    grpc: String,
    http: String,
    /// Index into the cluster's `Procs`; `None` once killed.
    proc: Option<usize>,
}

struct Cluster {
    members: Vec<Member>,
    procs: Procs,
    token: String,
    ca: String,
    tmp: tempfile::TempDir,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in &mut self.procs.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            let logs = std::fs::read_dir(self.tmp.path()).into_iter().flatten();
            for e in logs.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "log") {
                    let text = std::fs::read_to_string(&p).unwrap_or_default();
                    let lines: Vec<&str> = text.lines().collect();
                    let tail = &lines[lines.len().saturating_sub(40)..];
                    eprintln!("----- {}:\n{}", p.display(), tail.join("\n"));
                }
            }
        }
    }
}

impl Cluster {
    async fn start(n: usize) -> Cluster {
        require_kubectl();
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut c = Cluster {
            members: Vec::new(),
            procs: Procs(Vec::new()),
            token: String::new(),
            ca: String::new(),
            tmp,
        };
        let mut server_token = String::new();
        for i in 0..n {
            let dir = c.tmp.path().join(format!("m{i}"));
            let log = c.tmp.path().join(format!("m{i}.log"));
            let d = dir.display().to_string();
            let mut args = vec![
                "server",
                "--data-dir",
                &d,
                "--listen",
                "127.0.0.1:0",
                "--http",
                "127.0.0.1:0",
            ];
            let join = c.members.first().map(|m: &Member| m.grpc.clone());
            if let Some(j) = &join {
                args.extend(["--join", j.as_str(), "--token", server_token.as_str()]);
            }
            let mut child = drover_testkit::spawn_logged(bin(), &args, &log);
            let a = drover_testkit::wait_member_addrs(&dir, &mut child, START);
            c.procs.0.push(child);
            c.members.push(Member {
                dir: dir.clone(),
                grpc: a.grpc,
                http: a.http,
                proc: Some(c.procs.0.len() - 1),
            });
            let client_yaml = dir.join("client.yaml");
            drover_testkit::wait_until("client.yaml", START, || async { client_yaml.exists() })
                .await;
            if i == 0 {
                let cfg = ClientConfig::load(&client_yaml).expect("client.yaml");
                c.token = cfg.token;
                c.ca = cfg.ca;
                server_token = std::fs::read_to_string(dir.join("server-token"))
                    .expect("server-token")
                    .trim()
                    .to_string();
            }
            let (http, dir) = (c.members[i].http.clone(), dir.clone());
            drover_testkit::wait_until("the member's health", START, || async {
                drover_testkit::member_http_status(&http, "/health", &dir).await == Some(200)
            })
            .await;
        }
        let me = &c;
        drover_testkit::wait_until("every member a voter", START, || async {
            let Some(l) = me.leader().await else {
                return false;
            };
            let st = me.single(l).status().await;
            st.is_ok_and(|s| {
                s.members
                    .iter()
                    .filter(|m| !m.learner && !m.removed)
                    .count()
                    == n
            })
        })
        .await;
        c
    }

    fn single(&self, i: usize) -> Client {
        let mut c = Client::single(&self.members[i].grpc, &self.token, &self.ca).expect("client");
        c.deadline = Duration::from_millis(500);
        c
    }

    /// The running member that says it leads.
    async fn leader(&self) -> Option<usize> {
        for (i, m) in self.members.iter().enumerate() {
            if m.proc.is_none() {
                continue;
            }
            let st = tokio::time::timeout(Duration::from_secs(2), self.single(i).status()).await;
            if let Ok(Ok(st)) = st {
                if st.leader == st.id && st.id != 0 {
                    return Some(i);
                }
            }
        }
        None
    }

    fn kill(&mut self, i: usize) {
        let p = self.members[i].proc.take().expect("running");
        self.procs.0[p].kill().expect("SIGKILL");
        self.procs.0[p].wait().expect("reap");
    }

    /// Starts `drover ARGS` (a proxy or ui) with its output in `name.log`,
    /// and waits until it printed `Serving on`: the lines it printed.
    async fn listener(&mut self, name: &str, args: &[&str]) -> String {
        let log = self.tmp.path().join(format!("{name}.log"));
        let mut child = drover_testkit::spawn_logged(bin(), args, &log);
        let deadline = Instant::now() + START;
        let out = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("Dashboard") {
                break text;
            }
            if let Some(st) = child.try_wait().expect("try_wait") {
                panic!("drover {args:?} exited ({st}): {text}");
            }
            assert!(
                Instant::now() < deadline,
                "drover {args:?} did not serve: {text}"
            );
            tokio::time::sleep(POLL).await;
        };
        self.procs.0.push(child);
        out
    }
}

/// `http://127.0.0.1:PORT` and the one-time path of a listener's output.
fn urls(out: &str) -> (String, String) {
    let serving = out
        .lines()
        .find_map(|l| l.strip_prefix("Serving on "))
        .expect("Serving on");
    let base = serving
        .split_whitespace()
        .next()
        .expect("url")
        .trim_end_matches(',');
    let open = out
        .lines()
        .find_map(|l| l.split("): ").nth(1).filter(|_| l.starts_with("Dashboard")))
        .expect("the dashboard URL");
    (
        base.to_string(),
        open.strip_prefix(base).expect("same base").to_string(),
    )
}

/// kubectl with only `kubeconfig`, its cache in the test's HOME.
async fn kubectl(home: &Path, kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    let out = tokio::process::Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", home)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(KUBECTL, out)
        .await
        .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish within {KUBECTL:?}"))
        .expect("kubectl runs")
}

async fn kubectl_ok(home: &Path, kubeconfig: &Path, args: &[&str]) -> String {
    let o = kubectl(home, kubeconfig, args).await;
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    );
    assert!(o.status.success(), "kubectl {args:?}: {out}{err}");
    out
}

fn daemonset(name: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: {name}}}\nspec:\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      containers:\n      - {{name: c, image: 'busybox:1'}}\n"
    )
}

const NODE: &str = "apiVersion: v1\nkind: Node\nmetadata: {name: edge-1, labels: {zone: a}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_through_the_proxy_survives_a_leader_sigkill() {
    let mut c = Cluster::start(3).await;
    let kubeconfig = c.tmp.path().join("m0/kubeconfig-proxy");
    let home = c.tmp.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let cfg = c.members[0].dir.join("client.yaml").display().to_string();
    // The kubeconfig goes beside the client config without --kubeconfig.
    let out = c
        .listener("proxy", &["proxy", "--config", &cfg, "--port", "0"])
        .await;
    assert!(
        out.contains(&format!("export KUBECONFIG={}", kubeconfig.display())),
        "{out}"
    );
    let text = std::fs::read_to_string(&kubeconfig).expect("the proxy's kubeconfig");
    assert!(text.contains("current-context: drover-proxy"), "{text}");
    assert!(
        !text.contains(&c.token),
        "the kubeconfig holds no credential"
    );

    let files = c.tmp.path().to_path_buf();
    for (name, text) in [
        ("node.yaml", NODE.to_string()),
        ("a.yaml", daemonset("before-kill")),
        ("b.yaml", daemonset("after-kill")),
    ] {
        std::fs::write(files.join(name), text).expect("manifest");
    }
    let f = |n: &str| files.join(n).display().to_string();
    kubectl_ok(&home, &kubeconfig, &["apply", "-f", &f("node.yaml")]).await;
    let nodes = kubectl_ok(&home, &kubeconfig, &["get", "nodes"]).await;
    assert!(nodes.contains("edge-1"), "{nodes}");
    kubectl_ok(&home, &kubeconfig, &["apply", "-f", &f("a.yaml")]).await;

    let leader = c.leader().await.expect("a leader");
    eprintln!(
        "SIGKILL of the leader m{leader} ({})",
        c.members[leader].http
    );
    let killed = Instant::now();
    c.kill(leader);
    let nodes = kubectl_ok(&home, &kubeconfig, &["get", "nodes"]).await;
    let first_get = killed.elapsed();
    assert!(nodes.contains("edge-1"), "{nodes}");
    let t = Instant::now();
    let applied = kubectl_ok(&home, &kubeconfig, &["apply", "-f", &f("b.yaml")]).await;
    let apply_after = t.elapsed();
    assert!(
        applied.contains("daemonset.apps/after-kill created"),
        "{applied}"
    );
    let ds = kubectl_ok(&home, &kubeconfig, &["get", "ds", "-o", "name"]).await;
    assert!(
        ds.contains("daemonset.apps/before-kill") && ds.contains("daemonset.apps/after-kill"),
        "{ds}"
    );
    eprintln!(
        "after the SIGKILL: the first `kubectl get nodes` took {first_get:?}, the next `kubectl apply` {apply_after:?}"
    );
    let log = std::fs::read_to_string(c.tmp.path().join("proxy.log")).unwrap_or_default();
    for l in log.lines().filter(|l| l.contains(&c.members[leader].http)) {
        eprintln!("proxy: {l}");
    }
    assert!(
        log.contains(&c.members[leader].http),
        "the proxy knew the killed member: {log}"
    );
}

/// One HTTP/1.1 request to the proxy: status, headers (lower-cased) and body.
async fn http(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    let addr = base.strip_prefix("http://").expect("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    tokio::time::timeout(KUBECTL, s.read_to_end(&mut raw))
        .await
        .expect("an answer in time")
        .expect("read");
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").expect("a head");
    let mut lines = head.lines();
    let code: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let hs: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let chunked = hs
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    (code, hs, body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn header<'a>(hs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    hs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// Opens the dashboard of a `drover ui` with its one-time path: the local
/// cookie (`name=value`).
async fn open_ui(base: &str, open: &str) -> String {
    let (code, hs, body) = http(base, "GET", open, &[], "").await;
    assert_eq!(code, 303, "{body}");
    let set = header(&hs, "set-cookie").expect("a local cookie");
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    set.split(';').next().expect("name=value").to_string()
}

/// The CSRF token of a dashboard page.
fn csrf(page: &str) -> String {
    let at = page.find(r#"name="csrf" content=""#).expect("a CSRF token") + 21;
    page[at..]
        .split('"')
        .next()
        .expect("closing quote")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_refuses_what_is_not_its_own() {
    let mut c = Cluster::start(1).await;
    let admin_cfg = c.members[0].dir.join("client.yaml").display().to_string();
    let viewer_cfg = c.tmp.path().join("vera.yaml").display().to_string();
    let issued = tokio::process::Command::new(bin())
        .args([
            "access",
            "issue",
            "vera",
            "--role",
            "viewer",
            "-o",
            &viewer_cfg,
            "--config",
            &admin_cfg,
        ])
        .output();
    let issued = tokio::time::timeout(KUBECTL, issued)
        .await
        .expect("in time")
        .expect("runs");
    assert!(issued.status.success(), "{issued:?}");
    let kc = c.tmp.path().join("admin.kubeconfig").display().to_string();
    let out = c
        .listener(
            "proxy-admin",
            &[
                "proxy",
                "--config",
                &admin_cfg,
                "--port",
                "0",
                "--kubeconfig",
                &kc,
            ],
        )
        .await;
    let (admin, admin_open) = urls(&out);
    let kv = c.tmp.path().join("viewer.kubeconfig").display().to_string();
    let out = c
        .listener(
            "proxy-viewer",
            &[
                "proxy",
                "--config",
                &viewer_cfg,
                "--port",
                "0",
                "--kubeconfig",
                &kv,
            ],
        )
        .await;
    let (viewer, _) = urls(&out);
    let out = c
        .listener("ui-viewer", &["ui", "--config", &viewer_cfg, "--port", "0"])
        .await;
    let (ui_viewer, ui_viewer_open) = urls(&out);
    let out = c
        .listener("ui-admin", &["ui", "--config", &admin_cfg, "--port", "0"])
        .await;
    let (ui_admin, ui_admin_open) = urls(&out);

    // The proxy's own address: answered with the admin's credential.
    let (code, _, body) = http(&admin, "GET", "/api/v1/nodes", &[], "").await;
    assert_eq!(code, 200, "{body}");
    let node_json = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"edge-1"}}"#;
    let (code, _, body) = http(
        &admin,
        "POST",
        "/api/v1/nodes",
        &[("content-type", "application/json")],
        node_json,
    )
    .await;
    assert_eq!(code, 201, "{body}");

    // A foreign Host (DNS rebinding), another origin's page: refused here.
    let port = admin.rsplit(':').next().expect("port");
    let cm =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"evil"},"data":{"a":"b"}}"#;
    let json = ("content-type", "application/json");
    for (what, headers) in [
        (
            "a foreign Host",
            vec![("host", format!("evil.example:{port}"))],
        ),
        (
            "another port's Host",
            vec![("host", "127.0.0.1:1".to_string())],
        ),
        (
            "another origin",
            vec![("origin", "http://evil.example".to_string())],
        ),
        (
            "another port's origin",
            vec![("origin", "http://127.0.0.1:1".to_string())],
        ),
        (
            "a cross-site fetch",
            vec![("sec-fetch-site", "cross-site".to_string())],
        ),
    ] {
        let mut hs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        hs.push(json);
        let (code, h, body) = http(
            &admin,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            &hs,
            cm,
        )
        .await;
        assert_eq!(code, 403, "{what}: {body}");
        let reason = header(&h, "x-drover-reason").unwrap_or("");
        assert!(
            reason == "ProxyHostRefused" || reason == "ProxyCrossOrigin",
            "{what}: {reason}"
        );
    }
    let (code, _, _) = http(
        &admin,
        "GET",
        "/api/v1/namespaces/default/configmaps/evil",
        &[],
        "",
    )
    .await;
    assert_eq!(code, 404, "no refused request reached the cluster");

    // A local Authorization never crosses: the viewer's proxy stays a
    // viewer's even when the caller sends the admin token.
    let bearer = format!("Bearer {}", c.token);
    let (code, h, body) = http(
        &viewer,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[json, ("authorization", bearer.as_str())],
        cm,
    )
    .await;
    assert_eq!(code, 403, "{body}");
    assert!(
        !header(&h, "x-drover-reason")
            .unwrap_or("")
            .starts_with("Proxy"),
        "the server refused it, not the proxy"
    );
    let (code, _, body) = http(&viewer, "GET", "/api/v1/nodes/edge-1", &[], "").await;
    assert_eq!(code, 200, "a viewer reads: {body}");

    // Without the proxy there is no credential: the member refuses.
    let direct =
        drover_testkit::net::https_get(&c.members[0].http, "/api/v1/nodes", &c.ca, None).await;
    assert_eq!(
        direct.map(|d| d.0),
        Some(401),
        "a request without a credential"
    );

    // The dashboard needs the one-time secret; `drover ui` serves nothing else.
    for base in [&admin, &ui_viewer] {
        let (code, h, _) = http(base, "GET", "/ui", &[], "").await;
        assert_eq!(code, 401);
        assert_eq!(header(&h, "x-drover-reason"), Some("ProxyNoLocalSession"));
        let (code, h, _) = http(base, "GET", "/ui/open?secret=guess", &[], "").await;
        assert_eq!(code, 401);
        assert_eq!(header(&h, "x-drover-reason"), Some("ProxyBadSecret"));
    }
    let (code, h, _) = http(&ui_viewer, "GET", "/api/v1/nodes", &[], "").await;
    assert_eq!(
        (code, header(&h, "x-drover-reason")),
        (404, Some("ProxyUiOnly"))
    );
    let (code, _, _) = http(
        &ui_viewer,
        "GET",
        "/ui",
        &[("cookie", "drover-ui=guess")],
        "",
    )
    .await;
    assert_eq!(code, 401, "a made-up local cookie");
    let cookie = open_ui(&admin, &admin_open).await;
    let (code, h, _) = http(&admin, "GET", &admin_open, &[], "").await;
    assert_eq!(
        (code, header(&h, "x-drover-reason")),
        (401, Some("ProxyBadSecret")),
        "the secret works once"
    );
    let (code, _, page) = http(&admin, "GET", "/ui", &[("cookie", cookie.as_str())], "").await;
    assert_eq!(code, 200, "{page}");
    assert!(
        page.contains("admin-token (admin)"),
        "signed in with the admin token: {page}"
    );

    // A viewer's admin action: the server refuses it; an admin's is done.
    let action = |base: String, cookie: String, token: String| async move {
        let form = format!("csrf={token}&action=cordon&node=edge-1");
        let origin = base.clone();
        http(
            &base,
            "POST",
            "/ui/action",
            &[
                ("cookie", cookie.as_str()),
                ("origin", origin.as_str()),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            &form,
        )
        .await
    };
    let cordoned = || async {
        let (_, _, body) = http(&admin, "GET", "/api/v1/nodes/edge-1", &[], "").await;
        let v: serde_json::Value = serde_json::from_str(&body).expect("a node");
        v["spec"]["unschedulable"].as_bool().unwrap_or(false)
    };
    let vcookie = open_ui(&ui_viewer, &ui_viewer_open).await;
    let (code, _, page) = http(
        &ui_viewer,
        "GET",
        "/ui/nodes/edge-1",
        &[("cookie", vcookie.as_str())],
        "",
    )
    .await;
    assert_eq!(code, 200, "{page}");
    assert!(page.contains("(viewer)"), "{page}");
    let (code, h, body) = action(ui_viewer.clone(), vcookie, csrf(&page)).await;
    let refusal: serde_json::Value = serde_json::from_str(&body).expect("the server's refusal");
    assert_eq!(
        (code, refusal["reason"].as_str()),
        (403, Some("Forbidden")),
        "{body}"
    );
    assert!(
        header(&h, "x-drover-reason").is_none(),
        "the server refused it, not the proxy"
    );
    assert!(!cordoned().await, "the viewer's action changed nothing");

    let acookie = open_ui(&ui_admin, &ui_admin_open).await;
    let (code, _, page) = http(
        &ui_admin,
        "GET",
        "/ui/nodes/edge-1",
        &[("cookie", acookie.as_str())],
        "",
    )
    .await;
    assert_eq!(code, 200, "{page}");
    let (code, _, body) = action(ui_admin.clone(), acookie.clone(), "wrong".into()).await;
    assert_eq!(code, 403, "the server's CSRF check: {body}");
    let (code, h, body) = action(ui_admin.clone(), acookie, csrf(&page)).await;
    assert_eq!(code, 303, "{body}");
    assert!(
        header(&h, "set-cookie").is_none(),
        "the server's cookie stays in the proxy"
    );
    assert!(cordoned().await, "the admin's cordon through `drover ui`");
}
