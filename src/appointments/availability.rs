//! `GET /appointments/availability`: the free slots of a doctor, or of every doctor keeping
//! hours at the branch, over at most 31 days.
//!
//! A slot is free when it lies in the doctor's hours (`hours::reading_hours`: weekly hours,
//! changed and closed days), clear of their active appointments, clear of
//! their surgeries at any branch (registry), and not yet begun. Slots follow each other from
//! the start of the hours they belong to, each as long as those hours' `slot_minutes`.

use std::collections::HashMap;
use std::sync::LazyLock;

use salvo::prelude::*;
use serde_json::{Value, json};
use time::{Duration, OffsetDateTime};

use super::hours::reading_hours;
use crate::db::Queries;
use crate::http::error::{ApiError, ApiResult};
use crate::http::list::Bound;
use crate::http::params::Params;
use crate::http::{self as web};
use crate::permissions::APPOINTMENTS_READ;
use crate::resource::{Context, Scope};

/// The longest span one call covers.
pub const MAX_DAYS: i64 = 31;
/// The span covered when `to` is not given.
const DEFAULT_DAYS: i32 = 7;

/// A free slot of a doctor.
#[derive(Debug, Clone)]
pub struct Slot {
    pub doctor_id: i64,
    pub starts_at: OffsetDateTime,
    pub ends_at: OffsetDateTime,
}

/// What a search for free slots asks for.
pub struct Asked {
    /// One doctor; none: every doctor keeping hours at the branch.
    pub doctor: Option<i64>,
    /// Only doctors serving this branch service (all, when it names no staff).
    pub branch_service: Option<i64>,
    /// From now when none.
    pub from: Option<Bound>,
    /// A week after `from` when none.
    pub to: Option<Bound>,
}

/// `GET /appointments/availability?doctor_id=&branch_service_id=&from=&to=`.
#[handler]
pub async fn availability(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(APPOINTMENTS_READ)?;
    let mut params = Params::of(req, &["doctor_id", "branch_service_id", "from", "to"]);
    let asked = Asked {
        doctor: params.integer("doctor_id", 1, i64::MAX),
        branch_service: params.integer("branch_service_id", 1, i64::MAX),
        from: params.bound("from"),
        to: params.bound("to"),
    };
    check_span(&mut params, &asked);
    params.done()?;
    let slots = free_slots(&ctx, &asked).await?;
    let data: Vec<Value> = slots
        .iter()
        .map(|s| json!({ "starts_at": rfc3339(s.starts_at), "ends_at": rfc3339(s.ends_at), "doctor_id": s.doctor_id }))
        .collect();
    web::ok(res, "Availability retrieved.", Value::Array(data));
    Ok(())
}

/// An instant as the records write theirs (PostgreSQL's JSON form, always with an offset).
fn rfc3339(at: OffsetDateTime) -> String {
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second][offset_hour sign:mandatory]:[offset_minute]"
    );
    at.format(&format).unwrap_or_default()
}

/// `to` after `from`, at most [`MAX_DAYS`] later (days counted whole, in the branch's zone).
fn check_span(params: &mut Params, asked: &Asked) {
    let from = asked.from.map_or_else(OffsetDateTime::now_utc, |b| b.roughly(false));
    let Some(to) = asked.to.map(|b| b.roughly(true)) else { return };
    if to <= from {
        params.error("to", "The to must be after the from.");
    } else if to - from > Duration::days(MAX_DAYS) {
        params.error("to", format!("A search covers at most {MAX_DAYS} days."));
    }
}

/// The free slots `asked` for, at the request's branch, in order of time then doctor.
pub async fn free_slots(ctx: &Context, asked: &Asked) -> ApiResult<Vec<Slot>> {
    let route = ctx.branch()?.clone();
    let registry = ctx.registry().await?;
    let staff = match asked.branch_service {
        Some(service) => Some(service_staff(&registry, route.id, service).await?),
        None => None,
    };
    let conn = ctx.reading_conn(Scope::Branch).await?;
    let reads = conn.reads();
    let candidates = match asked.doctor {
        Some(doctor) => vec![doctor],
        None => keeping_hours(&reads).await?,
    };
    let doctors = serving(&registry, &candidates, staff.as_deref()).await?;
    if let Some(doctor) = asked.doctor
        && !doctors.contains(&doctor)
    {
        let message = if staff.is_some_and(|s| !s.is_empty()) {
            "The doctor does not serve this branch service."
        } else {
            "The selected doctor id is invalid."
        };
        return Err(ApiError::field("doctor_id", message));
    }
    let (from_at, from_day) = (asked.from.and_then(Bound::instant), asked.from.and_then(Bound::day));
    let (to_at, to_day) = (asked.to.and_then(Bound::instant), asked.to.and_then(Bound::day));
    let mut surgeries = surgeries(&registry, &doctors, asked).await?;
    drop(registry);
    let stmt = reads.prepare_cached(&HOURS_AND_BOOKINGS).await?;
    // Its plan does not hang on the values asked, and making it took as long as running it.
    let rows = reads
        .read_generic(
            &stmt,
            &[&doctors, &from_at, &from_day, &to_at, &to_day, &route.timezone, &DEFAULT_DAYS],
        )
        .await?;
    let mut slots = Vec::new();
    for row in &rows {
        let doctor: i64 = row.get("doctor_id");
        let span = (row.get("from_at"), row.get("to_at"));
        let stretches = zip3(row.get("stretch_starts"), row.get("stretch_ends"), row.get("slot_minutes"));
        let mut busy: Vec<(OffsetDateTime, OffsetDateTime)> = row
            .get::<_, Vec<OffsetDateTime>>("busy_starts")
            .into_iter()
            .zip(row.get::<_, Vec<_>>("busy_ends"))
            .collect();
        busy.extend(surgeries.remove(&doctor).unwrap_or_default());
        slots.extend(free_in(doctor, span, &stretches, busy));
    }
    slots.sort_by_key(|s| (s.starts_at, s.doctor_id));
    slots.dedup_by_key(|s| (s.starts_at, s.ends_at, s.doctor_id));
    Ok(slots)
}

fn zip3<A, B, C>(a: Vec<A>, b: Vec<B>, c: Vec<C>) -> Vec<(A, B, C)> {
    a.into_iter().zip(b).zip(c).map(|((a, b), c)| (a, b, c)).collect()
}

/// The slots of `doctor` within `span` that its `stretches` of hours hold (one after another
/// from each stretch's start, `minutes` long) and that overlap none of the `busy` times.
fn free_in(
    doctor: i64,
    (from, to): (OffsetDateTime, OffsetDateTime),
    stretches: &[(OffsetDateTime, OffsetDateTime, i32)],
    busy: Vec<(OffsetDateTime, OffsetDateTime)>,
) -> Vec<Slot> {
    let busy = disjoint(busy);
    let mut free = Vec::new();
    for &(start, end, minutes) in stretches {
        let step = Duration::minutes(minutes.max(1).into());
        let mut starts_at = start;
        while starts_at + step <= end {
            let ends_at = starts_at + step;
            // The first busy time that ends after the slot starts overlaps it if it starts
            // before the slot ends: the times are disjoint and in order.
            let next = busy.partition_point(|&(_, busy_end)| busy_end <= starts_at);
            let taken = busy.get(next).is_some_and(|&(busy_start, _)| busy_start < ends_at);
            if starts_at >= from && ends_at <= to && !taken {
                free.push(Slot { doctor_id: doctor, starts_at, ends_at });
            }
            starts_at = ends_at;
        }
    }
    free
}

/// `times` in order, those that overlap or meet made one.
fn disjoint(mut times: Vec<(OffsetDateTime, OffsetDateTime)>) -> Vec<(OffsetDateTime, OffsetDateTime)> {
    times.sort_unstable();
    let mut merged: Vec<(OffsetDateTime, OffsetDateTime)> = Vec::with_capacity(times.len());
    for (start, end) in times {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// The users serving `service` of branch `branch` (422 unless it is an active service of it).
async fn service_staff(registry: &impl Queries, branch: i64, service: i64) -> ApiResult<Vec<i64>> {
    let stmt = registry
        .prepare_cached(
            "SELECT ARRAY(SELECT st.user_id FROM branch_service_staff st WHERE st.service_id = s.id ORDER BY 1)
               FROM branch_services s
              WHERE s.id = $1 AND s.branch_id = $2 AND s.deleted_at IS NULL AND s.active",
        )
        .await?;
    match registry.query_opt(&stmt, &[&service, &branch]).await? {
        Some(row) => Ok(row.get(0)),
        None => Err(ApiError::field(
            "branch_service_id",
            "The branch service is not an active service of this branch.",
        )),
    }
}

/// The doctors with weekly or changed hours at the branch.
async fn keeping_hours(reads: &impl Queries) -> ApiResult<Vec<i64>> {
    let stmt = reads
        .prepare_cached(
            "SELECT doctor_id FROM doctor_schedules WHERE deleted_at IS NULL
              UNION
             SELECT doctor_id FROM schedule_exceptions
              WHERE deleted_at IS NULL AND NOT closed AND doctor_id IS NOT NULL",
        )
        .await?;
    Ok(reads.query(&stmt, &[]).await?.iter().map(|r| r.get(0)).collect())
}

/// Of `candidates`, the active doctors, and of those only the ones among `staff` when it
/// names any.
async fn serving(registry: &impl Queries, candidates: &[i64], staff: Option<&[i64]>) -> ApiResult<Vec<i64>> {
    let staff = staff.filter(|s| !s.is_empty());
    let stmt = registry
        .prepare_cached(
            "SELECT id FROM doctors
              WHERE id = ANY($1) AND deleted_at IS NULL AND active
                AND ($2::bigint[] IS NULL OR user_id = ANY($2))
              ORDER BY id",
        )
        .await?;
    Ok(registry.query(&stmt, &[&candidates, &staff]).await?.iter().map(|r| r.get(0)).collect())
}

/// The surgeries of `doctors` still on (at any branch) around the span `asked` (a day more on
/// each side: its local days are not known here), by doctor.
async fn surgeries(
    registry: &impl Queries,
    doctors: &[i64],
    asked: &Asked,
) -> ApiResult<HashMap<i64, Vec<(OffsetDateTime, OffsetDateTime)>>> {
    let from = asked.from.map_or_else(OffsetDateTime::now_utc, |b| b.roughly(false)) - Duration::days(1);
    let to =
        asked.to.map_or(from + Duration::days(DEFAULT_DAYS.into()), |b| b.roughly(true)) + Duration::days(2);
    let stmt = registry
        .prepare_cached(
            "SELECT doctor_id, scheduled_at, ends_at
               FROM surgery_schedules
              WHERE doctor_id = ANY($1) AND deleted_at IS NULL
                AND status IN ('scheduled', 'confirmed') AND ends_at > $2 AND scheduled_at < $3",
        )
        .await?;
    let mut by_doctor: HashMap<i64, Vec<_>> = HashMap::new();
    for row in registry.query(&stmt, &[&doctors, &from, &to]).await? {
        by_doctor.entry(row.get(0)).or_default().push((row.get(1), row.get(2)));
    }
    Ok(by_doctor)
}

/// For each of doctors `$1`: the span searched, from `$2` (an instant) or `$3` (a local day)
/// to `$4` or the end of local day `$5` in zone `$6` (from now when no start is given, `$7`
/// days long when no end is; never before now); the stretches of hours over its local days;
/// and its active appointments in it, in order. The slots are cut from these in
/// [`free_in`]: a sweep over ordered times, where the same test in SQL (each slot against a
/// multirange of the bookings) cost several times as much.
static HOURS_AND_BOOKINGS: LazyLock<String> = LazyLock::new(|| {
    reading_hours(
        "SELECT d.doctor_id, span.from_at, span.to_at, (span.from_at AT TIME ZONE $6::text)::date AS first_day,
                (span.to_at AT TIME ZONE $6::text)::date AS last_day, $6::text AS zone
           FROM unnest($1::bigint[]) AS d(doctor_id),
                (SELECT greatest(f.at, now()) AS from_at,
                        coalesce($4::timestamptz, ($5::date + 1)::timestamp AT TIME ZONE $6::text,
                                 f.at + make_interval(days => $7::int)) AS to_at
                   FROM (SELECT coalesce($2::timestamptz, $3::date::timestamp AT TIME ZONE $6::text, now()) AS at) f
                ) span",
        "SELECT a.doctor_id, a.from_at, a.to_at,
                coalesce(h.starts, '{}') AS stretch_starts, coalesce(h.ends, '{}') AS stretch_ends,
                coalesce(h.minutes, '{}') AS slot_minutes,
                coalesce(b.starts, '{}') AS busy_starts, coalesce(b.ends, '{}') AS busy_ends
           FROM asked a
           LEFT JOIN LATERAL (
                SELECT array_agg(lower(h.stretch) ORDER BY h.stretch, h.slot_minutes) AS starts,
                       array_agg(upper(h.stretch) ORDER BY h.stretch, h.slot_minutes) AS ends,
                       array_agg(h.slot_minutes ORDER BY h.stretch, h.slot_minutes) AS minutes
                  FROM hours h WHERE h.doctor_id = a.doctor_id) h ON true
           LEFT JOIN LATERAL (
                SELECT array_agg(x.starts_at ORDER BY x.starts_at) AS starts,
                       array_agg(x.ends_at ORDER BY x.starts_at) AS ends
                  FROM appointments x
                 WHERE x.doctor_id = a.doctor_id AND x.deleted_at IS NULL
                   AND x.status IN ('booked', 'arrived', 'in_progress')
                   AND x.starts_at < a.to_at AND x.ends_at > a.from_at) b ON true",
    )
});

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn a_slot_is_free_only_clear_of_every_busy_time_overlapping_ones_too() {
        let at = |h: u8, m: u8| {
            datetime!(2027-03-01 00:00 UTC) + Duration::minutes(i64::from(h) * 60 + i64::from(m))
        };
        let stretches = [(at(9, 0), at(11, 0), 30)];
        // An overbooked pair (the second inside the first) and one meeting a slot's edge.
        let busy = vec![(at(9, 30), at(10, 15)), (at(9, 40), at(9, 50)), (at(9, 0), at(9, 30))];
        let free = free_in(1, (at(0, 0), at(23, 0)), &stretches, busy);
        let starts: Vec<_> = free.iter().map(|s| s.starts_at).collect();
        assert_eq!(starts, [at(10, 30)]);
        let free = free_in(1, (at(0, 0), at(23, 0)), &stretches, vec![(at(10, 30), at(10, 31))]);
        let starts: Vec<_> = free.iter().map(|s| s.starts_at).collect();
        assert_eq!(starts, [at(9, 0), at(9, 30), at(10, 0)]);
    }

    #[test]
    fn slots_follow_from_the_start_of_their_stretch_within_the_span() {
        let at = |h: u8, m: u8| {
            datetime!(2027-03-01 00:00 UTC) + Duration::minutes(i64::from(h) * 60 + i64::from(m))
        };
        // A stretch of 50 minutes holds three slots of 15 from 09:05; the span cuts the first.
        let free = free_in(7, (at(9, 10), at(12, 0)), &[(at(9, 5), at(9, 55), 15)], Vec::new());
        let slots: Vec<_> = free.iter().map(|s| (s.starts_at, s.ends_at, s.doctor_id)).collect();
        assert_eq!(slots, [(at(9, 20), at(9, 35), 7), (at(9, 35), at(9, 50), 7)]);
    }
}
