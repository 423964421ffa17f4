//! Each examination type's own rules: ranges, steps and rules between fields, with dotted
//! error paths.

use super::*;

/// `(eye sent as the right eye, the fields a 422 names)` for one examination.
async fn refuses(clinic: &Clinic, exam: &str, cases: &[(Value, &[&str])]) {
    for (eye, fields) in cases {
        let r = with_right_eye(clinic, exam, eye.clone(), json!({})).await;
        assert_eq!(r.status, 422, "{exam} {eye}: {}", r.text);
        assert_invalid(&r, fields);
    }
}

/// Each eye is created and its `field` answered as the JSON text `expected` (numbers
/// compare with their scale: `-2.50` is not `-2.5`).
async fn accepts(clinic: &Clinic, exam: &str, cases: &[(Value, &str, &str)]) {
    for (eye, field, expected) in cases {
        let r = with_right_eye(clinic, exam, eye.clone(), json!({})).await;
        assert_eq!(r.status, 201, "{exam} {eye}: {}", r.text);
        let got = &r.body["data"]["right_eye"][*field];
        assert_eq!(got, &parsed(expected), "{exam} {eye}: {field} answered {got}");
    }
}

#[tokio::test]
async fn refraction_values_are_exact_decimals_on_their_steps() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "refractions",
        &[
            (json!({ "sphere": 1.13 }), &["right_eye.sphere"]),
            (json!({ "sphere": "30.25" }), &["right_eye.sphere"]),
            (json!({ "sphere": "-2,25" }), &["right_eye.sphere"]),
            (json!({ "sphere": "1e1" }), &["right_eye.sphere"]),
            (json!({ "sphere": true }), &["right_eye.sphere"]),
            (json!({ "sphere": 0, "cylinder": -10.25, "axis": 10 }), &["right_eye.cylinder"]),
            (json!({ "sphere": 0, "add": 0 }), &["right_eye.add"]),
            (json!({ "sphere": 0, "add": 4.25 }), &["right_eye.add"]),
            (json!({ "sphere": 0, "prism_pd": 0.75, "prism_base": "in" }), &["right_eye.prism_pd"]),
            (json!({ "sphere": 0, "prism_pd": 1, "prism_base": "sideways" }), &["right_eye.prism_base"]),
            (json!({ "sphere": 0, "va": "x".repeat(21) }), &["right_eye.va"]),
        ],
    )
    .await;
    accepts(
        &clinic,
        "refractions",
        &[
            (json!({ "sphere": "-2.25" }), "sphere", "-2.25"),
            (json!({ "sphere": -2.5 }), "sphere", "-2.50"),
            (json!({ "sphere": "-30" }), "sphere", "-30.00"),
            (json!({ "sphere": 30 }), "sphere", "30.00"),
            (json!({ "sphere": "-0" }), "sphere", "0.00"),
            (json!({ "sphere": 0, "add": 2 }), "add", "2.00"),
            (json!({ "sphere": 0, "prism_pd": 1, "prism_base": "IN" }), "prism_pd", "1.0"),
            (json!({ "sphere": 0, "prism_pd": 1, "prism_base": "IN" }), "prism_base", "\"in\""),
            (json!({ "sphere": 0, "cylinder": "-0.75", "axis": "180" }), "axis", "180"),
        ],
    )
    .await;
    let r = with_right_eye(&clinic, "refractions", json!({ "sphere": "-2.25" }), json!({})).await;
    let sphere = &r.body["data"]["right_eye"]["sphere"];
    assert_eq!(sphere.as_f64(), Some(-2.25), "a string in, a number out");
    assert!(r.text.contains("\"sphere\":-2.25"), "{}", r.text);
    let r = with_right_eye(&clinic, "refractions", json!({ "sphere": -2.5 }), json!({})).await;
    assert!(r.text.contains("\"sphere\":-2.50"), "the step's scale is kept: {}", r.text);
}

#[tokio::test]
async fn refraction_axis_goes_with_a_cylinder_and_prism_base_with_a_prism() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "refractions",
        &[
            (json!({ "sphere": -1, "cylinder": -1.5 }), &["right_eye.axis"]),
            (json!({ "sphere": -1, "cylinder": 0, "axis": 90 }), &["right_eye.axis"]),
            (json!({ "sphere": -1, "cylinder": "0.00", "axis": 90 }), &["right_eye.axis"]),
            (json!({ "sphere": -1, "axis": 90 }), &["right_eye.axis"]),
            (json!({ "sphere": -1, "cylinder": -1, "axis": 0 }), &["right_eye.axis"]),
            (json!({ "sphere": -1, "cylinder": -1, "axis": 181 }), &["right_eye.axis"]),
            (json!({ "sphere": -1, "prism_pd": 2 }), &["right_eye.prism_base"]),
            (json!({ "sphere": -1, "prism_base": "up" }), &["right_eye.prism_base"]),
            (
                json!({ "sphere": -1, "cylinder": 1, "prism_pd": 2 }),
                &["right_eye.axis", "right_eye.prism_base"],
            ),
        ],
    )
    .await;
    // The left eye's errors are the left eye's.
    let mut b = body("refractions", clinic.visit, json!({}));
    b["left_eye"] = json!({ "sphere": 1, "cylinder": 2 });
    assert_invalid(&post(&clinic, "refractions", b).await, &["left_eye.axis"]);
    accepts(&clinic, "refractions", &[(json!({ "sphere": -1, "cylinder": 0 }), "cylinder", "0.00")]).await;
}

#[tokio::test]
async fn tonometry_readings_are_checked_one_by_one() {
    let clinic = Clinic::open().await;
    let mut b = body("tonometries", clinic.visit, json!({}));
    b["left_eye"] = json!({ "readings": [
        { "iop_mmhg": 14, "method": "goldmann" },
        { "iop_mmhg": 15, "method": "palpation" },
    ] });
    assert_invalid(&post(&clinic, "tonometries", b).await, &["left_eye.readings.1.method"]);
    let reading = |iop: Value| json!({ "iop_mmhg": iop, "method": "icare" });
    let eleven: Vec<Value> = (0..11).map(|_| reading(json!(12))).collect();
    refuses(
        &clinic,
        "tonometries",
        &[
            (json!({ "readings": [] }), &["right_eye.readings"]),
            (json!({ "readings": eleven }), &["right_eye.readings"]),
            (json!({ "readings": "15" }), &["right_eye.readings"]),
            (json!({ "cct_um": 540 }), &["right_eye.readings"]),
            (json!({ "readings": [reading(json!(80.1))] }), &["right_eye.readings.0.iop_mmhg"]),
            (json!({ "readings": [reading(json!(15.05))] }), &["right_eye.readings.0.iop_mmhg"]),
            (json!({ "readings": [reading(json!(-1))] }), &["right_eye.readings.0.iop_mmhg"]),
            (json!({ "readings": [{ "method": "icare" }] }), &["right_eye.readings.0.iop_mmhg"]),
            (json!({ "readings": [null] }), &["right_eye.readings.0"]),
            (
                json!({ "readings": [{ "iop_mmhg": 12, "method": "icare", "measured_at": "9:30" }] }),
                &["right_eye.readings.0.measured_at"],
            ),
            (
                json!({ "readings": [{ "iop_mmhg": 12, "method": "icare", "measured_at": "24:00" }] }),
                &["right_eye.readings.0.measured_at"],
            ),
            (json!({ "readings": [reading(json!(12))], "cct_um": 299 }), &["right_eye.cct_um"]),
            (json!({ "readings": [reading(json!(12))], "cct_um": 801 }), &["right_eye.cct_um"]),
        ],
    )
    .await;
    let r = with_right_eye(
        &clinic,
        "tonometries",
        json!({ "readings": [{ "iop_mmhg": "21", "method": "NON_CONTACT", "measured_at": "08:05", "extra": 1 }] }),
        json!({}),
    )
    .await;
    assert_status(&r, 201);
    assert_eq!(
        r.body["data"]["right_eye"]["readings"],
        parsed(r#"[{"iop_mmhg":21.0,"method":"non_contact","measured_at":"08:05"}]"#)
    );
}

#[tokio::test]
async fn slit_lamp_structures_describe_what_is_abnormal() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "slit-lamps",
        &[
            (json!({ "cornea": { "status": "abnormal" } }), &["right_eye.cornea.findings"]),
            (json!({ "cornea": { "status": "abnormal", "findings": " " } }), &["right_eye.cornea.findings"]),
            (json!({ "cornea": { "findings": "Clear" } }), &["right_eye.cornea.status"]),
            (json!({ "cornea": { "status": "cloudy" } }), &["right_eye.cornea.status"]),
            (json!({ "cornea": "normal" }), &["right_eye.cornea"]),
            (
                json!({ "lens": { "status": "normal", "findings": "x".repeat(1001) } }),
                &["right_eye.lens.findings"],
            ),
            (json!({ "ac_cells": 0.25 }), &["right_eye.ac_cells"]),
            (json!({ "ac_cells": 4.5 }), &["right_eye.ac_cells"]),
            (json!({ "ac_flare": 5 }), &["right_eye.ac_flare"]),
            (json!({ "ac_flare": 1.5 }), &["right_eye.ac_flare"]),
            (json!({ "nuclear_cataract": "white" }), &["right_eye.nuclear_cataract"]),
            (json!({ "cortical_cataract": "brunescent" }), &["right_eye.cortical_cataract"]),
            (json!({ "pupil_mm": 0.5 }), &["right_eye.pupil_mm"]),
            (json!({ "pupil_mm": 3.2 }), &["right_eye.pupil_mm"]),
        ],
    )
    .await;
    accepts(
        &clinic,
        "slit-lamps",
        &[
            (
                json!({ "iris": { "status": "abnormal", "findings": "Rubeosis" } }),
                "iris",
                r#"{"findings":"Rubeosis","status":"abnormal"}"#,
            ),
            (
                json!({ "anterior_vitreous": { "status": "not_examined" } }),
                "anterior_vitreous",
                r#"{"status":"not_examined"}"#,
            ),
            (json!({ "ac_cells": 0.5, "ac_flare": 0 }), "ac_cells", "0.5"),
            (json!({ "pupil_mm": 10 }), "pupil_mm", "10.0"),
            (json!({ "cortical_cataract": "white" }), "cortical_cataract", "\"white\""),
        ],
    )
    .await;
}

#[tokio::test]
async fn funduscopy_cup_to_disc_ratio_is_in_steps_of_five_hundredths() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "funduscopies",
        &[
            (json!({ "cd_ratio": 0.33 }), &["right_eye.cd_ratio"]),
            (json!({ "cd_ratio": 1.05 }), &["right_eye.cd_ratio"]),
            (json!({ "cd_ratio": -0.05 }), &["right_eye.cd_ratio"]),
            (json!({ "macula": "x".repeat(1001) }), &["right_eye.macula"]),
            (json!({ "vessels": 3 }), &["right_eye.vessels"]),
        ],
    )
    .await;
    accepts(
        &clinic,
        "funduscopies",
        &[
            (json!({ "cd_ratio": "0.85" }), "cd_ratio", "0.85"),
            (json!({ "cd_ratio": 1 }), "cd_ratio", "1.00"),
        ],
    )
    .await;
    let mut undilated = body("funduscopies", clinic.visit, json!({}));
    undilated.as_object_mut().unwrap().remove("dilated");
    let r = post(&clinic, "funduscopies", undilated).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["dilated"], false, "dilated defaults to false");
    let r =
        post(&clinic, "funduscopies", body("funduscopies", clinic.visit, json!({ "dilated": "yes" }))).await;
    assert_invalid(&r, &["dilated"]);
}

#[tokio::test]
async fn gonioscopy_grades_and_distinct_clock_hours() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "gonioscopies",
        &[
            (json!({ "superior": 5 }), &["right_eye.superior"]),
            (json!({ "temporal": -1 }), &["right_eye.temporal"]),
            (json!({ "iris_configuration": "steep" }), &["right_eye.iris_configuration"]),
            (json!({ "pas_clock_hours": [3, 4, 3] }), &["right_eye.pas_clock_hours.2"]),
            (json!({ "pas_clock_hours": [0] }), &["right_eye.pas_clock_hours.0"]),
            (json!({ "pas_clock_hours": [12, 13] }), &["right_eye.pas_clock_hours.1"]),
            (json!({ "pas_clock_hours": 3 }), &["right_eye.pas_clock_hours"]),
            (json!({ "pas_clock_hours": (1..=13).collect::<Vec<i64>>() }), &["right_eye.pas_clock_hours"]),
        ],
    )
    .await;
    accepts(
        &clinic,
        "gonioscopies",
        &[
            (json!({ "pas_clock_hours": [12, 1, 2] }), "pas_clock_hours", "[12,1,2]"),
            (json!({ "nasal": 0, "iris_configuration": "Plateau" }), "iris_configuration", "\"plateau\""),
        ],
    )
    .await;
}

#[tokio::test]
async fn corneal_topography_keratometry_is_ordered() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "corneal-topographies",
        &[
            (json!({ "k1": 44, "k2": 43.5 }), &["right_eye.k2"]),
            (json!({ "k1": 43, "k2": 44, "kmax": 43.99 }), &["right_eye.kmax"]),
            (json!({ "k1": 45, "k2": 44, "kmax": 43 }), &["right_eye.k2", "right_eye.kmax"]),
            (json!({ "k1": 43 }), &["right_eye.k2"]),
            (json!({ "k1": 29.99, "k2": 43 }), &["right_eye.k1"]),
            (json!({ "k1": 43, "k2": 70.01 }), &["right_eye.k2"]),
            (json!({ "k1": 43.005, "k2": 44 }), &["right_eye.k1"]),
            (json!({ "k1": 43, "k2": 44, "k1_axis": 181 }), &["right_eye.k1_axis"]),
            (
                json!({ "k1": 43, "k2": 44, "thinnest_pachymetry_um": 99 }),
                &["right_eye.thinnest_pachymetry_um"],
            ),
        ],
    )
    .await;
    accepts(
        &clinic,
        "corneal-topographies",
        &[
            (json!({ "k1": 43, "k2": 43, "kmax": 43 }), "kmax", "43.00"),
            (json!({ "k1": "42.1", "k2": 44 }), "k1", "42.10"),
            (json!({ "k1": 42, "k2": 44, "k2_axis": 0 }), "k2_axis", "0"),
        ],
    )
    .await;
    let r = post(
        &clinic,
        "corneal-topographies",
        body("corneal-topographies", clinic.visit, json!({ "device": "x".repeat(101) })),
    )
    .await;
    assert_invalid(&r, &["device"]);
}

#[tokio::test]
async fn amsler_grid_grade_is_required_from_zero_to_five() {
    let clinic = Clinic::open().await;
    refuses(
        &clinic,
        "amsler-grids",
        &[
            (json!({ "distortion": true }), &["right_eye.grade"]),
            (json!({ "grade": 6 }), &["right_eye.grade"]),
            (json!({ "grade": 2.5 }), &["right_eye.grade"]),
            (json!({ "grade": 1, "scotoma": "yes" }), &["right_eye.scotoma"]),
        ],
    )
    .await;
    accepts(&clinic, "amsler-grids", &[(json!({ "grade": 5, "scotoma": true }), "grade", "5")]).await;
}

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
        assert_eq!(r.status, 422, "{extra}: {}", r.text);
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

#[tokio::test]
async fn indirect_ophthalmoscopy_periphery_findings() {
    let clinic = Clinic::open().await;
    let finding = |hours: Value| json!({ "periphery": [{ "finding": "tear", "clock_hours": hours }] });
    refuses(
        &clinic,
        "indirect-ophthalmoscopies",
        &[
            (finding(json!([])), &["right_eye.periphery.0.clock_hours"]),
            (finding(json!(null)), &["right_eye.periphery.0.clock_hours"]),
            (json!({ "periphery": [{ "finding": "tear" }] }), &["right_eye.periphery.0.clock_hours"]),
            (finding(json!([13])), &["right_eye.periphery.0.clock_hours.0"]),
            (finding(json!([2, 2])), &["right_eye.periphery.0.clock_hours.1"]),
            (
                json!({ "periphery": [{ "finding": "drusen", "clock_hours": [1] }] }),
                &["right_eye.periphery.0.finding"],
            ),
            (
                json!({ "periphery": vec![json!({ "finding": "hole", "clock_hours": [1] }); 25] }),
                &["right_eye.periphery"],
            ),
            (json!({ "vitreous": "cloudy" }), &["right_eye.vitreous"]),
            (json!({ "scleral_depression": 1 }), &["right_eye.scleral_depression"]),
        ],
    )
    .await;
    accepts(
        &clinic,
        "indirect-ophthalmoscopies",
        &[
            (json!({ "periphery": [], "findings": "Flat retina" }), "periphery", "[]"),
            (json!({ "vitreous": "haemorrhage" }), "vitreous", "\"haemorrhage\""),
            (
                json!({ "periphery": [{ "finding": "detachment", "clock_hours": [6, 7], "notes": " Inferior " }] }),
                "periphery",
                r#"[{"notes":"Inferior","finding":"detachment","clock_hours":[6,7]}]"#,
            ),
        ],
    )
    .await;
}

#[tokio::test]
async fn visual_acuity_logmar_follows_the_notation() {
    let clinic = Clinic::open().await;
    let cases = [
        ("snellen_m", "6/12", "6/12", "0.30"),
        ("snellen_m", "6/6", "6/6", "0.00"),
        ("snellen_m", "6/60", "6/60", "1.00"),
        ("snellen_m", "cf", "CF", "1.90"),
        ("snellen_m", "Hm", "HM", "2.30"),
        ("snellen_ft", "LP", "LP", "2.70"),
        ("decimal", "nlp", "NLP", "3.00"),
        ("snellen_ft", "20/40", "20/40", "0.30"),
        ("decimal", "0.5", "0.5", "0.30"),
        ("decimal", "2.0", "2.0", "-0.30"),
        ("logmar", "0.2", "0.2", "0.20"),
        ("etdrs_letters", "85", "85", "0.00"),
        ("etdrs_letters", "0", "0", "1.70"),
        ("etdrs_letters", "35", "35", "1.00"),
    ];
    for (notation, value, stored, logmar) in cases {
        let r = with_right_eye(
            &clinic,
            "visual-acuities",
            json!({ "value": value }),
            json!({ "notation": notation }),
        )
        .await;
        assert_eq!(r.status, 201, "{notation} {value}: {}", r.text);
        let eye = &r.body["data"]["right_eye"];
        assert_eq!(eye["value"], stored, "{notation} {value}");
        assert_eq!(raw(&eye["logmar"]), logmar, "{notation} {value}: {eye}");
    }
    // Outside N-point the logMAR is computed, whatever is sent.
    let r = with_right_eye(&clinic, "visual-acuities", json!({ "value": "6/12", "logmar": 1.0 }), json!({}))
        .await;
    assert_eq!(raw(&r.body["data"]["right_eye"]["logmar"]), "0.30", "{}", r.text);
    // N-point: the value names a print size; the logMAR is given.
    let near = json!({ "notation": "n_point", "distance": "near" });
    let r = with_right_eye(&clinic, "visual-acuities", json!({ "value": "n5", "logmar": 0.1 }), near.clone())
        .await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["right_eye"]["value"], "N5");
    assert_eq!(raw(&r.body["data"]["right_eye"]["logmar"]), "0.10");
    let r = with_right_eye(&clinic, "visual-acuities", json!({ "value": "N80" }), near.clone()).await;
    assert_status(&r, 201);
    for (notation, value) in [
        ("n_point", "N4"),
        ("n_point", "N90"),
        ("n_point", "6/12"),
        ("snellen_m", "20/20"),
        ("snellen_m", "6/0"),
        ("snellen_ft", "6/12"),
        ("decimal", "3"),
        ("decimal", "0.0001"),
        ("logmar", "3.1"),
        ("logmar", "-0.4"),
        ("etdrs_letters", "101"),
        ("etdrs_letters", "8.5"),
        ("snellen_m", "6/12000"),
    ] {
        let r = with_right_eye(
            &clinic,
            "visual-acuities",
            json!({ "value": value }),
            json!({ "notation": notation }),
        )
        .await;
        assert_eq!(r.status, 422, "{notation} {value}: {}", r.text);
        assert_invalid(&r, &["right_eye.value"]);
    }
    let r = with_right_eye(&clinic, "visual-acuities", json!({ "value": "N5", "logmar": 3.05 }), near).await;
    assert_invalid(&r, &["right_eye.logmar"]);
    for (field, value) in [("distance", "far"), ("correction", "laser"), ("notation", "jaeger")] {
        let r =
            post(&clinic, "visual-acuities", body("visual-acuities", clinic.visit, json!({ field: value })))
                .await;
        assert_invalid(&r, &[field]);
    }
}
