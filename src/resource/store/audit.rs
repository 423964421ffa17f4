//! The audit trail of writes: every write appends its record in its own transaction.

use serde_json::Value;

use crate::db::Queries;
use crate::http::error::ApiResult;
use crate::resource::Resource;
use crate::resource::unit::Unit;

/// Appends the audit record of a write `unit` made, naming the request's route.
pub(super) async fn audit(
    unit: &Unit<'_>,
    user_id: Option<i64>,
    action: &str,
    resource: &Resource,
    id: i64,
    before: Option<&Value>,
    after: Option<&Value>,
) -> Result<(), tokio_postgres::Error> {
    let client = &**unit;
    let route = unit.writer().endpoint.as_deref();
    let stmt = client
        .prepare_cached(
            "INSERT INTO audit_log (user_id, action, resource, record_id, before, after, route)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .await?;
    client.execute(&stmt, &[&user_id, &action, &resource.path, &id, &before, &after, &route]).await?;
    Ok(())
}

/// Audits something that happened to a record without a write through the declarations
/// (logins, reset codes, e-mail changes, reads of patient charts): `actor` did `action` to
/// `record` of `resource`.
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
    /// Appends the audit record of a change this unit made that is not a declared write (a
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

    /// Appends the audit record of an event (a login, a transfer's incoming half).
    pub async fn audit_event(
        &self,
        action: &str,
        resource: &Resource,
        record: Option<i64>,
        details: Value,
    ) -> ApiResult<()> {
        let stmt = self
            .prepare_cached(
                "INSERT INTO audit_log (user_id, action, resource, record_id, after, route) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .await?;
        let route = self.writer().endpoint.as_deref();
        let user = Some(self.writer().user_id);
        self.execute(&stmt, &[&user, &action, &resource.path, &record, &details, &route]).await?;
        Ok(())
    }
}
