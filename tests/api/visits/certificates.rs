//! Medical certificates: numbering per branch (also under concurrency), dates, rest days.

use super::*;

#[tokio::test]
async fn certificate_number_sent_as_null_or_empty_is_generated_on_create_and_422_on_update() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    for blank in [json!(null), json!(""), json!("   ")] {
        let r = app
            .post(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "certificate_number": blank }))
            .await;
        assert_status(&r, 201);
        let number = r.body["data"]["certificate_number"].as_str().unwrap_or_default();
        assert!(number.starts_with("MC-MAIN-"), "{blank}: {}", r.body);
    }
    let c = app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v })).await;
    let r = app
        .put(&format!("{CERTIFICATES}/{}", id_of(&c)), Some(main), json!({ "certificate_number": null }))
        .await;
    assert_invalid(&r, &["certificate_number"]);
}

#[tokio::test]
async fn certificate_issued_on_defaults_to_today_even_when_sent_as_null() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let c = app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v })).await;
    assert_eq!(c["issued_on"], today().to_string(), "{c}");
    let r = app.post(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "issued_on": null })).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["issued_on"], today().to_string(), "{}", r.body);
}

#[tokio::test]
async fn certificate_crud_round_trip() {
    let Clinic { app, branch: main, patient: p, visit: v } = Clinic::open().await;
    let sent = json!({
        "patient_visit_id": v,
        "issued_on": "2026-03-10",
        "diagnosis": "Acute conjunctivitis, both eyes",
        "recommendation": "Rest; avoid contact lenses.",
        "rest_days": 3,
        "valid_until": "2026-03-13",
    });
    let r = app.post(CERTIFICATES, Some(main), sent.clone()).await;
    assert_status(&r, 201);
    let data = &r.body["data"];
    for (field, value) in sent.as_object().unwrap() {
        assert_eq!(&data[field], value, "{field} echoed: {data}");
    }
    assert_eq!(data["patient_id"], p);
    assert_eq!(data["certificate_number"], "MC-MAIN-000001");
    let path = format!("{CERTIFICATES}/{}", id_of(data));
    let r = app.get(&path, Some(main)).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["certificate_number"], "MC-MAIN-000001");
    assert_eq!(r.body["data"]["rest_days"], 3);
    let r = app.put(&path, Some(main), json!({ "rest_days": 5, "valid_until": "2026-03-15" })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["rest_days"], 5);
    assert_eq!(r.body["data"]["valid_until"], "2026-03-15");
    assert_eq!(r.body["data"]["certificate_number"], "MC-MAIN-000001", "the number stays");
    assert_status(&app.delete(&path, Some(main)).await, 200);
    assert_status(&app.get(&path, Some(main)).await, 404);
}

#[tokio::test]
async fn certificate_numbers_are_generated_per_branch() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let north = app.create_branch("NORTH").await;
    let np = patient(&app, north, "Ben", "Reyes").await;
    let nv = visit(&app, north, np).await;
    let number = |record: Value| record["certificate_number"].as_str().unwrap().to_owned();
    assert_eq!(
        number(app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v })).await),
        "MC-MAIN-000001"
    );
    assert_eq!(
        number(app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v })).await),
        "MC-MAIN-000002"
    );
    assert_eq!(
        number(app.created(CERTIFICATES, Some(north), json!({ "patient_visit_id": nv })).await),
        "MC-NORTH-000001"
    );
    assert_eq!(
        number(app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v })).await),
        "MC-MAIN-000003"
    );
    assert_eq!(
        number(app.created(CERTIFICATES, Some(north), json!({ "patient_visit_id": nv })).await),
        "MC-NORTH-000002"
    );
    // An explicit number is kept as given.
    let record = app
        .created(
            CERTIFICATES,
            Some(main),
            json!({ "patient_visit_id": v, "certificate_number": "MC-2026-A7" }),
        )
        .await;
    assert_eq!(number(record), "MC-2026-A7");
}

#[tokio::test]
async fn a_duplicate_certificate_number_is_422_on_certificate_number() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "certificate_number": "CERT-1" }))
        .await;
    let generated = app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v })).await;
    let before = app.audit_count(Some(main), None).await;
    for taken in ["CERT-1", "  CERT-1 "] {
        let r = app
            .post(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "certificate_number": taken }))
            .await;
        assert_invalid(&r, &["certificate_number"]);
    }
    let r = app
        .post(
            CERTIFICATES,
            Some(main),
            json!({ "patient_visit_id": v, "certificate_number": "MC-MAIN-000001" }),
        )
        .await;
    assert_invalid(&r, &["certificate_number"]);
    // Renaming one to a taken number too.
    let path = format!("{CERTIFICATES}/{}", id_of(&generated));
    let r = app.put(&path, Some(main), json!({ "certificate_number": "CERT-1" })).await;
    assert_invalid(&r, &["certificate_number"]);
    assert_eq!(app.get(&path, Some(main)).await.body["data"]["certificate_number"], "MC-MAIN-000001");
    assert_eq!(app.get(CERTIFICATES, Some(main)).await.body["meta"]["total"], 2);
    assert_eq!(app.audit_count(Some(main), None).await, before, "refused writes leave no audit row");
    // Another branch has its own numbers.
    let north = app.create_branch("NORTH").await;
    let nv = visit(&app, north, patient(&app, north, "Ben", "Reyes").await).await;
    app.created(CERTIFICATES, Some(north), json!({ "patient_visit_id": nv, "certificate_number": "CERT-1" }))
        .await;
}

#[tokio::test]
async fn a_generated_certificate_number_skips_numbers_already_taken() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    // A clinic typing the next number by hand must not break the generator.
    app.created(
        CERTIFICATES,
        Some(main),
        json!({ "patient_visit_id": v, "certificate_number": "MC-MAIN-000001" }),
    )
    .await;
    let r = app.post(CERTIFICATES, Some(main), json!({ "patient_visit_id": v })).await;
    assert_status(&r, 201);
    let number = r.body["data"]["certificate_number"].as_str().unwrap_or_default().to_owned();
    assert_ne!(number, "MC-MAIN-000001");
    let digits = number.strip_prefix("MC-MAIN-").unwrap_or_else(|| panic!("number {number}"));
    assert!(digits.len() == 6 && digits.bytes().all(|b| b.is_ascii_digit()), "number {number}");
}

#[tokio::test]
async fn certificate_rest_days_are_0_to_365_and_dates_checked() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    for bad in [json!(-1), json!(366), json!("three"), json!(2.5)] {
        let r = app.post(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "rest_days": bad })).await;
        assert_invalid(&r, &["rest_days"]);
    }
    for ok in [0, 365] {
        let c =
            app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "rest_days": ok })).await;
        assert_eq!(c["rest_days"], ok);
    }
    let r = app.post(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "issued_on": "2026-02-29", "valid_until": "soon", "certificate_number": 5 }))
    .await;
    assert_invalid(&r, &["issued_on", "valid_until", "certificate_number"]);
}

#[tokio::test]
async fn certificate_doctor_id_is_422_while_no_doctor_exists() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let r = app.post(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "doctor_id": 1 })).await;
    assert_invalid(&r, &["doctor_id"]);
    assert_eq!(app.get(CERTIFICATES, Some(main)).await.body["meta"]["total"], 0);
}

#[tokio::test]
async fn certificates_list_by_issued_on_between_start_and_end_date() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let mut by_day = std::collections::BTreeMap::new();
    for day in ["2026-01-10", "2026-01-15", "2026-01-20"] {
        let c =
            app.created(CERTIFICATES, Some(main), json!({ "patient_visit_id": v, "issued_on": day })).await;
        by_day.insert(day, id_of(&c));
    }
    let expect = |days: &[&str]| days.iter().map(|d| by_day[d]).collect::<BTreeSet<i64>>();
    let cases: [(&str, &[&str]); 6] = [
        ("start_date=2026-01-15", &["2026-01-15", "2026-01-20"]),
        ("end_date=2026-01-15", &["2026-01-10", "2026-01-15"]),
        ("start_date=2026-01-15&end_date=2026-01-15", &["2026-01-15"]),
        ("start_date=2026-01-11&end_date=2026-01-19", &["2026-01-15"]),
        ("start_date=2026-01-21", &[]),
        ("start_date=2026-01-01&end_date=2026-01-31", &["2026-01-10", "2026-01-15", "2026-01-20"]),
    ];
    for (query, days) in cases {
        let r = app.get(&format!("{CERTIFICATES}?{query}"), Some(main)).await;
        assert_status(&r, 200);
        assert_eq!(id_set(&r.body), expect(days), "{query}");
        assert_eq!(r.body["meta"]["total"], days.len(), "{query}");
    }
    // Newest first by default.
    let r = app.get(CERTIFICATES, Some(main)).await;
    assert_eq!(ids(&r.body), vec![by_day["2026-01-20"], by_day["2026-01-15"], by_day["2026-01-10"]]);
}

#[tokio::test]
async fn certificate_date_range_with_a_bad_date_or_end_before_start_is_422() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for bad in ["2026-13-01", "yesterday", "15/01/2026", "2026-02-30"] {
        let r = app.get(&format!("{CERTIFICATES}?start_date={bad}"), Some(main)).await;
        assert_invalid(&r, &["start_date"]);
        let r = app.get(&format!("{CERTIFICATES}?end_date={bad}"), Some(main)).await;
        assert_invalid(&r, &["end_date"]);
    }
    let r = app.get(&format!("{CERTIFICATES}?start_date=2026-02-01&end_date=2026-01-31"), Some(main)).await;
    assert_invalid(&r, &["end_date"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_certificates_get_distinct_consecutive_numbers() {
    let Clinic { app, branch: main, visit: v, .. } = Clinic::open().await;
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            tokio::spawn(reply(
                app.request(Method::POST, CERTIFICATES, Some(main)).json(&json!({ "patient_visit_id": v })),
            ))
        })
        .collect();
    let mut numbers = BTreeSet::new();
    for task in tasks {
        let r = task.await.unwrap();
        assert_status(&r, 201);
        numbers.insert(r.body["data"]["certificate_number"].as_str().unwrap().to_owned());
    }
    let expected: BTreeSet<String> = (1..=20).map(|n| format!("MC-MAIN-{n:06}")).collect();
    assert_eq!(numbers, expected);
}
