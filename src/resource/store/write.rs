//! Writes: create, change and soft delete, each with its audit record in the same
//! transaction; and the pieces resource-specific handlers build their own writes from.

use deadpool_postgres::Transaction;
use serde_json::{Map, Value};
use tracing::Instrument;

use super::references::{check_guards, check_references};
use super::select::{reload, select_one};
use super::{Conn, Within, db_span};
use crate::db::Queries;
use crate::http::error::{ApiError, ApiResult};
use crate::notify::{self, Topic};
use crate::resource::Resource;
use crate::resource::actions::{Action, Amend, Exclusion, Stamp};
use crate::resource::etag::IfMatch;
use crate::resource::idempotency::{self, Claim, Idempotency};
use crate::state::AppState;

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

/// Audits something that happened to a record without a write through the declarations
/// (logins, reset codes, e-mail changes): `actor` did `action` to `record` of `resource`.
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

/// Who is writing, with the state the write may need (registry references, hashing).
pub struct Writer<'a> {
    pub user_id: i64,
    pub state: &'a AppState,
    /// The branch being written, on branch routes.
    pub branch_id: Option<i64>,
    /// The `Idempotency-Key` of a POST, if it sent one.
    pub idempotency: Option<Idempotency>,
    /// The active branches the writer may work in (rows that belong to a branch).
    pub branches: Vec<i64>,
}

/// A committed write: the record as it now is, and the cached entries it made stale (already
/// published to other instances; the caller drops its own).
pub struct Written {
    /// The record before the write (updates and deletes).
    pub before: Option<Value>,
    pub record: Option<Value>,
    pub topics: Vec<Topic>,
    /// The answer's message, when a hook's delete said something other than "deleted".
    pub message: Option<&'static str>,
    /// The first answer to this request's Idempotency-Key: `(status, body)`; nothing was
    /// written.
    pub replay: Option<(u16, Value)>,
}

impl Written {
    fn replaying(status: u16, body: Value) -> Self {
        Self { before: None, record: None, topics: Vec::new(), message: None, replay: Some((status, body)) }
    }
}

/// Claims the writer's Idempotency-Key in `tx`: `Some` is the first answer to replay.
async fn replay_of(tx: &Transaction<'_>, writer: &Writer<'_>) -> ApiResult<Option<Written>> {
    let Some(idem) = &writer.idempotency else { return Ok(None) };
    Ok(match idempotency::claim(tx, writer.user_id, idem).await? {
        Claim::Replay(status, body) => Some(Written::replaying(status, body)),
        Claim::Fresh => None,
    })
}

/// Keeps the answer with the writer's Idempotency-Key, in the write's transaction.
async fn keep_answer(
    tx: &Transaction<'_>,
    writer: &Writer<'_>,
    status: u16,
    message: &str,
    data: &Value,
) -> ApiResult<()> {
    match &writer.idempotency {
        Some(idem) => idempotency::keep(tx, writer.user_id, idem, status, message, data).await,
        None => Ok(()),
    }
}

/// Publishes `topics` in `tx` and commits it.
async fn commit(tx: Transaction<'_>, topics: &[Topic]) -> ApiResult<()> {
    for topic in topics {
        notify::publish(&tx, *topic).await?;
    }
    tx.commit().await?;
    Ok(())
}

pub async fn create(
    conn: &mut Conn,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within<'_>,
    input: Map<String, Value>,
) -> ApiResult<Written> {
    let client = conn.client();
    async {
        let tx = client.transaction().await?;
        if let Some(replay) = replay_of(&tx, writer).await? {
            return Ok(replay);
        }
        let (record, topics) = insert_with_hooks(&tx, writer, resource, within, input).await?;
        keep_answer(&tx, writer, 201, &format!("{} created.", resource.label), &record).await?;
        commit(tx, &topics).await?;
        Ok(Written { before: None, record: Some(record), topics, message: None, replay: None })
    }
    .instrument(db_span(resource, "INSERT"))
    .await
}

/// Inserts, runs the resource's `written` hook and audits, inside the caller's transaction.
pub async fn insert_with_hooks(
    tx: &Transaction<'_>,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within<'_>,
    mut input: Map<String, Value>,
) -> ApiResult<(Value, Vec<Topic>)> {
    let unset: Vec<&str> = resource
        .all_fields()
        .filter(|f| f.caller_by_default && !input.contains_key(f.name))
        .map(|f| f.name)
        .collect();
    for name in unset {
        input.insert(name.into(), Value::from(writer.user_id));
    }
    check_branch_access(resource, within, &input)?;
    if let Some((column, parent)) = within.parent {
        input.insert(column.into(), Value::from(parent));
    }
    check_references(tx, writer, resource, &mut input, None).await?;
    apply_rules(resource, input.clone(), &mut input)?;
    resource.hooks.resolve(tx, writer, None, &input.clone(), &mut input).await?;
    check_overlaps(tx, resource, 0, &input).await?;
    let id = guarded(tx, resource, 0, &input, insert_row(tx, writer, resource, within, &input)).await?;
    let topics = resource.hooks.written(tx, writer, id, &input, None).await?;
    let after = reload(tx, resource, id).await?;
    audit(tx, writer.user_id, "create", resource, id, None, Some(&after)).await?;
    Ok((after, topics))
}

/// Inserts and audits inside the caller's transaction (for handlers that write more rows
/// alongside).
pub async fn insert(
    tx: &Transaction<'_>,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within<'_>,
    input: Map<String, Value>,
) -> ApiResult<Value> {
    Ok(insert_with_hooks(tx, writer, resource, within, input).await?.0)
}

/// The rules between a whole record's fields, on `record` (the stored record with the sent
/// fields over it): a 422 naming each field they find wrong. What a rule fills in is added to
/// `input`, so that it is written too.
fn apply_rules(
    resource: &Resource,
    mut record: Map<String, Value>,
    input: &mut Map<String, Value>,
) -> ApiResult<()> {
    if resource.rules.is_empty() {
        return Ok(());
    }
    let original = record.clone();
    let mut errors = crate::http::error::FieldErrors::new();
    for rule in resource.rules {
        for (path, message) in rule(&mut record) {
            errors.entry(path).or_default().push(message);
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    for f in resource.all_fields() {
        if let Some(value) = record.remove(f.name)
            && original.get(f.name) != Some(&value)
        {
            input.insert(f.name.into(), value);
        }
    }
    Ok(())
}

/// The names of the columns `input` sets.
fn columns_of(resource: &Resource, input: &Map<String, Value>) -> Vec<&'static str> {
    let writable = resource.all_fields().map(|f| f.name);
    writable.chain(resource.server_written.iter().copied()).filter(|n| input.contains_key(*n)).collect()
}

async fn insert_row(
    tx: &Transaction<'_>,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within<'_>,
    input: &Map<String, Value>,
) -> ApiResult<i64> {
    let mut input = input.clone();
    let mut columns = columns_of(resource, &input);
    if let Some((column, id)) = within.parent {
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
    let row = tx
        .query_one(&stmt, &[&Value::Object(input), &writer.user_id])
        .await
        .map_err(|e| unique_violation(resource, e))?;
    Ok(row.get(0))
}

pub async fn update(
    conn: &mut Conn,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within<'_>,
    id: i64,
    input: Map<String, Value>,
    if_match: Option<IfMatch>,
) -> ApiResult<Written> {
    let client = conn.client();
    async {
        let tx = client.transaction().await?;
        let before = lock_for_change(&tx, resource, within, id, if_match).await?;
        let (record, topics) = change_locked(&tx, writer, resource, id, input, &before).await?;
        commit(tx, &topics).await?;
        Ok(Written { before: Some(before), record: Some(record), topics, message: None, replay: None })
    }
    .instrument(db_span(resource, "UPDATE"))
    .await
}

/// Locks, checks, updates, runs the `written` hook and audits, inside the caller's
/// transaction.
pub async fn change_with_hooks(
    tx: &Transaction<'_>,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within<'_>,
    id: i64,
    input: Map<String, Value>,
    if_match: Option<IfMatch>,
) -> ApiResult<(Value, Vec<Topic>)> {
    let before = lock_for_change(tx, resource, within, id, if_match).await?;
    change_locked(tx, writer, resource, id, input, &before).await
}

/// Updates and audits inside the caller's transaction.
pub async fn change(
    tx: &Transaction<'_>,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within<'_>,
    id: i64,
    input: Map<String, Value>,
    if_match: Option<IfMatch>,
) -> ApiResult<Value> {
    Ok(change_with_hooks(tx, writer, resource, within, id, input, if_match).await?.0)
}

/// Checks, updates, runs the `written` hook and audits a row already locked as `before`.
async fn change_locked(
    tx: &Transaction<'_>,
    writer: &Writer<'_>,
    resource: &Resource,
    id: i64,
    mut input: Map<String, Value>,
    before: &Value,
) -> ApiResult<(Value, Vec<Topic>)> {
    check_transition(resource, &input, before)?;
    let amending = check_state(resource, &input, before)?;
    check_fixed(resource, &input, before)?;
    check_guards(tx, resource, id, &input, before).await?;
    check_references(tx, writer, resource, &mut input, Some(before)).await?;
    let mut merged = before.as_object().cloned().unwrap_or_default();
    merged.extend(input.clone());
    apply_rules(resource, merged.clone(), &mut input)?;
    merged.extend(input.clone());
    resource.hooks.resolve(tx, writer, Some(id), &merged, &mut input).await?;
    merged.extend(input.clone());
    check_overlaps(tx, resource, id, &merged).await?;
    let stamps = amending.map_or(&[][..], |amend| amend.stamps);
    guarded(tx, resource, id, &merged, update_row(tx, writer, resource, id, &input, stamps)).await?;
    let topics = resource.hooks.written(tx, writer, id, &input, Some(before)).await?;
    let after = reload(tx, resource, id).await?;
    let action = amending.map_or("update", |amend| amend.action);
    audit(tx, writer.user_id, action, resource, id, Some(before), Some(&after)).await?;
    Ok((after, topics))
}

/// A row that belongs to a branch is written only for a branch the caller may access.
fn check_branch_access(resource: &Resource, within: Within<'_>, input: &Map<String, Value>) -> ApiResult<()> {
    let (true, Some(allowed)) = (resource.branch_bound, within.branches) else { return Ok(()) };
    match input.get("branch_id").and_then(Value::as_i64) {
        Some(branch) if !allowed.contains(&branch) => Err(ApiError::Forbidden {
            code: "branch_forbidden",
            message: "You do not have access to this branch.".into(),
        }),
        _ => Ok(()),
    }
}

/// A change of the state field must be one of the declared moves.
fn check_transition(resource: &Resource, input: &Map<String, Value>, before: &Value) -> ApiResult<()> {
    let Some(transitions) = resource.transitions else { return Ok(()) };
    let from = before.get(transitions.field).and_then(Value::as_str);
    match (from, input.get(transitions.field).and_then(Value::as_str)) {
        (Some(from), Some(to)) if !transitions.allows(from, to) => {
            Err(state_conflict(resource, "invalid_transition", Some(from)))
        }
        _ => Ok(()),
    }
}

/// The rows in the way of `record` (`id` 0 when new) for each declared exclusion: a 409
/// naming them.
async fn check_overlaps(
    tx: &Transaction<'_>,
    resource: &Resource,
    id: i64,
    record: &Map<String, Value>,
) -> ApiResult<()> {
    for exclusion in resource.exclusions {
        let stmt = tx.prepare_cached(exclusion.overlapping).await?;
        let ids: Vec<i64> = tx.query_one(&stmt, &[&id, &Value::Object(record.clone())]).await?.get(0);
        if !ids.is_empty() {
            return Err(ApiError::conflict_with(
                exclusion.code,
                exclusion.message,
                [("conflicts".to_owned(), Value::from(ids))],
            ));
        }
    }
    Ok(())
}

/// Runs a write of a resource that declares exclusions under a savepoint: when a concurrent
/// writer got in first and the exclusion constraint refuses this one, the savepoint is rolled
/// back and the answer names the rows in the way, as the check before the write would have.
async fn guarded<T>(
    tx: &Transaction<'_>,
    resource: &Resource,
    id: i64,
    record: &Map<String, Value>,
    write: impl Future<Output = ApiResult<T>>,
) -> ApiResult<T> {
    if resource.exclusions.is_empty() {
        return write.await;
    }
    tx.batch_execute("SAVEPOINT guarded_write").await?;
    match write.await {
        Ok(value) => {
            tx.batch_execute("RELEASE SAVEPOINT guarded_write").await?;
            Ok(value)
        }
        Err(ApiError::Internal(cause)) if let Some(exclusion) = violated(resource, &cause) => {
            tx.batch_execute("ROLLBACK TO SAVEPOINT guarded_write").await?;
            check_overlaps(tx, resource, id, record).await?;
            // The row in the way is gone again by now: still a conflict, none to name.
            Err(ApiError::conflict_with(
                exclusion.code,
                exclusion.message,
                [("conflicts".to_owned(), Value::from(Vec::<i64>::new()))],
            ))
        }
        Err(other) => Err(other),
    }
}

/// The declared exclusion an error violated, if any.
fn violated(resource: &Resource, cause: &anyhow::Error) -> Option<&'static Exclusion> {
    let db = cause
        .chain()
        .filter_map(|e| e.downcast_ref::<tokio_postgres::Error>())
        .find_map(|e| e.as_db_error())?;
    if db.code() != &tokio_postgres::error::SqlState::EXCLUSION_VIOLATION {
        return None;
    }
    let constraint = db.constraint()?;
    resource.exclusions.iter().find(|x| x.constraints.contains(&constraint))
}

/// What the record's state allows of this change: `Some(amend)` when it is an amendment.
fn check_state(resource: &Resource, input: &Map<String, Value>, before: &Value) -> ApiResult<Option<Amend>> {
    let Some(lock) = resource.lock else { return Ok(None) };
    let state = before.get(lock.field).and_then(Value::as_str);
    if !lock.holds(state) {
        return Ok(None);
    }
    if let Some(amend) = lock.amend {
        let reason = input.get(amend.reason).and_then(Value::as_str).is_some_and(|r| !r.trim().is_empty());
        if !reason {
            let message = format!(
                "The {} is required to change a record that is {}.",
                amend.reason.replace('_', " "),
                state.unwrap_or_default()
            );
            return Err(ApiError::field(amend.reason, message));
        }
        return Ok(Some(amend));
    }
    if input.keys().all(|k| lock.editable.contains(&k.as_str())) {
        return Ok(None);
    }
    Err(state_conflict(resource, lock.conflict, state))
}

/// A 409 that names the record's current state.
pub fn state_conflict(resource: &Resource, code: &'static str, state: Option<&str>) -> ApiError {
    let state = state.unwrap_or_default().to_owned();
    let label = resource.label.to_lowercase();
    let message = match code {
        "invalid_transition" => format!("This {label} is {state}; it cannot move that way."),
        "ledger_immutable" => "The ledger is append-only: post a correcting entry instead.".to_owned(),
        _ => format!("This {label} is {state} and can no longer be changed that way."),
    };
    ApiError::conflict_with(code, message, [("status".to_owned(), Value::String(state))])
}

/// Fields fixed once created may be sent back unchanged, never changed.
fn check_fixed(resource: &Resource, input: &Map<String, Value>, before: &Value) -> ApiResult<()> {
    let mut errors = crate::http::error::FieldErrors::new();
    for f in resource.all_fields().filter(|f| f.fixed) {
        if let Some(new) = input.get(f.name)
            && Some(new) != before.get(f.name)
        {
            errors
                .entry(f.name.into())
                .or_default()
                .push(format!("The {} cannot be changed once created.", f.name.replace('_', " ")));
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(errors)) }
}

/// `column = value` for each stamp, the user id being `$user`.
fn stamp_sets(stamps: &[Stamp], user: &str) -> String {
    stamps
        .iter()
        .map(|stamp| match stamp {
            Stamp::User(c) => format!("{c} = {user}, "),
            Stamp::Now(c) => format!("{c} = now(), "),
            Stamp::FirstTime(c) => format!("{c} = coalesce(t.{c}, now()), "),
            Stamp::Increment(c) => format!("{c} = t.{c} + 1, "),
            Stamp::Sent(field, c) => format!("{c} = coalesce($1::jsonb ->> '{field}', t.{c}), "),
        })
        .collect()
}

async fn update_row(
    tx: &Transaction<'_>,
    writer: &Writer<'_>,
    resource: &Resource,
    id: i64,
    input: &Map<String, Value>,
    stamps: &[Stamp],
) -> ApiResult<()> {
    let sets: String = columns_of(resource, input).iter().map(|c| format!("{c} = r.{c}, ")).collect();
    let sql = format!(
        "UPDATE {table} t SET {sets}{stamps}version = t.version + 1, updated_at = now(), updated_by = $3
           FROM jsonb_populate_record(NULL::{table}, $1) r WHERE t.id = $2",
        table = resource.table,
        stamps = stamp_sets(stamps, "$3"),
    );
    let stmt = tx.prepare_cached(&sql).await?;
    tx.execute(&stmt, &[&Value::Object(input.clone()), &id, &writer.user_id])
        .await
        .map_err(|e| unique_violation(resource, e))?;
    Ok(())
}

/// Soft delete (later reads give 404; the row and its history stay), or what the resource's
/// `delete` hook does instead.
pub async fn delete(
    conn: &mut Conn,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within<'_>,
    id: i64,
    input: &Map<String, Value>,
    if_match: Option<IfMatch>,
) -> ApiResult<Written> {
    let client = conn.client();
    async {
        let tx = client.transaction().await?;
        let before = lock_for_change(&tx, resource, within, id, if_match).await?;
        if let Some(lock) = resource.lock
            && let Some(code) = lock.delete
            && lock.holds(before.get(lock.field).and_then(Value::as_str))
        {
            return Err(state_conflict(resource, code, before.get(lock.field).and_then(Value::as_str)));
        }
        let written = match resource.hooks.delete(&tx, writer, id, &before, input).await? {
            Some(own) => {
                let after = select_one(&tx, resource, within, id, false).await?;
                audit(&tx, writer.user_id, own.action, resource, id, Some(&before), after.as_ref()).await?;
                Written {
                    before: Some(before),
                    record: after,
                    topics: own.topics,
                    message: Some(own.message),
                    replay: None,
                }
            }
            None => {
                soft_delete_row(&tx, writer, resource, id).await?;
                audit(&tx, writer.user_id, "delete", resource, id, Some(&before), None).await?;
                Written {
                    before: Some(before),
                    record: None,
                    topics: Vec::new(),
                    message: None,
                    replay: None,
                }
            }
        };
        commit(tx, &written.topics).await?;
        Ok(written)
    }
    .instrument(db_span(resource, "DELETE"))
    .await
}

async fn soft_delete_row(
    tx: &Transaction<'_>,
    writer: &Writer<'_>,
    resource: &Resource,
    id: i64,
) -> ApiResult<()> {
    let sql = format!(
        "UPDATE {} SET deleted_at = now(), updated_at = now(), version = version + 1, updated_by = $2 WHERE id = $1",
        resource.table
    );
    let stmt = tx.prepare_cached(&sql).await?;
    tx.execute(&stmt, &[&id, &writer.user_id]).await?;
    Ok(())
}

/// Runs a declared action: the row locked and `If-Match` honoured, the move checked against
/// the current state (409 `invalid_transition` naming it), the new state and the stamps
/// written, the version bumped, the resource's `acted` hook run, and all of it audited under
/// the action's name.
#[allow(clippy::too_many_arguments)]
pub async fn act(
    conn: &mut Conn,
    writer: &Writer<'_>,
    resource: &Resource,
    within: Within<'_>,
    id: i64,
    action: &Action,
    input: Map<String, Value>,
    if_match: Option<IfMatch>,
) -> ApiResult<Written> {
    let client = conn.client();
    async {
        let tx = client.transaction().await?;
        if let Some(replay) = replay_of(&tx, writer).await? {
            return Ok(replay);
        }
        let before = lock_for_change(&tx, resource, within, id, if_match).await?;
        let state = before.get(action.field).and_then(Value::as_str);
        let Some(step) = action.moves.iter().find(|m| state.is_some_and(|s| m.from.contains(&s))) else {
            return Err(state_conflict(resource, "invalid_transition", state));
        };
        let sql = format!(
            "UPDATE {table} t SET {field} = $4, {stamps}version = t.version + 1, updated_at = now(), updated_by = $3
               FROM jsonb_populate_record(NULL::{table}, $1) r WHERE t.id = $2",
            table = resource.table,
            field = action.field,
            stamps = stamp_sets(action.stamps, "$3"),
        );
        let stmt = tx.prepare_cached(&sql).await?;
        tx.execute(&stmt, &[&Value::Object(input.clone()), &id, &writer.user_id, &step.to]).await?;
        let topics = resource.hooks.acted(&tx, writer, id, action, &input, &before).await?;
        let after = reload(&tx, resource, id).await?;
        audit(&tx, writer.user_id, action.name, resource, id, Some(&before), Some(&after)).await?;
        keep_answer(&tx, writer, 200, action.done, &after).await?;
        commit(tx, &topics).await?;
        Ok(Written { before: Some(before), record: Some(after), topics, message: Some(action.done), replay: None })
    }
    .instrument(db_span(resource, "UPDATE"))
    .await
}

/// Appends an audit record for a change a resource's own handler made.
pub async fn audit_change(
    tx: &Transaction<'_>,
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
    tx: &Transaction<'_>,
    resource: &Resource,
    within: Within<'_>,
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
