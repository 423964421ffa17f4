//! The service queue (RESOURCES.md, section 9): tickets per branch service and local day,
//! moved by call, serve, complete, skip, no-show and transfer, and followed live by waiting
//! room displays (Server-Sent Events).
//!
//! - Numbers are `<SERVICE CODE>-<n>`, n from a counter row per service and local day bumped
//!   in the creating transaction: never repeated under concurrency, restarting daily.
//! - Every move is a declared action (lock, If-Match, transition check, stamps, audit);
//!   transfer closes a ticket and opens one in another service in one transaction.
//! - A change is published to every instance after it commits; displays hear it from the
//!   one LISTEN connection of their instance, never holding a database connection each.
//! - Tickets still waiting or called after their day become `no_show` (`auto_no_show`).

pub mod events;

use std::collections::BTreeMap;

use deadpool_postgres::Transaction;
use salvo::async_trait;
use salvo::prelude::*;
use serde_json::{Map, Value, json};
use time::Date;

use crate::clinical::PATIENT_VISITS;
use crate::db::directory::BranchRoute;
use crate::enums::{QUEUE_PRIORITY, QUEUE_STATUS, VISIT_TYPE};
use crate::http::error::{ApiError, ApiResult, FieldErrors};
use crate::http::{self as web, list};
use crate::permissions::{PATIENTS_WRITE, QUEUE_READ, QUEUE_WRITE};
use crate::resource::actions::{Action, Move, Stamp, Verb};
use crate::resource::etag::IfMatch;
use crate::resource::field::{branch_ref, integer, one_of, registry_ref, text};
use crate::resource::hooks::Hooks;
use crate::resource::routes::set_etag;
use crate::resource::store::{self, Writer, audit_change, lock_for_change, reload, state_conflict};
use crate::resource::validate::check_fields;
use crate::resource::{Context, Resource, Scope, Shape};
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

pub static QUEUE_TICKETS: Resource = Resource {
    path: "queue/queue-tickets",
    table: "queue_tickets",
    label: "Queue ticket",
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
    async fn committed(&self, writer: &Writer<'_>, _: Option<&Value>, after: Option<&Value>) {
        if let (Some(ticket), Some(branch)) = (after, writer.branch_id) {
            events::ticket_changed(writer.state, branch, ticket).await;
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

/// The branch's local date today.
pub async fn today_of(tx: &impl crate::db::Queries, route: &BranchRoute) -> ApiResult<Date> {
    let stmt = tx.prepare_cached("SELECT (now() AT TIME ZONE $1)::date").await?;
    Ok(tx.query_one(&stmt, &[&route.timezone]).await?.get(0))
}

/// Who a new ticket is for.
#[derive(Default)]
struct Holder {
    patient: Option<i64>,
    visit: Option<i64>,
    priority: String,
    from: Option<i64>,
}

/// Issues the next ticket of `service` today; answers it as stored.
async fn issue(
    tx: &Transaction<'_>,
    writer: &Writer<'_>,
    service: &Service,
    holder: &Holder,
    today: Date,
) -> ApiResult<Value> {
    let n: i32 = tx
        .query_one(
            "INSERT INTO queue_counters (branch_service_id, queue_date, last) VALUES ($1, $2, 1)
             ON CONFLICT (branch_service_id, queue_date) DO UPDATE SET last = queue_counters.last + 1
             RETURNING last",
            &[&service.id, &today],
        )
        .await?
        .get(0);
    let number = format!("{}-{n:03}", service.code);
    let id: i64 = tx
        .query_one(
            "INSERT INTO queue_tickets (number, position, branch_service_id, patient_id, patient_visit_id, priority,
                                        queue_date, transferred_from_id, created_by, updated_by)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING id",
            &[&number, &n, &service.id, &holder.patient, &holder.visit, &holder.priority, &today, &holder.from, &writer.user_id],
        )
        .await?
        .get(0);
    let ticket = reload(tx, &QUEUE_TICKETS, id).await?;
    audit_change(tx, writer, &QUEUE_TICKETS, "create", id, None, Some(&ticket)).await?;
    Ok(ticket)
}

/// Checks who a ticket is for: a live patient, a live visit of that patient (the patient
/// taken from the visit when not given), a known priority.
async fn holder_of(tx: &Transaction<'_>, body: &Map<String, Value>) -> ApiResult<Holder> {
    let fields = [
        branch_ref("patient_id", "patients"),
        branch_ref("patient_visit_id", "patient_visits"),
        one_of("priority", &QUEUE_PRIORITY),
    ];
    let (input, mut errors) = check_fields(fields.iter(), body, false, |_| false);
    let mut holder = Holder {
        patient: input.get("patient_id").and_then(Value::as_i64),
        visit: input.get("patient_visit_id").and_then(Value::as_i64),
        priority: input.get("priority").and_then(Value::as_str).unwrap_or("normal").to_owned(),
        from: None,
    };
    if let Some(patient) = holder.patient {
        let live =
            tx.query_opt("SELECT 1 FROM patients WHERE id = $1 AND deleted_at IS NULL", &[&patient]).await?;
        if live.is_none() {
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
                problem(&mut errors, "patient_id", "The patient id does not match the patient visit id.")
            }
            (Some(owner), _) => holder.patient = Some(owner),
        }
    }
    if errors.is_empty() { Ok(holder) } else { Err(ApiError::Validation(errors)) }
}

fn problem(errors: &mut FieldErrors, field: &str, message: &str) {
    errors.entry(field.into()).or_default().push(message.into());
}

/// The branch service in the path: a live service of this branch (404 otherwise).
async fn path_service(ctx: &Context, req: &Request) -> ApiResult<Service> {
    let id = web::path_id(req, "id")?;
    service_of(&ctx.state, ctx.branch()?.id, id).await?.ok_or(ApiError::NotFound)
}

/// `POST /queue/branch-services/{id}/queue {patient_id, patient_visit_id, priority}`.
#[handler]
pub async fn create_ticket(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(QUEUE_WRITE)?;
    let body = ctx.body(req).await?;
    let service = path_service(&ctx, req).await?;
    if !service.active {
        return Err(ApiError::field("branch_service_id", "The service is not taking tickets."));
    }
    let route = ctx.branch()?.clone();
    let writer = ctx.writer();
    let mut conn = ctx.conn(Scope::Branch).await?;
    let tx = conn.client().transaction().await?;
    let holder = holder_of(&tx, &body).await?;
    let today = today_of(&tx, &route).await?;
    let ticket = issue(&tx, &writer, &service, &holder, today).await?;
    tx.commit().await?;
    events::ticket_changed(&ctx.state, route.id, &ticket).await;
    set_etag(res, &ticket);
    web::created(res, "Queue ticket created.", ticket);
    Ok(())
}

/// `POST /queue/visits {patient_id, branch_service_id, visit_type, priority, reason,
/// doctor_id}`: a visit dated today, checked in, and its ticket, in one transaction.
#[handler]
pub async fn create_visit(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(QUEUE_WRITE)?;
    ctx.require(PATIENTS_WRITE)?;
    let body = ctx.body(req).await?;
    let fields = [
        branch_ref("patient_id", "patients").required(),
        integer("branch_service_id", 1, i64::MAX).required(),
        one_of("visit_type", &VISIT_TYPE),
        one_of("priority", &QUEUE_PRIORITY),
        text("reason", 500),
        registry_ref("doctor_id", "doctors"),
    ];
    let (input, mut errors) = check_fields(fields.iter(), &body, true, |_| false);
    let route = ctx.branch()?.clone();
    let service = match input.get("branch_service_id").and_then(Value::as_i64) {
        Some(id) => service_of(&ctx.state, route.id, id).await?,
        None => None,
    };
    if input.contains_key("branch_service_id") && !service.as_ref().is_some_and(|s| s.active) {
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
    let writer = ctx.writer();
    let mut conn = ctx.conn(Scope::Branch).await?;
    let tx = conn.client().transaction().await?;
    let today = today_of(&tx, &route).await?;
    let mut visit: Map<String, Value> = ["patient_id", "visit_type", "reason", "doctor_id"]
        .iter()
        .filter_map(|k| input.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
    visit.insert("visit_date".into(), Value::String(today.to_string()));
    visit.insert("status".into(), Value::String("checked_in".into()));
    let visit = store::insert(&tx, &writer, &PATIENT_VISITS, store::Within::default(), visit).await?;
    let holder = Holder {
        patient: input.get("patient_id").and_then(Value::as_i64),
        visit: visit.get("id").and_then(Value::as_i64),
        priority: input.get("priority").and_then(Value::as_str).unwrap_or("normal").to_owned(),
        from: None,
    };
    let ticket = issue(&tx, &writer, &service, &holder, today).await?;
    tx.commit().await?;
    events::ticket_changed(&ctx.state, route.id, &ticket).await;
    web::created(res, "Visit checked in and queued.", json!({ "visit": visit, "ticket": ticket }));
    Ok(())
}

/// `POST /queue/queue-tickets/{id}/transfer {branch_service_id, priority}`: closes the
/// ticket and opens a waiting one in another active service of the branch, linked both ways.
#[handler]
pub async fn transfer(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(QUEUE_WRITE)?;
    let id = web::path_id(req, "id")?;
    let if_match = IfMatch::of(req);
    let body = ctx.body(req).await?;
    let fields = [integer("branch_service_id", 1, i64::MAX).required(), one_of("priority", &QUEUE_PRIORITY)];
    let (input, errors) = check_fields(fields.iter(), &body, true, |_| false);
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let route = ctx.branch()?.clone();
    let target = input.get("branch_service_id").and_then(Value::as_i64).unwrap_or_default();
    let service = service_of(&ctx.state, route.id, target).await?.filter(|s| s.active);
    let writer = ctx.writer();
    let mut conn = ctx.conn(Scope::Branch).await?;
    let tx = conn.client().transaction().await?;
    let before = lock_for_change(&tx, &QUEUE_TICKETS, store::Within::default(), id, if_match).await?;
    let state = before.get("status").and_then(Value::as_str);
    if !matches!(state, Some("waiting" | "called" | "serving" | "skipped")) {
        return Err(state_conflict(&QUEUE_TICKETS, "invalid_transition", state));
    }
    let service = match service {
        Some(s) if Some(s.id) != before.get("branch_service_id").and_then(Value::as_i64) => s,
        _ => {
            return Err(ApiError::field(
                "branch_service_id",
                "The ticket moves to another active service of this branch.",
            ));
        }
    };
    let holder = Holder {
        patient: before.get("patient_id").and_then(Value::as_i64),
        visit: before.get("patient_visit_id").and_then(Value::as_i64),
        priority: input
            .get("priority")
            .or_else(|| before.get("priority"))
            .and_then(Value::as_str)
            .unwrap_or("normal")
            .to_owned(),
        from: Some(id),
    };
    let today = today_of(&tx, &route).await?;
    let new_ticket = issue(&tx, &writer, &service, &holder, today).await?;
    tx.execute(
        "UPDATE queue_tickets SET status = 'transferred', transferred_to_id = $2, version = version + 1,
                updated_at = now(), updated_by = $3 WHERE id = $1",
        &[&id, &new_ticket["id"].as_i64(), &writer.user_id],
    )
    .await?;
    let ticket = reload(&tx, &QUEUE_TICKETS, id).await?;
    audit_change(&tx, &writer, &QUEUE_TICKETS, "transfer", id, Some(&before), Some(&ticket)).await?;
    tx.commit().await?;
    events::ticket_changed(&ctx.state, route.id, &ticket).await;
    events::ticket_changed(&ctx.state, route.id, &new_ticket).await;
    set_etag(res, &ticket);
    web::ok(res, "Ticket transferred.", json!({ "ticket": ticket, "new_ticket": new_ticket }));
    Ok(())
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
    let columns = store::select_columns(&QUEUE_TICKETS);
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

/// `GET /queue/branch-services/{id}/queue?date=&status=`.
#[handler]
pub async fn show_queue(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(QUEUE_READ)?;
    let service = path_service(&ctx, req).await?;
    let pairs = list::query_pairs(req);
    let get = |name: &str| pairs.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.trim().to_owned());
    let mut errors = FieldErrors::new();
    let day = match get("date").filter(|d| !d.is_empty()) {
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
        .map(|s| s.split(',').map(|p| p.trim().to_ascii_lowercase()).filter(|p| !p.is_empty()).collect());
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
        None => today_of(&*client, &route).await?,
    };
    let view = queue_view(&*client, &service, day, statuses.as_deref()).await?;
    web::ok(res, "Queue retrieved.", view);
    Ok(())
}

/// Turns tickets still waiting or called after their local day into no-shows, in every
/// active branch, each audited `auto_no_show` without a user. Answers how many.
pub async fn close_past_days(state: &AppState) -> anyhow::Result<u64> {
    let branches: Vec<i64> = {
        let client = state.registry.get().await?;
        client
            .query("SELECT id FROM branches WHERE status = 'active'", &[])
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect()
    };
    let mut closed = 0;
    for branch in branches {
        let Ok(route) = state.directory.route(branch).await? else { continue };
        let mut conn = state.directory.connect(&route).await?;
        let tx = conn.transaction().await?;
        let rows = tx
            .query(
                "WITH closed AS (
                     UPDATE queue_tickets SET status = 'no_show', version = version + 1, updated_at = now()
                      WHERE status IN ('waiting', 'called') AND deleted_at IS NULL
                        AND queue_date < (now() AT TIME ZONE $1)::date
                     RETURNING id)
                 INSERT INTO audit_log (user_id, action, resource, record_id, after)
                 SELECT NULL, 'auto_no_show', $2, id, jsonb_build_object('status', 'no_show') FROM closed
                 RETURNING record_id",
                &[&route.timezone, &QUEUE_TICKETS.path],
            )
            .await?;
        tx.commit().await?;
        closed += rows.len() as u64;
    }
    Ok(closed)
}

/// Runs [`close_past_days`] every few minutes until the process ends.
pub fn spawn_day_closer(state: std::sync::Arc<AppState>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(300));
        loop {
            every.tick().await;
            if let Err(e) = close_past_days(&state).await {
                tracing::warn!(error = format!("{e:#}"), "closing past queue days failed");
            }
        }
    })
}

pub static RESOURCES: &[&Resource] = &[&QUEUE_TICKETS];

/// The queue's routes beyond the tickets' reads and moves.
pub fn extra_routes() -> Router {
    Router::with_path("queue")
        .push(Router::with_path("visits").post(create_visit))
        .push(Router::with_path("queue-tickets/{id}/transfer").post(transfer))
        .push(
            Router::with_path("branch-services/{id}")
                .push(Router::with_path("queue").get(show_queue).post(create_ticket))
                .push(Router::with_path("events").get(events::follow)),
        )
}

/// OpenAPI entries of [`extra_routes`].
pub fn document(doc: &mut crate::http::docs::Doc) {
    use crate::http::docs::{self, Access, Doc};
    use salvo::oapi::{Array, Object, PathItemType, Ref};
    let ticket = || Ref::from_schema_name("QueueTicket");
    let tickets = || Array::new().items(ticket());
    let counts = QUEUE_STATUS
        .values
        .iter()
        .fold(Object::new().property("total", docs::integer()), |o, s| o.property(*s, docs::integer()));
    let view = Object::new()
        .property(
            "service",
            Object::new()
                .property("id", docs::integer())
                .property("code", docs::string())
                .property("name", docs::string()),
        )
        .property("date", docs::date())
        .property("now_serving", tickets())
        .property("waiting", tickets())
        .property("done", tickets())
        .property("counts", counts);
    let path = "/api/v1/queue/branch-services/{id}/queue";
    let op = Doc::operation(Access::Branch, "queue", "A service's queue for a day")
        .add_parameter(docs::path_id())
        .add_parameter(docs::query("date", docs::date(), "Default: the branch's today"))
        .add_parameter(docs::query(
            "status",
            docs::string(),
            "Comma-separated statuses the lists keep (counts stay whole)",
        ));
    doc.add(
        PathItemType::Get,
        path,
        Doc::not_found(Doc::invalid(
            Doc::answers(op, "200", "The queue", docs::envelope(view)),
            "A bad date or status",
        )),
    );
    let holder = Object::new()
        .property("patient_id", docs::integer())
        .property("patient_visit_id", docs::integer())
        .property("priority", docs::string().enum_values(QUEUE_PRIORITY.values.iter().copied()));
    let op = Doc::with_body(
        Doc::operation(Access::Branch, "queue", "Issue a ticket").add_parameter(docs::path_id()),
        holder,
    );
    doc.add(
        PathItemType::Post,
        path,
        Doc::not_found(Doc::answers(op, "201", "The ticket", docs::envelope(ticket()))),
    );
    let visit = Object::new()
        .property("patient_id", docs::integer())
        .property("branch_service_id", docs::integer())
        .property("visit_type", docs::string().enum_values(VISIT_TYPE.values.iter().copied()))
        .property("priority", docs::string().enum_values(QUEUE_PRIORITY.values.iter().copied()))
        .property("reason", docs::string())
        .property("doctor_id", docs::integer())
        .required("patient_id")
        .required("branch_service_id");
    let answer =
        Object::new().property("visit", Ref::from_schema_name("PatientVisit")).property("ticket", ticket());
    let op = Doc::with_body(
        Doc::operation(Access::Branch, "queue", "Check a patient in: a visit dated today and its ticket"),
        visit,
    );
    doc.add(
        PathItemType::Post,
        "/api/v1/queue/visits",
        Doc::answers(op, "201", "Visit and ticket", docs::envelope(answer)),
    );
    let body = Object::new()
        .property("branch_service_id", docs::integer())
        .property("priority", docs::string().enum_values(QUEUE_PRIORITY.values.iter().copied()))
        .required("branch_service_id");
    let op = Doc::with_body(
        Doc::operation(Access::Branch, "queue", "Move a ticket to another service of the branch")
            .add_parameter(docs::path_id()),
        body,
    );
    let answer = Object::new().property("ticket", ticket()).property("new_ticket", ticket());
    let op = Doc::conflict(
        Doc::stale(Doc::not_found(Doc::answers(op, "200", "Both tickets", docs::envelope(answer)))),
        "invalid_transition",
    );
    doc.add(PathItemType::Post, "/api/v1/queue/queue-tickets/{id}/transfer", op);
    let op = Doc::operation(
        Access::Branch,
        "queue",
        "Server-Sent Events: a snapshot, then every change of the service's tickets",
    )
    .add_parameter(docs::path_id())
    .add_response(
        "200",
        salvo::oapi::Response::new("event: snapshot, then event: ticket; a comment every 15 s")
            .add_content("text/event-stream", salvo::oapi::Content::new(docs::string())),
    );
    doc.add(PathItemType::Get, "/api/v1/queue/branch-services/{id}/events", Doc::not_found(op));
}
