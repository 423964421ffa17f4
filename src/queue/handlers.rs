//! The queue's own routes: issuing a ticket, checking a patient in, transferring a ticket
//! and the waiting room's view.

use salvo::prelude::*;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::enums::{QUEUE_PRIORITY, QUEUE_STATUS, VISIT_TYPE};
use crate::http::error::{ApiError, ApiResult, FieldErrors};
use crate::http::{self as web, list};
use crate::permissions::{PATIENTS_WRITE, QUEUE_READ, QUEUE_WRITE};
use crate::resource::etag::IfMatch;
use crate::resource::field::{branch_ref, integer, one_of, registry_ref, text};
use crate::resource::idempotency::Answer;
use crate::resource::input::Input;
use crate::resource::routes::{render, set_etag};
use crate::resource::{Context, Scope, Unit, Within, state_conflict, typed};

use super::issuing::{Holder, TICKET_HOLDER, check_in, holder_of, issue, problem};
use super::tickets::{QUEUE_TICKETS, TRANSFER, Ticket, path_service, queue_view, service_of, ticket_changed};

/// `POST /queue/branch-services/{id}/queue {patient_id, patient_visit_id, priority}`.
#[handler]
pub async fn create_ticket(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(QUEUE_WRITE)?;
    let (asked, errors) = TICKET_HOLDER.read_partly(req, depot).await?;
    let service = path_service(&ctx, req).await?;
    if !service.active {
        return Err(ApiError::field("branch_service_id", "The service is not taking tickets."));
    }
    let route = ctx.branch()?.clone();
    let mut conn = ctx.conn(Scope::Branch).await?;
    let unit = Unit::begin(conn.client(), ctx.writer()).await?;
    let holder = holder_of(&unit, asked, errors).await?;
    let today = route.today(&*unit).await?;
    let ticket = issue(&unit, &service, &holder, today).await?;
    let answer = Answer::created("Queue ticket created.", ticket.clone());
    unit.commit(&answer).await?;
    ticket_changed(&ctx.state, route.id, &ticket).await;
    set_etag(res, &ticket);
    render(res, &answer);
    Ok(())
}

/// `POST /queue/visits {patient_id, branch_service_id, visit_type, priority, reason,
/// doctor_id}`: a visit dated today, checked in, and its ticket, in one transaction.
#[handler]
pub async fn create_visit(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(QUEUE_WRITE)?;
    ctx.require(PATIENTS_WRITE)?;
    let (asked, mut errors): (CheckIn, _) = CHECK_IN.read_partly(req, depot).await?;
    let route = ctx.branch()?.clone();
    let service = match asked.branch_service_id {
        Some(id) => service_of(&ctx.state, route.id, id).await?,
        None => None,
    };
    if asked.branch_service_id.is_some() && !service.as_ref().is_some_and(|s| s.active) {
        problem(
            &mut errors,
            "branch_service_id",
            "The selected branch service id is invalid or not taking tickets.",
        );
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let service = service.ok_or(ApiError::NotFound)?;
    let mut conn = ctx.conn(Scope::Branch).await?;
    let unit = Unit::begin(conn.client(), ctx.writer()).await?;
    let today = route.today(&*unit).await?;
    let mut visit = Map::new();
    visit.insert("patient_id".into(), Value::from(asked.patient_id));
    visit.insert("visit_type".into(), Value::from(asked.visit_type));
    visit.insert("reason".into(), Value::from(asked.reason));
    visit.insert("doctor_id".into(), Value::from(asked.doctor_id));
    let priority = asked.priority.unwrap_or_else(|| "normal".into());
    let (visit, ticket) = check_in(&unit, &service, visit, priority, today).await?;
    let answer = Answer::created("Visit checked in and queued.", json!({ "visit": visit, "ticket": ticket }));
    unit.commit(&answer).await?;
    ticket_changed(&ctx.state, route.id, &ticket).await;
    render(res, &answer);
    Ok(())
}

/// `POST /queue/visits`'s body.
pub static CHECK_IN: Input = Input::new(
    "CheckInRequest",
    &[
        branch_ref("patient_id", "patients").required(),
        integer("branch_service_id", 1, i64::MAX).required(),
        one_of("visit_type", &VISIT_TYPE),
        one_of("priority", &QUEUE_PRIORITY),
        text("reason", 500),
        registry_ref("doctor_id", "doctors"),
    ],
);

/// What a check-in asks for (the fields that passed their checks).
#[derive(Deserialize)]
struct CheckIn {
    patient_id: Option<i64>,
    branch_service_id: Option<i64>,
    visit_type: Option<String>,
    priority: Option<String>,
    reason: Option<String>,
    doctor_id: Option<i64>,
}

/// `POST /queue/queue-tickets/{id}/transfer`'s body.
pub static TRANSFER_TO: Input = Input::new(
    "TicketTransferRequest",
    &[integer("branch_service_id", 1, i64::MAX).required(), one_of("priority", &QUEUE_PRIORITY)],
);

/// What a transfer asks for.
#[derive(Deserialize)]
struct TransferRequest {
    branch_service_id: i64,
    priority: Option<String>,
}

/// `POST /queue/queue-tickets/{id}/transfer {branch_service_id, priority}`: closes the
/// ticket and opens a waiting one in another active service of the branch, linked both ways.
#[handler]
pub async fn transfer(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(QUEUE_WRITE)?;
    let id = web::path_id(req, "id")?;
    let if_match = IfMatch::of(req);
    let request: TransferRequest = TRANSFER_TO.read(req, depot).await?;
    let route = ctx.branch()?.clone();
    let service = service_of(&ctx.state, route.id, request.branch_service_id).await?.filter(|s| s.active);
    let mut conn = ctx.conn(Scope::Branch).await?;
    let unit = Unit::begin(conn.client(), ctx.writer()).await?;
    let before: Ticket = typed(&unit.lock(&QUEUE_TICKETS, Within::default(), id, if_match).await?)?;
    if !TRANSFER.moves_from(Some(&before.status)) {
        return Err(state_conflict(&QUEUE_TICKETS, "invalid_transition", Some(&before.status)));
    }
    let service = match service {
        Some(s) if s.id != before.branch_service_id => s,
        _ => {
            return Err(ApiError::field(
                "branch_service_id",
                "The ticket moves to another active service of this branch.",
            ));
        }
    };
    let holder = Holder {
        patient: before.patient_id,
        visit: before.patient_visit_id,
        priority: request.priority.unwrap_or(before.priority),
        from: Some(id),
    };
    let today = route.today(&*unit).await?;
    let new_ticket = issue(&unit, &service, &holder, today).await?;
    let link = Map::from_iter([("transferred_to_id".to_owned(), new_ticket["id"].clone())]);
    let ticket = unit.act(&QUEUE_TICKETS, Within::default(), id, &TRANSFER, link, None).await?;
    let answer = Answer::ok("Ticket transferred.", json!({ "ticket": ticket, "new_ticket": new_ticket }));
    unit.commit(&answer).await?;
    ticket_changed(&ctx.state, route.id, &ticket).await;
    ticket_changed(&ctx.state, route.id, &new_ticket).await;
    set_etag(res, &ticket);
    render(res, &answer);
    Ok(())
}

/// `GET /queue/branch-services/{id}/queue?date=&status=`.
#[handler]
pub async fn show_queue(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(QUEUE_READ)?;
    let service = path_service(&ctx, req).await?;
    let pairs = list::query_pairs(req);
    list::only(&pairs, &["date", "status"])?;
    let get = |name: &str| pairs.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.trim().to_owned());
    let mut errors = FieldErrors::new();
    let day = match get("date") {
        Some(raw) => match list::parse_date(&raw) {
            Some(day) => Some(day),
            None => {
                problem(&mut errors, "date", "The date must be a date (YYYY-MM-DD).");
                None
            }
        },
        None => None,
    };
    let statuses: Option<Vec<String>> = get("status")
        .filter(|s| !s.is_empty())
        .map(|s| s.split(',').map(|p| p.trim().to_owned()).filter(|p| !p.is_empty()).collect());
    if let Some(list) = &statuses
        && let Some(bad) = list.iter().find(|s| !QUEUE_STATUS.values.contains(&s.as_str()))
    {
        problem(
            &mut errors,
            "status",
            &format!("Unknown status {bad}. Allowed: {}.", QUEUE_STATUS.values.join(", ")),
        );
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let route = ctx.branch()?.clone();
    let mut conn = ctx.conn(Scope::Branch).await?;
    let client = conn.client();
    let day = match day {
        Some(day) => day,
        None => route.today(&*client).await?,
    };
    let view = queue_view(&*client, &service, day, statuses.as_deref()).await?;
    web::ok(res, "Queue retrieved.", view);
    Ok(())
}
