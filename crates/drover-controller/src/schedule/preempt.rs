//! Preemption for a pod that fits no node (kube-scheduler's
//! DefaultPreemption, as the DaemonSet path has it in
//! [`crate::daemon::fit`]): on the nodes that failed only for resources,
//! the pod count or host ports (a reason that evicting pods can resolve),
//! the pods of strictly lower priority whose removal makes the pod fit
//! ([`NodeUsage::preemption`]: all candidates, then as many spared again
//! as possible, the most important first), and of those nodes the one
//! kube-scheduler's `pickOneNodeForPreemption` picks: the lowest
//! highest-priority victim, then the lowest sum of priorities, then the
//! fewest victims, then the first node by name. A pod whose class says
//! `preemptionPolicy: Never` (or that names a class that does not exist)
//! preempts nothing, nor does one already nominated to a node that still
//! exists (its victims are on their way out, as kube-scheduler's
//! `PodEligibleToPreemptOthers`).
//!
//! Not done as kube-scheduler does: a node's victims are chosen for
//! resources and ports only; the filters that follow them
//! (PodTopologySpread, InterPodAffinity) are checked again when the pod
//! is scheduled after its victims are gone, not before they are chosen.
//! PodDisruptionBudgets do not exist in drover.

use drover_api::{Node, Pod};

use super::reasons::{Reason, Unschedulable};
use crate::daemon::fit::{NodeUsage, Victim};

/// Where a pod preempts, and whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preemption {
    /// The node the pod is nominated to (`status.nominatedNodeName`).
    pub node: String,
    /// The pods to delete there, by name.
    pub victims: Vec<Victim>,
}

/// Whether evicting pods can make a node that gave `reasons` feasible.
fn resolvable(reasons: &[Reason]) -> bool {
    !reasons.is_empty()
        && reasons.iter().all(|r| {
            matches!(
                r,
                Reason::Insufficient(_) | Reason::TooManyPods | Reason::Ports
            )
        })
}

/// The preemption of `pod`, which `why` says fits none of `nodes`, over
/// what `usage` counts on each node (build it from the same pods as the
/// pass's cluster); `None` when it may not or cannot preempt.
pub fn preemption<'a>(
    pod: &Pod,
    why: &Unschedulable,
    nodes: impl IntoIterator<Item = &'a Node>,
    usage: &NodeUsage,
) -> Option<Preemption> {
    let (_, may_preempt) = usage.priority_of(&pod.spec)?;
    if !may_preempt || why.prefilter.is_some() {
        return None;
    }
    let nodes: Vec<&Node> = nodes.into_iter().collect();
    let nominated = pod.status.nominated_node_name.as_str();
    if !nominated.is_empty() && nodes.iter().any(|n| n.metadata.name == nominated) {
        return None;
    }
    // (highest victim priority, sum of priorities, victims, node name).
    let mut best: Option<((i32, i64, usize), Preemption)> = None;
    for node in nodes {
        let name = node.metadata.name.as_str();
        if !why.by_node.get(name).is_some_and(|r| resolvable(r)) {
            continue;
        }
        let Some(victims) = usage.preemption(node, &pod.spec, "") else {
            continue;
        };
        if victims.is_empty() {
            continue;
        }
        let highest = victims.iter().map(|v| v.priority).max().unwrap_or(i32::MIN);
        let sum: i64 = victims.iter().map(|v| i64::from(v.priority)).sum();
        let key = (highest, sum, victims.len());
        let better = match &best {
            None => true,
            Some((k, p)) => key < *k || (key == *k && name < p.node.as_str()),
        };
        if better {
            best = Some((
                key,
                Preemption {
                    node: name.to_string(),
                    victims,
                },
            ));
        }
    }
    best.map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{node, on, pod, requesting};
    use super::super::{Cluster, Decision};
    use super::*;
    use drover_api::{Priorities, PriorityClass};
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn class(name: &str, value: i32, never: bool) -> PriorityClass {
        let mut c = PriorityClass::default();
        c.metadata.name = name.into();
        c.value = value;
        if never {
            c.preemption_policy = Some("Never".into());
        }
        c
    }

    fn with_class(mut p: Pod, class: &str) -> Pod {
        p.spec.priority_class_name = class.into();
        p
    }

    fn priorities() -> Priorities {
        Priorities::new(&[
            class("low", 10, false),
            class("mid", 100, false),
            class("high", 1000, false),
            class("polite", 1000, true),
        ])
    }

    /// Schedules `incoming` over `nodes` and `pods`: its preemption, if it
    /// fits nowhere.
    fn preempt(nodes: &[Node], pods: &[Pod], incoming: &Pod) -> Option<Preemption> {
        let cluster = Cluster::new(nodes, pods);
        let why = match cluster.schedule(incoming, &mut StdRng::seed_from_u64(1)) {
            Decision::Unschedulable(u) => u,
            Decision::Bind(p) => panic!("{} fits {}", incoming.metadata.name, p.node),
        };
        let usage = NodeUsage::with_priorities(pods, priorities());
        preemption(incoming, &why, nodes, &usage)
    }

    fn names(p: &Preemption) -> Vec<&str> {
        p.victims.iter().map(|v| v.name.as_str()).collect()
    }

    #[test]
    fn the_node_whose_victims_matter_least_is_picked() {
        let nodes = [node("n1", &[]), node("n2", &[]), node("n3", &[])];
        let pods = [
            // n1: a mid pod holds 3 of 4 CPUs.
            with_class(on(requesting(pod("a", &[]), "3", "1Gi"), "n1"), "mid"),
            // n2: two low pods of 1.5 CPUs each.
            with_class(on(requesting(pod("b", &[]), "1500m", "1Gi"), "n2"), "low"),
            with_class(on(requesting(pod("c", &[]), "1500m", "1Gi"), "n2"), "low"),
            // n3: a high pod: never a victim of high.
            with_class(on(requesting(pod("d", &[]), "3", "1Gi"), "n3"), "high"),
        ];
        let incoming = with_class(requesting(pod("x", &[]), "2", "1Gi"), "high");
        let p = preempt(&nodes, &pods, &incoming).expect("preempts");
        // n2's highest victim (low) is lower than n1's (mid); one of the
        // two is enough (2 CPUs of 4 with 1.5 left held).
        assert_eq!(p.node, "n2");
        assert_eq!(p.victims.len(), 1, "{p:?}");
    }

    #[test]
    fn fewer_victims_win_at_equal_priority_and_ties_go_to_the_first_node() {
        let nodes = [node("n1", &[]), node("n2", &[]), node("n3", &[])];
        let pods = [
            with_class(on(requesting(pod("a1", &[]), "2", "1Gi"), "n1"), "low"),
            with_class(on(requesting(pod("a2", &[]), "2", "1Gi"), "n1"), "low"),
            with_class(on(requesting(pod("b", &[]), "4", "1Gi"), "n2"), "low"),
            with_class(on(requesting(pod("c", &[]), "4", "1Gi"), "n3"), "low"),
        ];
        let incoming = with_class(requesting(pod("x", &[]), "4", "1Gi"), "high");
        let p = preempt(&nodes, &pods, &incoming).expect("preempts");
        assert_eq!(p.node, "n2");
        assert_eq!(names(&p), ["b"]);
    }

    #[test]
    fn never_equal_priority_and_unresolvable_reasons_preempt_nothing() {
        let nodes = [node("n1", &[])];
        let full = [with_class(
            on(requesting(pod("a", &[]), "4", "1Gi"), "n1"),
            "low",
        )];
        // preemptionPolicy: Never.
        let polite = with_class(requesting(pod("x", &[]), "1", "1Gi"), "polite");
        assert_eq!(preempt(&nodes, &full, &polite), None);
        // Equal priority.
        let peer = with_class(requesting(pod("x", &[]), "1", "1Gi"), "low");
        assert_eq!(preempt(&nodes, &full, &peer), None);
        // A selector no node matches: evicting pods cannot help.
        let mut picky = with_class(requesting(pod("x", &[]), "1", "1Gi"), "high");
        picky.spec.node_selector = [("disk".to_string(), "ssd".to_string())].into();
        assert_eq!(preempt(&nodes, &full, &picky), None);
        // A class that does not exist.
        let unknown = with_class(requesting(pod("x", &[]), "1", "1Gi"), "nope");
        assert_eq!(preempt(&nodes, &full, &unknown), None);
        // Already nominated to a node that exists: its victims are going.
        let mut nominated = with_class(requesting(pod("x", &[]), "1", "1Gi"), "high");
        nominated.status.nominated_node_name = "n1".into();
        assert_eq!(preempt(&nodes, &full, &nominated), None);
        // And the high pod that may preempt does.
        let high = with_class(requesting(pod("x", &[]), "1", "1Gi"), "high");
        let p = preempt(&nodes, &full, &high).expect("preempts");
        assert_eq!((p.node.as_str(), names(&p)), ("n1", vec!["a"]));
    }
}
