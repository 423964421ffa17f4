//! `/branches`: creating provisions the branch's schema; deleting archives it (the schema
//! and its records stay); the code is fixed once created.

use salvo::prelude::*;
use serde_json::Value;

use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::notify::Topic;
use crate::permissions::ADMIN_ACCESS;
use crate::resource::Context;
use crate::resource::etag::IfMatch;
use crate::resource::field::{Field, Kind, text};
use crate::resource::routes::{respond_created, respond_updated};
use crate::resource::store;
use crate::resource::{Resource, Scope, Shape};
use crate::tenancy::branches::NewBranch;

pub const STATUS: &[&str] = &["provisioning", "active", "archived"];

pub static BRANCHES: Resource = Resource {
    path: "branches",
    table: "branches",
    label: "Branch",
    scope: Scope::Registry,
    fields: &[Field::new("code", Kind::Code { min: 2, max: 10 }).required(), text("name", 120).required()],
    // Holds credentials: accepted, never shown.
    write_only: &[Field::new("database_url", Kind::Text { max: 2000 })],
    read_only: &[
        ("status", Shape::Text),
        ("schema_name", Shape::Text),
        ("schema_version", Shape::Integer),
        ("migration_state", Shape::Text),
        ("migration_error", Shape::Text),
        ("migrated_at", Shape::Timestamp),
    ],
    sort_fields: &["name", "code", "created_at", "id"],
    default_sort: "name",
    search: &["name", "code"],
    filters: &["status"],
    read_permission: ADMIN_ACCESS,
    write_permission: ADMIN_ACCESS,
    ..Resource::DEFAULTS
};

fn text_of(input: &serde_json::Map<String, Value>, field: &str) -> Option<String> {
    input.get(field).and_then(Value::as_str).map(str::to_owned)
}

#[handler]
pub async fn create(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let input = ctx.input(req, &BRANCHES, true).await?;
    let new = NewBranch {
        code: text_of(&input, "code").unwrap_or_default(),
        name: text_of(&input, "name").unwrap_or_default(),
        database_url: text_of(&input, "database_url"),
    };
    // The creator may work in the branch at once; others are granted through /users.
    let branch = crate::tenancy::branches::provision(&ctx.state, new, &[ctx.user.id]).await?;
    let mut client = ctx.state.registry.get().await?;
    let tx = client.transaction().await?;
    let record = store::reload(&tx, &BRANCHES, branch.id).await?;
    store::audit_change(&tx, &ctx.writer(), &BRANCHES, "create", branch.id, None, Some(&record)).await?;
    tx.commit().await?;
    respond_created(req, res, &BRANCHES, record);
    Ok(())
}

#[handler]
pub async fn update(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let id = web::path_id(req, "id")?;
    let if_match = IfMatch::of(req);
    let mut input = ctx.input(req, &BRANCHES, false).await?;
    if input.contains_key("database_url") {
        return Err(ApiError::field(
            "database_url",
            "A branch's database is moved by operators, not through the API.",
        ));
    }
    let mut client = ctx.state.registry.get().await?;
    let tx = client.transaction().await?;
    let current = store::lock_for_change(&tx, &BRANCHES, None, id, if_match.clone()).await?;
    if let Some(code) = input.remove("code")
        && code != current["code"]
    {
        return Err(ApiError::field("code", "The code cannot be changed once the branch exists."));
    }
    let record = store::change(&tx, &ctx.writer(), &BRANCHES, None, id, input, if_match).await?;
    ctx.state.commit(tx, &[Topic::Branch(id)]).await?;
    respond_updated(res, &BRANCHES, record);
    Ok(())
}

/// Archives: the branch leaves every branch list and its routes answer 403; its schema and
/// records are kept.
#[handler]
pub async fn archive(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let id = web::path_id(req, "id")?;
    let mut client = ctx.state.registry.get().await?;
    let tx = client.transaction().await?;
    let before = store::lock_for_change(&tx, &BRANCHES, None, id, IfMatch::of(req)).await?;
    tx.execute(
        "UPDATE branches SET status = 'archived', version = version + 1, updated_at = now(), updated_by = $2
          WHERE id = $1",
        &[&id, &ctx.user.id],
    )
    .await?;
    tx.execute("UPDATE users SET default_branch_id = NULL WHERE default_branch_id = $1", &[&id]).await?;
    let after = store::reload(&tx, &BRANCHES, id).await?;
    store::audit_change(&tx, &ctx.writer(), &BRANCHES, "archive", id, Some(&before), Some(&after)).await?;
    ctx.state.commit(tx, &[Topic::Branch(id)]).await?;
    web::done(res, "Branch archived.");
    Ok(())
}
