//! What the authentication routes read from a body: required strings, a new password.

use serde_json::{Map, Value};

use crate::http::error::FieldErrors;
use crate::security::password;

/// A required string field of a JSON body (422 naming it when missing or not a string; the
/// body's parsing has refused control characters already).
pub fn required_string(body: &Map<String, Value>, name: &str, errors: &mut FieldErrors) -> String {
    match body.get(name) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            errors
                .entry(name.into())
                .or_default()
                .push(format!("The {} field is required.", name.replace('_', " ")));
            String::new()
        }
        Some(_) => {
            errors
                .entry(name.into())
                .or_default()
                .push(format!("The {} must be a string.", name.replace('_', " ")));
            String::new()
        }
    }
}

/// A new password and its confirmation from a body, checked by the rules that need no
/// account (the caller checks it against the account's username and e-mail).
pub fn new_password(body: &Map<String, Value>, errors: &mut FieldErrors) -> String {
    let password = required_string(body, "password", errors);
    let confirmation = required_string(body, "password_confirmation", errors);
    if !password.is_empty()
        && let Err(message) = password::check_new(&password, &confirmation)
    {
        errors.entry("password".into()).or_default().push(message);
    }
    password
}
