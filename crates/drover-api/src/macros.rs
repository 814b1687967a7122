//! Declarative macros that generate the resource types.
//!
//! Every API struct is written once, with the Kubernetes (JSON) name of each
//! field next to the Rust one, and [`api_struct!`] derives from that:
//!
//! - the struct itself (`Debug`, `Clone`, `PartialEq`, `Default`) with a
//!   trailing `extra` map that keeps every field the type does not know;
//! - `Serialize`, which omits empty values the way Kubernetes' `omitempty`
//!   does and writes the kept unknown fields back out;
//! - `Deserialize`, which routes known keys to their fields (so that
//!   `serde_path_to_error` can name the exact path of a type error, which a
//!   `#[serde(flatten)]` catch-all would hide) and everything else to `extra`;
//!   a `null` value counts as absent, as it does for the API server;
//! - [`CollectUnknown`](crate::unknown::CollectUnknown), which lists the
//!   paths of the kept unknown fields for warnings;
//! - [`OpenApiType`](crate::openapi::OpenApiType) and `openapi_fields`:
//!   the type's documentation and each field's doc comment and JSON shape,
//!   from which [`crate::openapi`] builds the OpenAPI schemas (so the
//!   field docs are written for users: they are what `kubectl explain`
//!   prints).
//!
//! [`string_enum!`] declares the string-valued enumerations (taint effects,
//! operators, phases…) with an `Other` variant, so that a value drover does
//! not know survives parsing and is reported by validation with the list of
//! supported values, as the API server does.

/// Deserializes one field value from a `MapAccess`: `null` becomes the
/// field's default, or goes through an explicit wrapper type (`as Wrapper`).
macro_rules! de_field {
    ($map:ident, $ty:ty) => {
        $map.next_value::<$crate::serde_util::NullAsDefault<$ty>>()?
            .0
    };
    ($map:ident, $ty:ty, $de:ty) => {
        ::core::convert::Into::<$ty>::into($map.next_value::<$de>()?)
    };
}

/// Declares an API struct (see the module documentation).
///
/// ```text
/// api_struct! {
///     /// A port.
///     pub struct ContainerPort {
///         /// The port number.
///         container_port: i32 = "containerPort",
///         /// TCP, UDP or SCTP.
///         protocol: Option<Protocol> = "protocol" as EnumField<Protocol>,
///     }
/// }
/// ```
///
/// A top-level resource starts with `@resource "group", "apiVersion", "Kind",
/// namespaced = bool;` and must have a `metadata: ObjectMeta` field; its
/// `apiVersion` and `kind` are written on output and checked on input.
macro_rules! api_struct {
    (
        $(@resource $group:literal, $api_version:literal, $kind:literal, namespaced = $namespaced:literal;)?
        $(#[doc = $doc:literal])*
        pub struct $name:ident {
            $(
                $(#[doc = $fdoc:literal])*
                $field:ident : $ty:ty = $json:literal $(as $de:ty)?
            ),* $(,)?
        }
    ) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, PartialEq, Default)]
        pub struct $name {
            $(
                $(#[doc = $fdoc])*
                #[doc = concat!("\n\nJSON/YAML name: `", $json, "`.")]
                pub $field: $ty,
            )*
            /// Fields drover does not know, kept verbatim so that nothing is
            /// silently dropped; [`crate::unknown_fields`] reports them.
            pub extra: ::std::collections::BTreeMap<::std::string::String, ::serde_json::Value>,
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> ::core::result::Result<S::Ok, S::Error> {
                use ::serde::ser::SerializeMap;
                let mut map = serializer.serialize_map(None)?;
                $(
                    map.serialize_entry("apiVersion", $api_version)?;
                    map.serialize_entry("kind", $kind)?;
                )?
                $(
                    if !$crate::serde_util::Omit::omit(&self.$field) {
                        map.serialize_entry($json, &self.$field)?;
                    }
                )*
                for (key, value) in &self.extra {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> ::core::result::Result<Self, D::Error> {
                struct FieldsVisitor;
                impl<'de> ::serde::de::Visitor<'de> for FieldsVisitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        f.write_str(concat!("an object (", stringify!($name), ")"))
                    }
                    fn visit_map<A: ::serde::de::MapAccess<'de>>(self, mut map: A) -> ::core::result::Result<$name, A::Error> {
                        let mut out = $name::default();
                        while let Some(key) = map.next_key::<::std::string::String>()? {
                            match key.as_str() {
                                $(
                                    "apiVersion" => {
                                        let value: ::std::string::String = map.next_value()?;
                                        if value != $api_version {
                                            return Err(<A::Error as ::serde::de::Error>::custom(format!(
                                                "apiVersion {:?} is not {:?}, the version drover serves for {}",
                                                value, $api_version, $kind
                                            )));
                                        }
                                    }
                                    "kind" => {
                                        let value: ::std::string::String = map.next_value()?;
                                        if value != $kind {
                                            return Err(<A::Error as ::serde::de::Error>::custom(format!(
                                                "kind {:?} is not {:?}", value, $kind
                                            )));
                                        }
                                    }
                                )?
                                $(
                                    $json => {
                                        out.$field = de_field!(map, $ty $(, $de)?);
                                    }
                                )*
                                _ => {
                                    let value: ::serde_json::Value = map.next_value()?;
                                    out.extra.insert(key, value);
                                }
                            }
                        }
                        Ok(out)
                    }
                }
                deserializer.deserialize_map(FieldsVisitor)
            }
        }

        impl $crate::serde_util::Omit for $name {
            fn omit(&self) -> bool {
                *self == Self::default()
            }
        }

        impl $crate::unknown::CollectUnknown for $name {
            fn collect_unknown(&self, path: &mut ::std::string::String, out: &mut ::std::vec::Vec<$crate::unknown::UnknownField>) {
                $(
                    $crate::unknown::child(path, $json, |path| {
                        $crate::unknown::CollectUnknown::collect_unknown(&self.$field, path, out)
                    });
                )*
                for key in self.extra.keys() {
                    $crate::unknown::child(path, key, |path| {
                        out.push($crate::unknown::UnknownField {
                            path: path.clone(),
                            in_kubernetes: $crate::kubernetes_fields::kubernetes_has(stringify!($name), key),
                        })
                    });
                }
            }
        }

        impl $name {
            /// The JSON names of the fields this type knows (the table of
            /// [`crate::kubernetes_fields`] is checked against them).
            #[doc(hidden)]
            pub const JSON_FIELDS: &'static [&'static str] = &[$($json),*];

            /// The fields this type knows, with their documentation and
            /// JSON shape, for the OpenAPI schemas ([`crate::openapi`]).
            #[doc(hidden)]
            pub fn openapi_fields() -> ::std::vec::Vec<$crate::openapi::FieldInfo> {
                ::std::vec![$(
                    $crate::openapi::FieldInfo {
                        json: $json,
                        doc: concat!($($fdoc, "\n"),*),
                        ty: <$ty as $crate::openapi::OpenApiType>::type_ref(),
                    }
                ),*]
            }
        }

        impl $crate::openapi::OpenApiType for $name {
            fn type_ref() -> $crate::openapi::TypeRef {
                $crate::openapi::TypeRef::Struct($crate::openapi::StructInfo {
                    name: stringify!($name),
                    module: module_path!(),
                    doc: concat!($($doc, "\n"),*),
                    fields: $name::openapi_fields,
                })
            }
        }

        $(
            impl $crate::Resource for $name {
                const GROUP: &'static str = $group;
                const API_VERSION: &'static str = $api_version;
                const KIND: &'static str = $kind;
                const NAMESPACED: bool = $namespaced;
                fn metadata(&self) -> &$crate::meta::ObjectMeta {
                    &self.metadata
                }
                fn metadata_mut(&mut self) -> &mut $crate::meta::ObjectMeta {
                    &mut self.metadata
                }
            }
        )?
    };
}

/// Declares a string-valued enumeration with an `Other(String)` variant for
/// values drover does not know (validation reports them).
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident = $text:literal
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $(
                $(#[$vmeta])*
                #[doc = concat!("\n\nWritten `", $text, "`.")]
                $variant,
            )*
            /// A value drover does not know, kept as written so that
            /// validation can report it.
            Other(::std::string::String),
        }

        impl $name {
            /// Every value drover knows, as written in manifests.
            pub const KNOWN: &'static [&'static str] = &[$($text),*];

            /// The value as written in manifests.
            pub fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $text,)*
                    Self::Other(other) => other.as_str(),
                }
            }

            /// Whether this is one of the [`Self::KNOWN`] values.
            pub fn is_known(&self) -> bool {
                !matches!(self, Self::Other(_))
            }
        }

        impl ::std::convert::From<&str> for $name {
            fn from(text: &str) -> Self {
                match text {
                    $($text => Self::$variant,)*
                    other => Self::Other(other.to_owned()),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> ::core::result::Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> ::core::result::Result<Self, D::Error> {
                let text = <::std::string::String as ::serde::Deserialize>::deserialize(deserializer)?;
                Ok(Self::from(text.as_str()))
            }
        }

        impl $crate::serde_util::Omit for $name {
            fn omit(&self) -> bool {
                false
            }
        }

        impl $crate::unknown::CollectUnknown for $name {
            fn collect_unknown(&self, _path: &mut ::std::string::String, _out: &mut ::std::vec::Vec<$crate::unknown::UnknownField>) {}
        }

        impl $crate::openapi::OpenApiType for $name {
            fn type_ref() -> $crate::openapi::TypeRef {
                $crate::openapi::TypeRef::Enum(Self::KNOWN)
            }
        }
    };
}
