//! `DocumentReference`: a document or image in a patient's chart (an attachment), whose
//! bytes are the `Binary` of the same id (`binary`). The content's `hash` is left out: R4's
//! is the base64 of a SHA-1, and the server keeps a SHA-256, given as an identifier of the
//! server's own system (`urn:clinic-server:attachment-sha256`, its hex value) instead.

use serde_json::{Value, json};

use super::codes::own;
use super::search::{Accepts, LAST_UPDATED, Search};
use super::shape::{meta, reference, text};
use super::sql::{Page, Sql, page};
use crate::http::error::ApiResult;
use crate::resource::Conn;

pub const ACCEPTS: Accepts = Accepts {
    patient: true,
    dates: &["date"],
    sorts: &[("date", "created_at"), LAST_UPDATED],
    ..Accepts::NOTHING_MORE
};

/// The system of an attachment's SHA-256 (hex) as an identifier.
pub fn sha256_system() -> String {
    own("attachment-sha256")
}

pub async fn search(conn: &mut Conn, search: &Search, timezone: &str) -> ApiResult<Page> {
    let mut sql = Sql::default();
    sql.condition(if search.gone { "a.deleted_at IS NOT NULL" } else { "a.deleted_at IS NULL" });
    sql.numeric_ids("a.id", search);
    sql.patients("a.patient_id", search);
    sql.dates("a.created_at", false, search, timezone);
    let matching = format!(
        "SELECT a.id, a.patient_id, a.visit_id, a.content_type, a.bytes, a.sha256, a.filename, a.title,
                a.created_at, a.version, a.updated_at
           FROM attachments a {}",
        sql.filter()
    );
    page(conn, &matching, "created_at DESC, id DESC", sql, search).await
}

/// The resource of `row`; its content's `url` is the Binary's, under `base` (the server's URL).
pub fn resource(row: &Value, base: &str) -> Value {
    let title = text(row, "title");
    let filename = text(row, "filename");
    json!({
        "resourceType": "DocumentReference",
        "id": row["id"].to_string(),
        "meta": meta(row),
        "identifier": [{ "system": sha256_system(), "value": row["sha256"] }],
        "status": "current",
        "subject": reference("Patient", &row["patient_id"]),
        "date": row["created_at"],
        "description": title.clone().or(filename.clone()),
        "content": [{
            "attachment": {
                "contentType": row["content_type"],
                "url": format!("{base}/fhir/r4/Binary/{}", row["id"]),
                "size": row["bytes"],
                "title": filename,
                "creation": row["created_at"],
            }
        }],
        "context": { "encounter": [reference("Encounter", &row["visit_id"])] },
    })
}
