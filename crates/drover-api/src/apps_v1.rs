//! The `apps/v1` resources drover serves: [`DaemonSet`] and
//! [`ControllerRevision`].

use crate::core_v1::{ConditionStatus, PodTemplateSpec};
use crate::meta::{IntOrString, LabelSelector, ObjectMeta};
use crate::serde_util::EnumField;

api_struct! {
    @resource "apps", "apps/v1", "DaemonSet", namespaced = true;
    /// One pod on every eligible node.
    pub struct DaemonSet {
        /// Name, namespace, labels, generation.
        metadata: ObjectMeta = "metadata",
        /// Selector, pod template and update strategy.
        spec: DaemonSetSpec = "spec",
        /// The Kubernetes counters, written by the controller.
        status: DaemonSetStatus = "status",
    }
}

api_struct! {
    /// Desired state of a DaemonSet.
    pub struct DaemonSetSpec {
        /// Selects the DaemonSet's pods; required, non-empty, must match the
        /// template's labels, and immutable.
        selector: Option<LabelSelector> = "selector",
        /// The pod every eligible node gets.
        template: PodTemplateSpec = "template",
        /// How pods are replaced when the template changes.
        update_strategy: DaemonSetUpdateStrategy = "updateStrategy",
        /// Seconds a new pod must be ready before it counts as available.
        min_ready_seconds: Option<i32> = "minReadySeconds",
        /// Old ControllerRevisions kept for rollback (default 10).
        revision_history_limit: Option<i32> = "revisionHistoryLimit",
    }
}

api_struct! {
    /// How a DaemonSet's pods are updated.
    pub struct DaemonSetUpdateStrategy {
        /// `RollingUpdate` (the default) or `OnDelete`.
        r#type: Option<DaemonSetUpdateStrategyType> = "type" as EnumField<DaemonSetUpdateStrategyType>,
        /// Parameters of a rolling update.
        rolling_update: Option<RollingUpdateDaemonSet> = "rollingUpdate",
    }
}

string_enum! {
    /// The kind of update strategy.
    pub enum DaemonSetUpdateStrategyType {
        /// Replace old pods by new ones, a few nodes at a time.
        RollingUpdate = "RollingUpdate",
        /// Replace a pod only when the user deletes it.
        OnDelete = "OnDelete",
    }
}

api_struct! {
    /// Parameters of a rolling update.
    pub struct RollingUpdateDaemonSet {
        /// Nodes whose pod may be unavailable at once: a number or a
        /// percentage of the nodes that should run the pod (default 1).
        max_unavailable: Option<IntOrString> = "maxUnavailable",
        /// Nodes that may run an extra (new) pod at once, while the old one
        /// still serves (default 0). Only one of the two may be non-zero.
        max_surge: Option<IntOrString> = "maxSurge",
    }
}

api_struct! {
    /// The Kubernetes counters of a DaemonSet.
    pub struct DaemonSetStatus {
        /// Nodes that run at least one daemon pod and should.
        current_number_scheduled: i32 = "currentNumberScheduled",
        /// Nodes that run a daemon pod but should not.
        number_misscheduled: i32 = "numberMisscheduled",
        /// Nodes that should run the daemon pod.
        desired_number_scheduled: i32 = "desiredNumberScheduled",
        /// Nodes whose daemon pod is ready.
        number_ready: i32 = "numberReady",
        /// The generation the controller last acted on.
        observed_generation: Option<i64> = "observedGeneration",
        /// Nodes that run the current template's pod.
        updated_number_scheduled: i32 = "updatedNumberScheduled",
        /// Nodes whose daemon pod has been ready for `minReadySeconds`.
        number_available: i32 = "numberAvailable",
        /// Nodes that should run an available daemon pod and don't.
        number_unavailable: i32 = "numberUnavailable",
        /// Hash collisions met while naming ControllerRevisions.
        collision_count: Option<i32> = "collisionCount",
        /// Conditions of the DaemonSet.
        conditions: Vec<DaemonSetCondition> = "conditions",
    }
}

api_struct! {
    /// A condition of a DaemonSet.
    pub struct DaemonSetCondition {
        /// The condition's type.
        r#type: String = "type",
        /// `True`, `False` or `Unknown`.
        status: Option<ConditionStatus> = "status" as EnumField<ConditionStatus>,
        /// RFC 3339 time the status last changed.
        last_transition_time: Option<String> = "lastTransitionTime",
        /// Machine-readable reason.
        reason: String = "reason",
        /// Human-readable message.
        message: String = "message",
    }
}

api_struct! {
    @resource "apps", "apps/v1", "ControllerRevision", namespaced = true;
    /// An immutable snapshot of a DaemonSet's template, for rollback.
    pub struct ControllerRevision {
        /// Name (`<daemonset>-<hash>`), labels, owner reference.
        metadata: ObjectMeta = "metadata",
        /// The snapshot (a patch holding `spec.template`).
        data: serde_json::Value = "data",
        /// The revision number, increasing per DaemonSet.
        revision: i64 = "revision",
    }
}
