//! The record: every field echoed, the computed age, cleared fields, the default status, and
//! soft delete.

use super::*;

#[tokio::test]
async fn create_with_every_field_echoes_each_one_and_computes_the_age() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    // The 40th birthday is a week away: 39 today.
    let born = years_before(today() + time::Duration::days(7), 40);
    let sent = json!({
        "first_name": "María",
        "middle_name": "Clara",
        "last_name": "Dela Cruz",
        "suffix": "Jr.",
        "birth_date": born.to_string(),
        "sex": "female",
        "civil_status": "widowed",
        "status": "inactive",
        "phone": "+63 912 345 6789",
        "email": "maria.delacruz@example.com",
        "address_line": "12 Rizal St., Brgy. 5",
        "city": "Quezon City",
        "province": "Metro Manila",
        "postal_code": "1100",
        "country": "Philippines",
        "occupation": "Teacher",
        "emergency_contact_name": "Juan Dela Cruz",
        "emergency_contact_relation": "Son",
        "emergency_contact_phone": "0917 123 4567",
        "insurance_id": null,
        "insurance_member_no": "PH-0012-3456",
        "notes": "Allergic to penicillin.\nWears glasses since 2001.",
    });
    let r = post_patient(&app, main, &sent).await;
    assert_status(&r, 201);
    let created = &r.body["data"];
    for (field, value) in sent.as_object().unwrap() {
        assert_eq!(&created[field], value, "{field} echoed on create: {created}");
    }
    assert_eq!(created["pin"], "MAIN-000001");
    assert_eq!(created["age"], 39, "age of someone born {born}: {created}");
    assert_eq!(created["version"], 1);

    let id = id_of(created);
    let r = reply(app.request(Method::GET, &format!("{PATIENTS}/{id}"), Some(main))).await;
    assert_status(&r, 200);
    let fetched = &r.body["data"];
    for (field, value) in sent.as_object().unwrap() {
        assert_eq!(&fetched[field], value, "{field} stored: {fetched}");
    }
    assert_eq!(fetched["pin"], "MAIN-000001");
    assert_eq!(fetched["age"], 39);

    // A week past the 40th birthday: 40.
    let born = years_before(today() - time::Duration::days(7), 40);
    let other = patient_with(&app, main, "Ben", "Reyes", json!({ "birth_date": born.to_string() })).await;
    assert_eq!(other["age"], 40, "age of someone born {born}: {other}");
    // Born today: 0.
    let baby = patient_with(&app, main, "New", "Born", json!({ "birth_date": today().to_string() })).await;
    assert_eq!(baby["age"], 0, "{baby}");
}

#[tokio::test]
async fn age_follows_an_updated_birth_date() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    let born = years_before(today() - time::Duration::days(3), 25);
    let r = reply(
        app.request(Method::PUT, &format!("{PATIENTS}/{}", id_of(&p)), Some(main))
            .json(&json!({ "birth_date": born.to_string() })),
    )
    .await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["birth_date"], born.to_string());
    assert_eq!(r.body["data"]["age"], 25, "{}", r.body);
}

#[tokio::test]
async fn optional_fields_can_be_cleared_with_null() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient_with(
        &app,
        main,
        "Ana",
        "Cruz",
        json!({ "middle_name": "Luz", "phone": "0917 000 1111", "email": "ana@example.com", "notes": "x" }),
    )
    .await;
    let path = format!("{PATIENTS}/{}", id_of(&p));
    let r = reply(app.request(Method::PUT, &path, Some(main)).json(&json!({
        "middle_name": null, "phone": null, "email": "", "notes": null,
    })))
    .await;
    assert_status(&r, 200);
    for field in ["middle_name", "phone", "email", "notes"] {
        assert!(r.body["data"][field].is_null(), "{field} cleared: {}", r.body);
    }
    assert_eq!(r.body["data"]["first_name"], "Ana");
}

#[tokio::test]
async fn status_sent_as_null_gets_the_default_on_create_and_is_422_on_update() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = post_patient(&app, main, &patient_body("Ana", "Cruz", json!({ "status": null }))).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["status"], "active", "{}", r.body);
    let p = patient(&app, main, "Ben", "Reyes").await;
    let path = format!("{PATIENTS}/{}", id_of(&p));
    let r = reply(app.request(Method::PUT, &path, Some(main)).json(&json!({ "status": null }))).await;
    assert_invalid(&r, &["status"]);
}

#[tokio::test]
async fn status_defaults_to_active() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let p = patient(&app, main, "Ana", "Cruz").await;
    assert_eq!(p["status"], "active", "{p}");
    assert!(p["civil_status"].is_null(), "{p}");
}

// ---------------------------------------------------------------------------------------
// Soft delete
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_deleted_patient_is_404_and_absent_everywhere() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let keep = patient_with(&app, main, "Ana", "Peña", json!({ "phone": "+63 912 000 0001" })).await;
    let gone = patient_with(&app, main, "Ana", "Peñaflor", json!({ "phone": "+63 912 000 0002" })).await;
    let id = id_of(&gone);
    let path = format!("{PATIENTS}/{id}");
    let r = reply(app.request(Method::DELETE, &path, Some(main))).await;
    assert_status(&r, 200);

    assert_status(&reply(app.request(Method::GET, &path, Some(main))).await, 404);
    let r = reply(app.request(Method::PUT, &path, Some(main)).json(&json!({ "first_name": "Back" }))).await;
    assert_status(&r, 404);
    assert_status(&reply(app.request(Method::DELETE, &path, Some(main))).await, 404);

    let only_keep = vec![id_of(&keep)];
    let r = list(&app, main, "").await;
    assert_eq!(ids(&r.body), only_keep, "list");
    assert_eq!(r.body["meta"]["total"], 1);
    let r = list(&app, main, "search=ana%20pena").await;
    assert_eq!(ids(&r.body), only_keep, "list search");
    let r = list(&app, main, "search=penaflor").await;
    assert_eq!(r.body["meta"]["total"], 0, "list search by the deleted name");
    let pin = gone["pin"].as_str().unwrap();
    let r = list(&app, main, &format!("search={pin}")).await;
    assert_eq!(r.body["meta"]["total"], 0, "list search by the deleted PIN");
    let r = list(&app, main, "filters[sex]=female").await;
    assert_eq!(ids(&r.body), only_keep, "filtered list");

    for term in ["ana", "penaflor", pin, "9120000002"] {
        let r = lookup(&app, main, &format!("search={term}")).await;
        assert_status(&r, 200);
        assert!(!ids(&r.body).contains(&id), "lookup search={term}: {}", r.body);
    }

    let r = reply(export(&app, main, "")).await;
    assert_eq!(csv_column(&csv_records(&r.text).1, "id"), vec![id_of(&keep).to_string()], "CSV export");
    let r = reply(export(&app, main, "format=json&search=ana")).await;
    let exported: Vec<i64> = json_lines(&r.text).iter().map(id_of).collect();
    assert_eq!(exported, only_keep, "JSON export");

    // A new visit cannot point at it.
    let r = reply(
        app.request(Method::POST, "/api/v1/patient-visits", Some(main))
            .json(&json!({ "patient_id": id, "visit_date": "2026-01-05" })),
    )
    .await;
    assert_invalid(&r, &["patient_id"]);

    // Soft: the row is still there, marked deleted.
    let client = app.state.registry.get().await.unwrap();
    let row = client
        .query_one(
            &format!("SELECT deleted_at IS NOT NULL, first_name FROM branch_{main}.patients WHERE id = $1"),
            &[&id],
        )
        .await
        .unwrap();
    assert!(row.get::<_, bool>(0), "deleted_at is set");
    assert_eq!(row.get::<_, String>(1), "Ana");
}
