//! `/branches`: creating provisions the branch's schema; deleting archives it (the schema
//! and its records stay); the code is fixed once created.

use crate::resource::row::Fields;
use salvo::prelude::*;
use serde_json::{Map, Value};

use crate::http::error::{ApiError, ApiResult};
use crate::notify::Topic;
use crate::permissions::ADMIN_ACCESS;
use crate::resource::field::{Field, Kind, plain_code, text};
use crate::resource::hooks::{Deleted, Hooks};
use crate::resource::idempotency::Answer;
use crate::resource::input::create_body;
use crate::resource::routes::respond_created;
use crate::resource::{Context, Resource, Scope, Shape, Unit, Writer, created_message};
use crate::tenancy::branches::NewBranch;

pub const STATUS: &[&str] = &["provisioning", "active", "archived"];

pub static BRANCHES: Resource = Resource {
    path: "branches",
    table: "branches",
    label: "Branch",
    plural: "branches",
    scope: Scope::Registry,
    fields: &[
        plain_code("code", 2, 10).required().fixed(),
        text("name", 120).required(),
        // Left out on create: the CLINIC_TIMEZONE setting.
        Field::new("timezone", Kind::TimeZone).defaulted(),
        // The letterhead of the branch's printed documents, with its name and logo.
        text("address", 300),
        Field::new("phone", Kind::Phone),
    ],
    // Holds credentials: accepted, never shown.
    write_only: &[Field::new("database_url", Kind::Text { max: 2000 })],
    read_only: &[
        ("status", Shape::Text),
        ("schema_name", Shape::Text),
        ("schema_version", Shape::Integer),
        ("migration_state", Shape::Text),
        ("migration_error", Shape::Text),
        ("migrated_at", Shape::Timestamp),
        // image/png or image/jpeg when the branch has a logo (`/branches/{id}/logo`).
        ("logo_media_type", Shape::Text),
    ],
    sort_fields: &["name", "code", "created_at", "id"],
    default_sort: "name",
    search: &["name", "code"],
    filters: &["status"],
    read_permission: ADMIN_ACCESS,
    write_permission: ADMIN_ACCESS,
    hooks: &BranchHooks,
    ..Resource::DEFAULTS
};

fn text_of(input: &serde_json::Map<String, Value>, field: &str) -> Option<String> {
    input.text(field).map(str::to_owned)
}

#[handler]
pub async fn create(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let input = create_body(req, depot, &BRANCHES).await?;
    let new = NewBranch {
        code: text_of(&input, "code").unwrap_or_default(),
        name: text_of(&input, "name").unwrap_or_default(),
        database_url: text_of(&input, "database_url"),
        timezone: text_of(&input, "timezone"),
    };
    // The key is claimed before provisioning: a duplicate waits for this request and
    // replays its answer instead of provisioning again.
    let mut client = ctx.state.registry.get().await?;
    let unit = Unit::begin(&mut client, ctx.writer()).await?;
    // The creator may work in the branch at once; others are granted through /users.
    let branch = crate::tenancy::branches::provision(&ctx.state, new, &[ctx.user.id]).await?;
    unit.execute(
        "UPDATE branches SET address = $2, phone = $3 WHERE id = $1",
        &[&branch.id, &text_of(&input, "address"), &text_of(&input, "phone")],
    )
    .await?;
    let record = unit.record(&BRANCHES, branch.id).await?;
    unit.audit(&BRANCHES, "create", branch.id, None, Some(&record)).await?;
    unit.commit(&Answer::created(&created_message(&BRANCHES), record.clone())).await?;
    respond_created(req, res, &BRANCHES, record);
    Ok(())
}

/// A branch's database is chosen once, by whoever provisions it; DELETE archives (the schema
/// and its records stay, its routes answer 403).
pub struct BranchHooks;

#[async_trait]
impl Hooks for BranchHooks {
    async fn prepare(&self, _: &Writer, id: Option<i64>, input: &mut Map<String, Value>) -> ApiResult<()> {
        if id.is_some() && input.contains_key("database_url") {
            return Err(ApiError::field(
                "database_url",
                "A branch's database is moved by operators, not through the API.",
            ));
        }
        Ok(())
    }

    async fn written(
        &self,
        _: &Unit<'_>,
        id: i64,
        _: &Map<String, Value>,
        _: Option<&Value>,
    ) -> ApiResult<Vec<Topic>> {
        Ok(vec![Topic::Branch(id)])
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
        tx.execute(
            "UPDATE branches SET status = 'archived', version = version + 1, updated_at = now(), updated_by = $2
              WHERE id = $1",
            &[&id, &writer.user_id],
        )
        .await?;
        tx.execute("UPDATE users SET default_branch_id = NULL WHERE default_branch_id = $1", &[&id]).await?;
        Ok(Some(Deleted::Own {
            action: "archive",
            message: "Branch archived.",
            topics: vec![Topic::Branch(id)],
        }))
    }
}
