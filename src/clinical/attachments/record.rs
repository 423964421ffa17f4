//! The declaration of attachments' rows: read through the shared list and record routes
//! (never written by them: the upload and the delete are `writes`), nested under the patient,
//! so that a merge of patients moves them.

use crate::http::list::SortDirection;
use crate::permissions::{ATTACHMENTS_READ, ATTACHMENTS_WRITE};
use crate::resource::{Parent, Resource, Scope, Shape};

pub static ATTACHMENTS: Resource = Resource {
    path: "patients/{patient_id}/attachments",
    table: "attachments",
    label: "Attachment",
    plural: "attachments",
    scope: Scope::Branch,
    parent: Some(Parent { param: "patient_id", column: "patient_id", table: "patients", soft_deleted: true }),
    read_only: &[
        ("visit_id", Shape::Integer),
        ("examination_kind", Shape::Text),
        ("examination_id", Shape::Integer),
        ("kind", Shape::Text),
        ("content_type", Shape::Text),
        ("bytes", Shape::Integer),
        ("sha256", Shape::Text),
        ("filename", Shape::Text),
        ("title", Shape::Text),
        ("created_by", Shape::Integer),
    ],
    sort_fields: &["created_at", "filename", "kind", "bytes"],
    default_sort: "created_at",
    default_direction: SortDirection::Desc,
    search: &["filename", "title"],
    read_permission: ATTACHMENTS_READ,
    write_permission: ATTACHMENTS_WRITE,
    audit_reads: true,
    writable: false,
    // The same file in both charts of a merge stays the duplicate's, once in the chart kept.
    once_per_parent: Some("sha256"),
    ..Resource::DEFAULTS
};
