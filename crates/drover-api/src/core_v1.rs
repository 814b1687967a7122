//! The core (`v1`) resources drover serves: [`Pod`], [`Node`], [`Event`],
//! and the types they are made of.
//!
//! Field names are Kubernetes' own. Only the fields drover acts on are
//! typed; every other field is kept in the `extra` map of the struct it
//! appears in (see [`crate::unknown_fields`]).

use crate::config_v1::{
    ConfigMapKeySelector, ConfigMapVolumeSource, EnvFromSource, ObjectFieldSelector,
    ProjectedVolumeSource, SecretKeySelector, SecretVolumeSource,
};
use crate::core_v1_affinity::{PodAffinity, PodAntiAffinity, TopologySpreadConstraint};
use crate::meta::{IntOrString, Labels, ObjectMeta};
use crate::quantity::Quantity;
use crate::serde_util::EnumField;
use std::collections::BTreeMap;

// ---------------------------------------------------------------- Pod

api_struct! {
    @resource "", "v1", "Pod", namespaced = true;
    /// A pod: one or more containers that run together on one node.
    pub struct Pod {
        /// Name, namespace, labels, owner references.
        metadata: ObjectMeta = "metadata",
        /// What should run.
        spec: PodSpec = "spec",
        /// What runs, as reported by the node's agent.
        status: PodStatus = "status",
    }
}

api_struct! {
    /// A pod template, as embedded in a DaemonSet.
    pub struct PodTemplateSpec {
        /// Labels (which the DaemonSet's selector must match) and annotations.
        metadata: ObjectMeta = "metadata",
        /// The pod spec every daemon pod gets.
        spec: PodSpec = "spec",
    }
}

api_struct! {
    /// What a pod runs and where.
    pub struct PodSpec {
        /// The containers (at least one).
        containers: Vec<Container> = "containers",
        /// Volumes the containers can mount.
        volumes: Vec<Volume> = "volumes",
        /// The node the pod is bound to; set by the DaemonSet controller, or
        /// by the user for a pod placed by hand.
        node_name: String = "nodeName",
        /// Labels a node must have (all of them) for the pod to run there.
        node_selector: Labels = "nodeSelector",
        /// Node affinity, pod affinity and pod anti-affinity.
        affinity: Option<Affinity> = "affinity",
        /// Taints the pod tolerates.
        tolerations: Vec<Toleration> = "tolerations",
        /// Use the node's network namespace.
        host_network: bool = "hostNetwork",
        /// Use the node's PID namespace.
        host_pid: bool = "hostPID",
        /// Use the node's IPC namespace.
        host_ipc: bool = "hostIPC",
        /// `Always` (the only value allowed in a DaemonSet), `OnFailure` or `Never`.
        restart_policy: Option<RestartPolicy> = "restartPolicy" as EnumField<RestartPolicy>,
        /// Seconds between the stop signal and the kill (default 30).
        termination_grace_period_seconds: Option<i64> = "terminationGracePeriodSeconds",
        /// Name of a PriorityClass: its value orders daemon pods for
        /// placement and preemption.
        priority_class_name: String = "priorityClassName",
        /// Name of the service account the pod runs as.
        service_account_name: String = "serviceAccountName",
        /// Pod-level security settings.
        security_context: Option<PodSecurityContext> = "securityContext",
        /// How the pod and its peers spread across topology domains (the
        /// scheduler's PodTopologySpread).
        topology_spread_constraints: Vec<TopologySpreadConstraint> = "topologySpreadConstraints",
    }
}

string_enum! {
    /// A pod's restart policy.
    pub enum RestartPolicy {
        /// Restart whenever a container exits.
        Always = "Always",
        /// Restart only a container that failed.
        OnFailure = "OnFailure",
        /// Never restart.
        Never = "Never",
    }
}

api_struct! {
    /// One container of a pod.
    pub struct Container {
        /// Unique within the pod; a DNS label.
        name: String = "name",
        /// The image reference.
        image: String = "image",
        /// The entrypoint (replaces the image's ENTRYPOINT).
        command: Vec<String> = "command",
        /// Arguments (replace the image's CMD).
        args: Vec<String> = "args",
        /// Working directory.
        working_dir: String = "workingDir",
        /// Ports the container listens on.
        ports: Vec<ContainerPort> = "ports",
        /// Environment variables.
        env: Vec<EnvVar> = "env",
        /// Every key of ConfigMaps and Secrets as variables (`env` wins).
        env_from: Vec<EnvFromSource> = "envFrom",
        /// CPU and memory requests and limits.
        resources: ResourceRequirements = "resources",
        /// Volumes mounted into the container.
        volume_mounts: Vec<VolumeMount> = "volumeMounts",
        /// Liveness probe: the container is restarted when it fails.
        liveness_probe: Option<Probe> = "livenessProbe",
        /// Readiness probe: feeds the pod's Ready condition.
        readiness_probe: Option<Probe> = "readinessProbe",
        /// Startup probe: holds the other probes until it succeeds.
        startup_probe: Option<Probe> = "startupProbe",
        /// Hooks run after start and before stop.
        lifecycle: Option<Lifecycle> = "lifecycle",
        /// Security settings of the container.
        security_context: Option<SecurityContext> = "securityContext",
        /// `Always`, `IfNotPresent` or `Never`.
        image_pull_policy: Option<PullPolicy> = "imagePullPolicy" as EnumField<PullPolicy>,
    }
}

string_enum! {
    /// When to pull a container image.
    pub enum PullPolicy {
        /// Pull every time the container starts.
        Always = "Always",
        /// Pull only when the image is not present.
        IfNotPresent = "IfNotPresent",
        /// Never pull.
        Never = "Never",
    }
}

api_struct! {
    /// A port of a container.
    pub struct ContainerPort {
        /// An IANA service name (at most 15 characters), unique in the pod.
        name: String = "name",
        /// The port in the container (1-65535).
        container_port: i32 = "containerPort",
        /// The port on the node, if any (1-65535).
        host_port: Option<i32> = "hostPort",
        /// The node address the host port binds to.
        host_ip: String = "hostIP",
        /// `TCP` (the default), `UDP` or `SCTP`.
        protocol: Option<Protocol> = "protocol" as EnumField<Protocol>,
    }
}

string_enum! {
    /// A network protocol.
    pub enum Protocol {
        /// TCP.
        Tcp = "TCP",
        /// UDP.
        Udp = "UDP",
        /// SCTP.
        Sctp = "SCTP",
    }
}

api_struct! {
    /// An environment variable.
    pub struct EnvVar {
        /// The variable's name.
        name: String = "name",
        /// A literal value.
        value: String = "value",
        /// A value taken from the pod itself.
        value_from: Option<EnvVarSource> = "valueFrom",
    }
}

api_struct! {
    /// Where an environment variable's value comes from.
    pub struct EnvVarSource {
        /// A field of the pod (the downward API), e.g. `spec.nodeName`.
        field_ref: Option<ObjectFieldSelector> = "fieldRef",
        /// A resource request or limit of a container.
        resource_field_ref: Option<ResourceFieldSelector> = "resourceFieldRef",
        /// A key of a ConfigMap.
        config_map_key_ref: Option<ConfigMapKeySelector> = "configMapKeyRef",
        /// A key of a Secret.
        secret_key_ref: Option<SecretKeySelector> = "secretKeyRef",
    }
}

api_struct! {
    /// A container resource, e.g. `limits.memory`.
    pub struct ResourceFieldSelector {
        /// The container; this container when empty.
        container_name: String = "containerName",
        /// `limits.cpu`, `limits.memory`, `requests.cpu`, `requests.memory`, …
        resource: String = "resource",
        /// Unit the value is expressed in (default 1).
        divisor: Option<Quantity> = "divisor",
    }
}

api_struct! {
    /// Compute resources of a container.
    pub struct ResourceRequirements {
        /// Upper bounds, e.g. `memory: 500Mi`.
        limits: BTreeMap<String, Quantity> = "limits",
        /// What the container asks for, e.g. `cpu: 100m`.
        requests: BTreeMap<String, Quantity> = "requests",
    }
}

api_struct! {
    /// A volume mounted into a container.
    pub struct VolumeMount {
        /// The volume's name.
        name: String = "name",
        /// Where in the container.
        mount_path: String = "mountPath",
        /// Mount read-only.
        read_only: bool = "readOnly",
        /// A path inside the volume to mount instead of its root.
        sub_path: String = "subPath",
        /// `None`, `HostToContainer` or `Bidirectional`.
        mount_propagation: Option<MountPropagation> = "mountPropagation" as EnumField<MountPropagation>,
    }
}

string_enum! {
    /// How mounts propagate between the host and a container.
    pub enum MountPropagation {
        /// No propagation (private).
        None = "None",
        /// Host mounts appear in the container (rslave).
        HostToContainer = "HostToContainer",
        /// Both ways (rshared); needs a privileged container.
        Bidirectional = "Bidirectional",
    }
}

api_struct! {
    /// A volume of a pod. drover implements `hostPath`, `emptyDir`,
    /// `configMap`, `secret` and `projected`; any other source is kept and
    /// reported as an unknown field.
    pub struct Volume {
        /// Unique within the pod; a DNS label.
        name: String = "name",
        /// A file or directory of the node.
        host_path: Option<HostPathVolumeSource> = "hostPath",
        /// A scratch directory that lives as long as the pod.
        empty_dir: Option<EmptyDirVolumeSource> = "emptyDir",
        /// A ConfigMap's keys as files.
        config_map: Option<ConfigMapVolumeSource> = "configMap",
        /// A Secret's keys as files.
        secret: Option<SecretVolumeSource> = "secret",
        /// ConfigMaps, Secrets and pod fields in one directory.
        projected: Option<ProjectedVolumeSource> = "projected",
    }
}

api_struct! {
    /// A path on the node.
    pub struct HostPathVolumeSource {
        /// The path on the node.
        path: String = "path",
        /// What must be at the path (`Directory`, `DirectoryOrCreate`, …);
        /// nothing is checked when unset.
        r#type: Option<HostPathType> = "type" as EnumField<HostPathType>,
    }
}

string_enum! {
    /// What a `hostPath` volume expects at its path.
    pub enum HostPathType {
        /// A directory, created (0755) when missing.
        DirectoryOrCreate = "DirectoryOrCreate",
        /// An existing directory.
        Directory = "Directory",
        /// A file, created (0644) when missing.
        FileOrCreate = "FileOrCreate",
        /// An existing file.
        File = "File",
        /// An existing UNIX socket.
        Socket = "Socket",
        /// An existing character device.
        CharDevice = "CharDevice",
        /// An existing block device.
        BlockDevice = "BlockDevice",
    }
}

api_struct! {
    /// A scratch directory.
    pub struct EmptyDirVolumeSource {
        /// `""` (disk) or `Memory` (tmpfs).
        medium: String = "medium",
        /// Upper bound of the space used.
        size_limit: Option<Quantity> = "sizeLimit",
    }
}

api_struct! {
    /// Security settings of a container.
    pub struct SecurityContext {
        /// Run privileged.
        privileged: Option<bool> = "privileged",
        /// UID to run as.
        run_as_user: Option<i64> = "runAsUser",
        /// GID to run as.
        run_as_group: Option<i64> = "runAsGroup",
        /// Refuse to start a container whose user is root.
        run_as_non_root: Option<bool> = "runAsNonRoot",
        /// Mount the root filesystem read-only.
        read_only_root_filesystem: Option<bool> = "readOnlyRootFilesystem",
        /// Whether a process can gain more privileges than its parent.
        allow_privilege_escalation: Option<bool> = "allowPrivilegeEscalation",
        /// Capabilities to add and drop.
        capabilities: Option<Capabilities> = "capabilities",
    }
}

api_struct! {
    /// Linux capabilities.
    pub struct Capabilities {
        /// Capabilities to add, e.g. `NET_ADMIN`.
        add: Vec<String> = "add",
        /// Capabilities to drop, e.g. `ALL`.
        drop: Vec<String> = "drop",
    }
}

api_struct! {
    /// Security settings for all containers of a pod.
    pub struct PodSecurityContext {
        /// UID to run as.
        run_as_user: Option<i64> = "runAsUser",
        /// GID to run as.
        run_as_group: Option<i64> = "runAsGroup",
        /// Refuse to start a container whose user is root.
        run_as_non_root: Option<bool> = "runAsNonRoot",
        /// Supplementary group owning the volumes.
        fs_group: Option<i64> = "fsGroup",
        /// Supplementary groups of the first process.
        supplemental_groups: Vec<i64> = "supplementalGroups",
    }
}

api_struct! {
    /// A health check of a container.
    pub struct Probe {
        /// Run a command in the container; exit 0 is success.
        exec: Option<ExecAction> = "exec",
        /// An HTTP GET; a 2xx or 3xx status is success.
        http_get: Option<HttpGetAction> = "httpGet",
        /// A TCP connection; connecting is success.
        tcp_socket: Option<TcpSocketAction> = "tcpSocket",
        /// Seconds after the container started before the first probe.
        initial_delay_seconds: Option<i32> = "initialDelaySeconds",
        /// Seconds before a probe times out (default 1).
        timeout_seconds: Option<i32> = "timeoutSeconds",
        /// Seconds between probes (default 10).
        period_seconds: Option<i32> = "periodSeconds",
        /// Successes in a row that count as success (default 1).
        success_threshold: Option<i32> = "successThreshold",
        /// Failures in a row that count as failure (default 3).
        failure_threshold: Option<i32> = "failureThreshold",
        /// Grace period when a liveness probe kills the container.
        termination_grace_period_seconds: Option<i64> = "terminationGracePeriodSeconds",
    }
}

api_struct! {
    /// A command to run in the container.
    pub struct ExecAction {
        /// The command and its arguments (no shell).
        command: Vec<String> = "command",
    }
}

api_struct! {
    /// An HTTP GET request.
    pub struct HttpGetAction {
        /// Path of the request.
        path: String = "path",
        /// Port, by number or by container port name.
        port: IntOrString = "port",
        /// Host to connect to (the pod's IP when empty).
        host: String = "host",
        /// `HTTP` (the default) or `HTTPS`.
        scheme: Option<UriScheme> = "scheme" as EnumField<UriScheme>,
        /// Extra headers.
        http_headers: Vec<HttpHeader> = "httpHeaders",
    }
}

string_enum! {
    /// The scheme of an HTTP probe.
    pub enum UriScheme {
        /// Plain HTTP.
        Http = "HTTP",
        /// HTTPS (the certificate is not verified).
        Https = "HTTPS",
    }
}

api_struct! {
    /// A header of an HTTP probe.
    pub struct HttpHeader {
        /// Header name.
        name: String = "name",
        /// Header value.
        value: String = "value",
    }
}

api_struct! {
    /// A TCP connection attempt.
    pub struct TcpSocketAction {
        /// Port, by number or by container port name.
        port: IntOrString = "port",
        /// Host to connect to (the pod's IP when empty).
        host: String = "host",
    }
}

api_struct! {
    /// Hooks around a container's life.
    pub struct Lifecycle {
        /// Run right after the container started.
        post_start: Option<LifecycleHandler> = "postStart",
        /// Run before the container is stopped.
        pre_stop: Option<LifecycleHandler> = "preStop",
    }
}

api_struct! {
    /// One lifecycle hook: exactly one of its actions.
    pub struct LifecycleHandler {
        /// Run a command in the container.
        exec: Option<ExecAction> = "exec",
        /// An HTTP GET.
        http_get: Option<HttpGetAction> = "httpGet",
        /// A TCP connection (deprecated by Kubernetes, kept for compatibility).
        tcp_socket: Option<TcpSocketAction> = "tcpSocket",
        /// Sleep before going on.
        sleep: Option<SleepAction> = "sleep",
    }
}

api_struct! {
    /// A pause.
    pub struct SleepAction {
        /// Seconds to sleep.
        seconds: i64 = "seconds",
    }
}

api_struct! {
    /// Scheduling constraints: which nodes, and near or away from which
    /// pods, the pod may (or would rather) run.
    pub struct Affinity {
        /// Which nodes the pod may (or would rather) run on.
        node_affinity: Option<NodeAffinity> = "nodeAffinity",
        /// Pods the pod must (or would rather) share a topology domain with.
        pod_affinity: Option<PodAffinity> = "podAffinity",
        /// Pods the pod must (or would rather) keep out of the topology
        /// domain of.
        pod_anti_affinity: Option<PodAntiAffinity> = "podAntiAffinity",
    }
}

api_struct! {
    /// Node affinity: a required node selector and weighted preferences.
    pub struct NodeAffinity {
        /// Nodes that do not match are not eligible.
        required_during_scheduling_ignored_during_execution: Option<NodeSelector> =
            "requiredDuringSchedulingIgnoredDuringExecution",
        /// Preferences; a daemon pod's node is fixed, so they change nothing
        /// but are validated and kept.
        preferred_during_scheduling_ignored_during_execution: Vec<PreferredSchedulingTerm> =
            "preferredDuringSchedulingIgnoredDuringExecution",
    }
}

api_struct! {
    /// A node selector: its terms are ORed.
    pub struct NodeSelector {
        /// The terms; a node matches when any term matches.
        node_selector_terms: Vec<NodeSelectorTerm> = "nodeSelectorTerms",
    }
}

api_struct! {
    /// A node selector term: all its requirements are ANDed. An empty term
    /// matches no node.
    pub struct NodeSelectorTerm {
        /// Requirements on node labels.
        match_expressions: Vec<NodeSelectorRequirement> = "matchExpressions",
        /// Requirements on node fields (only `metadata.name`).
        match_fields: Vec<NodeSelectorRequirement> = "matchFields",
    }
}

api_struct! {
    /// One requirement on a node label (or field).
    pub struct NodeSelectorRequirement {
        /// The label key (or `metadata.name` for a field).
        key: String = "key",
        /// `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt` or `Lt`.
        operator: Option<NodeSelectorOperator> = "operator" as EnumField<NodeSelectorOperator>,
        /// Values; one integer for `Gt` and `Lt`, none for the existence operators.
        values: Vec<String> = "values",
    }
}

string_enum! {
    /// Operator of a [`NodeSelectorRequirement`].
    pub enum NodeSelectorOperator {
        /// The label exists and its value is one of the values.
        In = "In",
        /// The label is absent, or its value is none of the values.
        NotIn = "NotIn",
        /// The label exists.
        Exists = "Exists",
        /// The label is absent.
        DoesNotExist = "DoesNotExist",
        /// The label's value, an integer, is greater than the value.
        Gt = "Gt",
        /// The label's value, an integer, is less than the value.
        Lt = "Lt",
    }
}

api_struct! {
    /// A weighted preference.
    pub struct PreferredSchedulingTerm {
        /// 1-100.
        weight: i32 = "weight",
        /// The term nodes would rather match.
        preference: NodeSelectorTerm = "preference",
    }
}

api_struct! {
    /// A toleration: lets the pod run on nodes with a matching taint.
    pub struct Toleration {
        /// The taint key; empty (with `Exists`) matches every key.
        key: String = "key",
        /// `Equal` (the default) or `Exists`.
        operator: Option<TolerationOperator> = "operator" as EnumField<TolerationOperator>,
        /// The taint value, for `Equal`.
        value: String = "value",
        /// The taint effect; empty matches every effect.
        effect: Option<TaintEffect> = "effect" as EnumField<TaintEffect>,
        /// For `NoExecute`: how long the pod stays after the taint appears.
        toleration_seconds: Option<i64> = "tolerationSeconds",
    }
}

string_enum! {
    /// Operator of a [`Toleration`].
    pub enum TolerationOperator {
        /// The taint's value equals the toleration's.
        Equal = "Equal",
        /// Any value.
        Exists = "Exists",
    }
}

string_enum! {
    /// What a taint does to pods that don't tolerate it.
    pub enum TaintEffect {
        /// New pods are not placed on the node.
        NoSchedule = "NoSchedule",
        /// New pods would rather not be placed on the node.
        PreferNoSchedule = "PreferNoSchedule",
        /// Pods are evicted from the node, and new ones not placed.
        NoExecute = "NoExecute",
    }
}

api_struct! {
    /// Reported state of a pod.
    pub struct PodStatus {
        /// `Pending`, `Running`, `Succeeded`, `Failed` or `Unknown`.
        phase: Option<PodPhase> = "phase" as EnumField<PodPhase>,
        /// Conditions, among them `Ready`.
        conditions: Vec<PodCondition> = "conditions",
        /// A human-readable explanation of the phase.
        message: String = "message",
        /// A machine-readable reason, e.g. `NodeLost`.
        reason: String = "reason",
        /// The node where this pod preempted others and waits to be bound.
        nominated_node_name: String = "nominatedNodeName",
        /// IP of the node the pod runs on.
        host_ip: String = "hostIP",
        /// IP of the pod.
        pod_ip: String = "podIP",
        /// RFC 3339 time the agent accepted the pod.
        start_time: Option<String> = "startTime",
        /// One entry per container.
        container_statuses: Vec<ContainerStatus> = "containerStatuses",
    }
}

string_enum! {
    /// Phase of a pod.
    pub enum PodPhase {
        /// Accepted, containers not all started yet.
        Pending = "Pending",
        /// Bound to a node, at least one container running.
        Running = "Running",
        /// All containers exited successfully and won't restart.
        Succeeded = "Succeeded",
        /// All containers exited, at least one in failure, and won't restart.
        Failed = "Failed",
        /// The state can't be obtained (the node is unreachable).
        Unknown = "Unknown",
    }
}

string_enum! {
    /// Status of a condition.
    pub enum ConditionStatus {
        /// The condition holds.
        True = "True",
        /// The condition does not hold.
        False = "False",
        /// Unknown (e.g. the node stopped reporting).
        Unknown = "Unknown",
    }
}

api_struct! {
    /// A condition of a pod (`Ready`, `ContainersReady`, `PodScheduled`, …).
    pub struct PodCondition {
        /// The condition's type, e.g. `Ready`.
        r#type: String = "type",
        /// `True`, `False` or `Unknown`.
        status: Option<ConditionStatus> = "status" as EnumField<ConditionStatus>,
        /// RFC 3339 time of the last probe.
        last_probe_time: Option<String> = "lastProbeTime",
        /// RFC 3339 time the status last changed.
        last_transition_time: Option<String> = "lastTransitionTime",
        /// Machine-readable reason of the last transition.
        reason: String = "reason",
        /// Human-readable message.
        message: String = "message",
    }
}

api_struct! {
    /// State of one container of a pod.
    pub struct ContainerStatus {
        /// The container's name.
        name: String = "name",
        /// Whether its readiness probe passes.
        ready: bool = "ready",
        /// Whether it started (and its startup probe, if any, passed).
        started: Option<bool> = "started",
        /// Times it was restarted.
        restart_count: i32 = "restartCount",
        /// The image it runs.
        image: String = "image",
        /// The image's ID.
        image_id: String = "imageID",
        /// The runtime's container ID, e.g. `docker://…`.
        container_id: String = "containerID",
        /// Its current state.
        state: ContainerState = "state",
        /// The state it was in before its last restart.
        last_state: ContainerState = "lastState",
    }
}

api_struct! {
    /// State of a container: at most one of the three is set.
    pub struct ContainerState {
        /// Not running yet (e.g. pulling, or in CrashLoopBackOff).
        waiting: Option<ContainerStateWaiting> = "waiting",
        /// Running.
        running: Option<ContainerStateRunning> = "running",
        /// Exited.
        terminated: Option<ContainerStateTerminated> = "terminated",
    }
}

api_struct! {
    /// A container waiting to run.
    pub struct ContainerStateWaiting {
        /// E.g. `ContainerCreating`, `CrashLoopBackOff`, `ErrImagePull`.
        reason: String = "reason",
        /// Details.
        message: String = "message",
    }
}

api_struct! {
    /// A running container.
    pub struct ContainerStateRunning {
        /// RFC 3339 start time.
        started_at: Option<String> = "startedAt",
    }
}

api_struct! {
    /// An exited container.
    pub struct ContainerStateTerminated {
        /// Exit code.
        exit_code: i32 = "exitCode",
        /// Signal that killed it, if any.
        signal: Option<i32> = "signal",
        /// E.g. `Completed`, `Error`, `OOMKilled`.
        reason: String = "reason",
        /// Details.
        message: String = "message",
        /// RFC 3339 start time.
        started_at: Option<String> = "startedAt",
        /// RFC 3339 exit time.
        finished_at: Option<String> = "finishedAt",
        /// The runtime's container ID.
        container_id: String = "containerID",
    }
}

// ---------------------------------------------------------------- Node

api_struct! {
    @resource "", "v1", "Node", namespaced = false;
    /// A machine that runs pods, through its agent.
    pub struct Node {
        /// Name (a DNS subdomain) and labels.
        metadata: ObjectMeta = "metadata",
        /// Taints and cordon.
        spec: NodeSpec = "spec",
        /// Conditions, addresses, capacity, versions.
        status: NodeStatus = "status",
    }
}

api_struct! {
    /// Desired state of a node.
    pub struct NodeSpec {
        /// Taints: pods that don't tolerate them are kept off, or evicted.
        taints: Vec<Taint> = "taints",
        /// Cordoned: no new pods (the `node.kubernetes.io/unschedulable` taint).
        unschedulable: bool = "unschedulable",
    }
}

api_struct! {
    /// A taint of a node.
    pub struct Taint {
        /// The key, a qualified name.
        key: String = "key",
        /// The value, a label value (may be empty).
        value: String = "value",
        /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
        effect: Option<TaintEffect> = "effect" as EnumField<TaintEffect>,
        /// RFC 3339 time a `NoExecute` taint was added.
        time_added: Option<String> = "timeAdded",
    }
}

api_struct! {
    /// Reported state of a node.
    pub struct NodeStatus {
        /// Conditions, among them `Ready` with the last heartbeat.
        conditions: Vec<NodeCondition> = "conditions",
        /// Addresses: `InternalIP`, `ExternalIP`, `Hostname`, …
        addresses: Vec<NodeAddress> = "addresses",
        /// Total resources, e.g. `cpu: "4"`, `memory: 8Gi`, `pods: "110"`.
        capacity: BTreeMap<String, Quantity> = "capacity",
        /// Resources available to pods.
        allocatable: BTreeMap<String, Quantity> = "allocatable",
        /// Versions of the machine, the agent and the runtime.
        node_info: NodeSystemInfo = "nodeInfo",
    }
}

api_struct! {
    /// A condition of a node (`Ready`, `MemoryPressure`, …).
    pub struct NodeCondition {
        /// The condition's type, e.g. `Ready`.
        r#type: String = "type",
        /// `True`, `False` or `Unknown`.
        status: Option<ConditionStatus> = "status" as EnumField<ConditionStatus>,
        /// RFC 3339 time of the last heartbeat that was recorded.
        last_heartbeat_time: Option<String> = "lastHeartbeatTime",
        /// RFC 3339 time the status last changed.
        last_transition_time: Option<String> = "lastTransitionTime",
        /// Machine-readable reason, e.g. `NodeStatusUnknown`.
        reason: String = "reason",
        /// Human-readable message.
        message: String = "message",
    }
}

api_struct! {
    /// An address of a node.
    pub struct NodeAddress {
        /// `InternalIP`, `ExternalIP`, `Hostname`, `InternalDNS` or `ExternalDNS`.
        r#type: String = "type",
        /// The address.
        address: String = "address",
    }
}

api_struct! {
    /// Versions and identity of a node.
    pub struct NodeSystemInfo {
        /// Machine ID (`/etc/machine-id`).
        machine_id: String = "machineID",
        /// System UUID.
        system_uuid: String = "systemUUID",
        /// Boot ID.
        boot_id: String = "bootID",
        /// Kernel version (`uname -r`).
        kernel_version: String = "kernelVersion",
        /// OS image, e.g. `Debian GNU/Linux 12 (bookworm)`.
        os_image: String = "osImage",
        /// Runtime and version, e.g. `docker://20.10.24` or `sim://1`.
        container_runtime_version: String = "containerRuntimeVersion",
        /// The agent's version (Kubernetes' kubelet version field).
        kubelet_version: String = "kubeletVersion",
        /// Operating system, e.g. `linux`.
        operating_system: String = "operatingSystem",
        /// Architecture, e.g. `amd64`.
        architecture: String = "architecture",
    }
}

/// Condition types of a node that drover sets or reads.
pub mod node_condition {
    /// The node's agent is healthy and heartbeating.
    pub const READY: &str = "Ready";
    /// The node is short of memory.
    pub const MEMORY_PRESSURE: &str = "MemoryPressure";
    /// The node is short of disk.
    pub const DISK_PRESSURE: &str = "DiskPressure";
    /// The node is short of process IDs.
    pub const PID_PRESSURE: &str = "PIDPressure";
    /// The node's network is not configured.
    pub const NETWORK_UNAVAILABLE: &str = "NetworkUnavailable";
}

/// Condition types of a pod that drover sets.
pub mod pod_condition {
    /// The pod is bound to a node.
    pub const POD_SCHEDULED: &str = "PodScheduled";
    /// All containers are ready.
    pub const CONTAINERS_READY: &str = "ContainersReady";
    /// The pod can serve: all containers ready.
    pub const READY: &str = "Ready";
    /// Reason of a `Ready` condition the node lifecycle controller set to
    /// `False` because the pod's node is unreachable.
    pub const REASON_NODE_NOT_READY: &str = "NodeNotReady";
}

/// Annotations of static pods (run by a node agent from its
/// `--manifest-dir`) and of their mirror pods in the API, as the kubelet
/// sets them.
pub mod pod_annotation {
    /// On a mirror pod: the uid of the static pod it mirrors. A pod with
    /// this annotation is read-only through the API.
    pub const CONFIG_MIRROR: &str = "kubernetes.io/config.mirror";
    /// On a static pod: the hash of its manifest (also its uid).
    pub const CONFIG_HASH: &str = "kubernetes.io/config.hash";
    /// On a static pod: where it comes from (`file`).
    pub const CONFIG_SOURCE: &str = "kubernetes.io/config.source";
}

impl Node {
    /// The node's condition of the given type (e.g. [`node_condition::READY`]).
    pub fn condition(&self, condition_type: &str) -> Option<&NodeCondition> {
        self.status
            .conditions
            .iter()
            .find(|c| c.r#type == condition_type)
    }

    /// Whether the `Ready` condition is `True`.
    pub fn is_ready(&self) -> bool {
        self.condition(node_condition::READY)
            .is_some_and(|c| c.status == Some(ConditionStatus::True))
    }
}

impl Pod {
    /// The pod's condition of the given type (e.g. [`pod_condition::READY`]).
    pub fn condition(&self, condition_type: &str) -> Option<&PodCondition> {
        self.status
            .conditions
            .iter()
            .find(|c| c.r#type == condition_type)
    }

    /// Whether the `Ready` condition is `True`.
    pub fn is_ready(&self) -> bool {
        self.condition(pod_condition::READY)
            .is_some_and(|c| c.status == Some(ConditionStatus::True))
    }

    /// Whether this is the mirror of a node's static pod (it carries
    /// [`pod_annotation::CONFIG_MIRROR`]).
    pub fn is_mirror(&self) -> bool {
        self.metadata
            .annotations
            .contains_key(pod_annotation::CONFIG_MIRROR)
    }
}

// ---------------------------------------------------------------- Event

api_struct! {
    @resource "", "v1", "Event", namespaced = true;
    /// Something that happened to an object, for `describe` and `events`.
    pub struct Event {
        /// Name (usually `<object>.<unique suffix>`) and namespace.
        metadata: ObjectMeta = "metadata",
        /// The object the event is about.
        involved_object: ObjectReference = "involvedObject",
        /// Short CamelCase reason, e.g. `SuccessfulCreate`.
        reason: String = "reason",
        /// Human-readable description.
        message: String = "message",
        /// The component that reported it.
        source: EventSource = "source",
        /// RFC 3339 time it was first seen.
        first_timestamp: Option<String> = "firstTimestamp",
        /// RFC 3339 time it was last seen.
        last_timestamp: Option<String> = "lastTimestamp",
        /// RFC 3339 time with microseconds, for new events.
        event_time: Option<String> = "eventTime",
        /// How many times it happened.
        count: Option<i32> = "count",
        /// `Normal` or `Warning`.
        r#type: String = "type",
        /// What was done, e.g. `Create`.
        action: String = "action",
        /// The controller that emitted it, e.g. `daemonset-controller`.
        reporting_component: String = "reportingComponent",
        /// The instance of that controller (e.g. the server's name).
        reporting_instance: String = "reportingInstance",
    }
}

api_struct! {
    /// A reference to an object.
    pub struct ObjectReference {
        /// API version, e.g. `apps/v1`.
        api_version: String = "apiVersion",
        /// Kind, e.g. `DaemonSet`.
        kind: String = "kind",
        /// Namespace (empty for nodes).
        namespace: String = "namespace",
        /// Name.
        name: String = "name",
        /// UID.
        uid: String = "uid",
        /// The resource version the event is about.
        resource_version: String = "resourceVersion",
        /// A field within the object, e.g. `spec.containers{nginx}`.
        field_path: String = "fieldPath",
    }
}

api_struct! {
    /// Who reported an event.
    pub struct EventSource {
        /// The component, e.g. `daemonset-controller` or `drover-agent`.
        component: String = "component",
        /// The node, for agent events.
        host: String = "host",
    }
}

/// Event types.
pub mod event_type {
    /// Routine.
    pub const NORMAL: &str = "Normal";
    /// Something went wrong.
    pub const WARNING: &str = "Warning";
}
