//! Members renew their own certificates while they run: a cluster whose
//! member certificates live a few seconds keeps electing, replicating and
//! answering new connections long after the first certificates expired,
//! and a member restarted then rejoins (every connection to and from it is
//! new, so each side presents and checks a renewed certificate).

use drover_pki::cert::pem_to_der;
use drover_pki::PeerCert;
use drover_server::{Server, ServerOptions};
use drover_testkit::{client_of, fast_options, restart_options, wait_until};
use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

/// The member certificates' lifetime here: renewed 4 s after issue.
const TTL: Duration = Duration::from_secs(6);
const WAIT: Duration = Duration::from_secs(30);

fn short_lived(mut o: ServerOptions) -> ServerOptions {
    o.member_cert_ttl = TTL;
    o
}

fn cert_of(s: &Server) -> PeerCert {
    PeerCert::parse(&pem_to_der(&s.trust.member_cert()).unwrap()).unwrap()
}

fn configmap(i: usize) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: default\ndata:\n  i: \"{i}\"\n")
}

async fn start(o: ServerOptions) -> Server {
    // RUST_LOG=info shows the renewals.
    drover_testkit::server::log_to_test();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Server::start(o.clone()).await {
            Ok(s) => return s,
            // A restart's recorded port may still be held for a moment.
            Err(e) if Instant::now() < deadline => {
                eprintln!("start: {e:#}; again");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("start: {e:#}"),
        }
    }
}

async fn three(dir: &Path) -> Vec<Server> {
    let first = start(short_lived(fast_options(dir.join("m0")))).await;
    let (via, token) = (
        first.grpc_addr.to_string(),
        first.identity.server_token.clone(),
    );
    let mut all = vec![first];
    for i in 1..3 {
        let mut o = short_lived(fast_options(dir.join(format!("m{i}"))));
        o.join = Some(via.clone());
        o.token = Some(token.clone());
        all.push(start(o).await);
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn members_renew_their_certificates_while_they_run() {
    let tmp = tempfile::tempdir().unwrap();
    let mut servers = three(tmp.path()).await;
    let started = SystemTime::now();
    // A certificate that outlives the configured lifetime is replaced at
    // start: every member's is short-lived from the outset.
    let mut seen: Vec<HashSet<String>> = servers
        .iter()
        .map(|s| {
            let c = cert_of(s);
            assert!(
                c.not_after <= SystemTime::now() + TTL + Duration::from_secs(1),
                "a member certificate lives past --member-cert-ttl: {:?}",
                c.not_after
            );
            HashSet::from([c.serial])
        })
        .collect();

    // Writes go on while every member renews twice: the certificates the
    // cluster started with have expired by then.
    let c = client_of(&servers[0]);
    let mut i = 0;
    let deadline = Instant::now() + WAIT;
    while seen.iter().any(|s| s.len() < 3) {
        assert!(
            Instant::now() < deadline,
            "members did not renew their certificates: {seen:?}"
        );
        c.apply(&configmap(i), false)
            .await
            .unwrap_or_else(|e| panic!("write {i} while certificates renew: {e}"));
        i += 1;
        for (s, serials) in servers.iter().zip(seen.iter_mut()) {
            let cert = cert_of(s);
            assert!(
                cert.not_after > SystemTime::now(),
                "member {:016x} serves an expired certificate",
                s.identity.id
            );
            serials.insert(cert.serial);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        SystemTime::now().duration_since(started).unwrap() > TTL,
        "the first certificates should have expired by now"
    );
    let saved = std::fs::read_to_string(tmp.path().join("m1/member.crt")).unwrap();
    assert_eq!(
        saved,
        servers[1].trust.member_cert(),
        "the renewed certificate is saved in the data dir"
    );

    // New connections to every member, with its renewed certificate.
    for s in &servers {
        client_of(s)
            .status()
            .await
            .unwrap_or_else(|e| panic!("a new connection to {}: {e}", s.grpc_addr));
    }

    // A follower restarted: it dials the others and they dial it anew.
    let leader = servers
        .iter()
        .position(|s| s.store.leader().is_leader)
        .expect("a leader");
    let f = (leader + 1) % 3;
    let mut gone = servers.remove(f);
    let dir = tmp.path().join(format!("m{f}"));
    gone.shutdown().await;
    drop(gone);
    c.apply(&configmap(i), false)
        .await
        .expect("a write while a follower is down");
    let back = start(short_lived(restart_options(&dir))).await;
    let want = servers[0].store.status().await.unwrap().applied;
    wait_until(
        "the restarted member catches up over new connections",
        WAIT,
        || async { back.store.status().await.is_ok_and(|st| st.applied >= want) },
    )
    .await;
    servers.push(back);
    for mut s in servers {
        s.shutdown().await;
    }
}
