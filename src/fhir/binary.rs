//! `GET /fhir/r4/Binary/{id}`: the bytes of an attachment (a `DocumentReference`'s content).
//! Asked for as FHIR JSON (`Accept: application/fhir+json` or `application/json`, or
//! `_format=json`), a `Binary` resource with the bytes in base64, for a file of at most
//! [`JSON_BOUND`] bytes (a larger one is a 406 that says to ask for the bytes); asked for as
//! anything else, the bytes themselves with their media type, streamed by the attachment's
//! content route's own code (ETag, ranges). Either is found, answered and audited by
//! `clinical::attachments` (`open_content`), exactly as a download of the content is: the
//! read shows in the patient's access log. Needs `attachments.read`; only read, no search.

use base64::Engine;
use salvo::http::StatusCode;
use salvo::prelude::*;
use serde_json::json;

use super::document;
use super::outcome::{fail, respond};
use super::search::Search;
use crate::clinical::attachments::open_content;
use crate::http::docs::FHIR_JSON;
use crate::http::error::{ApiError, ApiResult};
use crate::http::guard::{accept_of, preferred};
use crate::http::{self as web, list};
use crate::resource::{Context, Scope};

/// The largest file answered as base64 in FHIR JSON (about 11 MiB of JSON); past it, only
/// the bytes themselves, which stream.
pub const JSON_BOUND: u64 = 8 * 1024 * 1024;

/// What the route may answer: FHIR JSON, JSON, or a file's own media type.
pub const PRODUCED: &[&str] = &[
    FHIR_JSON,
    "application/json",
    "application/pdf",
    "image/jpeg",
    "image/png",
    "image/tiff",
    "application/dicom",
];

/// Whether `_format` asks for JSON (any other value is refused).
fn json_format(req: &Request) -> ApiResult<Option<bool>> {
    let pairs = list::query_pairs(req);
    list::only(&pairs, &["_format"]).map_err(|_| {
        ApiError::bad_request("invalid_search", "A read of a Binary takes no parameter but _format.")
    })?;
    let Some((_, value)) = pairs.iter().rev().find(|(name, _)| name == "_format") else { return Ok(None) };
    match value.split(';').next().unwrap_or_default().trim() {
        "" => Ok(None),
        "json" | "application/json" | "application/fhir+json" => Ok(Some(true)),
        _ => Err(ApiError::bad_request("invalid_search", "_format may only be json.")),
    }
}

#[handler]
pub async fn read(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let id = web::path_id(req, "id")?;
    let asked_json = json_format(req)?;
    let content = match open_content(&ctx, id).await {
        Ok(content) => content,
        Err(ApiError::NotFound) => return not_found(&ctx, req, res, id).await,
        Err(e) => return Err(e),
    };
    let json = match asked_json {
        Some(json) => json,
        None => {
            let offered = [content.media_type(), FHIR_JSON, "application/json"];
            match preferred(&accept_of(req), &offered) {
                Some(media) => media != content.media_type(),
                None => return Err(ApiError::NotAcceptable),
            }
        }
    };
    if !json {
        return content.answer(&ctx, req, res).await;
    }
    if content.bytes() > JSON_BOUND {
        let message = format!(
            "Binary/{id} has {} bytes, more than the {JSON_BOUND} answered as FHIR JSON; ask for its bytes \
             (Accept: {}).",
            content.bytes(),
            content.media_type()
        );
        fail(req, res, StatusCode::NOT_ACCEPTABLE, "binary_too_large", &message);
        return Ok(());
    }
    let (media, patient) = (content.media_type(), content.patient());
    let bytes = content.read_all(&ctx).await?;
    let binary = json!({
        "resourceType": "Binary",
        "id": id.to_string(),
        "contentType": media,
        "securityContext": { "reference": format!("Patient/{patient}") },
        "data": base64::engine::general_purpose::STANDARD.encode(bytes),
    });
    respond(req, res, &binary);
    Ok(())
}

/// 410 for an attachment removed from the chart (as a `DocumentReference` read of it), else
/// 404.
async fn not_found(ctx: &Context, req: &Request, res: &mut Response, id: i64) -> ApiResult<()> {
    let search = Search { ids: Some(vec![id.to_string()]), count: 1, gone: true, ..Search::default() };
    let mut conn = ctx.conn(Scope::Branch).await?;
    let timezone = ctx.branch()?.timezone.clone();
    if document::search(&mut conn, &search, &timezone).await?.total == 0 {
        return Err(ApiError::NotFound);
    }
    fail(req, res, StatusCode::GONE, "deleted", &format!("Binary/{id} was deleted."));
    Ok(())
}
