//! Serialization helpers shared by the generated types.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use serde::{Deserialize, Deserializer};

/// Whether a field value is left out on output, like Go's `omitempty`:
/// `None`, empty strings, lists and maps, `false`, and structs equal to
/// their default. Numbers are always written (Kubernetes' status counters
/// are not `omitempty`; optional numbers are `Option`s).
pub trait Omit {
    /// `true` when the value is left out on output.
    fn omit(&self) -> bool;
}

impl<T> Omit for Option<T> {
    fn omit(&self) -> bool {
        self.is_none()
    }
}

impl<T> Omit for Vec<T> {
    fn omit(&self) -> bool {
        self.is_empty()
    }
}

impl<K, V> Omit for BTreeMap<K, V> {
    fn omit(&self) -> bool {
        self.is_empty()
    }
}

impl Omit for String {
    fn omit(&self) -> bool {
        self.is_empty()
    }
}

impl Omit for bool {
    fn omit(&self) -> bool {
        !*self
    }
}

impl Omit for serde_json::Value {
    fn omit(&self) -> bool {
        self.is_null()
    }
}

macro_rules! never_omit {
    ($($ty:ty),*) => {
        $(impl Omit for $ty {
            fn omit(&self) -> bool {
                false
            }
        })*
    };
}
never_omit!(i32, i64, u32, u64);

/// Deserializes `T`, reading `null` as `T::default()` (the API server treats
/// an explicit `null` as an absent field).
pub struct NullAsDefault<T>(pub T);

impl<'de, T: Deserialize<'de> + Default> Deserialize<'de> for NullAsDefault<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(NullAsDefault(
            Option::<T>::deserialize(deserializer)?.unwrap_or_default(),
        ))
    }
}

/// Deserializes an optional string enumeration, reading both `null` and the
/// empty string as `None` (Kubernetes gives `""` the meaning of "not set"
/// for every enumerated field).
pub struct EnumField<E>(Option<E>, PhantomData<E>);

impl<'de, E: for<'a> From<&'a str>> Deserialize<'de> for EnumField<E> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Option::<String>::deserialize(deserializer)?;
        Ok(EnumField(
            text.filter(|t| !t.is_empty()).map(|t| E::from(t.as_str())),
            PhantomData,
        ))
    }
}

impl<E> From<EnumField<E>> for Option<E> {
    fn from(field: EnumField<E>) -> Self {
        field.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_null_json_value_is_left_out() {
        assert!(serde_json::Value::Null.omit());
        for kept in [json!({}), json!([]), json!(""), json!(false), json!(0)] {
            assert!(!kept.omit(), "{kept}");
        }
    }
}
