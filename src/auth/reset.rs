//! Password reset by e-mailed code: 6 digits, valid 15 minutes, single use, stored hashed,
//! burnt after 5 wrong tries; a new code replaces the old one.
//!
//! Guarding the account, not just the code:
//! - the account is found by comparing addresses in the registry's one normal form
//!   (`email_key`), and the code is mailed to the address stored on the account, never to
//!   the text of the request;
//! - wrong codes are counted per account across codes: after 10 in an hour every reset step
//!   is refused, even with the right code, until the hour is over;
//! - an unknown address, a locked account and a wrong code all get the same answers.

use rand::Rng;
use salvo::prelude::*;
use serde_json::json;
use time::{Duration, OffsetDateTime};

use super::body::{RESET_CODE, RESET_PASSWORD, ResetCode, ResetPassword, VERIFY_CODE, VerifyCode};
use crate::admin::users::USERS;
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::resource::audit_event;
use crate::security::password::check_strength;
use crate::security::tokens::{constant_time_eq, hash_secret};
use crate::state::AppState;
use crate::state::session::revoke_tokens;

pub const LIFETIME: Duration = Duration::minutes(15);
pub const MAX_ATTEMPTS: i32 = 5;
/// Wrong codes an account may see in an hour, across codes.
pub const MAX_FAILURES_PER_HOUR: i64 = 10;

pub fn new_code() -> String {
    format!("{:06}", rand::rng().random_range(0..1_000_000u32))
}

/// The stored form: bound to the user so equal codes of two users differ.
pub fn code_hash(user_id: i64, code: &str) -> Vec<u8> {
    hash_secret(&format!("{user_id}:{code}"))
}

fn invalid() -> ApiError {
    ApiError::field("code", "The code is invalid or has expired.")
}

/// The active account an address names.
pub struct Account {
    pub id: i64,
    /// The address on the account: the only one mail ever goes to.
    pub email: String,
    pub username: String,
    /// Too many wrong codes in the last hour.
    pub locked: bool,
}

/// Finds the account of `email` and locks its row, so that concurrent guesses are counted
/// one after the other.
async fn account(tx: &crate::db::Transaction<'_>, email: &str) -> ApiResult<Option<Account>> {
    let row = tx
        .query_opt(
            "SELECT u.id, u.email, u.username,
                    (SELECT count(*) FROM password_reset_failures f
                      WHERE f.user_id = u.id AND f.at > now() - interval '1 hour') AS failures
               FROM users u WHERE email_key(u.email) = email_key($1) AND u.active
               FOR UPDATE OF u",
            &[&email],
        )
        .await?;
    Ok(row.map(|r| Account {
        id: r.get(0),
        email: r.get(1),
        username: r.get(2),
        locked: r.get::<_, i64>(3) >= MAX_FAILURES_PER_HOUR,
    }))
}

async fn count_failure(tx: &crate::db::Transaction<'_>, user_id: i64) -> ApiResult<()> {
    tx.execute("INSERT INTO password_reset_failures (user_id) VALUES ($1)", &[&user_id]).await?;
    Ok(())
}

/// Checks `code` for the account of `email`; a wrong code is counted against the code (burnt
/// at the limit) and the account. The caller commits whatever the outcome.
async fn check_code(tx: &crate::db::Transaction<'_>, email: &str, code: &str) -> ApiResult<Account> {
    let Some(account) = account(tx, email).await? else { return Err(invalid()) };
    if account.locked {
        return Err(invalid());
    }
    let row = tx
        .query_opt(
            "SELECT code_hash, attempts, expires_at FROM password_reset_codes WHERE user_id = $1 FOR UPDATE",
            &[&account.id],
        )
        .await?;
    let Some(row) = row else {
        count_failure(tx, account.id).await?;
        return Err(invalid());
    };
    let (stored, attempts, expires_at): (Vec<u8>, i32, OffsetDateTime) = (row.get(0), row.get(1), row.get(2));
    let well_formed = code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit());
    let usable = expires_at > OffsetDateTime::now_utc() && attempts < MAX_ATTEMPTS;
    if usable && well_formed && constant_time_eq(&stored, &code_hash(account.id, code)) {
        return Ok(account);
    }
    count_failure(tx, account.id).await?;
    if !usable || attempts + 1 >= MAX_ATTEMPTS {
        tx.execute("DELETE FROM password_reset_codes WHERE user_id = $1", &[&account.id]).await?;
    } else {
        tx.execute(
            "UPDATE password_reset_codes SET attempts = attempts + 1 WHERE user_id = $1",
            &[&account.id],
        )
        .await?;
    }
    Err(invalid())
}

/// The shared rate limit of the three reset routes.
fn limited(state: &AppState, req: &Request, res: &mut Response) -> ApiResult<()> {
    state.limits.reset.hit(&format!("reset:{}", state.client_ip(req)), res)
}

/// `POST /auth/reset-code`: the same answer whether or not the address is known, and the mail
/// leaves in the background so the timing does not tell either.
#[handler]
pub async fn reset_code(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let state = AppState::of(depot);
    limited(&state, req, res)?;
    let ResetCode { email } = RESET_CODE.read(req, depot).await?;
    let mut client = state.registry.get().await?;
    let tx = client.transaction().await?;
    if let Some(account) = account(&tx, &email).await?
        && !account.locked
    {
        let code = new_code();
        let expires_at = OffsetDateTime::now_utc() + LIFETIME;
        tx.execute(
            "INSERT INTO password_reset_codes (user_id, code_hash, expires_at) VALUES ($1, $2, $3)
             ON CONFLICT (user_id) DO UPDATE SET code_hash = EXCLUDED.code_hash, attempts = 0,
                    expires_at = EXCLUDED.expires_at, created_at = now()",
            &[&account.id, &code_hash(account.id, &code), &expires_at],
        )
        .await?;
        audit_event(
            &tx,
            Some(account.id),
            "reset_code",
            &USERS,
            Some(account.id),
            json!({ "ip": state.client_ip(req) }),
        )
        .await?;
        tx.commit().await?;
        let text = format!(
            "Your password reset code is {code}.\n\nIt expires in 15 minutes. If you did not ask for it, ignore this message."
        );
        state.mailer.send_later(account.email, "Your password reset code", text);
    }
    web::done(res, "If the e-mail address belongs to an account, a reset code has been sent to it.");
    Ok(())
}

/// `POST /auth/verify-code`.
#[handler]
pub async fn verify_code(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let state = AppState::of(depot);
    limited(&state, req, res)?;
    let VerifyCode { email, code } = VERIFY_CODE.read(req, depot).await?;
    let mut client = state.registry.get().await?;
    let tx = client.transaction().await?;
    let outcome = check_code(&tx, &email, &code).await;
    // Commit either way: a wrong try must count.
    tx.commit().await?;
    outcome?;
    web::done(res, "The code is valid.");
    Ok(())
}

/// `POST /auth/reset-password`: sets the password and ends every session of the user. The
/// code is used up only when the new password is accepted.
#[handler]
pub async fn reset_password(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let state = AppState::of(depot);
    limited(&state, req, res)?;
    let ResetPassword { email, code, password } = RESET_PASSWORD.read(req, depot).await?;
    let hash = state.hasher.hash(&password).await?;
    let mut client = state.registry.get().await?;
    let tx = client.transaction().await?;
    let account = match check_code(&tx, &email, &code).await {
        Ok(account) => account,
        Err(e) => {
            tx.commit().await?;
            return Err(e);
        }
    };
    if let Err(message) = check_strength(&password, &[&account.username, &account.email]) {
        return Err(ApiError::field("password", message));
    }
    tx.execute("DELETE FROM password_reset_codes WHERE user_id = $1", &[&account.id]).await?;
    tx.execute(
        "UPDATE users SET password_hash = $2, updated_at = now() WHERE id = $1",
        &[&account.id, &hash],
    )
    .await?;
    let revoked = revoke_tokens(&tx, account.id, None).await?;
    for topic in &revoked {
        crate::notify::publish(&tx, *topic).await?;
    }
    // Last before the commit: it takes a turn of the audit log's hash chain until then.
    audit_event(
        &tx,
        Some(account.id),
        "password_reset",
        &USERS,
        Some(account.id),
        json!({ "ip": state.client_ip(req) }),
    )
    .await?;
    tx.commit().await?;
    state.forget(&revoked).await;
    web::done(res, "Your password has been reset. Log in with the new password.");
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn codes_are_six_digits() {
        for _ in 0..100 {
            let code = super::new_code();
            assert_eq!(code.len(), 6);
            assert!(code.bytes().all(|b| b.is_ascii_digit()));
        }
    }
}
