//! Resource quantities (`500m`, `200Mi`, `1.5`, `1e3`), as Kubernetes writes
//! them in `resources.requests`, `limits` and node `capacity`.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::serde_util::Omit;
use crate::unknown::CollectUnknown;

/// The regular expression quoted by the error for a malformed quantity.
pub const QUANTITY_REGEX: &str = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

/// A quantity as written in a manifest. Kept as text (so that it reads back
/// exactly as written); [`Quantity::to_nanos`] gives its value.
///
/// A manifest may give a plain number (`cpu: 1`, `cpu: 0.5`): it is read as
/// its decimal text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Quantity(pub String);

/// Why a quantity could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The text does not have the shape of a quantity.
    #[error("quantities must match the regular expression '{QUANTITY_REGEX}'")]
    Format,
    /// The number is followed by an unknown suffix.
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// The value does not fit (beyond about 10^29).
    #[error("quantity is too large")]
    TooLarge,
}

impl Quantity {
    /// The value in billionths of the unit (nano-cores for CPU, nano-bytes
    /// for memory), rounded away from zero to a whole billionth.
    pub fn to_nanos(&self) -> Result<i128, QuantityError> {
        parse_nanos(&self.0)
    }

    /// The value in thousandths of the unit (millicores), rounded up.
    pub fn to_millis(&self) -> Result<i128, QuantityError> {
        Ok(div_ceil(self.to_nanos()?, 1_000_000))
    }

    /// The value in whole units (bytes for memory), rounded up.
    pub fn to_units(&self) -> Result<i128, QuantityError> {
        Ok(div_ceil(self.to_nanos()?, 1_000_000_000))
    }
}

fn div_ceil(value: i128, by: i128) -> i128 {
    let quotient = value / by;
    if value % by > 0 {
        quotient + 1
    } else {
        quotient
    }
}

fn parse_nanos(text: &str) -> Result<i128, QuantityError> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    // A sign is only allowed first; "1e-3" keeps its sign in the suffix.
    let (number, suffix) = text.split_at(split);
    let (negative, digits) = match number.as_bytes().first() {
        Some(b'-') => (true, &number[1..]),
        Some(b'+') => (false, &number[1..]),
        _ => (false, number),
    };
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        || digits.bytes().filter(|&b| b == b'.').count() > 1
        || digits == "."
    {
        return Err(QuantityError::Format);
    }
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let (binary_power, decimal_exponent): (u32, i32) = match suffix {
        "" => (0, 0),
        "Ki" => (1, 0),
        "Mi" => (2, 0),
        "Gi" => (3, 0),
        "Ti" => (4, 0),
        "Pi" => (5, 0),
        "Ei" => (6, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        _ => {
            let exponent = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .ok_or(if suffix.bytes().all(|b| b"eEinumkKMGTP".contains(&b)) {
                    QuantityError::Suffix
                } else {
                    QuantityError::Format
                })?;
            let unsigned = exponent
                .strip_prefix('+')
                .or_else(|| exponent.strip_prefix('-'))
                .unwrap_or(exponent);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return Err(QuantityError::Suffix);
            }
            let value: i32 = exponent.parse().map_err(|_| QuantityError::TooLarge)?;
            (0, value)
        }
    };
    // value = 0.whole.fraction * 10^(decimal_exponent) * 1024^binary_power,
    // computed in nanos: mantissa * 10^(exponent + 9 - fraction digits).
    let mut mantissa: i128 = 0;
    for b in whole.bytes().chain(fraction.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(i128::from(b - b'0')))
            .ok_or(QuantityError::TooLarge)?;
    }
    let fraction_digits = i32::try_from(fraction.len()).map_err(|_| QuantityError::TooLarge)?;
    let mut scale = decimal_exponent
        .checked_add(9)
        .and_then(|s| s.checked_sub(fraction_digits))
        .ok_or(QuantityError::TooLarge)?;
    for _ in 0..binary_power {
        mantissa = mantissa.checked_mul(1024).ok_or(QuantityError::TooLarge)?;
    }
    while scale > 0 && mantissa != 0 {
        mantissa = mantissa.checked_mul(10).ok_or(QuantityError::TooLarge)?;
        scale -= 1;
    }
    let mut rounded_up = false;
    while scale < 0 && mantissa != 0 {
        if mantissa % 10 != 0 {
            rounded_up = true;
        }
        mantissa /= 10;
        scale += 1;
    }
    if rounded_up {
        mantissa += 1;
    }
    Ok(if negative { -mantissa } else { mantissa })
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Quantity {
    fn from(text: &str) -> Self {
        Quantity(text.to_owned())
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct QuantityVisitor;
        impl Visitor<'_> for QuantityVisitor {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity (a string such as \"500m\" or \"1Gi\", or a number)")
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Quantity, E> {
                Ok(Quantity(value.to_string()))
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Quantity, E> {
                Ok(Quantity(value.to_string()))
            }
            fn visit_f64<E: de::Error>(self, value: f64) -> Result<Quantity, E> {
                if !value.is_finite() {
                    return Err(E::custom("a quantity must be a finite number"));
                }
                Ok(Quantity(value.to_string()))
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<Quantity, E> {
                Ok(Quantity(value.to_owned()))
            }
        }
        deserializer.deserialize_any(QuantityVisitor)
    }
}

impl Omit for Quantity {
    fn omit(&self) -> bool {
        self.0.is_empty()
    }
}

impl CollectUnknown for Quantity {
    fn collect_unknown(&self, _path: &mut String, _out: &mut Vec<crate::UnknownField>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nanos(text: &str) -> Result<i128, QuantityError> {
        Quantity::from(text).to_nanos()
    }

    #[test]
    fn parses_the_suffixes_kubernetes_knows() {
        assert_eq!(nanos("1"), Ok(1_000_000_000));
        assert_eq!(nanos("100m"), Ok(100_000_000));
        assert_eq!(nanos("0.1"), Ok(100_000_000));
        assert_eq!(nanos(".5"), Ok(500_000_000));
        assert_eq!(nanos("1Ki"), Ok(1024 * 1_000_000_000));
        let binary = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
        for (power, suffix) in (1u32..).zip(binary) {
            assert_eq!(
                Quantity::from(format!("3{suffix}").as_str()).to_units(),
                Ok(3 * 1024i128.pow(power)),
                "3{suffix}"
            );
        }
        let decimal = [
            ("k", 3),
            ("M", 6),
            ("G", 9),
            ("T", 12),
            ("P", 15),
            ("E", 18),
        ];
        for (suffix, exponent) in decimal {
            assert_eq!(
                Quantity::from(format!("3{suffix}").as_str()).to_units(),
                Ok(3 * 10i128.pow(exponent)),
                "3{suffix}"
            );
        }
        assert_eq!(Quantity::from("200Mi").to_units(), Ok(200 * 1024 * 1024));
        assert_eq!(Quantity::from("1G").to_units(), Ok(1_000_000_000));
        assert_eq!(Quantity::from("1e3").to_units(), Ok(1000));
        assert_eq!(Quantity::from("1E3").to_units(), Ok(1000));
        assert_eq!(
            Quantity::from("1E").to_units(),
            Ok(1_000_000_000_000_000_000)
        );
        assert_eq!(Quantity::from("1e-3").to_millis(), Ok(1));
        assert_eq!(nanos("1n"), Ok(1));
        assert_eq!(nanos("1u"), Ok(1000));
        assert_eq!(nanos("-1"), Ok(-1_000_000_000));
        assert_eq!(nanos("+2k"), Ok(2_000_000_000_000));
    }

    #[test]
    fn rounds_up_below_a_nano() {
        assert_eq!(nanos("0.0000000001"), Ok(1));
        assert_eq!(nanos("1.5n"), Ok(2));
        assert_eq!(nanos("1.01n"), Ok(2));
        assert_eq!(nanos("-1.5n"), Ok(-2));
        assert_eq!(nanos("2.0n"), Ok(2));
        assert_eq!(nanos("2.000n"), Ok(2));
        assert_eq!(nanos("25e-10"), Ok(3));
        assert_eq!(Quantity::from("1.5m").to_millis(), Ok(2));
        assert_eq!(Quantity::from("0.5").to_units(), Ok(1));
    }

    #[test]
    fn refuses_malformed_quantities() {
        assert_eq!(nanos(""), Err(QuantityError::Format));
        assert_eq!(nanos("abc"), Err(QuantityError::Format));
        assert_eq!(nanos("1.2.3"), Err(QuantityError::Format));
        assert_eq!(nanos("."), Err(QuantityError::Format));
        assert_eq!(nanos("1Qi"), Err(QuantityError::Format));
        assert_eq!(nanos("1KiB"), Err(QuantityError::Format));
        assert_eq!(nanos("1mi"), Err(QuantityError::Suffix));
        assert_eq!(nanos("1e"), Err(QuantityError::Suffix));
        assert_eq!(nanos("1e99"), Err(QuantityError::TooLarge));
        // The largest values that fit (about 10^29 units) still read.
        assert_eq!(nanos("1e29"), Ok(10i128.pow(38)));
        assert_eq!(nanos("1e30"), Err(QuantityError::TooLarge));
        assert_eq!(
            QuantityError::Format.to_string(),
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
    }

    #[test]
    fn numbers_in_manifests_read_as_text() {
        let q: Quantity = serde_json::from_str("1").unwrap();
        assert_eq!(q, Quantity::from("1"));
        let q: Quantity = serde_json::from_str("0.5").unwrap();
        assert_eq!(q, Quantity::from("0.5"));
        assert_eq!(serde_json::to_string(&q).unwrap(), "\"0.5\"");
        let q: Quantity = serde_json::from_str("-2").unwrap();
        assert_eq!(q, Quantity::from("-2"));
        let err = serde_json::from_value::<Quantity>(serde_json::Value::Bool(true)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid type: boolean `true`, expected a quantity (a string such as \"500m\" or \"1Gi\", or a number)"
        );
    }

    #[test]
    fn only_an_empty_quantity_is_left_out() {
        assert!(Quantity::default().omit());
        assert!(!Quantity::from("0").omit());
    }
}
