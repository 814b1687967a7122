//! The scheduler, as a pure planner: where a pod without `spec.nodeName`
//! goes, given the nodes and the pods already bound, decided as
//! kube-scheduler's default profile decides it. No I/O; the tie-break
//! randomness comes from the caller's RNG.
//!
//! One scheduling cycle ([`Cluster::schedule`]):
//!
//! 1. **PreFilter.** No node at all: `no nodes available to schedule
//!    pods`. NodeAffinity's `metadata.name` fields narrow the nodes (or
//!    conflict: `0/N nodes are available: pod affinity terms conflict.`).
//!    InterPodAffinity and PodTopologySpread count the placed pods by
//!    topology pair once.
//! 2. **Filter**, node by node, in kube-scheduler's order, the first
//!    plugin that rejects the node giving its reasons: NodeUnschedulable,
//!    NodeName, TaintToleration, NodeAffinity (and `nodeSelector`),
//!    NodePorts, NodeResourcesFit, PodTopologySpread (`DoNotSchedule`),
//!    InterPodAffinity (required affinity and anti-affinity by any
//!    `topologyKey`, and the placed pods' required anti-affinity against
//!    the incoming pod). No feasible node: [`Decision::Unschedulable`] with
//!    kube-scheduler's message ([`Unschedulable::message`]).
//! 3. **Score** every feasible node, each plugin normalised to 0..100 and
//!    weighted as kube-scheduler's defaults ([`WEIGHTS`]): TaintToleration
//!    3, NodeAffinity 2, PodTopologySpread 2, InterPodAffinity 2,
//!    NodeResourcesFit (`LeastAllocated`) 1, BalancedAllocation 1.
//! 4. **Select** the highest total; ties broken uniformly by the RNG (as
//!    kube-scheduler's `selectHost`).
//!
//! [`Cluster::schedule_batch`] schedules many pods in one pass: each
//! decision counts the pods placed before it (so 1,000 replicas with
//! required hostname anti-affinity land one per node). The cluster's pods
//! are indexed by node and the pods with affinity terms listed once per
//! pass; a pod's topology pairs are counted once per decision.
//!
//! As kube-scheduler, a cycle stops filtering once it has found
//! `percentageOfNodesToScore` of the nodes feasible (adaptive by default:
//! 42 % of 1,000 nodes, 5 % of 10,000; never fewer than 100 nodes;
//! [`Cluster::with_percentage_of_nodes_to_score`]), and the next cycle of a
//! batch starts where it stopped. Not done as kube-scheduler does:
//! nominated pods hold their room whatever
//! their priority; PodTopologySpread's system default constraints,
//! `matchLabelKeys`/`mismatchLabelKeys` of pod affinity terms, volumes and
//! ImageLocality are not implemented; preemption ([`preemption`]) is
//! chosen for resources and host ports only.
//!
//! [`Backlog`] decides which pending pods a pass schedules: new ones at
//! once, unschedulable ones again only when something they depend on
//! changed.
//!
//! ```
//! use drover_api::{Node, Pod};
//! use drover_controller::schedule::{Cluster, Decision};
//! use rand::{rngs::StdRng, SeedableRng};
//!
//! let mut node = Node::default();
//! node.metadata.name = "n1".into();
//! let nodes = [node];
//! let mut pod = Pod::default();
//! pod.metadata.name = "web".into();
//! let cluster = Cluster::new(&nodes, []);
//! match cluster.schedule(&pod, &mut StdRng::seed_from_u64(1)) {
//!     Decision::Bind(p) => assert_eq!(p.node, "n1"),
//!     Decision::Unschedulable(u) => panic!("{u}"),
//! }
//! ```

mod cluster;
mod filters;
mod hash;
mod interpod;
mod preempt;
mod queue;
mod reasons;
mod scores;
mod spread;
mod terms;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_affinity;

use std::collections::BTreeMap;

use drover_api::node_affinity::RequiredNodeAffinity;
use drover_api::{Pod, Priorities, UnsatisfiableConstraintAction};
use rand::RngCore;

pub use cluster::{Cluster, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST};
pub use filters::{node_affinity_prefilter, node_name, node_unschedulable, taint_toleration};
pub use preempt::{preemption, Preemption};
pub use queue::{is_pending, scheduler_name, Backlog, Changes, DEFAULT_SCHEDULER};
pub use reasons::{Reason, Unschedulable};
pub use scores::MAX_NODE_SCORE;
pub use spread::HOSTNAME_LABEL;
pub use terms::NamespaceLabels;

use cluster::Demand;
use interpod::{InterPodScores, InterPodState};
use spread::{SpreadFilter, SpreadScores};
use terms::PodTerms;

/// The weight of each score plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Weights {
    /// TaintToleration (untolerated `PreferNoSchedule` taints).
    pub taint_toleration: i64,
    /// NodeAffinity (preferred terms).
    pub node_affinity: i64,
    /// PodTopologySpread (`ScheduleAnyway`).
    pub topology_spread: i64,
    /// InterPodAffinity (preferred terms).
    pub inter_pod_affinity: i64,
    /// NodeResourcesFit (`LeastAllocated`).
    pub resources_fit: i64,
    /// NodeResourcesBalancedAllocation.
    pub balanced_allocation: i64,
}

/// kube-scheduler's default weights (its default profile).
pub const WEIGHTS: Weights = Weights {
    taint_toleration: 3,
    node_affinity: 2,
    topology_spread: 2,
    inter_pod_affinity: 2,
    resources_fit: 1,
    balanced_allocation: 1,
};

/// A feasible node's scores, each plugin's normalised (0..100) before its
/// weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PluginScores {
    /// TaintToleration.
    pub taint_toleration: i64,
    /// NodeAffinity.
    pub node_affinity: i64,
    /// PodTopologySpread.
    pub topology_spread: i64,
    /// InterPodAffinity.
    pub inter_pod_affinity: i64,
    /// NodeResourcesFit.
    pub resources_fit: i64,
    /// NodeResourcesBalancedAllocation.
    pub balanced_allocation: i64,
}

impl PluginScores {
    /// The weighted sum.
    pub fn total(&self, w: &Weights) -> i64 {
        self.taint_toleration * w.taint_toleration
            + self.node_affinity * w.node_affinity
            + self.topology_spread * w.topology_spread
            + self.inter_pod_affinity * w.inter_pod_affinity
            + self.resources_fit * w.resources_fit
            + self.balanced_allocation * w.balanced_allocation
    }
}

/// A feasible node and its scores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scored<'a> {
    /// The node's name.
    pub node: &'a str,
    /// Each plugin's score.
    pub plugins: PluginScores,
    /// The weighted total.
    pub total: i64,
}

/// Everything one scheduling cycle found, before a node is picked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation<'a> {
    /// How many nodes there were.
    pub nodes: usize,
    /// A reason that rules out every node before filtering.
    pub prefilter: Option<String>,
    /// Each rejected node (by name) with one of its reasons; a node
    /// appears once per reason.
    pub rejected: Vec<(&'a str, Reason)>,
    /// The feasible nodes found, with their scores, in the order they were
    /// looked at.
    pub feasible: Vec<Scored<'a>>,
    /// How many nodes were looked at (the search stops once enough
    /// feasible nodes are found).
    pub processed: usize,
}

impl Evaluation<'_> {
    /// The pod fits no node: why.
    pub fn unschedulable(&self) -> Unschedulable {
        let mut by_node: BTreeMap<String, Vec<Reason>> = BTreeMap::new();
        for (node, reason) in &self.rejected {
            by_node
                .entry(node.to_string())
                .or_default()
                .push(reason.clone());
        }
        Unschedulable {
            nodes: self.nodes,
            by_node,
            prefilter: self.prefilter.clone(),
        }
    }

    /// The highest total score (`None` without a feasible node).
    pub fn best(&self) -> Option<i64> {
        self.feasible.iter().map(|s| s.total).max()
    }

    /// The node kube-scheduler's `selectHost` picks: one of the highest
    /// totals, uniformly at random among ties (reservoir sampling).
    pub fn select(&self, rng: &mut dyn RngCore) -> Option<&Scored<'_>> {
        let best = self.best()?;
        let mut chosen = None;
        let mut seen = 0u64;
        for s in self.feasible.iter().filter(|s| s.total == best) {
            seen += 1;
            if rng.next_u64().is_multiple_of(seen) {
                chosen = Some(s);
            }
        }
        chosen
    }
}

/// Where a pod goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The chosen node.
    pub node: String,
    /// Its weighted score.
    pub score: i64,
    /// How many nodes were feasible.
    pub feasible: usize,
}

/// The outcome of one scheduling cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Bind the pod to this node.
    Bind(Placement),
    /// The pod fits nowhere: it stays Pending with `PodScheduled=False`,
    /// reason `Unschedulable` and [`Unschedulable::message`].
    Unschedulable(Unschedulable),
}

impl<'a> Cluster<'a> {
    /// Filters and scores every node for `pod` (one cycle without the
    /// pick), with kube-scheduler's default weights.
    pub fn evaluate(&self, pod: &Pod) -> Evaluation<'a> {
        let mut out = Evaluation {
            nodes: self.nodes.len(),
            prefilter: None,
            rejected: Vec::new(),
            feasible: Vec::new(),
            processed: 0,
        };
        if self.nodes.is_empty() {
            return out;
        }
        let only = match node_affinity_prefilter(&pod.spec) {
            Err(reason) => {
                out.prefilter = Some(reason);
                return out;
            }
            Ok(only) => only,
        };
        let spec = &pod.spec;
        let demand = Demand::of(spec);
        let affinity = RequiredNodeAffinity::from_pod_spec(spec);
        let terms = PodTerms::of(pod);
        let hard = spread::constraints(pod, UnsatisfiableConstraintAction::DoNotSchedule);
        let soft = spread::constraints(pod, UnsatisfiableConstraintAction::ScheduleAnyway);
        let inter_pod = InterPodState::new(self, pod, &terms);
        let spreading = SpreadFilter::new(self, pod, &affinity, &hard);
        let mut feasible: Vec<usize> = Vec::new();
        let n = self.nodes.len();
        let to_find = self.nodes_to_find();
        for k in 0..n {
            out.processed = k + 1;
            let i = (self.next_start + k) % n;
            let info = &self.nodes[i];
            let node = info.node;
            let name = info.name();
            if only.as_ref().is_some_and(|names| !names.contains(name)) {
                out.rejected.push((name, Reason::NotInPreFilterResult));
                continue;
            }
            let first = filters::node_unschedulable(spec, node)
                .or_else(|| filters::node_name(spec, node))
                .or_else(|| filters::taint_toleration(spec, node))
                .or_else(|| filters::node_affinity(&affinity, node))
                .or_else(|| filters::node_ports(&demand, info));
            if let Some(reason) = first {
                out.rejected.push((name, reason));
                continue;
            }
            let misfit = filters::node_resources_fit(&demand, info);
            if !misfit.is_empty() {
                out.rejected.extend(misfit.into_iter().map(|r| (name, r)));
                continue;
            }
            let last = spreading
                .filter(pod, &hard, info)
                .or_else(|| inter_pod.filter(&terms, info));
            if let Some(reason) = last {
                out.rejected.push((name, reason));
                continue;
            }
            feasible.push(i);
            if feasible.len() >= to_find {
                break;
            }
        }
        out.feasible = self.score(pod, &demand, &affinity, &terms, &soft, &feasible);
        out
    }

    fn score(
        &self,
        pod: &Pod,
        demand: &Demand,
        affinity: &RequiredNodeAffinity<'_>,
        terms: &PodTerms<'_>,
        soft: &[spread::Constraint<'_>],
        feasible: &[usize],
    ) -> Vec<Scored<'a>> {
        if feasible.is_empty() {
            return Vec::new();
        }
        let spec = &pod.spec;
        let nodes = || feasible.iter().map(|&i| &self.nodes[i]);
        let mut taints: Vec<i64> = nodes().map(|n| scores::taint_toleration(spec, n)).collect();
        scores::default_normalize(&mut taints, true);
        let mut preferred: Vec<i64> = nodes().map(|n| scores::node_affinity(spec, n)).collect();
        scores::default_normalize(&mut preferred, false);
        let spreads: Vec<i64> = if soft.is_empty() {
            vec![0; feasible.len()]
        } else {
            let s = SpreadScores::new(self, pod, affinity, soft, feasible);
            let raw: Vec<Option<i64>> = nodes().map(|n| s.score(soft, n)).collect();
            spread::normalize(&raw)
        };
        let inter = InterPodScores::new(self, pod, terms);
        let inter_pod: Vec<i64> = if inter.is_empty() {
            vec![0; feasible.len()]
        } else {
            let mut raw: Vec<i64> = nodes().map(|n| inter.score(n)).collect();
            interpod::normalize(&mut raw);
            raw
        };
        nodes()
            .enumerate()
            .map(|(k, n)| {
                let plugins = PluginScores {
                    taint_toleration: taints[k],
                    node_affinity: preferred[k],
                    topology_spread: spreads[k],
                    inter_pod_affinity: inter_pod[k],
                    resources_fit: scores::least_allocated(demand, n),
                    balanced_allocation: scores::balanced_allocation(demand, n),
                };
                Scored {
                    node: n.name(),
                    plugins,
                    total: plugins.total(&WEIGHTS),
                }
            })
            .collect()
    }

    /// One scheduling cycle for `pod`: the node to bind it to, or why it
    /// fits nowhere. The cluster is not changed ([`Cluster::place`] counts
    /// the pod once it is bound).
    pub fn schedule(&self, pod: &Pod, rng: &mut dyn RngCore) -> Decision {
        Self::decide(&self.evaluate(pod), rng)
    }

    fn decide(e: &Evaluation<'_>, rng: &mut dyn RngCore) -> Decision {
        match e.select(rng) {
            Some(s) => Decision::Bind(Placement {
                node: s.node.to_string(),
                score: s.total,
                feasible: e.feasible.len(),
            }),
            None => Decision::Unschedulable(e.unschedulable()),
        }
    }

    /// Schedules `pending` in the order given, each pod placed (counted)
    /// before the next is decided: the decisions, in the same order.
    /// [`queue_order`] gives kube-scheduler's order.
    pub fn schedule_batch(
        &mut self,
        pending: impl IntoIterator<Item = &'a Pod>,
        rng: &mut dyn RngCore,
    ) -> Vec<(&'a Pod, Decision)> {
        let mut out = Vec::new();
        for pod in pending {
            let e = self.evaluate(pod);
            let d = Self::decide(&e, rng);
            if !self.nodes.is_empty() {
                self.next_start = (self.next_start + e.processed) % self.nodes.len();
            }
            if let Decision::Bind(p) = &d {
                self.place(pod, &p.node);
            }
            out.push((pod, d));
        }
        out
    }
}

/// kube-scheduler's queue order (`PrioritySort`): higher priority first
/// (the pod's PriorityClass; a class that does not exist counts as 0),
/// then the older (`creationTimestamp`), then by namespace and name.
pub fn queue_order<'a>(pods: &[&'a Pod], priorities: &Priorities) -> Vec<&'a Pod> {
    let mut out = pods.to_vec();
    let priority = |p: &Pod| {
        priorities
            .of(&p.spec.priority_class_name)
            .map_or(0, |(v, _)| v)
    };
    out.sort_by(|a, b| {
        priority(b)
            .cmp(&priority(a))
            .then_with(|| {
                let created = |p: &Pod| p.metadata.creation_timestamp.clone().unwrap_or_default();
                created(a).cmp(&created(b))
            })
            .then_with(|| a.metadata.namespace.cmp(&b.metadata.namespace))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    out
}
