//! ConfigMaps and Secrets on a Docker node, through a one-member server in
//! this process: a ConfigMap mounted into a busybox container is read with
//! `cat` (exec), changed, and the new content read again within 10 s, with
//! the kubelet's layout (`key -> ..data/key`) and no restart; a Secret
//! reaches the environment and a volume on a tmpfs, and is written nowhere
//! else under the agent's data dir.
//!
//! The image `local/busybox:1` is built by `deploy/examples/busybox-image.sh`.
//! Without an engine the tests fail, unless the run opts out with
//! `DROVER_TEST_SKIP=docker`.

use drover_agent::{AgentOptions, DockerOptions, DockerRuntime, Runtime, TokioClock};
use drover_api::Pod;
use drover_testkit::docker::{engine_ready, node_name, tuning, Cleanup, IMAGE};
use drover_testkit::{is_running_and_ready, wait_until, TestAgent, TestServer};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

fn container_id(p: &Pod) -> String {
    p.status.container_statuses[0]
        .container_id
        .trim_start_matches("docker://")
        .to_string()
}

async fn run(rt: &DockerRuntime, id: &str, cmd: &[&str]) -> String {
    let out = rt
        .exec(
            id,
            cmd.iter().map(|s| s.to_string()).collect(),
            Duration::from_secs(10),
        )
        .await
        .expect("exec");
    assert_eq!(
        out.exit_code,
        0,
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.output)
    );
    String::from_utf8_lossy(&out.output).into_owned()
}

/// Unmounts whatever is still mounted under a directory when the test ends
/// (a failed assertion skips the pod's removal, which would unmount its
/// tmpfs), so that the temporary directory can go.
struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let prefix = format!("{}/", self.0.display());
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        for target in mounts.lines().filter_map(|l| l.split(' ').nth(1)) {
            if target.starts_with(&prefix) {
                let _ = std::process::Command::new("umount").arg(target).output();
            }
        }
    }
}

/// Every file under `dir` but the pods' volumes, whose contents hold `needle`.
fn files_holding(dir: &Path, needle: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.file_name().is_some_and(|n| n == "volumes") {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            files_holding(&path, needle, out);
        } else if meta.is_file()
            && std::fs::read(&path)
                .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
        {
            out.push(path.display().to_string());
        }
    }
}

#[tokio::test]
async fn a_config_map_update_reaches_a_running_container_and_a_secret_its_env_and_a_tmpfs() {
    if !engine_ready() {
        return;
    }
    let node = node_name("dc", "config");
    let _cleanup = Cleanup::new(&node);
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let data = tmp.path().join("agent");
    std::fs::create_dir(&data).unwrap();
    let _unmount = Unmount(data.clone());
    let rt = Arc::new(
        DockerRuntime::connect(DockerOptions::new(node.clone(), &data))
            .await
            .expect("the engine answers"),
    );
    let mut o = AgentOptions::new(vec![s.addr.clone()], s.node_token.clone(), &node);
    o.data_dir = Some(data.clone());
    o.tuning = tuning(21);
    let agent = TestAgent::spawn(o, rt.clone(), Arc::new(TokioClock::new()));
    s.apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: app}}\ndata: {{mode: fast}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: db}}\nstringData: {{password: hunter2-secret}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: web}}\nspec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {IMAGE}\n    imagePullPolicy: Never\n    command: [sh, -c, \"trap 'exit 0' TERM; sleep 3600 & wait\"]\n    env: [{{name: PASSWORD, valueFrom: {{secretKeyRef: {{name: db, key: password}}}}}}]\n    volumeMounts:\n    - {{name: cfg, mountPath: /etc/app}}\n    - {{name: creds, mountPath: /etc/creds}}\n  volumes:\n  - {{name: cfg, configMap: {{name: app}}}}\n  - {{name: creds, secret: {{secretName: db, defaultMode: 0400}}}}\n"
    ))
    .await;
    wait_until("the pod Running and Ready", WAIT, || async {
        s.pod("web").await.is_some_and(|p| is_running_and_ready(&p))
    })
    .await;
    let pod = s.pod("web").await.unwrap();
    let id = container_id(&pod);

    // The ConfigMap, as a file, through ..data.
    assert_eq!(run(&rt, &id, &["cat", "/etc/app/mode"]).await, "fast");
    assert_eq!(
        run(&rt, &id, &["busybox", "readlink", "/etc/app/mode"])
            .await
            .trim(),
        "..data/mode"
    );
    // The Secret: in the environment and in a file.
    assert_eq!(
        run(&rt, &id, &["sh", "-c", "echo $PASSWORD"]).await.trim(),
        "hunter2-secret"
    );
    assert_eq!(
        run(&rt, &id, &["cat", "/etc/creds/password"]).await,
        "hunter2-secret"
    );
    let mode = run(&rt, &id, &["stat", "-L", "-c", "%a", "/etc/creds/password"]).await;
    assert_eq!(mode.trim(), "400");
    // Its volume is a tmpfs on the node; nothing else in the data dir
    // holds it.
    let volume = data
        .join("pods")
        .join(&pod.metadata.uid)
        .join("volumes/creds");
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(
        mounts.lines().any(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            f.len() > 2 && f[1] == volume.to_str().unwrap() && f[2] == "tmpfs"
        }),
        "{} is not a tmpfs",
        volume.display()
    );
    let mut leaks = Vec::new();
    files_holding(&data, "hunter2-secret", &mut leaks);
    files_holding(&data, "aHVudGVyMi1zZWNyZXQ=", &mut leaks);
    assert!(leaks.is_empty(), "the secret outside its volume: {leaks:?}");

    // A change reaches the running container within 10 s, without a restart.
    let t = Instant::now();
    s.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {mode: slow}\n")
        .await;
    let mut last = String::new();
    while t.elapsed() < Duration::from_secs(10) {
        last = run(&rt, &id, &["cat", "/etc/app/mode"]).await;
        if last == "slow" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        last, "slow",
        "the update did not reach the container in 10 s"
    );
    eprintln!(
        "ConfigMap update -> read in the container: {:?}",
        t.elapsed()
    );
    let now = s.pod("web").await.unwrap();
    assert_eq!(container_id(&now), id, "the same container");
    assert_eq!(now.status.container_statuses[0].restart_count, 0);
    // The environment keeps what the container started with.
    s.apply("apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: rotated-secret}\n")
        .await;
    wait_until(
        "the rotated secret in its file",
        Duration::from_secs(10),
        || async { run(&rt, &id, &["cat", "/etc/creds/password"]).await == "rotated-secret" },
    )
    .await;
    assert_eq!(
        run(&rt, &id, &["sh", "-c", "echo $PASSWORD"]).await.trim(),
        "hunter2-secret"
    );

    // The pod goes: its volumes and their tmpfs with it.
    s.objects
        .delete(drover_api::Kind::Pod, "default", "web")
        .await
        .expect("delete the pod");
    wait_until("the pod's volumes removed", WAIT, || async {
        !volume.exists()
    })
    .await;
    assert!(
        !std::fs::read_to_string("/proc/self/mounts")
            .unwrap()
            .contains(volume.to_str().unwrap()),
        "the tmpfs is unmounted"
    );
    agent.stop_unchecked(WAIT).await;
    s.shutdown().await;
}
