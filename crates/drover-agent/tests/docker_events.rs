//! Pod events on a Docker node, against the real engine: a one-member
//! server in this process and an agent over [`DockerRuntime`].
//!
//! - an image that is not on the machine, named under a closed loopback
//!   registry (`127.0.0.1:1/…`, so that the pull fails at once and nothing
//!   leaves the machine): `describe pod` shows the container Waiting with
//!   ErrImagePull/ImagePullBackOff and the engine's message, and the events
//!   Pulling, Failed (the engine's message), Failed (`Error: ErrImagePull`)
//!   and BackOff (`Back-off pulling image …`);
//! - a failing exec readiness probe: Scheduled is not there (a bare pod),
//!   but Pulled, Created, Started and Unhealthy (`Readiness probe failed:`
//!   with the command, its exit code and its output, counted) are.
//!
//! The image `local/busybox:1` is built by `deploy/examples/busybox-image.sh`
//! (never pulled). Without an engine the test fails, unless the run opts
//! out with `DROVER_TEST_SKIP=docker`. Every wait has a deadline.

use drover_agent::{AgentOptions, DockerOptions, DockerRuntime, TokioClock};
use drover_api::{Event, Kind, Manifest};
use drover_testkit::docker::{docker_ps, engine_ready, node_name, tuning, Cleanup, IMAGE};
use drover_testkit::{wait_until, TestAgent, TestServer};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

const WAIT: Duration = Duration::from_secs(30);

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

fn has(evs: &[Event], reason: &str, message: &str) -> bool {
    evs.iter()
        .any(|e| e.reason == reason && e.message.contains(message))
}

async fn describe(s: &TestServer, pod: &str) -> String {
    let p = s.pod(pod).await.expect("the pod");
    let evs = events_of(s, pod).await;
    drover_cli::describe::describe_pod(&p, &evs, None, SystemTime::now())
}

#[tokio::test]
async fn a_missing_image_and_a_failing_probe_show_their_events_in_describe_pod() {
    if !engine_ready() {
        return;
    }
    let node = node_name("de", "events");
    let _cleanup = Cleanup::new(&node);
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("server")).await;
    let rt = DockerRuntime::connect(DockerOptions::new(node.clone(), tmp.path()))
        .await
        .expect("the engine answers");
    let mut o = AgentOptions::new(vec![s.addr.clone()], s.node_token.clone(), &node);
    o.data_dir = Some(tmp.path().join("agent"));
    o.tuning = tuning(3);
    let agent = TestAgent::spawn(o, Arc::new(rt), Arc::new(TokioClock::new()));
    wait_until("the node Ready", WAIT, || async {
        s.node(&node).await.is_some_and(|n| n.is_ready())
    })
    .await;

    let pod = |name: &str, container: &str| {
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 1\n  containers:\n{container}")
    };
    s.apply(&pod(
        "noimage",
        "  - {name: app, image: \"127.0.0.1:1/drover-test/absent:1\", imagePullPolicy: IfNotPresent}\n",
    ))
    .await;
    s.apply(&pod(
        "unready",
        &format!("  - name: app\n    image: {IMAGE}\n    command: [sh, -c, 'sleep 3600']\n    readinessProbe:\n      exec: {{command: [sh, -c, 'echo not ready yet; exit 1']}}\n      periodSeconds: 1\n"),
    ))
    .await;

    wait_until("the pull's events", WAIT, || async {
        let evs = events_of(&s, "noimage").await;
        has(
            &evs,
            "Pulling",
            "Pulling image \"127.0.0.1:1/drover-test/absent:1\"",
        ) && has(&evs, "Failed", "Failed to pull image")
            && has(&evs, "Failed", "Error: ErrImagePull")
            && has(&evs, "BackOff", "Back-off pulling image")
    })
    .await;
    wait_until("the probe's events, counted", WAIT, || async {
        let evs = events_of(&s, "unready").await;
        has(&evs, "Started", "Started container app")
            && evs.iter().any(|e| {
                e.reason == "Unhealthy"
                    && e.message.starts_with("Readiness probe failed: ")
                    && e.message.ends_with("exited with 1: not ready yet")
                    && e.count.unwrap_or(1) >= 2
            })
    })
    .await;

    let text = describe(&s, "noimage").await;
    eprintln!("---- describe pod noimage\n{text}");
    assert!(text.contains("    State:          Waiting\n"), "{text}");
    assert!(
        text.contains("      Reason:       ErrImagePull\n")
            || text.contains("      Reason:       ImagePullBackOff\n"),
        "{text}"
    );
    assert!(text.contains("      Message:      "), "{text}");
    assert!(text.contains("\nEvents:\n  Type     Reason"), "{text}");
    assert!(text.contains("kubelet  Pulling image"), "{text}");
    assert!(text.contains("Warning  Failed"), "{text}");
    assert!(text.contains("Normal   BackOff"), "{text}");

    let text = describe(&s, "unready").await;
    eprintln!("---- describe pod unready\n{text}");
    assert!(text.contains("Warning  Unhealthy"), "{text}");
    assert!(
        text.contains("kubelet  Readiness probe failed: command"),
        "{text}"
    );
    assert!(text.contains(" over "), "a counted event: {text}");
    assert!(text.contains("Normal   Created"), "{text}");
    assert!(text.contains("Normal   Started"), "{text}");

    agent.stop(Duration::from_secs(20)).await;
    assert!(
        docker_ps(&node, &[]).is_empty(),
        "the node's containers are gone"
    );
    s.shutdown().await;
}
