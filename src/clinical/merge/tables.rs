//! The tables whose rows name a patient, read off the declarations, so that a merge moves
//! the rows of a table added later without anyone listing it here (a test compares these with
//! the schemas' catalogues).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::http::error::{ApiError, ApiResult};
use crate::resource::{Kind, Moved, Resource, Scope, Target, Unit, Within, registered};

use crate::clinical::records::{PATIENT_MERGES, PATIENTS};

/// A table whose rows name a patient: its declaration, and the column that names them.
#[derive(Debug, Clone, Copy)]
pub struct PatientRows {
    pub resource: &'static Resource,
    pub column: &'static str,
}

impl PatientRows {
    pub fn table(&self) -> &'static str {
        self.resource.table
    }

    /// Of the rows a merge moved (`moved`, at the versions it left them), those no longer as
    /// it left them: written since, gone, or no longer `owner`'s. Locks them all for the rest
    /// of the unit, so that none changes between this look and an undo's move.
    pub async fn changed_since(&self, unit: &Unit<'_>, moved: &[Moved], owner: i64) -> ApiResult<Vec<Value>> {
        if moved.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = moved.iter().map(|m| m.id).collect();
        let sql = format!(
            "SELECT t.id, t.version, t.{} FROM {} t WHERE t.id = ANY($1) ORDER BY t.id FOR UPDATE OF t",
            self.column,
            self.resource.stored_in(),
        );
        let now: Vec<(i64, i32, Option<i64>)> =
            unit.query(&sql, &[&ids]).await?.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect();
        Ok(moved
            .iter()
            .filter(|m| {
                !now.iter()
                    .any(|(id, version, of)| *id == m.id && *version == m.version && *of == Some(owner))
            })
            .map(|m| json!({ "table": self.table(), "id": m.id }))
            .collect())
    }
}

/// Rows a merge moved, by table.
pub type MovedRows = BTreeMap<String, Vec<Moved>>;

/// Rows of `(table_name, row_id, version)`, by table.
pub fn by_table(rows: &[tokio_postgres::Row]) -> MovedRows {
    let mut moved = MovedRows::new();
    for row in rows {
        moved.entry(row.get(0)).or_default().push(Moved { id: row.get(1), version: row.get(2) });
    }
    moved
}

impl PatientRows {
    /// Gives this table's rows of `moved` that are still `from`'s back to `to` (an undo),
    /// within `within`; a second run gives back nothing more. Answers the rows given back.
    pub async fn give_back(
        &self,
        unit: &Unit<'_>,
        within: Within<'_>,
        moved: &MovedRows,
        from: i64,
        to: i64,
    ) -> ApiResult<Vec<Moved>> {
        let Some(own) = moved.get(self.table()) else { return Ok(Vec::new()) };
        let ids: Vec<i64> = own.iter().map(|m| m.id).collect();
        unit.reassign(self.resource, within, self.column, from, to, Some(&ids), "unmerge").await
    }
}

/// The 409 of an undo refused because rows the merge moved (or rows naming them) were written
/// since.
pub fn changed_conflict(changed: Vec<Value>) -> ApiError {
    ApiError::conflict_with(
        "merge_changed_since",
        "Records the merge moved were written since; the merge can no longer be undone.",
        [("changed".to_owned(), Value::Array(changed))],
    )
}

/// One per table, by table name: the order a merge locks them in.
fn one_per_table(mut rows: Vec<PatientRows>) -> Vec<PatientRows> {
    rows.sort_by_key(|r| r.table());
    rows.dedup_by_key(|r| r.table());
    rows
}

/// Every branch table whose rows are a patient's records: declarations nested under a patient
/// (billing), or with a `patient_id` column (visits and their records, examinations, queue
/// tickets). The patients themselves and the merge log are not records of a patient.
pub fn in_branch() -> Vec<PatientRows> {
    let rows = registered()
        .iter()
        .filter(|r| r.scope == Scope::Branch)
        .filter(|r| r.table != PATIENTS.table && r.table != PATIENT_MERGES.table)
        .filter_map(|r| match r.parent {
            Some(parent) if parent.table == PATIENTS.table => {
                Some(PatientRows { resource: r, column: parent.column })
            }
            _ => r
                .output_columns()
                .any(|c| c == "patient_id")
                .then_some(PatientRows { resource: r, column: "patient_id" }),
        })
        .collect();
    one_per_table(rows)
}

/// Every registry table whose rows name a patient of a branch: rows that belong to a branch
/// with a `patient_id` of that branch's patients (surgery schedules, dispensing).
pub fn in_registry() -> Vec<PatientRows> {
    let names_patient = |r: &Resource| {
        r.all_fields().any(|f| {
            matches!(f.kind, Kind::Ref(Target::InBranch(table)) if table == PATIENTS.table)
                && f.name == "patient_id"
        })
    };
    let rows = registered()
        .iter()
        .filter(|r| r.scope == Scope::Registry && r.branch_bound && names_patient(r))
        .map(|r| PatientRows { resource: r, column: "patient_id" })
        .collect();
    one_per_table(rows)
}
