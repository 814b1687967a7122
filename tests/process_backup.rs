//! Backup and disaster recovery with the real binary (issue 26).
//!
//! - `snapshot_save_wipe_restore_on_docker`: a server and a Docker node
//!   run a DaemonSet, a ConfigMap and a Secret; `drover cluster snapshot
//!   save`; the server is SIGKILLed and its data dir wiped; `drover server
//!   --restore` on the same address brings back the same objects at the
//!   same resourceVersions; the node comes back on its own certificate
//!   and its container is the same one, never restarted. The Docker engine
//!   is needed (`DROVER_TEST_SKIP=docker` opts out, out loud).
//! - `force_new_cluster_after_losing_two_of_three`: three members take
//!   acknowledged writes; `--force-new-cluster` is refused while the other
//!   two answer; after they are SIGKILLed for good the survivor is a
//!   one-member cluster with every acknowledged write.
//!
//! Every child is SIGKILLed when the test ends, panics included; every
//! wait polls with a deadline.

use drover_testkit::docker::{docker_ps, engine_ready, node_name, Cleanup};
use drover_testkit::{spawn_logged, wait_member_addrs, wait_until_blocking, Procs};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_drover");
const POLL: Duration = Duration::from_millis(100);
const WAIT: Duration = Duration::from_secs(60);

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The client with `config`, against `servers` when given.
fn drover(config: &Path, servers: Option<&str>, args: &[&str]) -> Output {
    let mut c = Command::new(BIN);
    c.args(["--config", path(config)]);
    if let Some(s) = servers {
        c.args(["--server", s]);
    }
    c.args(args)
        .env_remove("DROVER_CONFIG")
        .env_remove("DROVER_SERVER")
        .output()
        .expect("run drover")
}

fn start_server(dir: &Path, name: &str, extra: &[&str]) -> (Child, String, String) {
    let data = dir.join(name);
    let mut args = vec!["server", "--data-dir", path(&data)];
    if !extra.contains(&"--listen") {
        args.extend_from_slice(&["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"]);
    }
    args.extend_from_slice(extra);
    let mut child = spawn_logged(BIN, &args, &dir.join(format!("{name}.log")));
    let m = wait_member_addrs(&data, &mut child, WAIT);
    (child, m.grpc, m.http)
}

fn manifests(node: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: keep
spec:
  selector:
    matchLabels: {{app: keep}}
  template:
    metadata:
      labels: {{app: keep}}
    spec:
      nodeSelector: {{kubernetes.io/hostname: {node}}}
      containers:
      - name: c
        image: local/busybox:1
        imagePullPolicy: Never
        command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  level: debug
---
apiVersion: v1
kind: Secret
metadata:
  name: password
stringData:
  password: hunter2
"#
    )
}

/// kind/namespace/name → (uid, resourceVersion) of every object of `kinds`.
fn inventory(config: &Path, kinds: &str) -> Option<BTreeMap<String, (String, String)>> {
    let o = drover(config, None, &["get", kinds, "-A", "-o", "json"]);
    if !o.status.success() {
        return None;
    }
    let v: Value = serde_json::from_slice(&o.stdout).ok()?;
    let mut out = BTreeMap::new();
    for i in v["items"].as_array()? {
        let m = &i["metadata"];
        out.insert(
            format!(
                "{}/{}/{}",
                i["kind"].as_str().unwrap_or(""),
                m["namespace"].as_str().unwrap_or(""),
                m["name"].as_str().unwrap_or("")
            ),
            (
                m["uid"].as_str().unwrap_or("").to_string(),
                m["resourceVersion"].as_str().unwrap_or("").to_string(),
            ),
        );
    }
    Some(out)
}

/// The pod of DaemonSet `app` on `node` when Running and Ready, with its
/// container's id and restart count.
fn running_pod(config: &Path, app: &str) -> Option<(String, String, i64)> {
    let o = drover(config, None, &["get", "pods", "-o", "json"]);
    let v: Value = serde_json::from_slice(&o.stdout).ok()?;
    v["items"].as_array()?.iter().find_map(|p| {
        let ready = p["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        let c = &p["status"]["containerStatuses"][0];
        let id = c["containerID"].as_str().unwrap_or("");
        (p["metadata"]["labels"]["app"] == app && ready && !id.is_empty()).then(|| {
            (
                p["metadata"]["uid"].as_str().unwrap_or("").to_string(),
                id.to_string(),
                c["restartCount"].as_i64().unwrap_or(-1),
            )
        })
    })
}

fn started_at(id: &str) -> String {
    let o = Command::new("docker")
        .args(["inspect", "-f", "{{.State.StartedAt}}", id])
        .output()
        .expect("docker inspect");
    text(&o.stdout).trim().to_string()
}

#[test]
fn snapshot_save_wipe_restore_on_docker() {
    if !engine_ready() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let node = node_name("restore", "backup");
    let _cleanup = Cleanup::new(&node);
    let mut procs = Procs(Vec::new());
    let (server, grpc, http) = start_server(dir, "m0", &[]);
    procs.0.push(server);
    let data = dir.join("m0");
    let config = data.join("client.yaml");
    wait_until_blocking("the server's files", WAIT, POLL, || {
        config.exists() && data.join("node-token").exists()
    });
    // The node's token and CA copied out: the server's data dir is wiped
    // later, as in a real loss.
    let token = dir.join("node-token");
    std::fs::copy(data.join("node-token"), &token).expect("copy the node token");
    procs.0.push(spawn_logged(
        BIN,
        &[
            "agent",
            "--server",
            &grpc,
            "--token-file",
            path(&token),
            "--name",
            &node,
            "--runtime",
            "docker",
            "--no-pull",
            "--data-dir",
            path(&dir.join("node")),
        ],
        &dir.join("agent.log"),
    ));
    let file = dir.join("manifests.yaml");
    std::fs::write(&file, manifests(&node)).expect("write manifests");
    wait_until_blocking("the apply", WAIT, POLL, || {
        drover(&config, None, &["apply", "-f", path(&file)])
            .status
            .success()
    });
    let (uid, container, restarts) = {
        let mut found = None;
        wait_until_blocking("the pod Running on Docker", WAIT, POLL, || {
            found = running_pod(&config, "keep");
            found.is_some()
        });
        found.expect("found")
    };
    let ids_before = docker_ps(&node, &[]);
    assert!(!ids_before.is_empty(), "the node runs containers");
    let started = started_at(&ids_before[0]);
    let kinds = "daemonsets,configmaps,secrets,pods,controllerrevisions";
    let before = inventory(&config, kinds).expect("inventory");

    let snapshot = dir.join("backups").join("cluster.snapshot");
    std::fs::create_dir_all(snapshot.parent().unwrap()).expect("mkdir");
    let o = drover(
        &config,
        None,
        &["cluster", "snapshot", "save", path(&snapshot)],
    );
    assert!(o.status.success(), "snapshot save: {}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("Snapshot saved to"),
        "{}",
        text(&o.stdout)
    );
    let kept_config = dir.join("client.yaml");
    std::fs::copy(&config, &kept_config).expect("keep the client config");

    // The server is lost with its data dir.
    procs.0[0].kill().expect("SIGKILL the server");
    procs.0[0].wait().expect("reap");
    std::fs::remove_dir_all(&data).expect("wipe the data dir");

    let (restored, grpc2, _) = start_server(
        dir,
        "m0",
        &[
            "--listen",
            &grpc,
            "--http",
            &http,
            "--restore",
            path(&snapshot),
        ],
    );
    procs.0[0] = restored;
    assert_eq!(grpc2, grpc, "the same address");
    let log = std::fs::read_to_string(dir.join("m0.log")).unwrap_or_default();
    assert!(
        log.contains("RESTORED from"),
        "the restore says what it did: {log}"
    );

    // The same admin token: the kept client config works.
    let mut after = None;
    wait_until_blocking("the restored objects", WAIT, POLL, || {
        after = inventory(&kept_config, kinds);
        after.is_some()
    });
    let after = after.expect("inventory");
    for (key, (u, rv)) in &before {
        let (u2, rv2) = after
            .get(key)
            .unwrap_or_else(|| panic!("{key} is missing after the restore"));
        assert_eq!(u, u2, "{key}: uid");
        if !key.starts_with("Pod/") {
            assert_eq!(rv, rv2, "{key}: resourceVersion");
        }
    }
    // The node is back on its own certificate: a DaemonSet applied now
    // runs there.
    let second = manifests(&node).replace("keep", "later");
    let second = second.split("---").next().expect("the DaemonSet");
    std::fs::write(&file, second).expect("write");
    wait_until_blocking("the apply after the restore", WAIT, POLL, || {
        drover(&kept_config, None, &["apply", "-f", path(&file)])
            .status
            .success()
    });
    wait_until_blocking("the new pod Running on the node", WAIT, POLL, || {
        running_pod(&kept_config, "later").is_some()
    });
    // And its first pod was adopted: the same container, never restarted.
    let now = running_pod(&kept_config, "keep").expect("the first pod");
    assert_eq!(
        now,
        (uid, container.clone(), restarts),
        "pod, container, restarts"
    );
    assert!(
        docker_ps(&node, &[]).contains(&ids_before[0]),
        "container {} is still there",
        ids_before[0]
    );
    assert_eq!(
        started_at(&ids_before[0]),
        started,
        "the container was not restarted"
    );
}

/// The members `cluster status` shows voting (leader or follower), with
/// their applied index.
fn members(config: &Path, servers: &str) -> Option<Vec<(String, u64)>> {
    let o = drover(config, Some(servers), &["cluster", "status"]);
    if !o.status.success() {
        return None;
    }
    Some(
        text(&o.stdout)
            .lines()
            .filter_map(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                let role = *cols.get(3)?;
                (role == "leader" || role == "follower")
                    .then(|| Some((role.to_string(), cols.get(6)?.parse().ok()?)))
                    .flatten()
            })
            .collect(),
    )
}

#[test]
fn force_new_cluster_after_losing_two_of_three() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let mut procs = Procs(Vec::new());
    let (m0, a0, _) = start_server(dir, "m0", &[]);
    procs.0.push(m0);
    let token = dir.join("m0").join("server-token");
    wait_until_blocking("the server token", WAIT, POLL, || token.exists());
    let mut addrs = vec![a0.clone()];
    for i in 1..3 {
        let (m, a, _) = start_server(
            dir,
            &format!("m{i}"),
            &["--join", &a0, "--token-file", path(&token)],
        );
        procs.0.push(m);
        addrs.push(a);
    }
    let config = dir.join("m0").join("client.yaml");
    let all = addrs.join(",");
    wait_until_blocking("three voters", WAIT, POLL, || {
        members(&config, &all).is_some_and(|m| m.len() == 3)
    });
    // Acknowledged writes: the client said so (exit 0).
    let mut acked = Vec::new();
    for i in 0..30 {
        let key = format!("/acked/{i:02}");
        let o = drover(&config, Some(&all), &["kv", "put", &key, &format!("v{i}")]);
        assert!(o.status.success(), "put {key}: {}", text(&o.stderr));
        acked.push(key);
    }
    // The survivor: the member whose log is longest (docs/operations.md:
    // force the most up-to-date one); here every member applied all.
    wait_until_blocking("every member applied every write", WAIT, POLL, || {
        members(&config, &all).is_some_and(|m| m.len() == 3 && m.iter().all(|(_, a)| *a == m[0].1))
    });
    let survivor = 2;
    procs.0[survivor].kill().expect("SIGKILL");
    procs.0[survivor].wait().expect("reap");

    // Refused while the two others answer.
    let o = Command::new(BIN)
        .args([
            "server",
            "--data-dir",
            path(&dir.join("m2")),
            "--force-new-cluster",
        ])
        .output()
        .expect("run");
    assert!(!o.status.success(), "forced while two members answer");
    assert!(
        text(&o.stderr).contains("still answers"),
        "{}",
        text(&o.stderr)
    );

    // The two others are lost for good.
    for i in 0..2 {
        procs.0[i].kill().expect("SIGKILL");
        procs.0[i].wait().expect("reap");
    }
    let (forced, a2, _) = start_server(dir, "m2", &["--force-new-cluster"]);
    procs.0[survivor] = forced;
    assert_eq!(a2, addrs[2]);
    // Its data dir already names its address: wait for what it says.
    wait_until_blocking("the forced member says what it did", WAIT, POLL, || {
        std::fs::read_to_string(dir.join("m2.log"))
            .is_ok_and(|l| l.contains("FORCED A NEW CLUSTER"))
    });
    let c2 = dir.join("m2").join("client.yaml");
    wait_until_blocking("the forced member writes", WAIT, POLL, || {
        drover(&c2, None, &["kv", "put", "/after", "x"])
            .status
            .success()
    });
    for key in &acked {
        let o = drover(&c2, None, &["kv", "get", key]);
        assert!(o.status.success(), "{key} was lost: {}", text(&o.stderr));
    }
    let o = drover(&c2, None, &["cluster", "status"]);
    let out = text(&o.stdout);
    assert!(out.contains("members: 1"), "{out}");
}
