//! Administration (permission `admin.access`): roles, branches, branch services and their
//! staff, users. Reads go through the shared resource handlers; writes that touch more than
//! one table (a role's permissions, a user's roles, provisioning a branch) have handlers of
//! their own, which still validate, audit and answer through the shared machinery.

mod access;
pub mod branches;
mod logo;
pub mod roles;
pub mod services;
pub mod users;

use salvo::oapi::PathItemType;

use crate::http::docs::{self, Access, Doc};
use crate::http::endpoints::Endpoints;
use crate::http::guard::Produces;
use crate::permissions::ADMIN_ACCESS;
use crate::resource::context::Require;
use crate::resource::{Resource, Scope};
pub use access::ADMINISTRATORS_LOCK;

/// The registry's audit trail: administration, master data and account events.
pub static SYSTEM_AUDIT_LOGS: Resource = Resource::audit_trail("system-audit-logs", Scope::Registry);

pub static RESOURCES: &[&Resource] =
    &[&roles::ROLES, &branches::BRANCHES, &services::BRANCH_SERVICES, &users::USERS, &SYSTEM_AUDIT_LOGS];

/// The permission catalogue and a service's staff, for administrators; and the answers the
/// own write handlers of the declared resources give beyond the shared ones.
pub fn endpoints() -> Vec<Endpoints> {
    let mut admin = Endpoints::new(Access::User).hoop(Require(ADMIN_ACCESS));
    let last = "last_administrator: no active user would hold admin.access";
    admin.amend(PathItemType::Delete, "/api/v1/roles/{id}", move |op| {
        Doc::conflict(op, &format!("role_in_use: the role is still held by users; {last}"))
    });
    admin.amend(PathItemType::Put, "/api/v1/roles/{id}", move |op| Doc::conflict(op, last));
    admin.amend(PathItemType::Put, "/api/v1/users/{id}", move |op| Doc::conflict(op, last));
    admin.amend(PathItemType::Delete, "/api/v1/users/{id}", move |op| {
        Doc::conflict(op, &format!("cannot_deactivate_self: an admin cannot deactivate themself; {last}"))
    });
    let op = admin.operation("roles", "The permission catalogue");
    let permission =
        salvo::oapi::Object::new().property("name", docs::string()).property("description", docs::string());
    let op = Doc::answers(
        op,
        "200",
        "Every permission",
        docs::envelope(salvo::oapi::Array::new().items(permission)),
    );
    admin.add(PathItemType::Get, "permissions", "listPermissions", roles::catalogue, op);
    let staff = "branches/{branch_id:num}/services/{id:num}/staff";
    let op = admin
        .operation("branches", "Assign a user to serve at a branch service")
        .add_parameter(docs::path_param("branch_id"))
        .add_parameter(docs::path_id());
    let service =
        salvo::oapi::Ref::from_schema_name(crate::resource::docs::schema_name(&services::BRANCH_SERVICES));
    let op = Doc::not_found(Doc::answers(op, "200", "The service and its staff", docs::envelope(service)));
    admin.add_taking(
        PathItemType::Post,
        staff,
        "addBranchServiceStaff",
        &services::STAFF,
        services::assign,
        op,
    );
    let op = admin
        .operation("branches", "Remove a user from a branch service")
        .add_parameter(docs::path_param("branch_id"))
        .add_parameter(docs::path_id())
        .add_parameter(docs::path_param("user"));
    let op = Doc::not_found(Doc::answers(op, "200", "Removed", docs::envelope(docs::string())));
    admin.add(
        PathItemType::Delete,
        &format!("{staff}/{{user:num}}"),
        "removeBranchServiceStaff",
        services::unassign,
        op,
    );
    logo_endpoints(&mut admin);
    // Creating a branch provisions its schema: a handler of its own, described with the
    // declared branches.
    admin.serve_declared(PathItemType::Post, "branches", branches::create);
    vec![admin]
}

/// `/branches/{id}/logo`: set, read and remove the image of the branch's letterhead.
fn logo_endpoints(admin: &mut Endpoints) {
    use salvo::oapi::{Content, RequestBody, Required};
    let path = "branches/{id:num}/logo";
    let branch = salvo::oapi::Ref::from_schema_name(crate::resource::docs::schema_name(&branches::BRANCHES));
    let if_match = salvo::oapi::Parameter::new("If-Match")
        .location(salvo::oapi::ParameterIn::Header)
        .schema(docs::string())
        .description("ETag of the branch's version being changed; 412 when it changed meanwhile");
    let body = RequestBody::new()
        .required(Required::True)
        .description(format!(
            "The image itself, at most {} KiB; sent as application/octet-stream, it is told by its bytes",
            logo::MAX_LOGO_BYTES / 1024
        ))
        .add_content("image/png", Content::new(docs::binary("image/png")))
        .add_content("image/jpeg", Content::new(docs::binary("image/jpeg")))
        .add_content("application/octet-stream", Content::new(docs::binary("application/octet-stream")));
    let op = admin
        .operation("branches", "Set the logo printed in the branch's letterhead (a PNG or JPEG)")
        .add_parameter(docs::path_id())
        .add_parameter(if_match.clone())
        .request_body(body);
    let op = Doc::answers(op, "200", "The branch, with its logo_media_type", docs::envelope(branch.clone()));
    let op = Doc::invalid(op, "logo: not a PNG or JPEG image, or not the type its Content-Type says");
    let op = Doc::stale(Doc::not_found(op)).add_response(
        "413",
        salvo::oapi::Response::new("The image is too large")
            .add_content("application/json", Content::new(salvo::oapi::Object::new())),
    );
    admin.add(PathItemType::Put, path, "uploadBranchLogo", logo::set, op);
    let op = admin.operation("branches", "The branch's logo").add_parameter(docs::path_id());
    let op = Doc::not_found(
        op.add_response(
            "200",
            salvo::oapi::Response::new("The image, in its media type")
                .add_content("image/png", Content::new(docs::binary("image/png")))
                .add_content("image/jpeg", Content::new(docs::binary("image/jpeg"))),
        ),
    );
    admin.add_behind(
        PathItemType::Get,
        path,
        "getBranchLogo",
        Some(Produces(&["image/png", "image/jpeg"])),
        logo::get,
        op,
    );
    let op = admin
        .operation("branches", "Remove the branch's logo")
        .add_parameter(docs::path_id())
        .add_parameter(if_match);
    let op = Doc::stale(Doc::not_found(Doc::answers(op, "200", "The branch", docs::envelope(branch))));
    admin.add(PathItemType::Delete, path, "deleteBranchLogo", logo::remove, op);
}
