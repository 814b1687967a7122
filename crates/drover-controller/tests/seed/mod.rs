//! The property tests' configuration: a new seed every run, printed first
//! (nextest shows it with a failure's output), so that a failure found once
//! replays exactly: `PROPTEST_RNG_SEED=N cargo nextest run …`. A failure's
//! shrunk case is also kept in `tests/proptest-regressions/` (proptest
//! prints its `cc …` line, to add to the file when the run was on CI).

use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};
use std::hash::{BuildHasher, Hasher};

/// `PROPTEST_RNG_SEED` when set, else a random one (std's per-process
/// random hash keys and the clock).
fn draw() -> u64 {
    if let Ok(v) = std::env::var("PROPTEST_RNG_SEED") {
        return v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("PROPTEST_RNG_SEED={v:?} is not a number"));
    }
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    h.write_u128(now);
    h.finish() % 1_000_000_000
}

/// A proptest configuration of `cases` cases with a printed seed.
pub fn config(cases: u32) -> Config {
    let seed = draw();
    eprintln!("proptest seed: {seed}, replay with PROPTEST_RNG_SEED={seed}");
    Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..Config::default()
    }
}
