//! `ChargeItem`: a posted charge of the patient's billing (open, voided and other kinds of
//! transaction are not charge items).

use std::collections::HashMap;

use serde_json::{Value, json};

use super::codes::{self, BILLING_NUMBER};
use super::search::{Accepts, LAST_UPDATED, Search};
use super::shape::{meta, reference, text};
use super::sql::{Page, Sql, page};
use crate::http::error::ApiResult;
use crate::resource::Conn;

pub const ACCEPTS: Accepts = Accepts {
    patient: true,
    dates: &["date", "occurrence"],
    sorts: &[("date", "transaction_date"), ("occurrence", "transaction_date"), LAST_UPDATED],
    ..Accepts::NOTHING_MORE
};

pub async fn search(conn: &mut Conn, search: &Search, timezone: &str) -> ApiResult<Page> {
    let mut sql = Sql::default();
    sql.condition(if search.gone {
        // A charge once posted, since voided or deleted, was served before.
        "b.kind = 'charge' AND b.posted_at IS NOT NULL AND (b.status = 'voided' OR b.deleted_at IS NOT NULL)"
    } else {
        "b.deleted_at IS NULL AND b.kind = 'charge' AND b.status = 'posted'"
    });
    sql.numeric_ids("b.id", search);
    sql.patients("b.patient_id", search);
    sql.dates("b.transaction_date", true, search, timezone);
    let matching = format!(
        "SELECT b.id, b.patient_id, b.number, b.description, b.bill_item_id, b.procedure_id, b.service_id,
                b.quantity, b.amount, b.patient_visit_id, b.transaction_date, b.posted_at, b.version, b.updated_at
           FROM billing_transactions b {}",
        sql.filter()
    );
    page(conn, &matching, "transaction_date DESC, id DESC", sql, search).await
}

/// What a charge names of the master data, as `(kind, id)` (`bill-item`, `procedure`,
/// `service`): the code and name are read from the registry.
pub fn billed(row: &Value) -> Option<(&'static str, i64)> {
    [("bill-item", "bill_item_id"), ("procedure", "procedure_id"), ("service", "service_id")]
        .into_iter()
        .find_map(|(kind, column)| row[column].as_i64().map(|id| (kind, id)))
}

/// A posted charge; `currency` is the ISO 4217 code of the clinic's amounts (`CURRENCY`).
pub fn resource(
    row: &Value,
    master: &HashMap<(&'static str, i64), (String, String)>,
    currency: &str,
) -> Value {
    let description = text(row, "description");
    let code = match billed(row).and_then(|key| master.get(&key).map(|named| (key.0, named))) {
        Some((kind, (code, name))) => json!({
            "coding": [{ "system": codes::own(kind), "code": code, "display": name }],
            "text": description.clone().unwrap_or_else(|| name.clone()),
        }),
        None => json!({ "text": description.clone().unwrap_or_else(|| "Charge".into()) }),
    };
    json!({
        "resourceType": "ChargeItem",
        "id": row["id"].to_string(),
        "meta": meta(row),
        "identifier": [{ "system": BILLING_NUMBER, "value": row["number"] }],
        "status": "billed",
        "code": code,
        "subject": reference("Patient", &row["patient_id"]),
        "context": reference("Encounter", &row["patient_visit_id"]),
        "occurrenceDateTime": row["transaction_date"],
        "enteredDate": row["posted_at"],
        "quantity": { "value": row["quantity"] },
        "priceOverride": { "value": row["amount"], "currency": currency },
    })
}
