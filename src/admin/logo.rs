//! A branch's logo, printed in the letterhead of its documents: `PUT /branches/{id}/logo`
//! takes the image itself as the body (a PNG or a JPEG, at most [`MAX_LOGO_BYTES`]), as a
//! browser sends a chosen file, and keeps it only once it decodes whole within the bounds of
//! every uploaded image (`images`); `GET` answers it, `DELETE` removes it. The branch's
//! `logo_media_type` says whether it has one. Changes are branch changes: the version moves,
//! `If-Match` holds, and the audit log keeps the before and after (without the image bytes).

use salvo::http::header::{CONTENT_TYPE, HeaderValue};
use salvo::prelude::*;

use super::branches::BRANCHES;
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::images::{self, ImageKind};
use crate::notify::Topic;
use crate::resource::etag::IfMatch;
use crate::resource::idempotency::Answer;
use crate::resource::routes::set_etag;
use crate::resource::{Context, Unit, Within};

/// The largest logo taken: a letterhead needs no more.
pub const MAX_LOGO_BYTES: usize = 512 * 1024;

/// Media types a logo may be sent as; `application/octet-stream` is read by its content.
const SENT_AS: &[&str] = &["image/png", "image/jpeg", "application/octet-stream"];

/// Sets the logo (`Some`) or removes it, as one audited change of the branch.
async fn write(
    ctx: &Context,
    req: &Request,
    res: &mut Response,
    id: i64,
    logo: Option<(Vec<u8>, ImageKind)>,
) -> ApiResult<()> {
    let if_match = IfMatch::of(req);
    let mut client = ctx.registry().await?;
    let unit = Unit::begin(&mut client, ctx.writer()).await?;
    let before = unit.lock(&BRANCHES, Within::default(), id, if_match).await?;
    let (bytes, media_type) = match &logo {
        Some((bytes, kind)) => (Some(bytes.as_slice()), Some(kind.media_type())),
        None => (None, None),
    };
    unit.execute(
        "UPDATE branches SET logo = $2, logo_media_type = $3, version = version + 1, updated_at = now(),
                updated_by = $4
          WHERE id = $1",
        &[&id, &bytes, &media_type, &ctx.user.id],
    )
    .await?;
    let after = unit.record(&BRANCHES, id).await?;
    let action = if logo.is_some() { "set_logo" } else { "remove_logo" };
    unit.audit(&BRANCHES, action, id, Some(&before), Some(&after)).await?;
    unit.stale([Topic::Branch(id)]);
    let message = if logo.is_some() { "Branch logo set." } else { "Branch logo removed." };
    unit.commit(&Answer::ok(message, after.clone())).await?;
    set_etag(res, &after);
    web::ok(res, message, after);
    Ok(())
}

/// `PUT /branches/{id}/logo`: the body is the image.
#[handler]
pub async fn set(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let id = web::path_id(req, "id")?;
    let sent_as = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim().to_ascii_lowercase());
    if sent_as.as_deref().is_some_and(|t| !SENT_AS.contains(&t)) {
        return Err(ApiError::field("logo", "Send the logo as image/png or image/jpeg."));
    }
    let bytes = web::body_bytes(req, &ctx.state.settings, MAX_LOGO_BYTES).await?;
    let kind = ImageKind::sniff(&bytes).ok_or(images::ImageError::NotAnImage).map_err(refused)?;
    if sent_as.as_deref().is_some_and(|t| t.starts_with("image/") && t != kind.media_type()) {
        let message = format!("The image is a {}, not what its Content-Type says.", kind.media_type());
        return Err(ApiError::field("logo", message));
    }
    // Decoded whole once, and dropped: what is kept is the file as sent, known to read.
    let bytes = images::decode_apart(move || images::decode(&bytes, &images::UPLOADED).map(|_| bytes))
        .await
        .map_err(refused)?;
    write(&ctx, req, res, id, Some((bytes, kind))).await
}

fn refused(error: images::ImageError) -> ApiError {
    ApiError::field("logo", error.to_string())
}

/// `DELETE /branches/{id}/logo`.
#[handler]
pub async fn remove(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let id = web::path_id(req, "id")?;
    write(&ctx, req, res, id, None).await
}

/// `GET /branches/{id}/logo`: the image, in its own media type; 404 when there is none.
#[handler]
pub async fn get(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    let id = web::path_id(req, "id")?;
    let client = ctx.registry().await?;
    let row = client
        .query_opt(
            "SELECT logo, logo_media_type FROM branches WHERE id = $1 AND deleted_at IS NULL AND logo IS NOT NULL",
            &[&id],
        )
        .await?
        .ok_or(ApiError::NotFound)?;
    let media_type: String = row.get(1);
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_str(&media_type).map_err(anyhow::Error::from)?);
    res.body(row.get::<_, Vec<u8>>(0));
    Ok(())
}
