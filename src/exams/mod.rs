//! The fourteen eye examinations: one declaration each (`types.rs`), built by [`exam`] on
//! what they all share: the visit and patient they belong to, when and by whom, notes, the
//! right and left eye, signing and amending.
//!
//! A signed examination changes only with an `amendment_reason` (audited `amend`, the
//! previous version kept in the audit log) and is never deleted.

pub mod measurements;
pub mod types;

use serde_json::{Map, Value};

use crate::enums::EXAM_STATUS;
use crate::http::list::SortDirection;
use crate::permissions::{CLINICAL_READ, CLINICAL_WRITE};
use crate::resource::actions::{Action, Amend, Move, Stamp, StateLock, Verb};
use crate::resource::field::{
    Field, Kind, Rule, Structure, Target, branch_ref, long_text, object, past_timestamp, text,
};
use crate::resource::{PATIENT_OF_VISIT, Resource, Scope, Shape};

/// What every examination records besides its own fields.
pub static COMMON: &[Field] = &[
    branch_ref("patient_visit_id", "patient_visits").required(),
    branch_ref("patient_id", "patients").required(),
    past_timestamp("examined_at").defaulted(),
    Field::new("examiner_id", Kind::Ref(Target::Staff)).required().caller_by_default(),
    long_text("notes"),
    text("amendment_reason", 500),
];

/// `draft -> signed`, stamped with who signed and when.
pub const SIGN: Action = Action {
    name: "sign",
    segment: "sign",
    verb: Verb::Post,
    permission: None,
    field: "status",
    moves: &[Move { from: &["draft"], to: "signed" }],
    stamps: &[Stamp::User("signed_by"), Stamp::Now("signed_at")],
    input: &[],
    done: "Examination signed.",
};

/// A signed examination changes only as an amendment, and stays.
pub const SIGNED: StateLock = StateLock {
    field: "status",
    states: &["signed"],
    editable: &[],
    amend: Some(Amend {
        reason: "amendment_reason",
        action: "amend",
        stamps: &[Stamp::User("amended_by"), Stamp::Now("amended_at")],
    }),
    conflict: "record_signed",
    delete: Some("record_signed"),
};

/// Shown, never written by clients.
const READ_ONLY: &[(&str, Shape)] = &[
    ("status", Shape::Text),
    ("signed_by", Shape::Integer),
    ("signed_at", Shape::Timestamp),
    ("amended_by", Shape::Integer),
    ("amended_at", Shape::Timestamp),
];

const FILTER_ONLY: &[Field] = &[Field::new("status", Kind::Enum(&EXAM_STATUS))];

/// At least one eye is recorded, after create and after every change.
pub fn one_eye_at_least(record: &mut Map<String, Value>) -> Vec<(String, String)> {
    let recorded = |eye: &str| record.get(eye).is_some_and(|v| !v.is_null());
    if recorded("right_eye") || recorded("left_eye") {
        return Vec::new();
    }
    vec![("right_eye".into(), "Record the right eye, the left eye or both.".into())]
}

/// For examinations not made per eye (radiology): both eye fields stay empty.
pub fn no_eyes(record: &mut Map<String, Value>) -> Vec<(String, String)> {
    ["right_eye", "left_eye"]
        .into_iter()
        .filter(|eye| record.get(*eye).is_some_and(|v| !v.is_null()))
        .map(|eye| (eye.to_owned(), "This examination is not recorded per eye; leave it empty.".to_owned()))
        .collect()
}

/// An examination whose eyes have no structure (radiology) declares this one.
pub static NOT_PER_EYE: Structure = Structure { name: "NoEye", fields: &[], rules: &[], per_eye: false };

/// The right and left eye fields of an examination.
pub const fn eyes(structure: &'static Structure) -> [Field; 2] {
    [object("right_eye", structure), object("left_eye", structure)]
}

/// What distinguishes one examination from another.
pub struct Exam {
    pub path: &'static str,
    pub table: &'static str,
    pub label: &'static str,
    /// Its own fields, the two eye fields included.
    pub fields: &'static [Field],
    /// Its rules on the whole record (at least one eye, unless it is not per eye).
    pub rules: &'static [Rule],
    pub computed: &'static [(&'static str, &'static str, Shape)],
}

/// The declaration of an examination.
pub const fn exam(exam: Exam) -> Resource {
    Resource {
        path: exam.path,
        table: exam.table,
        label: exam.label,
        scope: Scope::Branch,
        common: COMMON,
        fields: exam.fields,
        rules: exam.rules,
        computed: exam.computed,
        read_only: READ_ONLY,
        filter_only: FILTER_ONLY,
        actions: &[SIGN],
        lock: Some(SIGNED),
        sort_fields: &["examined_at", "created_at"],
        default_sort: "examined_at",
        default_direction: SortDirection::Desc,
        search: &["notes"],
        filters: &["patient_visit_id", "patient_id", "examiner_id", "status"],
        date_range: Some("examined_at"),
        derived: &[PATIENT_OF_VISIT],
        read_permission: CLINICAL_READ,
        write_permission: CLINICAL_WRITE,
        ..Resource::DEFAULTS
    }
}

pub use types::RESOURCES;

/// OpenAPI entries of [`extra_routes`].
pub fn document(doc: &mut crate::http::docs::Doc) {
    use crate::http::docs::{self, Access, Doc};
    use salvo::oapi::{Array, Object, PathItemType};
    let point = Object::new()
        .property("at", docs::timestamp())
        .property("value", salvo::oapi::Object::with_type(salvo::oapi::BasicType::Number))
        .property("eye", docs::string().enum_values(["right", "left"]))
        .property("record_id", docs::integer())
        .property("exam", docs::string().enum_values(crate::enums::EXAM_KIND.values.iter().copied()));
    let op = Doc::operation(Access::Branch, "patients", "One measurement of a patient over time, for plots")
        .add_parameter(docs::path_id())
        .add_parameter(
            docs::query(
                "kind",
                docs::string().enum_values(crate::enums::MEASUREMENT_KIND.values.iter().copied()),
                "What to read",
            )
            .required(salvo::oapi::Required::True),
        )
        .add_parameter(docs::query(
            "eye",
            docs::string().enum_values(["right", "left", "both"]),
            "Default both",
        ))
        .add_parameter(docs::query("start_date", docs::date(), "Examined on or after"))
        .add_parameter(docs::query("end_date", docs::date(), "Examined on or before"));
    let op = Doc::answers(op, "200", "By time, then record", docs::envelope(Array::new().items(point)));
    let op = Doc::not_found(Doc::invalid(op, "kind missing or unknown; a bad eye or date"));
    doc.add(PathItemType::Get, "/api/v1/patients/{id}/measurements", op);
}

/// Routes beyond the examinations' CRUD.
pub fn extra_routes() -> salvo::Router {
    salvo::Router::with_path("patients/{id}/measurements").get(measurements::measurements)
}
