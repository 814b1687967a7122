//! The dashboard's Deployment page (issue 25) against a real member with
//! sim nodes: what the page and the overview show, its live stream from a
//! paused rollout (every pod of the old ReplicaSet) to the resumed one
//! rolled out, and its buttons: rollout undo and restart do what `drover
//! rollout undo|restart deployment/NAME` do, for an admin with the CSRF
//! token only (a viewer is refused 403, no session 401 or the sign-in
//! form).

mod dash;

use dash::{
    act, csrf_of, deployment, get, issue, login, reason, rolled_out, session_cookie, start_sim,
    web, Live,
};
use drover_testkit::TestServer;
use std::time::Duration;

const WAIT: Duration = dash::WAIT;
const PAGE: &str = "/ui/deployments/default/web";

/// A member with 3 sim nodes and Deployment `web` (4 replicas) rolled out
/// to `local/busybox:1`, then `:2` (two ReplicaSets, revisions 1 and 2).
async fn two_revisions(dir: &std::path::Path) -> (TestServer, drover_agent::Sim) {
    let s = TestServer::start(&dir.join("s")).await;
    let sim = start_sim(&s, "edge-", 3).await;
    s.apply(&deployment("1", 4, false)).await;
    rolled_out(&s, "local/busybox:1", 4).await;
    s.apply(&deployment("2", 4, false)).await;
    rolled_out(&s, "local/busybox:2", 4).await;
    (s, sim)
}

fn count(body: &str, pattern: &str) -> usize {
    body.matches(pattern).count()
}

#[tokio::test]
async fn a_deployments_page_shows_its_replica_sets_and_pods_and_follows_a_rollout_live() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, sim) = two_revisions(tmp.path()).await;
    let admin = session_cookie(&login(&s, Some(&s.server.identity.admin_token), None).await);
    dash::wait_shown(&s, PAGE, &admin, "s-updated", 4).await;
    let page = get(&s, PAGE, Some(&admin)).await;
    assert_eq!(page.code, 200, "{}", page.body);
    let b = &page.body;
    for want in [
        "Deployment default/web",
        r#"<b id="dp-desired">4</b>"#,
        r#"<b id="dp-updated">4</b>"#,
        "deployment &quot;web&quot; successfully rolled out",
        "RollingUpdate (maxUnavailable 1, maxSurge 1)",
        "NewReplicaSetAvailable",
        "MinimumReplicasAvailable",
        "local/busybox:1",
        "local/busybox:2",
        r#"data-live="/ui/live/deployments/default/web""#,
    ] {
        assert!(b.contains(want), "the page lacks {want:?}: {b}");
    }
    assert_eq!(count(b, r#"class="c s-updated" id="#), 4, "{b}");
    // Both ReplicaSets, the new one marked, with their revisions.
    let sets: Vec<_> = s
        .objects
        .list(drover_api::Kind::ReplicaSet, Some("default"), None)
        .await
        .unwrap()
        .0;
    assert_eq!(sets.len(), 2);
    for m in &sets {
        let drover_api::Manifest::ReplicaSet(rs) = m else {
            panic!()
        };
        assert!(
            b.contains(&format!(r#"id="rs:{}""#, rs.metadata.name)),
            "{b}"
        );
    }
    assert_eq!(count(b, r#"<span class="pill ok">new</span>"#), 1, "{b}");
    // The overview and the workloads page list it in `get deploy` columns.
    for path in ["/ui", "/ui/workloads"] {
        let p = get(&s, path, Some(&admin)).await;
        assert!(p.body.contains(r#"id="dp:default/web""#), "{}", p.body);
        assert!(
            p.body.contains(r#"href="/ui/deployments/default/web""#),
            "{}",
            p.body
        );
        for h in ["READY", "UP-TO-DATE", "AVAILABLE"] {
            assert!(p.body.contains(&format!(">{h}</th>")), "{}", p.body);
        }
    }

    // Live: a paused change leaves every pod on the old ReplicaSet, which
    // the stream shows; resumed, it rolls out and the stream follows.
    let mut live = Live::open(&s, "/ui/live/deployments/default/web", &admin).await;
    assert!(
        live.until(r#""dp-updated":"4""#, WAIT).await.is_some(),
        "{}",
        live.seen
    );
    s.apply(&deployment("3", 4, true)).await;
    assert!(
        live.until("0 out of 4 new replicas have been updated", WAIT)
            .await
            .is_some(),
        "{}",
        live.seen
    );
    // Paused, the new template has no ReplicaSet yet: every pod is old.
    assert!(
        live.until(r#"\"c s-old\""#, WAIT).await.is_some(),
        "{}",
        live.seen
    );
    live.seen.clear();
    s.apply(&deployment("3", 4, false)).await;
    rolled_out(&s, "local/busybox:3", 4).await;
    assert!(
        live.until("successfully rolled out", WAIT).await.is_some(),
        "{}",
        live.seen
    );
    sim.shutdown().await;
    s.shutdown().await;
}

#[tokio::test]
async fn the_deployments_buttons_do_what_rollout_undo_and_restart_do_for_an_admin_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, sim) = two_revisions(tmp.path()).await;
    let admin = session_cookie(&login(&s, Some(&s.server.identity.admin_token), None).await);
    let (cert, key) = issue(&s.server, "vera", "viewer").await;
    let viewer = session_cookie(&login(&s, None, Some((&cert, &key))).await);
    dash::wait_shown(&s, PAGE, &admin, "s-updated", 4).await;

    // No session: the page sends to the sign-in form, the action is 401.
    let a = get(&s, PAGE, None).await;
    assert_eq!(a.code, 303, "{}", a.body);
    assert_eq!(a.header("location"), Some("/ui/login"));
    let form = "action=undo&kind=deployment&namespace=default&name=web";
    let a = act(&s, None, None, form, None).await;
    assert_eq!(a.code, 401, "{}", a.body);
    // A viewer sees the buttons disabled, and is refused with its own
    // CSRF token.
    let page = get(&s, PAGE, Some(&viewer)).await;
    assert_eq!(page.code, 200, "{}", page.body);
    for id in ["act-restart", "act-undo"] {
        assert!(
            page.body
                .contains(&format!(r#"id="{id}" disabled title="viewers may not"#)),
            "{id} is not disabled for a viewer: {}",
            page.body
        );
    }
    let viewer_csrf = csrf_of(&s, &viewer).await;
    for form in [
        form,
        "action=restart&kind=deployment&namespace=default&name=web",
    ] {
        let a = act(&s, Some(&viewer), Some(&viewer_csrf), form, None).await;
        assert_eq!(a.code, 403, "{}", a.body);
        assert_eq!(reason(&a), "Forbidden");
    }
    // An admin without the page's CSRF token is refused.
    let a = act(&s, Some(&admin), None, form, None).await;
    assert_eq!(a.code, 403, "{}", a.body);
    assert_eq!(reason(&a), "BadCsrfToken");
    assert_eq!(
        web(&s).await.spec.template.spec.containers[0].image,
        "local/busybox:2"
    );

    // undo: back to revision 1's template, as `rollout undo`.
    let csrf = csrf_of(&s, &admin).await;
    let a = act(&s, Some(&admin), Some(&csrf), form, None).await;
    assert_eq!(a.code, 303, "{}", a.body);
    let back = a.header("location").unwrap().to_string();
    assert!(
        back.starts_with("/ui/deployments/default/web?done=")
            && back.contains("rolled%20back%20to%20revision%201"),
        "{back}"
    );
    rolled_out(&s, "local/busybox:1", 4).await;
    let d = web(&s).await;
    assert!(
        !d.spec
            .template
            .metadata
            .labels
            .contains_key("pod-template-hash"),
        "{:?}",
        d.spec.template.metadata.labels
    );
    // restart: kubectl's restartedAt annotation on the template.
    let restart = "action=restart&kind=deployment&namespace=default&name=web";
    let a = act(&s, Some(&admin), Some(&csrf), restart, None).await;
    assert_eq!(a.code, 303, "{}", a.body);
    let d = web(&s).await;
    assert!(
        d.spec
            .template
            .metadata
            .annotations
            .get("kubectl.kubernetes.io/restartedAt")
            .is_some_and(|t| t.ends_with('Z')),
        "{:?}",
        d.spec.template.metadata.annotations
    );
    // A paused Deployment is not restarted, and the refusal says why.
    s.apply(&deployment("1", 4, true)).await;
    let a = act(&s, Some(&admin), Some(&csrf), restart, None).await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert!(a.body.contains("resume it first"), "{}", a.body);
    sim.shutdown().await;
    s.shutdown().await;
}
