//! The calendar (visits per day from the rollup, surgery events from the registry) and the
//! upcoming surgeries.

use std::collections::BTreeMap;

use salvo::prelude::*;
use serde_json::{Value, json};
use time::{Date, OffsetDateTime};

use super::common::{Clock, Params, open, open_range};
use crate::db::Queries;
use crate::http::error::ApiResult;
use crate::http::{self as web};
use crate::resource::{Context, Scope};

/// Surgery events of the branch (registry) whose local start lies in `start..=end` (or, for
/// upcoming ones, from `now` on), each with its local date, joined with their patients
/// (branch schema). Columns, not JSON, come from the database: the events are made here.
async fn surgery_events(
    ctx: &Context,
    branch: &impl Queries,
    clock: &Clock,
    window: Window,
) -> ApiResult<Vec<(Date, Value)>> {
    let registry = ctx.registry().await?;
    let branch_id = ctx.branch()?.id;
    let (start, end, from, upcoming) = match window {
        Window::Days(start, end) => (start, end, OffsetDateTime::UNIX_EPOCH, false),
        Window::From(now, last) => (clock.today, last, now, true),
    };
    let stmt = registry
        .prepare_cached(
            // to_json: the instant as JSON writes it (what the events always answered).
            "SELECT (s.scheduled_at AT TIME ZONE $2)::date, s.id, to_json(s.scheduled_at) #>> '{}', s.duration_minutes,
                    s.eye, s.theatre, s.status, s.priority, s.patient_id,
                    p.id, p.code, p.name, d.id, d.first_name, d.last_name
               FROM surgery_schedules s
               JOIN procedures p ON p.id = s.procedure_id
               JOIN doctors d ON d.id = s.doctor_id
              WHERE s.branch_id = $1 AND s.deleted_at IS NULL
                AND s.scheduled_at >= greatest($5, $3::date::timestamp AT TIME ZONE $2)
                AND s.scheduled_at < (($4::date + 1)::timestamp AT TIME ZONE $2)
                AND CASE WHEN $6 THEN s.status IN ('scheduled', 'confirmed') ELSE s.status <> 'cancelled' END
              ORDER BY s.scheduled_at, s.id",
        )
        .await?;
    let rows = registry.query(&stmt, &[&branch_id, &clock.timezone, &start, &end, &from, &upcoming]).await?;
    let ids: Vec<i64> = rows.iter().map(|r| r.get(8)).collect();
    let stmt = branch
        .prepare_cached("SELECT id, pin, first_name, last_name FROM patients WHERE id = ANY($1)")
        .await?;
    let patients: BTreeMap<i64, Value> = branch
        .query(&stmt, &[&ids])
        .await?
        .iter()
        .map(|r| {
            let id: i64 = r.get(0);
            let (pin, first, last): (&str, &str, &str) = (r.get(1), r.get(2), r.get(3));
            (id, json!({ "id": id, "pin": pin, "first_name": first, "last_name": last }))
        })
        .collect();
    Ok(rows
        .iter()
        .map(|r| {
            let patient_id: i64 = r.get(8);
            let event = json!({
                "id": r.get::<_, i64>(1),
                "scheduled_at": r.get::<_, &str>(2),
                "duration_minutes": r.get::<_, i32>(3),
                "eye": r.get::<_, &str>(4),
                "theatre": r.get::<_, Option<&str>>(5),
                "status": r.get::<_, &str>(6),
                "priority": r.get::<_, &str>(7),
                "procedure": { "id": r.get::<_, i64>(9), "code": r.get::<_, &str>(10), "name": r.get::<_, &str>(11) },
                "doctor": { "id": r.get::<_, i64>(12), "first_name": r.get::<_, &str>(13), "last_name": r.get::<_, &str>(14) },
                "patient": patients.get(&patient_id).cloned().unwrap_or(Value::Null),
            });
            (r.get(0), event)
        })
        .collect())
}

#[derive(Clone, Copy)]
enum Window {
    /// Local dates, inclusive.
    Days(Date, Date),
    /// From an instant to the end of a local date.
    From(OffsetDateTime, Date),
}

/// `GET /dashboard/calendar`.
#[handler]
pub async fn calendar(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let (ctx, clock, start, end) = open_range(req, depot).await?;
    let mut conn = ctx.conn(Scope::Branch).await?;
    let branch = conn.client();
    let stmt = branch
        .prepare_cached(
            "SELECT visit_date, sum(n)::bigint FROM visit_day_counts
              WHERE visit_date BETWEEN $1 AND $2 GROUP BY visit_date",
        )
        .await?;
    let visits: BTreeMap<Date, i64> =
        branch.query(&stmt, &[&start, &end]).await?.iter().map(|r| (r.get(0), r.get(1))).collect();
    let mut by_day: BTreeMap<Date, Vec<Value>> = BTreeMap::new();
    for (day, event) in surgery_events(&ctx, &*branch, &clock, Window::Days(start, end)).await? {
        by_day.entry(day).or_default().push(event);
    }
    let days: Vec<Value> = (0..=(end - start).whole_days())
        .map(|offset| start + time::Duration::days(offset))
        .map(|day| {
            let events = by_day.remove(&day).unwrap_or_default();
            json!({
                "date": day.to_string(),
                "visits": visits.get(&day).copied().unwrap_or(0),
                "surgeries": events.len(),
                "events": events,
            })
        })
        .collect();
    web::ok(
        res,
        "Calendar retrieved.",
        json!({ "start_date": start.to_string(), "end_date": end.to_string(), "days": days }),
    );
    Ok(())
}

/// `GET /dashboard/upcoming-surgeries?days=7`.
#[handler]
pub async fn upcoming_surgeries(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let (ctx, clock) = open(depot).await?;
    let mut params = Params::of(req, &["days"]);
    let days = params.days();
    params.done()?;
    let last = clock.today + time::Duration::days(i64::from(days) - 1);
    let mut conn = ctx.conn(Scope::Branch).await?;
    let branch = conn.client();
    let surgeries: Vec<Value> = surgery_events(&ctx, &*branch, &clock, Window::From(clock.now, last))
        .await?
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    web::ok(res, "Upcoming surgeries retrieved.", json!({ "days": days, "surgeries": surgeries }));
    Ok(())
}
