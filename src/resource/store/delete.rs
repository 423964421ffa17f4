//! Deleting a record: a soft delete, or what the resource's own delete does instead (a
//! declared action such as a void, or its own write: archive, deactivate), audited either way.

use serde_json::{Map, Value};
use tracing::Instrument;

use super::Within;
use super::audit::audit;
use super::change::act_locked;
use super::checks::state_conflict;
use super::select::select_one;
use crate::db::sql::db_span;
use crate::http::error::ApiResult;
use crate::resource::Resource;
use crate::resource::context::{Conn, Writer};
use crate::resource::etag::IfMatch;
use crate::resource::hooks::Deleted;
use crate::resource::idempotency::Answer;
use crate::resource::unit::{Unit, Written};

/// What a DELETE answers: the kept record when the delete kept one (a void), else a message.
pub fn deleted_answer(resource: &Resource, written: &Written) -> Answer {
    match (written.message, &written.record) {
        (Some(message), Some(record)) => Answer::ok(message, record.clone()),
        (Some(message), None) => Answer::done(message),
        (None, _) => Answer::done(&format!("{} deleted.", resource.label)),
    }
}

/// `DELETE /<resource>/{id}`: soft delete (later reads give 404; the row and its history
/// stay), or what the resource's `delete` hook says instead.
pub async fn delete(
    conn: &mut Conn,
    writer: Writer,
    resource: &Resource,
    within: Within<'_>,
    id: i64,
    input: &Map<String, Value>,
    if_match: Option<IfMatch>,
) -> ApiResult<Written> {
    let client = conn.client();
    async {
        let unit = Unit::begin(client, writer).await?;
        let before = unit.lock(resource, within, id, if_match).await?;
        let state = before.get(resource.lock.map_or("", |l| l.field)).and_then(Value::as_str);
        if let Some(lock) = resource.lock
            && let Some(code) = lock.delete
            && lock.holds(state)
        {
            return Err(state_conflict(resource, code, state));
        }
        let user = Some(unit.writer().user_id);
        let written = match resource.hooks.delete(&unit, id, &before, input).await? {
            Some(Deleted::Act(action, input)) => {
                let after = act_locked(&unit, resource, id, action, &input, &before).await?;
                Written { before: Some(before), record: Some(after), message: Some(action.done) }
            }
            Some(Deleted::Own { action, message, topics }) => {
                unit.stale(topics);
                let after = select_one(&*unit, resource, within, id, false).await?;
                audit(&unit, user, action, resource, id, Some(&before), after.as_ref()).await?;
                Written { before: Some(before), record: after, message: Some(message) }
            }
            None => {
                soft_delete_row(&unit, resource, id).await?;
                audit(&unit, user, "delete", resource, id, Some(&before), None).await?;
                Written { before: Some(before), record: None, message: None }
            }
        };
        unit.commit(&deleted_answer(resource, &written)).await?;
        Ok(written)
    }
    .instrument(db_span(resource.table, "DELETE"))
    .await
}

async fn soft_delete_row(unit: &Unit<'_>, resource: &Resource, id: i64) -> ApiResult<()> {
    let sql = format!(
        "UPDATE {} SET deleted_at = now(), updated_at = now(), version = version + 1, updated_by = $2 WHERE id = $1",
        resource.stored_in()
    );
    let stmt = unit.prepare_cached(&sql).await?;
    unit.execute(&stmt, &[&id, &unit.writer().user_id]).await?;
    Ok(())
}
