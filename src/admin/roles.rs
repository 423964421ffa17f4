//! Roles: a name and a set of permission names from the catalogue.

use salvo::prelude::*;
use serde_json::{Value, json};

use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::notify::Topic;
use crate::permissions::{ADMIN_ACCESS, CATALOGUE, is_known};
use crate::resource::Context;
use crate::resource::etag::IfMatch;
use crate::resource::field::{Field, Kind, text};
use crate::resource::routes::{respond_created, respond_updated};
use crate::resource::store::{self, Writer};
use crate::resource::{Resource, Scope, Shape, Unique};

pub static ROLES: Resource = Resource {
    path: "roles",
    table: "roles",
    label: "Role",
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
    ..Resource::DEFAULTS
};

/// The permission names of a request, all from the catalogue (422 otherwise).
fn requested_permissions(input: &serde_json::Map<String, Value>) -> ApiResult<Option<Vec<String>>> {
    let Some(list) = input.get("permissions").and_then(Value::as_array) else { return Ok(None) };
    let names: Vec<String> = list.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect();
    let unknown: Vec<&str> = names.iter().map(String::as_str).filter(|n| !is_known(n)).collect();
    if !unknown.is_empty() {
        return Err(ApiError::field("permissions", format!("Unknown permission: {}.", unknown.join(", "))));
    }
    Ok(Some(names))
}

async fn set_permissions(
    tx: &deadpool_postgres::Transaction<'_>,
    writer: &Writer<'_>,
    role: i64,
    names: &[String],
) -> ApiResult<()> {
    let before: Vec<String> = tx
        .query_one(
            "SELECT ARRAY(SELECT permission FROM role_permissions WHERE role_id = $1 ORDER BY 1)",
            &[&role],
        )
        .await?
        .get(0);
    tx.execute("DELETE FROM role_permissions WHERE role_id = $1", &[&role]).await?;
    tx.execute(
        "INSERT INTO role_permissions (role_id, permission) SELECT $1, unnest($2::text[])",
        &[&role, &names],
    )
    .await?;
    store::audit_change(tx, writer, &ROLES, "permissions", role, Some(&json!(before)), Some(&json!(names)))
        .await?;
    Ok(())
}

#[handler]
pub async fn create(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let input = ctx.input(req, &ROLES, true).await?;
    let permissions = requested_permissions(&input)?.unwrap_or_default();
    let mut client = ctx.state.registry.get().await?;
    let tx = client.transaction().await?;
    let record = store::insert(&tx, &ctx.writer(), &ROLES, None, input).await?;
    let id = record["id"].as_i64().unwrap_or_default();
    set_permissions(&tx, &ctx.writer(), id, &permissions).await?;
    let record = store::reload(&tx, &ROLES, id).await?;
    // Every holder's permissions may change: too many users to name.
    ctx.state.commit(tx, &[Topic::All]).await?;
    respond_created(req, res, &ROLES, record);
    Ok(())
}

#[handler]
pub async fn update(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let id = web::path_id(req, "id")?;
    let if_match = IfMatch::of(req);
    let input = ctx.input(req, &ROLES, false).await?;
    let permissions = requested_permissions(&input)?;
    let mut client = ctx.state.registry.get().await?;
    let tx = client.transaction().await?;
    store::change(&tx, &ctx.writer(), &ROLES, None, id, input, if_match).await?;
    if let Some(permissions) = permissions {
        set_permissions(&tx, &ctx.writer(), id, &permissions).await?;
    }
    let record = store::reload(&tx, &ROLES, id).await?;
    ctx.state.commit(tx, &[Topic::All]).await?;
    respond_updated(res, &ROLES, record);
    Ok(())
}

/// A role still held by users is kept (409): removing it would silently strip their access.
#[handler]
pub async fn delete(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let id = web::path_id(req, "id")?;
    let mut client = ctx.state.registry.get().await?;
    let tx = client.transaction().await?;
    let before = store::lock_for_change(&tx, &ROLES, None, id, IfMatch::of(req)).await?;
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
    store::audit_change(&tx, &ctx.writer(), &ROLES, "delete", id, Some(&before), None).await?;
    tx.commit().await?;
    web::done(res, "Role deleted.");
    Ok(())
}

#[handler]
pub async fn catalogue(res: &mut Response) {
    let list: Vec<Value> = CATALOGUE
        .iter()
        .map(|(name, description)| json!({ "name": name, "description": description }))
        .collect();
    web::ok(res, "Permissions retrieved.", list);
}
