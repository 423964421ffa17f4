//! List parameters (`page`, `perPage`, `search`, `sortField`, `sortDirection`,
//! `filters[...]`) and the paginated envelope `{data, links, meta}`.
//!
//! Parameters are validated strictly: a value outside its range, an unknown sort field or an
//! unknown filter is a 422 naming the parameter, never silently ignored.

use salvo::prelude::*;
use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;
use time::{Date, OffsetDateTime};

use super::error::{ApiError, ApiResult, FieldErrors};

pub const DEFAULT_PER_PAGE: i64 = 15;
pub const MAX_PER_PAGE: i64 = 100;
/// Longest accepted search term.
pub const MAX_SEARCH_LEN: usize = 200;

/// What a resource allows in its lists.
pub struct ListRules<'a> {
    pub sort_fields: &'a [&'a str],
    pub default_sort: &'a str,
    pub default_direction: SortDirection,
    pub filters: &'a [&'a str],
    /// Whether `start_date` / `end_date` are accepted.
    pub date_range: bool,
    /// Whether `from` / `to` are accepted too: the dated column holds instants, which a
    /// local day (`to` inclusive) or an instant (`to` exclusive) bounds.
    pub window: bool,
    /// Filters also accepted as plain parameters (`status=` for `filters[status]=`); both
    /// given with different values is a 422.
    pub aliases: &'a [&'a str],
    /// Other parameters the route takes (an export's `format`).
    pub extra: &'a [&'a str],
}

/// Parameters every list takes.
const LIST_PARAMETERS: [&str; 5] = ["page", "perPage", "search", "sortField", "sortDirection"];

/// A 422 naming every parameter of `pairs` that is not one of `allowed`: a parameter a route
/// does not take is a mistake the client should hear of, not something silently ignored.
pub fn only(pairs: &[(String, String)], allowed: &[&str]) -> ApiResult<()> {
    let mut errors = FieldErrors::new();
    unknown_parameters(pairs, |key| allowed.contains(&key), allowed, &mut errors);
    if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(errors)) }
}

fn unknown_parameters(
    pairs: &[(String, String)],
    known: impl Fn(&str) -> bool,
    allowed: &[&str],
    errors: &mut FieldErrors,
) {
    for (key, _) in pairs {
        if !known(key) && !errors.contains_key(key) {
            let takes = if allowed.is_empty() { "no parameters".to_owned() } else { allowed.join(", ") };
            errors
                .entry(key.clone())
                .or_default()
                .push(format!("Unknown parameter; this route takes {takes}."));
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortDirection {
    Asc,
    Desc,
}

impl SortDirection {
    pub fn sql(self) -> &'static str {
        match self {
            Self::Asc => "ASC",
            Self::Desc => "DESC",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ListQuery {
    pub page: i64,
    pub per_page: i64,
    pub search: Option<String>,
    pub sort_field: String,
    pub sort_direction: SortDirection,
    /// `(field, raw value)` for each `filters[field]=value`; values are checked by the resource.
    pub filters: Vec<(String, String)>,
    pub start_date: Option<time::Date>,
    pub end_date: Option<time::Date>,
    pub from: Option<Bound>,
    pub to: Option<Bound>,
    /// The zone whose days the dates mean, for a column of instants (the branch's; UTC when
    /// none is set).
    pub zone: Option<String>,
}

impl ListQuery {
    pub fn offset(&self) -> i64 {
        (self.page - 1) * self.per_page
    }
}

/// One end of a span of time: a local day (the branch's) or an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Day(Date),
    Instant(OffsetDateTime),
}

impl Bound {
    /// `YYYY-MM-DD` or an RFC 3339 instant.
    pub fn parse(raw: &str) -> Option<Self> {
        match parse_date(raw) {
            Some(day) => Some(Self::Day(day)),
            None => OffsetDateTime::parse(raw, &Rfc3339).ok().map(Self::Instant),
        }
    }

    /// The local day, if this is one.
    pub fn day(self) -> Option<Date> {
        match self {
            Self::Day(day) => Some(day),
            Self::Instant(_) => None,
        }
    }

    /// The instant, if this is one.
    pub fn instant(self) -> Option<OffsetDateTime> {
        match self {
            Self::Day(_) => None,
            Self::Instant(at) => Some(at),
        }
    }

    /// Where this bound lies, a day taken at its start (`end`: its end) in UTC: within a
    /// day of the truth, enough to hold a span to its limit.
    pub fn roughly(self, end: bool) -> OffsetDateTime {
        match self {
            Self::Day(day) => {
                let day = if end { day.next_day().unwrap_or(day) } else { day };
                day.midnight().assume_utc()
            }
            Self::Instant(at) => at,
        }
    }
}

/// A `YYYY-MM-DD` date.
pub fn parse_date(s: &str) -> Option<time::Date> {
    if s.len() != 10 {
        return None;
    }
    time::Date::parse(s, &time::format_description::well_known::Iso8601::DATE).ok()
}

/// The decoded query string, in order.
pub fn query_pairs(req: &Request) -> Vec<(String, String)> {
    form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes()).into_owned().collect()
}

/// PostgreSQL text cannot hold NUL, and no search needs other control characters.
pub fn has_control_characters(text: &str) -> bool {
    super::text::refused(text, super::text::Lines::One)
}

/// Checks every list parameter against `rules`; a 422 names each bad one.
pub fn parse(pairs: &[(String, String)], rules: &ListRules) -> ApiResult<ListQuery> {
    let mut params = Params { pairs, errors: FieldErrors::new() };
    let page = params.integer("page", 1, 1, i64::MAX / MAX_PER_PAGE);
    let per_page = params.integer("perPage", DEFAULT_PER_PAGE, 1, MAX_PER_PAGE);
    let search = params.search();
    let sort_field = params.sort_field(rules);
    let sort_direction = params.sort_direction(rules);
    let filters = params.filters(rules);
    let (start_date, end_date) = params.date_range(rules);
    let (from, to) = params.window(rules);
    params.unknown(rules);
    if params.errors.is_empty() {
        Ok(ListQuery {
            page,
            per_page,
            search,
            sort_field,
            sort_direction,
            filters,
            start_date,
            end_date,
            from,
            to,
            zone: None,
        })
    } else {
        Err(ApiError::Validation(params.errors))
    }
}

/// The query string being parsed, and what was wrong with it so far.
struct Params<'a> {
    pairs: &'a [(String, String)],
    errors: FieldErrors,
}

impl Params<'_> {
    /// The last value of `name` (later parameters win, as in most frameworks).
    fn last(&self, name: &str) -> Option<&str> {
        self.pairs.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    fn error(&mut self, name: &str, message: String) {
        self.errors.entry(name.into()).or_default().push(message);
    }

    fn integer(&mut self, name: &str, default: i64, min: i64, max: i64) -> i64 {
        let Some(raw) = self.last(name) else { return default };
        match raw.trim().parse::<i64>() {
            Ok(v) if (min..=max).contains(&v) => v,
            _ => {
                let message = if max == i64::MAX {
                    format!("The {name} must be an integer of at least {min}.")
                } else {
                    format!("The {name} must be an integer between {min} and {max}.")
                };
                self.error(name, message);
                default
            }
        }
    }

    fn search(&mut self) -> Option<String> {
        let search = self.last("search").map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned)?;
        if has_control_characters(&search) {
            self.error("search", "The search contains control characters.".into());
        }
        if search.chars().count() > MAX_SEARCH_LEN {
            self.error("search", format!("The search may not be greater than {MAX_SEARCH_LEN} characters."));
        }
        Some(search)
    }

    /// Sort parameters are one of their values exactly, as the API description lists them.
    fn sort_field(&mut self, rules: &ListRules) -> String {
        match self.last("sortField") {
            None => rules.default_sort.to_owned(),
            Some(field) if rules.sort_fields.contains(&field) => field.to_owned(),
            Some(_) => {
                self.error(
                    "sortField",
                    format!("The sortField must be one of: {}.", rules.sort_fields.join(", ")),
                );
                rules.default_sort.to_owned()
            }
        }
    }

    fn sort_direction(&mut self, rules: &ListRules) -> SortDirection {
        match self.last("sortDirection") {
            None => rules.default_direction,
            Some("asc") => SortDirection::Asc,
            Some("desc") => SortDirection::Desc,
            Some(_) => {
                self.error("sortDirection", "The sortDirection must be asc or desc.".into());
                rules.default_direction
            }
        }
    }

    /// `filters[field]=value` for declared fields; an empty value means "no filter".
    fn filters(&mut self, rules: &ListRules) -> Vec<(String, String)> {
        let mut filters: Vec<(String, String)> = Vec::new();
        for (key, value) in self.pairs {
            let Some(field) = key.strip_prefix("filters[").and_then(|rest| rest.strip_suffix(']')) else {
                continue;
            };
            if !rules.filters.contains(&field) {
                let allowed =
                    if rules.filters.is_empty() { "none".to_owned() } else { rules.filters.join(", ") };
                self.error(key, format!("Unknown filter. Allowed filters: {allowed}."));
                continue;
            }
            if value.trim().is_empty() {
                continue; // an empty filter box in a front-end means "no filter"
            }
            if has_control_characters(value) || value.chars().count() > MAX_SEARCH_LEN {
                self.error(key, "The filter value is not acceptable.".into());
                continue;
            }
            filters.retain(|(f, _)| f != field);
            // Not trimmed: a value is what its kind says, exactly (the API description).
            filters.push((field.to_owned(), value.to_owned()));
        }
        for alias in rules.aliases {
            let Some(value) = self.last(alias).filter(|v| !v.trim().is_empty()).map(str::to_owned) else {
                continue;
            };
            match filters.iter().find(|(f, _)| f == alias) {
                Some((_, given)) if *given != value => {
                    self.error(alias, format!("The {alias} and filters[{alias}] disagree."));
                }
                Some(_) => {}
                None => filters.push(((*alias).to_owned(), value)),
            }
        }
        filters
    }

    /// Every parameter the list does not take.
    fn unknown(&mut self, rules: &ListRules) {
        let dated = match (rules.date_range, rules.window) {
            (true, true) => &["start_date", "end_date", "from", "to"][..],
            (true, false) => &["start_date", "end_date"][..],
            _ => &[],
        };
        let known = |key: &str| {
            LIST_PARAMETERS.contains(&key)
                || key.starts_with("filters[")
                || dated.contains(&key)
                || rules.aliases.contains(&key)
                || rules.extra.contains(&key)
        };
        let mut allowed: Vec<&str> = LIST_PARAMETERS.to_vec();
        allowed.push("filters[...]");
        allowed.extend(dated.iter().chain(rules.aliases).chain(rules.extra));
        unknown_parameters(self.pairs, known, &allowed, &mut self.errors);
        if !rules.date_range {
            for name in ["start_date", "end_date"] {
                if let Some(messages) = self.errors.get_mut(name) {
                    *messages = vec!["This list has no date range.".into()];
                }
            }
        }
    }

    /// A date parameter: absent is none; anything sent, even empty, must be a date.
    fn date(&mut self, name: &str) -> Option<time::Date> {
        let raw = self.last(name).map(str::trim)?;
        let parsed = parse_date(raw);
        if parsed.is_none() {
            self.error(name, format!("The {name} must be a date (YYYY-MM-DD)."));
        }
        parsed
    }

    /// `start_date` and `end_date`, for resources with a date range (ignored otherwise).
    fn date_range(&mut self, rules: &ListRules) -> (Option<time::Date>, Option<time::Date>) {
        if !rules.date_range {
            return (None, None);
        }
        let (start, end) = (self.date("start_date"), self.date("end_date"));
        if let (Some(start), Some(end)) = (start, end)
            && end < start
        {
            self.error("end_date", "The end_date must be on or after the start_date.".into());
        }
        (start, end)
    }

    /// `from` and `to`, each a local day or an instant, for a column of instants.
    fn window(&mut self, rules: &ListRules) -> (Option<Bound>, Option<Bound>) {
        if !rules.window {
            return (None, None);
        }
        let mut bound = |name: &str| {
            let raw = self.last(name)?.trim().to_owned();
            let parsed = Bound::parse(&raw);
            if parsed.is_none() {
                self.error(name, format!("The {name} must be a date (YYYY-MM-DD) or an RFC 3339 date-time."));
            }
            parsed
        };
        let (from, to) = (bound("from"), bound("to"));
        if let (Some(from), Some(to)) = (from, to)
            && to.roughly(true) <= from.roughly(false)
        {
            self.error("to", "The to must be after the from.".into());
        }
        (from, to)
    }
}

/// Builds `{data, links, meta}`; links are absolute and keep every other query parameter.
pub fn envelope(
    base_url: &str,
    path: &str,
    pairs: &[(String, String)],
    query: &ListQuery,
    total: i64,
    data: Vec<Value>,
) -> Value {
    let (links, meta) = links_and_meta(base_url, path, pairs, query, total, data.len() as i64);
    json!({ "data": data, "links": links, "meta": meta })
}

/// [`envelope`] around a page that is already JSON text (an array PostgreSQL made of the
/// rows, `count` of them): written as it is, never parsed.
pub fn raw_envelope(
    base_url: &str,
    path: &str,
    pairs: &[(String, String)],
    query: &ListQuery,
    total: i64,
    count: i64,
    data: &str,
) -> String {
    let (links, meta) = links_and_meta(base_url, path, pairs, query, total, count);
    format!("{{\"data\":{data},\"links\":{links},\"meta\":{meta}}}")
}

/// The `links` and `meta` of a list answer holding `count` rows.
fn links_and_meta(
    base_url: &str,
    path: &str,
    pairs: &[(String, String)],
    query: &ListQuery,
    total: i64,
    count: i64,
) -> (Value, Value) {
    let last_page = ((total + query.per_page - 1) / query.per_page).max(1);
    let link = |page: i64| {
        let mut serializer = form_urlencoded::Serializer::new(String::new());
        let mut wrote_page = false;
        for (k, v) in pairs {
            if k == "page" {
                if !wrote_page {
                    serializer.append_pair("page", &page.to_string());
                    wrote_page = true;
                }
            } else {
                serializer.append_pair(k, v);
            }
        }
        if !wrote_page {
            serializer.append_pair("page", &page.to_string());
        }
        format!("{base_url}{path}?{}", serializer.finish())
    };
    let (from, to) = if count == 0 {
        (Value::Null, Value::Null)
    } else {
        (json!(query.offset() + 1), json!(query.offset() + count))
    };
    (
        json!({
            "first": link(1),
            "last": link(last_page),
            "prev": if query.page > 1 { json!(link((query.page - 1).min(last_page))) } else { Value::Null },
            "next": if query.page < last_page { json!(link(query.page + 1)) } else { Value::Null },
        }),
        json!({
            "current_page": query.page,
            "from": from,
            "last_page": last_page,
            "per_page": query.per_page,
            "to": to,
            "total": total,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: ListRules = ListRules {
        sort_fields: &["id", "name"],
        default_sort: "id",
        default_direction: SortDirection::Asc,
        filters: &["status"],
        date_range: false,
        window: false,
        aliases: &["status"],
        extra: &[],
    };

    fn pairs(q: &str) -> Vec<(String, String)> {
        form_urlencoded::parse(q.as_bytes()).into_owned().collect()
    }

    #[test]
    fn defaults() {
        let q = parse(&[], &RULES).unwrap();
        assert_eq!((q.page, q.per_page, q.sort_field.as_str()), (1, 15, "id"));
        assert_eq!(q.sort_direction, SortDirection::Asc);
    }

    #[test]
    fn rejects_bad_values_naming_each_parameter() {
        let Err(ApiError::Validation(errors)) =
            parse(&pairs("page=0&perPage=101&sortField=secret&sortDirection=up&filters[x]=1"), &RULES)
        else {
            panic!("expected a 422");
        };
        for key in ["page", "perPage", "sortField", "sortDirection", "filters[x]"] {
            assert!(errors.contains_key(key), "{key} missing from {errors:?}");
        }
        assert!(errors["sortField"][0].contains("id, name"));
    }

    #[test]
    fn parameters_a_list_does_not_take_are_named() {
        let Err(ApiError::Validation(errors)) =
            parse(&pairs("end_date=2020-02-30&colour=red&page=2"), &RULES)
        else {
            panic!("expected a 422");
        };
        assert_eq!(errors.keys().collect::<Vec<_>>(), ["colour", "end_date"]);
        assert_eq!(errors["end_date"], ["This list has no date range."]);
        let dated = ListRules { date_range: true, ..RULES };
        let Err(ApiError::Validation(errors)) = parse(&pairs("start_date=&end_date=2020-02-30"), &dated)
        else {
            panic!("expected a 422");
        };
        assert_eq!(errors.keys().collect::<Vec<_>>(), ["end_date", "start_date"]);
        assert!(parse(&pairs("start_date=2020-02-03&status=x"), &dated).is_ok());
    }

    #[test]
    fn an_alias_is_a_filter_and_must_agree_with_it() {
        let q = parse(&pairs("status=open"), &RULES).unwrap();
        assert_eq!(q.filters, vec![("status".to_owned(), "open".to_owned())]);
        assert!(parse(&pairs("status=open&filters[status]=open"), &RULES).is_ok());
        assert!(parse(&pairs("status=open&filters[status]=posted"), &RULES).is_err());
    }

    #[test]
    fn rejects_control_characters_that_postgres_cannot_store() {
        let Err(ApiError::Validation(errors)) = parse(&pairs("search=a%00b&filters[status]=x%00"), &RULES)
        else {
            panic!("expected a 422");
        };
        assert!(errors.contains_key("search") && errors.contains_key("filters[status]"), "{errors:?}");
    }

    #[test]
    fn links_keep_other_parameters() {
        let p = pairs("perPage=2&filters[status]=active&page=2");
        let q = parse(&p, &RULES).unwrap();
        let v = envelope("http://h", "/api/v1/x", &p, &q, 5, vec![json!(1), json!(2)]);
        assert_eq!(v["links"]["next"], "http://h/api/v1/x?perPage=2&filters%5Bstatus%5D=active&page=3");
        assert_eq!(v["links"]["prev"], "http://h/api/v1/x?perPage=2&filters%5Bstatus%5D=active&page=1");
        assert_eq!(v["meta"]["last_page"], 3);
        assert_eq!((v["meta"]["from"].as_i64(), v["meta"]["to"].as_i64()), (Some(3), Some(4)));
        let empty = envelope("http://h", "/x", &p, &q, 0, vec![]);
        assert!(empty["meta"]["from"].is_null() && empty["links"]["next"].is_null());
    }
}
