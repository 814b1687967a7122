//! PodTopologySpread, as kube-scheduler's plugin: a filter for the
//! `DoNotSchedule` constraints and a score for the `ScheduleAnyway` ones.
//!
//! A constraint counts, in every domain (a value of its topology key), the
//! pods of the incoming pod's namespace that match its selector (its
//! `labelSelector` with `matchLabelKeys` added as `key in (value)` from the
//! incoming pod's labels), not being deleted, on the nodes that count:
//! those with every constraint's topology key and, by the node inclusion
//! policies, matching the pod's required node affinity (`Honor`, the
//! default) and with no untolerated `NoSchedule`/`NoExecute` taint (only
//! when `nodeTaintsPolicy: Honor`).
//!
//! Filter: a node without a constraint's key is out (missing required
//! label); otherwise its domain's count, plus one if the incoming pod
//! matches the selector, less the smallest count of any domain (taken as
//! 0 when there are fewer domains than `minDomains`), must not exceed
//! `maxSkew`.
//!
//! Score: each feasible node with every key scores, per constraint, its
//! domain's count times `ln(domains + 2)` plus `maxSkew - 1` (on
//! `kubernetes.io/hostname`, the node's own count and the number of
//! scored nodes); normalised so the fewest matching pods score 100.

use super::hash::FastMap;

use drover_api::node_affinity::RequiredNodeAffinity;
use drover_api::selector::{Operator, Requirement, Selector};
use drover_api::taints::{find_untolerated, with_effects};
use drover_api::{NodeInclusionPolicy, Pod, TaintEffect, UnsatisfiableConstraintAction};

use super::cluster::{Class, Cluster, NodeInfo};
use super::reasons::Reason;

/// The node label of a node's own name.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

type Pair<'x> = (&'x str, &'x str);

/// One topology spread constraint, compiled.
#[derive(Debug, Clone)]
pub(crate) struct Constraint<'p> {
    max_skew: i64,
    key: &'p str,
    selector: Option<Selector>,
    min_domains: Option<i64>,
    honor_affinity: bool,
    honor_taints: bool,
}

/// The pod's constraints with `action` (`DoNotSchedule` for the filter,
/// `ScheduleAnyway` for the score).
pub(crate) fn constraints(pod: &Pod, action: UnsatisfiableConstraintAction) -> Vec<Constraint<'_>> {
    pod.spec
        .topology_spread_constraints
        .iter()
        .filter(|c| c.when_unsatisfiable.as_ref() == Some(&action))
        .map(|c| {
            let selector = c.label_selector.as_ref().and_then(|s| {
                let base = Selector::from_label_selector(s).ok()?;
                let mut reqs = base.requirements().to_vec();
                for key in &c.match_label_keys {
                    if let Some(value) = pod.metadata.labels.get(key) {
                        reqs.push(Requirement::new(key, Operator::In, [value.as_str()]).ok()?);
                    }
                }
                Some(Selector::new(reqs))
            });
            Constraint {
                max_skew: i64::from(c.max_skew),
                key: c.topology_key.as_str(),
                selector,
                min_domains: c.min_domains.map(i64::from),
                honor_affinity: c.node_affinity_policy != Some(NodeInclusionPolicy::Ignore),
                honor_taints: c.node_taints_policy == Some(NodeInclusionPolicy::Honor),
            }
        })
        .collect()
}

impl Constraint<'_> {
    fn selects(&self, pod: &Pod) -> bool {
        self.selector
            .as_ref()
            .is_some_and(|s| s.matches(&pod.metadata.labels))
    }

    fn includes(
        &self,
        pod: &Pod,
        affinity: &RequiredNodeAffinity<'_>,
        node: &NodeInfo<'_>,
    ) -> bool {
        if self.honor_affinity && !affinity.matches(node.node) {
            return false;
        }
        let effects = [TaintEffect::NoSchedule, TaintEffect::NoExecute];
        !(self.honor_taints
            && find_untolerated(
                &node.node.spec.taints,
                &pod.spec.tolerations,
                with_effects(&effects),
            )
            .is_some())
    }
}

fn has_keys(node: &NodeInfo<'_>, constraints: &[Constraint<'_>]) -> bool {
    constraints.iter().all(|c| node.label(c.key).is_some())
}

/// The classes of placed pods that `c` counts for a pod of `namespace`.
fn counted<'c>(
    cluster: &'c Cluster<'c>,
    c: &Constraint<'_>,
    namespace: &str,
) -> Vec<&'c Class<'c>> {
    cluster
        .classes
        .iter()
        .filter(|k| {
            k.namespace == namespace && c.selector.as_ref().is_some_and(|s| s.matches(k.labels))
        })
        .collect()
}

/// The pods of `classes` on `node` that are not being deleted.
fn count_on(classes: &[&Class<'_>], node: &NodeInfo<'_>) -> i64 {
    classes
        .iter()
        .filter_map(|k| k.per_node.get(&node.index))
        .sum()
}

/// The filter's counts for one incoming pod.
#[derive(Debug)]
pub(crate) struct SpreadFilter<'x> {
    counts: FastMap<Pair<'x>, i64>,
    /// Per constraint: the smallest count of a domain (the global minimum).
    min: Vec<i64>,
}

impl<'x> SpreadFilter<'x> {
    /// The counts of `hard` (the pod's `DoNotSchedule` constraints).
    pub(crate) fn new(
        cluster: &'x Cluster<'x>,
        pod: &Pod,
        affinity: &RequiredNodeAffinity<'_>,
        hard: &[Constraint<'x>],
    ) -> Self {
        let mut counts: FastMap<Pair<'x>, i64> = FastMap::default();
        if !hard.is_empty() {
            let classes: Vec<Vec<&Class<'_>>> = hard
                .iter()
                .map(|c| counted(cluster, c, &pod.metadata.namespace))
                .collect();
            for node in &cluster.nodes {
                if !has_keys(node, hard) {
                    continue;
                }
                for (c, k) in hard.iter().zip(&classes) {
                    if !c.includes(pod, affinity, node) {
                        continue;
                    }
                    let value = node.label(c.key).unwrap_or_default();
                    *counts.entry((c.key, value)).or_default() += count_on(k, node);
                }
            }
        }
        let min = hard
            .iter()
            .map(|c| {
                let domains: Vec<i64> = counts
                    .iter()
                    .filter(|((k, _), _)| *k == c.key)
                    .map(|(_, n)| *n)
                    .collect();
                if c.min_domains.is_some_and(|m| (domains.len() as i64) < m) {
                    0
                } else {
                    domains.into_iter().min().unwrap_or(i64::from(i32::MAX))
                }
            })
            .collect();
        SpreadFilter { counts, min }
    }

    /// The filter for one node.
    pub(crate) fn filter(
        &self,
        pod: &Pod,
        hard: &[Constraint<'_>],
        node: &NodeInfo<'_>,
    ) -> Option<Reason> {
        for (i, c) in hard.iter().enumerate() {
            let Some(value) = node.label(c.key) else {
                return Some(Reason::SpreadLabelMissing);
            };
            let own = i64::from(c.selects(pod));
            let matching = self.counts.get(&(c.key, value)).copied().unwrap_or(0);
            if matching + own - self.min[i] > c.max_skew {
                return Some(Reason::Spread);
            }
        }
        None
    }
}

/// The score's counts for one incoming pod over the feasible nodes.
#[derive(Debug)]
pub(crate) struct SpreadScores<'x> {
    counts: FastMap<Pair<'x>, i64>,
    weights: Vec<f64>,
    /// Per constraint, the classes of placed pods it counts.
    classes: Vec<Vec<&'x Class<'x>>>,
}

impl<'x> SpreadScores<'x> {
    /// The counts of `soft` (the pod's `ScheduleAnyway` constraints) for
    /// the nodes `feasible` (indices into the cluster's nodes).
    pub(crate) fn new(
        cluster: &'x Cluster<'x>,
        pod: &Pod,
        affinity: &RequiredNodeAffinity<'_>,
        soft: &[Constraint<'x>],
        feasible: &[usize],
    ) -> Self {
        let classes: Vec<Vec<&Class<'_>>> = soft
            .iter()
            .map(|c| counted(cluster, c, &pod.metadata.namespace))
            .collect();
        let mut counts: FastMap<Pair<'x>, i64> = FastMap::default();
        let mut sizes = vec![0usize; soft.len()];
        let mut scored = 0usize;
        for &n in feasible {
            let node = &cluster.nodes[n];
            if !has_keys(node, soft) {
                continue;
            }
            scored += 1;
            for (i, c) in soft.iter().enumerate() {
                if c.key == HOSTNAME_LABEL {
                    continue;
                }
                let value = node.label(c.key).unwrap_or_default();
                if let std::collections::hash_map::Entry::Vacant(e) = counts.entry((c.key, value)) {
                    e.insert(0);
                    sizes[i] += 1;
                }
            }
        }
        let weights = soft
            .iter()
            .zip(&sizes)
            .map(|(c, &size)| {
                let size = if c.key == HOSTNAME_LABEL {
                    scored
                } else {
                    size
                };
                ((size + 2) as f64).ln()
            })
            .collect();
        for node in &cluster.nodes {
            if !has_keys(node, soft) {
                continue;
            }
            for (c, k) in soft.iter().zip(&classes) {
                if c.key == HOSTNAME_LABEL || !c.includes(pod, affinity, node) {
                    continue;
                }
                let value = node.label(c.key).unwrap_or_default();
                if let Some(total) = counts.get_mut(&(c.key, value)) {
                    *total += count_on(k, node);
                }
            }
        }
        SpreadScores {
            counts,
            weights,
            classes,
        }
    }

    /// The raw score of a feasible node; `None` for a node without every
    /// topology key (it scores 0 after normalisation).
    pub(crate) fn score(&self, soft: &[Constraint<'_>], node: &NodeInfo<'_>) -> Option<i64> {
        if !has_keys(node, soft) {
            return None;
        }
        let mut score = 0.0;
        for (i, c) in soft.iter().enumerate() {
            let Some(value) = node.label(c.key) else {
                continue;
            };
            let count = if c.key == HOSTNAME_LABEL {
                count_on(&self.classes[i], node)
            } else {
                self.counts.get(&(c.key, value)).copied().unwrap_or(0)
            };
            score += count as f64 * self.weights[i] + (c.max_skew - 1) as f64;
        }
        Some(score.round() as i64)
    }
}

/// PodTopologySpread's normalisation: the fewest matching pods score 100
/// (`100 * (max + min - score) / max`), all 100 when the largest is 0;
/// nodes without every key 0.
pub(crate) fn normalize(raw: &[Option<i64>]) -> Vec<i64> {
    let valid = raw.iter().flatten();
    let min = valid.clone().min().copied().unwrap_or(0);
    let max = valid.max().copied().unwrap_or(0).max(0);
    raw.iter()
        .map(|s| match s {
            None => 0,
            Some(_) if max == 0 => 100,
            Some(s) => 100 * (max + min - s) / max,
        })
        .collect()
}
