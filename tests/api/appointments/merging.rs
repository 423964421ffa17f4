//! A merge of patients takes the duplicate's appointments along (deleted and closed ones
//! too), and an undo gives them back, unless one was written since.

use super::*;

const PATIENTS: &str = "/api/v1/patients";

/// The desk's patient and a second record of them, with appointments of each: the
/// duplicate's booked, cancelled and deleted ones, by id.
async fn twice_registered(desk: &Desk) -> (i64, Vec<i64>) {
    let duplicate = id_of(&desk.app().create_patient(desk.clinic.branch, "Ana", "Cruz").await);
    desk.book(&at(MONDAY, "08:00"), json!({})).await;
    let theirs = json!({ "patient_id": duplicate });
    let booked = id_of(&desk.book(&at(MONDAY, "09:00"), theirs.clone()).await);
    let cancelled = id_of(&desk.book(&at(MONDAY, "09:30"), theirs.clone()).await);
    assert_status(&desk.act(cancelled, "cancel", json!({ "reason": "Booked twice" })).await, 200);
    let deleted = id_of(&desk.book(&at(MONDAY, "10:00"), theirs).await);
    assert_status(&desk.app().delete(&format!("{APPOINTMENTS}/{deleted}"), desk.branch()).await, 200);
    (duplicate, vec![booked, cancelled, deleted])
}

async fn merge(desk: &Desk, duplicate: i64) -> Reply {
    let body = json!({ "duplicate_id": duplicate, "reason": "registered twice" });
    desk.app().post(&format!("{PATIENTS}/{}/merge", desk.clinic.patient), desk.branch(), body).await
}

async fn unmerge(desk: &Desk, merge: i64) -> Reply {
    let path = format!("{PATIENTS}/{}/unmerge", desk.clinic.patient);
    desk.app().post(&path, desk.branch(), json!({ "merge_id": merge })).await
}

/// The patient each appointment of `ids` names, deleted ones included, by SQL.
async fn owners(desk: &Desk, ids: &[i64]) -> Vec<i64> {
    let client = desk.app().state.registry.get().await.unwrap();
    let sql = format!(
        "SELECT patient_id FROM branch_{}.appointments WHERE id = ANY($1) ORDER BY id",
        desk.clinic.branch
    );
    client.query(&sql, &[&ids]).await.unwrap().iter().map(|r| r.get(0)).collect()
}

#[tokio::test]
async fn a_merge_moves_the_duplicates_appointments_and_an_undo_gives_them_back() {
    let desk = Desk::with_monday_hours().await;
    let survivor = desk.clinic.patient;
    let (duplicate, theirs) = twice_registered(&desk).await;

    let r = merge(&desk, duplicate).await;
    assert_status(&r, 201);
    let merged = id_of(&r);
    assert_eq!(r.body["data"]["moved"]["appointments"], json!(theirs), "{}", r.text);
    assert_eq!(owners(&desk, &theirs).await, vec![survivor; 3]);
    let app = desk.app();
    let listed = app.get(&format!("{APPOINTMENTS}?patient_id={survivor}"), desk.branch()).await;
    assert_eq!(crate::support::ids(&listed.body).len(), 3, "two of the duplicate's and the survivor's own");
    // Audited as moved, and closed ones keep what they were.
    let audit = app.audit_rows("/api/v1/audit-logs", desk.branch(), "appointments", theirs[1]).await;
    let last = audit.last().unwrap();
    assert_eq!(
        (last["action"].as_str(), &last["before"]["patient_id"], &last["after"]["patient_id"]),
        (Some("merge"), &json!(duplicate), &json!(survivor))
    );
    let cancelled = app.get(&format!("{APPOINTMENTS}/{}", theirs[1]), desk.branch()).await;
    assert_eq!(
        (cancelled.body["data"]["status"].as_str(), cancelled.body["data"]["cancel_reason"].as_str()),
        (Some("cancelled"), Some("Booked twice"))
    );
    // Nothing more is booked for the duplicate.
    let r = desk.book(&at(MONDAY, "11:00"), json!({ "patient_id": duplicate })).await;
    assert_error(&r, 410, "merged");
    assert_eq!(r.body["location"], format!("{PATIENTS}/{survivor}"));

    let r = unmerge(&desk, merged).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["state"], "undone");
    assert_eq!(owners(&desk, &theirs).await, vec![duplicate; 3]);
    assert_status(&desk.book(&at(MONDAY, "11:00"), json!({ "patient_id": duplicate })).await, 201);
}

#[tokio::test]
async fn an_appointment_moved_on_since_the_merge_keeps_it_from_being_undone() {
    let desk = Desk::with_monday_hours().await;
    let (duplicate, theirs) = twice_registered(&desk).await;
    let merged = merge(&desk, duplicate).await;
    assert_status(&merged, 201);
    // The patient arrives for the appointment the merge moved.
    assert_status(&desk.act(theirs[0], "arrive", json!({})).await, 200);
    let r = unmerge(&desk, id_of(&merged)).await;
    assert_error(&r, 409, "merge_changed_since");
    assert_eq!(r.body["changed"], json!([{ "table": "appointments", "id": theirs[0] }]), "{}", r.text);
    assert_eq!(owners(&desk, &theirs).await, vec![desk.clinic.patient; 3], "nothing was given back");
}
