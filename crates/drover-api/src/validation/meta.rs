//! Object metadata: name or generateName, namespace, generation, labels,
//! annotations, owner references; and what an update may not change.

use serde::Serialize;

use super::errors::{BadValue, FieldError, Path};
use super::fields::{
    validate_annotations, validate_dns1123_label, validate_labels, validate_nonnegative,
};
use super::names::name_is_dns_subdomain;
use crate::meta::ObjectMeta;

/// Errors of an object's metadata: name (a DNS subdomain), namespace
/// (required and a DNS label for namespaced kinds, forbidden otherwise),
/// generation, labels, annotations, owner references.
pub fn validate_object_meta(meta: &ObjectMeta, namespaced: bool, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if meta.name.is_empty() && meta.generate_name.is_empty() {
        errors.push(FieldError::required(
            &path.child("name"),
            "name or generateName is required",
        ));
    }
    if !meta.name.is_empty() {
        errors.extend(
            name_is_dns_subdomain(&meta.name, false)
                .into_iter()
                .map(|m| FieldError::invalid(&path.child("name"), &meta.name, m)),
        );
    }
    if !meta.generate_name.is_empty() {
        errors.extend(
            name_is_dns_subdomain(&meta.generate_name, true)
                .into_iter()
                .map(|m| FieldError::invalid(&path.child("generateName"), &meta.generate_name, m)),
        );
    }
    if namespaced {
        if meta.namespace.is_empty() {
            errors.push(FieldError::required(&path.child("namespace"), ""));
        } else {
            errors.extend(validate_dns1123_label(
                &meta.namespace,
                &path.child("namespace"),
            ));
        }
    } else if !meta.namespace.is_empty() {
        errors.push(FieldError::forbidden(
            &path.child("namespace"),
            "not allowed on this type",
        ));
    }
    if let Some(generation) = meta.generation {
        errors.extend(validate_nonnegative(generation, &path.child("generation")));
    }
    errors.extend(validate_labels(&meta.labels, &path.child("labels")));
    errors.extend(validate_annotations(
        &meta.annotations,
        &path.child("annotations"),
    ));
    let owners = path.child("ownerReferences");
    let mut controllers = Vec::new();
    for (i, owner) in meta.owner_references.iter().enumerate() {
        let p = owners.index(i);
        let version = owner.api_version.rsplit('/').next().unwrap_or_default();
        if version.is_empty() {
            errors.push(FieldError::invalid(
                &p.child("apiVersion"),
                &owner.api_version,
                "version must not be empty",
            ));
        }
        for (field, value) in [
            ("kind", &owner.kind),
            ("name", &owner.name),
            ("uid", &owner.uid),
        ] {
            if value.is_empty() {
                errors.push(FieldError::invalid(
                    &p.child(field),
                    value,
                    "must not be empty",
                ));
            }
        }
        if owner.controller == Some(true) {
            controllers.push(format!("{}/{}", owner.kind, owner.name));
        }
    }
    if controllers.len() > 1 {
        errors.push(FieldError::invalid(
            &owners,
            BadValue::json(&meta.owner_references),
            format!(
                "Only one reference can have Controller set to true. Found \"true\" in references for {}",
                controllers.join(" and ")
            ),
        ));
    }
    errors
}

pub(super) fn validate_immutable<T: PartialEq + Serialize + ?Sized>(
    new: &T,
    old: &T,
    path: &Path,
) -> Vec<FieldError> {
    if new == old {
        Vec::new()
    } else {
        vec![FieldError::invalid(
            path,
            BadValue::json(new),
            "field is immutable",
        )]
    }
}

/// Errors of a metadata update: name and namespace can't change, nor a set
/// uid. (The server copies its own fields, uid and creationTimestamp, onto
/// an applied manifest before validating it.)
pub fn validate_object_meta_update(
    new: &ObjectMeta,
    old: &ObjectMeta,
    path: &Path,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    errors.extend(validate_immutable(
        &new.name,
        &old.name,
        &path.child("name"),
    ));
    errors.extend(validate_immutable(
        &new.namespace,
        &old.namespace,
        &path.child("namespace"),
    ));
    if !new.uid.is_empty() && !old.uid.is_empty() {
        errors.extend(validate_immutable(&new.uid, &old.uid, &path.child("uid")));
    }
    errors
}
