//! `patient_search` kept in name order. The type-ahead sorts a term's matches by name from
//! that table's rows; where the rows lie in name order, a surname's matches share a few pages
//! and the statement costs a third of what it costs over rows in the order patients were
//! registered. Registrations append rows, so the order decays; in each branch's quiet hours
//! (`QUIET_HOURS` of the branch's own time zone) the server puts the table back in order when
//! the correlation of `last_name` with the rows' places has fallen below `KEEP_CORRELATION`
//! (`patient_search_put_in_name_order()`, tenant migration V34).
//!
//! The answers never depend on the order: every statement sorts. The rewrite holds the
//! table's lock for seconds per 100,000 patients (type-ahead, list searches and registrations
//! of that branch wait), gives up at once when a reader holds the table, and never runs twice
//! at once for one branch.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use super::audit_months::Servers;
use super::copy::ident;
use crate::db::directory::Directory;
use crate::state::AppState;

/// How often the branches in their quiet hours are looked at.
const EVERY: Duration = Duration::from_secs(30 * 60);

/// Longest one walk goes on starting rewrites: many branches to rewrite in one night are
/// spread over the next walks, so that none starts long after its quiet hours ended.
const WALK_BUDGET: Duration = Duration::from_secs(25 * 60);

/// The hours of a branch's local day when its search table may be rewritten: 01:00 to 05:00.
pub const QUIET_HOURS: Range<i32> = 1..5;

/// Smaller tables keep their order: their matches are on few pages whatever it is.
pub const MIN_ROWS: i64 = 10_000;

/// The order is kept while `last_name`'s correlation with the rows' places is at least this
/// (1 right after a rewrite; about 0.6 once a third of the rows have moved).
pub const KEEP_CORRELATION: f32 = 0.9;

/// Longest one rewrite may take (a million patients take about a minute).
const REWRITE_TIMEOUT: &str = "10min";

/// Puts `patient_search` in name order in every active branch whose local hour is in `hours`
/// and whose table has at least `min_rows` rows and a correlation below `below`; answers the
/// codes of the branches rewritten. A branch that fails is logged, and the others go on; a
/// walk past `WALK_BUDGET` leaves the rest to the next.
pub async fn put_in_name_order(
    directory: &Directory,
    hours: Range<i32>,
    min_rows: i64,
    below: f32,
) -> anyhow::Result<Vec<String>> {
    let registry = directory.registry().get().await?;
    let rows = registry
        .query(
            "SELECT code, schema_name, database_url FROM branches
              WHERE status = 'active'
                AND extract(hour FROM now() AT TIME ZONE timezone)::int >= $1
                AND extract(hour FROM now() AT TIME ZONE timezone)::int < $2
              ORDER BY id",
            &[&hours.start, &hours.end],
        )
        .await?;
    drop(registry);
    let mut servers = Servers::new(&directory.settings().database_tls);
    let mut rewritten = Vec::new();
    let started = std::time::Instant::now();
    for row in rows {
        if started.elapsed() > WALK_BUDGET {
            tracing::info!("the patient search tables left are for the next walk");
            break;
        }
        let code: String = row.get(0);
        let schema: String = row.get(1);
        let url = row.get::<_, Option<String>>(2).unwrap_or_else(|| directory.registry_url().to_owned());
        let result = async {
            let client = servers.of(&url).await?;
            let tx = client.transaction().await?;
            tx.batch_execute(&format!("SET LOCAL statement_timeout = '{REWRITE_TIMEOUT}'")).await?;
            let sql = format!("SELECT {}.patient_search_put_in_name_order($1, $2)", ident(&schema));
            let put: bool = tx.query_one(&sql, &[&min_rows, &below]).await?.get(0);
            tx.commit().await?;
            anyhow::Ok(put)
        }
        .await;
        match result {
            Ok(true) => {
                tracing::info!(branch = code, "the patient search table was put in name order");
                rewritten.push(code);
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(
                branch = code,
                error = format!("{e:#}"),
                "could not put the patient search table in name order"
            ),
        }
    }
    Ok(rewritten)
}

/// Looks at the branches in their quiet hours now and every half hour.
pub fn spawn(state: Arc<AppState>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(EVERY);
        loop {
            every.tick().await;
            if let Err(e) = put_in_name_order(&state.directory, QUIET_HOURS, MIN_ROWS, KEEP_CORRELATION).await
            {
                tracing::warn!(
                    error = format!("{e:#}"),
                    "looking for patient search tables to put in order failed"
                );
            }
        }
    })
}
