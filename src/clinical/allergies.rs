//! A patient's allergies and intolerances, nested under the patient. An allergy names a
//! medicine of the registry (`medicine_id`), which the pharmacy checks when it dispenses that
//! medicine to the patient, or a substance in words; at least one of the two. Only `active`
//! allergies stop a dispense; `inactive` and `resolved` ones are kept as history. They are
//! printed on prescriptions and visit summaries (`print.rs`, `summary.rs`).

use serde_json::{Map, Value};

use crate::enums::{ALLERGY_STATUS, SEVERITY};
use crate::http::list::SortDirection;
use crate::permissions::{ALLERGIES_WRITE, PATIENTS_READ};
use crate::resource::field::{long_text, one_of, past_date, registry_ref, text};
use crate::resource::{Fields, Parent, Resource, Scope};

pub static ALLERGIES: Resource = Resource {
    path: "patients/{patient_id}/allergies",
    table: "allergies",
    label: "Allergy",
    plural: "allergies",
    scope: Scope::Branch,
    parent: Some(Parent { param: "patient_id", column: "patient_id", table: "patients", soft_deleted: true }),
    fields: &[
        registry_ref("medicine_id", "medicines"),
        text("substance", 200),
        text("reaction", 500),
        one_of("severity", &SEVERITY).required(),
        one_of("status", &ALLERGY_STATUS).defaulted(),
        past_date("noted_on"),
        long_text("notes"),
    ],
    rules: &[medicine_or_substance],
    sort_fields: &["created_at", "noted_on", "severity", "status"],
    default_sort: "created_at",
    default_direction: SortDirection::Desc,
    search: &["substance", "reaction"],
    filters: &["medicine_id", "severity", "status"],
    filter_aliases: &["status"],
    read_permission: PATIENTS_READ,
    write_permission: ALLERGIES_WRITE,
    ..Resource::DEFAULTS
};

/// An allergy is to a medicine, a substance, or both: naming neither is 422 on both fields.
fn medicine_or_substance(record: &mut Map<String, Value>) -> Vec<(String, String)> {
    if record.given("medicine_id").is_some() || record.given("substance").is_some() {
        return Vec::new();
    }
    let message = "Name the medicine or the substance the patient is allergic to.";
    vec![("medicine_id".into(), message.into()), ("substance".into(), message.into())]
}
