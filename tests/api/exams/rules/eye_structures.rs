//! Tonometry, slit lamp, funduscopy, gonioscopy, corneal topography and indirect
//! ophthalmoscopy.

use super::*;

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
