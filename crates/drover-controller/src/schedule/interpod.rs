//! InterPodAffinity, as kube-scheduler's plugin: a filter (required pod
//! affinity and anti-affinity of the incoming pod, and the required
//! anti-affinity of the pods already placed against it, by any
//! `topologyKey`) and a score (the preferred terms of both sides, and the
//! required affinity of placed pods at weight 1).
//!
//! Before the nodes are looked at, the placed pods are counted once per
//! topology pair (`key`, `value` of the node label): how many match all of
//! the incoming pod's affinity terms, how many match each of its
//! anti-affinity terms, and how many have an anti-affinity term the
//! incoming pod matches. A node is then judged by its own labels:
//!
//! - affinity: the node has every term's topology key, and each term's
//!   pair counts a matching pod; or no pod anywhere matches and the
//!   incoming pod matches all its own terms (the first of a group that
//!   wants to be together);
//! - anti-affinity: no term's pair on the node counts a matching pod;
//! - existing anti-affinity: no pair of the node's labels counts a placed
//!   pod whose anti-affinity the incoming pod breaks.

use super::hash::FastMap;

use drover_api::Pod;

use super::cluster::{Cluster, NodeInfo};
use super::reasons::Reason;
use super::terms::{PodTerms, Term};

/// Counts by topology key, then value: a node is judged by looking up its
/// own value of each key (few keys), never by scanning every pair.
#[derive(Debug, Default)]
struct PairCounts<'x> {
    by_key: FastMap<&'x str, FastMap<&'x str, i64>>,
}

impl<'x> PairCounts<'x> {
    fn add(&mut self, term: &Term<'x>, node: &NodeInfo<'x>, by: i64) {
        if let Some(value) = node.label(term.topology_key) {
            *self
                .by_key
                .entry(term.topology_key)
                .or_default()
                .entry(value)
                .or_default() += by;
        }
    }

    fn get(&self, key: &str, value: &str) -> i64 {
        self.by_key
            .get(key)
            .and_then(|m| m.get(value))
            .copied()
            .unwrap_or(0)
    }

    fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

/// What the placed pods say about each topology pair, for one incoming pod.
#[derive(Debug, Default)]
pub(crate) struct InterPodState<'x> {
    affinity: PairCounts<'x>,
    anti_affinity: PairCounts<'x>,
    existing_anti_affinity: PairCounts<'x>,
    /// The incoming pod matches all its own required affinity terms.
    matches_itself: bool,
}

impl<'x> InterPodState<'x> {
    /// The counts for `pod` (with its compiled `terms`) in `cluster`.
    pub(crate) fn new(cluster: &'x Cluster<'_>, pod: &'x Pod, terms: &'x PodTerms<'x>) -> Self {
        let mut s = InterPodState::default();
        let own_ns = cluster.namespace_labels(&pod.metadata.namespace);
        for &i in &cluster.with_terms {
            let placed = &cluster.pods[i];
            let node = &cluster.nodes[placed.node];
            for t in &placed.terms.anti_affinity {
                if t.matches(pod, own_ns) {
                    s.existing_anti_affinity.add(t, node, 1);
                }
            }
        }
        if !terms.affinity.is_empty() || !terms.anti_affinity.is_empty() {
            for placed in &cluster.pods {
                let node = &cluster.nodes[placed.node];
                let ns = cluster.namespace_labels(&placed.pod.metadata.namespace);
                if !terms.affinity.is_empty()
                    && terms.affinity.iter().all(|t| t.matches(placed.pod, ns))
                {
                    for t in &terms.affinity {
                        s.affinity.add(t, node, 1);
                    }
                }
                for t in &terms.anti_affinity {
                    if t.matches(placed.pod, ns) {
                        s.anti_affinity.add(t, node, 1);
                    }
                }
            }
            s.matches_itself = terms.affinity.iter().all(|t| t.matches(pod, own_ns));
        }
        s
    }

    /// The filter: the first rule the node breaks (affinity, then the pod's
    /// anti-affinity, then the placed pods' anti-affinity).
    pub(crate) fn filter(&self, terms: &PodTerms<'_>, node: &NodeInfo<'_>) -> Option<Reason> {
        let mut pods_exist = true;
        for t in &terms.affinity {
            let Some(value) = node.label(t.topology_key) else {
                return Some(Reason::PodAffinity);
            };
            if self.affinity.get(t.topology_key, value) <= 0 {
                pods_exist = false;
            }
        }
        // No pod anywhere matches and the pod matches its own terms: it
        // may be the first of its group.
        let first_of_group = self.affinity.is_empty() && self.matches_itself;
        if !pods_exist && !first_of_group {
            return Some(Reason::PodAffinity);
        }
        if !self.anti_affinity.is_empty() {
            for t in &terms.anti_affinity {
                if let Some(value) = node.label(t.topology_key) {
                    if self.anti_affinity.get(t.topology_key, value) > 0 {
                        return Some(Reason::PodAntiAffinity);
                    }
                }
            }
        }
        for (key, values) in &self.existing_anti_affinity.by_key {
            if let Some(value) = node.label(key) {
                if values.get(value).is_some_and(|c| *c > 0) {
                    return Some(Reason::ExistingAntiAffinity);
                }
            }
        }
        None
    }
}

/// The score of each topology pair, from preferred terms: by topology key,
/// then value.
#[derive(Debug, Default)]
pub(crate) struct InterPodScores<'x> {
    by_key: FastMap<&'x str, FastMap<&'x str, i64>>,
}

impl<'x> InterPodScores<'x> {
    fn add(&mut self, term: &Term<'x>, node: &NodeInfo<'x>, sign: i64) {
        if let Some(value) = node.label(term.topology_key) {
            *self
                .by_key
                .entry(term.topology_key)
                .or_default()
                .entry(value)
                .or_default() += sign * term.weight;
        }
    }

    /// The pair scores for `pod`: for each placed pod, the incoming pod's
    /// preferred affinity (+weight) and anti-affinity (-weight) terms it
    /// matches, and the placed pod's required affinity (+1), preferred
    /// affinity (+weight) and preferred anti-affinity (-weight) terms the
    /// incoming pod matches; each at the pair of the placed pod's node.
    pub(crate) fn new(cluster: &'x Cluster<'_>, pod: &'x Pod, terms: &'x PodTerms<'x>) -> Self {
        let mut s = InterPodScores::default();
        let own_ns = cluster.namespace_labels(&pod.metadata.namespace);
        let has_preferred =
            !terms.preferred_affinity.is_empty() || !terms.preferred_anti_affinity.is_empty();
        let mut visit = |i: usize| {
            let placed = &cluster.pods[i];
            let node = &cluster.nodes[placed.node];
            let ns = cluster.namespace_labels(&placed.pod.metadata.namespace);
            for t in &terms.preferred_affinity {
                if t.matches(placed.pod, ns) {
                    s.add(t, node, 1);
                }
            }
            for t in &terms.preferred_anti_affinity {
                if t.matches(placed.pod, ns) {
                    s.add(t, node, -1);
                }
            }
            for t in placed
                .terms
                .affinity
                .iter()
                .chain(&placed.terms.preferred_affinity)
            {
                if t.matches(pod, own_ns) {
                    s.add(t, node, 1);
                }
            }
            for t in &placed.terms.preferred_anti_affinity {
                if t.matches(pod, own_ns) {
                    s.add(t, node, -1);
                }
            }
        };
        if has_preferred {
            (0..cluster.pods.len()).for_each(&mut visit);
        } else {
            cluster.with_terms.iter().copied().for_each(&mut visit);
        }
        s
    }

    /// Whether no pair has a score (the plugin is skipped).
    pub(crate) fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// The raw score of a node: the sum of its pairs' scores.
    pub(crate) fn score(&self, node: &NodeInfo<'_>) -> i64 {
        self.by_key
            .iter()
            .filter_map(|(key, values)| node.label(key).and_then(|v| values.get(v)))
            .sum()
    }
}

/// InterPodAffinity's normalisation: min-max to 0..100 (all 0 when equal).
pub(crate) fn normalize(scores: &mut [i64]) {
    let (Some(&min), Some(&max)) = (scores.iter().min(), scores.iter().max()) else {
        return;
    };
    let diff = max - min;
    for s in scores.iter_mut() {
        *s = if diff > 0 {
            (100.0 * ((*s - min) as f64 / diff as f64)) as i64
        } else {
            0
        };
    }
}
