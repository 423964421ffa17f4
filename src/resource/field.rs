//! Field declarations and the validation of one incoming value against them.

use serde_json::Value;
use time::{Date, OffsetDateTime, format_description::well_known::Iso8601};

/// Where a referenced record lives.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// A table of the same branch schema (soft-deleted rows do not count).
    Branch(&'static str),
    /// A registry table (master data).
    Registry(&'static str),
}

#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// A single-line string of at most `max` characters.
    Text {
        max: usize,
    },
    /// Free text (notes, findings) of at most `max` characters.
    LongText {
        max: usize,
    },
    Email,
    Phone,
    Integer {
        min: i64,
        max: i64,
    },
    /// `YYYY-MM-DD`; `past` forbids dates after today.
    Date {
        past: bool,
    },
    Bool,
    /// One of the lowercase snake_case values.
    Enum(&'static [&'static str]),
    /// The id of another record, which must exist.
    Ref(Target),
    /// A short code of uppercase letters and digits (branch codes, ticket prefixes);
    /// lowercase input is uppercased.
    Code {
        min: usize,
        max: usize,
    },
    /// A login name: letters, digits, `.`, `_`, `-` (never an e-mail address).
    Username,
    /// A password: kept exactly as typed, length rules of `auth::password`.
    Password,
    /// A list of distinct positive ids (checked by the resource's own handler).
    IdList,
    /// A list of distinct non-empty names (checked by the resource's own handler).
    NameList,
}

impl Kind {
    /// The SQL type a filter value is cast to.
    pub fn sql_type(self) -> &'static str {
        match self {
            Self::Integer { .. } | Self::Ref(_) => "int8",
            Self::Date { .. } => "date",
            Self::Bool => "bool",
            _ => "text",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub name: &'static str,
    pub kind: Kind,
    /// Must be present (and not null) on create; may never be set to null.
    pub required: bool,
    /// The column is NOT NULL with a database default: left out, null or empty on create it
    /// takes the default; on update it may not be emptied.
    pub defaulted: bool,
}

impl Field {
    pub const fn new(name: &'static str, kind: Kind) -> Self {
        Self { name, kind, required: false, defaulted: false }
    }

    pub const fn required(mut self) -> Self {
        self.required = true;
        self
    }

    pub const fn defaulted(mut self) -> Self {
        self.defaulted = true;
        self
    }
}

/// Shorthands that keep resource declarations one line per field.
pub const fn text(name: &'static str, max: usize) -> Field {
    Field::new(name, Kind::Text { max })
}
pub const fn long_text(name: &'static str) -> Field {
    Field::new(name, Kind::LongText { max: 10_000 })
}
pub const fn date(name: &'static str) -> Field {
    Field::new(name, Kind::Date { past: false })
}
pub const fn past_date(name: &'static str) -> Field {
    Field::new(name, Kind::Date { past: true })
}
pub const fn one_of(name: &'static str, values: &'static [&'static str]) -> Field {
    Field::new(name, Kind::Enum(values))
}
pub const fn branch_ref(name: &'static str, table: &'static str) -> Field {
    Field::new(name, Kind::Ref(Target::Branch(table)))
}
pub const fn registry_ref(name: &'static str, table: &'static str) -> Field {
    Field::new(name, Kind::Ref(Target::Registry(table)))
}
pub const fn boolean(name: &'static str) -> Field {
    Field::new(name, Kind::Bool)
}
pub const fn integer(name: &'static str, min: i64, max: i64) -> Field {
    Field::new(name, Kind::Integer { min, max })
}

fn label(name: &str) -> String {
    name.replace('_', " ")
}

/// Checks one non-null value and returns it normalised (trimmed, lowercased enums, ...).
pub fn check(field: &Field, value: &Value) -> Result<Value, String> {
    let name = label(field.name);
    match field.kind {
        Kind::Text { max } | Kind::LongText { max } => {
            let Value::String(s) = value else {
                return Err(format!("The {name} must be a string."));
            };
            let s = s.trim();
            if field.required && s.is_empty() {
                return Err(format!("The {name} field is required."));
            }
            if s.chars().count() > max {
                return Err(format!("The {name} may not be greater than {max} characters."));
            }
            if s.chars().any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t')) {
                return Err(format!("The {name} contains control characters."));
            }
            if matches!(field.kind, Kind::Text { .. }) && s.contains(['\n', '\r']) {
                return Err(format!("The {name} must be a single line."));
            }
            Ok(Value::String(s.to_owned()))
        }
        Kind::Email => {
            let Value::String(s) = value else {
                return Err(format!("The {name} must be a string."));
            };
            let s = s.trim();
            if !is_email(s) {
                return Err(format!("The {name} must be a valid email address."));
            }
            Ok(Value::String(s.to_owned()))
        }
        Kind::Phone => {
            let Value::String(s) = value else {
                return Err(format!("The {name} must be a string."));
            };
            let s = s.trim();
            let digits = s.chars().filter(char::is_ascii_digit).count();
            let allowed = s.chars().all(|c| c.is_ascii_digit() || " +-().".contains(c));
            if !allowed || !(5..=20).contains(&digits) || s.len() > 32 {
                return Err(format!("The {name} must be a valid phone number."));
            }
            Ok(Value::String(s.to_owned()))
        }
        Kind::Integer { min, max } => match integer_of(value) {
            Some(n) if (min..=max).contains(&n) => Ok(Value::from(n)),
            Some(_) => Err(format!("The {name} must be between {min} and {max}.")),
            None => Err(format!("The {name} must be an integer.")),
        },
        Kind::Ref(_) => match integer_of(value) {
            Some(n) if n > 0 => Ok(Value::from(n)),
            _ => Err(format!("The {name} must be a valid id.")),
        },
        Kind::Date { past } => {
            let Value::String(s) = value else {
                return Err(format!("The {name} must be a date (YYYY-MM-DD)."));
            };
            let date =
                parse_date(s.trim()).ok_or_else(|| format!("The {name} must be a date (YYYY-MM-DD)."))?;
            if past && date > OffsetDateTime::now_utc().date() {
                return Err(format!("The {name} may not be in the future."));
            }
            if date.year() < 1850 {
                return Err(format!("The {name} is too far in the past."));
            }
            Ok(Value::String(date.to_string()))
        }
        Kind::Bool => match value {
            Value::Bool(b) => Ok(Value::Bool(*b)),
            _ => Err(format!("The {name} field must be true or false.")),
        },
        Kind::Code { min, max } => {
            let Value::String(s) = value else { return Err(format!("The {name} must be a string.")) };
            let code = s.trim().to_ascii_uppercase();
            let ok = (min..=max).contains(&code.len()) && code.bytes().all(|b| b.is_ascii_alphanumeric());
            if !ok {
                return Err(format!("The {name} must be {min} to {max} letters or digits."));
            }
            Ok(Value::String(code))
        }
        Kind::Username => {
            let Value::String(s) = value else { return Err(format!("The {name} must be a string.")) };
            let s = s.trim();
            let ok = (3..=50).contains(&s.len())
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
            if !ok {
                return Err(format!(
                    "The {name} must be 3 to 50 letters, digits, dots, dashes or underscores."
                ));
            }
            Ok(Value::String(s.to_owned()))
        }
        Kind::Password => {
            let Value::String(s) = value else { return Err(format!("The {name} must be a string.")) };
            crate::auth::password::check_strength(s)?;
            Ok(Value::String(s.clone()))
        }
        Kind::IdList => {
            let Value::Array(items) = value else { return Err(format!("The {name} must be a list of ids.")) };
            let mut ids: Vec<i64> = Vec::with_capacity(items.len());
            for item in items {
                match integer_of(item) {
                    Some(id) if id > 0 => ids.push(id),
                    _ => return Err(format!("The {name} must be a list of ids.")),
                }
            }
            ids.sort_unstable();
            ids.dedup();
            Ok(Value::from(ids))
        }
        Kind::NameList => {
            let Value::Array(items) = value else {
                return Err(format!("The {name} must be a list of names."));
            };
            let mut names: Vec<String> = Vec::with_capacity(items.len());
            for item in items {
                match item.as_str().map(str::trim) {
                    Some(n) if !n.is_empty() && n.len() <= 100 => names.push(n.to_owned()),
                    _ => return Err(format!("The {name} must be a list of names.")),
                }
            }
            names.sort();
            names.dedup();
            Ok(Value::from(names))
        }
        Kind::Enum(values) => {
            let s = value.as_str().map(|s| s.trim().to_ascii_lowercase());
            match s {
                Some(s) if values.contains(&s.as_str()) => Ok(Value::String(s)),
                _ => Err(format!("The selected {name} is invalid. Allowed: {}.", values.join(", "))),
            }
        }
    }
}

/// Integers may arrive as JSON numbers or as digit strings (form-minded clients).
fn integer_of(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => {
            n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9e15).map(|f| f as i64))
        }
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

pub fn parse_date(s: &str) -> Option<Date> {
    if s.len() != 10 {
        return None;
    }
    Date::parse(s, &Iso8601::DATE).ok()
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
    use serde_json::json;

    #[test]
    fn normalises_and_rejects() {
        let sex = one_of("sex", &["male", "female"]);
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
