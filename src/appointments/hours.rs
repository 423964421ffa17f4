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

/// The SQL that says what hours doctors keep, the one definition the booking check and the
/// free-slot search both read, so that a slot answered free is one a booking accepts.
///
/// It is a `WITH` list that reads a relation `asked(doctor_id, first_day, last_day, zone)`,
/// which the statement defines before it, and ends in `hours(doctor_id, stretch, slot_minutes)`:
/// a doctor's own changed hours replace that day's weekly hours; a whole-branch open exception
/// cuts every doctor's day to its hours; closed exceptions take their hours out. Local days
/// become instants in `zone`, so a day of a daylight-saving change has the hours it really has.
/// It is written into each statement rather than kept as a function of the branch schema:
/// a function's body is planned again on every call, which cost the search more than the
/// rest of its work.
const HOURS: &str = "
    days AS (
        SELECT a.doctor_id, a.zone, d::date AS day
          FROM asked a, generate_series(a.first_day, a.last_day, interval '1 day') d
    ),
    exceptions AS (
        SELECT days.doctor_id, days.day, x.doctor_id IS NULL AS whole_branch, x.closed,
               CASE WHEN x.start_time IS NOT NULL
                    THEN tstzrange((days.day + x.start_time::time) AT TIME ZONE days.zone,
                                   (days.day + x.end_time::time) AT TIME ZONE days.zone) END AS hours,
               tstzrange(days.day::timestamp AT TIME ZONE days.zone,
                         (days.day + 1)::timestamp AT TIME ZONE days.zone) AS whole_day
          FROM days
          JOIN schedule_exceptions x
            ON x.deleted_at IS NULL AND (x.doctor_id IS NULL OR x.doctor_id = days.doctor_id)
           AND days.day BETWEEN x.starts_on AND x.ends_on
    ),
    usual_slot AS (
        SELECT a.doctor_id, coalesce(min(s.slot_minutes), 15) AS minutes
          FROM asked a
          LEFT JOIN doctor_schedules s ON s.deleted_at IS NULL AND s.doctor_id = a.doctor_id
         GROUP BY a.doctor_id
    ),
    open AS (
        SELECT days.doctor_id,
               tstzrange((days.day + s.start_time::time) AT TIME ZONE days.zone,
                         (days.day + s.end_time::time) AT TIME ZONE days.zone) AS hours,
               s.slot_minutes
          FROM days
          JOIN doctor_schedules s
            ON s.deleted_at IS NULL AND s.doctor_id = days.doctor_id
           AND s.weekday = extract(isodow FROM days.day)
           AND days.day BETWEEN coalesce(s.effective_from, days.day) AND coalesce(s.effective_to, days.day)
         WHERE NOT EXISTS (SELECT 1 FROM exceptions e
                            WHERE e.doctor_id = days.doctor_id AND e.day = days.day
                              AND NOT e.whole_branch AND NOT e.closed)
        UNION ALL
        SELECT e.doctor_id, e.hours, u.minutes
          FROM exceptions e JOIN usual_slot u USING (doctor_id)
         WHERE NOT e.whole_branch AND NOT e.closed
    ),
    shut AS (
        -- Closed hours, and the rest of the days a whole-branch exception shortens.
        SELECT a.doctor_id, coalesce(range_agg(c.hours), '{}'::tstzmultirange) AS hours
          FROM asked a
          LEFT JOIN (SELECT e.doctor_id, coalesce(e.hours, e.whole_day) AS hours
                       FROM exceptions e WHERE e.closed
                     UNION ALL
                     SELECT e.doctor_id,
                            unnest(tstzmultirange(e.whole_day)
                                   - range_agg(e.hours) OVER (PARTITION BY e.doctor_id, e.day))
                       FROM exceptions e WHERE e.whole_branch AND NOT e.closed) c USING (doctor_id)
         GROUP BY a.doctor_id
    ),
    hours AS (
        SELECT o.doctor_id, stretch, o.slot_minutes
          FROM open o JOIN shut USING (doctor_id), unnest(tstzmultirange(o.hours) - shut.hours) AS stretch
         WHERE NOT isempty(stretch)
    )";

/// A statement that reads doctors' hours: `WITH <asked>, <the hours> <then>`, where `asked`
/// defines the relation `asked(doctor_id, first_day, last_day, zone)` and `then` reads `hours`.
pub fn reading_hours(asked: &str, then: &str) -> String {
    format!("WITH asked AS ({asked}),{HOURS}\n{then}")
}
