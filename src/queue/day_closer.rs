//! The end of a queue day: tickets still waiting or called after their day become no-shows.

use crate::resource::day_close::{self, Day, PastDays};
use crate::state::AppState;

use super::tickets::QUEUE_TICKETS;

pub static PAST_QUEUE_DAYS: PastDays = PastDays {
    resource: &QUEUE_TICKETS,
    open: &["waiting", "called"],
    ends_in: "no_show",
    day: Day::Date("queue_date"),
    follows: None,
};

/// Turns tickets still waiting or called after their local day into no-shows, in every
/// active branch, each audited `auto_no_show` without a user. Answers how many.
pub async fn close_past_days(state: &AppState) -> anyhow::Result<u64> {
    day_close::close_past_days(state, &[&PAST_QUEUE_DAYS]).await
}
