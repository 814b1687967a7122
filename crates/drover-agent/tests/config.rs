//! ConfigMaps and Secrets consumed by pods on simulated nodes against a
//! real one-member server: env (`valueFrom`, `envFrom` with a prefix,
//! `optional`) and volume files resolved at start; a missing object or key
//! is `CreateContainerConfigError` with the kubelet's message and events,
//! and the pod starts once it exists; a change reaches the files of a
//! running container (no restart) but not its env; a `subPath` mount does
//! not change. Every wait has a deadline.

use drover_agent::{AgentOptions, SimConfig, SimRuntime};
use drover_api::{Event, Kind, Manifest, Pod};
use drover_testkit::{quick_tuning, start_sim_agent, wait_until, TestAgent, TestServer};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

fn start_agent(s: &TestServer, name: &str) -> TestAgent<SimRuntime> {
    let mut o = AgentOptions::new(vec![s.addr.clone()], s.node_token.clone(), name);
    o.tuning = quick_tuning(3);
    o.tuning.restart_backoff = Duration::from_millis(100);
    o.tuning.restart_backoff_max = Duration::from_millis(500);
    start_sim_agent(o, SimConfig::default())
}

fn waiting_reason(p: &Pod) -> Option<(String, String)> {
    let w = p
        .status
        .container_statuses
        .first()?
        .state
        .waiting
        .as_ref()?;
    Some((w.reason.clone(), w.message.clone()))
}

fn running(p: &Pod) -> bool {
    p.status
        .container_statuses
        .first()
        .is_some_and(|c| c.state.running.is_some())
}

async fn events_of(s: &TestServer, pod: &str) -> Vec<Event> {
    let (list, _) = s
        .objects
        .list(Kind::Event, Some("default"), None)
        .await
        .unwrap_or_default();
    list.into_iter()
        .filter_map(|m| match m {
            Manifest::Event(e) if e.involved_object.name == pod => Some(*e),
            _ => None,
        })
        .collect()
}

const POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  nodeName: n1
  containers:
  - name: c
    image: nginx
    envFrom:
    - configMapRef: {name: app}
      prefix: APP_
    - secretRef: {name: nowhere, optional: true}
    env:
    - name: PASSWORD
      valueFrom: {secretKeyRef: {name: db, key: password}}
    - name: MAYBE
      valueFrom: {configMapKeyRef: {name: app, key: absent, optional: true}}
    volumeMounts:
    - {name: cfg, mountPath: /etc/app}
    - {name: cfg, mountPath: /etc/mode-pinned, subPath: mode}
    - {name: creds, mountPath: /etc/creds}
    - {name: opt, mountPath: /etc/opt}
  volumes:
  - name: cfg
    configMap: {name: app}
  - name: creds
    projected:
      sources:
      - secret: {name: db, items: [{key: password, path: db/pass}]}
      - downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}
  - name: opt
    secret: {secretName: nowhere, optional: true}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_get_env_and_files_and_files_follow_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let agent = start_agent(&s, "n1");
    wait_until("the node", WAIT, || async { s.node("n1").await.is_some() }).await;
    let rt = agent.runtime.clone();

    // Nothing exists yet: the kubelet's error, and its events.
    s.apply(POD).await;
    wait_until("CreateContainerConfigError", WAIT, || async {
        s.pod("web").await.and_then(|p| waiting_reason(&p))
            == Some((
                "CreateContainerConfigError".into(),
                "configmap \"app\" not found".into(),
            ))
    })
    .await;
    wait_until("a Failed event", WAIT, || async {
        events_of(&s, "web")
            .await
            .iter()
            .any(|e| e.reason == "Failed" && e.message == "Error: configmap \"app\" not found")
    })
    .await;

    // The ConfigMap comes; the Secret's key is still missing (the volume
    // says so first, as the kubelet mounts before it builds the env).
    s.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {mode: fast, level: debug}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {user: admin}\n").await;
    wait_until("the missing key named", WAIT, || async {
        s.pod("web")
            .await
            .and_then(|p| waiting_reason(&p))
            .map(|w| w.1)
            == Some("secret references non-existent secret key: password".into())
    })
    .await;

    // Everything is there: the pod runs with its env and files.
    s.apply("apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {user: admin, password: hunter2}\n").await;
    wait_until("the pod runs", WAIT, || async {
        s.pod("web").await.is_some_and(|p| running(&p))
    })
    .await;
    let uid = s.pod("web").await.unwrap().metadata.uid;
    let env = rt.env(&uid, "c").expect("started");
    assert_eq!(
        env,
        [
            ("APP_level".to_string(), "debug".to_string()),
            ("APP_mode".into(), "fast".into()),
            ("PASSWORD".into(), "hunter2".into()),
        ]
    );
    assert_eq!(rt.file(&uid, "/etc/app/mode").as_deref(), Some("fast"));
    assert_eq!(rt.file(&uid, "/etc/app/level").as_deref(), Some("debug"));
    assert_eq!(rt.file(&uid, "/etc/mode-pinned").as_deref(), Some("fast"));
    assert_eq!(
        rt.file(&uid, "/etc/creds/db/pass").as_deref(),
        Some("hunter2")
    );
    assert_eq!(rt.file(&uid, "/etc/creds/name").as_deref(), Some("web"));
    assert_eq!(rt.file(&uid, "/etc/opt/anything"), None);

    // A change reaches the files within seconds, without a restart; env
    // and the subPath mount keep what the container started with.
    s.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {mode: slow}\n")
        .await;
    wait_until(
        "the new value in the file",
        Duration::from_secs(10),
        || async { rt.file(&uid, "/etc/app/mode").as_deref() == Some("slow") },
    )
    .await;
    assert_eq!(
        rt.file(&uid, "/etc/app/level"),
        None,
        "a key that went is gone"
    );
    assert_eq!(rt.file(&uid, "/etc/mode-pinned").as_deref(), Some("fast"));
    assert_eq!(rt.env(&uid, "c").unwrap(), env);
    let p = s.pod("web").await.unwrap();
    assert_eq!(p.status.container_statuses[0].restart_count, 0);
    s.apply("apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {user: admin, password: rotated}\n").await;
    wait_until(
        "the rotated secret in the file",
        Duration::from_secs(10),
        || async { rt.file(&uid, "/etc/creds/db/pass").as_deref() == Some("rotated") },
    )
    .await;
    agent.stop_unchecked(Duration::from_secs(10)).await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_volume_source_is_a_failed_mount() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let agent = start_agent(&s, "n1");
    wait_until("the node", WAIT, || async { s.node("n1").await.is_some() }).await;
    s.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {a: '1'}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: vol}\nspec:\n  nodeName: n1\n  containers: [{name: c, image: nginx, volumeMounts: [{name: v, mountPath: /v}]}]\n  volumes: [{name: v, configMap: {name: app, items: [{key: b, path: b}]}}]\n").await;
    wait_until("FailedMount and CreateContainerConfigError", WAIT, || async {
        let reason = s.pod("vol").await.and_then(|p| waiting_reason(&p));
        reason
            == Some((
                "CreateContainerConfigError".into(),
                "configmap references non-existent config key: b".into(),
            ))
            && events_of(&s, "vol").await.iter().any(|e| {
                e.reason == "FailedMount"
                    && e.message
                        == "MountVolume.SetUp failed for volume \"v\" : configmap references non-existent config key: b"
            })
    })
    .await;
    // The key appears: the pod starts.
    s.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {a: '1', b: '2'}\n")
        .await;
    wait_until("the pod runs", WAIT, || async {
        s.pod("vol").await.is_some_and(|p| running(&p))
    })
    .await;
    let uid = s.pod("vol").await.unwrap().metadata.uid;
    assert_eq!(agent.runtime.file(&uid, "/v/b").as_deref(), Some("2"));
    assert_eq!(agent.runtime.file(&uid, "/v/a"), None, "only the items");
    agent.stop_unchecked(Duration::from_secs(10)).await;
    s.shutdown().await;
}

/// Every file under `dir` whose contents hold `needle`.
fn files_holding(dir: &std::path::Path, needle: &str, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            files_holding(&path, needle, out);
        } else if std::fs::read(&path)
            .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
        {
            out.push(path.display().to_string());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_restarted_without_a_server_keeps_its_pods_and_their_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("server");
    let s = TestServer::start(&dir).await;
    let data = tmp.path().join("agent");
    let options = |s: &TestServer| {
        let mut o = AgentOptions::new(vec![s.addr.clone()], s.node_token.clone(), "n1");
        o.tuning = quick_tuning(5);
        o.data_dir = Some(data.clone());
        o
    };
    let clock: std::sync::Arc<dyn drover_agent::Clock> =
        std::sync::Arc::new(drover_agent::TokioClock::new());
    let rt = std::sync::Arc::new(SimRuntime::new(
        clock.clone(),
        std::sync::Arc::new(SimConfig::default()),
    ));
    let agent = TestAgent::spawn(options(&s), rt.clone(), clock.clone());
    wait_until("the node", WAIT, || async { s.node("n1").await.is_some() }).await;
    // A readiness probe that reads the ConfigMap's file: the restarted
    // agent's probe worker shows that it adopted the container.
    s.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {mode: fast}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: hunter2-on-disk?}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  nodeName: n1\n  containers:\n  - name: c\n    image: nginx\n    env: [{name: P, valueFrom: {secretKeyRef: {name: db, key: password}}}]\n    readinessProbe: {exec: {command: [cat, /etc/app/mode]}, periodSeconds: 1}\n    volumeMounts: [{name: cfg, mountPath: /etc/app}, {name: s, mountPath: /etc/s}]\n  volumes: [{name: cfg, configMap: {name: app}}, {name: s, secret: {secretName: db}}]\n").await;
    wait_until("the pod runs", WAIT, || async {
        s.pod("web").await.is_some_and(|p| running(&p))
    })
    .await;
    let uid = s.pod("web").await.unwrap().metadata.uid;
    let before = rt.containers();
    assert_eq!(before.len(), 1);

    // The agent dies, then the server: a new agent starts with no server
    // to reach (its saved pods and certificate in the data dir).
    let mut o = options(&s);
    o.servers = vec!["127.0.0.1:1".into()];
    agent.kill().await;
    s.shutdown().await;
    let execs = rt.exec_history(&uid).len();
    let agent = TestAgent::spawn(o, rt.clone(), clock.clone());
    wait_until(
        "the restarted agent probes the adopted container",
        WAIT,
        || async { rt.exec_history(&uid).len() >= execs + 2 },
    )
    .await;
    assert_eq!(rt.containers(), before, "adopted, not restarted");
    assert_eq!(
        rt.file(&uid, "/etc/app/mode").as_deref(),
        Some("fast"),
        "kept"
    );
    assert_eq!(
        rt.file(&uid, "/etc/s/password").as_deref(),
        Some("hunter2-on-disk?")
    );
    // The Secret is nowhere in the agent's data dir (pods.json names it,
    // never holds its value).
    let mut leaks = Vec::new();
    files_holding(&data, "hunter2-on-disk?", &mut leaks);
    files_holding(&data, "aHVudGVyMi1vbi1kaXNrPw==", &mut leaks);
    assert!(leaks.is_empty(), "{leaks:?}");
    agent.kill().await;
}
