//! Where manifests come from: `-f FILE|DIR|-` read like kubectl's, then
//! parsed, all of them or none (a file that cannot be read or parsed is
//! named in the error).

use anyhow::{anyhow, bail, Context, Result};
use drover_api::{parse_manifests, parse_manifests_in, Manifest};
use std::io::Read;
use std::path::Path;

/// A source of manifests: its name for messages, and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub name: String,
    pub text: String,
}

/// Reads `-f` arguments like kubectl: a file, `-` (stdin), or a directory
/// (its `*.yaml`, `*.yml` and `*.json` files, by name; not recursive).
pub fn read_sources(paths: &[String], stdin: &mut dyn Read) -> Result<Vec<Source>> {
    if paths.is_empty() {
        bail!("must specify one of -f (a file, a directory or - for stdin)");
    }
    let mut out = Vec::new();
    for p in paths {
        if p == "-" {
            let mut text = String::new();
            stdin
                .read_to_string(&mut text)
                .context("reading manifests from stdin")?;
            out.push(Source {
                name: "STDIN".into(),
                text,
            });
            continue;
        }
        let path = Path::new(p);
        if !path.exists() {
            bail!("the path {p:?} does not exist");
        }
        if path.is_dir() {
            let mut files: Vec<_> = std::fs::read_dir(path)
                .with_context(|| format!("reading the directory {p}"))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| {
                    f.is_file()
                        && f.extension()
                            .and_then(|x| x.to_str())
                            .is_some_and(|x| matches!(x, "yaml" | "yml" | "json"))
                })
                .collect();
            files.sort();
            for f in files {
                let text = std::fs::read_to_string(&f)
                    .with_context(|| format!("reading {}", f.display()))?;
                out.push(Source {
                    name: f.display().to_string(),
                    text,
                });
            }
        } else {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {p}"))?;
            out.push(Source {
                name: p.clone(),
                text,
            });
        }
    }
    Ok(out)
}

/// Parses every source; refuses all of them if one can't be read, naming
/// the file.
pub fn parse_sources(sources: &[Source]) -> Result<Vec<Manifest>> {
    parse_sources_in(sources, None)
}

/// [`parse_sources`] with `-n NAMESPACE`: objects that name none go there,
/// one that names another is refused.
pub fn parse_sources_in(sources: &[Source], namespace: Option<&str>) -> Result<Vec<Manifest>> {
    let mut all = Vec::new();
    for s in sources {
        let ms = match namespace {
            Some(ns) => parse_manifests_in(&s.text, ns),
            None => parse_manifests(&s.text),
        }
        .map_err(|e| anyhow!("error parsing {}: {e}", s.name))?;
        all.extend(ms);
    }
    if all.is_empty() {
        bail!("no objects passed to apply");
    }
    Ok(all)
}
