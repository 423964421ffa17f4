//! What every FHIR resource made here shares: references, `meta`, and the pruning of empty
//! values (FHIR allows no `null`, no empty string, array or object).

use serde_json::{Map, Value, json};

/// `{"reference": "Patient/4"}`.
pub fn reference(kind: &str, id: &Value) -> Value {
    match id {
        Value::Null => Value::Null,
        id => json!({ "reference": format!("{kind}/{}", id.to_string().trim_matches('"')) }),
    }
}

/// A staff member known by the server's user id (and name, when known): FHIR resources of
/// practitioners are not served, so the reference is logical.
pub fn practitioner(user: &Value, name: Option<&String>) -> Value {
    if user.is_null() {
        return Value::Null;
    }
    json!({
        "type": "Practitioner",
        "identifier": { "system": super::codes::USER, "value": user.to_string() },
        "display": name,
    })
}

/// `meta` of a row that carries `version` and `updated_at`.
pub fn meta(row: &Value) -> Value {
    json!({ "versionId": row["version"].to_string(), "lastUpdated": row["updated_at"] })
}

/// Adds the members of `more` (an object) to `object`.
pub fn merge(object: &mut Value, more: Value) {
    if let (Some(object), Value::Object(more)) = (object.as_object_mut(), more) {
        object.extend(more);
    }
}

/// The resource without its empty values, recursively.
pub fn prune(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let kept: Map<String, Value> =
                map.into_iter().map(|(k, v)| (k, prune(v))).filter(|(_, v)| !is_empty(v)).collect();
            Value::Object(kept)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(prune).filter(|v| !is_empty(v)).collect()),
        other => other,
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// A text column's value, when it holds one.
pub fn text(row: &Value, column: &str) -> Option<String> {
    row[column].as_str().map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_values_go_at_every_depth() {
        let pruned = prune(json!({
            "a": null, "b": "", "c": [null, "x", {"d": null}], "e": {"f": []}, "g": 0, "h": false
        }));
        assert_eq!(pruned, json!({ "c": ["x"], "g": 0, "h": false }));
    }
}
