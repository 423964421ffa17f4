//! The end of a branch's day: records still open after their local day (a queue ticket never
//! served, an appointment nobody came to) become no-shows, each audited `auto_no_show` without
//! a user, in the statement that moves them. Domains declare what closes ([`PastDays`]); the
//! app runs every declaration every few minutes.

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::types::ToSql;

use super::Resource;
use crate::state::AppState;

/// Records of `resource` in one of the `open` states whose day is over.
pub struct PastDays {
    pub resource: &'static Resource,
    /// The states that end (`waiting`, `called`; `booked`).
    pub open: &'static [&'static str],
    pub ends_in: &'static str,
    /// The column that says the record's day.
    pub day: Day,
    /// What the close means for other records, run in the same transaction with the closed
    /// ids as `$1` (`bigint[]`), writing its own audit rows (`auto_` actions, no user).
    pub follows: Option<&'static str>,
}

/// How a record's day is written.
pub enum Day {
    /// A local date (`queue_date`): over when before the branch's today.
    Date(&'static str),
    /// An instant (`starts_at`): over when before the branch's local midnight today.
    Instant(&'static str),
}

/// Closes what `closings` declare in every active branch; answers how many records closed.
pub async fn close_past_days(state: &AppState, closings: &[&PastDays]) -> anyhow::Result<u64> {
    let branches: Vec<i64> = {
        let client = state.registry.get().await?;
        client
            .query("SELECT id FROM branches WHERE status = 'active'", &[])
            .await?
            .iter()
            .map(|row| row.get(0))
            .collect()
    };
    let mut closed = 0;
    for branch in branches {
        let Ok(route) = state.directory.route(branch).await? else { continue };
        let mut conn = state.directory.connect(&route).await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_one(
                "SELECT (now() AT TIME ZONE $1)::date, date_trunc('day', now() AT TIME ZONE $1) AT TIME ZONE $1",
                &[&route.timezone],
            )
            .await?;
        let (today, midnight): (time::Date, time::OffsetDateTime) = (row.get(0), row.get(1));
        for closing in closings {
            let (column, before): (&str, &(dyn ToSql + Sync)) = match closing.day {
                Day::Date(column) => (column, &today),
                Day::Instant(column) => (column, &midnight),
            };
            let open: Vec<&str> = closing.open.to_vec();
            let sql = format!(
                "WITH closed AS (
                     UPDATE {table} SET status = $2, version = version + 1, updated_at = now()
                      WHERE status = ANY($3) AND deleted_at IS NULL AND {column} < $1{own}
                     RETURNING id)
                 INSERT INTO audit_log (user_id, action, resource, record_id, after)
                 SELECT NULL, 'auto_no_show', $4, id, jsonb_build_object('status', $2::text) FROM closed
                 RETURNING record_id",
                table = closing.resource.stored_in(),
                own = closing.resource.and_own_rows(""),
            );
            let rows = tx.query(&sql, &[before, &closing.ends_in, &open, &closing.resource.path]).await?;
            closed += rows.len() as u64;
            if let Some(follows) = closing.follows.filter(|_| !rows.is_empty()) {
                let ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
                tx.execute(follows, &[&ids]).await?;
            }
        }
        // Each branch in one transaction: its audit rows are the last it writes.
        tx.commit().await?;
    }
    Ok(closed)
}

/// Runs [`close_past_days`] every five minutes until the process ends.
pub fn spawn_day_closer(
    state: Arc<AppState>,
    closings: Vec<&'static PastDays>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(300));
        loop {
            every.tick().await;
            if let Err(e) = close_past_days(&state, &closings).await {
                tracing::warn!(error = format!("{e:#}"), "closing past days failed");
            }
        }
    })
}
