//! `Appointment`: a patient's time with a doctor at a branch service.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::codes;
use super::search::{Accepts, LAST_UPDATED, Search};
use super::shape::{meta, reference, text};
use super::sql::{Page, Sql, page};
use crate::http::error::ApiResult;
use crate::resource::Conn;

/// The FHIR codes of an appointment's status, in the order of the server's own.
pub const STATUSES: &[&str] = &["booked", "arrived", "checked-in", "fulfilled", "cancelled", "noshow"];

/// The server's statuses, as `status` names them.
const OWN_STATUSES: &[&str] = &["booked", "arrived", "in_progress", "completed", "cancelled", "no_show"];

pub const ACCEPTS: Accepts = Accepts {
    patient: true,
    dates: &["date"],
    identifier: false,
    practitioner: Some("practitioner"),
    statuses: STATUSES,
    sorts: &[("date", "starts_at"), LAST_UPDATED],
    ..Accepts::NOTHING_MORE
};

/// FHIR's status of an appointment in `status`.
pub fn status(status: &str) -> &'static str {
    OWN_STATUSES.iter().position(|s| *s == status).map_or("booked", |at| STATUSES[at])
}

pub async fn search(conn: &mut Conn, search: &Search, timezone: &str) -> ApiResult<Page> {
    let mut sql = Sql::default();
    sql.condition(if search.gone { "a.deleted_at IS NOT NULL" } else { "a.deleted_at IS NULL" });
    sql.numeric_ids("a.id", search);
    sql.patients("a.patient_id", search);
    sql.practitioners("a.doctor_id", search);
    sql.statuses("a.status", search, OWN_STATUSES, status);
    sql.dates("a.starts_at", false, search, timezone);
    let matching = format!(
        "SELECT a.id, a.patient_id, a.doctor_id, a.branch_service_id, a.starts_at, a.ends_at,
                a.duration_minutes, a.status, a.reason, a.notes, a.cancel_reason, a.created_at,
                a.version, a.updated_at
           FROM appointments a {}",
        sql.filter()
    );
    page(conn, &matching, "starts_at DESC, id DESC", sql, search).await
}

/// The resource of `row`, with the doctors' and the services' names.
pub fn resource(row: &Value, doctors: &HashMap<i64, String>, services: &HashMap<i64, String>) -> Value {
    fn named<'a>(row: &Value, names: &'a HashMap<i64, String>, column: &str) -> Option<&'a String> {
        row[column].as_i64().and_then(|id| names.get(&id))
    }
    let service = row["branch_service_id"].to_string();
    let own = row["status"].as_str().unwrap_or_default();
    let mut doctor = reference("Practitioner", &row["doctor_id"]);
    doctor["display"] = json!(named(row, doctors, "doctor_id"));
    json!({
        "resourceType": "Appointment",
        "id": row["id"].to_string(),
        "meta": meta(row),
        "status": status(own),
        "cancelationReason": text(row, "cancel_reason").map(|r| json!({ "text": r })),
        "serviceType": [{
            "coding": [{ "system": codes::own("branch-service"), "code": service }],
            "text": named(row, services, "branch_service_id"),
        }],
        "reasonCode": [text(row, "reason").map(|r| json!({ "text": r }))],
        "start": row["starts_at"],
        "end": row["ends_at"],
        "minutesDuration": row["duration_minutes"],
        "created": row["created_at"],
        "comment": text(row, "notes"),
        "participant": [
            { "actor": reference("Patient", &row["patient_id"]), "status": "accepted" },
            { "actor": doctor, "status": "accepted" },
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_own_status_has_its_fhir_code() {
        let codes: Vec<&str> = OWN_STATUSES.iter().map(|s| status(s)).collect();
        assert_eq!(codes, STATUSES);
    }
}
