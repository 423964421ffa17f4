//! The declarations of patients, their visits and the records of a visit.

use crate::enums::{CIVIL_STATUS, EXAM_STATUS, EYE, PATIENT_STATUS, SEVERITY, SEX, VISIT_STATUS, VISIT_TYPE};
use crate::http::list::SortDirection;
use crate::permissions::{CLINICAL_WRITE, PATIENTS_MERGE, PATIENTS_READ, PATIENTS_WRITE};
use crate::resource::actions::{Action, Move, Stamp, StateLock, Verb};
use crate::resource::field::{
    Field, Kind, boolean, branch_ref, date, integer, long_text, one_of, past_date, registry_ref, text,
};
use crate::resource::{Numbering, PATIENT_OF_VISIT, Parent, Resource, Scope, Shape, Unique};

pub static PATIENTS: Resource = Resource {
    path: "patients",
    table: "patients",
    label: "Patient",
    plural: "patients",
    scope: Scope::Branch,
    fields: &[
        text("first_name", 100).required(),
        text("middle_name", 100),
        text("last_name", 100).required(),
        text("suffix", 20),
        past_date("birth_date").required(),
        one_of("sex", &SEX).required(),
        one_of("civil_status", &CIVIL_STATUS),
        one_of("status", &PATIENT_STATUS).defaulted(),
        Field::new("phone", Kind::Phone),
        Field::new("email", Kind::Email),
        text("address_line", 200),
        text("city", 100),
        text("province", 100),
        text("postal_code", 20),
        text("country", 100),
        text("occupation", 100),
        text("emergency_contact_name", 200),
        text("emergency_contact_relation", 50),
        Field::new("emergency_contact_phone", Kind::Phone),
        registry_ref("insurance_id", "insurances"),
        text("insurance_member_no", 50),
        long_text("notes"),
        // No appointment reminders are queued or sent to a patient who declined them.
        boolean("reminders_opt_out").defaulted(),
    ],
    read_only: &[("pin", Shape::Text)],
    computed: &[("age", "extract(year FROM age(current_date, t.birth_date))::int", Shape::Integer)],
    sort_fields: &["last_name", "first_name", "pin", "birth_date", "created_at"],
    default_sort: "last_name",
    default_direction: SortDirection::Asc,
    search_words: Some("search_text"),
    search_rows: Some("patient_search"),
    filters: &["sex", "civil_status", "status"],
    derived: &[],
    read_permission: PATIENTS_READ,
    write_permission: PATIENTS_WRITE,
    audit_reads: true,
    counted: true,
    merged_into: Some("merged_into_id"),
    ..Resource::DEFAULTS
};

pub static PATIENT_VISITS: Resource = Resource {
    path: "patient-visits",
    table: "patient_visits",
    label: "Patient visit",
    plural: "patient visits",
    scope: Scope::Branch,
    fields: &[
        branch_ref("patient_id", "patients").required(),
        date("visit_date").required(),
        one_of("visit_type", &VISIT_TYPE),
        registry_ref("doctor_id", "doctors"),
        text("reason", 500),
        one_of("status", &VISIT_STATUS).defaulted(),
        long_text("notes"),
    ],
    sort_fields: &["visit_date", "created_at", "status"],
    default_sort: "visit_date",
    default_direction: SortDirection::Desc,
    search: &["reason"],
    filters: &["patient_id", "status", "visit_type", "visit_date"],
    // Records of a visit name its patient too: the visit keeps its patient once it has any.
    keeps: &["patient_id"],
    derived: &[],
    read_permission: PATIENTS_READ,
    write_permission: PATIENTS_WRITE,
    ..Resource::DEFAULTS
};

pub static COMPLAINTS: Resource = Resource {
    path: "complaints",
    table: "complaints",
    label: "Complaint",
    plural: "complaints",
    scope: Scope::Branch,
    fields: &[
        branch_ref("patient_id", "patients").required(),
        branch_ref("patient_visit_id", "patient_visits").required(),
        text("complaint", 500).required(),
        one_of("eye", &EYE),
        text("onset", 100),
        text("duration", 100),
        one_of("severity", &SEVERITY),
        long_text("notes"),
    ],
    sort_fields: &["created_at", "complaint", "severity"],
    default_sort: "created_at",
    default_direction: SortDirection::Desc,
    search: &["complaint", "notes"],
    filters: &["patient_id", "patient_visit_id", "eye", "severity"],
    derived: &[PATIENT_OF_VISIT],
    read_permission: PATIENTS_READ,
    write_permission: PATIENTS_WRITE,
    ..Resource::DEFAULTS
};

pub static PATIENT_VISIT_PLANS: Resource = Resource {
    path: "patient-visit-plans",
    table: "patient_visit_plans",
    label: "Visit plan",
    plural: "visit plans",
    scope: Scope::Branch,
    fields: &[
        branch_ref("patient_id", "patients").required(),
        branch_ref("patient_visit_id", "patient_visits").required(),
        long_text("plan").required(),
        date("follow_up_date"),
        long_text("instructions"),
    ],
    sort_fields: &["created_at", "follow_up_date"],
    default_sort: "created_at",
    default_direction: SortDirection::Desc,
    search: &["plan", "instructions"],
    filters: &["patient_id", "patient_visit_id", "follow_up_date"],
    derived: &[PATIENT_OF_VISIT],
    read_permission: PATIENTS_READ,
    write_permission: PATIENTS_WRITE,
    ..Resource::DEFAULTS
};

pub static PRESCRIBED_MEDICINES: Resource = Resource {
    path: "patient-visit-prescribed-medicines",
    table: "patient_visit_prescribed_medicines",
    label: "Prescribed medicine",
    plural: "prescribed medicines",
    scope: Scope::Branch,
    fields: &[
        branch_ref("patient_id", "patients").required(),
        branch_ref("patient_visit_id", "patient_visits").required(),
        registry_ref("medicine_id", "medicines").required(),
        one_of("eye", &EYE),
        text("dosage", 100),
        text("frequency", 100),
        text("route", 100),
        text("duration", 100),
        integer("quantity", 1, 100_000),
        long_text("instructions"),
    ],
    sort_fields: &["created_at"],
    default_sort: "created_at",
    default_direction: SortDirection::Desc,
    search: &["dosage", "instructions"],
    filters: &["patient_id", "patient_visit_id", "medicine_id", "eye"],
    derived: &[PATIENT_OF_VISIT],
    read_permission: PATIENTS_READ,
    write_permission: PATIENTS_WRITE,
    ..Resource::DEFAULTS
};

/// `draft -> signed`, by a clinician, stamped with who signed and when.
const SIGN_CERTIFICATE: Action = Action {
    name: "sign",
    segment: "sign",
    verb: Verb::Post,
    permission: Some(CLINICAL_WRITE),
    field: "status",
    moves: &[Move { from: &["draft"], to: "signed" }],
    stamps: &[Stamp::User("signed_by"), Stamp::Now("signed_at")],
    input: &[],
    done: "Medical certificate signed.",
};

pub static MEDICAL_CERTIFICATES: Resource = Resource {
    path: "medical-certificates",
    table: "medical_certificates",
    label: "Medical certificate",
    plural: "medical certificates",
    scope: Scope::Branch,
    fields: &[
        branch_ref("patient_id", "patients").required(),
        branch_ref("patient_visit_id", "patient_visits").required(),
        registry_ref("doctor_id", "doctors"),
        // Numbered by the server (MC-<branch>-000001) when not given.
        text("certificate_number", 50).defaulted(),
        date("issued_on").defaulted(),
        long_text("diagnosis"),
        long_text("recommendation"),
        integer("rest_days", 0, 365),
        date("valid_until"),
    ],
    sort_fields: &["issued_on", "created_at", "certificate_number"],
    default_sort: "issued_on",
    default_direction: SortDirection::Desc,
    search: &["certificate_number", "diagnosis"],
    filters: &["patient_id", "patient_visit_id", "doctor_id", "status"],
    date_range: Some("issued_on"),
    derived: &[PATIENT_OF_VISIT],
    read_permission: PATIENTS_READ,
    write_permission: PATIENTS_WRITE,
    // Signed by a clinician, then kept as it was handed out.
    read_only: &[("status", Shape::Text), ("signed_by", Shape::Integer), ("signed_at", Shape::Timestamp)],
    filter_only: &[Field::new("status", Kind::Enum(&EXAM_STATUS))],
    actions: &[SIGN_CERTIFICATE],
    lock: Some(StateLock {
        field: "status",
        states: &["signed"],
        editable: &[],
        amend: None,
        conflict: "record_signed",
        delete: Some("record_signed"),
    }),
    printable: Some(&super::print::CERTIFICATE),
    // A clinic may type the number of a certificate from its paper pad; made numbers skip it.
    numbering: Some(Numbering {
        field: "certificate_number",
        series: "MC",
        format: "{series}-{branch}-{n}",
        digits: 6,
        yearly: false,
        typed: true,
    }),
    unique: &[Unique {
        index: "medical_certificates_number_key",
        field: "certificate_number",
        message: "The certificate number has already been used in this branch.",
    }],
    ..Resource::DEFAULTS
};

/// What a merge moved, per table: the rows of the branch or of the registry, by id.
macro_rules! moved_rows {
    ($place:literal) => {
        concat!(
            "(SELECT coalesce(jsonb_object_agg(m.table_name, m.ids), '{}') FROM (SELECT table_name, ",
            "jsonb_agg(row_id ORDER BY row_id) AS ids FROM patient_merge_rows WHERE merge_id = t.id AND place = '",
            $place,
            "' GROUP BY table_name) m)"
        )
    };
}

/// The merge log of a patient: every duplicate merged into them, why, the fields that
/// differed (the patient kept their own), what moved, and whether it was undone. Written only
/// by the merge and its undo (`clinical::merge`).
pub static PATIENT_MERGES: Resource = Resource {
    path: "patients/{patient_id}/merges",
    table: "patient_merges",
    label: "Patient merge",
    plural: "patient merges",
    scope: Scope::Branch,
    parent: Some(Parent {
        param: "patient_id",
        column: "survivor_id",
        table: "patients",
        soft_deleted: true,
    }),
    read_only: &[
        ("duplicate_id", Shape::Integer),
        ("reason", Shape::Text),
        ("state", Shape::Text),
        ("differences", Shape::Json),
        ("completed_at", Shape::Timestamp),
        ("undone_at", Shape::Timestamp),
        ("undone_by", Shape::Integer),
    ],
    server_written: &["duplicate_id", "reason", "differences"],
    computed: &[
        ("merged_by", "t.created_by", Shape::Integer),
        ("moved", moved_rows!("branch"), Shape::Json),
        ("registry_moved", moved_rows!("registry"), Shape::Json),
    ],
    sort_fields: &["created_at", "id"],
    default_sort: "created_at",
    default_direction: SortDirection::Desc,
    read_permission: PATIENTS_READ,
    write_permission: PATIENTS_MERGE,
    writable: false,
    soft_delete: false,
    ..Resource::DEFAULTS
};

/// The branch's audit trail: who created, changed, deleted or opened what, and when.
pub static AUDIT_LOGS: Resource = Resource::audit_trail("audit-logs", Scope::Branch);

pub static RESOURCES: &[&Resource] = &[
    &PATIENTS,
    &PATIENT_VISITS,
    &PATIENT_VISIT_PLANS,
    &PRESCRIBED_MEDICINES,
    &COMPLAINTS,
    &MEDICAL_CERTIFICATES,
    &super::allergies::ALLERGIES,
    &PATIENT_MERGES,
    &AUDIT_LOGS,
    &super::diagnoses::VISIT_DIAGNOSES,
    &super::diagnoses::PROBLEMS,
    &super::attachments::ATTACHMENTS,
];
