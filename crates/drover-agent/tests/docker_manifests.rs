//! The manifests users bring (`crates/drover-api/tests/data/`, copies of
//! the project's shared set) on a Docker node, as they are: DaemonSets
//! through a one-member server in this process, the bare Pod bound to the
//! node, the static pod through `--manifest-dir`.
//!
//! Their images are public ones that no test may pull. Every image name is
//! put under a registry on a closed loopback port (`127.0.0.1:1/<test>/`,
//! the rest of the name and the tag kept, so that the pull policy the
//! server derives from the tag is unchanged): a pull fails at once and
//! nothing leaves the machine.
//!
//! - Absent images: every pod reports `ErrImagePull` (or
//!   `ImagePullBackOff`) with the engine's message naming the image, or
//!   `ErrImageNeverPull` under `imagePullPolicy: Never`; nothing is pulled,
//!   no container is left, and a healthy pod on the same node keeps running.
//! - With the local busybox image tagged under those names, what the
//!   kubelet reports for such an image: the containers start (the node runs
//!   with `--no-pull`, as an air-gapped one: the local copy runs whatever
//!   the pull policy), busybox's default
//!   `sh` exits 0 at once (the real image's program is not there), so the
//!   pods are Running with restarts (`Completed`, `CrashLoopBackOff`);
//!   node-exporter's `args` with no `command` cannot start
//!   (`RunContainerError`); fluentd runs with its ConfigMap mounted (the
//!   `logging` Namespace, its ServiceAccount and `fluentd-config` applied
//!   first, as a user would: [`FLUENTD_CONFIG`]); and 03 rolls 01's
//!   DaemonSet over to a container that keeps running.
//!
//! The image `local/busybox:1` is built by `deploy/examples/busybox-image.sh`.
//! Node names, image names and the tags made are unique per test; a guard
//! removes containers and tags whatever happens. Without an engine the tests
//! fail, unless the run opts out with `DROVER_TEST_SKIP=docker`.

use drover_agent::{AgentOptions, DockerOptions, DockerRuntime, TokioClock, Tuning};
use drover_api::{ContainerStatus, Kind, Pod, PodPhase};
use drover_testkit::docker::{docker_ps, engine_ready, tuning, Cleanup, IMAGE};
use drover_testkit::{is_running_and_ready, wait_explained, wait_until, TestAgent, TestServer};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);
/// How long an agent may take to leave.
const STOP: Duration = Duration::from_secs(20);

/// The DaemonSets (and the bare Pod) applied through the server, by file.
const APPLIED: &[(&str, &str)] = &[
    (
        "01-example-daemonset.yaml",
        include_str!("../../drover-api/tests/data/01-example-daemonset.yaml"),
    ),
    (
        "02-node-monitoring-daemonset.yaml",
        include_str!("../../drover-api/tests/data/02-node-monitoring-daemonset.yaml"),
    ),
    (
        "04-node-exporter.yaml",
        include_str!("../../drover-api/tests/data/04-node-exporter.yaml"),
    ),
    (
        "05-fluentd.yaml",
        include_str!("../../drover-api/tests/data/05-fluentd.yaml"),
    ),
    (
        "06-fluentd-elasticsearch.yaml",
        include_str!("../../drover-api/tests/data/06-fluentd-elasticsearch.yaml"),
    ),
    (
        "07-affinity-gpu.yaml",
        include_str!("../../drover-api/tests/data/07-affinity-gpu.yaml"),
    ),
    (
        "09-pod-nodename.yaml",
        include_str!("../../drover-api/tests/data/09-pod-nodename.yaml"),
    ),
];
/// What 05's fluentd needs beside it: its namespace, service account and
/// ConfigMap (the manifest names them; the seed set does not hold them).
const FLUENTD_CONFIG: &str = "apiVersion: v1\nkind: Namespace\nmetadata: {name: logging}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: fluentd, namespace: logging}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: fluentd-config, namespace: logging}\ndata:\n  fluent.conf: |\n    <source>\n      @type tail\n      path /var/log/containers/*.log\n    </source>\n";
/// 01's DaemonSet, rolled over to a busybox that sleeps.
const ROLLING: &str = include_str!("../../drover-api/tests/data/03-busybox-rolling.yaml");
/// Run from `--manifest-dir`, as a static pod.
const STATIC: &str = include_str!("../../drover-api/tests/data/08-static-pod.yaml");
// 10-deployment-antiaffinity.yaml is a Deployment: its pods need the
// ReplicaSet controller and the scheduler, not tested here.

// ------------------------------------------------------------ fixtures

fn docker_inspect(id: &str) -> serde_json::Value {
    let out = Command::new("docker")
        .args(["inspect", id])
        .output()
        .expect("docker inspect");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("inspect JSON");
    v[0].clone()
}

fn image_exists(image: &str) -> bool {
    Command::new("docker")
        .args(["image", "inspect", image])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Where this test's images live: a registry no one answers on.
fn registry(test: &str) -> String {
    format!("127.0.0.1:1/drover-{test}-{}", std::process::id())
}

/// The manifest with every `image:` under `registry` (and, with `never`,
/// `imagePullPolicy: Never` beside it) and `nodeName:` set to `node`;
/// everything else as it is.
fn rewrite(yaml: &str, registry: &str, node: &str, never: bool) -> String {
    let mut out = String::new();
    for line in yaml.lines() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let (dash, field) = match body.strip_prefix("- ") {
            Some(rest) => ("- ", rest),
            None => ("", body),
        };
        if let Some(image) = field.strip_prefix("image: ") {
            out += &format!("{indent}{dash}image: {registry}/{}\n", image.trim());
            if never {
                let pad = " ".repeat(indent.len() + dash.len());
                out += &format!("{pad}imagePullPolicy: Never\n");
            }
        } else if field.starts_with("nodeName: ") {
            out += &format!("{indent}{dash}nodeName: {node}\n");
        } else {
            out += line;
            out += "\n";
        }
    }
    out
}

/// The images a manifest names.
fn images_of(yaml: &str) -> Vec<String> {
    yaml.lines()
        .filter_map(|l| {
            let body = l.trim_start();
            let body = body.strip_prefix("- ").unwrap_or(body);
            body.strip_prefix("image: ").map(|i| i.trim().to_string())
        })
        .collect()
}

/// A server, and the agent of a Docker node `node` (with the labels 07's
/// affinity asks for) whose `--manifest-dir` holds 08's static pod with
/// its images under `reg`; both keep their data in `tmp`.
/// `no_pull`: the node runs with `--no-pull` (as an air-gapped one: the
/// images tagged locally run whatever their pull policy).
async fn start_node(
    tmp: &Path,
    reg: &str,
    node: &str,
    no_pull: bool,
) -> (TestServer, TestAgent<DockerRuntime>) {
    let manifest_dir = tmp.join("manifests");
    std::fs::create_dir(&manifest_dir).unwrap();
    std::fs::write(
        manifest_dir.join("08-static-pod.yaml"),
        rewrite(STATIC, reg, node, false),
    )
    .unwrap();
    let s = TestServer::start(&tmp.join("server")).await;
    let mut o = DockerOptions::new(node, tmp);
    o.no_pull = no_pull;
    let rt = DockerRuntime::connect(o).await.expect("the engine answers");
    let mut o = AgentOptions::new(vec![s.addr.clone()], s.node_token.clone(), node);
    o.labels = BTreeMap::from([
        ("node-role.kubernetes.io/master".to_string(), String::new()),
        ("node-type".to_string(), "monitoring".to_string()),
    ]);
    o.manifest_dir = Some(manifest_dir);
    o.tuning = Tuning {
        static_poll: Duration::from_millis(200),
        ..tuning(11)
    };
    let agent = TestAgent::spawn(o, Arc::new(rt), Arc::new(TokioClock::new()));
    (s, agent)
}

/// Every pod, keyed `namespace/name`, DaemonSet pods `namespace/ds:NAME`.
async fn pods(s: &TestServer) -> BTreeMap<String, Pod> {
    let mut out = BTreeMap::new();
    for p in s.pods(None).await {
        let ns = p.metadata.namespace.clone();
        let key = match p.metadata.controller_ref() {
            Some(o) if o.kind == "DaemonSet" => format!("{ns}/ds:{}", o.name),
            _ => format!("{ns}/{}", p.metadata.name),
        };
        // During a rolling update the newest pod wins.
        let newer = out
            .get(&key)
            .is_none_or(|q: &Pod| q.metadata.creation_timestamp <= p.metadata.creation_timestamp);
        if newer {
            out.insert(key, p);
        }
    }
    out
}

/// Whether the pod waits unbound because it does not fit its node.
fn unschedulable(p: &Pod) -> bool {
    p.spec.node_name.is_empty()
        && p.status.conditions.iter().any(|c| {
            c.r#type == "PodScheduled"
                && c.status == Some(drover_api::ConditionStatus::False)
                && c.reason == "Unschedulable"
        })
}

/// The engine's containers of the pod with `uid` on `node`.
fn running_containers_of(node: &str, uid: &str) -> Vec<String> {
    docker_ps(node, &[&format!("label=io.drover.pod.uid={uid}")])
}

fn first(p: &Pod) -> Option<&ContainerStatus> {
    p.status.container_statuses.first()
}

fn waiting(p: &Pod) -> Option<(&str, &str)> {
    let w = first(p)?.state.waiting.as_ref()?;
    Some((w.reason.as_str(), w.message.as_str()))
}

/// The keys of [`pods`] for what [`APPLIED`] and [`STATIC`] make on `node`.
fn keys(node: &str) -> Vec<String> {
    [
        "default/ds:example-daemonset",
        "monitoring/ds:node-monitoring-daemonset",
        // Not node-exporter: its host port 9100 is node-monitoring's
        // (hostNetwork, port 9100), applied first; it waits for the port.
        "logging/ds:fluentd",
        "kube-system/ds:fluentd-elasticsearch",
        "default/ds:master-agent",
        "default/static-pod-on-node-xyz",
    ]
    .iter()
    .map(|k| k.to_string())
    .chain([format!("default/static-example-{node}")])
    .collect()
}

/// After 02 is applied, waits for its pod: it holds host port 9100 (it
/// uses the host network), which 04 asks for too; deployed first, it keeps
/// the port and 04 waits (a daemon pod goes only where its ports are free).
async fn port_holder_placed(s: &TestServer, file: &str) {
    if file.starts_with("02") {
        wait_until("node-monitoring placed", WAIT, || async {
            pods(s)
                .await
                .contains_key("monitoring/ds:node-monitoring-daemonset")
        })
        .await;
    }
}

// ------------------------------------------------------------ tests

#[tokio::test]
async fn absent_images_are_reported_clearly_pulled_from_nowhere_and_harm_nothing() {
    if !engine_ready() {
        return;
    }
    let node = format!("dm-absent-{}", std::process::id());
    let _cleanup = Cleanup::new(&node);
    let reg = registry("absent");
    let tmp = tempfile::tempdir().unwrap();
    let (s, agent) = start_node(tmp.path(), &reg, &node, false).await;

    // 09, the bare Pod, with imagePullPolicy Never; the rest as they are.
    s.apply(FLUENTD_CONFIG).await;
    let mut images = Vec::new();
    for (file, yaml) in APPLIED {
        let never = file.starts_with("09");
        s.apply(&rewrite(yaml, &reg, &node, never)).await;
        port_holder_placed(&s, file).await;
        images.extend(images_of(yaml));
    }
    images.extend(images_of(STATIC));
    // A healthy pod on the same node.
    s.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: healthy}}\nspec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 1\n  containers:\n  - {{name: c, image: {IMAGE}, imagePullPolicy: Never, command: [sh, -c, \"trap 'exit 0' TERM; sleep 3600 & wait\"]}}\n"
    ))
    .await;

    let keys = keys(&node);
    let took = wait_until("every pod reports its image error", WAIT, || async {
        let pods = pods(&s).await;
        let healthy = pods
            .get("default/healthy")
            .is_some_and(is_running_and_ready);
        healthy
            && keys.iter().all(|k| {
                pods.get(k).and_then(waiting).is_some_and(|(r, _)| {
                    matches!(r, "ErrImagePull" | "ImagePullBackOff" | "ErrImageNeverPull")
                })
            })
    })
    .await;
    eprintln!("applied -> every image error reported: {took:?}");

    let pods = pods(&s).await;
    // Its pod waits unbound for the port, never beside node-monitoring.
    assert!(
        pods.get("monitoring/ds:node-exporter")
            .is_none_or(unschedulable),
        "node-exporter placed beside node-monitoring on host port 9100"
    );
    for k in &keys {
        let p = &pods[k];
        let (reason, message) = waiting(p).unwrap();
        let image = &first(p).unwrap().image;
        assert!(image.starts_with(&reg), "{k}: {image}");
        assert!(message.contains(image.as_str()), "{k}: {message}");
        assert_eq!(p.status.phase, Some(PodPhase::Pending), "{k}");
        assert!(!p.is_ready(), "{k}");
        if k.ends_with("/static-pod-on-node-xyz") {
            assert_eq!(reason, "ErrImageNeverPull", "{k}: {message}");
            assert!(message.contains("imagePullPolicy"), "{k}: {message}");
        } else {
            assert!(
                matches!(reason, "ErrImagePull" | "ImagePullBackOff"),
                "{k}: {reason}"
            );
            // The engine's own words: the registry did not answer.
            assert!(message.contains("127.0.0.1:1"), "{k}: {message}");
        }
    }
    // Nothing was pulled; the only container is the healthy pod's.
    for image in &images {
        assert!(!image_exists(&format!("{reg}/{image}")), "{image} pulled");
    }
    let containers = docker_ps(&node, &["label=io.drover.role=container"]);
    assert_eq!(containers.len(), 1, "{containers:?}");
    let healthy = &pods["default/healthy"];
    assert_eq!(
        first(healthy).unwrap().container_id,
        format!("docker://{}", containers[0])
    );

    agent.stop(STOP).await;
    assert!(
        docker_ps(&node, &[]).is_empty(),
        "the node left, its pods stopped"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn the_manifests_run_once_their_images_exist_locally() {
    if !engine_ready() {
        return;
    }
    let node = format!("dm-tagged-{}", std::process::id());
    let reg = registry("tagged");
    let mut cleanup = Cleanup::new(&node);
    // The local busybox under every name the manifests use.
    let mut images: Vec<String> = APPLIED.iter().flat_map(|(_, y)| images_of(y)).collect();
    images.extend(images_of(STATIC));
    images.extend(images_of(ROLLING));
    images.sort();
    images.dedup();
    for image in &images {
        let tag = format!("{reg}/{image}");
        let ok = Command::new("docker")
            .args(["tag", IMAGE, &tag])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(ok, "docker tag {IMAGE} {tag}");
        cleanup.images.push(tag);
    }
    let tmp = tempfile::tempdir().unwrap();
    let (s, agent) = start_node(tmp.path(), &reg, &node, true).await;
    s.apply(FLUENTD_CONFIG).await;
    for (file, yaml) in APPLIED {
        s.apply(&rewrite(yaml, &reg, &node, false)).await;
        port_holder_placed(&s, file).await;
    }

    // busybox's default command, sh, exits 0 at once: the kubelet restarts
    // it (restartPolicy Always) and the pod stays Running.
    let exits_at_once = |p: &Pod| {
        first(p).is_some_and(|c| {
            c.restart_count >= 1
                && c.last_state
                    .terminated
                    .as_ref()
                    .is_some_and(|t| t.exit_code == 0 && t.reason == "Completed")
        }) && p.status.phase == Some(PodPhase::Running)
    };
    let restarting = [
        "default/ds:example-daemonset".to_string(),
        "monitoring/ds:node-monitoring-daemonset".to_string(),
        "logging/ds:fluentd".to_string(),
        "kube-system/ds:fluentd-elasticsearch".to_string(),
        "default/ds:master-agent".to_string(),
        "default/static-pod-on-node-xyz".to_string(),
        format!("default/static-example-{node}"),
    ];
    let start = std::time::Instant::now();
    wait_explained("every pod started as the kubelet would", WAIT, || async {
        let pods = pods(&s).await;
        let late: Vec<String> = restarting
            .iter()
            .filter(|k| !pods.get(*k).is_some_and(exits_at_once))
            .map(|k| match pods.get(k) {
                None => format!("{k}: no pod"),
                Some(p) => format!("{k}: {:?} {:?}", p.status.phase, first(p)),
            })
            .collect();
        if late.is_empty() {
            Ok(())
        } else {
            Err(late.join("; "))
        }
    })
    .await;
    let took = start.elapsed();
    eprintln!("applied -> every pod started (or refused) as the kubelet would: {took:?}");

    let pods = pods(&s).await;
    for k in &keys(&node) {
        assert!(pods.contains_key(k), "{k}");
    }
    for k in &restarting {
        let c = first(&pods[k]).unwrap();
        assert!(c.container_id.starts_with("docker://"), "{k}: {c:?}");
        assert!(c.image.starts_with(&reg), "{k}: {}", c.image);
    }
    // Its pod waits unbound for the port, never beside node-monitoring.
    assert!(
        pods.get("monitoring/ds:node-exporter")
            .is_none_or(unschedulable),
        "node-exporter placed beside node-monitoring on host port 9100"
    );
    // fluentd: its ConfigMap is mounted read-only at /fluentd/etc.
    let fluentd = docker_inspect(
        first(&pods["logging/ds:fluentd"])
            .unwrap()
            .container_id
            .trim_start_matches("docker://"),
    );
    let mounts = fluentd["Mounts"].as_array().cloned().unwrap_or_default();
    let etc = mounts
        .iter()
        .find(|m| m["Destination"] == "/fluentd/etc")
        .expect("the ConfigMap mounted");
    assert_eq!(etc["RW"], false, "{etc}");
    let source = etc["Source"].as_str().unwrap();
    let conf = std::fs::read_to_string(Path::new(source).join("fluent.conf")).unwrap();
    assert!(conf.contains("@type tail"), "{conf}");
    // The mapped settings of two of them, inspected.
    let id = |k: &str| {
        first(&pods[k])
            .unwrap()
            .container_id
            .trim_start_matches("docker://")
            .to_string()
    };
    let monitoring = docker_inspect(&id("monitoring/ds:node-monitoring-daemonset"));
    assert_eq!(monitoring["HostConfig"]["NetworkMode"], "host");
    assert_eq!(monitoring["HostConfig"]["PidMode"], "host");
    let fluentd_es = docker_inspect(&id("kube-system/ds:fluentd-elasticsearch"));
    assert_eq!(fluentd_es["HostConfig"]["Memory"], 200 * 1024 * 1024);
    let binds = fluentd_es["HostConfig"]["Mounts"].to_string();
    assert!(binds.contains("/var/log"), "{binds}");

    // node-monitoring gone, its port is free: node-exporter is placed.
    // `args` and no `command`, and this image has no entrypoint, so the
    // engine cannot start `--path.procfs=…`.
    s.objects
        .delete(Kind::DaemonSet, "monitoring", "node-monitoring-daemonset")
        .await
        .expect("delete node-monitoring-daemonset");
    let seen = std::sync::Mutex::new(String::new());
    let placed = tokio::time::timeout(3 * WAIT, async {
        loop {
            let pods = crate::pods(&s).await;
            let p = pods.get("monitoring/ds:node-exporter");
            if p.and_then(waiting).is_some_and(|(r, m)| {
                r == "RunContainerError" && m.contains("--path.procfs=/host/proc")
            }) {
                return;
            }
            *seen.lock().unwrap() = format!("{:?}", p.map(|p| &p.status));
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert!(
        placed.is_ok(),
        "node-exporter not placed (RunContainerError naming --path.procfs) within {:?} of the port's release; its pod last: {}",
        3 * WAIT,
        seen.lock().unwrap()
    );

    // 03 rolls 01's DaemonSet over to busybox that sleeps: Running, Ready.
    let old = pods["default/ds:example-daemonset"].metadata.uid.clone();
    s.apply(&rewrite(ROLLING, &reg, &node, false)).await;
    // (~5 s here; the engine's stops and starts slow down a lot when the
    // machine is busy, so this step gets a longer deadline.)
    let took = wait_until(
        "03's pod Running and Ready, 01's gone",
        3 * WAIT,
        || async {
            let ours: Vec<Pod> = s
                .pods(None)
                .await
                .into_iter()
                .filter(|q| q.metadata.namespace == "default")
                .filter(|q| {
                    q.metadata
                        .controller_ref()
                        .is_some_and(|o| o.name == "example-daemonset")
                })
                .collect();
            matches!(ours.as_slice(), [p] if p.metadata.uid != old && is_running_and_ready(p))
        },
    )
    .await;
    eprintln!("03 applied -> rolled over, Running: {took:?}");
    let rolled = self::pods(&s).await;
    let p = &rolled["default/ds:example-daemonset"];
    assert_eq!(first(p).unwrap().image, format!("{reg}/busybox:latest"));
    assert_eq!(first(p).unwrap().restart_count, 0);
    wait_until("01's containers gone", WAIT, || async {
        docker_ps(&node, &[&format!("label=io.drover.pod.uid={old}")]).is_empty()
    })
    .await;

    // The sleeping container would take its 30 s grace period to stop:
    // the guard removes everything instead.
    agent.kill().await;
    s.shutdown().await;
}

/// On the real engine: a DaemonSet asking for more CPU than the machine
/// has gets a pod that waits unbound (Pending, `Unschedulable`) and
/// `describe ds` says `Insufficient cpu`; of two
/// DaemonSets on one host port, the system-node-critical one preempts the
/// other's running container and runs in its place.
#[tokio::test]
async fn placement_respects_the_engines_cpus_host_ports_and_priorities() {
    if !engine_ready() {
        return;
    }
    let node = format!("dm-fit-{}", std::process::id());
    let _cleanup = Cleanup::new(&node);
    let reg = registry("fit");
    let tmp = tempfile::tempdir().unwrap();
    let (s, agent) = start_node(tmp.path(), &reg, &node, true).await;
    // A port of this machine for the host port: the engine binds it on
    // every interface, so no test can bind it first and hand it over; this
    // one is free on 0.0.0.0 and outside the ephemeral range, where no
    // outgoing connection takes it meanwhile.
    let port = drover_testkit::host_port();
    let ds = |name: &str, extra: &str| {
        format!(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: {name}}}\nspec:\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      terminationGracePeriodSeconds: 1\n{extra}      containers:\n      - name: c\n        image: {IMAGE}\n        imagePullPolicy: Never\n        command: [sh, -c, \"trap 'exit 0' TERM; sleep 3600 & wait\"]\n        ports: [{{containerPort: 8080, hostPort: {port}}}]\n"
        )
    };
    s.apply(&ds("low", "")).await;
    wait_until("low Running", WAIT, || async {
        pods(&s)
            .await
            .get("default/ds:low")
            .is_some_and(is_running_and_ready)
    })
    .await;
    let low_container = first(&pods(&s).await["default/ds:low"])
        .unwrap()
        .container_id
        .clone();
    s.apply(&ds(
        "critical",
        "      priorityClassName: system-node-critical\n",
    ))
    .await;
    wait_until("critical Running in low's place", 3 * WAIT, || async {
        let p = pods(&s).await;
        // low's pod waits unbound for its port (it was preempted).
        p.get("default/ds:critical")
            .is_some_and(is_running_and_ready)
            && p.get("default/ds:low").is_some_and(unschedulable)
    })
    .await;
    let running = docker_ps(&node, &["label=io.drover.role=container"]);
    assert!(
        !running
            .iter()
            .any(|id| low_container.ends_with(id.as_str())),
        "low's container was stopped: {running:?}"
    );
    // More CPU than the engine has.
    s.apply(
        &ds("greedy", "")
            .replace(
                "        ports:",
                "        resources: {requests: {cpu: \"1000\"}}\n        ports:",
            )
            .replace(&format!("hostPort: {port}"), "hostPort: 1"),
    )
    .await;
    let c = s.client();
    let describe = |name: &'static str| {
        let c = c.clone();
        async move {
            let mut out = Vec::new();
            drover_cli::kubectl::describe(&c, "ds", &[name.to_string()], None, &mut out)
                .await
                .expect("describe");
            String::from_utf8(out).expect("utf-8")
        }
    };
    wait_until("greedy said to need more CPU", WAIT, || async {
        describe("greedy").await.contains("Insufficient cpu")
    })
    .await;
    wait_until("greedy's pod waits unbound", WAIT, || async {
        pods(&s)
            .await
            .get("default/ds:greedy")
            .is_some_and(unschedulable)
    })
    .await;
    let greedy = pods(&s).await["default/ds:greedy"].clone();
    let message = &greedy
        .status
        .conditions
        .iter()
        .find(|c| c.r#type == "PodScheduled")
        .expect("PodScheduled")
        .message;
    assert!(
        message.starts_with("0/1 nodes are available: 1 Insufficient cpu"),
        "{message}"
    );
    assert!(
        running_containers_of(&node, &greedy.metadata.uid).is_empty(),
        "nothing of greedy runs"
    );
    assert!(
        describe("low")
            .await
            .contains("node(s) didn't have free ports for the requested pod ports"),
        "{}",
        describe("low").await
    );
    agent.stop(STOP).await;
    s.shutdown().await;
}
