//! `POST /patients/{id}/merge {duplicate_id, reason}`: the duplicate's records become the
//! patient's, in three steps, each one transaction of one database:
//!
//! 1. the branch: both patients locked, every branch row of the duplicate handed to the
//!    survivor and recorded, the duplicate marked merged (so that nothing can be written for
//!    it any more, in either database), the merge recorded as `registry_pending`;
//! 2. the registry: its rows of the duplicate handed over and recorded there;
//! 3. the branch: the merge `completed`, with the registry's rows, and the answer kept with
//!    the request's key.
//!
//! A failure after step 1 leaves a merge `registry_pending`: the duplicate is merged and its
//! registry rows wait, named by it. The same request again (with its key or without) finds
//! that merge and carries on from step 2; steps 2 and 3 move and record only what is left.

use crate::db::Client;
use salvo::http::header::{HeaderValue, LOCATION};
use salvo::prelude::*;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::log::{COMPLETE, follow_moves, incomplete, record_rows, standing};
use super::registry::{self, Merge};
use super::tables::{self, MovedRows};
use crate::clinical::records::{PATIENT_MERGES, PATIENTS};
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::permissions::PATIENTS_MERGE;
use crate::resource::field::{integer, text};
use crate::resource::idempotency::Answer;
use crate::resource::input::Input;
use crate::resource::routes::{render, set_etag};
use crate::resource::{Context, Scope, Unit, Within, merged_record};

#[derive(Deserialize)]
struct Asked {
    duplicate_id: i64,
    reason: String,
}

/// The body: a duplicate, and why.
pub static ASKED: Input = Input::new(
    "MergeRequest",
    &[integer("duplicate_id", 1, i64::MAX).required(), text("reason", 500).required()],
)
.with_notes(&[("duplicate_id", "The patient whose records move to this one")]);

#[handler]
pub async fn merge_duplicate(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(PATIENTS_MERGE)?;
    let survivor = web::path_id(req, "id")?;
    let asked: Asked = ASKED.read(req, depot).await?;
    if asked.duplicate_id == survivor {
        return Err(ApiError::field("duplicate_id", "A patient cannot be merged into themselves."));
    }
    let branch = ctx.branch()?.id;
    let mut conn = ctx.conn(Scope::Branch).await?;
    let id = in_branch(&ctx, conn.client(), survivor, &asked).await?;
    let merge = Merge { branch, id, survivor, duplicate: asked.duplicate_id };
    let moved = {
        let mut registry = ctx.registry().await?;
        registry::merge(&mut registry, &ctx, &merge).await?
    };
    let answer = complete(&ctx, conn.client(), &merge, &moved).await?;
    if let Ok(location) = HeaderValue::from_str(&format!("/api/v1/patients/{survivor}/merges/{id}")) {
        res.headers_mut().insert(LOCATION, location);
    }
    set_etag(res, &answer.body["data"]);
    render(res, &answer);
    Ok(())
}

/// The fields of the two records that differ: what the survivor kept, and what the duplicate
/// had.
fn differences(survivor: &Value, duplicate: &Value) -> Vec<Value> {
    PATIENTS
        .all_fields()
        .filter_map(|f| {
            let (kept, other) = (&survivor[f.name], &duplicate[f.name]);
            (kept != other).then(|| json!({ "field": f.name, "survivor": kept, "duplicate": other }))
        })
        .collect()
}

/// Step 1; answers the merge's id. A merge of this pair waiting for its registry step is
/// answered as it is, for the request to carry on.
async fn in_branch(ctx: &Context, client: &mut Client, survivor: i64, asked: &Asked) -> ApiResult<i64> {
    let duplicate = asked.duplicate_id;
    let unit = Unit::begin(client, ctx.writer()).await?;
    if let Some((id, merged_into, state)) = standing(&unit, duplicate).await? {
        return match state.as_str() {
            "registry_pending" if merged_into == survivor => {
                unit.lock(&PATIENTS, Within::default(), survivor, None).await?;
                unit.commit_step().await?;
                Ok(id)
            }
            "completed" | "registry_pending" => {
                Err(merged_record(&*unit, PATIENTS.table, duplicate).await?.unwrap_or(ApiError::NotFound))
            }
            _ => Err(incomplete(id)),
        };
    }
    // Both locked in id order, as every merge locks its two: merges cannot deadlock on them.
    let (mut kept, mut gone) = (Value::Null, Value::Null);
    for id in if survivor < duplicate { [survivor, duplicate] } else { [duplicate, survivor] } {
        match unit.lock(&PATIENTS, Within::default(), id, None).await {
            Ok(record) if id == survivor => kept = record,
            Ok(record) => gone = record,
            Err(ApiError::NotFound) if id == duplicate => {
                return Err(match merged_record(&*unit, PATIENTS.table, duplicate).await? {
                    Some(merged) => merged,
                    None => ApiError::field("duplicate_id", "The selected duplicate id is invalid."),
                });
            }
            Err(e) => return Err(e),
        }
    }
    let unfinished: Option<i64> = unit
        .query_opt(
            "SELECT id FROM patient_merges WHERE survivor_id = ANY($1) AND state IN ('registry_pending', 'undoing')
              ORDER BY id LIMIT 1",
            &[&vec![survivor, duplicate]],
        )
        .await?
        .map(|row| row.get(0));
    if let Some(unfinished) = unfinished {
        return Err(incomplete(unfinished));
    }
    let input = json!({ "duplicate_id": duplicate, "reason": asked.reason, "differences": differences(&kept, &gone) });
    let Value::Object(input) = input else { unreachable!("a JSON object") };
    let record = unit.insert(&PATIENT_MERGES, Within::parent("survivor_id", survivor), input).await?;
    let id =
        record["id"].as_i64().ok_or_else(|| ApiError::Internal(anyhow::anyhow!("a merge without an id")))?;
    for rows in tables::in_branch() {
        let moved = unit
            .reassign(rows.resource, Within::default(), rows.column, duplicate, survivor, None, "merge")
            .await?;
        record_rows(&unit, id, "branch", rows.table(), &moved).await?;
        follow_moves(&unit, id, rows.table(), &moved).await?;
    }
    unit.merge_record(&PATIENTS, duplicate, survivor).await?;
    let details = json!({ "merge_id": id, "duplicate_id": duplicate, "reason": asked.reason });
    unit.audit_event("merge", &PATIENTS, Some(survivor), details).await?;
    unit.commit_step().await?;
    Ok(id)
}

/// Step 3: the registry's rows recorded with the merge, the merge completed (unless a twin
/// request completed it first), the answer kept.
async fn complete(ctx: &Context, client: &mut Client, merge: &Merge, moved: &MovedRows) -> ApiResult<Answer> {
    let unit = Unit::begin(client, ctx.writer()).await?;
    let within = Within::parent("survivor_id", merge.survivor);
    let record = unit.lock(&PATIENT_MERGES, within, merge.id, None).await?;
    for (table, rows) in moved {
        record_rows(&unit, merge.id, "registry", table, rows).await?;
    }
    if record["state"] == "registry_pending" {
        unit.act(&PATIENT_MERGES, within, merge.id, &COMPLETE, Map::new(), None).await?;
    }
    let answer = Answer::created("Patients merged.", unit.record(&PATIENT_MERGES, merge.id).await?);
    unit.commit(&answer).await?;
    Ok(answer)
}
