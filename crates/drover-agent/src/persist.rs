//! The agent's own copy of its desired pods, in `--data-dir`, so that an
//! agent restarted while no server answers keeps running them (node
//! autonomy).
//!
//! One file, `DIR/pods.json`: `{"node": NAME, "pods": [Pod, …]}` with the
//! pods as the server sent them, without their status. It is written
//! atomically (a temp file, fsync, rename, fsync of the directory) whenever
//! the set of pods or one of their specs changes (status changes do not
//! rewrite it), and removed when the node leaves the cluster.

use anyhow::{Context, Result};
use drover_api::Pod;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file's name in the data dir.
pub const FILE: &str = "pods.json";

#[derive(Serialize)]
struct OnDiskRef<'a> {
    node: &'a str,
    pods: Vec<&'a Pod>,
}

#[derive(Deserialize)]
struct OnDisk {
    node: String,
    #[serde(default)]
    pods: Vec<serde_json::Value>,
}

/// The path of the file in `dir`.
pub fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// Writes the pods of `node` atomically.
pub fn save(dir: &Path, node: &str, pods: &[&Pod]) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the data dir {}", dir.display()))?;
    let body = serde_json::to_vec_pretty(&OnDiskRef {
        node,
        pods: pods.to_vec(),
    })
    .context("cannot encode the desired pods")?;
    let target = path(dir);
    let tmp = dir.join(format!("{FILE}.tmp"));
    {
        let mut f = std::fs::File::create(&tmp)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        f.write_all(&body)
            .and_then(|_| f.sync_all())
            .with_context(|| format!("cannot write {}", tmp.display()))?;
    }
    std::fs::rename(&tmp, &target)
        .with_context(|| format!("cannot replace {}", target.display()))?;
    // The rename is durable once the directory is.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Reads the pods saved for `node`. A missing file is no pods; a file of
/// another node is ignored (with a warning); pods that do not parse are
/// skipped (with a warning); a file that does not parse at all is an error.
pub fn load(dir: &Path, node: &str) -> Result<Vec<Pod>> {
    let p = path(dir);
    let bytes = match std::fs::read(&p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", p.display())),
    };
    let disk: OnDisk = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not a drover agent state file", p.display()))?;
    if disk.node != node {
        tracing::warn!(
            "{} holds the pods of node {:?}, not {node:?}: ignored",
            p.display(),
            disk.node
        );
        return Ok(Vec::new());
    }
    let mut pods = Vec::with_capacity(disk.pods.len());
    for v in disk.pods {
        match serde_json::from_value::<Pod>(v) {
            Ok(pod) => pods.push(pod),
            Err(e) => tracing::warn!("{}: a pod that does not parse: {e}", p.display()),
        }
    }
    Ok(pods)
}

/// Removes the file (the node left the cluster).
pub fn clear(dir: &Path) -> Result<()> {
    match std::fs::remove_file(path(dir)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", path(dir).display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::pod;

    #[test]
    fn pods_round_trip_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("agent");
        assert!(load(&d, "n1").unwrap().is_empty(), "no file: no pods");
        let a = pod("a", &[("c", "busybox")]);
        let mut b = pod("b", &[("x", "sim/crash"), ("y", "sim/never-ready")]);
        b.metadata.labels.insert("app".into(), "web".into());
        b.extra
            .insert("futureField".into(), serde_json::json!({"kept": true}));
        save(&d, "n1", &[&a, &b]).unwrap();
        let back = load(&d, "n1").unwrap();
        assert_eq!(back, vec![a.clone(), b]);
        assert!(!d.join("pods.json.tmp").exists());
        // Overwrite with fewer pods.
        save(&d, "n1", &[&a]).unwrap();
        assert_eq!(load(&d, "n1").unwrap(), vec![a]);
        // Another node's file is not ours.
        assert!(load(&d, "n2").unwrap().is_empty());
        clear(&d).unwrap();
        clear(&d).unwrap();
        assert!(load(&d, "n1").unwrap().is_empty());
    }

    #[test]
    fn damaged_files_are_reported_or_skipped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(path(dir.path()), b"{not json").unwrap();
        let e = load(dir.path(), "n1").unwrap_err();
        assert!(
            format!("{e:#}").contains("not a drover agent state file"),
            "{e:#}"
        );
        std::fs::write(
            path(dir.path()),
            br#"{"node":"n1","pods":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"ok","uid":"u"}},{"kind":"Nope"}]}"#,
        )
        .unwrap();
        let pods = load(dir.path(), "n1").unwrap();
        assert_eq!(pods.len(), 1);
        assert_eq!(pods[0].metadata.name, "ok");
    }
}
