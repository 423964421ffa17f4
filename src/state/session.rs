//! Who is calling: bearer tokens resolved to users, both cached.
//!
//! Tokens and users are cached (moka) so an authenticated request usually costs no registry
//! query; every change that could make a cached entry wrong publishes an invalidation (see
//! `notify`), and the local instance drops the entry before answering.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use time::OffsetDateTime;

use super::AppState;
use crate::cache::FreshCache;
use crate::http::error::{ApiError, ApiResult};
use crate::notify::Topic;
use crate::security::tokens;

/// The caller, as the handlers see it.
#[derive(Debug, Clone)]
pub struct AuthUser {
    pub id: i64,
    pub name: String,
    pub email: String,
    pub username: String,
    pub default_branch_id: Option<i64>,
    /// Shared with the cached user (a request takes a reference, not a copy: an
    /// administrator of a thousand branches would otherwise copy a thousand ids per request).
    pub permissions: Arc<BTreeSet<String>>,
    /// Active branches this user may work in.
    pub branch_ids: Arc<BTreeSet<i64>>,
    /// The token this request came with (logout revokes it).
    pub token_id: i64,
    /// When that token stops working, if it ever does.
    pub token_expires_at: Option<OffsetDateTime>,
    /// Whether the user's second factor is on (`MFA_REQUIRED_FOR`).
    pub mfa_enabled: bool,
}

impl AuthUser {
    pub fn can(&self, permission: &str) -> bool {
        permission == crate::permissions::ANY_USER || self.permissions.contains(permission)
    }

    /// The authenticated caller; only present behind the bearer hoop.
    pub fn current(depot: &salvo::Depot) -> ApiResult<Arc<AuthUser>> {
        depot.get_typed::<Arc<AuthUser>>().cloned().map_err(|_| ApiError::Unauthenticated)
    }
}

struct TokenRecord {
    user_id: i64,
    secret_hash: Vec<u8>,
    expires_at: Option<OffsetDateTime>,
    /// When the token was last used as far as this instance knows (Unix seconds): when it was
    /// issued, its `last_used_at` as loaded, or this instance's latest write of it.
    last_used: AtomicI64,
}

impl TokenRecord {
    fn unused_since(&self) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(self.last_used.load(Ordering::Relaxed))
            .unwrap_or(OffsetDateTime::UNIX_EPOCH)
    }
}

/// Where a session was opened from, as its token records it.
pub struct Origin<'a> {
    pub ip: &'a str,
    pub user_agent: Option<&'a str>,
}

/// Longest `user_agent` kept of a session, in characters.
const USER_AGENT_CHARS: usize = 256;

/// A token's `last_used_at` is written at most this often by each instance: often enough to
/// show a session's use to the minute, rarely enough to cost nothing per request.
const TOUCH_EVERY: Duration = Duration::from_secs(60);

#[derive(Clone)]
struct UserRecord {
    id: i64,
    name: String,
    email: String,
    username: String,
    default_branch_id: Option<i64>,
    permissions: Arc<BTreeSet<String>>,
    branch_ids: Arc<BTreeSet<i64>>,
    mfa_enabled: bool,
}

pub struct AuthCache {
    /// Token id -> its record, or `None` for an id that names no token: a flood of made-up
    /// tokens then costs no registry query per request. Issuing a token invalidates its id.
    tokens: FreshCache<i64, Option<Arc<TokenRecord>>>,
    users: FreshCache<i64, Option<Arc<UserRecord>>>,
}

impl Default for AuthCache {
    fn default() -> Self {
        // The time limit is a safety net only: invalidation is by notification.
        let ttl = Duration::from_secs(300);
        Self { tokens: FreshCache::new(100_000, ttl, None), users: FreshCache::new(100_000, ttl, None) }
    }
}

impl AuthCache {
    pub async fn forget_token(&self, id: i64) {
        self.tokens.invalidate(&id).await;
    }

    pub async fn forget_user(&self, id: i64) {
        self.users.invalidate(&id).await;
    }

    pub fn forget_all_users(&self) {
        self.users.invalidate_all();
    }

    pub fn forget_all(&self) {
        self.tokens.invalidate_all();
        self.users.invalidate_all();
    }
}

/// Issues a token for `user_id`; returns the string the client will send.
pub async fn issue_token(state: &AppState, user_id: i64, origin: &Origin<'_>) -> ApiResult<String> {
    let secret = tokens::random_secret();
    let expires_at = state.settings.token_expiry.map(|ttl| OffsetDateTime::now_utc() + ttl);
    let user_agent = origin.user_agent.map(|ua| ua.chars().take(USER_AGENT_CHARS).collect::<String>());
    let mut client = state.registry.get().await?;
    let tx = client.transaction().await?;
    let id: i64 = tx
        .query_one(
            "INSERT INTO api_tokens (user_id, secret_hash, expires_at, ip, user_agent, last_used_at)
             VALUES ($1, $2, $3, $4, $5, now()) RETURNING id",
            &[&user_id, &tokens::hash_secret(&secret), &expires_at, &origin.ip, &user_agent],
        )
        .await?
        .get(0);
    // A probe may have cached this id as unknown, here or on another instance.
    state.commit(tx, &[Topic::Token(id)]).await?;
    Ok(format!("{id}|{secret}"))
}

/// What a presented bearer token turned out to be.
pub enum Presented {
    User(AuthUser),
    /// Not a token: unknown, wrong, expired, or its user inactive.
    Invalid,
    /// A real token unused past `API_TOKEN_IDLE_MINUTES`: refused, and for the caller to end.
    Idle {
        token_id: i64,
        user_id: i64,
    },
}

impl Presented {
    pub fn user(self) -> Option<AuthUser> {
        match self {
            Self::User(user) => Some(user),
            Self::Invalid | Self::Idle { .. } => None,
        }
    }
}

/// Resolves a presented bearer token to its user.
pub async fn authenticate(state: &AppState, token: &str) -> ApiResult<Presented> {
    let Some((token_id, secret)) = tokens::parse(token) else {
        return Ok(Presented::Invalid);
    };
    let Some(mut record) = load_token(state, token_id).await? else { return Ok(Presented::Invalid) };
    if !tokens::constant_time_eq(&record.secret_hash, &tokens::hash_secret(secret)) {
        return Ok(Presented::Invalid);
    }
    let now = OffsetDateTime::now_utc();
    if record.expires_at.is_some_and(|at| at <= now) {
        return Ok(Presented::Invalid);
    }
    if let Some(idle) = state.settings.token_idle
        && record.unused_since() + idle <= now
    {
        // Another instance may have seen it used since this one loaded it.
        state.auth.forget_token(token_id).await;
        let Some(fresh) = load_token(state, token_id).await? else { return Ok(Presented::Invalid) };
        if fresh.unused_since() + idle <= now {
            return Ok(Presented::Idle { token_id, user_id: fresh.user_id });
        }
        record = fresh;
    }
    touch(state, token_id, &record, now);
    let Some(user) = load_user(state, record.user_id).await? else {
        return Ok(Presented::Invalid);
    };
    Ok(Presented::User(AuthUser {
        id: user.id,
        name: user.name.clone(),
        email: user.email.clone(),
        username: user.username.clone(),
        default_branch_id: user.default_branch_id,
        permissions: user.permissions.clone(),
        branch_ids: user.branch_ids.clone(),
        token_id,
        token_expires_at: record.expires_at,
        mfa_enabled: user.mfa_enabled,
    }))
}

/// A token's record, cached; `None` for an id that names no token.
async fn load_token(state: &AppState, token_id: i64) -> ApiResult<Option<Arc<TokenRecord>>> {
    let registry = &state.registry;
    state
        .auth
        .tokens
        .get_or_load(token_id, || async {
            let client = registry.get().await?;
            let row = client
                .query_opt(
                    "SELECT user_id, secret_hash, expires_at, coalesce(last_used_at, created_at)
                       FROM api_tokens WHERE id = $1",
                    &[&token_id],
                )
                .await?;
            Ok::<_, ApiError>(row.map(|row| {
                Arc::new(TokenRecord {
                    user_id: row.get(0),
                    secret_hash: row.get(1),
                    expires_at: row.get(2),
                    last_used: AtomicI64::new(row.get::<_, OffsetDateTime>(3).unix_timestamp()),
                })
            }))
        })
        .await
        .map_err(ApiError::from)
}

/// Records that a token is in use, at most once a [`TOUCH_EVERY`] (or, with an idle limit
/// shorter than two of them, half the limit) per instance, off the request's path: the
/// request never waits for it, and a failed write only leaves `last_used_at` older.
fn touch(state: &AppState, token_id: i64, record: &TokenRecord, now: OffsetDateTime) {
    let every = state.settings.token_idle.map_or(TOUCH_EVERY, |idle| TOUCH_EVERY.min(idle / 2));
    let last = record.last_used.load(Ordering::Relaxed);
    if now.unix_timestamp() - last < every.as_secs() as i64 {
        return;
    }
    // One request of many arriving at once writes it.
    if record
        .last_used
        .compare_exchange(last, now.unix_timestamp(), Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    let registry = state.registry.clone();
    tokio::spawn(async move {
        let written = async {
            let client = registry.get().await?;
            client
                .execute(
                    "UPDATE api_tokens SET last_used_at = now() WHERE id = $1 AND last_used_at IS DISTINCT FROM now()",
                    &[&token_id],
                )
                .await?;
            Ok::<_, ApiError>(())
        };
        if let Err(e) = written.await {
            tracing::debug!(token_id, error = %e, "a token's last use was not recorded");
        }
    });
}

/// An active user with their permissions and branches, cached.
async fn load_user(state: &AppState, user_id: i64) -> ApiResult<Option<Arc<UserRecord>>> {
    let registry = &state.registry;
    state
        .auth
        .users
        .get_or_load(user_id, || async {
            let client = registry.get().await?;
            let row = client
                .query_opt(
                    "SELECT u.id, u.name, u.email, u.username, u.default_branch_id,
                            ARRAY(SELECT DISTINCT rp.permission FROM user_roles ur
                                    JOIN role_permissions rp ON rp.role_id = ur.role_id
                                   WHERE ur.user_id = u.id) AS permissions,
                            ARRAY(SELECT bu.branch_id FROM branch_users bu
                                    JOIN branches b ON b.id = bu.branch_id AND b.status = 'active'
                                   WHERE bu.user_id = u.id) AS branch_ids,
                            EXISTS(SELECT 1 FROM user_totp t
                                    WHERE t.user_id = u.id AND t.enabled_at IS NOT NULL) AS mfa_enabled
                       FROM users u WHERE u.id = $1 AND u.active",
                    &[&user_id],
                )
                .await?;
            Ok::<_, ApiError>(row.map(|row| {
                Arc::new(UserRecord {
                    id: row.get("id"),
                    name: row.get("name"),
                    email: row.get("email"),
                    username: row.get("username"),
                    default_branch_id: row.get("default_branch_id"),
                    permissions: Arc::new(row.get::<_, Vec<String>>("permissions").into_iter().collect()),
                    branch_ids: Arc::new(row.get::<_, Vec<i64>>("branch_ids").into_iter().collect()),
                    mfa_enabled: row.get("mfa_enabled"),
                })
            }))
        })
        .await
        .map_err(ApiError::from)
}

/// Deletes a user's tokens (all, or all but `keep`); returns the topics to commit with (see
/// [`AppState::commit`]).
pub async fn revoke_tokens(
    tx: &crate::db::Transaction<'_>,
    user_id: i64,
    keep: Option<i64>,
) -> Result<Vec<Topic>, tokio_postgres::Error> {
    let rows = tx
        .query(
            "DELETE FROM api_tokens WHERE user_id = $1 AND id IS DISTINCT FROM $2 RETURNING id",
            &[&user_id, &keep],
        )
        .await?;
    Ok(rows.iter().map(|r| Topic::Token(r.get(0))).collect())
}
