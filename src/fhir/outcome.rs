//! How FHIR routes answer: FHIR JSON, and every error (a search parameter the route does not
//! take, an unknown id, no token, a permission or branch not held, a rate limit, the
//! database away) as an `OperationOutcome` with the status the rest of the server gives.

use salvo::http::header::{CONTENT_TYPE, HeaderValue};
use salvo::http::{ResBody, StatusCode};
use salvo::prelude::*;
use serde_json::{Value, json};

use super::codes::ERROR_CODE;
use crate::http::docs::FHIR_JSON;
use crate::http::guard::acceptable;

/// What FHIR routes answer in: FHIR JSON, or the same body as JSON for a client that asks
/// only for that.
pub const MEDIA: &[&str] = &[FHIR_JSON, "application/json"];

/// The media type of an answer to `req`: plain JSON only for a client that takes JSON but not
/// FHIR JSON (a 406 is written in FHIR JSON, as every other error).
fn media_for(req: &Request) -> &'static str {
    let accept: Vec<&str> = req.headers().get_all("accept").iter().filter_map(|v| v.to_str().ok()).collect();
    let accept = accept.join(",");
    if !acceptable(&accept, &[FHIR_JSON]) && acceptable(&accept, &["application/json"]) {
        "application/json; charset=utf-8"
    } else {
        "application/fhir+json; charset=utf-8"
    }
}

/// 200 with `body`.
pub fn respond(req: &Request, res: &mut Response, body: &Value) {
    write(req, res, StatusCode::OK, body);
}

fn write(req: &Request, res: &mut Response, status: StatusCode, body: &Value) {
    res.status_code(status);
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(media_for(req)));
    let _ = res.write_body(serde_json::to_vec(body).unwrap_or_default());
}

/// FHIR's issue type for an HTTP error status.
fn issue_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 422 => "invalid",
        401 => "login",
        403 => "forbidden",
        404 => "not-found",
        405 | 406 | 415 => "not-supported",
        408 => "timeout",
        409 => "conflict",
        413 => "too-long",
        429 => "throttled",
        503 => "transient",
        500 => "exception",
        _ => "processing",
    }
}

/// An `OperationOutcome` of one error: FHIR's issue type, and the server's own stable code and
/// message as its details.
pub fn operation_outcome(status: StatusCode, code: &str, message: &str) -> Value {
    json!({
        "resourceType": "OperationOutcome",
        "issue": [{
            "severity": "error",
            "code": issue_type(status),
            "details": { "coding": [{ "system": ERROR_CODE, "code": code }], "text": message },
            "diagnostics": message,
        }],
    })
}

/// Hoop, outermost on the FHIR routes: turns whatever error the route or the hoops in front of
/// it answered (the API's `{message, code}`) into an `OperationOutcome`.
pub struct OperationOutcomes;

#[async_trait]
impl Handler for OperationOutcomes {
    async fn handle(&self, req: &mut Request, depot: &mut Depot, res: &mut Response, ctrl: &mut FlowCtrl) {
        ctrl.call_next(req, depot, res).await;
        let status = res.status_code.unwrap_or(StatusCode::NOT_FOUND);
        if !(status.is_client_error() || status.is_server_error()) {
            return;
        }
        let sent: Value = match res.take_body() {
            ResBody::Once(bytes) => serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            ResBody::Chunks(chunks) => {
                serde_json::from_slice(&chunks.into_iter().flatten().collect::<Vec<u8>>())
                    .unwrap_or(Value::Null)
            }
            _ => Value::Null,
        };
        let message = sent["message"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| status.canonical_reason().unwrap_or("Request failed").to_owned());
        let code = sent["code"].as_str().unwrap_or("http_error");
        let outcome = operation_outcome(status, code, &message);
        write(req, res, status, &outcome);
    }
}
