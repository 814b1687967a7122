//! Pod affinity, pod anti-affinity and topology spread constraints, as
//! Kubernetes' `validatePodAffinity`, `validatePodAntiAffinity` and
//! `validateTopologySpreadConstraints` check them: a topology key is
//! required and a valid label key, weights are 1-100, `maxSkew` and
//! `minDomains` are positive, `whenUnsatisfiable` and the node inclusion
//! policies take their known values, and no two constraints share a
//! topology key and action.

use std::collections::BTreeSet;

use super::errors::{FieldError, Path};
use super::fields::{validate_dns1123_label, validate_qualified_name};
use super::selectors::validate_label_selector;
use crate::core_v1::Affinity;
use crate::core_v1_affinity::{
    NodeInclusionPolicy, PodAffinityTerm, TopologySpreadConstraint, UnsatisfiableConstraintAction,
    WeightedPodAffinityTerm,
};

fn validate_topology_key(key: &str, path: &Path) -> Vec<FieldError> {
    if key.is_empty() {
        return vec![FieldError::required(path, "can not be empty")];
    }
    validate_qualified_name(key, path)
}

fn validate_term(term: &PodAffinityTerm, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(selector) = &term.label_selector {
        errors.extend(validate_label_selector(
            selector,
            &path.child("labelSelector"),
        ));
    }
    if let Some(selector) = &term.namespace_selector {
        errors.extend(validate_label_selector(
            selector,
            &path.child("namespaceSelector"),
        ));
    }
    for (i, namespace) in term.namespaces.iter().enumerate() {
        errors.extend(validate_dns1123_label(
            namespace,
            &path.child("namespaces").index(i),
        ));
    }
    for (field, keys) in [
        ("matchLabelKeys", &term.match_label_keys),
        ("mismatchLabelKeys", &term.mismatch_label_keys),
    ] {
        for (i, key) in keys.iter().enumerate() {
            errors.extend(validate_qualified_name(key, &path.child(field).index(i)));
        }
    }
    errors.extend(validate_topology_key(
        &term.topology_key,
        &path.child("topologyKey"),
    ));
    errors
}

fn validate_terms(
    required: &[PodAffinityTerm],
    preferred: &[WeightedPodAffinityTerm],
    path: &Path,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let r = path.child("requiredDuringSchedulingIgnoredDuringExecution");
    for (i, term) in required.iter().enumerate() {
        errors.extend(validate_term(term, &r.index(i)));
    }
    let p = path.child("preferredDuringSchedulingIgnoredDuringExecution");
    for (i, weighted) in preferred.iter().enumerate() {
        let wp = p.index(i);
        if !(1..=100).contains(&weighted.weight) {
            errors.push(FieldError::invalid(
                &wp.child("weight"),
                weighted.weight,
                "must be in the range 1-100",
            ));
        }
        errors.extend(validate_term(
            &weighted.pod_affinity_term,
            &wp.child("podAffinityTerm"),
        ));
    }
    errors
}

/// Errors of a pod's `podAffinity` and `podAntiAffinity` (the path is the
/// pod spec's `affinity`).
pub fn validate_pod_affinity(affinity: &Affinity, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(a) = &affinity.pod_affinity {
        errors.extend(validate_terms(
            &a.required_during_scheduling_ignored_during_execution,
            &a.preferred_during_scheduling_ignored_during_execution,
            &path.child("podAffinity"),
        ));
    }
    if let Some(a) = &affinity.pod_anti_affinity {
        errors.extend(validate_terms(
            &a.required_during_scheduling_ignored_during_execution,
            &a.preferred_during_scheduling_ignored_during_execution,
            &path.child("podAntiAffinity"),
        ));
    }
    errors
}

fn validate_policy(policy: &Option<NodeInclusionPolicy>, path: &Path) -> Option<FieldError> {
    match policy {
        Some(NodeInclusionPolicy::Other(other)) => Some(FieldError::not_supported(
            path,
            other.as_str(),
            NodeInclusionPolicy::KNOWN,
        )),
        _ => None,
    }
}

/// Errors of a pod's `topologySpreadConstraints` (the path is the list's).
pub fn validate_topology_spread_constraints(
    constraints: &[TopologySpreadConstraint],
    path: &Path,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, c) in constraints.iter().enumerate() {
        let p = path.index(i);
        if c.max_skew <= 0 {
            errors.push(FieldError::invalid(
                &p.child("maxSkew"),
                c.max_skew,
                "must be greater than zero",
            ));
        }
        errors.extend(validate_topology_key(
            &c.topology_key,
            &p.child("topologyKey"),
        ));
        let action = c.when_unsatisfiable.as_ref().map_or("", |a| a.as_str());
        if !UnsatisfiableConstraintAction::KNOWN.contains(&action) {
            errors.push(FieldError::not_supported(
                &p.child("whenUnsatisfiable"),
                action,
                UnsatisfiableConstraintAction::KNOWN,
            ));
        }
        if !seen.insert((c.topology_key.as_str(), action)) {
            errors.push(FieldError::duplicate(
                &p.child("{topologyKey, whenUnsatisfiable}"),
                format!("{{{}, {}}}", c.topology_key, action),
            ));
        }
        if let Some(min) = c.min_domains {
            if min <= 0 {
                errors.push(FieldError::invalid(
                    &p.child("minDomains"),
                    min,
                    "must be greater than zero",
                ));
            } else if c.when_unsatisfiable != Some(UnsatisfiableConstraintAction::DoNotSchedule) {
                errors.push(FieldError::invalid(
                    &p.child("minDomains"),
                    min,
                    format!(
                        "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}"
                    ),
                ));
            }
        }
        errors.extend(validate_policy(
            &c.node_affinity_policy,
            &p.child("nodeAffinityPolicy"),
        ));
        errors.extend(validate_policy(
            &c.node_taints_policy,
            &p.child("nodeTaintsPolicy"),
        ));
        if let Some(selector) = &c.label_selector {
            errors.extend(validate_label_selector(selector, &p.child("labelSelector")));
        }
        for (j, key) in c.match_label_keys.iter().enumerate() {
            errors.extend(validate_qualified_name(
                key,
                &p.child("matchLabelKeys").index(j),
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core_v1_affinity::{PodAffinity, PodAntiAffinity};
    use crate::meta::LabelSelector;

    fn term(key: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: Some(LabelSelector::default()),
            topology_key: key.into(),
            ..Default::default()
        }
    }

    fn messages(errors: &[FieldError]) -> Vec<String> {
        errors.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn pod_affinity_terms_need_a_topology_key_and_weights_in_range() {
        let affinity = Affinity {
            pod_affinity: Some(PodAffinity {
                required_during_scheduling_ignored_during_execution: vec![term("")],
                preferred_during_scheduling_ignored_during_execution: vec![
                    WeightedPodAffinityTerm {
                        weight: 0,
                        pod_affinity_term: term("zone"),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }),
            pod_anti_affinity: Some(PodAntiAffinity {
                preferred_during_scheduling_ignored_during_execution: vec![
                    WeightedPodAffinityTerm {
                        weight: 101,
                        pod_affinity_term: term("bad key!"),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }),
            ..Default::default()
        };
        let m = messages(&validate_pod_affinity(
            &affinity,
            &Path::new("spec").child("affinity"),
        ));
        assert_eq!(m.len(), 4, "{m:#?}");
        assert_eq!(
            m[0],
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: can not be empty"
        );
        assert_eq!(
            m[1],
            "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100"
        );
        assert_eq!(
            m[2],
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 101: must be in the range 1-100"
        );
        assert!(
            m[3].starts_with("spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey: Invalid value: \"bad key!\""),
            "{}",
            m[3]
        );
        // A good term passes.
        let good = Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: vec![term(
                    "kubernetes.io/hostname",
                )],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(validate_pod_affinity(&good, &Path::new("spec")).is_empty());
    }

    fn constraint(skew: i32, key: &str, action: Option<&str>) -> TopologySpreadConstraint {
        TopologySpreadConstraint {
            max_skew: skew,
            topology_key: key.into(),
            when_unsatisfiable: action.map(UnsatisfiableConstraintAction::from),
            ..Default::default()
        }
    }

    #[test]
    fn topology_spread_constraints_are_checked_as_kubernetes_does() {
        let path = Path::new("spec").child("topologySpreadConstraints");
        let good = [
            constraint(1, "topology.kubernetes.io/zone", Some("DoNotSchedule")),
            constraint(2, "topology.kubernetes.io/zone", Some("ScheduleAnyway")),
        ];
        assert!(validate_topology_spread_constraints(&good, &path).is_empty());

        let mut bad = vec![
            constraint(0, "", Some("Sometimes")),
            constraint(1, "zone", None),
            constraint(1, "zone", None),
        ];
        bad[1].min_domains = Some(2);
        bad[2].min_domains = Some(0);
        bad[2].node_taints_policy = Some("Maybe".into());
        let m = messages(&validate_topology_spread_constraints(&bad, &path));
        let want = [
            "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
            "spec.topologySpreadConstraints[0].topologyKey: Required value: can not be empty",
            "spec.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: \"Sometimes\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
            "spec.topologySpreadConstraints[1].whenUnsatisfiable: Unsupported value: \"\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
            "spec.topologySpreadConstraints[1].minDomains: Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ",
            "spec.topologySpreadConstraints[2].whenUnsatisfiable: Unsupported value: \"\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
            "spec.topologySpreadConstraints[2].{topologyKey, whenUnsatisfiable}: Duplicate value: \"{zone, }\"",
            "spec.topologySpreadConstraints[2].minDomains: Invalid value: 0: must be greater than zero",
            "spec.topologySpreadConstraints[2].nodeTaintsPolicy: Unsupported value: \"Maybe\": supported values: \"Honor\", \"Ignore\"",
        ];
        assert_eq!(m, want);
    }
}

#[cfg(test)]
mod pod_tests {
    use crate::{parse_manifests, Manifest};

    #[test]
    fn a_pod_is_refused_for_its_spread_and_affinity_and_round_trips_them() {
        let yaml = r#"
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers: [{name: c, image: busybox}]
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 50
        podAffinityTerm:
          labelSelector: {matchLabels: {app: web}}
          topologyKey: topology.kubernetes.io/zone
          namespaceSelector: {}
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}, minDomains: 3, nodeTaintsPolicy: Honor, matchLabelKeys: [pod-template-hash]}
"#;
        let manifests = parse_manifests(yaml).expect("parses");
        let Manifest::Pod(pod) = &manifests[0] else {
            panic!("a pod")
        };
        assert!(manifests[0].unknown_fields().is_empty());
        assert!(
            manifests[0].validate().is_ok(),
            "{:?}",
            manifests[0].validate()
        );
        let json = serde_json::to_value(pod.as_ref()).expect("serializes");
        assert_eq!(
            json["spec"]["topologySpreadConstraints"][0]["nodeTaintsPolicy"],
            "Honor"
        );
        assert_eq!(
            json["spec"]["affinity"]["podAntiAffinity"]
                ["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
                ["namespaceSelector"],
            serde_json::json!({})
        );
        let back: crate::Pod = serde_json::from_value(json).expect("reads back");
        assert_eq!(&back, pod.as_ref());

        let bad = yaml
            .replace("maxSkew: 1", "maxSkew: 0")
            .replace("weight: 50", "weight: 500");
        let manifests = parse_manifests(&bad).expect("parses");
        let err = manifests[0].validate().expect_err("refused");
        assert_eq!(
            err.to_string(),
            "Pod \"web\" is invalid: [spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 500: must be in the range 1-100, spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero]"
        );
    }
}
