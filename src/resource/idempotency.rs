//! `Idempotency-Key` on every authenticated POST: the same user, route and key within 24
//! hours replays the first successful answer and writes nothing; the same key with another
//! body is 409 `idempotency_key_reused`; errors are not kept.
//!
//! Two parts, so that no handler can forget it:
//! - the [`Idempotent`] hoop, on every authenticated route, turns the header into a claim:
//!   it checks the key, names the route by its template and parsed parameters (so
//!   `/patients/3/...`, `/patients/03/...` and `/patients/3/.../` are one route), and puts
//!   the claim in the depot, where [`Context`](super::Context) finds it;
//! - the unit of work of the write (`store::write`) claims the key in the write's own
//!   transaction, before anything else, and keeps the answer in it. A concurrent duplicate's
//!   claim waits on the unique index until the first commits (then it replays) or rolls back
//!   (then it runs itself).
//!
//! A POST that answers 2xx without a unit keeping its answer wrote outside the mechanism: it
//! is logged, and debug builds (the tests) answer 500 so that it cannot go unnoticed.
//!
//! An answer that shows a secret once (recovery codes) is kept sealed: encrypted
//! (ChaCha20-Poly1305) under a key derived from the secret of the bearer token that sent the
//! request, which the database never holds. Whoever reads the database cannot read it; a
//! replay with the same token opens it, one with another token of the same user is 409
//! `idempotency_answer_sealed`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use salvo::http::Method;
use salvo::prelude::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::db::Queries;
use crate::http::error::{ApiError, ApiResult};
use crate::state::AppState;

pub const HEADER: &str = "idempotency-key";

/// Whether the request sends something other than JSON (an attachment's upload, streamed by
/// its handler; a JSON route refuses it with 415 itself).
fn sends_a_file(req: &Request) -> bool {
    let Some(content_type) = req.headers().get("content-type").and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    !(essence == "application/json" || essence.ends_with("+json"))
}

/// A request's claim: its key, the route it was sent to, and what it carried.
#[derive(Debug)]
pub struct Idempotency {
    pub key: String,
    /// `POST <route template> <parameter=value ...>`, the parameters parsed.
    pub scope: String,
    fingerprint: Vec<u8>,
    kept: AtomicBool,
    /// The key sealed answers are kept under: derived from the presenting token's secret.
    seal: Option<[u8; 32]>,
}

impl Idempotency {
    /// The claim of a POST that sent a key (1 to 100 visible ASCII characters, else 400).
    pub async fn of(req: &mut Request, state: &AppState) -> ApiResult<Option<Self>> {
        let Some(raw) = req.headers().get(HEADER) else { return Ok(None) };
        let key = raw.to_str().unwrap_or_default().to_owned();
        if !(1..=100).contains(&key.len()) || !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ApiError::bad_request(
                "invalid_idempotency_key",
                "The Idempotency-Key must be 1 to 100 visible ASCII characters.",
            ));
        }
        let scope = scope_of(req);
        let fingerprint = if sends_a_file(req) {
            // A file streamed to its handler is not read here: the claim is of what the
            // headers and the query say of it (its type, length, name). Its bytes are the
            // handler's, which sees the key answered before it keeps anything.
            let mut hasher = Sha256::new();
            for name in ["content-type", "content-length", "content-disposition"] {
                hasher.update(req.headers().get(name).map(|v| v.as_bytes()).unwrap_or_default());
                hasher.update(b"\0");
            }
            hasher.update(req.uri().query().unwrap_or_default().as_bytes());
            hasher.finalize().to_vec()
        } else {
            // The body as the handler will read it (objects compare by content, not spacing).
            let body = crate::http::json_object(req, &state.settings).await?;
            Sha256::digest(Value::Object(body).to_string().as_bytes()).to_vec()
        };
        let seal = bearer_secret(req).map(|secret| {
            let mut hasher = Sha256::new();
            hasher.update(b"clinic-server sealed idempotent answer\0");
            hasher.update(secret.as_bytes());
            hasher.finalize().into()
        });
        Ok(Some(Self { key, scope, fingerprint, kept: AtomicBool::new(false), seal }))
    }

    /// Whether a unit of work kept the answer with the key.
    pub fn kept(&self) -> bool {
        self.kept.load(Ordering::Acquire)
    }
}

/// The secret part of the request's bearer token, if it has one of our shape.
fn bearer_secret(req: &Request) -> Option<String> {
    let token = crate::http::bearer(req)?;
    crate::security::tokens::parse(token).map(|(_, secret)| secret.to_owned())
}

/// An answer encrypted under `seal`: `{"sealed": base64(nonce || ciphertext || tag)}`.
fn seal_answer(seal: &[u8; 32], body: &Value) -> ApiResult<Value> {
    use ring::aead::{CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
    let key =
        LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, seal).map_err(|_| anyhow::anyhow!("seal key"))?);
    let mut nonce = [0u8; NONCE_LEN];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut nonce);
    let mut sealed = body.to_string().into_bytes();
    key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), ring::aead::Aad::empty(), &mut sealed)
        .map_err(|_| anyhow::anyhow!("sealing an answer"))?;
    let mut kept = nonce.to_vec();
    kept.extend(sealed);
    Ok(json!({ SEALED: base64::Engine::encode(&base64::engine::general_purpose::STANDARD, kept) }))
}

/// The answer inside a sealed one, if `seal` opens it.
fn open_answer(seal: &[u8; 32], kept: &str) -> Option<Value> {
    use ring::aead::{CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
    let key = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, seal).ok()?);
    let mut bytes = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, kept).ok()?;
    if bytes.len() < NONCE_LEN {
        return None;
    }
    let mut sealed = bytes.split_off(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(&bytes).ok()?;
    let opened = key.open_in_place(nonce, ring::aead::Aad::empty(), &mut sealed).ok()?;
    serde_json::from_slice(opened).ok()
}

const SEALED: &str = "sealed";

/// The route a request reached: its template (`api/v1/patients/{patient_id}/...`) and its
/// path parameters in name order, ids as the integers they parse to.
fn scope_of(req: &Request) -> String {
    let mut params: Vec<(String, String)> = req
        .params()
        .iter()
        .map(|(name, value)| {
            let canonical = value.parse::<i64>().map_or_else(|_| value.clone(), |id| id.to_string());
            (name.clone(), canonical)
        })
        .collect();
    params.sort();
    let params: Vec<String> = params.into_iter().map(|(n, v)| format!("{n}={v}")).collect();
    format!("{} /{} {}", req.method(), req.matched_path(), params.join("&"))
}

/// Hoop on every authenticated route (see the module's comment).
pub struct Idempotent;

/// Marks a POST route that takes no Idempotency-Key (`POST /auth/logout`: once its token
/// is revoked, a repeat is answered 401, which tells the client the same).
pub struct Unkeyed;

#[async_trait]
impl Handler for Unkeyed {
    async fn handle(&self, _req: &mut Request, depot: &mut Depot, _res: &mut Response, _ctrl: &mut FlowCtrl) {
        depot.insert_typed(UnkeyedRoute);
    }
}

struct UnkeyedRoute;

#[async_trait]
impl Handler for Idempotent {
    async fn handle(&self, req: &mut Request, depot: &mut Depot, res: &mut Response, ctrl: &mut FlowCtrl) {
        if req.method() != Method::POST {
            return;
        }
        let state = AppState::of(depot);
        let claim = match Idempotency::of(req, &state).await {
            Ok(Some(claim)) => Arc::new(claim),
            Ok(None) => return,
            Err(e) => {
                res.render(e);
                ctrl.skip_rest();
                return;
            }
        };
        depot.insert_typed(claim.clone());
        ctrl.call_next(req, depot, res).await;
        let succeeded = res.status_code.is_some_and(|s| s.is_success());
        if succeeded && !claim.kept() && depot.get_typed::<UnkeyedRoute>().is_err() {
            tracing::error!(route = claim.scope, "a POST answered without keeping its Idempotency-Key");
            if cfg!(debug_assertions) {
                res.render(ApiError::Internal(anyhow::anyhow!(
                    "{} answered without keeping its Idempotency-Key",
                    claim.scope
                )));
            }
        }
    }
}

/// Claims the key inside the write's transaction: the first answer when there is one
/// (`ApiError::Replayed`, which the handler returns as its answer), else nothing.
pub async fn claim(tx: &impl Queries, user: i64, idem: &Idempotency) -> ApiResult<()> {
    let stmt = tx
        .prepare_cached(
            "INSERT INTO idempotency_keys (user_id, path, key, fingerprint) VALUES ($1, $2, $3, $4)
             ON CONFLICT (user_id, path, key) DO UPDATE
                SET fingerprint = EXCLUDED.fingerprint, status = NULL, response = NULL, created_at = now()
              WHERE idempotency_keys.created_at < now() - interval '24 hours'
             RETURNING true",
        )
        .await?;
    if tx.query_opt(&stmt, &[&user, &idem.scope, &idem.key, &idem.fingerprint]).await?.is_some() {
        return Ok(());
    }
    let stmt = tx
        .prepare_cached("SELECT fingerprint, status, response FROM idempotency_keys WHERE user_id = $1 AND path = $2 AND key = $3")
        .await?;
    let row = tx.query_one(&stmt, &[&user, &idem.scope, &idem.key]).await?;
    if row.get::<_, Vec<u8>>(0) != idem.fingerprint {
        return Err(ApiError::Conflict {
            code: "idempotency_key_reused",
            message: "This Idempotency-Key was used with another request body.".into(),
        });
    }
    match (row.get::<_, Option<i32>>(1), row.get::<_, Option<Value>>(2)) {
        (Some(status), Some(body)) => {
            let body = match body.get(SEALED).and_then(Value::as_str) {
                Some(kept) => idem.seal.as_ref().and_then(|seal| open_answer(seal, kept)).ok_or_else(|| {
                    ApiError::Conflict {
                        code: "idempotency_answer_sealed",
                        message: "The first answer showed secrets once; only the session that sent it can replay it."
                            .into(),
                    }
                })?,
                None => body,
            };
            idem.kept.store(true, Ordering::Release);
            Err(ApiError::Replayed { status: status as u16, body })
        }
        // Claimed by a transaction that committed without an answer: run again.
        _ => Ok(()),
    }
}

/// Keeps the answer with the key, in the same transaction as the write (sealed when it shows
/// secrets once).
pub async fn keep(tx: &impl Queries, user: i64, idem: &Idempotency, answer: &Answer) -> ApiResult<()> {
    let sealed;
    let body = match (answer.sealed, &idem.seal) {
        (false, _) => &answer.body,
        (true, Some(seal)) => {
            sealed = seal_answer(seal, &answer.body)?;
            &sealed
        }
        // No token to seal it with: nothing is kept, and a repeat runs again.
        (true, None) => {
            idem.kept.store(true, Ordering::Release);
            return Ok(());
        }
    };
    let status = answer.status;
    let stmt = tx
        .prepare_cached(
            "UPDATE idempotency_keys SET status = $4, response = $5 WHERE user_id = $1 AND path = $2 AND key = $3",
        )
        .await?;
    tx.execute(&stmt, &[&user, &idem.scope, &idem.key, &i32::from(status), body]).await?;
    idem.kept.store(true, Ordering::Release);
    Ok(())
}

/// An answer as the client gets it: `{message, data}` (or `{message}`) with a status.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    /// Shows a secret once: kept sealed (see the module's comment).
    pub sealed: bool,
}

impl Answer {
    pub fn created(message: &str, data: Value) -> Self {
        Self { status: 201, body: json!({ "message": message, "data": data }), sealed: false }
    }

    pub fn ok(message: &str, data: Value) -> Self {
        Self { status: 200, body: json!({ "message": message, "data": data }), sealed: false }
    }

    pub fn done(message: &str) -> Self {
        Self { status: 200, body: json!({ "message": message }), sealed: false }
    }

    /// This answer, kept sealed: it shows a secret once.
    pub fn sealed(self) -> Self {
        Self { sealed: true, ..self }
    }
}
