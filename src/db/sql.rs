//! Plumbing of statements built at run time, for the mechanism and for domains that write
//! their own SQL: bind parameters, the page aggregate, the one row of an aggregate, and the
//! client span of a statement.

use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::http::error::ApiResult;

/// A bind parameter of a statement built at run time.
pub type Param = Box<dyn ToSql + Sync + Send>;

pub fn as_refs(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)).collect()
}

/// The rows `r` of a page, in their order, as the JSON array text PostgreSQL makes of them and
/// as ids: the server writes the text into its answer without parsing it.
pub const PAGE_AGGREGATE: &str =
    "SELECT coalesce(json_agg(r), '[]')::text AS data, coalesce(array_agg(r.id), '{}') AS ids";

/// The one row an aggregate statement answers.
pub fn one_row(rows: Vec<Row>) -> ApiResult<Row> {
    rows.into_iter().next().ok_or_else(|| anyhow::anyhow!("an aggregate answered no row").into())
}

/// A client span for one statement on `table`, with the user and the branch of the request
/// it serves.
pub fn db_span(table: &'static str, operation: &'static str) -> tracing::Span {
    let (user, branch) = crate::telemetry::caller();
    tracing::info_span!(
        "db",
        otel.name = format!("{operation} {table}"),
        otel.kind = "client",
        db.system.name = "postgresql",
        db.operation.name = operation,
        db.collection.name = table,
        user.id = user,
        branch.id = branch,
    )
}
