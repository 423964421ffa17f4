//! What a write is held to before it touches a row: rules between fields, computed values
//! within their bounds, fixed fields, the record's state and moves, overlaps, branch access.

use crate::db::Transaction;
use crate::resource::row::Fields;
use serde_json::{Map, Value};

use super::Within;
use super::select::select_one;
use crate::http::error::{ApiError, ApiResult};
use crate::resource::Resource;
use crate::resource::actions::{Amend, Exclusion, Stamp};
use crate::resource::etag::IfMatch;
use crate::resource::field::{Calculated, Kind};

/// A unique (or exclusion) violation the resource declared is the client's mistake (422),
/// not a 500.
pub(super) fn unique_violation(resource: &Resource, e: tokio_postgres::Error) -> ApiError {
    use tokio_postgres::error::SqlState;
    if e.code().is_some_and(|c| [SqlState::UNIQUE_VIOLATION, SqlState::EXCLUSION_VIOLATION].contains(c))
        && let Some(db) = e.as_db_error()
        && let Some(rule) = resource.unique.iter().find(|u| Some(u.index) == db.constraint())
    {
        return ApiError::field(rule.field, rule.message);
    }
    e.into()
}

/// The rules between a whole record's fields, on `record` (the stored record with the sent
/// fields over it): a 422 naming each field they find wrong. What a rule fills in is added to
/// `input`, so that it is written too.
pub(super) fn apply_rules(
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

/// What the hooks computed into `input` (amounts, line totals) must fit its declared bounds,
/// as a sent value must: else a 422 on the sent field that makes it too large.
pub(super) fn check_calculated(resource: &Resource, input: &Map<String, Value>) -> ApiResult<()> {
    let mut errors = crate::http::error::FieldErrors::new();
    for f in resource.all_fields().chain(resource.write_only) {
        match (f.kind, input.get(f.name)) {
            (Kind::Object(structure), Some(Value::Object(object))) => {
                calculated_in(structure.calculated, object, &format!("{}.", f.name), &mut errors);
            }
            (Kind::List { item: Kind::Object(structure), .. }, Some(Value::Array(items))) => {
                for (i, item) in items.iter().enumerate() {
                    if let Value::Object(object) = item {
                        let at = format!("{}.{i}.", f.name);
                        calculated_in(structure.calculated, object, &at, &mut errors);
                    }
                }
            }
            _ => {}
        }
    }
    // A total is checked once its lines are: a line too large says more than the total.
    if errors.is_empty() {
        calculated_in(resource.calculated, input, "", &mut errors);
    }
    if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(errors)) }
}

pub(super) fn calculated_in(
    declared: &[Calculated],
    object: &Map<String, Value>,
    at: &str,
    errors: &mut crate::http::error::FieldErrors,
) {
    for c in declared {
        if let Some(value) = object.get(c.name).and_then(crate::resource::decimal::of)
            && let Err(message) = c.fit(value)
        {
            errors.entry(format!("{at}{}", c.from)).or_default().push(message);
        }
    }
}

/// The names of the columns `input` sets.
pub(super) fn columns_of(resource: &Resource, input: &Map<String, Value>) -> Vec<&'static str> {
    let writable = resource.all_fields().map(|f| f.name);
    let numbered = resource.numbering.map(|n| n.field).filter(|f| resource.field(f).is_none());
    writable
        .chain(resource.server_written.iter().copied())
        .chain(numbered)
        .filter(|n| input.contains_key(*n))
        .collect()
}

/// A row that belongs to a branch is written only for a branch the caller may access.
pub(super) fn check_branch_access(
    resource: &Resource,
    within: Within<'_>,
    input: &Map<String, Value>,
) -> ApiResult<()> {
    let (true, Some(allowed)) = (resource.branch_bound, within.branches) else { return Ok(()) };
    match input.integer("branch_id") {
        Some(branch) if !allowed.contains(&branch) => Err(ApiError::Forbidden {
            code: "branch_forbidden",
            message: "You do not have access to this branch.".into(),
        }),
        _ => Ok(()),
    }
}

/// A change of the state field must be one of the declared moves.
pub(super) fn check_transition(
    resource: &Resource,
    input: &Map<String, Value>,
    before: &Value,
) -> ApiResult<()> {
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
pub(super) async fn check_overlaps(
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
pub(super) async fn guarded<T>(
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
pub(super) fn violated(resource: &Resource, cause: &anyhow::Error) -> Option<&'static Exclusion> {
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
pub(super) fn check_state(
    resource: &Resource,
    input: &Map<String, Value>,
    before: &Value,
) -> ApiResult<Option<Amend>> {
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
pub(super) fn check_fixed(resource: &Resource, input: &Map<String, Value>, before: &Value) -> ApiResult<()> {
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
pub(super) fn stamp_sets(stamps: &[Stamp], user: &str) -> String {
    stamps
        .iter()
        .map(|stamp| match stamp {
            Stamp::User(c) => format!("{c} = {user}, "),
            Stamp::Now(c) => format!("{c} = now(), "),
            Stamp::FirstTime(c) => format!("{c} = coalesce(t.{c}, now()), "),
            Stamp::Increment(c) => format!("{c} = t.{c} + 1, "),
            // Sent under the column's own name: read typed, as the column is.
            Stamp::Sent(field, c) if field == c => format!("{c} = coalesce(r.{c}, t.{c}), "),
            Stamp::Sent(field, c) => format!("{c} = coalesce($1::jsonb ->> '{field}', t.{c}), "),
        })
        .collect()
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
    let version = before.integer("version").unwrap_or_default();
    if if_match.is_some_and(|m| !m.allows(version)) {
        return Err(ApiError::PreconditionFailed);
    }
    Ok(before)
}
