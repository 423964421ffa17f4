//! `Schedule`: the hours a doctor keeps at the branch, one Schedule per doctor (its id is the
//! doctor's), made of their weekly hours that are not deleted. Its `planningHorizon` runs
//! from the branch's today (or the first day the hours hold, when later) to the last day
//! they hold, or 180 days ahead when some of them hold without end.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::search::{Accepts, LAST_UPDATED, Search};
use super::shape::reference;
use super::sql::{Page, Sql, page};
use crate::http::error::ApiResult;
use crate::resource::Conn;

pub const ACCEPTS: Accepts =
    Accepts { practitioner: Some("actor"), sorts: &[LAST_UPDATED], ..Accepts::NOTHING_MORE };

/// How far ahead the hours of a doctor that keeps them without end are planned.
pub const HORIZON_DAYS: i32 = 180;

pub async fn search(conn: &mut Conn, search: &Search, timezone: &str) -> ApiResult<Page> {
    let mut sql = Sql::default();
    let zone = sql.value(timezone.to_owned());
    let horizon = sql.value(HORIZON_DAYS);
    // A doctor all of whose hours were deleted had a Schedule: it is gone, not unknown.
    sql.condition(if search.gone { "NOT d.live" } else { "d.live" });
    sql.numeric_ids("d.id", search);
    sql.practitioners("d.id", search);
    let matching = format!(
        "SELECT d.id, d.id AS doctor_id, d.updated_at, d.hours, d.horizon_start,
                greatest(d.horizon_start, CASE WHEN d.bounded THEN d.last_day ELSE d.today + {horizon}::int END)
                    AS horizon_end
           FROM (SELECT s.doctor_id AS id, bool_or(s.deleted_at IS NULL) AS live, max(s.updated_at) AS updated_at,
                        coalesce(jsonb_agg(jsonb_build_object('weekday', s.weekday, 'start', s.start_time,
                                                              'end', s.end_time, 'slot', s.slot_minutes)
                                           ORDER BY s.weekday, s.start_time) FILTER (WHERE s.deleted_at IS NULL),
                                 '[]') AS hours,
                        coalesce(bool_and(s.effective_to IS NOT NULL) FILTER (WHERE s.deleted_at IS NULL), false)
                            AS bounded,
                        max(s.effective_to) FILTER (WHERE s.deleted_at IS NULL) AS last_day,
                        t.today,
                        greatest(t.today, min(coalesce(s.effective_from, t.today)) FILTER (WHERE s.deleted_at IS NULL))
                            AS horizon_start
                   FROM doctor_schedules s, (SELECT (now() AT TIME ZONE {zone}::text)::date AS today) t
                  GROUP BY s.doctor_id, t.today) d
         {}",
        sql.filter()
    );
    page(conn, &matching, "id", sql, search).await
}

const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/// The weekly hours, as people read them: `Mon 08:00-12:00 (15 min)`.
fn hours(row: &Value) -> Option<String> {
    let hours: Vec<String> = row["hours"]
        .as_array()?
        .iter()
        .map(|h| {
            let day =
                h["weekday"].as_u64().and_then(|d| DAYS.get(d.saturating_sub(1) as usize)).unwrap_or(&"");
            let (start, end) =
                (h["start"].as_str().unwrap_or_default(), h["end"].as_str().unwrap_or_default());
            format!("{day} {start}-{end} ({} min)", h["slot"])
        })
        .collect();
    (!hours.is_empty()).then(|| format!("Weekly hours: {}", hours.join("; ")))
}

pub fn resource(row: &Value, doctors: &HashMap<i64, String>) -> Value {
    let mut actor = reference("Practitioner", &row["doctor_id"]);
    actor["display"] = json!(row["doctor_id"].as_i64().and_then(|id| doctors.get(&id)));
    json!({
        "resourceType": "Schedule",
        "id": row["id"].to_string(),
        "meta": { "lastUpdated": row["updated_at"] },
        "active": true,
        "actor": [actor],
        "planningHorizon": { "start": row["horizon_start"], "end": row["horizon_end"] },
        "comment": hours(row),
    })
}
