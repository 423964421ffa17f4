//! Administration (permission `admin.access`): roles, branches, branch services and their
//! staff, users. Reads go through the shared resource handlers; writes that touch more than
//! one table (a role's permissions, a user's roles, provisioning a branch) have handlers of
//! their own, which still validate, audit and answer through the shared machinery.

mod access;
pub mod branches;
pub mod roles;
pub mod services;
pub mod users;

use salvo::oapi::PathItemType;
use salvo::prelude::*;

use crate::http::docs::{self, Access, Doc};
use crate::permissions::ADMIN_ACCESS;
use crate::resource::context::Require;
use crate::resource::{Resource, Scope};
pub use access::ADMINISTRATORS_LOCK;

/// The registry's audit trail: administration, master data and account events.
pub static SYSTEM_AUDIT_LOGS: Resource = Resource::audit_trail("system-audit-logs", Scope::Registry);

pub static RESOURCES: &[&Resource] =
    &[&roles::ROLES, &branches::BRANCHES, &services::BRANCH_SERVICES, &users::USERS, &SYSTEM_AUDIT_LOGS];

pub fn router() -> Router {
    let generic = |r| crate::resource::routes::router(r);
    Router::new()
        .hoop(Require(ADMIN_ACCESS))
        .push(Router::with_path("permissions").get(roles::catalogue))
        .push(generic(&roles::ROLES))
        .push(
            generic(&services::BRANCH_SERVICES).push(
                Router::with_path("{id:num}/staff")
                    .post(services::assign)
                    .push(Router::with_path("{user:num}").delete(services::unassign)),
            ),
        )
        // Creating a branch provisions its schema: a handler of its own.
        .push(Router::with_path("branches").post(branches::create))
        .push(generic(&branches::BRANCHES))
        .push(generic(&users::USERS))
        .push(generic(&SYSTEM_AUDIT_LOGS))
}

/// The routes that are not plain resource operations, and what the own write handlers answer
/// beyond the shared ones (call after the resources are documented).
pub fn document(doc: &mut Doc) {
    let last = "last_administrator: no active user would hold admin.access";
    doc.amend(PathItemType::Delete, "/api/v1/roles/{id}", |op| {
        Doc::conflict(op, &format!("role_in_use: the role is still held by users; {last}"))
    });
    doc.amend(PathItemType::Put, "/api/v1/roles/{id}", |op| Doc::conflict(op, last));
    doc.amend(PathItemType::Put, "/api/v1/users/{id}", |op| Doc::conflict(op, last));
    doc.amend(PathItemType::Delete, "/api/v1/users/{id}", |op| {
        Doc::conflict(op, &format!("cannot_deactivate_self: an admin cannot deactivate themself; {last}"))
    });
    let op = Doc::operation(Access::User, "roles", "The permission catalogue");
    let permission =
        salvo::oapi::Object::new().property("name", docs::string()).property("description", docs::string());
    let op = Doc::answers(
        op,
        "200",
        "Every permission",
        docs::envelope(salvo::oapi::Array::new().items(permission)),
    );
    doc.add(PathItemType::Get, "/api/v1/permissions", op);
    let staff = "/api/v1/branches/{branch_id}/services/{id}/staff";
    let op = Doc::operation(Access::User, "branches", "Assign a user to serve at a branch service")
        .add_parameter(docs::path_param("branch_id"))
        .add_parameter(docs::path_id());
    let op = Doc::with_body(
        op,
        salvo::oapi::Object::new().property("user_id", docs::integer()).required("user_id"),
    );
    let service =
        salvo::oapi::Ref::from_schema_name(crate::resource::docs::schema_name(&services::BRANCH_SERVICES));
    doc.add(
        PathItemType::Post,
        staff,
        Doc::not_found(Doc::answers(op, "200", "The service and its staff", docs::envelope(service))),
    );
    let op = Doc::operation(Access::User, "branches", "Remove a user from a branch service")
        .add_parameter(docs::path_param("branch_id"))
        .add_parameter(docs::path_id())
        .add_parameter(docs::path_param("user"));
    doc.add(
        PathItemType::Delete,
        &format!("{staff}/{{user}}"),
        Doc::not_found(Doc::answers(op, "200", "Removed", docs::envelope(docs::string()))),
    );
}
