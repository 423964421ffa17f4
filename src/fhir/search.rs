//! FHIR search parameters: which ones a type takes, their values (`_id`, `patient`, dates with
//! their prefixes, `_count` and `_offset`), and the searchset Bundle with links that keep the
//! query. The SQL they make is `sql`'s.

use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{Date, Duration, Month, OffsetDateTime, PrimitiveDateTime, UtcOffset};

use super::codes::PIN;
use crate::http::error::{ApiError, ApiResult};

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
    /// The name of its parameter naming a doctor (`practitioner`, a Schedule's `actor`).
    pub practitioner: Option<&'static str>,
    /// The FHIR codes its `status` takes, when it takes one.
    pub statuses: &'static [&'static str],
    /// `schedule` (a Schedule id or reference: a doctor's).
    pub schedule: bool,
    /// `code`, as a token of this system (`system|code`, `|code` or `code`).
    pub code: Option<&'static str>,
}

impl Accepts {
    /// `_id` and paging only.
    pub const NOTHING_MORE: Accepts = Accepts {
        patient: false,
        dates: &[],
        identifier: false,
        practitioner: None,
        statuses: &[],
        schedule: false,
        code: None,
    };
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
/// the precision written (`2026` is a year, `2026-03-01T10:00Z` a minute). A span that ends
/// with year 9999 has no end the calendar can write (`None`): it reaches the end of time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Span {
    /// Whole local days of the branch.
    Days(Date, Option<Date>),
    /// Instants (in UTC), when the value has a time and an offset.
    Instants(OffsetDateTime, Option<OffsetDateTime>),
    /// Local times of the branch, when the value has a time but no offset.
    Local(PrimitiveDateTime, Option<PrimitiveDateTime>),
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
    /// Doctors named by the type's practitioner parameter.
    pub practitioners: Option<Vec<i64>>,
    /// Schedules (doctors) named by `schedule`.
    pub schedules: Option<Vec<i64>>,
    /// FHIR status codes, any of which may match.
    pub statuses: Option<Vec<String>>,
    /// PINs named by `identifier` (a value of another system names none).
    pub identifiers: Option<Vec<String>>,
    /// Codes named by `code` (a value of another system names none).
    pub codes: Option<Vec<String>>,
    /// Every date parameter must hold, each by any of its comma-separated values.
    pub dates: Vec<Vec<DateParam>>,
    /// The records deleted rather than the live ones: what a read of an id not found asks
    /// next, to tell a 410 from a 404.
    pub gone: bool,
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
    if let Some(name) = accepts.practitioner {
        taken.push(name);
    }
    if !accepts.statuses.is_empty() {
        taken.push("status");
    }
    if accepts.schedule {
        taken.push("schedule");
    }
    if accepts.code.is_some() {
        taken.push("code");
    }
    // Control characters never get here: `http::text::QueryText` refused them in front of
    // the routes.
    for (name, value) in pairs {
        if !taken.contains(&name.as_str()) {
            return Err(invalid(format!(
                "This search does not take the parameter {name}; it takes {}.",
                taken.join(", ")
            )));
        }
        let items: Vec<String> = list(value).collect();
        if items.is_empty() {
            continue;
        }
        match name.as_str() {
            "_id" => all_of(&mut search.ids, items),
            "identifier" => all_of(&mut search.identifiers, items.iter().filter_map(|i| pin(i)).collect()),
            "code" => {
                let system = accepts.code.unwrap_or_default();
                all_of(&mut search.codes, items.iter().filter_map(|i| token(system, i)).collect());
            }
            "patient" => {
                let ids = items.iter().map(|v| patient_reference(v)).collect::<ApiResult<Vec<_>>>()?;
                all_of(&mut search.patients, ids);
            }
            "status" => {
                if let Some(bad) = items.iter().find(|i| !accepts.statuses.contains(&i.as_str())) {
                    return Err(invalid(format!("status takes {}, not {bad}.", accepts.statuses.join(", "))));
                }
                all_of(&mut search.statuses, items);
            }
            "schedule" => {
                let ids =
                    items.iter().map(|v| reference(name, "Schedule", v)).collect::<ApiResult<Vec<_>>>()?;
                all_of(&mut search.schedules, ids);
            }
            name if Some(name) == accepts.practitioner => {
                let ids = items
                    .iter()
                    .map(|v| reference(name, "Practitioner", v))
                    .collect::<ApiResult<Vec<_>>>()?;
                all_of(&mut search.practitioners, ids);
            }
            "_count" => search.count = number(name, value.trim(), 1, MAX_COUNT)?,
            "_offset" => search.offset = number(name, value.trim(), 0, MAX_OFFSET)?,
            "_format" => format(value.trim())?,
            _ => search.dates.push(items.iter().map(|v| date_param(name, v)).collect::<ApiResult<_>>()?),
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

/// The PIN an `identifier` value names: `value`, `|value` or `system|value`, where only this
/// server's PIN system names a patient.
fn pin(value: &str) -> Option<String> {
    match value.split_once('|') {
        Some((system, pin)) if system.is_empty() || system == PIN => Some(pin.to_owned()),
        Some(_) => None,
        None => Some(value.to_owned()),
    }
}

/// The code a token names in `system`: `code`, `|code` or `system|code`.
fn token(system: &str, value: &str) -> Option<String> {
    match value.split_once('|') {
        Some((sent, code)) if sent.is_empty() || sent == system => Some(code.to_owned()),
        Some(_) => None,
        None => Some(value.to_owned()),
    }
}

/// `123`, `Patient/123` or an absolute URL ending in `Patient/123`.
fn patient_reference(value: &str) -> ApiResult<i64> {
    reference("patient", "Patient", value)
}

/// `123`, `<kind>/123` or an absolute URL ending in `<kind>/123`, as parameter `name` takes it.
fn reference(name: &str, kind: &str, value: &str) -> ApiResult<i64> {
    let id = match value.rsplit_once(&format!("{kind}/")) {
        Some((before, id)) if before.is_empty() || before.ends_with('/') => id,
        Some(_) => "",
        None => value,
    };
    id.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| invalid(format!("{name} must be a {kind} id or reference, not {value}.")))
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
    let span = span(rest).map_err(|unreadable| match unreadable {
        Unreadable::Malformed => invalid(format!(
            "{name} must be a date (YYYY, YYYY-MM, YYYY-MM-DD) or a date and time \
             (YYYY-MM-DDThh:mm[:ss][Z|+hh:mm]), after an optional prefix; not {value}."
        )),
        Unreadable::OutOfRange => {
            invalid(format!("{name}: {value} is outside the years 1 to 9999 once its offset is taken away."))
        }
    })?;
    Ok(DateParam { prefix, span })
}

/// Why a date parameter's value is refused.
#[derive(Debug, PartialEq, Eq)]
enum Unreadable {
    Malformed,
    /// A date and time whose offset carries it past the calendar's years (`9999-12-31T20:00-05:00`).
    OutOfRange,
}

fn span(value: &str) -> Result<Span, Unreadable> {
    use Unreadable::Malformed;
    let first_of = |year: i32, month: Month| Date::from_calendar_date(year, month, 1).ok();
    let year = |text: &str| text.parse::<i32>().ok().filter(|y| (1..=9999).contains(y)).ok_or(Malformed);
    match value.len() {
        4 if value.bytes().all(|b| b.is_ascii_digit()) => {
            let year = year(value)?;
            return Ok(Span::Days(
                first_of(year, Month::January).ok_or(Malformed)?,
                first_of(year + 1, Month::January),
            ));
        }
        7 => {
            let (year_text, month) = value.split_once('-').ok_or(Malformed)?;
            let year = if year_text.len() == 4 { year(year_text)? } else { return Err(Malformed) };
            let month = month.parse::<u8>().ok().and_then(|m| Month::try_from(m).ok()).ok_or(Malformed)?;
            let first = first_of(year, month).ok_or(Malformed)?;
            let next = if month == Month::December {
                first_of(year + 1, Month::January)
            } else {
                first_of(year, month.next())
            };
            return Ok(Span::Days(first, next));
        }
        10 => {
            let day =
                Date::parse(value, format_description!("[year]-[month]-[day]")).map_err(|_| Malformed)?;
            return Ok(Span::Days(day, day.next_day()));
        }
        _ => {}
    }
    let (_, time) = value.split_once('T').ok_or(Malformed)?;
    // Minutes (hh:mm) or seconds, with or without a fraction: the span is one unit of it.
    let zoned = time.ends_with('Z') || time.contains('+') || time.contains('-');
    let clock = time.trim_end_matches('Z').split(['+', '-']).next().ok_or(Malformed)?;
    let unit = match clock.len() {
        5 => Duration::MINUTE,
        8 => Duration::SECOND,
        n if n > 9 && clock.as_bytes()[8] == b'.' => Duration::MILLISECOND,
        _ => return Err(Malformed),
    };
    if zoned {
        let with_seconds = if clock.len() == 5 {
            value.replacen(clock, &format!("{clock}:00"), 1)
        } else {
            value.to_owned()
        };
        let start = OffsetDateTime::parse(&with_seconds, &Rfc3339).map_err(|_| Malformed)?;
        // In UTC here, so that no later conversion (the database's) can overflow.
        let start = start.checked_to_offset(UtcOffset::UTC).ok_or(Unreadable::OutOfRange)?;
        Ok(Span::Instants(start, start.checked_add(unit)))
    } else {
        let format = format_description!(
            version = 2,
            "[year]-[month]-[day]T[hour]:[minute][optional [:[second][optional [.[subsecond]]]]]"
        );
        let start = PrimitiveDateTime::parse(value, format).map_err(|_| Malformed)?;
        Ok(Span::Local(start, start.checked_add(unit)))
    }
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

    const ALL: Accepts = Accepts { patient: true, dates: &["date"], ..Accepts::NOTHING_MORE };

    fn pairs(query: &str) -> Vec<(String, String)> {
        form_urlencoded::parse(query.as_bytes()).into_owned().collect()
    }

    #[test]
    fn dates_cover_the_span_their_precision_gives() {
        let d = |v: &str| date_param("date", v).unwrap();
        assert_eq!(d("2026").span, Span::Days(date!(2026 - 01 - 01), Some(date!(2027 - 01 - 01))));
        assert_eq!(d("ge2026-12").span, Span::Days(date!(2026 - 12 - 01), Some(date!(2027 - 01 - 01))));
        assert_eq!(d("ge2026-12").prefix, Prefix::Ge);
        assert_eq!(d("lt2026-02-28").span, Span::Days(date!(2026 - 02 - 28), Some(date!(2026 - 03 - 01))));
        assert_eq!(
            d("gt2026-02-28T10:30Z").span,
            Span::Instants(datetime!(2026-02-28 10:30 UTC), Some(datetime!(2026-02-28 10:31 UTC)))
        );
        assert_eq!(
            d("eq2026-02-28T10:30:05+02:00").span,
            Span::Instants(datetime!(2026-02-28 08:30:05 UTC), Some(datetime!(2026-02-28 08:30:06 UTC)))
        );
        assert_eq!(
            d("2026-02-28T10:30").span,
            Span::Local(datetime!(2026-02-28 10:30), Some(datetime!(2026-02-28 10:31)))
        );
        for bad in ["2026-13", "2026-02-30", "sa2026", "ne2026-01-01", "yesterday", "2026-01-01T25:00Z", "ge"]
        {
            assert!(date_param("date", bad).is_err(), "{bad} was taken");
        }
    }

    #[test]
    fn the_last_year_reaches_the_end_of_time_and_nothing_overflows() {
        let d = |v: &str| date_param("date", v).unwrap().span;
        assert_eq!(d("9999"), Span::Days(date!(9999 - 01 - 01), None));
        assert_eq!(d("9999-12"), Span::Days(date!(9999 - 12 - 01), None));
        assert_eq!(d("9999-12-31"), Span::Days(date!(9999 - 12 - 31), None));
        assert_eq!(d("9999-12-31T23:59:59Z"), Span::Instants(datetime!(9999-12-31 23:59:59 UTC), None));
        assert_eq!(d("9999-12-31T23:59"), Span::Local(datetime!(9999-12-31 23:59), None));
        assert_eq!(
            d("9999-12-31T20:00:00+05:00"),
            Span::Instants(datetime!(9999-12-31 15:00 UTC), Some(datetime!(9999-12-31 15:00:01 UTC)))
        );
        // Past the calendar once its offset is taken away: a refusal, not a panic.
        assert_eq!(span("9999-12-31T20:00:00-05:00"), Err(Unreadable::OutOfRange));
        assert_eq!(span("0001-01-01T00:00:00+14:00").map(|_| ()), Ok(()));
    }

    #[test]
    fn comma_lists_are_alternatives_each_with_its_prefix_and_repeats_must_all_hold() {
        let s = parse(&pairs("date=1985-03-01,ge1990,lt1970-01&date=le2000"), ALL).unwrap();
        let prefixes: Vec<Vec<Prefix>> =
            s.dates.iter().map(|any| any.iter().map(|d| d.prefix).collect()).collect();
        assert_eq!(prefixes, [vec![Prefix::Eq, Prefix::Ge, Prefix::Lt], vec![Prefix::Le]]);
        assert!(parse(&pairs("date=2026,sa2026"), ALL).is_err(), "each item is checked");
        let with_pins = Accepts { identifier: true, ..ALL };
        let s = parse(&pairs("identifier=P-1,urn:other|P-2&identifier=urn:clinic-server:pin|P-1"), with_pins);
        assert_eq!(s.unwrap().identifiers, Some(vec!["P-1".to_owned()]), "the same PIN either way");
        assert_eq!(parse(&pairs("_id=,&date=,"), ALL).map(|s| (s.ids, s.dates.len())).unwrap(), (None, 0));
    }

    #[test]
    fn unknown_parameters_and_bad_values_are_refused() {
        assert!(parse(&pairs("name=ana"), ALL).is_err());
        assert!(parse(&pairs("_count=0"), ALL).is_err());
        assert!(parse(&pairs("_count=101"), ALL).is_err());
        assert!(parse(&pairs("_offset=-1"), ALL).is_err());
        assert!(parse(&pairs("patient=Practitioner/4"), ALL).is_err());
        assert!(parse(&pairs("_format=xml"), ALL).is_err());
        assert!(parse(&pairs("practitioner=1"), ALL).is_err());
        assert!(parse(&pairs("status=booked"), ALL).is_err());
        let booked = Accepts { practitioner: Some("practitioner"), statuses: &["booked", "noshow"], ..ALL };
        let s = parse(&pairs("practitioner=Practitioner/3,4&status=noshow,booked&status=booked"), booked)
            .unwrap();
        assert_eq!((s.practitioners, s.statuses), (Some(vec![3, 4]), Some(vec!["booked".to_owned()])));
        assert!(parse(&pairs("status=gone"), booked).is_err());
        assert!(parse(&pairs("practitioner=Patient/3"), booked).is_err());
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
