//! Roles: a name and a set of permission names from the catalogue.

use crate::resource::row::Fields;
use salvo::prelude::*;
use serde_json::{Map, Value, json};

use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::notify::Topic;
use crate::permissions::{ADMIN_ACCESS, CATALOGUE, is_known};
use crate::resource::field::{Field, Kind, text};
use crate::resource::hooks::{Deleted, Hooks};
use crate::resource::{Resource, Scope, Shape, Unique, Unit, Writer};

pub static ROLES: Resource = Resource {
    path: "roles",
    table: "roles",
    label: "Role",
    plural: "roles",
    scope: Scope::Registry,
    fields: &[text("name", 100).required(), text("description", 500)],
    write_only: &[Field::new("permissions", Kind::NameList)],
    computed: &[
        (
            "permissions",
            "ARRAY(SELECT rp.permission FROM role_permissions rp WHERE rp.role_id = t.id ORDER BY 1)",
            Shape::Names,
        ),
        ("users_count", "(SELECT count(*) FROM user_roles ur WHERE ur.role_id = t.id)", Shape::Integer),
    ],
    sort_fields: &["name", "created_at", "id"],
    default_sort: "name",
    search: &["name", "description"],
    read_permission: ADMIN_ACCESS,
    write_permission: ADMIN_ACCESS,
    unique: &[Unique { index: "roles_name_key", field: "name", message: "The name has already been taken." }],
    hooks: &RoleHooks,
    ..Resource::DEFAULTS
};

/// The permission names of a request, all from the catalogue (422 otherwise).
fn requested_permissions(input: &Map<String, Value>) -> ApiResult<Option<Vec<String>>> {
    let Some(list) = input.list("permissions") else { return Ok(None) };
    let names: Vec<String> = list.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect();
    let unknown: Vec<&str> = names.iter().map(String::as_str).filter(|n| !is_known(n)).collect();
    if !unknown.is_empty() {
        return Err(ApiError::field("permissions", format!("Unknown permission: {}.", unknown.join(", "))));
    }
    Ok(Some(names))
}

/// A role's permissions are rows of their own; a role in use is never deleted.
pub struct RoleHooks;

#[async_trait]
impl Hooks for RoleHooks {
    async fn prepare(&self, _: &Writer, _: Option<i64>, input: &mut Map<String, Value>) -> ApiResult<()> {
        requested_permissions(input).map(|_| ())
    }

    async fn written(
        &self,
        unit: &Unit<'_>,
        role: i64,
        input: &Map<String, Value>,
        before: Option<&Value>,
    ) -> ApiResult<Vec<Topic>> {
        let tx = &**unit;
        let names = match requested_permissions(input)? {
            Some(names) => names,
            // A new role starts with none; an update without the list keeps them.
            None if before.is_none() => Vec::new(),
            None => return Ok(Vec::new()),
        };
        tx.execute("DELETE FROM role_permissions WHERE role_id = $1", &[&role]).await?;
        tx.execute(
            "INSERT INTO role_permissions (role_id, permission) SELECT $1, unnest($2::text[])",
            &[&role, &names],
        )
        .await?;
        super::access::an_administrator_remains(tx).await?;
        // Every holder's permissions may change: too many users to name.
        Ok(vec![Topic::All])
    }

    /// A role still held by users is kept (409): removing it would silently strip their access.
    async fn delete(
        &self,
        unit: &Unit<'_>,
        id: i64,
        _: &Value,
        _: &Map<String, Value>,
    ) -> ApiResult<Option<Deleted>> {
        let tx = &**unit;
        let holders: i64 =
            tx.query_one("SELECT count(*) FROM user_roles WHERE role_id = $1", &[&id]).await?.get(0);
        if holders > 0 {
            return Err(ApiError::Conflict {
                code: "role_in_use",
                message: format!(
                    "The role is assigned to {holders} user{}; take it from them first.",
                    if holders == 1 { "" } else { "s" }
                ),
            });
        }
        tx.execute("DELETE FROM roles WHERE id = $1", &[&id]).await?;
        super::access::an_administrator_remains(tx).await?;
        Ok(Some(Deleted::Own { action: "delete", message: "Role deleted.", topics: Vec::new() }))
    }
}

#[handler]
pub async fn catalogue(res: &mut Response) {
    let list: Vec<Value> = CATALOGUE
        .iter()
        .map(|(name, description)| json!({ "name": name, "description": description }))
        .collect();
    web::ok(res, "Permissions retrieved.", list);
}
