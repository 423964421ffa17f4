//! `/auth/*` routes.

use salvo::oapi::{Object, PathItemType};
use salvo::prelude::*;
use serde_json::{Map, Value, json};

use super::{current_user, issue_token};
use crate::app::AppState;
use crate::http::docs::{self, Access, Doc};
use crate::http::error::{ApiError, ApiResult, FieldErrors};
use crate::http::{self as web};
use crate::notify;

/// A required string field of a JSON body (422 naming it when missing or not a string).
pub fn required_string(body: &Map<String, Value>, name: &str, errors: &mut FieldErrors) -> String {
    match body.get(name) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            errors
                .entry(name.into())
                .or_default()
                .push(format!("The {} field is required.", name.replace('_', " ")));
            String::new()
        }
        Some(_) => {
            errors
                .entry(name.into())
                .or_default()
                .push(format!("The {} must be a string.", name.replace('_', " ")));
            String::new()
        }
    }
}

pub fn public() -> Router {
    Router::with_path("auth/login").post(login)
}

pub fn authenticated() -> Router {
    Router::with_path("auth/logout").post(logout)
}

#[handler]
async fn login(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let state = AppState::of(depot);
    state.limits.login.hit(&format!("login:{}", state.client_ip(req)), res)?;
    let body = web::json_object(req, state.settings.max_body_bytes).await?;
    let mut errors = FieldErrors::new();
    let username = required_string(&body, "username", &mut errors);
    let password = required_string(&body, "password", &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let client = state.registry.get().await?;
    let row = client
        .query_opt(
            "SELECT id, name, email, username, password_hash, default_branch_id
               FROM users WHERE lower(username) = lower($1) AND active",
            &[&username],
        )
        .await?;
    // Unknown users are checked against a decoy hash: same cost, same answer.
    let stored = row.as_ref().map(|r| r.get::<_, String>("password_hash"));
    if !state.hasher.verify(&password, stored.as_deref()).await? {
        return Err(ApiError::InvalidCredentials);
    }
    let row = row.ok_or(ApiError::InvalidCredentials)?;
    let user_id: i64 = row.get("id");
    let token = issue_token(&state, user_id).await?;
    let branches = client
        .query(
            "SELECT b.id, b.name, b.code FROM branches b JOIN branch_users bu ON bu.branch_id = b.id
              WHERE bu.user_id = $1 AND b.status = 'active' ORDER BY b.name, b.id",
            &[&user_id],
        )
        .await?;
    let branches: Vec<Value> = branches
        .iter()
        .map(|b| json!({ "id": b.get::<_, i64>("id"), "name": b.get::<_, String>("name"), "code": b.get::<_, String>("code") }))
        .collect();
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
    let state = AppState::of(depot);
    let user = current_user(depot)?;
    let mut client = state.registry.get().await?;
    let tx = client.transaction().await?;
    tx.execute("DELETE FROM api_tokens WHERE id = $1", &[&user.token_id]).await?;
    notify::publish(&tx, notify::Topic::Token(user.token_id)).await?;
    tx.commit().await?;
    state.auth.forget_token(user.token_id).await;
    web::done(res, "Logged out.");
    Ok(())
}

pub fn document(doc: &mut Doc) {
    let branch = || {
        Object::new()
            .property("id", docs::integer())
            .property("name", docs::string())
            .property("code", docs::string())
    };
    let user = Object::new()
        .property("id", docs::integer())
        .property("name", docs::string())
        .property("email", docs::string())
        .property("username", docs::string())
        .property("default_branch_id", docs::integer());
    let op =
        Doc::operation(Access::Public, "auth", "Log in with username and password; returns a bearer token");
    let op = Doc::with_body(
        op,
        Object::new()
            .property("username", docs::string())
            .property("password", docs::string())
            .required("username")
            .required("password"),
    );
    let op = Doc::answers(
        op,
        "200",
        "Logged in",
        docs::envelope(
            Object::new()
                .property("user", user)
                .property("token", docs::string())
                .property("branches", salvo::oapi::Array::new().items(branch())),
        ),
    );
    let op = Doc::answers(
        Doc::answers(op, "401", "Invalid credentials", Object::new().property("message", docs::string())),
        "429",
        "Too many attempts from this address",
        Object::new().property("message", docs::string()),
    );
    doc.add(PathItemType::Post, "/api/v1/auth/login", op);
    let op = Doc::operation(Access::User, "auth", "Revoke the token of this request");
    doc.add(
        PathItemType::Post,
        "/api/v1/auth/logout",
        Doc::answers(op, "200", "Logged out", Object::new().property("message", docs::string())),
    );
}
