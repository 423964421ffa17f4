//! What the dashboards share: the request's clock and parameters, the enumerations' shapes
//! and reading registrations in the branch's zone.

use salvo::prelude::*;
use serde_json::{Map, Value, json};
use time::{Date, OffsetDateTime};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, Statement};

use crate::http::error::ApiResult;
pub use crate::http::params::Params;
use crate::permissions::DASHBOARD_READ;
use crate::resource::Context;

/// The moment a request answers for: the database's now, and the branch's date and zone.
pub struct Clock {
    pub now: OffsetDateTime,
    pub today: Date,
    pub timezone: String,
}

/// The caller's context, checked, and the request's clock.
pub async fn open(depot: &Depot) -> ApiResult<(Context, Clock)> {
    let ctx = Context::of(depot)?;
    ctx.require(DASHBOARD_READ)?;
    let route = ctx.branch()?.clone();
    let (now, today) = route.clock(&ctx.registry().await?).await?;
    Ok((ctx, Clock { now, today, timezone: route.timezone.clone() }))
}

/// [`open`], and the request's range of local dates, checked.
pub async fn open_range(req: &Request, depot: &Depot) -> ApiResult<(Context, Clock, Date, Date)> {
    let (ctx, clock) = open(depot).await?;
    let mut params = Params::of(req, &["start_date", "end_date"]);
    let (start, end) = params.range(clock.today);
    params.done()?;
    Ok((ctx, clock, start, end))
}

/// `{value: count}` with every value of an enumeration, zeros included.
pub fn every(values: &[&str], counted: &Value) -> Value {
    let map: Map<String, Value> =
        values.iter().map(|v| ((*v).to_owned(), counted.get(*v).cloned().unwrap_or(json!(0)))).collect();
    Value::Object(map)
}

/// `{total, <status>: n...}`.
pub fn with_total(values: &[&str], counted: &Value) -> Value {
    let mut all = every(values, counted);
    let total: i64 = all.as_object().map_or(0, |m| m.values().filter_map(Value::as_i64).sum());
    all.as_object_mut().map(|m| m.insert("total".into(), json!(total)));
    all
}

/// Minutes as a number with one decimal, or null without samples.
pub fn minutes(value: Option<rust_decimal::Decimal>) -> Value {
    value.map_or(Value::Null, |m| serde_json::from_str(&format!("{m:.1}")).unwrap_or(Value::Null))
}

/// `FROM patient_registrations r ... WHERE` the registrations of the local days `$1..=$2`:
/// the months wholly in the range from their month rows, the days around them from day rows.
macro_rules! registered_between_1_and_2 {
    () => {
        "FROM patient_registrations r,
              (SELECT (date_trunc('month', $1::date - 1) + interval '1 month')::date AS fm,
                      date_trunc('month', $2::date + 1)::date AS lm) b
        WHERE ((r.span = 'm' AND r.period >= b.fm AND r.period < b.lm)
            OR (r.span = 'd' AND r.period >= $1 AND r.period < least(b.fm, $2 + 1))
            OR (r.span = 'd' AND r.period >= greatest(b.lm, b.fm) AND r.period <= $2))"
    };
}
pub(super) use registered_between_1_and_2;

/// Runs `stmt`, one row whose last column is the zone the branch schema keeps registrations
/// in (`branch_info.timezone`). When that is not the branch's zone (none yet, or the branch's zone
/// changed), the registrations are recounted in the branch's zone and `stmt` runs again.
pub async fn in_zone(
    branch: &mut tokio_postgres::Client,
    zone: &str,
    stmt: &Statement,
    params: &[&(dyn ToSql + Sync)],
) -> ApiResult<Row> {
    let row = branch.query_one(stmt, params).await?;
    if row.get::<_, Option<&str>>(row.len() - 1) == Some(zone) {
        return Ok(row);
    }
    let tx = branch.transaction().await?;
    // Once per branch and zone: a large branch's recount may outlast a request's limit.
    tx.batch_execute("SET LOCAL statement_timeout = 0").await?;
    tx.execute("SELECT dashboard_rezone($1)", &[&zone]).await?;
    tx.commit().await?;
    Ok(branch.query_one(stmt, params).await?)
}
