//! The second factor's routes: enrolment and its confirmation, turning it off, and an
//! administrator's reset.

use salvo::oapi::{Array, Object, PathItemType};
use salvo::prelude::*;
use serde_json::json;

use super::codes::{self, Code};
use super::store::{self, now_unix};
use crate::admin::users::USERS;
use crate::auth::body::{MFA_CODE, MFA_OFF, MfaCode, MfaOff};
use crate::http::docs::{self, Access, Doc};
use crate::http::endpoints::Endpoints;
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::notify::Topic;
use crate::permissions::ADMIN_ACCESS;
use crate::resource::audit_event;
use crate::resource::context::Require;
use crate::resource::idempotency::Answer;
use crate::resource::routes::render;
use crate::resource::{Context, Unit};
use crate::state::session::revoke_tokens;

fn already_enabled() -> ApiError {
    ApiError::Conflict {
        code: "mfa_already_enabled",
        message:
            "A second factor is already on; turn it off (DELETE /api/v1/auth/mfa/totp) to enrol another."
                .into(),
    }
}

fn not_enabled() -> ApiError {
    ApiError::Conflict { code: "mfa_not_enabled", message: "This account has no second factor on.".into() }
}

/// A `code` as typed: the app's 6 digits, or (`recovery`) a recovery code too.
fn code_field(typed: &str, recovery: bool) -> ApiResult<Code> {
    let shape = if recovery {
        "The code must be the 6 digits of your authenticator app or a recovery code (xxxx-xxxx-xxxx-xxxx)."
    } else {
        "The code must be the 6 digits of your authenticator app."
    };
    match codes::parse(typed) {
        Some(Code::Recovery(_)) if !recovery => Err(ApiError::field("code", shape)),
        Some(code) => Ok(code),
        None => Err(ApiError::field("code", shape)),
    }
}

/// `POST /auth/mfa/totp`: a new pending secret (replacing one not yet confirmed), answered
/// as base32, an otpauth URI and its QR code.
#[handler]
async fn start(depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let (state, user) = (&ctx.state, &ctx.user);
    let secret = codes::new_secret();
    let uri = codes::otpauth_uri(&state.settings.mfa_issuer, &user.username, &secret);
    let svg = codes::qr_svg(&uri)?;
    let mut client = state.registry.get().await?;
    let unit = Unit::begin(&mut client, ctx.writer()).await?;
    let kept = unit
        .execute(
            "INSERT INTO user_totp (user_id, secret) VALUES ($1, $2)
             ON CONFLICT (user_id) DO UPDATE SET secret = EXCLUDED.secret, last_step = NULL, created_at = now()
              WHERE user_totp.enabled_at IS NULL",
            &[&user.id, &secret],
        )
        .await?;
    if kept == 0 {
        return Err(already_enabled());
    }
    unit.audit_event("mfa_enrolment_started", &USERS, Some(user.id), json!({})).await?;
    let answer = Answer::ok(
        "Scan the QR code (or type the secret) in an authenticator app, then confirm with a code.",
        json!({ "secret": codes::secret_base32(&secret), "otpauth_uri": uri, "qr_svg": svg }),
    );
    unit.commit(&answer).await?;
    render(res, &answer);
    Ok(())
}

/// `POST /auth/mfa/totp/confirm`: a right code of the pending secret turns the factor on;
/// the answer holds ten recovery codes, never shown again.
#[handler]
async fn confirm(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let (state, user) = (&ctx.state, &ctx.user);
    let MfaCode { code } = MFA_CODE.read(req, depot).await?;
    let Code::Totp(digits) = code_field(&code, false)? else {
        return Err(ApiError::field("code", "The code must be the 6 digits of your authenticator app."));
    };
    let mut client = state.registry.get().await?;
    let unit = Unit::begin(&mut client, ctx.writer()).await?;
    let Some(factor) = store::factor(&*unit, user.id, true).await? else {
        return Err(ApiError::field(
            "code",
            "No enrolment is pending: start one with POST /api/v1/auth/mfa/totp.",
        ));
    };
    if factor.enabled {
        return Err(already_enabled());
    }
    let step = codes::matching_step(&factor.secret, &digits, now_unix())
        .filter(|step| factor.last_step.is_none_or(|last| *step > last))
        .ok_or_else(|| ApiError::field("code", "The code is wrong or expired."))?;
    unit.execute(
        "UPDATE user_totp SET enabled_at = now(), last_step = $2 WHERE user_id = $1",
        &[&user.id, &step],
    )
    .await?;
    unit.execute("DELETE FROM user_recovery_codes WHERE user_id = $1", &[&user.id]).await?;
    let recovery = codes::new_recovery_codes();
    let hashes: Vec<Vec<u8>> =
        recovery.iter().map(|c| codes::recovery_hash(user.id, &c.replace('-', ""))).collect();
    unit.execute(
        "INSERT INTO user_recovery_codes (user_id, code_hash) SELECT $1, unnest($2::bytea[])",
        &[&user.id, &hashes],
    )
    .await?;
    unit.audit_event("mfa_enabled", &USERS, Some(user.id), json!({})).await?;
    unit.stale([Topic::User(user.id)]);
    let answer = Answer::ok(
        "Second factor on. Keep these recovery codes somewhere safe: each works once, and they are not shown again.",
        json!({ "recovery_codes": recovery }),
    )
    .sealed();
    unit.commit(&answer).await?;
    render(res, &answer);
    Ok(())
}

/// `DELETE /auth/mfa/totp` with the password and a code (of the app, or a recovery code).
/// Session state, written outside the unit like a password change: a wrong code is counted
/// and committed although the answer is a 422.
#[handler]
async fn disable(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let Context { state, user, .. } = Context::of(depot)?;
    // The password is checked here: the password change's per-user limit, a bucket of its own.
    state.limits.change_password.hit(&format!("mfa-disable:{}", user.id), res)?;
    let MfaOff { current_password: current, code } = MFA_OFF.read(req, depot).await?;
    let code = code_field(&code, true)?;
    let mut client = state.registry.get().await?;
    let tx = client.transaction().await?;
    let Some(factor) = store::factor(&tx, user.id, true).await?.filter(|f| f.enabled) else {
        return Err(not_enabled());
    };
    let stored: String =
        tx.query_one("SELECT password_hash FROM users WHERE id = $1", &[&user.id]).await?.get(0);
    if !state.hasher.verify(&current, Some(&stored)).await? {
        return Err(ApiError::field("current_password", "The current password is incorrect."));
    }
    let Some(method) = store::check(&tx, user.id, &factor, &code).await? else {
        audit_event(
            &tx,
            Some(user.id),
            "otp_failed",
            &USERS,
            Some(user.id),
            json!({ "route": "mfa_disable" }),
        )
        .await?;
        tx.commit().await?;
        return Err(ApiError::field("code", "The code is wrong, expired or already used."));
    };
    store::remove(&tx, user.id).await?;
    audit_event(
        &tx,
        Some(user.id),
        "mfa_disabled",
        &USERS,
        Some(user.id),
        json!({ "method": method.name() }),
    )
    .await?;
    state.commit(tx, &[Topic::User(user.id)]).await?;
    web::done(res, "Second factor turned off.");
    Ok(())
}

/// `POST /users/{id}/mfa/reset`: an administrator removes a user's second factor (a lost
/// phone and lost recovery codes). Every session of the user ends, and they are told by mail.
#[handler]
async fn reset(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let state = &ctx.state;
    let id = web::path_id(req, "id")?;
    let mut client = state.registry.get().await?;
    let unit = Unit::begin(&mut client, ctx.writer()).await?;
    let Some(row) =
        unit.query_opt("SELECT email, username FROM users WHERE id = $1 FOR UPDATE", &[&id]).await?
    else {
        return Err(ApiError::NotFound);
    };
    let (email, username): (String, String) = (row.get(0), row.get(1));
    if !store::remove(&unit, id).await? {
        return Err(not_enabled());
    }
    unit.audit_event("mfa_reset", &USERS, Some(id), json!({})).await?;
    unit.stale(revoke_tokens(&unit, id, None).await?);
    unit.stale([Topic::User(id)]);
    let answer = Answer::done("Second factor removed; every session of the user has ended.");
    unit.commit(&answer).await?;
    let text = format!(
        "An administrator removed the second factor of your account {username}, and every session \
         of the account was ended.\n\nLog in again with your password and turn a second factor on again. \
         If you did not ask for this, tell your administrator at once."
    );
    state.mailer.send_later(email, "Your second factor was removed", text);
    render(res, &answer);
    Ok(())
}

/// The routes, in the groups given: `enrolling` (open before enrolment: starting and
/// confirming), the signed-in user's own, and the administrator's.
pub fn endpoints(mut enrolling: Endpoints) -> Vec<Endpoints> {
    let message = || Object::new().property("message", docs::string());
    let op = enrolling.operation("auth", "Start enrolling a TOTP second factor (replaces a pending one)");
    let started = Object::new()
        .property("secret", docs::string().description("Base32, 160 bits"))
        .property("otpauth_uri", docs::string().description("otpauth://totp/<issuer>:<username>?secret=..."))
        .property("qr_svg", docs::string().description("The URI as a QR code, an SVG document"));
    let op = Doc::answers(op, "200", "Pending secret", docs::envelope(started));
    let op = Doc::conflict(op, "mfa_already_enabled: a second factor is already on");
    enrolling.add(PathItemType::Post, "auth/mfa/totp", "startTotpEnrolment", start, op);
    let op =
        enrolling.operation("auth", "Turn the pending second factor on with a code; answers recovery codes");
    let enabled = Object::new().property(
        "recovery_codes",
        Array::new().items(docs::string().pattern("^[A-Z2-7]{4}(-[A-Z2-7]{4}){3}$")),
    );
    let op = Doc::answers(op, "200", "On; ten one-time recovery codes, shown once", docs::envelope(enabled));
    let op = Doc::conflict(op, "mfa_already_enabled: a second factor is already on");
    enrolling.add_taking(
        PathItemType::Post,
        "auth/mfa/totp/confirm",
        "confirmTotpEnrolment",
        &MFA_CODE,
        confirm,
        op,
    );

    let mut signed_in = Endpoints::new(Access::User);
    let op = signed_in.operation("auth", "Turn the second factor off (password and a code)");
    let op = Doc::answers(op, "200", "Off", message());
    let op = Doc::conflict(op, "mfa_not_enabled: no second factor is on");
    signed_in.add_taking(PathItemType::Delete, "auth/mfa/totp", "disableTotp", &MFA_OFF, disable, op);

    let mut admin = Endpoints::new(Access::User).hoop(Require(ADMIN_ACCESS));
    let op = admin
        .operation("users", "Remove a user's second factor, end their sessions and mail them")
        .add_parameter(docs::path_id());
    let op = Doc::answers(op, "200", "Removed", message());
    let op = Doc::not_found(op);
    let op = Doc::conflict(op, "mfa_not_enabled: the user has no second factor on");
    admin.add(PathItemType::Post, "users/{id:num}/mfa/reset", "resetUserMfa", reset, op);
    vec![enrolling, signed_in, admin]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_read_by_shape() {
        assert_eq!(code_field("123456", false).ok(), Some(Code::Totp("123456".into())));
        assert!(code_field("12345", false).is_err());
        assert!(code_field("ABCD-EFGH-IJKL-MNOP", false).is_err());
        assert!(code_field("ABCD-EFGH-IJKL-MNOP", true).is_ok());
    }
}
