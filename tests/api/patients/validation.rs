//! Validation: every bad field is named, all of them in the same 422.

use super::*;

#[tokio::test]
async fn future_or_malformed_birth_date_is_422_on_birth_date() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let tomorrow = (today() + time::Duration::days(2)).to_string();
    for bad in [tomorrow.as_str(), "2999-01-01", "1990-13-01", "1990-02-30", "02/01/1990", "1990-1-2", ""] {
        let r = post_patient(&app, main, &patient_body("Ana", "Cruz", json!({ "birth_date": bad }))).await;
        assert_invalid(&r, &["birth_date"]);
    }
    let r = post_patient(&app, main, &patient_body("Ana", "Cruz", json!({ "birth_date": 19900102 }))).await;
    assert_invalid(&r, &["birth_date"]);
    let r = list(&app, main, "").await;
    assert_eq!(r.body["meta"]["total"], 0, "nothing was created");
}

#[tokio::test]
async fn bad_sex_civil_status_and_status_are_each_named() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = post_patient(
        &app,
        main,
        &patient_body(
            "Ana",
            "Cruz",
            json!({ "sex": "robot", "civil_status": "complicated", "status": "asleep" }),
        ),
    )
    .await;
    assert_invalid(&r, &["sex", "civil_status", "status"]);
    // Every allowed value is accepted.
    for sex in ["male", "female", "other", "unknown"] {
        let p = patient_with(&app, main, "A", sex, json!({ "sex": sex })).await;
        assert_eq!(p["sex"], sex);
    }
    for civil in ["single", "married", "widowed", "separated", "divorced"] {
        let p = patient_with(&app, main, "B", civil, json!({ "civil_status": civil })).await;
        assert_eq!(p["civil_status"], civil);
    }
    for status in ["active", "inactive", "deceased"] {
        let p = patient_with(&app, main, "C", status, json!({ "status": status })).await;
        assert_eq!(p["status"], status);
    }
    // A number is not an enumeration value either.
    let r = post_patient(&app, main, &patient_body("Ana", "Cruz", json!({ "sex": 1, "status": true }))).await;
    assert_invalid(&r, &["sex", "status"]);
}

#[tokio::test]
async fn bad_email_is_422_on_email() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for bad in ["not-an-email", "ana@", "@example.com", "ana@example", "ana @example.com", "a@@example.com"] {
        let r = post_patient(&app, main, &patient_body("Ana", "Cruz", json!({ "email": bad }))).await;
        assert_invalid(&r, &["email"]);
    }
    let r = post_patient(&app, main, &patient_body("Ana", "Cruz", json!({ "email": 42 }))).await;
    assert_invalid(&r, &["email"]);
    let p =
        patient_with(&app, main, "Ana", "Cruz", json!({ "email": "ana.cruz+eye@clinic.example.ph" })).await;
    assert_eq!(p["email"], "ana.cruz+eye@clinic.example.ph");
}

#[tokio::test]
async fn bad_phone_is_422_on_each_phone_field() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for bad in ["call me", "12", "0917-ABC-1234", "+63 912 345 6789 ext. 5", "1234567890123456789012"] {
        let r = post_patient(
            &app,
            main,
            &patient_body("Ana", "Cruz", json!({ "phone": bad, "emergency_contact_phone": bad })),
        )
        .await;
        assert_invalid(&r, &["phone", "emergency_contact_phone"]);
    }
    let p = patient_with(
        &app,
        main,
        "Ana",
        "Cruz",
        json!({ "phone": "(02) 8123-4567", "emergency_contact_phone": "+63 917 555 0101" }),
    )
    .await;
    assert_eq!(p["phone"], "(02) 8123-4567");
    assert_eq!(p["emergency_contact_phone"], "+63 917 555 0101");
}

#[tokio::test]
async fn overlong_names_are_each_named_and_the_limits_themselves_pass() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = post_patient(
        &app,
        main,
        &json!({
            "first_name": "F".repeat(101),
            "middle_name": "M".repeat(101),
            "last_name": "L".repeat(101),
            "suffix": "S".repeat(21),
            "birth_date": "1980-01-02",
            "sex": "male",
        }),
    )
    .await;
    assert_invalid(&r, &["first_name", "middle_name", "last_name", "suffix"]);
    // Characters, not bytes: 100 accented letters are fine.
    let p = patient_with(
        &app,
        main,
        &"é".repeat(100),
        &"L".repeat(100),
        json!({ "middle_name": "M".repeat(100), "suffix": "S".repeat(20) }),
    )
    .await;
    assert_eq!(p["first_name"], "é".repeat(100));
    assert_eq!(p["suffix"], "S".repeat(20));
}

#[tokio::test]
async fn names_that_are_not_strings_are_each_named() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = post_patient(
        &app,
        main,
        &json!({
            "first_name": 42,
            "middle_name": ["Luz"],
            "last_name": { "text": "Cruz" },
            "suffix": true,
            "birth_date": "1980-01-02",
            "sex": "female",
        }),
    )
    .await;
    assert_invalid(&r, &["first_name", "middle_name", "last_name", "suffix"]);
}

#[tokio::test]
async fn nonexistent_insurance_is_422_on_insurance_id() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = post_patient(&app, main, &patient_body("Ana", "Cruz", json!({ "insurance_id": 1 }))).await;
    assert_invalid(&r, &["insurance_id"]);
    let r = post_patient(&app, main, &patient_body("Ana", "Cruz", json!({ "insurance_id": "abc" }))).await;
    assert_invalid(&r, &["insurance_id"]);
    let r = list(&app, main, "").await;
    assert_eq!(r.body["meta"]["total"], 0, "nothing was created");
    // On update as well, and the record is unchanged.
    let p = patient(&app, main, "Ana", "Cruz").await;
    let path = format!("{PATIENTS}/{}", id_of(&p));
    let r = reply(
        app.request(Method::PUT, &path, Some(main))
            .json(&json!({ "insurance_id": 7, "insurance_member_no": "X-1" })),
    )
    .await;
    assert_invalid(&r, &["insurance_id"]);
    let r = reply(app.request(Method::GET, &path, Some(main))).await;
    assert!(r.body["data"]["insurance_member_no"].is_null(), "{}", r.body);
    assert_eq!(r.body["data"]["version"], 1);
}

#[tokio::test]
async fn a_nonexistent_insurance_is_named_together_with_the_other_bad_fields() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = post_patient(
        &app,
        main,
        &patient_body("Ana", "Cruz", json!({ "insurance_id": 5, "sex": "robot", "email": "nope" })),
    )
    .await;
    assert_invalid(&r, &["insurance_id", "sex", "email"]);
}

#[tokio::test]
async fn every_bad_field_is_named_in_the_same_422() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = post_patient(
        &app,
        main,
        &json!({
            "first_name": "F".repeat(101),
            "last_name": 7,
            "birth_date": "2999-12-31",
            "sex": "robot",
            "civil_status": "complicated",
            "status": "asleep",
            "phone": "call me",
            "email": "nope",
            "postal_code": "1".repeat(21),
            "emergency_contact_phone": "x",
            "insurance_member_no": "9".repeat(51),
        }),
    )
    .await;
    assert_invalid(
        &r,
        &[
            "first_name",
            "last_name",
            "birth_date",
            "sex",
            "civil_status",
            "status",
            "phone",
            "email",
            "postal_code",
            "emergency_contact_phone",
            "insurance_member_no",
        ],
    );
}
