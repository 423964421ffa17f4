//! Records read into structs before a hook or handler computes with them: a field that must be
//! there and is not fails loudly instead of becoming 0 or "".

use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde_json::{Map, Value};

use crate::http::error::{ApiError, ApiResult};

/// `record` as `T`. The record was checked against its declaration before it got here, so a
/// field that does not fit is the server's fault (500 with the cause logged), never a default.
pub fn typed<T: DeserializeOwned>(record: &impl Record) -> ApiResult<T> {
    record.read().map_err(|e| {
        ApiError::Internal(anyhow::anyhow!("a record does not have the shape its code expects: {e}"))
    })
}

/// A record as the mechanism hands it over: a JSON object, or its map.
pub trait Record {
    fn read<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error>;
}

impl Record for Value {
    fn read<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        T::deserialize(self)
    }
}

impl Record for Map<String, Value> {
    fn read<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        T::deserialize(&Value::Object(self.clone()))
    }
}

/// Typed reads of single fields of a checked record or body, where reading the whole of it into
/// a struct ([`typed`]) would be more than a rule or hook needs. The one place that looks up
/// JSON fields by name: absent, null and a value of another type all read as "none".
pub trait Fields {
    fn field(&self, name: &str) -> Option<&Value>;

    fn text(&self, name: &str) -> Option<&str> {
        self.field(name).and_then(Value::as_str)
    }

    fn integer(&self, name: &str) -> Option<i64> {
        self.field(name).and_then(Value::as_i64)
    }

    /// Whether the field holds `true`.
    fn is_true(&self, name: &str) -> bool {
        self.field(name) == Some(&Value::Bool(true))
    }

    /// Whether the field holds `false` (not merely left out).
    fn is_false(&self, name: &str) -> bool {
        self.field(name) == Some(&Value::Bool(false))
    }

    /// The field's value when it holds something: not null, not an empty string.
    fn given(&self, name: &str) -> Option<&Value> {
        self.field(name).filter(|v| !v.is_null() && v.as_str() != Some(""))
    }

    /// Whether the field is there and not null.
    fn is_set(&self, name: &str) -> bool {
        self.field(name).is_some_and(|v| !v.is_null())
    }

    /// The items of a list field, when it is a list.
    fn list(&self, name: &str) -> Option<&Vec<Value>> {
        self.field(name).and_then(Value::as_array)
    }

    /// An exact decimal sent as a string or a number.
    fn decimal(&self, name: &str) -> Option<rust_decimal::Decimal> {
        self.field(name).and_then(super::decimal::of)
    }
}

impl Fields for Map<String, Value> {
    fn field(&self, name: &str) -> Option<&Value> {
        self.get(name)
    }
}

impl Fields for Value {
    fn field(&self, name: &str) -> Option<&Value> {
        self.get(name)
    }
}

/// An exact decimal, sent as a string or a number (`#[serde(deserialize_with = "exact")]`).
pub fn exact<'de, D: Deserializer<'de>>(d: D) -> Result<rust_decimal::Decimal, D::Error> {
    let value = Value::deserialize(d)?;
    super::decimal::of(&value).ok_or_else(|| D::Error::custom(format!("not a decimal: {value}")))
}

/// [`exact`] for a field that may be null or absent (with `#[serde(default)]`).
pub fn exact_or_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<rust_decimal::Decimal>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        value => super::decimal::of(&value)
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("not a decimal: {value}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Deserialize)]
    struct Line {
        item: i64,
        #[serde(deserialize_with = "exact")]
        quantity: rust_decimal::Decimal,
        #[serde(default, deserialize_with = "exact_or_none")]
        discount: Option<rust_decimal::Decimal>,
    }

    #[test]
    fn a_missing_field_is_an_error_not_a_zero() {
        let record = json!({ "quantity": "2.500" });
        assert!(typed::<Line>(record.as_object().unwrap()).is_err());
        let record = json!({ "item": 3, "quantity": "2.500", "discount": null });
        let line = typed::<Line>(record.as_object().unwrap()).unwrap();
        assert_eq!((line.item, line.quantity.to_string(), line.discount), (3, "2.500".into(), None));
    }
}
