//! The core (`v1`) types that place a pod relative to other pods: pod
//! affinity and anti-affinity (`spec.affinity.podAffinity`,
//! `spec.affinity.podAntiAffinity`) and topology spread constraints
//! (`spec.topologySpreadConstraints`). Field names and shapes are
//! Kubernetes'; the scheduler (`drover_controller::schedule`) acts on them.

use crate::meta::LabelSelector;
use crate::serde_util::EnumField;

api_struct! {
    /// Pod affinity: the pod runs in the same topology domain (node, zone…)
    /// as pods that match its terms.
    pub struct PodAffinity {
        /// Terms every one of which must hold where the pod is scheduled
        /// (a node with a matching pod in the term's topology domain). Not
        /// re-checked once the pod runs.
        required_during_scheduling_ignored_during_execution: Vec<PodAffinityTerm> =
            "requiredDuringSchedulingIgnoredDuringExecution",
        /// Weighted terms: the scheduler favours nodes whose domain has
        /// matching pods, by the sum of the weights of the terms that hold.
        preferred_during_scheduling_ignored_during_execution: Vec<WeightedPodAffinityTerm> =
            "preferredDuringSchedulingIgnoredDuringExecution",
    }
}

api_struct! {
    /// Pod anti-affinity: the pod keeps out of topology domains (node,
    /// zone…) that run pods matching its terms.
    pub struct PodAntiAffinity {
        /// Terms none of which may be broken where the pod is scheduled (no
        /// matching pod in the term's topology domain). Not re-checked once
        /// the pod runs.
        required_during_scheduling_ignored_during_execution: Vec<PodAffinityTerm> =
            "requiredDuringSchedulingIgnoredDuringExecution",
        /// Weighted terms: the scheduler avoids nodes whose domain has
        /// matching pods, by the sum of the weights of the terms broken.
        preferred_during_scheduling_ignored_during_execution: Vec<WeightedPodAffinityTerm> =
            "preferredDuringSchedulingIgnoredDuringExecution",
    }
}

api_struct! {
    /// A set of pods (by label selector and namespaces) and a topology key:
    /// the term concerns the pods of the set that run on nodes with the
    /// same value of that node label as the candidate node.
    pub struct PodAffinityTerm {
        /// Which pods the term is about; an absent selector matches no pod,
        /// an empty one every pod.
        label_selector: Option<LabelSelector> = "labelSelector",
        /// The namespaces of those pods; with neither this nor
        /// `namespaceSelector`, the pod's own namespace.
        namespaces: Vec<String> = "namespaces",
        /// The node label whose value is the topology domain, e.g.
        /// `kubernetes.io/hostname` (one node) or
        /// `topology.kubernetes.io/zone`. Required.
        topology_key: String = "topologyKey",
        /// Namespaces by their labels, added to `namespaces`; an empty
        /// selector matches every namespace.
        namespace_selector: Option<LabelSelector> = "namespaceSelector",
        /// Keys of the incoming pod's labels added to the selector as
        /// `key in (value)`; kept, not yet acted on by drover.
        match_label_keys: Vec<String> = "matchLabelKeys",
        /// Keys of the incoming pod's labels added to the selector as
        /// `key notin (value)`; kept, not yet acted on by drover.
        mismatch_label_keys: Vec<String> = "mismatchLabelKeys",
    }
}

api_struct! {
    /// A pod affinity term with a weight, for preferences.
    pub struct WeightedPodAffinityTerm {
        /// 1-100: what the term adds to (affinity) or takes from
        /// (anti-affinity) a node's score when it holds there.
        weight: i32 = "weight",
        /// The term.
        pod_affinity_term: PodAffinityTerm = "podAffinityTerm",
    }
}

api_struct! {
    /// How pods that match a selector spread across topology domains
    /// (nodes, zones…): the difference between the domain with the most
    /// of them and the one with the fewest stays within `maxSkew`.
    pub struct TopologySpreadConstraint {
        /// The largest difference allowed between the number of matching
        /// pods in a domain and the smallest number in any eligible domain
        /// (at least 1).
        max_skew: i32 = "maxSkew",
        /// The node label whose value is the domain, e.g.
        /// `topology.kubernetes.io/zone`. Nodes without it are not
        /// counted, and a pod is never placed on one under `DoNotSchedule`.
        topology_key: String = "topologyKey",
        /// `DoNotSchedule` (a hard rule: a node that would break the skew
        /// is filtered out) or `ScheduleAnyway` (a preference: nodes that
        /// reduce the skew score higher).
        when_unsatisfiable: Option<UnsatisfiableConstraintAction> =
            "whenUnsatisfiable" as EnumField<UnsatisfiableConstraintAction>,
        /// The pods counted (in the pod's namespace); an absent selector
        /// matches no pod.
        label_selector: Option<LabelSelector> = "labelSelector",
        /// The number of eligible domains below which the smallest count
        /// is taken as 0 (only with `DoNotSchedule`; at least 1).
        min_domains: Option<i32> = "minDomains",
        /// `Honor` (the default): only nodes that match the pod's
        /// nodeSelector and required node affinity count as domains;
        /// `Ignore`: every node does.
        node_affinity_policy: Option<NodeInclusionPolicy> =
            "nodeAffinityPolicy" as EnumField<NodeInclusionPolicy>,
        /// `Honor`: only nodes whose taints the pod tolerates count as
        /// domains; `Ignore` (the default): every node does.
        node_taints_policy: Option<NodeInclusionPolicy> =
            "nodeTaintsPolicy" as EnumField<NodeInclusionPolicy>,
        /// Keys of the incoming pod's labels whose values are added to the
        /// selector (`key in (value)`), e.g. `pod-template-hash` to spread
        /// each revision on its own.
        match_label_keys: Vec<String> = "matchLabelKeys",
    }
}

string_enum! {
    /// What the scheduler does with a pod that would break a topology
    /// spread constraint.
    pub enum UnsatisfiableConstraintAction {
        /// Do not place the pod where the skew would exceed `maxSkew`.
        DoNotSchedule = "DoNotSchedule",
        /// Place it anyway, preferring nodes that reduce the skew.
        ScheduleAnyway = "ScheduleAnyway",
    }
}

string_enum! {
    /// Whether a node inclusion rule of a topology spread constraint
    /// applies.
    pub enum NodeInclusionPolicy {
        /// The rule applies.
        Honor = "Honor",
        /// The rule is ignored.
        Ignore = "Ignore",
    }
}
