//! Undoing a merge: every record back, refused once written or past its window.

use super::*;

#[tokio::test]
async fn an_undo_gives_every_record_back() {
    let app = TestApp::spawn().await;
    let w = world(&app).await;
    let (b, branch) = (w.branch, Some(w.branch));
    let survivor = w.patient;
    let duplicate = born(&app, b, "Ana", "Cruz", "1980-01-02", json!({ "city": "Baguio" })).await;
    let svc = service(&app, b, "UND").await;
    let moved = chart(&app, &w, duplicate, svc, 14).await;
    let before = summary(&app, b, survivor).await;
    let id = id_of(&merge(&app, b, survivor, duplicate).await);

    let r = app.post(&format!("{PATIENTS}/{survivor}/unmerge"), branch, json!({ "merge_id": id })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["state"], "undone");
    assert_eq!(r.body["data"]["undone_by"], app.admin_id().await);
    let back = app.get(&format!("{PATIENTS}/{duplicate}"), branch).await;
    assert_status(&back, 200);
    assert_eq!(back.body["data"]["city"], "Baguio");
    for (table, id) in [
        ("patient_visits", moved.visit),
        ("complaints", moved.complaint),
        ("refractions", id_of(&moved.refraction)),
        ("billing_transactions", moved.charge),
        ("queue_tickets", moved.ticket),
    ] {
        assert_eq!(owner(&app, branch, table, id).await, duplicate, "{table} {id}");
    }
    assert_eq!(owner(&app, None, "surgery_schedules", moved.surgery).await, duplicate);
    assert_eq!(owner(&app, None, "transactions", moved.dispensing).await, duplicate);
    assert_eq!(summary(&app, b, survivor).await, before);
    // A second undo of the same merge is refused; the duplicate can be written and merged again.
    let again = app.post(&format!("{PATIENTS}/{survivor}/unmerge"), branch, json!({ "merge_id": id })).await;
    assert_error(&again, 409, "invalid_transition");
    assert_status(
        &app.put(&format!("{PATIENTS}/{duplicate}"), branch, json!({ "city": "Iloilo" })).await,
        200,
    );
    assert_status(&merge(&app, b, survivor, duplicate).await, 201);
}

#[tokio::test]
async fn an_undo_is_refused_once_a_moved_record_was_written() {
    let app = TestApp::spawn().await;
    let w = world(&app).await;
    let (b, branch) = (w.branch, Some(w.branch));
    let survivor = w.patient;
    let unmerge = format!("{PATIENTS}/{survivor}/unmerge");
    let svc = service(&app, b, "CHG").await;

    // A moved complaint changed in the branch.
    let duplicate = born(&app, b, "Ana", "Cruz", "1980-01-02", json!({})).await;
    let moved = chart(&app, &w, duplicate, svc, 15).await;
    let id = id_of(&merge(&app, b, survivor, duplicate).await);
    assert_status(
        &app.put(&format!("/api/v1/complaints/{}", moved.complaint), branch, json!({ "severity": "mild" }))
            .await,
        200,
    );
    let r = app.post(&unmerge, branch, json!({ "merge_id": id })).await;
    assert_error(&r, 409, "merge_changed_since");
    assert_eq!(r.body["changed"], json!([{ "table": "complaints", "id": moved.complaint }]));
    assert_eq!(owner(&app, branch, "patient_visits", moved.visit).await, survivor, "nothing was given back");
    assert_eq!(owner(&app, None, "surgery_schedules", moved.surgery).await, survivor);

    // A moved surgery schedule changed in the registry.
    let duplicate = born(&app, b, "Ana", "Cruz", "1980-01-02", json!({})).await;
    let moved = chart(&app, &w, duplicate, svc, 17).await;
    let id = id_of(&merge(&app, b, survivor, duplicate).await);
    let schedule = format!("/api/v1/surgery-schedules/{}", moved.surgery);
    assert_status(&app.put(&schedule, None, json!({ "notes": "fasting" })).await, 200);
    let r = app.post(&unmerge, branch, json!({ "merge_id": id })).await;
    assert_error(&r, 409, "merge_changed_since");
    assert_eq!(r.body["changed"], json!([{ "table": "surgery_schedules", "id": moved.surgery }]));

    // A record written since on a moved visit would be left behind.
    let duplicate = born(&app, b, "Ana", "Cruz", "1980-01-02", json!({})).await;
    let moved = chart(&app, &w, duplicate, svc, 19).await;
    let id = id_of(&merge(&app, b, survivor, duplicate).await);
    let plan = app
        .created(
            "/api/v1/patient-visit-plans",
            branch,
            json!({ "patient_visit_id": moved.visit, "plan": "Drops" }),
        )
        .await;
    let r = app.post(&unmerge, branch, json!({ "merge_id": id })).await;
    assert_error(&r, 409, "merge_changed_since");
    assert_eq!(r.body["changed"], json!([{ "table": "patient_visit_plans", "id": id_of(&plan) }]));
    assert_error(&app.get(&format!("{PATIENTS}/{duplicate}"), branch).await, 301, "merged");
}

#[tokio::test]
async fn an_undo_past_its_window_is_refused() {
    let app = TestApp::spawn_with(|s| s.merge_undo_window = std::time::Duration::ZERO).await;
    let b = app.main_branch().await;
    let survivor = born(&app, b, "Ivy", "Go", "1988-08-08", json!({})).await;
    let duplicate = born(&app, b, "Ivy", "Go", "1988-08-08", json!({})).await;
    let id = id_of(&merge(&app, b, survivor, duplicate).await);
    let r = app.post(&format!("{PATIENTS}/{survivor}/unmerge"), Some(b), json!({ "merge_id": id })).await;
    assert_error(&r, 409, "undo_window_closed");
    let r = app.post(&format!("{PATIENTS}/{survivor}/unmerge"), Some(b), json!({ "merge_id": id + 1 })).await;
    assert_error(&r, 404, "not_found");
}
