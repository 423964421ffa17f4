//! The appointments of the dashboards, read from their rows by the starts index (a branch
//! books a few hundred a day; no rollup is kept): `GET /dashboard/appointments`, each local
//! day of a range by status, in all and per doctor; and the day the flow board shows, its
//! appointments booked and arrived.

use std::collections::BTreeMap;

use salvo::prelude::*;
use serde_json::{Map, Value, json};
use time::Date;

use super::common::{open_range, with_total};
use crate::db::Queries;
use crate::enums::APPOINTMENT_STATUS;
use crate::http::error::ApiResult;
use crate::http::{self as web};
use crate::resource::{Context, Scope};

/// Live appointments `a` starting on the local days `$1..=$2` in zone `$3`.
macro_rules! on_days {
    () => {
        "a.deleted_at IS NULL
         AND a.starts_at >= ($1::date::timestamp AT TIME ZONE $3::text)
         AND a.starts_at < (($2::date + 1)::timestamp AT TIME ZONE $3::text)"
    };
}

/// `{id, first_name, last_name}` of each doctor of `ids` the master data has.
async fn doctors(ctx: &Context, ids: &[i64]) -> ApiResult<BTreeMap<i64, Value>> {
    let registry = ctx.registry().await?;
    let stmt =
        registry.prepare_cached("SELECT id, first_name, last_name FROM doctors WHERE id = ANY($1)").await?;
    Ok(registry
        .query(&stmt, &[&ids])
        .await?
        .iter()
        .map(|r| {
            let id: i64 = r.get(0);
            (id, json!({ "id": id, "first_name": r.get::<_, String>(1), "last_name": r.get::<_, String>(2) }))
        })
        .collect())
}

/// Counts by status of one day or doctor, before every status is filled in.
type Counted = Map<String, Value>;

fn count(into: &mut Counted, status: &str, n: i64) {
    let before = into.get(status).and_then(Value::as_i64).unwrap_or(0);
    into.insert(status.to_owned(), json!(before + n));
}

fn statuses(counted: Counted) -> Value {
    with_total(APPOINTMENT_STATUS.values, &Value::Object(counted))
}

/// `GET /dashboard/appointments`.
#[handler]
pub async fn appointment_calendar(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let (ctx, clock, start, end) = open_range(req, depot).await?;
    let mut conn = ctx.conn(Scope::Branch).await?;
    let branch = conn.client();
    let stmt = branch
        .prepare_cached(concat!(
            "SELECT (a.starts_at AT TIME ZONE $3::text)::date, a.doctor_id, a.status, count(*)
               FROM appointments a WHERE ",
            on_days!(),
            " GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
        ))
        .await?;
    let rows = branch.query(&stmt, &[&start, &end, &clock.timezone]).await?;
    drop(conn);
    let mut all = Counted::new();
    let mut per_doctor: BTreeMap<i64, Counted> = BTreeMap::new();
    let mut per_day: BTreeMap<Date, (Counted, BTreeMap<i64, Counted>)> = BTreeMap::new();
    for row in &rows {
        let (day, doctor, status, n): (Date, i64, &str, i64) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        count(&mut all, status, n);
        count(per_doctor.entry(doctor).or_default(), status, n);
        let (on_day, doctors_on_day) = per_day.entry(day).or_default();
        count(on_day, status, n);
        count(doctors_on_day.entry(doctor).or_default(), status, n);
    }
    let ids: Vec<i64> = per_doctor.keys().copied().collect();
    let names = doctors(&ctx, &ids).await?;
    let mut doctors: Vec<Value> = per_doctor
        .into_iter()
        .map(|(id, counted)| {
            let doctor = names.get(&id).cloned().unwrap_or_else(|| json!({ "id": id }));
            json!({ "doctor": doctor, "appointments": statuses(counted) })
        })
        .collect();
    let name = |d: &Value| {
        let d = &d["doctor"];
        (
            d["last_name"].as_str().map(str::to_owned),
            d["first_name"].as_str().map(str::to_owned),
            d["id"].as_i64(),
        )
    };
    doctors.sort_by_key(name);
    let mut days = Vec::with_capacity((end - start).whole_days() as usize + 1);
    for offset in 0..=(end - start).whole_days() {
        let day = start + time::Duration::days(offset);
        let (on_day, doctors_on_day) = per_day.remove(&day).unwrap_or_default();
        let doctors_on_day: Vec<Value> = doctors_on_day
            .into_iter()
            .map(|(id, counted)| json!({ "doctor_id": id, "appointments": statuses(counted) }))
            .collect();
        days.push(
            json!({ "date": day.to_string(), "appointments": statuses(on_day), "doctors": doctors_on_day }),
        );
    }
    let data = json!({
        "start_date": start.to_string(),
        "end_date": end.to_string(),
        "appointments": statuses(all),
        "doctors": doctors,
        "days": days,
    });
    web::ok(res, "Appointment calendar retrieved.", data);
    Ok(())
}

/// The appointments of local day `day` (in `zone`) still to be seen: how many are booked and
/// how many arrived, and each of them by start, with its patient and doctor.
pub async fn expected_on(ctx: &Context, branch: &impl Queries, day: Date, zone: &str) -> ApiResult<Value> {
    let stmt = branch
        .prepare_cached(concat!(
            "SELECT a.id, a.status, a.starts_at, a.ends_at, a.arrived_at, a.doctor_id, a.branch_service_id,
                    jsonb_build_object('id', p.id, 'pin', p.pin, 'first_name', p.first_name, 'last_name', p.last_name)
               FROM appointments a JOIN patients p ON p.id = a.patient_id
              WHERE ",
            on_days!(),
            " AND a.status IN ('booked', 'arrived') ORDER BY a.starts_at, a.id"
        ))
        .await?;
    let rows = branch.query(&stmt, &[&day, &day, &zone]).await?;
    let mut ids: Vec<i64> = rows.iter().map(|r| r.get(5)).collect();
    ids.sort_unstable();
    ids.dedup();
    let names = doctors(ctx, &ids).await?;
    let instant = |at: time::OffsetDateTime| {
        at.to_offset(time::UtcOffset::UTC)
            .format(&time::format_description::well_known::Rfc3339)
            .map(|t| t.replace('Z', "+00:00"))
            .unwrap_or_default()
    };
    let (mut booked, mut arrived) = (0, 0);
    let list: Vec<Value> = rows
        .iter()
        .map(|r| {
            let status: &str = r.get(1);
            if status == "booked" {
                booked += 1
            } else {
                arrived += 1
            }
            let doctor: i64 = r.get(5);
            json!({
                "id": r.get::<_, i64>(0),
                "status": status,
                "starts_at": instant(r.get(2)),
                "ends_at": instant(r.get(3)),
                "arrived_at": r.get::<_, Option<time::OffsetDateTime>>(4).map(instant),
                "doctor": names.get(&doctor).cloned().unwrap_or_else(|| json!({ "id": doctor })),
                "branch_service_id": r.get::<_, i64>(6),
                "patient": r.get::<_, Value>(7),
            })
        })
        .collect();
    Ok(json!({ "booked": booked, "arrived": arrived, "list": list }))
}
