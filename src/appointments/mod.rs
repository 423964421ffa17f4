//! Appointments: the hours each doctor keeps at a branch (`/doctor-schedules`), the days
//! those hours do not hold (`/schedule-exceptions`), and the appointments booked in them
//! (`/appointments`), all in the branch's schema.
//!
//! - A doctor's weekly hours never overlap (an exclusion constraint; 422 on `start_time`).
//! - Two active appointments of one doctor never overlap (an exclusion constraint, so that
//!   of concurrent bookings of one slot exactly one wins; the others are 409 `slot_taken`),
//!   unless one was overbooked, with a reason, by a holder of `appointments.overbook`.
//! - An appointment lies within the doctor's hours in the branch's time zone, unless
//!   overbooked (422 on `starts_at`).
//! - An appointment moves `booked -> arrived -> in_progress -> completed`, or from `booked`
//!   to `cancelled` (with a reason) or `no_show`, each a declared action; a reschedule is
//!   the declared PUT under `If-Match`. The day closer marks those still booked after their
//!   local day `no_show` (`auto_no_show`).
//! - A doctor's appointments at a branch are published as an iCalendar feed
//!   (`/calendar/doctors/{id}.ics`) to whoever holds a calendar key an administrator made
//!   (`calendar_keys`, `feed`).
//! - A booking queues its reminders in the branch's outbox in its own transaction; a worker
//!   sends them by e-mail when due, at most once however many instances run it
//!   (`reminders.rs`).
//! - `GET /appointments/{id}` answers the appointment slip in PDF when asked for
//!   `application/pdf` (`slip`), like every other printed record.

mod arrival;
mod availability;
mod booking;
mod calendar_keys;
mod feed;
mod hours;
mod ical;
mod recalls;
mod reminders;
mod slip;

use salvo::oapi::{Array, Object, PathItemType};

use crate::http::docs::{self, Access, Doc};
use crate::http::endpoints::Endpoints;
use crate::http::guard::Produces;
use crate::permissions::ADMIN_ACCESS;
use crate::resource::Resource;
use crate::resource::context::Require;
use crate::resource::idempotency::Unkeyed;
pub use availability::{Asked, MAX_DAYS, Slot, free_slots};
pub use booking::{APPOINTMENTS, PAST_APPOINTMENT_DAYS, close_past_days};
pub use calendar_keys::CALENDAR_KEYS;
pub use hours::{DOCTOR_SCHEDULES, SCHEDULE_EXCEPTIONS};
pub use recalls::RECALLS;
pub use reminders::{MAX_ATTEMPTS, send_due, sign, spawn_worker};

pub static RESOURCES: &[&Resource] = &[&DOCTOR_SCHEDULES, &SCHEDULE_EXCEPTIONS, &APPOINTMENTS, &RECALLS];

/// A calendar key as answered (never its secret but by the create).
fn key_schema() -> Object {
    let nullable_time = || {
        docs::timestamp().schema_type(salvo::oapi::SchemaType::from_iter([
            salvo::oapi::BasicType::String,
            salvo::oapi::BasicType::Null,
        ]))
    };
    Object::new()
        .property("id", docs::integer())
        .property("doctor_id", docs::integer())
        .property("branch_id", docs::integer())
        .property(
            "name",
            docs::string().schema_type(salvo::oapi::SchemaType::from_iter([
                salvo::oapi::BasicType::String,
                salvo::oapi::BasicType::Null,
            ])),
        )
        .property("include_patient_names", salvo::oapi::Object::with_type(salvo::oapi::BasicType::Boolean))
        .property(
            "created_by",
            docs::integer().schema_type(salvo::oapi::SchemaType::from_iter([
                salvo::oapi::BasicType::Integer,
                salvo::oapi::BasicType::Null,
            ])),
        )
        .property("last_used_at", nullable_time())
        .property("revoked_at", nullable_time())
        .property("version", docs::integer())
        .property("created_at", docs::timestamp())
        .property("updated_at", docs::timestamp())
        .required("id")
        .required("doctor_id")
        .required("branch_id")
        .required("include_patient_names")
}

/// The routes beside the declared resources: the free slots, the calendar keys of a doctor at
/// a branch (administrators), and the feed they open.
pub fn endpoints() -> Vec<Endpoints> {
    let mut admin = Endpoints::new(Access::Branch).hoop(Require(ADMIN_ACCESS)).hoop(Unkeyed);
    let path = "doctors/{id:num}/calendar-keys";
    let shown = key_schema()
        .property("key", docs::string().pattern("^ck_[0-9a-f]{64}$").description("Shown this once"))
        .property("url", docs::string().description("The feed's address, the key in its query"))
        .required("key")
        .required("url");
    let op = admin
        .operation("appointments", "Make a calendar key of a doctor at the branch")
        .description(
            "The answer holds the key's secret, shown this once: only its SHA-256 is stored, so an \
             Idempotency-Key does not replay it, and a repeated request makes another key (revoke \
             the one not used). The key opens `GET /calendar/doctors/{id}.ics?key=...`: the doctor's \
             appointments at this branch, with patients' names only when `include_patient_names`.",
        )
        .add_parameter(docs::path_id());
    let op = Doc::not_found(Doc::invalid(
        Doc::answers(op, "201", "The key, with its secret", docs::envelope(shown)),
        "A field is wrong",
    ));
    admin.add_taking(
        PathItemType::Post,
        path,
        "createCalendarKey",
        &calendar_keys::KEY_REQUEST,
        calendar_keys::create,
        op,
    );
    let op = admin
        .operation("appointments", "A doctor's calendar keys at the branch, revoked ones too")
        .add_parameter(docs::path_id());
    let keys = docs::envelope(Array::new().items(key_schema()));
    admin.add(
        PathItemType::Get,
        path,
        "listCalendarKeys",
        calendar_keys::list,
        Doc::not_found(Doc::answers(op, "200", "The keys", keys)),
    );
    let op = admin
        .operation("appointments", "Revoke a calendar key: its feed answers 401 from now on")
        .add_parameter(docs::path_id())
        .add_parameter(docs::path_param("key_id"));
    let op = Doc::not_found(Doc::answers(op, "200", "The revoked key", docs::envelope(key_schema())));
    admin.add(
        PathItemType::Delete,
        "doctors/{id:num}/calendar-keys/{key_id:num}",
        "revokeCalendarKey",
        calendar_keys::revoke,
        op,
    );

    let mut feeds = Endpoints::at_root(Access::Public);
    let op = feeds
        .operation("appointments", "A doctor's appointments at a branch, as an iCalendar feed")
        .description(
            "For calendar applications: no token and no X-Branch-Id, the calendar key (a query \
             parameter) names the doctor's branch. An RFC 5545 VCALENDAR with one VEVENT per \
             appointment starting from 30 days ago to 180 days ahead (at most 5,000, the earliest), \
             times in UTC; SUMMARY is the service, with the patient's name only when the key \
             includes names; STATUS is CONFIRMED, or CANCELLED for a cancelled appointment or a \
             no-show.",
        )
        .add_security(salvo::oapi::SecurityRequirement::new(docs::CALENDAR_KEY, Vec::<String>::new()))
        .add_parameter(docs::path_id())
        .add_parameter(
            docs::query("key", docs::string(), "The calendar key (`ck_...`)")
                .required(salvo::oapi::Required::True),
        )
        .add_response(
            "200",
            salvo::oapi::Response::new("The feed")
                .add_content("text/calendar", salvo::oapi::Content::new(docs::string())),
        );
    let op =
        Doc::not_found(Doc::unkeyed(op, "A missing, unknown or revoked calendar key, or another doctor's"));
    feeds.add_behind(
        PathItemType::Get,
        // A pattern, not `num`, which salvo cannot combine with the `.ics` after it.
        "calendar/doctors/{id|[0-9]+}.ics",
        "getDoctorCalendarFeed",
        Some(Produces(&["text/calendar"])),
        feed::feed,
        op,
    );
    vec![availability_endpoints(), admin, feeds]
}

/// The free slots, and recalls made under a patient.
fn availability_endpoints() -> Endpoints {
    let mut branch = Endpoints::new(Access::Branch);
    let slot = Object::new()
        .property("starts_at", docs::timestamp())
        .property("ends_at", docs::timestamp())
        .property("doctor_id", docs::id())
        .required("starts_at")
        .required("ends_at")
        .required("doctor_id");
    let span = "A local date (YYYY-MM-DD, in the branch's zone) or an RFC 3339 date-time";
    let op = branch
        .operation("appointments", "The free slots of a doctor, or of every doctor, over at most 31 days")
        .add_parameter(docs::query(
            "doctor_id",
            docs::id(),
            "One doctor; default every doctor keeping hours here",
        ))
        .add_parameter(docs::query(
            "branch_service_id",
            docs::id(),
            "Only doctors serving this service (all, when it names no staff)",
        ))
        .add_parameter(docs::query("from", docs::day_or_instant(), &format!("{span}; default now")))
        .add_parameter(docs::query(
            "to",
            docs::day_or_instant(),
            &format!(
                "{span}, a date inclusive; default a week after from; at most {MAX_DAYS} days after from"
            ),
        ));
    let op = Doc::invalid(
        Doc::answers(
            op,
            "200",
            "The free slots, in order of time",
            docs::envelope(salvo::oapi::Array::new().items(slot)),
        ),
        "A bad parameter, a span over 31 days, or an unknown doctor or service",
    );
    branch.add(
        PathItemType::Get,
        "appointments/availability",
        "listFreeSlots",
        availability::availability,
        op,
    );
    recalls::add_routes(&mut branch);
    branch
}
