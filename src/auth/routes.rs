//! `/auth/*` routes.

use salvo::oapi::{Object, PathItemType};
use salvo::prelude::*;
use serde_json::{Map, Value, json};

use super::body::{
    CHANGE_PASSWORD, ChangePassword, LOGIN, Login, PROFILE, Profile, RESET_CODE, RESET_PASSWORD,
    SWITCH_BRANCH, SwitchBranch, VERIFY_CODE,
};
use super::{mfa, reset};
use crate::admin::users::USERS;
use crate::db::Queries;
use crate::http::docs::{self, Access, Doc};
use crate::http::endpoints::Endpoints;
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::notify;
use crate::resource::idempotency::{Answer, Unkeyed};
use crate::resource::routes::render;
use crate::resource::{Context, Unit, Within, audit_event};
use crate::security::password::check_strength;
use crate::state::AppState;
use crate::state::session::{Origin, issue_token, revoke_tokens};

/// The active branches a user may work in, as branch summaries.
async fn branch_summaries(client: &impl Queries, user_id: i64) -> ApiResult<Vec<Value>> {
    let rows = client
        .query(
            "SELECT b.id, b.name, b.code FROM branches b JOIN branch_users bu ON bu.branch_id = b.id
              WHERE bu.user_id = $1 AND b.status = 'active' ORDER BY b.name, b.id",
            &[&user_id],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|b| json!({ "id": b.get::<_, i64>("id"), "name": b.get::<_, String>("name"), "code": b.get::<_, String>("code") }))
        .collect())
}

/// The user as login shows it, plus roles and permissions for front-ends.
async fn user_view(client: &impl Queries, user_id: i64) -> ApiResult<Value> {
    let row = client
        .query_one(
            "SELECT u.id, u.name, u.email, u.username, u.default_branch_id,
                    ARRAY(SELECT r.name FROM user_roles ur JOIN roles r ON r.id = ur.role_id
                           WHERE ur.user_id = u.id ORDER BY r.name) AS roles,
                    ARRAY(SELECT DISTINCT rp.permission FROM user_roles ur
                            JOIN role_permissions rp ON rp.role_id = ur.role_id WHERE ur.user_id = u.id) AS permissions
               FROM users u WHERE u.id = $1",
            &[&user_id],
        )
        .await?;
    let mut permissions: Vec<String> = row.get("permissions");
    permissions.sort();
    Ok(json!({
        "id": row.get::<_, i64>("id"),
        "name": row.get::<_, String>("name"),
        "email": row.get::<_, String>("email"),
        "username": row.get::<_, String>("username"),
        "default_branch_id": row.get::<_, Option<i64>>("default_branch_id"),
        "roles": row.get::<_, Vec<String>>("roles"),
        "permissions": permissions,
    }))
}

#[handler]
async fn login(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let state = AppState::of(depot);
    state.limits.login.hit(&format!("login:{}", state.client_ip(req)), res)?;
    let Login { username, password, otp } = LOGIN.read(req, depot).await?;
    let mut client = state.registry.get().await?;
    let row = client
        .query_opt(
            "SELECT id, name, email, username, password_hash, default_branch_id
               FROM users WHERE lower(username) = lower($1) AND active",
            &[&username],
        )
        .await?;
    // Unknown users are checked against a decoy hash: same cost, same answer.
    let stored = row.as_ref().map(|r| r.get::<_, String>("password_hash"));
    let account = row.as_ref().map(|r| r.get::<_, i64>("id"));
    let ip = state.client_ip(req);
    if !state.hasher.verify(&password, stored.as_deref()).await? {
        let tried: String = username.chars().take(100).collect();
        audit_event(&client, None, "login_failed", &USERS, account, json!({ "username": tried, "ip": ip }))
            .await?;
        return Err(ApiError::InvalidCredentials);
    }
    let row = row.ok_or(ApiError::InvalidCredentials)?;
    let user_id: i64 = row.get("id");
    let second = mfa::login::second_factor(&mut client, user_id, otp.as_deref(), &ip).await?;
    if let Some(stored) = &stored {
        super::rehash::upgrade(&state, user_id, &password, stored).await?;
    }
    audit_event(&client, Some(user_id), "login", &USERS, Some(user_id), mfa::login::audited(&ip, second))
        .await?;
    let user_agent = req.headers().get("user-agent").and_then(|v| v.to_str().ok());
    let token = issue_token(&state, user_id, &Origin { ip: &ip, user_agent }).await?;
    let branches = branch_summaries(&client, user_id).await?;
    web::ok(
        res,
        "Login successful.",
        json!({
            "user": {
                "id": user_id,
                "name": row.get::<_, String>("name"),
                "email": row.get::<_, String>("email"),
                "username": row.get::<_, String>("username"),
                "default_branch_id": row.get::<_, Option<i64>>("default_branch_id"),
            },
            "token": token,
            "branches": branches,
        }),
    );
    Ok(())
}

#[handler]
async fn logout(depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let Context { state, user, .. } = Context::of(depot)?;
    let mut client = state.registry.get().await?;
    let tx = client.transaction().await?;
    tx.execute("DELETE FROM api_tokens WHERE id = $1", &[&user.token_id]).await?;
    let stale = [notify::Topic::Token(user.token_id)];
    for topic in stale {
        notify::publish(&tx, topic).await?;
    }
    // Last before the commit: it takes a turn of the audit log's hash chain until then.
    audit_event(&tx, Some(user.id), "logout", &USERS, Some(user.id), json!({})).await?;
    tx.commit().await?;
    state.forget(&stale).await;
    web::done(res, "Logged out.");
    Ok(())
}

#[handler]
async fn profile(depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let Context { state, user, .. } = Context::of(depot)?;
    let client = state.registry.get().await?;
    web::ok(res, "Profile retrieved.", user_view(&client, user.id).await?);
    Ok(())
}

#[handler]
async fn update_profile(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let (state, user) = (&ctx.state, &ctx.user);
    // The user's own name and e-mail, checked as the users resource declares them, and written
    // and audited through it (e-mail unique).
    let Profile { name, email } = PROFILE.read(req, depot).await?;
    let input =
        Map::from_iter([("name".to_owned(), Value::from(name)), ("email".to_owned(), Value::from(email))]);
    let mut client = state.registry.get().await?;
    let unit = Unit::begin(&mut client, ctx.writer()).await?;
    let before = unit.record(&USERS, user.id).await?;
    let after = unit.change(&USERS, Within::default(), user.id, input, None).await?;
    let answer = Answer::ok("Profile updated.", user_view(&*unit, user.id).await?);
    unit.commit(&answer).await?;
    USERS.hooks.committed(&ctx.writer(), Some(&before), Some(&after)).await;
    render(res, &answer);
    Ok(())
}

#[handler]
async fn my_branches(depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let Context { state, user, .. } = Context::of(depot)?;
    let client = state.registry.get().await?;
    web::ok(res, "Branches retrieved.", branch_summaries(&client, user.id).await?);
    Ok(())
}

/// Makes `branch_id` the user's active (default) branch: the one front-ends send as
/// `X-Branch-Id` and the one login reports.
#[handler]
async fn switch_branch(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let (state, user) = (&ctx.state, &ctx.user);
    let SwitchBranch { branch_id } = SWITCH_BRANCH.read(req, depot).await?;
    if !user.branch_ids.contains(&branch_id) {
        return Err(ApiError::Forbidden {
            code: "branch_forbidden",
            message: "You do not have access to this branch.".into(),
        });
    }
    let mut client = state.registry.get().await?;
    let unit = Unit::begin(&mut client, ctx.writer()).await?;
    unit.execute(
        "UPDATE users SET default_branch_id = $2, updated_at = now() WHERE id = $1",
        &[&user.id, &branch_id],
    )
    .await?;
    let branch = branch_summaries(&*unit, user.id).await?.into_iter().find(|b| b["id"] == json!(branch_id));
    let answer = Answer::ok(
        "Branch switched.",
        json!({ "branch": branch, "user": user_view(&*unit, user.id).await? }),
    );
    unit.stale([notify::Topic::User(user.id)]);
    unit.commit(&answer).await?;
    render(res, &answer);
    Ok(())
}

#[handler]
async fn change_password_handler(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let (state, user) = (&ctx.state, &ctx.user);
    state.limits.change_password.hit(&format!("change-password:{}", user.id), res)?;
    let ChangePassword { current_password: current, password } = CHANGE_PASSWORD.read(req, depot).await?;
    check_strength(&password, &[&user.username, &user.email]).map_err(|m| ApiError::field("password", m))?;
    // The key is claimed before the current password is checked: a replay answers the first
    // answer, though the password it names is no longer the current one.
    let mut client = state.registry.get().await?;
    let unit = Unit::begin(&mut client, ctx.writer()).await?;
    let stored: String =
        unit.query_one("SELECT password_hash FROM users WHERE id = $1 FOR UPDATE", &[&user.id]).await?.get(0);
    if !state.hasher.verify(&current, Some(&stored)).await? {
        return Err(ApiError::field("current_password", "The current password is incorrect."));
    }
    let hash = state.hasher.hash(&password).await?;
    unit.execute("UPDATE users SET password_hash = $2, updated_at = now() WHERE id = $1", &[&user.id, &hash])
        .await?;
    unit.audit_event("password_change", &USERS, Some(user.id), json!({})).await?;
    // Other sessions end; this one goes on.
    unit.stale(revoke_tokens(&unit, user.id, Some(user.token_id)).await?);
    let answer = Answer::done("Password changed.");
    unit.commit(&answer).await?;
    render(res, &answer);
    Ok(())
}

/// Every `/auth/*` route and change-password: login and the password reset for anyone, the
/// session's own routes for its user, and the password change under a limit of its own.
pub fn endpoints() -> Vec<Endpoints> {
    let mut public = Endpoints::new(Access::Public);
    let mut signed_in = Endpoints::new(Access::User);
    let mut password = Endpoints::new(Access::User).unmetered();
    // What a user who must turn a second factor on reaches before they have.
    let mut enrolling = Endpoints::new(Access::User).before_enrolment();
    login_endpoints(&mut public, &mut enrolling);
    reset_endpoints(&mut public);
    session_endpoints(&mut signed_in, &mut password, &mut enrolling);
    super::sessions::endpoints(&mut signed_in);
    let mut all = vec![public, signed_in, password];
    all.extend(mfa::endpoints(enrolling));
    all
}

fn message() -> Object {
    Object::new().property("message", docs::string())
}

fn branch_summary() -> Object {
    Object::new()
        .property("id", docs::integer())
        .property("name", docs::string())
        .property("code", docs::string())
}

/// The caller's account as login and the profile answer it.
fn profile_view() -> Object {
    Object::new()
        .property("id", docs::integer())
        .property("name", docs::string())
        .property("email", docs::string())
        .property("username", docs::string())
        .property(
            "default_branch_id",
            salvo::oapi::Object::with_type(
                [salvo::oapi::BasicType::Integer, salvo::oapi::BasicType::Null]
                    .into_iter()
                    .collect::<salvo::oapi::SchemaType>(),
            ),
        )
}

fn login_endpoints(public: &mut Endpoints, signed_in: &mut Endpoints) {
    let user = profile_view();
    let op = public.operation("auth", "Log in with username and password; returns a bearer token");
    let answer = Object::new()
        .property("user", user)
        .property("token", docs::string())
        .property("branches", salvo::oapi::Array::new().items(branch_summary()));
    let op = Doc::answers(op, "200", "Logged in", docs::envelope(answer));
    let op = Doc::answers(
        op,
        "401",
        "Invalid credentials; or the account has a second factor and otp is missing (otp_required) or wrong, expired or already used (invalid_otp)",
        message(),
    );
    let op = Doc::answers(op, "429", "Too many attempts from this address", message());
    public.add_taking(PathItemType::Post, "auth/login", "login", &LOGIN, login, op);
    let op = signed_in.operation("auth", "Revoke the token of this request");
    // Not kept for replay: once the token is revoked, a repeat answers 401, which says the same.
    let op = Doc::answers(op, "200", "Logged out", message());
    signed_in.add_behind(PathItemType::Post, "auth/logout", "logout", Some(Unkeyed), logout, op);
}

fn reset_endpoints(public: &mut Endpoints) {
    let step = |public: &Endpoints, summary: &str| {
        let op = Doc::answers(public.operation("auth", summary), "200", "Done", message());
        Doc::answers(op, "429", "Too many attempts from this address", message())
    };
    let op = step(public, "Send a 6-digit reset code to an e-mail address");
    public.add_taking(
        PathItemType::Post,
        "auth/reset-code",
        "sendResetCode",
        &RESET_CODE,
        reset::reset_code,
        op,
    );
    let op = step(public, "Check a reset code");
    public.add_taking(
        PathItemType::Post,
        "auth/verify-code",
        "verifyResetCode",
        &VERIFY_CODE,
        reset::verify_code,
        op,
    );
    let op = step(public, "Set a new password with a reset code (ends every session)");
    public.add_taking(
        PathItemType::Post,
        "auth/reset-password",
        "resetPassword",
        &RESET_PASSWORD,
        reset::reset_password,
        op,
    );
}

fn session_endpoints(signed_in: &mut Endpoints, password: &mut Endpoints, enrolling: &mut Endpoints) {
    let op = enrolling.operation("auth", "The current user");
    let op = Doc::answers(op, "200", "Profile", docs::envelope(profile_view()));
    enrolling.add(PathItemType::Get, "auth/profile", "getProfile", profile, op);
    let op = signed_in.operation("auth", "Change name and e-mail");
    let op = Doc::answers(op, "200", "Updated", docs::envelope(profile_view()));
    signed_in.add_taking(PathItemType::Put, "auth/profile", "updateProfile", &PROFILE, update_profile, op);
    let op = signed_in.operation("auth", "Make a branch the active one");
    let switched = Object::new().property("branch", branch_summary()).property("user", profile_view());
    let op = Doc::answers(op, "200", "Switched", docs::envelope(switched));
    signed_in.add_taking(
        PathItemType::Post,
        "auth/switch-branch",
        "switchBranch",
        &SWITCH_BRANCH,
        switch_branch,
        op,
    );
    let op = signed_in.operation("auth", "Branches the user may work in");
    let op = Doc::answers(
        op,
        "200",
        "Branches",
        docs::envelope(salvo::oapi::Array::new().items(branch_summary())),
    );
    signed_in.add(PathItemType::Get, "auth/branches", "listMyBranches", my_branches, op);
    let op = password.operation("auth", "Change the password (ends the user's other sessions)");
    let op = Doc::answers(op, "200", "Changed", message());
    password.add_taking(
        PathItemType::Post,
        "profile/change-password",
        "changePassword",
        &CHANGE_PASSWORD,
        change_password_handler,
        op,
    );
}
