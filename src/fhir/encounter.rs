//! `Encounter`: a visit of a patient to the branch.

use serde_json::{Value, json};

use super::codes::{self, ACT_CODE};
use super::search::{Accepts, LAST_UPDATED, Search};
use super::shape::{meta, reference, text};
use super::sql::{Page, Sql, page};
use crate::http::error::ApiResult;
use crate::resource::Conn;

pub const ACCEPTS: Accepts = Accepts {
    patient: true,
    dates: &["date"],
    sorts: &[("date", "visit_date"), LAST_UPDATED],
    ..Accepts::NOTHING_MORE
};

pub async fn search(conn: &mut Conn, search: &Search, timezone: &str) -> ApiResult<Page> {
    let mut sql = Sql::default();
    sql.condition(if search.gone { "v.deleted_at IS NOT NULL" } else { "v.deleted_at IS NULL" });
    sql.numeric_ids("v.id", search);
    sql.patients("v.patient_id", search);
    sql.dates("v.visit_date", true, search, timezone);
    let matching = format!(
        "SELECT v.id, v.patient_id, v.visit_date, v.visit_type, v.status, v.reason, v.version, v.updated_at
           FROM patient_visits v {}",
        sql.filter()
    );
    page(conn, &matching, "visit_date DESC, id DESC", sql, search).await
}

pub fn resource(row: &Value) -> Value {
    json!({
        "resourceType": "Encounter",
        "id": row["id"].to_string(),
        "meta": meta(row),
        "status": codes::encounter_status(row["status"].as_str().unwrap_or_default()),
        "class": { "system": ACT_CODE, "code": "AMB", "display": "ambulatory" },
        "type": [row["visit_type"].as_str().map(|t| codes::own_concept("visit-type", t))],
        "subject": reference("Patient", &row["patient_id"]),
        "period": { "start": row["visit_date"] },
        "reasonCode": [text(row, "reason").map(|r| json!({ "text": r }))],
    })
}
