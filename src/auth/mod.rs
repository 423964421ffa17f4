//! Authentication routes and hoops: the bearer hoop puts the caller ([`AuthUser`]) in the
//! depot; `/auth/*` logs in and out, resets and changes passwords.

pub mod reset;
pub mod routes;

use std::sync::Arc;

use salvo::prelude::*;

use crate::http::error::ApiError;
use crate::state::AppState;
use crate::state::session::authenticate;

fn bearer(req: &Request) -> Option<&str> {
    let value = req.headers().get("authorization")?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Hoop: requires a valid bearer token and puts the [`AuthUser`] in the depot; `metered`
/// counts the request against the user's general rate limit.
pub struct Authenticate {
    pub metered: bool,
}

#[async_trait]
impl Handler for Authenticate {
    async fn handle(&self, req: &mut Request, depot: &mut Depot, res: &mut Response, ctrl: &mut FlowCtrl) {
        authenticate_request(self.metered, req, depot, res, ctrl).await
    }
}

async fn authenticate_request(
    metered: bool,
    req: &mut Request,
    depot: &mut Depot,
    res: &mut Response,
    ctrl: &mut FlowCtrl,
) {
    let state = AppState::of(depot);
    let outcome = match bearer(req) {
        None => Err(ApiError::Unauthenticated),
        Some(token) => match authenticate(&state, token).await {
            Ok(Some(user)) => Ok(user),
            Ok(None) => Err(ApiError::Unauthenticated),
            Err(e) => Err(e),
        },
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
    if metered && let Err(e) = state.limits.api.hit(&format!("user:{}", user.id), res) {
        res.render(e);
        ctrl.skip_rest();
        return;
    }
    depot.insert_typed(Arc::new(user));
}
