//! The second step of a login, taken right after the password was found right.

use serde_json::{Value, json};

use super::codes::{self, Code};
use super::store::{self, Method};
use crate::admin::users::USERS;
use crate::db::Client;
use crate::http::error::{ApiError, ApiResult};
use crate::resource::audit_event;

/// The login's `otp`, for a user whose factor is on: missing is 401 `otp_required`; of neither
/// shape a 422 on `otp`.
fn otp(sent: Option<&str>) -> ApiResult<Code> {
    match sent.map(str::trim).filter(|s| !s.is_empty()) {
        None => Err(ApiError::Unauthorized {
            code: "otp_required",
            message: "This account has a second factor: send the code of your authenticator app (or a recovery code) as otp.".into(),
        }),
        Some(s) => codes::parse(s).ok_or_else(|| {
            ApiError::field("otp", "The otp must be the 6 digits of your authenticator app or a recovery code (xxxx-xxxx-xxxx-xxxx).")
        }),
    }
}

/// `None` for a user without a second factor (whatever `otp` the body holds: their login is
/// as it was); the method of a right code otherwise. A wrong code is audited (`otp_failed`),
/// counted, and answered 401 `invalid_otp`; past the limit 429.
pub async fn second_factor(
    client: &mut Client,
    user_id: i64,
    otp_sent: Option<&str>,
    ip: &str,
) -> ApiResult<Option<Method>> {
    if !store::enabled(&*client, user_id).await? {
        return Ok(None);
    }
    let code = otp(otp_sent)?;
    let tx = client.transaction().await?;
    let Some(factor) = store::factor(&tx, user_id, true).await?.filter(|f| f.enabled) else {
        // Turned off since the first look.
        return Ok(None);
    };
    match store::check(&tx, user_id, &factor, &code).await? {
        Some(method) => {
            tx.commit().await?;
            Ok(Some(method))
        }
        None => {
            let kind = match code {
                Code::Totp(_) => Method::Totp,
                Code::Recovery(_) => Method::RecoveryCode,
            };
            audit_event(
                &tx,
                None,
                "otp_failed",
                &USERS,
                Some(user_id),
                json!({ "ip": ip, "method": kind.name() }),
            )
            .await?;
            // The wrong code counts even though the answer is an error.
            tx.commit().await?;
            Err(ApiError::Unauthorized {
                code: "invalid_otp",
                message: "The code is wrong, expired or already used.".into(),
            })
        }
    }
}

/// The details of a login's audit record: as before for a user without a second factor.
pub fn audited(ip: &str, second: Option<Method>) -> Value {
    match second {
        None => json!({ "ip": ip }),
        Some(method) => json!({ "ip": ip, "mfa": true, "method": method.name() }),
    }
}
