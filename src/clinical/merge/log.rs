//! The branch's merge log (`patient_merges`, declared as `PATIENT_MERGES`): its moves, and the
//! rows each merge moved (`patient_merge_rows`).

use serde_json::json;

use super::tables::{MovedRows, by_table};
use crate::db::Queries;
use crate::http::error::{ApiError, ApiResult};
use crate::resource::actions::{Action, Move, Stamp, Verb};
use crate::resource::{Moved, Unit};

/// A move of a merge's state: declared, but made only by the merge and its undo.
macro_rules! state_move {
    ($name:literal, $from:literal -> $to:literal, $stamps:expr) => {
        Action {
            name: $name,
            segment: $name,
            verb: Verb::Post,
            permission: None,
            field: "state",
            moves: &[Move { from: &[$from], to: $to }],
            stamps: $stamps,
            input: &[],
            done: "Merge updated.",
        }
    };
}

/// The registry's rows moved too.
pub const COMPLETE: Action =
    state_move!("complete", "registry_pending" -> "completed", &[Stamp::Now("completed_at")]);
/// The branch's rows given back; the registry's to follow.
pub const UNDO: Action = state_move!("undo", "completed" -> "undoing", &[]);
/// The registry's rows given back too.
pub const UNDONE: Action =
    state_move!("undone", "undoing" -> "undone", &[Stamp::Now("undone_at"), Stamp::User("undone_by")]);

/// Records rows a merge moved (again: a step run twice records each once).
pub async fn record_rows(
    unit: &Unit<'_>,
    merge: i64,
    place: &str,
    table: &str,
    moved: &[Moved],
) -> ApiResult<()> {
    if moved.is_empty() {
        return Ok(());
    }
    let (ids, versions): (Vec<i64>, Vec<i32>) = moved.iter().map(|m| (m.id, m.version)).unzip();
    unit.execute(
        "INSERT INTO patient_merge_rows (merge_id, place, table_name, row_id, version)
         SELECT $1, $2, $3, unnest($4::bigint[]), unnest($5::int[]) ON CONFLICT DO NOTHING",
        &[&merge, &place, &table, &ids, &versions],
    )
    .await?;
    Ok(())
}

/// Rows the merge machinery moved (`moved`, a merge's or an undo's, at their versions once
/// moved) were not written since for the other standing merges that moved them before: a
/// merge of their survivor into a third and its undo leave them undoable. Their recorded
/// versions follow the move where they were still the version it moved from (a move adds
/// one); a row someone else wrote in between stays behind, and still refuses their undo.
pub async fn follow_moves(unit: &Unit<'_>, merge: i64, table: &str, moved: &[Moved]) -> ApiResult<()> {
    if moved.is_empty() {
        return Ok(());
    }
    let (ids, versions): (Vec<i64>, Vec<i32>) = moved.iter().map(|m| (m.id, m.version)).unzip();
    unit.execute(
        "UPDATE patient_merge_rows r SET version = m.version
           FROM unnest($3::bigint[], $4::int[]) AS m (row_id, version), patient_merges pm
          WHERE r.place = 'branch' AND r.table_name = $2 AND r.row_id = m.row_id AND r.version = m.version - 1
            AND r.merge_id <> $1 AND pm.id = r.merge_id AND pm.state <> 'undone'",
        &[&merge, &table, &ids, &versions],
    )
    .await?;
    Ok(())
}

/// The merge a patient is the duplicate of, unless undone: its id, survivor and state.
pub async fn standing(unit: &Unit<'_>, duplicate: i64) -> ApiResult<Option<(i64, i64, String)>> {
    let row = unit
        .query_opt(
            "SELECT id, survivor_id, state FROM patient_merges WHERE duplicate_id = $1 AND state <> 'undone' FOR UPDATE",
            &[&duplicate],
        )
        .await?;
    Ok(row.map(|r| (r.get(0), r.get(1), r.get(2))))
}

/// The 409 of a merge whose registry part (or whose undo's) is not done yet.
pub fn incomplete(merge: i64) -> ApiError {
    ApiError::conflict_with(
        "merge_incomplete",
        "A merge of these patients is not finished; send that merge (or its undo) again first.",
        [("merge_id".to_owned(), json!(merge))],
    )
}

/// The rows a merge moved in `place`, by table.
pub async fn moved_rows(client: &impl Queries, merge: i64, place: &str) -> ApiResult<MovedRows> {
    let rows = client
        .query(
            "SELECT table_name, row_id, version FROM patient_merge_rows WHERE merge_id = $1 AND place = $2
              ORDER BY table_name, row_id",
            &[&merge, &place],
        )
        .await?;
    Ok(by_table(&rows))
}
