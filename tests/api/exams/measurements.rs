//! A patient's measurements over time: intraocular pressure, refraction, distance acuity and
//! the cup-to-disc ratio; the kinds, the patient and the dates asked for.

use super::*;

async fn measurements(clinic: &Clinic, query: &str) -> Reply {
    let route = format!("/api/v1/patients/{}/measurements?{query}", clinic.patient);
    clinic.app.get(&route, Some(clinic.branch)).await
}

/// `(record_id, eye, value)` of each point, in the order answered.
fn points(r: &Reply) -> Vec<(i64, String, f64)> {
    assert_status(r, 200);
    r.body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("no data: {}", r.text))
        .iter()
        .map(|p| {
            let value = p["value"].as_f64().unwrap_or_else(|| panic!("value is not a number: {p}"));
            (p["record_id"].as_i64().unwrap(), p["eye"].as_str().unwrap().to_owned(), value)
        })
        .collect()
}

#[tokio::test]
async fn intraocular_pressure_over_time_is_the_last_reading_of_each_tonometry() {
    let clinic = Clinic::open().await;
    let reading = |iop: f64| json!({ "iop_mmhg": iop, "method": "goldmann" });
    let recent = create(
        &clinic,
        "tonometries",
        json!({
            "examined_at": from_now(-10),
            "right_eye": { "readings": [reading(15.0), reading(18.5)] },
            "left_eye": { "unable_to_assess": true },
        }),
    )
    .await;
    let older = create(
        &clinic,
        "tonometries",
        json!({ "examined_at": from_now(-600), "right_eye": { "readings": [reading(12.0)] }, "left_eye": { "readings": [reading(13.0)] } }),
    )
    .await;
    let (recent, older) = (id_of(&recent), id_of(&older));
    assert_status(&sign(&clinic.app, clinic.branch, "tonometries", older).await, 200);
    let deleted = create(&clinic, "tonometries", json!({ "examined_at": from_now(-5) })).await;
    let member = format!("{}/{}", path("tonometries"), id_of(&deleted));
    assert_status(&clinic.app.delete(&member, Some(clinic.branch)).await, 200);

    let r = measurements(&clinic, "kind=iop&eye=right").await;
    assert_eq!(points(&r), vec![(older, "right".into(), 12.0), (recent, "right".into(), 18.5)]);
    let first = &r.body["data"][0];
    assert_eq!(first["exam"], "tonometry");
    assert_eq!(
        instant(&first["at"]),
        instant(
            &clinic.app.get(&format!("{}/{older}", path("tonometries")), Some(clinic.branch)).await.body["data"]
                ["examined_at"]
        )
    );
    assert_eq!(points(&measurements(&clinic, "kind=iop&eye=left").await), vec![(older, "left".into(), 13.0)]);
    let both = points(&measurements(&clinic, "kind=iop").await);
    assert_eq!(
        both,
        vec![(older, "left".into(), 13.0), (older, "right".into(), 12.0), (recent, "right".into(), 18.5)]
    );
    let r = measurements(&clinic, "kind=IOP&eye=both").await;
    assert_eq!(points(&r).len(), 3, "kind and eye ignore case");
}

#[tokio::test]
async fn refraction_sphere_and_cylinder_over_time() {
    let clinic = Clinic::open().await;
    let at = from_now(-60);
    let a = id_of(
        &create(
            &clinic,
            "refractions",
            json!({ "examined_at": at, "right_eye": { "sphere": -2.25 }, "left_eye": { "sphere": 1, "cylinder": -0.75, "axis": 10 } }),
        )
        .await,
    );
    let b = id_of(
        &create(
            &clinic,
            "refractions",
            json!({ "examined_at": at, "right_eye": { "sphere": -2.5, "cylinder": 0 }, "left_eye": null }),
        )
        .await,
    );
    create(
        &clinic,
        "refractions",
        json!({ "examined_at": from_now(-30), "right_eye": { "unable_to_assess": true }, "left_eye": null }),
    )
    .await;
    let right = points(&measurements(&clinic, "kind=sphere&eye=right").await);
    assert_eq!(right, vec![(a, "right".into(), -2.25), (b, "right".into(), -2.5)], "same time: by record id");
    let cylinders = points(&measurements(&clinic, "kind=cylinder&eye=right").await);
    assert_eq!(cylinders, vec![(a, "right".into(), 0.0), (b, "right".into(), 0.0)], "no cylinder is 0");
    let left = points(&measurements(&clinic, "kind=cylinder&eye=left").await);
    assert_eq!(left, vec![(a, "left".into(), -0.75)]);
    let r = measurements(&clinic, "kind=sphere&eye=left").await;
    assert_eq!(r.body["data"][0]["exam"], "refraction");
}

#[tokio::test]
async fn distance_acuity_and_cup_to_disc_ratio_over_time() {
    let clinic = Clinic::open().await;
    let far = id_of(
        &create(&clinic, "visual-acuities", json!({ "examined_at": from_now(-20), "left_eye": null })).await,
    );
    create(
        &clinic,
        "visual-acuities",
        json!({ "distance": "near", "notation": "n_point", "right_eye": { "value": "N8", "logmar": 0.4 }, "left_eye": null }),
    )
    .await;
    let cf = id_of(
        &create(
            &clinic,
            "visual-acuities",
            json!({ "examined_at": from_now(-10), "right_eye": { "value": "CF" }, "left_eye": null }),
        )
        .await,
    );
    let r = measurements(&clinic, "kind=va_logmar&eye=right").await;
    assert_eq!(points(&r), vec![(far, "right".into(), 0.3), (cf, "right".into(), 1.9)], "distance only");
    assert_eq!(r.body["data"][0]["exam"], "visual_acuity");
    let fundus = id_of(
        &create(
            &clinic,
            "funduscopies",
            json!({ "right_eye": { "cd_ratio": 0.35 }, "left_eye": { "disc": "Pale" } }),
        )
        .await,
    );
    let r = measurements(&clinic, "kind=cd_ratio").await;
    assert_eq!(points(&r), vec![(fundus, "right".into(), 0.35)], "an eye without the value gives none");
    assert_eq!(r.body["data"][0]["exam"], "funduscopy");
    assert_eq!(points(&measurements(&clinic, "kind=iop").await), vec![]);
}

#[tokio::test]
async fn measurements_need_a_known_kind_and_patient() {
    let clinic = Clinic::open().await;
    for (query, field) in [("", "kind"), ("kind=pressure", "kind"), ("kind=iop&eye=middle", "eye")] {
        assert_invalid(&measurements(&clinic, query).await, &[field]);
    }
    let r = clinic.app.get("/api/v1/patients/999999/measurements?kind=iop", Some(clinic.branch)).await;
    assert_error(&r, 404, "not_found");
    let query = "kind=iop&start_date=2026-02-02&end_date=2026-02-01";
    assert_invalid(&measurements(&clinic, query).await, &["end_date"]);
    assert_invalid(&measurements(&clinic, "kind=iop&start_date=02/01/2026").await, &["start_date"]);
}

#[tokio::test]
async fn measurements_keep_to_the_dates_asked_for() {
    let clinic = Clinic::open().await;
    let on = |at: &str| json!({ "examined_at": at, "left_eye": null });
    create(&clinic, "tonometries", on("2026-01-04T23:59:00Z")).await;
    let inside = id_of(&create(&clinic, "tonometries", on("2026-01-05T00:00:00Z")).await);
    let last = id_of(&create(&clinic, "tonometries", on("2026-01-06T23:59:00Z")).await);
    create(&clinic, "tonometries", on("2026-01-07T00:00:00Z")).await;
    let r = measurements(&clinic, "kind=iop&start_date=2026-01-05&end_date=2026-01-06").await;
    assert_eq!(points(&r), vec![(inside, "right".into(), 15.5), (last, "right".into(), 15.5)]);
    assert_eq!(points(&measurements(&clinic, "kind=iop&end_date=2026-01-05").await).len(), 2);
}
