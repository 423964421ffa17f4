//! Branch-scoped clinical resources, declared once each; the shared resource machinery
//! serves them. Enumerations are lowercase snake_case, all listed by `/enums`.

mod access_log;
pub mod allergies;
pub mod attachments;
pub mod diagnoses;
pub mod merge;
pub mod patients;
mod print;
mod records;
pub mod summary;

use salvo::oapi::{Object, PathItemType};

use crate::http::docs::{self, Access, Doc};
use crate::http::endpoints::Endpoints;
use crate::http::guard::{JSON_OR_PDF, Produces};
pub use records::{PATIENT_MERGES, PATIENT_VISITS, PATIENTS, RESOURCES};

/// The visit summary, the patient lookup, the export, and finding and merging duplicates
/// (matched before the generic `/patients/{id}`).
pub fn endpoints() -> Vec<Endpoints> {
    let mut branch = Endpoints::new(Access::Branch);
    merge::add_endpoints(&mut branch);
    let records = Object::new().additional_properties(salvo::oapi::Array::new().items(Object::new()));
    let summary = Object::new()
        .property("visit", salvo::oapi::Ref::from_schema_name("PatientVisit"))
        .property(
            "patient",
            Object::new()
                .property("id", docs::integer())
                .property("pin", docs::string())
                .property("first_name", docs::string())
                .property("last_name", docs::string()),
        )
        .property(
            "records",
            records.description("One key per kind of record (`complaints`, `visual_acuities`, ...); examinations only with clinical.read"),
        );
    let op = branch
        .operation("patient-visits", "A visit with every record of it, grouped by kind")
        .add_parameter(docs::path_id());
    let op = Doc::not_found(Doc::answers(op, "200", "The visit and its records", docs::envelope(summary)));
    let op = Doc::printable(op, "The visit summary");
    branch.add_behind(
        PathItemType::Get,
        "patient-visits/{id:num}/summary",
        "getVisitSummary",
        Some(Produces(JSON_OR_PDF)),
        summary::summary,
        op,
    );
    let op = branch
        .operation("patients", "Type-ahead lookup by name words, PIN or phone")
        .add_parameter(
            docs::query(
                "search",
                docs::string().max_length(200).pattern(docs::text_pattern(true, false)),
                "Name words, PIN or phone digits",
            )
            .required(salvo::oapi::Required::True),
        )
        .add_parameter(docs::query(
            "limit",
            docs::integer().minimum(1).maximum(patients::MAX_LOOKUP),
            "Default 10",
        ));
    let found =
        docs::envelope(salvo::oapi::Array::new().items(salvo::oapi::Ref::from_schema_name("Patient")));
    let op = Doc::answers(op, "200", "Best matches first", found);
    let op = Doc::invalid(op, "search missing or limit out of range");
    branch.add(PathItemType::Get, "patients/search", "searchPatients", patients::lookup, op);
    let mut op = branch
        .operation("patients", "Export patients as CSV (or JSON lines), streamed")
        .add_parameter(docs::query(
            "format",
            docs::string().enum_values(["csv", "json", "jsonl", "ndjson"]),
            "Default csv; JSON lines also when Accept is application/json",
        ));
    // The list's parameters select the rows; every selected row is sent, whatever the page.
    for parameter in crate::resource::docs::list_parameters(&PATIENTS) {
        op = op.add_parameter(parameter);
    }
    let op = op.add_response(
        "200",
        salvo::oapi::Response::new("One patient per line after a header row")
            .add_content("text/csv", salvo::oapi::Content::new(docs::string()))
            .add_content("application/x-ndjson", salvo::oapi::Content::new(Object::new())),
    );
    branch.add_behind(
        PathItemType::Get,
        "patients/export",
        "exportPatients",
        Some(Produces(&["text/csv", "application/x-ndjson", "application/json"])),
        patients::export,
        Doc::invalid(op, "A parameter is out of range or unknown"),
    );
    access_log::add_endpoints(&mut branch);
    attachments::add_endpoints(&mut branch);
    vec![branch]
}
