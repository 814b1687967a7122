//! kube-scheduler's default profile, brute force: for one pending pod, the
//! reasons each node is not feasible and the plugin scores of each
//! feasible node. Written from the Kubernetes documentation ("Kubernetes
//! Scheduler", "Assigning Pods to Nodes" with inter-pod affinity, "Pod
//! Topology Spread Constraints", "Taints and Tolerations", "Resource
//! Management for Pods and Containers", "Scheduler Configuration" for the
//! default plugins and weights) and the plugins' sources in
//! `pkg/scheduler/framework/plugins` (reason strings, normalisations),
//! never from drover's scheduler: every rule is re-derived here from the
//! whole cluster for each node, with no index, no precomputed pair counts.
//!
//! Filter order and reasons: NodeUnschedulable, NodeName, TaintToleration,
//! NodeAffinity, NodePorts, NodeResourcesFit, PodTopologySpread,
//! InterPodAffinity; the first plugin that rejects a node gives its
//! reasons. Weights: TaintToleration 3, NodeAffinity 2, PodTopologySpread
//! 2, InterPodAffinity 2, NodeResourcesFit 1, BalancedAllocation 1.

use std::collections::{BTreeMap, BTreeSet};

use drover_api::{
    LabelSelector, LabelSelectorOperator, LabelSelectorRequirement, Labels, Node,
    NodeInclusionPolicy, Pod, PodAffinityTerm, PodPhase, TaintEffect,
    UnsatisfiableConstraintAction,
};

use super::affinity::{pod_spec_selects, term_holds};
use super::labels::matches_opt;
use super::tolerations::{tolerated, tolerates};

/// The cluster as the scheduler sees it.
pub struct World<'a> {
    pub nodes: &'a [Node],
    pub pods: &'a [Pod],
    pub namespaces: &'a BTreeMap<String, Labels>,
}

const HOSTNAME: &str = "kubernetes.io/hostname";

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.get(key).map(String::as_str)
}

/// Quantities as the generator writes them: `500m` or whole cores;
/// `128Mi`, `1Gi` or bytes.
fn cpu_millis(q: &str) -> i128 {
    match q.strip_suffix('m') {
        Some(m) => m.parse().expect("millis"),
        None => q.parse::<i128>().expect("cores") * 1000,
    }
}

fn bytes(q: &str) -> i128 {
    for (suffix, factor) in [("Ki", 1i128 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30)] {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<i128>().expect("a number") * factor;
        }
    }
    q.parse().expect("bytes")
}

fn amount(resource: &str, q: &str) -> i128 {
    if resource == "cpu" {
        cpu_millis(q)
    } else {
        bytes(q)
    }
}

/// A container's request of `resource`: its request, else its limit.
fn container_request(c: &drover_api::Container, resource: &str) -> Option<i128> {
    let r = &c.resources;
    let q = r.requests.get(resource).or(r.limits.get(resource))?;
    Some(amount(resource, &q.0))
}

fn pod_request(pod: &Pod, resource: &str) -> i128 {
    let mut sum = 0;
    for c in &pod.spec.containers {
        sum += container_request(c, resource).unwrap_or(0);
    }
    sum
}

/// For scoring: a container that requests nothing counts 100m / 200Mi.
fn pod_nonzero(pod: &Pod, resource: &str) -> i128 {
    let default = if resource == "cpu" { 100 } else { 200 << 20 };
    let mut sum = 0;
    for c in &pod.spec.containers {
        sum += container_request(c, resource).unwrap_or(default);
    }
    sum
}

fn allocatable(node: &Node, resource: &str) -> i128 {
    let q = node
        .status
        .allocatable
        .get(resource)
        .expect("generated nodes report cpu, memory and pods");
    if resource == "pods" {
        q.0.parse().expect("pods")
    } else {
        amount(resource, &q.0)
    }
}

impl World<'_> {
    /// The pods that hold room on `node`: bound to it and not finished.
    pub fn pods_on(&self, node: &Node) -> Vec<&Pod> {
        let mut out = Vec::new();
        for p in self.pods {
            let finished = matches!(
                p.status.phase,
                Some(PodPhase::Succeeded) | Some(PodPhase::Failed)
            );
            if !finished && p.spec.node_name == node.metadata.name {
                out.push(p);
            }
        }
        out
    }

    fn ns_labels(&self, ns: &str) -> Labels {
        self.namespaces.get(ns).cloned().unwrap_or_default()
    }

    /// Whether `target` is among the pods `term` (of a pod in `owner_ns`)
    /// is about.
    fn term_selects(&self, term: &PodAffinityTerm, owner_ns: &str, target: &Pod) -> bool {
        let ns = &target.metadata.namespace;
        let in_ns = if term.namespaces.is_empty() && term.namespace_selector.is_none() {
            ns == owner_ns
        } else {
            term.namespaces.iter().any(|n| n == ns)
                || matches_opt(term.namespace_selector.as_ref(), &self.ns_labels(ns))
        };
        in_ns && matches_opt(term.label_selector.as_ref(), &target.metadata.labels)
    }

    fn same_domain(&self, a: &Node, b: &Node, key: &str) -> bool {
        match (label(a, key), label(b, key)) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        }
    }

    fn node_of(&self, pod: &Pod) -> Option<&Node> {
        self.nodes
            .iter()
            .find(|n| n.metadata.name == pod.spec.node_name)
    }

    /// Every live bound pod with its node.
    fn placed(&self) -> Vec<(&Pod, &Node)> {
        let mut out = Vec::new();
        for n in self.nodes {
            for p in self.pods_on(n) {
                out.push((p, n));
            }
        }
        out
    }
}

fn no_schedule_taints_tolerated(pod: &Pod, node: &Node) -> bool {
    node.spec.taints.iter().all(|t| {
        !matches!(
            t.effect,
            Some(TaintEffect::NoSchedule) | Some(TaintEffect::NoExecute)
        ) || tolerated(t, &pod.spec.tolerations)
    })
}

fn ports_conflict(pod: &Pod, others: &[&Pod]) -> bool {
    let norm = |ip: &str| {
        if ip.is_empty() {
            "0.0.0.0".to_string()
        } else {
            ip.to_string()
        }
    };
    let ports = |p: &Pod| {
        let mut out = Vec::new();
        for c in &p.spec.containers {
            for port in &c.ports {
                if let Some(h) = port.host_port.filter(|h| *h > 0) {
                    let proto = port
                        .protocol
                        .as_ref()
                        .map_or("TCP".to_string(), |x| x.as_str().to_string());
                    out.push((h, proto, norm(&port.host_ip)));
                }
            }
        }
        out
    };
    let mine = ports(pod);
    for o in others {
        for (h, proto, ip) in ports(o) {
            for (mh, mproto, mip) in &mine {
                let ips = ip == "0.0.0.0" || mip == "0.0.0.0" || &ip == mip;
                if h == *mh && proto == *mproto && ips {
                    return true;
                }
            }
        }
    }
    false
}

/// The selector a spread constraint counts: its labelSelector plus, for
/// each matchLabelKeys key the pod has, `key in (value)`.
fn spread_selector(c: &drover_api::TopologySpreadConstraint, pod: &Pod) -> Option<LabelSelector> {
    let mut s = c.label_selector.clone()?;
    for key in &c.match_label_keys {
        if let Some(v) = pod.metadata.labels.get(key) {
            s.match_expressions.push(LabelSelectorRequirement {
                key: key.clone(),
                operator: Some(LabelSelectorOperator::In),
                values: vec![v.clone()],
                ..Default::default()
            });
        }
    }
    Some(s)
}

fn counts_in_spread(
    world: &World<'_>,
    pod: &Pod,
    selector: Option<&LabelSelector>,
    node: &Node,
) -> i64 {
    let mut n = 0;
    for p in world.pods_on(node) {
        if p.metadata.deletion_timestamp.is_none()
            && p.metadata.namespace == pod.metadata.namespace
            && matches_opt(selector, &p.metadata.labels)
        {
            n += 1;
        }
    }
    n
}

fn included(c: &drover_api::TopologySpreadConstraint, pod: &Pod, node: &Node) -> bool {
    let honor_affinity = c.node_affinity_policy != Some(NodeInclusionPolicy::Ignore);
    let honor_taints = c.node_taints_policy == Some(NodeInclusionPolicy::Honor);
    (!honor_affinity || pod_spec_selects(&pod.spec, node))
        && (!honor_taints || no_schedule_taints_tolerated(pod, node))
}

fn constraints(
    pod: &Pod,
    action: UnsatisfiableConstraintAction,
) -> Vec<&drover_api::TopologySpreadConstraint> {
    pod.spec
        .topology_spread_constraints
        .iter()
        .filter(|c| c.when_unsatisfiable.as_ref() == Some(&action))
        .collect()
}

fn spread_reason(world: &World<'_>, pod: &Pod, node: &Node) -> Option<String> {
    let hard = constraints(pod, UnsatisfiableConstraintAction::DoNotSchedule);
    let has_all = |n: &Node| hard.iter().all(|c| label(n, &c.topology_key).is_some());
    for c in &hard {
        let key = c.topology_key.as_str();
        let Some(value) = label(node, key) else {
            return Some(
                "node(s) didn't match pod topology spread constraints (missing required label)"
                    .into(),
            );
        };
        let selector = spread_selector(c, pod);
        // Domains: the values of the nodes that count, with their pods.
        let mut domains: BTreeMap<&str, i64> = BTreeMap::new();
        for n in world.nodes {
            if has_all(n) && included(c, pod, n) {
                let v = label(n, key).unwrap_or_default();
                *domains.entry(v).or_default() +=
                    counts_in_spread(world, pod, selector.as_ref(), n);
            }
        }
        let mut min = domains
            .values()
            .copied()
            .min()
            .unwrap_or(i64::from(i32::MAX));
        if let Some(m) = c.min_domains {
            if (domains.len() as i64) < i64::from(m) {
                min = 0;
            }
        }
        let own = i64::from(matches_opt(selector.as_ref(), &pod.metadata.labels));
        let here = domains.get(value).copied().unwrap_or(0);
        if here + own - min > i64::from(c.max_skew) {
            return Some("node(s) didn't match pod topology spread constraints".into());
        }
    }
    None
}

fn required_terms(pod: &Pod, anti: bool) -> Vec<&PodAffinityTerm> {
    let Some(a) = &pod.spec.affinity else {
        return Vec::new();
    };
    let list = if anti {
        a.pod_anti_affinity
            .as_ref()
            .map(|x| &x.required_during_scheduling_ignored_during_execution)
    } else {
        a.pod_affinity
            .as_ref()
            .map(|x| &x.required_during_scheduling_ignored_during_execution)
    };
    list.map(|l| l.iter().collect()).unwrap_or_default()
}

fn preferred_terms(pod: &Pod, anti: bool) -> Vec<(i64, &PodAffinityTerm)> {
    let Some(a) = &pod.spec.affinity else {
        return Vec::new();
    };
    let list = if anti {
        a.pod_anti_affinity
            .as_ref()
            .map(|x| &x.preferred_during_scheduling_ignored_during_execution)
    } else {
        a.pod_affinity
            .as_ref()
            .map(|x| &x.preferred_during_scheduling_ignored_during_execution)
    };
    list.map(|l| {
        l.iter()
            .filter(|w| w.weight != 0)
            .map(|w| (i64::from(w.weight), &w.pod_affinity_term))
            .collect()
    })
    .unwrap_or_default()
}

fn inter_pod_reason(world: &World<'_>, pod: &Pod, node: &Node) -> Option<String> {
    let ns = pod.metadata.namespace.as_str();
    let placed = world.placed();
    let affinity = required_terms(pod, false);
    if !affinity.is_empty() {
        let matches_all = |q: &Pod| affinity.iter().all(|t| world.term_selects(t, ns, q));
        let mut all_hold = true;
        for t in &affinity {
            if label(node, &t.topology_key).is_none() {
                return Some("node(s) didn't match pod affinity rules".into());
            }
            let found = placed
                .iter()
                .any(|(q, m)| matches_all(q) && world.same_domain(m, node, &t.topology_key));
            all_hold = all_hold && found;
        }
        if !all_hold {
            let anyone = placed.iter().any(|(q, m)| {
                matches_all(q) && affinity.iter().any(|t| label(m, &t.topology_key).is_some())
            });
            let itself = affinity.iter().all(|t| world.term_selects(t, ns, pod));
            if anyone || !itself {
                return Some("node(s) didn't match pod affinity rules".into());
            }
        }
    }
    for t in required_terms(pod, true) {
        if placed.iter().any(|(q, m)| {
            world.term_selects(t, ns, q) && world.same_domain(m, node, &t.topology_key)
        }) {
            return Some("node(s) didn't match pod anti-affinity rules".into());
        }
    }
    for (q, m) in &placed {
        for t in required_terms(q, true) {
            if world.term_selects(t, &q.metadata.namespace, pod)
                && world.same_domain(m, node, &t.topology_key)
            {
                return Some("node(s) didn't satisfy existing pods anti-affinity rules".into());
            }
        }
    }
    None
}

/// Why `pod` may not go to `node` (empty: it may), in kube-scheduler's
/// words.
pub fn reasons(world: &World<'_>, pod: &Pod, node: &Node) -> Vec<String> {
    let spec = &pod.spec;
    if node.spec.unschedulable {
        let cordon = drover_api::Taint {
            key: "node.kubernetes.io/unschedulable".into(),
            effect: Some(TaintEffect::NoSchedule),
            ..Default::default()
        };
        if !spec.tolerations.iter().any(|t| tolerates(t, &cordon)) {
            return vec!["node(s) were unschedulable".into()];
        }
    }
    if !spec.node_name.is_empty() && spec.node_name != node.metadata.name {
        return vec!["node(s) didn't match the requested node name".into()];
    }
    for t in &node.spec.taints {
        let hard = matches!(
            t.effect,
            Some(TaintEffect::NoSchedule) | Some(TaintEffect::NoExecute)
        );
        if hard && !tolerated(t, &spec.tolerations) {
            return vec![format!(
                "node(s) had untolerated taint {{{}: {}}}",
                t.key, t.value
            )];
        }
    }
    if !pod_spec_selects(spec, node) {
        return vec!["node(s) didn't match Pod's node affinity/selector".into()];
    }
    let here = world.pods_on(node);
    if ports_conflict(pod, &here) {
        return vec!["node(s) didn't have free ports for the requested pod ports".into()];
    }
    let mut fit = Vec::new();
    if here.len() as i128 + 1 > allocatable(node, "pods") {
        fit.push("Too many pods".to_string());
    }
    for r in ["cpu", "memory"] {
        let want = pod_request(pod, r);
        let used: i128 = here.iter().map(|p| pod_request(p, r)).sum();
        if want > 0 && want > allocatable(node, r) - used {
            fit.push(format!("Insufficient {r}"));
        }
    }
    if !fit.is_empty() {
        return fit;
    }
    if let Some(r) = spread_reason(world, pod, node) {
        return vec![r];
    }
    if let Some(r) = inter_pod_reason(world, pod, node) {
        return vec![r];
    }
    Vec::new()
}

/// Each plugin's normalised score of each feasible node, in the order
/// TaintToleration, NodeAffinity, PodTopologySpread, InterPodAffinity,
/// NodeResourcesFit, BalancedAllocation.
pub fn scores(world: &World<'_>, pod: &Pod, feasible: &[&Node]) -> BTreeMap<String, [i64; 6]> {
    let mut out: BTreeMap<String, [i64; 6]> = BTreeMap::new();
    for n in feasible {
        out.insert(n.metadata.name.clone(), [0; 6]);
    }
    let spec = &pod.spec;
    // TaintToleration: untolerated PreferNoSchedule taints, fewer is better.
    let raw: Vec<i64> = feasible
        .iter()
        .map(|n| {
            n.spec
                .taints
                .iter()
                .filter(|t| t.effect == Some(TaintEffect::PreferNoSchedule))
                .filter(|t| {
                    !spec.tolerations.iter().any(|tol| {
                        (tol.effect.is_none() || tol.effect == Some(TaintEffect::PreferNoSchedule))
                            && tolerates(tol, t)
                    })
                })
                .count() as i64
        })
        .collect();
    let max = raw.iter().copied().max().unwrap_or(0);
    for (n, r) in feasible.iter().zip(&raw) {
        let v = if max == 0 { 100 } else { 100 - 100 * r / max };
        out.get_mut(&n.metadata.name).unwrap()[0] = v;
    }
    // NodeAffinity: weights of matching preferred terms, scaled to 100.
    let preferred = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .map(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .clone()
        })
        .unwrap_or_default();
    let raw: Vec<i64> = feasible
        .iter()
        .map(|n| {
            preferred
                .iter()
                .filter(|t| t.weight != 0 && term_holds(&t.preference, n))
                .map(|t| i64::from(t.weight))
                .sum()
        })
        .collect();
    let max = raw.iter().copied().max().unwrap_or(0);
    for (n, r) in feasible.iter().zip(&raw) {
        out.get_mut(&n.metadata.name).unwrap()[1] = if max == 0 { 0 } else { 100 * r / max };
    }
    // PodTopologySpread (ScheduleAnyway).
    let soft = constraints(pod, UnsatisfiableConstraintAction::ScheduleAnyway);
    if !soft.is_empty() {
        let has_all = |n: &Node| soft.iter().all(|c| label(n, &c.topology_key).is_some());
        let scored: Vec<&&Node> = feasible.iter().filter(|n| has_all(n)).collect();
        let mut raw: BTreeMap<String, i64> = BTreeMap::new();
        for n in &scored {
            let mut total = 0.0;
            for c in &soft {
                let key = c.topology_key.as_str();
                let selector = spread_selector(c, pod);
                let (count, domains) = if key == HOSTNAME {
                    (
                        counts_in_spread(world, pod, selector.as_ref(), n),
                        scored.len(),
                    )
                } else {
                    let value = label(n, key).unwrap_or_default();
                    let mut count = 0;
                    for m in world.nodes {
                        if has_all(m) && included(c, pod, m) && label(m, key) == Some(value) {
                            count += counts_in_spread(world, pod, selector.as_ref(), m);
                        }
                    }
                    let values: BTreeSet<&str> =
                        scored.iter().filter_map(|m| label(m, key)).collect();
                    (count, values.len())
                };
                total += count as f64 * ((domains + 2) as f64).ln() + f64::from(c.max_skew - 1);
            }
            raw.insert(n.metadata.name.clone(), total.round() as i64);
        }
        let max = raw.values().copied().max().unwrap_or(0).max(0);
        let min = raw.values().copied().min().unwrap_or(0);
        for n in feasible {
            let v = match raw.get(&n.metadata.name) {
                None => 0,
                Some(_) if max == 0 => 100,
                Some(s) => 100 * (max + min - s) / max,
            };
            out.get_mut(&n.metadata.name).unwrap()[2] = v;
        }
    }
    // InterPodAffinity: preferred terms of both sides, required affinity
    // of placed pods at weight 1, over the domains of the placed pods.
    let ns = pod.metadata.namespace.as_str();
    let placed = world.placed();
    let raw: Vec<i64> = feasible
        .iter()
        .map(|n| {
            let mut s = 0;
            for (q, m) in &placed {
                for (w, t) in preferred_terms(pod, false) {
                    if world.term_selects(t, ns, q) && world.same_domain(m, n, &t.topology_key) {
                        s += w;
                    }
                }
                for (w, t) in preferred_terms(pod, true) {
                    if world.term_selects(t, ns, q) && world.same_domain(m, n, &t.topology_key) {
                        s -= w;
                    }
                }
                let qns = q.metadata.namespace.as_str();
                let mut theirs: Vec<(i64, &PodAffinityTerm, i64)> = Vec::new();
                for t in required_terms(q, false) {
                    theirs.push((1, t, 1));
                }
                for (w, t) in preferred_terms(q, false) {
                    theirs.push((w, t, 1));
                }
                for (w, t) in preferred_terms(q, true) {
                    theirs.push((w, t, -1));
                }
                for (w, t, sign) in theirs {
                    if world.term_selects(t, qns, pod) && world.same_domain(m, n, &t.topology_key) {
                        s += sign * w;
                    }
                }
            }
            s
        })
        .collect();
    let (min, max) = (
        raw.iter().copied().min().unwrap_or(0),
        raw.iter().copied().max().unwrap_or(0),
    );
    for (n, r) in feasible.iter().zip(&raw) {
        let v = if max > min {
            (100.0 * ((r - min) as f64 / (max - min) as f64)) as i64
        } else {
            0
        };
        out.get_mut(&n.metadata.name).unwrap()[3] = v;
    }
    // NodeResourcesFit (LeastAllocated) and BalancedAllocation.
    for n in feasible {
        let here = world.pods_on(n);
        let mut least = 0;
        let mut fractions = Vec::new();
        for r in ["cpu", "memory"] {
            let alloc = allocatable(n, r);
            let used: i128 =
                here.iter().map(|p| pod_nonzero(p, r)).sum::<i128>() + pod_nonzero(pod, r);
            least += if used > alloc {
                0
            } else {
                (alloc - used) * 100 / alloc
            };
            let real: i128 =
                here.iter().map(|p| pod_request(p, r)).sum::<i128>() + pod_request(pod, r);
            fractions.push((real as f64 / alloc as f64).min(1.0));
        }
        let best_effort = pod_request(pod, "cpu") == 0 && pod_request(pod, "memory") == 0;
        let balanced = if best_effort {
            0
        } else {
            ((1.0 - ((fractions[0] - fractions[1]) / 2.0).abs()) * 100.0) as i64
        };
        let s = out.get_mut(&n.metadata.name).unwrap();
        s[4] = (least / 2) as i64;
        s[5] = balanced;
    }
    out
}

/// The weighted total of [`scores`].
pub fn total(s: &[i64; 6]) -> i64 {
    3 * s[0] + 2 * s[1] + 2 * s[2] + 2 * s[3] + s[4] + s[5]
}

/// Whether the pod is bound to a node that exists.
pub fn on_a_node<'a>(world: &'a World<'_>, pod: &Pod) -> Option<&'a Node> {
    world.node_of(pod)
}
