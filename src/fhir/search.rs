//! FHIR search parameters: which ones a type takes, their values (`_id`, `patient`, dates as
//! `dates` reads them, a patient's names as `names` does, `_sort`, `_count`, `_summary` and
//! `_offset`), and the searchset Bundle with links that keep the query. The SQL they make is
//! `sql`'s.

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::codes::PIN;
pub use super::dates::{DateParam, Prefix, Span, date_param};
use super::names::{self, NameMatch};
use crate::http::error::{ApiError, ApiResult};

/// Entries per page unless `_count` says otherwise, and the most it may say.
pub const DEFAULT_COUNT: i64 = 20;
pub const MAX_COUNT: i64 = 100;
/// The furthest page a search reaches (`_offset`), so that no request scans without end.
pub const MAX_OFFSET: i64 = 1_000_000;

/// Parameters every search takes. `_totalMethod=count` is what fhirpy's `count()` sends
/// beside `_count=0`: every total here is a count.
const COMMON: &[&str] = &["_id", "_count", "_offset", "_format", "_sort", "_summary", "_totalMethod"];

/// `_sort` by `_lastUpdated`, for a type whose rows carry their `updated_at`.
pub const LAST_UPDATED: (&str, &str) = ("_lastUpdated", "updated_at");

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
    /// `name`, `family` and `given` (a patient's names).
    pub names: bool,
    /// What `_sort` takes: each parameter with the column of the type's rows it orders.
    pub sorts: &'static [(&'static str, &'static str)],
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
        names: false,
        sorts: &[],
    };
}

/// A key of `_sort`: a column of the type's rows, and which way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SortKey {
    pub column: &'static str,
    pub descending: bool,
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
    /// Every name parameter must hold too.
    pub names: Vec<NameMatch>,
    /// The order asked for, before the type's own.
    pub sort: Vec<SortKey>,
    /// The records deleted rather than the live ones: what a read of an id not found asks
    /// next, to tell a 410 from a 404.
    pub gone: bool,
    /// Entries per page; none (`_count=0`, `_summary=count`) answers the total alone.
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
    if accepts.names {
        taken.extend(names::PARAMETERS);
    }
    let mut summary = false;
    // Control characters never get here: `http::text::QueryText` refused them in front of
    // the routes.
    for (sent, value) in pairs {
        let (name, modifier) = match sent.split_once(':') {
            Some((name, modifier)) => (name, Some(modifier)),
            None => (sent.as_str(), None),
        };
        if !taken.contains(&name) {
            return Err(invalid(format!(
                "This search does not take the parameter {sent}; it takes {}.",
                taken.join(", ")
            )));
        }
        let named = names::PARAMETERS.contains(&name);
        if let Some(modifier) = modifier.filter(|_| !named) {
            return Err(invalid(format!("The modifier :{modifier} is not supported on {name}.")));
        }
        let items: Vec<String> = list(value).collect();
        if items.is_empty() {
            continue;
        }
        match name {
            "_id" => all_of(&mut search.ids, items),
            name if named => search.names.push(names::parameter(name, modifier, items)?),
            "_sort" => {
                for item in &items {
                    let key = sort_key(item, accepts)?;
                    // A column sorted again changes nothing: its first key decides.
                    if !search.sort.iter().any(|k| k.column == key.column) {
                        search.sort.push(key);
                    }
                }
            }
            "_summary" => match value.trim() {
                "count" => summary = true,
                "false" => {}
                other => return Err(invalid(format!("_summary takes count or false, not {other}."))),
            },
            "_totalMethod" if value.trim() != "count" => {
                return Err(invalid("_totalMethod takes count: every total is counted."));
            }
            "_totalMethod" => {}
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
            "_count" => search.count = number(name, value.trim(), 0, MAX_COUNT)?,
            "_offset" => search.offset = number(name, value.trim(), 0, MAX_OFFSET)?,
            "_format" => format(value.trim())?,
            _ => search.dates.push(items.iter().map(|v| date_param(name, v)).collect::<ApiResult<_>>()?),
        }
    }
    if summary {
        search.count = 0;
    }
    Ok(search)
}

/// One key of `_sort`: a parameter the type sorts by, after `-` for descending.
fn sort_key(item: &str, accepts: Accepts) -> ApiResult<SortKey> {
    let (name, descending) = match item.strip_prefix('-') {
        Some(name) => (name, true),
        None => (item, false),
    };
    match accepts.sorts.iter().find(|(sorted, _)| *sorted == name) {
        Some((_, column)) => Ok(SortKey { column, descending }),
        None if accepts.sorts.is_empty() => Err(invalid("This search takes no _sort.")),
        None => {
            let names: Vec<&str> = accepts.sorts.iter().map(|(name, _)| *name).collect();
            Err(invalid(format!(
                "_sort takes {}, each after - to sort descending; not {item}.",
                names.join(", ")
            )))
        }
    }
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

/// A searchset Bundle: `total`, the entries, and `self`, `next` and `previous` links that
/// keep every parameter but `_offset`; a search that asked for the total alone (`_count=0`,
/// `_summary=count`) has no entries and no other page.
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
    let counted = search.count == 0;
    if !counted && search.offset + search.count < total {
        links.push(json!({ "relation": "next", "url": link(Some(search.offset + search.count)) }));
    }
    if !counted && search.offset > 0 {
        let previous = (search.offset - search.count).max(0).min(total.saturating_sub(1).max(0));
        links.push(json!({ "relation": "previous", "url": link(Some(previous)) }));
    }
    let mut bundle = json!({
        "resourceType": "Bundle",
        "meta": { "lastUpdated": now() },
        "type": "searchset",
        "total": total,
        "link": links,
    });
    if !counted {
        bundle["entry"] = Value::Array(entries);
    }
    bundle
}

/// This moment, as FHIR writes an instant.
pub fn now() -> String {
    OffsetDateTime::now_utc().format(&Rfc3339).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Accepts = Accepts { patient: true, dates: &["date"], ..Accepts::NOTHING_MORE };

    fn pairs(query: &str) -> Vec<(String, String)> {
        form_urlencoded::parse(query.as_bytes()).into_owned().collect()
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
    fn sorts_counts_and_modifiers_are_read_and_checked() {
        let sorted = Accepts { sorts: &[("date", "visit_date"), LAST_UPDATED], ..ALL };
        let s = parse(&pairs("_sort=-date,_lastUpdated&_sort=date"), sorted).unwrap();
        let keys: Vec<(&str, bool)> = s.sort.iter().map(|k| (k.column, k.descending)).collect();
        assert_eq!(keys, [("visit_date", true), ("updated_at", false)], "a column's first key decides");
        for bad in ["_sort=birthdate", "_sort=--date", "_sort=-", "_sort:desc=date", "date:missing=true"] {
            assert!(parse(&pairs(bad), sorted).is_err(), "{bad} was taken");
        }
        assert!(parse(&pairs("_sort=date"), ALL).is_err(), "a type that sorts by nothing");
        let count = |query: &str| parse(&pairs(query), ALL).map(|s| s.count);
        assert_eq!(count("_count=0").unwrap(), 0);
        assert_eq!(count("_summary=count&_count=5").unwrap(), 0, "the total alone, whatever _count says");
        assert_eq!(count("_summary=false&_count=5&_totalMethod=count").unwrap(), 5);
        for bad in
            ["_summary=true", "_summary=text", "_totalMethod=estimate", "name=ana", "patient:Patient=1"]
        {
            assert!(parse(&pairs(bad), ALL).is_err(), "{bad} was taken");
        }
        let named = Accepts { names: true, ..ALL };
        let s = parse(&pairs("name=ana,ben&family:exact=Peña&given:contains=uz"), named).unwrap();
        let parts: Vec<(names::Part, names::Matching, usize)> =
            s.names.iter().map(|n| (n.part, n.matching, n.values.len())).collect();
        use names::{Matching, Part};
        assert_eq!(
            parts,
            [
                (Part::Any, Matching::StartsWith, 2),
                (Part::Family, Matching::Exact, 1),
                (Part::Given, Matching::Contains, 1)
            ]
        );
        assert!(parse(&pairs("family:text=x"), named).is_err());
        assert!(parse(&pairs("family:exact:contains=x"), named).is_err());
    }

    #[test]
    fn a_count_has_no_entries_and_no_other_page() {
        let search = parse(&pairs("patient=4&_summary=count&_offset=2"), ALL).unwrap();
        let bundle = bundle("http://h", "/fhir/r4/Encounter", &search, 5, vec![json!({})]);
        assert_eq!(bundle["total"], 5);
        assert!(bundle["entry"].is_null(), "{bundle}");
        assert_eq!(
            bundle["link"],
            json!([{
                "relation": "self",
                "url": "http://h/fhir/r4/Encounter?patient=4&_summary=count&_offset=2",
            }])
        );
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
