//! Where a second factor is kept (the registry: `user_totp`, `user_recovery_codes`,
//! `second_factor_failures`), and the one check of a code that login and turning the factor
//! off share: the account's row locked, the limit of wrong codes, no replay.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::db::{Queries, Transaction};
use crate::http::error::{ApiError, ApiResult};

use super::codes::{self, Code};

/// Wrong codes an account may send within [`WINDOW_MINUTES`]; past them every attempt is 429.
pub const MAX_FAILURES: i64 = 5;
pub const WINDOW_MINUTES: i64 = 15;

/// A user's TOTP secret and where its codes stand.
pub struct Factor {
    pub secret: Vec<u8>,
    pub enabled: bool,
    /// The last time step accepted.
    pub last_step: Option<i64>,
}

/// The user's factor, on or pending; `lock`: its row locked until the transaction ends, so
/// that two codes of one account are checked one after the other.
pub async fn factor(client: &impl Queries, user_id: i64, lock: bool) -> ApiResult<Option<Factor>> {
    let sql = if lock {
        "SELECT secret, enabled_at IS NOT NULL, last_step FROM user_totp WHERE user_id = $1 FOR UPDATE"
    } else {
        "SELECT secret, enabled_at IS NOT NULL, last_step FROM user_totp WHERE user_id = $1"
    };
    let row = client.query_opt(sql, &[&user_id]).await?;
    Ok(row.map(|r| Factor { secret: r.get(0), enabled: r.get(1), last_step: r.get(2) }))
}

/// Whether the user's second factor is on.
pub async fn enabled(client: &impl Queries, user_id: i64) -> ApiResult<bool> {
    let row = client
        .query_opt("SELECT 1 FROM user_totp WHERE user_id = $1 AND enabled_at IS NOT NULL", &[&user_id])
        .await?;
    Ok(row.is_some())
}

/// Removes the user's factor and recovery codes; whether one was on.
pub async fn remove(tx: &Transaction<'_>, user_id: i64) -> ApiResult<bool> {
    let removed = tx
        .query_opt("DELETE FROM user_totp WHERE user_id = $1 RETURNING enabled_at IS NOT NULL", &[&user_id])
        .await?;
    tx.execute("DELETE FROM user_recovery_codes WHERE user_id = $1", &[&user_id]).await?;
    tx.execute("DELETE FROM second_factor_failures WHERE user_id = $1", &[&user_id]).await?;
    Ok(removed.is_some_and(|r| r.get(0)))
}

pub fn now_unix() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default()
}

/// 429 while the account has seen [`MAX_FAILURES`] wrong codes in the window, with the
/// seconds until the oldest of them leaves it.
async fn refuse_when_locked(tx: &Transaction<'_>, user_id: i64) -> ApiResult<()> {
    let row = tx
        .query_one(
            "SELECT count(*),
                    ceil(extract(epoch FROM min(at) + make_interval(mins => $2::int) - now()))::bigint
               FROM second_factor_failures
              WHERE user_id = $1 AND at > now() - make_interval(mins => $2::int)",
            &[&user_id, &(WINDOW_MINUTES as i32)],
        )
        .await?;
    let (count, left): (i64, Option<i64>) = (row.get(0), row.get(1));
    if count >= MAX_FAILURES {
        return Err(ApiError::RateLimited {
            limit: MAX_FAILURES as u32,
            retry_after_secs: left.unwrap_or(1).max(1) as u64,
        });
    }
    Ok(())
}

/// How a right code was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Totp,
    RecoveryCode,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Self::Totp => "totp",
            Self::RecoveryCode => "recovery_code",
        }
    }
}

/// Checks `code` for the user's enabled factor (its row locked by [`factor`] in `tx`): 429
/// past the limit, even for a right code; a right TOTP code becomes the last step accepted
/// (a code of that step or an earlier one is never taken again) and a right recovery code is
/// spent, and either clears the count; a wrong code is counted and `Ok(None)` returned, for
/// the caller to commit and answer.
pub async fn check(
    tx: &Transaction<'_>,
    user_id: i64,
    factor: &Factor,
    code: &Code,
) -> ApiResult<Option<Method>> {
    refuse_when_locked(tx, user_id).await?;
    let method = match code {
        Code::Totp(digits) => match codes::matching_step(&factor.secret, digits, now_unix()) {
            Some(step) if factor.last_step.is_none_or(|last| step > last) => {
                tx.execute("UPDATE user_totp SET last_step = $2 WHERE user_id = $1", &[&user_id, &step])
                    .await?;
                Some(Method::Totp)
            }
            _ => None,
        },
        Code::Recovery(plain) => {
            let spent = tx
                .execute(
                    "UPDATE user_recovery_codes SET used_at = now()
                      WHERE user_id = $1 AND code_hash = $2 AND used_at IS NULL",
                    &[&user_id, &codes::recovery_hash(user_id, plain)],
                )
                .await?;
            (spent == 1).then_some(Method::RecoveryCode)
        }
    };
    if method.is_some() {
        tx.execute("DELETE FROM second_factor_failures WHERE user_id = $1", &[&user_id]).await?;
    } else {
        tx.execute(
            "DELETE FROM second_factor_failures
              WHERE user_id = $1 AND at <= now() - make_interval(mins => $2::int)",
            &[&user_id, &(WINDOW_MINUTES as i32)],
        )
        .await?;
        tx.execute("INSERT INTO second_factor_failures (user_id) VALUES ($1)", &[&user_id]).await?;
    }
    Ok(method)
}
