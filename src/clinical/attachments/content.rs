//! `GET /patients/{patient_id}/attachments/{id}/content`: the bytes as they were sent,
//! streamed from the store, with the SHA-256 as the ETag (`If-None-Match`: 304), one byte
//! range at a time (206 with `Content-Range`, 416 past the end), the file's name in
//! `Content-Disposition` and `nosniff`; or, with `?thumbnail=N`, a PNG of an image at most N
//! pixels on its longest side, decoded within the bounds of every image the server decodes
//! (`images`). Every answer is audited as a read that names the patient.

use std::ops::RangeInclusive;

use salvo::http::StatusCode;
use salvo::http::header::{
    ACCEPT_RANGES, CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, ETAG,
    HeaderValue, IF_NONE_MATCH, RANGE,
};
use salvo::prelude::*;
use serde_json::json;

use super::kinds::{self, Kind};
use super::record::ATTACHMENTS;
use super::storage::{self, Blob, Store};
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web, list};
use crate::images;
use crate::permissions::ATTACHMENTS_READ;
use crate::resource::reads::record_read;
use crate::resource::{Context, Scope};

/// The sides a thumbnail may be asked for.
pub const THUMBNAIL_SIDES: RangeInclusive<u32> = 16..=1024;

struct Stored {
    kind: Kind,
    bytes: u64,
    sha256: String,
    filename: String,
    blob: Blob,
    patient: i64,
    id: i64,
}

fn header(value: &str) -> ApiResult<HeaderValue> {
    Ok(HeaderValue::from_str(value).map_err(anyhow::Error::from)?)
}

#[handler]
pub async fn content(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(ATTACHMENTS_READ)?;
    let patient = web::path_id(req, "patient_id")?;
    let id = web::path_id(req, "id")?;
    let thumbnail = thumbnail_side(req)?;
    let stored = open(&ctx, id, Some(patient)).await?;
    audit(&ctx, &stored, thumbnail).await?;
    if let Some(side) = thumbnail {
        no_cache(res);
        return answer_thumbnail(&ctx, res, stored, side).await;
    }
    answer(&ctx, req, res, stored).await
}

/// An attachment's bytes, found: what its content route and FHIR's `Binary` read answer.
/// Nothing of the bytes is answered without the audit record of the read, the content
/// route's own.
pub struct Content {
    stored: Stored,
}

impl Content {
    pub fn patient(&self) -> i64 {
        self.stored.patient
    }

    pub fn media_type(&self) -> &'static str {
        self.stored.kind.media_type()
    }

    pub fn bytes(&self) -> u64 {
        self.stored.bytes
    }

    /// The bytes as the content route answers them (streamed, with the ETag, a range), the
    /// read audited.
    pub async fn answer(self, ctx: &Context, req: &Request, res: &mut Response) -> ApiResult<()> {
        audit(ctx, &self.stored, None).await?;
        answer(ctx, req, res, self.stored).await
    }

    /// The whole file in memory, the read audited: for a caller that bounded
    /// [`Content::bytes`] first.
    pub async fn read_all(self, ctx: &Context) -> ApiResult<Vec<u8>> {
        audit(ctx, &self.stored, None).await?;
        read_whole(ctx, self.stored).await
    }
}

async fn read_whole(ctx: &Context, stored: Stored) -> ApiResult<Vec<u8>> {
    use futures_util::TryStreamExt;
    let route = ctx.branch()?.clone();
    let objects = objects_of(ctx)?;
    let bytes = storage::read(ctx.state.clone(), route, objects, stored.blob, 0, stored.bytes - 1)
        .try_fold(Vec::with_capacity(stored.bytes as usize), |mut all, piece| async move {
            all.extend_from_slice(&piece);
            Ok(all)
        })
        .await
        .map_err(anyhow::Error::from)?;
    Ok(bytes)
}

/// The audit record of a read of `stored`'s content (a thumbnail of it): a read of the
/// attachment that names its patient.
async fn audit(ctx: &Context, stored: &Stored, thumbnail: Option<u32>) -> ApiResult<()> {
    let details = json!({ "patient_id": stored.patient, "content": true, "thumbnail": thumbnail });
    record_read(ctx, ATTACHMENTS.path, "view", Some(stored.id), Some(details)).await
}

/// The live attachment `id` of a live patient (404 when there is none). Needs
/// `attachments.read`.
pub async fn open_content(ctx: &Context, id: i64) -> ApiResult<Content> {
    let stored = open(ctx, id, None).await?;
    Ok(Content { stored })
}

/// The live attachment `id` of a live patient (of `patient`, when given).
async fn open(ctx: &Context, id: i64, patient: Option<i64>) -> ApiResult<Stored> {
    ctx.require(ATTACHMENTS_READ)?;
    let stored = {
        let mut conn = ctx.conn(Scope::Branch).await?;
        let row = conn
            .client()
            .query_opt(
                "SELECT a.kind, a.bytes, a.sha256, a.filename, b.id, b.store_key, a.patient_id
                   FROM attachments a JOIN attachment_blobs b ON b.id = a.blob_id
                   JOIN patients p ON p.id = a.patient_id AND p.deleted_at IS NULL
                  WHERE a.id = $1 AND ($2::bigint IS NULL OR a.patient_id = $2) AND a.deleted_at IS NULL",
                &[&id, &patient],
            )
            .await?
            .ok_or(ApiError::NotFound)?;
        Stored {
            kind: Kind::of_name(row.get(0))
                .ok_or_else(|| anyhow::anyhow!("an attachment of no known kind"))?,
            bytes: row.get::<_, i64>(1) as u64,
            sha256: row.get(2),
            filename: row.get(3),
            blob: Blob { id: row.get(4), store_key: row.get(5) },
            patient: row.get(6),
            id,
        }
    };
    Ok(stored)
}

fn objects_of(ctx: &Context) -> ApiResult<Option<std::sync::Arc<super::objects::Objects>>> {
    Ok(match Store::of(&ctx.state.settings)? {
        Store::Objects(objects) => Some(objects),
        Store::Database => None,
    })
}

fn no_cache(res: &mut Response) {
    res.headers_mut().insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    res.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
}

/// The file, or the range asked for, streamed from the store.
async fn answer(ctx: &Context, req: &Request, res: &mut Response, stored: Stored) -> ApiResult<()> {
    let objects = objects_of(ctx)?;
    no_cache(res);
    let tag = format!("\"{}\"", stored.sha256);
    res.headers_mut().insert(ETAG, header(&tag)?);
    res.headers_mut().insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if none_match(req, &tag) {
        res.status_code(StatusCode::NOT_MODIFIED);
        return Ok(());
    }
    let range = range_of(req, stored.bytes).inspect_err(|_| {
        if let Ok(all) = header(&format!("bytes */{}", stored.bytes)) {
            res.headers_mut().insert(CONTENT_RANGE, all);
        }
    })?;
    res.headers_mut().insert(CONTENT_DISPOSITION, header(&kinds::disposition(&stored.filename))?);
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(stored.kind.media_type()));
    let (first, last) = match range {
        Some((first, last)) => {
            res.status_code(StatusCode::PARTIAL_CONTENT);
            res.headers_mut()
                .insert(CONTENT_RANGE, header(&format!("bytes {first}-{last}/{}", stored.bytes))?);
            (first, last)
        }
        None => {
            res.status_code(StatusCode::OK);
            (0, stored.bytes - 1)
        }
    };
    res.headers_mut().insert(CONTENT_LENGTH, header(&(last - first + 1).to_string())?);
    let route = ctx.branch()?.clone();
    res.stream(storage::read(ctx.state.clone(), route, objects, stored.blob, first, last));
    Ok(())
}

fn thumbnail_side(req: &Request) -> ApiResult<Option<u32>> {
    let Some((_, value)) = list::query_pairs(req).into_iter().rev().find(|(k, _)| k == "thumbnail") else {
        return Ok(None);
    };
    match value.parse::<u32>() {
        Ok(side) if THUMBNAIL_SIDES.contains(&side) => Ok(Some(side)),
        _ => Err(ApiError::field(
            "thumbnail",
            format!("The thumbnail must be {} to {} pixels.", THUMBNAIL_SIDES.start(), THUMBNAIL_SIDES.end()),
        )),
    }
}

/// Whether `If-None-Match` names `tag` (or is `*`).
fn none_match(req: &Request, tag: &str) -> bool {
    req.headers()
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == tag || t == "*")
}

/// The one range `Range: bytes=...` asks for within `size` bytes, inclusive; `None` for the
/// whole file (no header, one that is not bytes, several ranges); 416 when it starts past the
/// end.
fn range_of(req: &Request, size: u64) -> ApiResult<Option<(u64, u64)>> {
    let Some(value) = req.headers().get(RANGE).and_then(|v| v.to_str().ok()) else { return Ok(None) };
    parse_range(value, size).map_err(|()| ApiError::Refusal {
        status: StatusCode::RANGE_NOT_SATISFIABLE,
        code: "range_not_satisfiable",
        message: format!("The file has {size} bytes; the range asked for is not within them."),
    })
}

fn parse_range(value: &str, size: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(spec) = value.trim().strip_prefix("bytes=") else { return Ok(None) };
    if spec.contains(',') {
        return Ok(None);
    }
    let Some((from, to)) = spec.trim().split_once('-') else { return Ok(None) };
    let (from, to) = (from.trim(), to.trim());
    let parsed = |s: &str| s.parse::<u64>().map_err(|_| ());
    match (from.is_empty(), to.is_empty()) {
        (true, true) => Ok(None),
        (true, false) => {
            let suffix = parsed(to)?;
            if suffix == 0 {
                return Err(());
            }
            Ok(Some((size.saturating_sub(suffix), size - 1)))
        }
        (false, _) => {
            let first = parsed(from)?;
            let last = if to.is_empty() { size - 1 } else { parsed(to)?.min(size - 1) };
            if first >= size || last < first {
                return Err(());
            }
            Ok(Some((first, last)))
        }
    }
}

async fn answer_thumbnail(ctx: &Context, res: &mut Response, stored: Stored, side: u32) -> ApiResult<()> {
    if !stored.kind.is_image() {
        return Err(ApiError::field("thumbnail", "Only images (PNG, JPEG, TIFF) have thumbnails."));
    }
    let sha256 = stored.sha256.clone();
    let bytes = read_whole(ctx, stored).await?;
    let png = images::decode_apart(move || images::thumbnail(&bytes, &images::UPLOADED, side))
        .await
        .map_err(|e| ApiError::refused(e.code(), "thumbnail", e.to_string()))?;
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("image/png"));
    res.headers_mut().insert(ETAG, header(&format!("\"{}-{side}\"", sha256))?);
    res.status_code(StatusCode::OK);
    res.body(png);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_range;

    #[test]
    fn one_range_is_read_and_one_past_the_end_is_refused() {
        assert_eq!(parse_range("bytes=0-9", 100), Ok(Some((0, 9))));
        assert_eq!(parse_range("bytes=90-", 100), Ok(Some((90, 99))));
        assert_eq!(parse_range("bytes=-10", 100), Ok(Some((90, 99))));
        assert_eq!(parse_range("bytes=95-200", 100), Ok(Some((95, 99))));
        assert_eq!(parse_range("bytes=100-", 100), Err(()));
        assert_eq!(parse_range("bytes=5-2", 100), Err(()));
        assert_eq!(parse_range("bytes=0-1,5-6", 100), Ok(None));
        assert_eq!(parse_range("items=0-1", 100), Ok(None));
    }
}
