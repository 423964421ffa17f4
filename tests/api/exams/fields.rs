//! The fields every examination shares (the examiner, the time, the visit and its patient)
//! and the eyes.

use super::*;

#[tokio::test]
async fn the_examiner_is_an_active_user_of_the_branch() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let (doctor, _) = app.create_user("doc", &["doctor"], &[branch]).await;
    let north = app.create_branch("NORTH").await;
    let (elsewhere, _) = app.create_user("north", &["doctor"], &[north]).await;
    let (gone, _) = app.create_user("gone", &["doctor"], &[branch]).await;
    app.state
        .registry
        .get()
        .await
        .unwrap()
        .execute("UPDATE users SET active = false WHERE id = $1", &[&gone])
        .await
        .unwrap();

    let named = create(&clinic, "funduscopies", json!({ "examiner_id": doctor })).await;
    assert_eq!(named["examiner_id"], doctor);
    for bad in [json!(elsewhere), json!(gone), json!(999_999), json!("someone")] {
        let r =
            post(&clinic, "funduscopies", body("funduscopies", clinic.visit, json!({ "examiner_id": bad })))
                .await;
        assert_invalid(&r, &["examiner_id"]);
    }
    let r = post(&clinic, "funduscopies", body("funduscopies", clinic.visit, json!({ "examiner_id": null })))
        .await;
    assert_invalid(&r, &["examiner_id"]);
    let member = format!("{}/{}", path("funduscopies"), id_of(&named));
    assert_invalid(&app.put(&member, Some(branch), json!({ "examiner_id": gone })).await, &["examiner_id"]);
    let r = app.put(&member, Some(branch), json!({ "examiner_id": app.admin_id().await })).await;
    assert_status(&r, 200);
}

#[tokio::test]
async fn examined_at_is_not_in_the_future_and_is_answered_in_utc() {
    let clinic = Clinic::open().await;
    let exam = "gross-examinations";
    let r = post(&clinic, exam, body(exam, clinic.visit, json!({ "examined_at": from_now(10) }))).await;
    assert_invalid(&r, &["examined_at"]);
    let skewed = create(&clinic, exam, json!({ "examined_at": from_now(3) })).await;
    assert!(instant(&skewed["examined_at"]) > OffsetDateTime::now_utc(), "5 minutes of skew are allowed");
    let local = create(&clinic, exam, json!({ "examined_at": "2026-01-05T10:15:00+08:00" })).await;
    assert_eq!(
        instant(&local["examined_at"]),
        OffsetDateTime::parse("2026-01-05T02:15:00Z", &Rfc3339).unwrap()
    );
    assert!(local["examined_at"].as_str().unwrap().starts_with("2026-01-05T02:15:00"), "{local}");
    let r = post(&clinic, exam, body(exam, clinic.visit, json!({ "examined_at": "yesterday" }))).await;
    assert_invalid(&r, &["examined_at"]);
}

#[tokio::test]
async fn the_visit_and_its_patient_must_agree() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let other = id_of(&app.create_patient(branch, "Ben", "Reyes").await);
    let exam = "amsler-grids";
    let r = post(&clinic, exam, body(exam, clinic.visit, json!({ "patient_id": other }))).await;
    assert_invalid(&r, &["patient_id"]);
    let same = create(&clinic, exam, json!({ "patient_id": clinic.patient })).await;
    assert_eq!(same["patient_id"], clinic.patient);
    let r = post(&clinic, exam, body(exam, 999_999, json!({}))).await;
    assert_invalid(&r, &["patient_visit_id"]);
    let mut missing = body(exam, clinic.visit, json!({}));
    missing.as_object_mut().unwrap().remove("patient_visit_id");
    assert_invalid(&post(&clinic, exam, missing).await, &["patient_visit_id"]);
}

#[tokio::test]
async fn a_visit_keeps_its_patient_once_an_examination_names_it() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let other = id_of(&app.create_patient(branch, "Ben", "Reyes").await);
    let visit = format!("{VISITS}/{}", clinic.visit);
    let exam = create(&clinic, "eoms", json!({})).await;
    let r = app.put(&visit, Some(branch), json!({ "patient_id": other })).await;
    assert_invalid(&r, &["patient_id"]);
    assert_eq!(app.get(&visit, Some(branch)).await.body["data"]["patient_id"], clinic.patient);
    // Sending the same patient back is no change.
    assert_status(&app.put(&visit, Some(branch), json!({ "patient_id": clinic.patient })).await, 200);
    // Once the examination is gone, the visit may move.
    let member = format!("{}/{}", path("eoms"), id_of(&exam));
    assert_status(&app.delete(&member, Some(branch)).await, 200);
    let r = app.put(&visit, Some(branch), json!({ "patient_id": other })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["patient_id"], other);
}

// ---------------------------------------------------------------------------------------
// Eyes
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn at_least_one_eye_is_recorded() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    for exam in EXAMS.into_iter().filter(|e| *e != "radiologies") {
        let mut none = body(exam, clinic.visit, json!({}));
        none.as_object_mut().unwrap().retain(|k, _| !k.ends_with("_eye"));
        assert_invalid(&post(&clinic, exam, none.clone()).await, &["right_eye"]);
        merge(&mut none, json!({ "right_eye": null, "left_eye": null }));
        assert_invalid(&post(&clinic, exam, none).await, &["right_eye"]);
        // One eye is enough; then it cannot be emptied.
        let (_, eye) = sample(exam);
        let r = with_right_eye(&clinic, exam, json!({ "unable_to_assess": true }), json!({})).await;
        assert_status(&r, 201);
        let id = id_of(&r);
        assert_eq!(r.body["data"]["right_eye"], json!({ "unable_to_assess": true }), "{exam}");
        assert!(r.body["data"]["left_eye"].is_null(), "{exam}");
        let member = format!("{}/{id}", path(exam));
        assert_invalid(&app.put(&member, Some(branch), json!({ "right_eye": null })).await, &["right_eye"]);
        let r = app.put(&member, Some(branch), json!({ "right_eye": null, "left_eye": eye })).await;
        assert_status(&r, 200);
        assert!(r.body["data"]["right_eye"].is_null(), "{exam}");
    }
}

#[tokio::test]
async fn an_unassessed_eye_takes_no_measurement_and_an_assessed_one_holds_a_finding() {
    let clinic = Clinic::open().await;
    let r =
        with_right_eye(&clinic, "refractions", json!({ "unable_to_assess": true, "sphere": 1 }), json!({}))
            .await;
    assert_invalid(&r, &["right_eye.sphere"]);
    let r = with_right_eye(
        &clinic,
        "tonometries",
        json!({ "unable_to_assess": true, "readings": [{ "iop_mmhg": 12, "method": "icare" }], "cct_um": 500 }),
        json!({}),
    )
    .await;
    assert_invalid(&r, &["right_eye.readings", "right_eye.cct_um"]);
    // Null measurements are no measurements.
    let r = with_right_eye(
        &clinic,
        "refractions",
        json!({ "unable_to_assess": true, "sphere": null }),
        json!({}),
    )
    .await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["right_eye"], json!({ "unable_to_assess": true }));
    // An eye object with no finding.
    for eye in [json!({}), json!({ "unable_to_assess": false }), json!({ "cd_ratio": null, "disc": "  " })] {
        let r = with_right_eye(&clinic, "funduscopies", eye, json!({})).await;
        assert_invalid(&r, &["right_eye"]);
    }
    // A required measurement is required when the eye is assessed.
    assert_invalid(
        &with_right_eye(&clinic, "refractions", json!({}), json!({})).await,
        &["right_eye.sphere"],
    );
    let r = with_right_eye(&clinic, "refractions", json!({ "unable_to_assess": "no" }), json!({})).await;
    assert_invalid(&r, &["right_eye.unable_to_assess"]);
    assert_invalid(&with_right_eye(&clinic, "refractions", json!(-2), json!({})).await, &["right_eye"]);
    // Unknown keys are dropped.
    let r = with_right_eye(&clinic, "funduscopies", json!({ "cd_ratio": 0.4, "colour": "pink" }), json!({}))
        .await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["right_eye"], parsed(r#"{"unable_to_assess":false,"cd_ratio":0.40}"#));
}

#[tokio::test]
async fn a_put_of_one_eye_replaces_it_and_checks_it_whole() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let created = create(
        &clinic,
        "refractions",
        json!({
            "right_eye": { "sphere": -1, "cylinder": -0.5, "axis": 90, "va": "6/6" },
            "left_eye": { "sphere": 1.5 },
        }),
    )
    .await;
    let member = format!("{}/{}", path("refractions"), id_of(&created));
    let r = app.put(&member, Some(branch), json!({ "right_eye": { "sphere": "-1.25" } })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["right_eye"], json!({ "unable_to_assess": false, "sphere": -1.25 }));
    assert_eq!(r.body["data"]["left_eye"], created["left_eye"], "the other eye is kept");
    // The stored sphere does not complete a sent eye that lacks one.
    let r = app.put(&member, Some(branch), json!({ "right_eye": { "cylinder": -1, "axis": 10 } })).await;
    assert_invalid(&r, &["right_eye.sphere"]);
    let r = app.put(&member, Some(branch), json!({ "right_eye": { "sphere": -1, "cylinder": -1 } })).await;
    assert_invalid(&r, &["right_eye.axis"]);
    assert_eq!(
        app.get(&member, Some(branch)).await.body["data"]["right_eye"]["sphere"].as_f64(),
        Some(-1.25)
    );
}
