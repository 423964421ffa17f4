//! The branch-context hoop: `X-Branch-Id` -> a [`BranchRoute`] in the depot.
//!
//! Missing (or not an integer) -> 400; unknown, archived or
//! not granted to the caller -> 403. Unknown and not-granted answer alike so the header
//! cannot be used to discover which branches exist.

use salvo::prelude::*;

use crate::http::error::ApiError;
use crate::state::{AppState, AuthUser};

pub const HEADER: &str = "x-branch-id";

fn is_read(method: &salvo::http::Method) -> bool {
    use salvo::http::Method;
    [Method::GET, Method::HEAD, Method::OPTIONS].contains(method)
}

#[handler]
pub async fn require_branch(req: &mut Request, depot: &mut Depot, res: &mut Response, ctrl: &mut FlowCtrl) {
    let outcome = async {
        let raw = req.headers().get(HEADER).map(|v| v.to_str().unwrap_or_default().trim().to_owned());
        let raw = match raw {
            None => {
                return Err(ApiError::bad_request("branch_required", "The X-Branch-Id header is required."));
            }
            Some(raw) if raw.is_empty() => {
                return Err(ApiError::bad_request("branch_required", "The X-Branch-Id header is required."));
            }
            Some(raw) => raw,
        };
        let id = raw.parse::<i64>().ok().filter(|id| *id > 0).ok_or_else(|| {
            ApiError::bad_request(
                "branch_invalid",
                "The X-Branch-Id header must be a branch id (an integer).",
            )
        })?;
        crate::telemetry::record_branch(id);
        let user = AuthUser::current(depot)?;
        let denied = || ApiError::Forbidden {
            code: "branch_forbidden",
            message: "You do not have access to this branch.".into(),
        };
        if !user.branch_ids.contains(&id) {
            return Err(denied());
        }
        let state = AppState::of(depot);
        match state.directory.route(id).await? {
            Ok(route) if route.frozen && !is_read(req.method()) => Err(ApiError::Unavailable {
                code: "branch_moving",
                message: "This branch is moving to another database server: its records can be read, \
                          and changed again in a few seconds."
                    .into(),
                retry_after_secs: 2,
            }),
            Ok(route) => Ok(route),
            Err(_) => Err(denied()),
        }
    }
    .await;
    match outcome {
        Ok(route) => {
            depot.insert_typed(route);
        }
        Err(e) => {
            res.render(e);
            ctrl.skip_rest();
        }
    }
}
