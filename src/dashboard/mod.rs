//! The branch dashboards: a few set-based queries each over the daily rollups the branch
//! schema keeps (`tenants/V10__dashboard_rollups.sql`), dates in the branch's time zone, one
//! "now" per request (read once from the database and passed to every query).

mod common;
mod demographics;
mod figures;
mod flow;
mod surgeries;

use salvo::prelude::*;

use crate::http::endpoints::Endpoints;
use demographics::patient_demographics;
use figures::stats;
use flow::patient_flow;
use surgeries::{calendar, upcoming_surgeries};

/// The five dashboards, each a read over one range or day of the branch.
pub fn endpoints() -> Vec<Endpoints> {
    use crate::http::docs::{self, Access, Doc};
    use salvo::oapi::{Object, PathItemType};
    /// How a dashboard chooses its days.
    enum Days {
        Range,
        Date,
        Ahead,
    }
    fn add(branch: &mut Endpoints, path: &str, handler: impl Handler, summary: &str, days: Days) {
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
        branch.add(PathItemType::Get, &format!("dashboard/{path}"), handler, op);
    }
    let mut branch = Endpoints::new(Access::Branch);
    add(&mut branch, "stats", stats, "Counts and money over a range of local dates", Days::Range);
    add(&mut branch, "calendar", calendar, "Each day of a range: visits and surgeries", Days::Range);
    add(&mut branch, "patient-flow", patient_flow, "One local day of the queue (parameter date)", Days::Date);
    add(
        &mut branch,
        "upcoming-surgeries",
        upcoming_surgeries,
        "Scheduled and confirmed surgeries of the next days (parameter days, 1 to 90)",
        Days::Ahead,
    );
    add(
        &mut branch,
        "patient-demographics",
        patient_demographics,
        "Live patients (registered in the range when one is given)",
        Days::Range,
    );
    vec![branch]
}
