//! The fourteen eye examinations: their common fields, each type's
//! ranges, steps and rules between fields with dotted error paths, signing and amending,
//! the examiner, the visit summary, measurements over time and the OpenAPI description.
//! Over HTTP against a real server and a fresh database.
//!
//! This file holds the helpers; the tests are in the modules below, one theme each.

use std::collections::BTreeSet;

use crate::support::{
    Clinic, Reply, TestApp, assert_error, assert_invalid, assert_status, id_of, ids, reply, today,
};
use futures_util::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

mod fields;
mod lifecycle;
mod measurements;
mod openapi;
mod rules;
mod summary;

const VISITS: &str = "/api/v1/patient-visits";
const AUDIT: &str = "/api/v1/audit-logs";

/// Every examination's path, in the order of `exams::RESOURCES` (`src/exams/types.rs`).
const EXAMS: [&str; 14] = [
    "visual-acuities",
    "refractions",
    "tonometries",
    "slit-lamps",
    "funduscopies",
    "gonioscopies",
    "corneal-topographies",
    "amsler-grids",
    "eoms",
    "exophthalmometries",
    "lacrimal-irrigations",
    "radiologies",
    "gross-examinations",
    "indirect-ophthalmoscopies",
];

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn path(exam: &str) -> String {
    format!("/api/v1/{exam}")
}

/// A valid body of each examination without its eyes, and one valid eye (`None` for
/// radiology, which is not recorded per eye).
fn sample(exam: &str) -> (Value, Option<Value>) {
    match exam {
        "visual-acuities" => (
            json!({ "distance": "distance", "correction": "unaided", "notation": "snellen_m" }),
            Some(json!({ "value": "6/12" })),
        ),
        "refractions" => {
            (json!({ "kind": "manifest" }), Some(json!({ "sphere": -2.25, "cylinder": -0.5, "axis": 90 })))
        }
        "tonometries" => (
            json!({}),
            Some(
                json!({ "readings": [{ "iop_mmhg": 15.5, "method": "goldmann", "measured_at": "09:30" }], "cct_um": 540 }),
            ),
        ),
        "slit-lamps" => (
            json!({}),
            Some(json!({
                "cornea": { "status": "normal" },
                "lens": { "status": "abnormal", "findings": "Nuclear sclerosis" },
                "nuclear_cataract": "mild",
                "pupil_mm": 3,
            })),
        ),
        "funduscopies" => {
            (json!({ "dilated": true }), Some(json!({ "cd_ratio": 0.3, "disc": "Pink, sharp margins" })))
        }
        "gonioscopies" => (
            json!({}),
            Some(
                json!({ "superior": 3, "inferior": 4, "nasal": 3, "temporal": 3, "iris_configuration": "flat", "pas_clock_hours": [1, 2] }),
            ),
        ),
        "corneal-topographies" => (
            json!({ "device": "Pentacam" }),
            Some(
                json!({ "k1": 42.5, "k2": 43.25, "kmax": 44.1, "k1_axis": 180, "k2_axis": 90, "thinnest_pachymetry_um": 530 }),
            ),
        ),
        "amsler-grids" => (json!({}), Some(json!({ "grade": 0, "distortion": false }))),
        "eoms" => (
            json!({ "deviation": "esotropia", "deviation_pd": 15, "diplopia": false }),
            Some(json!({ "gaze": { "primary": 0, "up": -1 } })),
        ),
        "exophthalmometries" => {
            (json!({ "base_mm": 100, "instrument": "Hertel" }), Some(json!({ "reading_mm": 16.5 })))
        }
        "lacrimal-irrigations" => (
            json!({}),
            Some(
                json!({ "upper_punctum": "patent", "passage": "free", "regurgitation": "none", "schirmer_mm": 15 }),
            ),
        ),
        "radiologies" => (
            json!({ "studies": [{ "modality": "ct", "region": "Orbits", "laterality": "both", "performed_on": today().to_string() }] }),
            None,
        ),
        "gross-examinations" => {
            (json!({}), Some(json!({ "brow": "Normal", "mrd1_mm": 4, "levator_function_mm": 15 })))
        }
        "indirect-ophthalmoscopies" => (
            json!({}),
            Some(
                json!({ "scleral_depression": true, "vitreous": "pvd", "periphery": [{ "finding": "lattice", "clock_hours": [1, 2] }] }),
            ),
        ),
        other => panic!("not an examination: {other}"),
    }
}

/// A valid create body for `exam` on `visit` (both eyes when it is per eye), `extra` merged in.
fn body(exam: &str, visit: i64, extra: Value) -> Value {
    let (mut body, eye) = sample(exam);
    body["patient_visit_id"] = json!(visit);
    if let Some(eye) = eye {
        body["right_eye"] = eye.clone();
        body["left_eye"] = eye;
    }
    merge(&mut body, extra);
    body
}

fn merge(body: &mut Value, extra: Value) {
    if let Value::Object(extra) = extra {
        body.as_object_mut().unwrap().extend(extra);
    }
}

async fn create(clinic: &Clinic, exam: &str, extra: Value) -> Value {
    clinic.app.created(&path(exam), Some(clinic.branch), body(exam, clinic.visit, extra)).await
}

async fn post(clinic: &Clinic, exam: &str, body: Value) -> Reply {
    clinic.app.post(&path(exam), Some(clinic.branch), body).await
}

/// Creates `exam` with `eye` as its right eye (and no left eye), `extra` merged in; answers
/// the reply so that a test can assert a 422.
async fn with_right_eye(clinic: &Clinic, exam: &str, eye: Value, extra: Value) -> Reply {
    let mut b = body(exam, clinic.visit, extra);
    b["right_eye"] = eye;
    b.as_object_mut().unwrap().remove("left_eye");
    post(clinic, exam, b).await
}

/// An RFC 3339 instant `minutes` from now (negative: in the past).
fn from_now(minutes: i64) -> String {
    (OffsetDateTime::now_utc() + time::Duration::minutes(minutes)).format(&Rfc3339).unwrap()
}

fn instant(value: &Value) -> OffsetDateTime {
    let text = value.as_str().unwrap_or_else(|| panic!("not a timestamp: {value}"));
    OffsetDateTime::parse(text, &Rfc3339).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// A JSON number's text as sent (the tests' serde_json keeps it exactly).
fn raw(value: &Value) -> String {
    assert!(value.is_number(), "not a JSON number: {value}");
    value.to_string()
}

/// JSON text as a value, numbers kept as written.
fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

async fn sign(app: &TestApp, branch: i64, exam: &str, id: i64) -> Reply {
    app.post(&format!("{}/{id}/sign", path(exam)), Some(branch), json!({})).await
}
