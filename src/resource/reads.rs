//! The read audit of the mechanism: a read of patient data (a list, a search, a record
//! opened, a document printed) hands its record to the instance's queue (`db::read_audit`);
//! a read of an audit trail first waits for what is queued.

use serde_json::Value;

use super::Resource;
use super::context::Context;
use super::store::Within;
use crate::db::read_audit::ReadRecord;
use crate::http::error::{ApiError, ApiResult};

/// Records who was shown which records of a resource that audits reads (patients): one row
/// per answer, with the ids it held and the query that selected them.
/// A record nested under another (a patient's attachment) names its parent (`patient_id`),
/// by which the parent's access log finds the read.
pub async fn audit_seen(
    ctx: &Context,
    resource: &'static Resource,
    within: Within<'_>,
    ids: &[i64],
    query: &[(String, String)],
) -> ApiResult<()> {
    let action =
        if query.iter().any(|(k, v)| k == "search" && !v.trim().is_empty()) { "search" } else { "list" };
    let mut details = serde_json::json!({ "ids": ids, "query": query });
    if let (Some(Value::Object(parent)), Value::Object(all)) = (parent_named(within), &mut details) {
        all.extend(parent);
    }
    record_read(ctx, resource.path, action, None, Some(details)).await
}

/// `{column: id}` of the parent a nested record's read was made under, for its audit record.
pub fn parent_named(within: Within<'_>) -> Option<Value> {
    within
        .parent
        .map(|(column, id)| Value::Object(serde_json::Map::from_iter([(column.to_owned(), id.into())])))
}

/// Waits (a little) for the read records this instance has queued to be written, so that
/// an audit trail read after a read shows it. A writer that cannot write them now (the
/// database away) does not hold the trail back: it answers what is written.
pub async fn write_queued_reads(ctx: &Context) {
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), ctx.state.read_audit.flush()).await;
}

/// Hands the record of a read of `resource` (as the audit log names it) to the instance's
/// read audit queue (`db::read_audit`), which writes it to the branch's audit log within
/// milliseconds; 503 `audit_busy` when the queue stays full.
pub async fn record_read(
    ctx: &Context,
    resource: &'static str,
    action: &'static str,
    record_id: Option<i64>,
    details: Option<Value>,
) -> ApiResult<()> {
    let branch =
        ctx.branch.as_ref().ok_or_else(|| anyhow::anyhow!("a read of {resource} outside a branch"))?;
    let record = ReadRecord {
        branch: branch.id,
        at: time::OffsetDateTime::now_utc(),
        user_id: Some(ctx.user.id),
        action,
        resource,
        record_id,
        details,
        route: ctx.endpoint.clone(),
    };
    if !ctx.state.read_audit.record(record).await? {
        return Err(ApiError::unavailable(
            "audit_busy",
            "Reads cannot be recorded right now; try again shortly.",
        ));
    }
    Ok(())
}
