//! `GET /dashboard/patient-demographics`: live patients broken down, from the kept counts
//! (all of them) or the registrations of the range's days and months.

use std::collections::BTreeMap;

use salvo::prelude::*;
use serde_json::{Map, Value, json};

use super::common::{Params, every, in_zone, open};
use crate::enums::{CIVIL_STATUS, PATIENT_STATUS, SEX};
use crate::http::error::ApiResult;
use crate::http::{self as web};
use crate::resource::Scope;

/// Age bands of the demographics, in order.
const AGE_BANDS: [&str; 9] = ["0-9", "10-19", "20-29", "30-39", "40-49", "50-59", "60-69", "70-79", "80+"];

/// `GET /dashboard/patient-demographics`.
#[handler]
pub async fn patient_demographics(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let (ctx, clock) = open(depot).await?;
    let mut params = Params::of(req, &["start_date", "end_date"]);
    // Registered in the range only when a range is asked for (decision).
    let ranged = params.last("start_date").is_some() || params.last("end_date").is_some();
    let (start, end) = params.range(clock.today);
    params.done()?;
    let mut conn = ctx.conn(Scope::Branch).await?;
    let branch = conn.client();
    // First, as it also answers the zone the registrations are kept in.
    let stmt = branch
        .prepare_cached(
            "SELECT jsonb_agg(jsonb_build_object('month', to_char(m, 'YYYY-MM'), 'count', coalesce(r.n, 0)) ORDER BY m),
                    (SELECT timezone FROM branch_info)
               FROM generate_series(date_trunc('month', $1::date::timestamp) - interval '11 months',
                                    date_trunc('month', $1::date::timestamp), interval '1 month') m
               LEFT JOIN patient_registrations r
                 ON r.span = 'm' AND r.period = m::date AND r.dimension = 'all' AND r.value = '' AND r.spelling = ''",
        )
        .await?;
    let new_per_month: serde_json::Value =
        in_zone(branch, &clock.timezone, &stmt, &[&clock.today]).await?.get(0);
    // Every breakdown from the kept rows; a birth year gives its age band but in the eight
    // years where a band's birthday falls.
    let stmt = branch
        .prepare_cached(
            "WITH b AS (SELECT (date_trunc('month', $1::date - 1) + interval '1 month')::date AS fm,
                                 date_trunc('month', $2::date + 1)::date AS lm),
                    kept AS (SELECT dimension, value, spelling, n FROM patient_counts WHERE NOT $3
                             UNION ALL
                             SELECT r.dimension, r.value, r.spelling, r.n FROM patient_registrations r, b
                              WHERE $3 AND ((r.span = 'm' AND r.period >= b.fm AND r.period < b.lm)
                                         OR (r.span = 'd' AND r.period >= $1 AND r.period < least(b.fm, $2 + 1))
                                         OR (r.span = 'd' AND r.period >= greatest(b.lm, b.fm) AND r.period <= $2))),
                    tally AS (SELECT dimension, value, spelling, sum(n) AS n FROM kept GROUP BY 1, 2, 3),
                    -- The eight birth years in which a band's birthday falls split at today's date in them:
                    -- those of the shorter side of it are read (the bands of the rest are their year's).
                    late AS (SELECT extract(doy FROM $5::date) > 183 AS late, extract(year FROM $5::date)::int AS year),
                    turned AS (SELECT m, count(*) AS n
                                 FROM late, generate_series(1, 8) AS m,
                                      LATERAL (SELECT make_date(year - 10 * m, 1, 1) AS first,
                                                      ($5::date - make_interval(years => 10 * m))::date + 1 AS cut) c,
                                      patients p
                                WHERE p.deleted_at IS NULL
                                  AND p.birth_date >= CASE WHEN late THEN c.cut ELSE c.first END
                                  AND p.birth_date < CASE WHEN late THEN (c.first + interval '1 year')::date ELSE c.cut END
                                  AND (NOT $3 OR (p.created_at >= ($1::date::timestamp AT TIME ZONE $4)
                                                  AND p.created_at < (($2::date + 1)::timestamp AT TIME ZONE $4)))
                                GROUP BY m)
               SELECT dimension, value, spelling, n::bigint FROM tally WHERE dimension <> 'birth_year' AND n <> 0
               UNION ALL
               SELECT 'age_band', band::text, '', sum(n)::bigint FROM (
                   SELECT CASE WHEN late AND (year - value::int) % 10 = 0 AND year - value::int BETWEEN 10 AND 80
                               THEN (year - value::int) / 10
                               ELSE least(8, greatest(year - value::int - 1, 0) / 10) END AS band, n
                     FROM tally, late WHERE dimension = 'birth_year'
                   UNION ALL SELECT CASE WHEN late THEN m - 1 ELSE m END, n FROM turned, late
                   UNION ALL SELECT CASE WHEN late THEN m ELSE m - 1 END, -n FROM turned, late) a
                GROUP BY band",
        )
        .await?;
    let rows = branch.query(&stmt, &[&start, &end, &ranged, &clock.timezone, &clock.today]).await?;
    let mut total = 0;
    let (mut by_sex, mut by_band, mut by_civil, mut by_status) =
        (Map::new(), Map::new(), Map::new(), Map::new());
    // city key -> (patients, [(patients, spelling)])
    let mut cities: BTreeMap<String, (i64, Vec<(i64, String)>)> = BTreeMap::new();
    for row in &rows {
        let (value, n): (String, i64) = (row.get(1), row.get(3));
        match row.get::<_, &str>(0) {
            "sex" => _ = by_sex.insert(value, json!(n)),
            "age_band" => {
                let band = value.parse::<usize>().unwrap_or(0).min(AGE_BANDS.len() - 1);
                by_band.insert(AGE_BANDS[band].to_owned(), json!(n));
            }
            "civil_status" => _ = by_civil.insert(value, json!(n)),
            "status" => _ = by_status.insert(value, json!(n)),
            "city" => {
                let entry = cities.entry(value).or_default();
                entry.0 += n;
                entry.1.push((n, row.get(2)));
            }
            "all" => total = n,
            _ => {}
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
