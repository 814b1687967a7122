//! InterPodAffinity, as kube-scheduler's plugin: a filter (required pod
//! affinity and anti-affinity of the incoming pod, and the required
//! anti-affinity of the pods already placed against it, by any
//! `topologyKey`) and a score (the preferred terms of both sides, and the
//! required affinity of placed pods at weight 1).
//!
//! Before the nodes are looked at, each term is matched once per group of
//! placed pods ([`Cluster`]'s classes: one namespace, the same labels; and
//! its groups of alike anti-affinity terms), and a node is then judged by
//! looking up its own value of each term's topology key in the matching
//! groups' counts:
//!
//! - affinity: the node has every term's topology key, and for each term a
//!   pod that matches all the terms runs in the node's domain; or no such
//!   pod runs anywhere (on a node with one of the keys) and the incoming
//!   pod matches all its own terms (the first of a group that wants to be
//!   together);
//! - anti-affinity: no pod matching a term runs in the node's domain of
//!   that term;
//! - existing anti-affinity: no placed pod whose required anti-affinity
//!   term the incoming pod matches runs in the node's domain of that term.

use drover_api::Pod;

use super::cluster::{AntiGroup, Class, Cluster, NodeInfo};
use super::hash::FastMap;
use super::reasons::Reason;
use super::terms::{PodTerms, Term};

/// What the placed pods say, for one incoming pod: the groups its terms
/// match.
#[derive(Debug, Default)]
pub(crate) struct InterPodState<'x> {
    /// The classes whose pods match all the required affinity terms.
    affinity: Vec<&'x Class<'x>>,
    /// Whether any of them runs on a node with one of the terms' keys.
    affinity_anywhere: bool,
    /// Per required anti-affinity term (in order), the classes it matches.
    anti_affinity: Vec<Vec<&'x Class<'x>>>,
    /// The placed pods' anti-affinity terms the incoming pod matches.
    existing_anti_affinity: Vec<&'x AntiGroup<'x>>,
    /// The incoming pod matches all its own required affinity terms.
    matches_itself: bool,
}

fn class_matches(cluster: &Cluster<'_>, term: &Term<'_>, class: &Class<'_>) -> bool {
    term.matches_parts(
        class.namespace,
        class.labels,
        cluster.namespace_labels(class.namespace),
    )
}

impl<'x> InterPodState<'x> {
    /// The groups for `pod` (with its compiled `terms`) in `cluster`.
    pub(crate) fn new(cluster: &'x Cluster<'x>, pod: &Pod, terms: &PodTerms<'_>) -> Self {
        let mut s = InterPodState::default();
        let own_ns = cluster.namespace_labels(&pod.metadata.namespace);
        s.existing_anti_affinity = cluster
            .anti_groups
            .iter()
            .filter(|g| g.term.matches(pod, own_ns))
            .collect();
        if !terms.affinity.is_empty() {
            s.affinity = cluster
                .classes
                .iter()
                .filter(|c| terms.affinity.iter().all(|t| class_matches(cluster, t, c)))
                .collect();
            s.affinity_anywhere = s.affinity.iter().any(|c| {
                terms
                    .affinity
                    .iter()
                    .any(|t| c.counts.has_key(t.topology_key))
            });
            s.matches_itself = terms.affinity.iter().all(|t| t.matches(pod, own_ns));
        }
        s.anti_affinity = terms
            .anti_affinity
            .iter()
            .map(|t| {
                cluster
                    .classes
                    .iter()
                    .filter(|c| class_matches(cluster, t, c))
                    .collect()
            })
            .collect();
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
            if !self
                .affinity
                .iter()
                .any(|c| c.counts.get(t.topology_key, value) > 0)
            {
                pods_exist = false;
            }
        }
        // No pod anywhere matches and the pod matches its own terms: it
        // may be the first of its group.
        let first_of_group = !self.affinity_anywhere && self.matches_itself;
        if !pods_exist && !first_of_group {
            return Some(Reason::PodAffinity);
        }
        for (t, classes) in terms.anti_affinity.iter().zip(&self.anti_affinity) {
            if let Some(value) = node.label(t.topology_key) {
                if classes
                    .iter()
                    .any(|c| c.counts.get(t.topology_key, value) > 0)
                {
                    return Some(Reason::PodAntiAffinity);
                }
            }
        }
        for g in &self.existing_anti_affinity {
            if let Some(value) = node.label(g.term.topology_key) {
                if g.counts.get(value).is_some_and(|c| *c > 0) {
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
    fn add(&mut self, key: &'x str, value: &'x str, by: i64) {
        *self
            .by_key
            .entry(key)
            .or_default()
            .entry(value)
            .or_default() += by;
    }

    /// The pair scores for `pod`: each placed pod that the incoming pod's
    /// preferred affinity (+weight) or anti-affinity (-weight) terms match
    /// (by class), and each placed pod's required affinity (+1), preferred
    /// affinity (+weight) and preferred anti-affinity (-weight) terms the
    /// incoming pod matches; each at the pair of the placed pod's node.
    pub(crate) fn new(cluster: &'x Cluster<'x>, pod: &Pod, terms: &PodTerms<'x>) -> Self {
        let mut s = InterPodScores::default();
        let own_ns = cluster.namespace_labels(&pod.metadata.namespace);
        for (sign, list) in [
            (1, &terms.preferred_affinity),
            (-1, &terms.preferred_anti_affinity),
        ] {
            for t in list {
                for c in cluster
                    .classes
                    .iter()
                    .filter(|c| class_matches(cluster, t, c))
                {
                    if let Some(values) = c.counts.by_key.get(t.topology_key) {
                        for (value, n) in values {
                            s.add(t.topology_key, value, sign * t.weight * n);
                        }
                    }
                }
            }
        }
        for placed in &cluster.pods {
            let node = &cluster.nodes[placed.node];
            let theirs = placed
                .terms
                .affinity
                .iter()
                .chain(&placed.terms.preferred_affinity)
                .map(|t| (t, 1))
                .chain(placed.terms.preferred_anti_affinity.iter().map(|t| (t, -1)));
            for (t, sign) in theirs {
                if t.matches(pod, own_ns) {
                    if let Some(value) = node.label(t.topology_key) {
                        s.add(t.topology_key, value, sign * t.weight);
                    }
                }
            }
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
