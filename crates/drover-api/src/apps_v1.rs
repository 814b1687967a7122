//! The `apps/v1` resources drover serves: [`DaemonSet`], [`Deployment`],
//! [`ReplicaSet`] and
//! [`ControllerRevision`].

use crate::core_v1::{ConditionStatus, PodTemplateSpec};
use crate::meta::{IntOrString, LabelSelector, ObjectMeta};
use crate::serde_util::EnumField;

/// The label a Deployment puts on its ReplicaSets, their selectors and
/// their pods: the hash of the pod template (Kubernetes'
/// `DefaultDeploymentUniqueLabelKey`).
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";

/// The annotation of a Deployment and of its ReplicaSets that numbers its
/// revisions (Kubernetes' `RevisionAnnotation`): what `rollout history`
/// lists and `rollout undo --to-revision` picks.
pub const DEPLOYMENT_REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";

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

api_struct! {
    @resource "apps", "apps/v1", "Deployment", namespaced = true;
    /// A number of interchangeable pods, rolled out through ReplicaSets.
    pub struct Deployment {
        /// Name, namespace, labels, annotations (`deployment.kubernetes.io/revision`).
        metadata: ObjectMeta = "metadata",
        /// Replicas, selector, pod template and update strategy.
        spec: DeploymentSpec = "spec",
        /// Counters and conditions, written by the controller.
        status: DeploymentStatus = "status",
    }
}

api_struct! {
    /// Desired state of a Deployment.
    pub struct DeploymentSpec {
        /// Pods wanted (default 1).
        replicas: Option<i32> = "replicas",
        /// Selects the Deployment's pods; required, non-empty, must match the
        /// template's labels, and immutable.
        selector: Option<LabelSelector> = "selector",
        /// The pod each replica runs.
        template: PodTemplateSpec = "template",
        /// How old pods are replaced by new ones.
        strategy: DeploymentStrategy = "strategy",
        /// Seconds a new pod must be ready before it counts as available
        /// (default 0).
        min_ready_seconds: Option<i32> = "minReadySeconds",
        /// Old ReplicaSets kept for rollback (default 10).
        revision_history_limit: Option<i32> = "revisionHistoryLimit",
        /// A paused Deployment starts no rollout (scaling still happens).
        paused: Option<bool> = "paused",
        /// Seconds a rollout may make no progress before its `Progressing`
        /// condition says `ProgressDeadlineExceeded` (default 600).
        progress_deadline_seconds: Option<i32> = "progressDeadlineSeconds",
    }
}

api_struct! {
    /// How a Deployment replaces its pods.
    pub struct DeploymentStrategy {
        /// `RollingUpdate` (the default) or `Recreate`.
        r#type: Option<DeploymentStrategyType> = "type" as EnumField<DeploymentStrategyType>,
        /// Parameters of a rolling update.
        rolling_update: Option<RollingUpdateDeployment> = "rollingUpdate",
    }
}

string_enum! {
    /// The kind of deployment strategy.
    pub enum DeploymentStrategyType {
        /// Replace old pods by new ones gradually.
        RollingUpdate = "RollingUpdate",
        /// Delete every old pod before creating new ones.
        Recreate = "Recreate",
    }
}

api_struct! {
    /// Parameters of a Deployment's rolling update.
    pub struct RollingUpdateDeployment {
        /// Pods that may be unavailable during the update: a number or a
        /// percentage of the replicas, rounded down (default 25%).
        max_unavailable: Option<IntOrString> = "maxUnavailable",
        /// Pods that may be created above the replicas: a number or a
        /// percentage, rounded up (default 25%). Both may not be 0.
        max_surge: Option<IntOrString> = "maxSurge",
    }
}

api_struct! {
    /// The counters and conditions of a Deployment.
    pub struct DeploymentStatus {
        /// The generation the controller last acted on.
        observed_generation: Option<i64> = "observedGeneration",
        /// Pods of all its ReplicaSets (not terminating).
        replicas: i32 = "replicas",
        /// Pods of the current template.
        updated_replicas: i32 = "updatedReplicas",
        /// Pods that are ready.
        ready_replicas: i32 = "readyReplicas",
        /// Pods ready for at least `minReadySeconds`.
        available_replicas: i32 = "availableReplicas",
        /// Pods still needed for 100 % availability.
        unavailable_replicas: i32 = "unavailableReplicas",
        /// `Available`, `Progressing` and `ReplicaFailure`.
        conditions: Vec<DeploymentCondition> = "conditions",
        /// Hash collisions met while naming ReplicaSets.
        collision_count: Option<i32> = "collisionCount",
    }
}

api_struct! {
    /// A condition of a Deployment.
    pub struct DeploymentCondition {
        /// `Available`, `Progressing` or `ReplicaFailure`.
        r#type: String = "type",
        /// `True`, `False` or `Unknown`.
        status: Option<ConditionStatus> = "status" as EnumField<ConditionStatus>,
        /// RFC 3339 time the condition was last updated.
        last_update_time: Option<String> = "lastUpdateTime",
        /// RFC 3339 time the status last changed.
        last_transition_time: Option<String> = "lastTransitionTime",
        /// Machine-readable reason (`NewReplicaSetAvailable`,
        /// `ProgressDeadlineExceeded`, `MinimumReplicasAvailable`…).
        reason: String = "reason",
        /// Human-readable message.
        message: String = "message",
    }
}

api_struct! {
    @resource "apps", "apps/v1", "ReplicaSet", namespaced = true;
    /// A number of pods of one template; Deployments own one per revision.
    pub struct ReplicaSet {
        /// Name (`<deployment>-<pod-template-hash>`), labels, annotations,
        /// owner reference.
        metadata: ObjectMeta = "metadata",
        /// Replicas, selector and pod template.
        spec: ReplicaSetSpec = "spec",
        /// Counters and conditions, written by the controller.
        status: ReplicaSetStatus = "status",
    }
}

api_struct! {
    /// Desired state of a ReplicaSet.
    pub struct ReplicaSetSpec {
        /// Pods wanted (default 1).
        replicas: Option<i32> = "replicas",
        /// Seconds a new pod must be ready before it counts as available.
        min_ready_seconds: Option<i32> = "minReadySeconds",
        /// Selects the ReplicaSet's pods; required, must match the template's
        /// labels, and immutable.
        selector: Option<LabelSelector> = "selector",
        /// The pod each replica runs.
        template: PodTemplateSpec = "template",
    }
}

api_struct! {
    /// The counters and conditions of a ReplicaSet.
    pub struct ReplicaSetStatus {
        /// Pods it has (not terminating).
        replicas: i32 = "replicas",
        /// Pods whose labels match the template's.
        fully_labeled_replicas: i32 = "fullyLabeledReplicas",
        /// Pods that are ready.
        ready_replicas: i32 = "readyReplicas",
        /// Pods ready for at least `minReadySeconds`.
        available_replicas: i32 = "availableReplicas",
        /// The generation the controller last acted on.
        observed_generation: Option<i64> = "observedGeneration",
        /// `ReplicaFailure` when pods cannot be created or deleted.
        conditions: Vec<ReplicaSetCondition> = "conditions",
    }
}

api_struct! {
    /// A condition of a ReplicaSet.
    pub struct ReplicaSetCondition {
        /// `ReplicaFailure`.
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
