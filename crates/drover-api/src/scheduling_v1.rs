//! The `scheduling.k8s.io/v1` resource drover serves: [`PriorityClass`],
//! and the two classes every cluster has built in.

use crate::meta::ObjectMeta;

api_struct! {
    @resource "scheduling.k8s.io", "scheduling.k8s.io/v1", "PriorityClass", namespaced = false;
    /// A name for a pod priority: pods name it in `priorityClassName`; when
    /// a daemon pod does not fit a node, pods of lower priority there are
    /// preempted to make room, never those of higher or equal priority.
    pub struct PriorityClass {
        /// Its name (cluster-scoped).
        metadata: ObjectMeta = "metadata",
        /// The priority; user classes at most 1,000,000,000.
        value: i32 = "value",
        /// Pods that name no class get this one's value (at most one class).
        global_default: bool = "globalDefault",
        /// What it is for.
        description: String = "description",
        /// `PreemptLowerPriority` (the default) or `Never`.
        preemption_policy: Option<String> = "preemptionPolicy",
    }
}

/// The built-in class for pods a node cannot do without (its value).
pub const SYSTEM_NODE_CRITICAL: (&str, i32) = ("system-node-critical", 2_000_001_000);
/// The built-in class for pods the cluster cannot do without (its value).
pub const SYSTEM_CLUSTER_CRITICAL: (&str, i32) = ("system-cluster-critical", 2_000_000_000);
/// The highest value a user's class may have.
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i32 = 1_000_000_000;
/// `preemptionPolicy` that never preempts.
pub const PREEMPT_NEVER: &str = "Never";

/// The priority of each class name: the built-in classes and the given
/// ones, and the priority of a pod that names none, as Kubernetes'
/// priority admission resolves them: the global default class's value and
/// `preemptionPolicy` (the lowest value if several are global defaults),
/// or 0 and `PreemptLowerPriority` when there is none.
#[derive(Debug, Clone, Default)]
pub struct Priorities {
    by_name: std::collections::HashMap<String, (i32, bool)>,
    /// The global default class's (value, may preempt), if any.
    default: Option<(i32, bool)>,
}

impl Priorities {
    /// The priorities of the built-in classes and `classes`.
    pub fn new<'a>(classes: impl IntoIterator<Item = &'a PriorityClass>) -> Self {
        let mut by_name = std::collections::HashMap::new();
        for (name, value) in [SYSTEM_NODE_CRITICAL, SYSTEM_CLUSTER_CRITICAL] {
            by_name.insert(name.to_string(), (value, true));
        }
        let mut default: Option<(i32, bool)> = None;
        for c in classes {
            let preempts = c.preemption_policy.as_deref() != Some(PREEMPT_NEVER);
            by_name.insert(c.metadata.name.clone(), (c.value, preempts));
            if c.global_default && default.is_none_or(|(value, _)| c.value < value) {
                default = Some((c.value, preempts));
            }
        }
        Priorities { by_name, default }
    }

    /// The priority of a pod that names `class` (empty: none), and whether
    /// it may preempt; `None` for a class that does not exist.
    pub fn of(&self, class: &str) -> Option<(i32, bool)> {
        if class.is_empty() {
            return Some(self.default.unwrap_or((0, true)));
        }
        self.by_name.get(class).copied()
    }
}

#[cfg(test)]
#[path = "scheduling_v1_tests.rs"]
mod tests;
