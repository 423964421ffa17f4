//! The hours a doctor keeps at the branch, and the days that differ from them.

use crate::resource::row::Fields;
use serde_json::{Map, Value};

use crate::permissions::{APPOINTMENTS_READ, APPOINTMENTS_WRITE};
use crate::resource::field::{boolean, date, days_in_order, integer, registry_ref, text, time};
use crate::resource::{Resource, Scope, Unique};

/// A range of clock times ends after it starts ("HH:MM" compares as text).
fn ends_after_start(record: &mut Map<String, Value>) -> Vec<(String, String)> {
    match (record.text("start_time"), record.text("end_time")) {
        (Some(start), Some(end)) if end <= start => {
            vec![("end_time".into(), "The end time must be after the start time.".into())]
        }
        (Some(_), None) | (None, Some(_)) => {
            vec![("end_time".into(), "Send both the start time and the end time, or neither.".into())]
        }
        _ => Vec::new(),
    }
}

fn effective_in_order(record: &mut Map<String, Value>) -> Vec<(String, String)> {
    days_in_order(
        record,
        "effective_from",
        "effective_to",
        "The effective to must not be before the effective from.",
    )
}

fn exception_days_in_order(record: &mut Map<String, Value>) -> Vec<(String, String)> {
    days_in_order(record, "starts_on", "ends_on", "The ends on must not be before the starts on.")
}

/// Hours that are open rather than closed say which hours.
fn open_hours_named(record: &mut Map<String, Value>) -> Vec<(String, String)> {
    // Closed unless said otherwise (the column's default).
    if record.is_false("closed") && record.text("start_time").is_none() {
        return vec![("start_time".into(), "Open hours need a start time and an end time.".into())];
    }
    Vec::new()
}

pub static DOCTOR_SCHEDULES: Resource = Resource {
    path: "doctor-schedules",
    table: "doctor_schedules",
    label: "Doctor schedule",
    plural: "doctor schedules",
    scope: Scope::Branch,
    fields: &[
        registry_ref("doctor_id", "doctors").required(),
        integer("weekday", 1, 7).required(),
        time("start_time").required(),
        time("end_time").required(),
        integer("slot_minutes", 5, 480).defaulted(),
        date("effective_from"),
        date("effective_to"),
    ],
    rules: &[ends_after_start, effective_in_order],
    unique: &[Unique {
        index: "doctor_schedules_overlap",
        field: "start_time",
        message: "The doctor already keeps hours overlapping these on that weekday.",
    }],
    sort_fields: &["weekday", "start_time", "created_at"],
    default_sort: "weekday",
    filters: &["doctor_id", "weekday"],
    filter_aliases: &["doctor_id", "weekday"],
    read_permission: APPOINTMENTS_READ,
    write_permission: APPOINTMENTS_WRITE,
    ..Resource::DEFAULTS
};

pub static SCHEDULE_EXCEPTIONS: Resource = Resource {
    path: "schedule-exceptions",
    table: "schedule_exceptions",
    label: "Schedule exception",
    plural: "schedule exceptions",
    scope: Scope::Branch,
    fields: &[
        // None: the whole branch.
        registry_ref("doctor_id", "doctors"),
        date("starts_on").required(),
        date("ends_on").required(),
        boolean("closed").defaulted(),
        time("start_time"),
        time("end_time"),
        text("reason", 500),
    ],
    rules: &[ends_after_start, exception_days_in_order, open_hours_named],
    sort_fields: &["starts_on", "created_at"],
    default_sort: "starts_on",
    filters: &["doctor_id", "closed"],
    filter_aliases: &["doctor_id"],
    date_range: Some("starts_on"),
    read_permission: APPOINTMENTS_READ,
    write_permission: APPOINTMENTS_WRITE,
    ..Resource::DEFAULTS
};
