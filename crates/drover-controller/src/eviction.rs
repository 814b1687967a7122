//! Taint-based eviction, as Kubernetes' `NoExecuteTaintManager`
//! (`pkg/controller/tainteviction`): a pod bound to a node with a
//! `NoExecute` taint it does not tolerate is deleted at once; one whose
//! tolerations of the node's `NoExecute` taints all carry
//! `tolerationSeconds` is deleted once the shortest has passed since the
//! taint was added; a toleration without seconds keeps it there for good
//! (daemon pods tolerate `not-ready` and `unreachable` so). Its controller
//! (a ReplicaSet) then replaces it, and the scheduler places the new pod
//! on a node without the taint.
//!
//! The clock of a taint is its `timeAdded`, which the node lifecycle
//! ([`crate::node`]) and `drover taint` set on every `NoExecute` taint, so
//! that a new leader evicts on the same schedule. It is written to the
//! second, so it counts from the next second: a pod goes between
//! `tolerationSeconds` and one second more after the taint, never sooner. A taint without one is
//! counted from `now` (it never fires while it stays without: Kubernetes
//! counts from when its manager first saw it, a time drover does not keep).
//!
//! Mirror pods (a node's static pods) and pods being deleted are left
//! alone.

use std::time::Duration;

use drover_api::{event_type, Event, Node, Pod, Taint, TaintEffect, Toleration};

use crate::events::{self, namespace_of};
use crate::time::Timestamp;

/// The component that reports evictions (Kubernetes' own name).
pub const TAINT_EVICTION_CONTROLLER: &str = "taint-eviction-controller";
/// The event on an evicted pod (Kubernetes' reason).
pub const TAINT_MANAGER_EVICTION: &str = "TaintManagerEviction";

/// A pod to delete because of its node's taints.
#[derive(Debug, Clone, PartialEq)]
pub struct Eviction {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The pod's UID: the delete's precondition.
    pub uid: String,
    /// Its node.
    pub node_name: String,
    /// `TaintManagerEviction`, `Marking for deletion Pod NS/NAME`.
    pub event: Event,
}

/// What taint-based eviction does now, and when to look again.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EvictionPlan {
    /// Pods to delete now.
    pub evict: Vec<Eviction>,
    /// The next time a tolerated taint runs out (plan again then).
    pub requeue_at: Option<Timestamp>,
}

/// When the pod must leave a node with these taints: `Some(None)` at once
/// (a `NoExecute` taint it does not tolerate), `Some(Some(t))` at `t`,
/// `None` never (no `NoExecute` taint, or one tolerated without limit).
pub fn eviction_time(
    taints: &[Taint],
    tolerations: &[Toleration],
    now: Timestamp,
) -> Option<Option<Timestamp>> {
    let mut at: Option<Timestamp> = None;
    for taint in taints
        .iter()
        .filter(|t| t.effect == Some(TaintEffect::NoExecute))
    {
        let matching: Vec<&Toleration> =
            tolerations.iter().filter(|t| t.tolerates(taint)).collect();
        if matching.is_empty() {
            return Some(None);
        }
        // Kubernetes' `getMinTolerationTime` over the tolerations used:
        // unlimited unless each has seconds; the shortest counts.
        let seconds = matching.iter().filter_map(|t| t.toleration_seconds).min();
        let Some(seconds) = seconds else {
            continue;
        };
        if matching.iter().any(|t| t.toleration_seconds.is_none()) {
            continue;
        }
        let since =
            Timestamp::parse_field(taint.time_added.as_deref()).map_or(now, round_up_to_second);
        let due = since.saturating_add(Duration::from_secs(u64::try_from(seconds).unwrap_or(0)));
        at = Some(at.map_or(due, |a| a.min(due)));
    }
    at.map(Some)
}

/// `timeAdded` is written to the second (RFC 3339 without fraction, as
/// Kubernetes' `metav1.Time`), up to a second before the taint was really
/// added: counting from the next second never evicts a pod before its
/// `tolerationSeconds` have passed.
fn round_up_to_second(t: Timestamp) -> Timestamp {
    const SECOND: i64 = 1_000_000_000;
    if t.unix_nanos() % SECOND == 0 {
        t + Duration::from_secs(1)
    } else {
        t
    }
}

/// Plans taint-based eviction over every bound pod.
pub fn plan<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    pods: impl IntoIterator<Item = &'a Pod>,
    now: Timestamp,
) -> EvictionPlan {
    let tainted: std::collections::HashMap<&str, &[Taint]> = nodes
        .into_iter()
        .filter(|n| {
            n.spec
                .taints
                .iter()
                .any(|t| t.effect == Some(TaintEffect::NoExecute))
        })
        .map(|n| (n.metadata.name.as_str(), n.spec.taints.as_slice()))
        .collect();
    let mut plan = EvictionPlan::default();
    if tainted.is_empty() {
        return plan;
    }
    for pod in pods {
        if pod.spec.node_name.is_empty()
            || pod.metadata.deletion_timestamp.is_some()
            || pod.is_mirror()
        {
            continue;
        }
        let Some(taints) = tainted.get(pod.spec.node_name.as_str()) else {
            continue;
        };
        match eviction_time(taints, &pod.spec.tolerations, now) {
            None => {}
            Some(Some(at)) if at > now => {
                plan.requeue_at = Some(plan.requeue_at.map_or(at, |t| t.min(at)));
            }
            Some(_) => plan.evict.push(eviction(pod, now)),
        }
    }
    plan
}

fn eviction(pod: &Pod, now: Timestamp) -> Eviction {
    let namespace = namespace_of(&pod.metadata).to_owned();
    let event = events::pod_event(
        (&namespace, &pod.metadata.name, &pod.metadata.uid),
        TAINT_EVICTION_CONTROLLER,
        event_type::NORMAL,
        TAINT_MANAGER_EVICTION,
        format!("Marking for deletion Pod {namespace}/{}", pod.metadata.name),
        now,
    );
    Eviction {
        namespace,
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        node_name: pod.spec.node_name.clone(),
        event,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::taints::{
        add_daemon_pod_tolerations, add_default_toleration_seconds, TAINT_NODE_NOT_READY,
        TAINT_NODE_UNREACHABLE,
    };
    use drover_api::TolerationOperator;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_unix_seconds(1_700_000_000 + s)
    }

    fn node(name: &str, taints: &[(&str, TaintEffect, i64)]) -> Node {
        let mut n = Node::default();
        n.metadata.name = name.into();
        n.spec.taints = taints
            .iter()
            .map(|(k, e, added)| Taint {
                key: (*k).into(),
                effect: Some(e.clone()),
                time_added: Some(t(*added).to_rfc3339()),
                ..Default::default()
            })
            .collect();
        n
    }

    fn pod(name: &str, node: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = name.into();
        p.metadata.namespace = "default".into();
        p.metadata.uid = format!("u-{name}");
        p.spec.node_name = node.into();
        p
    }

    #[test]
    fn an_untolerated_no_execute_taint_evicts_at_once() {
        let n = node("n1", &[("dedicated", TaintEffect::NoExecute, 0)]);
        let plan = plan([&n], [&pod("a", "n1"), &pod("b", "n2")], t(1));
        assert_eq!(plan.evict.len(), 1);
        assert_eq!(plan.evict[0].name, "a");
        assert_eq!(plan.evict[0].event.reason, "TaintManagerEviction");
        assert_eq!(
            plan.evict[0].event.message,
            "Marking for deletion Pod default/a"
        );
        // NoSchedule does not evict.
        let n = node("n1", &[("dedicated", TaintEffect::NoSchedule, 0)]);
        assert!(super::plan([&n], [&pod("a", "n1")], t(1)).evict.is_empty());
    }

    #[test]
    fn default_toleration_seconds_evict_after_they_pass() {
        let n = node(
            "n1",
            &[(TAINT_NODE_UNREACHABLE, TaintEffect::NoExecute, 10)],
        );
        let mut p = pod("a", "n1");
        add_default_toleration_seconds(&mut p.spec);
        for toleration in &mut p.spec.tolerations {
            toleration.toleration_seconds = Some(2);
        }
        // Added at 10 (to the second): due at 13, never before 12.
        let early = plan([&n], [&p], t(12));
        assert!(early.evict.is_empty());
        assert_eq!(early.requeue_at, Some(t(13)));
        assert_eq!(plan([&n], [&p], t(13)).evict.len(), 1);
    }

    #[test]
    fn daemon_pods_stay_and_terminating_or_mirror_pods_are_left_alone() {
        let n = node(
            "n1",
            &[
                (TAINT_NODE_NOT_READY, TaintEffect::NoExecute, 0),
                (TAINT_NODE_UNREACHABLE, TaintEffect::NoExecute, 0),
            ],
        );
        let mut daemon = pod("d", "n1");
        add_daemon_pod_tolerations(&mut daemon.spec);
        let mut leaving = pod("l", "n1");
        leaving.metadata.deletion_timestamp = Some(t(0).to_rfc3339());
        let mut mirror = pod("m", "n1");
        mirror
            .metadata
            .annotations
            .insert(drover_api::pod_annotation::CONFIG_MIRROR.into(), "x".into());
        let plan = plan([&n], [&daemon, &leaving, &mirror], t(10_000));
        assert!(plan.evict.is_empty() && plan.requeue_at.is_none());
    }

    #[test]
    fn the_shortest_toleration_counts_and_an_unlimited_one_wins() {
        let taints = [Taint {
            key: "k".into(),
            effect: Some(TaintEffect::NoExecute),
            time_added: Some(t(0).to_rfc3339()),
            ..Default::default()
        }];
        let tol = |seconds: Option<i64>| Toleration {
            key: "k".into(),
            operator: Some(TolerationOperator::Exists),
            toleration_seconds: seconds,
            ..Default::default()
        };
        assert_eq!(
            eviction_time(&taints, &[tol(Some(30)), tol(Some(5))], t(1)),
            Some(Some(t(6)))
        );
        assert_eq!(
            eviction_time(&taints, &[tol(Some(5)), tol(None)], t(1)),
            None
        );
        assert_eq!(eviction_time(&taints, &[], t(1)), Some(None));
        // No time added: counted from now.
        let fresh = [Taint {
            time_added: None,
            ..taints[0].clone()
        }];
        assert_eq!(
            eviction_time(&fresh, &[tol(Some(5))], t(1)),
            Some(Some(t(6)))
        );
    }
}
