//! `/users`: accounts, their roles and the branches they may work in. A user is never
//! deleted while records name them: DELETE deactivates (and ends their sessions).

use salvo::prelude::*;
use serde_json::{Map, Value};

use super::ids;
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::notify::Topic;
use crate::permissions::ADMIN_ACCESS;
use crate::resource::Context;
use crate::resource::etag::IfMatch;
use crate::resource::field::{Field, Kind, boolean, registry_ref, text};
use crate::resource::routes::{respond_created, respond_updated};
use crate::resource::store;
use crate::resource::{Resource, Scope, Shape, Unique};
use crate::state::session::revoke_tokens;

pub static USERS: Resource = Resource {
    path: "users",
    table: "users",
    label: "User",
    scope: Scope::Registry,
    fields: &[
        text("name", 120).required(),
        Field::new("email", Kind::Email).required(),
        Field::new("username", Kind::Username).required(),
        boolean("active").defaulted(),
        registry_ref("default_branch_id", "branches"),
    ],
    write_only: &[
        Field::new("password", Kind::Password).required(),
        Field::new("role_ids", Kind::IdList),
        Field::new("branch_ids", Kind::IdList),
    ],
    computed: &[
        (
            "role_ids",
            "ARRAY(SELECT ur.role_id FROM user_roles ur WHERE ur.user_id = t.id ORDER BY 1)",
            Shape::Ids,
        ),
        (
            "branch_ids",
            "ARRAY(SELECT bu.branch_id FROM branch_users bu WHERE bu.user_id = t.id ORDER BY 1)",
            Shape::Ids,
        ),
    ],
    sort_fields: &["name", "username", "email", "created_at", "id"],
    default_sort: "name",
    search: &["name", "username", "email"],
    filters: &["active"],
    read_permission: ADMIN_ACCESS,
    write_permission: ADMIN_ACCESS,
    unique: &[
        Unique {
            index: "users_username_key",
            field: "username",
            message: "The username has already been taken.",
        },
        Unique { index: "users_email_key", field: "email", message: "The email has already been taken." },
    ],
    ..Resource::DEFAULTS
};

/// Replaces the user's roles and branches with the requested ones (each must exist) and
/// keeps the default branch among the accessible ones.
async fn set_access(
    tx: &deadpool_postgres::Transaction<'_>,
    user: i64,
    input: &Map<String, Value>,
) -> ApiResult<()> {
    if let Some(roles) = ids(input, "role_ids") {
        let known: i64 =
            tx.query_one("SELECT count(*) FROM roles WHERE id = ANY($1)", &[&roles]).await?.get(0);
        if known != roles.len() as i64 {
            return Err(ApiError::field("role_ids", "The selected role ids are invalid."));
        }
        tx.execute("DELETE FROM user_roles WHERE user_id = $1", &[&user]).await?;
        tx.execute(
            "INSERT INTO user_roles (user_id, role_id) SELECT $1, unnest($2::bigint[])",
            &[&user, &roles],
        )
        .await?;
    }
    if let Some(branches) = ids(input, "branch_ids") {
        let known: i64 = tx
            .query_one("SELECT count(*) FROM branches WHERE id = ANY($1) AND status = 'active'", &[&branches])
            .await?
            .get(0);
        if known != branches.len() as i64 {
            return Err(ApiError::field("branch_ids", "The selected branch ids are invalid."));
        }
        tx.execute("DELETE FROM branch_users WHERE user_id = $1", &[&user]).await?;
        tx.execute(
            "INSERT INTO branch_users (user_id, branch_id) SELECT $1, unnest($2::bigint[])",
            &[&user, &branches],
        )
        .await?;
    }
    let default_ok: bool = tx
        .query_one(
            "SELECT u.default_branch_id IS NULL
                    OR EXISTS (SELECT 1 FROM branch_users bu WHERE bu.user_id = u.id AND bu.branch_id = u.default_branch_id)
               FROM users u WHERE u.id = $1",
            &[&user],
        )
        .await?
        .get(0);
    if !default_ok {
        if input.contains_key("default_branch_id") {
            return Err(ApiError::field(
                "default_branch_id",
                "The default branch must be one of the user's branches.",
            ));
        }
        tx.execute("UPDATE users SET default_branch_id = NULL WHERE id = $1", &[&user]).await?;
    }
    // A user without a default branch starts in the first one granted.
    tx.execute(
        "UPDATE users SET default_branch_id = (SELECT min(branch_id) FROM branch_users WHERE user_id = $1)
          WHERE id = $1 AND default_branch_id IS NULL",
        &[&user],
    )
    .await?;
    Ok(())
}

#[handler]
pub async fn create(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let input = ctx.input(req, &USERS, true).await?;
    let password = input.get("password").and_then(Value::as_str).unwrap_or_default().to_owned();
    let hash = ctx.state.hasher.hash(&password).await?;
    let mut client = ctx.state.registry.get().await?;
    let tx = client.transaction().await?;
    let record = store::insert(&tx, &ctx.writer(), &USERS, None, input.clone()).await?;
    let id = record["id"].as_i64().unwrap_or_default();
    tx.execute("UPDATE users SET password_hash = $2 WHERE id = $1", &[&id, &hash]).await?;
    set_access(&tx, id, &input).await?;
    let record = store::reload(&tx, &USERS, id).await?;
    tx.commit().await?;
    respond_created(req, res, &USERS, record);
    Ok(())
}

#[handler]
pub async fn update(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let id = web::path_id(req, "id")?;
    let if_match = IfMatch::of(req);
    let input = ctx.input(req, &USERS, false).await?;
    if id == ctx.user.id && input.get("active") == Some(&Value::Bool(false)) {
        return Err(ApiError::field("active", "You cannot deactivate your own account."));
    }
    let hash = match input.get("password").and_then(Value::as_str) {
        Some(password) => Some(ctx.state.hasher.hash(password).await?),
        None => None,
    };
    let mut client = ctx.state.registry.get().await?;
    let tx = client.transaction().await?;
    store::change(&tx, &ctx.writer(), &USERS, None, id, input.clone(), if_match).await?;
    set_access(&tx, id, &input).await?;
    // A new password or a deactivation ends every session of the user.
    let mut stale = vec![Topic::User(id)];
    if let Some(hash) = &hash {
        tx.execute("UPDATE users SET password_hash = $2 WHERE id = $1", &[&id, hash]).await?;
    }
    if hash.is_some() || input.get("active") == Some(&Value::Bool(false)) {
        stale.extend(revoke_tokens(&tx, id, None).await?);
    }
    let record = store::reload(&tx, &USERS, id).await?;
    ctx.state.commit(tx, &stale).await?;
    respond_updated(res, &USERS, record);
    Ok(())
}

#[handler]
pub async fn deactivate(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let id = web::path_id(req, "id")?;
    if id == ctx.user.id {
        return Err(ApiError::Conflict {
            code: "cannot_deactivate_self",
            message: "You cannot deactivate your own account.".into(),
        });
    }
    let mut client = ctx.state.registry.get().await?;
    let tx = client.transaction().await?;
    let before = store::lock_for_change(&tx, &USERS, None, id, IfMatch::of(req)).await?;
    tx.execute(
        "UPDATE users SET active = false, version = version + 1, updated_at = now(), updated_by = $2 WHERE id = $1",
        &[&id, &ctx.user.id],
    )
    .await?;
    let mut stale = revoke_tokens(&tx, id, None).await?;
    stale.push(Topic::User(id));
    let after = store::reload(&tx, &USERS, id).await?;
    store::audit_change(&tx, &ctx.writer(), &USERS, "deactivate", id, Some(&before), Some(&after)).await?;
    ctx.state.commit(tx, &stale).await?;
    web::done(res, "User deactivated.");
    Ok(())
}
