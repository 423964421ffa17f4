//! `GET /appointments/availability`: the free slots of a doctor, or of every doctor keeping
//! hours at the branch, over at most 31 days.
//!
//! A slot is free when it lies in the doctor's hours (`doctor_hours` in the branch schema:
//! weekly hours, changed and closed days), clear of their active appointments, clear of
//! their surgeries at any branch (registry), and not yet begun. Slots follow each other from
//! the start of the hours they belong to, each as long as those hours' `slot_minutes`.

use salvo::prelude::*;
use serde_json::{Value, json};
use time::{Duration, OffsetDateTime};

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
    let (surgeons, surgery_starts, surgery_ends) = surgeries(&registry, &doctors, asked).await?;
    drop(registry);
    let stmt = reads.prepare_cached(FREE_SLOTS).await?;
    let rows = reads
        .query(
            &stmt,
            &[
                &doctors,
                &from_at,
                &from_day,
                &to_at,
                &to_day,
                &route.timezone,
                &surgeons,
                &surgery_starts,
                &surgery_ends,
                &DEFAULT_DAYS,
            ],
        )
        .await?;
    Ok(rows.iter().map(|r| Slot { starts_at: r.get(0), ends_at: r.get(1), doctor_id: r.get(2) }).collect())
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
/// each side: its local days are not known here), as three columns.
type Surgeries = (Vec<i64>, Vec<OffsetDateTime>, Vec<OffsetDateTime>);
async fn surgeries(registry: &impl Queries, doctors: &[i64], asked: &Asked) -> ApiResult<Surgeries> {
    let from = asked.from.map_or_else(OffsetDateTime::now_utc, |b| b.roughly(false)) - Duration::days(1);
    let to =
        asked.to.map_or(from + Duration::days(DEFAULT_DAYS.into()), |b| b.roughly(true)) + Duration::days(2);
    let stmt = registry
        .prepare_cached(
            "SELECT coalesce(array_agg(doctor_id), '{}'), coalesce(array_agg(scheduled_at), '{}'),
                    coalesce(array_agg(ends_at), '{}')
               FROM surgery_schedules
              WHERE doctor_id = ANY($1) AND deleted_at IS NULL
                AND status IN ('scheduled', 'confirmed') AND ends_at > $2 AND scheduled_at < $3",
        )
        .await?;
    let row = registry.query_one(&stmt, &[&doctors, &from, &to]).await?;
    Ok((row.get(0), row.get(1), row.get(2)))
}

/// The free slots of doctors `$1` from `$2` (an instant) or `$3` (a local day) to `$4` or the
/// end of local day `$5` in zone `$6`, clear of surgeries `($7, $8, $9)`; from now when no
/// start is given, and `$10` days long when no end is.
const FREE_SLOTS: &str = "
    WITH span AS (
        SELECT greatest(f.at, now()) AS from_at,
               coalesce($4::timestamptz, ($5::date + 1)::timestamp AT TIME ZONE $6::text,
                        f.at + make_interval(days => $10::int)) AS to_at
          FROM (SELECT coalesce($2::timestamptz, $3::date::timestamp AT TIME ZONE $6::text, now()) AS at) f
    ),
    slots AS (
        SELECT d.doctor_id, s.starts_at, s.ends_at
          FROM unnest($1::bigint[]) AS d(doctor_id), span,
               doctor_slots(d.doctor_id, (span.from_at AT TIME ZONE $6::text)::date,
                            (span.to_at AT TIME ZONE $6::text)::date, $6::text) s
    ),
    busy AS (
        SELECT d.doctor_id, coalesce(range_agg(b.taken), '{}'::tstzmultirange) AS taken
          FROM unnest($1::bigint[]) AS d(doctor_id)
          CROSS JOIN span
          LEFT JOIN LATERAL (
                SELECT tstzrange(a.starts_at, a.ends_at) AS taken
                  FROM appointments a
                 WHERE a.doctor_id = d.doctor_id AND a.deleted_at IS NULL
                   AND a.status IN ('booked', 'arrived', 'in_progress')
                   AND a.starts_at < span.to_at AND a.ends_at > span.from_at
                UNION ALL
                SELECT tstzrange(s.starts_at, s.ends_at)
                  FROM unnest($7::bigint[], $8::timestamptz[], $9::timestamptz[]) AS s(doctor_id, starts_at, ends_at)
                 WHERE s.doctor_id = d.doctor_id) b ON true
         GROUP BY d.doctor_id
    )
    SELECT s.starts_at, s.ends_at, s.doctor_id
      FROM slots s
      JOIN busy b USING (doctor_id)
      CROSS JOIN span
     WHERE s.starts_at >= span.from_at AND s.ends_at <= span.to_at
       AND NOT b.taken && tstzrange(s.starts_at, s.ends_at)
     ORDER BY s.starts_at, s.doctor_id";
