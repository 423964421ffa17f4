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
//! - `GET /appointments/{id}` answers the appointment slip in PDF when asked for
//!   `application/pdf` (`slip`), like every other printed record.

mod booking;
mod hours;
mod slip;

use crate::resource::Resource;
pub use booking::{APPOINTMENTS, PAST_APPOINTMENT_DAYS, close_past_days};
pub use hours::{DOCTOR_SCHEDULES, SCHEDULE_EXCEPTIONS};

pub static RESOURCES: &[&Resource] = &[&DOCTOR_SCHEDULES, &SCHEDULE_EXCEPTIONS, &APPOINTMENTS];
