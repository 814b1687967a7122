//! Child processes of the process-level tests: the real `drover` binary,
//! its output in a log file, killed and reaped whatever happens; a server
//! child's addresses, learnt from its data dir.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Children that die with the test (SIGKILL, then reaped), panics included.
pub struct Procs(pub Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `bin ARGS` with stdout and stderr in `log`, and none of the
/// `DROVER_*` variables of the caller's environment that pick a cluster or
/// a credential.
pub fn spawn_logged(bin: &str, args: &[&str], log: &Path) -> Child {
    let out = std::fs::File::create(log).expect("log file");
    let err = out.try_clone().expect("clone");
    Command::new(bin)
        .args(args)
        .env_remove("DROVER_CONFIG")
        .env_remove("DROVER_SERVER")
        .env_remove("DROVER_TOKEN")
        .env_remove("DROVER_TOKEN_FILE")
        .env_remove("DROVER_CA")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn drover")
}

/// A `drover server` child's addresses, as its data dir records them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberAddrs {
    /// The gRPC address (`host:port`) peers, agents and clients use.
    pub grpc: String,
    /// The HTTP address (health, status).
    pub http: String,
}

/// The addresses of the member whose data dir is `dir`, from
/// `DIR/server.json`, or `None` while it has not written one. A server
/// started with `--listen 127.0.0.1:0 --http 127.0.0.1:0` binds first and
/// records the ports it got there (atomically: a file that exists is
/// whole); a restart from the same dir binds them again.
pub fn member_addrs(dir: &Path) -> Option<MemberAddrs> {
    let id = drover_server::identity::Identity::load(dir).ok()??;
    Some(MemberAddrs {
        grpc: id.addr,
        http: id.http,
    })
}

/// Waits until the member whose data dir is `dir` recorded its addresses
/// ([`member_addrs`]) and returns them; panics after `timeout`, or as soon
/// as `child` exited.
pub fn wait_member_addrs(dir: &Path, child: &mut Child, timeout: Duration) -> MemberAddrs {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(a) = member_addrs(dir) {
            return a;
        }
        if let Some(st) = child.try_wait().expect("try_wait") {
            panic!(
                "the server of {} exited ({st}) before it recorded its addresses",
                dir.display()
            );
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {} to record the addresses it bound",
            dir.join("server.json").display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A restarted `drover server` child `name` exited with `status` before it
/// came up; `out` is what it printed. Returns when it exited because an
/// address to bind was in use ([`drover_server::EXIT_ADDR_IN_USE`]) and
/// `deadline` has not passed, so that the caller starts it again; panics
/// with its output otherwise.
///
/// A restart binds the ports recorded in its data dir again, and an
/// outgoing connection of this machine may hold one of them (they are
/// ephemeral ports) for a moment: such a start is worth another try, and
/// any other exit is a failure of the test.
pub fn expect_busy_port_exit(name: &str, status: ExitStatus, out: &str, deadline: Instant) {
    assert!(
        status.code() == Some(drover_server::EXIT_ADDR_IN_USE) && Instant::now() < deadline,
        "{name} exited on its restart ({status}):\n{out}"
    );
    eprintln!("{name}: a port it recorded is still in use; starting it again");
}

/// The HTTP status of `path` on a member's HTTP port `addr`, over TLS under
/// the CA in its data dir `dir` (`ca.crt`); `None` while it does not answer.
pub async fn member_http_status(addr: &str, path: &str, dir: &Path) -> Option<u16> {
    let ca = std::fs::read_to_string(dir.join("ca.crt")).ok()?;
    crate::net::https_get(addr, path, &ca, None)
        .await
        .map(|(code, _)| code)
}

/// After a member process was started again from its data dir: waits
/// until its HTTP port `http` answers (`true`), or until it exits because
/// a port it recorded is held for a moment (`false`: start it again, see
/// [`expect_busy_port_exit`]). `exited` polls the process; `log` from byte
/// `log_from` is what this start wrote. Any other exit, or `deadline`
/// passing, fails the test.
pub async fn await_restart(
    name: &str,
    log: &Path,
    log_from: usize,
    mut exited: impl FnMut() -> Option<ExitStatus>,
    (http, dir): (&str, &Path),
    deadline: Instant,
    poll: Duration,
) -> bool {
    loop {
        if let Some(st) = exited() {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let out = text.get(log_from..).unwrap_or_default();
            expect_busy_port_exit(name, st, out, deadline);
            tokio::time::sleep(poll).await;
            return false;
        }
        if member_http_status(http, "/health", dir).await.is_some() {
            return true;
        }
        assert!(
            Instant::now() < deadline,
            "{name} restarted but its HTTP port did not answer in time"
        );
        tokio::time::sleep(poll).await;
    }
}
