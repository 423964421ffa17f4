//! `Slot`: a free slot of a doctor at the branch, as the availability search finds them
//! (`appointments::free_slots`: in the doctor's hours, clear of appointments and surgeries,
//! not yet begun). A slot's id is `<doctor id>-<start in Unix seconds>`, its Schedule the
//! doctor's. Searched by `schedule` and `start`, which bounds the time the slots lie in
//! (a local date is a day of the branch), over at most 31 days; from now and a week long by
//! default. A slot taken since is no longer found (404).

use serde_json::{Value, json};
use time::{Duration, OffsetDateTime};

use super::search::{Accepts, DateParam, Prefix, Search, Span};
use super::sql::Page;
use crate::appointments::{Asked, MAX_DAYS, Slot, free_slots};
use crate::http::error::{ApiError, ApiResult};
use crate::http::list::Bound;
use crate::resource::Context;

/// A free slot is worked out from the hours when asked for, never stored: it has no
/// `lastUpdated` to sort by.
pub const ACCEPTS: Accepts =
    Accepts { dates: &["start"], schedule: true, sorts: &[("start", "starts_at")], ..Accepts::NOTHING_MORE };

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::bad_request("invalid_search", message)
}

/// The span the `start` parameters bound: each one value; all of them hold.
fn span_of(search: &Search) -> ApiResult<(Option<Bound>, Option<Bound>)> {
    let (mut from, mut to): (Option<Bound>, Option<Bound>) = (None, None);
    let later = |a: Option<Bound>, b: Bound| match a {
        Some(a) if a.roughly(false) >= b.roughly(false) => Some(a),
        _ => Some(b),
    };
    let earlier = |a: Option<Bound>, b: Bound| match a {
        Some(a) if a.roughly(true) <= b.roughly(true) => Some(a),
        _ => Some(b),
    };
    for any_of in &search.dates {
        let [DateParam { prefix, span }] = any_of.as_slice() else {
            return Err(invalid("start takes one value at a time here; repeat it for a span."));
        };
        let (first, last) = match *span {
            // A span of days ends with its last day (the slots' `to` is a day inclusive).
            Span::Days(day, after) => (Bound::Day(day), after.and_then(|a| a.previous_day()).map(Bound::Day)),
            Span::Instants(at, end) => (Bound::Instant(at), end.map(Bound::Instant)),
            Span::Local(..) => {
                return Err(invalid("start: give a date, or a date and time with its offset."));
            }
        };
        match prefix {
            Prefix::Eq => {
                from = later(from, first);
                to = last.map_or(to, |last| earlier(to, last));
            }
            Prefix::Ge => from = later(from, first),
            Prefix::Gt => from = last.map_or(from, |last| later(from, after_bound(last))),
            Prefix::Le => to = last.map_or(to, |last| earlier(to, last)),
            Prefix::Lt => to = earlier(to, before_bound(first)),
        }
    }
    Ok((from, to))
}

/// What follows `bound`: the next day, or the same instant (slots start at or after it).
fn after_bound(bound: Bound) -> Bound {
    match bound {
        Bound::Day(day) => day.next_day().map_or(bound, Bound::Day),
        at => at,
    }
}

/// What comes before `bound`: the day before, or the same instant.
fn before_bound(bound: Bound) -> Bound {
    match bound {
        Bound::Day(day) => day.previous_day().map_or(bound, Bound::Day),
        at => at,
    }
}

/// `<doctor>-<unix seconds>` as the doctor and the slot's start.
fn parse_id(id: &str) -> Option<(i64, OffsetDateTime)> {
    let (doctor, start) = id.split_once('-')?;
    let doctor = doctor.parse::<i64>().ok().filter(|d| *d > 0)?;
    let start = OffsetDateTime::from_unix_timestamp(start.parse().ok()?).ok()?;
    Some((doctor, start))
}

/// The free slots of `doctor` (every doctor keeping hours: `None`) in the span; none for a
/// doctor the availability search does not know (a search that names one finds nothing).
async fn of(
    ctx: &Context,
    doctor: Option<i64>,
    from: Option<Bound>,
    to: Option<Bound>,
) -> ApiResult<Vec<Slot>> {
    let asked = Asked { doctor, branch_service: None, from, to };
    match free_slots(ctx, &asked).await {
        Err(ApiError::Validation(_)) => Ok(Vec::new()),
        found => found,
    }
}

pub async fn search(ctx: &Context, search: &Search) -> ApiResult<Page> {
    if search.gone {
        return Ok(Page { total: 0, rows: Vec::new() });
    }
    let mut slots: Vec<Slot> = Vec::new();
    if let Some(ids) = &search.ids {
        // Each id names its doctor and start: the slot found again if it is still free.
        for (doctor, start) in ids.iter().filter_map(|id| parse_id(id)) {
            let (from, to) = (Bound::Instant(start), Bound::Instant(start + Duration::days(1)));
            slots.extend(
                of(ctx, Some(doctor), Some(from), Some(to))
                    .await?
                    .into_iter()
                    .filter(|s| s.starts_at == start),
            );
        }
    } else {
        let (from, to) = span_of(search)?;
        let start = from.map_or_else(OffsetDateTime::now_utc, |b| b.roughly(false));
        if to.is_some_and(|to| to.roughly(true) - start > Duration::days(MAX_DAYS)) {
            return Err(invalid(format!("A Slot search covers at most {MAX_DAYS} days of start.")));
        }
        match &search.schedules {
            Some(doctors) => {
                for doctor in doctors {
                    slots.extend(of(ctx, Some(*doctor), from, to).await?);
                }
            }
            None => slots = of(ctx, None, from, to).await?,
        }
    }
    slots.retain(|s| search.schedules.as_ref().is_none_or(|d| d.contains(&s.doctor_id)));
    slots.sort_by_key(|s| (s.starts_at, s.doctor_id));
    slots.dedup_by_key(|s| (s.starts_at, s.doctor_id));
    // `_sort` takes the start alone; its first key decides, the doctor telling ties apart.
    if search.sort.first().is_some_and(|key| key.descending) {
        slots.sort_by_key(|s| (std::cmp::Reverse(s.starts_at), s.doctor_id));
    }
    let total = slots.len() as i64;
    let rows = slots
        .into_iter()
        .skip(usize::try_from(search.offset).unwrap_or(usize::MAX))
        .take(usize::try_from(search.count).unwrap_or(0))
        .map(|s| {
            json!({
                "id": format!("{}-{}", s.doctor_id, s.starts_at.unix_timestamp()),
                "doctor_id": s.doctor_id,
                "starts_at": instant(s.starts_at),
                "ends_at": instant(s.ends_at),
            })
        })
        .collect();
    Ok(Page { total, rows })
}

/// An instant as FHIR writes one, in UTC.
fn instant(at: OffsetDateTime) -> String {
    at.to_offset(time::UtcOffset::UTC)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

pub fn resource(row: &Value) -> Value {
    json!({
        "resourceType": "Slot",
        "id": row["id"],
        "schedule": { "reference": format!("Schedule/{}", row["doctor_id"]) },
        "status": "free",
        "start": row["starts_at"],
        "end": row["ends_at"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn ids_name_the_doctor_and_the_start() {
        let start = datetime!(2030-01-07 09:00 UTC);
        assert_eq!(parse_id(&format!("7-{}", start.unix_timestamp())), Some((7, start)));
        for bad in ["7", "x-1", "0-1", "7-x", "-7-1"] {
            assert_eq!(parse_id(bad), None, "{bad}");
        }
    }
}
