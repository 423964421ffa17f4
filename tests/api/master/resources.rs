//! Master data resources: created, read, listed, changed and deleted, with money, codes,
//! enumerations and ranges checked, and who may read and write them.

use super::*;

// ---------------------------------------------------------------------------------------
// Master data
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn bill_items_round_trip_with_money_as_strings_and_upper_case_codes() {
    let app = TestApp::spawn().await;
    let r =
        app.post(BILL_ITEMS, None, master_body(BILL_ITEMS, json!({ "description": "First visit" }))).await;
    assert_status(&r, 201);
    let item = r.body["data"].clone();
    assert_eq!(item["code"], "CONS-01");
    assert_eq!(item["unit_price"], "1250.00");
    assert_eq!(item["active"], true);
    assert_eq!(item["bill_item_category_id"], 1);
    let member = format!("{BILL_ITEMS}/{}", id_of(&item));
    assert_eq!(app.get(&member, None).await.body["data"], item);
    let r = app.get(&format!("{BILL_ITEMS}?search=cons-0"), None).await;
    assert_eq!(ids(&r.body), vec![id_of(&item)]);
    let r = app.put(&member, None, json!({ "unit_price": "99.5", "name": "Follow-up" })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["unit_price"], "99.50");
    assert_eq!(r.body["data"]["code"], "CONS-01", "fields not sent are kept");
    let r = app.get(&format!("{BILL_ITEMS}?sortField=unit_price"), None).await;
    assert_eq!(column(&r.body, "unit_price"), ["99.50"]);
    assert_status(&app.delete(&member, None).await, 200);
    assert_error(&app.get(&member, None).await, 404, "not_found");
    // Codes are unique among live rows only.
    master(&app, BILL_ITEMS, json!({})).await;
}

/// `(path, valid body, a change)` of every writable master and lookup resource.
fn writable() -> Vec<(&'static str, Value, Value)> {
    let mut all: Vec<(&str, Value, Value)> = vec![
        (BILL_ITEMS, master_body(BILL_ITEMS, json!({})), json!({ "name": "Renamed" })),
        (MEDICINES, master_body(MEDICINES, json!({})), json!({ "brand_name": "Renamed" })),
        (PROCEDURES, master_body(PROCEDURES, json!({})), json!({ "name": "Renamed" })),
        (INSURANCES, master_body(INSURANCES, json!({})), json!({ "plan_name": "Renamed" })),
        (SERVICES, master_body(SERVICES, json!({})), json!({ "name": "Renamed" })),
        (DOCTORS, master_body(DOCTORS, json!({})), json!({ "specialization": "Renamed" })),
    ];
    all.extend([
        (CATEGORIES, json!({ "name": "Laboratory" }), json!({ "description": "Renamed" })),
        (PAYMENT_METHODS, json!({ "code": "gcash", "name": "GCash" }), json!({ "name": "Renamed" })),
        (SUPPLIERS, json!({ "name": "Acme Optical" }), json!({ "contact_name": "Renamed" })),
    ]);
    all
}

#[tokio::test]
async fn every_master_and_lookup_resource_is_created_read_listed_changed_and_deleted() {
    let app = TestApp::spawn().await;
    for (path, body, change) in writable() {
        let r = app.post(path, None, body).await;
        assert_status(&r, 201);
        assert_eq!(r.header("etag"), Some("\"1\""), "{path}");
        let created = r.body["data"].clone();
        let id = id_of(&created);
        let member = format!("{path}/{id}");
        assert_eq!(app.get(&member, None).await.body["data"], created, "{path}");
        let r = app.get(&format!("{path}?perPage=100"), None).await;
        assert!(ids(&r.body).contains(&id), "{path} lists it: {}", r.text);
        let r = app.put(&member, None, change.clone()).await;
        assert_status(&r, 200);
        let (field, value) = change.as_object().unwrap().iter().next().unwrap();
        assert_eq!(&r.body["data"][field], value, "{path}");
        assert_eq!(r.body["data"]["version"], 2, "{path}");
        let stale = app.request(Method::PUT, &member, None).header("if-match", "\"1\"").json(&change);
        assert_error(&reply(stale).await, 412, "precondition_failed");
        assert_status(&app.delete(&member, None).await, 200);
        assert_error(&app.get(&member, None).await, 404, "not_found");
        assert!(!ids(&app.get(&format!("{path}?perPage=100"), None).await.body).contains(&id), "{path}");
        let resource = path.trim_start_matches("/api/v1/");
        let rows = app.audit_rows(SYSTEM_AUDIT, None, resource, id).await;
        let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
        assert_eq!(actions, ["create", "update", "delete"], "{path}");
    }
}

#[tokio::test]
async fn money_is_non_negative_with_at_most_two_decimals() {
    let app = TestApp::spawn().await;
    for (price, field) in [
        (json!(-1), "unit_price"),
        (json!("-0.01"), "unit_price"),
        (json!("12.345"), "unit_price"),
        (json!(0.001), "unit_price"),
        (json!("abc"), "unit_price"),
        (json!("12345678901"), "unit_price"),
        (json!(true), "unit_price"),
    ] {
        let r = app.post(BILL_ITEMS, None, master_body(BILL_ITEMS, json!({ field: price }))).await;
        assert_invalid(&r, &[field]);
    }
    for (sent, answered) in
        [(json!(0), "0.00"), (json!("0.1"), "0.10"), (json!("9999999999.99"), "9999999999.99")]
    {
        let r = app
            .post(
                BILL_ITEMS,
                None,
                master_body(BILL_ITEMS, json!({ "code": format!("C{answered}"), "unit_price": sent })),
            )
            .await;
        assert_status(&r, 201);
        assert_eq!(r.body["data"]["unit_price"], answered);
    }
    let procedure = master(&app, PROCEDURES, json!({})).await;
    assert_eq!(procedure["price"], "0.00");
    assert_invalid(
        &app.post(PROCEDURES, None, master_body(PROCEDURES, json!({ "code": "X", "price": -5 }))).await,
        &["price"],
    );
    let service = master(&app, SERVICES, json!({})).await;
    assert_eq!(service["price"], "500.00");
    assert_invalid(
        &app.post(SERVICES, None, master_body(SERVICES, json!({ "code": "XY", "price": "1.005" }))).await,
        &["price"],
    );
    let doctor = master(&app, DOCTORS, json!({})).await;
    assert_eq!(doctor["consultation_fee"], "0.00");
    let insurance = master(&app, INSURANCES, json!({})).await;
    assert_eq!(insurance["copay"], "0.00");
    let r = app.post(INSURANCES, None, master_body(INSURANCES, json!({ "code": "B", "copay": "-1" }))).await;
    assert_invalid(&r, &["copay"]);
}

#[tokio::test]
async fn codes_are_upper_cased_checked_and_unique() {
    let app = TestApp::spawn().await;
    for path in [BILL_ITEMS, PROCEDURES, INSURANCES, SERVICES] {
        let first = master(&app, path, json!({})).await;
        let code = first["code"].as_str().unwrap().to_owned();
        assert_eq!(code, code.to_uppercase(), "{path}");
        let again = app.post(path, None, master_body(path, json!({ "code": code.to_lowercase() }))).await;
        assert_invalid(&again, &["code"]);
        for bad in [json!("has space"), json!("x".repeat(31)), json!(""), json!("A!")] {
            let r = app.post(path, None, master_body(path, json!({ "code": bad }))).await;
            assert_invalid(&r, &["code"]);
        }
    }
    let r = app.post(PROCEDURES, None, master_body(PROCEDURES, json!({ "code": "yag.laser_2-b" }))).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["code"], "YAG.LASER_2-B");
    // Service codes are 2 to 10 letters and digits (they prefix queue tickets).
    for bad in ["a", "ab-1", "abcdefghijk"] {
        assert_invalid(
            &app.post(SERVICES, None, master_body(SERVICES, json!({ "code": bad }))).await,
            &["code"],
        );
    }
    assert_eq!(master(&app, SERVICES, json!({ "code": "opd2" })).await["code"], "OPD2");
}

#[tokio::test]
async fn medicines_procedures_and_services_check_their_enumerations_and_ranges() {
    let app = TestApp::spawn().await;
    let medicine = master(&app, MEDICINES, json!({ "brand_name": "Timoptol", "strength": "0.5%" })).await;
    assert_eq!(medicine["status"], "active");
    assert_eq!(medicine["requires_prescription"], true);
    for (field, value) in [("form", "powder"), ("route", "nasal"), ("status", "retired")] {
        let r = app.post(MEDICINES, None, master_body(MEDICINES, json!({ field: value }))).await;
        assert_invalid(&r, &[field]);
    }
    assert_invalid(&app.post(MEDICINES, None, json!({})).await, &["generic_name", "form", "route", "unit"]);
    for (field, value) in [
        ("category", json!("surgery")),
        ("default_duration_minutes", json!(0)),
        ("default_duration_minutes", json!(721)),
        ("billable", json!("no")),
    ] {
        let r =
            app.post(PROCEDURES, None, master_body(PROCEDURES, json!({ "code": "P2", field: value }))).await;
        assert_invalid(&r, &[field]);
    }
    let r = app.post(SERVICES, None, master_body(SERVICES, json!({ "default_duration_minutes": 721 }))).await;
    assert_invalid(&r, &["default_duration_minutes"]);
    assert_invalid(&app.post(SERVICES, None, json!({ "code": "AB" })).await, &["name", "price"]);
    let r = app.get(&format!("{MEDICINES}?filters[form]=drops&search=timop"), None).await;
    assert_eq!(ids(&r.body), vec![id_of(&medicine)]);
    assert_invalid(&app.get(&format!("{MEDICINES}?filters[form]=powder"), None).await, &["filters[form]"]);
}

#[tokio::test]
async fn insurance_coverage_and_validity_are_checked() {
    let app = TestApp::spawn().await;
    let insurance =
        master(&app, INSURANCES, json!({ "coverage_percent": "12.5", "plan_name": "Gold" })).await;
    assert_eq!(insurance["coverage_percent"].to_string(), "12.50", "a measurement at its step's scale");
    assert_eq!(insurance["status"], "active");
    for (n, coverage) in [json!(100.01), json!(-1), json!("12.345"), json!("x")].into_iter().enumerate() {
        let r = app
            .post(
                INSURANCES,
                None,
                master_body(INSURANCES, json!({ "code": format!("C{n}"), "coverage_percent": coverage })),
            )
            .await;
        assert_invalid(&r, &["coverage_percent"]);
    }
    let r = app
        .post(
            INSURANCES,
            None,
            master_body(
                INSURANCES,
                json!({ "code": "D", "valid_from": "2026-03-01", "valid_to": "2026-02-28" }),
            ),
        )
        .await;
    assert_invalid(&r, &["valid_to"]);
    let same_day = master(
        &app,
        INSURANCES,
        json!({ "code": "E", "valid_from": "2026-03-01", "valid_to": "2026-03-01" }),
    )
    .await;
    let r = app
        .put(&format!("{INSURANCES}/{}", id_of(&same_day)), None, json!({ "valid_from": "2026-03-02" }))
        .await;
    assert_invalid(&r, &["valid_to"]);
    assert_invalid(
        &app.post(INSURANCES, None, json!({})).await,
        &["code", "payer_name", "coverage_percent", "valid_from"],
    );
}

#[tokio::test]
async fn doctors_have_unique_licenses_and_users() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let (user, _) = app.create_user("rosa", &["doctor"], &[main]).await;
    let doctor = master(&app, DOCTORS, json!({ "user_id": user, "email": "rosa@example.test", "phone": "+63 917 555 0101", "consultation_fee": 800 })).await;
    assert_eq!(doctor["consultation_fee"], "800.00");
    assert_eq!(doctor["active"], true);
    let r = app.post(DOCTORS, None, master_body(DOCTORS, json!({ "license_no": "prc-0001" }))).await;
    assert_invalid(&r, &["license_no"]);
    let r = app
        .post(DOCTORS, None, master_body(DOCTORS, json!({ "license_no": "PRC-0002", "user_id": user })))
        .await;
    assert_invalid(&r, &["user_id"]);
    let r = app
        .post(DOCTORS, None, master_body(DOCTORS, json!({ "license_no": "PRC-0003", "user_id": 999_999 })))
        .await;
    assert_invalid(&r, &["user_id"]);
    let r = app
        .post(
            DOCTORS,
            None,
            master_body(DOCTORS, json!({ "license_no": "PRC-0004", "email": "rosa@", "phone": "call me" })),
        )
        .await;
    assert_invalid(&r, &["email", "phone"]);
    // A deleted doctor frees the license and the user.
    assert_status(&app.delete(&format!("{DOCTORS}/{}", id_of(&doctor)), None).await, 200);
    master(&app, DOCTORS, json!({ "user_id": user })).await;
}

#[tokio::test]
async fn master_data_is_read_by_its_readers_and_written_by_its_writers() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let (_, doctor) = app.create_user("doc", &["doctor"], &[main]).await;
    let medicine = master(&app, MEDICINES, json!({})).await;
    let member = format!("{MEDICINES}/{}", id_of(&medicine));
    assert_status(&app.call_as(&doctor, Method::GET, MEDICINES, None, Value::Null).await, 200);
    assert_status(&app.call_as(&doctor, Method::GET, &member, None, Value::Null).await, 200);
    for (method, path, body) in [
        (Method::POST, MEDICINES.to_owned(), master_body(MEDICINES, json!({}))),
        (Method::PUT, member.clone(), json!({ "unit": "vial" })),
        (Method::DELETE, member.clone(), Value::Null),
        (Method::PATCH, format!("{member}/toggle-status"), Value::Null),
    ] {
        assert_error(&app.call_as(&doctor, method, &path, None, body).await, 403, "forbidden");
    }
    let r = app.get(MEDICINES, None).await;
    assert_eq!(ids(&r.body), vec![id_of(&medicine)], "global: no branch header needed");
}
