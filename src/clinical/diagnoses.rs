//! Coded diagnoses of a visit and a patient's problem list.
//!
//! A visit's diagnoses carry an ICD-10-CM code of the registry's `diagnosis_codes`, checked
//! before the write (the registry may be another database: no foreign key), a laterality and
//! at most one primary per visit (a partial unique index, 422 on `primary`). Their patient
//! is the visit's, filled in by the server, so a merge of patients moves them.
//!
//! A new diagnosis whose code is not an active problem of the patient adds one, in the same
//! unit of work; the problem list is edited by itself afterwards (resolved, corrected,
//! removed), and a later diagnosis of a resolved code opens it again as a new problem.

use salvo::async_trait;
use serde_json::{Map, Value};

use crate::enums::{LATERALITY, PROBLEM_STATUS};
use crate::http::error::{ApiError, ApiResult};
use crate::http::list::SortDirection;
use crate::notify::Topic;
use crate::permissions::{DIAGNOSES_WRITE, PATIENTS_READ};
use crate::resource::field::{Field, Kind, boolean, date, long_text, one_of, text};
use crate::resource::hooks::Hooks;
use crate::resource::row::Fields;
use crate::resource::{PATIENT_OF_VISIT, Parent, Resource, Scope, Shape, Unique, Unit, Within, Writer};

/// An ICD-10-CM code as CMS writes it: letters, digits and one dot.
const CODE: Field = Field::new("code", Kind::Code { min: 3, max: 8, marks: "." });

pub static VISIT_DIAGNOSES: Resource = Resource {
    path: "patient-visits/{patient_visit_id}/diagnoses",
    table: "visit_diagnoses",
    label: "Diagnosis",
    plural: "diagnoses",
    scope: Scope::Branch,
    parent: Some(Parent {
        param: "patient_visit_id",
        column: "patient_visit_id",
        table: "patient_visits",
        soft_deleted: true,
    }),
    fields: &[
        CODE.required(),
        one_of("laterality", &LATERALITY).defaulted(),
        boolean("primary").defaulted(),
        long_text("note"),
    ],
    read_only: &[("patient_id", Shape::Integer)],
    // The visit's patient, filled in from the visit (`derived`).
    server_written: &["patient_id"],
    derived: &[PATIENT_OF_VISIT],
    sort_fields: &["created_at", "code"],
    default_sort: "created_at",
    filters: &["code", "laterality", "primary"],
    unique: &[Unique {
        index: "visit_diagnoses_one_primary",
        field: "primary",
        message: "The visit already has a primary diagnosis.",
    }],
    read_permission: PATIENTS_READ,
    write_permission: DIAGNOSES_WRITE,
    hooks: &DiagnosisHooks,
    ..Resource::DEFAULTS
};

pub static PROBLEMS: Resource = Resource {
    path: "patients/{patient_id}/problems",
    table: "problems",
    label: "Problem",
    plural: "problems",
    scope: Scope::Branch,
    parent: Some(Parent { param: "patient_id", column: "patient_id", table: "patients", soft_deleted: true }),
    fields: &[
        CODE.required(),
        text("title", 500),
        one_of("status", &PROBLEM_STATUS).defaulted(),
        date("onset"),
        date("resolved_on"),
        long_text("note"),
    ],
    sort_fields: &["onset", "created_at", "code", "status"],
    default_sort: "created_at",
    default_direction: SortDirection::Desc,
    filters: &["code", "status"],
    filter_aliases: &["status"],
    read_permission: PATIENTS_READ,
    write_permission: DIAGNOSES_WRITE,
    hooks: &ProblemHooks,
    ..Resource::DEFAULTS
};

/// `h4011x1` or `H40.11X1` as `H40.11X1`: upper case, the dot after the category.
fn canonical(code: &str) -> String {
    let code = code.trim().to_uppercase();
    if code.contains('.') || code.len() <= 3 { code } else { format!("{}.{}", &code[..3], &code[3..]) }
}

/// The sent code in its canonical form and the title the registry gives it; 422 on `code`
/// when the registry has no such code.
async fn known_code(writer: &Writer, input: &mut Map<String, Value>) -> ApiResult<Option<String>> {
    let Some(sent) = input.text("code") else { return Ok(None) };
    let code = canonical(sent);
    let client = writer.state.registry.get().await?;
    let stmt = client
        .prepare_cached("SELECT title FROM diagnosis_codes WHERE code = $1 ORDER BY release DESC LIMIT 1")
        .await?;
    match client.query_opt(&stmt, &[&code]).await? {
        Some(row) => {
            input.insert("code".into(), Value::String(code));
            Ok(Some(row.get(0)))
        }
        None => Err(ApiError::field("code", "The code is not a known ICD-10-CM code.")),
    }
}

struct DiagnosisHooks;

#[async_trait]
impl Hooks for DiagnosisHooks {
    async fn prepare(
        &self,
        writer: &Writer,
        _: Option<i64>,
        input: &mut Map<String, Value>,
    ) -> ApiResult<()> {
        known_code(writer, input).await.map(|_| ())
    }

    /// A new diagnosis whose code is no active problem of the patient's adds one, with the
    /// visit's date as its onset.
    async fn written(
        &self,
        unit: &Unit<'_>,
        _: i64,
        input: &Map<String, Value>,
        before: Option<&Value>,
    ) -> ApiResult<Vec<Topic>> {
        let (Some(code), Some(visit), None) = (input.text("code"), input.integer("patient_visit_id"), before)
        else {
            return Ok(Vec::new());
        };
        // One diagnosis of the patient at a time past this point: two of one code written at
        // once would each find no problem of it and both add one.
        unit.execute(
            "SELECT 1 FROM patients p JOIN patient_visits v ON v.patient_id = p.id
              WHERE v.id = $1 FOR NO KEY UPDATE OF p",
            &[&visit],
        )
        .await?;
        let row = unit
            .query_one(
                "SELECT v.patient_id, v.visit_date::text,
                        EXISTS (SELECT 1 FROM problems p
                                 WHERE p.patient_id = v.patient_id AND p.code = $2
                                   AND p.status = 'active' AND p.deleted_at IS NULL)
                   FROM patient_visits v WHERE v.id = $1",
                &[&visit, &code],
            )
            .await?;
        let (patient, onset, listed): (i64, String, bool) = (row.get(0), row.get(1), row.get(2));
        if listed {
            return Ok(Vec::new());
        }
        let mut problem = Map::new();
        problem.insert("code".into(), Value::from(code));
        let mut lookup = problem.clone();
        if let Some(title) = known_code(unit.writer(), &mut lookup).await? {
            problem.insert("title".into(), Value::String(title));
        }
        problem.insert("status".into(), Value::from("active"));
        problem.insert("onset".into(), Value::String(onset));
        unit.insert(&PROBLEMS, Within::parent("patient_id", patient), problem).await?;
        Ok(Vec::new())
    }
}

struct ProblemHooks;

#[async_trait]
impl Hooks for ProblemHooks {
    /// A known code; its title from the registry unless one is sent.
    async fn prepare(
        &self,
        writer: &Writer,
        _: Option<i64>,
        input: &mut Map<String, Value>,
    ) -> ApiResult<()> {
        let title = known_code(writer, input).await?;
        if let Some(title) = title.filter(|_| input.text("title").is_none()) {
            input.insert("title".into(), Value::String(title));
        }
        Ok(())
    }
}
