//! Who may administer: the rule that one active administrator always remains, and the id
//! lists that grant roles and branches.

use crate::http::error::{ApiError, ApiResult};
use crate::permissions::ADMIN_ACCESS;
use crate::resource::row::Fields;

/// The advisory lock changes of who administers take turns on (`hashtext` of this).
pub const ADMINISTRATORS_LOCK: &str = "clinic:administrators";

/// Refuses, with 409 `last_administrator`, a change that would leave no active user holding
/// `admin.access`: nobody could then administer anything. Runs in the changing transaction
/// after its rows are written. Such changes take turns on one advisory lock, and the count
/// is a statement of its own after the lock, so it sees what the one before committed: two
/// administrators demoting each other at once cannot both succeed.
pub(super) async fn an_administrator_remains(tx: &crate::db::Transaction<'_>) -> ApiResult<()> {
    tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&ADMINISTRATORS_LOCK]).await?;
    let remains: bool = tx
        .query_one(
            "SELECT EXISTS (
                 SELECT 1 FROM users u
                   JOIN user_roles ur ON ur.user_id = u.id
                   JOIN role_permissions rp ON rp.role_id = ur.role_id AND rp.permission = $1
                  WHERE u.active)",
            &[&ADMIN_ACCESS],
        )
        .await?
        .get(0);
    if remains {
        return Ok(());
    }
    Err(ApiError::Conflict {
        code: "last_administrator",
        message: "This change would leave no active user who may administer the service.".into(),
    })
}

/// Ids from a validated id-list field.
pub(super) fn ids(input: &serde_json::Map<String, serde_json::Value>, field: &str) -> Option<Vec<i64>> {
    input.list(field).map(|a| a.iter().filter_map(|v| v.as_i64()).collect())
}
