//! Branch-scoped clinical resources, declared once each; the shared resource machinery
//! serves them. Enumerations follow DESIGN.md (lowercase snake_case).

use crate::auth::permissions::{PATIENTS_READ, PATIENTS_WRITE};
use crate::http::list::SortDirection;
use crate::resource::field::{
    Field, Kind, branch_ref, date, long_text, one_of, past_date, registry_ref, text,
};
use crate::resource::{PATIENT_OF_VISIT, Resource, Scope};

pub const SEX: &[&str] = &["male", "female", "other", "unknown"];
pub const CIVIL_STATUS: &[&str] = &["single", "married", "widowed", "separated", "divorced"];
pub const PATIENT_STATUS: &[&str] = &["active", "inactive", "deceased"];
pub const VISIT_TYPE: &[&str] = &["new", "follow_up", "emergency", "post_op"];
pub const VISIT_STATUS: &[&str] = &["scheduled", "checked_in", "in_progress", "completed", "cancelled"];
pub const EYE: &[&str] = &["right", "left", "both", "n_a"];
pub const SEVERITY: &[&str] = &["mild", "moderate", "severe"];

pub static PATIENTS: Resource = Resource {
    path: "patients",
    table: "patients",
    label: "Patient",
    scope: Scope::Branch,
    fields: &[
        text("first_name", 100).required(),
        text("middle_name", 100),
        text("last_name", 100).required(),
        text("suffix", 20),
        past_date("birth_date").required(),
        one_of("sex", SEX).required(),
        one_of("civil_status", CIVIL_STATUS),
        one_of("status", PATIENT_STATUS),
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
    ],
    read_only: &["pin"],
    computed: &[("age", "extract(year FROM age(current_date, t.birth_date))::int")],
    sort_fields: &["last_name", "first_name", "pin", "birth_date", "created_at"],
    default_sort: "last_name",
    default_direction: SortDirection::Asc,
    search: &["first_name", "last_name", "pin"],
    filters: &["sex", "civil_status", "status"],
    derived: &[],
    read_permission: PATIENTS_READ,
    write_permission: PATIENTS_WRITE,
    audit_reads: true,
    ..Resource::DEFAULTS
};

pub static PATIENT_VISITS: Resource = Resource {
    path: "patient-visits",
    table: "patient_visits",
    label: "Patient visit",
    scope: Scope::Branch,
    fields: &[
        branch_ref("patient_id", "patients").required(),
        date("visit_date").required(),
        one_of("visit_type", VISIT_TYPE),
        registry_ref("doctor_id", "doctors"),
        text("reason", 500),
        one_of("status", VISIT_STATUS),
        long_text("notes"),
    ],
    read_only: &[],
    computed: &[],
    sort_fields: &["visit_date", "created_at", "status"],
    default_sort: "visit_date",
    default_direction: SortDirection::Desc,
    search: &["reason"],
    filters: &["patient_id", "status", "visit_type", "visit_date"],
    derived: &[],
    read_permission: PATIENTS_READ,
    write_permission: PATIENTS_WRITE,
    ..Resource::DEFAULTS
};

pub static COMPLAINTS: Resource = Resource {
    path: "complaints",
    table: "complaints",
    label: "Complaint",
    scope: Scope::Branch,
    fields: &[
        branch_ref("patient_id", "patients").required(),
        branch_ref("patient_visit_id", "patient_visits").required(),
        text("complaint", 500).required(),
        one_of("eye", EYE),
        text("onset", 100),
        text("duration", 100),
        one_of("severity", SEVERITY),
        long_text("notes"),
    ],
    read_only: &[],
    computed: &[],
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

pub static RESOURCES: &[&Resource] = &[&PATIENTS, &PATIENT_VISITS, &COMPLAINTS];
