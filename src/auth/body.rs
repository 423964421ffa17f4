//! The bodies of the authentication routes, each declared once: the check, the typed value the
//! handler reads and the schema the document shows come from the same declaration.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::admin::users::{EMAIL, NAME};
use crate::resource::field::{Field, Kind, registry_ref, secret, text};
use crate::resource::input::Input;
use crate::resource::row::Fields;
use crate::security::password;

/// The longest code a code field takes: a recovery code with its dashes, with room to spare.
const CODE_MAX: usize = 64;
const NEW_PASSWORD: Field = Field::new("password", Kind::Password).required();
const CONFIRMATION: Field = secret("password_confirmation", password::MAX_LEN).required();
const CODE: Field = text("code", CODE_MAX).required();

pub static LOGIN: Input = Input::new(
    "LoginRequest",
    &[
        text("username", 128).required(),
        // Kept exactly as typed: a password set under older rules still logs in.
        secret("password", 1024).required(),
        // Asked for (401 `otp_required`) only when the account has a second factor on.
        secret("otp", CODE_MAX),
    ],
)
.with_notes(&[(
    "otp",
    "For an account with a second factor: the 6 digits of its authenticator app, or an unused recovery code (xxxx-xxxx-xxxx-xxxx). Other accounts need none; one sent is not read.",
)]);

#[derive(Deserialize)]
pub struct Login {
    pub username: String,
    pub password: String,
    pub otp: Option<String>,
}

pub static PROFILE: Input = Input::new("ProfileRequest", &[NAME, EMAIL]);

#[derive(Deserialize)]
pub struct Profile {
    pub name: String,
    pub email: String,
}

pub static SWITCH_BRANCH: Input =
    Input::new("SwitchBranchRequest", &[registry_ref("branch_id", "branches").required()]);

#[derive(Deserialize)]
pub struct SwitchBranch {
    pub branch_id: i64,
}

pub static CHANGE_PASSWORD: Input = Input::new(
    "ChangePasswordRequest",
    &[secret("current_password", 1024).required(), NEW_PASSWORD, CONFIRMATION],
)
.with_rules(&[new_password]);

#[derive(Deserialize)]
pub struct ChangePassword {
    pub current_password: String,
    pub password: String,
}

pub static RESET_CODE: Input = Input::new("ResetCodeRequest", &[EMAIL]);

#[derive(Deserialize)]
pub struct ResetCode {
    pub email: String,
}

pub static VERIFY_CODE: Input =
    Input::new("VerifyCodeRequest", &[EMAIL, CODE]).with_notes(&[("code", "The 6 digits mailed")]);

#[derive(Deserialize)]
pub struct VerifyCode {
    pub email: String,
    pub code: String,
}

pub static RESET_PASSWORD: Input =
    Input::new("ResetPasswordRequest", &[EMAIL, CODE, NEW_PASSWORD, CONFIRMATION])
        .with_rules(&[new_password])
        .with_notes(&[("code", "The 6 digits mailed")]);

#[derive(Deserialize)]
pub struct ResetPassword {
    pub email: String,
    pub code: String,
    pub password: String,
}

/// The code of an authenticator app (or a recovery code), as typed.
pub static MFA_CODE: Input =
    Input::new("MfaCodeRequest", &[CODE]).with_notes(&[("code", "The 6 digits of the authenticator app")]);

#[derive(Deserialize)]
pub struct MfaCode {
    pub code: String,
}

/// Turning the second factor off takes the password and a code.
pub static MFA_OFF: Input =
    Input::new("MfaDisableRequest", &[secret("current_password", 1024).required(), CODE])
        .with_notes(&[("code", "The 6 digits of the authenticator app, or an unused recovery code")]);

#[derive(Deserialize)]
pub struct MfaOff {
    pub current_password: String,
    pub code: String,
}

/// A new password must pass the rules that need no account and match its confirmation (the
/// route checks it against the account's username and e-mail).
fn new_password(body: &mut Map<String, Value>) -> Vec<(String, String)> {
    let (Some(Value::String(new)), Some(Value::String(confirmation))) =
        (body.field("password"), body.field("password_confirmation"))
    else {
        return Vec::new();
    };
    match password::check_new(new, confirmation) {
        Ok(()) => Vec::new(),
        Err(message) => vec![("password".into(), message)],
    }
}
