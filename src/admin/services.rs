//! `/branches/{branch_id}/services`: the counters of a branch where patients queue, and the
//! staff who serve at each.

use salvo::prelude::*;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::permissions::ADMIN_ACCESS;
use crate::resource::Context;
use crate::resource::field::{boolean, plain_code, registry_ref, text};
use crate::resource::idempotency::Answer;
use crate::resource::input::Input;
use crate::resource::routes::render;
use crate::resource::{Parent, Resource, Scope, Shape, Unique, Unit, Within};

pub static BRANCH_SERVICES: Resource = Resource {
    path: "branches/{branch_id}/services",
    table: "branch_services",
    label: "Branch service",
    plural: "branch services",
    scope: Scope::Registry,
    fields: &[
        text("name", 100).required(),
        // Prefix of this service's queue tickets.
        plain_code("code", 1, 5).required(),
        text("description", 500),
        boolean("active").defaulted(),
        // The clinical service offered here, if any.
        registry_ref("service_id", "services"),
    ],
    computed: &[(
        "staff_ids",
        "ARRAY(SELECT s.user_id FROM branch_service_staff s WHERE s.service_id = t.id ORDER BY 1)",
        Shape::Ids,
    )],
    parent: Some(Parent { param: "branch_id", column: "branch_id", table: "branches", soft_deleted: false }),
    sort_fields: &["name", "code", "created_at", "id"],
    default_sort: "name",
    search: &["name", "code"],
    filters: &["active"],
    read_permission: ADMIN_ACCESS,
    write_permission: ADMIN_ACCESS,
    unique: &[Unique {
        index: "branch_services_code_key",
        field: "code",
        message: "The code is already used by another service of this branch.",
    }],
    ..Resource::DEFAULTS
};

/// The service named by the path, locked in `unit`, or 404.
async fn service(unit: &Unit<'_>, req: &Request) -> ApiResult<(i64, i64, Value)> {
    let branch = web::path_id(req, "branch_id")?;
    let id = web::path_id(req, "id")?;
    let record = unit.lock(&BRANCH_SERVICES, Within::parent("branch_id", branch), id, None).await?;
    Ok((branch, id, record))
}

/// `POST /branches/{branch_id}/services/{id}/staff`'s body: the user who serves there.
pub static STAFF: Input = Input::new("StaffAssignment", &[registry_ref("user_id", "users").required()]);

#[derive(Deserialize)]
struct Staff {
    user_id: i64,
}

#[handler]
pub async fn assign(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let Staff { user_id } = STAFF.read(req, depot).await?;
    let mut client = ctx.state.registry.get().await?;
    let unit = Unit::begin(&mut client, ctx.writer()).await?;
    let (branch, id, _) = service(&unit, req).await?;
    let row = unit
        .query_opt(
            "SELECT u.active, EXISTS (SELECT 1 FROM branch_users bu WHERE bu.user_id = u.id AND bu.branch_id = $2)
               FROM users u WHERE u.id = $1",
            &[&user_id, &branch],
        )
        .await?;
    match row.map(|r| (r.get::<_, bool>(0), r.get::<_, bool>(1))) {
        None | Some((false, _)) => {
            return Err(ApiError::field("user_id", "The selected user id is invalid."));
        }
        Some((true, false)) => {
            return Err(ApiError::field("user_id", "The user has no access to this branch; grant it first."));
        }
        Some((true, true)) => {}
    }
    unit.execute(
        "INSERT INTO branch_service_staff (service_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        &[&id, &user_id],
    )
    .await?;
    let after = unit.record(&BRANCH_SERVICES, id).await?;
    unit.audit(&BRANCH_SERVICES, "assign_staff", id, None, Some(&json!({ "user_id": user_id }))).await?;
    let answer = Answer::ok("Staff assigned.", after);
    unit.commit(&answer).await?;
    render(res, &answer);
    Ok(())
}

#[handler]
pub async fn unassign(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let user_id = web::path_id(req, "user")?;
    let mut client = ctx.state.registry.get().await?;
    let unit = Unit::begin(&mut client, ctx.writer()).await?;
    let (_, id, _) = service(&unit, req).await?;
    let removed = unit
        .execute("DELETE FROM branch_service_staff WHERE service_id = $1 AND user_id = $2", &[&id, &user_id])
        .await?;
    if removed == 0 {
        return Err(ApiError::NotFound);
    }
    unit.audit(&BRANCH_SERVICES, "remove_staff", id, Some(&json!({ "user_id": user_id })), None).await?;
    unit.commit(&Answer::done("Staff removed.")).await?;
    web::done(res, "Staff removed.");
    Ok(())
}
