//! The annotations drover gives a meaning to, beyond Kubernetes', and
//! their parsing (validation refuses a DaemonSet whose values don't parse).
//!
//! Automatic rollback, as Swarm's `update_config.failure_action: rollback`:
//!
//! ```yaml
//! metadata:
//!   annotations:
//!     rollout.drover.io/auto-rollback-after: "2m"   # turns it on
//!     rollout.drover.io/auto-rollback-nodes: "1"    # default 1
//! ```
//!
//! When that many Ready nodes run a pod of the newest revision that has
//! existed that long and is still not available, the controller writes the
//! previous revision's template back (an automatic `rollout undo`), records
//! a Warning event and marks the DaemonSet with
//! `rollout.drover.io/rolled-back-from: <hash>` so it never rolls forward to
//! the failed revision on its own, nor back and forth.

use std::time::Duration;

use crate::meta::ObjectMeta;

/// How long a new pod may stay unavailable before it counts as failed; set
/// on a DaemonSet, it turns automatic rollback on.
pub const AUTO_ROLLBACK_AFTER: &str = "rollout.drover.io/auto-rollback-after";
/// How many nodes with a failed new pod trigger the rollback (default 1).
pub const AUTO_ROLLBACK_NODES: &str = "rollout.drover.io/auto-rollback-nodes";
/// Written by the controller when it rolled back: the hash of the revision
/// it rolled back from.
pub const ROLLED_BACK_FROM: &str = "rollout.drover.io/rolled-back-from";

/// A DaemonSet's automatic rollback policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoRollback {
    /// How long a new pod may stay unavailable.
    pub after: Duration,
    /// How many such nodes trigger the rollback (at least 1).
    pub nodes: u32,
}

/// The automatic rollback policy in `meta`'s annotations: `Ok(None)` when
/// it is off, `Err((annotation, reason))` when a value doesn't parse.
///
/// ```
/// use drover_api::annotations::{auto_rollback, AUTO_ROLLBACK_AFTER};
/// let mut meta = drover_api::ObjectMeta::default();
/// assert_eq!(auto_rollback(&meta), Ok(None));
/// meta.annotations.insert(AUTO_ROLLBACK_AFTER.into(), "1m30s".into());
/// let policy = auto_rollback(&meta).unwrap().unwrap();
/// assert_eq!((policy.after.as_secs(), policy.nodes), (90, 1));
/// ```
pub fn auto_rollback(meta: &ObjectMeta) -> Result<Option<AutoRollback>, (&'static str, String)> {
    let nodes = match meta.annotations.get(AUTO_ROLLBACK_NODES) {
        None => 1,
        Some(v) => match v.trim().parse::<u32>() {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err((
                    AUTO_ROLLBACK_NODES,
                    "must be a whole number of nodes, at least 1 (e.g. \"1\")".to_owned(),
                ))
            }
        },
    };
    let Some(after) = meta.annotations.get(AUTO_ROLLBACK_AFTER) else {
        return Ok(None);
    };
    match humantime::parse_duration(after.trim()) {
        Ok(after) if !after.is_zero() => Ok(Some(AutoRollback { after, nodes })),
        Ok(_) => Err((
            AUTO_ROLLBACK_AFTER,
            "must be longer than 0 (e.g. \"2m\")".to_owned(),
        )),
        Err(e) => Err((
            AUTO_ROLLBACK_AFTER,
            format!("must be a duration like \"90s\" or \"2m\": {e}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(annotations: &[(&str, &str)]) -> ObjectMeta {
        let mut meta = ObjectMeta::default();
        for (k, v) in annotations {
            meta.annotations.insert((*k).into(), (*v).into());
        }
        meta
    }

    fn policy(after_secs: u64, nodes: u32) -> Option<AutoRollback> {
        Some(AutoRollback {
            after: Duration::from_secs(after_secs),
            nodes,
        })
    }

    #[test]
    fn auto_rollback_is_on_for_any_duration_longer_than_zero() {
        for (after, secs) in [("1s", 1), ("2m", 120), (" 90s ", 90), ("1h 30m", 5400)] {
            assert_eq!(
                auto_rollback(&meta(&[(AUTO_ROLLBACK_AFTER, after)])),
                Ok(policy(secs, 1)),
                "{after}"
            );
        }
        assert_eq!(
            auto_rollback(&meta(&[
                (AUTO_ROLLBACK_AFTER, "5m"),
                (AUTO_ROLLBACK_NODES, "3")
            ])),
            Ok(policy(300, 3))
        );
    }

    #[test]
    fn a_zero_rollback_delay_is_refused_not_taken_as_immediate() {
        for zero in ["0s", "0m", "0"] {
            assert_eq!(
                auto_rollback(&meta(&[(AUTO_ROLLBACK_AFTER, zero)])),
                Err((
                    AUTO_ROLLBACK_AFTER,
                    "must be longer than 0 (e.g. \"2m\")".to_owned()
                )),
                "{zero}"
            );
        }
    }

    #[test]
    fn auto_rollback_is_off_without_a_delay_and_refuses_bad_values() {
        assert_eq!(auto_rollback(&meta(&[])), Ok(None));
        assert_eq!(
            auto_rollback(&meta(&[(AUTO_ROLLBACK_NODES, "2")])),
            Ok(None)
        );
        let (annotation, reason) =
            auto_rollback(&meta(&[(AUTO_ROLLBACK_AFTER, "soon")])).unwrap_err();
        assert_eq!(annotation, AUTO_ROLLBACK_AFTER);
        assert!(reason.starts_with("must be a duration like"), "{reason}");
        for nodes in ["0", "-1", "one", "1.5"] {
            assert_eq!(
                auto_rollback(&meta(&[
                    (AUTO_ROLLBACK_AFTER, "2m"),
                    (AUTO_ROLLBACK_NODES, nodes)
                ])),
                Err((
                    AUTO_ROLLBACK_NODES,
                    "must be a whole number of nodes, at least 1 (e.g. \"1\")".to_owned()
                )),
                "{nodes}"
            );
        }
    }
}
