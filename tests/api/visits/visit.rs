//! The visit itself: round trip, defaults, validation and filters.

use super::*;

#[tokio::test]
async fn visit_crud_round_trip() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let sent = json!({
        "patient_id": p,
        "visit_date": "2026-03-10",
        "visit_type": "follow_up",
        "reason": "Blurred vision, left eye",
        "status": "checked_in",
        "notes": "Bring old glasses.\nFasting not needed.",
        "doctor_id": null,
    });
    let r = app.post(VISITS, Some(main), sent.clone()).await;
    assert_status(&r, 201);
    assert!(r.header("etag").is_some(), "ETag on create");
    let data = &r.body["data"];
    for (field, value) in sent.as_object().unwrap() {
        assert_eq!(&data[field], value, "{field} echoed: {data}");
    }
    assert_eq!(data["version"], 1);
    let id = id_of(data);
    let path = format!("{VISITS}/{id}");

    let r = app.get(&path, Some(main)).await;
    assert_status(&r, 200);
    for (field, value) in sent.as_object().unwrap() {
        assert_eq!(&r.body["data"][field], value, "{field} stored");
    }

    let r = app.put(&path, Some(main), json!({ "status": "completed", "visit_type": "post_op" })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["status"], "completed");
    assert_eq!(r.body["data"]["visit_type"], "post_op");
    assert_eq!(r.body["data"]["reason"], "Blurred vision, left eye", "fields not sent are kept");
    assert_eq!(r.body["data"]["version"], 2);

    let r = app.delete(&path, Some(main)).await;
    assert_status(&r, 200);
    assert_status(&app.get(&path, Some(main)).await, 404);
    assert_status(&app.put(&path, Some(main), json!({ "status": "cancelled" })).await, 404);
    let r = app.get(VISITS, Some(main)).await;
    assert_eq!(r.body["meta"]["total"], 0, "{}", r.body);
}

#[tokio::test]
async fn a_visit_without_a_status_is_scheduled() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let v = app.created(VISITS, Some(main), json!({ "patient_id": p, "visit_date": "2026-03-10" })).await;
    assert_eq!(v["status"], "scheduled", "{v}");
    assert_eq!(v["patient_id"], p);
}

#[tokio::test]
async fn visit_patient_and_date_are_required() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = app.post(VISITS, Some(main), json!({})).await;
    assert_invalid(&r, &["patient_id", "visit_date"]);
    let r = app.post(VISITS, Some(main), json!({ "patient_id": null, "visit_date": "" })).await;
    assert_invalid(&r, &["patient_id", "visit_date"]);
    // And cannot be cleared later.
    let p = patient(&app, main, "Ana", "Cruz").await;
    let v = visit(&app, main, p).await;
    let r = app
        .put(&format!("{VISITS}/{v}"), Some(main), json!({ "visit_date": null, "patient_id": null }))
        .await;
    assert_invalid(&r, &["patient_id", "visit_date"]);
}

#[tokio::test]
async fn visit_type_status_and_date_are_validated() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let r = app
        .post(
            VISITS,
            Some(main),
            json!({ "patient_id": p, "visit_date": "2026-02-30", "visit_type": "walk_in", "status": "done" }),
        )
        .await;
    assert_invalid(&r, &["visit_date", "visit_type", "status"]);
    let r = app.post(VISITS, Some(main), json!({ "patient_id": "abc", "visit_date": "10/03/2026" })).await;
    assert_invalid(&r, &["patient_id", "visit_date"]);
    for visit_type in ["new", "follow_up", "emergency", "post_op"] {
        let v = app
            .created(
                VISITS,
                Some(main),
                json!({ "patient_id": p, "visit_date": "2026-03-10", "visit_type": visit_type }),
            )
            .await;
        assert_eq!(v["visit_type"], visit_type);
    }
    for status in ["scheduled", "checked_in", "in_progress", "completed", "cancelled"] {
        let v = app
            .created(
                VISITS,
                Some(main),
                json!({ "patient_id": p, "visit_date": "2026-03-10", "status": status }),
            )
            .await;
        assert_eq!(v["status"], status);
    }
    let v = visit(&app, main, p).await;
    let r = app.put(&format!("{VISITS}/{v}"), Some(main), json!({ "status": "finished" })).await;
    assert_invalid(&r, &["status"]);
}

#[tokio::test]
async fn visit_doctor_id_is_422_while_no_doctor_exists() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let r = app
        .post(VISITS, Some(main), json!({ "patient_id": p, "visit_date": "2026-03-10", "doctor_id": 1 }))
        .await;
    assert_invalid(&r, &["doctor_id"]);
    let r = app.get(VISITS, Some(main)).await;
    assert_eq!(r.body["meta"]["total"], 0, "nothing was created");
    let v = visit(&app, main, p).await;
    let r = app.put(&format!("{VISITS}/{v}"), Some(main), json!({ "doctor_id": 2 })).await;
    assert_invalid(&r, &["doctor_id"]);
}

#[tokio::test]
async fn a_visit_for_a_patient_of_another_branch_is_422_on_patient_id() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let own = patient(&app, main, "Ana", "Cruz").await;
    let (north, foreign, _) = other_branch(&app).await;
    let r = app.post(VISITS, Some(main), json!({ "patient_id": foreign, "visit_date": "2026-03-10" })).await;
    assert_invalid(&r, &["patient_id"]);
    let r = app.post(VISITS, Some(main), json!({ "patient_id": 999_999, "visit_date": "2026-03-10" })).await;
    assert_invalid(&r, &["patient_id"]);
    // Moving a visit to a foreign patient is refused too.
    let v = visit(&app, main, own).await;
    let r = app.put(&format!("{VISITS}/{v}"), Some(main), json!({ "patient_id": foreign })).await;
    assert_invalid(&r, &["patient_id"]);
    // The other branch still has only its own visits.
    let r = app.get(&format!("{VISITS}?filters[patient_id]={foreign}"), Some(north)).await;
    assert_eq!(r.body["meta"]["total"], 1, "{}", r.body);
}

#[tokio::test]
async fn visits_filter_by_patient_status_and_type() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let ana = patient(&app, main, "Ana", "Cruz").await;
    let ben = patient(&app, main, "Ben", "Reyes").await;
    let mut of_ana = BTreeSet::new();
    for (who, status, kind) in
        [(ana, "completed", "new"), (ana, "scheduled", "follow_up"), (ben, "completed", "follow_up")]
    {
        let v = app.created(VISITS, Some(main), json!({ "patient_id": who, "visit_date": "2026-03-10", "status": status, "visit_type": kind }))
        .await;
        if who == ana {
            of_ana.insert(id_of(&v));
        }
    }
    let r = app.get(&format!("{VISITS}?filters[patient_id]={ana}"), Some(main)).await;
    assert_status(&r, 200);
    assert_eq!(id_set(&r.body), of_ana);
    assert_eq!(r.body["meta"]["total"], 2);
    let r =
        app.get(&format!("{VISITS}?filters[patient_id]={ben}&filters[status]=completed"), Some(main)).await;
    assert_eq!(r.body["meta"]["total"], 1);
    let r = app
        .get(&format!("{VISITS}?filters[patient_id]={ana}&filters[visit_type]=follow_up"), Some(main))
        .await;
    assert_eq!(r.body["meta"]["total"], 1);
    assert_eq!(r.body["data"][0]["status"], "scheduled");
    let r = app.get(&format!("{VISITS}?filters[status]=completed"), Some(main)).await;
    assert_eq!(r.body["meta"]["total"], 2);
    let r = app.get(&format!("{VISITS}?filters[patient_id]=abc"), Some(main)).await;
    assert_invalid(&r, &["filters[patient_id]"]);
    let r = app.get(&format!("{VISITS}?filters[status]=done"), Some(main)).await;
    assert_invalid(&r, &["filters[status]"]);
}

#[tokio::test]
async fn visit_status_sent_as_null_is_scheduled_on_create_and_422_on_update() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let r = app
        .post(VISITS, Some(main), json!({ "patient_id": p, "visit_date": "2026-03-10", "status": null }))
        .await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["status"], "scheduled", "{}", r.body);
    let v = visit(&app, main, p).await;
    let r = app.put(&format!("{VISITS}/{v}"), Some(main), json!({ "status": null })).await;
    assert_invalid(&r, &["status"]);
}
