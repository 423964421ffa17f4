//! `POST /patients/{id}/unmerge {merge_id}`: a completed merge undone, within
//! `MERGE_UNDO_HOURS` of it and while nothing it moved was written since by anything but the
//! merges and undos that moved it on and back (`log::follow_moves`). A survivor merged into a
//! third since is refused (409 `merged_since`) until that merge is undone: a chain of merges is
//! undone in reverse order.
//!
//! 1. The registry's moved rows are locked (so that none can change until the end) and
//!    checked: each still at the version the merge left, still the survivor's, and no
//!    registry row of the survivor names a branch row the merge moved without being moved
//!    itself. That transaction stays open.
//! 2. The branch: the same checks of its rows (and of rows naming them, through its foreign
//!    keys), then the duplicate is live again, its rows go back, the merge is `undoing`.
//! 3. The registry's transaction gives its rows back and marks the merge undone there.
//! 4. The branch: the merge `undone`, the answer kept.
//!
//! A refusal in 1 or 2 writes nothing. A failure after 2 leaves the merge `undoing`; the same
//! request again carries on from 3, whose moves then give back what is still the survivor's.

use crate::db::Client;
use salvo::prelude::*;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::log::{UNDO, UNDONE, follow_moves, incomplete, moved_rows};
use super::registry::{self, Merge};
use super::tables::{self, MovedRows, PatientRows};
use crate::clinical::records::{PATIENT_MERGES, PATIENTS};
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::permissions::PATIENTS_MERGE;
use crate::resource::field::integer;
use crate::resource::idempotency::Answer;
use crate::resource::input::Input;
use crate::resource::routes::{render, set_etag};
use crate::resource::{Context, Kind, Scope, Target, Unit, Within, state_conflict};

pub static UNMERGE: Input = Input::new("UnmergeRequest", &[integer("merge_id", 1, i64::MAX).required()]);

#[derive(Deserialize)]
struct Undo {
    merge_id: i64,
}

#[handler]
pub async fn unmerge(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(PATIENTS_MERGE)?;
    let survivor = web::path_id(req, "id")?;
    let Undo { merge_id: id } = UNMERGE.read(req, depot).await?;
    let branch = ctx.branch()?.id;
    let window = ctx.state.settings.merge_undo_window.as_secs_f64();
    let mut conn = ctx.conn(Scope::Branch).await?;
    // The request's key first: a repeat is answered as the first was, whatever became of the
    // merge since.
    let unit = Unit::begin(conn.client(), ctx.writer()).await?;
    let row = unit
        .query_opt(
            "SELECT m.duplicate_id, m.state, m.created_at + make_interval(secs => $3) > now(), p.merged_into_id
               FROM patient_merges m
               JOIN patients p ON p.id = m.survivor_id AND (p.deleted_at IS NULL OR p.merged_into_id IS NOT NULL)
              WHERE m.id = $1 AND m.survivor_id = $2",
            &[&id, &survivor, &window],
        )
        .await?;
    let Some(row) = row else { return Err(ApiError::NotFound) };
    let (duplicate, state, in_window, merged): (i64, String, bool, Option<i64>) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    let later = if merged.is_some() { merged_since(&unit, survivor).await? } else { None };
    unit.commit_step().await?;
    let merge = Merge { branch, id, survivor, duplicate };
    match state.as_str() {
        "completed" if !in_window => return Err(window_closed()),
        "completed" => {
            if let Some(later) = later {
                return Err(later);
            }
            let branch_rows = moved_rows(&*conn.client(), id, "branch").await?;
            let mut registry = ctx.registry().await?;
            let held = registry::hold(&mut registry, &ctx, &merge, &branch_rows).await?;
            in_branch(&ctx, conn.client(), &merge, window).await?;
            registry::give_back(held, &merge).await?;
        }
        "undoing" => {
            let mut registry = ctx.registry().await?;
            let unit = registry::begin(&mut registry, &ctx).await?;
            registry::give_back(unit, &merge).await?;
        }
        "registry_pending" => return Err(incomplete(id)),
        other => return Err(state_conflict(&PATIENT_MERGES, "invalid_transition", Some(other))),
    }
    let answer = finish(&ctx, conn.client(), &merge).await?;
    set_etag(res, &answer.body["data"]);
    render(res, &answer);
    Ok(())
}

fn window_closed() -> ApiError {
    ApiError::Conflict {
        code: "undo_window_closed",
        message: "This merge is older than the time within which a merge may be undone.".into(),
    }
}

/// The 409 of an undo whose survivor was merged into a third patient since: the rows this
/// merge moved went on with it, and come back only when that later merge is undone first (a
/// chain is undone in reverse order). `None` when the survivor stands.
async fn merged_since(unit: &Unit<'_>, survivor: i64) -> ApiResult<Option<ApiError>> {
    let later = unit
        .query_opt(
            "SELECT id, survivor_id FROM patient_merges WHERE duplicate_id = $1 AND state <> 'undone'",
            &[&survivor],
        )
        .await?;
    Ok(later.map(|row| {
        let (later, into): (i64, i64) = (row.get(0), row.get(1));
        ApiError::conflict_with(
            "merged_since",
            format!(
                "This patient was merged into patient {into} since (merge {later}); undo that merge first."
            ),
            [("merge_id".to_owned(), json!(later)), ("merged_into_id".to_owned(), json!(into))],
        )
    }))
}

/// Step 2.
async fn in_branch(ctx: &Context, client: &mut Client, merge: &Merge, window: f64) -> ApiResult<()> {
    let unit = Unit::begin(client, ctx.writer()).await?;
    let within = Within::parent("survivor_id", merge.survivor);
    let record = unit.lock(&PATIENT_MERGES, within, merge.id, None).await?;
    if record["state"] != "completed" {
        return Err(state_conflict(&PATIENT_MERGES, "invalid_transition", record["state"].as_str()));
    }
    let open: bool = unit
        .query_one(
            "SELECT created_at + make_interval(secs => $2) > now() FROM patient_merges WHERE id = $1",
            &[&merge.id, &window],
        )
        .await?
        .get(0);
    if !open {
        return Err(window_closed());
    }
    match unit.lock(&PATIENTS, Within::default(), merge.survivor, None).await {
        // Merged into a third since this request looked.
        Err(ApiError::NotFound) => {
            return Err(merged_since(&unit, merge.survivor).await?.unwrap_or(ApiError::NotFound));
        }
        other => other?,
    };
    let moved = moved_rows(&*unit, merge.id, "branch").await?;
    let patient_rows = tables::in_branch();
    let mut changed = Vec::new();
    for rows in &patient_rows {
        let own = moved.get(rows.table()).map(Vec::as_slice).unwrap_or_default();
        changed.extend(rows.changed_since(&unit, own, merge.survivor).await?);
    }
    changed.extend(naming_moved(&unit, &patient_rows, &moved).await?);
    if !changed.is_empty() {
        return Err(tables::changed_conflict(changed));
    }
    unit.unmerge_record(&PATIENTS, merge.duplicate).await?;
    for rows in &patient_rows {
        let given = rows.give_back(&unit, Within::default(), &moved, merge.survivor, merge.duplicate).await?;
        follow_moves(&unit, merge.id, rows.table(), &given).await?;
    }
    unit.act(&PATIENT_MERGES, within, merge.id, &UNDO, Map::new(), None).await?;
    let details = json!({ "merge_id": merge.id, "duplicate_id": merge.duplicate });
    unit.audit_event("unmerge", &PATIENTS, Some(merge.survivor), details).await?;
    unit.commit_step().await
}

/// Rows of the branch naming a row the merge moved, that it did not move itself: written
/// since, for the survivor, on a record that would go back to the duplicate (a complaint on a
/// moved visit). What names what is read from the declarations' references, as the
/// registry's step does: the catalogue's foreign keys are the tables', and an examination's
/// are its shared table's, not its own.
async fn naming_moved(
    unit: &Unit<'_>,
    patient_rows: &[PatientRows],
    moved: &MovedRows,
) -> ApiResult<Vec<Value>> {
    let mut found = Vec::new();
    for naming in patient_rows {
        let own: Vec<i64> =
            moved.get(naming.table()).map(|rows| rows.iter().map(|m| m.id).collect()).unwrap_or_default();
        for field in naming.resource.all_fields() {
            let Kind::Ref(Target::Branch(table)) = field.kind else { continue };
            let Some(referenced) = moved.get(table).filter(|rows| !rows.is_empty()) else { continue };
            let ids: Vec<i64> = referenced.iter().map(|m| m.id).collect();
            let sql = format!(
                "SELECT id FROM {} WHERE {} = ANY($1) AND NOT (id = ANY($2)){} ORDER BY id",
                naming.resource.stored_in(),
                field.name,
                naming.resource.and_own_rows(""),
            );
            for row in unit.query(&sql, &[&ids, &own]).await? {
                found.push(json!({ "table": naming.table(), "id": row.get::<_, i64>(0) }));
            }
        }
    }
    Ok(found)
}

/// Step 4.
async fn finish(ctx: &Context, client: &mut Client, merge: &Merge) -> ApiResult<Answer> {
    let unit = Unit::begin(client, ctx.writer()).await?;
    let within = Within::parent("survivor_id", merge.survivor);
    let record = unit.act(&PATIENT_MERGES, within, merge.id, &UNDONE, Map::new(), None).await?;
    let answer = Answer::ok("Merge undone.", record);
    unit.commit(&answer).await?;
    Ok(answer)
}
