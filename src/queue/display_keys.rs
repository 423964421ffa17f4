//! `/branch-services/{branch_service_id}/display-keys`: the keys waiting-room screens show a
//! service's queue with (administrators, `admin.access`). A key opens that one service's
//! display stream and nothing else: it is no user's token, reads no record, writes nothing.
//!
//! A key is `dk_` and 256 random bits in hex; only its SHA-256 is stored, and the secret is
//! answered once, by the create. DELETE revokes it (the record stays listed): every instance
//! hears the revocation (`Topic::DisplayKey`) and ends the key's open streams at once.

use salvo::async_trait;
use salvo::prelude::*;
use serde_json::{Map, Value};

use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::notify::Topic;
use crate::permissions::ADMIN_ACCESS;
use crate::resource::field::text;
use crate::resource::hooks::{Deleted, Hooks};
use crate::resource::idempotency::Answer;
use crate::resource::input::create_body;
use crate::resource::routes::respond_created;
use crate::resource::{Condition, Context, Kind, Parent, Resource, Scope, Shape, Unit, Within, Writer};
use crate::security::tokens;
use crate::state::AppState;

/// How a display key starts: it tells a key from a user's token at a glance (and to secret
/// scanners).
const PREFIX: &str = "dk_";

pub static DISPLAY_KEYS: Resource = Resource {
    path: "branch-services/{branch_service_id}/display-keys",
    table: "display_keys",
    label: "Display key",
    plural: "display keys",
    scope: Scope::Registry,
    // Where the screen hangs ("Lobby, left").
    fields: &[text("name", 100).required()],
    read_only: &[
        ("created_by", Shape::Integer),
        ("last_used_at", Shape::Timestamp),
        ("revoked_at", Shape::Timestamp),
    ],
    server_written: &["secret_hash"],
    parent: Some(Parent {
        param: "branch_service_id",
        column: "branch_service_id",
        table: "branch_services",
        soft_deleted: true,
    }),
    sort_fields: &["name", "created_at", "last_used_at", "id"],
    default_sort: "created_at",
    search: &["name"],
    filters: &["revoked"],
    conditions: &[Condition {
        name: "revoked",
        kind: Kind::Bool,
        sql: "$?::bool = (t.revoked_at IS NOT NULL)",
    }],
    read_permission: ADMIN_ACCESS,
    write_permission: ADMIN_ACCESS,
    // Revoked keys stay, for the record of who made them and when they were last used.
    soft_delete: false,
    hooks: &DisplayKeyHooks,
    ..Resource::DEFAULTS
};

struct DisplayKeyHooks;

#[async_trait]
impl Hooks for DisplayKeyHooks {
    /// DELETE revokes: the key stops opening streams, and every instance ends its open ones.
    async fn delete(
        &self,
        unit: &Unit<'_>,
        id: i64,
        _: &Value,
        _: &Map<String, Value>,
    ) -> ApiResult<Option<Deleted>> {
        unit.execute(
            "UPDATE display_keys SET revoked_at = coalesce(revoked_at, now()), version = version + 1,
                    updated_at = now(), updated_by = $2
              WHERE id = $1",
            &[&id, &unit.writer().user_id],
        )
        .await?;
        Ok(Some(Deleted::Own {
            action: "revoke",
            message: "Display key revoked.",
            topics: vec![Topic::DisplayKey(id)],
        }))
    }
}

/// `POST /branch-services/{branch_service_id}/display-keys {name}`: a new key, answered with
/// its secret (`key`) and the screen's address (`url`, the key in its fragment) this once.
///
/// The secret is never stored, so no `Idempotency-Key` keeps this answer: a repeated request
/// makes a second key, which the administrator sees listed and can revoke.
#[handler]
pub async fn create(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(ADMIN_ACCESS)?;
    let service = web::path_id(req, "branch_service_id")?;
    let mut input = create_body(req, depot, &DISPLAY_KEYS).await?;
    let secret = format!("{PREFIX}{}", tokens::random_secret());
    // bytea from its text form, as `jsonb_populate_record` reads it.
    let hash = format!("\\x{}", hex::encode(tokens::hash_secret(&secret)));
    input.insert("secret_hash".into(), Value::String(hash));
    let mut client = ctx.registry().await?;
    let unit = Unit::begin(&mut client, Writer { idempotency: None, ..ctx.writer() }).await?;
    let live = unit
        .query_opt("SELECT 1 FROM branch_services WHERE id = $1 AND deleted_at IS NULL", &[&service])
        .await?;
    if live.is_none() {
        return Err(ApiError::NotFound);
    }
    let record = unit.insert(&DISPLAY_KEYS, Within::parent("branch_service_id", service), input).await?;
    unit.commit(&Answer::created("Display key created.", record.clone())).await?;
    let base = web::base_url(req, ctx.state.trusts_forwarded_headers(req));
    let mut shown = record;
    if let Some(fields) = shown.as_object_mut() {
        fields.insert("key".into(), Value::String(secret.clone()));
        fields.insert("url".into(), Value::String(format!("{base}/display/{service}#key={secret}")));
    }
    respond_created(req, res, &DISPLAY_KEYS, shown);
    Ok(())
}

/// What a presented key opens.
pub struct Granted {
    pub key_id: i64,
    pub service_id: i64,
    pub branch_id: i64,
}

/// The live key `presented` is, for a live service of an active branch; `None` for anything
/// else (malformed, unknown, revoked). Marks the key used, at most once a minute: bookkeeping
/// like a session's, not an administrator's change, so neither audited nor versioned.
pub async fn granted(state: &AppState, presented: &str) -> ApiResult<Option<Granted>> {
    if !tokens::is_prefixed_secret(presented, PREFIX) {
        return Ok(None);
    }
    let client = state.registry.get().await?;
    let row = client
        .query_opt(
            "SELECT k.id, k.branch_service_id, s.branch_id
               FROM display_keys k
               JOIN branch_services s ON s.id = k.branch_service_id AND s.deleted_at IS NULL
               JOIN branches b ON b.id = s.branch_id AND b.status = 'active'
              WHERE k.secret_hash = $1 AND k.revoked_at IS NULL",
            &[&tokens::hash_secret(presented)],
        )
        .await?;
    let Some(row) = row else { return Ok(None) };
    let granted = Granted { key_id: row.get(0), service_id: row.get(1), branch_id: row.get(2) };
    crate::db::mark_key_used(&client, "display_keys", granted.key_id).await?;
    Ok(Some(granted))
}

/// Whether key `id` still opens its service's display: not revoked, the service live, its
/// branch active.
pub async fn still_live(state: &AppState, id: i64) -> ApiResult<bool> {
    let client = state.registry.get().await?;
    let row = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM display_keys k
                              JOIN branch_services s ON s.id = k.branch_service_id AND s.deleted_at IS NULL
                              JOIN branches b ON b.id = s.branch_id AND b.status = 'active'
                             WHERE k.id = $1 AND k.revoked_at IS NULL)",
            &[&id],
        )
        .await?;
    Ok(row.get(0))
}
