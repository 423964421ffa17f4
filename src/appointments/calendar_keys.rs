//! `/doctors/{id}/calendar-keys` (in a branch, `X-Branch-Id`; administrators,
//! `admin.access`): the keys a doctor's calendar application subscribes to their appointments
//! at the branch with (`feed`). A key is no user's token: it opens that one feed and nothing
//! else, reads only what the feed shows, writes nothing.
//!
//! A key is `ck_` and 256 random bits in hex; only its SHA-256 is stored (a registry row
//! bound to the doctor and the branch), and the secret is answered once, by the create.
//! `include_patient_names` (default false) puts patients' names in the events' summaries.
//! DELETE revokes a key (the record stays listed, with who made it and when it was last
//! used). Both writes go through the unit of work and are audited in the registry's trail.

use salvo::prelude::*;
use serde_json::{Map, Value};

use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::permissions::ADMIN_ACCESS;
use crate::resource::field::{Field, boolean, text};
use crate::resource::idempotency::Answer;
use crate::resource::input::Input;
use crate::resource::{Context, Parent, Resource, Scope, Shape, Unit, Within, Writer, select_columns};
use crate::security::tokens;
use crate::state::AppState;

/// How a calendar key starts: it tells a key from a user's token or a display key at a glance
/// (and to secret scanners).
pub const PREFIX: &str = "ck_";

const FIELDS: &[Field] = &[
    // Where the key is used ("Phone calendar").
    text("name", 100),
    boolean("include_patient_names").defaulted(),
];

/// What a create takes.
pub static KEY_REQUEST: Input = Input::new("CalendarKeyRequest", FIELDS).with_notes(&[
    ("name", "Where the key is used, to tell keys apart"),
    ("include_patient_names", "Whether events name the patient; default false"),
]);

/// The declaration the keys' writes go through (and are audited as). Its routes are the
/// hand-written ones of `super::endpoints`: the rows live in the registry, but each is a
/// branch's, reached through the branch's routes.
pub static CALENDAR_KEYS: Resource = Resource {
    path: "doctors/{id}/calendar-keys",
    table: "calendar_keys",
    label: "Calendar key",
    plural: "calendar keys",
    scope: Scope::Registry,
    branch_bound: true,
    fields: FIELDS,
    read_only: &[
        ("branch_id", Shape::Integer),
        ("created_by", Shape::Integer),
        ("last_used_at", Shape::Timestamp),
        ("revoked_at", Shape::Timestamp),
    ],
    server_written: &["secret_hash", "branch_id"],
    parent: Some(Parent { param: "id", column: "doctor_id", table: "doctors", soft_deleted: true }),
    sort_fields: &["created_at", "id"],
    default_sort: "created_at",
    read_permission: ADMIN_ACCESS,
    write_permission: ADMIN_ACCESS,
    // Revoked keys stay, for the record of who made them and when they were last used.
    soft_delete: false,
    ..Resource::DEFAULTS
};

/// The doctor in the path and the request's branch, as the rows a request may reach.
fn scope_of(req: &Request, ctx: &Context) -> ApiResult<(i64, i64)> {
    let doctor = web::path_id(req, "id")?;
    Ok((doctor, ctx.branch()?.id))
}

fn within(doctor: i64, branch: &[i64]) -> Within<'_> {
    Within { parent: Some(("doctor_id", doctor)), branches: Some(branch) }
}

/// 404 unless the doctor is a live one.
async fn doctor_exists(state: &AppState, doctor: i64) -> ApiResult<()> {
    let client = state.registry.get().await?;
    let found =
        client.query_opt("SELECT 1 FROM doctors WHERE id = $1 AND deleted_at IS NULL", &[&doctor]).await?;
    found.map(|_| ()).ok_or(ApiError::NotFound)
}

/// `POST /doctors/{id}/calendar-keys {name, include_patient_names}`: a new key of the doctor
/// at the request's branch, answered with its secret (`key`) and the feed's address (`url`)
/// this once.
///
/// The secret is never stored, so no `Idempotency-Key` keeps this answer: a repeated request
/// makes a second key, which the administrator sees listed and can revoke.
#[handler]
pub async fn create(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(ADMIN_ACCESS)?;
    let (doctor, branch) = scope_of(req, &ctx)?;
    let mut input: Map<String, Value> = KEY_REQUEST.read(req, depot).await?;
    doctor_exists(&ctx.state, doctor).await?;
    let secret = format!("{PREFIX}{}", tokens::random_secret());
    // bytea from its text form, as `jsonb_populate_record` reads it.
    let hash = format!("\\x{}", hex::encode(tokens::hash_secret(&secret)));
    input.insert("secret_hash".into(), Value::String(hash));
    input.insert("branch_id".into(), Value::from(branch));
    let mut client = ctx.registry().await?;
    let unit = Unit::begin(&mut client, Writer { idempotency: None, ..ctx.writer() }).await?;
    let record = unit.insert(&CALENDAR_KEYS, within(doctor, &[branch]), input).await?;
    unit.commit(&Answer::created("Calendar key created.", record.clone())).await?;
    let base = web::base_url(req, ctx.state.trusts_forwarded_headers(req));
    let mut shown = record;
    if let Some(fields) = shown.as_object_mut() {
        fields.insert("key".into(), Value::String(secret.clone()));
        let url = format!("{base}/calendar/doctors/{doctor}.ics?key={secret}");
        fields.insert("url".into(), Value::String(url));
    }
    web::created(res, "Calendar key created.", shown);
    Ok(())
}

/// `GET /doctors/{id}/calendar-keys`: the doctor's keys at the request's branch, revoked ones
/// too, oldest first; never a secret (none is stored).
#[handler]
pub async fn list(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(ADMIN_ACCESS)?;
    let (doctor, branch) = scope_of(req, &ctx)?;
    doctor_exists(&ctx.state, doctor).await?;
    let client = ctx.registry().await?;
    let sql = format!(
        "SELECT coalesce(jsonb_agg(to_jsonb(r) ORDER BY r.created_at, r.id), '[]')
           FROM (SELECT {} FROM calendar_keys t WHERE t.doctor_id = $1 AND t.branch_id = $2) r",
        select_columns(&CALENDAR_KEYS)
    );
    let row = client.query_one(&sql, &[&doctor, &branch]).await?;
    let keys: Value = row.get(0);
    web::ok(res, "Calendar keys retrieved.", keys);
    Ok(())
}

/// `DELETE /doctors/{id}/calendar-keys/{key_id}`: revokes the key (its feed answers 401 from
/// now on); revoking a revoked key changes nothing but is answered the same.
#[handler]
pub async fn revoke(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(ADMIN_ACCESS)?;
    let (doctor, branch) = scope_of(req, &ctx)?;
    let id = web::path_id(req, "key_id")?;
    let mut client = ctx.registry().await?;
    let unit = Unit::begin(&mut client, ctx.writer()).await?;
    let branches = [branch];
    let before = unit.lock(&CALENDAR_KEYS, within(doctor, &branches), id, None).await?;
    unit.execute(
        "UPDATE calendar_keys SET revoked_at = coalesce(revoked_at, now()), version = version + 1,
                updated_at = now(), updated_by = $2
          WHERE id = $1",
        &[&id, &unit.writer().user_id],
    )
    .await?;
    let after = unit.record(&CALENDAR_KEYS, id).await?;
    unit.audit(&CALENDAR_KEYS, "revoke", id, Some(&before), Some(&after)).await?;
    let answer = Answer::ok("Calendar key revoked.", after.clone());
    unit.commit(&answer).await?;
    web::ok(res, "Calendar key revoked.", after);
    Ok(())
}

/// What a presented key opens: one doctor's appointments at one branch.
pub struct Granted {
    pub key_id: i64,
    pub branch_id: i64,
    pub include_patient_names: bool,
}

/// The live key `presented` is, for doctor `doctor` (live) at an active branch; `None` for
/// anything else (malformed, unknown, revoked, another doctor's). Marks the key used, at
/// most once a minute: bookkeeping like a display key's, not an administrator's change, so
/// neither audited nor versioned.
pub async fn granted(state: &AppState, presented: &str, doctor: i64) -> ApiResult<Option<Granted>> {
    if !tokens::is_prefixed_secret(presented, PREFIX) {
        return Ok(None);
    }
    let client = state.registry.get().await?;
    let row = client
        .query_opt(
            "SELECT k.id, k.branch_id, k.include_patient_names
               FROM calendar_keys k
               JOIN doctors d ON d.id = k.doctor_id AND d.deleted_at IS NULL
               JOIN branches b ON b.id = k.branch_id AND b.status = 'active'
              WHERE k.secret_hash = $1 AND k.revoked_at IS NULL AND k.doctor_id = $2",
            &[&tokens::hash_secret(presented), &doctor],
        )
        .await?;
    let Some(row) = row else { return Ok(None) };
    let granted = Granted { key_id: row.get(0), branch_id: row.get(1), include_patient_names: row.get(2) };
    crate::db::mark_key_used(&client, "calendar_keys", granted.key_id).await?;
    Ok(Some(granted))
}
