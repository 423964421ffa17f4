//! The fourteen eye examinations: one declaration each (`types.rs`), built by [`exam`] on
//! what they all share: the visit and patient they belong to, when and by whom, notes, the
//! right and left eye, signing and amending.
//!
//! A signed examination changes only with an `amendment_reason` (audited `amend`, the
//! previous version kept in the audit log) and is never deleted.

mod declaration;
pub mod measurements;
mod prescription;
pub mod types;

use salvo::oapi::{Array, Object, PathItemType};

use crate::http::docs::{self, Access, Doc};
use crate::http::endpoints::Endpoints;
pub use types::RESOURCES;

/// A patient's measurements over time, beyond the examinations' CRUD.
pub fn endpoints() -> Vec<Endpoints> {
    let mut branch = Endpoints::new(Access::Branch);
    let point = Object::new()
        .property("at", docs::timestamp())
        .property("value", salvo::oapi::Object::with_type(salvo::oapi::BasicType::Number))
        .property("eye", docs::string().enum_values(["right", "left"]))
        .property("record_id", docs::integer())
        .property("exam", docs::string().enum_values(crate::enums::EXAM_KIND.values.iter().copied()));
    let op = branch
        .operation("patients", "One measurement of a patient over time, for plots")
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
    branch.add(
        PathItemType::Get,
        "patients/{id:num}/measurements",
        "listPatientMeasurements",
        measurements::measurements,
        op,
    );
    vec![branch]
}
