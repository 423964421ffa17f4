//! Duplicate patients: found with their reasons, merged (every record moving to the patient
//! who stays, in the branch and in the registry), read and written after the merge, undone,
//! and the tables a merge moves compared with the schemas' catalogues.
//!
//! The helpers shared by the topics are here; the tests are in the modules below, one topic each.

use std::collections::BTreeSet;

use clinic_server::clinical::merge::tables;
use clinic_server::resource::registered;

use super::*;
use crate::conformance::{World, world};
use crate::support::{assert_error, patient_reads};

mod concurrency;
mod moves;
mod reach;
mod undo;

const DUPLICATES: &str = "/api/v1/patients/duplicates";

pub(super) fn merge_path(survivor: i64) -> String {
    format!("{PATIENTS}/{survivor}/merge")
}

/// A patient born on `born`, with `extra` fields.
pub(super) async fn born(
    app: &TestApp,
    branch: i64,
    first: &str,
    last: &str,
    born: &str,
    extra: Value,
) -> i64 {
    let mut body = patient_body(first, last, extra);
    body["birth_date"] = json!(born);
    id_of(&app.created(PATIENTS, Some(branch), body).await)
}

pub(super) async fn merge(app: &TestApp, branch: i64, survivor: i64, duplicate: i64) -> Reply {
    app.post(
        &merge_path(survivor),
        Some(branch),
        json!({ "duplicate_id": duplicate, "reason": "registered twice" }),
    )
    .await
}

/// A branch service taking tickets.
pub(super) async fn service(app: &TestApp, branch: i64, code: &str) -> i64 {
    let body = json!({ "name": format!("Service {code}"), "code": code });
    id_of(&app.created(&format!("/api/v1/branches/{branch}/services"), None, body).await)
}

/// Everything a patient can have, one of each, and what it was created as.
pub(super) struct Chart {
    pub(super) visit: i64,
    pub(super) complaint: i64,
    pub(super) refraction: Value,
    pub(super) charge: i64,
    pub(super) payment: i64,
    pub(super) ticket: i64,
    pub(super) surgery: i64,
    pub(super) dispensing: i64,
}

pub(super) async fn chart(app: &TestApp, w: &World, patient: i64, service: i64, hour: u32) -> Chart {
    let branch = Some(w.branch);
    let visit = id_of(
        &app.created(
            "/api/v1/patient-visits",
            branch,
            json!({ "patient_id": patient, "visit_date": "2026-03-02" }),
        )
        .await,
    );
    let complaint = id_of(
        &app.created(
            "/api/v1/complaints",
            branch,
            json!({ "patient_visit_id": visit, "complaint": "Glare" }),
        )
        .await,
    );
    let refraction = app
        .created(
            "/api/v1/refractions",
            branch,
            json!({ "patient_visit_id": visit, "kind": "final_rx", "right_eye": { "sphere": "-2.25" } }),
        )
        .await;
    let signed =
        app.post(&format!("/api/v1/refractions/{}/sign", id_of(&refraction)), branch, json!({})).await;
    assert_status(&signed, 200);
    let billing = format!("{PATIENTS}/{patient}/billing-transactions");
    let charge = id_of(
        &app.created(
            &billing,
            branch,
            json!({ "kind": "charge", "unit_price": "1200.50", "status": "posted",
                                              "description": "Phaco work-up" }),
        )
        .await,
    );
    let payment = id_of(
        &app.created(
            &billing,
            branch,
            json!({ "kind": "payment", "amount": "500.25", "status": "posted",
                                              "payment_method_id": 1 }),
        )
        .await,
    );
    let ticket = id_of(
        &app.created(
            &format!("/api/v1/queue/branch-services/{service}/queue"),
            branch,
            json!({ "patient_id": patient }),
        )
        .await,
    );
    let surgery = id_of(
        &app.created(
            "/api/v1/surgery-schedules",
            None,
            json!({ "branch_id": w.branch, "patient_id": patient, "procedure_id": w.procedure, "doctor_id": w.doctor,
                    "eye": "left", "scheduled_at": format!("2027-06-01T{hour:02}:00:00+00:00") }),
        )
        .await,
    );
    let dispensing = id_of(
        &app.created(
            "/api/v1/transactions",
            None,
            json!({ "branch_id": w.branch, "patient_id": patient, "lines": [{ "pharmacy_item_id": w.item, "quantity": 1 }] }),
        )
        .await,
    );
    let refraction =
        app.get(&format!("/api/v1/refractions/{}", id_of(&refraction)), branch).await.body["data"].clone();
    Chart { visit, complaint, refraction, charge, payment, ticket, surgery, dispensing }
}

async fn summary(app: &TestApp, branch: i64, patient: i64) -> Value {
    let r = app.get(&format!("{PATIENTS}/{patient}/billing-summary"), Some(branch)).await;
    assert_status(&r, 200);
    r.body["data"].clone()
}

fn cents(money: &Value) -> i64 {
    let text = money.as_str().unwrap_or_else(|| panic!("money {money}"));
    let (units, hundredths) = text.split_once('.').unwrap();
    units.parse::<i64>().unwrap() * 100 + hundredths.parse::<i64>().unwrap()
}

/// The `patient_id` of row `id` of a table, read straight from the database (`branch` for a
/// branch table, `None` for the registry).
pub(super) async fn owner(app: &TestApp, branch: Option<i64>, table: &str, id: i64) -> i64 {
    let client = app.state.registry.get().await.unwrap();
    // An examination's rows are kept in the examinations' one table.
    let table = registered().iter().find(|r| r.table == table).map_or(table, |r| r.stored_in());
    let table = branch.map_or_else(|| format!("public.{table}"), |b| format!("branch_{b}.{table}"));
    client.query_one(&format!("SELECT patient_id FROM {table} WHERE id = $1"), &[&id]).await.unwrap().get(0)
}

/// The pairs listed, as (older, newer, reasons).
pub(super) async fn pairs(app: &TestApp, branch: i64) -> BTreeSet<(i64, i64, String)> {
    let r = app.get(&format!("{DUPLICATES}?perPage=100"), Some(branch)).await;
    assert_status(&r, 200);
    pairs_of(&r.body)
}

/// The pairs of a page of the list, as (older, newer, reasons).
fn pairs_of(page: &Value) -> BTreeSet<(i64, i64, String)> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| {
            let reasons: Vec<&str> =
                pair["reasons"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
            (id_of(&pair["patient"]), id_of(&pair["duplicate"]), reasons.join(","))
        })
        .collect()
}
