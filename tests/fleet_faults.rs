//! The multi-host fault testbed (issue 11; `crates/drover-testbed`):
//! drover's servers and agents in their own containers on a private
//! Docker network, a seeded schedule of faults (SIGKILL and restart,
//! pause, partitions of the leader, of a follower, of agent groups, a
//! member replaced) while a workload writes keys and changes DaemonSets,
//! then the checks: no acknowledged write lost, every key's history
//! linearizable, never two pods of one DaemonSet on a node, convergence
//! within a bound after every heal, no node NotReady because its server
//! was killed.
//!
//! - `short_run`: part of the test suite (≥ 20 faults, a few minutes).
//!   Without a Docker engine it fails, unless `DROVER_TEST_SKIP=docker`.
//! - `long_run` (ignored): ≥ 200 faults, the figures of docs/reliability.md:
//!   `cargo nextest run -p drover --test fleet_faults --run-ignored only --no-capture long_run`
//!
//! Every run draws a new seed and prints it first (`testbed seed: N, replay
//! with DROVER_TESTBED_SEED=N`); `DROVER_TESTBED_SEED=N` replays a schedule;
//! `DROVER_TESTBED_FAULTS=N` changes how many faults;
//! `DROVER_TESTBED_KINDS=cut-agents,kill-agent` draws only those kinds;
//! `DROVER_TESTBED_HOLD_SCALE=1.0` scales the hold times.

use drover_testbed::run::{run, Config, Report};
use std::path::PathBuf;

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
    )
}

/// Whether a Docker engine answers; without one the test fails unless the
/// run opted out out loud.
fn engine() -> bool {
    match drover_testbed::docker::engine_answers() {
        // The Docker node's pods run local/busybox:1 (built here, never
        // pulled).
        Ok(v) => {
            println!("docker engine {v}");
            drover_testkit::docker::engine_ready()
        }
        Err(why) if drover_testkit::skipping_docker() => {
            eprintln!("SKIPPED (DROVER_TEST_SKIP=docker): no Docker engine here ({why})");
            false
        }
        Err(why) => panic!(
            "no Docker engine answers ({why}): start one, or opt out of the Docker tests with DROVER_TEST_SKIP=docker"
        ),
    }
}

fn check(report: &Report) {
    println!("\n{}", report.figures());
    println!(
        "NotReady nodes by fault kind: {}",
        report.not_ready_by_kind()
    );
    if !report.violations.is_empty() {
        println!("{}", report.logs);
        panic!(
            "seed {} (replay with DROVER_TESTBED_SEED={}): {} violation(s):\n{}",
            report.seed,
            report.seed,
            report.violations.len(),
            report.violations.join("\n")
        );
    }
}

/// A seed no earlier run used: std's per-process random hash keys, with the
/// clock and the process id.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    h.write_u128(now);
    h.write_u32(std::process::id());
    // Kept short enough to type.
    h.finish() % 1_000_000_000
}

fn config(default_faults: u64) -> Config {
    let seed = env_u64("DROVER_TESTBED_SEED").unwrap_or_else(random_seed);
    println!("testbed seed: {seed}, replay with DROVER_TESTBED_SEED={seed}");
    let mut cfg = Config::short(seed, PathBuf::from(env!("CARGO_BIN_EXE_drover")));
    cfg.faults = env_u64("DROVER_TESTBED_FAULTS").unwrap_or(default_faults) as usize;
    if let Ok(kinds) = std::env::var("DROVER_TESTBED_KINDS") {
        cfg.kinds = kinds
            .split(',')
            .map(|k| {
                drover_testbed::schedule::Kind::parse(k.trim()).unwrap_or_else(|| {
                    panic!(
                        "DROVER_TESTBED_KINDS: no fault kind {k:?} (kinds: {})",
                        drover_testbed::schedule::Kind::ALL
                            .map(|k| k.name())
                            .join(", ")
                    )
                })
            })
            .collect();
    }
    if let Ok(v) = std::env::var("DROVER_TESTBED_HOLD_SCALE") {
        cfg.hold_scale = v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("DROVER_TESTBED_HOLD_SCALE={v:?} is not a number"));
    }
    cfg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_run() {
    if !engine() {
        return;
    }
    let report = run(config(20)).await.expect("the testbed runs");
    check(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the long run (≥ 200 faults, ~30 min): see docs/reliability.md"]
async fn long_run() {
    if !engine() {
        return;
    }
    let mut cfg = config(200);
    cfg.hold_scale = 1.0;
    let report = run(cfg).await.expect("the testbed runs");
    check(&report);
}
