//! The map's invariants (docs/architecture.md, "Invariants"), checked on
//! the source tree itself so that a change that breaks one fails the build:
//!
//! - no Rust file over [`MAX_LINES`] lines, its inline tests included;
//! - no circle of files importing each other inside a crate (a file uses
//!   another when it names `crate::module…` or `super::…` resolving to the
//!   other's module; the crate root is left out).
//!
//! These read files only: no process, no network.

use std::collections::{BTreeMap, BTreeSet};
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

/// A crate's files by module path (`["loops", "controller"]`).
fn modules(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut mods = BTreeMap::new();
    for p in files {
        let Ok(r) = p.strip_prefix(src) else { continue };
        let mut path: Vec<String> = r
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if path == ["lib"] || path == ["main"] {
            continue;
        }
        if path.last().map(String::as_str) == Some("mod") {
            path.pop();
        }
        mods.insert(path, p);
    }
    mods
}

/// The code of a file before its inline tests, without line comments.
fn code(text: &str) -> String {
    let before_tests = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    before_tests
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_module_segment(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_lowercase() || f == '_')
        && c.all(|x| x.is_ascii_lowercase() || x.is_ascii_digit() || x == '_')
}

/// The paths a text names after `prefix` (`crate::` or `super::`), each as
/// its module segments; a `{a, b::c}` group gives one path per member.
fn named_paths(text: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(i) = text[from..].find(prefix) {
        let start = from + i;
        from = start + prefix.len();
        // Not the tail of another identifier (`my_crate::`).
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            continue;
        }
        let rest = &text[from..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let head: Vec<String> = rest[..end]
            .split("::")
            .filter(|s| is_module_segment(s))
            .map(String::from)
            .collect();
        if rest[end..].starts_with('{') {
            let open = end;
            let close = rest[open..]
                .find('}')
                .map(|c| open + c)
                .unwrap_or(rest.len());
            for part in rest[open + 1..close].split(',') {
                let mut p = head.clone();
                p.extend(
                    part.trim()
                        .split("::")
                        .filter(|s| is_module_segment(s))
                        .map(String::from),
                );
                out.push(p);
            }
        } else {
            out.push(head);
        }
    }
    out
}

/// The longest module prefix of `path` that is a file of the crate.
fn resolve(mods: &BTreeMap<Vec<String>, PathBuf>, path: &[String]) -> Option<Vec<String>> {
    (1..=path.len())
        .rev()
        .map(|i| path[..i].to_vec())
        .find(|p| mods.contains_key(p))
}

/// Strongly connected sets of more than one file (Tarjan).
fn circles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    struct T<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on: BTreeSet<&'a Vec<String>>,
        out: Vec<Vec<Vec<String>>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a Vec<String>) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in &t.edges[v] {
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// Which files of the crate at `src` use which others.
fn imports(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mods = modules(src);
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> =
        mods.keys().map(|m| (m.clone(), BTreeSet::new())).collect();
    for (m, p) in &mods {
        let text = code(&read(p));
        // `super` of `a/b.rs` (module a::b) and of `a/b/mod.rs` is `a`.
        let parent: Vec<String> = m[..m.len().saturating_sub(1)].to_vec();
        let mut targets = Vec::new();
        for path in named_paths(&text, "crate::") {
            targets.extend(resolve(&mods, &path));
        }
        for path in named_paths(&text, "super::") {
            let mut full = parent.clone();
            full.extend(path);
            match resolve(&mods, &full) {
                Some(t) => targets.push(t),
                None if mods.contains_key(&parent) => targets.push(parent.clone()),
                None => {}
            }
        }
        let own = edges.get_mut(m).expect("every module has an entry");
        own.extend(targets.into_iter().filter(|t| t != m));
    }
    edges
}

#[test]
fn no_crate_has_files_that_import_each_other_in_a_circle() {
    let mut srcs = vec![root().join("src")];
    let crates = std::fs::read_dir(root().join("crates")).expect("crates/");
    for c in crates.flatten() {
        let src = c.path().join("src");
        if src.is_dir() {
            srcs.push(src);
        }
    }
    assert!(srcs.len() > 5, "found only {} crates", srcs.len());
    let mut found = Vec::new();
    for src in &srcs {
        let mods = modules(src);
        for comp in circles(&imports(src)) {
            let files: Vec<String> = comp.iter().map(|m| rel(&mods[m])).collect();
            found.push(files.join(" <-> "));
        }
    }
    assert!(
        found.is_empty(),
        "files that import each other (move what both need into a third, or merge them):\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn the_circle_finder_finds_a_circle_and_its_absence() {
    let dir = std::env::temp_dir().join(format!("drover-invariants-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).expect("temp dir");
    std::fs::write(src.join("lib.rs"), "mod a; mod b; mod c;").expect("write");
    std::fs::write(src.join("a/mod.rs"), "use crate::b::X; mod inner;").expect("write");
    std::fs::write(src.join("a/inner.rs"), "use super::Y;").expect("write");
    std::fs::write(
        src.join("b.rs"),
        "use crate::{c::Z, x};\n// use crate::a::Q;\n",
    )
    .expect("write");
    std::fs::write(src.join("c.rs"), "fn f() { crate::a::inner::g() }").expect("write");
    let found = circles(&imports(&src));
    // a -> b -> c -> a::inner -> a: one circle of four files.
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].len(), 4, "{found:?}");
    // Without c's use of a::inner there is none (b's use of a is a comment).
    std::fs::write(
        src.join("c.rs"),
        "fn f() {}\n#[cfg(test)]\nuse crate::a::X;",
    )
    .expect("write");
    assert!(circles(&imports(&src)).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
