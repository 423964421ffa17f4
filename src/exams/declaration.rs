//! What every examination shares, and [`exam`], which builds a declaration from an
//! examination's own fields on it.

use serde_json::{Map, Value};

use crate::enums::EXAM_STATUS;
use crate::http::list::SortDirection;
use crate::permissions::{CLINICAL_READ, CLINICAL_WRITE};
use crate::resource::actions::{Action, Amend, Move, Stamp, StateLock, Verb};
use crate::resource::field::{
    Field, Kind, Rule, Structure, Target, branch_ref, long_text, object, past_timestamp, text,
};
use crate::resource::{PATIENT_OF_VISIT, Resource, Scope, Shape, Shared};

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
pub static NOT_PER_EYE: Structure =
    Structure { name: "NoEye", fields: &[], rules: &[], calculated: &[], per_eye: false };

/// The right and left eye fields of an examination.
pub const fn eyes(structure: &'static Structure) -> [Field; 2] {
    [object("right_eye", structure), object("left_eye", structure)]
}

/// What distinguishes one examination from another.
pub struct Exam {
    pub path: &'static str,
    pub table: &'static str,
    /// Its rows' `exam` in the shared table `examinations` (and its `exam_kind`).
    pub kind: &'static str,
    pub label: &'static str,
    pub plural: &'static str,
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
        shared: Some(Shared { table: "examinations", column: "exam", value: exam.kind }),
        label: exam.label,
        plural: exam.plural,
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
