//! Fixtures of the tests against the real Docker engine: the test image,
//! unique node names, a guard that removes what a node made, and the
//! agent's timings on a Docker node.

use crate::agent::quick_reconnect;
use drover_agent::docker::LABEL_NODE;
use drover_agent::Tuning;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// The test image, built by `deploy/examples/busybox-image.sh` (never pulled).
pub const IMAGE: &str = "local/busybox:1";

/// Builds [`IMAGE`] once per process with the repository's script. When no
/// engine answers the test fails, unless the run opted out of the Docker
/// tests out loud ([`skipping_docker`]: `DROVER_TEST_SKIP=docker`); then
/// `false`, with a notice. Any other failure of the script is a panic.
pub fn engine_ready() -> bool {
    static READY: OnceLock<Result<(), (bool, String)>> = OnceLock::new();
    let r = READY.get_or_init(|| {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/examples/busybox-image.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg(IMAGE)
            .output()
            .map_err(|e| (false, format!("cannot run {}: {e}", script.display())))?;
        let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
        match out.status.code() {
            Some(0) => Ok(()),
            Some(2) => Err((true, why)),
            _ => Err((false, format!("{} failed: {why}", script.display()))),
        }
    });
    match r {
        Ok(()) => true,
        Err((true, why)) if skipping_docker() => {
            eprintln!("SKIPPED (DROVER_TEST_SKIP=docker): no Docker engine here ({why})");
            false
        }
        Err((true, why)) => panic!(
            "no Docker engine answers ({why}): start one, or opt out of the Docker tests with DROVER_TEST_SKIP=docker"
        ),
        Err((false, why)) => panic!("{why}"),
    }
}

/// Whether this run opted out of the Docker tests: `DROVER_TEST_SKIP`
/// lists `docker` (comma-separated). Nothing else skips them: a test that
/// cannot reach an engine fails.
pub fn skipping_docker() -> bool {
    std::env::var("DROVER_TEST_SKIP")
        .map(|v| v.split(',').any(|w| w.trim() == "docker"))
        .unwrap_or(false)
}

/// A node name no other test (nor process) uses: `PREFIX-TEST-PID-N`.
pub fn node_name(prefix: &str, test: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}-{test}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Removes every container of a node, then the images (tags) the test
/// made, when dropped, whatever happened.
pub struct Cleanup {
    pub node: String,
    pub images: Vec<String>,
}

impl Cleanup {
    pub fn new(node: &str) -> Cleanup {
        Cleanup {
            node: node.to_string(),
            images: Vec::new(),
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let ids = docker_ps(&self.node, &[]);
        if !ids.is_empty() {
            let _ = Command::new("docker")
                .args(["rm", "-f", "-v"])
                .args(&ids)
                .output();
        }
        for image in &self.images {
            let _ = Command::new("docker").args(["rmi", image]).output();
        }
    }
}

/// The ids of the node's containers (every state), with extra filters.
pub fn docker_ps(node: &str, filters: &[&str]) -> Vec<String> {
    let mut c = Command::new("docker");
    c.args(["ps", "-a", "-q", "--no-trunc", "--filter"])
        .arg(format!("label={LABEL_NODE}={node}"));
    for f in filters {
        c.args(["--filter", f]);
    }
    c.output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The agent's timings on a Docker node: quick reconnects, restarts and
/// resyncs, with the back-off jitter seeded by `seed`.
pub fn tuning(seed: u64) -> Tuning {
    Tuning {
        connect_timeout: Duration::from_secs(2),
        leave_timeout: Duration::from_secs(3),
        restart_backoff: Duration::from_millis(200),
        restart_backoff_max: Duration::from_millis(800),
        resync: Duration::from_millis(300),
        ..quick_reconnect(seed)
    }
}
