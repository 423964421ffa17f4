//! The branch dashboards: a few set-based queries each, dates in
//! the branch's time zone, one "now" per request (read once from the database and passed to
//! every query).

use std::collections::BTreeMap;

use salvo::prelude::*;
use serde_json::{Map, Value, json};
use time::{Date, OffsetDateTime};

use crate::db::Queries;
use crate::enums::{CIVIL_STATUS, PATIENT_STATUS, QUEUE_STATUS, SEX, VISIT_STATUS};
use crate::http::endpoints::Endpoints;
use crate::http::error::{ApiError, ApiResult, FieldErrors};
use crate::http::{self as web, list};
use crate::permissions::DASHBOARD_READ;
use crate::resource::{Context, Scope};

/// The moment a request answers for: the database's now, and the branch's date and zone.
struct Clock {
    now: OffsetDateTime,
    today: Date,
    timezone: String,
}

/// A request's parameters, checked.
struct Params {
    pairs: Vec<(String, String)>,
    errors: FieldErrors,
}

impl Params {
    /// The request's parameters, any of them not among `takes` already an error.
    fn of(req: &Request, takes: &[&str]) -> Self {
        let pairs = list::query_pairs(req);
        let errors = match list::only(&pairs, takes) {
            Err(ApiError::Validation(errors)) => errors,
            _ => FieldErrors::new(),
        };
        Self { pairs, errors }
    }

    fn get(&self, name: &str) -> Option<String> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// A date parameter: absent is none; anything sent, even empty, must be a date.
    fn date(&mut self, name: &str) -> Option<Date> {
        let raw = self.pairs.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.trim().to_owned())?;
        let parsed = list::parse_date(&raw);
        if parsed.is_none() {
            self.errors
                .entry(name.into())
                .or_default()
                .push(format!("The {name} must be a date (YYYY-MM-DD)."));
        }
        parsed
    }

    /// `start_date`..`end_date`, local, inclusive, each today by default, at most 366 days.
    fn range(&mut self, today: Date) -> (Date, Date) {
        let start = self.date("start_date").unwrap_or(today);
        let end = self.date("end_date").unwrap_or(today);
        if end < start {
            self.errors
                .entry("end_date".into())
                .or_default()
                .push("The end_date must be on or after the start_date.".into());
        } else if (end - start).whole_days() >= 366 {
            self.errors.entry("end_date".into()).or_default().push("A range covers at most 366 days.".into());
        }
        (start, end)
    }

    fn days(&mut self) -> i32 {
        let Some(raw) = self.get("days") else { return 7 };
        match raw.parse::<i32>() {
            Ok(days) if (1..=90).contains(&days) => days,
            _ => {
                self.errors
                    .entry("days".into())
                    .or_default()
                    .push("The days must be an integer from 1 to 90.".into());
                7
            }
        }
    }

    fn done(self) -> ApiResult<()> {
        if self.errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(self.errors)) }
    }
}

/// The caller's context, checked, and the request's clock.
async fn open(depot: &Depot) -> ApiResult<(Context, Clock)> {
    let ctx = Context::of(depot)?;
    ctx.require(DASHBOARD_READ)?;
    let route = ctx.branch()?.clone();
    let (now, today) = route.clock(&*ctx.registry().await?).await?;
    Ok((ctx, Clock { now, today, timezone: route.timezone.clone() }))
}

/// [`open`], and the request's range of local dates, checked.
async fn open_range(req: &Request, depot: &Depot) -> ApiResult<(Context, Clock, Date, Date)> {
    let (ctx, clock) = open(depot).await?;
    let mut params = Params::of(req, &["start_date", "end_date"]);
    let (start, end) = params.range(clock.today);
    params.done()?;
    Ok((ctx, clock, start, end))
}

/// `{value: count}` with every value of an enumeration, zeros included.
fn every(values: &[&str], counted: &Value) -> Value {
    let map: Map<String, Value> =
        values.iter().map(|v| ((*v).to_owned(), counted.get(*v).cloned().unwrap_or(json!(0)))).collect();
    Value::Object(map)
}

/// `{total, <status>: n...}`.
fn with_total(values: &[&str], counted: &Value) -> Value {
    let mut all = every(values, counted);
    let total: i64 = all.as_object().map_or(0, |m| m.values().filter_map(Value::as_i64).sum());
    all.as_object_mut().map(|m| m.insert("total".into(), json!(total)));
    all
}

/// `GET /dashboard/stats`.
#[handler]
pub async fn stats(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let (ctx, clock, start, end) = open_range(req, depot).await?;
    let mut conn = ctx.conn(Scope::Branch).await?;
    let branch = conn.client();
    let stmt = branch
        .prepare_cached(
            "SELECT
               (SELECT live FROM row_counts WHERE table_name = 'patients'),
               (SELECT count(*) FROM patients WHERE deleted_at IS NULL
                   AND created_at >= ($1::date::timestamp AT TIME ZONE $3) AND created_at < (($2::date + 1)::timestamp AT TIME ZONE $3)),
               (SELECT coalesce(jsonb_object_agg(status, n), '{}') FROM
                   (SELECT status, count(*) AS n FROM patient_visits
                     WHERE deleted_at IS NULL AND visit_date BETWEEN $1 AND $2 GROUP BY status) v),
               (SELECT coalesce(jsonb_object_agg(status, n), '{}') FROM
                   (SELECT status, count(*) AS n FROM queue_tickets
                     WHERE deleted_at IS NULL AND queue_date BETWEEN $1 AND $2 GROUP BY status) q),
               (SELECT round((avg(extract(epoch FROM called_at - created_at)) / 60)::numeric, 1) FROM queue_tickets
                 WHERE deleted_at IS NULL AND queue_date BETWEEN $1 AND $2 AND called_at IS NOT NULL),
               round(coalesce(sum(b.amount) FILTER (WHERE b.kind = 'charge'), 0), 2)::text,
               round(coalesce(sum(CASE b.kind WHEN 'payment' THEN b.amount ELSE -b.amount END)
                          FILTER (WHERE b.kind IN ('payment', 'refund')), 0), 2)::text,
               (SELECT round(outstanding, 2)::text FROM billing_totals)
             FROM (SELECT kind, amount FROM billing_transactions
                    WHERE status = 'posted' AND deleted_at IS NULL AND transaction_date BETWEEN $1 AND $2) b",
        )
        .await?;
    let row = branch.query_one(&stmt, &[&start, &end, &clock.timezone]).await?;
    let branch_id = ctx.branch()?.id;
    let registry = ctx.registry().await?;
    let shared = registry
        .query_one(
            "SELECT
               count(*) FILTER (WHERE s.status <> 'cancelled'),
               count(*) FILTER (WHERE s.status = 'completed'),
               count(*) FILTER (WHERE s.status = 'cancelled'),
               -- Items the branch keeps lots of (what filters[below_reorder] lists).
               (SELECT count(*)
                  FROM (SELECT pharmacy_item_id, sum(on_hand) AS level FROM stock_availables
                         WHERE branch_id = $1 AND deleted_at IS NULL GROUP BY pharmacy_item_id) kept
                  JOIN pharmacy_items i ON i.id = kept.pharmacy_item_id
                 WHERE i.deleted_at IS NULL AND i.reorder_level > 0 AND kept.level <= i.reorder_level),
               (SELECT count(*) FROM stock_availables l
                 WHERE l.branch_id = $1 AND l.deleted_at IS NULL AND l.on_hand > 0
                   AND l.expiry_date BETWEEN $5 AND $5 + 30)
             FROM surgery_schedules s
            WHERE s.branch_id = $1 AND s.deleted_at IS NULL
              AND s.scheduled_at >= ($2::date::timestamp AT TIME ZONE $4) AND s.scheduled_at < (($3::date + 1)::timestamp AT TIME ZONE $4)",
            &[&branch_id, &start, &end, &clock.timezone, &clock.today],
        )
        .await?;
    let visits: Value = row.get(2);
    let queue: Value = row.get(3);
    let mut queue = with_total(QUEUE_STATUS.values, &queue);
    queue.as_object_mut().map(|m| m.insert("average_wait_minutes".into(), minutes(row.get(4))));
    let data = json!({
        "start_date": start.to_string(),
        "end_date": end.to_string(),
        "patients_total": row.get::<_, i64>(0),
        "new_patients": row.get::<_, i64>(1),
        "visits": with_total(VISIT_STATUS.values, &visits),
        "queue": queue,
        "surgeries": {
            "scheduled": shared.get::<_, i64>(0),
            "completed": shared.get::<_, i64>(1),
            "cancelled": shared.get::<_, i64>(2),
        },
        "billing": {
            "charges": row.get::<_, String>(5),
            "payments": row.get::<_, String>(6),
            "outstanding": row.get::<_, String>(7),
        },
        "pharmacy": { "low_stock": shared.get::<_, i64>(3), "expiring_30_days": shared.get::<_, i64>(4) },
    });
    web::ok(res, "Statistics retrieved.", data);
    Ok(())
}

/// Minutes as a number with one decimal, or null without samples.
fn minutes(value: Option<rust_decimal::Decimal>) -> Value {
    value.map_or(Value::Null, |m| serde_json::from_str(&format!("{m:.1}")).unwrap_or(Value::Null))
}

/// Surgery events of the branch (registry) whose local start lies in `start..=end` (or, for
/// upcoming ones, from `now` on), each with its local date, joined with their patients
/// (branch schema).
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
    let rows = registry
        .query(
            "SELECT (s.scheduled_at AT TIME ZONE $2)::date,
                    jsonb_build_object(
                    'id', s.id, 'scheduled_at', s.scheduled_at, 'duration_minutes', s.duration_minutes, 'eye', s.eye,
                    'theatre', s.theatre, 'status', s.status, 'priority', s.priority, 'patient_id', s.patient_id,
                    'procedure', jsonb_build_object('id', p.id, 'code', p.code, 'name', p.name),
                    'doctor', jsonb_build_object('id', d.id, 'first_name', d.first_name, 'last_name', d.last_name))
               FROM surgery_schedules s
               JOIN procedures p ON p.id = s.procedure_id
               JOIN doctors d ON d.id = s.doctor_id
              WHERE s.branch_id = $1 AND s.deleted_at IS NULL
                AND s.scheduled_at >= greatest($5, $3::date::timestamp AT TIME ZONE $2)
                AND s.scheduled_at < (($4::date + 1)::timestamp AT TIME ZONE $2)
                AND CASE WHEN $6 THEN s.status IN ('scheduled', 'confirmed') ELSE s.status <> 'cancelled' END
              ORDER BY s.scheduled_at, s.id",
            &[&branch_id, &clock.timezone, &start, &end, &from, &upcoming],
        )
        .await?;
    let mut events: Vec<(Date, Value)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let ids: Vec<i64> = events.iter().filter_map(|(_, e)| e["patient_id"].as_i64()).collect();
    let stmt = branch
        .prepare_cached(
            "SELECT id, jsonb_build_object('id', id, 'pin', pin, 'first_name', first_name, 'last_name', last_name)
               FROM patients WHERE id = ANY($1)",
        )
        .await?;
    let patients: BTreeMap<i64, Value> =
        branch.query(&stmt, &[&ids]).await?.iter().map(|r| (r.get(0), r.get(1))).collect();
    for (_, event) in &mut events {
        if let Some(map) = event.as_object_mut() {
            let patient =
                map.remove("patient_id").and_then(|v| v.as_i64()).and_then(|id| patients.get(&id).cloned());
            map.insert("patient".into(), patient.unwrap_or(Value::Null));
        }
    }
    Ok(events)
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
            "SELECT visit_date, count(*) FROM patient_visits
              WHERE deleted_at IS NULL AND visit_date BETWEEN $1 AND $2 GROUP BY visit_date",
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
    });
    web::ok(res, "Patient flow retrieved.", data);
    Ok(())
}

/// Age bands of the demographics, in order.
const AGE_BANDS: [&str; 9] = ["0-9", "10-19", "20-29", "30-39", "40-49", "50-59", "60-69", "70-79", "80+"];

/// `GET /dashboard/patient-demographics`.
#[handler]
pub async fn patient_demographics(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let (ctx, clock) = open(depot).await?;
    let mut params = Params::of(req, &["start_date", "end_date"]);
    // Registered in the range only when a range is asked for (decision).
    let ranged = params.get("start_date").is_some() || params.get("end_date").is_some();
    let (start, end) = params.range(clock.today);
    params.done()?;
    let mut conn = ctx.conn(Scope::Branch).await?;
    let branch = conn.client();
    // One pass over the patients, every breakdown a grouping set.
    let stmt = branch
        .prepare_cached(
            "SELECT CASE WHEN grouping(sex) = 0 THEN 1 WHEN grouping(band) = 0 THEN 2 WHEN grouping(civil_status) = 0 THEN 3
                         WHEN grouping(status) = 0 THEN 4 WHEN grouping(city_key) = 0 THEN 5 ELSE 0 END AS breakdown,
                    sex, band, civil_status, status, city_key, city, count(*) AS n
               FROM (SELECT sex, civil_status, status, nullif(lower(btrim(city)), '') AS city_key, btrim(city) AS city,
                            -- 0 for 80 and over .. 8 for under 10: the day after each birthday cut-off.
                            width_bucket(birth_date, ARRAY(SELECT ($5::date - make_interval(years => k))::date + 1
                                                             FROM generate_series(80, 10, -10) AS k)) AS band
                       FROM patients
                      WHERE deleted_at IS NULL
                        AND (NOT $3 OR (created_at >= ($1::date::timestamp AT TIME ZONE $4)
                                        AND created_at < (($2::date + 1)::timestamp AT TIME ZONE $4)))) p
              GROUP BY GROUPING SETS ((), (sex), (band), (civil_status), (status), (city_key, city))",
        )
        .await?;
    let rows = branch.query(&stmt, &[&start, &end, &ranged, &clock.timezone, &clock.today]).await?;
    let mut total = 0;
    let (mut by_sex, mut by_band, mut by_civil, mut by_status) =
        (Map::new(), Map::new(), Map::new(), Map::new());
    // city key -> (patients, [(patients, spelling)])
    let mut cities: BTreeMap<String, (i64, Vec<(i64, String)>)> = BTreeMap::new();
    for row in &rows {
        let n: i64 = row.get("n");
        match row.get::<_, i32>("breakdown") {
            1 => _ = by_sex.insert(row.get("sex"), json!(n)),
            2 => {
                let band = usize::try_from(row.get::<_, i32>("band")).unwrap_or(0).min(AGE_BANDS.len() - 1);
                by_band.insert(AGE_BANDS[AGE_BANDS.len() - 1 - band].to_owned(), json!(n));
            }
            3 => {
                let civil: Option<String> = row.get("civil_status");
                by_civil.insert(civil.unwrap_or_else(|| "unspecified".into()), json!(n));
            }
            4 => _ = by_status.insert(row.get("status"), json!(n)),
            5 => {
                if let Some(key) = row.get::<_, Option<String>>("city_key") {
                    let entry = cities.entry(key).or_default();
                    entry.0 += n;
                    entry.1.push((n, row.get("city")));
                }
            }
            _ => total = n,
        }
    }
    let mut top_cities: Vec<(i64, String)> = cities
        .into_values()
        .map(|(n, mut spellings)| {
            // The most used spelling; the first in order among equals.
            spellings.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            (n, spellings.swap_remove(0).1)
        })
        .collect();
    top_cities.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    top_cities.truncate(10);
    let stmt = branch
        .prepare_cached(
            "SELECT jsonb_agg(jsonb_build_object('month', to_char(m, 'YYYY-MM'), 'count', coalesce(n, 0)) ORDER BY m)
               FROM generate_series(date_trunc('month', $1::date::timestamp) - interval '11 months',
                                    date_trunc('month', $1::date::timestamp), interval '1 month') m
               LEFT JOIN (SELECT date_trunc('month', created_at AT TIME ZONE $2) AS month, count(*) AS n
                            FROM patients
                           WHERE deleted_at IS NULL
                             AND created_at >= ((date_trunc('month', $1::date::timestamp) - interval '11 months') AT TIME ZONE $2)
                           GROUP BY 1) c ON c.month = m",
        )
        .await?;
    let new_per_month: Value = branch.query_one(&stmt, &[&clock.today, &clock.timezone]).await?.get(0);
    let mut civil_values: Vec<&str> = CIVIL_STATUS.values.to_vec();
    civil_values.push("unspecified");
    let mut data = json!({
        "total": total,
        "by_sex": every(SEX.values, &Value::Object(by_sex)),
        "by_age_band": every(&AGE_BANDS, &Value::Object(by_band)),
        "by_civil_status": every(&civil_values, &Value::Object(by_civil)),
        "by_status": every(PATIENT_STATUS.values, &Value::Object(by_status)),
        "new_per_month": new_per_month,
        "top_cities": top_cities.into_iter().map(|(n, city)| json!({ "city": city, "count": n })).collect::<Vec<_>>(),
    });
    if ranged && let Some(map) = data.as_object_mut() {
        map.insert("start_date".into(), json!(start.to_string()));
        map.insert("end_date".into(), json!(end.to_string()));
    }
    web::ok(res, "Patient demographics retrieved.", data);
    Ok(())
}

/// The five dashboards, each a read over one range or day of the branch.
pub fn endpoints() -> Vec<Endpoints> {
    use crate::http::docs::{self, Access, Doc};
    use salvo::oapi::{Object, PathItemType};
    /// How a dashboard chooses its days.
    enum Days {
        Range,
        Date,
        Ahead,
    }
    fn add(branch: &mut Endpoints, path: &str, handler: impl Handler, summary: &str, days: Days) {
        let op = branch.operation("dashboard", summary);
        let op = match days {
            Days::Range => op
                .add_parameter(docs::query("start_date", docs::date(), "Local date; default today"))
                .add_parameter(docs::query(
                    "end_date",
                    docs::date(),
                    "Local date, inclusive; default today; at most 366 days",
                )),
            Days::Date => op.add_parameter(docs::query("date", docs::date(), "Local date; default today")),
            Days::Ahead => {
                op.add_parameter(docs::query("days", docs::integer().minimum(1).maximum(90), "Default 7"))
            }
        };
        let op = Doc::invalid(
            Doc::answers(op, "200", summary, docs::envelope(Object::new())),
            "A bad date, range or days",
        );
        branch.add(PathItemType::Get, &format!("dashboard/{path}"), handler, op);
    }
    let mut branch = Endpoints::new(Access::Branch);
    add(&mut branch, "stats", stats, "Counts and money over a range of local dates", Days::Range);
    add(&mut branch, "calendar", calendar, "Each day of a range: visits and surgeries", Days::Range);
    add(&mut branch, "patient-flow", patient_flow, "One local day of the queue (parameter date)", Days::Date);
    add(
        &mut branch,
        "upcoming-surgeries",
        upcoming_surgeries,
        "Scheduled and confirmed surgeries of the next days (parameter days, 1 to 90)",
        Days::Ahead,
    );
    add(
        &mut branch,
        "patient-demographics",
        patient_demographics,
        "Live patients (registered in the range when one is given)",
        Days::Range,
    );
    vec![branch]
}
