//! Who is calling: bearer tokens resolved to users, both cached.
//!
//! Tokens and users are cached (moka) so an authenticated request usually costs no registry
//! query; every change that could make a cached entry wrong publishes an invalidation (see
//! `notify`), and the local instance drops the entry before answering.

use std::collections::BTreeSet;
use std::sync::Arc;
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

#[derive(Clone)]
struct TokenRecord {
    user_id: i64,
    secret_hash: Vec<u8>,
    expires_at: Option<OffsetDateTime>,
}

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
pub async fn issue_token(state: &AppState, user_id: i64) -> ApiResult<String> {
    let secret = tokens::random_secret();
    let expires_at = state.settings.token_expiry.map(|ttl| OffsetDateTime::now_utc() + ttl);
    let mut client = state.registry.get().await?;
    let tx = client.transaction().await?;
    let id: i64 = tx
        .query_one(
            "INSERT INTO api_tokens (user_id, secret_hash, expires_at) VALUES ($1, $2, $3) RETURNING id",
            &[&user_id, &tokens::hash_secret(&secret), &expires_at],
        )
        .await?
        .get(0);
    // A probe may have cached this id as unknown, here or on another instance.
    state.commit(tx, &[Topic::Token(id)]).await?;
    Ok(format!("{id}|{secret}"))
}

/// Resolves a presented bearer token to its user. `Ok(None)` means: not a valid token.
pub async fn authenticate(state: &AppState, token: &str) -> ApiResult<Option<AuthUser>> {
    let Some((token_id, secret)) = tokens::parse(token) else {
        return Ok(None);
    };
    let registry = &state.registry;
    let record = state
        .auth
        .tokens
        .get_or_load(token_id, || async {
            let client = registry.get().await?;
            let row = client
                .query_opt(
                    "SELECT user_id, secret_hash, expires_at FROM api_tokens WHERE id = $1",
                    &[&token_id],
                )
                .await?;
            Ok::<_, ApiError>(row.map(|row| {
                Arc::new(TokenRecord { user_id: row.get(0), secret_hash: row.get(1), expires_at: row.get(2) })
            }))
        })
        .await
        .map_err(ApiError::from)?;
    let Some(record) = record else { return Ok(None) };
    if !tokens::constant_time_eq(&record.secret_hash, &tokens::hash_secret(secret)) {
        return Ok(None);
    }
    if record.expires_at.is_some_and(|at| at <= OffsetDateTime::now_utc()) {
        return Ok(None);
    }
    let Some(user) = load_user(state, record.user_id).await? else {
        return Ok(None);
    };
    Ok(Some(AuthUser {
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
