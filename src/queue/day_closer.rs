//! The end of a queue day: tickets still waiting or called after their day become no-shows.

use crate::state::AppState;

use super::tickets::QUEUE_TICKETS;

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
        let today = route.today(&tx).await?;
        let rows = tx
            .query(
                "WITH closed AS (
                     UPDATE queue_tickets SET status = 'no_show', version = version + 1, updated_at = now()
                      WHERE status IN ('waiting', 'called') AND deleted_at IS NULL
                        AND queue_date < $1
                     RETURNING id)
                 INSERT INTO audit_log (user_id, action, resource, record_id, after)
                 SELECT NULL, 'auto_no_show', $2, id, jsonb_build_object('status', 'no_show') FROM closed
                 RETURNING record_id",
                &[&today, &QUEUE_TICKETS.path],
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
