//! The audit trail of writes: every write appends its record in its own transaction.
//!
//! A unit keeps its records and appends them all at its commit (`resource::trail`).

use crate::resource::row::Fields;
use serde_json::Value;

use crate::db::Queries;
use crate::http::error::ApiResult;
use crate::resource::Resource;
use crate::resource::trail::Pending;
use crate::resource::unit::Unit;

/// Keeps the audit record of a write `unit` made, naming the request's route.
pub(super) async fn audit(
    unit: &Unit<'_>,
    user_id: Option<i64>,
    action: &str,
    resource: &Resource,
    id: i64,
    before: Option<&Value>,
    after: Option<&Value>,
) -> Result<(), tokio_postgres::Error> {
    unit.keep_audit(Pending {
        user_id,
        action: action.to_owned(),
        resource: resource.path,
        record_id: Some(id),
        before: before.cloned(),
        after: after.cloned(),
        route: unit.writer().endpoint.as_deref().map(str::to_owned),
    });
    Ok(())
}

/// Audits something that happened to a record without a write through the declarations
/// (logins, reset codes, e-mail changes, reads of patient charts): `actor` did `action` to
/// `record` of `resource`. Written at once: call it last before the transaction commits
/// (inside a unit, use [`Unit::audit_event`]).
pub async fn audit_event(
    client: &impl Queries,
    actor: Option<i64>,
    action: &str,
    resource: &Resource,
    record: Option<i64>,
    details: Value,
) -> ApiResult<()> {
    let stmt = client
        .prepare_cached(
            "INSERT INTO audit_log (user_id, action, resource, record_id, after) VALUES ($1, $2, $3, $4, $5)",
        )
        .await?;
    client.execute(&stmt, &[&actor, &action, &resource.path, &record, &details]).await?;
    Ok(())
}

impl Unit<'_> {
    /// Keeps the audit record of a change this unit made that is not a declared write (a
    /// user assigned to a service).
    pub async fn audit(
        &self,
        resource: &Resource,
        action: &str,
        id: i64,
        before: Option<&Value>,
        after: Option<&Value>,
    ) -> ApiResult<()> {
        Ok(audit(self, Some(self.writer().user_id), action, resource, id, before, after).await?)
    }

    /// Keeps the audit record of an event (a login, a transfer's incoming half), by the
    /// unit's writer.
    pub async fn audit_event(
        &self,
        action: &str,
        resource: &Resource,
        record: Option<i64>,
        details: Value,
    ) -> ApiResult<()> {
        self.keep_audit(Pending {
            user_id: Some(self.writer().user_id),
            action: action.to_owned(),
            resource: resource.path,
            record_id: record,
            before: None,
            after: Some(details),
            route: self.writer().endpoint.as_deref().map(str::to_owned),
        });
        Ok(())
    }

    /// Keeps the audit records of rows handed from one record to another (`before` and
    /// `after` images of each, in the same order).
    pub(crate) fn audit_moved(
        &self,
        resource: &Resource,
        action: &str,
        before: Vec<Value>,
        after: Vec<Value>,
    ) {
        for (b, a) in before.into_iter().zip(after) {
            self.keep_audit(Pending {
                user_id: Some(self.writer().user_id),
                action: action.to_owned(),
                resource: resource.path,
                record_id: b.integer("id"),
                before: Some(b),
                after: Some(a),
                route: None,
            });
        }
    }
}
