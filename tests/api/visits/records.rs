//! Visit plans, prescribed medicines and complaints.

use super::*;

#[tokio::test]
async fn plan_crud_round_trip() {
    let Clinic { app, branch: main, patient: p, visit: v } = Clinic::open().await;
    let sent = json!({
        "patient_visit_id": v,
        "plan": "Start lubricating drops; refraction next visit.",
        "follow_up_date": "2026-04-01",
        "instructions": "Four times a day.\nAvoid screens at night.",
    });
    let r = app.post(PLANS, Some(main), sent.clone()).await;
    assert_status(&r, 201);
    let data = &r.body["data"];
    for (field, value) in sent.as_object().unwrap() {
        assert_eq!(&data[field], value, "{field} echoed: {data}");
    }
    assert_eq!(data["patient_id"], p, "taken from the visit");
    let path = format!("{PLANS}/{}", id_of(data));
    let r = app.get(&path, Some(main)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["plan"], sent["plan"]);
    assert_eq!(r.body["data"]["patient_id"], p);
    let r = app.put(&path, Some(main), json!({ "follow_up_date": "2026-04-15", "instructions": null })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["follow_up_date"], "2026-04-15");
    assert!(r.body["data"]["instructions"].is_null());
    assert_eq!(r.body["data"]["plan"], sent["plan"]);
    assert_status(&app.delete(&path, Some(main)).await, 200);
    assert_status(&app.get(&path, Some(main)).await, 404);
    assert_eq!(app.get(PLANS, Some(main)).await.body["meta"]["total"], 0);
}

#[tokio::test]
async fn plan_visit_and_text_are_required_and_dates_checked() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let r = app.post(PLANS, Some(main), json!({})).await;
    assert_invalid(&r, &["patient_visit_id", "plan"]);
    let r = app.post(PLANS, Some(main), json!({ "patient_visit_id": v, "plan": "  " })).await;
    assert_invalid(&r, &["plan"]);
    let r = app
        .post(
            PLANS,
            Some(main),
            json!({ "patient_visit_id": v, "plan": "X", "follow_up_date": "2026-04-31" }),
        )
        .await;
    assert_invalid(&r, &["follow_up_date"]);
    let r = app.post(PLANS, Some(main), json!({ "patient_visit_id": v, "plan": 12 })).await;
    assert_invalid(&r, &["plan"]);
}

#[tokio::test]
async fn a_prescribed_medicine_is_422_on_medicine_id_while_no_medicine_exists() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let before = app.audit_count(Some(main), None).await;
    for medicine in [json!(1), json!(42), json!("7")] {
        let r = app
            .post(
                MEDICINES,
                Some(main),
                json!({ "patient_visit_id": v, "medicine_id": medicine, "eye": "both", "quantity": 2 }),
            )
            .await;
        assert_invalid(&r, &["medicine_id"]);
    }
    let r = app.post(MEDICINES, Some(main), json!({ "patient_visit_id": v, "medicine_id": "abc" })).await;
    assert_invalid(&r, &["medicine_id"]);
    let r = app.get(MEDICINES, Some(main)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["meta"]["total"], 0);
    assert_eq!(app.audit_count(Some(main), None).await, before, "refused writes leave no audit row");
}

#[tokio::test]
async fn prescribed_medicine_visit_and_medicine_are_required() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = app.post(MEDICINES, Some(main), json!({})).await;
    assert_invalid(&r, &["medicine_id", "patient_visit_id"]);
    let r = app.post(MEDICINES, Some(main), json!({ "medicine_id": null, "patient_visit_id": null })).await;
    assert_invalid(&r, &["medicine_id", "patient_visit_id"]);
}

#[tokio::test]
async fn prescribed_medicine_eye_and_quantity_are_validated() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let base = |extra: Value| record_body(MEDICINES, v, extra);
    // Every bad field is named at once, the medicine that does not exist (no master data yet)
    // included.
    let r = app.post(MEDICINES, Some(main), base(json!({ "eye": "middle", "quantity": "two" }))).await;
    assert_invalid(&r, &["eye", "medicine_id", "quantity"]);
    for quantity in [json!(1.5), json!(true), json!([2]), json!(-3)] {
        let r = app.post(MEDICINES, Some(main), base(json!({ "quantity": quantity }))).await;
        assert_invalid(&r, &["medicine_id", "quantity"]);
    }
    // Valid values pass validation: only the absent medicine is left.
    for eye in ["right", "left", "both", "n_a"] {
        let r = app.post(MEDICINES, Some(main), base(json!({ "eye": eye, "quantity": 3 }))).await;
        assert_invalid(&r, &["medicine_id"]);
    }
}

#[tokio::test]
async fn prescribed_medicines_list_takes_the_patient_and_visit_filters() {
    let Clinic { app, branch: main, patient: p, visit: v } = Clinic::open().await;
    let r = app
        .get(&format!("{MEDICINES}?filters[patient_id]={p}&filters[patient_visit_id]={v}"), Some(main))
        .await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"], json!([]));
    let r = app.get(&format!("{MEDICINES}?filters[patient_visit_id]=x"), Some(main)).await;
    assert_invalid(&r, &["filters[patient_visit_id]"]);
    let r = app.get(&format!("{MEDICINES}?filters[eye]=middle"), Some(main)).await;
    assert_invalid(&r, &["filters[eye]"]);
}

#[tokio::test]
async fn complaint_crud_round_trip() {
    let Clinic { app, branch: main, patient: p, visit: v } = Clinic::open().await;
    let sent = json!({
        "patient_id": p,
        "patient_visit_id": v,
        "complaint": "Floaters in the right eye",
        "eye": "right",
        "onset": "sudden",
        "duration": "3 days",
        "severity": "severe",
        "notes": "Flashes at night.",
    });
    let r = app.post(COMPLAINTS, Some(main), sent.clone()).await;
    assert_status(&r, 201);
    for (field, value) in sent.as_object().unwrap() {
        assert_eq!(&r.body["data"][field], value, "{field} echoed: {}", r.body);
    }
    let path = format!("{COMPLAINTS}/{}", id_of(&r.body["data"]));
    let r = app.get(&path, Some(main)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["complaint"], "Floaters in the right eye");
    let r = app.put(&path, Some(main), json!({ "severity": "mild", "eye": "both" })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["severity"], "mild");
    assert_eq!(r.body["data"]["eye"], "both");
    assert_eq!(r.body["data"]["duration"], "3 days");
    assert_eq!(r.body["data"]["version"], 2);
    assert_status(&app.delete(&path, Some(main)).await, 200);
    assert_status(&app.get(&path, Some(main)).await, 404);
    assert_status(&app.delete(&path, Some(main)).await, 404);
}

#[tokio::test]
async fn complaint_text_is_required_and_eye_and_severity_checked() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let r = app.post(COMPLAINTS, Some(main), json!({})).await;
    assert_invalid(&r, &["patient_visit_id", "complaint"]);
    let r = app
        .post(
            COMPLAINTS,
            Some(main),
            json!({ "patient_visit_id": v, "complaint": "Pain", "eye": "middle", "severity": "unbearable" }),
        )
        .await;
    assert_invalid(&r, &["eye", "severity"]);
    let r = app
        .post(COMPLAINTS, Some(main), json!({ "patient_visit_id": v, "complaint": "x".repeat(501) }))
        .await;
    assert_invalid(&r, &["complaint"]);
}
