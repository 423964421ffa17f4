//! FHIR search parameters: which ones a type takes, their values (`_id`, `patient`, dates with
//! their prefixes, `_count` and `_offset`), the SQL conditions they make, one statement for a
//! page and its total, and the searchset Bundle with links that keep the query.

use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{Date, Duration, Month, OffsetDateTime, PrimitiveDateTime};
use tokio_postgres::types::ToSql;

use crate::http::error::{ApiError, ApiResult};
use crate::resource::{Conn, Param, as_refs};

/// Entries per page unless `_count` says otherwise, and the most it may say.
pub const DEFAULT_COUNT: i64 = 20;
pub const MAX_COUNT: i64 = 100;
/// The furthest page a search reaches (`_offset`), so that no request scans without end.
pub const MAX_OFFSET: i64 = 1_000_000;

/// Parameters every search takes.
const COMMON: &[&str] = &["_id", "_count", "_offset", "_format"];

/// What one resource type's search takes besides [`COMMON`].
#[derive(Clone, Copy)]
pub struct Accepts {
    /// `patient` (a Patient id or reference).
    pub patient: bool,
    /// The names of its date parameter (`date`, and the name FHIR gives it for the type).
    pub dates: &'static [&'static str],
    /// `identifier` (the PIN).
    pub identifier: bool,
}

/// `eq`, `gt`, `lt`, `ge`, `le` (none is `eq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefix {
    Eq,
    Gt,
    Lt,
    Ge,
    Le,
}

/// What a date parameter's value covers: from its start up to (not including) its end, at
/// the precision written (`2026` is a year, `2026-03-01T10:00Z` a minute).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Span {
    /// Whole local days of the branch.
    Days(Date, Date),
    /// Instants, when the value has a time and an offset.
    Instants(OffsetDateTime, OffsetDateTime),
    /// Local times of the branch, when the value has a time but no offset.
    Local(PrimitiveDateTime, PrimitiveDateTime),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DateParam {
    pub prefix: Prefix,
    pub span: Span,
}

/// A parsed search.
#[derive(Debug, Default)]
pub struct Search {
    /// `_id` values, as sent (an id that cannot exist matches nothing).
    pub ids: Option<Vec<String>>,
    pub patients: Option<Vec<i64>>,
    pub identifiers: Option<Vec<String>>,
    /// Every date parameter must hold.
    pub dates: Vec<DateParam>,
    pub count: i64,
    pub offset: i64,
    /// The query as sent, for the links.
    pub pairs: Vec<(String, String)>,
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::bad_request("invalid_search", message)
}

/// Reads a search's parameters; anything the type does not take, or a malformed value, is a
/// 400 naming it. Empty values are left out, as the API's lists leave out empty filters.
pub fn parse(pairs: &[(String, String)], accepts: Accepts) -> ApiResult<Search> {
    let mut search = Search { count: DEFAULT_COUNT, pairs: pairs.to_vec(), ..Search::default() };
    let mut taken: Vec<&str> = COMMON.to_vec();
    if accepts.patient {
        taken.push("patient");
    }
    if accepts.identifier {
        taken.push("identifier");
    }
    taken.extend(accepts.dates);
    for (name, value) in pairs {
        if !taken.contains(&name.as_str()) {
            return Err(invalid(format!(
                "This search does not take the parameter {name}; it takes {}.",
                taken.join(", ")
            )));
        }
        let value = value.trim();
        if value.is_empty() {
            continue;
        }
        match name.as_str() {
            "_id" => all_of(&mut search.ids, list(value).collect()),
            "identifier" => all_of(&mut search.identifiers, list(value).collect()),
            "patient" => {
                let ids = list(value).map(|v| patient_reference(&v)).collect::<ApiResult<Vec<_>>>()?;
                all_of(&mut search.patients, ids);
            }
            "_count" => search.count = number(name, value, 1, MAX_COUNT)?,
            "_offset" => search.offset = number(name, value, 0, MAX_OFFSET)?,
            "_format" => format(value)?,
            _ => search.dates.push(date_param(name, value)?),
        }
    }
    Ok(search)
}

/// A parameter given again must hold too: what may match is what both allow.
fn all_of<T: PartialEq>(allowed: &mut Option<Vec<T>>, values: Vec<T>) {
    match allowed {
        Some(before) => before.retain(|v| values.contains(v)),
        None => *allowed = Some(values),
    }
}

/// A comma-separated list of values, any of which may match.
fn list(value: &str) -> impl Iterator<Item = String> + '_ {
    value.split(',').map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned)
}

fn number(name: &str, value: &str, min: i64, max: i64) -> ApiResult<i64> {
    value
        .parse::<i64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| invalid(format!("{name} must be a whole number from {min} to {max}.")))
}

/// `_format` may ask only for what the server writes: JSON.
fn format(value: &str) -> ApiResult<()> {
    match value.split(';').next().unwrap_or_default().trim() {
        "json" | "application/json" | "application/fhir+json" => Ok(()),
        _ => Err(invalid("_format may only be json: this server answers FHIR JSON.")),
    }
}

/// `123`, `Patient/123` or an absolute URL ending in `Patient/123`.
fn patient_reference(value: &str) -> ApiResult<i64> {
    let id = match value.rsplit_once("Patient/") {
        Some((before, id)) if before.is_empty() || before.ends_with('/') => id,
        Some(_) => "",
        None => value,
    };
    id.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| invalid(format!("patient must be a Patient id or reference, not {value}.")))
}

/// A date parameter: an optional prefix, then a date or a date and time.
pub fn date_param(name: &str, value: &str) -> ApiResult<DateParam> {
    let (prefix, rest) = match value.get(..2) {
        Some("eq") => (Prefix::Eq, &value[2..]),
        Some("gt") => (Prefix::Gt, &value[2..]),
        Some("lt") => (Prefix::Lt, &value[2..]),
        Some("ge") => (Prefix::Ge, &value[2..]),
        Some("le") => (Prefix::Le, &value[2..]),
        Some(other) if other.chars().all(|c| c.is_ascii_lowercase()) => {
            return Err(invalid(format!(
                "{name}: the prefix {other} is not supported; use eq, gt, lt, ge or le."
            )));
        }
        _ => (Prefix::Eq, value),
    };
    let span = span(rest).ok_or_else(|| {
        invalid(format!(
            "{name} must be a date (YYYY, YYYY-MM, YYYY-MM-DD) or a date and time \
             (YYYY-MM-DDThh:mm[:ss][Z|+hh:mm]), after an optional prefix; not {value}."
        ))
    })?;
    Ok(DateParam { prefix, span })
}

fn span(value: &str) -> Option<Span> {
    let first_of = |year: i32, month: Month| Date::from_calendar_date(year, month, 1).ok();
    match value.len() {
        4 => {
            let year = value.parse::<i32>().ok().filter(|y| (1..=9999).contains(y))?;
            return Some(Span::Days(first_of(year, Month::January)?, first_of(year + 1, Month::January)?));
        }
        7 => {
            let (year, month) = value.split_once('-')?;
            let year = year.parse::<i32>().ok().filter(|y| (1..=9999).contains(y))?;
            let month = Month::try_from(month.parse::<u8>().ok()?).ok()?;
            let first = first_of(year, month)?;
            let next = if month == Month::December {
                first_of(year + 1, Month::January)
            } else {
                first_of(year, month.next())
            };
            return Some(Span::Days(first, next?));
        }
        10 => {
            let day = Date::parse(value, format_description!("[year]-[month]-[day]")).ok()?;
            return Some(Span::Days(day, day.next_day()?));
        }
        _ => {}
    }
    let (_, time) = value.split_once('T')?;
    // Minutes (hh:mm) or seconds, with or without a fraction: the span is one unit of it.
    let zoned = time.ends_with('Z') || time.contains('+') || time.contains('-');
    let clock = time.trim_end_matches('Z').split(['+', '-']).next()?;
    let unit = match clock.len() {
        5 => Duration::MINUTE,
        8 => Duration::SECOND,
        n if n > 9 && clock.as_bytes()[8] == b'.' => Duration::MILLISECOND,
        _ => return None,
    };
    if zoned {
        let with_seconds = if clock.len() == 5 {
            value.replacen(clock, &format!("{clock}:00"), 1)
        } else {
            value.to_owned()
        };
        let start = OffsetDateTime::parse(&with_seconds, &Rfc3339).ok()?;
        Some(Span::Instants(start, start + unit))
    } else {
        let format = format_description!(
            version = 2,
            "[year]-[month]-[day]T[hour]:[minute][optional [:[second][optional [.[subsecond]]]]]"
        );
        let start = PrimitiveDateTime::parse(value, format).ok()?;
        Some(Span::Local(start, start + unit))
    }
}

/// A statement's conditions and their values.
#[derive(Default)]
pub struct Sql {
    pub conditions: Vec<String>,
    pub params: Vec<Param>,
}

impl Sql {
    /// Adds a value; answers its placeholder.
    pub fn value(&mut self, value: impl ToSql + Sync + Send + 'static) -> String {
        self.params.push(Box::new(value));
        format!("${}", self.params.len())
    }

    pub fn condition(&mut self, condition: impl Into<String>) {
        self.conditions.push(condition.into());
    }

    /// `WHERE` with every condition (or none).
    pub fn filter(&self) -> String {
        if self.conditions.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", self.conditions.join(" AND "))
        }
    }

    /// `patient=`: the rows of these patients.
    pub fn patients(&mut self, column: &str, search: &Search) {
        if let Some(patients) = &search.patients {
            let placeholder = self.value(patients.clone());
            self.condition(format!("{column} = ANY({placeholder}::bigint[])"));
        }
    }

    /// `_id` of a type whose ids are numbers: an id that is not one matches nothing.
    pub fn numeric_ids(&mut self, column: &str, search: &Search) {
        if let Some(ids) = &search.ids {
            let ids: Vec<i64> = ids.iter().filter_map(|id| id.parse::<i64>().ok()).collect();
            let placeholder = self.value(ids);
            self.condition(format!("{column} = ANY({placeholder}::bigint[])"));
        }
    }

    /// Every date parameter on `column`, a `timestamptz` (a moment) or a `date` (a whole
    /// local day of the branch, zone `timezone`), as FHIR compares ranges: `eq` when the
    /// value lies within the parameter's span, `ge`/`le` when it reaches at or after its
    /// start / before its end, `gt`/`lt` when it reaches after its end / before its start.
    pub fn dates(&mut self, column: &str, is_day: bool, search: &Search, timezone: &str) {
        for param in &search.dates {
            // Only the bounds and zone a condition uses become values: a placeholder that no
            // statement uses has no type.
            let (first, last) = match param.span {
                Span::Days(first, after) => (Bound::Day(first), Bound::Day(after)),
                Span::Instants(start, end) => (Bound::Instant(start), Bound::Instant(end)),
                Span::Local(start, end) => (Bound::Local(start), Bound::Local(end)),
            };
            let days_against_days = is_day && matches!(param.span, Span::Days(..));
            let zone = if days_against_days || (!is_day && matches!(param.span, Span::Instants(..))) {
                String::new()
            } else {
                self.value(timezone.to_owned())
            };
            let mut bound = |b: Bound| match b {
                Bound::Day(day) if days_against_days => format!("{}::date", self.value(day)),
                Bound::Day(day) => {
                    format!("({}::date::timestamp AT TIME ZONE {zone}::text)", self.value(day))
                }
                Bound::Instant(at) => format!("{}::timestamptz", self.value(at)),
                Bound::Local(at) => format!("({}::timestamp AT TIME ZONE {zone}::text)", self.value(at)),
            };
            // A moment (or a day against days) lies in [from, to); a whole local day against
            // a span of time reaches from its start to its end.
            let (from, to, after, within) = if is_day && !days_against_days {
                let from = format!("({column}::timestamp AT TIME ZONE {zone}::text)");
                (from, format!("(({column} + 1)::timestamp AT TIME ZONE {zone}::text)"), ">", "<=")
            } else {
                (column.to_owned(), column.to_owned(), ">=", "<")
            };
            let condition = match param.prefix {
                Prefix::Eq => {
                    let (start, end) = (bound(first), bound(last));
                    format!("{from} >= {start} AND {to} {within} {end}")
                }
                Prefix::Gt => format!("{to} {after} {}", bound(last)),
                Prefix::Lt => format!("{from} < {}", bound(first)),
                Prefix::Ge => format!("{to} {after} {}", bound(first)),
                Prefix::Le => format!("{from} < {}", bound(last)),
            };
            self.condition(format!("({condition})"));
        }
    }
}

/// One end of a date parameter's span.
#[derive(Clone, Copy)]
enum Bound {
    Day(Date),
    Instant(OffsetDateTime),
    Local(PrimitiveDateTime),
}

/// One page of a search: how many rows match in all, and the page's rows as JSON objects.
pub struct Page {
    pub total: i64,
    pub rows: Vec<Value>,
}

/// Runs `matching` (a `SELECT` with `sql`'s values) for a page in `order`, and the count of
/// every match, in one statement.
pub async fn page(
    conn: &mut Conn,
    matching: &str,
    order: &str,
    mut sql: Sql,
    limit: i64,
    offset: i64,
) -> ApiResult<Page> {
    let (limit, offset) = (sql.value(limit), sql.value(offset));
    let statement = format!(
        "WITH m AS ({matching})
         SELECT (SELECT count(*) FROM m),
                coalesce((SELECT jsonb_agg(to_jsonb(p) ORDER BY {order})
                            FROM (SELECT * FROM m ORDER BY {order} LIMIT {limit} OFFSET {offset}) p), '[]')"
    );
    let client = conn.client();
    let prepared = client.prepare_cached(&statement).await?;
    let row = client.query_one(&prepared, &as_refs(&sql.params)).await?;
    let rows: Value = row.get(1);
    Ok(Page { total: row.get(0), rows: rows.as_array().cloned().unwrap_or_default() })
}

/// A searchset Bundle: `total`, the entries, and `self`, `next` and `previous` links that
/// keep every parameter but `_offset`.
pub fn bundle(base: &str, path: &str, search: &Search, total: i64, entries: Vec<Value>) -> Value {
    let link = |offset: Option<i64>| {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (name, value) in &search.pairs {
            if name != "_offset" || offset.is_none() {
                query.append_pair(name, value);
            }
        }
        if let Some(offset) = offset.filter(|o| *o > 0) {
            query.append_pair("_offset", &offset.to_string());
        }
        let query = query.finish();
        if query.is_empty() { format!("{base}{path}") } else { format!("{base}{path}?{query}") }
    };
    let mut links = vec![json!({ "relation": "self", "url": link(None) })];
    if search.offset + search.count < total {
        links.push(json!({ "relation": "next", "url": link(Some(search.offset + search.count)) }));
    }
    if search.offset > 0 {
        let previous = (search.offset - search.count).max(0).min(total.saturating_sub(1).max(0));
        links.push(json!({ "relation": "previous", "url": link(Some(previous)) }));
    }
    json!({
        "resourceType": "Bundle",
        "meta": { "lastUpdated": now() },
        "type": "searchset",
        "total": total,
        "link": links,
        "entry": entries,
    })
}

/// This moment, as FHIR writes an instant.
pub fn now() -> String {
    OffsetDateTime::now_utc().format(&Rfc3339).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::{date, datetime};

    const ALL: Accepts = Accepts { patient: true, dates: &["date"], identifier: false };

    fn pairs(query: &str) -> Vec<(String, String)> {
        form_urlencoded::parse(query.as_bytes()).into_owned().collect()
    }

    #[test]
    fn dates_cover_the_span_their_precision_gives() {
        let d = |v: &str| date_param("date", v).unwrap();
        assert_eq!(d("2026").span, Span::Days(date!(2026 - 01 - 01), date!(2027 - 01 - 01)));
        assert_eq!(d("ge2026-12").span, Span::Days(date!(2026 - 12 - 01), date!(2027 - 01 - 01)));
        assert_eq!(d("ge2026-12").prefix, Prefix::Ge);
        assert_eq!(d("lt2026-02-28").span, Span::Days(date!(2026 - 02 - 28), date!(2026 - 03 - 01)));
        assert_eq!(
            d("gt2026-02-28T10:30Z").span,
            Span::Instants(datetime!(2026-02-28 10:30 UTC), datetime!(2026-02-28 10:31 UTC))
        );
        assert_eq!(
            d("eq2026-02-28T10:30:05+02:00").span,
            Span::Instants(datetime!(2026-02-28 08:30:05 UTC), datetime!(2026-02-28 08:30:06 UTC))
        );
        assert_eq!(
            d("2026-02-28T10:30").span,
            Span::Local(datetime!(2026-02-28 10:30), datetime!(2026-02-28 10:31))
        );
        for bad in ["2026-13", "2026-02-30", "sa2026", "ne2026-01-01", "yesterday", "2026-01-01T25:00Z", "ge"]
        {
            assert!(date_param("date", bad).is_err(), "{bad} was taken");
        }
    }

    #[test]
    fn unknown_parameters_and_bad_values_are_refused() {
        assert!(parse(&pairs("name=ana"), ALL).is_err());
        assert!(parse(&pairs("_count=0"), ALL).is_err());
        assert!(parse(&pairs("_count=101"), ALL).is_err());
        assert!(parse(&pairs("_offset=-1"), ALL).is_err());
        assert!(parse(&pairs("patient=Practitioner/4"), ALL).is_err());
        assert!(parse(&pairs("_format=xml"), ALL).is_err());
        let no_patient = Accepts { patient: false, ..ALL };
        assert!(parse(&pairs("patient=1"), no_patient).is_err());
        let s = parse(
            &pairs("patient=Patient/4,http://h/fhir/r4/Patient/5&patient=5,6&_count=5&_id=&date=ge2026"),
            ALL,
        )
        .unwrap();
        assert_eq!(s.patients, Some(vec![5]), "a repeated parameter must hold too");
        assert_eq!((s.count, s.offset, s.ids.is_none(), s.dates.len()), (5, 0, true, 1));
    }

    #[test]
    fn links_keep_the_query_and_move_the_offset() {
        let search = parse(&pairs("patient=4&_count=2&_offset=2"), ALL).unwrap();
        let bundle = bundle("http://h", "/fhir/r4/Encounter", &search, 5, vec![]);
        let links: Vec<(String, String)> = bundle["link"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| (l["relation"].as_str().unwrap().to_owned(), l["url"].as_str().unwrap().to_owned()))
            .collect();
        assert_eq!(
            links,
            [
                ("self".into(), "http://h/fhir/r4/Encounter?patient=4&_count=2&_offset=2".into()),
                ("next".into(), "http://h/fhir/r4/Encounter?patient=4&_count=2&_offset=4".into()),
                ("previous".into(), "http://h/fhir/r4/Encounter?patient=4&_count=2".into()),
            ]
        );
    }
}
