//! The ICD-10-CM codes a clinic records (`migrations/V18__diagnosis_codes.sql` says which
//! release and which chapters): read-only, searched by code with or without its dot, or by
//! words of the title, accents and case ignored.

use crate::permissions::{ADMIN_ACCESS, ANY_USER};
use crate::resource::field::boolean;
use crate::resource::{Resource, Scope, Shape};

pub static DIAGNOSIS_CODES: Resource = Resource {
    path: "diagnosis-codes",
    table: "diagnosis_codes",
    label: "Diagnosis code",
    plural: "diagnosis codes",
    scope: Scope::Registry,
    read_only: &[
        ("code", Shape::Text),
        ("title", Shape::Text),
        ("chapter", Shape::Text),
        ("billable", Shape::Boolean),
    ],
    filter_only: &[boolean("billable")],
    filters: &["billable"],
    // `search_text` holds the code, the code without its dot and the title, normalised.
    search_words: Some("search_text"),
    sort_fields: &["code"],
    default_sort: "code",
    read_permission: ANY_USER,
    write_permission: ADMIN_ACCESS,
    writable: false,
    soft_delete: false,
    trailing: &[],
    ..Resource::DEFAULTS
};
