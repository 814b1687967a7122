//! What a server leaves on disk and how it fails to start: its data dir
//! and every file in it are its owner's only; a taken address exits 98
//! and names the flag.

use super::*;

/// Every dir under `dir` (itself included) 0700 and every file 0600; the
/// paths that are not, with their modes.
fn open_paths(dir: &std::path::Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut open = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(p) = todo.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue; // gone meanwhile (a temporary file)
        };
        let mode = m.permissions().mode() & 0o777;
        if m.is_dir() {
            if mode != 0o700 {
                open.push(format!("{} {mode:o}", p.display()));
            }
            if let Ok(rd) = std::fs::read_dir(&p) {
                todo.extend(rd.filter_map(|e| e.ok()).map(|e| e.path()));
            }
        } else if m.is_file() && mode != 0o600 {
            open.push(format!("{} {mode:o}", p.display()));
        }
    }
    open
}

#[tokio::test]
async fn a_servers_data_dir_and_every_file_in_it_are_its_owners_only() {
    let mut w = World::new();
    let m = Member::new(&w, "m0");
    m.start(&mut w, None, &[]);
    let (cfg, _) = credentials(&mut w, &m).await;
    let c = m.client(&cfg.token);
    wait_for("a write", START, || async {
        // An upsert: a retry after a lost answer is harmless.
        c.update("/limits/x", b"1".to_vec(), 0, true).await.ok()
    })
    .await;
    let open = open_paths(&m.dir);
    assert!(open.is_empty(), "not the owner's only: {open:?}");
    let status = w.terminate("m0", START).await;
    assert!(status.success(), "{status}");
    // What the store wrote on its way out, too.
    let open = open_paths(&m.dir);
    assert!(
        open.is_empty(),
        "not the owner's only after stopping: {open:?}"
    );
}

/// A server that cannot bind its address says which flag names it and
/// exits with status 98 (`EXIT_ADDR_IN_USE`) when the address is in use,
/// 1 for any other bind failure: what the restart of a member in the tests
/// above (and a supervisor) tells apart without reading the log.
#[test]
fn a_server_whose_address_is_taken_exits_98_and_names_the_flag() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port to hold");
    let port = taken.local_addr().expect("its address").port();
    let held = format!("127.0.0.1:{port}");
    let run = |name: &str, listen: &str, http: &str| {
        let dir = tmp.path().join(name);
        let out = Command::new(BIN)
            .args(["server", "--data-dir"])
            .arg(&dir)
            .args(["--listen", listen, "--http", http])
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .expect("run drover server");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), err)
    };
    for (name, listen, http, flag) in [
        ("grpc", held.as_str(), "127.0.0.1:0", "listen"),
        ("http", "127.0.0.1:0", held.as_str(), "http"),
    ] {
        let (code, err) = run(name, listen, http);
        assert_eq!(
            code,
            Some(drover_server::EXIT_ADDR_IN_USE),
            "--{flag} {held}: {err}"
        );
        assert!(
            err.contains(&format!("cannot listen on {held} ({flag})"))
                && err.contains(&format!("choose another with --{flag}")),
            "--{flag} {held}: {err}"
        );
    }
    // An address that is not this machine's: a failure, but not "in use".
    let (code, err) = run("foreign", "192.0.2.1:0", "127.0.0.1:0");
    assert_eq!(code, Some(1), "--listen 192.0.2.1:0: {err}");
    assert!(
        err.contains("cannot listen on 192.0.2.1:0 (listen)"),
        "{err}"
    );
    drop(taken);
}
