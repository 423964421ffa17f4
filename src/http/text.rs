//! The one check every text of a request passes: no NUL (PostgreSQL's text and jsonb cannot
//! hold it) and no other control character but tab, and line breaks where text may run over
//! several lines.
//!
//! - A JSON body is checked as it is parsed ([`super::json_object`]), every string and key at
//!   any depth, so a hand-written route can never hand PostgreSQL what a declared field
//!   would refuse. Line breaks pass there; a field of one line refuses them in its own check.
//! - A query string is checked by the [`QueryText`] hoop in front of every router, before any
//!   handler reads it: one line, tab only.
//! - A header value reaches a handler only through `HeaderValue::to_str`, which yields
//!   visible ASCII and tab alone (hyper refuses NUL, CR and LF in a header before that).

use salvo::prelude::*;
use serde_json::{Map, Value};

use super::error::{ApiError, FieldErrors};

/// Whether a text may hold line breaks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Lines {
    One,
    Many,
}

/// Whether `text` holds a character no text of a request may hold.
pub fn refused(text: &str, lines: Lines) -> bool {
    text.chars().any(|c| c.is_control() && !(c == '\t' || lines == Lines::Many && matches!(c, '\n' | '\r')))
}

/// Every string and key of a JSON body that holds a refused character, by its dotted path
/// (`items.2.note`), each with its message.
pub fn body_errors(body: &Map<String, Value>) -> FieldErrors {
    let mut errors = FieldErrors::new();
    for (key, value) in body {
        walk(key, value, &mut errors);
    }
    errors
}

fn walk(path: &str, value: &Value, errors: &mut FieldErrors) {
    let mut refuse = |path: &str| {
        // The path is named without the characters refused, which a key may hold too.
        let shown: String = path.chars().filter(|c| !c.is_control()).collect();
        let message = format!("The {} contains control characters.", shown.replace('_', " "));
        errors.entry(shown).or_default().push(message);
    };
    if refused(path, Lines::One) {
        refuse(path);
        return;
    }
    match value {
        Value::String(s) if refused(s, Lines::Many) => refuse(path),
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                walk(&format!("{path}.{index}"), item, errors);
            }
        }
        Value::Object(fields) => {
            for (key, item) in fields {
                walk(&format!("{path}.{key}"), item, errors);
            }
        }
        _ => {}
    }
}

/// Hoop: a query string whose names or values (decoded) hold a control character but tab is
/// refused before the handler runs: 422 naming the parameter in the API, 400 where the
/// protocol has no field errors (FHIR's searches, whose OperationOutcome hoop wraps it).
pub struct QueryText {
    /// The code of a 400; `None`: a 422 naming each parameter.
    bad_request: Option<&'static str>,
}

impl QueryText {
    /// The API's answer: a 422 naming each parameter.
    pub const FIELDS: Self = Self { bad_request: None };

    /// A 400 with `code`, naming the parameter in its message.
    pub const fn bad_request(code: &'static str) -> Self {
        Self { bad_request: Some(code) }
    }
}

#[async_trait]
impl Handler for QueryText {
    async fn handle(&self, req: &mut Request, _depot: &mut Depot, res: &mut Response, ctrl: &mut FlowCtrl) {
        let Some(query) = req.uri().query() else { return };
        let mut errors = FieldErrors::new();
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            if refused(&name, Lines::One) || refused(&value, Lines::One) {
                let shown: String = name.chars().filter(|c| !c.is_control()).take(100).collect();
                let message = format!("The {shown} parameter contains control characters.");
                errors.entry(shown).or_default().push(message);
            }
        }
        let Some(messages) = errors.values().next() else { return };
        let error = match self.bad_request {
            Some(code) => ApiError::bad_request(code, messages[0].clone()),
            None => ApiError::Validation(errors),
        };
        res.render(error);
        ctrl.skip_rest();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nul_and_control_characters_are_refused_and_line_breaks_only_where_allowed() {
        assert!(refused("a\0b", Lines::Many));
        assert!(refused("bell\u{7}", Lines::Many));
        assert!(refused("c1\u{85}", Lines::Many));
        assert!(refused("two\nlines", Lines::One));
        assert!(!refused("two\r\nlines\tand a tab", Lines::Many));
        assert!(!refused("Nguyễn 王 👍", Lines::One));
    }

    #[test]
    fn a_body_is_walked_at_every_depth_keys_included() {
        let body = json!({
            "reason": "ok\nfine",
            "items": [{"note": "x"}, {"note": "bad\u{0}"}],
            "nested": {"bad\u{1}key": 1},
            "kept": 3,
        });
        let errors = body_errors(body.as_object().unwrap());
        let paths: Vec<&str> = errors.keys().map(String::as_str).collect();
        assert_eq!(paths, ["items.1.note", "nested.badkey"]);
    }
}
