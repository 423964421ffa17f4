//! Records merged into others, and the rows that follow them: a duplicate patient merged into
//! the patient who stays, the records of one handed to the other, and both undone.
//!
//! Every move locks its rows (in id order, so that two merges cannot deadlock on them),
//! bumps their versions and audits each row with its before and after, in the unit's
//! transaction, like every other write.

use serde_json::Value;
use tokio_postgres::types::ToSql;

use super::Within;
use super::select::select_columns;
use crate::db::Queries;
use crate::http::error::{ApiError, ApiResult};
use crate::resource::unit::Unit;
use crate::resource::{Resource, Scope, registered};

/// A row a move handed over: its id and its version once moved (one more than before).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    pub id: i64,
    pub version: i32,
}

/// The declaration of a branch table whose records may be merged into others, and the
/// column naming the record each was merged into.
fn mergeable(table: &str) -> Option<(&'static Resource, &'static str)> {
    registered()
        .iter()
        .find(|r| r.table == table && r.scope == Scope::Branch)
        .and_then(|r| r.merged_into.map(|column| (*r, column)))
}

/// What a write naming record `id` of `table` gets when that record was merged into another:
/// `None` when it was not (or the table's records are never merged).
pub async fn merged_record(client: &impl Queries, table: &str, id: i64) -> ApiResult<Option<ApiError>> {
    let Some((resource, column)) = mergeable(table) else { return Ok(None) };
    let sql =
        format!("SELECT {column} FROM {} WHERE id = $1{}", resource.stored_in(), resource.and_own_rows(""));
    let stmt = client.prepare_cached(&sql).await?;
    let into: Option<i64> = client.query_opt(&stmt, &[&id]).await?.and_then(|row| row.get(0));
    Ok(into.map(|into| ApiError::Merged {
        into,
        location: Some(format!("{}/{into}", resource.collection_path())),
        write: true,
    }))
}

/// The live record a merged one was merged into, following merges of merges (a patient
/// merged into one later merged into a third): `None` when `id` was not merged.
pub async fn survivor_of(client: &impl Queries, resource: &Resource, id: i64) -> ApiResult<Option<i64>> {
    let Some(column) = resource.merged_into else { return Ok(None) };
    let sql = format!(
        "WITH RECURSIVE chain (id, depth) AS (
             SELECT {column}, 1 FROM {table} WHERE id = $1 AND {column} IS NOT NULL
             UNION ALL
             SELECT t.{column}, c.depth + 1 FROM chain c JOIN {table} t ON t.id = c.id
              WHERE t.{column} IS NOT NULL AND c.depth < 50)
         SELECT id FROM chain ORDER BY depth DESC LIMIT 1",
        table = resource.stored_in(),
    );
    let stmt = client.prepare_cached(&sql).await?;
    Ok(client.query_opt(&stmt, &[&id]).await?.map(|row| row.get(0)))
}

/// The answer images of rows `ids`, deleted ones included, by id.
async fn images(unit: &Unit<'_>, resource: &Resource, ids: &[i64]) -> ApiResult<Vec<Value>> {
    let sql = format!(
        "SELECT coalesce(jsonb_agg(to_jsonb(r) ORDER BY r.id), '[]') FROM (SELECT {} FROM {} t WHERE t.id = ANY($1)) r",
        select_columns(resource),
        resource.stored_in(),
    );
    let stmt = unit.prepare_cached(&sql).await?;
    let all: Value = unit.query_one(&stmt, &[&ids]).await?.get(0);
    Ok(match all {
        Value::Array(rows) => rows,
        _ => Vec::new(),
    })
}

impl Unit<'_> {
    /// Hands to `to` every row of `resource` whose `column` names `from` (within `within`),
    /// deleted rows included; with `only`, just those of these ids that still name `from` (an
    /// undo). Rows are locked in id order, their versions bumped and each audited as `action`
    /// with its before and after; nothing else of them changes (a signature, an amount).
    /// Answers the rows moved, by id.
    #[allow(clippy::too_many_arguments)]
    pub async fn reassign(
        &self,
        resource: &Resource,
        within: Within<'_>,
        column: &'static str,
        from: i64,
        to: i64,
        only: Option<&[i64]>,
        action: &str,
    ) -> ApiResult<Vec<Moved>> {
        if !resource.output_columns().any(|c| c == column) {
            return Err(ApiError::Internal(anyhow::anyhow!("{} has no column {column}", resource.path)));
        }
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&from];
        let mut conditions = vec![format!("t.{column} = $1")];
        conditions.extend(resource.own_rows("t"));
        if let Some(ids) = &only {
            params.push(ids);
            conditions.push(format!("t.id = ANY(${})", params.len()));
        }
        if let Some(value) = resource.once_per_parent {
            params.push(&to);
            conditions.push(format!(
                "NOT EXISTS (SELECT 1 FROM {table} o WHERE o.{column} = ${n} AND o.{value} = t.{value}
                                AND o.deleted_at IS NULL{own})",
                table = resource.stored_in(),
                own = resource.and_own_rows("o"),
                n = params.len(),
            ));
        }
        let (within_conditions, within_params) = within.conditions(params.len());
        conditions.extend(within_conditions);
        params.extend(within_params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)));
        let locking = format!(
            "SELECT coalesce(array_agg(t.id ORDER BY t.id), '{{}}') FROM (SELECT t.id FROM {} t WHERE {} ORDER BY t.id FOR UPDATE OF t) t",
            resource.stored_in(),
            conditions.join(" AND "),
        );
        let stmt = self.prepare_cached(&locking).await?;
        let ids: Vec<i64> = self.query_one(&stmt, &params).await?.get(0);
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let before = images(self, resource, &ids).await?;
        let sql = format!(
            "UPDATE {} t SET {column} = $2, version = t.version + 1, updated_at = now(), updated_by = $3
              WHERE t.id = ANY($1) RETURNING t.id, t.version",
            resource.stored_in(),
        );
        let stmt = self.prepare_cached(&sql).await?;
        let mut moved: Vec<Moved> = self
            .query(&stmt, &[&ids, &to, &self.writer().user_id])
            .await?
            .iter()
            .map(|row| Moved { id: row.get(0), version: row.get(1) })
            .collect();
        moved.sort_by_key(|m| m.id);
        let after = images(self, resource, &ids).await?;
        self.audit_moved(resource, action, before, after);
        Ok(moved)
    }

    /// Merges live record `id` into live record `into` (both of `resource`, which names the
    /// column keeping that): the record is marked and soft-deleted, audited `merged` with its
    /// before and after. Lock both first (`Unit::lock`). Answers the record as it was.
    pub async fn merge_record(&self, resource: &Resource, id: i64, into: i64) -> ApiResult<Value> {
        let column = merge_column(resource)?;
        let before = self.lock(resource, Within::default(), id, None).await?;
        let sql = format!(
            "UPDATE {} t SET {column} = $2, deleted_at = now(), version = t.version + 1, updated_at = now(),
                    updated_by = $3 WHERE t.id = $1",
            resource.stored_in(),
        );
        let stmt = self.prepare_cached(&sql).await?;
        self.execute(&stmt, &[&id, &into, &self.writer().user_id]).await?;
        let mut after = images(self, resource, &[id]).await?.pop().unwrap_or_default();
        after[column] = Value::from(into);
        self.audit(resource, "merged", id, Some(&before), Some(&after)).await?;
        Ok(before)
    }

    /// Undoes [`merge_record`](Self::merge_record): record `id` is live again and merged into
    /// nothing, audited `unmerged`. Answers the record as it now is.
    pub async fn unmerge_record(&self, resource: &Resource, id: i64) -> ApiResult<Value> {
        let column = merge_column(resource)?;
        let sql = format!(
            "SELECT {column} FROM {} WHERE id = $1{} FOR UPDATE",
            resource.stored_in(),
            resource.and_own_rows("")
        );
        let stmt = self.prepare_cached(&sql).await?;
        let into: Option<i64> = self.query_opt(&stmt, &[&id]).await?.and_then(|row| row.get(0));
        let Some(into) = into else { return Err(ApiError::NotFound) };
        let mut before = images(self, resource, &[id]).await?.pop().unwrap_or_default();
        before[column] = Value::from(into);
        let sql = format!(
            "UPDATE {} t SET {column} = NULL, deleted_at = NULL, version = t.version + 1, updated_at = now(),
                    updated_by = $2 WHERE t.id = $1",
            resource.stored_in(),
        );
        let stmt = self.prepare_cached(&sql).await?;
        self.execute(&stmt, &[&id, &self.writer().user_id]).await?;
        let after = self.record(resource, id).await?;
        self.audit(resource, "unmerged", id, Some(&before), Some(&after)).await?;
        Ok(after)
    }
}

fn merge_column(resource: &Resource) -> ApiResult<&'static str> {
    resource
        .merged_into
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("{} records are never merged", resource.path)))
}
