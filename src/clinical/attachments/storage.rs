//! Where an attachment's bytes are kept: once per branch and content (`attachment_blobs`,
//! unique by SHA-256), in the branch's `attachment_chunks` (256 KiB a row, apart from the
//! attachments' rows so that listing them never reads a byte of a file), or in an object
//! store (`ATTACHMENT_STORE`, see `objects`) under a key made of the hash.
//!
//! Keeping runs in the upload's unit of work: the blob's row, its chunks or its object, the
//! attachment's row and the audit record commit together, and a failure keeps none of them
//! (an object written before a failed commit is content-addressed and harmless: the next
//! upload of the same bytes finds it there).

use std::sync::Arc;

use bytes::Bytes;
use futures_util::Stream;

use super::objects::Objects;
use super::receive::{CHUNK, Upload};
use crate::config::Settings;
use crate::db::directory::BranchRoute;
use crate::http::error::ApiResult;
use crate::resource::Unit;
use crate::state::AppState;

/// The configured store.
pub enum Store {
    Database,
    Objects(Arc<Objects>),
}

impl Store {
    pub fn of(settings: &Settings) -> ApiResult<Self> {
        Ok(match &settings.attachment_store {
            None => Self::Database,
            Some(url) => Self::Objects(Objects::at(url)?),
        })
    }

    /// Keeps `upload`'s bytes unless the branch has them already; answers the blob's id and
    /// whether it is new (so that the quota counts it).
    pub async fn keep(&self, unit: &Unit<'_>, upload: &mut Upload) -> ApiResult<(i64, bool)> {
        let bytes = i64::try_from(upload.bytes).map_err(anyhow::Error::from)?;
        let key = match self {
            Self::Database => None,
            Self::Objects(_) => Some(Objects::key(&upload.sha256)),
        };
        // A concurrent upload of the same bytes waits here for the first one's commit.
        let inserted = unit
            .query_opt(
                "INSERT INTO attachment_blobs (sha256, bytes, store_key) VALUES ($1, $2, $3)
                 ON CONFLICT (sha256) DO NOTHING RETURNING id",
                &[&upload.sha256, &bytes, &key],
            )
            .await?;
        let Some(row) = inserted else {
            let row = unit
                .query_one("SELECT id FROM attachment_blobs WHERE sha256 = $1", &[&upload.sha256])
                .await?;
            return Ok((row.get(0), false));
        };
        let blob: i64 = row.get(0);
        match self {
            Self::Database => {
                let insert = unit
                    .prepare_cached("INSERT INTO attachment_chunks (blob_id, seq, data) VALUES ($1, $2, $3)")
                    .await?;
                let mut seq = 0i32;
                loop {
                    let chunk = upload.next_chunk().await?;
                    if chunk.is_empty() {
                        break;
                    }
                    unit.execute(&insert, &[&blob, &seq, &chunk]).await?;
                    seq += 1;
                }
            }
            Self::Objects(objects) => {
                let sha256 = upload.sha256.clone();
                objects.put(&sha256, upload).await?
            }
        }
        Ok((blob, true))
    }
}

/// A blob as a download reads it.
pub struct Blob {
    pub id: i64,
    pub store_key: Option<String>,
}

/// The bytes `first..=last` of `blob`, as a stream of pieces. From the database, each batch of
/// chunks is read on a connection taken for it alone, so that a slow client holds none.
pub fn read(
    state: Arc<AppState>,
    route: Arc<BranchRoute>,
    settings_store: Option<Arc<Objects>>,
    blob: Blob,
    first: u64,
    last: u64,
) -> std::pin::Pin<Box<dyn Stream<Item = Result<Bytes, std::io::Error>> + Send>> {
    if let (Some(objects), Some(key)) = (settings_store, blob.store_key.clone()) {
        return objects.read(key, first, last);
    }
    const BATCH: u64 = 4;
    let chunk = CHUNK as u64;
    let stream = futures_util::stream::unfold(Some(first / chunk), move |next| {
        let (state, route) = (state.clone(), route.clone());
        async move {
            let seq = next?;
            let last_seq = last / chunk;
            let until = (seq + BATCH - 1).min(last_seq);
            let read = async {
                let conn = state.directory.connect(&route).await.map_err(std::io::Error::other)?;
                let rows = conn
                    .query(
                        "SELECT seq, data FROM attachment_chunks WHERE blob_id = $1 AND seq BETWEEN $2 AND $3
                          ORDER BY seq",
                        &[&blob.id, &(seq as i32), &(until as i32)],
                    )
                    .await
                    .map_err(std::io::Error::other)?;
                let mut out = Vec::new();
                for row in rows {
                    let at = row.get::<_, i32>(0) as u64 * chunk;
                    let data: Vec<u8> = row.get(1);
                    let from = first.saturating_sub(at) as usize;
                    let to = ((last + 1).saturating_sub(at) as usize).min(data.len());
                    if from < to {
                        out.extend_from_slice(&data[from..to]);
                    }
                }
                Ok::<_, std::io::Error>(Bytes::from(out))
            };
            let piece = read.await;
            let more = piece.is_ok() && until < last_seq;
            Some((piece, more.then_some(until + 1)))
        }
    });
    Box::pin(stream)
}
