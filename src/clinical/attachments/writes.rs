//! The upload and the delete, each one unit of work: the bytes, the row and its audit record
//! (which never holds the bytes) commit together or not at all.

use salvo::http::StatusCode;
use salvo::prelude::*;
use serde_json::Value;

use super::kinds::{self, Kind};
use super::receive::{self, Upload};
use super::record::ATTACHMENTS;
use super::storage::Store;
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web, list};
use crate::permissions::ATTACHMENTS_WRITE;
use crate::resource::field::text;
use crate::resource::idempotency::Answer;
use crate::resource::input::Input;
use crate::resource::routes::set_etag;
use crate::resource::{Context, Resource, Scope, Unit, Within, registered};

/// What an upload says of the file besides its bytes, checked.
struct Described {
    title: Option<String>,
    visit_id: Option<i64>,
    /// The examination's declaration and the record's id.
    examination: Option<(&'static Resource, i64)>,
}

fn described(sent: &Upload) -> ApiResult<Described> {
    let mut errors = Vec::new();
    let title = sent.field("title").map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned);
    if let Some(title) = &title
        && (title.chars().count() > 200 || title.chars().any(char::is_control))
    {
        errors.push(("title".to_owned(), "The title must be one line of at most 200 characters.".to_owned()));
    }
    let id = |name: &str, errors: &mut Vec<(String, String)>| match sent.field(name).filter(|v| !v.is_empty())
    {
        None => None,
        Some(value) => match value.parse::<i64>() {
            Ok(id) if id > 0 => Some(id),
            _ => {
                errors.push((name.to_owned(), format!("The {name} must be a positive integer.")));
                None
            }
        },
    };
    let visit_id = id("visit_id", &mut errors);
    let examination_id = id("examination_id", &mut errors);
    let kind = sent.field("examination_kind").filter(|v| !v.is_empty());
    let examination = match (kind, examination_id) {
        (None, None) => None,
        (Some(kind), Some(id)) => match examination_of(kind) {
            Some(exam) => Some((exam, id)),
            None => {
                errors.push((
                    "examination_kind".to_owned(),
                    "The examination_kind must name an examination, e.g. refractions.".to_owned(),
                ));
                None
            }
        },
        (None, Some(_)) => {
            errors
                .push(("examination_kind".to_owned(), "Name the examination's kind with its id.".to_owned()));
            None
        }
        (Some(_), None) if errors.iter().any(|(f, _)| f == "examination_id") => None,
        (Some(_), None) => {
            errors.push(("examination_id".to_owned(), "Name the examination's id with its kind.".to_owned()));
            None
        }
    };
    if errors.is_empty() {
        Ok(Described { title, visit_id, examination })
    } else {
        Err(ApiError::Validation(field_errors(errors)))
    }
}

fn field_errors(errors: Vec<(String, String)>) -> crate::http::error::FieldErrors {
    let mut all = crate::http::error::FieldErrors::new();
    for (field, message) in errors {
        all.entry(field).or_default().push(message);
    }
    all
}

/// The examination whose path is `kind` (`refractions`): a declared branch resource of a
/// visit and its patient with the examinations' shared fields.
fn examination_of(kind: &str) -> Option<&'static Resource> {
    registered()
        .iter()
        .find(|r| {
            r.path == kind
                && r.scope == Scope::Branch
                && r.common.iter().any(|f| f.name == "examiner_id")
                && r.output_columns().any(|c| c == "patient_id")
        })
        .copied()
}

/// 413 `quota_exceeded`.
fn over_quota(quota: u64) -> ApiError {
    ApiError::Refusal {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        code: "quota_exceeded",
        message: format!("The branch keeps at most {quota} bytes of attachments; this file would pass that."),
    }
}

/// The advisory lock uploads of a branch take their turn on while the quota is counted
/// (the first key names the lock, the second the branch).
const QUOTA_LOCK: i32 = 0x4154_4348;

/// `POST /patients/{patient_id}/attachments`.
#[handler]
pub async fn upload(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(ATTACHMENTS_WRITE)?;
    let patient = web::path_id(req, "patient_id")?;
    let settings = &ctx.state.settings;
    let mut received = receive::receive(req, settings).await?;
    if received.bytes == 0 {
        return Err(kinds::unsupported("The file is empty."));
    }
    let kind = kinds::judge(&received.head, received.declared.as_deref())?;
    let described = described(&received)?;
    let filename = received.filename.clone().unwrap_or_else(|| format!("attachment.{}", extension(kind)));
    let store = Store::of(settings)?;
    let branch_id = ctx.branch()?.id;
    let mut conn = ctx.conn(Scope::Branch).await?;
    let unit = Unit::begin(conn.client(), ctx.writer()).await?;
    let live = unit
        .query_opt("SELECT id FROM patients WHERE id = $1 AND deleted_at IS NULL FOR KEY SHARE", &[&patient])
        .await?;
    if live.is_none() {
        return Err(ApiError::NotFound);
    }
    check_ties(&unit, patient, &described).await?;
    if let Some(existing) = already_kept(&unit, patient, &received.sha256).await? {
        return answer_existing(unit, res, existing).await;
    }
    if let Some(quota) = settings.attachment_branch_quota_bytes {
        let branch = i32::try_from(branch_id).unwrap_or(i32::MAX);
        unit.execute("SELECT pg_advisory_xact_lock($1, $2)", &[&QUOTA_LOCK, &branch]).await?;
        let row = unit
            .query_one(
                "SELECT coalesce(sum(bytes), 0)::bigint, bool_or(sha256 = $1) FROM attachment_blobs",
                &[&received.sha256],
            )
            .await?;
        let (used, kept): (i64, Option<bool>) = (row.get(0), row.get(1));
        if !kept.unwrap_or(false) && used as u64 + received.bytes > quota {
            return Err(over_quota(quota));
        }
    }
    let (blob, _) = store.keep(&unit, &mut received).await?;
    let (visit, (exam_kind, exam_id)) = (
        described.visit_id,
        described.examination.map_or((None, None), |(exam, id)| (Some(exam.path), Some(id))),
    );
    let inserted = unit
        .query_opt(
            "INSERT INTO attachments (patient_id, visit_id, examination_kind, examination_id, blob_id, kind,
                                      content_type, bytes, sha256, filename, title, created_by, updated_by)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)
             ON CONFLICT (patient_id, sha256) WHERE deleted_at IS NULL DO NOTHING
             RETURNING id",
            &[
                &patient,
                &visit,
                &exam_kind,
                &exam_id,
                &blob,
                &kind.name(),
                &kind.media_type(),
                &(received.bytes as i64),
                &received.sha256,
                &filename,
                &described.title,
                &unit.writer().user_id,
            ],
        )
        .await?;
    let Some(row) = inserted else {
        // The same bytes for the same patient committed meanwhile.
        let existing = already_kept(&unit, patient, &received.sha256).await?.ok_or(ApiError::Contended)?;
        return answer_existing(unit, res, existing).await;
    };
    let id: i64 = row.get(0);
    let after = unit.record(&ATTACHMENTS, id).await?;
    unit.audit(&ATTACHMENTS, "create", id, None, Some(&after)).await?;
    unit.commit(&Answer::created("Attachment created.", after.clone())).await?;
    crate::resource::routes::respond_created(req, res, &ATTACHMENTS, after);
    Ok(())
}

fn extension(kind: Kind) -> &'static str {
    match kind {
        Kind::Pdf => "pdf",
        Kind::Jpeg => "jpg",
        Kind::Png => "png",
        Kind::Tiff => "tif",
        Kind::Dicom => "dcm",
    }
}

/// 422 on `visit_id` or `examination_id` unless it is a live record of `patient`.
async fn check_ties(unit: &Unit<'_>, patient: i64, described: &Described) -> ApiResult<()> {
    let mut errors = Vec::new();
    if let Some(visit) = described.visit_id {
        let of = unit
            .query_opt(
                "SELECT patient_id FROM patient_visits WHERE id = $1 AND deleted_at IS NULL",
                &[&visit],
            )
            .await?
            .map(|r| r.get::<_, i64>(0));
        if of != Some(patient) {
            errors.push(("visit_id".to_owned(), "The visit must be one of this patient's.".to_owned()));
        }
    }
    if let Some((exam, id)) = described.examination {
        // The table and the condition come from a compiled-in declaration.
        let sql = format!(
            "SELECT patient_id FROM {} WHERE id = $1 AND deleted_at IS NULL{}",
            exam.stored_in(),
            exam.and_own_rows(""),
        );
        let of = unit.query_opt(&sql, &[&id]).await?.map(|r| r.get::<_, i64>(0));
        if of != Some(patient) {
            errors.push((
                "examination_id".to_owned(),
                "The examination must be one of this patient's.".to_owned(),
            ));
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(field_errors(errors))) }
}

async fn already_kept(unit: &Unit<'_>, patient: i64, sha256: &str) -> ApiResult<Option<i64>> {
    Ok(unit
        .query_opt(
            "SELECT id FROM attachments WHERE patient_id = $1 AND sha256 = $2 AND deleted_at IS NULL",
            &[&patient, &sha256],
        )
        .await?
        .map(|r| r.get(0)))
}

/// 200 with the record the same content already is in the chart.
async fn answer_existing(unit: Unit<'_>, res: &mut Response, id: i64) -> ApiResult<()> {
    let record = unit.record(&ATTACHMENTS, id).await?;
    let message = "The same file is already in the patient's chart.";
    unit.commit(&Answer::ok(message, record.clone())).await?;
    set_etag(res, &record);
    web::ok(res, message, record);
    Ok(())
}

/// The body of a delete: why (or `reason` in the query).
pub static REMOVAL: Input = Input::new("AttachmentRemoval", &[text("reason", 500)]);

#[derive(serde::Deserialize)]
struct Removal {
    reason: Option<String>,
}

/// `DELETE /patients/{patient_id}/attachments/{id}` with a `reason` (body or query).
#[handler]
pub async fn remove(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(ATTACHMENTS_WRITE)?;
    let patient = web::path_id(req, "patient_id")?;
    let id = web::path_id(req, "id")?;
    let if_match = crate::resource::etag::IfMatch::of(req);
    let (sent, errors): (Removal, _) = REMOVAL.read_partly(req, depot).await?;
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let from_query = list::query_pairs(req).into_iter().rev().find(|(k, _)| k == "reason").map(|(_, v)| v);
    let reason = sent.reason.or(from_query).map(|r| r.trim().to_owned()).unwrap_or_default();
    if reason.is_empty() || reason.chars().count() > 500 {
        return Err(ApiError::field("reason", "A reason of 1 to 500 characters is required."));
    }
    let mut conn = ctx.conn(Scope::Branch).await?;
    let unit = Unit::begin(conn.client(), ctx.writer()).await?;
    let before = unit.lock(&ATTACHMENTS, Within::parent("patient_id", patient), id, if_match).await?;
    unit.execute(
        "UPDATE attachments SET deleted_at = now(), delete_reason = $2, updated_at = now(), updated_by = $3,
                version = version + 1
          WHERE id = $1",
        &[&id, &reason, &unit.writer().user_id],
    )
    .await?;
    let mut after = before.clone();
    if let Value::Object(fields) = &mut after {
        fields.insert("delete_reason".to_owned(), Value::String(reason));
    }
    unit.audit(&ATTACHMENTS, "delete", id, Some(&before), Some(&after)).await?;
    unit.commit(&Answer::done("Attachment deleted.")).await?;
    web::done(res, "Attachment deleted.");
    Ok(())
}
