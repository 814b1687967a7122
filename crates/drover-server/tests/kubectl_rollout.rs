//! `kubectl rollout undo` and `rollout history --revision` with the real
//! kubectl: the ControllerRevisions drover writes are Kubernetes' (a
//! strategic merge patch that replaces the template), so an undo after
//! `set env`, `set image` or `rollout restart` restores the template
//! exactly, `--to-revision` too.

mod kube;

use kube::Kube;
use serde_json::Value;

/// The DaemonSet's `spec.template`, as kubectl reads it.
async fn template(k: &Kube, name: &str) -> Value {
    let out = k.ok(&["get", "ds", name, "-o", "json"]).await;
    let ds: Value = serde_json::from_str(&out).expect("kubectl prints JSON");
    ds["spec"]["template"].clone()
}

/// Waits until the rollout is done (its revision written).
async fn rolled_out(k: &Kube, name: &str) {
    let out = k
        .ok(&["rollout", "status", &format!("ds/{name}"), "--timeout=30s"])
        .await;
    assert!(out.contains("successfully rolled out"), "{out}");
}

/// The revision numbers `kubectl rollout history` lists.
async fn revisions(k: &Kube, name: &str) -> Vec<i64> {
    let h = k.ok(&["rollout", "history", &format!("ds/{name}")]).await;
    h.lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

/// Undoes with kubectl and waits until the template is `want` and rolled out.
async fn undo_to(k: &Kube, args: &[&str], want: &Value) {
    let out = k.ok(args).await;
    assert_eq!(out, "daemonset.apps/hello rolled back\n");
    k.wait_for("the template restored exactly", || async {
        &template(k, "hello").await == want
    })
    .await;
    rolled_out(k, "hello").await;
}

fn env_of(t: &Value) -> Value {
    t["spec"]["containers"][0]["env"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_rollout_undo_restores_the_template_exactly() {
    let k = Kube::start(2).await;
    k.apply_ds("hello", "app=hello").await;
    k.wait_pods(2).await;
    rolled_out(&k, "hello").await;
    let t1 = template(&k, "hello").await;
    assert_eq!(env_of(&t1), Value::Null, "{t1}");

    // set env, then undo: FOO goes.
    k.ok(&["set", "env", "ds/hello", "FOO=bar"]).await;
    rolled_out(&k, "hello").await;
    let t2 = template(&k, "hello").await;
    assert_eq!(
        env_of(&t2),
        serde_json::json!([{"name": "FOO", "value": "bar"}])
    );
    assert_eq!(revisions(&k, "hello").await, [1, 2]);
    undo_to(&k, &["rollout", "undo", "ds/hello"], &t1).await;
    // Revision 1 is the current one again, renumbered.
    k.wait_for("revision 1 renumbered to 3", || async {
        revisions(&k, "hello").await == [2, 3]
    })
    .await;

    // set image, then rollout restart, then undo: the restart goes.
    k.ok(&["set", "image", "ds/hello", "c=busybox:2"]).await;
    rolled_out(&k, "hello").await;
    let t4 = template(&k, "hello").await;
    assert_eq!(t4["spec"]["containers"][0]["image"], "busybox:2");
    let out = k.ok(&["rollout", "restart", "ds/hello"]).await;
    assert_eq!(out, "daemonset.apps/hello restarted\n");
    rolled_out(&k, "hello").await;
    let t5 = template(&k, "hello").await;
    assert!(
        t5["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"].is_string(),
        "{t5}"
    );
    assert_eq!(revisions(&k, "hello").await, [2, 3, 4, 5]);
    undo_to(&k, &["rollout", "undo", "ds/hello"], &t4).await;
    assert_eq!(
        template(&k, "hello").await["metadata"]["annotations"],
        Value::Null,
        "the restartedAt annotation is gone"
    );

    // Then undo the image: back to the first template.
    undo_to(&k, &["rollout", "undo", "ds/hello", "--to-revision=3"], &t1).await;
    // --to-revision to the one with FOO (revision 2).
    undo_to(&k, &["rollout", "undo", "ds/hello", "--to-revision=2"], &t2).await;
    // --to-revision to the restart (revision 5): its annotation is back.
    undo_to(&k, &["rollout", "undo", "ds/hello", "--to-revision=5"], &t5).await;

    // Each undo renumbered the revision it went to: 6 is the image, 7 the
    // first template, 8 FOO, 9 the restart.
    assert_eq!(revisions(&k, "hello").await, [6, 7, 8, 9]);
    // rollout history --revision=N shows that revision's template.
    let shown = |n: i64| {
        let k = &k;
        async move {
            let out = k
                .ok(&["rollout", "history", "ds/hello", &format!("--revision={n}")])
                .await;
            assert!(
                out.starts_with(&format!("daemonset.apps/hello with revision #{n}\n")),
                "{out}"
            );
            out
        }
    };
    let out = shown(6).await;
    assert!(
        out.contains("busybox:2") && !out.contains("FOO") && !out.contains("restartedAt"),
        "{out}"
    );
    let out = shown(7).await;
    assert!(
        out.contains("busybox:1") && !out.contains("FOO") && !out.contains("restartedAt"),
        "{out}"
    );
    let out = shown(8).await;
    assert!(
        out.contains("busybox:1")
            && out.contains("FOO:")
            && out.contains("bar")
            && !out.contains("restartedAt"),
        "{out}"
    );
    let out = shown(9).await;
    assert!(
        out.contains("busybox:2")
            && !out.contains("FOO")
            && out.contains("kubectl.kubernetes.io/restartedAt"),
        "{out}"
    );
    // kubectl compares the revision's bytes with the DaemonSet's template
    // as Go writes it: the current revision is recognised.
    let out = k
        .ok(&["rollout", "undo", "ds/hello", "--to-revision=9"])
        .await;
    assert_eq!(
        out,
        "daemonset.apps/hello skipped rollback (current template already matches revision 9)\n"
    );
    assert_eq!(revisions(&k, "hello").await, [6, 7, 8, 9]);
    k.stop().await;
}
