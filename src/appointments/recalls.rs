//! `/recalls`: patients to bring back on a day ("glaucoma check in 12 months"), the front
//! desk's list of whom to call. Made under a patient (`POST /patients/{id}/recalls`, often
//! from a visit) or at `/recalls` naming the patient.
//!
//! A recall is `pending` until an appointment is booked from it (`recall_id`), then `booked`;
//! `done` when that appointment completes; `pending` again when it is cancelled, missed,
//! deleted or booked from another recall. `POST /recalls/{id}/cancel {reason}` gives it up.
//! The appointment's hooks make these moves in the appointment's own unit of work.

use salvo::oapi::{PathItemType, Ref};
use salvo::prelude::*;
use serde_json::{Map, Value};

use crate::enums::RECALL_STATUS;
use crate::http::docs::{self, Doc};
use crate::http::endpoints::Endpoints;
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::permissions::{APPOINTMENTS_READ, APPOINTMENTS_WRITE};
use crate::resource::actions::{Action, Move, Stamp, Verb};
use crate::resource::field::{Field, Kind, branch_ref, date, long_text, registry_ref, text};
use crate::resource::idempotency::Answer;
use crate::resource::routes::{render, set_etag};
use crate::resource::row::Fields;
use crate::resource::{
    Condition, Context, Resource, Scope, Shape, StateLock, Unit, Within, created_message, merged_record,
};

const CANCEL: Action = Action {
    name: "cancel",
    segment: "cancel",
    verb: Verb::Post,
    permission: None,
    field: "status",
    moves: &[Move { from: &["pending"], to: "cancelled" }],
    stamps: &[Stamp::Now("cancelled_at"), Stamp::Sent("reason", "cancel_reason")],
    input: &[text("reason", 500).required()],
    done: "Recall cancelled.",
};

/// A recall names its patient: in the body at `/recalls`, by the path under a patient.
fn names_its_patient(record: &mut Map<String, Value>) -> Vec<(String, String)> {
    if record.integer("patient_id").is_none() {
        return vec![("patient_id".into(), "The patient id field is required.".into())];
    }
    Vec::new()
}

pub static RECALLS: Resource = Resource {
    path: "recalls",
    table: "recalls",
    label: "Recall",
    plural: "recalls",
    scope: Scope::Branch,
    fields: &[
        // Required by `names_its_patient`: the path gives it under a patient.
        branch_ref("patient_id", "patients").fixed(),
        date("due_on").required(),
        text("reason", 500).required(),
        registry_ref("doctor_id", "doctors"),
        registry_ref("branch_service_id", "branch_services"),
        branch_ref("patient_visit_id", "patient_visits"),
        long_text("notes"),
    ],
    rules: &[names_its_patient],
    read_only: &[("status", Shape::Text), ("cancelled_at", Shape::Timestamp), ("cancel_reason", Shape::Text)],
    server_written: &["status"],
    computed: &[(
        "appointment_id",
        "(SELECT a.id FROM appointments a WHERE a.recall_id = t.id AND a.deleted_at IS NULL
             AND a.status NOT IN ('cancelled', 'no_show') ORDER BY a.id DESC LIMIT 1)",
        Shape::Integer,
    )],
    actions: &[CANCEL],
    lock: Some(StateLock {
        field: "status",
        states: &["done", "cancelled"],
        editable: &["notes"],
        amend: None,
        conflict: "not_editable",
        delete: Some("not_editable"),
    }),
    search: &["reason", "notes"],
    sort_fields: &["due_on", "status", "created_at"],
    default_sort: "due_on",
    filter_only: &[Field::new("status", Kind::Enum(&RECALL_STATUS))],
    filters: &["patient_id", "doctor_id", "branch_service_id", "status", "due_from", "due_to"],
    filter_aliases: &["patient_id", "doctor_id", "status", "due_from", "due_to"],
    conditions: &[
        Condition { name: "due_from", kind: Kind::Date { past: false }, sql: "t.due_on >= $?::date" },
        Condition { name: "due_to", kind: Kind::Date { past: false }, sql: "t.due_on <= $?::date" },
    ],
    date_range: Some("due_on"),
    read_permission: APPOINTMENTS_READ,
    write_permission: APPOINTMENTS_WRITE,
    ..Resource::DEFAULTS
};

/// What an appointment's write does to the recall it was booked from.
pub enum RecallMove {
    /// Booked from it now.
    Booked,
    /// Its appointment completed.
    Done,
    /// Its appointment no longer holds it (cancelled, missed, deleted, or moved to another).
    Reopened,
}

/// Moves recall `id` as an appointment's write says, in that write's unit (audited as an
/// update of the recall). Booking one that is not pending, or another patient's, is a 422 on
/// `recall_id`.
pub async fn follow(unit: &Unit<'_>, id: i64, patient: Option<i64>, change: RecallMove) -> ApiResult<()> {
    let recall = unit.lock(&RECALLS, Within::default(), id, None).await?;
    let status = recall.text("status").unwrap_or_default();
    let to = match change {
        RecallMove::Booked => {
            if status != "pending" {
                return Err(ApiError::field("recall_id", format!("The recall is {status}, not pending.")));
            }
            if recall.integer("patient_id") != patient {
                return Err(ApiError::field("recall_id", "The recall is another patient's."));
            }
            "booked"
        }
        RecallMove::Done if status == "booked" => "done",
        RecallMove::Reopened if status == "booked" => "pending",
        // A recall given up or done meanwhile stays as it is.
        RecallMove::Done | RecallMove::Reopened => return Ok(()),
    };
    let mut input = Map::new();
    input.insert("status".into(), Value::from(to));
    unit.change(&RECALLS, Within::default(), id, input, None).await?;
    Ok(())
}

/// `POST /patients/{id}/recalls`: a recall of the patient in the path.
#[handler]
async fn create_for_patient(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(APPOINTMENTS_WRITE)?;
    let patient = web::path_id(req, "id")?;
    let mut input = crate::resource::input::create_body(req, depot, &RECALLS).await?;
    if input.integer("patient_id").is_some_and(|sent| sent != patient) {
        return Err(ApiError::field("patient_id", "The patient id must be the patient in the path."));
    }
    input.insert("patient_id".into(), Value::from(patient));
    let mut conn = ctx.conn(Scope::Branch).await?;
    let unit = Unit::begin(conn.client(), ctx.writer()).await?;
    let live =
        unit.query_opt("SELECT 1 FROM patients WHERE id = $1 AND deleted_at IS NULL", &[&patient]).await?;
    if live.is_none() {
        return Err(merged_record(&*unit, "patients", patient).await?.unwrap_or(ApiError::NotFound));
    }
    let recall = unit.insert(&RECALLS, Within::default(), input).await?;
    let answer = Answer::created(&created_message(&RECALLS), recall.clone());
    unit.commit(&answer).await?;
    set_etag(res, &recall);
    render(res, &answer);
    Ok(())
}

/// `POST /patients/{id}/recalls`, described by the recalls' own declaration.
pub fn add_routes(branch: &mut Endpoints) {
    let op = branch
        .operation("appointments", "Make a recall of the patient in the path (patient_id may be left out)")
        .add_parameter(docs::path_id());
    let op = crate::resource::docs::taking_create_body(op, &RECALLS);
    let created = docs::envelope(Ref::from_schema_name(crate::resource::docs::schema_name(&RECALLS)));
    let op = Doc::merged_write(
        Doc::not_found(Doc::invalid(Doc::answers(op, "201", "The recall", created), "A bad field")),
        "The patient was merged into another",
    );
    branch.add(
        PathItemType::Post,
        "patients/{id:num}/recalls",
        "createPatientRecall",
        create_for_patient,
        op,
    );
}
