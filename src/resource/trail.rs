//! The audit records a unit keeps until it commits, and the one statement that appends them.
//!
//! Appending takes a lane of the audit log's hash chain (migrations V13, tenants V21), held
//! until the commit: a unit appends its records as the last thing before `COMMIT`, so that
//! it holds the lane for that step only, never for the rest of its work.

use serde_json::Value;

use crate::db::Queries;
use crate::http::error::ApiResult;

/// One audit record a unit appends when it commits.
#[derive(Debug)]
pub(crate) struct Pending {
    pub user_id: Option<i64>,
    pub action: String,
    pub resource: &'static str,
    pub record_id: Option<i64>,
    pub before: Option<Value>,
    pub after: Option<Value>,
    pub route: Option<String>,
}

/// Appends `records` in one statement (a unit's, at its commit).
pub(super) async fn append(client: &impl Queries, records: &[Pending]) -> ApiResult<()> {
    if records.is_empty() {
        return Ok(());
    }
    let stmt = client
        .prepare_cached(
            "INSERT INTO audit_log (user_id, action, resource, record_id, before, after, route)
             SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::jsonb[], $6::jsonb[],
                                  $7::text[])",
        )
        .await?;
    let user_id: Vec<Option<i64>> = records.iter().map(|r| r.user_id).collect();
    let action: Vec<&str> = records.iter().map(|r| r.action.as_str()).collect();
    let resource: Vec<&str> = records.iter().map(|r| r.resource).collect();
    let record_id: Vec<Option<i64>> = records.iter().map(|r| r.record_id).collect();
    let before: Vec<Option<&Value>> = records.iter().map(|r| r.before.as_ref()).collect();
    let after: Vec<Option<&Value>> = records.iter().map(|r| r.after.as_ref()).collect();
    let route: Vec<Option<&str>> = records.iter().map(|r| r.route.as_deref()).collect();
    client.execute(&stmt, &[&user_id, &action, &resource, &record_id, &before, &after, &route]).await?;
    Ok(())
}
