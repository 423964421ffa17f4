//! Server-made document numbers, declared on a resource ([`Numbering`]) and given by the
//! mechanism when a record is created, like its version and ETag.
//!
//! A counter row per series (and local year, when yearly) is bumped with
//! `INSERT ... ON CONFLICT ... DO UPDATE ... RETURNING` inside the transaction that creates
//! the document, so numbers are unique under concurrency and gapless (a rolled-back document
//! rolls its number back too). Branch resources count in their branch schema; registry
//! resources that belong to a branch count per branch in the registry.
//! No hook makes a number: a resource declares its series, and the unit gives it.

use crate::db::Queries;
use crate::http::error::ApiResult;

/// How a resource's records are numbered.
#[derive(Debug, Clone, Copy)]
pub struct Numbering {
    /// The column that holds the number.
    pub field: &'static str,
    /// The counter's name, also `{series}` in the format.
    pub series: &'static str,
    /// `{branch}` (the branch's code), `{series}`, `{year}` (local year) and `{n}` (the
    /// counter, zero-padded to `digits`): `"{branch}-{series}-{year}-{n}"`.
    pub format: &'static str,
    pub digits: usize,
    /// The counter restarts each local year of the branch.
    pub yearly: bool,
    /// A client may send its own number (a certificate from a paper pad): it is kept, and
    /// made numbers skip the ones already taken.
    pub typed: bool,
}

/// The year of a counter that never restarts.
pub(super) const ONCE: i32 = 0;

impl Numbering {
    pub fn render(&self, branch_code: &str, year: i32, n: i64) -> String {
        self.format
            .replace("{branch}", branch_code)
            .replace("{series}", self.series)
            .replace("{year}", &year.to_string())
            .replace("{n}", &format!("{n:0width$}", width = self.digits))
    }
}

pub(super) async fn taken(tx: &impl Queries, table: &str, field: &str, number: &str) -> ApiResult<bool> {
    let sql = format!("SELECT EXISTS (SELECT 1 FROM {table} WHERE {field} = $1)");
    let stmt = tx.prepare_cached(&sql).await?;
    Ok(tx.query_one(&stmt, &[&number]).await?.get(0))
}

/// The next value of `series` in `year`: in the branch schema (`branch` is `None`) or, for
/// registry documents, per branch.
pub(super) async fn next(tx: &impl Queries, branch: Option<i64>, series: &str, year: i32) -> ApiResult<i64> {
    let row = match branch {
        None => {
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO document_counters (series, year, last) VALUES ($1, $2, 1)
                     ON CONFLICT (series, year) DO UPDATE SET last = document_counters.last + 1
                     RETURNING last",
                )
                .await?;
            tx.query_one(&stmt, &[&series, &year]).await?
        }
        Some(branch) => {
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO document_counters (branch_id, series, year, last) VALUES ($3, $1, $2, 1)
                     ON CONFLICT (branch_id, series, year) DO UPDATE SET last = document_counters.last + 1
                     RETURNING last",
                )
                .await?;
            tx.query_one(&stmt, &[&series, &year, &branch]).await?
        }
    };
    Ok(row.get(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_is_rendered_from_its_format() {
        let bt = Numbering {
            field: "number",
            series: "BT",
            format: "{branch}-{series}-{year}-{n}",
            digits: 6,
            yearly: true,
            typed: false,
        };
        assert_eq!(bt.render("MAIN", 2026, 42), "MAIN-BT-2026-000042");
        let mc =
            Numbering { series: "MC", format: "{series}-{branch}-{n}", yearly: false, typed: true, ..bt };
        assert_eq!(mc.render("NORTH", ONCE, 1_234_567), "MC-NORTH-1234567");
    }
}
