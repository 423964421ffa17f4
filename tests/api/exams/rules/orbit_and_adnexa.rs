//! Eye movements, exophthalmometry, lacrimal irrigation, radiology and the lids.

use super::*;

#[tokio::test]
async fn eom_gaze_steps_and_no_deviation_measure_with_orthophoria() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "eoms",
        &[
            (json!({ "gaze": { "primary": 4.5 } }), &["right_eye.gaze.primary"]),
            (json!({ "gaze": { "up_left": 0.25 } }), &["right_eye.gaze.up_left"]),
            (
                json!({ "gaze": { "down_right": -4.5, "left": 5 } }),
                &["right_eye.gaze.down_right", "right_eye.gaze.left"],
            ),
            (json!({ "gaze": [1] }), &["right_eye.gaze"]),
        ],
    )
    .await;
    accepts(
        &clinic,
        "eoms",
        &[(json!({ "gaze": { "down_left": -4, "up": 0.5 } }), "gaze", r#"{"up":0.5,"down_left":-4.0}"#)],
    )
    .await;
    let r = post(
        &clinic,
        "eoms",
        body("eoms", clinic.visit, json!({ "deviation": "orthophoria", "deviation_pd": 5 })),
    )
    .await;
    assert_invalid(&r, &["deviation_pd"]);
    let r = post(
        &clinic,
        "eoms",
        body("eoms", clinic.visit, json!({ "deviation": "orthophoria", "deviation_pd": 0 })),
    )
    .await;
    assert_invalid(&r, &["deviation_pd"]);
    let r = post(&clinic, "eoms", body("eoms", clinic.visit, json!({ "deviation_pd": 101 }))).await;
    assert_invalid(&r, &["deviation_pd"]);
    let r = post(&clinic, "eoms", body("eoms", clinic.visit, json!({ "deviation": "hypertropia" }))).await;
    assert_invalid(&r, &["deviation"]);
    let ortho = create(
        &clinic,
        "eoms",
        json!({ "deviation": "orthophoria", "deviation_pd": null, "nystagmus": true }),
    )
    .await;
    assert!(ortho["deviation_pd"].is_null(), "{ortho}");
    // The rule holds on the stored record with the change over it.
    let member = format!("{}/{}", path("eoms"), id_of(&ortho));
    let r = clinic.app.put(&member, Some(clinic.branch), json!({ "deviation_pd": 10 })).await;
    assert_invalid(&r, &["deviation_pd"]);
    let r = clinic
        .app
        .put(&member, Some(clinic.branch), json!({ "deviation": "exotropia", "deviation_pd": 10 }))
        .await;
    assert_status(&r, 200);
}

#[tokio::test]
async fn exophthalmometry_asymmetry_follows_both_readings() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    refuses(
        &clinic,
        "exophthalmometries",
        &[
            (json!({ "reading_mm": 16.3 }), &["right_eye.reading_mm"]),
            (json!({ "reading_mm": 40.5 }), &["right_eye.reading_mm"]),
            (json!({ "instrument_note": "x" }), &["right_eye.reading_mm"]),
        ],
    )
    .await;
    for base in [json!(79), json!(131), json!(null)] {
        let r = post(
            &clinic,
            "exophthalmometries",
            body("exophthalmometries", clinic.visit, json!({ "base_mm": base })),
        )
        .await;
        assert_invalid(&r, &["base_mm"]);
    }
    let both = create(
        &clinic,
        "exophthalmometries",
        json!({ "right_eye": { "reading_mm": 18.5 }, "left_eye": { "reading_mm": 21 } }),
    )
    .await;
    assert_eq!(both["asymmetry_mm"].as_f64(), Some(2.5), "{both}");
    let one = with_right_eye(&clinic, "exophthalmometries", json!({ "reading_mm": 18 }), json!({})).await;
    assert_status(&one, 201);
    assert!(one.body["data"]["asymmetry_mm"].is_null(), "null with one eye: {}", one.body);
    let member = format!("{}/{}", path("exophthalmometries"), id_of(&both));
    let r =
        app.put(&member, Some(branch), json!({ "left_eye": { "reading_mm": 14 }, "asymmetry_mm": 99 })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["asymmetry_mm"].as_f64(), Some(4.5), "never taken from input: {}", r.body);
    let r = app.put(&member, Some(branch), json!({ "left_eye": { "unable_to_assess": true } })).await;
    assert_status(&r, 200);
    assert!(r.body["data"]["asymmetry_mm"].is_null(), "{}", r.body);
}

#[tokio::test]
async fn lacrimal_irrigation_states_and_times() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "lacrimal-irrigations",
        &[
            (json!({ "upper_punctum": "open" }), &["right_eye.upper_punctum"]),
            (json!({ "lower_punctum": "free" }), &["right_eye.lower_punctum"]),
            (json!({ "passage": "blocked" }), &["right_eye.passage"]),
            (json!({ "regurgitation": "both" }), &["right_eye.regurgitation"]),
            (json!({ "schirmer_mm": 36 }), &["right_eye.schirmer_mm"]),
            (json!({ "tbut_s": 61 }), &["right_eye.tbut_s"]),
        ],
    )
    .await;
    accepts(
        &clinic,
        "lacrimal-irrigations",
        &[
            (
                json!({ "lower_punctum": "stenosed", "regurgitation": "opposite_punctum" }),
                "regurgitation",
                "\"opposite_punctum\"",
            ),
            (json!({ "tbut_s": 0 }), "tbut_s", "0"),
        ],
    )
    .await;
}

#[tokio::test]
async fn radiology_has_studies_and_no_eyes() {
    let clinic = Clinic::open().await;
    let (app, branch) = (&clinic.app, clinic.branch);
    let study = json!({ "modality": "mri", "region": "Orbit" });
    let tomorrow = (OffsetDateTime::now_utc().date() + time::Duration::days(1)).to_string();
    for (extra, fields) in [
        (json!({ "studies": [] }), vec!["studies"]),
        (json!({ "studies": null }), vec!["studies"]),
        (json!({ "studies": vec![study.clone(); 21] }), vec!["studies"]),
        (json!({ "studies": [{ "region": "Orbit" }] }), vec!["studies.0.modality"]),
        (json!({ "studies": [study, { "modality": "pet", "region": "Orbit" }] }), vec!["studies.1.modality"]),
        (json!({ "studies": [{ "modality": "ct", "region": " " }] }), vec!["studies.0.region"]),
        (
            json!({ "studies": [{ "modality": "ct", "region": "Orbit", "laterality": "middle" }] }),
            vec!["studies.0.laterality"],
        ),
        (
            json!({ "studies": [{ "modality": "ct", "region": "Orbit", "performed_on": tomorrow }] }),
            vec!["studies.0.performed_on"],
        ),
        (json!({ "right_eye": { "findings": "x" } }), vec!["right_eye"]),
        (json!({ "left_eye": { "unable_to_assess": true } }), vec!["left_eye"]),
        (json!({ "right_eye": {}, "left_eye": {} }), vec!["right_eye", "left_eye"]),
    ] {
        let r = post(&clinic, "radiologies", body("radiologies", clinic.visit, extra.clone())).await;
        assert_status(&r, 422);
        assert_invalid(&r, &fields);
    }
    let mut missing = body("radiologies", clinic.visit, json!({}));
    missing.as_object_mut().unwrap().remove("studies");
    assert_invalid(&post(&clinic, "radiologies", missing).await, &["studies"]);
    let created = create(&clinic, "radiologies", json!({ "right_eye": null, "left_eye": null })).await;
    let member = format!("{}/{}", path("radiologies"), id_of(&created));
    let r = app.put(&member, Some(branch), json!({ "right_eye": { "findings": "x" } })).await;
    assert_invalid(&r, &["right_eye"]);
    let twenty =
        vec![json!({ "modality": "oct", "region": "Macula", "impression": "Normal\nfoveal contour" }); 20];
    let r = app.put(&member, Some(branch), json!({ "studies": twenty })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["studies"].as_array().unwrap().len(), 20);
}

#[tokio::test]
async fn gross_examination_lid_measurements() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "gross-examinations",
        &[
            (json!({ "mrd1_mm": 8.5 }), &["right_eye.mrd1_mm"]),
            (json!({ "mrd1_mm": -5.5 }), &["right_eye.mrd1_mm"]),
            (json!({ "mrd1_mm": 2.25 }), &["right_eye.mrd1_mm"]),
            (json!({ "levator_function_mm": 26 }), &["right_eye.levator_function_mm"]),
            (json!({ "fissure_height_mm": 15.5 }), &["right_eye.fissure_height_mm"]),
            (json!({ "adnexa": "x".repeat(501) }), &["right_eye.adnexa"]),
            (json!({ "brow": "Line one\nline two" }), &["right_eye.brow"]),
        ],
    )
    .await;
    accepts(
        &clinic,
        "gross-examinations",
        &[
            (json!({ "mrd1_mm": -5 }), "mrd1_mm", "-5.0"),
            (json!({ "fissure_height_mm": "9.5" }), "fissure_height_mm", "9.5"),
        ],
    )
    .await;
}
