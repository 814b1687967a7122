//! The scheduler's view of the cluster for one pass (kube-scheduler's
//! snapshot of `NodeInfo`s): each node with its allocatable resources, what
//! its pods request (as NodeResourcesFit counts it, and with the scoring
//! defaults for pods that request nothing) and the host ports they hold;
//! the placed pods grouped by namespace and labels (a class: a
//! Deployment's replicas are one) with their count in every topology pair
//! (InterPodAffinity) and on every node (PodTopologySpread, pods being
//! deleted left out), and their required anti-affinity terms grouped
//! alike, so that a decision matches each term or selector once per group,
//! not once per placed pod; and the placed pods whose terms score.
//! A pod placed by the pass is added with [`Cluster::place`] and counts for
//! every later decision.
//!
//! What counts is the fit module's rule for daemon pods
//! ([`crate::daemon::fit`]): every pod bound to a node that has not
//! terminated (pods being deleted included), and an unbound pod nominated
//! to a node (it preempted there: the room is its) for resources and ports;
//! a container's request is its `requests`, else its `limits`. A resource
//! the node does not report is not checked.

use std::collections::HashMap;

use super::hash::FastMap;

use drover_api::{Node, Pod, PodPhase, PodSpec};

use super::terms::{namespace_labels, NamespaceLabels, PairCounts, PodTerms, Term};
use crate::daemon::fit::{host_ports, requests, value_of, HostPort};

/// kube-scheduler's `DefaultMilliCPURequest`: what a container that
/// requests no CPU counts as when nodes are scored.
pub const DEFAULT_MILLI_CPU_REQUEST: i128 = 100;
/// kube-scheduler's `DefaultMemoryRequest` (200 MiB), likewise.
pub const DEFAULT_MEMORY_REQUEST: i128 = 200 * 1024 * 1024;

/// What a pod asks of its node.
#[derive(Debug, Clone, Default)]
pub(crate) struct Demand {
    /// CPU requested, in millicores.
    pub(crate) cpu: i128,
    /// Memory requested, in bytes.
    pub(crate) memory: i128,
    /// Other resources requested (by name, sorted), in units.
    pub(crate) other: Vec<(String, i128)>,
    /// CPU for scoring: a container without a CPU request counts 100m.
    pub(crate) nonzero_cpu: i128,
    /// Memory for scoring: a container without a memory request counts
    /// 200 MiB.
    pub(crate) nonzero_memory: i128,
    /// The host ports it holds.
    pub(crate) ports: Vec<HostPort>,
}

fn container_request(c: &drover_api::Container, resource: &str) -> Option<i128> {
    let r = &c.resources;
    r.requests
        .get(resource)
        .or_else(|| r.limits.get(resource))
        .and_then(|q| value_of(resource, q))
}

impl Demand {
    /// What a pod with `spec` asks.
    pub(crate) fn of(spec: &PodSpec) -> Self {
        let mut all = requests(spec);
        let cpu = all.remove("cpu").unwrap_or(0);
        let memory = all.remove("memory").unwrap_or(0);
        let mut other: Vec<(String, i128)> = all.into_iter().filter(|(_, v)| *v != 0).collect();
        other.sort();
        let mut nonzero_cpu = 0;
        let mut nonzero_memory = 0;
        for c in &spec.containers {
            nonzero_cpu += container_request(c, "cpu").unwrap_or(DEFAULT_MILLI_CPU_REQUEST);
            nonzero_memory += container_request(c, "memory").unwrap_or(DEFAULT_MEMORY_REQUEST);
        }
        Demand {
            cpu,
            memory,
            other,
            nonzero_cpu,
            nonzero_memory,
            ports: host_ports(spec),
        }
    }
}

/// One node and what its pods hold.
#[derive(Debug, Clone)]
pub(crate) struct NodeInfo<'a> {
    /// The node.
    pub(crate) node: &'a Node,
    /// Its index in [`Cluster::nodes`].
    pub(crate) index: usize,
    /// Allocatable CPU (millicores), if the node reports it.
    pub(crate) alloc_cpu: Option<i128>,
    /// Allocatable memory (bytes), if reported.
    pub(crate) alloc_memory: Option<i128>,
    /// How many pods the node allows, if reported.
    pub(crate) alloc_pods: Option<i128>,
    /// Other allocatable resources.
    pub(crate) alloc_other: HashMap<String, i128>,
    /// What the node's pods request.
    pub(crate) used: Demand,
    /// Requests of other resources, by name.
    pub(crate) used_other: HashMap<String, i128>,
    /// How many pods hold room on the node.
    pub(crate) pod_count: i128,
}

impl<'a> NodeInfo<'a> {
    fn new(index: usize, node: &'a Node) -> Self {
        let allocatable = if node.status.allocatable.is_empty() {
            &node.status.capacity
        } else {
            &node.status.allocatable
        };
        let get = |r: &str| allocatable.get(r).and_then(|q| value_of(r, q));
        let alloc_other = allocatable
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "cpu" | "memory" | "pods"))
            .filter_map(|(k, q)| value_of(k, q).map(|v| (k.clone(), v)))
            .collect();
        NodeInfo {
            node,
            index,
            alloc_cpu: get("cpu"),
            alloc_memory: get("memory"),
            alloc_pods: get("pods"),
            alloc_other,
            used: Demand::default(),
            used_other: HashMap::new(),
            pod_count: 0,
        }
    }

    fn hold(&mut self, demand: &Demand) {
        self.used.cpu += demand.cpu;
        self.used.memory += demand.memory;
        self.used.nonzero_cpu += demand.nonzero_cpu;
        self.used.nonzero_memory += demand.nonzero_memory;
        for (k, v) in &demand.other {
            *self.used_other.entry(k.clone()).or_default() += v;
        }
        self.used.ports.extend(demand.ports.iter().cloned());
        self.pod_count += 1;
    }

    /// The node's name.
    pub(crate) fn name(&self) -> &'a str {
        self.node.metadata.name.as_str()
    }

    /// The value of the node's label `key`.
    pub(crate) fn label(&self, key: &str) -> Option<&'a str> {
        self.node.metadata.labels.get(key).map(String::as_str)
    }
}

/// A pod bound to a node of the cluster, with required affinity or
/// preferred terms.
#[derive(Debug, Clone)]
pub(crate) struct Placed<'a> {
    /// Its node (an index into [`Cluster::nodes`]).
    pub(crate) node: usize,
    /// Its pod affinity terms.
    pub(crate) terms: PodTerms<'a>,
}

/// The placed pods of one namespace with the same labels: InterPodAffinity
/// judges them alike, so a term is matched once per class, not once per
/// pod (the replicas of a Deployment are one class).
#[derive(Debug, Clone)]
pub(crate) struct Class<'a> {
    /// Their namespace.
    pub(crate) namespace: &'a str,
    /// Their labels.
    pub(crate) labels: &'a drover_api::Labels,
    /// How many of them run in each topology pair (every label of their
    /// nodes).
    pub(crate) counts: PairCounts<'a>,
    /// How many of them that are not being deleted run on each node (by
    /// index), for PodTopologySpread.
    pub(crate) per_node: FastMap<usize, i64>,
}

/// The placed pods' required anti-affinity terms that are alike (same
/// owner namespace and term): matched once against an incoming pod.
#[derive(Debug, Clone)]
pub(crate) struct AntiGroup<'a> {
    /// The term.
    pub(crate) term: Term<'a>,
    /// How many pods with the term run in each domain (by the value of the
    /// term's topology key).
    pub(crate) counts: FastMap<&'a str, i64>,
}

/// The nodes and the pods bound to them, for one scheduling pass.
#[derive(Debug, Clone)]
pub struct Cluster<'a> {
    pub(crate) nodes: Vec<NodeInfo<'a>>,
    pub(crate) index: FastMap<&'a str, usize>,
    /// The placed pods with required affinity or preferred terms.
    pub(crate) pods: Vec<Placed<'a>>,
    /// The placed pods by class.
    pub(crate) classes: Vec<Class<'a>>,
    class_index: FastMap<String, usize>,
    /// The placed pods' required anti-affinity terms, grouped.
    pub(crate) anti_groups: Vec<AntiGroup<'a>>,
    anti_index: FastMap<String, usize>,
    pub(crate) namespaces: NamespaceLabels,
    /// `percentageOfNodesToScore` (0: kube-scheduler's adaptive default).
    pub(crate) percentage: u32,
    /// Where the next cycle starts looking (kube-scheduler's
    /// `nextStartNodeIndex`).
    pub(crate) next_start: usize,
}

fn terminated(pod: &Pod) -> bool {
    matches!(
        pod.status.phase,
        Some(PodPhase::Succeeded) | Some(PodPhase::Failed)
    )
}

impl<'a> Cluster<'a> {
    /// The cluster of `nodes` and `pods` (every pod of every namespace;
    /// unbound, terminated pods and pods of unknown nodes are left out,
    /// except that an unbound pod nominated to a node holds its room).
    pub fn new(
        nodes: impl IntoIterator<Item = &'a Node>,
        pods: impl IntoIterator<Item = &'a Pod>,
    ) -> Self {
        let nodes: Vec<NodeInfo<'a>> = nodes
            .into_iter()
            .enumerate()
            .map(|(i, n)| NodeInfo::new(i, n))
            .collect();
        let mut index = FastMap::with_capacity_and_hasher(nodes.len(), Default::default());
        for (i, n) in nodes.iter().enumerate() {
            index.insert(n.name(), i);
        }
        let mut cluster = Cluster {
            nodes,
            index,
            pods: Vec::new(),
            classes: Vec::new(),
            class_index: FastMap::default(),
            anti_groups: Vec::new(),
            anti_index: FastMap::default(),
            namespaces: NamespaceLabels::new(),
            percentage: 0,
            next_start: 0,
        };
        for pod in pods {
            if terminated(pod) {
                continue;
            }
            if pod.spec.node_name.is_empty() {
                let nominated = pod.status.nominated_node_name.as_str();
                if let Some(&i) = cluster.index.get(nominated) {
                    cluster.nodes[i].hold(&Demand::of(&pod.spec));
                }
                continue;
            }
            if let Some(&i) = cluster.index.get(pod.spec.node_name.as_str()) {
                cluster.add(pod, i);
            }
        }
        cluster
    }

    /// The labels of each namespace, for the terms' namespace selectors
    /// (without them, a namespace has no labels).
    pub fn with_namespaces(mut self, namespaces: NamespaceLabels) -> Self {
        self.namespaces = namespaces;
        self
    }

    /// kube-scheduler's `percentageOfNodesToScore`: a cycle stops looking
    /// once it has found this share of the nodes feasible (at least 100
    /// nodes; all of them below 100). 0, the default, is kube-scheduler's
    /// adaptive share: 50 % less 1 % per 125 nodes, at least 5 %; 100
    /// looks at every node. Each cycle of a batch starts where the
    /// previous one stopped, so every node gets its turn.
    pub fn with_percentage_of_nodes_to_score(mut self, percent: u32) -> Self {
        self.percentage = percent.min(100);
        self
    }

    /// How many feasible nodes a cycle looks for.
    pub(crate) fn nodes_to_find(&self) -> usize {
        const MIN_NODES: usize = 100;
        let n = self.nodes.len();
        if n < MIN_NODES {
            return n;
        }
        let percent = if self.percentage == 0 {
            50usize.saturating_sub(n / 125).max(5)
        } else {
            self.percentage as usize
        };
        (n * percent / 100).max(MIN_NODES)
    }

    fn add(&mut self, pod: &'a Pod, node: usize) {
        let terms = PodTerms::of(pod);
        let node_ref: &'a Node = self.nodes[node].node;
        let node_labels = &node_ref.metadata.labels;
        // Its class.
        let ns = pod.metadata.namespace.as_str();
        let mut key = String::from(ns);
        for (k, v) in &pod.metadata.labels {
            key.push('\0');
            key.push_str(k);
            key.push('=');
            key.push_str(v);
        }
        let c = *self.class_index.entry(key).or_insert_with(|| {
            self.classes.push(Class {
                namespace: ns,
                labels: &pod.metadata.labels,
                counts: PairCounts::default(),
                per_node: FastMap::default(),
            });
            self.classes.len() - 1
        });
        for (k, v) in node_labels {
            self.classes[c].counts.add(k, v, 1);
        }
        if pod.metadata.deletion_timestamp.is_none() {
            *self.classes[c].per_node.entry(node).or_default() += 1;
        }
        // Its required anti-affinity terms.
        if let Some(anti) = pod
            .spec
            .affinity
            .as_ref()
            .and_then(|a| a.pod_anti_affinity.as_ref())
        {
            for (t, compiled) in anti
                .required_during_scheduling_ignored_during_execution
                .iter()
                .zip(&terms.anti_affinity)
            {
                let key = format!("{ns}\0{t:?}");
                let g = *self.anti_index.entry(key).or_insert_with(|| {
                    self.anti_groups.push(AntiGroup {
                        term: compiled.clone(),
                        counts: FastMap::default(),
                    });
                    self.anti_groups.len() - 1
                });
                if let Some(value) = node_labels.get(compiled.topology_key) {
                    *self.anti_groups[g].counts.entry(value).or_default() += 1;
                }
            }
        }
        self.nodes[node].hold(&Demand::of(&pod.spec));
        // What InterPodAffinity's score reads of placed pods.
        if !terms.affinity.is_empty()
            || !terms.preferred_affinity.is_empty()
            || !terms.preferred_anti_affinity.is_empty()
        {
            self.pods.push(Placed { node, terms });
        }
    }

    /// Counts `pod` as bound to the node `node` (a decision of this pass),
    /// so that later decisions see it. `false` when there is no such node.
    pub fn place(&mut self, pod: &'a Pod, node: &str) -> bool {
        match self.index.get(node) {
            Some(&i) => {
                self.add(pod, i);
                true
            }
            None => false,
        }
    }

    /// How many nodes there are.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The names of the nodes, in the order given.
    pub fn node_names(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.nodes.iter().map(|n| n.name())
    }

    /// The labels of a pod's namespace.
    pub(crate) fn namespace_labels(&self, namespace: &str) -> &drover_api::Labels {
        namespace_labels(&self.namespaces, namespace)
    }
}
