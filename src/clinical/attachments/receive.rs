//! An upload received: the body streamed to a temporary file as it arrives, hashed on the
//! way (SHA-256) and bounded by `ATTACHMENT_MAX_BYTES`, so that no upload is ever held whole
//! in memory and none holds a database connection while its client sends it (the bytes are
//! copied into the store in the unit of work, chunk by chunk, once they are all here). The
//! file is gone when the upload is dropped: a body cut short leaves nothing behind.
//!
//! A raw body is the file (its name in `Content-Disposition`, the rest in the query); a
//! `multipart/form-data` body has it in the part `file`, beside `title`, `visit_id`,
//! `examination_kind` and `examination_id` (salvo spools the part to a temporary file itself).

use std::io::SeekFrom;

use futures_util::StreamExt;
use salvo::http::StatusCode;
use salvo::prelude::*;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

use super::kinds::{self, HEAD_BYTES};
use crate::config::Settings;
use crate::http::error::{ApiError, ApiResult};
use crate::http::list;

/// What the chunks of the stores and of reading a spooled file are: 256 KiB.
pub const CHUNK: usize = 256 * 1024;

/// A file received whole, spooled, with what was said of it.
pub struct Upload {
    pub file: tokio::fs::File,
    pub bytes: u64,
    /// Lower-case hex.
    pub sha256: String,
    pub head: Vec<u8>,
    /// The essence of the Content-Type it was sent as.
    pub declared: Option<String>,
    pub filename: Option<String>,
    /// `title`, `visit_id`, `examination_kind`, `examination_id` as sent.
    pub fields: Vec<(String, String)>,
}

/// 413 `payload_too_large` naming the bound.
pub fn too_large(max: u64) -> ApiError {
    ApiError::Refusal {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        code: "payload_too_large",
        message: format!("The file is larger than the {max} bytes an attachment may have."),
    }
}

fn unreadable() -> ApiError {
    ApiError::bad_request("unreadable_body", "The request body could not be read.")
}

/// Receives the request's file, within `settings.attachment_max_bytes`.
pub async fn receive(req: &mut Request, settings: &Settings) -> ApiResult<Upload> {
    let max = settings.attachment_max_bytes;
    let content_type = req.headers().get("content-type").and_then(|v| v.to_str().ok()).map(kinds::essence);
    let length = req.headers().get("content-length").and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    // Room for a form's boundaries and fields around the file.
    let envelope = if content_type.as_deref() == Some("multipart/form-data") { 64 * 1024 } else { 0 };
    if length.is_some_and(|length| length > max + envelope) {
        return Err(too_large(max));
    }
    if content_type.as_deref() == Some("multipart/form-data") {
        return receive_form(req, max).await;
    }
    let filename =
        req.headers().get("content-disposition").and_then(|v| v.to_str().ok()).and_then(kinds::filename_of);
    let fields = list::query_pairs(req);
    let mut body = req.take_body();
    let mut file = tokio::fs::File::from_std(tempfile::tempfile().map_err(anyhow::Error::from)?);
    let mut spooled = Spooled::default();
    loop {
        let next = tokio::time::timeout(settings.body_read_timeout, body.next()).await;
        let frame = match next {
            Err(_) => return Err(ApiError::RequestTimeout),
            Ok(None) => break,
            Ok(Some(Err(_))) => return Err(unreadable()),
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else { continue };
        spooled.take(&data, max)?;
        file.write_all(&data).await.map_err(anyhow::Error::from)?;
    }
    file.flush().await.map_err(anyhow::Error::from)?;
    file.seek(SeekFrom::Start(0)).await.map_err(anyhow::Error::from)?;
    Ok(spooled.into_upload(file, content_type, filename, fields))
}

/// Bytes seen so far: their count, hash and first [`HEAD_BYTES`].
#[derive(Default)]
struct Spooled {
    bytes: u64,
    hasher: Sha256,
    head: Vec<u8>,
}

impl Spooled {
    fn take(&mut self, data: &[u8], max: u64) -> ApiResult<()> {
        self.bytes += data.len() as u64;
        if self.bytes > max {
            return Err(too_large(max));
        }
        self.hasher.update(data);
        if self.head.len() < HEAD_BYTES {
            let wanted = (HEAD_BYTES - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..wanted]);
        }
        Ok(())
    }

    fn into_upload(
        self,
        file: tokio::fs::File,
        declared: Option<String>,
        filename: Option<String>,
        fields: Vec<(String, String)>,
    ) -> Upload {
        let sha256 = hex::encode(self.hasher.finalize());
        Upload { file, bytes: self.bytes, sha256, head: self.head, declared, filename, fields }
    }
}

/// The form's part that holds the file.
const FILE_PART: &str = "file";

const FORM_FIELDS: &[&str] = &["title", "visit_id", "examination_kind", "examination_id"];

async fn receive_form(req: &mut Request, max: u64) -> ApiResult<Upload> {
    let limit = usize::try_from(max + 64 * 1024).unwrap_or(usize::MAX);
    let form = req.form_data_max_size(limit).await.map_err(|e| match e {
        salvo::http::ParseError::PayloadTooLarge => too_large(max),
        _ => ApiError::bad_request("unreadable_body", "The form could not be read."),
    })?;
    let part = form
        .files
        .get(FILE_PART)
        .ok_or_else(|| ApiError::field(FILE_PART, "Send the file in the part `file`."))?;
    let declared = part.content_type().map(|m| kinds::essence(m.as_ref()));
    let filename = part.name().map(kinds::clean_filename).filter(|n| !n.is_empty());
    let fields = FORM_FIELDS
        .iter()
        .filter_map(|name| form.fields.get(*name).map(|v| ((*name).to_owned(), v.clone())))
        .collect();
    let mut file = tokio::fs::File::open(part.path()).await.map_err(anyhow::Error::from)?;
    let mut spooled = Spooled::default();
    let mut buffer = vec![0; CHUNK];
    loop {
        let read = file.read(&mut buffer).await.map_err(anyhow::Error::from)?;
        if read == 0 {
            break;
        }
        spooled.take(&buffer[..read], max)?;
    }
    file.seek(SeekFrom::Start(0)).await.map_err(anyhow::Error::from)?;
    Ok(spooled.into_upload(file, declared, filename, fields))
}

impl Upload {
    /// The next piece of the spooled file, up to [`CHUNK`] bytes; empty at its end.
    pub async fn next_chunk(&mut self) -> ApiResult<Vec<u8>> {
        let mut chunk = vec![0; CHUNK];
        let mut filled = 0;
        while filled < CHUNK {
            let read = self.file.read(&mut chunk[filled..]).await.map_err(anyhow::Error::from)?;
            if read == 0 {
                break;
            }
            filled += read;
        }
        chunk.truncate(filled);
        Ok(chunk)
    }

    /// The value sent for `name` (a query parameter or a form field).
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}
