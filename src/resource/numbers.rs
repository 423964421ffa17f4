//! Server-made document numbers: a counter row per series and local year (and branch, in the
//! registry), bumped with `INSERT ... ON CONFLICT ... DO UPDATE ... RETURNING` inside the
//! transaction that creates the document, so numbers are unique under concurrency and gapless
//! (a rolled-back document rolls its number back too).

use crate::db::Queries;
use crate::http::error::ApiResult;

/// The next number of `series` in the current year of time zone `timezone`: `(year, n)`. In a
/// branch schema (`branch` is `None`) or, for registry documents, per branch.
pub async fn next(
    tx: &impl Queries,
    branch: Option<i64>,
    series: &str,
    timezone: &str,
) -> ApiResult<(i32, i64)> {
    let row = match branch {
        None => {
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO document_counters (series, year, last)
                     VALUES ($1, extract(year FROM now() AT TIME ZONE $2)::int, 1)
                     ON CONFLICT (series, year) DO UPDATE SET last = document_counters.last + 1
                     RETURNING year, last",
                )
                .await?;
            tx.query_one(&stmt, &[&series, &timezone]).await?
        }
        Some(branch) => {
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO document_counters (branch_id, series, year, last)
                     VALUES ($3, $1, extract(year FROM now() AT TIME ZONE $2)::int, 1)
                     ON CONFLICT (branch_id, series, year) DO UPDATE SET last = document_counters.last + 1
                     RETURNING year, last",
                )
                .await?;
            tx.query_one(&stmt, &[&series, &timezone, &branch]).await?
        }
    };
    Ok((row.get(0), row.get(1)))
}
