//! A stored password hash weaker than the server makes now (scrypt, or argon2id at a lower
//! cost) is replaced after a login proves the password, so that every account reaches the
//! current cost by signing in.

use serde_json::json;

use crate::admin::users::USERS;
use crate::http::error::ApiResult;
use crate::resource::audit_event;
use crate::security::password::Hasher;
use crate::state::AppState;

/// Rehashes `password` for `user_id` when `stored` is below the current cost, and audits it
/// as `password_rehash`. Only the hash that was checked is replaced: a password changed in
/// the meantime stays. A hashing line too busy for a second hash leaves it for a later login.
pub(super) async fn upgrade(state: &AppState, user_id: i64, password: &str, stored: &str) -> ApiResult<()> {
    if !state.hasher.needs_rehash(stored) {
        return Ok(());
    }
    let hash = match state.hasher.hash(password).await {
        Ok(hash) => hash,
        Err(e) => {
            tracing::info!(user_id, error = %e, "a weaker password hash was left for a later login");
            return Ok(());
        }
    };
    let mut client = state.registry.get().await?;
    let tx = client.transaction().await?;
    let replaced = tx
        .execute(
            "UPDATE users SET password_hash = $3 WHERE id = $1 AND password_hash = $2",
            &[&user_id, &stored, &hash],
        )
        .await?;
    if replaced > 0 {
        let details = json!({ "from": Hasher::describe(stored), "to": Hasher::describe(&hash) });
        audit_event(&tx, Some(user_id), "password_rehash", &USERS, Some(user_id), details).await?;
    }
    tx.commit().await?;
    Ok(())
}
