//! The fields of Kubernetes' types that drover's types do not have: drover
//! keeps them as written (they round-trip through the API) but does not act
//! on them. Each has its JSON shape and a short description; the schema
//! builder adds that drover does not act on it. A test checks that these
//! and the fields drover's types know are exactly the fields of
//! [`crate::kubernetes_fields`].

use super::{FieldInfo, OpenApiType, TypeRef};
use crate::{Container, ContainerStatus, ResourceFieldSelector, ResourceRequirements};

fn f(json: &'static str, ty: TypeRef, doc: &'static str) -> FieldInfo {
    FieldInfo { json, doc, ty }
}

fn string() -> TypeRef {
    TypeRef::String
}
fn boolean() -> TypeRef {
    TypeRef::Bool
}
fn int32() -> TypeRef {
    TypeRef::Int32
}
fn int64() -> TypeRef {
    TypeRef::Int64
}
fn object() -> TypeRef {
    TypeRef::Object
}
fn list(of: TypeRef) -> TypeRef {
    TypeRef::Array(Box::new(of))
}
fn map(of: TypeRef) -> TypeRef {
    TypeRef::Map(Box::new(of))
}
fn strings() -> TypeRef {
    list(string())
}
fn enumeration(values: &'static [&'static str]) -> TypeRef {
    TypeRef::Enum(values)
}

/// A volume source drover does not mount.
fn volume(json: &'static str, doc: &'static str) -> FieldInfo {
    f(json, object(), doc)
}

/// The Kubernetes fields of drover's type `type_name` that the type itself
/// does not have (empty for a type that has them all).
#[rustfmt::skip]
pub fn fields(type_name: &str) -> Vec<FieldInfo> {
    match type_name {
        "ObjectMeta" => vec![
            f("selfLink", string(), "A URL of the object; deprecated by Kubernetes and never set."),
            f("managedFields", list(object()), "Which manager owns which fields (server-side apply's bookkeeping); drover does not track field ownership."),
        ],
        "PodSpec" => vec![
            f("initContainers", list(Container::type_ref()), "Containers that run one after the other, each to completion, before the main containers start."),
            f("ephemeralContainers", list(object()), "Debugging containers added to a running pod."),
            f("activeDeadlineSeconds", int64(), "Seconds the pod may be active before it is failed."),
            f("dnsPolicy", enumeration(&["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"]), "How the pod's DNS resolver is configured."),
            f("serviceAccount", string(), "Deprecated alias of serviceAccountName."),
            f("automountServiceAccountToken", boolean(), "Whether an API token is mounted into the pod."),
            f("shareProcessNamespace", boolean(), "One PID namespace for all containers of the pod."),
            f("imagePullSecrets", list(object()), "Secrets (by name) with credentials for pulling the images."),
            f("hostname", string(), "The pod's hostname (its name when unset)."),
            f("subdomain", string(), "A subdomain that gives the pod a fully qualified name."),
            f("schedulerName", string(), "The scheduler that places the pod; drover's DaemonSet controller places daemon pods itself."),
            f("hostAliases", list(object()), "Extra entries of the pod's /etc/hosts."),
            f("priority", int32(), "The priority value, filled in from priorityClassName by Kubernetes' admission."),
            f("dnsConfig", object(), "Extra DNS resolver settings (nameservers, searches, options)."),
            f("readinessGates", list(object()), "Extra conditions that must be true for the pod to be ready."),
            f("runtimeClassName", string(), "A RuntimeClass that selects the container runtime configuration."),
            f("enableServiceLinks", boolean(), "Whether service addresses are injected as environment variables."),
            f("preemptionPolicy", enumeration(&["Never", "PreemptLowerPriority"]), "Whether the pod may preempt pods of lower priority (taken from the PriorityClass)."),
            f("overhead", map(TypeRef::Quantity), "Resources the pod's sandbox consumes on top of its containers."),
            f("setHostnameAsFQDN", boolean(), "Whether the hostname is the fully qualified domain name."),
            f("os", object(), "The operating system the pod needs (name: linux or windows)."),
            f("hostUsers", boolean(), "Whether the pod uses the host's user namespace."),
            f("schedulingGates", list(object()), "Gates that keep the pod from being scheduled until removed."),
            f("resourceClaims", list(object()), "Dynamic resource claims the pod's containers may use."),
            f("resources", ResourceRequirements::type_ref(), "Pod-level resource requests and limits."),
        ],
        "Container" => vec![
            f("resizePolicy", list(object()), "Whether a resource change restarts the container."),
            f("restartPolicy", string(), "For an init container: Always makes it a sidecar that keeps running."),
            f("volumeDevices", list(object()), "Raw block devices the container uses."),
            f("terminationMessagePath", string(), "File whose content becomes the termination message."),
            f("terminationMessagePolicy", enumeration(&["File", "FallbackToLogsOnError"]), "Where the termination message comes from."),
            f("stdin", boolean(), "Whether the container has a stdin buffer (drover's exec has no stdin)."),
            f("stdinOnce", boolean(), "Whether stdin closes after the first attach ends."),
            f("tty", boolean(), "Whether the container gets a TTY."),
        ],
        "ResourceRequirements" => vec![
            f("claims", list(object()), "Dynamic resource claims (from the pod's resourceClaims) the container uses."),
        ],
        "VolumeMount" => vec![
            f("recursiveReadOnly", enumeration(&["Disabled", "IfPossible", "Enabled"]), "Whether a read-only mount is read-only in its submounts too."),
            f("subPathExpr", string(), "Like subPath, with $(VAR) expanded from the container's environment."),
        ],
        "Volume" => vec![
            volume("gcePersistentDisk", "A GCE persistent disk."),
            volume("awsElasticBlockStore", "An AWS EBS volume."),
            volume("gitRepo", "A git repository cloned into a directory (deprecated by Kubernetes)."),
            volume("nfs", "An NFS share."),
            volume("iscsi", "An iSCSI disk."),
            volume("glusterfs", "A GlusterFS volume."),
            volume("persistentVolumeClaim", "A PersistentVolumeClaim in the pod's namespace."),
            volume("rbd", "A Ceph RBD volume."),
            volume("flexVolume", "A volume of a FlexVolume driver."),
            volume("cinder", "An OpenStack Cinder volume."),
            volume("cephfs", "A CephFS mount."),
            volume("flocker", "A Flocker volume."),
            volume("downwardAPI", "Fields of the pod as files (drover implements them inside a projected volume)."),
            volume("fc", "A Fibre Channel disk."),
            volume("azureFile", "An Azure File share."),
            volume("vsphereVolume", "A vSphere volume."),
            volume("quobyte", "A Quobyte volume."),
            volume("azureDisk", "An Azure data disk."),
            volume("photonPersistentDisk", "A Photon Controller disk."),
            volume("portworxVolume", "A Portworx volume."),
            volume("scaleIO", "A ScaleIO volume."),
            volume("storageos", "A StorageOS volume."),
            volume("csi", "A volume of a CSI driver."),
            volume("ephemeral", "A volume provisioned for the pod and deleted with it."),
            volume("image", "The content of an OCI image or artifact."),
        ],
        "SecurityContext" => vec![
            f("seLinuxOptions", object(), "SELinux labels of the container."),
            f("windowsOptions", object(), "Windows-specific settings."),
            f("procMount", enumeration(&["Default", "Unmasked"]), "How /proc is mounted."),
            f("seccompProfile", object(), "The seccomp profile of the container."),
            f("appArmorProfile", object(), "The AppArmor profile of the container."),
        ],
        "PodSecurityContext" => vec![
            f("seLinuxOptions", object(), "SELinux labels of the containers."),
            f("windowsOptions", object(), "Windows-specific settings."),
            f("supplementalGroupsPolicy", enumeration(&["Merge", "Strict"]), "How the supplementary groups are computed."),
            f("sysctls", list(object()), "Namespaced sysctls set for the pod."),
            f("fsGroupChangePolicy", enumeration(&["OnRootMismatch", "Always"]), "When volume ownership is changed to fsGroup."),
            f("seccompProfile", object(), "The seccomp profile of the containers."),
            f("appArmorProfile", object(), "The AppArmor profile of the containers."),
            f("seLinuxChangePolicy", string(), "How SELinux labels are applied to volumes."),
        ],
        "Probe" => vec![f("grpc", object(), "A gRPC health check (port and service).")],
        "PodStatus" => vec![
            f("hostIPs", list(object()), "The node's IP addresses (ip)."),
            f("podIPs", list(object()), "The pod's IP addresses (ip)."),
            f("initContainerStatuses", list(ContainerStatus::type_ref()), "State of each init container."),
            f("qosClass", enumeration(&["BestEffort", "Burstable", "Guaranteed"]), "The quality of service class from the containers' requests and limits."),
            f("ephemeralContainerStatuses", list(ContainerStatus::type_ref()), "State of each ephemeral container."),
            f("resize", string(), "Progress of a requested resource resize."),
            f("resourceClaimStatuses", list(object()), "The ResourceClaims made for the pod."),
        ],
        "ContainerStatus" => vec![
            f("allocatedResources", map(TypeRef::Quantity), "Resources the node allocated to the container."),
            f("resources", ResourceRequirements::type_ref(), "The requests and limits in effect."),
            f("volumeMounts", list(object()), "The mounts as the runtime made them."),
            f("user", object(), "The identity the first process runs as."),
            f("allocatedResourcesStatus", list(object()), "Health of the allocated devices."),
        ],
        "NodeSpec" => vec![
            f("podCIDR", string(), "The pod IP range of the node."),
            f("podCIDRs", strings(), "The pod IP ranges of the node (one per IP family)."),
            f("providerID", string(), "The node's ID at its cloud provider."),
            f("configSource", object(), "Deprecated dynamic kubelet configuration."),
            f("externalID", string(), "Deprecated."),
        ],
        "NodeStatus" => vec![
            f("phase", string(), "Deprecated node lifecycle phase."),
            f("daemonEndpoints", object(), "Ports of the node's daemons (kubeletEndpoint)."),
            f("images", list(object()), "Images present on the node."),
            f("volumesInUse", strings(), "Volumes attached and mounted on the node."),
            f("volumesAttached", list(object()), "Volumes attached to the node."),
            f("config", object(), "Status of dynamic kubelet configuration."),
            f("runtimeHandlers", list(object()), "Runtime handlers the node offers."),
            f("features", object(), "Features the node's kubelet supports."),
        ],
        "NodeSystemInfo" => vec![f("kubeProxyVersion", string(), "Deprecated kube-proxy version.")],
        "Event" => vec![
            f("series", object(), "Data about a series of the same event (count, last time)."),
            f("related", object(), "A second object the event is about (an ObjectReference)."),
        ],
        "Namespace" => vec![f("spec", object(), "Desired state: the namespace's finalizers.")],
        "NamespaceStatus" => vec![f("conditions", list(object()), "Conditions of the namespace.")],
        "ServiceAccount" => vec![
            f("secrets", list(object()), "Secrets pods of this account may use."),
            f("imagePullSecrets", list(object()), "Secrets (by name) added to the pods of this account for pulling images."),
        ],
        "VolumeProjection" => vec![
            f("serviceAccountToken", object(), "A token of the pod's service account; drover issues none."),
            f("clusterTrustBundle", object(), "Certificates of a ClusterTrustBundle."),
        ],
        "DownwardApiVolumeFile" => vec![f("resourceFieldRef", ResourceFieldSelector::type_ref(), "A resource request or limit of a container, as the file's content.")],
        _ => Vec::new(),
    }
}
