//! The kinds of object the kubectl-style commands work on, and how kubectl
//! names them in its messages.

use anyhow::{bail, Result};
use drover_api::Manifest;

/// A kind of object, as `get`, `describe` and `delete` take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    DaemonSet,
    Pod,
    Node,
    Event,
    ControllerRevision,
}

impl Kind {
    /// Parses a kind as kubectl accepts it: plural, singular or short name,
    /// in any case, optionally with its group (`daemonsets.apps`).
    pub fn parse(s: &str) -> Result<Kind> {
        let lower = s.to_ascii_lowercase();
        let (base, group) = lower.split_once('.').unwrap_or((&lower, ""));
        let kind = match base {
            "ds" | "daemonset" | "daemonsets" => Kind::DaemonSet,
            "po" | "pod" | "pods" => Kind::Pod,
            "no" | "node" | "nodes" => Kind::Node,
            "ev" | "event" | "events" => Kind::Event,
            "controllerrevision" | "controllerrevisions" => Kind::ControllerRevision,
            _ => bail!(
                "the server doesn't have a resource type {s:?} (drover has daemonsets (ds), pods (po), nodes (no), events (ev), controllerrevisions)"
            ),
        };
        let expected = match kind {
            Kind::DaemonSet | Kind::ControllerRevision => "apps",
            _ => "",
        };
        if !group.is_empty() && group != expected {
            bail!("the server doesn't have a resource type {s:?}");
        }
        Ok(kind)
    }

    /// The kind of an object.
    pub fn of(m: &Manifest) -> Kind {
        match m {
            Manifest::DaemonSet(_) => Kind::DaemonSet,
            Manifest::Pod(_) => Kind::Pod,
            Manifest::Node(_) => Kind::Node,
            Manifest::Event(_) => Kind::Event,
            Manifest::ControllerRevision(_) => Kind::ControllerRevision,
        }
    }

    /// The plural the server takes: `daemonsets`, `pods`, …
    pub fn plural(self) -> &'static str {
        match self {
            Kind::DaemonSet => "daemonsets",
            Kind::Pod => "pods",
            Kind::Node => "nodes",
            Kind::Event => "events",
            Kind::ControllerRevision => "controllerrevisions",
        }
    }

    /// How kubectl names one object of the kind: `daemonset.apps`, `pod`.
    pub fn singular(self) -> &'static str {
        match self {
            Kind::DaemonSet => "daemonset.apps",
            Kind::Pod => "pod",
            Kind::Node => "node",
            Kind::Event => "event",
            Kind::ControllerRevision => "controllerrevision.apps",
        }
    }

    /// How the API server names the resource in errors: `daemonsets.apps`.
    pub fn resource(self) -> &'static str {
        match self {
            Kind::DaemonSet => "daemonsets.apps",
            Kind::ControllerRevision => "controllerrevisions.apps",
            other => other.plural(),
        }
    }

    /// Whether objects of the kind live in a namespace (all but nodes).
    pub fn namespaced(self) -> bool {
        self != Kind::Node
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
            ("daemonsets.apps", Kind::DaemonSet),
            ("po", Kind::Pod),
            ("pod", Kind::Pod),
            ("no", Kind::Node),
            ("nodes", Kind::Node),
            ("ev", Kind::Event),
            ("controllerrevisions", Kind::ControllerRevision),
        ] {
            assert_eq!(Kind::parse(s).unwrap(), k, "{s}");
        }
        let e = Kind::parse("deployments").unwrap_err().to_string();
        assert!(
            e.starts_with("the server doesn't have a resource type \"deployments\""),
            "{e}"
        );
        assert!(Kind::parse("pods.apps").is_err());
        assert_eq!(Kind::DaemonSet.singular(), "daemonset.apps");
        assert_eq!(Kind::DaemonSet.resource(), "daemonsets.apps");
        assert_eq!(Kind::Pod.resource(), "pods");
        assert!(!Kind::Node.namespaced());
    }
}
