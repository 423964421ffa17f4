//! `GET /dashboard/patient-flow`: one local day of the queue, read from its tickets (a day
//! is a few hundred rows; medians need them all), and the appointments of that day still to
//! be seen (booked or arrived).

use std::collections::BTreeMap;

use salvo::prelude::*;
use serde_json::{Value, json};

use super::appointments::expected_on;
use super::common::{Params, minutes, open, with_total};
use crate::enums::QUEUE_STATUS;
use crate::http::error::ApiResult;
use crate::http::{self as web};
use crate::resource::Scope;

/// `GET /dashboard/patient-flow?date=`.
#[handler]
pub async fn patient_flow(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let (ctx, clock) = open(depot).await?;
    let mut params = Params::of(req, &["date"]);
    let day = params.date("date").unwrap_or(clock.today);
    params.done()?;
    let mut conn = ctx.conn(Scope::Branch).await?;
    let branch = conn.client();
    let stmt = branch
        .prepare_cached(
            "WITH day AS (SELECT * FROM queue_tickets WHERE deleted_at IS NULL AND queue_date = $1),
                  timed AS (SELECT branch_service_id,
                                   extract(epoch FROM called_at - created_at) / 60 AS waiting,
                                   extract(epoch FROM completed_at - serving_at) / 60 AS service
                              FROM day)
             SELECT
               (SELECT coalesce(jsonb_object_agg(status, n), '{}') FROM (SELECT status, count(*) AS n FROM day GROUP BY status) s),
               (SELECT array_agg(coalesce(n, 0) ORDER BY h) FROM generate_series(0, 23) h
                  LEFT JOIN (SELECT extract(hour FROM created_at AT TIME ZONE $2)::int AS hour, count(*) AS n FROM day GROUP BY 1) a
                    ON a.hour = h),
               (SELECT round(avg(waiting)::numeric, 1) FROM timed),
               (SELECT round((percentile_cont(0.5) WITHIN GROUP (ORDER BY waiting))::numeric, 1) FROM timed WHERE waiting IS NOT NULL),
               (SELECT round(avg(service)::numeric, 1) FROM timed),
               (SELECT round((percentile_cont(0.5) WITHIN GROUP (ORDER BY service))::numeric, 1) FROM timed WHERE service IS NOT NULL),
               (SELECT coalesce(jsonb_agg(jsonb_build_object(
                         'branch_service_id', branch_service_id, 'tickets', tickets,
                         'waiting_minutes', jsonb_build_object('average', wa, 'median', wm),
                         'service_minutes', jsonb_build_object('average', sa, 'median', sm))), '[]')
                  FROM (SELECT branch_service_id, count(*) AS tickets,
                               round(avg(waiting)::numeric, 1) AS wa,
                               round((percentile_cont(0.5) WITHIN GROUP (ORDER BY waiting))::numeric, 1) AS wm,
                               round(avg(service)::numeric, 1) AS sa,
                               round((percentile_cont(0.5) WITHIN GROUP (ORDER BY service))::numeric, 1) AS sm
                          FROM timed GROUP BY branch_service_id) per)",
        )
        .await?;
    let row = branch.query_one(&stmt, &[&day, &clock.timezone]).await?;
    let counted: Value = row.get(0);
    let hours: Vec<i64> = row.get(1);
    let mut services: Vec<Value> = match row.get::<_, Value>(6) {
        Value::Array(list) => list,
        _ => Vec::new(),
    };
    let appointments = expected_on(&ctx, &*branch, day, &clock.timezone).await?;
    drop(conn);
    let ids: Vec<i64> = services.iter().filter_map(|s| s["branch_service_id"].as_i64()).collect();
    let registry = ctx.registry().await?;
    let names: BTreeMap<i64, (String, String)> = registry
        .query("SELECT id, code, name FROM branch_services WHERE id = ANY($1)", &[&ids])
        .await?
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    for service in &mut services {
        let id = service["branch_service_id"].as_i64().unwrap_or_default();
        let (code, name) = names.get(&id).cloned().unwrap_or_default();
        if let Some(map) = service.as_object_mut() {
            map.insert("code".into(), json!(code));
            map.insert("name".into(), json!(name));
        }
    }
    services.sort_by(|a, b| a["code"].as_str().cmp(&b["code"].as_str()));
    let data = json!({
        "date": day.to_string(),
        "tickets": with_total(QUEUE_STATUS.values, &counted),
        "arrivals_per_hour": hours,
        "waiting_minutes": { "average": minutes(row.get(2)), "median": minutes(row.get(3)) },
        "service_minutes": { "average": minutes(row.get(4)), "median": minutes(row.get(5)) },
        "services": services,
        "appointments": appointments,
    });
    web::ok(res, "Patient flow retrieved.", data);
    Ok(())
}
