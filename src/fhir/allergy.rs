//! `AllergyIntolerance`: a patient's allergy, to a medicine of the registry (coded by its id
//! and named) or to a substance in words. The clinical status is the allergy's own status;
//! a severe allergy is of high criticality.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::codes::own;
use super::search::{Accepts, LAST_UPDATED, Search};
use super::shape::{meta, reference, text};
use super::sql::{Page, Sql, page};
use crate::http::error::ApiResult;
use crate::resource::{Conn, Context};

const CLINICAL_STATUS: &str = "http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical";

pub const ACCEPTS: Accepts = Accepts {
    patient: true,
    dates: &["date"],
    sorts: &[("date", "noted_on"), LAST_UPDATED],
    ..Accepts::NOTHING_MORE
};

pub async fn search(conn: &mut Conn, search: &Search, timezone: &str) -> ApiResult<Page> {
    let mut sql = Sql::default();
    sql.condition(if search.gone { "a.deleted_at IS NOT NULL" } else { "a.deleted_at IS NULL" });
    sql.numeric_ids("a.id", search);
    sql.patients("a.patient_id", search);
    sql.dates("a.noted_on", true, search, timezone);
    let matching = format!(
        "SELECT a.id, a.patient_id, a.medicine_id, a.substance, a.reaction, a.severity, a.status, a.noted_on,
                a.notes, a.version, a.updated_at
           FROM allergies a {}",
        sql.filter()
    );
    page(conn, &matching, "id DESC", sql, search).await
}

/// The names of the medicines the allergies in `rows` are to.
pub async fn medicine_names(ctx: &Context, rows: &[Value]) -> ApiResult<HashMap<i64, String>> {
    let mut ids: Vec<i64> = rows.iter().filter_map(|r| r["medicine_id"].as_i64()).collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let client = ctx.registry().await?;
    let sql =
        "SELECT id, concat_ws(' ', generic_name, nullif(strength, '')) FROM medicines WHERE id = ANY($1)";
    let found = client.query(sql, &[&ids]).await?;
    Ok(found.iter().map(|r| (r.get(0), r.get(1))).collect())
}

pub fn resource(row: &Value, medicines: &HashMap<i64, String>) -> Value {
    let substance = text(row, "substance");
    let code = match row["medicine_id"].as_i64() {
        Some(id) => {
            let name = medicines.get(&id).cloned();
            json!({
                "coding": [{ "system": own("medicine"), "code": id.to_string(), "display": name }],
                "text": substance.clone().or(name),
            })
        }
        None => json!({ "text": substance }),
    };
    let status = row["status"].as_str().unwrap_or("active");
    let severity = row["severity"].as_str().unwrap_or_default();
    let reaction =
        text(row, "reaction").map(|r| json!([{ "manifestation": [{ "text": r }], "severity": severity }]));
    json!({
        "resourceType": "AllergyIntolerance",
        "id": row["id"].to_string(),
        "meta": meta(row),
        "clinicalStatus": { "coding": [{ "system": CLINICAL_STATUS, "code": status }] },
        "type": "allergy",
        "category": [row["medicine_id"].as_i64().map(|_| "medication")],
        "criticality": if severity == "severe" { "high" } else { "low" },
        "code": code,
        "patient": reference("Patient", &row["patient_id"]),
        "recordedDate": row["noted_on"],
        "reaction": reaction,
        "note": [text(row, "notes").map(|n| json!({ "text": n }))],
    })
}
