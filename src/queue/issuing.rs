//! Issuing a ticket: who it is for, and the next number of its service today.

use crate::db::Transaction;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use time::Date;

use crate::clinical::{PATIENT_VISITS, PATIENTS};
use crate::enums::QUEUE_PRIORITY;
use crate::http::error::{ApiError, ApiResult, FieldErrors};
use crate::resource::field::{branch_ref, one_of};
use crate::resource::input::Input;
use crate::resource::row::Fields;
use crate::resource::{Unit, Within, merged_record, typed};

use super::tickets::{QUEUE_TICKETS, Service};

/// Who a new ticket is for.
#[derive(Default)]
pub(super) struct Holder {
    pub(super) patient: Option<i64>,
    pub(super) visit: Option<i64>,
    pub(super) priority: String,
    pub(super) from: Option<i64>,
}

/// Issues the next ticket of `service` today; answers it as stored.
pub(super) async fn issue(
    unit: &Unit<'_>,
    service: &Service,
    holder: &Holder,
    today: Date,
) -> ApiResult<Value> {
    let n: i32 = unit
        .query_one(
            "INSERT INTO queue_counters (branch_service_id, queue_date, last) VALUES ($1, $2, 1)
             ON CONFLICT (branch_service_id, queue_date) DO UPDATE SET last = queue_counters.last + 1
             RETURNING last",
            &[&service.id, &today],
        )
        .await?
        .get(0);
    let ticket = json!({
        "number": format!("{}-{n:03}", service.code),
        "position": n,
        "branch_service_id": service.id,
        "patient_id": holder.patient,
        "patient_visit_id": holder.visit,
        "priority": holder.priority,
        "queue_date": today.to_string(),
        "transferred_from_id": holder.from,
    });
    let Value::Object(ticket) = ticket else { unreachable!("a JSON object") };
    unit.insert(&QUEUE_TICKETS, Within::default(), ticket).await
}

/// A visit dated `today`, checked in, and its ticket for `service`, written in `unit`: what a
/// check-in at the desk and an appointment's arrival both make. `visit` holds the visit's
/// other fields (its patient, doctor, reason); those left null take the visit's defaults.
pub async fn check_in(
    unit: &Unit<'_>,
    service: &Service,
    mut visit: Map<String, Value>,
    priority: String,
    today: Date,
) -> ApiResult<(Value, Value)> {
    visit.insert("visit_date".into(), Value::String(today.to_string()));
    visit.insert("status".into(), Value::String("checked_in".into()));
    visit.retain(|_, v| !v.is_null());
    let patient = visit.integer("patient_id");
    let visit = unit.insert(&PATIENT_VISITS, Within::default(), visit).await?;
    let created: Created = typed(&visit)?;
    let holder = Holder { patient, visit: Some(created.id), priority, from: None };
    let ticket = issue(unit, service, &holder, today).await?;
    Ok((visit, ticket))
}

/// A row just written.
#[derive(Deserialize)]
struct Created {
    id: i64,
}

/// Who a ticket is for: `POST /queue/branch-services/{id}/queue`'s body.
pub static TICKET_HOLDER: Input = Input::new(
    "QueueTicketRequest",
    &[
        branch_ref("patient_id", "patients"),
        branch_ref("patient_visit_id", "patient_visits"),
        one_of("priority", &QUEUE_PRIORITY),
    ],
);

/// Who a ticket is asked for (the fields that passed their checks).
#[derive(Deserialize)]
pub struct HolderRequest {
    patient_id: Option<i64>,
    patient_visit_id: Option<i64>,
    priority: Option<String>,
}

/// Checks who a ticket is for: a live patient, a live visit of that patient (the patient
/// taken from the visit when not given), a known priority.
/// `errors`: those the body's own check found, reported with these.
pub(super) async fn holder_of(
    tx: &Transaction<'_>,
    asked: HolderRequest,
    mut errors: FieldErrors,
) -> ApiResult<Holder> {
    let mut holder = Holder {
        patient: asked.patient_id,
        visit: asked.patient_visit_id,
        priority: asked.priority.unwrap_or_else(|| "normal".into()),
        from: None,
    };
    if let Some(patient) = holder.patient {
        let live =
            tx.query_opt("SELECT 1 FROM patients WHERE id = $1 AND deleted_at IS NULL", &[&patient]).await?;
        if live.is_none() {
            if let Some(merged) = merged_record(tx, PATIENTS.table, patient).await? {
                return Err(merged);
            }
            problem(&mut errors, "patient_id", "The selected patient id is invalid.");
        }
    }
    if let Some(visit) = holder.visit {
        let owner: Option<i64> = tx
            .query_opt(
                "SELECT patient_id FROM patient_visits WHERE id = $1 AND deleted_at IS NULL",
                &[&visit],
            )
            .await?
            .map(|r| r.get(0));
        match (owner, holder.patient) {
            (None, _) => {
                problem(&mut errors, "patient_visit_id", "The selected patient visit id is invalid.")
            }
            (Some(owner), Some(patient)) if owner != patient => {
                problem(&mut errors, "patient_visit_id", "The visit is not this patient's.")
            }
            (Some(owner), _) => holder.patient = Some(owner),
        }
    }
    if errors.is_empty() { Ok(holder) } else { Err(ApiError::Validation(errors)) }
}

pub(super) fn problem(errors: &mut FieldErrors, field: &str, message: &str) {
    errors.entry(field.into()).or_default().push(message.into());
}
