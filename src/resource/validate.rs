//! A request body checked against a declaration: presence rules, then each value's kind.

use serde_json::{Map, Value};

use super::Resource;
use super::check::{self, label};
use super::field::Field;
use crate::http::error::FieldErrors;

/// Checks a body against the declaration. On create, required fields must be present; on
/// update only the fields sent are checked. Unknown keys are ignored (clients often echo
/// whole records back, `id` and timestamps included).
pub fn validate(
    resource: &Resource,
    body: &Map<String, Value>,
    creating: bool,
) -> Result<Map<String, Value>, FieldErrors> {
    let (clean, errors) = validate_fields(resource, body, creating);
    if errors.is_empty() { Ok(clean) } else { Err(errors) }
}

/// Like [`validate`], but returns the fields that passed along with the errors, so that
/// the references among them can be checked and reported together.
pub fn validate_fields(
    resource: &Resource,
    body: &Map<String, Value>,
    creating: bool,
) -> (Map<String, Value>, FieldErrors) {
    let filled = |f: &Field| f.caller_by_default || resource.derived.iter().any(|d| d.field == f.name);
    check_fields(resource.all_fields().chain(resource.write_only), body, creating, filled)
}

/// Checks `body` against a list of fields (a resource's, an action's body); `filled` says
/// which fields the server fills in when they are left out.
pub fn check_fields<'f>(
    fields: impl Iterator<Item = &'f Field>,
    body: &Map<String, Value>,
    creating: bool,
    filled: impl Fn(&Field) -> bool,
) -> (Map<String, Value>, FieldErrors) {
    let mut errors = FieldErrors::new();
    let mut clean = Map::new();
    for f in fields {
        match presence(f, body.get(f.name), creating, filled(f)) {
            Presence::Absent => {}
            Presence::Missing(message) => errors.entry(f.name.into()).or_default().push(message),
            Presence::Null => {
                clean.insert(f.name.into(), Value::Null);
            }
            Presence::Value(value) => {
                if let Some(v) = check::check_at(f.name, f, value, &mut errors) {
                    clean.insert(f.name.into(), v);
                }
            }
        }
    }
    (clean, errors)
}

/// What a body says about one field before its value is checked.
enum Presence<'a> {
    /// Not sent, or left to the database default: nothing to write.
    Absent,
    /// Required but missing or emptied.
    Missing(String),
    /// Cleared.
    Null,
    Value(&'a Value),
}

/// `filled`: the server fills the field in when it is left out (derived, or the caller).
fn presence<'a>(f: &Field, value: Option<&'a Value>, creating: bool, filled: bool) -> Presence<'a> {
    let required = || format!("The {} field is required.", label(f.name));
    match value {
        None if creating && f.required && !filled => Presence::Missing(required()),
        None => Presence::Absent,
        Some(Value::Null) if f.required => Presence::Missing(required()),
        // On create a blank defaulted field is left to the database default.
        Some(v) if f.defaulted && is_blank(f, v) && creating => Presence::Absent,
        Some(v) if f.defaulted && is_blank(f, v) => {
            Presence::Missing(format!("The {} field may not be empty.", label(f.name)))
        }
        Some(Value::Null) => Presence::Null,
        // An emptied text box clears the text.
        Some(v) if is_blank(f, v) && !f.required => Presence::Null,
        Some(v) => Presence::Value(v),
    }
}

/// Null, or for a kind written as a string a string of only white space (what an emptied
/// form box sends). For numbers, booleans and lists a string is no value: it is refused.
fn is_blank(f: &Field, value: &Value) -> bool {
    value.is_null() || (f.kind.is_string() && value.as_str().is_some_and(|s| s.trim().is_empty()))
}
