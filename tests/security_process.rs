//! The security issue's attacks with the real binary, as an operator or an
//! attacker types them: a client without the cluster CA or with another
//! one, an agent holding a token that pins another CA, a node token used
//! as an admin credential, viewer and admin client configs from
//! `drover access issue`, and `drover token rotate`.
//!
//! Every child is SIGKILLed and reaped when the test ends, panics included;
//! every wait polls with a deadline.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use drover_testkit::{spawn_logged, wait_member_addrs, wait_until_blocking, Procs};

const BIN: &str = env!("CARGO_BIN_EXE_drover");
const POLL: Duration = Duration::from_millis(50);
const WAIT: Duration = Duration::from_secs(20);

fn spawn(args: &[&str], log: &Path) -> Child {
    spawn_logged(BIN, args, log)
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("DROVER_CONFIG")
        .env_remove("DROVER_SERVER")
        .env_remove("DROVER_TOKEN")
        .env_remove("DROVER_CA")
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .stdin(Stdio::null())
        .output()
        .expect("run drover")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn attacks_with_the_real_binary_are_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let data = dir.join("server");
    let data_s = data.to_str().expect("utf-8").to_string();
    let mut procs = Procs(Vec::new());
    procs.0.push(spawn(
        &[
            "server",
            "--data-dir",
            &data_s,
            "--listen",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
        ],
        &dir.join("server.log"),
    ));
    // It bound port 0: the address it got is in its data dir.
    let grpc = wait_member_addrs(&data, &mut procs.0[0], WAIT).grpc;
    let show = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    wait_until_blocking("the server's client files", WAIT, POLL, || {
        data.join("client.yaml").exists() && data.join("node-token").exists()
    });
    let config = data.join("client.yaml").display().to_string();
    let ca = data.join("ca.crt").display().to_string();
    let node_token = std::fs::read_to_string(data.join("node-token"))
        .expect("node-token")
        .trim()
        .to_string();
    wait_until_blocking("the server answers", WAIT, POLL, || {
        run(&["--config", &config, "get", "nodes"]).status.success()
    });

    // A client without the CA is told what is missing.
    let o = run(&["--server", &grpc, "--token", "x", "get", "nodes"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("--ca"), "{}", text(&o.stderr));

    // A client that trusts another CA gets no answer from this server.
    let other = drover_pki::Ca::create("other", std::time::SystemTime::now()).expect("CA");
    let other_ca = dir.join("other-ca.crt");
    std::fs::write(&other_ca, other.cert_pem()).expect("write");
    let admin = drover_cli::ClientConfig::load(&data.join("client.yaml")).expect("client.yaml");
    let o = run(&[
        "--server",
        &grpc,
        "--token",
        &admin.token,
        "--ca",
        other_ca.to_str().expect("utf-8"),
        "get",
        "nodes",
    ]);
    assert!(!o.status.success(), "{}", text(&o.stdout));

    // The node token is no admin credential.
    let o = run(&[
        "--server",
        &grpc,
        "--token",
        &node_token,
        "--ca",
        &ca,
        "get",
        "nodes",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("refused the credentials"),
        "{}",
        text(&o.stderr)
    );

    // An agent whose token pins another CA never sends it, and no node
    // appears.
    let forged = format!("drover-node-{}-{}", other.digest(), "0123456789abcdef0123");
    let mut agent = spawn(
        &[
            "agent",
            "--server",
            &grpc,
            "--token",
            &forged,
            "--name",
            "evil",
            "--runtime",
            "sim",
        ],
        &dir.join("evil.log"),
    );
    wait_until_blocking("the agent refusing the server's CA", WAIT, POLL, || {
        show("evil.log").contains("does not present the CA")
    });
    let _ = agent.kill();
    let _ = agent.wait();
    let o = run(&["--config", &config, "get", "nodes", "-o", "name"]);
    assert!(!text(&o.stdout).contains("evil"), "{}", text(&o.stdout));

    // A viewer config reads; it cannot write.
    let viewer = dir.join("viewer.yaml");
    let viewer_s = viewer.to_str().expect("utf-8");
    let o = run(&[
        "--config", &config, "access", "issue", "ci-read", "--role", "viewer", "-o", viewer_s,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&viewer)
            .expect("viewer.yaml")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "a client config with a key is 0600");
    }
    let cfg = drover_cli::ClientConfig::load(&viewer).expect("a client config");
    assert!(cfg.token.is_empty() && !cfg.cert.is_empty() && !cfg.key.is_empty());
    let o = run(&["--config", viewer_s, "get", "nodes"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let ds = dir.join("ds.yaml");
    std::fs::write(
        &ds,
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:\n      containers: [{name: c, image: busybox}]\n",
    )
    .expect("write");
    let ds_s = ds.to_str().expect("utf-8");
    let o = run(&["--config", viewer_s, "apply", "-f", ds_s]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("viewer ci-read may not"),
        "{}",
        text(&o.stderr)
    );
    let o = run(&["--config", &config, "get", "ds", "-o", "name"]);
    assert_eq!(text(&o.stdout).trim(), "", "nothing was written");

    // An admin config writes.
    let admin_cfg = dir.join("ops.yaml");
    let admin_s = admin_cfg.to_str().expect("utf-8");
    let o = run(&[
        "--config", &config, "access", "issue", "ops", "--role", "admin", "--ttl", "1h", "-o",
        admin_s,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = run(&["--config", admin_s, "apply", "-f", ds_s]);
    assert!(o.status.success(), "{}", text(&o.stderr));

    // Both are on record; revoking the viewer refuses its config at once,
    // saying why, and leaves the admin's working.
    let o = run(&["--config", &config, "access", "list"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let list = text(&o.stdout);
    assert!(list.starts_with("NAME"), "{list}");
    for want in ["ci-read", "viewer", "ops", "admin", "Valid"] {
        assert!(list.contains(want), "{want}: {list}");
    }
    let o = run(&["--config", &config, "access", "revoke", "ci-read"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("revoked the viewer certificate"),
        "{}",
        text(&o.stdout)
    );
    wait_until_blocking("the viewer refused", WAIT, POLL, || {
        let o = run(&["--config", viewer_s, "get", "nodes"]);
        !o.status.success() && text(&o.stderr).contains("was revoked by an admin")
    });
    let o = run(&["--config", &config, "access", "list"]);
    assert!(text(&o.stdout).contains("Revoked"), "{}", text(&o.stdout));
    let o = run(&["--config", admin_s, "get", "ds", "-o", "name"]);
    assert!(o.status.success(), "{}", text(&o.stderr));

    // Rotating the node token: the new one is printed and written; the old
    // one no longer joins a node.
    let o = run(&["--config", &config, "token", "rotate", "node"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let new = text(&o.stdout).trim().to_string();
    assert!(
        new.starts_with("drover-node-") && new != node_token,
        "{new}"
    );
    wait_until_blocking("node-token rewritten", WAIT, POLL, || {
        std::fs::read_to_string(data.join("node-token")).is_ok_and(|t| t.trim() == new)
    });
    let mut late = spawn(
        &[
            "agent",
            "--server",
            &grpc,
            "--token",
            &node_token,
            "--name",
            "late",
            "--runtime",
            "sim",
        ],
        &dir.join("late.log"),
    );
    wait_until_blocking("the old token refused", WAIT, POLL, || {
        show("late.log").contains("wrong node token")
    });
    let _ = late.kill();
    let _ = late.wait();
    let token_file = data.join("node-token").display().to_string();
    procs.0.push(spawn(
        &[
            "agent",
            "--server",
            &grpc,
            "--token-file",
            &token_file,
            "--name",
            "fresh",
            "--runtime",
            "sim",
            "--data-dir",
            dir.join("fresh").to_str().expect("utf-8"),
        ],
        &dir.join("fresh.log"),
    ));
    // Joined: the Node exists (its join made it) and the agent kept its
    // certificate (written once the join answered).
    wait_until_blocking("the new token joins a node", WAIT, POLL, || {
        dir.join("fresh").join("ca.crt").exists()
            && text(&run(&["--config", &config, "get", "nodes", "-o", "name"]).stdout)
                .contains("fresh")
    });
    // The node keeps its key and certificate, owner-only.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for f in ["node.key", "node.crt", "ca.crt"] {
            let mode = std::fs::metadata(dir.join("fresh").join(f))
                .unwrap_or_else(|e| panic!("{f}: {e}"))
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{f}");
        }
    }

    // Stopping the agent is not leaving (SIGKILL here, as the unit does):
    // the node stays. `drover agent --leave` with its data dir leaves for
    // good: the Node is deleted.
    for mut c in procs.0.drain(1..) {
        let _ = c.kill();
        let _ = c.wait();
    }
    let o = run(&["--config", &config, "get", "nodes", "-o", "name"]);
    assert!(text(&o.stdout).contains("fresh"), "{}", text(&o.stdout));
    let fresh_dir = dir.join("fresh").display().to_string();
    let o = run(&[
        "agent",
        "--server",
        &grpc,
        "--name",
        "fresh",
        "--runtime",
        "sim",
        "--data-dir",
        &fresh_dir,
        "--leave",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = run(&["--config", &config, "get", "nodes", "-o", "name"]);
    assert!(!text(&o.stdout).contains("fresh"), "{}", text(&o.stdout));

    // Rotating the admin token: the server writes the new one in its
    // client.yaml (so the same --config goes on working) and refuses the
    // old one.
    let old_admin = drover_cli::ClientConfig::load(std::path::Path::new(&config))
        .expect("client.yaml")
        .token;
    let o = run(&["--config", &config, "token", "rotate", "admin"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let new_admin = text(&o.stdout).trim().to_string();
    assert!(new_admin.starts_with("drover-admin-") && new_admin != old_admin);
    wait_until_blocking("client.yaml has the new admin token", WAIT, POLL, || {
        drover_cli::ClientConfig::load(std::path::Path::new(&config))
            .is_ok_and(|c| c.token == new_admin)
    });
    let o = run(&["--config", &config, "get", "nodes"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = run(&[
        "--server", &grpc, "--token", &old_admin, "--ca", &ca, "get", "nodes",
    ]);
    assert!(!o.status.success(), "the old admin token still works");
}
