//! The real kubectl driving `exec -i`, `exec -t` and `cp` on a Docker
//! node: an in-process server, an agent with the Docker runtime, and a pod
//! of the local test image (`local/busybox:1`, built by
//! `deploy/examples/busybox-image.sh`, never pulled). The node name is
//! unique and everything it made is removed at the end ([`Cleanup`]).
//! Without an engine the test fails, unless the run opts out with
//! `DROVER_TEST_SKIP=docker`.

mod kube;

use drover_agent::{AgentOptions, DockerOptions, DockerRuntime, TokioClock};
use drover_testkit::docker::{engine_ready, node_name, tuning, Cleanup, IMAGE};
use drover_testkit::TestAgent;
use kube::Kube;
use std::sync::Arc;
use std::time::Duration;

/// The pod links the applets the test uses that an image built before
/// `busybox-image.sh` linked them lacks (kubectl cp needs `tar` in the
/// container, as in Kubernetes); exec'd commands see the pod's PATH.
const LINKS: &str =
    "mkdir -p /tmp/bin; for a in tar stty tty; do ln -sf /bin/busybox /tmp/bin/$a; done;";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_exec_stdin_tty_and_cp_on_docker() {
    if !engine_ready() {
        return;
    }
    let name = node_name("kx", "exec");
    let _cleanup = Cleanup::new(&name);
    let k = Kube::start(0).await;
    let rt = DockerRuntime::connect(DockerOptions::new(name.clone(), k.tmp.path()))
        .await
        .expect("the engine answers");
    let mut o = AgentOptions::new(
        vec![k.server.addr.clone()],
        &k.server.node_token,
        name.clone(),
    );
    o.tuning = tuning(13);
    let agent = TestAgent::spawn(o, Arc::new(rt), Arc::new(TokioClock::new()));
    k.wait_for("the node Ready", || async {
        k.server.node(&name).await.is_some_and(|n| n.is_ready())
    })
    .await;
    k.server
        .apply(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: kx}}\nspec:\n  nodeName: {name}\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {IMAGE}\n    env: [{{name: PATH, value: '/tmp/bin:/bin'}}]\n    command: [sh, -c, '{LINKS} exec sleep 3600']\n"
        ))
        .await;
    k.wait_pods(1).await;

    // -i: stdin streams in, its end closes the command's stdin.
    let input: Vec<u8> = (0..300 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
    let o = k
        .run_stdin(&["exec", "-i", "kx", "--", "cat"], &input)
        .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.stdout.len(), input.len());
    assert!(o.stdout == input, "cat gave back what it was sent");
    // stderr is its own stream without a terminal; the exit code is kubectl's.
    let o = k
        .run_stdin(
            &[
                "exec",
                "-i",
                "kx",
                "--",
                "sh",
                "-c",
                "cat; echo oops >&2; exit 4",
            ],
            b"in\n",
        )
        .await;
    assert_eq!(o.status.code(), Some(4), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "in\n");
    assert!(String::from_utf8_lossy(&o.stderr).contains("oops"), "{o:?}");

    // -t: a terminal (CRLF line ends), sized as kubectl's own. The resize
    // comes just after the start, so the command waits for it (at most
    // 5 s) before it prints the size.
    let out = k
        .run_tty(
            &[
                "exec",
                "-it",
                "kx",
                "--",
                "sh",
                "-c",
                "tty; n=0; while [ \"$(stty size)\" != '45 123' ] && [ $n -lt 100 ]; do n=$((n+1)); sleep 0.05; done; stty size",
            ],
            123,
            45,
        )
        .await;
    assert!(out.contains("/dev/pts/"), "{out:?}");
    assert!(out.contains("45 123\r\n"), "{out:?}");

    // cp runs tar through exec: stdin up, output down.
    let local = k.tmp.path().join("up.txt");
    let body: String = (0..5000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&local, &body).unwrap();
    let local_s = local.to_str().unwrap();
    k.ok(&["cp", local_s, "kx:/tmp/up.txt"]).await;
    assert_eq!(
        k.ok(&["exec", "kx", "--", "cat", "/tmp/up.txt"]).await,
        body
    );
    let back = k.tmp.path().join("back.txt");
    k.ok(&["cp", "kx:/tmp/up.txt", back.to_str().unwrap()])
        .await;
    assert_eq!(std::fs::read_to_string(&back).unwrap(), body);

    k.wait_for("no exec stream left", || async {
        k.server.server.ctx.sessions.open_streams() == 0
    })
    .await;
    agent.stop(Duration::from_secs(20)).await;
    k.stop().await;
}
