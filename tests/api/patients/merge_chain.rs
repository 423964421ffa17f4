//! Chains of merges (X into Y, then Y into Z) undone: in reverse order each undo gives back
//! what its merge moved, in the branch and in the registry; out of order the first waits for
//! the second; a record staff wrote after the first merge still refuses its undo.

use super::merge::{Chart, born, chart, merge, owner, service};
use super::*;
use crate::conformance::{World, world};
use crate::support::assert_error;

/// Every row of a chart, with the branch it lives in (`None`: the registry).
fn rows(w: &World, c: &Chart) -> Vec<(Option<i64>, &'static str, i64)> {
    let branch = Some(w.branch);
    vec![
        (branch, "patient_visits", c.visit),
        (branch, "complaints", c.complaint),
        (branch, "refractions", id_of(&c.refraction)),
        (branch, "billing_transactions", c.charge),
        (branch, "billing_transactions", c.payment),
        (branch, "queue_tickets", c.ticket),
        (None, "surgery_schedules", c.surgery),
        (None, "transactions", c.dispensing),
    ]
}

/// Asserts that every row of chart `c` names `patient`.
async fn owned_by(app: &TestApp, w: &World, c: &Chart, patient: i64, when: &str) {
    for (branch, table, id) in rows(w, c) {
        assert_eq!(owner(app, branch, table, id).await, patient, "{when}: {table} {id}");
    }
}

async fn unmerge(app: &TestApp, branch: i64, survivor: i64, merge: i64) -> Reply {
    app.post(&format!("{PATIENTS}/{survivor}/unmerge"), Some(branch), json!({ "merge_id": merge })).await
}

/// Three people registered as X, Y and Z, each with a full chart; X merged into Y, then Y
/// into Z. Answers the patients, their charts and the two merges.
async fn chain(app: &TestApp, w: &World, code: &str) -> ([i64; 3], [Chart; 3], [i64; 2]) {
    let b = w.branch;
    let svc = service(app, b, code).await;
    let x = born(app, b, "Nora", "Velasco", "1969-11-30", json!({ "city": "Tarlac" })).await;
    let y = born(app, b, "Norah", "Velasco", "1969-11-30", json!({ "city": "Capas" })).await;
    let z = born(app, b, "Nora", "Vellasco", "1969-11-30", json!({ "city": "Angeles" })).await;
    let charts =
        [chart(app, w, x, svc, 7).await, chart(app, w, y, svc, 10).await, chart(app, w, z, svc, 13).await];
    let first = merge(app, b, y, x).await;
    assert_status(&first, 201);
    let second = merge(app, b, z, y).await;
    assert_status(&second, 201);
    for c in &charts {
        owned_by(app, w, c, z, "after both merges").await;
    }
    ([x, y, z], charts, [id_of(&first), id_of(&second)])
}

#[tokio::test]
async fn a_chain_of_merges_is_undone_in_reverse_order() {
    let app = TestApp::spawn().await;
    let w = world(&app).await;
    let b = w.branch;
    let ([x, y, z], [of_x, of_y, of_z], [first, second]) = chain(&app, &w, "CHN").await;

    let r = unmerge(&app, b, z, second).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["state"], "undone");
    owned_by(&app, &w, &of_x, y, "second undone").await;
    owned_by(&app, &w, &of_y, y, "second undone").await;
    owned_by(&app, &w, &of_z, z, "second undone").await;

    let r = unmerge(&app, b, y, first).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["state"], "undone");
    owned_by(&app, &w, &of_x, x, "both undone").await;
    owned_by(&app, &w, &of_y, y, "both undone").await;
    owned_by(&app, &w, &of_z, z, "both undone").await;
    for (patient, city) in [(x, "Tarlac"), (y, "Capas"), (z, "Angeles")] {
        let r = app.get(&format!("{PATIENTS}/{patient}"), Some(b)).await;
        assert_status(&r, 200);
        assert_eq!(r.body["data"]["city"], city);
    }
    // X is a patient of its own again: it can be merged (and undone) once more.
    let again = merge(&app, b, z, x).await;
    assert_status(&again, 201);
    assert_status(&unmerge(&app, b, z, id_of(&again)).await, 200);
    owned_by(&app, &w, &of_x, x, "merged and undone again").await;
}

#[tokio::test]
async fn the_first_merge_of_a_chain_waits_for_the_second_to_be_undone() {
    let app = TestApp::spawn().await;
    let w = world(&app).await;
    let b = w.branch;
    let ([x, y, z], [of_x, of_y, _], [first, second]) = chain(&app, &w, "OUT").await;

    // X's records went on to Z with Y's: giving them back to X would leave the second merge
    // unable to tell its own rows from the first's.
    let r = unmerge(&app, b, y, first).await;
    assert_error(&r, 409, "merged_since");
    assert_eq!((&r.body["merge_id"], &r.body["merged_into_id"]), (&json!(second), &json!(z)), "{}", r.text);
    owned_by(&app, &w, &of_x, z, "refused").await;
    assert_error(&app.get(&format!("{PATIENTS}/{x}"), Some(b)).await, 301, "merged");

    assert_status(&unmerge(&app, b, z, second).await, 200);
    assert_status(&unmerge(&app, b, y, first).await, 200);
    owned_by(&app, &w, &of_x, x, "undone in order").await;
    owned_by(&app, &w, &of_y, y, "undone in order").await;
}

#[tokio::test]
async fn a_record_written_after_the_first_merge_still_refuses_its_undo() {
    let app = TestApp::spawn().await;
    let w = world(&app).await;
    let (b, branch) = (w.branch, Some(w.branch));

    // A moved complaint changed by staff between the two merges.
    let svc = service(&app, b, "STF").await;
    let x = born(&app, b, "Ruth", "Abad", "1958-02-14", json!({})).await;
    let y = born(&app, b, "Ruth", "Abad", "1958-02-14", json!({})).await;
    let z = born(&app, b, "Ruth", "Abbad", "1958-02-14", json!({})).await;
    let of_x = chart(&app, &w, x, svc, 8).await;
    let first = id_of(&merge(&app, b, y, x).await);
    let complaint = format!("/api/v1/complaints/{}", of_x.complaint);
    assert_status(&app.put(&complaint, branch, json!({ "severity": "mild" })).await, 200);
    let second = id_of(&merge(&app, b, z, y).await);
    // The second merge came after the write: its undo is the machinery's own.
    assert_status(&unmerge(&app, b, z, second).await, 200);
    let r = unmerge(&app, b, y, first).await;
    assert_error(&r, 409, "merge_changed_since");
    assert_eq!(r.body["changed"], json!([{ "table": "complaints", "id": of_x.complaint }]));
    owned_by(&app, &w, &of_x, y, "refused").await;

    // A moved surgery schedule changed by staff after the second merge was undone.
    let x = born(&app, b, "Ines", "Dizon", "1977-06-21", json!({})).await;
    let y = born(&app, b, "Ines", "Dizon", "1977-06-21", json!({})).await;
    let z = born(&app, b, "Inez", "Dizon", "1977-06-21", json!({})).await;
    let of_x = chart(&app, &w, x, svc, 12).await;
    let first = id_of(&merge(&app, b, y, x).await);
    let second = id_of(&merge(&app, b, z, y).await);
    assert_status(&unmerge(&app, b, z, second).await, 200);
    let schedule = format!("/api/v1/surgery-schedules/{}", of_x.surgery);
    assert_status(&app.put(&schedule, None, json!({ "notes": "fasting" })).await, 200);
    let r = unmerge(&app, b, y, first).await;
    assert_error(&r, 409, "merge_changed_since");
    assert_eq!(r.body["changed"], json!([{ "table": "surgery_schedules", "id": of_x.surgery }]));
    owned_by(&app, &w, &of_x, y, "refused").await;
}
