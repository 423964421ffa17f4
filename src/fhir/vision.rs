//! `VisionPrescription`: a final refraction (`final_rx`), the spectacle prescription handed
//! to the patient; a draft is `draft`, a signed one `active`.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::codes::{self, LENS_PRODUCT};
use super::search::{Accepts, LAST_UPDATED, Search};
use super::shape::{meta, practitioner, reference};
use super::sql::{Page, Sql, page};
use crate::http::error::ApiResult;
use crate::resource::Conn;

pub const ACCEPTS: Accepts = Accepts {
    patient: true,
    dates: &["date", "datewritten"],
    sorts: &[("date", "examined_at"), ("datewritten", "examined_at"), LAST_UPDATED],
    ..Accepts::NOTHING_MORE
};

pub async fn search(conn: &mut Conn, search: &Search, timezone: &str) -> ApiResult<Page> {
    let mut sql = Sql::default();
    // A prescription names at least one lens: an eye that was measured.
    sql.condition(if search.gone { "t.deleted_at IS NOT NULL" } else { "t.deleted_at IS NULL" });
    sql.condition("t.exam = 'refraction'");
    sql.condition("t.kind = 'final_rx'");
    sql.condition("(coalesce(t.right_eye ? 'sphere', false) OR coalesce(t.left_eye ? 'sphere', false))");
    sql.numeric_ids("t.id", search);
    sql.patients("t.patient_id", search);
    sql.dates("t.examined_at", false, search, timezone);
    let matching = format!(
        "SELECT t.id, t.patient_id, t.patient_visit_id, t.examined_at, t.created_at, t.status,
                coalesce(t.signed_by, t.examiner_id) AS prescriber_id, t.right_eye, t.left_eye,
                t.notes, t.version, t.updated_at
           FROM examinations t {}",
        sql.filter()
    );
    page(conn, &matching, "examined_at DESC, id DESC", sql, search).await
}

pub fn resource(row: &Value, names: &HashMap<i64, String>) -> Value {
    let lenses: Vec<Value> = ["right", "left"]
        .iter()
        .filter(|eye| row[format!("{eye}_eye")]["sphere"].is_number())
        .map(|eye| {
            let lens = &row[format!("{eye}_eye")];
            let prism = lens["prism_pd"].is_number().then(|| json!({ "amount": lens["prism_pd"], "base": lens["prism_base"] }));
            json!({
                "product": codes::concept(LENS_PRODUCT, "lens", "Lens"),
                "eye": eye,
                "sphere": lens["sphere"],
                "cylinder": lens["cylinder"],
                "axis": lens["axis"],
                "prism": [prism],
                "add": lens["add"],
                "note": [lens["va"].as_str().map(|va| json!({ "text": format!("Visual acuity with this lens: {va}") }))],
            })
        })
        .collect();
    let prescriber = row["prescriber_id"].as_i64().and_then(|id| names.get(&id));
    json!({
        "resourceType": "VisionPrescription",
        "id": row["id"].to_string(),
        "meta": meta(row),
        "status": if row["status"] == "signed" { "active" } else { "draft" },
        "created": row["created_at"],
        "patient": reference("Patient", &row["patient_id"]),
        "encounter": reference("Encounter", &row["patient_visit_id"]),
        "dateWritten": row["examined_at"],
        "prescriber": practitioner(&row["prescriber_id"], prescriber),
        "lensSpecification": lenses,
    })
}
