//! Checks of single field values, shared by every kind, that report
//! [`FieldError`]s at the given path: a DNS label or subdomain, a qualified
//! name, a non-negative number, a user or group id, a quantity, and the
//! label and annotation maps.

use super::errors::{FieldError, Path};
use super::names::{
    inclusive_range_error, is_dns1123_label, is_dns1123_subdomain, is_qualified_name,
    is_valid_label_value, MAX_LABELS, TOTAL_ANNOTATION_SIZE_LIMIT, TOTAL_LABEL_SIZE_LIMIT,
};
use crate::meta::Labels;
use crate::quantity::Quantity;

pub(super) fn validate_dns1123_label(value: &str, path: &Path) -> Vec<FieldError> {
    is_dns1123_label(value)
        .into_iter()
        .map(|m| FieldError::invalid(path, value, m))
        .collect()
}

pub(super) fn validate_dns1123_subdomain(value: &str, path: &Path) -> Vec<FieldError> {
    is_dns1123_subdomain(value)
        .into_iter()
        .map(|m| FieldError::invalid(path, value, m))
        .collect()
}

pub(super) fn validate_qualified_name(value: &str, path: &Path) -> Vec<FieldError> {
    is_qualified_name(value)
        .into_iter()
        .map(|m| FieldError::invalid(path, value, m))
        .collect()
}

pub(super) fn validate_nonnegative(value: i64, path: &Path) -> Vec<FieldError> {
    if value < 0 {
        vec![FieldError::invalid(
            path,
            value,
            "must be greater than or equal to 0",
        )]
    } else {
        Vec::new()
    }
}

/// apimachinery's `IsValidUserID`/`IsValidGroupID`: a user or group id is
/// 0 to `math.MaxInt32` (libcontainer's limit).
pub(super) fn validate_id(value: Option<i64>, path: &Path) -> Vec<FieldError> {
    const MAX_ID: i64 = i32::MAX as i64;
    match value {
        Some(id) if !(0..=MAX_ID).contains(&id) => vec![FieldError::invalid(
            path,
            id,
            inclusive_range_error(0, MAX_ID),
        )],
        _ => Vec::new(),
    }
}

pub(super) fn validate_quantity(quantity: &Quantity, path: &Path) -> Vec<FieldError> {
    match quantity.to_nanos() {
        Err(e) => vec![FieldError::invalid(
            path,
            quantity.0.as_str(),
            e.to_string(),
        )],
        Ok(n) if n < 0 => vec![FieldError::invalid(
            path,
            quantity.0.as_str(),
            "must be greater than or equal to 0",
        )],
        Ok(_) => Vec::new(),
    }
}

/// Errors of a label map (`metadata.labels`, a node selector): every key a
/// qualified name, every value a label value, at most [`MAX_LABELS`]
/// entries of at most [`TOTAL_LABEL_SIZE_LIMIT`] bytes in all. The path is
/// the map's.
pub fn validate_labels(labels: &Labels, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if labels.len() > MAX_LABELS {
        errors.push(FieldError::too_many(path, labels.len(), MAX_LABELS));
    }
    let total: usize = labels.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > TOTAL_LABEL_SIZE_LIMIT {
        errors.push(FieldError::too_long(path, TOTAL_LABEL_SIZE_LIMIT));
    }
    for (key, value) in labels {
        errors.extend(validate_qualified_name(key, path));
        errors.extend(
            is_valid_label_value(value)
                .into_iter()
                .map(|m| FieldError::invalid(path, value, m)),
        );
    }
    errors
}

pub(super) fn validate_annotations(annotations: &Labels, path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut total = 0usize;
    for (key, value) in annotations {
        errors.extend(
            is_qualified_name(&key.to_lowercase())
                .into_iter()
                .map(|m| FieldError::invalid(path, key, m)),
        );
        total += key.len() + value.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errors.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errors
}
