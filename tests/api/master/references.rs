//! Status toggles, and references that must name live and active master data.

use super::*;

// ---------------------------------------------------------------------------------------
// Status toggles
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn toggle_status_flips_active_and_inactive_and_is_audited() {
    let app = TestApp::spawn().await;
    for path in [MEDICINES, PROCEDURES, INSURANCES, SERVICES] {
        let record = master(&app, path, json!({})).await;
        let id = id_of(&record);
        let toggle = format!("{path}/{id}/toggle-status");
        let r = app.patch(&toggle, None).await;
        assert_status(&r, 200);
        assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.text);
        assert_eq!(r.body["data"]["status"], "inactive", "{path}");
        assert_eq!(r.body["data"]["version"], 2, "{path}");
        assert_eq!(r.header("etag"), Some("\"2\""));
        let r = app.patch(&toggle, None).await;
        assert_eq!(r.body["data"]["status"], "active", "{path}");
        assert_eq!(r.body["data"]["version"], 3, "{path}");
        let resource = path.trim_start_matches("/api/v1/");
        let rows = app.audit_rows(SYSTEM_AUDIT, None, resource, id).await;
        let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
        assert_eq!(actions, ["create", "toggle_status", "toggle_status"], "{path}");
        assert_eq!(rows[1]["before"]["status"], "active");
        assert_eq!(rows[1]["after"]["status"], "inactive");
        // A stale If-Match changes nothing.
        let stale = app.request(Method::PATCH, &toggle, None).header("if-match", "\"1\"");
        assert_error(&reply(stale).await, 412, "precondition_failed");
        assert_status(&app.delete(&format!("{path}/{id}"), None).await, 200);
        assert_error(&app.patch(&toggle, None).await, 404, "not_found");
    }
    assert_error(&app.patch(&format!("{MEDICINES}/999999/toggle-status"), None).await, 404, "not_found");
}

// ---------------------------------------------------------------------------------------
// References to master data
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_visit_names_a_live_active_doctor_but_keeps_one_deactivated_later() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, Some(clinic.branch));
    let doctor = id_of(&master(app, DOCTORS, json!({})).await);
    let visit = app
        .created(
            "/api/v1/patient-visits",
            branch,
            json!({ "patient_id": clinic.patient, "visit_date": day(0), "doctor_id": doctor }),
        )
        .await;
    assert_eq!(visit["doctor_id"], doctor);
    let r = app.put(&format!("{DOCTORS}/{doctor}"), None, json!({ "active": false })).await;
    assert_status(&r, 200);
    let r = app
        .post(
            "/api/v1/patient-visits",
            branch,
            json!({ "patient_id": clinic.patient, "visit_date": day(0), "doctor_id": doctor }),
        )
        .await;
    assert_invalid(&r, &["doctor_id"]);
    let member = format!("/api/v1/patient-visits/{}", id_of(&visit));
    let r = app.put(&member, branch, json!({ "reason": "Review", "doctor_id": doctor })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["doctor_id"], doctor, "an unchanged reference stays");
    let r = app
        .put(&format!("/api/v1/patient-visits/{}", clinic.visit), branch, json!({ "doctor_id": doctor }))
        .await;
    assert_invalid(&r, &["doctor_id"]);
    // A deleted doctor is no reference at all.
    let other = id_of(&master(app, DOCTORS, json!({ "license_no": "PRC-9" })).await);
    assert_status(&app.delete(&format!("{DOCTORS}/{other}"), None).await, 200);
    let r = app
        .put(&format!("/api/v1/patient-visits/{}", clinic.visit), branch, json!({ "doctor_id": other }))
        .await;
    assert_invalid(&r, &["doctor_id"]);
}

#[tokio::test]
async fn a_prescription_names_an_active_medicine_but_keeps_one_deactivated_later() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, Some(clinic.branch));
    let medicine = id_of(&master(app, MEDICINES, json!({})).await);
    let path = "/api/v1/patient-visit-prescribed-medicines";
    let body = json!({ "patient_visit_id": clinic.visit, "medicine_id": medicine, "dosage": "1 drop" });
    let prescribed = app.created(path, branch, body.clone()).await;
    assert_status(&app.patch(&format!("{MEDICINES}/{medicine}/toggle-status"), None).await, 200);
    assert_invalid(&app.post(path, branch, body.clone()).await, &["medicine_id"]);
    let member = format!("{path}/{}", id_of(&prescribed));
    let r = app.put(&member, branch, json!({ "dosage": "2 drops", "medicine_id": medicine })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["dosage"], "2 drops");
    assert_status(&app.patch(&format!("{MEDICINES}/{medicine}/toggle-status"), None).await, 200);
    assert_status(&app.post(path, branch, body).await, 201);
}

#[tokio::test]
async fn a_patient_names_an_insurance_valid_today() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, Some(clinic.branch));
    let future = id_of(&master(app, INSURANCES, json!({ "code": "LATER", "valid_from": day(1) })).await);
    let expired = id_of(
        &master(app, INSURANCES, json!({ "code": "OLD", "valid_from": day(-60), "valid_to": day(-1) })).await,
    );
    let current = id_of(
        &master(app, INSURANCES, json!({ "code": "NOW", "valid_from": day(0), "valid_to": day(0) })).await,
    );
    let patient = |insurance: i64| json!({ "first_name": "Ben", "last_name": "Reyes", "birth_date": "1990-01-01", "sex": "male", "insurance_id": insurance });
    for insurance in [future, expired, 999_999] {
        assert_invalid(&app.post("/api/v1/patients", branch, patient(insurance)).await, &["insurance_id"]);
    }
    let insured = app.created("/api/v1/patients", branch, patient(current)).await;
    assert_status(&app.patch(&format!("{INSURANCES}/{current}/toggle-status"), None).await, 200);
    assert_invalid(&app.post("/api/v1/patients", branch, patient(current)).await, &["insurance_id"]);
    let member = format!("/api/v1/patients/{}", id_of(&insured));
    let r = app.put(&member, branch, json!({ "city": "Cebu", "insurance_id": current })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["insurance_id"], current);
}

#[tokio::test]
async fn a_bill_item_names_an_active_category() {
    let app = TestApp::spawn().await;
    let category = app.created(CATEGORIES, None, json!({ "name": "Laboratory" })).await;
    let id = id_of(&category);
    let item = master(&app, BILL_ITEMS, json!({ "bill_item_category_id": id })).await;
    assert_status(&app.put(&format!("{CATEGORIES}/{id}"), None, json!({ "active": false })).await, 200);
    let r = app
        .post(
            BILL_ITEMS,
            None,
            master_body(BILL_ITEMS, json!({ "code": "LAB2", "bill_item_category_id": id })),
        )
        .await;
    assert_invalid(&r, &["bill_item_category_id"]);
    let r = app
        .put(
            &format!("{BILL_ITEMS}/{}", id_of(&item)),
            None,
            json!({ "name": "CBC", "bill_item_category_id": id }),
        )
        .await;
    assert_status(&r, 200);
    let r = app
        .post(
            BILL_ITEMS,
            None,
            master_body(BILL_ITEMS, json!({ "code": "LAB3", "bill_item_category_id": 999 })),
        )
        .await;
    assert_invalid(&r, &["bill_item_category_id"]);
}

#[tokio::test]
async fn a_branch_service_may_name_an_active_service() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let service = id_of(&master(&app, SERVICES, json!({})).await);
    let counters = format!("{BRANCHES}/{main}/services");
    let counter =
        app.created(&counters, None, json!({ "name": "Consults", "code": "C", "service_id": service })).await;
    assert_eq!(counter["service_id"], service);
    assert!(
        app.created(&counters, None, json!({ "name": "Triage", "code": "T" })).await["service_id"].is_null()
    );
    assert_status(&app.patch(&format!("{SERVICES}/{service}/toggle-status"), None).await, 200);
    let r = app.post(&counters, None, json!({ "name": "More", "code": "M", "service_id": service })).await;
    assert_invalid(&r, &["service_id"]);
    let r = app
        .put(
            &format!("{counters}/{}", id_of(&counter)),
            None,
            json!({ "name": "Consults A", "service_id": service }),
        )
        .await;
    assert_status(&r, 200);
    let r = app.post(&counters, None, json!({ "name": "None", "code": "N", "service_id": 999 })).await;
    assert_invalid(&r, &["service_id"]);
}
