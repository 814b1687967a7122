//! Child processes of the process-level tests: the real `drover` binary,
//! its output in a log file, killed and reaped whatever happens.

use std::path::Path;
use std::process::{Child, Command, Stdio};

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
