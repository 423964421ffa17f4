//! `name`, `family` and `given`: a patient's name parts matched as FHIR matches strings. By
//! default a part matches when it starts with the value, case and accents aside; with
//! `:contains` when it holds the value anywhere, case and accents aside; with `:exact` when it
//! is the value, case and accents included. `name` is any part (first, middle and last name,
//! suffix), `given` the first or middle name, `family` the last name.
//!
//! Case and accents are set aside as the API's own patient search sets them aside, by the
//! branch schema's `search_normalize`; and the rows are found first as it finds them, through
//! the trigram index on `search_text` (every part normalised in one column: a value held by a
//! part is held there too), then each part is checked.

use crate::http::error::{ApiError, ApiResult};
use crate::http::list::MAX_SEARCH_LEN;
use crate::resource::normalized_literal;

/// The parameters, as the search takes them.
pub const PARAMETERS: [&str; 3] = ["name", "family", "given"];

/// The modifiers they take.
pub const MODIFIERS: [&str; 2] = ["exact", "contains"];

/// Which parts of the name a parameter matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Any,
    Family,
    Given,
}

/// How a part matches a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Matching {
    StartsWith,
    Contains,
    Exact,
}

/// One name parameter as sent: any of its values may match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameMatch {
    pub part: Part,
    pub matching: Matching,
    pub values: Vec<String>,
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::bad_request("invalid_search", message)
}

/// Parameter `name` (one of [`PARAMETERS`]) with `modifier`, holding `values`.
pub fn parameter(name: &str, modifier: Option<&str>, values: Vec<String>) -> ApiResult<NameMatch> {
    let part = match name {
        "family" => Part::Family,
        "given" => Part::Given,
        _ => Part::Any,
    };
    let matching = match modifier {
        None => Matching::StartsWith,
        Some("contains") => Matching::Contains,
        Some("exact") => Matching::Exact,
        Some(other) => {
            return Err(invalid(format!(
                "The modifier :{other} is not supported on {name}; it takes :exact and :contains."
            )));
        }
    };
    if values.iter().any(|v| v.chars().count() > MAX_SEARCH_LEN) {
        return Err(invalid(format!("{name} may not be greater than {MAX_SEARCH_LEN} characters.")));
    }
    Ok(NameMatch { part, matching, values })
}

/// The name parts of a patient row aliased `p` that `part` matches.
fn columns(part: Part) -> &'static [&'static str] {
    match part {
        Part::Any => &["p.first_name", "p.middle_name", "p.last_name", "p.suffix"],
        Part::Family => &["p.last_name"],
        Part::Given => &["p.first_name", "p.middle_name"],
    }
}

/// The two conditions of `matched` on a patient row aliased `p`, its values bound to
/// `values` (a `text[]`): the trigram index's, then the parts'; any value may match.
pub fn conditions(matched: &NameMatch, values: &str) -> [String; 2] {
    // The values normalised and escaped for LIKE, between `before` and `after`. Escaped after
    // normalising, as the API's search does, since normalising makes the fullwidth ＿ and ％
    // the wildcards _ and %; a sub-select, computed once per statement rather than for every
    // row the index hands over.
    let literal = normalized_literal("v");
    let patterns = |before: &str, after: &str| {
        format!("ARRAY(SELECT {before}{literal}{after} FROM unnest({values}::text[]) v)")
    };
    let anywhere = patterns("'%' || ", " || '%'");
    let starting = patterns("", " || '%'");
    let part = |column: &&str| match matched.matching {
        Matching::StartsWith => format!("search_normalize({column}) LIKE ANY ({starting})"),
        Matching::Contains => format!("search_normalize({column}) LIKE ANY ({anywhere})"),
        Matching::Exact => format!("{column} = ANY({values}::text[])"),
    };
    let parts: Vec<String> = columns(matched.part).iter().map(part).collect();
    [format!("p.search_text LIKE ANY ({anywhere})"), format!("({})", parts.join(" OR "))]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modifiers_are_exact_and_contains_and_nothing_else() {
        let values = || vec!["ana".to_owned()];
        let given = parameter("given", Some("exact"), values()).unwrap();
        assert_eq!((given.part, given.matching), (Part::Given, Matching::Exact));
        let name = parameter("name", None, values()).unwrap();
        assert_eq!((name.part, name.matching), (Part::Any, Matching::StartsWith));
        let family = parameter("family", Some("contains"), values()).unwrap();
        assert_eq!((family.part, family.matching), (Part::Family, Matching::Contains));
        for bad in ["missing", "text", "EXACT", "", "exact:contains"] {
            assert!(parameter("family", Some(bad), values()).is_err(), ":{bad} was taken");
        }
        assert!(parameter("name", None, vec!["a".repeat(MAX_SEARCH_LEN + 1)]).is_err());
    }
}
