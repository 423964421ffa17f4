//! Printed forms of records. A declaration that offers one ([`Resource::printable`]) answers
//! its GET in PDF when the request prefers `application/pdf` to JSON (JSON stays the
//! default, and unchanged); a hand-written read (the visit summary) answers through the same
//! [`answer`]. The document carries the branch's letterhead, who signed the record and when
//! (or a DRAFT mark), and who printed it; each print is a disclosure of the patient's data,
//! recorded like the other reads of patient records (`db::read_audit`), as `print`.

use salvo::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE, HeaderValue};
use salvo::prelude::*;
use serde_json::{Value, json};

use super::Resource;
use super::context::{Context, Scope};
use super::printable::{Printable, Printing};
use super::reads::record_read;
use crate::http::error::{ApiError, ApiResult};
use crate::http::guard::{JSON_OR_PDF, accept_of, preferred};
use crate::images;
use crate::pdf::{Letterhead, Logo, Sheet};

pub const PDF: &str = "application/pdf";

/// Whether `req` prefers the printed form to JSON.
pub fn wants_print(req: &Request) -> bool {
    preferred(&accept_of(req), JSON_OR_PDF) == Some(PDF)
}

/// What the branch prints at the top of its documents (its settings in the registry).
pub async fn letterhead(ctx: &Context) -> ApiResult<Letterhead> {
    let branch = ctx.branch()?.id;
    let client = ctx.registry().await?;
    let stmt = client
        .prepare_cached("SELECT name, address, phone, logo, logo_media_type FROM branches WHERE id = $1")
        .await?;
    let row = client.query_opt(&stmt, &[&branch]).await?.ok_or(ApiError::NotFound)?;
    let logo = match row.get::<_, Option<Vec<u8>>>(3) {
        Some(bytes) => logo(branch, bytes).await,
        None => None,
    };
    Ok(Letterhead { name: row.get(0), address: row.get(1), phone: row.get(2), logo })
}

/// The stored logo, read again within the bounds it was set under: a logo stored otherwise
/// (before those bounds, or damaged since) never fails a document, which prints without it.
async fn logo(branch: i64, bytes: Vec<u8>) -> Option<Logo> {
    let size = bytes.len();
    match images::decode_apart(move || Logo::read(bytes)).await {
        Ok(logo) => Some(logo),
        Err(error) => {
            tracing::warn!(branch, bytes = size, reason = error.code(), %error, "the branch's logo cannot be read: printed without it");
            None
        }
    }
}

/// Writes `sheet` under the branch's letterhead, off the async threads.
pub async fn render(ctx: &Context, sheet: Sheet) -> ApiResult<Vec<u8>> {
    let letterhead = letterhead(ctx).await?;
    let rendered = tokio::task::spawn_blocking(move || crate::pdf::render(&letterhead, &sheet))
        .await
        .map_err(anyhow::Error::from)?;
    Ok(rendered.map_err(anyhow::Error::from)?)
}

/// Sends `pdf` as the answer, to be shown (not only saved) as `<name>.pdf`.
pub fn send(res: &mut Response, name: &str, pdf: Vec<u8>) {
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(PDF));
    let safe: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    if let Ok(disposition) = HeaderValue::from_str(&format!("inline; filename=\"{safe}.pdf\"")) {
        res.headers_mut().insert(CONTENT_DISPOSITION, disposition);
    }
    res.body(pdf);
}

/// The footer of every page: when, and by whom, the document was printed.
pub async fn footer(printing: &mut Printing<'_>) -> ApiResult<String> {
    Ok(format!("Printed {} by {}", printing.now().await?, printing.ctx.user.name))
}

/// Answers `record` (of `resource`, whose path the audit log names it by) in its printed form: a 406
/// when it has none; otherwise the document, once its disclosure is recorded.
pub async fn answer(
    ctx: &Context,
    res: &mut Response,
    printable: &dyn Printable,
    resource: &'static Resource,
    id: i64,
    record: &Value,
) -> ApiResult<()> {
    if let Some(reason) = printable.refuses(record) {
        return Err(ApiError::NotPrintable(reason.to_owned()));
    }
    let conn = ctx.conn(Scope::Branch).await?;
    let mut printing = Printing { ctx, conn, resource };
    let mut sheet = printable.sheet(&mut printing, record).await?;
    sheet.footer = footer(&mut printing).await?;
    drop(printing);
    let pdf = render(ctx, sheet).await?;
    let details = json!({ "patient_id": printable.patient_of(record), "format": "pdf" });
    record_read(ctx, resource.path, "print", Some(id), Some(details)).await?;
    send(res, &printable.file_name(record), pdf);
    Ok(())
}
