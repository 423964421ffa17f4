//! The service queue: tickets per branch service and local day,
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
//! - A waiting-room screen (`/display/{id}`, beside the API) follows one service with a
//!   display key an administrator made for it, and sees ticket numbers only.

mod board;
mod day_closer;
mod display;
mod display_keys;
pub mod events;
mod handlers;
mod issuing;
mod tickets;

use salvo::oapi::{Array, BasicType, Object, PathItemType, Ref, SchemaType};

use crate::enums::QUEUE_STATUS;
use crate::http::docs::{self, Access, Doc};
use crate::http::endpoints::Endpoints;
use crate::http::guard::Produces;
use crate::permissions::ADMIN_ACCESS;
use crate::resource::Resource;
use crate::resource::context::Require;
use crate::resource::idempotency::Unkeyed;
pub use day_closer::{PAST_QUEUE_DAYS, close_past_days};
pub use display_keys::DISPLAY_KEYS;
use handlers::{CHECK_IN, TRANSFER_TO, create_ticket, create_visit, show_queue, transfer};
use issuing::TICKET_HOLDER;
pub use issuing::check_in;
pub use tickets::{QUEUE_TICKETS, Service, announce, service_of};

pub static RESOURCES: &[&Resource] = &[&QUEUE_TICKETS, &DISPLAY_KEYS];

/// The queue's routes beyond the tickets' reads and moves.
pub fn endpoints() -> Vec<Endpoints> {
    let mut branch = Endpoints::new(Access::Branch);
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
    let path = "queue/branch-services/{id:num}/queue";
    let op = branch
        .operation("queue", "A service's queue for a day")
        .add_parameter(docs::path_id())
        .add_parameter(docs::query("date", docs::date(), "Default: the branch's today"))
        .add_parameter(docs::query(
            "status",
            docs::string()
                .pattern(format!("^\\s*({0})?\\s*(,\\s*({0})?\\s*)*$", QUEUE_STATUS.values.join("|"))),
            "Comma-separated statuses the lists keep (counts stay whole)",
        ));
    let op = Doc::not_found(Doc::invalid(
        Doc::answers(op, "200", "The queue", docs::envelope(view)),
        "A bad date or status",
    ));
    branch.add(PathItemType::Get, path, "getServiceQueue", show_queue, op);
    let op = branch.operation("queue", "Issue a ticket").add_parameter(docs::path_id());
    let op = Doc::not_found(Doc::answers(op, "201", "The ticket", docs::envelope(ticket())));
    branch.add_taking(PathItemType::Post, path, "issueQueueTicket", &TICKET_HOLDER, create_ticket, op);
    let answer =
        Object::new().property("visit", Ref::from_schema_name("PatientVisit")).property("ticket", ticket());
    let op = branch.operation("queue", "Check a patient in: a visit dated today and its ticket");
    let op = Doc::answers(op, "201", "Visit and ticket", docs::envelope(answer));
    branch.add_taking(PathItemType::Post, "queue/visits", "checkInPatient", &CHECK_IN, create_visit, op);
    let op = branch
        .operation("queue", "Move a ticket to another service of the branch")
        .add_parameter(docs::path_id());
    let answer = Object::new().property("ticket", ticket()).property("new_ticket", ticket());
    let op = Doc::conflict(
        Doc::stale(Doc::not_found(Doc::answers(op, "200", "Both tickets", docs::envelope(answer)))),
        "invalid_transition",
    );
    branch.add_taking(
        PathItemType::Post,
        "queue/queue-tickets/{id:num}/transfer",
        "transferQueueTicket",
        &TRANSFER_TO,
        transfer,
        op,
    );
    let op = branch
        .operation("queue", "Server-Sent Events: a snapshot, then every change of the service's tickets")
        .add_parameter(docs::path_id())
    .add_response(
        "200",
        salvo::oapi::Response::new(
            "event: snapshot (the queue, as GET .../queue answers it), then event: ticket (a changed ticket) \
             on every change; event: end when the stream's access ends; a comment every 15 s",
        )
        .add_content(
            "text/event-stream",
            salvo::oapi::Content::new(
                Object::new()
                    .property("event", docs::string().enum_values(["snapshot", "ticket", "end"]))
                    .property("data", docs::string().description("JSON"))
                    .required("event")
                    .required("data"),
            ),
        ),
    );
    branch.add_behind(
        PathItemType::Get,
        "queue/branch-services/{id:num}/events",
        "streamQueueEvents",
        Some(Produces(&["text/event-stream"])),
        events::follow,
        Doc::not_found(op),
    );
    vec![branch, display_key_creation(), screens()]
}

/// Making a display key: the declared create, answered with the key's secret, which no
/// `Idempotency-Key` keeps (see `display_keys::create`).
fn display_key_creation() -> Endpoints {
    let mut admin = Endpoints::new(Access::User).hoop(Require(ADMIN_ACCESS)).hoop(Unkeyed);
    let path = "branch-services/{branch_service_id:num}/display-keys";
    admin.serve_declared(PathItemType::Post, path, display_keys::create);
    let key = Ref::from_schema_name(crate::resource::docs::schema_name(&DISPLAY_KEYS));
    let shown = Object::new()
        .property("key", docs::string().pattern("^dk_[0-9a-f]{64}$").description("Shown this once"))
        .property("url", docs::string().description("The screen's address, the key in its fragment"))
        .required("key")
        .required("url");
    let created = salvo::oapi::schema::AllOf::new().item(key).item(shown);
    admin.amend(PathItemType::Post, "/api/v1/branch-services/{branch_service_id}/display-keys", move |op| {
        let op = op.description(
            "The answer holds the key's secret, shown this once: only its SHA-256 is stored, so an \
             Idempotency-Key does not replay it, and a repeated request makes another key (revoke \
             the one not used). DELETE revokes a key: its screens go blank at once.",
        );
        Doc::answers(op, "201", "The key, with its secret", docs::envelope(created))
    });
    admin
}

/// The waiting-room screen and its stream, beside the API: the page holds nothing, and the
/// stream asks for a display key, never a user's token.
fn screens() -> Endpoints {
    let mut screens = Endpoints::at_root(Access::Public);
    let op = screens
        .operation("queue", "A waiting-room screen of a branch service (HTML)")
        .description(
            "Open `/display/{id}#key=<display key>` (add `&chime=1` for a sound on each call). The \
             page loads nothing from elsewhere and reads the stream below with the key.",
        )
        .add_parameter(docs::path_id())
        .add_response(
            "200",
            salvo::oapi::Response::new("The page")
                .add_content("text/html", salvo::oapi::Content::new(docs::string())),
        );
    // The page is the same for every service: only an id that can name none is a 404.
    let op = Doc::not_found(op);
    screens.add_behind(
        PathItemType::Get,
        "display/{id:num}",
        "getDisplayPage",
        Some(Produces(&["text/html"])),
        display::page,
        op,
    );
    let nullable = |kind: BasicType| SchemaType::from_iter([kind, BasicType::Null]);
    let number = || {
        Object::new()
            .property("number", docs::string())
            .property("counter", docs::string().schema_type(nullable(BasicType::String)))
            .property("status", docs::string().enum_values(QUEUE_STATUS.values.iter().copied()))
            .required("number")
            .required("status")
    };
    let board = Object::new()
        .property("service", Object::new().property("code", docs::string()).property("name", docs::string()))
        .property("timezone", docs::string())
        .property("date", docs::date())
        .property("serving", Array::new().items(number()))
        .property("waiting", Array::new().items(number()))
        .property("waiting_total", docs::integer())
        .property("called", number().schema_type(nullable(BasicType::Object)));
    let op = screens
        .operation("queue", "A screen's stream: the service's board now and after every change")
        .add_security(salvo::oapi::SecurityRequirement::new(docs::DISPLAY_KEY, Vec::<String>::new()))
        .add_parameter(docs::path_id())
        .add_response(
            "200",
            salvo::oapi::Response::new(
                "event: board (ticket numbers, counters and statuses; `called` is the number just \
                 called) now and on every change; event: end with reason `revoked` when the key is \
                 revoked, `shutdown` when the instance stops; a comment every 15 s",
            )
            .add_content(
                "text/event-stream",
                salvo::oapi::Content::new(
                    Object::new()
                        .property("event", docs::string().enum_values(["board", "end"]))
                        .property("data", board)
                        .required("event")
                        .required("data"),
                ),
            ),
        );
    let op = Doc::not_found(Doc::rejected(
        op,
        "A missing, unknown or revoked display key",
        "The key shows another service",
    ));
    screens.add_behind(
        PathItemType::Get,
        "display/{id:num}/events",
        "streamDisplayEvents",
        Some(Produces(&["text/event-stream"])),
        display::follow,
        op,
    );
    screens
}
