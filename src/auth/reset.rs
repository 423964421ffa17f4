//! Password reset by e-mailed code: 6 digits, valid 15 minutes, single use, stored hashed,
//! burnt after 5 wrong tries; a new code replaces the old one.

use rand::Rng;
use time::{Duration, OffsetDateTime};

use crate::http::error::{ApiError, ApiResult};
use crate::security::tokens::{constant_time_eq, hash_secret};

pub const LIFETIME: Duration = Duration::minutes(15);
pub const MAX_ATTEMPTS: i32 = 5;

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

/// Checks `code` for the active user with `email`; counts a wrong try, burning the code at
/// the limit. Returns the user id. With `consume`, a right code is used up.
pub async fn check(
    tx: &deadpool_postgres::Transaction<'_>,
    email: &str,
    code: &str,
    consume: bool,
) -> ApiResult<i64> {
    let row = tx
        .query_opt(
            "SELECT u.id, c.code_hash, c.attempts, c.expires_at
               FROM users u JOIN password_reset_codes c ON c.user_id = u.id
              WHERE lower(u.email) = lower($1) AND u.active
              FOR UPDATE OF c",
            &[&email],
        )
        .await?;
    let Some(row) = row else { return Err(invalid()) };
    let user_id: i64 = row.get(0);
    let stored: Vec<u8> = row.get(1);
    let attempts: i32 = row.get(2);
    let expires_at: OffsetDateTime = row.get(3);
    if expires_at <= OffsetDateTime::now_utc() || attempts >= MAX_ATTEMPTS {
        tx.execute("DELETE FROM password_reset_codes WHERE user_id = $1", &[&user_id]).await?;
        return Err(invalid());
    }
    let well_formed = code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit());
    if !well_formed || !constant_time_eq(&stored, &code_hash(user_id, code)) {
        if attempts + 1 >= MAX_ATTEMPTS {
            tx.execute("DELETE FROM password_reset_codes WHERE user_id = $1", &[&user_id]).await?;
        } else {
            tx.execute(
                "UPDATE password_reset_codes SET attempts = attempts + 1 WHERE user_id = $1",
                &[&user_id],
            )
            .await?;
        }
        return Err(invalid());
    }
    if consume {
        tx.execute("DELETE FROM password_reset_codes WHERE user_id = $1", &[&user_id]).await?;
    }
    Ok(user_id)
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
