//! An appointment's arrival: the patient's visit, checked in today, and a queue ticket for
//! the appointment's branch service, written in the arrival's own unit of work, so that
//! either all three are there or none is. An arrival retried finds the appointment arrived
//! already (409 `invalid_transition`, or the kept answer under its `Idempotency-Key`) and
//! makes neither twice.

use serde_json::{Map, Value};

use crate::http::error::{ApiError, ApiResult};
use crate::queue;
use crate::resource::row::Fields;
use crate::resource::{Unit, Writer};

/// Makes the visit and the ticket of appointment `id`, arriving now (`before` as it was), and
/// notes both on it.
pub async fn arrive(unit: &Unit<'_>, id: i64, before: &Value) -> ApiResult<()> {
    let writer = unit.writer();
    let route = writer.branch_route()?;
    let service = match before.integer("branch_service_id") {
        Some(service) => queue::service_of(&writer.state, route.id, service).await?,
        None => None,
    };
    let Some(service) = service.filter(|s| s.active) else {
        return Err(ApiError::field(
            "branch_service_id",
            "The appointment's branch service is not taking tickets; move it to one that is.",
        ));
    };
    let mut visit = Map::new();
    for field in ["patient_id", "doctor_id", "reason"] {
        visit.insert(field.into(), before.field(field).cloned().unwrap_or(Value::Null));
    }
    let today = route.today(&**unit).await?;
    let (visit, ticket) = queue::check_in(unit, &service, visit, "normal".into(), today).await?;
    let stmt = unit
        .prepare_cached("UPDATE appointments SET patient_visit_id = $1, queue_ticket_id = $2 WHERE id = $3")
        .await?;
    unit.execute(&stmt, &[&visit.integer("id"), &ticket.integer("id"), &id]).await?;
    Ok(())
}

/// Once an arrival committed: its ticket shown on the screens.
pub async fn announce(writer: &Writer, before: Option<&Value>, after: Option<&Value>) {
    let arrived = |record: Option<&Value>| record.and_then(|r| r.text("status")) == Some("arrived");
    if arrived(after)
        && !arrived(before)
        && let Some(ticket) = after.and_then(|a| a.integer("queue_ticket_id"))
    {
        queue::announce(writer, ticket).await;
    }
}
