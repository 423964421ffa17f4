//! `/users`: accounts, their roles and the branches they may work in. A user is never
//! deleted while records name them: DELETE deactivates (and ends their sessions).

use crate::db::Transaction;
use crate::resource::row::Fields;
use salvo::async_trait;
use serde_json::{Map, Value, json};

use super::access::ids;
use crate::http::error::{ApiError, ApiResult};
use crate::notify::Topic;
use crate::permissions::ADMIN_ACCESS;
use crate::resource::field::{Field, Kind, boolean, registry_ref, text};
use crate::resource::hooks::{Deleted, Hooks};
use crate::resource::{Resource, Scope, Shape, Unique, Unit, Writer};
use crate::security::password::check_strength;
use crate::state::session::revoke_tokens;

/// A person's name and e-mail address, as users and their own profile take them.
pub const NAME: Field = text("name", 120).required();
pub const EMAIL: Field = Field::new("email", Kind::Email).required();

pub static USERS: Resource = Resource {
    path: "users",
    table: "users",
    label: "User",
    plural: "users",
    scope: Scope::Registry,
    fields: &[
        NAME,
        EMAIL,
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
    hooks: &UserHooks,
    ..Resource::DEFAULTS
};

/// Replaces the user's roles and branches with the requested ones (each must exist) and
/// keeps the default branch among the accessible ones.
async fn set_access(tx: &Transaction<'_>, user: i64, input: &Map<String, Value>) -> ApiResult<()> {
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

/// A user's password is hashed before the transaction and stored beside the row; roles and
/// branches are rows of their own; DELETE deactivates. A new password or a deactivation ends
/// every session of the user.
pub struct UserHooks;

/// The input key that carries a freshly computed hash from `prepare` to `written`.
const HASH: &str = "password_hash";

#[async_trait]
impl Hooks for UserHooks {
    async fn prepare(
        &self,
        writer: &Writer,
        id: Option<i64>,
        input: &mut Map<String, Value>,
    ) -> ApiResult<()> {
        if id == Some(writer.user_id) && input.is_false("active") {
            return Err(ApiError::field("active", "You cannot deactivate your own account."));
        }
        if let Some(password) = input.text("password") {
            let hash = writer.state.hasher.hash(password).await?;
            input.insert(HASH.into(), Value::String(hash));
        }
        Ok(())
    }

    async fn written(
        &self,
        unit: &Unit<'_>,
        id: i64,
        input: &Map<String, Value>,
        before: Option<&Value>,
    ) -> ApiResult<Vec<Topic>> {
        let tx = &**unit;
        let mut stale = vec![Topic::User(id)];
        // The account as it is after this write, for the rules that compare with it.
        let now = |field: &str| {
            input
                .field(field)
                .or_else(|| before.and_then(|b| b.field(field)))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        if let Some(password) = input.text("password") {
            check_strength(password, &[now("username"), now("email")])
                .map_err(|message| ApiError::field("password", message))?;
            let hash = input.get(HASH).and_then(Value::as_str).unwrap_or_default();
            tx.execute("UPDATE users SET password_hash = $2 WHERE id = $1", &[&id, &hash]).await?;
        }
        if let Some(old) = before.and_then(|b| b.text("email"))
            && old != now("email")
        {
            let details = json!({ "from": old, "to": now("email") });
            unit.audit_event("email_change", &USERS, Some(id), details).await?;
        }
        set_access(tx, id, input).await?;
        let deactivated = input.is_false("active");
        if before.is_some() && (deactivated || input.contains_key("role_ids")) {
            super::access::an_administrator_remains(tx).await?;
        }
        if before.is_some() && (input.contains_key(HASH) || deactivated) {
            stale.extend(revoke_tokens(tx, id, None).await?);
        }
        Ok(stale)
    }

    /// An address change is told to the old address (the owner may not have made it) and to
    /// the new one, once the change is committed.
    async fn committed(&self, writer: &Writer, before: Option<&Value>, after: Option<&Value>) {
        let email = |row: Option<&Value>| row.and_then(|r| r.text("email")).map(str::to_owned);
        let (Some(old), Some(new)) = (email(before), email(after)) else { return };
        if old == new {
            return;
        }
        let name = after.and_then(|a| a.text("name")).unwrap_or_default();
        let text = format!(
            "Hello {name},\n\nThe e-mail address of your clinic-server account was changed from {old} to {new}.\n\
             If you did not make this change, tell your administrator at once: whoever holds the new\n\
             address can reset the account's password.\n"
        );
        writer.state.mailer.send_later(old, "Your e-mail address was changed", text.clone());
        writer.state.mailer.send_later(new, "Your e-mail address was changed", text);
    }

    async fn delete(
        &self,
        unit: &Unit<'_>,
        id: i64,
        _: &Value,
        _: &Map<String, Value>,
    ) -> ApiResult<Option<Deleted>> {
        let tx = &**unit;
        let writer = unit.writer();
        if id == writer.user_id {
            return Err(ApiError::Conflict {
                code: "cannot_deactivate_self",
                message: "You cannot deactivate your own account.".into(),
            });
        }
        tx.execute(
            "UPDATE users SET active = false, version = version + 1, updated_at = now(), updated_by = $2 WHERE id = $1",
            &[&id, &writer.user_id],
        )
        .await?;
        super::access::an_administrator_remains(tx).await?;
        let mut topics = revoke_tokens(tx, id, None).await?;
        topics.push(Topic::User(id));
        Ok(Some(Deleted::Own { action: "deactivate", message: "User deactivated.", topics }))
    }
}
