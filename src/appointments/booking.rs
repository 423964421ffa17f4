//! `/appointments`: a patient's time with a doctor at a branch service, and its moves.

use std::sync::LazyLock;

use crate::resource::row::Fields;
use salvo::async_trait;
use serde_json::{Map, Value};
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime};

use super::hours::reading_hours;
use super::recalls::{self, RecallMove};
use super::{arrival, reminders};
use crate::enums::APPOINTMENT_STATUS;
use crate::http::error::{ApiError, ApiResult};
use crate::notify::Topic;
use crate::permissions::{APPOINTMENTS_OVERBOOK, APPOINTMENTS_READ, APPOINTMENTS_WRITE};
use crate::resource::actions::{Action, Exclusion, Move, Stamp, Verb};
use crate::resource::day_close::{self, Day, PastDays};
use crate::resource::field::{
    Field, Kind, boolean, branch_ref, integer, long_text, registry_ref, text, timestamp,
};
use crate::resource::hooks::{Deleted, Hooks};
use crate::resource::{Resource, Scope, Shape, StateLock, Unique, Unit, Writer};
use crate::state::AppState;

/// A move of an appointment, by POST.
const fn move_appointment(
    name: &'static str,
    segment: &'static str,
    moves: &'static [Move],
    stamps: &'static [Stamp],
    input: &'static [Field],
    done: &'static str,
) -> Action {
    Action { name, segment, verb: Verb::Post, permission: None, field: "status", moves, stamps, input, done }
}

const REASON: &[Field] = &[text("reason", 500).required()];

/// The active appointments of the record's doctor overlapping it (neither overbooked).
const OVERLAPPING: &str = "
    SELECT coalesce(array_agg(a.id ORDER BY a.id), '{}')
      FROM appointments a, jsonb_populate_record(NULL::appointments, $2) r
     WHERE a.id <> $1 AND a.deleted_at IS NULL AND a.status IN ('booked', 'arrived', 'in_progress')
       AND NOT a.overbooked AND NOT coalesce(r.overbooked, false)
       AND coalesce(r.status, 'booked') IN ('booked', 'arrived', 'in_progress')
       AND a.doctor_id = r.doctor_id
       AND tstzrange(a.starts_at, a.ends_at) && tstzrange(r.starts_at, r.ends_at)";

/// Appointments still booked after their local day (nobody came) become no-shows.
pub static PAST_APPOINTMENT_DAYS: PastDays = PastDays {
    resource: &APPOINTMENTS,
    open: &["booked"],
    ends_in: "no_show",
    day: Day::Instant("starts_at"),
    // Their recalls are to be booked again.
    follows: Some(
        "WITH reopened AS (
             UPDATE recalls r SET status = 'pending', version = r.version + 1, updated_at = now()
               FROM appointments a
              WHERE a.id = ANY($1) AND r.id = a.recall_id AND r.status = 'booked'
             RETURNING r.id)
         INSERT INTO audit_log (user_id, action, resource, record_id, after)
         SELECT NULL, 'auto_reopen', 'recalls', id, jsonb_build_object('status', 'pending') FROM reopened",
    ),
};

/// Marks the appointments of past days still booked `no_show`, in every active branch, each
/// audited `auto_no_show` without a user. Answers how many.
pub async fn close_past_days(state: &AppState) -> anyhow::Result<u64> {
    day_close::close_past_days(state, &[&PAST_APPOINTMENT_DAYS]).await
}

pub static APPOINTMENTS: Resource = Resource {
    path: "appointments",
    table: "appointments",
    label: "Appointment",
    plural: "appointments",
    scope: Scope::Branch,
    fields: &[
        branch_ref("patient_id", "patients").required(),
        registry_ref("doctor_id", "doctors").required(),
        registry_ref("branch_service_id", "branch_services").required(),
        timestamp("starts_at").required(),
        // Either the end or the length; the other follows.
        timestamp("ends_at"),
        integer("duration_minutes", 5, 720),
        text("reason", 500),
        long_text("notes"),
        text("overbook_reason", 500),
        // The recall it was booked from: booked with it, done when it completes.
        branch_ref("recall_id", "recalls"),
    ],
    write_only: &[boolean("overbook")],
    read_only: &[
        ("status", Shape::Text),
        ("overbooked", Shape::Boolean),
        ("arrived_at", Shape::Timestamp),
        ("started_at", Shape::Timestamp),
        ("completed_at", Shape::Timestamp),
        ("cancelled_at", Shape::Timestamp),
        ("cancelled_by", Shape::Integer),
        ("cancel_reason", Shape::Text),
        // What its arrival made.
        ("patient_visit_id", Shape::Integer),
        ("queue_ticket_id", Shape::Integer),
    ],
    server_written: &["overbooked"],
    actions: &[
        move_appointment(
            "arrive",
            "arrive",
            &[Move { from: &["booked"], to: "arrived" }],
            &[Stamp::Now("arrived_at")],
            &[],
            "Appointment arrived.",
        ),
        move_appointment(
            "start",
            "start",
            &[Move { from: &["arrived"], to: "in_progress" }],
            &[Stamp::Now("started_at")],
            &[],
            "Appointment started.",
        ),
        move_appointment(
            "complete",
            "complete",
            &[Move { from: &["in_progress"], to: "completed" }],
            &[Stamp::Now("completed_at")],
            &[],
            "Appointment completed.",
        ),
        move_appointment(
            "cancel",
            "cancel",
            &[Move { from: &["booked"], to: "cancelled" }],
            &[
                Stamp::Now("cancelled_at"),
                Stamp::User("cancelled_by"),
                Stamp::Sent("reason", "cancel_reason"),
            ],
            REASON,
            "Appointment cancelled.",
        ),
        move_appointment(
            "no_show",
            "no-show",
            &[Move { from: &["booked"], to: "no_show" }],
            &[],
            &[],
            "Appointment marked no-show.",
        ),
    ],
    lock: Some(StateLock {
        field: "status",
        states: &["completed", "cancelled", "no_show"],
        editable: &["notes"],
        amend: None,
        conflict: "not_editable",
        delete: Some("not_editable"),
    }),
    exclusions: &[Exclusion {
        constraints: &["appointments_doctor_overlap"],
        code: "slot_taken",
        message: "The doctor already has an appointment at that time.",
        overlapping: OVERLAPPING,
    }],
    unique: &[Unique {
        index: "appointments_recall_key",
        field: "recall_id",
        message: "An appointment is booked from that recall already.",
    }],
    search: &["reason", "notes"],
    sort_fields: &["starts_at", "status", "created_at"],
    default_sort: "starts_at",
    filter_only: &[Field::new("status", Kind::Enum(&APPOINTMENT_STATUS))],
    filters: &["doctor_id", "patient_id", "branch_service_id", "status"],
    filter_aliases: &["doctor_id", "patient_id", "status"],
    date_range: Some("starts_at"),
    read_permission: APPOINTMENTS_READ,
    write_permission: APPOINTMENTS_WRITE,
    hooks: &BookingHooks,
    printable: Some(&super::slip::SLIP),
    ..Resource::DEFAULTS
};

/// Fields whose change moves the appointment in the doctor's day (an overbooking taken
/// back puts it under the hours again).
const TIMING: &[&str] = &["doctor_id", "starts_at", "ends_at", "duration_minutes", "overbook"];

pub struct BookingHooks;

#[async_trait]
impl Hooks for BookingHooks {
    /// The branch service is one of this branch's.
    async fn prepare(
        &self,
        writer: &Writer,
        _: Option<i64>,
        input: &mut Map<String, Value>,
    ) -> ApiResult<()> {
        let Some(service) = input.integer("branch_service_id") else { return Ok(()) };
        let branch = writer.branch_route()?.id;
        let client = writer.state.registry.get().await?;
        let stmt = client
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM branch_services
                                 WHERE id = $1 AND branch_id = $2 AND deleted_at IS NULL AND active)",
            )
            .await?;
        if client.query_one(&stmt, &[&service, &branch]).await?.get::<_, bool>(0) {
            Ok(())
        } else {
            Err(ApiError::field(
                "branch_service_id",
                "The branch service is not an active service of this branch.",
            ))
        }
    }

    /// The end and the length follow each other; an overbooking is allowed and explained; an
    /// appointment that is not overbooked lies within the doctor's hours.
    async fn resolve(
        &self,
        unit: &Unit<'_>,
        id: Option<i64>,
        record: &Map<String, Value>,
        input: &mut Map<String, Value>,
    ) -> ApiResult<()> {
        // A change of notes alone neither recomputes the times nor checks the hours again.
        let moved = id.is_none() || TIMING.iter().any(|f| input.contains_key(*f));
        let times = if moved { Some(timing(id, record, input)?) } else { None };
        let overbooked = if input.is_true("overbook") {
            if !unit.writer().can(APPOINTMENTS_OVERBOOK) {
                return Err(ApiError::forbidden("You do not have permission to overbook appointments."));
            }
            if record.text("overbook_reason").is_none_or(|r| r.trim().is_empty()) {
                return Err(ApiError::field(
                    "overbook_reason",
                    "The overbook reason is required to overbook.",
                ));
            }
            input.insert("overbooked".into(), Value::Bool(true));
            true
        } else if input.is_false("overbook") {
            input.insert("overbooked".into(), Value::Bool(false));
            false
        } else {
            record.is_true("overbooked")
        };
        let Some((starts_at, ends_at)) = times.filter(|_| !overbooked) else { return Ok(()) };
        let doctor = record.integer("doctor_id").unwrap_or_default();
        let zone = unit.writer().branch_route()?.timezone.clone();
        let stmt = unit.prepare_cached(&WITHIN_HOURS).await?;
        let within: bool = unit.query_one(&stmt, &[&doctor, &starts_at, &ends_at, &zone]).await?.get(0);
        if !within {
            return Err(ApiError::refused(
                "outside_hours",
                "starts_at",
                "The appointment is outside the doctor's hours at this branch.",
            ));
        }
        let surgeries = surgeries_overlapping(unit.writer(), doctor, starts_at, ends_at).await?;
        if surgeries.is_empty() {
            Ok(())
        } else {
            Err(ApiError::conflict_with(
                "slot_taken",
                "The doctor is in surgery at that time.",
                [("surgeries".to_owned(), Value::from(surgeries))],
            ))
        }
    }

    /// A booking, or a move of its time or doctor, queues its reminders.
    async fn written(
        &self,
        unit: &Unit<'_>,
        id: i64,
        input: &Map<String, Value>,
        before: Option<&Value>,
    ) -> ApiResult<Vec<Topic>> {
        reminders::booked(unit, id, before).await?;
        if input.contains_key("recall_id") {
            let patient =
                input.integer("patient_id").or_else(|| before.and_then(|b| b.integer("patient_id")));
            let was = before.and_then(|b| b.integer("recall_id"));
            let now = input.integer("recall_id");
            if was != now {
                if let Some(was) = was {
                    recalls::follow(unit, was, patient, RecallMove::Reopened).await?;
                }
                if let Some(now) = now {
                    recalls::follow(unit, now, patient, RecallMove::Booked).await?;
                }
            }
        }
        Ok(Vec::new())
    }

    /// A cancellation or a no-show withdraws the reminders still pending.
    async fn acted(
        &self,
        unit: &Unit<'_>,
        id: i64,
        action: &Action,
        _: &Map<String, Value>,
        before: &Value,
    ) -> ApiResult<Vec<Topic>> {
        if matches!(action.name, "cancel" | "no_show") {
            reminders::withdraw(unit, id, action.name).await?;
        }
        if action.name == "arrive" {
            arrival::arrive(unit, id, before).await?;
        }
        if let Some(recall) = before.integer("recall_id") {
            let patient = before.integer("patient_id");
            match action.name {
                "complete" => recalls::follow(unit, recall, patient, RecallMove::Done).await?,
                "cancel" | "no_show" => recalls::follow(unit, recall, patient, RecallMove::Reopened).await?,
                _ => {}
            }
        }
        Ok(Vec::new())
    }

    /// An arrival's ticket is shown on the screens once it is written.
    async fn committed(&self, writer: &Writer, before: Option<&Value>, after: Option<&Value>) {
        arrival::announce(writer, before, after).await;
    }

    /// A deleted appointment withdraws its pending reminders; the delete is the shared one.
    async fn delete(
        &self,
        unit: &Unit<'_>,
        id: i64,
        before: &Value,
        _: &Map<String, Value>,
    ) -> ApiResult<Option<Deleted>> {
        reminders::withdraw(unit, id, "deleted").await?;
        if let Some(recall) = before.integer("recall_id") {
            recalls::follow(unit, recall, before.integer("patient_id"), RecallMove::Reopened).await?;
        }
        Ok(None)
    }
}

/// The doctor's surgeries still on (at any branch) overlapping `[starts_at, ends_at)`. They
/// live in the registry, so no constraint holds an appointment clear of one written at the
/// same moment: the front desk and the theatre list are seldom booked in the same second.
async fn surgeries_overlapping(
    writer: &Writer,
    doctor: i64,
    starts_at: OffsetDateTime,
    ends_at: OffsetDateTime,
) -> ApiResult<Vec<i64>> {
    let registry = writer.state.registry.get().await?;
    let stmt = registry
        .prepare_cached(
            "SELECT id FROM surgery_schedules
              WHERE doctor_id = $1 AND deleted_at IS NULL AND status IN ('scheduled', 'confirmed')
                AND scheduled_at < $3 AND ends_at > $2
              ORDER BY id",
        )
        .await?;
    Ok(registry.query(&stmt, &[&doctor, &starts_at, &ends_at]).await?.iter().map(|r| r.get(0)).collect())
}

/// The appointment's start and end, with whichever of `ends_at` and `duration_minutes` was
/// not sent (or no longer holds) put into `input`.
fn timing(
    id: Option<i64>,
    record: &Map<String, Value>,
    input: &mut Map<String, Value>,
) -> ApiResult<(OffsetDateTime, OffsetDateTime)> {
    let instant = |name: &str| record.text(name).and_then(|s| OffsetDateTime::parse(s, &Rfc3339).ok());
    let starts_at =
        instant("starts_at").ok_or_else(|| ApiError::field("starts_at", "The starts at is required."))?;
    let sent_duration = input.integer("duration_minutes");
    let sent_end = input.contains_key("ends_at").then(|| instant("ends_at")).flatten();
    let minutes = match (sent_duration, sent_end) {
        (Some(minutes), _) => minutes,
        (None, Some(end)) => {
            let minutes = (end - starts_at).whole_minutes();
            if end <= starts_at || !(5..=720).contains(&minutes) {
                return Err(ApiError::field("ends_at", "The end must be 5 to 720 minutes after the start."));
            }
            input.insert("duration_minutes".into(), Value::from(minutes));
            minutes
        }
        (None, None) => match record.integer("duration_minutes") {
            Some(minutes) if id.is_some() => minutes,
            _ => {
                return Err(ApiError::field(
                    "duration_minutes",
                    "Send the end or the duration of the appointment.",
                ));
            }
        },
    };
    let ends_at = starts_at + Duration::minutes(minutes);
    let formatted = ends_at.format(&Rfc3339).map_err(|e| ApiError::Internal(e.into()))?;
    input.insert("ends_at".into(), Value::String(formatted));
    Ok((starts_at, ends_at))
}

/// Whether `[$2, $3)` lies within doctor `$1`'s hours (`hours::reading_hours`) in zone `$4`,
/// stretches that meet counted as one.
static WITHIN_HOURS: LazyLock<String> = LazyLock::new(|| {
    reading_hours(
        "SELECT $1::bigint AS doctor_id, ($2::timestamptz AT TIME ZONE $4::text)::date AS first_day,
                ($3::timestamptz AT TIME ZONE $4::text)::date AS last_day, $4::text AS zone",
        "SELECT coalesce(range_agg(h.stretch) @> tstzrange($2, $3), false) FROM hours h",
    )
});
