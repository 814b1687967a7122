//! Static pods: the Pod manifests in `drover agent --manifest-dir DIR`,
//! run on this node whether or not a server answers, as the kubelet runs
//! `/etc/kubernetes/manifests`.
//!
//! - **Files.** Every file of DIR whose name ends in `.yaml`, `.yml` or
//!   `.json` and does not start with a dot (editors' swap and backup files
//!   are left alone), read with drover-api's manifest parser: YAML streams
//!   and JSON alike, several pods per file allowed. Anything that is not a
//!   valid Pod is reported (logged, with the file and the field) and
//!   skipped; the other pods run.
//! - **Identity, as the kubelet's.** A static pod is named
//!   `<name>-<nodeName>`, bound to this node, and its uid is a hash of its
//!   manifest's content (the parsed pod and the node's name: reformatting
//!   or a comment does not restart it, any change of the pod does). It
//!   carries the annotations `kubernetes.io/config.hash` (the uid) and
//!   `kubernetes.io/config.source: file`.
//! - **Following changes.** The directory is read again every
//!   [`crate::Tuning::static_poll`] (2 s): a changed pod has a new uid, so
//!   the agent stops the old pod and starts the new one; a removed file
//!   stops its pods. Polling rather than inotify (the `notify` crate):
//!   no new dependency, nothing platform-specific, and it sees every way
//!   an editor or a config tool replaces a file (rename over, truncate and
//!   write, symlink swaps); reading a few small files every 2 s costs
//!   nothing.
//! - **Mirror pods.** The agent reports its static pods to the server
//!   (`StaticPods`), which keeps a read-only mirror pod for each (see
//!   `drover-server`'s `mirror` module).

use crate::runtime::fnv1a;
use drover_api::{defaults, parse_manifests, pod_annotation, Manifest, Pod, PodStatus};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc;

/// Files larger than this are refused (a manifest is a few KiB).
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// What one reading of the manifest dir gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scan {
    /// The static pods, in file order.
    pub pods: Vec<Pod>,
    /// What could not be used, one line each, naming the file (and the
    /// field): logged as warnings.
    pub problems: Vec<String>,
}

/// The uid of a static pod: 32 hex digits hashed from the manifest's
/// content and the node's name.
pub fn static_uid(manifest: &Pod, node: &str) -> String {
    let mut bytes = serde_json::to_vec(manifest).unwrap_or_default();
    bytes.push(0);
    bytes.extend_from_slice(node.as_bytes());
    let a = fnv1a(&bytes);
    bytes.insert(0, 0x5a);
    let b = fnv1a(&bytes);
    format!("{a:016x}{b:016x}")
}

/// Turns a Pod manifest read from `file` into the static pod this node
/// runs; an invalid pod is refused with the API server's wording.
pub fn static_pod(manifest: Pod, node: &str, file: &str) -> Result<Pod, String> {
    let uid = static_uid(&manifest, node);
    let mut pod = manifest;
    if pod.metadata.name.is_empty() {
        return Err(format!(
            "{file}: metadata.name: Required value: name the pod"
        ));
    }
    pod.metadata.name = format!("{}-{}", pod.metadata.name, node.to_lowercase());
    if pod.metadata.namespace.is_empty() {
        pod.metadata.namespace = drover_api::DEFAULT_NAMESPACE.into();
    }
    pod.metadata.uid = uid.clone();
    pod.metadata.resource_version.clear();
    pod.metadata.generation = None;
    pod.metadata.creation_timestamp = None;
    pod.metadata.deletion_timestamp = None;
    pod.metadata
        .annotations
        .insert(pod_annotation::CONFIG_HASH.into(), uid);
    pod.metadata
        .annotations
        .insert(pod_annotation::CONFIG_SOURCE.into(), "file".into());
    pod.metadata
        .annotations
        .remove(pod_annotation::CONFIG_MIRROR);
    pod.spec.node_name = node.to_string();
    pod.status = PodStatus::default();
    defaults::default_pod(&mut pod);
    let m = Manifest::Pod(Box::new(pod));
    m.validate()
        .map_err(|e| format!("{file}: {e} (edit the file to fix it)"))?;
    match m {
        Manifest::Pod(p) => Ok(*p),
        _ => Err(format!("{file}: not a Pod")),
    }
}

fn wanted(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    !name.starts_with('.')
        && [".yaml", ".yml", ".json"]
            .iter()
            .any(|ext| name.ends_with(ext))
}

/// Reads the manifest dir: the static pods of `node`, and what could not
/// be used. A dir that does not exist (yet) has no pods.
pub fn scan(dir: &Path, node: &str) -> Scan {
    let mut out = Scan::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            out.problems.push(format!(
                "--manifest-dir {}: cannot read it: {e}",
                dir.display()
            ));
            return out;
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| wanted(p) && p.is_file())
        .collect();
    files.sort();
    let mut seen: Vec<(String, String, String)> = Vec::new();
    for path in files {
        let file = path.display().to_string();
        match std::fs::metadata(&path) {
            Ok(m) if m.len() > MAX_FILE_BYTES => {
                out.problems.push(format!(
                    "{file}: {} bytes is too large for a pod manifest (at most {MAX_FILE_BYTES})",
                    m.len()
                ));
                continue;
            }
            Ok(_) => {}
            Err(e) => {
                out.problems.push(format!("{file}: {e}"));
                continue;
            }
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                out.problems.push(format!("{file}: cannot read it: {e}"));
                continue;
            }
        };
        let manifests = match parse_manifests(&text) {
            Ok(m) => m,
            Err(e) => {
                out.problems.push(format!("{file}: {e}"));
                continue;
            }
        };
        for m in manifests {
            for u in m.unknown_fields() {
                out.problems.push(format!("{file}: {u}"));
            }
            let pod = match m {
                Manifest::Pod(p) => *p,
                other => {
                    out.problems.push(format!(
                        "{file}: {} is a {}: only Pods run as static pods",
                        other.reference(),
                        other.kind()
                    ));
                    continue;
                }
            };
            match static_pod(pod, node, &file) {
                Ok(p) => {
                    let key = (p.metadata.namespace.clone(), p.metadata.name.clone());
                    if let Some((_, _, first)) =
                        seen.iter().find(|(ns, n, _)| (ns, n) == (&key.0, &key.1))
                    {
                        out.problems.push(format!(
                            "{file}: static pod {}/{} is already defined in {first}: ignored (rename one of them)",
                            key.0, key.1
                        ));
                        continue;
                    }
                    seen.push((key.0, key.1, file.clone()));
                    out.pods.push(p);
                }
                Err(e) => out.problems.push(e),
            }
        }
    }
    out
}

/// Logs what a scan could not use.
pub fn log_problems(node: &str, scan: &Scan) {
    for p in &scan.problems {
        tracing::warn!(node = %node, "static pods: {p}");
    }
}

/// Reads `dir` every `every` and sends the static pods whenever they
/// change (`last` is what the agent runs already); problems are logged
/// when they change. Ends when the receiver goes.
pub(crate) async fn watch(
    dir: PathBuf,
    node: String,
    every: Duration,
    mut last: Scan,
    tx: mpsc::Sender<Vec<Pod>>,
) {
    loop {
        tokio::time::sleep(every).await;
        let (d, n) = (dir.clone(), node.clone());
        let Ok(now) = tokio::task::spawn_blocking(move || scan(&d, &n)).await else {
            continue;
        };
        if now.problems != last.problems {
            log_problems(&node, &now);
        }
        if now.pods != last.pods && tx.send(now.pods.clone()).await.is_err() {
            return;
        }
        last = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `../shared/manifests/08-static-pod.yaml`, as copied into the repository.
    const STATIC: &str = include_str!("../../drover-api/tests/data/08-static-pod.yaml");

    #[test]
    fn the_shared_static_pod_runs_as_name_node() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("08-static-pod.yaml"), STATIC).unwrap();
        let s = scan(dir.path(), "edge-1");
        assert!(s.problems.is_empty(), "{:?}", s.problems);
        assert_eq!(s.pods.len(), 1);
        let p = &s.pods[0];
        assert_eq!(p.metadata.name, "static-example-edge-1");
        assert_eq!(p.metadata.namespace, "default");
        assert_eq!(p.spec.node_name, "edge-1");
        assert_eq!(p.metadata.uid.len(), 32);
        assert_eq!(
            p.metadata.annotations[pod_annotation::CONFIG_HASH],
            p.metadata.uid
        );
        assert_eq!(
            p.metadata.annotations[pod_annotation::CONFIG_SOURCE],
            "file"
        );
        assert_eq!(p.spec.containers[0].image, "nginx");
        assert!(p.spec.restart_policy.is_some(), "defaulted");

        // The uid follows the content, not its formatting; and the node.
        let again = scan(dir.path(), "edge-1");
        assert_eq!(again.pods[0].metadata.uid, p.metadata.uid);
        let json = serde_json::to_string(&serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "static-example"},
            "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}
        }))
        .unwrap();
        std::fs::remove_file(dir.path().join("08-static-pod.yaml")).unwrap();
        std::fs::write(dir.path().join("same.json"), json).unwrap();
        assert_eq!(
            scan(dir.path(), "edge-1").pods[0].metadata.uid,
            p.metadata.uid
        );
        assert_ne!(
            scan(dir.path(), "edge-2").pods[0].metadata.uid,
            p.metadata.uid
        );
        std::fs::write(
            dir.path().join("same.json"),
            STATIC.replace("image: nginx", "image: nginx:1.27"),
        )
        .unwrap();
        assert_ne!(
            scan(dir.path(), "edge-1").pods[0].metadata.uid,
            p.metadata.uid
        );
    }

    #[test]
    fn bad_files_are_reported_and_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("a.yaml"), STATIC).unwrap();
        std::fs::write(d.join("b.yaml"), "kind: [nonsense").unwrap();
        std::fs::write(
            d.join("c.yaml"),
            "apiVersion: v1\nkind: Pod\nmetadata: {name: Bad_Name}\nspec:\n  containers: [{name: c, image: x}]\n",
        )
        .unwrap();
        std::fs::write(d.join("d.yml"), STATIC).unwrap();
        std::fs::write(
            d.join("e.json"),
            r#"{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"x"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}"#,
        )
        .unwrap();
        std::fs::write(d.join(".hidden.yaml"), "garbage: [").unwrap();
        std::fs::write(d.join("notes.txt"), "garbage: [").unwrap();
        std::fs::create_dir(d.join("sub.yaml")).unwrap();
        let s = scan(d, "n1");
        assert_eq!(s.pods.len(), 1, "{:?}", s.problems);
        let all = s.problems.join("\n");
        assert_eq!(s.problems.len(), 4, "{all}");
        assert!(all.contains("b.yaml"), "{all}");
        assert!(
            all.contains("c.yaml") && all.contains("metadata.name"),
            "{all}"
        );
        assert!(
            all.contains("d.yml") && all.contains("already defined"),
            "{all}"
        );
        assert!(all.contains("e.json") && all.contains("only Pods"), "{all}");
        // No dir: no pods, one problem.
        let s = scan(&d.join("missing"), "n1");
        assert!(s.pods.is_empty());
        assert_eq!(s.problems.len(), 1);
    }

    #[tokio::test]
    async fn the_watcher_sends_changes_only() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = mpsc::channel(4);
        let first = scan(dir.path(), "n1");
        let task = tokio::spawn(watch(
            dir.path().to_path_buf(),
            "n1".into(),
            Duration::from_millis(20),
            first,
            tx,
        ));
        std::fs::write(dir.path().join("p.yaml"), STATIC).unwrap();
        let pods = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(pods.len(), 1);
        std::fs::remove_file(dir.path().join("p.yaml")).unwrap();
        let pods = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert!(pods.is_empty());
        task.abort();
    }
}
