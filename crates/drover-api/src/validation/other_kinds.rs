//! The other kinds: nodes (name, labels, taints; the name is immutable),
//! ControllerRevisions and Events.

use super::errors::{to_result, FieldError, Invalid, Path};
use super::fields::validate_nonnegative;
use super::meta::{validate_object_meta, validate_object_meta_update};
use super::taints::validate_taints;
use crate::apps_v1::ControllerRevision;
use crate::core_v1::{Event, Node};
use crate::scheduling_v1::PriorityClass;

/// Validates a node: name, labels, taints.
pub fn validate_node(node: &Node) -> Result<(), Invalid> {
    let mut errors = validate_object_meta(&node.metadata, false, &Path::new("metadata"));
    errors.extend(validate_taints(
        &node.spec.taints,
        &Path::new("spec").child("taints"),
    ));
    to_result(node, errors)
}

/// Validates an update of a node: besides [`validate_node`], its name can't change.
pub fn validate_node_update(new: &Node, old: &Node) -> Result<(), Invalid> {
    let mut errors =
        validate_object_meta_update(&new.metadata, &old.metadata, &Path::new("metadata"));
    if let Err(invalid) = validate_node(new) {
        errors.extend(invalid.errors);
    }
    to_result(new, errors)
}

/// Validates a ControllerRevision: metadata, `data` present, `revision` non-negative.
pub fn validate_controller_revision(revision: &ControllerRevision) -> Result<(), Invalid> {
    let mut errors = validate_object_meta(&revision.metadata, true, &Path::new("metadata"));
    if revision.data.is_null() {
        errors.push(FieldError::required(
            &Path::new("data"),
            "data is mandatory",
        ));
    }
    errors.extend(validate_nonnegative(
        revision.revision,
        &Path::new("revision"),
    ));
    to_result(revision, errors)
}

/// Validates an event: metadata, and the object it is about.
pub fn validate_event(event: &Event) -> Result<(), Invalid> {
    let mut errors = validate_object_meta(&event.metadata, true, &Path::new("metadata"));
    let involved = Path::new("involvedObject");
    if event.involved_object.kind.is_empty() {
        errors.push(FieldError::required(&involved.child("kind"), ""));
    }
    if event.involved_object.name.is_empty() {
        errors.push(FieldError::required(&involved.child("name"), ""));
    }
    to_result(event, errors)
}

/// Validates a PriorityClass, as the API server does: a name not starting
/// with `system-` (the built-in classes are `system-node-critical` and
/// `system-cluster-critical`), a value at most 1,000,000,000, and a
/// `preemptionPolicy` of `PreemptLowerPriority` or `Never`.
pub fn validate_priority_class(class: &PriorityClass) -> Result<(), Invalid> {
    use crate::scheduling_v1::{HIGHEST_USER_DEFINABLE_PRIORITY, PREEMPT_NEVER};
    let mut errors = validate_object_meta(&class.metadata, false, &Path::new("metadata"));
    if class.metadata.name.starts_with("system-") {
        errors.push(FieldError::forbidden(
            &Path::new("metadata").child("name"),
            "priority class names with 'system-' prefix are reserved (system-node-critical and system-cluster-critical are built in)",
        ));
    }
    if class.value > HIGHEST_USER_DEFINABLE_PRIORITY {
        errors.push(FieldError::forbidden(
            &Path::new("value"),
            format!("maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"),
        ));
    }
    if let Some(p) = &class.preemption_policy {
        if p != "PreemptLowerPriority" && p != PREEMPT_NEVER {
            errors.push(FieldError::not_supported(
                &Path::new("preemptionPolicy"),
                p.as_str(),
                &["Never", "PreemptLowerPriority"],
            ));
        }
    }
    to_result(class, errors)
}

/// Validates an update of a PriorityClass: its value cannot change.
pub fn validate_priority_class_update(
    new: &PriorityClass,
    old: &PriorityClass,
) -> Result<(), Invalid> {
    let mut errors =
        validate_object_meta_update(&new.metadata, &old.metadata, &Path::new("metadata"));
    if let Err(invalid) = validate_priority_class(new) {
        errors.extend(invalid.errors);
    }
    if new.value != old.value {
        errors.push(FieldError::forbidden(
            &Path::new("value"),
            "may not be changed in an update",
        ));
    }
    to_result(new, errors)
}
