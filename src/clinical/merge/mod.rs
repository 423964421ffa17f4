//! Duplicate patients, found and merged, and a merge undone.
//!
//! - `duplicates`: `GET /patients/duplicates`, the likely duplicates of the branch;
//! - `merging`: `POST /patients/{id}/merge`, a duplicate's records handed to the patient;
//! - `undoing`: `POST /patients/{id}/unmerge`, a merge undone;
//! - `registry`: the registry's part of both, in transactions of its own;
//! - `tables`: the tables whose rows name a patient, read off the declarations;
//! - `log`: the merge log's moves and the rows each merge moved.
//!
//! The merge log itself is declared with the other records (`PATIENT_MERGES`,
//! `/patients/{patient_id}/merges`).
//!
//! Why a merge loses no record and moves none twice. A merge (`POST /patients/{id}/merge`)
//! writes two databases, which share no transaction, so it is three transactions in a fixed
//! order, each idempotent: (1) the branch: both patients locked in id order, every branch row
//! of the duplicate (live and deleted, every table a declaration says names a patient) handed
//! to the survivor and recorded in the merge log with its new version, the duplicate marked
//! `merged_into_id` and soft-deleted, the merge `registry_pending`; (2) the registry: the
//! duplicate's rows there (surgery schedules, dispensing; found the same way) handed over under
//! the patient's advisory lock and recorded there; (3) the branch: the merge `completed`, the
//! answer kept with the request's key. Rows are moved by `UPDATE`, never copied, so none can
//! exist twice. Nothing new can be written for the duplicate once (1) commits: in the branch a
//! trigger on every table naming a patient takes `FOR KEY SHARE` on the patient and refuses a
//! merged one (a writer that got there first holds the lock the merge waits for, so its row is
//! moved), in the registry a trigger takes the patient's advisory lock shared and refuses a
//! merged one (a writer that checked the branch before (1) and writes after (2) started waits
//! for (2) and is refused, one that wrote before is moved). A failure between (1) and (3)
//! leaves the merge `registry_pending`: the duplicate is merged, its registry rows still name
//! it and nothing else can; the same request again, with its key or without, finds the merge
//! and runs (2) and (3), which move only what is left (the key stays claimed without an answer
//! until (3)). A merge into one of the two is refused (409 `merge_incomplete`) until then. An
//! undo runs the other way: the registry's moved rows are locked and checked in a registry
//! transaction kept open while the branch checks its own, gives them back and marks the merge
//! `undoing`; then the registry gives its rows back and the branch marks the merge `undone`. A
//! refusal (409 `merge_changed_since`: a moved row has another version, or a row written since
//! names one) writes nothing; a later merge or undo that moves the row again is no write since:
//! it carries the version each standing merge recorded along, unless someone wrote the row in
//! between, so a chain (X into Y, Y into Z) is undone in reverse order (the first before the
//! second is 409 `merged_since`); a failure after the branch committed is completed by the same
//! request again. `tests/api/patients/merge.rs` cuts a merge between the two databases and
//! retries it, and merges under concurrent writes to both patients; `merge_chain.rs` undoes
//! chains.

mod duplicates;
mod log;
mod merging;
mod registry;
pub mod tables;
mod undoing;

use salvo::oapi::{Array, Object, PathItemType, Ref};

use crate::http::docs::{self, Doc};
use crate::http::endpoints::Endpoints;

pub use duplicates::REASONS;

/// Describes the routes and serves them in `branch` (the clinical domain's branch group).
pub fn add_endpoints(branch: &mut Endpoints) {
    let shown = Object::new()
        .property("id", docs::integer())
        .property("pin", docs::string())
        .property("first_name", docs::string())
        .property("last_name", docs::string())
        .property("birth_date", docs::date())
        .description("The patient as the front desk compares them: names, birth date, sex, phone, e-mail, city, insurance");
    let pair = Object::new()
        .property("patient", shown.clone().description("The older record"))
        .property("duplicate", shown.description("The newer record"))
        .property("reasons", Array::new().items(docs::string().enum_values(REASONS)))
        .required("patient")
        .required("duplicate")
        .required("reasons");
    let mut op = branch.operation("patients", "Pairs of patients of the branch that are likely one person");
    for parameter in [
        docs::query("page", docs::integer().minimum(1), "Default 1"),
        docs::query("perPage", docs::integer().minimum(1).maximum(100), "Default 15"),
        docs::query(
            "sortField",
            docs::string().enum_values(duplicates::RULES.sort_fields.iter().copied()),
            "Default duplicate_id",
        ),
        docs::query("sortDirection", docs::string().enum_values(["asc", "desc"]), "Default desc"),
        docs::query("filters[reason]", docs::string().enum_values(REASONS), "Pairs listed for this reason"),
        docs::query("filters[patient_id]", docs::integer().minimum(1), "Pairs of this patient"),
    ] {
        op = op.add_parameter(parameter);
    }
    let op = Doc::answers(op, "200", "Newest duplicates first", docs::paginated(pair));
    branch.add(
        PathItemType::Get,
        "patients/duplicates",
        "listDuplicatePatients",
        duplicates::duplicates,
        Doc::invalid(op, "A parameter is out of range or unknown"),
    );

    let merge = || Ref::from_schema_name("PatientMerge");
    let op = branch
        .operation("patients", "Merge a duplicate into this patient: every record of it moves here")
        .add_parameter(docs::path_id())
        .description(
            "The duplicate's records in the branch and in the registry become this patient's; this patient keeps \
             its own fields (those that differ are in `differences`). The duplicate then answers 301 to reads \
             and 410 to writes. Needs patients.merge.",
        );
    let op = Doc::answers(op, "201", "The merge, as the merge log keeps it", docs::envelope(merge()));
    let op = Doc::conflict(
        Doc::not_found(Doc::merged(op, true)),
        "merge_incomplete: a merge of these patients is not finished",
    );
    branch.add_taking(
        PathItemType::Post,
        "patients/{id:num}/merge",
        "mergePatient",
        &merging::ASKED,
        merging::merge_duplicate,
        op,
    );

    let op = branch
        .operation("patients", "Undo a merge into this patient")
        .add_parameter(docs::path_id())
        .description(
            "Within MERGE_UNDO_HOURS of the merge, while nothing it moved was written since (a later merge of this \
             patient into another, undone, does not count: a chain of merges is undone in reverse order). Needs \
             patients.merge.",
        );
    let op = Doc::answers(op, "200", "The merge, undone", docs::envelope(merge()));
    let op = Doc::conflict(
        Doc::not_found(Doc::merged(op, true)),
        "merge_changed_since (with `changed`), merged_since (this patient was merged into `merged_into_id` since: \
         undo that merge, `merge_id`, first), undo_window_closed, merge_incomplete, invalid_transition",
    );
    branch.add_taking(
        PathItemType::Post,
        "patients/{id:num}/unmerge",
        "unmergePatient",
        &undoing::UNMERGE,
        undoing::unmerge,
        op,
    );
}
