//! Attachments' bytes in an object store (`ATTACHMENT_STORE=file:///...` or
//! `s3://bucket/prefix`, the S3 credentials and region from the usual `AWS_*` variables),
//! through the `object_store` crate. Objects are named by their content
//! (`<prefix>/sha256/ab/abcd...`), written once and never removed (an attachment's delete is
//! soft), so the branches of one store share them: a branch's backup, restore or move copies
//! its rows, and the rows it copies name objects that are already there.

use std::ops::Range;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::{Stream, TryStreamExt};
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, WriteMultipart};

use super::receive::{CHUNK, Upload};
use crate::http::error::ApiResult;

pub struct Objects {
    store: Box<dyn ObjectStore>,
    base: Path,
}

/// Stores opened, by URL: one client per store for the process.
static OPENED: Mutex<Vec<(String, Arc<Objects>)>> = Mutex::new(Vec::new());

impl Objects {
    /// The store at `url`, opened once.
    pub fn at(url: &str) -> ApiResult<Arc<Self>> {
        let mut opened = OPENED.lock().expect("opened object stores");
        if let Some((_, objects)) = opened.iter().find(|(known, _)| known == url) {
            return Ok(objects.clone());
        }
        let parsed = url::Url::parse(url).map_err(|e| anyhow::anyhow!("ATTACHMENT_STORE: {e}"))?;
        let (store, base) = object_store::parse_url_opts(&parsed, std::env::vars())
            .map_err(|e| anyhow::anyhow!("ATTACHMENT_STORE: {e}"))?;
        let objects = Arc::new(Self { store, base });
        opened.push((url.to_owned(), objects.clone()));
        Ok(objects)
    }

    /// The key of the object holding the bytes whose SHA-256 is `sha256` (hex).
    pub fn key(sha256: &str) -> String {
        format!("sha256/{}/{sha256}", &sha256[..2])
    }

    fn path(&self, key: &str) -> Path {
        key.split('/').fold(self.base.clone(), |path, part| path.clone().join(part))
    }

    /// Writes `upload`'s bytes under their hash, unless the store has them already.
    pub async fn put(&self, sha256: &str, upload: &mut Upload) -> ApiResult<()> {
        let path = self.path(&Self::key(sha256));
        if self.store.head(&path).await.is_ok() {
            return Ok(());
        }
        let started = self.store.put_multipart(&path).await.map_err(anyhow::Error::from)?;
        let mut writer = WriteMultipart::new_with_chunk_size(started, 5 * 1024 * 1024);
        loop {
            let chunk = upload.next_chunk().await?;
            if chunk.is_empty() {
                break;
            }
            writer.wait_for_capacity(2).await.map_err(anyhow::Error::from)?;
            writer.put(Bytes::from(chunk));
        }
        writer.finish().await.map_err(anyhow::Error::from)?;
        Ok(())
    }

    /// The bytes `first..=last` of the object `key`, streamed.
    pub fn read(
        self: Arc<Self>,
        key: String,
        first: u64,
        last: u64,
    ) -> Pin<Box<dyn Stream<Item = Result<Bytes, std::io::Error>> + Send>> {
        let range: Range<u64> = first..last + 1;
        let opened = async move {
            let options = GetOptions { range: Some(GetRange::Bounded(range)), ..GetOptions::default() };
            let got = self.store.get_opts(&self.path(&key), options).await.map_err(std::io::Error::other)?;
            Ok::<_, std::io::Error>(got.into_stream().map_err(std::io::Error::other))
        };
        Box::pin(futures_util::stream::once(opened).try_flatten())
    }
}

/// What [`CHUNK`] is to the database store, a part is to a multipart upload: S3 takes no part
/// under 5 MiB but the last.
const _: () = assert!(CHUNK <= 5 * 1024 * 1024);
