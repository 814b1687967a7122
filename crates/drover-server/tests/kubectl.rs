//! The real kubectl (`/usr/bin/kubectl`, v1.32, unmodified, default flags)
//! against an in-process server with simulated nodes, through the
//! `DATA_DIR/kubeconfig` the server writes. A test fails loudly when
//! kubectl is missing. kubectl's discovery cache goes to a `HOME` of the
//! test's own.

mod kube;

use drover_api::Kind;
use drover_pki::Credential;
use drover_proto::v1 as pb;
use drover_testkit::{https_get, wait_until};
use kube::{Kube, WAIT};
use serde_json::Value;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_discovers_and_reads() {
    let k = Kube::start(2).await;
    k.apply_ds("web", "app=web").await;
    k.wait_pods(2).await;

    let v = k.ok(&["version", "-o", "json"]).await;
    let v: Value = serde_json::from_str(&v).expect("version JSON");
    assert_eq!(v["serverVersion"]["major"], "1");
    assert_eq!(v["serverVersion"]["minor"], "32");

    let res = k.ok(&["api-resources"]).await;
    for line in [
        "daemonsets ",
        "pods ",
        "nodes ",
        "events ",
        "controllerrevisions ",
        "priorityclasses ",
    ] {
        assert!(res.lines().any(|l| l.starts_with(line)), "{line}: {res}");
    }
    let ds_line = res.lines().find(|l| l.starts_with("daemonsets")).unwrap();
    assert!(
        ds_line.contains(" ds ") && ds_line.contains("apps/v1") && ds_line.contains("DaemonSet"),
        "{ds_line}"
    );

    // Tables: kubectl's own columns.
    let t = k.ok(&["get", "ds"]).await;
    let head = t.lines().next().unwrap();
    assert!(
        head.starts_with(
            "NAME   DESIRED   CURRENT   READY   UP-TO-DATE   AVAILABLE   NODE SELECTOR   AGE"
        ),
        "{t}"
    );
    k.wait_for("2 pods ready", || async {
        let t = k.ok(&["get", "ds", "web"]).await;
        t.lines()
            .nth(1)
            .is_some_and(|l| l.split_whitespace().nth(3) == Some("2"))
    })
    .await;
    let wide = k.ok(&["get", "ds", "-o", "wide"]).await;
    assert!(
        wide.lines()
            .next()
            .unwrap()
            .ends_with("CONTAINERS   IMAGES      SELECTOR"),
        "{wide}"
    );
    let pods = k.ok(&["get", "pods", "-o", "wide"]).await;
    assert!(pods.lines().next().unwrap().starts_with("NAME "), "{pods}");
    assert!(
        pods.contains(" Running ") && pods.contains(" kn0") && pods.contains(" kn1"),
        "{pods}"
    );
    let all = k.ok(&["get", "pods", "-A"]).await;
    assert!(
        all.lines().next().unwrap().starts_with("NAMESPACE   NAME "),
        "{all}"
    );
    let nodes = k.ok(&["get", "nodes", "-o", "wide"]).await;
    assert!(
        nodes
            .lines()
            .next()
            .unwrap()
            .starts_with("NAME   STATUS   ROLES    AGE   VERSION        INTERNAL-IP"),
        "{nodes}"
    );
    assert_eq!(
        nodes.lines().filter(|l| l.contains(" Ready ")).count(),
        2,
        "{nodes}"
    );
    let several = k
        .ok(&["get", "ds,pods,nodes,controllerrevisions,events"])
        .await;
    for prefix in [
        "daemonset.apps/web",
        "pod/web-",
        "node/kn0",
        "controllerrevision.apps/web-",
    ] {
        assert!(several.contains(prefix), "{prefix}: {several}");
    }

    // The other output formats are kubectl's, over the JSON answers.
    let json = k.ok(&["get", "pods", "-o", "json"]).await;
    let list: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    let yaml = k.ok(&["get", "ds", "web", "-o", "yaml"]).await;
    assert!(
        yaml.starts_with("apiVersion: apps/v1\nkind: DaemonSet\n"),
        "{yaml}"
    );
    let names = k.ok(&["get", "nodes", "-o", "name"]).await;
    assert_eq!(names, "node/kn0\nnode/kn1\n");
    let jp = k
        .ok(&["get", "pods", "-o", "jsonpath={.items[*].spec.nodeName}"])
        .await;
    let mut on: Vec<&str> = jp.split_whitespace().collect();
    on.sort();
    assert_eq!(on, ["kn0", "kn1"]);
    let cc = k
        .ok(&[
            "get",
            "ds",
            "-o",
            "custom-columns=N:.metadata.name,D:.status.desiredNumberScheduled",
        ])
        .await;
    assert_eq!(cc, "N     D\nweb   2\n");

    // Selectors, by label and by field.
    k.apply_ds("other", "app=other").await;
    let l = k.ok(&["get", "ds", "-l", "app=other", "-o", "name"]).await;
    assert_eq!(l, "daemonset.apps/other\n");
    let f = k
        .ok(&[
            "get",
            "pods",
            "--field-selector",
            "spec.nodeName=kn1",
            "-l",
            "app=web",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(f.lines().count(), 1, "{f}");
    // Paging: kubectl follows `continue`.
    let paged = k.ok(&["get", "pods", "--chunk-size=1", "-o", "name"]).await;
    k.wait_pods(4).await;
    let _ = paged;
    let paged = k.ok(&["get", "pods", "--chunk-size=1", "-o", "name"]).await;
    assert_eq!(paged.lines().count(), 4, "{paged}");

    // describe, over get, list and the events' field selector.
    let d = k.ok(&["describe", "ds", "web"]).await;
    assert!(
        d.contains("Name:           web") && d.contains("Selector:       app=web"),
        "{d}"
    );
    assert!(d.contains("Pods Status:"), "{d}");
    let pod = k.first_pod("app=web").await;
    let d = k.ok(&["describe", "pod", &pod]).await;
    assert!(
        d.lines()
            .any(|l| l.starts_with("Name:") && l.ends_with(&pod)),
        "{d}"
    );
    assert!(d.contains("Controlled By:  DaemonSet/web"), "{d}");
    let d = k.ok(&["describe", "node", "kn0"]).await;
    assert!(
        d.lines()
            .any(|l| l.starts_with("Name:") && l.ends_with(" kn0")),
        "{d}"
    );
    assert!(d.contains("Non-terminated Pods:"), "{d}");

    // Errors are Status objects kubectl words as against Kubernetes.
    let e = k.fails(&["get", "pod", "nope"]).await;
    assert!(
        e.contains("Error from server (NotFound): pods \"nope\" not found"),
        "{e}"
    );
    let e = k.fails(&["get", "statefulsets"]).await;
    assert!(
        e.contains("the server doesn't have a resource type \"statefulsets\""),
        "{e}"
    );
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_watches_see_changes() {
    let k = Kube::start(1).await;
    k.apply_ds("web", "app=web").await;
    k.wait_pods(1).await;
    let mut w = k.spawn(&["get", "ds", "-w"]);
    w.wait_line("the table's first row", |l| l.starts_with("web "))
        .await;
    k.apply_ds("later", "app=later").await;
    w.wait_line("the new DaemonSet", |l| l.starts_with("later "))
        .await;
    w.stop().await;

    let mut w = k.spawn(&["get", "pods", "-w", "-o", "name"]);
    let first = w.wait_line("the pod", |l| l.starts_with("pod/web-")).await;
    let pod = first.trim().trim_start_matches("pod/").to_string();
    k.server
        .objects
        .delete(Kind::Pod, "default", &pod)
        .await
        .expect("delete");
    w.wait_line("a replacement pod", |l| {
        l.starts_with("pod/web-") && !l.contains(&pod)
    })
    .await;
    w.stop().await;

    // With a selector, an object that stops matching is DELETED and one
    // that starts is ADDED.
    k.ok(&["label", "node", "kn0", "disk=ssd"]).await;
    let mut w = k.spawn(&[
        "get",
        "nodes",
        "-l",
        "disk=ssd",
        "-w",
        "--output-watch-events",
    ]);
    w.wait_line("kn0 listed", |l| {
        l.starts_with("ADDED") && l.contains(" kn0 ")
    })
    .await;
    k.ok(&["label", "node", "kn0", "disk-"]).await;
    w.wait_line("kn0 DELETED", |l| {
        l.starts_with("DELETED") && l.contains(" kn0 ")
    })
    .await;
    k.ok(&["label", "node", "kn0", "disk=ssd"]).await;
    w.wait_line("kn0 ADDED again", |l| {
        l.starts_with("ADDED") && l.contains(" kn0 ")
    })
    .await;
    w.stop().await;
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_the_clusters_credentials_get_in() {
    let k = Kube::start(0).await;
    let addr = k.server.server.http_addr.to_string();
    let ca = k.server.ca.clone();
    let (code, body) = https_get(&addr, "/api/v1/pods", &ca, None)
        .await
        .expect("answer");
    assert_eq!(code, 401, "{body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Unauthorized");
    let (code, _) = https_get(&addr, "/version", &ca, Some("drover-admin-wrong"))
        .await
        .expect("answer");
    assert_eq!(code, 401);
    let e = k
        .fails(&["get", "pods", "--token", "drover-admin-wrong"])
        .await;
    assert!(e.contains("You must be logged in to the server"), "{e}");

    // A viewer certificate reads and is refused writes (403).
    let cred = Credential::generate("viewer-1").unwrap();
    let r = k
        .server
        .client()
        .issue_client(pb::IssueClientRequest {
            name: "viewer-1".into(),
            role: "viewer".into(),
            ttl_seconds: 3600,
            csr: cred.csr_pem.clone(),
        })
        .await
        .expect("issue a viewer certificate");
    let viewer = k.user_kubeconfig("viewer", &r.cert, &cred.key_pem);
    let out = k.run_with(&viewer, &["get", "nodes"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = k.run_with(&viewer, &["label", "node", "x", "a=b"]).await;
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success());
    assert!(
        err.contains("Forbidden") || err.contains("NotFound"),
        "{err}"
    );
    let out = k
        .run_with(&viewer, &["create", "priorityclass", "p", "--value=5"])
        .await;
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.contains("viewer viewer-1 may not write"), "{err}");

    // exec is a writer's verb.
    k.server
        .apply(&drover_testkit::pod_yaml("somepod", "ghost", "busybox:1"))
        .await;
    let out = k
        .run_with(&viewer, &["exec", "somepod", "--", "true"])
        .await;
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.contains("viewer viewer-1 may not write"), "{err}");

    // The kubeconfig is the owner's only.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&k.kubeconfig)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_watch_from_a_compacted_revision_is_gone() {
    let k = Kube::start_tuned(0, |o| {
        o.snapshot_every = 20;
        o.keep_entries = 5;
    })
    .await;
    for i in 0..60 {
        k.server
            .objects
            .apply(
                &format!("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: p{i}}}\nvalue: {i}\n"),
                false,
            )
            .await
            .expect("apply");
    }
    let addr = k.server.server.http_addr.to_string();
    let token = k.token.clone();
    wait_until("compaction", WAIT, || async {
        let r = https_get(
            &addr,
            "/apis/scheduling.k8s.io/v1/priorityclasses?watch=1&resourceVersion=2",
            &k.server.ca,
            Some(&token),
        )
        .await;
        r.is_some_and(|(code, body)| code == 410 && body.contains("\"reason\":\"Expired\""))
    })
    .await;
    let _ = Duration::ZERO;
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_member_writes_a_kubeconfig_naming_them_all() {
    let tmp = tempfile::tempdir().unwrap();
    let mut servers = drover_testkit::start_servers(tmp.path(), 3).await;
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    for (i, s) in servers.iter().enumerate() {
        let path = tmp.path().join(format!("m{i}")).join("kubeconfig");
        wait_until("a kubeconfig with every member", WAIT, || async {
            std::fs::read_to_string(&path).is_ok_and(|t| {
                let v: Value = serde_saphyr::from_str(&t).unwrap_or(Value::Null);
                v["clusters"].as_array().is_some_and(|c| c.len() == 3)
            })
        })
        .await;
        let v: Value = serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let current = format!("drover-{:016x}", s.identity.id);
        assert_eq!(v["current-context"], current.as_str());
        // kubectl reaches every member with it.
        for c in v["contexts"].as_array().unwrap() {
            let ctx = c["name"].as_str().unwrap();
            let out = tokio::process::Command::new(kube::KUBECTL)
                .args(["--context", ctx, "get", "nodes"])
                .env("KUBECONFIG", &path)
                .env("HOME", &home)
                .output()
                .await
                .expect("kubectl runs");
            assert!(
                out.status.success(),
                "{ctx}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(String::from_utf8_lossy(&out.stderr).contains("No resources found"));
        }
    }
    for s in &mut servers {
        s.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_logs_over_the_agent_session() {
    let k = Kube::start(1).await;
    k.apply_ds("web", "app=web").await;
    k.wait_pods(1).await;
    let pod = k.first_pod("app=web").await;
    k.wait_for("three log lines", || async {
        k.ok(&["logs", &pod]).await.lines().count() >= 3
    })
    .await;
    let all = k.ok(&["logs", &pod]).await;
    assert_eq!(
        all.lines().next(),
        Some("sim: c started (attempt 0)"),
        "{all}"
    );
    let tail = k.ok(&["logs", &pod, "--tail=1", "-c", "c"]).await;
    assert_eq!(tail.lines().count(), 1, "{tail}");
    assert!(tail.starts_with("sim: c tick "), "{tail}");
    let ts = k.ok(&["logs", &pod, "--tail=1", "--timestamps"]).await;
    assert!(ts.starts_with("20") && ts.contains(" sim: c tick "), "{ts}");
    let by_ds = k.ok(&["logs", "ds/web", "--tail=1"]).await;
    assert!(by_ds.starts_with("sim: c tick "), "{by_ds}");
    let limited = k.ok(&["logs", &pod, "--limit-bytes=4"]).await;
    assert_eq!(limited, "sim:");
    let e = k.fails(&["logs", &pod, "-c", "nope"]).await;
    assert!(e.contains("container nope is not valid"), "{e}");
    // No attempt before this one: Kubernetes' words for it.
    let e = k.fails(&["logs", "-p", &pod]).await;
    assert!(
        e.contains(&format!(
            "previous terminated container \"c\" in pod \"{pod}\" not found"
        )),
        "{e}"
    );
    // -f follows: a tick written after it started.
    let last: u32 = tail
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a tick number");
    let mut f = k.spawn(&["logs", "-f", &pod, "--tail=1"]);
    f.wait_line("a later tick", |l| {
        l.rsplit(' ')
            .next()
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|n| n > last + 1)
    })
    .await;
    f.stop().await;
    k.stop().await;
}

/// The attempt number a sim container's log starts with ("sim: c started
/// (attempt N)").
fn first_attempt(log: &str) -> u32 {
    log.lines()
        .next()
        .and_then(|l| l.strip_prefix("sim: c started (attempt "))
        .and_then(|l| l.strip_suffix(')'))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a log that starts with the attempt: {log:?}"))
}

/// `kubectl logs -p`: the log of the instance before the current one, for
/// a container that crashed and was restarted (the sim's `sim/crash` image
/// exits 1 after 500 ms; the restart backoff is cut to 200 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_logs_previous_is_the_crashed_instance() {
    let k = Kube::start_with_sim(1, |so| {
        so.tuning.restart_backoff = Duration::from_millis(200);
        so.tuning.restart_backoff_max = Duration::from_millis(400);
    })
    .await;
    k.server
        .apply(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: crashy}\nspec:\n  selector: {matchLabels: {app: crashy}}\n  template:\n    metadata: {labels: {app: crashy}}\n    spec: {containers: [{name: c, image: 'sim/crash'}]}\n",
        )
        .await;
    k.wait_for("the pod", || async {
        !k.ok(&["get", "pods", "-l", "app=crashy", "-o", "name"])
            .await
            .is_empty()
    })
    .await;
    let pod = k.first_pod("app=crashy").await;
    k.wait_for("two restarts", || async {
        k.ok(&[
            "get",
            "pod",
            &pod,
            "-o",
            "jsonpath={.status.containerStatuses[0].restartCount}",
        ])
        .await
        .trim()
        .parse::<u32>()
        .is_ok_and(|n| n >= 2)
    })
    .await;
    // The previous instance is an earlier attempt than the current one (a
    // restart may come between the two commands, never the other way).
    let previous = first_attempt(&k.ok(&["logs", "-p", &pod]).await);
    let current = first_attempt(&k.ok(&["logs", &pod]).await);
    assert!(
        previous >= 1 && previous < current,
        "previous attempt {previous}, current {current}"
    );
    let by_name = first_attempt(&k.ok(&["logs", "--previous", &pod, "-c", "c"]).await);
    assert!(by_name >= previous, "{by_name} < {previous}");
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_exec_over_websocket() {
    let k = Kube::start(1).await;
    k.apply_ds("web", "app=web").await;
    k.wait_pods(1).await;
    let pod = k.first_pod("app=web").await;
    let out = k.ok(&["exec", &pod, "--", "echo", "hello", "world"]).await;
    assert_eq!(out, "hello world\n");
    let out = k
        .ok(&["exec", &pod, "-c", "c", "--", "sh", "-c", "echo hi"])
        .await;
    assert_eq!(out, "hi\n");
    // The command's exit code is kubectl's.
    let o = k.run(&["exec", &pod, "--", "exit", "3"]).await;
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let e = k.fails(&["exec", &pod, "-c", "nope", "--", "true"]).await;
    assert!(e.contains("container nope is not valid"), "{e}");
    // Without a terminal, stderr is its own stream.
    let o = k.run(&["exec", &pod, "--", "nope"]).await;
    assert_eq!(o.status.code(), Some(127));
    assert!(o.stdout.is_empty(), "{o:?}");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("sim: nope: command not found"), "{e}");
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_exec_with_stdin_and_a_terminal() {
    let k = Kube::start(1).await;
    k.apply_ds("web", "app=web").await;
    k.wait_pods(1).await;
    let pod = k.first_pod("app=web").await;
    // -i: stdin streams in (more than one agent chunk and input window:
    // 600 KiB), the end of kubectl's stdin closes the command's, and the
    // output comes back whole.
    let input: Vec<u8> = (0..600 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
    let o = k
        .run_stdin(&["exec", "-i", &pod, "--", "cat"], &input)
        .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.stdout.len(), input.len());
    assert!(o.stdout == input, "cat gave back what it was sent");
    let o = k
        .run_stdin(&["exec", "-i", &pod, "--", "cat"], b"hello\nworld\n")
        .await;
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hello\nworld\n");
    // The exit code still propagates with stdin.
    let o = k
        .run_stdin(&["exec", "-i", &pod, "--", "exit", "5"], b"x")
        .await;
    assert_eq!(o.status.code(), Some(5), "{o:?}");
    // Without -i the command's stdin is empty: cat ends at once.
    assert_eq!(k.ok(&["exec", &pod, "--", "cat"]).await, "");
    // -t: a terminal, so CRLF line ends; kubectl's terminal size is sent.
    let out = k
        .run_tty(&["exec", "-it", &pod, "--", "tty"], 100, 40)
        .await;
    assert!(out.contains("/dev/pts/0\r\n"), "{out:?}");
    let o = k.run_stdin(&["exec", "-i", &pod, "--", "tty"], b"").await;
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "not a tty\n");
    // Every exec ended: nothing is left open on the agent session.
    let rt = k
        .sim
        .as_ref()
        .and_then(|s| s.runtime(0))
        .expect("the sim node")
        .clone();
    k.wait_for("no exec left", || async {
        k.server.server.ctx.sessions.open_streams() == 0 && rt.open_exec_sessions() == 0
    })
    .await;
    // kubectl going away mid-exec ends the command on the node.
    let running = k.spawn_open_stdin(&["exec", "-i", &pod, "--", "cat"]);
    k.wait_for("the exec running", || async {
        rt.open_exec_sessions() == 1
    })
    .await;
    running.stop().await;
    k.wait_for("the exec ended with its client", || async {
        k.server.server.ctx.sessions.open_streams() == 0 && rt.open_exec_sessions() == 0
    })
    .await;
    k.stop().await;
}

/// kubectl's explain output with every run of whitespace made one space
/// (it wraps descriptions at its own width).
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_explains_every_kind_and_field() {
    let k = Kube::start(0).await;

    // The field the issue names: the type, the description, the fields.
    let out = flat(&k.ok(&["explain", "daemonset.spec.updateStrategy"]).await);
    for want in [
        "GROUP: apps KIND: DaemonSet VERSION: v1",
        "FIELD: updateStrategy <DaemonSetUpdateStrategy>",
        "DESCRIPTION: How pods are replaced when the template changes. How a DaemonSet's pods are updated.",
        "FIELDS: rollingUpdate <RollingUpdateDaemonSet> Parameters of a rolling update.",
        "type <string> enum: RollingUpdate, OnDelete `RollingUpdate` (the default) or `OnDelete`.",
    ] {
        assert!(out.contains(want), "{want:?} in {out}");
    }
    let out = flat(
        &k.ok(&["explain", "ds.spec.updateStrategy.rollingUpdate.maxSurge"])
            .await,
    );
    assert!(out.contains("FIELD: maxSurge <IntOrString>"), "{out}");
    assert!(
        out.contains("Only one of the two may be non-zero."),
        "{out}"
    );

    // Lists of objects, required fields, maps, and the fields drover keeps
    // without acting on them.
    let out = flat(&k.ok(&["explain", "ds.spec.template.spec.containers"]).await);
    for want in [
        "FIELD: containers <[]Container>",
        "name <string> -required- Unique within the pod; a DNS label.",
        "image <string> The image reference.",
        "ports <[]ContainerPort>",
        "resources <ResourceRequirements>",
        "imagePullPolicy <string> enum: Always, IfNotPresent, Never",
        "tty <boolean> Whether the container gets a TTY. drover keeps this field but does not act on it.",
    ] {
        assert!(out.contains(want), "{want:?} in {out}");
    }
    let out = flat(
        &k.ok(&["explain", "pods.spec.containers.resources.limits"])
            .await,
    );
    assert!(out.contains("FIELD: limits <map[string]Quantity>"), "{out}");
    let out = flat(&k.ok(&["explain", "node.spec.taints"]).await);
    for want in [
        "KIND: Node VERSION: v1",
        "FIELD: taints <[]Taint>",
        "effect <string> -required- enum: NoSchedule, PreferNoSchedule, NoExecute",
    ] {
        assert!(out.contains(want), "{want:?} in {out}");
    }
    let out = flat(&k.ok(&["explain", "configmaps.data"]).await);
    assert!(out.contains("FIELD: data <map[string]string>"), "{out}");

    // Every kind, by its plural.
    for kind in Kind::ALL {
        let out = flat(&k.ok(&["explain", kind.plural()]).await);
        assert!(
            out.contains(&format!("KIND: {} VERSION: v1", kind.name())),
            "{kind:?}: {out}"
        );
        assert!(out.contains("metadata <ObjectMeta>"), "{kind:?}: {out}");
    }

    // --recursive: nested fields, indented under their parent.
    let out = k.ok(&["explain", "pods", "--recursive"]).await;
    for want in [
        "  spec\t<PodSpec>",
        "    containers\t<[]Container> -required-",
        "      name\t<string> -required-",
        "      livenessProbe\t<Probe>",
        "        httpGet\t<HTTPGetAction>",
        "    tolerations\t<[]Toleration>",
    ] {
        assert!(out.lines().any(|l| l == want), "{want:?} in {out}");
    }

    // With the schemas published, kubectl's strict validation (the
    // default) still leaves the decision to drover: every manifest users
    // bring (the repo's copies of ../shared/manifests/) passes, but for
    // the static pod (it names no node).
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../drover-api/tests/data");
    let mut checked = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        if path.extension().is_none_or(|x| x != "yaml") {
            continue;
        }
        let Ok(manifests) = drover_api::parse_manifests(&text) else {
            continue; // a kind drover does not have
        };
        if manifests
            .iter()
            .any(|m| matches!(m, drover_api::Manifest::Pod(p) if p.spec.node_name.is_empty()))
        {
            continue; // a static pod, for an agent's --manifest-dir
        }
        let p = path.to_str().unwrap();
        let out = k
            .ok(&["apply", "--validate=strict", "--dry-run=server", "-f", p])
            .await;
        assert!(out.contains("(server dry run)"), "{p}: {out}");
        checked += 1;
    }
    assert!(checked >= 9, "{checked} manifests in {}", dir.display());

    // A field that does not exist, and a kind drover does not have.
    let err = k.fails(&["explain", "daemonset.spec.noSuchField"]).await;
    assert!(
        err.contains(r#"field "noSuchField" does not exist"#),
        "{err}"
    );
    let err = k.fails(&["explain", "statefulsets"]).await;
    assert!(
        err.contains("the server doesn't have a resource type"),
        "{err}"
    );
    k.stop().await;
}
