//! The map's invariants (docs/architecture.md, "Invariants"), checked on
//! the source tree itself so that a change that breaks one fails the build:
//!
//! - no Rust file over [`MAX_LINES`] lines, its inline tests included.
//!
//! These read files only: no process, no network.

use std::path::{Path, PathBuf};

/// The most lines a hand-written Rust file may have.
const MAX_LINES: usize = 1000;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, skipping build output.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        if p.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&p, out);
            }
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

#[test]
fn no_rust_file_is_over_a_thousand_lines() {
    let mut files = Vec::new();
    for top in ["crates", "src", "tests"] {
        rust_files(&root().join(top), &mut files);
    }
    assert!(
        files.len() > 100,
        "found only {} Rust files: is the test run from the repository?",
        files.len()
    );
    let mut over: Vec<String> = files
        .iter()
        .filter_map(|p| {
            let n = read(p).lines().count();
            (n > MAX_LINES).then(|| format!("{} ({n} lines)", rel(p)))
        })
        .collect();
    over.sort();
    assert!(
        over.is_empty(),
        "files over {MAX_LINES} lines (split them by what they do):\n  {}",
        over.join("\n  ")
    );
}
