//! The kinds of object drover stores and serves, and how kubectl and the
//! API server name them. The one definition shared by the server (store
//! keys, errors) and the client (argument parsing, messages).

use crate::Manifest;

/// A kind of object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `v1` Node (cluster-scoped).
    Node,
    /// `v1` Pod.
    Pod,
    /// `apps/v1` DaemonSet.
    DaemonSet,
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` ReplicaSet.
    ReplicaSet,
    /// `apps/v1` ControllerRevision.
    ControllerRevision,
    /// `v1` Event.
    Event,
    /// `scheduling.k8s.io/v1` PriorityClass (cluster-scoped).
    PriorityClass,
    /// `v1` ConfigMap.
    ConfigMap,
    /// `v1` Secret.
    Secret,
    /// `v1` Namespace (cluster-scoped).
    Namespace,
    /// `v1` ServiceAccount.
    ServiceAccount,
}

/// A name that is not a kind drover has (`statefulsets`, `pods.apps`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the server doesn't have a resource type {0:?} (drover has daemonsets (ds), deployments (deploy), replicasets (rs), pods (po), nodes (no), events (ev), controllerrevisions, priorityclasses (pc), configmaps (cm), secrets, namespaces (ns), serviceaccounts (sa))")]
pub struct UnknownKind(pub String);

impl Kind {
    /// Every kind, in the order `drover` lists them.
    pub const ALL: [Kind; 12] = [
        Kind::DaemonSet,
        Kind::Deployment,
        Kind::ReplicaSet,
        Kind::Pod,
        Kind::Node,
        Kind::Event,
        Kind::ControllerRevision,
        Kind::PriorityClass,
        Kind::ConfigMap,
        Kind::Secret,
        Kind::Namespace,
        Kind::ServiceAccount,
    ];

    /// Parses a kind as kubectl accepts it: plural, singular or short name,
    /// in any case, optionally with its own group (`daemonsets.apps`; a
    /// wrong group, as in `pods.apps`, is refused).
    pub fn parse(s: &str) -> Result<Kind, UnknownKind> {
        let lower = s.to_ascii_lowercase();
        let (base, group) = lower.split_once('.').unwrap_or((&lower, ""));
        let kind = match base {
            "ds" | "daemonset" | "daemonsets" => Kind::DaemonSet,
            "deploy" | "deployment" | "deployments" => Kind::Deployment,
            "rs" | "replicaset" | "replicasets" => Kind::ReplicaSet,
            "po" | "pod" | "pods" => Kind::Pod,
            "no" | "node" | "nodes" => Kind::Node,
            "ev" | "event" | "events" => Kind::Event,
            "controllerrevision" | "controllerrevisions" => Kind::ControllerRevision,
            "pc" | "priorityclass" | "priorityclasses" => Kind::PriorityClass,
            "cm" | "configmap" | "configmaps" => Kind::ConfigMap,
            "secret" | "secrets" => Kind::Secret,
            "ns" | "namespace" | "namespaces" => Kind::Namespace,
            "sa" | "serviceaccount" | "serviceaccounts" => Kind::ServiceAccount,
            _ => return Err(UnknownKind(s.to_string())),
        };
        if !group.is_empty() && group != kind.group() {
            return Err(UnknownKind(s.to_string()));
        }
        Ok(kind)
    }

    /// The kind of an object.
    pub fn of(m: &Manifest) -> Kind {
        match m {
            Manifest::Node(_) => Kind::Node,
            Manifest::Pod(_) => Kind::Pod,
            Manifest::DaemonSet(_) => Kind::DaemonSet,
            Manifest::Deployment(_) => Kind::Deployment,
            Manifest::ReplicaSet(_) => Kind::ReplicaSet,
            Manifest::ControllerRevision(_) => Kind::ControllerRevision,
            Manifest::Event(_) => Kind::Event,
            Manifest::PriorityClass(_) => Kind::PriorityClass,
            Manifest::ConfigMap(_) => Kind::ConfigMap,
            Manifest::Secret(_) => Kind::Secret,
            Manifest::Namespace(_) => Kind::Namespace,
            Manifest::ServiceAccount(_) => Kind::ServiceAccount,
        }
    }

    /// The API group: `""` for core, `"apps"`.
    pub fn group(self) -> &'static str {
        match self {
            Kind::DaemonSet | Kind::Deployment | Kind::ReplicaSet | Kind::ControllerRevision => {
                "apps"
            }
            Kind::PriorityClass => "scheduling.k8s.io",
            _ => "",
        }
    }

    /// `kind` as manifests write it: `DaemonSet`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Node => "Node",
            Kind::Pod => "Pod",
            Kind::DaemonSet => "DaemonSet",
            Kind::Deployment => "Deployment",
            Kind::ReplicaSet => "ReplicaSet",
            Kind::ControllerRevision => "ControllerRevision",
            Kind::Event => "Event",
            Kind::PriorityClass => "PriorityClass",
            Kind::ConfigMap => "ConfigMap",
            Kind::Secret => "Secret",
            Kind::Namespace => "Namespace",
            Kind::ServiceAccount => "ServiceAccount",
        }
    }

    /// The plural, as in `/registry/<plural>/` and in API paths.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Node => "nodes",
            Kind::Pod => "pods",
            Kind::DaemonSet => "daemonsets",
            Kind::Deployment => "deployments",
            Kind::ReplicaSet => "replicasets",
            Kind::ControllerRevision => "controllerrevisions",
            Kind::Event => "events",
            Kind::PriorityClass => "priorityclasses",
            Kind::ConfigMap => "configmaps",
            Kind::Secret => "secrets",
            Kind::Namespace => "namespaces",
            Kind::ServiceAccount => "serviceaccounts",
        }
    }

    /// How kubectl names one object of the kind: `daemonset.apps`, `pod`.
    pub fn singular(self) -> &'static str {
        match self {
            Kind::DaemonSet => "daemonset.apps",
            Kind::Deployment => "deployment.apps",
            Kind::ReplicaSet => "replicaset.apps",
            Kind::Pod => "pod",
            Kind::Node => "node",
            Kind::Event => "event",
            Kind::ControllerRevision => "controllerrevision.apps",
            Kind::PriorityClass => "priorityclass.scheduling.k8s.io",
            Kind::ConfigMap => "configmap",
            Kind::Secret => "secret",
            Kind::Namespace => "namespace",
            Kind::ServiceAccount => "serviceaccount",
        }
    }

    /// How the API server names the resource in errors: `daemonsets.apps`,
    /// `pods`.
    pub fn resource(self) -> &'static str {
        match self {
            Kind::DaemonSet => "daemonsets.apps",
            Kind::Deployment => "deployments.apps",
            Kind::ReplicaSet => "replicasets.apps",
            Kind::ControllerRevision => "controllerrevisions.apps",
            Kind::PriorityClass => "priorityclasses.scheduling.k8s.io",
            other => other.plural(),
        }
    }

    /// kubectl's short names of the kind (`ds`), as discovery lists them.
    pub fn short_names(self) -> &'static [&'static str] {
        match self {
            Kind::DaemonSet => &["ds"],
            Kind::Deployment => &["deploy"],
            Kind::ReplicaSet => &["rs"],
            Kind::Pod => &["po"],
            Kind::Node => &["no"],
            Kind::Event => &["ev"],
            Kind::ControllerRevision => &[],
            Kind::PriorityClass => &["pc"],
            Kind::ConfigMap => &["cm"],
            Kind::Secret => &[],
            Kind::Namespace => &["ns"],
            Kind::ServiceAccount => &["sa"],
        }
    }

    /// `apiVersion` of the kind's objects: `apps/v1`, `v1`.
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::DaemonSet | Kind::Deployment | Kind::ReplicaSet | Kind::ControllerRevision => {
                "apps/v1"
            }
            Kind::PriorityClass => "scheduling.k8s.io/v1",
            _ => "v1",
        }
    }

    /// Whether objects of the kind live in a namespace (all but nodes,
    /// priority classes and namespaces).
    pub fn namespaced(self) -> bool {
        !matches!(self, Kind::Node | Kind::PriorityClass | Kind::Namespace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_names() {
        for (s, k) in [
            ("ds", Kind::DaemonSet),
            ("DaemonSets", Kind::DaemonSet),
            ("DaemonSet", Kind::DaemonSet),
            ("daemonsets.apps", Kind::DaemonSet),
            ("deploy", Kind::Deployment),
            ("Deployment", Kind::Deployment),
            ("deployments.apps", Kind::Deployment),
            ("rs", Kind::ReplicaSet),
            ("replicaset", Kind::ReplicaSet),
            ("replicasets.apps", Kind::ReplicaSet),
            ("po", Kind::Pod),
            ("pod", Kind::Pod),
            ("no", Kind::Node),
            ("nodes", Kind::Node),
            ("ev", Kind::Event),
            ("controllerrevisions", Kind::ControllerRevision),
            ("controllerrevisions.apps", Kind::ControllerRevision),
            ("pc", Kind::PriorityClass),
            ("priorityclasses.scheduling.k8s.io", Kind::PriorityClass),
            ("cm", Kind::ConfigMap),
            ("configmaps", Kind::ConfigMap),
            ("secret", Kind::Secret),
            ("Secrets", Kind::Secret),
            ("ns", Kind::Namespace),
            ("sa", Kind::ServiceAccount),
        ] {
            assert_eq!(Kind::parse(s).unwrap(), k, "{s}");
        }
        let e = Kind::parse("statefulsets").unwrap_err().to_string();
        assert!(
            e.starts_with("the server doesn't have a resource type \"statefulsets\""),
            "{e}"
        );
        assert_eq!(
            Kind::parse("pods.apps"),
            Err(UnknownKind("pods.apps".into()))
        );
        assert!(Kind::parse("daemonsets.batch").is_err());
        assert!(Kind::parse("deployments.extensions").is_err());
        assert_eq!(Kind::Deployment.resource(), "deployments.apps");
        assert_eq!(Kind::ReplicaSet.api_version(), "apps/v1");
        assert_eq!(Kind::DaemonSet.singular(), "daemonset.apps");
        assert_eq!(Kind::DaemonSet.resource(), "daemonsets.apps");
        assert_eq!(Kind::Pod.resource(), "pods");
        assert!(!Kind::Node.namespaced());
        for k in Kind::ALL {
            assert_eq!(
                k.api_version().split_once('/').map_or("", |(g, _)| g),
                k.group()
            );
            for s in k.short_names() {
                assert_eq!(Kind::parse(s), Ok(k));
            }
            assert_eq!(Kind::parse(k.plural()), Ok(k));
            assert_eq!(Kind::parse(k.name()), Ok(k));
            assert_eq!(Kind::parse(k.resource()), Ok(k));
        }
    }
}
