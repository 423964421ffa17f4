//! `Condition`: a coded diagnosis of a visit (`encounter-diagnosis`) or a problem of the
//! patient's problem list (`problem-list-item`), coded in ICD-10-CM.
//!
//! A condition's id names its source: `diagnosis-<visit diagnosis>`, `problem-<problem>`.

use serde_json::{Value, json};

use super::codes::{SNOMED, concept, eye_site};
use super::search::{Accepts, LAST_UPDATED, Search};
use super::shape::{meta, reference, text};
use super::sql::{Page, Sql, page};
use crate::http::error::ApiResult;
use crate::resource::Conn;

pub const ICD_10_CM: &str = "http://hl7.org/fhir/sid/icd-10-cm";
const CLINICAL: &str = "http://terminology.hl7.org/CodeSystem/condition-clinical";
const VERIFICATION: &str = "http://terminology.hl7.org/CodeSystem/condition-ver-status";
const CATEGORY: &str = "http://terminology.hl7.org/CodeSystem/condition-category";

pub const ACCEPTS: Accepts =
    Accepts { patient: true, code: Some(ICD_10_CM), sorts: &[LAST_UPDATED], ..Accepts::NOTHING_MORE };

/// One row per condition, from the two tables that give them.
const CONDITIONS: &str = "
    SELECT 'diagnosis' AS kind, d.id AS record_id, 'diagnosis-' || d.id AS fhir_id, d.patient_id,
           d.patient_visit_id, d.code, d.laterality, d.primary, 'active' AS status,
           v.visit_date AS onset, NULL::date AS resolved_on, d.note, d.version, d.updated_at
      FROM visit_diagnoses d JOIN patient_visits v ON v.id = d.patient_visit_id
     WHERE d.deleted_at IS NULL
    UNION ALL
    SELECT 'problem', p.id, 'problem-' || p.id, p.patient_id, NULL::bigint, p.code, NULL::text, false,
           p.status, p.onset, p.resolved_on, p.note, p.version, p.updated_at
      FROM problems p
     WHERE p.deleted_at IS NULL";

/// The record a condition id names, when it names one that can exist.
fn record_of(id: &str) -> Option<i64> {
    let (kind, record) = id.split_once('-')?;
    let record = record.parse::<i64>().ok().filter(|n| *n > 0)?;
    ["diagnosis", "problem"].contains(&kind).then_some(record)
}

pub async fn search(conn: &mut Conn, search: &Search) -> ApiResult<Page> {
    let mut sql = Sql::default();
    sql.composite_ids("c", search, record_of);
    sql.patients("c.patient_id", search);
    if let Some(codes) = &search.codes {
        let codes = sql.value(codes.clone());
        sql.condition(format!("c.code = ANY({codes}::text[])"));
    }
    let conditions = if search.gone {
        CONDITIONS.replace(".deleted_at IS NULL", ".deleted_at IS NOT NULL")
    } else {
        CONDITIONS.to_owned()
    };
    let matching = format!("SELECT * FROM ({conditions}) c {}", sql.filter());
    page(conn, &matching, "onset DESC NULLS LAST, kind, record_id DESC", sql, search).await
}

/// The laterality as a body site: an eye, both eyes, or none given.
fn body_site(laterality: &str) -> Value {
    match laterality {
        "right" | "left" => eye_site(laterality),
        "both" => concept(SNOMED, "362508001", "Both eyes, entire"),
        _ => Value::Null,
    }
}

pub fn resource(row: &Value) -> Value {
    let diagnosis = row["kind"] == "diagnosis";
    let status = row["status"].as_str().unwrap_or("active");
    let (category, category_name) = if diagnosis {
        ("encounter-diagnosis", "Encounter Diagnosis")
    } else {
        ("problem-list-item", "Problem List Item")
    };
    json!({
        "resourceType": "Condition",
        "id": row["fhir_id"],
        "meta": meta(row),
        "clinicalStatus": { "coding": [{ "system": CLINICAL, "code": status }] },
        "verificationStatus": { "coding": [{ "system": VERIFICATION, "code": "confirmed" }] },
        "category": [{ "coding": [{ "system": CATEGORY, "code": category, "display": category_name }] }],
        "code": { "coding": [{ "system": ICD_10_CM, "code": row["code"] }] },
        "bodySite": [body_site(row["laterality"].as_str().unwrap_or_default())],
        "subject": reference("Patient", &row["patient_id"]),
        "encounter": reference("Encounter", &row["patient_visit_id"]),
        "onsetDateTime": row["onset"],
        "abatementDateTime": row["resolved_on"],
        "note": [text(row, "note").map(|note| json!({ "text": note }))],
    })
}
