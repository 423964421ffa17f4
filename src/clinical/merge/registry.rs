//! The registry's part of a merge and of its undo: the rows of the registry that name the
//! duplicate (surgery schedules, dispensing) move in a transaction of the registry's own, under
//! the patient's advisory lock, which every registry write naming that patient takes too.

use crate::db::Client;
use serde_json::{Value, json};

use super::tables::{self, MovedRows, PatientRows, by_table};
use crate::http::error::ApiResult;
use crate::resource::{Context, Kind, Moved, Target, Unit, Within, Writer};

/// The registry writes of a request that wrote its branch first: the request's key lives in
/// the branch, so the registry's steps claim none.
fn step_writer(ctx: &Context) -> Writer {
    Writer { idempotency: None, ..ctx.writer() }
}

/// A unit on the registry for one step of a merge or an undo.
pub(super) async fn begin<'c>(client: &'c mut Client, ctx: &Context) -> ApiResult<Unit<'c>> {
    Unit::begin(client, step_writer(ctx)).await
}

/// One merge, as both sides know it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Merge {
    pub branch: i64,
    pub id: i64,
    pub survivor: i64,
    pub duplicate: i64,
}

impl Merge {
    /// Only this merge's branch.
    fn within<'a>(&self, branch: &'a [i64]) -> Within<'a> {
        Within { parent: None, branches: Some(branch) }
    }

    /// Waits for any write naming the duplicate, and keeps new ones waiting until this unit ends.
    async fn lock_duplicate(&self, unit: &Unit<'_>) -> ApiResult<()> {
        unit.execute(
            "SELECT pg_advisory_xact_lock(branch_patient_key($1, $2))",
            &[&self.branch, &self.duplicate],
        )
        .await?;
        Ok(())
    }
}

/// The rows this merge moved in the registry, by table, as the registry recorded them.
async fn recorded(unit: &Unit<'_>, merge: &Merge) -> ApiResult<MovedRows> {
    let rows = unit
        .query(
            "SELECT table_name, row_id, version FROM branch_patient_merge_rows
              WHERE branch_id = $1 AND merge_id = $2 ORDER BY table_name, row_id",
            &[&merge.branch, &merge.id],
        )
        .await?;
    Ok(by_table(&rows))
}

/// The registry's side of `log::follow_moves`: the versions the branch's other standing merges
/// recorded of these registry rows follow this move, where no one else wrote them in between.
async fn follow_moves(unit: &Unit<'_>, merge: &Merge, table: &str, moved: &[Moved]) -> ApiResult<()> {
    if moved.is_empty() {
        return Ok(());
    }
    let (ids, versions): (Vec<i64>, Vec<i32>) = moved.iter().map(|m| (m.id, m.version)).unzip();
    unit.execute(
        "UPDATE branch_patient_merge_rows r SET version = m.version
           FROM unnest($4::bigint[], $5::int[]) AS m (row_id, version), branch_patient_merges bm
          WHERE r.table_name = $3 AND r.row_id = m.row_id AND r.version = m.version - 1 AND r.branch_id = $1
            AND r.merge_id <> $2 AND bm.branch_id = r.branch_id AND bm.merge_id = r.merge_id AND bm.undone_at IS NULL",
        &[&merge.branch, &merge.id, &table, &ids, &versions],
    )
    .await?;
    Ok(())
}

/// Moves the duplicate's registry rows to the survivor and records them; a step done already
/// (its transaction committed, the request's last step did not) moves nothing more. Answers
/// every row this merge moved in the registry.
pub(super) async fn merge(client: &mut Client, ctx: &Context, merge: &Merge) -> ApiResult<MovedRows> {
    let unit = begin(client, ctx).await?;
    merge.lock_duplicate(&unit).await?;
    unit.execute(
        "INSERT INTO branch_patient_merges (branch_id, merge_id, duplicate_id, survivor_id) VALUES ($1, $2, $3, $4)
         ON CONFLICT (branch_id, merge_id) DO NOTHING",
        &[&merge.branch, &merge.id, &merge.duplicate, &merge.survivor],
    )
    .await?;
    let branch = [merge.branch];
    for rows in tables::in_registry() {
        let within = merge.within(&branch);
        let moved = unit
            .reassign(rows.resource, within, rows.column, merge.duplicate, merge.survivor, None, "merge")
            .await?;
        let (ids, versions): (Vec<i64>, Vec<i32>) = moved.iter().map(|m| (m.id, m.version)).unzip();
        unit.execute(
            "INSERT INTO branch_patient_merge_rows (branch_id, merge_id, table_name, row_id, version)
             SELECT $1, $2, $3, unnest($4::bigint[]), unnest($5::int[]) ON CONFLICT DO NOTHING",
            &[&merge.branch, &merge.id, &rows.table(), &ids, &versions],
        )
        .await?;
        follow_moves(&unit, merge, rows.table(), &moved).await?;
    }
    let moved = recorded(&unit, merge).await?;
    unit.commit_step().await?;
    Ok(moved)
}

/// The first step of an undo: the registry rows this merge moved, locked against writers
/// until the undo ends, each still at the version the merge left it at and still the
/// survivor's, and no registry row of the survivor naming a branch row the merge moved
/// (`branch`) that the merge did not move itself. Else a 409 naming what changed.
pub(super) async fn hold<'c>(
    client: &'c mut Client,
    ctx: &Context,
    merge: &Merge,
    branch: &MovedRows,
) -> ApiResult<Unit<'c>> {
    let unit = begin(client, ctx).await?;
    merge.lock_duplicate(&unit).await?;
    let moved = recorded(&unit, merge).await?;
    let mut changed = Vec::new();
    for rows in tables::in_registry() {
        let own = moved.get(rows.table()).map(Vec::as_slice).unwrap_or_default();
        changed.extend(rows.changed_since(&unit, own, merge.survivor).await?);
        changed.extend(naming_moved(&unit, &rows, merge, own, branch).await?);
    }
    if !changed.is_empty() {
        return Err(tables::changed_conflict(changed));
    }
    Ok(unit)
}

/// Rows of `rows`'s table, in the merge's branch, naming a branch row the merge moved (a
/// dispensing of a moved prescription) that are not among those it moved (`own`).
async fn naming_moved(
    unit: &Unit<'_>,
    rows: &PatientRows,
    merge: &Merge,
    own: &[Moved],
    branch: &MovedRows,
) -> ApiResult<Vec<Value>> {
    let own: Vec<i64> = own.iter().map(|m| m.id).collect();
    let mut found = Vec::new();
    for field in rows.resource.all_fields() {
        let Kind::Ref(Target::InBranch(table)) = field.kind else { continue };
        let Some(referenced) = branch.get(table) else { continue };
        let ids: Vec<i64> = referenced.iter().map(|m| m.id).collect();
        let sql = format!(
            "SELECT id FROM {} WHERE branch_id = $1 AND {} = ANY($2) AND NOT (id = ANY($3)){} ORDER BY id",
            rows.resource.stored_in(),
            field.name,
            rows.resource.and_own_rows(""),
        );
        for row in unit.query(&sql, &[&merge.branch, &ids, &own]).await? {
            found.push(json!({ "table": rows.table(), "id": row.get::<_, i64>(0) }));
        }
    }
    Ok(found)
}

/// The last step of an undo in the registry: the merge marked undone (registry rows may name
/// the duplicate again) and the rows it moved given back to the duplicate. Run again after a
/// failure, it gives back what is still the survivor's.
pub(super) async fn give_back(unit: Unit<'_>, merge: &Merge) -> ApiResult<()> {
    merge.lock_duplicate(&unit).await?;
    unit.execute(
        "UPDATE branch_patient_merges SET undone_at = now() WHERE branch_id = $1 AND merge_id = $2 AND undone_at IS NULL",
        &[&merge.branch, &merge.id],
    )
    .await?;
    let moved = recorded(&unit, merge).await?;
    let branch = [merge.branch];
    for rows in tables::in_registry() {
        let given =
            rows.give_back(&unit, merge.within(&branch), &moved, merge.survivor, merge.duplicate).await?;
        follow_moves(&unit, merge, rows.table(), &given).await?;
    }
    unit.commit_step().await
}
