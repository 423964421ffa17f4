//! Visit records (visits, plans, prescribed medicines, complaints, medical certificates) and
//! the branch audit log. One rule per test, over HTTP against a real server and a fresh
//! database. Patients themselves are in patients.rs.
//!
//! This file holds the helpers; the tests are in the modules below, one theme each.

use std::collections::BTreeSet;

use crate::support::{
    Clinic, TestApp, assert_error, assert_invalid, assert_status, id_of, ids, reply, today,
};
use reqwest::Method;
use serde_json::{Value, json};

mod audit;
mod certificates;
mod records;
mod shared_rules;
mod visit;

const PATIENTS: &str = "/api/v1/patients";
const VISITS: &str = "/api/v1/patient-visits";
const PLANS: &str = "/api/v1/patient-visit-plans";
const MEDICINES: &str = "/api/v1/patient-visit-prescribed-medicines";
const COMPLAINTS: &str = "/api/v1/complaints";
const CERTIFICATES: &str = "/api/v1/medical-certificates";
const AUDIT: &str = "/api/v1/audit-logs";

/// The four records that hang off a visit.
const VISIT_RECORDS: [&str; 4] = [PLANS, MEDICINES, COMPLAINTS, CERTIFICATES];

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn id_set(body: &Value) -> BTreeSet<i64> {
    ids(body).into_iter().collect()
}

async fn patient(app: &TestApp, branch: i64, first: &str, last: &str) -> i64 {
    id_of(&app.create_patient(branch, first, last).await)
}

async fn visit(app: &TestApp, branch: i64, patient: i64) -> i64 {
    id_of(
        &app.created(VISITS, Some(branch), json!({ "patient_id": patient, "visit_date": "2026-01-05" }))
            .await,
    )
}

/// A valid body for a visit record (except that no medicine exists), with `extra` merged in.
fn record_body(path: &str, visit: i64, extra: Value) -> Value {
    let mut body = match path {
        PLANS => json!({ "plan": "Refraction in two weeks" }),
        MEDICINES => json!({ "medicine_id": 1, "dosage": "1 drop" }),
        COMPLAINTS => json!({ "complaint": "Eye pain" }),
        CERTIFICATES => json!({ "diagnosis": "Conjunctivitis" }),
        other => panic!("not a visit record: {other}"),
    };
    body["patient_visit_id"] = json!(visit);
    if let Value::Object(extra) = extra {
        body.as_object_mut().unwrap().extend(extra);
    }
    body
}

/// The 422 fields of a visit-record create whose only problem is `fields`: prescribed
/// medicines also name `medicine_id`, since no medicine exists.
fn with_medicine<'a>(path: &str, fields: &[&'a str]) -> Vec<&'a str> {
    let mut all = fields.to_vec();
    if path == MEDICINES {
        all.push("medicine_id");
    }
    all
}

/// A branch NORTH with three patients and three visits; returns (branch, patient id, visit
/// id) of ids that exist there but not in MAIN, which holds fewer records.
async fn other_branch(app: &TestApp) -> (i64, i64, i64) {
    let north = app.create_branch("NORTH").await;
    let mut last = (0, 0);
    for i in 0..3 {
        let p = patient(app, north, &format!("North{i}"), "Patient").await;
        last = (p, visit(app, north, p).await);
    }
    let main = app.main_branch().await;
    for path in [format!("/api/v1/patients/{}", last.0), format!("/api/v1/patient-visits/{}", last.1)] {
        assert_status(&app.get(&path, Some(north)).await, 200);
        assert_error(&app.get(&path, Some(main)).await, 404, "not_found");
    }
    (north, last.0, last.1)
}

/// (action, resource, record_id) of each row, in the order given.
fn audit_summary(body: &Value) -> Vec<(String, String, i64)> {
    body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("no data: {body}"))
        .iter()
        .map(|row| {
            (
                row["action"].as_str().unwrap_or_else(|| panic!("no action in {row}")).to_owned(),
                row["resource"].as_str().unwrap_or_else(|| panic!("no resource in {row}")).to_owned(),
                row["record_id"].as_i64().unwrap_or(0),
            )
        })
        .collect()
}
