//! Changing a record: by PUT (the fields sent) or by a declared action (a move of its state),
//! the row locked, `If-Match` honoured, the version bumped, audited before and after.

use serde_json::{Map, Value};
use tracing::Instrument;

use super::Within;
use super::audit::audit;
use super::checks::{
    apply_rules, check_calculated, check_fixed, check_overlaps, check_state, check_transition, columns_of,
    guarded, lock_for_change, stamp_sets, state_conflict, unique_violation,
};
use super::references::{check_guards, check_references};
use super::select::reload;
use crate::db::sql::db_span;
use crate::http::error::ApiResult;
use crate::resource::Resource;
use crate::resource::actions::{Action, Stamp};
use crate::resource::context::{Conn, Writer};
use crate::resource::etag::IfMatch;
use crate::resource::idempotency::Answer;
use crate::resource::unit::{Unit, Written};

pub fn updated_message(resource: &Resource) -> String {
    format!("{} updated.", resource.label)
}

/// `PUT /<resource>/{id}`: one unit that changes the fields sent.
pub async fn update(
    conn: &mut Conn,
    writer: Writer,
    resource: &Resource,
    within: Within<'_>,
    id: i64,
    input: Map<String, Value>,
    if_match: Option<IfMatch>,
) -> ApiResult<Written> {
    let client = conn.client();
    async {
        let unit = Unit::begin(client, writer).await?;
        let before = unit.lock(resource, within, id, if_match).await?;
        let record = change_locked(&unit, resource, id, input, &before).await?;
        unit.commit(&Answer::ok(&updated_message(resource), record.clone())).await?;
        Ok(Written { before: Some(before), record: Some(record), message: None })
    }
    .instrument(db_span(resource.table, "UPDATE"))
    .await
}

/// A declared action on its route: one unit that moves the record.
#[allow(clippy::too_many_arguments)]
pub async fn act(
    conn: &mut Conn,
    writer: Writer,
    resource: &Resource,
    within: Within<'_>,
    id: i64,
    action: &Action,
    input: Map<String, Value>,
    if_match: Option<IfMatch>,
) -> ApiResult<Written> {
    let client = conn.client();
    async {
        let unit = Unit::begin(client, writer).await?;
        let before = unit.lock(resource, within, id, if_match).await?;
        let after = act_locked(&unit, resource, id, action, &input, &before).await?;
        unit.commit(&Answer::ok(action.done, after.clone())).await?;
        Ok(Written { before: Some(before), record: Some(after), message: Some(action.done) })
    }
    .instrument(db_span(resource.table, "UPDATE"))
    .await
}

impl Unit<'_> {
    /// Locks a record for this unit and answers it (404 when absent, 412 when `If-Match` no
    /// longer matches).
    pub async fn lock(
        &self,
        resource: &Resource,
        within: Within<'_>,
        id: i64,
        if_match: Option<IfMatch>,
    ) -> ApiResult<serde_json::Value> {
        lock_for_change(self, resource, within, id, if_match).await
    }

    /// A record as it is now in this unit.
    pub async fn record(&self, resource: &Resource, id: i64) -> ApiResult<Value> {
        reload(&**self, resource, id).await
    }

    /// Changes the fields of `input` (as a PUT would): locked, checked, hooks run, version
    /// bumped, audited before and after; answers the record as it now is.
    pub async fn change(
        &self,
        resource: &Resource,
        within: Within<'_>,
        id: i64,
        input: Map<String, Value>,
        if_match: Option<IfMatch>,
    ) -> ApiResult<Value> {
        let before = self.lock(resource, within, id, if_match).await?;
        change_locked(self, resource, id, input, &before).await
    }

    /// Runs a declared action (routed or not): the record locked and `If-Match` honoured,
    /// the move checked against its state (409 `invalid_transition` naming it), the new state
    /// and the stamps written, the version bumped, the resource's `acted` hook run, all of it
    /// audited under the action's name; answers the record as it now is.
    pub async fn act(
        &self,
        resource: &Resource,
        within: Within<'_>,
        id: i64,
        action: &Action,
        input: Map<String, Value>,
        if_match: Option<IfMatch>,
    ) -> ApiResult<Value> {
        let before = self.lock(resource, within, id, if_match).await?;
        act_locked(self, resource, id, action, &input, &before).await
    }
}

/// Checks, updates, runs the `written` hook and audits a row already locked as `before`.
async fn change_locked(
    unit: &Unit<'_>,
    resource: &Resource,
    id: i64,
    mut input: Map<String, Value>,
    before: &Value,
) -> ApiResult<Value> {
    check_transition(resource, &input, before)?;
    let amending = check_state(resource, &input, before)?;
    check_fixed(resource, &input, before)?;
    check_guards(unit, resource, id, &input, before).await?;
    check_references(&**unit, unit.writer(), resource, &mut input, Some(before)).await?;
    let mut merged = before.as_object().cloned().unwrap_or_default();
    merged.extend(input.clone());
    apply_rules(resource, merged.clone(), &mut input)?;
    merged.extend(input.clone());
    resource.hooks.resolve(unit, Some(id), &merged, &mut input).await?;
    check_calculated(resource, &input)?;
    merged.extend(input.clone());
    check_overlaps(unit, resource, id, &merged).await?;
    let stamps = amending.map_or(&[][..], |amend| amend.stamps);
    guarded(unit, resource, id, &merged, update_row(unit, resource, id, &input, stamps)).await?;
    let topics = resource.hooks.written(unit, id, &input, Some(before)).await?;
    unit.stale(topics);
    let after = reload(&**unit, resource, id).await?;
    let action = amending.map_or("update", |amend| amend.action);
    audit(unit, Some(unit.writer().user_id), action, resource, id, Some(before), Some(&after)).await?;
    Ok(after)
}

async fn update_row(
    unit: &Unit<'_>,
    resource: &Resource,
    id: i64,
    input: &Map<String, Value>,
    stamps: &[Stamp],
) -> ApiResult<()> {
    let sets: String = columns_of(resource, input).iter().map(|c| format!("\"{c}\" = r.{c}, ")).collect();
    let sql = format!(
        "UPDATE {table} t SET {sets}{stamps}version = t.version + 1, updated_at = now(), updated_by = $3
           FROM jsonb_populate_record(NULL::{table}, $1) r WHERE t.id = $2",
        table = resource.stored_in(),
        stamps = stamp_sets(stamps, "$3"),
    );
    let stmt = unit.prepare_cached(&sql).await?;
    unit.execute(&stmt, &[&Value::Object(input.clone()), &id, &unit.writer().user_id])
        .await
        .map_err(|e| unique_violation(resource, e))?;
    Ok(())
}

/// A declared move of a row already locked as `before`.
pub(super) async fn act_locked(
    unit: &Unit<'_>,
    resource: &Resource,
    id: i64,
    action: &Action,
    input: &Map<String, Value>,
    before: &Value,
) -> ApiResult<Value> {
    let state = before.get(action.field).and_then(Value::as_str);
    let Some(step) = action.moves.iter().find(|m| state.is_some_and(|s| m.from.contains(&s))) else {
        return Err(state_conflict(resource, "invalid_transition", state));
    };
    let sql = format!(
        "UPDATE {table} t SET {field} = $4, {stamps}version = t.version + 1, updated_at = now(), updated_by = $3
           FROM jsonb_populate_record(NULL::{table}, $1) r WHERE t.id = $2",
        table = resource.stored_in(),
        field = action.field,
        stamps = stamp_sets(action.stamps, "$3"),
    );
    let user = unit.writer().user_id;
    let stmt = unit.prepare_cached(&sql).await?;
    unit.execute(&stmt, &[&Value::Object(input.clone()), &id, &user, &step.to]).await?;
    let topics = resource.hooks.acted(unit, id, action, input, before).await?;
    unit.stale(topics);
    let after = reload(&**unit, resource, id).await?;
    audit(unit, Some(user), action.name, resource, id, Some(before), Some(&after)).await?;
    Ok(after)
}
