//! A user's sessions (their live tokens): listed, ended one by one or all but the current
//! one; and the end of a token unused past `API_TOKEN_IDLE_MINUTES`.

use salvo::oapi::{Array, Object, PathItemType};
use salvo::prelude::*;
use serde_json::{Value, json};

use crate::admin::users::USERS;
use crate::http::docs::{self, Doc};
use crate::http::endpoints::Endpoints;
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::notify::Topic;
use crate::resource::idempotency::Answer;
use crate::resource::routes::render;
use crate::resource::{Context, Unit, audit_event};
use crate::state::AppState;
use crate::state::session::revoke_tokens;

/// The `make_interval` seconds of the idle limit, or `None` when tokens never go idle.
fn idle_seconds(state: &AppState) -> Option<f64> {
    state.settings.token_idle.map(|idle| idle.as_secs_f64())
}

#[handler]
async fn list(depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let Context { state, user, .. } = Context::of(depot)?;
    let client = state.registry.get().await?;
    // Timestamps as every answer gives them (PostgreSQL's JSON of timestamptz).
    let sessions: Value = client
        .query_one(
            "SELECT coalesce(jsonb_agg(jsonb_build_object(
                        'id', id, 'created_at', created_at, 'last_used_at', used, 'ip', ip,
                        'user_agent', user_agent, 'current', id = $3) ORDER BY used DESC, id DESC), '[]')
               FROM (SELECT *, coalesce(last_used_at, created_at) AS used FROM api_tokens
                      WHERE user_id = $1 AND (expires_at IS NULL OR expires_at > now())) t
              WHERE $2::float8 IS NULL OR used > now() - make_interval(secs => $2)",
            &[&user.id, &idle_seconds(&state), &user.token_id],
        )
        .await?
        .get(0);
    web::ok(res, "Sessions retrieved.", sessions);
    Ok(())
}

/// Ends one of the caller's sessions (the current one too: that is a logout).
#[handler]
async fn end_one(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let Context { state, user, .. } = Context::of(depot)?;
    let id = web::path_id(req, "id")?;
    let mut client = state.registry.get().await?;
    let tx = client.transaction().await?;
    let ended = tx.execute("DELETE FROM api_tokens WHERE id = $1 AND user_id = $2", &[&id, &user.id]).await?;
    if ended == 0 {
        return Err(ApiError::NotFound);
    }
    audit_event(&tx, Some(user.id), "session_end", &USERS, Some(user.id), json!({ "session_id": id }))
        .await?;
    state.commit(tx, &[Topic::Token(id)]).await?;
    web::done(res, "Session ended.");
    Ok(())
}

/// Ends every session of the caller but the one presenting this request.
#[handler]
async fn end_others(depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let (state, user) = (&ctx.state, &ctx.user);
    let mut client = state.registry.get().await?;
    let unit = Unit::begin(&mut client, ctx.writer()).await?;
    let ended = revoke_tokens(&unit, user.id, Some(user.token_id)).await?;
    unit.audit_event("logout_all", &USERS, Some(user.id), json!({ "sessions_ended": ended.len() })).await?;
    let answer = Answer::ok("Other sessions ended.", json!({ "ended": ended.len() }));
    unit.stale(ended);
    unit.commit(&answer).await?;
    render(res, &answer);
    Ok(())
}

/// Ends a token found unused past the idle limit: deleted and audited, and forgotten by
/// every instance, whose streams on it end.
pub(super) async fn end_idle(state: &AppState, token_id: i64, user_id: i64) -> ApiResult<()> {
    let mut client = state.registry.get().await?;
    let tx = client.transaction().await?;
    let ended = tx.execute("DELETE FROM api_tokens WHERE id = $1", &[&token_id]).await?;
    if ended > 0 {
        let details =
            json!({ "session_id": token_id, "idle_minutes": idle_seconds(state).map(|s| s / 60.0) });
        audit_event(&tx, None, "session_idle_end", &USERS, Some(user_id), details).await?;
    }
    state.commit(tx, &[Topic::Token(token_id)]).await?;
    Ok(())
}

/// A string, or null for a session begun before sessions recorded it.
fn recorded(description: &str) -> Object {
    use salvo::oapi::{BasicType, SchemaType};
    Object::with_type([BasicType::String, BasicType::Null].into_iter().collect::<SchemaType>())
        .description(description)
}

fn session() -> Object {
    Object::new()
        .property("id", docs::id())
        .property("created_at", docs::timestamp())
        .property("last_used_at", docs::timestamp().description("To the minute"))
        .property("ip", recorded("The client's address when the session began"))
        .property("user_agent", recorded("The User-Agent that began it, if any"))
        .property("current", salvo::oapi::Object::with_type(salvo::oapi::BasicType::Boolean))
        .required("id")
        .required("created_at")
        .required("last_used_at")
        .required("ip")
        .required("user_agent")
        .required("current")
}

/// `GET /auth/sessions`, `DELETE /auth/sessions/{id}`, `POST /auth/logout-all`.
pub(super) fn endpoints(signed_in: &mut Endpoints) {
    let op = signed_in.operation("auth", "The user's sessions (live tokens)");
    let op = Doc::answers(
        op,
        "200",
        "Sessions, most recently used first",
        docs::envelope(Array::new().items(session())),
    );
    signed_in.add(PathItemType::Get, "auth/sessions", "listSessions", list, op);
    let op = signed_in.operation("auth", "End one of the user's sessions").add_parameter(docs::path_id());
    let op =
        Doc::not_found(Doc::answers(op, "200", "Ended", Object::new().property("message", docs::string())));
    signed_in.add(PathItemType::Delete, "auth/sessions/{id:num}", "endSession", end_one, op);
    let op = signed_in.operation("auth", "End every session of the user but this one");
    let ended = Object::new().property("ended", docs::integer()).required("ended");
    let op = Doc::answers(op, "200", "Ended", docs::envelope(ended));
    signed_in.add(PathItemType::Post, "auth/logout-all", "endOtherSessions", end_others, op);
}
