//! `Patient`: a patient of the branch, identified by the PIN.

use serde_json::{Value, json};

use super::codes::{self, PIN};
use super::search::{Accepts, Page, Search, Sql, page};
use super::shape::{meta, text};
use crate::http::error::ApiResult;
use crate::resource::Conn;

pub const ACCEPTS: Accepts = Accepts { patient: false, dates: &["birthdate"], identifier: true };

pub async fn search(conn: &mut Conn, search: &Search, timezone: &str) -> ApiResult<Page> {
    let mut sql = Sql::default();
    sql.condition("p.deleted_at IS NULL");
    sql.numeric_ids("p.id", search);
    if let Some(identifiers) = &search.identifiers {
        // `value`, `|value` or `system|value`: only this server's PIN system names a patient.
        let pins: Vec<String> = identifiers
            .iter()
            .filter_map(|i| match i.split_once('|') {
                Some((system, pin)) if system.is_empty() || system == PIN => Some(pin.to_owned()),
                Some(_) => None,
                None => Some(i.clone()),
            })
            .collect();
        let placeholder = sql.value(pins);
        sql.condition(format!("p.pin = ANY({placeholder}::text[])"));
    }
    sql.dates("p.birth_date", true, search, timezone);
    let matching = format!(
        "SELECT p.id, p.id AS patient_id, p.pin, p.first_name, p.middle_name, p.last_name, p.suffix,
                p.birth_date, p.sex, p.civil_status, p.status, p.phone, p.email, p.address_line, p.city,
                p.province, p.postal_code, p.country, p.version, p.updated_at
           FROM patients p {}",
        sql.filter()
    );
    page(conn, &matching, "id", sql, search.count, search.offset).await
}

pub fn resource(row: &Value) -> Value {
    let status = row["status"].as_str().unwrap_or_default();
    let given: Vec<String> = ["first_name", "middle_name"].iter().filter_map(|c| text(row, c)).collect();
    let full =
        [text(row, "first_name"), text(row, "middle_name"), text(row, "last_name"), text(row, "suffix")]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
    let telecom: Vec<Value> = [("phone", "phone"), ("email", "email")]
        .iter()
        .filter_map(|(column, system)| text(row, column).map(|v| json!({ "system": system, "value": v })))
        .collect();
    let address = json!({
        "line": [text(row, "address_line")],
        "city": text(row, "city"),
        "state": text(row, "province"),
        "postalCode": text(row, "postal_code"),
        "country": text(row, "country"),
    });
    json!({
        "resourceType": "Patient",
        "id": row["id"].to_string(),
        "meta": meta(row),
        "identifier": [{ "use": "usual", "system": PIN, "value": row["pin"] }],
        "active": status == "active",
        "name": [{
            "use": "official",
            "text": full,
            "family": text(row, "last_name"),
            "given": given,
            "suffix": [text(row, "suffix")],
        }],
        "telecom": telecom,
        "gender": codes::gender(row["sex"].as_str().unwrap_or_default()),
        "birthDate": row["birth_date"],
        "deceasedBoolean": status == "deceased",
        "address": [address],
        "maritalStatus": row["civil_status"].as_str().and_then(codes::marital_status),
    })
}
