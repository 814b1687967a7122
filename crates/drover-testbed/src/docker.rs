//! The `docker` CLI (the engine on this machine, API 1.41 is enough), the
//! testbed's image, and cleanup by label.
//!
//! The image is made from the binary the tests already built (a debug
//! build, dynamically linked): the binary, the shared libraries `ldd`
//! names and the dynamic loader, in a root file system given to `docker
//! import` (no registry, no pull). It has no shell: containers run
//! `drover` itself as PID 1, so `docker kill` delivers SIGKILL to it.

use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The label every container and network of a run carries (value: the run id).
pub const LABEL_RUN: &str = "drover.testbed";
/// The label with the pid of the process that owns the run: leftovers of
/// a process that is gone are removed at the next start.
pub const LABEL_PID: &str = "drover.testbed.pid";

/// Runs `docker ARGS…` and returns its stdout (trimmed), or its stderr as
/// the error.
pub fn docker(args: &[&str]) -> Result<String> {
    let out = Command::new("docker")
        .args(args)
        .output()
        .map_err(|e| Error::Docker {
            args: args.join(" "),
            message: format!("cannot run docker: {e}"),
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(Error::Docker {
            args: args.join(" "),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Whether an engine answers: Ok, or why not.
pub fn engine_answers() -> std::result::Result<String, String> {
    docker(&[
        "version",
        "--format",
        "{{.Server.Version}} (API {{.Server.APIVersion}})",
    ])
    .map_err(|e| e.to_string())
}

/// Removes the containers and networks of runs whose process is gone
/// (a run killed before its guard could clean up). Runs of live
/// processes (another test, another worktree) are left alone.
pub fn remove_leftovers() {
    let alive = |pid: &str| Path::new("/proc").join(pid).exists();
    let filter = format!("label={LABEL_PID}");
    let format = format!("{{{{.ID}}}} {{{{.Label \"{LABEL_PID}\"}}}}");
    if let Ok(out) = docker(&["ps", "-a", "--filter", &filter, "--format", &format]) {
        for line in out.lines() {
            if let Some((id, pid)) = line.split_once(' ') {
                if !alive(pid) {
                    let _ = docker(&["rm", "-f", "-v", id]);
                }
            }
        }
    }
    let format = format!("{{{{.ID}}}} {{{{.Label \"{LABEL_PID}\"}}}}");
    if let Ok(out) = docker(&["network", "ls", "--filter", &filter, "--format", &format]) {
        for line in out.lines() {
            if let Some((id, pid)) = line.split_once(' ') {
                if !alive(pid) {
                    let _ = docker(&["network", "rm", id]);
                }
            }
        }
    }
}

/// Removes every container and network labelled with `run`.
pub fn remove_run(run: &str) {
    let filter = format!("label={LABEL_RUN}={run}");
    if let Ok(ids) = docker(&["ps", "-a", "-q", "--filter", &filter]) {
        let ids: Vec<&str> = ids.split_whitespace().collect();
        if !ids.is_empty() {
            let mut args = vec!["rm", "-f", "-v"];
            args.extend(ids);
            let _ = docker(&args);
        }
    }
    if let Ok(ids) = docker(&["network", "ls", "-q", "--filter", &filter]) {
        for id in ids.split_whitespace() {
            let _ = docker(&["network", "rm", id]);
        }
    }
}

/// The shared libraries `ldd` lists for `bin`, and its loader.
fn shared_libraries(bin: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd").arg(bin).output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut libs = Vec::new();
    for line in text.lines() {
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)" or
        // "/lib64/ld-linux-x86-64.so.2 (0x…)"; "linux-vdso.so.1 (0x…)" has no file.
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    Ok(libs)
}

/// Builds (once per binary: the tag is a digest of its size and mtime)
/// the image `local/drover-testbed:<digest>` and returns its name.
/// Images of earlier binaries are removed.
pub fn build_image(bin: &Path) -> Result<String> {
    let meta = std::fs::metadata(bin)
        .map_err(|e| Error::Setup(format!("the drover binary {}: {e}", bin.display())))?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    // FNV-1a over what identifies this build of the binary.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in format!("{}|{}|{}", bin.display(), meta.len(), mtime).bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    let repo = "local/drover-testbed";
    let image = format!("{repo}:{h:016x}");
    if docker(&["image", "inspect", "--format", "{{.Id}}", &image]).is_ok() {
        return Ok(image);
    }
    let work = tempfile::tempdir()?;
    let root = work.path().join("root");
    for d in ["usr/local/bin", "tmp", "data", "etc"] {
        std::fs::create_dir_all(root.join(d))?;
    }
    std::fs::copy(bin, root.join("usr/local/bin/drover"))?;
    for lib in shared_libraries(bin)? {
        let rel = lib.strip_prefix("/").unwrap_or(&lib);
        let dest = root.join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)?;
        }
        // fs::copy follows symlinks: the file itself lands under the name.
        std::fs::copy(&lib, &dest)?;
    }
    std::fs::write(
        root.join("etc/passwd"),
        "root:x:0:0:root:/data:/nonexistent\n",
    )?;
    std::fs::write(root.join("etc/group"), "root:x:0:\n")?;
    let tar = work.path().join("root.tar");
    let out = Command::new("tar")
        .arg("-C")
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .output()?;
    if !out.status.success() {
        return Err(Error::Setup(format!(
            "tar of the image's root: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let tar_s = tar.display().to_string();
    docker(&[
        "import",
        "--change",
        "ENTRYPOINT [\"/usr/local/bin/drover\"]",
        "--change",
        "ENV NO_COLOR=1",
        &tar_s,
        &image,
    ])?;
    // Older testbed images (earlier builds): remove, ignoring those in use.
    if let Ok(list) = docker(&["images", repo, "--format", "{{.Repository}}:{{.Tag}}"]) {
        for old in list.lines().filter(|l| *l != image) {
            let _ = docker(&["rmi", old]);
        }
    }
    Ok(image)
}
