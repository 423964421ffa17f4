//! Queue tickets: their declaration and moves, the services they wait at, the waiting
//! room's view of a service and day, and the notice every instance's displays hear.

use crate::resource::row::Fields;
use std::collections::BTreeMap;

use salvo::async_trait;
use salvo::prelude::*;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use time::Date;

use crate::enums::QUEUE_STATUS;
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::permissions::{QUEUE_READ, QUEUE_WRITE};
use crate::resource::actions::{Action, Move, Stamp, Verb};
use crate::resource::field::text;
use crate::resource::hooks::Hooks;
use crate::resource::{Context, Resource, Scope, Shape, Writer, select_columns};
use crate::state::AppState;

/// A move of a ticket, by PUT, with an optional `{counter}`.
const fn move_ticket(
    name: &'static str,
    segment: &'static str,
    moves: &'static [Move],
    stamps: &'static [Stamp],
    done: &'static str,
) -> Action {
    Action {
        name,
        segment,
        verb: Verb::Put,
        permission: None,
        field: "status",
        moves,
        stamps,
        input: COUNTER,
        done,
    }
}

const COUNTER: &[crate::resource::Field] = &[text("counter", 50)];

/// `waiting, called, serving, skipped -> transferred`, linked to the ticket it became.
/// Declared, though served by its own handler (it issues the new ticket in the same unit).
pub const TRANSFER: Action = Action {
    name: "transfer",
    segment: "transfer",
    verb: Verb::Post,
    permission: None,
    field: "status",
    moves: &[Move { from: &["waiting", "called", "serving", "skipped"], to: "transferred" }],
    stamps: &[Stamp::Sent("transferred_to_id", "transferred_to_id")],
    input: &[],
    done: "Ticket transferred.",
};

pub static QUEUE_TICKETS: Resource = Resource {
    path: "queue/queue-tickets",
    table: "queue_tickets",
    label: "Queue ticket",
    plural: "queue tickets",
    scope: Scope::Branch,
    read_only: &[
        ("number", Shape::Text),
        ("branch_service_id", Shape::Integer),
        ("patient_id", Shape::Integer),
        ("patient_visit_id", Shape::Integer),
        ("priority", Shape::Text),
        ("status", Shape::Text),
        ("counter", Shape::Text),
        ("call_count", Shape::Integer),
        ("queue_date", Shape::Date),
        ("called_at", Shape::Timestamp),
        ("serving_at", Shape::Timestamp),
        ("completed_at", Shape::Timestamp),
        ("transferred_from_id", Shape::Integer),
        ("transferred_to_id", Shape::Integer),
    ],
    // A ticket is issued by the queue's own handlers (`issuing`), never sent whole.
    server_written: &[
        "number",
        "position",
        "branch_service_id",
        "patient_id",
        "patient_visit_id",
        "priority",
        "queue_date",
        "transferred_from_id",
    ],
    writable: false,
    sort_fields: &["queue_date", "created_at"],
    default_sort: "created_at",
    filter_only: &[
        crate::resource::Field::new("status", crate::resource::Kind::Enum(&QUEUE_STATUS)),
        crate::resource::Field::new(
            "branch_service_id",
            crate::resource::Kind::Integer { min: 1, max: i64::MAX },
        ),
        crate::resource::Field::new("patient_id", crate::resource::Kind::Integer { min: 1, max: i64::MAX }),
        crate::resource::Field::new("queue_date", crate::resource::Kind::Date { past: false }),
    ],
    filters: &["status", "branch_service_id", "patient_id", "queue_date"],
    actions: &[
        move_ticket(
            "call",
            "call",
            &[Move { from: &["waiting", "called", "skipped"], to: "called" }],
            &[
                Stamp::Increment("call_count"),
                Stamp::FirstTime("called_at"),
                Stamp::Sent("counter", "counter"),
            ],
            "Ticket called.",
        ),
        move_ticket(
            "serve",
            "serve",
            &[Move { from: &["called"], to: "serving" }],
            &[Stamp::Now("serving_at"), Stamp::Sent("counter", "counter")],
            "Ticket being served.",
        ),
        move_ticket(
            "complete",
            "complete",
            &[Move { from: &["serving"], to: "completed" }],
            &[Stamp::Now("completed_at")],
            "Ticket completed.",
        ),
        move_ticket("skip", "skip", &[Move { from: &["called"], to: "skipped" }], &[], "Ticket skipped."),
        move_ticket(
            "no_show",
            "no-show",
            &[Move { from: &["waiting", "called", "skipped"], to: "no_show" }],
            &[],
            "Ticket marked no-show.",
        ),
    ],
    read_permission: QUEUE_READ,
    write_permission: QUEUE_WRITE,
    hooks: &TicketHooks,
    ..Resource::DEFAULTS
};

pub struct TicketHooks;

#[async_trait]
impl Hooks for TicketHooks {
    /// Displays hear every move.
    async fn committed(&self, writer: &Writer, _: Option<&Value>, after: Option<&Value>) {
        if let (Some(ticket), Some(branch)) = (after, writer.branch_id()) {
            ticket_changed(&writer.state, branch, ticket).await;
        }
    }
}

/// A live service of the branch: `(id, code, name, active)`.
pub struct Service {
    pub id: i64,
    pub code: String,
    pub name: String,
    pub active: bool,
}

impl Service {
    pub fn view(&self) -> Value {
        json!({ "id": self.id, "code": self.code, "name": self.name, "active": self.active })
    }
}

/// The live branch service `id` of `branch`, if there is one.
pub async fn service_of(state: &AppState, branch: i64, id: i64) -> ApiResult<Option<Service>> {
    let client = state.registry.get().await?;
    let row = client
        .query_opt(
            "SELECT id, code, name, active FROM branch_services WHERE id = $1 AND branch_id = $2 AND deleted_at IS NULL",
            &[&id, &branch],
        )
        .await?;
    Ok(row.map(|r| Service { id: r.get(0), code: r.get(1), name: r.get(2), active: r.get(3) }))
}

/// The branch service in the path: a live service of this branch (404 otherwise).
pub(super) async fn path_service(ctx: &Context, req: &Request) -> ApiResult<Service> {
    let id = web::path_id(req, "id")?;
    service_of(&ctx.state, ctx.branch()?.id, id).await?.ok_or(ApiError::NotFound)
}

/// The waiting room's view of one service and day: who is being served, who waits (urgent,
/// then priority, then normal, each by number), who is done (latest change first), and the
/// counts. `statuses` narrows the lists, never the counts.
pub async fn queue_view(
    client: &impl crate::db::Queries,
    service: &Service,
    day: Date,
    statuses: Option<&[String]>,
) -> ApiResult<Value> {
    let columns = select_columns(&QUEUE_TICKETS);
    let stmt = client
        .prepare_cached(&format!(
            "SELECT to_jsonb(r) FROM (SELECT {columns}, t.position AS position_, t.updated_at AS changed_
                                       FROM queue_tickets t
                                      WHERE t.branch_service_id = $1 AND t.queue_date = $2 AND t.deleted_at IS NULL) r"
        ))
        .await?;
    let rows = client.query(&stmt, &[&service.id, &day]).await?;
    let mut tickets: Vec<Value> = rows.iter().map(|r| r.get(0)).collect();
    let mut counts: BTreeMap<&str, i64> = QUEUE_STATUS.values.iter().map(|s| (*s, 0)).collect();
    for t in &tickets {
        if let Some(count) = t["status"].as_str().and_then(|s| counts.get_mut(s)) {
            *count += 1;
        }
    }
    let shown =
        |t: &Value| statuses.is_none_or(|list| list.iter().any(|s| Some(s.as_str()) == t["status"].as_str()));
    tickets.retain(shown);
    let rank = |p: &str| match p {
        "urgent" => 0,
        "priority" => 1,
        _ => 2,
    };
    let (mut now_serving, mut waiting, mut done) = (Vec::new(), Vec::new(), Vec::new());
    for t in tickets {
        match t["status"].as_str() {
            Some("called" | "serving") => now_serving.push(t),
            Some("waiting") => waiting.push(t),
            _ => done.push(t),
        }
    }
    now_serving.sort_by(|a, b| a["called_at"].as_str().cmp(&b["called_at"].as_str()));
    waiting.sort_by_key(|t| (rank(t["priority"].as_str().unwrap_or_default()), t["position_"].as_i64()));
    done.sort_by(|a, b| b["changed_"].as_str().cmp(&a["changed_"].as_str()));
    let strip = |list: Vec<Value>| -> Vec<Value> {
        list.into_iter()
            .map(|mut t| {
                if let Some(o) = t.as_object_mut() {
                    o.remove("position_");
                    o.remove("changed_");
                }
                t
            })
            .collect()
    };
    let mut counts_json: Map<String, Value> =
        counts.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect();
    counts_json.insert("total".into(), json!(counts.values().sum::<i64>()));
    Ok(json!({
        "service": service.view(),
        "date": day.to_string(),
        "now_serving": strip(now_serving),
        "waiting": strip(waiting),
        "done": strip(done),
        "counts": counts_json,
    }))
}

/// What a move reads of a ticket.
#[derive(Deserialize)]
pub(super) struct Ticket {
    pub status: String,
    pub branch_service_id: i64,
    pub patient_id: Option<i64>,
    pub patient_visit_id: Option<i64>,
    pub priority: String,
}

/// The topic of a service's changes.
pub(super) fn topic(branch: i64, service: i64) -> String {
    format!("queue:{branch}:{service}")
}

/// Tells every instance's displays of the ticket's service that it changed.
/// Tells the screens of ticket `id`, written by another domain's unit (an appointment's
/// arrival), once that unit committed: read afresh and published like any change of a ticket.
/// A failure is logged: the screens catch up on their next event.
pub async fn announce(writer: &Writer, id: i64) {
    let published = async {
        let route = writer.branch_route()?;
        let conn = writer.state.directory.connect(&route).await?;
        let ticket = crate::resource::reload(&conn.reads(), &QUEUE_TICKETS, id).await?;
        ticket_changed(&writer.state, route.id, &ticket).await;
        ApiResult::Ok(())
    };
    if let Err(e) = published.await {
        tracing::warn!(error = %e, ticket = id, "could not announce a ticket");
    }
}

pub async fn ticket_changed(state: &AppState, branch: i64, ticket: &Value) {
    let Some(service) = ticket.integer("branch_service_id") else { return };
    state.publish(&topic(branch, service), ticket.clone()).await;
}
