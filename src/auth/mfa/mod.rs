//! A second factor: TOTP (RFC 6238) with one-time recovery codes.
//!
//! - Enrolment: `POST /auth/mfa/totp` keeps a pending secret and answers it (base32, the
//!   otpauth URI, a QR code as SVG); `POST /auth/mfa/totp/confirm` turns it on with a right
//!   code and answers ten recovery codes, shown once and stored as SHA-256.
//! - Login asks for `otp` after the password (`login::second_factor`): a code of the app or a
//!   recovery code. A time step is accepted once (`user_totp.last_step`); wrong codes are
//!   counted per account in the registry, so every instance refuses past the same limit.
//! - `DELETE /auth/mfa/totp` turns it off (the password and a code); an administrator's
//!   `POST /users/{id}/mfa/reset` removes it, ends the user's sessions and mails them.
//! - `MFA_REQUIRED_FOR`: holders of those permissions without a factor reach only what
//!   enrolling takes; the bearer hoop refuses the rest (`must_enrol`).

pub mod codes;
pub mod login;
mod routes;
mod store;

pub use routes::endpoints;

use crate::config::Settings;
use crate::http::error::ApiError;
use crate::state::AuthUser;

/// Every permission `MFA_REQUIRED_FOR` names must be in the catalogue: a misspelt one would
/// quietly require nothing.
pub fn check_settings(settings: &Settings) -> anyhow::Result<()> {
    for name in &settings.mfa_required_for {
        if !crate::permissions::CATALOGUE.iter().any(|(p, _)| p == name) {
            let known: Vec<&str> = crate::permissions::CATALOGUE.iter().map(|(p, _)| *p).collect();
            anyhow::bail!(
                "MFA_REQUIRED_FOR names {name:?}, which is not a permission ({})",
                known.join(", ")
            );
        }
    }
    Ok(())
}

/// Whether `user` holds a permission that requires a second factor and has none on.
pub fn must_enrol(settings: &Settings, user: &AuthUser) -> bool {
    !user.mfa_enabled && settings.mfa_required_for.iter().any(|p| user.permissions.contains(p))
}

pub fn enrolment_required() -> ApiError {
    ApiError::Forbidden {
        code: "mfa_enrolment_required",
        message: "Your role requires a second factor: turn one on (POST /api/v1/auth/mfa/totp) before anything else."
            .into(),
    }
}
