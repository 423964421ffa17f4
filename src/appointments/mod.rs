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
//! - A booking queues its reminders in the branch's outbox in its own transaction; a worker
//!   sends them by e-mail when due, at most once however many instances run it
//!   (`reminders.rs`).
//! - `GET /appointments/{id}` answers the appointment slip in PDF when asked for
//!   `application/pdf` (`slip`), like every other printed record.

mod arrival;
mod availability;
mod booking;
mod hours;
mod recalls;
mod reminders;
mod slip;

use salvo::oapi::{Object, PathItemType};

use crate::http::docs::{self, Access, Doc};
use crate::http::endpoints::Endpoints;
use crate::resource::Resource;
pub use availability::{Asked, MAX_DAYS, Slot, free_slots};
pub use booking::{APPOINTMENTS, PAST_APPOINTMENT_DAYS, close_past_days};
pub use hours::{DOCTOR_SCHEDULES, SCHEDULE_EXCEPTIONS};
pub use recalls::RECALLS;
pub use reminders::{MAX_ATTEMPTS, send_due, sign, spawn_worker};

pub static RESOURCES: &[&Resource] = &[&DOCTOR_SCHEDULES, &SCHEDULE_EXCEPTIONS, &APPOINTMENTS, &RECALLS];

/// The routes beside the declared resources: the free slots.
pub fn endpoints() -> Vec<Endpoints> {
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
    branch.add(PathItemType::Get, "appointments/availability", availability::availability, op);
    recalls::add_routes(&mut branch);
    vec![branch]
}
