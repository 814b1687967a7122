//! The server's desired pods: a `DesiredPods` list merged into the node's
//! pods, and the list kept in the data dir ([`crate::persist`]).

use crate::persist;
use crate::plan::PodBook;
use drover_api::{pod_annotation, Pod, PodStatus};
use drover_proto::v1 as pb;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

/// What merging a desired list did.
pub(super) struct Merged {
    /// A pod was added, changed or removed: the pods must be synced and
    /// saved.
    pub(super) changed: bool,
    /// The pods it no longer holds, by uid: they are to be stopped.
    pub(super) gone: Vec<(String, Arc<Pod>)>,
    /// The static pod uids it has mirrors for.
    pub(super) mirrors: HashSet<String>,
    /// Statuses the server holds differently (marked not ready while the
    /// node was away) became pending again.
    pub(super) resend: bool,
}

/// Merges the server's complete list of the node's pods into `books`
/// (`wall` is now, RFC 3339); `None` for a list of a server whose pod index
/// has not loaded (resourceVersion "0"), which means nothing.
pub(super) fn merge(
    books: &mut HashMap<String, PodBook>,
    list: &pb::DesiredPods,
    name: &str,
    loud: bool,
    wall: &str,
) -> Option<Merged> {
    if list.resource_version == "0" {
        return None;
    }
    let mut seen = HashSet::with_capacity(list.pods.len());
    let mut mirrors = HashSet::new();
    let mut changed = false;
    let mut resend = false;
    for bytes in &list.pods {
        let mut pod: Pod = match serde_json::from_slice(bytes) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(node = %name, "the server sent a pod that does not parse: {e}");
                continue;
            }
        };
        if pod.is_mirror() {
            // The API's copy of one of our static pods: never run it.
            if let Some(uid) = pod.metadata.annotations.get(pod_annotation::CONFIG_MIRROR) {
                mirrors.insert(uid.clone());
            }
            continue;
        }
        let uid = pod.metadata.uid.clone();
        if uid.is_empty() || pod.spec.node_name != name || pod.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        let server_status = std::mem::take(&mut pod.status);
        let server_status = (server_status != PodStatus::default()).then_some(server_status);
        pod.metadata.resource_version.clear();
        seen.insert(uid.clone());
        match books.get_mut(&uid) {
            Some(book) => {
                if *book.pod != pod {
                    book.update(pod);
                    changed = true;
                }
                if book.status.is_some() && book.status == server_status {
                    // The server has it.
                    book.pending = false;
                    book.sent_at = None;
                } else if book.status.is_some()
                    && !book.pending
                    && server_status.as_ref().is_some_and(marked_unreachable)
                {
                    // The server marked the pod not ready while this node
                    // was away: what runs here says otherwise.
                    book.pending = true;
                    resend = true;
                }
            }
            None => {
                note!(loud, node = %name, pod = %format_args!("{}/{}", pod.metadata.namespace, pod.metadata.name), "pod assigned");
                books.insert(uid, PodBook::new(pod, server_status, wall));
                changed = true;
            }
        }
    }
    let uids: Vec<String> = books
        .iter()
        .filter(|(uid, b)| !b.is_static && !seen.contains(*uid))
        .map(|(uid, _)| uid.clone())
        .collect();
    changed |= !uids.is_empty();
    let gone = uids
        .into_iter()
        .filter_map(|uid| books.remove(&uid).map(|b| (uid, b.pod)))
        .collect();
    Some(Merged {
        changed,
        gone,
        mirrors,
        resend,
    })
}

/// Whether the server marked a pod not ready because its node was
/// unreachable (the node lifecycle controller's `pods_not_ready`).
fn marked_unreachable(status: &PodStatus) -> bool {
    status.conditions.iter().any(|c| {
        c.r#type == drover_api::pod_condition::READY
            && c.reason == drover_api::pod_condition::REASON_NODE_NOT_READY
    })
}

/// Saves the server's pods of `books` (not the static ones) in `dir`;
/// a failure is logged, the pods keep running.
pub(super) async fn save(dir: PathBuf, books: &HashMap<String, PodBook>, name: &str) {
    let mut pods: Vec<Arc<Pod>> = books
        .values()
        .filter(|b| !b.is_static)
        .map(|b| b.pod.clone())
        .collect();
    pods.sort_by(|a, b| a.metadata.uid.cmp(&b.metadata.uid));
    let node = name.to_string();
    let r = tokio::task::spawn_blocking(move || {
        let refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
        persist::save(&dir, &node, &refs)
    })
    .await;
    match r {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(node = %name, "cannot save the desired pods: {e:#}"),
        Err(e) => tracing::warn!(node = %name, "cannot save the desired pods: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::{ConditionStatus, PodCondition};

    fn list_of(pod: &Pod, rv: &str) -> pb::DesiredPods {
        pb::DesiredPods {
            pods: vec![serde_json::to_vec(pod).unwrap()],
            resource_version: rv.into(),
        }
    }

    fn ready(status: ConditionStatus, reason: &str) -> PodStatus {
        PodStatus {
            conditions: vec![PodCondition {
                r#type: "Ready".into(),
                status: Some(status),
                reason: reason.into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// The server marked a pod not ready while the node was away, and the
    /// session stayed up: the agent sends what it knows again. Any other
    /// difference is left to the usual outbox rules.
    #[test]
    fn a_status_the_server_marked_unreachable_is_sent_again() {
        let mut pod = Pod::default();
        pod.metadata.name = "web".into();
        pod.metadata.namespace = "default".into();
        pod.metadata.uid = "u1".into();
        pod.spec.node_name = "n1".into();
        let mut books = HashMap::new();
        let mine = ready(ConditionStatus::True, "");
        pod.status = mine.clone();
        let m = merge(&mut books, &list_of(&pod, "5"), "n1", false, "now").unwrap();
        assert!(!m.resend);
        // The server shows what the agent has: nothing pending.
        let b = books.get_mut("u1").unwrap();
        b.status = Some(mine.clone());
        merge(&mut books, &list_of(&pod, "6"), "n1", false, "now").unwrap();
        assert!(!books["u1"].pending);
        // Marked by the node lifecycle controller: pending again.
        pod.status = ready(ConditionStatus::False, "NodeNotReady");
        let m = merge(&mut books, &list_of(&pod, "7"), "n1", false, "now").unwrap();
        assert!(m.resend);
        assert!(books["u1"].pending);
        assert_eq!(books["u1"].status.as_ref(), Some(&mine), "its own kept");
        // Another status the server holds is not a reason to resend.
        books.get_mut("u1").unwrap().pending = false;
        pod.status = ready(ConditionStatus::False, "ContainersNotReady");
        let m = merge(&mut books, &list_of(&pod, "8"), "n1", false, "now").unwrap();
        assert!(!m.resend);
        assert!(!books["u1"].pending);
    }
}
