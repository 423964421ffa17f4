//! Refraction, the Amsler grid and visual acuity notations.

use super::*;

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
        assert_status(&r, 201);
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
        assert_status(&r, 422);
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
