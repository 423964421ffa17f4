//! The branch dashboards: a few set-based queries each over the daily rollups the branch
//! schema keeps (`tenants/V10__dashboard_rollups.sql`), dates in the branch's time zone, one
//! "now" per request (read once from the database and passed to every query).
//!
//! A rollup always equals a recount of its rows. A branch schema keeps visits by visit date
//! and status, tickets by queue date and status (with their waits), posted money by
//! transaction date, and live patients by sex, civil status, status, city and birth year, in
//! all and per local day and month of registration. Statement-level triggers on the base
//! tables write them in the writing transaction (soft deletes, status and date changes
//! included): the old rows' keys are taken away and the new rows' added, netted per key,
//! upserted in key order, so concurrent writers cannot deadlock on shared rows; a write that
//! changes no counted column touches none. `dashboard_recount_differences()` lists every key
//! whose kept figures differ from a recount; `tests/api/dashboard_rollups.rs` holds it empty.
//! Age bands move with today: the rollup holds birth years, and only the eight years where a
//! band's birthday falls read the patients.
//!
//! Registration days are in one zone, the branch's. `created_at` is an instant and the zone
//! lives in the registry (maybe another database), so the schema records the zone its
//! registration rollups are in (`branch_info.timezone`, none until the first dashboard read). Every
//! read of them also answers that zone; when it is not the branch's, `common` recounts them in
//! the branch's zone (`dashboard_rezone`, holding patients' writers off meanwhile, so none is
//! counted in the old zone after it) and reads again: a zone change costs one recount, on the
//! first dashboard read after it.

mod appointments;
mod common;
mod demographics;
mod figures;
mod flow;
mod surgeries;

use salvo::prelude::*;

use crate::http::endpoints::Endpoints;
use appointments::appointment_calendar;
use demographics::patient_demographics;
use figures::stats;
use flow::patient_flow;
use surgeries::{calendar, upcoming_surgeries};

/// The six dashboards, each a read over one range or day of the branch.
pub fn endpoints() -> Vec<Endpoints> {
    use crate::http::docs::{self, Access, Doc};
    use salvo::oapi::{Object, PathItemType};
    /// How a dashboard chooses its days.
    enum Days {
        Range,
        Date,
        Ahead,
    }
    fn add(branch: &mut Endpoints, path: &str, id: &str, handler: impl Handler, summary: &str, days: Days) {
        let op = branch.operation("dashboard", summary);
        let op = match days {
            Days::Range => op
                .add_parameter(docs::query("start_date", docs::date(), "Local date; default today"))
                .add_parameter(docs::query(
                    "end_date",
                    docs::date(),
                    "Local date, inclusive; default today; at most 366 days",
                )),
            Days::Date => op.add_parameter(docs::query("date", docs::date(), "Local date; default today")),
            Days::Ahead => op.add_parameter(docs::query(
                "days",
                docs::or_blank(docs::integer().minimum(1).maximum(90)),
                "Default 7",
            )),
        };
        let op = Doc::invalid(
            Doc::answers(op, "200", summary, docs::envelope(Object::new())),
            "A bad date, range or days",
        );
        branch.add(PathItemType::Get, &format!("dashboard/{path}"), id, handler, op);
    }
    let mut branch = Endpoints::new(Access::Branch);
    add(
        &mut branch,
        "stats",
        "getDashboardStats",
        stats,
        "Counts and money over a range of local dates",
        Days::Range,
    );
    add(
        &mut branch,
        "calendar",
        "getDashboardCalendar",
        calendar,
        "Each day of a range: visits and surgeries",
        Days::Range,
    );
    add(
        &mut branch,
        "appointments",
        "getDashboardAppointments",
        appointment_calendar,
        "Each day of a range: appointments by status, in all and per doctor",
        Days::Range,
    );
    add(
        &mut branch,
        "patient-flow",
        "getDashboardPatientFlow",
        patient_flow,
        "One local day of the queue and its appointments booked or arrived (parameter date)",
        Days::Date,
    );
    add(
        &mut branch,
        "upcoming-surgeries",
        "getDashboardUpcomingSurgeries",
        upcoming_surgeries,
        "Scheduled and confirmed surgeries of the next days (parameter days, 1 to 90)",
        Days::Ahead,
    );
    add(
        &mut branch,
        "patient-demographics",
        "getDashboardPatientDemographics",
        patient_demographics,
        "Live patients (registered in the range when one is given)",
        Days::Range,
    );
    vec![branch]
}
