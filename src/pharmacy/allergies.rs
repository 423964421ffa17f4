//! The allergy check of a dispense. Completing a transaction for a patient who has an
//! `active` allergy to a medicine one of its lines dispenses (the line's item's medicine) is
//! 409 `allergy_conflict` naming each such allergy. It goes through only when the completion
//! carries an `override_reason` and the caller holds `pharmacy.allergy_override` (403
//! otherwise); the reason is written on the transaction before it is re-read, so the
//! completion's audit record shows it.
//!
//! The allergies live in the branch's schema, the transaction in the registry: they are read
//! after the transaction's row is locked for the completion, so an allergy recorded before
//! the completion began is always seen; one recorded while it runs orders after it.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::db::Transaction;
use crate::http::error::{ApiError, ApiResult};
use crate::permissions::PHARMACY_ALLERGY_OVERRIDE;
use crate::resource::{Fields, Writer, typed};

/// What the check needs of the transaction as it was before the completion.
#[derive(Deserialize)]
struct Dispensed {
    branch_id: i64,
    #[serde(default)]
    patient_id: Option<i64>,
}

/// Checks the lines of transaction `id` against the patient's active allergies; with a
/// conflict, either refuses (409, or 403 for an override without the permission) or keeps
/// the override's reason on the transaction.
pub async fn check(
    tx: &Transaction<'_>,
    writer: &Writer,
    id: i64,
    before: &Value,
    input: &serde_json::Map<String, Value>,
) -> ApiResult<()> {
    let sent: Dispensed = typed(before)?;
    let Some(patient) = sent.patient_id else { return Ok(()) };
    let rows = tx
        .query(
            "SELECT DISTINCT i.medicine_id, concat_ws(' ', m.generic_name, nullif(m.strength, ''))
               FROM transaction_lines l
               JOIN pharmacy_items i ON i.id = l.pharmacy_item_id
               LEFT JOIN medicines m ON m.id = i.medicine_id
              WHERE l.transaction_id = $1 AND i.medicine_id IS NOT NULL",
            &[&id],
        )
        .await?;
    if rows.is_empty() {
        return Ok(());
    }
    let medicines: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    let name_of = |medicine: i64| -> Option<String> {
        rows.iter().find(|r| r.get::<_, i64>(0) == medicine).and_then(|r| r.get(1))
    };
    let conflicts: Vec<Value> = active_allergies(writer, sent.branch_id, patient, &medicines)
        .await?
        .into_iter()
        .map(|(allergy, medicine, severity, reaction)| {
            json!({
                "id": allergy,
                "medicine_id": medicine,
                "medicine": name_of(medicine),
                "severity": severity,
                "reaction": reaction,
            })
        })
        .collect();
    if conflicts.is_empty() {
        return Ok(());
    }
    let Some(reason) = input.text("override_reason").map(str::trim).filter(|r| !r.is_empty()) else {
        return Err(ApiError::conflict_with(
            "allergy_conflict",
            "The patient is allergic to a medicine this transaction dispenses.",
            [("allergies".to_owned(), Value::Array(conflicts))],
        ));
    };
    if !writer.can(PHARMACY_ALLERGY_OVERRIDE) {
        return Err(ApiError::forbidden("You do not have permission to dispense against an allergy."));
    }
    tx.execute("UPDATE transactions SET allergy_override_reason = $2 WHERE id = $1", &[&id, &reason]).await?;
    Ok(())
}

/// The patient's live, active allergies to any of `medicines`, in the branch's schema:
/// `(id, medicine_id, severity, reaction)`.
async fn active_allergies(
    writer: &Writer,
    branch: i64,
    patient: i64,
    medicines: &[i64],
) -> ApiResult<Vec<(i64, i64, String, Option<String>)>> {
    let directory = &writer.state.directory;
    let Ok(route) = directory.route(branch).await? else { return Ok(Vec::new()) };
    let conn = directory.connect(&route).await?;
    let rows = conn
        .query(
            "SELECT id, medicine_id, severity, reaction FROM allergies
              WHERE patient_id = $1 AND medicine_id = ANY($2) AND status = 'active' AND deleted_at IS NULL
              ORDER BY id",
            &[&patient, &medicines],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))).collect())
}
