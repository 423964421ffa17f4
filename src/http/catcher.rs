//! Turns any error status that no handler gave a body (unknown routes, wrong methods,
//! panics) into the JSON error body; never an HTML page.

use salvo::http::{ResBody, StatusCode};
use salvo::prelude::*;
use serde_json::json;

#[handler]
pub async fn json_errors(res: &mut Response, ctrl: &mut FlowCtrl) {
    let status = res.status_code.unwrap_or(StatusCode::NOT_FOUND);
    if !(status.is_client_error() || status.is_server_error()) || !(res.body.is_none() || res.body.is_error())
    {
        return;
    }
    let (code, message) = match status {
        StatusCode::NOT_FOUND => ("not_found", "Resource not found.".to_owned()),
        StatusCode::METHOD_NOT_ALLOWED => {
            ("method_not_allowed", "This method is not allowed on this path.".to_owned())
        }
        StatusCode::PAYLOAD_TOO_LARGE => ("payload_too_large", "The request body is too large.".to_owned()),
        StatusCode::BAD_REQUEST => ("bad_request", "The request could not be understood.".to_owned()),
        s if s.is_server_error() => ("internal_error", "Internal server error.".to_owned()),
        s => ("http_error", s.canonical_reason().unwrap_or("Request failed").to_owned()),
    };
    res.body = ResBody::None;
    res.status_code(status);
    res.render(Json(json!({ "message": message, "code": code })));
    ctrl.skip_rest();
}
