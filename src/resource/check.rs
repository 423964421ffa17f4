//! The check of one incoming value against its field's kind: one function per kind, each
//! returning the value normalised (trimmed text, lowercased enums, decimals at their scale)
//! or the message to show. Objects and lists are checked field by field and item by item,
//! their errors keyed by dotted paths (`right_eye.axis`, `left_eye.readings.1.method`).

use crate::resource::row::Fields;
use serde_json::{Map, Value};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::field::{Field, Kind, Structure};
use crate::http::error::FieldErrors;
pub use crate::http::list::parse_date;
use crate::http::text::{self, Lines};

/// Clock skew allowed to "not in the future" (a tablet a few minutes fast).
const SKEW: time::Duration = time::Duration::minutes(5);
/// The instants a timestamp field takes: from 1900 to two days before the end of 9999, so
/// that no zone's local time of one leaves the years `time` and the answers' format hold.
const EARLIEST: OffsetDateTime = time::macros::datetime!(1900-01-01 00:00 UTC);
const LATEST: OffsetDateTime = time::macros::datetime!(9999-12-30 00:00 UTC);

/// A field name as people read it: `birth_date` -> "birth date".
pub fn label(name: &str) -> String {
    name.replace('_', " ")
}

/// Checks one non-null value of a scalar kind (objects and lists go through [`check_at`]).
pub fn check(field: &Field, value: &Value) -> Result<Value, String> {
    let mut errors = FieldErrors::new();
    match check_at(field.name, field, value, &mut errors) {
        Some(v) => Ok(v),
        None => Err(errors.into_values().flatten().next().unwrap_or_else(|| "The value is invalid.".into())),
    }
}

/// Checks one non-null value at `path`; on failure records every problem under its path and
/// answers `None`.
pub fn check_at(path: &str, field: &Field, value: &Value, errors: &mut FieldErrors) -> Option<Value> {
    let name = label(field.name);
    let scalar = match field.kind {
        Kind::Object(structure) => return object(path, structure, value, errors),
        Kind::List { item, min, max, distinct } => {
            return list(path, field.name, item, (min, max, distinct), value, errors);
        }
        Kind::Text { max } => text(&name, value, max, field.required, Lines::One),
        Kind::LongText { max } => text(&name, value, max, field.required, Lines::Many),
        Kind::Email => email(&name, value),
        Kind::Phone => phone(&name, value),
        Kind::Integer { min, max } => integer(&name, value, min, max),
        Kind::Decimal(spec) => spec.check(&name, value),
        Kind::Ref(_) => id(&name, value),
        Kind::Date { past } => date(&name, value, past),
        Kind::Timestamp { past } => timestamp(&name, value, past),
        Kind::Time => clock_time(&name, value),
        Kind::Bool => boolean(&name, value),
        Kind::Enum(values) => one_of(&name, value, values.values),
        Kind::Code { min, max, marks } => code(&name, value, min, max, marks),
        Kind::TimeZone => time_zone(&name, value),
        Kind::Username => username(&name, value),
        Kind::Password => password(value, &name),
        Kind::Secret { max } => secret(value, &name, max),
        Kind::IdList => id_list(&name, value),
        Kind::NameList => name_list(&name, value),
    };
    match scalar {
        Ok(v) => Some(v),
        Err(message) => {
            errors.entry(path.to_owned()).or_default().push(message);
            None
        }
    }
}

fn nested(path: &str, key: impl std::fmt::Display) -> String {
    format!("{path}.{key}")
}

/// An object of a structure's fields: unknown keys dropped, each field checked at its path,
/// then the structure's rules.
fn object(path: &str, structure: &Structure, value: &Value, errors: &mut FieldErrors) -> Option<Value> {
    let Value::Object(sent) = value else {
        errors
            .entry(path.to_owned())
            .or_default()
            .push(format!("The {} must be an object.", label(leaf(path))));
        return None;
    };
    let before = errors.len();
    let mut clean = Map::new();
    if structure.per_eye && !unassessed(path, structure, sent, &mut clean, errors) {
        return None;
    }
    let assessing = !clean.is_true("unable_to_assess");
    if assessing {
        for f in structure.fields {
            let at = nested(path, f.name);
            match sent.get(f.name) {
                None | Some(Value::Null) if f.required => {
                    errors.entry(at).or_default().push(format!("The {} field is required.", label(f.name)));
                }
                None | Some(Value::Null) => {}
                // Blank text is no finding, as a blank field of a record is no value.
                Some(Value::String(s)) if s.trim().is_empty() && !f.required => {}
                Some(v) => {
                    if let Some(v) = check_at(&at, f, v, errors) {
                        clean.insert(f.name.into(), v);
                    }
                }
            }
        }
        if structure.per_eye && errors.len() == before && clean.len() <= 1 {
            errors
                .entry(path.to_owned())
                .or_default()
                .push(format!("The {} holds no finding.", label(leaf(path))));
        }
    }
    if errors.len() > before {
        return None;
    }
    if assessing {
        for rule in structure.rules {
            for (field, message) in rule(&mut clean) {
                errors.entry(nested(path, field)).or_default().push(message);
            }
        }
    }
    (errors.len() == before).then_some(Value::Object(clean))
}

/// `unable_to_assess` of an eye: when true, no measurement may be sent with it. Returns
/// false when the object is already wrong.
fn unassessed(
    path: &str,
    structure: &Structure,
    sent: &Map<String, Value>,
    clean: &mut Map<String, Value>,
    errors: &mut FieldErrors,
) -> bool {
    let flag = match sent.field("unable_to_assess") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            let message = "The unable to assess field must be true or false.".to_owned();
            errors.entry(nested(path, "unable_to_assess")).or_default().push(message);
            return false;
        }
    };
    clean.insert("unable_to_assess".into(), Value::Bool(flag));
    if !flag {
        return true;
    }
    let mut ok = true;
    for f in structure.fields.iter().filter(|f| sent.get(f.name).is_some_and(|v| !v.is_null())) {
        let message = format!("The {} must be empty when the eye could not be assessed.", label(f.name));
        errors.entry(nested(path, f.name)).or_default().push(message);
        ok = false;
    }
    ok
}

/// The last segment of a dotted path, for messages.
fn leaf(path: &str) -> &str {
    path.rsplit('.').find(|s| s.parse::<usize>().is_err()).unwrap_or(path)
}

fn list(
    path: &str,
    name: &'static str,
    item: &Kind,
    (min, max, distinct): (usize, usize, bool),
    value: &Value,
    errors: &mut FieldErrors,
) -> Option<Value> {
    let Value::Array(items) = value else {
        errors.entry(path.to_owned()).or_default().push(format!("The {} must be a list.", label(name)));
        return None;
    };
    if !(min..=max).contains(&items.len()) {
        let message = format!("The {} must have {min} to {max} items.", label(name));
        errors.entry(path.to_owned()).or_default().push(message);
        return None;
    }
    let before = errors.len();
    let element = Field { required: true, ..Field::new(name, *item) };
    let mut clean = Vec::with_capacity(items.len());
    for (i, v) in items.iter().enumerate() {
        let at = nested(path, i);
        if v.is_null() {
            errors.entry(at).or_default().push(format!("The {} items may not be empty.", label(name)));
        } else if let Some(v) = check_at(&at, &element, v, errors) {
            clean.push(v);
        }
    }
    if distinct && errors.len() == before {
        let mut seen = Vec::new();
        for (i, v) in clean.iter().enumerate() {
            if seen.contains(&v) {
                errors
                    .entry(nested(path, i))
                    .or_default()
                    .push(format!("The {} may not repeat a value.", label(name)));
            }
            seen.push(v);
        }
    }
    (errors.len() == before).then_some(Value::Array(clean))
}

fn string<'a>(name: &str, value: &'a Value) -> Result<&'a str, String> {
    value.as_str().ok_or_else(|| format!("The {name} must be a string."))
}

fn text(name: &str, value: &Value, max: usize, required: bool, lines: Lines) -> Result<Value, String> {
    let s = string(name, value)?.trim();
    if required && s.is_empty() {
        return Err(format!("The {name} field is required."));
    }
    if s.chars().count() > max {
        return Err(format!("The {name} may not be greater than {max} characters."));
    }
    if text::refused(s, Lines::Many) {
        return Err(format!("The {name} contains control characters."));
    }
    if text::refused(s, lines) {
        return Err(format!("The {name} must be a single line."));
    }
    Ok(Value::String(s.to_owned()))
}

fn email(name: &str, value: &Value) -> Result<Value, String> {
    let s = string(name, value)?.trim();
    if !is_email(s) {
        return Err(format!("The {name} must be a valid email address."));
    }
    Ok(Value::String(s.to_owned()))
}

fn phone(name: &str, value: &Value) -> Result<Value, String> {
    let s = string(name, value)?.trim();
    let digits = s.chars().filter(char::is_ascii_digit).count();
    let allowed = s.chars().all(|c| c.is_ascii_digit() || " +-().".contains(c));
    if !allowed || !(5..=20).contains(&digits) || s.len() > 32 {
        return Err(format!("The {name} must be a valid phone number."));
    }
    Ok(Value::String(s.to_owned()))
}

fn integer(name: &str, value: &Value, min: i64, max: i64) -> Result<Value, String> {
    match integer_of(value) {
        Some(n) if (min..=max).contains(&n) => Ok(Value::from(n)),
        Some(_) => Err(format!("The {name} must be between {min} and {max}.")),
        None => Err(format!("The {name} must be an integer.")),
    }
}

fn id(name: &str, value: &Value) -> Result<Value, String> {
    match integer_of(value) {
        Some(n) if n > 0 => Ok(Value::from(n)),
        _ => Err(format!("The {name} must be a valid id.")),
    }
}

fn date(name: &str, value: &Value, past: bool) -> Result<Value, String> {
    let malformed = || format!("The {name} must be a date (YYYY-MM-DD).");
    let date = value.as_str().and_then(|s| parse_date(s.trim())).ok_or_else(malformed)?;
    if past && date > OffsetDateTime::now_utc().date() {
        return Err(format!("The {name} may not be in the future."));
    }
    if date.year() < 1850 {
        return Err(format!("The {name} is too far in the past."));
    }
    Ok(Value::String(date.to_string()))
}

fn timestamp(name: &str, value: &Value, past: bool) -> Result<Value, String> {
    let malformed = || format!("The {name} must be a date and time with an offset (RFC 3339).");
    let at =
        value.as_str().and_then(|s| OffsetDateTime::parse(s.trim(), &Rfc3339).ok()).ok_or_else(malformed)?;
    if past && at > OffsetDateTime::now_utc() + SKEW {
        return Err(format!("The {name} may not be in the future."));
    }
    // In UTC, and early enough that its local date in any zone is still a year of four
    // digits: dates read back in a branch's zone must convert too.
    let utc = at.checked_to_offset(time::UtcOffset::UTC).filter(|utc| (EARLIEST..LATEST).contains(utc));
    let Some(utc) = utc else {
        return Err(format!("The {name} is out of range (from 1900 to 9999-12-29)."));
    };
    Ok(Value::String(utc.format(&Rfc3339).map_err(|_| malformed())?))
}

fn clock_time(name: &str, value: &Value) -> Result<Value, String> {
    let s = value.as_str().map(str::trim).unwrap_or_default();
    let parts: Vec<&str> = s.split(':').collect();
    let ok = parts.len() == 2
        && parts.iter().all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_digit()))
        && parts[0].parse::<u8>().is_ok_and(|h| h < 24)
        && parts[1].parse::<u8>().is_ok_and(|m| m < 60);
    if ok { Ok(Value::String(s.to_owned())) } else { Err(format!("The {name} must be a time (HH:MM).")) }
}

fn boolean(name: &str, value: &Value) -> Result<Value, String> {
    match value {
        Value::Bool(b) => Ok(Value::Bool(*b)),
        _ => Err(format!("The {name} field must be true or false.")),
    }
}

fn one_of(name: &str, value: &Value, values: &[&str]) -> Result<Value, String> {
    match value.as_str().map(|s| s.trim().to_ascii_lowercase()) {
        Some(s) if values.contains(&s.as_str()) => Ok(Value::String(s)),
        _ => Err(format!("The selected {name} is invalid. Allowed: {}.", values.join(", "))),
    }
}

fn code(name: &str, value: &Value, min: usize, max: usize, marks: &str) -> Result<Value, String> {
    let code = string(name, value)?.trim().to_ascii_uppercase();
    let ok = (min..=max).contains(&code.len())
        && code.bytes().all(|b| b.is_ascii_alphanumeric() || marks.as_bytes().contains(&b));
    if !ok {
        let also = if marks.is_empty() {
            String::new()
        } else {
            format!(" or {}", marks.chars().map(String::from).collect::<Vec<_>>().join(" "))
        };
        return Err(format!("The {name} must be {min} to {max} letters, digits{also}."));
    }
    Ok(Value::String(code))
}

/// Whether `zone` has the form of an IANA time zone name and is not one of the other names a
/// tz database installation carries: the machine's own `localtime`, the `posixrules` file,
/// the `Factory` placeholder, and the copies under `posix/` and `right/`. Whether the
/// database knows the zone is checked with the references.
pub fn is_iana_zone_name(zone: &str) -> bool {
    const NOT_ZONES: [&str; 3] = ["localtime", "posixrules", "Factory"];
    (1..=64).contains(&zone.len())
        && zone.bytes().all(|b| b.is_ascii_alphanumeric() || b"/_+-".contains(&b))
        && !NOT_ZONES.contains(&zone)
        && !zone.starts_with("posix/")
        && !zone.starts_with("right/")
}

fn time_zone(name: &str, value: &Value) -> Result<Value, String> {
    let zone = string(name, value)?.trim();
    let ok = is_iana_zone_name(zone);
    if ok {
        Ok(Value::String(zone.to_owned()))
    } else {
        Err(format!("The {name} must be an IANA time zone such as Asia/Manila."))
    }
}

fn username(name: &str, value: &Value) -> Result<Value, String> {
    let s = string(name, value)?.trim();
    let ok =
        (3..=50).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !ok {
        return Err(format!("The {name} must be 3 to 50 letters, digits, dots, dashes or underscores."));
    }
    Ok(Value::String(s.to_owned()))
}

/// Kept exactly as typed; only the length rule applies here (rules that need the account,
/// such as "not the username", are the account handlers').
fn password(value: &Value, name: &str) -> Result<Value, String> {
    let s = string(name, value)?;
    crate::security::password::check_length(s)?;
    Ok(Value::String(s.to_owned()))
}

fn secret(value: &Value, name: &str, max: usize) -> Result<Value, String> {
    let s = string(name, value)?;
    match s.chars().count() {
        0 => Err(format!("The {name} field is required.")),
        n if n > max => Err(format!("The {name} may not be greater than {max} characters.")),
        _ => Ok(Value::String(s.to_owned())),
    }
}

fn id_list(name: &str, value: &Value) -> Result<Value, String> {
    let bad = || format!("The {name} must be a list of ids.");
    let items = value.as_array().ok_or_else(bad)?;
    let mut ids = items
        .iter()
        .map(|item| integer_of(item).filter(|id| *id > 0).ok_or_else(bad))
        .collect::<Result<Vec<i64>, String>>()?;
    ids.sort_unstable();
    ids.dedup();
    Ok(Value::from(ids))
}

fn name_list(name: &str, value: &Value) -> Result<Value, String> {
    let bad = || format!("The {name} must be a list of names.");
    let items = value.as_array().ok_or_else(bad)?;
    let mut names = items
        .iter()
        .map(|item| match item.as_str().map(str::trim) {
            Some(n) if !n.is_empty() && n.len() <= 100 => Ok(n.to_owned()),
            _ => Err(bad()),
        })
        .collect::<Result<Vec<String>, String>>()?;
    names.sort();
    names.dedup();
    Ok(Value::from(names))
}

/// Integers may arrive as JSON numbers or as digit strings (form-minded clients).
pub fn integer_of(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => {
            n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9e15).map(|f| f as i64))
        }
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && local.len() <= 64
        && s.len() <= 254
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !s.contains(char::is_whitespace)
        && !s.contains(char::is_control)
        && !domain.contains('@')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::field::{Enumeration, branch_ref, one_of, past_date, text};
    use serde_json::json;

    #[test]
    fn normalises_and_rejects() {
        static SEX: Enumeration = Enumeration { name: "sex", values: &["male", "female"] };
        let sex = one_of("sex", &SEX);
        assert_eq!(check(&sex, &json!("Male")).unwrap(), json!("male"));
        assert!(check(&sex, &json!("x")).unwrap_err().contains("male, female"));
        let born = past_date("birth_date");
        assert_eq!(check(&born, &json!("2001-02-03")).unwrap(), json!("2001-02-03"));
        assert!(check(&born, &json!("2001-02-30")).is_err());
        assert!(check(&born, &json!("3000-01-01")).unwrap_err().contains("future"));
        let name = text("first_name", 5).required();
        assert_eq!(check(&name, &json!("  Ann ")).unwrap(), json!("Ann"));
        assert!(check(&name, &json!("   ")).is_err());
        assert!(check(&name, &json!("Annabel")).is_err());
        assert!(check(&name, &json!(5)).is_err());
        let id = branch_ref("patient_id", "patients");
        assert_eq!(check(&id, &json!("12")).unwrap(), json!(12));
        assert!(check(&id, &json!(0)).is_err());
        let email = Field::new("email", Kind::Email);
        assert!(check(&email, &json!("a@b.co")).is_ok());
        assert!(check(&email, &json!("a@b")).is_err());
    }
}
