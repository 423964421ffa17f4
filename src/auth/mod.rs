//! Authentication routes and hoops: the bearer hoop puts the caller ([`AuthUser`]) in the
//! depot; `/auth/*` logs in and out, resets and changes passwords; `mfa` is the second
//! factor.

mod body;
pub mod mfa;
mod rehash;
pub mod reset;
pub mod routes;
mod sessions;

use std::sync::Arc;

use salvo::prelude::*;

use crate::http::error::ApiError;
use crate::state::session::{Presented, authenticate};
use crate::state::{AppState, AuthUser};

/// The user of a presented token. Made-up tokens are counted per client address: past the
/// limit the address gets 429 before any lookup, so guessing costs the registry nothing.
async fn check_token(state: &AppState, req: &Request, token: &str) -> Result<AuthUser, ApiError> {
    let key = state.bad_token_key(req);
    state.limits.bad_token.check(&key)?;
    match authenticate(state, token).await? {
        Presented::User(user) => Ok(user),
        Presented::Invalid => {
            state.limits.bad_token.count(&key)?;
            Err(ApiError::Unauthenticated)
        }
        Presented::Idle { token_id, user_id } => {
            sessions::end_idle(state, token_id, user_id).await?;
            Err(ApiError::Unauthenticated)
        }
    }
}

/// Hoop: requires a valid bearer token and puts the [`AuthUser`] in the depot; `metered`
/// counts the request against the user's general rate limit; `before_enrolment`: the routes
/// behind it answer a user who must enrol a second factor and has not (any other route
/// refuses them 403 `mfa_enrolment_required`).
pub struct Authenticate {
    pub metered: bool,
    pub before_enrolment: bool,
}

impl Authenticate {
    pub const METERED: Self = Self { metered: true, before_enrolment: false };
    pub const UNMETERED: Self = Self { metered: false, before_enrolment: false };
}

#[async_trait]
impl Handler for Authenticate {
    async fn handle(&self, req: &mut Request, depot: &mut Depot, res: &mut Response, ctrl: &mut FlowCtrl) {
        authenticate_request(self, req, depot, res, ctrl).await
    }
}

async fn authenticate_request(
    hoop: &Authenticate,
    req: &mut Request,
    depot: &mut Depot,
    res: &mut Response,
    ctrl: &mut FlowCtrl,
) {
    let state = AppState::of(depot);
    let outcome = match crate::http::bearer(req) {
        None => Err(ApiError::Unauthenticated),
        Some(token) => check_token(&state, req, token).await,
    };
    let user = match outcome {
        Ok(user) => user,
        Err(e) => {
            res.render(e);
            ctrl.skip_rest();
            return;
        }
    };
    crate::telemetry::record_user(user.id);
    if hoop.metered
        && let Err(e) = state.limits.api.hit(&format!("user:{}", user.id), res)
    {
        res.render(e);
        ctrl.skip_rest();
        return;
    }
    if !hoop.before_enrolment && mfa::must_enrol(&state.settings, &user) {
        res.render(mfa::enrolment_required());
        ctrl.skip_rest();
        return;
    }
    depot.insert_typed(Arc::new(user));
}
