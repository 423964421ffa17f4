//! HTTP plumbing shared by every route: errors, envelopes, JSON bodies, list parameters,
//! client addresses, rate limits, request spans and the API description.

pub mod catcher;
pub mod compression;
pub mod cors;
pub mod docs;
pub mod endpoints;
pub mod error;
pub mod guard;
pub mod list;
pub mod listener;
pub mod params;
pub mod rate_limit;
pub mod text;
pub mod trace;

use std::net::IpAddr;

use salvo::http::StatusCode;
use salvo::prelude::*;
use serde_json::{Map, Value, json};

use crate::config::{Cidr, Settings};
use error::{ApiError, ApiResult};

/// `{message, data}` with 200.
pub fn ok(res: &mut Response, message: &str, data: impl serde::Serialize) {
    res.status_code(StatusCode::OK);
    res.render(Json(json!({ "message": message, "data": data })));
}

/// `{message, data}` with 200, `data` being JSON text already (made by PostgreSQL, or put
/// together from pieces it made): written as it is, never parsed.
pub fn ok_text(res: &mut Response, message: &str, data: &str) {
    res.status_code(StatusCode::OK);
    res.render(Text::Json(format!("{{\"data\":{data},\"message\":{}}}", Value::String(message.to_owned()))));
}

/// `{message, data}` with 201.
pub fn created(res: &mut Response, message: &str, data: impl serde::Serialize) {
    res.status_code(StatusCode::CREATED);
    res.render(Json(json!({ "message": message, "data": data })));
}

/// `{message}` with 200 (deletes and actions with nothing to return).
pub fn done(res: &mut Response, message: &str) {
    res.status_code(StatusCode::OK);
    res.render(Json(json!({ "message": message })));
}

/// Reads the request body as a JSON object.
///
/// Oversized bodies are a 413, a body declared as something other than JSON a 415, and
/// malformed JSON or a non-object a 400 that says what is wrong, and a text holding NUL or
/// another control character a 422 naming it (`text`).
/// A body that takes longer than the body-read limit to arrive is a 408: a slow client holds
/// no more than its own task.
pub async fn json_object(req: &mut Request, settings: &Settings) -> ApiResult<Map<String, Value>> {
    if let Some(content_type) = req.headers().get("content-type") {
        let content_type = content_type.to_str().unwrap_or_default().to_ascii_lowercase();
        let essence = content_type.split(';').next().unwrap_or_default().trim();
        if !(essence == "application/json" || essence.ends_with("+json")) {
            return Err(ApiError::UnsupportedMediaType);
        }
    }
    let bytes = read_body(req, settings, settings.max_body_bytes).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => {
            let refused = text::body_errors(&map);
            if refused.is_empty() { Ok(map) } else { Err(ApiError::Validation(refused)) }
        }
        Ok(_) => Err(ApiError::bad_request("invalid_json", "The request body must be a JSON object.")),
        Err(e) => Err(ApiError::bad_request(
            "invalid_json",
            format!("The request body is not valid JSON (line {}, column {}).", e.line(), e.column()),
        )),
    }
}

/// The request body as bytes (an uploaded image), at most `max_bytes` (413 past it), read
/// within the body-read limit (408 past it).
pub async fn body_bytes(req: &mut Request, settings: &Settings, max_bytes: usize) -> ApiResult<Vec<u8>> {
    Ok(read_body(req, settings, max_bytes).await?.to_vec())
}

async fn read_body<'a>(req: &'a mut Request, settings: &Settings, max_bytes: usize) -> ApiResult<&'a [u8]> {
    let started = std::time::Instant::now();
    let read = req.payload_with_max_size(max_bytes.min(settings.max_body_bytes));
    let bytes = tokio::time::timeout(settings.body_read_timeout, read)
        .await
        .map_err(|_| ApiError::RequestTimeout)?
        .map_err(|e| match e {
            salvo::http::ParseError::PayloadTooLarge => ApiError::PayloadTooLarge,
            // The server's own body timeout (the same BODY_READ_TIMEOUT_MS) may fire first.
            _ if started.elapsed() >= settings.body_read_timeout => ApiError::RequestTimeout,
            _ => ApiError::bad_request("unreadable_body", "The request body could not be read."),
        })?;
    Ok(bytes)
}

/// The token of an `Authorization: Bearer ...` header, if the request has one.
pub fn bearer(req: &Request) -> Option<&str> {
    let value = req.headers().get("authorization")?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The client's address: the peer, unless the peer is a trusted proxy, in which case the
/// right-most address of X-Forwarded-For that is not itself a trusted proxy.
pub fn client_ip(req: &Request, trusted: &[Cidr]) -> Option<IpAddr> {
    let peer = req.remote_addr().ip()?;
    let is_trusted = |ip: IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(peer) {
        return Some(peer);
    }
    let forwarded: Vec<IpAddr> = req
        .headers()
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|part| part.trim().parse().ok())
        .collect();
    Some(forwarded.into_iter().rev().find(|ip| !is_trusted(*ip)).unwrap_or(peer))
}

/// The scheme and host the client used, for absolute links.
pub fn base_url(req: &Request, trust_forwarded: bool) -> String {
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let scheme = trust_forwarded
        .then(|| header("x-forwarded-proto"))
        .flatten()
        .filter(|s| s == "http" || s == "https")
        .unwrap_or_else(|| req.uri().scheme_str().unwrap_or("http").to_owned());
    let host = trust_forwarded
        .then(|| header("x-forwarded-host"))
        .flatten()
        .or_else(|| header("host"))
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
        .filter(|h| h.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b)))
        .unwrap_or_else(|| "localhost".into());
    format!("{scheme}://{host}")
}

/// A route template whose parameters (`{patient_id}`) match digits only (`{patient_id:num}`),
/// so that `/patients/export` is never taken for `/patients/{id}`.
pub fn numeric_params(template: &str) -> String {
    let mut out = String::with_capacity(template.len() + 8);
    for part in template.split_inclusive('}') {
        match part.strip_suffix('}') {
            Some(open) if open.contains('{') && !open.contains(':') => {
                out.push_str(open);
                out.push_str(":num}");
            }
            _ => out.push_str(part),
        }
    }
    out
}

/// A path parameter that must be a positive integer id; anything else is a 404 (no such
/// record can exist).
pub fn path_id(req: &Request, name: &str) -> ApiResult<i64> {
    req.param::<String>(name)
        .and_then(|v| v.parse::<i64>().ok())
        .filter(|id| *id > 0)
        .ok_or(ApiError::NotFound)
}
