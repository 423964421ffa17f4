//! Who may add and read attachments, and what is recorded of it: `attachments.read` and
//! `.write`, no reach into another branch, a delete that needs a reason and hides the record,
//! and every read of a record or its bytes in the patient's access log.

use reqwest::Method;
use serde_json::{Value, json};

use super::{File, access_log, attachments, png, upload, upload_as};
use crate::support::{Clinic, assert_error, assert_invalid, assert_status, id_of, ids, reply};

#[tokio::test]
async fn the_front_desk_neither_adds_nor_reads_attachments_and_a_doctor_does_both() {
    let clinic = Clinic::open().await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let (_, desk) = app.create_user("desk", &["receptionist"], &[branch]).await;
    let (_, doctor) = app.create_user("doc", &["doctor"], &[branch]).await;
    let file = File { bytes: png(10, 10), sent_as: "image/png", name: "a.png" };
    assert_error(&upload_as(app, &desk, branch, patient, &file, "").await, 403, "forbidden");
    let r = upload_as(app, &doctor, branch, patient, &file, "").await;
    assert_status(&r, 201);
    let id = id_of(&r);
    let path = format!("{}/{id}", attachments(patient));
    for path in [attachments(patient), path.clone(), format!("{path}/content")] {
        let r = app.call_as(&desk, Method::GET, &path, Some(branch), Value::Null).await;
        assert_error(&r, 403, "forbidden");
        let r =
            reply(app.request_as(&doctor, Method::GET, &path, Some(branch)).header("accept", "*/*")).await;
        assert_status(&r, 200);
    }
    let r = reply(app.request_as(&desk, Method::DELETE, &format!("{path}?reason=x"), Some(branch))).await;
    assert_error(&r, 403, "forbidden");
}

#[tokio::test]
async fn another_branch_reaches_no_attachment_of_this_one() {
    let clinic = Clinic::open().await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let file = File { bytes: png(11, 11), sent_as: "image/png", name: "a.png" };
    let id = id_of(&upload(app, branch, patient, &file).await);
    let other = app.create_branch("NORTH").await;
    let path = format!("{}/{id}", attachments(patient));
    for path in [path.clone(), format!("{path}/content")] {
        let r = reply(app.request(Method::GET, &path, Some(other)).header("accept", "*/*")).await;
        assert_status(&r, 404);
    }
    // The same id in the other branch names its own patient, who has no such attachment.
    let theirs = id_of(&app.create_patient(other, "Cid", "Lopez").await);
    let r = app.get(&attachments(theirs), Some(other)).await;
    assert_status(&r, 200);
    assert_eq!(ids(&r.body), Vec::<i64>::new());
}

#[tokio::test]
async fn a_delete_needs_a_reason_and_hides_the_record_and_its_bytes() {
    let clinic = Clinic::open().await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let file = File { bytes: png(12, 12), sent_as: "image/png", name: "a.png" };
    let id = id_of(&upload(app, branch, patient, &file).await);
    let path = format!("{}/{id}", attachments(patient));
    assert_invalid(&app.delete(&path, Some(branch)).await, &["reason"]);
    let r =
        reply(app.request(Method::DELETE, &path, Some(branch)).json(&json!({ "reason": "Wrong patient" })))
            .await;
    assert_status(&r, 200);
    assert_status(&app.get(&path, Some(branch)).await, 404);
    let r = reply(app.request(Method::GET, &format!("{path}/content"), Some(branch)).header("accept", "*/*"))
        .await;
    assert_status(&r, 404);
    assert_eq!(ids(&app.get(&attachments(patient), Some(branch)).await.body), Vec::<i64>::new());
    let rows =
        app.audit_rows("/api/v1/audit-logs", Some(branch), "patients/{patient_id}/attachments", id).await;
    let deleted: Vec<&Value> = rows.iter().filter(|r| r["action"] == "delete").collect();
    assert_eq!(deleted.len(), 1, "{rows:?}");
    assert_eq!(deleted[0]["after"]["delete_reason"], "Wrong patient");
    assert!(deleted[0]["after"].get("data").is_none(), "no bytes in the audit record");
    // The same file may be added again once the first is gone.
    assert_status(&upload(app, branch, patient, &file).await, 201);
}

#[tokio::test]
async fn every_read_of_a_record_or_its_bytes_is_in_the_patients_access_log() {
    let clinic = Clinic::open().await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let file = File { bytes: png(13, 13), sent_as: "image/png", name: "a.png" };
    let id = id_of(&upload(app, branch, patient, &file).await);
    let path = format!("{}/{id}", attachments(patient));
    assert_status(&app.get(&attachments(patient), Some(branch)).await, 200);
    assert_status(&app.get(&path, Some(branch)).await, 200);
    let r = reply(app.request(Method::GET, &format!("{path}/content"), Some(branch)).header("accept", "*/*"))
        .await;
    assert_status(&r, 200);
    let log = access_log(app, branch, patient).await;
    let resource = "patients/{patient_id}/attachments";
    let seen = |action: &str, record: Option<i64>, route: &str| {
        log.iter().any(|(a, r, id, at)| a == action && r == resource && *id == record && at.ends_with(route))
    };
    assert!(seen("create", Some(id), "/attachments"), "{log:?}");
    assert!(seen("list", None, "/attachments"), "{log:?}");
    assert!(seen("view", Some(id), "/attachments/{id}"), "{log:?}");
    assert!(seen("view", Some(id), "/attachments/{id}/content"), "{log:?}");
    // Another patient's log shows none of it.
    let other = id_of(&app.create_patient(branch, "Ben", "Santos").await);
    let theirs = access_log(app, branch, other).await;
    assert!(theirs.iter().all(|(_, r, ..)| r != resource), "{theirs:?}");
}
