//! Writes: create, change and soft delete, each with its audit record in the same
//! transaction; and the pieces resource-specific handlers build their own writes from.

use crate::db::Queries;
use serde_json::{Map, Value};
use tracing::Instrument;

use super::references::{check_guards, check_references};
use super::select::{reload, select_one};
use super::{Conn, Within, db_span};
use crate::db::RegistryPool;
use crate::http::error::{ApiError, ApiResult};
use crate::resource::Resource;
use crate::resource::etag::IfMatch;

/// A unique violation the resource declared is the client's mistake (422), not a 500.
fn unique_violation(resource: &Resource, e: tokio_postgres::Error) -> ApiError {
    if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
        && let Some(db) = e.as_db_error()
        && let Some(rule) = resource.unique.iter().find(|u| Some(u.index) == db.constraint())
    {
        return ApiError::field(rule.field, rule.message);
    }
    e.into()
}

pub(super) async fn audit(
    client: &impl Queries,
    user_id: i64,
    action: &str,
    resource: &Resource,
    id: i64,
    before: Option<&Value>,
    after: Option<&Value>,
) -> Result<(), tokio_postgres::Error> {
    let stmt = client
        .prepare_cached(
            "INSERT INTO audit_log (user_id, action, resource, record_id, before, after) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .await?;
    client.execute(&stmt, &[&user_id, &action, &resource.path, &id, &before, &after]).await?;
    Ok(())
}

/// Who is writing, and where references to registry rows are checked.
pub struct Writer<'a> {
    pub user_id: i64,
    pub registry: &'a RegistryPool,
}

pub async fn create(
    conn: &mut Conn,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within,
    input: Map<String, Value>,
) -> ApiResult<Value> {
    let client = conn.client();
    async {
        let tx = client.transaction().await?;
        let after = insert(&tx, writer, resource, within, input).await?;
        tx.commit().await?;
        Ok(after)
    }
    .instrument(db_span(resource, "INSERT"))
    .await
}

/// Inserts and audits inside the caller's transaction (for handlers that write more rows
/// alongside, such as a user's roles).
pub async fn insert(
    tx: &deadpool_postgres::Transaction<'_>,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within,
    mut input: Map<String, Value>,
) -> ApiResult<Value> {
    {
        check_references(tx, writer, resource, &mut input, None).await?;
        let mut columns: Vec<&str> =
            resource.fields.iter().map(|f| f.name).filter(|n| input.contains_key(*n)).collect();
        if let Some((column, id)) = within {
            input.insert(column.into(), Value::from(id));
            columns.push(column);
        }
        let list = columns.iter().map(|c| format!("r.{c}")).collect::<Vec<_>>().join(", ");
        let sql = format!(
            "INSERT INTO {table} ({cols}{sep}created_by, updated_by)
             SELECT {list}{sep}$2, $2 FROM jsonb_populate_record(NULL::{table}, $1) r RETURNING id",
            table = resource.table,
            cols = columns.join(", "),
            sep = if columns.is_empty() { "" } else { ", " },
        );
        let stmt = tx.prepare_cached(&sql).await?;
        let id: i64 = tx
            .query_one(&stmt, &[&Value::Object(input), &writer.user_id])
            .await
            .map_err(|e| unique_violation(resource, e))?
            .get(0);
        let after = reload(tx, resource, id).await?;
        audit(tx, writer.user_id, "create", resource, id, None, Some(&after)).await?;
        Ok(after)
    }
}

pub async fn update(
    conn: &mut Conn,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within,
    id: i64,
    input: Map<String, Value>,
    if_match: Option<IfMatch>,
) -> ApiResult<Value> {
    let client = conn.client();
    async {
        let tx = client.transaction().await?;
        let after = change(&tx, writer, resource, within, id, input, if_match).await?;
        tx.commit().await?;
        Ok(after)
    }
    .instrument(db_span(resource, "UPDATE"))
    .await
}

/// Updates and audits inside the caller's transaction.
pub async fn change(
    tx: &deadpool_postgres::Transaction<'_>,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within,
    id: i64,
    mut input: Map<String, Value>,
    if_match: Option<IfMatch>,
) -> ApiResult<Value> {
    {
        let before = lock_for_change(tx, resource, within, id, if_match).await?;
        check_guards(tx, resource, id, &input, &before).await?;
        check_references(tx, writer, resource, &mut input, Some(&before)).await?;
        let columns: Vec<&str> =
            resource.fields.iter().map(|f| f.name).filter(|n| input.contains_key(*n)).collect();
        let sets: String = columns.iter().map(|c| format!("{c} = r.{c}, ")).collect();
        let sql = format!(
            "UPDATE {table} t SET {sets}version = t.version + 1, updated_at = now(), updated_by = $3
               FROM jsonb_populate_record(NULL::{table}, $1) r WHERE t.id = $2",
            table = resource.table,
        );
        let stmt = tx.prepare_cached(&sql).await?;
        tx.execute(&stmt, &[&Value::Object(input), &id, &writer.user_id])
            .await
            .map_err(|e| unique_violation(resource, e))?;
        let after = reload(tx, resource, id).await?;
        audit(tx, writer.user_id, "update", resource, id, Some(&before), Some(&after)).await?;
        Ok(after)
    }
}

/// Soft delete: later reads give 404; the row and its history stay.
pub async fn delete(
    conn: &mut Conn,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within,
    id: i64,
    if_match: Option<IfMatch>,
) -> ApiResult<()> {
    let client = conn.client();
    async {
        let tx = client.transaction().await?;
        let before = lock_for_change(&tx, resource, within, id, if_match).await?;
        let sql = format!(
            "UPDATE {} SET deleted_at = now(), updated_at = now(), version = version + 1, updated_by = $2 WHERE id = $1",
            resource.table
        );
        let stmt = tx.prepare_cached(&sql).await?;
        tx.execute(&stmt, &[&id, &writer.user_id]).await?;
        audit(&tx, writer.user_id, "delete", resource, id, Some(&before), None).await?;
        tx.commit().await?;
        Ok(())
    }
    .instrument(db_span(resource, "DELETE"))
    .await
}

/// Appends an audit record for a change a resource's own handler made.
pub async fn audit_change(
    tx: &deadpool_postgres::Transaction<'_>,
    writer: &Writer<'_>,
    resource: &Resource,
    action: &str,
    id: i64,
    before: Option<&Value>,
    after: Option<&Value>,
) -> ApiResult<()> {
    Ok(audit(tx, writer.user_id, action, resource, id, before, after).await?)
}

/// Locks and returns a record for a resource's own write handler (404 when absent, 412 when
/// `If-Match` no longer matches).
pub async fn lock_for_change(
    tx: &deadpool_postgres::Transaction<'_>,
    resource: &Resource,
    within: Within,
    id: i64,
    if_match: Option<IfMatch>,
) -> ApiResult<Value> {
    let before = select_one(tx, resource, within, id, true).await?.ok_or(ApiError::NotFound)?;
    let version = before.get("version").and_then(Value::as_i64).unwrap_or_default();
    if if_match.is_some_and(|m| !m.allows(version)) {
        return Err(ApiError::PreconditionFailed);
    }
    Ok(before)
}
