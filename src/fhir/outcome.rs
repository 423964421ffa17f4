//! How FHIR routes answer: FHIR JSON, and every error (a search parameter the route does not
//! take, an unknown id, no token, a permission or branch not held, a rate limit, the
//! database away) as an `OperationOutcome` with the status the rest of the server gives; so
//! too what no route of the facade answers (an unknown path or type, a malformed id, a
//! method it does not serve, a panic), through [`catch_errors`].

use salvo::http::header::{CONTENT_TYPE, HeaderValue, LOCATION};
use salvo::http::{ResBody, StatusCode};
use salvo::prelude::*;
use serde_json::{Value, json};

use super::codes::ERROR_CODE;
use super::kinds::Type;
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

/// An error answered by a FHIR handler itself, as an `OperationOutcome`.
pub fn fail(req: &Request, res: &mut Response, status: StatusCode, code: &str, message: &str) {
    write(req, res, status, &operation_outcome(status, code, message));
}

/// 301 to `location`, with an informational `OperationOutcome` saying why.
pub fn moved(req: &Request, res: &mut Response, location: &str, code: &str, message: &str) {
    let outcome = json!({
        "resourceType": "OperationOutcome",
        "issue": [{
            "severity": "information",
            "code": "informational",
            "details": { "coding": [{ "system": ERROR_CODE, "code": code }], "text": message },
            "diagnostics": message,
        }],
    });
    write(req, res, StatusCode::MOVED_PERMANENTLY, &outcome);
    if let Ok(location) = HeaderValue::from_str(location) {
        res.headers_mut().insert(LOCATION, location);
    }
}

/// FHIR's issue type for an HTTP error status.
fn issue_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 422 => "invalid",
        401 => "login",
        403 => "forbidden",
        404 | 410 => "not-found",
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
        if sent["resourceType"] == "OperationOutcome" {
            write(req, res, status, &sent);
            return;
        }
        let message = sent["message"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| status.canonical_reason().unwrap_or("Request failed").to_owned());
        let code = sent["code"].as_str().unwrap_or("http_error");
        let outcome = operation_outcome(status, code, &message);
        write(req, res, status, &outcome);
    }
}

/// Whether `path` is under the facade's base.
fn is_fhir(path: &str) -> bool {
    path == "/fhir/r4" || path.starts_with("/fhir/r4/")
}

/// Catcher hoop, before the API's: an error under `/fhir/r4` that no route answered with a
/// body (no route for the path, a method not served, a panic) as an `OperationOutcome`.
/// Salvo adds `Allow` to a 405 after the catchers.
#[handler]
pub async fn catch_errors(req: &mut Request, res: &mut Response, ctrl: &mut FlowCtrl) {
    let status = res.status_code.unwrap_or(StatusCode::NOT_FOUND);
    let unanswered = res.body.is_none() || res.body.is_error();
    if !is_fhir(req.uri().path()) || !unanswered || !(status.is_client_error() || status.is_server_error()) {
        return;
    }
    let (code, message) = match status {
        StatusCode::NOT_FOUND => ("not_found", not_served(req.uri().path())),
        StatusCode::METHOD_NOT_ALLOWED => {
            ("method_not_allowed", "This FHIR server is read-only: this path answers GET only.".to_owned())
        }
        s if s.is_server_error() => ("internal_error", "Internal server error.".to_owned()),
        s => ("http_error", s.canonical_reason().unwrap_or("Request failed").to_owned()),
    };
    res.body = ResBody::None;
    write(req, res, status, &operation_outcome(status, code, &message));
    ctrl.skip_rest();
}

/// Why nothing is served at `path`, a path under the base: a type the facade does not serve,
/// an id its type cannot have, or an operation it does not know.
fn not_served(path: &str) -> String {
    let below = path.strip_prefix("/fhir/r4").unwrap_or_default().trim_start_matches('/');
    let segments: Vec<&str> = below.split('/').collect();
    let shown = |text: &str| text.chars().take(64).collect::<String>();
    if segments[0] == "Binary" {
        return match segments.as_slice() {
            [_] => "A Binary is only read by id: Binary/<id>.".into(),
            [_, id] => format!("Binary ids are whole numbers; {} is not one.", shown(id)),
            _ => "Nothing is served at this path.".into(),
        };
    }
    let Some(kind) = Type::ALL.into_iter().find(|kind| kind.name() == segments[0]) else {
        if segments[0].is_empty() || segments[0] == "metadata" {
            return "Nothing is served at this path; the CapabilityStatement is at /fhir/r4/metadata.".into();
        }
        let mut served: Vec<&str> = Type::ALL.iter().map(|kind| kind.name()).collect();
        served.push("Binary");
        return format!(
            "This server serves no resource type {}; it serves {}.",
            shown(segments[0]),
            served.join(", ")
        );
    };
    let malformed =
        |id: &str| kind.numeric_ids() && (id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()));
    let not_an_id = |id: &str| format!("{} ids are whole numbers; {} is not one.", kind.name(), shown(id));
    match segments.as_slice() {
        [_, id] if malformed(id) => not_an_id(id),
        [_, id, "$everything"] if kind == Type::Patient && malformed(id) => not_an_id(id),
        [_, _, operation] => format!("{} has no operation {}.", kind.name(), shown(operation)),
        _ => "Nothing is served at this path.".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_not_served_says_why() {
        assert_eq!(not_served("/fhir/r4/Patient/abc"), "Patient ids are whole numbers; abc is not one.");
        assert_eq!(not_served("/fhir/r4/Encounter/1/$everything"), "Encounter has no operation $everything.");
        assert!(not_served("/fhir/r4/Device").starts_with("This server serves no resource type Device;"));
        assert!(
            not_served(&format!("/fhir/r4/{}", "X".repeat(500))).len() < 300,
            "what was sent is cut short"
        );
    }
}
