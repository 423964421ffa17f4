//! `/surgery-schedules`: surgeries booked at a branch, for a patient of that branch, with a
//! doctor who may operate at any branch. Two active schedules never overlap for one doctor,
//! or for one theatre of a branch (an exclusion constraint holds it under concurrent writes).

use crate::resource::row::Fields;
use serde_json::{Map, Value};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::enums::{ANAESTHESIA, SURGERY_EYE, SURGERY_PRIORITY, SURGERY_STATUS};
use crate::permissions::{PATIENTS_READ, PATIENTS_WRITE};
use crate::resource::actions::{Exclusion, Move, StateLock, Transitions};
use crate::resource::field::{
    Field, Kind, Target, integer, long_text, one_of, registry_ref, text, timestamp,
};
use crate::resource::{Resource, Scope};

/// Cancelling says why.
fn reason_to_cancel(record: &mut Map<String, Value>) -> Vec<(String, String)> {
    let cancelled = record.text("status") == Some("cancelled");
    let reason = record.text("cancel_reason").is_some_and(|r| !r.trim().is_empty());
    if cancelled && !reason {
        return vec![("cancel_reason".into(), "The cancel reason is required to cancel a surgery.".into())];
    }
    Vec::new()
}

/// A surgery that has not started cannot have been completed.
fn not_completed_ahead(record: &mut Map<String, Value>) -> Vec<(String, String)> {
    let completed = record.text("status") == Some("completed");
    let at = record.text("scheduled_at").and_then(|s| OffsetDateTime::parse(s, &Rfc3339).ok());
    if completed && at.is_some_and(|at| at > OffsetDateTime::now_utc()) {
        return vec![("status".into(), "A surgery scheduled in the future cannot be completed.".into())];
    }
    Vec::new()
}

/// The active schedules in the way of a record: same doctor anywhere, or same theatre
/// (trimmed, ignoring case) of the same branch, overlapping in time.
const OVERLAPPING: &str = "
    SELECT coalesce(array_agg(s.id ORDER BY s.id), '{}')
      FROM surgery_schedules s, jsonb_populate_record(NULL::surgery_schedules, $2) r
     WHERE s.id <> $1 AND s.deleted_at IS NULL AND s.status IN ('scheduled', 'confirmed')
       AND coalesce(r.status, 'scheduled') IN ('scheduled', 'confirmed')
       AND tstzrange(s.scheduled_at, s.ends_at) && tstzrange(r.scheduled_at, r.scheduled_at + make_interval(
               mins => coalesce(r.duration_minutes,
                                (SELECT p.default_duration_minutes FROM procedures p WHERE p.id = r.procedure_id), 60)))
       AND (s.doctor_id = r.doctor_id
            OR (s.branch_id = r.branch_id AND btrim(s.theatre) <> ''
                AND lower(btrim(s.theatre)) = lower(btrim(r.theatre))))";

pub static SURGERY_SCHEDULES: Resource = Resource {
    path: "surgery-schedules",
    table: "surgery_schedules",
    label: "Surgery schedule",
    plural: "surgery schedules",
    scope: Scope::Registry,
    branch_bound: true,
    fields: &[
        registry_ref("branch_id", "branches").required().fixed(),
        Field::new("patient_id", Kind::Ref(Target::InBranch("patients"))).required(),
        registry_ref("procedure_id", "procedures").required(),
        registry_ref("doctor_id", "doctors").required(),
        one_of("eye", &SURGERY_EYE).required(),
        timestamp("scheduled_at").required(),
        integer("duration_minutes", 5, 720).defaulted(),
        text("theatre", 50),
        one_of("anaesthesia", &ANAESTHESIA),
        one_of("priority", &SURGERY_PRIORITY).defaulted(),
        one_of("status", &SURGERY_STATUS).defaulted(),
        text("cancel_reason", 500),
        long_text("notes"),
    ],
    rules: &[reason_to_cancel, not_completed_ahead],
    transitions: Some(Transitions {
        field: "status",
        moves: &[
            Move { from: &["scheduled"], to: "confirmed" },
            Move { from: &["scheduled", "confirmed"], to: "completed" },
            Move { from: &["scheduled", "confirmed"], to: "cancelled" },
            Move { from: &["scheduled", "confirmed"], to: "postponed" },
            Move { from: &["postponed"], to: "scheduled" },
            Move { from: &["postponed"], to: "cancelled" },
        ],
    }),
    lock: Some(StateLock {
        field: "status",
        states: &["completed", "cancelled"],
        editable: &["notes"],
        amend: None,
        conflict: "not_editable",
        delete: Some("not_editable"),
    }),
    exclusions: &[Exclusion {
        constraints: &["surgery_schedules_doctor_overlap", "surgery_schedules_theatre_overlap"],
        code: "schedule_conflict",
        message: "The doctor or the theatre is already booked at that time.",
        overlapping: OVERLAPPING,
    }],
    search: &["theatre", "notes"],
    sort_fields: &["scheduled_at", "status", "created_at"],
    default_sort: "scheduled_at",
    filters: &["branch_id", "patient_id", "procedure_id", "doctor_id", "priority", "status"],
    date_range: Some("scheduled_at"),
    read_permission: PATIENTS_READ,
    write_permission: PATIENTS_WRITE,
    ..Resource::DEFAULTS
};
