//! The calendar (visits per day from the rollup, surgery events from the registry) and the
//! upcoming surgeries.

use std::collections::HashMap;

use salvo::prelude::*;
use time::{Date, OffsetDateTime};

use super::common::{Clock, Params, open, open_range};
use crate::db::Queries;
use crate::http::error::ApiResult;
use crate::http::{self as web};
use crate::resource::{Context, Scope};

/// Surgery events of the branch (registry) whose local start lies in `start..=end` (or, for
/// upcoming ones, from `now` on), each with its local date, joined with their patients
/// (branch schema, maybe another database). PostgreSQL writes each event as JSON text in two
/// halves around its `patient` (keys in the order every answer has them), and each patient
/// as JSON text; here they are only put together.
async fn surgery_events(
    ctx: &Context,
    branch: &impl Queries,
    clock: &Clock,
    window: Window,
) -> ApiResult<Vec<(Date, String)>> {
    let registry = ctx.registry().await?;
    let branch_id = ctx.branch()?.id;
    let (start, end, from, upcoming) = match window {
        Window::Days(start, end) => (start, end, OffsetDateTime::UNIX_EPOCH, false),
        Window::From(now, last) => (clock.today, last, now, true),
    };
    let stmt = registry
        .prepare_cached(
            "SELECT (s.scheduled_at AT TIME ZONE $2)::date, s.patient_id,
                    (SELECT row_to_json(h)::text FROM (SELECT
                        (SELECT row_to_json(d) FROM (SELECT d.first_name, d.id, d.last_name) d) AS doctor,
                        s.duration_minutes, s.eye, s.id) h),
                    (SELECT row_to_json(t)::text FROM (SELECT s.priority,
                        (SELECT row_to_json(p) FROM (SELECT p.code, p.id, p.name) p) AS procedure,
                        s.scheduled_at, s.status, s.theatre) t)
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
    drop(registry);
    let ids: Vec<i64> = rows.iter().map(|r| r.get(1)).collect();
    let stmt = branch
        .prepare_cached(
            "SELECT p.id, row_to_json(p)::text
               FROM (SELECT first_name, id, last_name, pin FROM patients WHERE id = ANY($1)) p",
        )
        .await?;
    let patients: HashMap<i64, String> =
        branch.query(&stmt, &[&ids]).await?.iter().map(|r| (r.get(0), r.get(1))).collect();
    Ok(rows
        .iter()
        .map(|r| {
            let (head, tail): (&str, &str) = (r.get(2), r.get(3));
            let patient = patients.get(&r.get::<_, i64>(1)).map_or("null", String::as_str);
            // `{head...}` + `,"patient":` + patient + `,` + `{...tail}`, braces joined.
            let event = format!("{},\"patient\":{patient},{}", &head[..head.len() - 1], &tail[1..]);
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
    let visits: HashMap<Date, i64> =
        branch.query(&stmt, &[&start, &end]).await?.iter().map(|r| (r.get(0), r.get(1))).collect();
    let events = surgery_events(&ctx, &*branch, &clock, Window::Days(start, end)).await?;
    drop(conn);
    let mut events = events.iter().peekable();
    let mut days = String::with_capacity(64 * 367 + events.len() * 400);
    for offset in 0..=(end - start).whole_days() {
        let day = start + time::Duration::days(offset);
        let mut count = 0;
        days.push_str(if offset == 0 { "{\"date\":\"" } else { ",{\"date\":\"" });
        days.push_str(&day.to_string());
        days.push_str("\",\"events\":[");
        while let Some((_, event)) = events.next_if(|(date, _)| *date == day) {
            if count > 0 {
                days.push(',');
            }
            days.push_str(event);
            count += 1;
        }
        let visits = visits.get(&day).copied().unwrap_or(0);
        days.push_str(&format!("],\"surgeries\":{count},\"visits\":{visits}}}"));
    }
    web::ok_text(
        res,
        "Calendar retrieved.",
        &format!("{{\"days\":[{days}],\"end_date\":\"{end}\",\"start_date\":\"{start}\"}}"),
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
    let events = surgery_events(&ctx, &*branch, &clock, Window::From(clock.now, last)).await?;
    let surgeries: Vec<&str> = events.iter().map(|(_, event)| event.as_str()).collect();
    web::ok_text(
        res,
        "Upcoming surgeries retrieved.",
        &format!("{{\"days\":{days},\"surgeries\":[{}]}}", surgeries.join(",")),
    );
    Ok(())
}
