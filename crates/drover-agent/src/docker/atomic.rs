//! The files of `configMap`, `secret` and `projected` volumes, laid out as
//! the kubelet's `AtomicWriter` does, so that a running container sees a
//! change all at once:
//!
//! ```text
//! <volume dir>/..1764628800.123456789_1/   the files (one version)
//! <volume dir>/..data -> ..1764628800.123456789_1
//! <volume dir>/<key> -> ..data/<key>                 one per top-level entry
//! ```
//!
//! An update writes a new timestamped directory, points a temporary
//! symlink at it and renames it over `..data` (atomic), adds or removes the
//! top-level symlinks, then removes the old directory. Volumes that hold
//! Secret data get a tmpfs mounted on their directory first (when the
//! agent may mount: it runs as root), so that Secrets never reach the
//! node's disk; otherwise they stay in a 0700 directory on disk, with a
//! warning. A `subPath` mount of such a volume binds the file the symlink
//! named when the container started: it does not change (as in
//! Kubernetes).

use drover_api::pod_config::VolumeFiles;
use std::collections::BTreeSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

const DATA: &str = "..data";
const DATA_TMP: &str = "..data_tmp";

/// The size of a Secret volume's tmpfs (a Secret holds at most 1 MiB; a
/// projected volume may hold several).
const TMPFS_SIZE: &str = "size=16m";

/// Whether `dir` is a mount point (its device differs from its parent's).
pub(crate) fn is_mount_point(dir: &Path) -> bool {
    let (Ok(m), Some(parent)) = (std::fs::metadata(dir), dir.parent()) else {
        return false;
    };
    std::fs::metadata(parent).is_ok_and(|p| p.dev() != m.dev())
}

/// Mounts a tmpfs on `dir` unless one is there; answers a warning when it
/// cannot (the files then stay on disk, in a 0700 directory).
fn ensure_tmpfs(dir: &Path) -> Option<String> {
    if is_mount_point(dir) {
        return None;
    }
    let out = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("{TMPFS_SIZE},mode=0755")])
        .arg("tmpfs")
        .arg(dir)
        .output();
    match out {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "cannot mount a tmpfs on {} ({}); the secret's files are kept on disk in a 0700 directory",
            dir.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!(
            "cannot run mount for a tmpfs on {} ({e}); the secret's files are kept on disk in a 0700 directory",
            dir.display()
        )),
    }
}

/// Unmounts the tmpfs of every volume of a pod (before its directory is
/// removed); errors are ignored (the removal reports what is left).
pub(crate) fn unmount_volumes(pod_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(pod_dir.join("volumes")) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if is_mount_point(&path) {
            let _ = std::process::Command::new("umount").arg(&path).output();
        }
    }
}

static SEQ: AtomicU64 = AtomicU64::new(0);

fn version_name() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "..{}.{:09}_{}",
        now.as_secs(),
        now.subsec_nanos(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// Writes `files` into the volume directory `dir` (created if missing) with
/// the atomic layout; answers warnings (a tmpfs that could not be mounted).
/// Blocking.
pub(crate) fn write(dir: &Path, files: &VolumeFiles) -> std::io::Result<Vec<String>> {
    let mut warnings = Vec::new();
    if !dir.is_dir() {
        std::fs::create_dir_all(dir)?;
    }
    if files.secret {
        if let Some(w) = ensure_tmpfs(dir) {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
            warnings.push(w);
        }
    } else {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    }
    let version = version_name();
    let new = dir.join(&version);
    std::fs::create_dir(&new)?;
    std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o755))?;
    let mut top = BTreeSet::new();
    for (rel, file) in &files.files {
        let path = new.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, &file.data)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(file.mode))?;
        if let Some(first) = Path::new(rel).components().next() {
            top.insert(first.as_os_str().to_string_lossy().into_owned());
        }
    }
    let old = std::fs::read_link(dir.join(DATA)).ok();
    let tmp = dir.join(DATA_TMP);
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&version, &tmp)?;
    std::fs::rename(&tmp, dir.join(DATA))?;
    // The top-level entries: a symlink through ..data for each; the ones
    // no longer there go.
    for name in &top {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new(DATA).join(name), &link)?;
        }
    }
    for e in std::fs::read_dir(dir)?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("..") {
            continue;
        }
        if !top.contains(&name) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    if let Some(old) = old {
        if old.as_os_str() != version.as_str() {
            let _ = std::fs::remove_dir_all(dir.join(old));
        }
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::pod_config::VolumeFile;

    fn files(pairs: &[(&str, &str)]) -> VolumeFiles {
        VolumeFiles {
            files: pairs
                .iter()
                .map(|(k, v)| {
                    (
                        k.to_string(),
                        VolumeFile {
                            data: v.as_bytes().to_vec(),
                            mode: 0o640,
                        },
                    )
                })
                .collect(),
            secret: false,
        }
    }

    #[test]
    fn updates_swap_the_data_link_and_keep_the_layout() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("v");
        write(&dir, &files(&[("a", "1"), ("sub/b", "2")])).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "1");
        assert_eq!(std::fs::read_to_string(dir.join("sub/b")).unwrap(), "2");
        assert_eq!(
            std::fs::read_link(dir.join("a")).unwrap(),
            Path::new("..data/a")
        );
        let first = std::fs::read_link(dir.join(DATA)).unwrap();
        assert!(first.to_string_lossy().starts_with(".."));
        let mode = std::fs::metadata(dir.join("a"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640);

        write(&dir, &files(&[("a", "changed")])).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "changed");
        assert!(std::fs::symlink_metadata(dir.join("sub")).is_err(), "gone");
        let second = std::fs::read_link(dir.join(DATA)).unwrap();
        assert_ne!(first, second);
        assert!(!dir.join(&first).exists(), "the old version is removed");
        let entries: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(entries.len(), 3, "{entries:?}");
    }
}
