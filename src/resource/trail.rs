//! The audit records a unit keeps until it commits, and the one statement that appends them.
//!
//! Appending takes a lane of the audit log's hash chain (migrations V13, tenants V21), held
//! until the commit: a unit appends its records as the last thing before `COMMIT`, so that
//! it holds the lane for that step only, never for the rest of its work.
//!
//! Each log is 32 lanes: a `BEFORE INSERT` trigger gives every record a lane no other writer
//! holds (advisory locks tried in turn, so writers of one branch do not commit one at a
//! time), the lane's next position and SHA-256(previous hash || the record's columns as a
//! jsonb array, `at` in UTC), moving the lane's head row, held to the commit. A trigger rather
//! than hashing here keeps every writer (units, auth, the read audit's batches, the day
//! closer's one statement) chained with no change of theirs. It chains only the server's own
//! connections (`clinic.audit_chain=on` in their startup options, `db::link`): a record
//! inserted by any other session gets no link and `clinic-server audit verify`
//! (`tenancy::audit_chain`) names it; a setting rather than a role, because the server and
//! an operator often share one. Copies (move, backup, restore) carry rows and heads as they
//! are, triggers off.

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
