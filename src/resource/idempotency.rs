//! `Idempotency-Key` on POST: the same user, path and key within 24 hours replays the first
//! successful answer and writes nothing; the same key with another body is 409
//! `idempotency_key_reused`; errors are not kept.
//!
//! The key is claimed in the write's own transaction, before anything else: a concurrent
//! duplicate's claim waits on the unique index until the first commits (then it replays) or
//! rolls back (then it runs itself).

use salvo::Request;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::db::Queries;
use crate::http::error::{ApiError, ApiResult};

pub const HEADER: &str = "idempotency-key";

/// A request's claim: its key, where it was sent, and what it carried.
#[derive(Debug, Clone)]
pub struct Idempotency {
    pub key: String,
    pub path: String,
    fingerprint: Vec<u8>,
}

impl Idempotency {
    /// The request's key, if it sent one (1 to 100 visible ASCII characters, else 400).
    pub fn of(req: &Request, body: &Map<String, Value>) -> ApiResult<Option<Self>> {
        let Some(raw) = req.headers().get(HEADER) else { return Ok(None) };
        let key = raw.to_str().unwrap_or_default();
        if !(1..=100).contains(&key.len()) || !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ApiError::bad_request(
                "invalid_idempotency_key",
                "The Idempotency-Key must be 1 to 100 visible ASCII characters.",
            ));
        }
        let fingerprint = Sha256::digest(Value::Object(body.clone()).to_string().as_bytes()).to_vec();
        Ok(Some(Self { key: key.to_owned(), path: req.uri().path().to_owned(), fingerprint }))
    }
}

/// What a claim found.
pub enum Claim {
    /// Nobody used the key yet (or not in the last 24 hours): go on.
    Fresh,
    /// The first answer: `(status, body)`.
    Replay(u16, Value),
}

/// Claims the key inside the write's transaction.
pub async fn claim(tx: &impl Queries, user: i64, idem: &Idempotency) -> ApiResult<Claim> {
    let stmt = tx
        .prepare_cached(
            "INSERT INTO idempotency_keys (user_id, path, key, fingerprint) VALUES ($1, $2, $3, $4)
             ON CONFLICT (user_id, path, key) DO UPDATE
                SET fingerprint = EXCLUDED.fingerprint, status = NULL, response = NULL, created_at = now()
              WHERE idempotency_keys.created_at < now() - interval '24 hours'
             RETURNING true",
        )
        .await?;
    if tx.query_opt(&stmt, &[&user, &idem.path, &idem.key, &idem.fingerprint]).await?.is_some() {
        return Ok(Claim::Fresh);
    }
    let stmt = tx
        .prepare_cached("SELECT fingerprint, status, response FROM idempotency_keys WHERE user_id = $1 AND path = $2 AND key = $3")
        .await?;
    let row = tx.query_one(&stmt, &[&user, &idem.path, &idem.key]).await?;
    if row.get::<_, Vec<u8>>(0) != idem.fingerprint {
        return Err(ApiError::Conflict {
            code: "idempotency_key_reused",
            message: "This Idempotency-Key was used with another request body.".into(),
        });
    }
    match (row.get::<_, Option<i32>>(1), row.get::<_, Option<Value>>(2)) {
        (Some(status), Some(body)) => Ok(Claim::Replay(status as u16, body)),
        _ => Ok(Claim::Fresh),
    }
}

/// Keeps the answer with the key, in the same transaction as the write.
pub async fn keep(
    tx: &impl Queries,
    user: i64,
    idem: &Idempotency,
    status: u16,
    message: &str,
    data: &Value,
) -> ApiResult<()> {
    let stmt = tx
        .prepare_cached(
            "UPDATE idempotency_keys SET status = $4, response = $5 WHERE user_id = $1 AND path = $2 AND key = $3",
        )
        .await?;
    let body = json!({ "message": message, "data": data });
    tx.execute(&stmt, &[&user, &idem.path, &idem.key, &i32::from(status), &body]).await?;
    Ok(())
}
