//! A container's volume mounts on the node, as the kubelet prepares them:
//!
//! - `hostPath`: the path is checked (or created) as its `type` says:
//!   `DirectoryOrCreate` creates a directory (0755), `FileOrCreate` an
//!   empty file (0644); `Directory`, `File`, `Socket`, `CharDevice`,
//!   `BlockDevice` must exist and be one; no type checks nothing (a missing
//!   path becomes a directory, as Docker's binds do).
//! - `emptyDir`: a directory (0777) under the agent's data dir,
//!   `pods/<uid>/volumes/<name>`, shared by the pod's containers and removed
//!   with the pod ([`remove_pod_dir`]). `medium: Memory` and `sizeLimit`
//!   are not honoured (warned).
//! - `configMap`, `secret`, `projected`: the files the agent resolved
//!   (`StartContainer::volumes`) written under `pods/<uid>/volumes/<name>`
//!   with the kubelet's atomic layout ([`super::atomic`]; a tmpfs for
//!   Secrets), always mounted read-only; [`update`] rewrites them while
//!   the pod runs.
//! - `volumeMounts`: `readOnly`, `subPath` (created as a directory when
//!   missing), `mountPropagation` (`HostToContainer` = rslave,
//!   `Bidirectional` = rshared, privileged containers only).
//!
//! The agent checks paths in its own view of the file system, so it must
//! run on the engine's host (or see the host's paths at the same places).

use bollard::models::{Mount, MountBindOptions, MountBindOptionsPropagationEnum, MountType};
use drover_api::pod_config::VolumeFiles;
use drover_api::{Container, HostPathType, MountPropagation, Pod};
use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// A volume that cannot be mounted; the message names the pod, the
/// container, the volume and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct VolumeError(pub String);

/// The directory of a pod's emptyDirs, under `root` (the agent's
/// `<data dir>/pods`). The uid must be one path component.
pub(crate) fn pod_dir(root: &Path, uid: &str) -> Result<PathBuf, VolumeError> {
    let ok = !uid.is_empty()
        && uid
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && uid != "."
        && uid != "..";
    if !ok {
        return Err(VolumeError(format!(
            "pod uid {uid:?} cannot name a directory"
        )));
    }
    Ok(root.join(uid))
}

/// Removes a pod's emptyDirs (nothing when it has none).
pub(crate) fn remove_pod_dir(root: &Path, uid: &str) -> std::io::Result<()> {
    let Ok(dir) = pod_dir(root, uid) else {
        return Ok(());
    };
    super::atomic::unmount_volumes(&dir);
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// The mounts of container `index` of `pod`, with the paths prepared, and
/// warnings for what is not honoured. Blocking (file system calls).
pub(crate) fn prepare(
    root: &Path,
    pod: &Pod,
    spec: &Container,
    config: &BTreeMap<String, VolumeFiles>,
) -> Result<(Vec<Mount>, Vec<String>), VolumeError> {
    let mut mounts = Vec::new();
    let mut warnings = Vec::new();
    let who = |volume: &str| {
        format!(
            "container {:?} of pod {}/{}: volume {volume:?}",
            spec.name, pod.metadata.namespace, pod.metadata.name
        )
    };
    let privileged = spec
        .security_context
        .as_ref()
        .and_then(|s| s.privileged)
        .unwrap_or(false);
    for vm in &spec.volume_mounts {
        let err = |msg: String| VolumeError(format!("{}: {msg}", who(&vm.name)));
        let volume = pod
            .spec
            .volumes
            .iter()
            .find(|v| v.name == vm.name)
            .ok_or_else(|| err("no volume of that name in spec.volumes".into()))?;
        let mut read_only = vm.read_only;
        let base = if let Some(files) = config.get(&volume.name) {
            let dir = pod_dir(root, &pod.metadata.uid)?
                .join("volumes")
                .join(&volume.name);
            // Written once per start of a container; updates come through
            // [`update`]. A directory already written is rewritten: the
            // same files, or newer ones.
            let w = super::atomic::write(&dir, files)
                .map_err(|e| err(format!("cannot write the files of {}: {e}", dir.display())))?;
            warnings.extend(w);
            read_only = true;
            dir
        } else if let Some(hp) = &volume.host_path {
            host_path(Path::new(&hp.path), hp.r#type.as_ref()).map_err(err)?;
            PathBuf::from(&hp.path)
        } else if let Some(ed) = &volume.empty_dir {
            if ed.medium == "Memory" {
                warnings.push(format!(
                    "{}: emptyDir.medium Memory is not supported by the Docker runtime; a directory on disk is used",
                    who(&vm.name)
                ));
            }
            if ed.size_limit.is_some() {
                warnings.push(format!(
                    "{}: emptyDir.sizeLimit is not enforced by the Docker runtime",
                    who(&vm.name)
                ));
            }
            let dir = pod_dir(root, &pod.metadata.uid)?
                .join("volumes")
                .join(&volume.name);
            empty_dir(&dir)
                .map_err(|e| err(format!("cannot create the emptyDir {}: {e}", dir.display())))?;
            dir
        } else if volume.config_map.is_some()
            || volume.secret.is_some()
            || volume.projected.is_some()
        {
            return Err(err(
                "the agent gave no files for this ConfigMap/Secret volume".into(),
            ));
        } else {
            let kinds: Vec<&str> = volume.extra.keys().map(String::as_str).collect();
            return Err(err(format!(
                "{} volumes are not supported by drover; use hostPath, emptyDir, configMap, secret or projected",
                if kinds.is_empty() {
                    "sourceless".to_string()
                } else {
                    kinds.join(", ")
                }
            )));
        };
        let source = if vm.sub_path.is_empty() {
            base
        } else {
            let sub = Path::new(&vm.sub_path);
            if sub
                .components()
                .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
            {
                return Err(err(format!(
                    "subPath {:?} must be a relative path without '..'",
                    vm.sub_path
                )));
            }
            let path = base.join(sub);
            if std::fs::symlink_metadata(&path).is_err() {
                let mode = std::fs::metadata(&base)
                    .map(|m| m.permissions().mode() & 0o7777)
                    .unwrap_or(0o755);
                std::fs::create_dir_all(&path)
                    .and_then(|()| {
                        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                    })
                    .map_err(|e| {
                        err(format!("cannot create the subPath {}: {e}", path.display()))
                    })?;
            }
            path
        };
        let propagation = match &vm.mount_propagation {
            None | Some(MountPropagation::None) => None,
            Some(MountPropagation::HostToContainer) => {
                Some(MountBindOptionsPropagationEnum::RSLAVE)
            }
            Some(MountPropagation::Bidirectional) => {
                if !privileged {
                    return Err(err(
                        "mountPropagation Bidirectional is available only to privileged containers; set securityContext.privileged".into(),
                    ));
                }
                Some(MountBindOptionsPropagationEnum::RSHARED)
            }
            Some(other) => {
                return Err(err(format!(
                    "mountPropagation {:?} is not one of None, HostToContainer, Bidirectional",
                    other.as_str()
                )))
            }
        };
        mounts.push(Mount {
            target: Some(vm.mount_path.clone()),
            source: Some(source.to_string_lossy().into_owned()),
            typ: Some(MountType::BIND),
            read_only: Some(read_only),
            bind_options: propagation.map(|p| MountBindOptions {
                propagation: Some(p),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    Ok((mounts, warnings))
}

/// Rewrites the `configMap`, `secret` and `projected` volumes of a running
/// pod (uid `uid`) whose directory exists (a volume no container mounted
/// yet is written at its start); answers warnings. Blocking.
pub(crate) fn update(
    root: &Path,
    uid: &str,
    config: &BTreeMap<String, VolumeFiles>,
) -> Result<Vec<String>, VolumeError> {
    let mut warnings = Vec::new();
    let volumes = pod_dir(root, uid)?.join("volumes");
    for (name, files) in config {
        let dir = volumes.join(name);
        if !dir.join("..data").exists() {
            continue;
        }
        let w = super::atomic::write(&dir, files).map_err(|e| {
            VolumeError(format!(
                "pod {uid}: volume {name:?}: cannot update {}: {e}",
                dir.display()
            ))
        })?;
        warnings.extend(w);
    }
    Ok(warnings)
}

/// Creates an emptyDir: a directory anyone in the pod can write.
fn empty_dir(dir: &Path) -> std::io::Result<()> {
    if !dir.is_dir() {
        std::fs::create_dir_all(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))?;
    }
    Ok(())
}

/// Checks (or creates) a hostPath as its type says.
fn host_path(path: &Path, ty: Option<&HostPathType>) -> Result<(), String> {
    let shown = path.display();
    if !path.is_absolute() {
        return Err(format!("hostPath.path {shown:?} must be absolute"));
    }
    let meta = std::fs::metadata(path);
    let missing = |what: &str| {
        format!(
            "hostPath {shown} (type {}): {what}; create it on the node or change hostPath.type",
            ty.map_or("unset", |t| t.as_str())
        )
    };
    let expect = |ok: bool, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(missing(&format!("it is not {what}")))
        }
    };
    match ty {
        // Created 0755 whatever the agent's umask (0077: its own files are
        // private, a pod's directory is not), as Docker would create it.
        None => match meta {
            Ok(_) => Ok(()),
            Err(_) => std::fs::create_dir_all(path)
                .and_then(|()| {
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
                })
                .map_err(|e| format!("hostPath {shown}: cannot create the directory: {e}")),
        },
        Some(HostPathType::DirectoryOrCreate) => match meta {
            Ok(m) => expect(m.is_dir(), "a directory"),
            Err(_) => std::fs::create_dir_all(path)
                .and_then(|()| {
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
                })
                .map_err(|e| format!("hostPath {shown}: cannot create the directory: {e}")),
        },
        Some(HostPathType::FileOrCreate) => match meta {
            Ok(m) => expect(!m.is_dir(), "a file"),
            Err(_) => std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .and_then(|f| f.set_permissions(std::fs::Permissions::from_mode(0o644)))
                .map_err(|e| format!("hostPath {shown}: cannot create the file: {e}")),
        },
        Some(t) => {
            let m = meta.map_err(|_| missing("nothing exists there"))?;
            let ft = m.file_type();
            match t {
                HostPathType::Directory => expect(ft.is_dir(), "a directory"),
                HostPathType::File => expect(ft.is_file(), "a file"),
                HostPathType::Socket => expect(ft.is_socket(), "a UNIX socket"),
                HostPathType::CharDevice => expect(ft.is_char_device(), "a character device"),
                HostPathType::BlockDevice => expect(ft.is_block_device(), "a block device"),
                other => Err(format!(
                    "hostPath.type {:?} is not one of DirectoryOrCreate, Directory, FileOrCreate, File, Socket, CharDevice, BlockDevice",
                    other.as_str()
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(volumes: &str, mounts: &str) -> Pod {
        let yaml = format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: ns, uid: uid-1}}\nspec:\n  volumes: {volumes}\n  containers:\n  - name: c\n    image: i\n    volumeMounts: {mounts}\n"
        );
        match drover_api::parse_manifests(&yaml).unwrap().remove(0) {
            drover_api::Manifest::Pod(p) => *p,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn host_path_types_are_honoured() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::write(d.join("file"), "x").unwrap();
        let root = d.join("pods");
        let run = |ty: &str, path: &Path| {
            let p = pod(
                &format!("[{{name: v, hostPath: {{path: {:?}, type: {ty}}}}}]", path),
                "[{name: v, mountPath: /v, readOnly: true}]",
            );
            prepare(&root, &p, &p.spec.containers[0], &BTreeMap::new()).map(|(m, _)| m)
        };
        // DirectoryOrCreate creates.
        let m = run("DirectoryOrCreate", &d.join("new/dir")).unwrap();
        assert!(d.join("new/dir").is_dir());
        assert_eq!(m[0].read_only, Some(true));
        assert_eq!(m[0].target.as_deref(), Some("/v"));
        assert_eq!(m[0].typ, Some(MountType::BIND));
        // Directory must exist and be one.
        run("Directory", &d.join("new")).unwrap();
        let e = run("Directory", &d.join("absent")).unwrap_err();
        assert!(
            e.0.contains("volume \"v\"") && e.0.contains("nothing exists there"),
            "{e}"
        );
        let e = run("Directory", &d.join("file")).unwrap_err();
        assert!(e.0.contains("not a directory"), "{e}");
        run("File", &d.join("file")).unwrap();
        let e = run("Socket", &d.join("file")).unwrap_err();
        assert!(e.0.contains("UNIX socket"), "{e}");
        run("FileOrCreate", &d.join("made")).unwrap();
        assert!(d.join("made").is_file());
        let e = run("CharDevice", &d.join("file")).unwrap_err();
        assert!(e.0.contains("character device"), "{e}");
        run("CharDevice", Path::new("/dev/null")).unwrap();
    }

    #[test]
    fn empty_dirs_live_under_the_pod_and_go_with_it() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("pods");
        let p = pod(
            "[{name: scratch, emptyDir: {}}]",
            "[{name: scratch, mountPath: /a}, {name: scratch, mountPath: /b, subPath: sub/dir}]",
        );
        let (m, w) = prepare(&root, &p, &p.spec.containers[0], &BTreeMap::new()).unwrap();
        assert!(w.is_empty());
        let dir = root.join("uid-1/volumes/scratch");
        assert_eq!(m[0].source.as_deref(), Some(dir.to_str().unwrap()));
        assert_eq!(
            m[1].source.as_deref(),
            Some(dir.join("sub/dir").to_str().unwrap())
        );
        assert!(dir.join("sub/dir").is_dir());
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o777);
        remove_pod_dir(&root, "uid-1").unwrap();
        assert!(!root.join("uid-1").exists());
        remove_pod_dir(&root, "uid-1").unwrap();
        assert!(pod_dir(&root, "../x").is_err());
    }

    #[test]
    fn unsupported_sources_and_propagation_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let p = pod(
            "[{name: share, nfs: {server: x, path: /}}]",
            "[{name: share, mountPath: /share}]",
        );
        let e = prepare(tmp.path(), &p, &p.spec.containers[0], &BTreeMap::new()).unwrap_err();
        assert!(e.0.contains("nfs") && e.0.contains("\"share\""), "{e}");
        // A ConfigMap volume: the files the agent resolved, read-only.
        let p = pod(
            "[{name: cfg, configMap: {name: x}}]",
            "[{name: cfg, mountPath: /cfg}]",
        );
        let files = drover_api::pod_config::VolumeFiles {
            files: [(
                "k".to_string(),
                drover_api::pod_config::VolumeFile {
                    data: b"v".to_vec(),
                    mode: 0o644,
                },
            )]
            .into(),
            secret: false,
        };
        let config = BTreeMap::from([("cfg".to_string(), files)]);
        let (m, _) = prepare(tmp.path(), &p, &p.spec.containers[0], &config).unwrap();
        assert_eq!(m[0].read_only, Some(true));
        let source = m[0].source.clone().unwrap();
        assert_eq!(
            std::fs::read_to_string(Path::new(&source).join("k")).unwrap(),
            "v"
        );
        let e = prepare(tmp.path(), &p, &p.spec.containers[0], &BTreeMap::new()).unwrap_err();
        assert!(e.0.contains("no files"), "{e}");
        let p = pod(
            "[{name: v, emptyDir: {}}]",
            "[{name: v, mountPath: /v, mountPropagation: Bidirectional}]",
        );
        let e = prepare(tmp.path(), &p, &p.spec.containers[0], &BTreeMap::new()).unwrap_err();
        assert!(e.0.contains("privileged"), "{e}");
        let p = pod(
            "[{name: v, emptyDir: {medium: Memory}}]",
            "[{name: v, mountPath: /v, mountPropagation: HostToContainer}]",
        );
        let (m, w) = prepare(tmp.path(), &p, &p.spec.containers[0], &BTreeMap::new()).unwrap();
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(
            m[0].bind_options.as_ref().unwrap().propagation,
            Some(MountBindOptionsPropagationEnum::RSLAVE)
        );
    }
}
